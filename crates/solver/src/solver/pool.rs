//! One pool's share of the problem, prepared for the model: its timeline, demand per segment,
//! the term purchases worth considering, and the on-demand and spot offers left after removing
//! those another offer always beats.
//!
//! Pools share nothing but v2's shared limits (each offer serves one pool, the budget bounds the
//! total after the fact), so each pool is prepared on its own; pools coupled by a shared limit
//! are prepared on a common timeline (`Scope::cuts`) and solved together (`super::coupled`).

use crate::problem::{OfferKind, Segment, Validated};

use super::timeline::Timeline;

/// Which offers of a pool a solve may use, and optionally term purchases fixed in advance (the
/// reserve-the-peak baseline).
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub pool: usize,
    pub on_demand: bool,
    pub spot: bool,
    pub terms: Terms,
    /// More hours to cut the timeline at: the breakpoints of the pools this one is solved with.
    pub cuts: Vec<u32>,
    /// Whether the v2 shared limits on the pool's offers hold. Without them (a pool solved
    /// alone, `super::Limits::Dropped`), an offer in a shared limit is as free as any other, and
    /// the preparation drops what it would beat as it does for any other offer; the data is
    /// then the same whatever the limits are (`super::memo`).
    pub with_limits: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Terms {
    /// Not allowed.
    None,
    /// Chosen by the solver.
    Free,
    /// Fixed purchases `(offer, start, instances)`.
    Fixed(Vec<(usize, u32, u32)>),
}

impl Scope {
    pub fn full(pool: usize) -> Self {
        Scope {
            pool,
            on_demand: true,
            spot: true,
            terms: Terms::Free,
            cuts: Vec::new(),
            with_limits: true,
        }
    }
}

/// A term purchase the model may make: `n[offer, start] ∈ [lower, upper]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Start {
    pub start: u32,
    /// `min(start + term_hours, H)`.
    pub end: u32,
    pub lower: u32,
    pub upper: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TermOffer {
    pub offer: usize,
    pub gpus: u32,
    pub max: Option<u32>,
    pub cost: f64,
    pub starts: Vec<Start>,
    /// v2 purchase pieces, when the offer has rules: each piece of a purchase holds
    /// `min..=max` instances and costs `cost`.
    pub pieces: Option<Pieces>,
}

/// The v2 rules on the pieces of one purchase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pieces {
    pub min: u32,
    pub max: Option<u32>,
    pub cost: f64,
}

impl Pieces {
    /// The most instances one piece of a purchase at `start` holds: the maximum, or without
    /// one the purchase's own upper bound (never above it, never 0).
    pub fn largest(&self, start: &Start) -> u32 {
        self.max.unwrap_or(start.upper).min(start.upper).max(1)
    }
}

/// An on-demand or spot offer as one scenario sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HourlyOffer {
    pub offer: usize,
    pub kind: OfferKind,
    pub gpus: u32,
    pub limit: Option<u32>,
    /// Per instance-hour, spot overhead included.
    pub price: f64,
}

/// v3: a gang of the pool and the placements it may run in (indices into
/// `Validated::gangs()`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PoolGang {
    pub gang: usize,
    pub placements: Vec<usize>,
    /// GPUs per node (the same in every placement of the gang).
    pub node: u32,
}

/// v3: a gang of the pool in one scenario: `nodes` instances in every hour `from <= t < to`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GangNeed {
    /// Index into `PoolData::gangs`.
    pub gang: usize,
    pub from: u32,
    pub to: u32,
    pub nodes: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PoolData {
    pub pool: usize,
    pub timeline: Timeline,
    /// `firm[k][j]`, `total[k][j]` (firm + flex): GPUs needed in each hour of segment j.
    pub firm: Vec<Vec<u64>>,
    pub total: Vec<Vec<u64>>,
    pub terms: Vec<TermOffer>,
    /// Per scenario, the on-demand and spot offers not dominated by another.
    pub hourly: Vec<Vec<HourlyOffer>>,
    /// GPUs per model unit: the greatest common divisor of every instance size, so coverage
    /// comes in whole units and demand can be rounded up to them.
    pub unit: u32,
    pub probability: Vec<f64>,
    /// Hours where some scenario's demand changes.
    pub demand_cuts: Vec<u32>,
    /// Some on-demand or spot offer of the pool is in a v2 shared limit, or an on-demand offer
    /// a gang may run on has a limit, so hourly usage must be modelled instance by instance
    /// (the limit couples it to other offers, or to the gangs' instances).
    pub explicit: bool,
    /// v3: the pool's gangs, and per scenario where and how large each one runs. Their GPUs are
    /// in `firm` and `total` too.
    pub gangs: Vec<PoolGang>,
    pub gang_needs: Vec<Vec<GangNeed>>,
    /// v3: the offers (as `placement.offers`) of each placement some gang may run in.
    pub placements: Vec<(usize, Vec<usize>)>,
}

