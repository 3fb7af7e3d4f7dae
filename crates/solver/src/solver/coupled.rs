//! Pools coupled by v2 shared limits (`docs/problem-v2.md`), solved together as one
//! mixed-integer program.
//!
//! A shared limit caps, in every hour and scenario, a weighted sum of instances in use over
//! offers that may belong to several pools. Pools are grouped by union-find over the pools of
//! each limit's offers ([`components`]); a group of one pool without limits is solved alone as
//! before, every other group here. Pools in different groups still share nothing, so solving
//! the groups apart and adding their optima is exact.
//!
//! Within a group, each pool's model is built as usual ([`PoolModel`]) on a common timeline:
//! every pool is cut at the breakpoints of all the others ([`Scope::cuts`], repeated until no
//! pool adds a breakpoint), so in each segment every hour of every pool of the group faces the
//! same demand, the same term capacity and the same limits. The second stage is separable by
//! hour once the purchases are fixed, so one whole-number choice per segment, used in each of
//! its hours, is as good as any hour-by-hour choice: the segment model stays exact. The models
//! are put side by side in one program and joined by one row per limit, scenario and segment:
//! `Σ weight × (A term instances held, or hourly instances of that scenario) ≤ cap`. Pools whose
//! hourly offers are in a limit are modelled instance by instance (`PoolData::explicit`), as the
//! least-cost curve without the limit is no longer the second stage's cost.
//!
//! Before building that program, each pool of the group is solved alone, without the limits
//! ([`alone_suffices`]). Dropping constraints can only lower the optimum, so the sum of the
//! pools' proven optima is a lower bound on the group's; when the plans that reach it also keep
//! every shared limit in every hour and scenario, they are feasible for the group and therefore
//! optimal. Only a group whose limits bind pays for the joint program. A pool that cannot be
//! covered alone cannot be covered with the limits either, so its message stands as it is.
//!
//! With a time limit: first plans (`super::incumbent`) from the pools' own optima, made to keep
//! the limits, and then from the joint relaxation; branch and bound gets the time left, and is
//! not started when the relaxation (its root) did not finish, or when a first plan is in hand
//! and less time is left than the relaxation took. The first plan from the pools' own optima is
//! made even when the limit is already spent (it takes milliseconds, and a plan a moment late
//! beats none); with it in hand and no time left, the joint relaxation is not started. The
//! engine's time limit does not cover a root relaxation (Cbc counts from the start of branch
//! and bound, and Clp's simplex is not stopped), so a group can still end past the limit by
//! about one relaxation's time.
//!
//! What the pool preparation leaves out stays exact under shared limits: a purchase larger than
//! its window's peak only holds more of a limit; an hourly offer in a limit is never taken as
//! unlimited when dropping offers it would beat; and an unlimited term offer in a limit keeps
//! its later starts (`pool::PoolData::new`).

use std::time::Instant;

use crate::problem::{OfferKind, Validated};

use super::PoolOutcome;
use super::diagnose;
use super::incumbent;
use super::mip::{self, Mip, MipLimits, MipStatus};
use super::model::{Mode, PoolModel, PoolPlan};
use super::pool::{PoolData, Scope};

