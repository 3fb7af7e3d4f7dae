//! How big a problem is for the solver, estimated before solving, so that a problem that would
//! take gigabytes and hours is refused with what makes it large, not started.
//!
//! The solver's work grows, per pool, with the number of timeline segments (where demand
//! changes, where terms may start or end) and the offers, times the number of term levels it
//! tabulates the second stage on (the peak demand in units of the smallest instance size), times
//! the scenarios. A pool without term offers has no model, only one table per scenario. The
//! estimate multiplies exactly those; it bounds the table sizes rather than predicting the time
//! (measured: 56 million took 30 s and 60 MB in a debug build).

use std::collections::BTreeSet;

use super::{OfferKind, Validated};
use crate::diagnostic::{InputError, Location};
use crate::limits::{MAX_PROBLEM_SIZE, MAX_TERM_STARTS};

/// One pool's share of the estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSize {
    pub pool: String,
    /// Timeline segments (demand changes and term starts and ends).
    pub segments: u64,
    pub offers: u64,
    /// Peak GPUs at one hour, any scenario, firm and flex.
    pub peak_gpus: u64,
    /// GPUs of the unit the tables count in (a divisor of every instance size).
    pub unit: u64,
    /// Allowed term purchase starts, summed over the pool's term offers.
    pub term_starts: u64,
    pub size: u64,
}

/// The estimate of a problem, largest pool first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub total: u64,
    pub term_starts: u64,
    pub scenarios: u64,
    pub pools: Vec<PoolSize>,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Estimates the size of a validated problem.
pub fn estimate(v: &Validated) -> Size {
    let problem = v.problem();
    let hours = v.hours();
    let scenarios = problem.scenarios.len() as u64;
    let mut pools: Vec<PoolSize> = problem
        .pools
        .iter()
        .enumerate()
        .map(|(p, id)| {
            let mut breaks: BTreeSet<u32> = BTreeSet::from([0, hours]);
            let mut peak = 0u64;
            for k in 0..problem.scenarios.len() {
                let d = v.demand(k, p);
                // Segments may overlap in a problem file: sum them per hour through breakpoints.
                let mut delta: std::collections::BTreeMap<u32, i64> = Default::default();
                for s in d.firm.iter().chain(&d.flex) {
                    breaks.insert(s.from());
                    breaks.insert(s.to());
                    *delta.entry(s.from()).or_default() += i64::from(s.value());
                    *delta.entry(s.to()).or_default() -= i64::from(s.value());
                }
                let mut level = 0i64;
                for change in delta.values() {
                    level += change;
                    peak = peak.max(level.max(0) as u64);
                }
            }
            let mut unit = 0u64;
            let mut offers = 0u64;
            let mut term_starts = 0u64;
            for (o, offer) in problem.offers.iter().enumerate() {
                if v.pool_of(o) != p {
                    continue;
                }
                offers += 1;
                unit = gcd(unit, u64::from(offer.gpus_per_instance));
                if offer.kind == OfferKind::Term {
                    let term = offer.term_hours.unwrap_or(0);
                    term_starts += v.starts(o).len() as u64;
                    for &s in v.starts(o) {
                        breaks.insert(s);
                        breaks.insert(s.saturating_add(term).min(hours));
                    }
                }
            }
            let unit = unit.max(1);
            let segments = breaks.len().saturating_sub(1) as u64;
            let levels = peak / unit + 1;
            // With term offers, the second stage is tabulated per segment over the term levels;
            // without, there is no model: one table per scenario over the levels and offers.
            let size = if term_starts > 0 {
                scenarios
                    .saturating_mul(levels)
                    .saturating_mul(segments.saturating_add(offers))
            } else {
                scenarios.saturating_mul(
                    levels
                        .saturating_mul(offers.max(1))
                        .saturating_add(segments),
                )
            };
            PoolSize {
                pool: id.clone(),
                segments,
                offers,
                peak_gpus: peak,
                unit,
                term_starts,
                size,
            }
        })
        .collect();
    pools.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.pool.cmp(&b.pool)));
    Size {
        total: pools.iter().fold(0u64, |t, p| t.saturating_add(p.size)),
        term_starts: pools.iter().map(|p| p.term_starts).sum(),
        scenarios,
        pools,
    }
}

/// Refuses a problem whose estimate is above `limit` ([`MAX_PROBLEM_SIZE`] by default), saying
/// which pools make it large and how to shrink it.
pub fn check(v: &Validated, limit: Option<u64>) -> Result<Size, InputError> {
    let size = estimate(v);
    if size.term_starts > MAX_TERM_STARTS {
        let mut by_starts: Vec<&PoolSize> = size.pools.iter().collect();
        by_starts.sort_by_key(|p| std::cmp::Reverse(p.term_starts));
        let named: Vec<String> = by_starts
            .iter()
            .take(3)
            .map(|p| {
                format!(
                    "`{}`: {} starts over {} offers",
                    p.pool, p.term_starts, p.offers
                )
            })
            .collect();
        return Err(InputError::new(
            Location::default().field("offers"),
            format!(
                "the problem offers {} term purchase starts, more than the {MAX_TERM_STARTS} the solver takes ({})",
                size.term_starts,
                named.join("; ")
            ),
        )
        .with_hint(
            "narrow the pools' `regions` or `clouds`, or shorten `planning.horizon`: each term \
             offer may start at every hour of its booking window",
        ));
    }
    let limit = limit.unwrap_or(MAX_PROBLEM_SIZE);
    if size.total <= limit {
        return Ok(size);
    }
    let worst: Vec<String> = size
        .pools
        .iter()
        .take(3)
        .filter(|p| p.size > 0)
        .map(|p| {
            format!(
                "`{}`: {} ({} segments, {} offers, {} term starts, peak {} GPUs in units of {}, {} scenarios)",
                p.pool,
                p.size,
                p.segments,
                p.offers,
                p.term_starts,
                p.peak_gpus,
                p.unit,
                size.scenarios
            )
        })
        .collect();
    Err(InputError::new(
        Location::default().field("pools"),
        format!(
            "the problem is too large to solve: size {} is above the limit {limit} ({})",
            size.total,
            worst.join("; ")
        ),
    )
    .with_hint(
        "check the GPU counts and scenario `scale`s behind the peak; use fewer scenarios, a \
         shorter `planning.horizon`, or fewer regions in the largest pools",
    ))
}
