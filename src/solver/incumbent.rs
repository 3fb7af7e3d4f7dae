//! A first plan for pools coupled by shared limits, found without branch and bound, so that a
//! group whose limits bind always has a plan to give and branch and bound has a cost to beat.
//!
//! The joint program of a coupled group (`super::coupled`) models on-demand and spot instance
//! by instance, and branch and bound can run a long time before it finds any whole plan. This
//! one is built from the program's relaxation in two steps:
//!
//! 1. **Purchases**: each relaxed term purchase rounded up to a whole purchase its rules allow
//!    ([`PoolModel::purchases_rounded_up`]). More term capacity never uncovers an hour; it may
//!    break an offer's maximum or a limit on term instances, and then there is no such plan.
//! 2. **Hours**: with the purchases fixed, the second stage falls apart by scenario and
//!    segment. Where each pool's own least-cost mix ([`PoolModel::hourly_mix`]) keeps every
//!    shared limit, that mix is the segment's optimum; elsewhere the segment's instances of all
//!    the group's pools are chosen together by a small exact program (the pools' coverage rows
//!    and the limits, less what the purchases hold). Segments that ask the same are solved once.
//!
//! The result keeps every constraint of the joint program, so its cost is an upper bound on the
//! group's optimum; branch and bound is then run with that cost as its cutoff
//! ([`super::mip::MipLimits::cutoff`]), and when it proves no plan is cheaper, this one is
//! optimal.

use std::collections::HashMap;
use std::time::Instant;

use crate::problem::{OfferKind, Validated};

use super::mip::{self, Mip, MipLimits, MipStatus};
use super::model::{PoolModel, PoolPlan};
use super::pool::PoolData;

/// The plan made from `relaxed` (the joint program's relaxed values; model i's columns start at
/// `offsets[i]`), one per pool of the group, or `None` when rounding its purchases up breaks a
/// limit that no choice of hourly instances can repair.
pub(crate) fn rounded_plan(
    v: &Validated,
    data: &[PoolData],
    models: &[PoolModel],
    offsets: &[usize],
    relaxed: &[f64],
    deadline: Option<Instant>,
) -> Option<Vec<PoolPlan>> {
    let chosen: Vec<Vec<(usize, usize, u32)>> = models
        .iter()
        .zip(offsets)
        .map(|(m, &o)| m.purchases_rounded_up(&relaxed[o..o + m.mip.num_cols()]))
        .collect::<Option<_>>()?;
    let term: Vec<Vec<u64>> = models
        .iter()
        .zip(&chosen)
        .map(|(m, c)| m.term_units(c))
        .collect();
    let limits = Limits::new(v);
    let timeline = &data[0].timeline;
    let scenarios = data[0].scenarios();
    // counts[i][k][h][j]: instances of pool i's hourly offer h in scenario k, segment j.
    let mut counts: Vec<Vec<Vec<Vec<u32>>>> = data
        .iter()
        .map(|d| {
            (0..scenarios)
                .map(|k| vec![vec![0u32; d.timeline.segments()]; d.hourly[k].len()])
                .collect()
        })
        .collect();
    let mut solved: HashMap<Asked, Mixes> = HashMap::new();
    for j in 0..timeline.segments() {
        let hour = timeline.start(j);
        let held = limits.held(data, &chosen, hour)?;
        // `k` indexes the scenario of every pool's data, model and counts alike.
        #[allow(clippy::needless_range_loop)]
        for k in 0..scenarios {
            let asked: Vec<(u64, u64)> = data
                .iter()
                .zip(&term)
                .map(|(d, t)| {
                    let s = d.timeline.segment_at(hour);
                    let (f, all) = d.units(k, s);
                    (f.saturating_sub(t[s]), all.saturating_sub(t[s]))
                })
                .collect();
            let alone: Option<Vec<Vec<u32>>> = models
                .iter()
                .zip(&asked)
                .map(|(m, &(f, d))| m.hourly_mix(k, f, d))
                .collect();
            let mixes = match alone {
                Some(mixes) if limits.kept(data, k, &mixes, &held) => mixes,
                _ => {
                    let key = (k, asked, held.clone());
                    match solved.get(&key) {
                        Some(mixes) => mixes.clone(),
                        None => {
                            let mixes = together(data, k, &key.1, &limits, &held, deadline)?;
                            solved.insert(key, mixes.clone());
                            mixes
                        }
                    }
                }
            };
            for (i, mix) in mixes.iter().enumerate() {
                let s = data[i].timeline.segment_at(hour);
                for (h, &n) in mix.iter().enumerate() {
                    counts[i][k][h][s] = n;
                }
            }
        }
    }
    Some(
        models
            .iter()
            .zip(&chosen)
            .zip(counts)
            .map(|((m, c), counts)| m.plan_of(c, &counts))
            .collect(),
    )
}