impl PoolData {
    /// Some term offer comes in v2 pieces (a cost or a minimum per purchase).
    pub fn has_pieces(&self) -> bool {
        self.terms.iter().any(|t| t.pieces.is_some())
    }

    /// The pool has v3 gangs.
    pub fn has_gangs(&self) -> bool {
        !self.gangs.is_empty()
    }

    pub fn new(v: &Validated, scope: &Scope) -> Self {
        let p = scope.pool;
        let problem = v.problem();
        let hours = problem.hours;
        let scenarios = problem.scenarios.len();
        let mut terms = term_offers(v, scope);
        let (gangs, gang_needs, placements) = pool_gangs(v, p);
        // A gang's GPUs are firm demand: its nodes times its placements' node size.
        let gang_gpus: Vec<Vec<Segment>> = (0..scenarios).map(|k| v.gang_gpus(k, p)).collect();
        let mut demand_cuts = scope.cuts.clone();
        for (k, gangs) in gang_gpus.iter().enumerate() {
            let d = v.demand(k, p);
            let ends = d
                .firm
                .iter()
                .chain(&d.flex)
                .chain(gangs)
                .flat_map(|s| [s.from(), s.to()]);
            demand_cuts.extend(ends);
        }
        demand_cuts.sort_unstable();
        demand_cuts.dedup();
        let windows = terms
            .iter()
            .flat_map(|t| t.starts.iter().flat_map(|s| [s.start, s.end]));
        let timeline = Timeline::new(hours, demand_cuts.iter().copied().chain(windows));
        let firm: Vec<Vec<u64>> = (0..scenarios)
            .map(|k| timeline.accumulate(v.demand(k, p).firm.iter().chain(&gang_gpus[k])))
            .collect();
        let total: Vec<Vec<u64>> = (0..scenarios)
            .map(|k| {
                let flex = timeline.accumulate(&v.demand(k, p).flex);
                firm[k].iter().zip(flex).map(|(f, x)| f + x).collect()
            })
            .collect();
        let peak: Vec<u64> = (0..timeline.segments())
            .map(|j| total.iter().map(|t| t[j]).max().unwrap_or(0))
            .collect();
        if matches!(scope.terms, Terms::Free) {
            for t in &mut terms {
                cap_by_peak(t, &timeline, &peak);
                // A later start holds its instances for fewer hours; with a shared limit that
                // is not "never worse", so such an offer keeps all its starts.
                if t.max.is_none() && !(scope.with_limits && v.is_shared(t.offer)) {
                    drop_covered_starts(t, hours);
                }
            }
            terms.retain(|t| !t.starts.is_empty());
        }
        let hourly: Vec<Vec<HourlyOffer>> = (0..scenarios)
            .map(|k| hourly_offers(v, scope, k, &placements))
            .collect();
        let sizes = hourly
            .iter()
            .flatten()
            .map(|h| h.gpus)
            .chain(terms.iter().map(|t| t.gpus));
        let unit = sizes.fold(0, gcd).max(1);
        let probability = problem.scenarios.iter().map(|s| s.probability).collect();
        // A gang's on-demand instances come from its placement's offers, which the least-cost
        // curve of the other work assumes it has whole: exact only while those offers have no
        // limit of their own.
        let gang_offer_limited = hourly.iter().flatten().any(|h| {
            h.kind == OfferKind::OnDemand
                && h.limit.is_some()
                && placements
                    .iter()
                    .any(|(_, offers): &(usize, Vec<usize>)| offers.contains(&h.offer))
        });
        let explicit = gang_offer_limited
            || (scope.with_limits && hourly.iter().flatten().any(|h| v.is_shared(h.offer)));
        let data = PoolData {
            pool: p,
            timeline,
            firm,
            total,
            terms,
            hourly,
            unit,
            probability,
            demand_cuts,
            explicit,
            gangs,
            gang_needs,
            placements,
        };
        // Cut the timeline again without the windows of the starts just dropped.
        recut(data)
    }

