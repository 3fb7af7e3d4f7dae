//! Quota increases a plan should ask for. gpucap solves within the account's quotas first; when
//! the demand cannot be covered that way it solves again without them and asks for what that
//! plan uses (`needed`), and when it can, it solves without them too and, if that is cheaper,
//! lists the increases that would save the difference (not needed; the plan keeps within the
//! quotas). How much: the most the quota-free plan uses in any hour and scenario, less the
//! quota. By when: the first hour it is used, less the lead time gpucap assumes for a grant.
//! Pure.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use gpucap_provider::quotas::INCREASE_LEAD_HOURS;

use super::QuotaIncrease;
use crate::planner::QuotaLimit;
use crate::problem::{OfferKind, Problem, Solution};
use crate::timespec::{Horizon, rfc3339};

/// Why the quota-free plan was solved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Why {
    /// The demand cannot be covered within the quotas.
    Needed,
    /// No plan within the quotas was found before the time limit (one may exist): the plan
    /// made without them depends on these increases as much as a `Needed` one, until the
    /// quotas held are stated or more time finds a plan within them.
    NotFoundInTime,
    /// It can, and the quota-free plan costs this much less (USD, expected).
    Saves(f64),
}

impl Why {
    /// Whether the plan made without the quotas is the plan (it depends on the increases).
    pub fn needed(self) -> bool {
        matches!(self, Why::Needed | Why::NotFoundInTime)
    }
}

/// The problem without its quota limits (the other shared limits stay).
pub fn without_quotas(problem: &Problem, quotas: &[QuotaLimit]) -> Problem {
    let mut relaxed = problem.clone();
    relaxed
        .shared_limits
        .retain(|l| !quotas.iter().any(|q| q.limit == l.id));
    relaxed
}

/// The increases `relaxed` (the solution of [`without_quotas`]) needs over each quota.
pub fn increases(
    problem: &Problem,
    quotas: &[QuotaLimit],
    relaxed: &Solution,
    horizon: &Horizon,
    now: DateTime<Utc>,
    why: Why,
) -> Vec<QuotaIncrease> {
    let hours = problem.hours as usize;
    let offers: BTreeMap<&str, &crate::problem::Offer> =
        problem.offers.iter().map(|o| (o.id.as_str(), o)).collect();
    let mut out = Vec::new();
    for q in quotas {
        let Some(limit) = problem.shared_limits.iter().find(|l| l.id == q.limit) else {
            continue;
        };
        // Term instances held, the same in every scenario.
        let mut held = vec![0i64; hours + 1];
        for p in &relaxed.purchases {
            let (Some(&w), Some(o)) = (limit.offers.get(&p.offer), offers.get(p.offer.as_str()))
            else {
                continue;
            };
            if o.kind != OfferKind::Term {
                continue;
            }
            let from = (p.start_hour as usize).min(hours);
            let to = (p.start_hour + o.term_hours.unwrap_or(0)) as usize;
            add(
                &mut held,
                from,
                to.min(hours),
                i64::from(w) * i64::from(p.instances),
            );
        }
        let mut peak = 0i64;
        let mut first_over: Option<usize> = None;
        for scenario in &relaxed.scenarios {
            let mut used = held.clone();
            for u in &scenario.usage {
                let Some(&w) = limit.offers.get(&u.offer) else {
                    continue;
                };
                for s in &u.segments {
                    let from = (s.from() as usize).min(hours);
                    add(
                        &mut used,
                        from,
                        (s.to() as usize).min(hours),
                        i64::from(w) * i64::from(s.value()),
                    );
                }
            }
            let mut level = 0i64;
            for (h, change) in used.iter().take(hours).enumerate() {
                level += change;
                peak = peak.max(level);
                if level > limit.cap as i64 && first_over.is_none_or(|f| h < f) {
                    first_over = Some(h);
                }
            }
        }
        let Some(first) = first_over else {
            continue;
        };
        let requested = peak as u64;
        let first_needed = horizon.time_of(first as u32);
        let request_by = (first_needed - Duration::hours(i64::from(INCREASE_LEAD_HOURS))).max(now);
        let late = first_needed - now < Duration::hours(i64::from(INCREASE_LEAD_HOURS));
        let mut reason = match why {
            Why::Needed => format!(
                "the demand cannot be covered within the quotas; this plan uses up to {requested} {} from {}",
                q.unit.as_str(),
                rfc3339(first_needed)
            ),
            Why::NotFoundInTime => format!(
                "no plan within the quotas was found in the time limit (pools that share a binding quota are solved together, which can take long); this plan uses up to {requested} {} from {}. State the quotas you hold in [quotas] (they may well be higher than gpucap's default) or allow more time (--time-limit)",
                q.unit.as_str(),
                rfc3339(first_needed)
            ),
            Why::Saves(saving) => format!(
                "a plan with this increase (and the others listed) costs at least {} less",
                crate::render::plan_view::money(saving)
            ),
        };
        if late {
            reason.push_str(&format!(
                "; gpucap assumes grants take {} days, so this is already late",
                INCREASE_LEAD_HOURS / 24
            ));
        }
        out.push(QuotaIncrease {
            id: gpucap_provider::names::slug(&format!(
                "request-quota-increase-{}-{}-{}",
                q.quota.cloud, q.quota.region, q.quota.name
            )),
            kind: "request_quota_increase".into(),
            cloud: q.quota.cloud.to_string(),
            region: q.quota.region.clone(),
            quota: q.quota.name.clone(),
            title: q.title.clone(),
            unit: q.unit.as_str().into(),
            current: q.value,
            current_source: q.origin.as_str().into(),
            requested,
            increase: requested.saturating_sub(q.value),
            first_needed: rfc3339(first_needed),
            request_by: rfc3339(request_by),
            needed: why.needed(),
            saving: match why {
                Why::Saves(s) => Some(s),
                Why::Needed | Why::NotFoundInTime => None,
            },
            reason,
        });
    }
    out
}