/// What one segment asks of the group: the scenario, each pool's (firm, all) units beyond its
/// term capacity, and each limit's weight held by the purchases.
type Asked = (usize, Vec<(u64, u64)>, Vec<u64>);

/// Instances per pool and hourly offer.
type Mixes = Vec<Vec<u32>>;

/// The shared limits as the hours see them: per limit, its cap and the weight of each offer.
struct Limits {
    caps: Vec<u64>,
    weights: Vec<HashMap<usize, u64>>,
}

impl Limits {
    fn new(v: &Validated) -> Self {
        let shared = v.shared_limits();
        Limits {
            caps: shared.iter().map(|l| l.cap).collect(),
            weights: shared
                .iter()
                .map(|l| l.offers.iter().map(|&(o, w)| (o, u64::from(w))).collect())
                .collect(),
        }
    }

    /// Per limit, the weight the purchases hold in `hour`; `None` when that alone passes a cap
    /// or a term offer's maximum.
    fn held(
        &self,
        data: &[PoolData],
        chosen: &[Vec<(usize, usize, u32)>],
        hour: u32,
    ) -> Option<Vec<u64>> {
        let mut held = vec![0u64; self.caps.len()];
        for (d, chosen) in data.iter().zip(chosen) {
            let mut active = vec![0u64; d.terms.len()];
            for &(t, s, n) in chosen {
                let start = &d.terms[t].starts[s];
                if start.start <= hour && hour < start.end {
                    active[t] += u64::from(n);
                }
            }
            for (t, &n) in active.iter().enumerate() {
                let term = &d.terms[t];
                if term.max.is_some_and(|m| n > u64::from(m)) {
                    return None;
                }
                for (l, weights) in self.weights.iter().enumerate() {
                    if let Some(w) = weights.get(&term.offer) {
                        held[l] += w * n;
                    }
                }
            }
        }
        held.iter()
            .zip(&self.caps)
            .all(|(h, c)| h <= c)
            .then_some(held)
    }

    /// Whether the pools' hourly instances `mixes` in scenario k, with `held`, keep every cap.
    fn kept(&self, data: &[PoolData], k: usize, mixes: &[Vec<u32>], held: &[u64]) -> bool {
        self.weights.iter().enumerate().all(|(l, weights)| {
            let used: u64 = data
                .iter()
                .zip(mixes)
                .flat_map(|(d, mix)| d.hourly[k].iter().zip(mix))
                .filter_map(|(o, &n)| weights.get(&o.offer).map(|w| w * u64::from(n)))
                .sum();
            held[l] + used <= self.caps[l]
        })
    }
}