    /// The most GPUs the on-demand and the spot offers of scenario k can supply in an hour
    /// (`u64::MAX` without a limit).
    pub fn hourly_capacity(&self, k: usize) -> (u64, u64) {
        let capacity = |kind: OfferKind| {
            self.hourly[k]
                .iter()
                .filter(|o| o.kind == kind)
                .map(|o| {
                    o.limit
                        .map_or(u64::MAX, |l| u64::from(l) * u64::from(o.gpus))
                })
                .fold(0u64, u64::saturating_add)
        };
        (capacity(OfferKind::OnDemand), capacity(OfferKind::Spot))
    }

    /// GPUs of scenario k's firm and all demand in segment j that `term` GPUs and the hourly
    /// offers at their limits leave uncovered.
    pub fn uncovered(&self, k: usize, j: usize, term: u64) -> (u64, u64) {
        let (on_demand, spot) = self.hourly_capacity(k);
        let left = |need: u64, cap: u64| need.saturating_sub(term).saturating_sub(cap);
        let firm = left(self.firm[k][j], on_demand);
        let total = left(self.total[k][j], on_demand.saturating_add(spot));
        (firm, total)
    }

    pub fn scenarios(&self) -> usize {
        self.firm.len()
    }

    /// v3: the gangs of scenario k running in every hour of segment j (segments are cut where
    /// a gang starts or ends).
    pub fn gangs_in(&self, k: usize, j: usize) -> impl Iterator<Item = &GangNeed> {
        let (start, end) = (self.timeline.start(j), self.timeline.end(j));
        self.gang_needs[k]
            .iter()
            .filter(move |n| n.from <= start && end <= n.to)
    }

    /// Firm and all demand of scenario k in segment j without its gangs' GPUs, in whole units:
    /// the work any instance of the pool may serve.
    pub fn fluid_units(&self, k: usize, j: usize) -> (u64, u64) {
        let unit = u64::from(self.unit);
        let gangs: u64 = self
            .gangs_in(k, j)
            .map(|n| u64::from(n.nodes) * u64::from(self.gangs[n.gang].node) / unit)
            .sum();
        let (f, d) = self.units(k, j);
        (f.saturating_sub(gangs), d.saturating_sub(gangs))
    }

    /// Firm and all demand of scenario k in segment j, in whole units (rounded up).
    pub fn units(&self, k: usize, j: usize) -> (u64, u64) {
        let unit = u64::from(self.unit);
        (
            self.firm[k][j].div_ceil(unit),
            self.total[k][j].div_ceil(unit),
        )
    }
}

fn term_offers(v: &Validated, scope: &Scope) -> Vec<TermOffer> {
    let problem = v.problem();
    let hours = problem.hours;
    let offer = |o: usize, starts: Vec<Start>| {
        let def = &problem.offers[o];
        TermOffer {
            offer: o,
            gpus: def.gpus_per_instance,
            max: def.max_instances,
            cost: v.term_cost_per_instance(o),
            starts,
            pieces: pieces(v, o),
        }
    };
    let end = |o: usize, s: u32| {
        let term = problem.offers[o].term_hours.unwrap_or(0);
        s.saturating_add(term).min(hours)
    };
    match &scope.terms {
        Terms::None => Vec::new(),
        Terms::Free => (0..problem.offers.len())
            .filter(|&o| v.pool_of(o) == scope.pool && problem.offers[o].kind == OfferKind::Term)
            .filter(|&o| problem.offers[o].max_instances != Some(0))
            .map(|o| {
                let max = problem.offers[o].max_instances.unwrap_or(u32::MAX);
                let starts = v
                    .starts(o)
                    .iter()
                    .map(|&s| Start {
                        start: s,
                        end: end(o, s),
                        lower: 0,
                        upper: max,
                    })
                    .collect();
                offer(o, starts)
            })
            .collect(),
        Terms::Fixed(purchases) => {
            let mut out: Vec<TermOffer> = Vec::new();
            for &(o, s, n) in purchases
                .iter()
                .filter(|&&(o, _, n)| v.pool_of(o) == scope.pool && n > 0)
            {
                let start = Start {
                    start: s,
                    end: end(o, s),
                    lower: n,
                    upper: n,
                };
                match out.iter_mut().find(|t| t.offer == o) {
                    Some(t) => t.starts.push(start),
                    None => out.push(offer(o, vec![start])),
                }
            }
            out
        }
    }
}

