//! Why demand cannot be covered, in terms a person can act on: which pool, which scenario,
//! which hours, how many GPUs short, and what limits it.
//!
//! Two checks: a quick one per hour (the most the offers could ever supply in that hour against
//! the demand), and, when every hour passes it but the model is still infeasible (allowed term
//! starts and limits cannot cover all hours at once), the shortage of the elastic model.

use crate::problem::Validated;
use crate::timespec;

use super::pool::PoolData;

/// GPUs missing in scenario k, segment j: for firm demand and for firm + flex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Missing {
    pub scenario: usize,
    pub segment: usize,
    pub firm: u64,
    pub total: u64,
}

/// Segments where the demand exceeds what the offers could supply even at their limits.
pub(crate) fn over_capacity(data: &PoolData) -> Vec<Missing> {
    let (term, term_unlimited) = term_capacity(data);
    shortages(data, |j| (!term_unlimited[j]).then_some(term[j]))
}

/// Per scenario and segment, what the hourly offers at their limits and `term(j)` term GPUs
/// leave uncovered (`None`: unlimited term capacity, nothing is missing).
pub(crate) fn shortages(data: &PoolData, term: impl Fn(usize) -> Option<u64>) -> Vec<Missing> {
    let mut out = Vec::new();
    for k in 0..data.scenarios() {
        for j in 0..data.timeline.segments() {
            let Some(term) = term(j) else { continue };
            let (firm, total) = data.uncovered(k, j, term);
            if firm > 0 || total > 0 {
                out.push(Missing {
                    scenario: k,
                    segment: j,
                    firm,
                    total,
                });
            }
        }
    }
    out
}

/// Per segment: the most term GPUs any allowed purchase can supply, and whether that is
/// unlimited.
fn term_capacity(data: &PoolData) -> (Vec<u64>, Vec<bool>) {
    let segments = data.timeline.segments();
    let mut gpus = vec![0u64; segments];
    let mut unlimited = vec![false; segments];
    for t in &data.terms {
        let fixed_only = t.starts.iter().all(|s| s.lower == s.upper);
        let per_segment = data.timeline.sum(t.starts.iter().map(|s| {
            // Fixed purchases supply what they are; free ones say where one may be active.
            (
                s.start,
                s.end,
                if fixed_only { u64::from(s.upper) } else { 1 },
            )
        }));
        for (j, &n) in per_segment.iter().enumerate() {
            match (fixed_only, t.max) {
                (true, _) => gpus[j] += n * u64::from(t.gpus),
                (false, _) if n == 0 => {}
                (false, Some(m)) => gpus[j] += u64::from(m) * u64::from(t.gpus),
                (false, None) => unlimited[j] = true,
            }
        }
    }
    (gpus, unlimited)
}

/// Runs of adjacent segments of one scenario with the same shortage, as `(scenario, from, to,
/// firm, total)`.
fn runs(data: &PoolData, missing: &[Missing]) -> Vec<(usize, u32, u32, u64, u64)> {
    let mut out: Vec<(usize, u32, u32, u64, u64)> = Vec::new();
    for m in missing {
        let (from, to) = (data.timeline.start(m.segment), data.timeline.end(m.segment));
        match out.last_mut() {
            Some(last)
                if last.0 == m.scenario
                    && last.2 == from
                    && (last.3, last.4) == (m.firm, m.total) =>
            {
                last.2 = to;
            }
            _ => out.push((m.scenario, from, to, m.firm, m.total)),
        }
    }
    out
}

/// How many shortages a message lists before summing up the rest.
const LISTED: usize = 3;

/// A message for the shortages of one pool. `limits_alone` says whether the per-hour limits
/// explain them (else it is the interplay of term starts and limits across hours).
pub(crate) fn message(
    v: &Validated,
    data: &PoolData,
    missing: &[Missing],
    limits_alone: bool,
) -> String {
    let problem = v.problem();
    let pool = &problem.pools[data.pool];
    let runs = runs(data, missing);
    let mut parts = Vec::new();
    for &(k, from, to, firm, total) in runs.iter().take(LISTED) {
        let scenario = &problem.scenarios[k].name;
        let (firm_need, total_need) = demand_at(data, k, from);
        let what = match (limits_alone, firm > 0) {
            (true, true) => format!(
                "firm demand is {firm_need} GPUs but at most {} can run on on-demand and term capacity: {firm} GPUs short",
                firm_need - firm
            ),
            (true, false) => format!(
                "firm + flex demand is {total_need} GPUs but at most {} can run on on-demand, spot and term capacity: {total} GPUs short",
                total_need - total
            ),
            (false, true) => {
                format!("{firm} of the {firm_need} GPUs of firm demand are left uncovered")
            }
            (false, false) => {
                format!("{total} of the {total_need} GPUs of firm + flex demand are left uncovered")
            }
        };
        parts.push(format!(
            "pool `{pool}`, scenario `{scenario}`, {}: {what}",
            hours(v, from, to)
        ));
    }
    if runs.len() > LISTED {
        parts.push(format!(
            "and {} more stretches of hours",
            runs.len() - LISTED
        ));
    }
    let advice = if limits_alone {
        format!(
            "raise `max_instances` of an offer in pool `{pool}` (or its scenario override), or add offers"
        )
    } else {
        format!(
            "each hour could be covered alone, but the allowed term starts and `max_instances` of pool `{pool}` cannot cover them all at once; allow more starts, raise the limits, or add offers"
        )
    };
    format!("demand cannot be covered: {}; {advice}", parts.join("; "))
}

fn demand_at(data: &PoolData, k: usize, hour: u32) -> (u64, u64) {
    let j = data.timeline.point(hour);
    (data.firm[k][j], data.total[k][j])
}

/// `hours 336–668 (2027-01-18T00:00:00Z to 2027-02-01T20:00:00Z)`.
/// With periods shorter than an hour: `half-hours 672–1336 (…)`.
pub(crate) fn hours(v: &Validated, from: u32, to: u32) -> String {
    let at = |h: u32| timespec::rfc3339(v.time_of(h));
    let (one, many) = match v.problem().period_minutes() {
        30 => ("half-hour", "half-hours"),
        15 => ("quarter-hour", "quarter-hours"),
        _ => ("hour", "hours"),
    };
    if to == from + 1 {
        format!("{one} {from} ({})", at(from))
    } else {
        format!("{many} {from}–{to} ({} to {})", at(from), at(to))
    }
}