/// The cheapest hourly instances of all the group's pools in one segment of scenario k, where
/// pool i must add `asked[i] = (firm, all)` units beyond its term capacity, within the limits
/// less `held`: a small exact program.
fn together(
    data: &[PoolData],
    k: usize,
    asked: &[(u64, u64)],
    limits: &Limits,
    held: &[u64],
    deadline: Option<Instant>,
) -> Option<Vec<Vec<u32>>> {
    let mut mip = Mip::new();
    let mut columns: Vec<Vec<usize>> = Vec::with_capacity(data.len());
    for (d, &(firm, all)) in data.iter().zip(asked) {
        let unit = u64::from(d.unit);
        let cols: Vec<(OfferKind, usize, f64)> = d.hourly[k]
            .iter()
            .map(|o| {
                let size = u64::from(o.gpus) / unit;
                let upper = o
                    .limit
                    .map_or(f64::INFINITY, f64::from)
                    .min(all.div_ceil(size) as f64);
                (o.kind, mip.add_col(o.price, 0.0, upper, true), size as f64)
            })
            .collect();
        let cover = |kinds: &[OfferKind]| {
            cols.iter()
                .filter(|c| kinds.contains(&c.0))
                .map(|&(_, c, size)| (c, size))
                .collect::<Vec<_>>()
        };
        if firm > 0 {
            mip.add_row(firm as f64, f64::INFINITY, cover(&[OfferKind::OnDemand]));
        }
        if all > 0 {
            mip.add_row(
                all as f64,
                f64::INFINITY,
                cover(&[OfferKind::OnDemand, OfferKind::Spot]),
            );
        }
        columns.push(cols.iter().map(|c| c.1).collect());
    }
    for (l, weights) in limits.weights.iter().enumerate() {
        let entries: Vec<(usize, f64)> = data
            .iter()
            .zip(&columns)
            .flat_map(|(d, cols)| d.hourly[k].iter().zip(cols))
            .filter_map(|(o, &c)| weights.get(&o.offer).map(|&w| (c, w as f64)))
            .collect();
        if !entries.is_empty() {
            let room = limits.caps[l] - held[l];
            mip.add_row(f64::NEG_INFINITY, room as f64, entries);
        }
    }
    let result = mip::solve(
        &mip,
        MipLimits {
            time_limit: deadline.map(|d| d.saturating_duration_since(Instant::now())),
            rel_gap: 1e-9,
            log: false,
            cuts: false,
            cutoff: None,
        },
    );
    if !matches!(result.status, MipStatus::Optimal | MipStatus::Feasible) {
        return None;
    }
    Some(
        columns
            .iter()
            .map(|cols| {
                cols.iter()
                    .map(|&c| result.values[c].round().max(0.0) as u32)
                    .collect()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::problem::{parse, validate};
    use crate::solver::coupled;
    use crate::solver::mip::{self, Mip, MipLimits, MipStatus};
    use crate::solver::model::{Mode, PoolModel};
    use crate::solver::pool::{PoolData, Scope};

    #[test]
    fn the_rounded_relaxation_keeps_every_limit_and_costs_no_less_than_the_optimum() {
        // docs/problem-v2.md's example: the optimum is $60,970 (`coupled`'s own test).
        let text = include_str!("../../tests/fixtures/problems/shared-quota.json");
        let v =
            validate(parse(text, Path::new("shared-quota.json")).expect("parses")).expect("valid");
        let scopes: Vec<Scope> = (0..2).map(Scope::full).collect();
        let data: Vec<PoolData> = coupled::common_timeline(&v, &scopes);
        let models: Vec<PoolModel> = data
            .iter()
            .map(|d| PoolModel::build(d, Mode::Cost))
            .collect();
        let mut joint = Mip::new();
        let offsets: Vec<usize> = models.iter().map(|m| joint.append(&m.mip)).collect();
        coupled::add_shared_rows(&v, &data, &models, &offsets, &mut joint);
        joint.integer.fill(false);
        let relaxed = mip::solve(
            &joint,
            MipLimits {
                time_limit: None,
                rel_gap: 1e-9,
                log: false,
                cuts: false,
                cutoff: None,
            },
        );
        assert_eq!(relaxed.status, MipStatus::Optimal);
        let plans = super::rounded_plan(&v, &data, &models, &offsets, &relaxed.values, None)
            .expect("a first plan");
        assert!(coupled::keeps_limits(&v, &plans.iter().collect::<Vec<_>>()));
        let cost = crate::solver::plan::solution(&v, &plans).expected_cost;
        let constant: f64 = models.iter().map(|m| m.constant).sum();
        assert!(cost >= 60_970.0 - 1e-6, "{cost}");
        assert!(relaxed.bound + constant <= 60_970.0 + 1e-6);
        // Every pool's demand is covered in every hour of every scenario.
        let solution = crate::solver::plan::solution(&v, &plans);
        assert!(solution.scenarios.iter().all(|s| s.cost > 0.0));
    }
}