/// The v2 piece rules of term offer `o`, when they constrain anything. A maximum alone does
/// not: with a minimum of 1 and no cost, any n > 0 splits into `ceil(n / max)` pieces (each
/// has at least one instance as `ceil(n / max) ≤ n`), so no piece count needs modelling.
fn pieces(v: &Validated, o: usize) -> Option<Pieces> {
    let (min, max, cost) = v.piece_rules(o);
    let v2 = v.problem().is_v2() && v.problem().offers[o].has_purchase_rules();
    (v2 && (min > 1 || cost > 0.0)).then_some(Pieces { min, max, cost })
}

/// `data` on the timeline that its remaining starts' windows and the demand changes need.
fn recut(data: PoolData) -> PoolData {
    let windows = data
        .terms
        .iter()
        .flat_map(|t| t.starts.iter().flat_map(|s| [s.start, s.end]));
    let hours = data.timeline.end(data.timeline.segments() - 1);
    let timeline = Timeline::new(hours, data.demand_cuts.iter().copied().chain(windows));
    // Demand only changes at demand cuts, which both timelines have.
    let map: Vec<usize> = (0..timeline.segments())
        .map(|j| data.timeline.segment_at(timeline.start(j)))
        .collect();
    let pick = |per: Vec<Vec<u64>>| -> Vec<Vec<u64>> {
        per.into_iter()
            .map(|v| map.iter().map(|&j| v[j]).collect())
            .collect()
    };
    PoolData {
        timeline,
        firm: pick(data.firm),
        total: pick(data.total),
        ..data
    }
}

/// More instances of one purchase than its window's peak demand needs never help (dropping one
/// keeps every hour covered and costs no more), so each purchase is capped at
/// `ceil(peak / gpus_per_instance)`, and purchases in windows without demand are dropped.
///
/// With v2 pieces of `min..=max` instances, `m = ceil(peak / gpus)` may not be a valid
/// purchase; the cap is then `max(m, min·ceil(m / max))`, bought as `ceil(m / max)` pieces. A
/// larger valid purchase n in k pieces has `k ≥ ceil(m / max)` and `n ≥ min·k`, so this one
/// is no larger, has no more pieces, and covers every hour of the window as well.
fn cap_by_peak(term: &mut TermOffer, timeline: &Timeline, peak: &[u64]) {
    let windows: Vec<(usize, usize)> = term
        .starts
        .iter()
        .map(|s| (timeline.point(s.start), timeline.point(s.end)))
        .collect();
    let maxima = window_max(peak, &windows);
    let g = u64::from(term.gpus);
    for (s, m) in term.starts.iter_mut().zip(maxima) {
        let mut cap = m.div_ceil(g);
        if let Some(p) = term.pieces {
            let pieces = p.max.map_or(1, |max| cap.div_ceil(u64::from(max.max(1))));
            cap = cap.max(u64::from(p.min) * pieces);
        }
        s.upper = s.upper.min(u32::try_from(cap).unwrap_or(u32::MAX));
    }
    term.starts.retain(|s| s.upper > 0);
}

/// Once a start's term reaches the end of the horizon, a later start of the same offer covers
/// fewer hours at the same price; without a limit on instances in use, buying at the earlier
/// start instead is never worse. So an unlimited offer keeps its starts up to the first one
/// whose term reaches the horizon's end (which inherits the largest cap of those dropped).
fn drop_covered_starts(term: &mut TermOffer, hours: u32) {
    let Some(first) = term.starts.iter().position(|s| s.end >= hours) else {
        return;
    };
    let cap = term.starts[first..]
        .iter()
        .map(|s| s.upper)
        .max()
        .unwrap_or(0);
    term.starts.truncate(first + 1);
    term.starts[first].upper = cap;
}

/// The maximum of `values[lo..hi]` for each window; windows move monotonically right (both ends
/// ascending), as the windows of one term offer's sorted starts do.
fn window_max(values: &[u64], windows: &[(usize, usize)]) -> Vec<u64> {
    let mut deque = std::collections::VecDeque::new();
    let mut next = 0;
    windows
        .iter()
        .map(|&(lo, hi)| {
            while next < hi {
                while deque
                    .back()
                    .is_some_and(|&b: &usize| values[b] <= values[next])
                {
                    deque.pop_back();
                }
                deque.push_back(next);
                next += 1;
            }
            while deque.front().is_some_and(|&f| f < lo) {
                deque.pop_front();
            }
            deque.front().map_or(0, |&f| values[f])
        })
        .collect()
}

