//! How big a problem is for the solver, estimated before solving, so that a problem that would
//! take gigabytes and hours is refused with what makes it large, not started.
//!
//! The solver's work grows, per pool and scenario, with its tables of the second stage: one
//! covering table per kind over the demand levels (the peak in units of the smallest instance
//! size) and offers; the best split between on-demand and spot at every demand level without
//! firm demand, each trying the splits spot's limits allow; and for each distinct demand of a
//! timeline segment (where demand changes, where terms may start or end) a curve of least hourly
//! costs over its term levels (steps of the term sizes' common divisor), where the levels below
//! the firm demand try the splits again (at most the flex units, as firm demand is on-demand
//! only) and those above it read the table. The model then holds one value per segment and term
//! level. A pool without term offers has no model: the tables and one cost per segment. The
//! estimate adds exactly those steps; it bounds the work rather than predicting the time, on the
//! safe side (the solver stops trying splits once on-demand alone costs more than the best
//! found). Measured figures are beside [`MAX_PROBLEM_SIZE`].

use std::collections::BTreeSet;

use super::validate::PoolSegments;

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

/// The distinct `(firm, all)` GPUs asked for in the segments between consecutive `breaks` (every
/// demand change is a break).
fn segment_demands(d: &PoolSegments, breaks: &BTreeSet<u32>) -> BTreeSet<(u64, u64)> {
    let mut changes: std::collections::BTreeMap<u32, (i64, i64)> = Default::default();
    for (s, firm) in d
        .firm
        .iter()
        .map(|s| (s, true))
        .chain(d.flex.iter().map(|s| (s, false)))
    {
        let v = i64::from(s.value());
        let (f, a) = changes.entry(s.from()).or_default();
        *a += v;
        if firm {
            *f += v;
        }
        let (f, a) = changes.entry(s.to()).or_default();
        *a -= v;
        if firm {
            *f -= v;
        }
    }
    let (mut firm, mut all) = (0i64, 0i64);
    let mut changes = changes.into_iter().peekable();
    let mut seen = BTreeSet::new();
    for &start in breaks.iter().take(breaks.len().saturating_sub(1)) {
        while let Some((_, (f, a))) = changes.next_if(|(t, _)| *t <= start) {
            firm += f;
            all += a;
        }
        let firm = firm.max(0) as u64;
        seen.insert((firm, (all.max(0) as u64).max(firm)));
    }
    seen
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
            for k in 0..problem.scenarios.len() {
                let d = v.demand(k, p);
                for s in d.firm.iter().chain(&d.flex) {
                    breaks.insert(s.from());
                    breaks.insert(s.to());
                }
            }
            let mut unit = 0u64;
            let mut term_unit = 0u64;
            let mut offers = 0u64;
            let mut term_starts = 0u64;
            // GPUs the spot offers can supply in one hour (the most of any scenario).
            let mut spot = 0u64;
            for (o, offer) in problem.offers.iter().enumerate() {
                if v.pool_of(o) != p {
                    continue;
                }
                offers += 1;
                let gpus = u64::from(offer.gpus_per_instance);
                unit = gcd(unit, gpus);
                match offer.kind {
                    OfferKind::Term => {
                        term_unit = gcd(term_unit, gpus);
                        let term = offer.term_hours.unwrap_or(0);
                        term_starts += v.starts(o).len() as u64;
                        for &s in v.starts(o) {
                            breaks.insert(s);
                            breaks.insert(s.saturating_add(term).min(hours));
                        }
                    }
                    OfferKind::Spot => {
                        let most = (0..problem.scenarios.len())
                            .map(|k| v.limit(k, o).map_or(u64::MAX, u64::from))
                            .max()
                            .unwrap_or(0);
                        spot = spot.saturating_add(most.saturating_mul(gpus));
                    }
                    OfferKind::OnDemand => {}
                }
            }
            // Each scenario's distinct segment demands (every demand change is a break, so
            // their largest are the peaks of all demand and of flex demand).
            let demands: Vec<BTreeSet<(u64, u64)>> = (0..problem.scenarios.len())
                .map(|k| segment_demands(v.demand(k, p), &breaks))
                .collect();
            let peak = demands
                .iter()
                .flatten()
                .map(|&(_, all)| all)
                .max()
                .unwrap_or(0);
            let flex_peak = demands
                .iter()
                .flatten()
                .map(|&(firm, all)| all - firm)
                .max()
                .unwrap_or(0);
            let unit = unit.max(1);
            let segments = breaks.len().saturating_sub(1) as u64;
            let levels = peak / unit + 1;
            // The covering tables: one per kind over the demand levels and offers.
            let tables = scenarios.saturating_mul(levels.saturating_mul(offers.max(1)));
            let work = if term_starts > 0 {
                // The model: one least cost per segment and term level.
                let model = segments.saturating_mul(peak / term_unit.max(1) + 1);
                // Its costs: per scenario, the best on-demand/spot split for every demand level
                // without firm demand, each trying the splits spot's reach allows; then one curve
                // per distinct (firm, all) demand of a segment, whose term levels below the firm
                // demand each try the splits (at most the flex units: firm is on-demand only)
                // and whose levels above it read that table.
                let term_unit = term_unit.max(1);
                let no_firm = levels.saturating_mul(spot.min(peak) / unit + 1);
                let curves = demands
                    .iter()
                    .map(|scenario| {
                        scenario
                            .iter()
                            .map(|&(firm, all)| {
                                let splits = spot.min(all - firm) / unit + 1;
                                (firm / term_unit + 1)
                                    .saturating_mul(splits)
                                    .saturating_add((all - firm) / term_unit)
                            })
                            .fold(no_firm, u64::saturating_add)
                    })
                    .fold(0u64, u64::saturating_add);
                scenarios.saturating_mul(model).saturating_add(curves)
            } else {
                // No model: one least cost per segment, each trying the splits.
                let splits = spot.min(flex_peak) / unit + 1;
                scenarios.saturating_mul(segments.saturating_mul(splits))
            };
            let size = tables.saturating_add(work);
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::problem::{parse, validate};

    /// A quarter of `demand` GPUs changing every `every` hours, with `terms` 8-GPU term offers
    /// that may start every `step` hours and an unlimited on-demand offer.
    fn problem(terms: usize, step: u32, demand: u32, every: u32) -> Validated {
        let mut offers = vec![
            serde_json::json!({"id": "od", "pool": "h100", "kind": "on_demand",
            "gpus_per_instance": 8, "price_per_instance_hour": 90.0}),
        ];
        offers.extend((0..terms).map(|i| {
            serde_json::json!({"id": format!("cb{i}"), "pool": "h100", "kind": "term",
                "gpus_per_instance": 8, "price_per_instance_hour": 0.0,
                "upfront_per_instance": 1000.0 + i as f64, "term_hours": 24,
                "starts": {"from": 0, "to": 2184, "step": step}})
        }));
        let firm: Vec<[u32; 3]> = (0..2184 / every)
            .map(|i| [i * every, (i + 1) * every, demand + i % 2])
            .collect();
        let text = serde_json::json!({
            "schema": "gpucap.problem/v1", "start": "2027-01-04T00:00:00Z", "hours": 2184,
            "pools": ["h100"], "offers": offers,
            "scenarios": [{"name": "expected", "probability": 1.0,
                "demand": {"h100": {"firm": firm, "flex": []}}}],
        })
        .to_string();
        validate(parse(&text, Path::new("p.json")).expect("parses")).expect("valid")
    }

    #[test]
    fn the_estimate_counts_term_levels_not_gpus() {
        // 2,000 or 2,001 GPUs every hour against 8-GPU terms: 251 term levels. The covering
        // tables (two offers), the model (every segment), the splits without firm demand (one
        // each: no spot), and the two distinct demands' curves.
        let size = estimate(&problem(1, 24, 2_000, 1));
        let pool = &size.pools[0];
        assert_eq!(pool.segments, 2184);
        assert_eq!(pool.size, 251 * 2 + 2184 * 251 + 251 + 2 * 251);
        assert!(check(&problem(1, 24, 2_000, 1), None).is_ok());
    }

    #[test]
    fn hourly_demand_changes_at_a_million_gpus_are_counted_by_term_level() {
        // 125,001 term levels in each of 2,184 segments: the model's values.
        let size = estimate(&problem(1, 24, 1_000_000, 1));
        assert!(size.total > 2184 * 125_000, "{size:?}");
        assert!(
            size.total < MAX_PROBLEM_SIZE,
            "it solves in about a second: {size:?}"
        );
        let e = check(&problem(1, 24, 1_000_000, 1), Some(100_000_000)).expect_err("too large");
        assert!(e.to_string().contains("too large to solve"), "{e}");
        assert!(e.to_string().contains("`h100`"), "{e}");
    }

    #[test]
    fn hourly_starts_of_thousands_of_offers_are_refused_before_solving() {
        let e = check(&problem(500, 1, 64, 168), None).expect_err("too many starts");
        assert!(
            e.to_string().contains("1092000 term purchase starts"),
            "{e}"
        );
        assert!(e.hint.is_some());
    }
}