/// The groups of pool indices that must be solved together: pools joined (transitively) by a
/// shared limit. Each group is ascending, groups ordered by their first pool; the flag says
/// whether some limit touches the group.
pub(crate) fn components(v: &Validated) -> Vec<(Vec<usize>, bool)> {
    let pools = v.problem().pools.len();
    let mut parent: Vec<usize> = (0..pools).collect();
    fn root(parent: &mut [usize], mut p: usize) -> usize {
        while parent[p] != p {
            parent[p] = parent[parent[p]];
            p = parent[p];
        }
        p
    }
    let mut limited = vec![false; pools];
    for limit in v.shared_limits() {
        let mut first = None;
        for &(o, _) in &limit.offers {
            let p = v.pool_of(o);
            limited[p] = true;
            match first {
                None => first = Some(p),
                Some(f) => {
                    let (a, b) = (root(&mut parent, f), root(&mut parent, p));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut groups: Vec<(Vec<usize>, bool)> = Vec::new();
    let mut index = vec![usize::MAX; pools];
    for (p, &touched) in limited.iter().enumerate() {
        let r = root(&mut parent, p);
        if index[r] == usize::MAX {
            index[r] = groups.len();
            groups.push((Vec::new(), false));
        }
        let g = &mut groups[index[r]];
        g.0.push(p);
        g.1 |= touched;
    }
    groups
}

/// Whether the outcomes of solving each pool of a group alone are the group's answer: some pool
/// cannot be covered (the group cannot be either), or every pool's plan is proven optimal and
/// together they keep every shared limit (see the module doc).
pub(crate) fn alone_suffices(v: &Validated, outcomes: &[PoolOutcome]) -> bool {
    let mut plans = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            PoolOutcome::Short(_) | PoolOutcome::OutOfTime(_) => return true,
            PoolOutcome::Planned { proven: false, .. } => return false,
            PoolOutcome::Planned { plan, .. } => plans.push(plan),
        }
    }
    keeps_limits(v, &plans)
}

/// Whether `plans` together keep every shared limit in every hour of every scenario: a sweep
/// over the hours where some instance count in a limit changes.
pub(crate) fn keeps_limits(v: &Validated, plans: &[&PoolPlan]) -> bool {
    let problem = v.problem();
    let hours = v.hours();
    for limit in v.shared_limits() {
        let weight = |o: usize| {
            limit
                .offers
                .iter()
                .find(|&&(offer, _)| offer == o)
                .map(|&(_, w)| i128::from(w))
        };
        // Term instances held, the same in every scenario.
        let mut held: Vec<(u32, i128)> = Vec::new();
        for plan in plans {
            for &(o, start, n) in &plan.purchases {
                if let Some(w) = weight(o) {
                    let term = problem.offers[o].term_hours.unwrap_or(0);
                    let end = start.saturating_add(term).min(hours);
                    held.push((start, w * i128::from(n)));
                    held.push((end, -w * i128::from(n)));
                }
            }
        }
        for k in 0..problem.scenarios.len() {
            let mut events = held.clone();
            for plan in plans {
                for (o, segments) in plan.usage.get(k).into_iter().flatten() {
                    if let Some(w) = weight(*o) {
                        for s in segments {
                            events.push((s.from(), w * i128::from(s.value())));
                            events.push((s.to(), -w * i128::from(s.value())));
                        }
                    }
                }
            }
            // Ends before starts at the same hour: an instance ending at h is not in use at h.
            events.sort_unstable_by_key(|&(h, delta)| (h, delta));
            let mut level: i128 = 0;
            for (_, delta) in events {
                level += delta;
                if level > i128::from(limit.cap) {
                    return false;
                }
            }
        }
    }
    true
}

/// Solves the pools of `scopes` (one group of [`components`]) together, given each pool's
/// outcome `alone` (without the limits); one outcome per scope, in order, or a single `Short`
/// for the group.
pub(crate) fn solve_group(
    v: &Validated,
    scopes: &[Scope],
    alone: &[PoolOutcome],
    options: &super::SolveOptions,
    deadline: Option<Instant>,
) -> Vec<PoolOutcome> {
    let data = common_timeline(v, scopes);
    for d in &data {
        let over = diagnose::over_capacity(d);
        if !over.is_empty() {
            return vec![PoolOutcome::Short(diagnose::message(v, d, &over, true))];
        }
    }
    let models: Vec<PoolModel> = data
        .iter()
        .map(|d| PoolModel::build(d, Mode::Cost))
        .collect();
    let mut mip = Mip::new();
    let offsets: Vec<usize> = models.iter().map(|m| mip.append(&m.mip)).collect();
    add_shared_rows(v, &data, &models, &offsets, &mut mip);
    let constant: f64 = models.iter().map(|m| m.constant).sum();
    let charged = data.iter().any(PoolData::has_pieces);
    let placed = data.iter().any(PoolData::has_gangs);
    let limits = |cutoff: Option<f64>, until: Option<Instant>| MipLimits {
        time_limit: until.map(|d| d.saturating_duration_since(Instant::now())),
        rel_gap: options.rel_gap,
        log: options.solver_log,
        cuts: charged || placed,
        cutoff,
        node_limit: charged.then(|| super::charges::node_limit(mip.num_cols())),
    };
    // The time left, as a share of what is left now (`None` without a time limit).
    let share = |fraction: f64| {
        deadline.map(|d| {
            let now = Instant::now();
            now + d.saturating_duration_since(now).mul_f64(fraction)
        })
    };
    // The first plan (`super::incumbent`), from each pool's own optimum and then from the
    // relaxation's purchases rounded up: a cost for branch and bound to beat, and the answer
    // when it finds nothing cheaper. The pools' optima come first: they need no joint
    // relaxation, which on a large group may not finish in the time limit. Each first plan
    // spends at most an eighth of the time left on making purchases smaller. Its segments'
    // instances are small exact programs that take milliseconds, and they are not cut short by
    // the time limit: a plan a moment late beats none (in a debug build under load, the pools'
    // own solves had used up a 30 s limit, and the group ended without a plan).
    let mut incumbent: Option<(Vec<PoolPlan>, f64)> = None;
    let alone_plans: Vec<&PoolPlan> = alone
        .iter()
        .filter_map(|o| match o {
            PoolOutcome::Planned { plan, .. } => Some(plan),
            _ => None,
        })
        .collect();
    let placements: Vec<Vec<(usize, usize)>> = if alone_plans.len() == data.len() {
        alone_plans.iter().map(|p| p.placements.clone()).collect()
    } else {
        Vec::new()
    };
    let consider = |incumbent: &mut Option<(Vec<PoolPlan>, f64)>,
                    chosen: Vec<Vec<(usize, usize, u32)>>| {
        // Gangs keep the placements of the pools' own plans (none without them all).
        if placed && placements.is_empty() {
            return;
        }
        let Some(plans) =
            incumbent::first_plan(v, &data, &models, chosen, &placements, share(1.0 / 8.0))
        else {
            return;
        };
        let cost = super::plan::solution(v, &plans).expected_cost;
        tracing::debug!(cost, "a first plan for coupled pools");
        if incumbent.as_ref().is_none_or(|(_, best)| cost < *best) {
            *incumbent = Some((plans, cost));
        }
    };
    if alone_plans.len() == data.len()
        && let Some(chosen) = incumbent::purchases_of(&data, &alone_plans)
    {
        consider(&mut incumbent, chosen);
    }
    // With gangs, failing that: the joint program with the pools' own purchases, gangs free to
    // move (slower, and a plan where the pools' own placements break a limit).
    if placed
        && incumbent.is_none()
        && alone_plans.len() == data.len()
        && let Some(chosen) = incumbent::purchases_of(&data, &alone_plans)
    {
        incumbent = with_gangs(
            v,
            &models,
            &offsets,
            &mip,
            &chosen,
            limits(None, share(1.0 / 4.0)),
        );
    }
    tracing::debug!(
        first_plan = incumbent.as_ref().map(|(_, cost)| *cost),
        "a first plan from the pools' own optima"
    );
    // With every purchase fixed (the baselines), the first plan chose each segment's
    // instances exactly, and the segments are independent: it is the optimum.
    let fixed = data
        .iter()
        .flat_map(|d| &d.terms)
        .flat_map(|t| &t.starts)
        .all(|s| s.lower == s.upper);
    // Each pool's optimum alone, without the limits, is a lower bound on its share.
    let alone_bound: f64 = alone
        .iter()
        .map(|o| match o {
            PoolOutcome::Planned { bound, .. } => *bound,
            _ => f64::NEG_INFINITY,
        })
        .sum();
    // With every purchase fixed, the first plan from the pools' own plans is the optimum
    // (above), and the joint relaxation could only round to the same purchases.
    if fixed && let Some((plans, cost)) = incumbent {
        return planned_outcomes(plans, cost, true);
    }
    // The pools' plans, kept within the limits, are the answer, bounded by the pools' own
    // bounds, where the joint program would not do better:
    // - with costs per purchase, on a group too large for branch and bound to search (fewer
    //   than `FEW_NODES` nodes in its budget): the pools' own plans were found by slope scaling
    //   and their bounds by cuts at each pool's root (`super::charges`), and the joint
    //   relaxation and root carry the costs per purchase no better, take far longer and find
    //   no cheaper plan (14 s for none on the quickstart at $250 a purchase, 2026-11-25);
    // - with no time left: the joint relaxation would only run past the limit (the engine's
    //   limit does not stop it).
    let too_large =
        charged && super::charges::node_limit(mip.num_cols()) < super::charges::FEW_NODES;
    let spent = deadline.is_some_and(|d| Instant::now() >= d);
    if (too_large || spent)
        && let Some((plans, cost)) = incumbent
    {
        return planned_outcomes(plans, alone_bound.min(cost), false);
    }
    // The relaxation may use all the time left when a first plan is in hand (its rounding is
    // usually the better plan, and branch and bound gets what it leaves). Without one, it is
    // the only other way to a plan, and a plan a little late beats none: it may then run past
    // the time limit. Branch and bound solves the same relaxation at its root, so when this
    // one does not finish, branch and bound is not started.
    let mut relaxation = mip.clone();
    relaxation.integer.fill(false);
    let relaxation_started = Instant::now();
    let relaxed = mip::solve(&relaxation, limits(None, incumbent.as_ref().and(deadline)));
    let relaxation_took = relaxation_started.elapsed();
    tracing::debug!(status = ?relaxed.status, bound = relaxed.bound + constant, "the joint relaxation");
    if relaxed.status == MipStatus::Optimal
        && let Some(chosen) = incumbent::rounded_up(&models, &offsets, &relaxed.values)
    {
        consider(&mut incumbent, chosen);
    }
    if fixed && let Some((plans, cost)) = incumbent {
        return planned_outcomes(plans, cost, true);
    }
    // Nodes that cannot beat the first plan by more than half the optimality gap are pruned, so
    // a search that ends without a plan proves the first one optimal.
    let cutoff = incumbent
        .as_ref()
        .map(|(_, cost)| cost - constant - 0.5 * super::OPTIMALITY_GAP * cost.abs());
    // No time left after the first plans, or the relaxation did not finish in its share:
    // branch and bound would not even finish its root. Nor would it with a first plan in hand
    // and less time left than the relaxation took: the engine's limit does not stop its root
    // (the module doc), so starting it would only run past the limit (by 14 s of a 60 s limit
    // at 2,000 campaigns in `cargo bench --bench plan -- --layout shared`, 2026-11-25).
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let result = if left.is_some_and(|l| l.is_zero())
        || relaxed.status == MipStatus::NoSolution
        || (incumbent.is_some() && left.is_some_and(|l| l < relaxation_took))
    {
        mip::MipResult {
            status: MipStatus::NoSolution,
            values: Vec::new(),
            bound: f64::NEG_INFINITY,
        }
    } else {
        mip::solve(&mip, limits(cutoff, deadline))
    };
    // A search stopped at its node budget (costs per purchase) without any plan, and no first
    // plan to fall back on: search on without the budget while time is left, rather than
    // report no plan where the relaxation shows one may exist (seen on `gpucap init`'s own
    // project, a 64-GPU campaign under the default quota, 2026-11-28).
    let result = if result.status == MipStatus::NoSolution
        && incumbent.is_none()
        && charged
        && relaxed.status == MipStatus::Optimal
        && deadline.is_none_or(|d| Instant::now() < d)
    {
        tracing::debug!("no plan within the node budget: searching on until the time limit");
        mip::solve(
            &mip,
            MipLimits {
                node_limit: None,
                ..limits(cutoff, deadline)
            },
        )
    } else {
        result
    };
    let bound = (result.bound.max(relaxed.bound) + constant).max(alone_bound);
    tracing::debug!(
        pools = scopes.len(),
        columns = mip.num_cols(),
        rows = mip.num_rows(),
        relaxation = relaxed.bound + constant,
        first_plan = incumbent.as_ref().map(|(_, cost)| *cost),
        status = ?result.status,
        "coupled pools solved"
    );
    match (result.status, incumbent) {
        (MipStatus::Optimal | MipStatus::Feasible, incumbent) => {
            let plans: Vec<PoolPlan> = models
                .iter()
                .zip(&offsets)
                .map(|(m, &offset)| m.plan(&result.values[offset..offset + m.mip.num_cols()]))
                .collect();
            let cost = super::plan::solution(v, &plans).expected_cost;
            match incumbent {
                Some((first, first_cost)) if first_cost < cost => {
                    planned_outcomes(first, bound, false)
                }
                _ => planned_outcomes(plans, bound, result.status == MipStatus::Optimal),
            }
        }
        // Nothing cheaper than the first plan by half the gap: it is optimal.
        (MipStatus::Infeasible, Some((plans, cost))) => {
            let proven = (relaxed.bound + constant)
                .max(cutoff.unwrap_or(cost) + constant)
                .max(alone_bound);
            planned_outcomes(plans, proven.min(cost), true)
        }
        (MipStatus::NoSolution, Some((plans, _))) => planned_outcomes(plans, bound, false),
        (MipStatus::NoSolution, None) => vec![PoolOutcome::OutOfTime(format!(
            "no plan for pools {} (coupled by shared limits) was found in the time limit; allow more time",
            names(v, scopes)
        ))],
        (MipStatus::Infeasible, None) => vec![PoolOutcome::Short(beyond_limits(v, scopes))],
    }
}

/// Why pools that could each be covered alone cannot be covered within their shared limits.
pub(crate) fn beyond_limits(v: &Validated, scopes: &[Scope]) -> String {
    if let [scope] = scopes {
        format!(
            "the demand of pool `{}` cannot be covered within the limits {}: it could be covered without them",
            v.problem().pools[scope.pool],
            limit_names(v, scopes)
        )
    } else {
        format!(
            "the demand of pools {} cannot be covered within the shared limits {}: each pool could be covered alone, but not all of them at once",
            names(v, scopes),
            limit_names(v, scopes)
        )
    }
}

/// Whether `group` is one pool whose limits count only its term offers (an account's cap on
/// capacity-block instances, say). Such a pool needs no joint program: its hourly offers are in
/// no limit, so the least-cost curve is still their exact second stage, and its own model with
/// the limits as rows ([`add_own_limits`]) is the group's program of one pool. Unless they are
/// [`likely_to_bind`], it is solved without the rows first (they slow a solve where they do not
/// bind), and with them, in the same model, only when that plan breaks them
/// (`super::solve_pool`).
pub(crate) fn own_term_limits(v: &Validated, group: &[Scope]) -> bool {
    let [scope] = group else {
        return false;
    };
    let problem = v.problem();
    v.shared_limits().iter().all(|limit| {
        limit
            .offers
            .iter()
            .all(|&(o, _)| v.pool_of(o) != scope.pool || problem.offers[o].kind == OfferKind::Term)
    })
}

/// Whether some limit on `data`'s pool would be broken if its term instances covered its peak
/// demand (in every hour, scenario and offer of the limit): a guess at whether the limits bind,
/// which only decides whether the pool is solved with them first (`super::solve_pool`).
pub(crate) fn likely_to_bind(v: &Validated, data: &PoolData) -> bool {
    let peak = data.total.iter().flatten().copied().max().unwrap_or(0);
    let offers = &v.problem().offers;
    v.shared_limits().iter().any(|limit| {
        limit
            .offers
            .iter()
            .filter(|&&(o, _)| v.pool_of(o) == data.pool)
            .map(|&(o, w)| {
                u64::from(w).saturating_mul(peak.div_ceil(u64::from(offers[o].gpus_per_instance)))
            })
            .max()
            .is_some_and(|held| held > limit.cap)
    })
}

/// Adds the limits on `data`'s pool to its own model as rows (see [`own_term_limits`]).
pub(crate) fn add_own_limits(v: &Validated, data: &PoolData, model: &mut PoolModel) {
    let mut mip = std::mem::take(&mut model.mip);
    add_shared_rows(
        v,
        std::slice::from_ref(data),
        std::slice::from_ref(model),
        &[0],
        &mut mip,
    );
    model.mip = mip;
}

/// One outcome per pool of the group, the group's bound carried by the first.
fn planned_outcomes(plans: Vec<PoolPlan>, bound: f64, proven: bool) -> Vec<PoolOutcome> {
    plans
        .into_iter()
        .enumerate()
        .map(|(i, plan)| PoolOutcome::Planned {
            plan,
            bound: if i == 0 { bound } else { 0.0 },
            proven,
        })
        .collect()
}

/// Each scope's pool data, all cut at every breakpoint of the others.
pub(crate) fn common_timeline(v: &Validated, scopes: &[Scope]) -> Vec<PoolData> {
    let mut cuts: Vec<u32> = Vec::new();
    loop {
        let data: Vec<PoolData> = scopes
            .iter()
            .map(|s| {
                PoolData::new(
                    v,
                    &Scope {
                        cuts: cuts.clone(),
                        ..s.clone()
                    },
                )
            })
            .collect();
        let mut points: Vec<u32> = data
            .iter()
            .flat_map(|d| d.timeline.points().iter().copied())
            .collect();
        points.sort_unstable();
        points.dedup();
        // Cuts only grow and are hours of the horizon, so this ends.
        if points == cuts {
            return data;
        }
        cuts = points;
    }
}

/// One row per shared limit, scenario (only the first when the limit has no hourly offer) and
/// segment of the common timeline.
pub(crate) fn add_shared_rows(
    v: &Validated,
    data: &[PoolData],
    models: &[PoolModel],
    offsets: &[usize],
    mip: &mut Mip,
) {
    let problem = v.problem();
    let slot = |pool: usize| data.iter().position(|d| d.pool == pool);
    let timeline = &data[0].timeline;
    for limit in v.shared_limits() {
        let offers: Vec<(usize, usize, f64)> = limit
            .offers
            .iter()
            .filter_map(|&(o, w)| Some((o, slot(v.pool_of(o))?, f64::from(w))))
            .collect();
        if offers.is_empty() {
            continue;
        }
        let hourly = offers
            .iter()
            .any(|&(o, _, _)| problem.offers[o].kind != OfferKind::Term);
        let scenarios = if hourly { data[0].scenarios() } else { 1 };
        for k in 0..scenarios {
            for j in 0..timeline.segments() {
                let hour = timeline.start(j);
                let mut entries: Vec<(usize, f64)> = Vec::new();
                for &(o, i, w) in &offers {
                    let model = &models[i];
                    let column = if problem.offers[o].kind == OfferKind::Term {
                        model.active_column(o, hour)
                    } else {
                        let segment = data[i].timeline.segment_at(hour);
                        model.instance_column(k, segment, o)
                    };
                    if let Some(c) = column {
                        entries.push((c + offsets[i], w));
                    }
                }
                let total: f64 = entries.iter().map(|&(c, w)| w * mip.upper[c]).sum();
                if !entries.is_empty() && total > limit.cap as f64 {
                    mip.add_row(f64::NEG_INFINITY, limit.cap as f64, entries);
                }
            }
        }
    }
}

fn names(v: &Validated, scopes: &[Scope]) -> String {
    let names: Vec<String> = scopes
        .iter()
        .map(|s| format!("`{}`", v.problem().pools[s.pool]))
        .collect();
    names.join(", ")
}

fn limit_names(v: &Validated, scopes: &[Scope]) -> String {
    let problem = v.problem();
    let names: Vec<String> = problem
        .shared_limits
        .iter()
        .zip(v.shared_limits())
        .filter(|(_, l)| {
            l.offers
                .iter()
                .any(|&(o, _)| scopes.iter().any(|s| s.pool == v.pool_of(o)))
        })
        .map(|(def, l)| format!("`{}` ({} {})", def.id, l.cap, def.unit))
        .collect();
    names.join(", ")
}

/// A first plan for a group with gangs: the joint program with every purchase fixed to the
/// pools' own (`chosen`), solved whole. The per-segment first plans of [`incumbent`] know no
/// placement; with the purchases fixed, what is left (hourly instances and each gang's
/// placement) is small. `None` when those purchases leave no plan within the limits.
fn with_gangs(
    v: &Validated,
    models: &[PoolModel],
    offsets: &[usize],
    mip: &Mip,
    chosen: &[Vec<(usize, usize, u32)>],
    limits: MipLimits,
) -> Option<(Vec<PoolPlan>, f64)> {
    let mut fixed = mip.clone();
    for ((model, &offset), chosen) in models.iter().zip(offsets).zip(chosen) {
        let own = model.fixed_to(chosen);
        let columns = offset..offset + model.mip.num_cols();
        fixed.lower[columns.clone()].copy_from_slice(&own.lower);
        fixed.upper[columns].copy_from_slice(&own.upper);
    }
    let result = mip::solve(&fixed, limits);
    if !matches!(result.status, MipStatus::Optimal | MipStatus::Feasible) {
        return None;
    }
    let plans: Vec<PoolPlan> = models
        .iter()
        .zip(offsets)
        .map(|(m, &offset)| m.plan(&result.values[offset..offset + m.mip.num_cols()]))
        .collect();
    let cost = super::plan::solution(v, &plans).expected_cost;
    tracing::debug!(cost, "a first plan for coupled pools with gangs");
    Some((plans, cost))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::problem::{Status, parse, validate};
    use crate::solver::{SolveOptions, solve};

    #[test]
    fn a_binding_quota_moves_one_pool_onto_a_block() {
        // docs/problem-v2.md's example: on-demand alone costs $60,480 but breaks the vCPU quota
        // in hours 48-96; four east instances on one block piece cost $490 more.
        let text = include_str!("../../../../tests/fixtures/problems/shared-quota.json");
        let v =
            validate(parse(text, Path::new("shared-quota.json")).expect("parses")).expect("valid");
        assert_eq!(super::components(&v), vec![(vec![0, 1], true)]);
        let solution = solve(&v, &SolveOptions::default());
        assert_eq!(solution.status, Status::Optimal);
        assert!(
            (solution.expected_cost - 60_970.0).abs() < 1e-6,
            "{solution:?}"
        );
        assert_eq!(solution.purchases.len(), 1);
        let p = &solution.purchases[0];
        assert_eq!(
            (p.offer.as_str(), p.start_hour, p.instances, p.pieces),
            ("east/block/2d", 48, 4, 1)
        );
    }

    #[test]
    fn a_group_whose_time_is_spent_still_gets_the_plan_from_its_pools_own_plans() {
        // The quota at 1,700 vCPUs: the pools' own plans (on-demand, 6 east and 4 west 8-GPU
        // instances, 1,920 vCPUs in hours 48-96) break it, but kept within it (west on 32 1-GPU
        // instances, 512 vCPUs) they cover the demand. With the time limit spent before the
        // group's turn, that plan is the answer, not "no plan found", and its bound is the
        // pools' own optima without the quota: the joint relaxation, which the engine's limit
        // does not stop, is not started.
        let text = include_str!("../../../../tests/fixtures/problems/shared-quota.json");
        let mut problem = parse(text, Path::new("shared-quota.json")).expect("parses");
        problem.shared_limits[0].cap = 1_700;
        let v = validate(problem).expect("valid");
        let alone = each_pool_alone(&v);
        assert!(!super::alone_suffices(&v, &alone), "the quota binds");
        let spent = Some(std::time::Instant::now());
        let scopes: Vec<_> = (0..2).map(crate::solver::pool::Scope::full).collect();
        let outcomes = super::solve_group(&v, &scopes, &alone, &SolveOptions::default(), spent);
        let mut bound = 0.0;
        let mut plans = Vec::new();
        for outcome in outcomes {
            match outcome {
                super::PoolOutcome::Planned {
                    plan,
                    bound: b,
                    proven,
                } => {
                    assert!(!proven);
                    bound += b;
                    plans.push(plan);
                }
                _ => panic!("no plan"),
            }
        }
        assert_eq!(plans.len(), 2);
        assert!((bound - 60_480.0).abs() < 1e-6, "bound {bound}");
        assert!(super::keeps_limits(&v, &plans.iter().collect::<Vec<_>>()));
        let cost = crate::solver::plan::solution(&v, &plans).expected_cost;
        // $48 an hour more for west's small instances, for 48 hours.
        assert!((cost - 62_784.0).abs() < 1e-6, "cost {cost}");
    }

    /// Every pool of `v` solved by itself, as `run` does before a joint program.
    fn each_pool_alone(v: &crate::problem::Validated) -> Vec<super::PoolOutcome> {
        (0..v.problem().pools.len())
            .map(|p| {
                crate::solver::solve_pool(
                    v,
                    &crate::solver::pool::Scope::full(p),
                    &SolveOptions::default(),
                    None,
                    crate::solver::Limits::Dropped,
                )
            })
            .collect()
    }

    #[test]
    fn pools_alone_answer_a_group_whose_limits_do_not_bind() {
        let text = include_str!("../../../../tests/fixtures/problems/shared-quota.json");
        let mut problem = parse(text, Path::new("shared-quota.json")).expect("parses");
        for limit in &mut problem.shared_limits {
            limit.cap = 1_000_000;
        }
        let loose = validate(problem.clone()).expect("valid");
        assert!(super::alone_suffices(&loose, &each_pool_alone(&loose)));
        let solution = solve(&loose, &SolveOptions::default());
        assert_eq!(solution.status, Status::Optimal);
        assert!(
            (solution.expected_cost - 60_480.0).abs() < 1e-6,
            "{solution:?}"
        );

        // The example's own quota binds: the plans made alone break it.
        let tight =
            validate(parse(text, Path::new("shared-quota.json")).expect("parses")).expect("valid");
        assert!(!super::alone_suffices(&tight, &each_pool_alone(&tight)));
    }

    /// One pool with a cap on its block instances ($1,600 for 48 hours, at the `starts` given),
    /// its firm demand in GPUs (`[from, to, gpus]` segments) and on-demand at a price per
    /// instance-hour.
    fn capped_pool(
        cap: u32,
        cost_per_purchase: f64,
        on_demand: Option<f64>,
        starts: &str,
        firm: &str,
    ) -> crate::problem::Validated {
        let on_demand = on_demand.map_or(String::new(), |price| {
            format!(
                r#"{{"id": "east/on-demand", "pool": "east", "kind": "on_demand", "gpus_per_instance": 8,
                   "price_per_instance_hour": {price}}},"#
            )
        });
        let text = format!(
            r#"{{
             "schema": "gpucap.problem/v2",
             "start": "2027-01-04T00:00:00Z",
             "hours": 168,
             "pools": ["east"],
             "offers": [
              {on_demand}
              {{"id": "east/block", "pool": "east", "kind": "term", "gpus_per_instance": 8,
               "price_per_instance_hour": 0.0, "upfront_per_instance": 1600.0, "term_hours": 48,
               "starts": {starts}, "max_purchase_instances": 4,
               "cost_per_purchase": {cost_per_purchase}}}
             ],
             "scenarios": [
              {{"name": "expected", "probability": 1.0, "demand": {{"east": {{"firm": {firm}}}}}}}
             ],
             "shared_limits": [
              {{"id": "blocks", "unit": "instances", "cap": {cap},
               "offers": {{"east/block": 1}}, "reason": "the account's cap across blocks"}}
             ]
            }}"#
        );
        validate(parse(&text, Path::new("own-cap.json")).expect("parses")).expect("valid")
    }

    /// 10 instances needed in hours 0-96, where blocks beat on-demand ($50 an hour), with a cap
    /// of 6 block instances.
    fn own_cap(cap: u32, cost_per_purchase: f64, on_demand: bool) -> crate::problem::Validated {
        capped_pool(
            cap,
            cost_per_purchase,
            on_demand.then_some(50.0),
            r#"{"from": 0, "to": 168, "step": 24}"#,
            "[[0, 96, 80]]",
        )
    }

    /// The old way for a group of one pool: alone without its limits, then jointly.
    fn alone_then_group(v: &crate::problem::Validated) -> f64 {
        let alone = each_pool_alone(v);
        assert!(!super::alone_suffices(v, &alone), "the cap binds");
        let scopes = [crate::solver::pool::Scope::full(0)];
        let outcomes = super::solve_group(v, &scopes, &alone, &SolveOptions::default(), None);
        let plans: Vec<_> = outcomes
            .into_iter()
            .map(|o| match o {
                super::PoolOutcome::Planned { plan, proven, .. } => {
                    assert!(proven, "the group is proven optimal");
                    plan
                }
                _ => panic!("the group has a plan"),
            })
            .collect();
        crate::solver::plan::solution(v, &plans).expected_cost
    }

    #[test]
    fn a_pool_whose_limits_are_on_its_own_terms_and_likely_to_bind_is_solved_with_them() {
        let v = own_cap(6, 0.0, true);
        let scope = crate::solver::pool::Scope::full(0);
        assert!(super::own_term_limits(&v, std::slice::from_ref(&scope)));
        let data = crate::solver::pool::PoolData::new(&v, &scope);
        assert!(super::likely_to_bind(&v, &data), "10 instances at the peak");
        let solution = solve(&v, &SolveOptions::default());
        assert_eq!(solution.status, Status::Optimal, "{solution:?}");
        // 6 blocks in hours 0-48 and 48-96 ($19,200) and 4 on-demand for 96 hours ($19,200);
        // without the cap, 10 blocks twice ($32,000).
        assert!(
            (solution.expected_cost - 38_400.0).abs() < 1e-6,
            "{solution:?}"
        );
        assert!(
            (solution.expected_cost - alone_then_group(&v)).abs() < 1e-6,
            "the same optimum as alone and then as a group"
        );
        let held: u32 = solution
            .purchases
            .iter()
            .filter(|p| p.start_hour == 0)
            .map(|p| p.instances)
            .sum();
        assert_eq!(held, 6);
    }

    #[test]
    fn slope_scaling_keeps_a_pool_s_own_limits() {
        // $500 a purchase of at most 4 instances: 6 instances are 2 purchases per window.
        let v = own_cap(6, 500.0, true);
        let solution = solve(&v, &SolveOptions::default());
        assert!(
            matches!(solution.status, Status::Optimal | Status::Feasible),
            "{solution:?}"
        );
        let at_zero: u32 = solution
            .purchases
            .iter()
            .filter(|p| p.start_hour < 48)
            .map(|p| p.instances)
            .sum();
        assert!(at_zero <= 6, "{solution:?}");
        // 6 blocks a window in 2 pieces cost 2 × $1,000 more than by price: still cheaper than
        // on-demand for those 6 ($28,800 for 96 hours).
        assert!(
            (solution.expected_cost - 40_400.0).abs() < 1e-6,
            "{solution:?}"
        );
        assert!((solution.expected_cost - alone_then_group(&v)).abs() < 1e-6);
    }

    #[test]
    fn a_pool_that_its_own_limits_leave_short_says_so() {
        let v = own_cap(6, 0.0, false);
        let solution = solve(&v, &SolveOptions::default());
        assert_eq!(solution.status, Status::Infeasible, "{solution:?}");
        let message = solution.message.expect("a message");
        assert!(
            message
                .contains("pool `east` cannot be covered within the limits `blocks` (6 instances)"),
            "{message}"
        );
    }

    #[test]
    fn a_pool_whose_own_limits_bind_where_its_peak_does_not_reach_them_is_solved_again_with_them() {
        // 6 instances in hours 12-60, blocks starting at 0 or 24 only: at $200 an hour
        // on-demand, two overlapping blocks are cheapest ($19,200), holding 12 in hours 24-48;
        // with a cap of 6, one block and 12 hours of on-demand ($9,600 + $14,400).
        let v = capped_pool(6, 0.0, Some(200.0), "[0, 24]", "[[12, 60, 48]]");
        let data = crate::solver::pool::PoolData::new(&v, &crate::solver::pool::Scope::full(0));
        assert!(!super::likely_to_bind(&v, &data), "the peak is 6 instances");
        let solution = solve(&v, &SolveOptions::default());
        assert_eq!(solution.status, Status::Optimal, "{solution:?}");
        assert!(
            (solution.expected_cost - 24_000.0).abs() < 1e-6,
            "{solution:?}"
        );
        assert!((solution.expected_cost - alone_then_group(&v)).abs() < 1e-6);
    }
}
