//! A first plan for pools coupled by shared limits, found without branch and bound, so that a
//! group whose limits bind always has a plan to give and branch and bound has a cost to beat.
//!
//! The joint program of a coupled group (`super::coupled`) models on-demand and spot instance
//! by instance, and branch and bound can run a long time before it finds any whole plan. A
//! first plan is built in three steps from a set of purchases: each pool's own optimum without
//! the limits ([`purchases_of`]), or the joint relaxation's purchases, each rounded up to a
//! whole purchase its rules allow ([`rounded_up`]). The pools' own optima need no joint
//! relaxation, which on a large group may take much of the time limit.
//!
//! 1. **Keep the limits on term instances.** Purchases alone may break a shared limit (a
//!    cloud's cap across purchases, such as AWS's 256 instances across capacity blocks, or a
//!    limit on one offer's term instances) or a term offer's maximum in some hour: each pool
//!    bought for its own demand, or rounding up added instances. No choice of hourly instances
//!    can repair that, so purchases are made smaller first. Hour segments are taken in order;
//!    while the purchases active in one break a limit, the purchase in that limit whose
//!    shrinking costs least per unit of the limit it frees is made smaller by the excess
//!    (rounded up to whole instances, and down to a number its pieces can make up). What
//!    shrinking costs is estimated as the hourly cost of covering the instances given up in
//!    every hour of the purchase's window (each pool's least-cost mix without the shared
//!    limits, given the term capacity left), less the term cost saved. Purchases only shrink,
//!    so a segment once repaired stays repaired, and each step removes at least one instance:
//!    this ends. The hours then cover what the purchases no longer do.
//! 2. **Hours**: with the purchases fixed, the second stage falls apart by scenario and
//!    segment. Where each pool's own least-cost mix ([`PoolModel::hourly_mix`]) keeps every
//!    shared limit, that mix is the segment's optimum; elsewhere the segment's instances of all
//!    the group's pools are chosen together by a small exact program (the pools' coverage rows
//!    and the limits, less what the purchases hold). Segments that ask the same are solved once.
//!    With v3 gangs, each gang keeps the placement its pool's own plan gave it. In every
//!    segment its nodes run on the placement's held term instances first and then on its
//!    on-demand offers, cheapest first within their limits (`super::model::gang_split`); those
//!    instances hold their share of the limits, and the rest of the work is chosen as above on
//!    what the gangs leave. There is no first plan when the gangs alone break a limit there.
//! 3. **Trim**: purchases are made one instance smaller wherever that lowers the plan's cost
//!    (term cost saved against the hourly cost added in the purchase's window), for a share of
//!    the time limit.
//!
//! The result keeps every constraint of the joint program (every hour's coverage, every limit
//! with the hourly instances, every purchase rule: shrinking keeps a purchase within its
//! bounds and pieces), so its cost is an upper bound on the group's optimum; branch and bound
//! is then run with that cost as its cutoff ([`super::mip::MipLimits::cutoff`]), and when it
//! proves no plan is cheaper, this one is optimal. There is no first plan when a limit is
//! broken by purchases that cannot shrink (fixed ones, as in the reserve-the-peak baseline), or
//! when the hourly offers cannot cover what the purchases leave within the limits.

use std::collections::HashMap;
use std::time::Instant;

use crate::problem::{OfferKind, Validated, pieces::fewest_pieces};

use super::mip::{self, Mip, MipLimits, MipStatus};
use super::model::{PoolModel, PoolPlan};
use super::pool::{PoolData, Start, TermOffer};

/// The purchases of `relaxed` (the joint program's relaxed values; model i's columns start at
/// `offsets[i]`), each rounded up to a whole purchase its rules allow, per pool as
/// `(index into data.terms, index into its starts, instances)`.
pub(crate) fn rounded_up(
    models: &[PoolModel],
    offsets: &[usize],
    relaxed: &[f64],
) -> Option<Vec<Vec<(usize, usize, u32)>>> {
    models
        .iter()
        .zip(offsets)
        .map(|(m, &o)| m.purchases_rounded_up(&relaxed[o..o + m.mip.num_cols()]))
        .collect()
}