/// v3: the gangs of pool `p`, what each scenario needs of them, and the placements they may
/// run in with their offers.
#[allow(clippy::type_complexity)]
fn pool_gangs(
    v: &Validated,
    p: usize,
) -> (Vec<PoolGang>, Vec<Vec<GangNeed>>, Vec<(usize, Vec<usize>)>) {
    let all = v.gangs();
    let mut gangs: Vec<PoolGang> = Vec::new();
    let mut local = std::collections::HashMap::new();
    let needs = (0..v.problem().scenarios.len())
        .map(|k| {
            v.gang_demand(k, p)
                .iter()
                .map(|d| {
                    let gang = *local.entry(d.gang).or_insert_with(|| {
                        let placements = all.gangs[d.gang].placements.clone();
                        gangs.push(PoolGang {
                            gang: d.gang,
                            node: placements
                                .first()
                                .map_or(1, |&q| all.placements[q].gpus_per_node),
                            placements,
                        });
                        gangs.len() - 1
                    });
                    GangNeed {
                        gang,
                        from: d.from,
                        to: d.to,
                        nodes: d.nodes,
                    }
                })
                .collect()
        })
        .collect();
    let mut placements: Vec<usize> = gangs.iter().flat_map(|g| g.placements.clone()).collect();
    placements.sort_unstable();
    placements.dedup();
    let placements = placements
        .into_iter()
        .map(|q| (q, all.placements[q].offers.clone()))
        .collect();
    (gangs, needs, placements)
}

/// The on-demand and spot offers of the pool usable in scenario `k`, without those another
/// offer beats: B is dropped when an offer A with no limit in this scenario has a
/// `gpus_per_instance` dividing B's, costs no more per GPU-hour, and serves whatever B serves
/// (on-demand serves all demand, spot only flex). Replacing each B instance by `g_B / g_A`
/// instances of A then never costs more. Ties go to on-demand, then smaller instances, then
/// the earlier offer, so two equal offers never remove each other. An on-demand offer in a
/// placement some gang may run in (`placements`) is beaten only by one of the same placement:
/// another serves the pool's other work, not the gang.
fn hourly_offers(
    v: &Validated,
    scope: &Scope,
    k: usize,
    placements: &[(usize, Vec<usize>)],
) -> Vec<HourlyOffer> {
    let problem = v.problem();
    let placement_of =
        |o: usize| v.gangs().offer_placement[o].filter(|q| placements.iter().any(|(p, _)| p == q));
    let all: Vec<HourlyOffer> = (0..problem.offers.len())
        .filter(|&o| v.pool_of(o) == scope.pool)
        .filter(|&o| match problem.offers[o].kind {
            OfferKind::OnDemand => scope.on_demand,
            OfferKind::Spot => scope.spot,
            OfferKind::Term => false,
        })
        .map(|o| HourlyOffer {
            offer: o,
            kind: problem.offers[o].kind,
            gpus: problem.offers[o].gpus_per_instance,
            limit: v.limit(k, o),
            price: v.hourly_cost(o),
        })
        .filter(|h| h.limit != Some(0))
        .collect();
    let rank = |h: &HourlyOffer| (h.kind == OfferKind::Spot, h.gpus, h.offer);
    let beats = |a: &HourlyOffer, b: &HourlyOffer| {
        // An offer in a shared limit is limited too, even without a limit of its own.
        if a.offer == b.offer
            || a.limit.is_some()
            || (scope.with_limits && v.is_shared(a.offer))
            || !b.gpus.is_multiple_of(a.gpus)
        {
            return false;
        }
        if a.kind == OfferKind::Spot && b.kind == OfferKind::OnDemand {
            return false;
        }
        if b.kind == OfferKind::OnDemand
            && placement_of(b.offer).is_some()
            && placement_of(a.offer) != placement_of(b.offer)
        {
            return false;
        }
        let a_cost = a.price * f64::from(b.gpus / a.gpus);
        a_cost < b.price || (a_cost == b.price && rank(a) < rank(b))
    };
    all.iter()
        .filter(|b| !all.iter().any(|a| beats(a, b)))
        .copied()
        .collect()
}

pub(crate) fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_window_maxima() {
        let v = [1, 5, 2, 0, 3, 1];
        assert_eq!(
            window_max(&v, &[(0, 2), (1, 3), (2, 5), (5, 6), (6, 6)]),
            vec![5, 5, 3, 1, 0]
        );
    }

    #[test]
    fn unit_is_the_common_divisor() {
        assert_eq!(gcd(8, 12), 4);
        assert_eq!(gcd(0, 8), 8);
    }
}