/// `+v` over `[from, to)` in a difference array.
fn add(diff: &mut [i64], from: usize, to: usize, v: i64) {
    if from < to {
        diff[from] += v;
        diff[to] -= v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::QuotaOrigin;
    use crate::problem::{Purchase, ScenarioSolution, Segment, SharedLimit, Status, Usage};
    use crate::timespec::{Span, parse_timestamp};
    use gpucap_provider::quotas::{QuotaId, QuotaUnit};

    fn offer(id: &str, kind: OfferKind, term: Option<u32>) -> crate::problem::Offer {
        serde_json::from_value(serde_json::json!({
            "id": id, "pool": "p", "kind": kind, "gpus_per_instance": 8,
            "price_per_instance_hour": 1.0, "term_hours": term,
            "starts": term.map(|_| vec![0])
        }))
        .unwrap()
    }

    #[test]
    fn the_increase_is_the_peak_over_the_quota_asked_for_ahead_of_its_first_use() {
        let mut problem: Problem = serde_json::from_value(serde_json::json!({
            "schema": "gpucap.problem/v2", "start": "2027-01-04T00:00:00Z", "hours": 240,
            "pools": ["p"], "offers": [], "scenarios": [{"name": "s", "probability": 1.0}]
        }))
        .unwrap();
        problem.offers = vec![
            offer("od", OfferKind::OnDemand, None),
            offer("res", OfferKind::Term, Some(48)),
        ];
        problem.shared_limits = vec![SharedLimit {
            id: "quota:aws/us-east-1/L-417A185B".into(),
            unit: "vCPUs".into(),
            cap: 1536,
            offers: [("od".to_string(), 192), ("res".to_string(), 192)].into(),
            reason: None,
        }];
        let quotas = [QuotaLimit {
            limit: "quota:aws/us-east-1/L-417A185B".into(),
            quota: QuotaId::parse("aws/us-east-1/L-417A185B").unwrap(),
            title: "Running On-Demand P instances".into(),
            unit: QuotaUnit::Vcpus,
            value: 1536,
            origin: QuotaOrigin::Default,
            offers: [("od".to_string(), 192), ("res".to_string(), 192)].into(),
            binding: true,
        }];
        assert!(without_quotas(&problem, &quotas).shared_limits.is_empty());
        let relaxed: Solution = Solution {
            schema: "gpucap.solution/v2".into(),
            status: Status::Optimal,
            expected_cost: 0.0,
            bound: 0.0,
            term_cost: 0.0,
            purchases: vec![Purchase {
                offer: "res".into(),
                start_hour: 0,
                instances: 4,
                pieces: 1,
            }],
            scenarios: vec![ScenarioSolution {
                name: "s".into(),
                cost: 0.0,
                usage: vec![Usage {
                    offer: "od".into(),
                    // 4 held + 6 on demand from hour 24: 10 × 192 = 1,920 vCPUs.
                    segments: vec![Segment(24, 48, 6), Segment(100, 120, 2)],
                }],
                runs_on: Vec::new(),
            }],
            gangs: Vec::new(),
            message: None,
            out_of_time: false,
        };
        let horizon = Horizon::new(parse_timestamp("2027-01-04").unwrap(), Span::days(10));
        let now = parse_timestamp("2027-01-01").unwrap();
        let out = increases(&problem, &quotas, &relaxed, &horizon, now, Why::Needed);
        assert_eq!(out.len(), 1);
        let q = &out[0];
        assert_eq!((q.current, q.requested, q.increase), (1536, 1920, 384));
        assert_eq!(q.first_needed, "2027-01-05T00:00:00Z");
        // Five days' lead from Jan 5 is before now: asked for now, and said to be late.
        assert_eq!(q.request_by, "2027-01-01T00:00:00Z");
        assert!(q.needed && q.reason.contains("already late"), "{q:?}");
        assert_eq!(q.id, "request-quota-increase-aws-us-east-1-l-417a185b");
        // Within the quota: nothing to ask for.
        let mut small = relaxed.clone();
        small.scenarios[0].usage[0].segments = vec![Segment(24, 48, 4)];
        assert!(increases(&problem, &quotas, &small, &horizon, now, Why::Saves(1.0)).is_empty());
    }
}