/// The purchases of `plans` (each pool's optimum alone, without the limits) in the same form,
/// or `None` if one is not a start of the group's model.
pub(crate) fn purchases_of(
    data: &[PoolData],
    plans: &[&PoolPlan],
) -> Option<Vec<Vec<(usize, usize, u32)>>> {
    data.iter()
        .zip(plans)
        .map(|(d, plan)| {
            plan.purchases
                .iter()
                .map(|&(offer, start, n)| {
                    let t = d.terms.iter().position(|t| t.offer == offer)?;
                    let s = d.terms[t].starts.iter().position(|s| s.start == start)?;
                    Some((t, s, n))
                })
                .collect()
        })
        .collect()
}

/// The plan with purchases `chosen`, first made small enough to keep every limit on term
/// instances, and, in every segment, the cheapest hourly instances within the limits, one per
/// pool of the group (see the module doc); `None` when a limit is broken by purchases that
/// cannot shrink, or the hours cannot be covered within the limits. Until `trim_until`,
/// purchases are then made one instance smaller, one at a time, wherever that lowers the
/// plan's cost.
pub(crate) fn first_plan(
    v: &Validated,
    data: &[PoolData],
    models: &[PoolModel],
    chosen: Vec<Vec<(usize, usize, u32)>>,
    placements: &[Vec<(usize, usize)>],
    trim_until: Option<Instant>,
) -> Option<Vec<PoolPlan>> {
    let mut search = Search {
        data,
        models,
        placements,
        limits: Limits::new(v),
        solved: HashMap::new(),
    };
    let mut chosen = chosen;
    let started = Instant::now();
    let before: u64 = chosen.iter().flatten().map(|c| u64::from(c.2)).sum();
    if !search.keep_limits(&mut chosen) {
        return None;
    }
    tracing::debug!(
        instances = before,
        given_up = before - chosen.iter().flatten().map(|c| u64::from(c.2)).sum::<u64>(),
        seconds = started.elapsed().as_secs_f64(),
        "purchases made to keep the shared limits"
    );
    let mut state = search.start(chosen)?;
    search.trim(&mut state, trim_until);
    Some(state.plans(data, models, placements))
}

/// The hourly side of a first plan: each segment's instances for given purchases, with the
/// segments that need a joint choice solved once per distinct question.
struct Search<'a> {
    data: &'a [PoolData],
    models: &'a [PoolModel<'a>],
    /// Per pool, each gang's placement (as `PoolPlan::placements`), kept as given.
    placements: &'a [Vec<(usize, usize)>],
    limits: Limits,
    solved: HashMap<Asked, Mixes>,
}

/// Purchases and, per segment of the common timeline, each scenario's instances and the
/// segment's expected hourly cost.
struct State {
    chosen: Vec<Vec<(usize, usize, u32)>>,
    segments: Vec<(Vec<Mixes>, f64)>,
}

impl Search<'_> {
    fn start(&mut self, chosen: Vec<Vec<(usize, usize, u32)>>) -> Option<State> {
        let segments = (0..self.data[0].timeline.segments())
            .map(|j| self.segment(&chosen, j))
            .collect::<Option<_>>()?;
        Some(State { chosen, segments })
    }

    /// Segment j's instances (per scenario) and expected cost for the purchases `chosen`, or
    /// `None` when the limits leave no way to cover it.
    fn segment(
        &mut self,
        chosen: &[Vec<(usize, usize, u32)>],
        j: usize,
    ) -> Option<(Vec<Mixes>, f64)> {
        let data = self.data;
        let hour = data[0].timeline.start(j);
        let held = self.limits.held(data, chosen, hour).ok()?;
        // Per pool: the instances of each term offer held in this hour, and their units.
        let active: Vec<Vec<u64>> = data
            .iter()
            .zip(chosen)
            .map(|(d, chosen)| {
                let mut active = vec![0u64; d.terms.len()];
                for &(t, s, n) in chosen {
                    let start = &d.terms[t].starts[s];
                    if start.start <= hour && hour < start.end {
                        active[t] += u64::from(n);
                    }
                }
                active
            })
            .collect();
        let term: Vec<u64> = data
            .iter()
            .zip(&active)
            .map(|(d, active)| {
                d.terms
                    .iter()
                    .zip(active)
                    .map(|(t, &n)| u64::from(t.gpus / d.unit) * n)
                    .sum()
            })
            .collect();
        let len = f64::from(data[0].timeline.len(j));
        let mut per_scenario = Vec::with_capacity(data[0].scenarios());
        let mut cost = 0.0;
        for k in 0..data[0].scenarios() {
            // The gangs first, each on its placement's terms and then on its on-demand offers
            // (`super::model::gang_split`); the rest of the work on the terms they leave.
            let mut taken: Mixes = Vec::with_capacity(data.len());
            let mut asked: Vec<(u64, u64)> = Vec::with_capacity(data.len());
            for (i, d) in data.iter().enumerate() {
                let js = d.timeline.segment_at(hour);
                let placed = self.placements.get(i).map_or(&[][..], Vec::as_slice);
                if !placed.is_empty() && d.gangs_in(k, js).next().is_some() {
                    let (left, gangs) =
                        super::model::gang_split(d, k, js, placed, &active[i], term[i]);
                    let (f, all) = d.fluid_units(k, js);
                    asked.push((f.saturating_sub(left), all.saturating_sub(left)));
                    taken.push(gangs);
                } else {
                    let (f, all) = d.units(k, js);
                    asked.push((f.saturating_sub(term[i]), all.saturating_sub(term[i])));
                    taken.push(vec![0; d.hourly[k].len()]);
                }
            }
            // The gangs' instances hold their share of every limit, and of their offers' own.
            let mut held = held.clone();
            for (l, weights) in self.limits.weights.iter().enumerate() {
                held[l] += data
                    .iter()
                    .zip(&taken)
                    .flat_map(|(d, taken)| d.hourly[k].iter().zip(taken))
                    .filter_map(|(o, &n)| weights.get(&o.offer).map(|w| w * u64::from(n)))
                    .sum::<u64>();
            }
            let over_own = |mixes: &Mixes| {
                data.iter().zip(mixes).zip(&taken).any(|((d, mix), taken)| {
                    d.hourly[k]
                        .iter()
                        .zip(mix.iter().zip(taken))
                        .any(|(o, (&n, &g))| o.limit.is_some_and(|l| n.saturating_add(g) > l))
                })
            };
            if held.iter().zip(&self.limits.caps).any(|(h, c)| h > c)
                || over_own(&taken.iter().map(|t| vec![0; t.len()]).collect())
            {
                return None;
            }
            let alone: Option<Mixes> = self
                .models
                .iter()
                .zip(&asked)
                .map(|(m, &(f, d))| m.hourly_mix(k, f, d))
                .collect();
            let fluid = match alone {
                Some(mixes) if self.limits.kept(data, k, &mixes, &held) && !over_own(&mixes) => {
                    mixes
                }
                _ => {
                    let key = (k, asked, held, taken.clone());
                    match self.solved.get(&key) {
                        Some(mixes) => mixes.clone(),
                        None => {
                            let mixes = together(data, k, &key.1, &self.limits, &key.2, &key.3)?;
                            self.solved.insert(key, mixes.clone());
                            mixes
                        }
                    }
                }
            };
            let mixes: Mixes = fluid
                .into_iter()
                .zip(taken)
                .map(|(mix, gangs)| mix.into_iter().zip(gangs).map(|(n, g)| n + g).collect())
                .collect();
            let hourly: f64 = data
                .iter()
                .zip(&mixes)
                .flat_map(|(d, mix)| d.hourly[k].iter().zip(mix))
                .map(|(o, &n)| o.price * f64::from(n))
                .sum();
            cost += data[0].probability[k] * len * hourly;
            per_scenario.push(mixes);
        }
        Some((per_scenario, cost))
    }

    /// Shrinks purchases until, in every hour, the purchases alone keep every shared limit and
    /// every term offer's maximum (the module doc says how); `false` when a limit is broken by
    /// purchases that cannot be made smaller (fixed ones).
    fn keep_limits(&self, chosen: &mut [Vec<(usize, usize, u32)>]) -> bool {
        let data = self.data;
        let timeline = &data[0].timeline;
        let window = |d: &PoolData, t: usize, s: usize| {
            let start = &d.terms[t].starts[s];
            timeline.segment_at(start.start)..timeline.point(start.end)
        };
        // Each pool's term units per segment (the group shares one timeline): what the hours
        // no longer need to cover.
        let mut term: Vec<Vec<u64>> = data
            .iter()
            .zip(chosen.iter())
            .map(|(d, c)| super::model::term_units(d, c))
            .collect();
        for j in 0..timeline.segments() {
            let hour = timeline.start(j);
            while let Err(broken) = self.limits.held(data, chosen, hour) {
                // (loss per unit of the limit freed, pool, purchase, instances left)
                let mut best: Option<(f64, usize, usize, u32)> = None;
                for (i, d) in data.iter().enumerate() {
                    for (p, &(t, s, n)) in chosen[i].iter().enumerate() {
                        let start = &d.terms[t].starts[s];
                        if n == 0 || hour < start.start || start.end <= hour {
                            continue;
                        }
                        let w = broken.weight(&self.limits, i, t, d.terms[t].offer);
                        if w == 0 {
                            continue;
                        }
                        let want = u32::try_from(broken.excess().div_ceil(w)).unwrap_or(u32::MAX);
                        let Some(to) = smaller(&d.terms[t], start, n, want) else {
                            continue;
                        };
                        let loss = self.loss(i, t, s, n, to, &term[i]);
                        let per = loss / (f64::from(n - to) * w as f64);
                        if best.is_none_or(|b| per < b.0) {
                            best = Some((per, i, p, to));
                        }
                    }
                }
                let Some((_, i, p, to)) = best else {
                    return false;
                };
                let (t, s, n) = chosen[i][p];
                let d = &data[i];
                for j in window(d, t, s) {
                    term[i][j] -= u64::from(d.terms[t].gpus / d.unit) * u64::from(n - to);
                }
                chosen[i][p].2 = to;
            }
        }
        true
    }

    /// What making pool i's purchase of term offer t at start s `to` instances instead of `n`
    /// adds to the expected cost: the hourly cost of covering its units in its window (each
    /// pool's least-cost mix without the shared limits; `term` is the pool's term units per
    /// segment) less the term cost saved.
    fn loss(&self, i: usize, t: usize, s: usize, n: u32, to: u32, term: &[u64]) -> f64 {
        let d = &self.data[i];
        let model = &self.models[i];
        let timeline = &self.data[0].timeline;
        let offer = &d.terms[t];
        let start = &offer.starts[s];
        let given = u64::from(offer.gpus / d.unit) * u64::from(n - to);
        let hourly = |k: usize, f: u64, all: u64| -> f64 {
            model.hourly_mix(k, f, all).map_or(f64::INFINITY, |mix| {
                d.hourly[k]
                    .iter()
                    .zip(mix)
                    .map(|(o, n)| o.price * f64::from(n))
                    .sum()
            })
        };
        let mut added = 0.0;
        let window = timeline.segment_at(start.start)..timeline.point(start.end);
        for (j, &before) in window.clone().zip(&term[window]) {
            let hour = timeline.start(j);
            let len = f64::from(timeline.len(j));
            let after = before.saturating_sub(given);
            for k in 0..d.scenarios() {
                let (f, all) = d.units(k, d.timeline.segment_at(hour));
                if all <= after {
                    continue;
                }
                let more = hourly(k, f.saturating_sub(after), all - after)
                    - hourly(k, f.saturating_sub(before), all.saturating_sub(before));
                added += d.probability[k] * len * more;
            }
        }
        let pieces = |n: u32| {
            offer
                .pieces
                .map_or(0.0, |p| f64::from(fewest_pieces(n, p.max)) * p.cost)
        };
        added - (f64::from(n - to) * offer.cost + pieces(n) - pieces(to))
    }

    /// Makes purchases one instance smaller while that lowers the cost (term cost saved
    /// against the hourly cost added in the purchase's window), until `until`.
    fn trim(&mut self, state: &mut State, until: Option<Instant>) {
        let data = self.data;
        let timeline = &data[0].timeline;
        for (i, pool) in data.iter().enumerate() {
            for p in 0..state.chosen[i].len() {
                loop {
                    if until.is_some_and(|u| Instant::now() >= u) {
                        return;
                    }
                    let (t, s, n) = state.chosen[i][p];
                    let term = &pool.terms[t];
                    let start = &term.starts[s];
                    if n == 0 || n - 1 < start.lower {
                        break;
                    }
                    let pieces = |n: u32| match term.pieces {
                        Some(p) => {
                            let k = fewest_pieces(n, p.max);
                            (p.min.max(1) * k <= n).then_some(f64::from(k) * p.cost)
                        }
                        None => Some(0.0),
                    };
                    let (Some(before), Some(after)) = (pieces(n), pieces(n - 1)) else {
                        break;
                    };
                    let saved = term.cost + before - after;
                    state.chosen[i][p].2 = n - 1;
                    let window = timeline.segment_at(start.start)..timeline.point(start.end);
                    let trial: Option<Vec<(Vec<Mixes>, f64)>> = window
                        .clone()
                        .map(|j| self.segment(&state.chosen, j))
                        .collect();
                    let better = trial.filter(|trial| {
                        let added: f64 = trial.iter().map(|s| s.1).sum::<f64>()
                            - state.segments[window.clone()]
                                .iter()
                                .map(|s| s.1)
                                .sum::<f64>();
                        added < saved - 1e-9 * saved.abs().max(1.0)
                    });
                    match better {
                        Some(trial) => {
                            for (j, segment) in window.zip(trial) {
                                state.segments[j] = segment;
                            }
                        }
                        None => {
                            state.chosen[i][p].2 = n;
                            break;
                        }
                    }
                }
            }
        }
    }
}

impl State {
    fn plans(
        self,
        data: &[PoolData],
        models: &[PoolModel],
        placements: &[Vec<(usize, usize)>],
    ) -> Vec<PoolPlan> {
        let timeline = &data[0].timeline;
        models
            .iter()
            .zip(data)
            .zip(&self.chosen)
            .enumerate()
            .map(|(i, ((m, d), chosen))| {
                let scenarios = d.scenarios();
                let mut counts: Vec<Vec<Vec<u32>>> = (0..scenarios)
                    .map(|k| vec![vec![0u32; d.timeline.segments()]; d.hourly[k].len()])
                    .collect();
                for (j, (per_scenario, _)) in self.segments.iter().enumerate() {
                    let s = d.timeline.segment_at(timeline.start(j));
                    for (k, mixes) in per_scenario.iter().enumerate() {
                        for (h, &n) in mixes[i].iter().enumerate() {
                            counts[k][h][s] = n;
                        }
                    }
                }
                let chosen: Vec<_> = chosen.iter().copied().filter(|c| c.2 > 0).collect();
                let placed = placements.get(i).cloned().unwrap_or_default();
                m.plan_of(&chosen, &counts, placed)
            })
            .collect()
    }
}

/// The most instances, at least `want` fewer than `n`, that a purchase of `term` at `start`
/// may hold (its lower bound, and with pieces a number they can make up); `None` if it cannot
/// be made smaller.
fn smaller(term: &TermOffer, start: &Start, n: u32, want: u32) -> Option<u32> {
    let allowed = |m: u32| match term.pieces {
        Some(p) => m == 0 || p.min.max(1) * fewest_pieces(m, p.max) <= m,
        None => true,
    };
    (start.lower..=n.saturating_sub(want.max(1)))
        .rev()
        .find(|&m| allowed(m))
}

/// The first limit that purchases alone break in some hour, and by how much.
enum Broken {
    /// Shared limit l, by `excess` of its weight.
    Cap { l: usize, excess: u64 },
    /// The maximum of pool i's term offer t, by `excess` instances.
    Max { i: usize, t: usize, excess: u64 },
}

impl Broken {
    fn excess(&self) -> u64 {
        match *self {
            Broken::Cap { excess, .. } | Broken::Max { excess, .. } => excess,
        }
    }

    /// The weight in the broken limit of one instance of pool i's term offer t (offer `offer`).
    fn weight(&self, limits: &Limits, i: usize, t: usize, offer: usize) -> u64 {
        match *self {
            Broken::Cap { l, .. } => limits.weights[l].get(&offer).copied().unwrap_or(0),
            Broken::Max { i: bi, t: bt, .. } => u64::from(bi == i && bt == t),
        }
    }
}

/// What one segment asks of the group: the scenario, each pool's (firm, all) units of fluid
/// work beyond the term capacity the gangs leave, each limit's weight held by the purchases and
/// the gangs' instances, and each pool's hourly instances the gangs run on.
type Asked = (usize, Vec<(u64, u64)>, Vec<u64>, Mixes);

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

    /// Per limit, the weight the purchases hold in `hour`, or the first limit they break there
    /// by themselves (a cap, or a term offer's maximum).
    fn held(
        &self,
        data: &[PoolData],
        chosen: &[Vec<(usize, usize, u32)>],
        hour: u32,
    ) -> Result<Vec<u64>, Broken> {
        let mut held = vec![0u64; self.caps.len()];
        for (i, (d, chosen)) in data.iter().zip(chosen).enumerate() {
            let mut active = vec![0u64; d.terms.len()];
            for &(t, s, n) in chosen {
                let start = &d.terms[t].starts[s];
                if start.start <= hour && hour < start.end {
                    active[t] += u64::from(n);
                }
            }
            for (t, &n) in active.iter().enumerate() {
                let term = &d.terms[t];
                if let Some(max) = term.max.filter(|&m| n > u64::from(m)) {
                    return Err(Broken::Max {
                        i,
                        t,
                        excess: n - u64::from(max),
                    });
                }
                for (l, weights) in self.weights.iter().enumerate() {
                    if let Some(w) = weights.get(&term.offer) {
                        held[l] += w * n;
                    }
                }
            }
        }
        match held.iter().zip(&self.caps).position(|(h, c)| h > c) {
            Some(l) => Err(Broken::Cap {
                l,
                excess: held[l] - self.caps[l],
            }),
            None => Ok(held),
        }
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
/// less `held`: a small exact program, solved to the end with no time limit (it takes
/// milliseconds, and the first plan must not be lost to a spent limit: `super::coupled`).
fn together(
    data: &[PoolData],
    k: usize,
    asked: &[(u64, u64)],
    limits: &Limits,
    held: &[u64],
    taken: &[Vec<u32>],
) -> Option<Vec<Vec<u32>>> {
    let mut mip = Mip::new();
    let mut columns: Vec<Vec<usize>> = Vec::with_capacity(data.len());
    for ((d, &(firm, all)), taken) in data.iter().zip(asked).zip(taken) {
        let unit = u64::from(d.unit);
        let cols: Vec<(OfferKind, usize, f64)> = d.hourly[k]
            .iter()
            .zip(taken)
            .map(|(o, &gangs)| {
                let size = u64::from(o.gpus) / unit;
                let upper = o
                    .limit
                    .map_or(f64::INFINITY, |l| f64::from(l.saturating_sub(gangs)))
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
    let result = mip::solve(&mip, MipLimits::plain(None));
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

    use crate::problem::{Status, parse, validate};
    use crate::solver::mip::{self, Mip, MipLimits, MipStatus};
    use crate::solver::model::PoolPlan;
    use crate::solver::model::{Mode, PoolModel};
    use crate::solver::pool::{PoolData, Scope};
    use crate::solver::{Limits, PoolOutcome, SolveOptions, coupled, solve, solve_pool};

    /// Two pools, each covered most cheaply by 48-hour blocks, that share a cap of 6 block
    /// instances: east needs 6 instances in hours 0-96, west 4 in hours 24-120, so their own
    /// optima hold 10 blocks in hours 24-96.
    const CAPPED: &str = r#"{
     "schema": "gpucap.problem/v2",
     "start": "2027-01-04T00:00:00Z",
     "hours": 168,
     "pools": ["east", "west"],
     "offers": [
      {"id": "east/on-demand", "pool": "east", "kind": "on_demand", "gpus_per_instance": 8,
       "price_per_instance_hour": 50.0},
      {"id": "west/on-demand", "pool": "west", "kind": "on_demand", "gpus_per_instance": 8,
       "price_per_instance_hour": 70.0},
      {"id": "east/block", "pool": "east", "kind": "term", "gpus_per_instance": 8,
       "price_per_instance_hour": 0.0, "upfront_per_instance": 1600.0, "term_hours": 48,
       "starts": {"from": 0, "to": 168, "step": 24}},
      {"id": "west/block", "pool": "west", "kind": "term", "gpus_per_instance": 8,
       "price_per_instance_hour": 0.0, "upfront_per_instance": 1600.0, "term_hours": 48,
       "starts": {"from": 0, "to": 168, "step": 24}}
     ],
     "scenarios": [
      {"name": "expected", "probability": 1.0, "demand": {
       "east": {"firm": [[0, 96, 48]]},
       "west": {"firm": [[24, 120, 32]]}
      }}
     ],
     "shared_limits": [
      {"id": "blocks", "unit": "instances", "cap": 6,
       "offers": {"east/block": 1, "west/block": 1}, "reason": "a cap across purchases"}
     ]
    }"#;

    /// Each pool's cost model, as `coupled::solve_group` builds them.
    fn cost_models(data: &[PoolData]) -> Vec<PoolModel<'_>> {
        data.iter()
            .map(|d| PoolModel::build(d, Mode::Cost))
            .collect()
    }

    #[test]
    fn own_purchases_that_break_a_cap_across_purchases_are_shrunk_to_a_plan_within_it() {
        let v = validate(parse(CAPPED, Path::new("capped.json")).expect("parses")).expect("valid");
        let scopes: Vec<Scope> = (0..2).map(Scope::full).collect();
        let data = coupled::common_timeline(&v, &scopes);
        let models = cost_models(&data);
        let alone: Vec<PoolPlan> = scopes
            .iter()
            .map(
                |s| match solve_pool(&v, s, &SolveOptions::default(), None, Limits::Dropped) {
                    PoolOutcome::Planned { plan, .. } => plan,
                    _ => panic!("each pool alone has a plan"),
                },
            )
            .collect();
        let alone: Vec<&PoolPlan> = alone.iter().collect();
        // Each pool alone buys blocks for all its demand: 10 blocks in hours 24-96.
        assert!(!coupled::keeps_limits(&v, &alone));
        let chosen = super::purchases_of(&data, &alone).expect("starts of the model");
        assert_eq!(
            chosen.iter().flatten().map(|c| c.2).sum::<u32>(),
            20,
            "{chosen:?}"
        );
        let plans = super::first_plan(&v, &data, &models, chosen, &[], None).expect("a first plan");
        let plans: Vec<&PoolPlan> = plans.iter().collect();
        assert!(coupled::keeps_limits(&v, &plans));
        // Every hour's demand is covered, by blocks held and on-demand instances in use.
        let problem = v.problem();
        for (p, plan) in plans.iter().enumerate() {
            let demand = v.demand(0, p);
            for hour in 0..v.hours() {
                let needed: u64 = demand
                    .firm
                    .iter()
                    .filter(|s| s.from() <= hour && hour < s.to())
                    .map(|s| u64::from(s.value()))
                    .sum();
                let blocks: u64 = plan
                    .purchases
                    .iter()
                    .filter(|&&(o, start, _)| {
                        start <= hour && hour < start + problem.offers[o].term_hours.unwrap_or(0)
                    })
                    .map(|&(o, _, n)| u64::from(n * problem.offers[o].gpus_per_instance))
                    .sum();
                let hourly: u64 = plan.usage[0]
                    .iter()
                    .flat_map(|(o, runs)| runs.iter().map(move |r| (*o, r)))
                    .filter(|(_, r)| r.from() <= hour && hour < r.to())
                    .map(|(o, r)| u64::from(r.value() * problem.offers[o].gpus_per_instance))
                    .sum();
                assert!(blocks + hourly >= needed, "pool {p}, hour {hour}");
            }
        }
        let cost =
            crate::solver::plan::solution(&v, &plans.into_iter().cloned().collect::<Vec<_>>())
                .expected_cost;
        let optimum = solve(&v, &SolveOptions::default());
        assert_eq!(optimum.status, Status::Optimal);
        assert!(cost >= optimum.expected_cost - 1e-6, "{cost} {optimum:?}");
        // And it is a good plan: all on-demand would cost $49,280.
        assert!(cost < 40_000.0, "{cost}");
    }

    #[test]
    fn the_rounded_relaxation_keeps_every_limit_and_costs_no_less_than_the_optimum() {
        // docs/problem-v2.md's example: the optimum is $60,970 (`coupled`'s own test).
        let text = include_str!("../../../../tests/fixtures/problems/shared-quota.json");
        let v =
            validate(parse(text, Path::new("shared-quota.json")).expect("parses")).expect("valid");
        let scopes: Vec<Scope> = (0..2).map(Scope::full).collect();
        let data = coupled::common_timeline(&v, &scopes);
        let models = cost_models(&data);
        let mut joint = Mip::new();
        let offsets: Vec<usize> = models.iter().map(|m| joint.append(&m.mip)).collect();
        coupled::add_shared_rows(&v, &data, &models, &offsets, &mut joint);
        joint.integer.fill(false);
        let relaxed = mip::solve(&joint, MipLimits::plain(None));
        assert_eq!(relaxed.status, MipStatus::Optimal);
        let chosen =
            super::rounded_up(&models, &offsets, &relaxed.values).expect("whole purchases");
        let plans = super::first_plan(&v, &data, &models, chosen, &[], None).expect("a first plan");
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
