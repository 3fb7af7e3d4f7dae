//! What simpler buying strategies would cost on the same problem, for comparison with the
//! optimum:
//!
//! - **all on-demand**: every hour on the cheapest on-demand offers, no terms, no spot;
//! - **cheapest-now**: no terms; each hour the cheapest on-demand and spot mix (spot for flex
//!   demand where it is cheaper), which is what SkyPilot-style tools do;
//! - **reserve-the-peak**: per pool, the term offer with the lowest price per GPU-hour of the
//!   horizon it can cover, bought back to back (each purchase at the first allowed start after
//!   the previous one ends, while demand remains) in enough instances for the pool's peak
//!   demand over all scenarios (capped at its `max_instances`); the rest of each hour at the
//!   cheapest on-demand and spot mix.
//!
//! Each is solved exactly within its own rules by the solver's machinery on a restricted
//! problem; the budget does not apply.

use crate::problem::{OfferKind, Solution, Status, Validated};

use super::pool::{Scope, Terms};
use super::{SolveOptions, run};

#[derive(Debug, Clone)]
pub struct Baseline {
    /// `all-on-demand`, `cheapest-now` or `reserve-the-peak`.
    pub name: &'static str,
    /// `None` when the strategy cannot cover the demand (`solution.message` says why).
    pub expected_cost: Option<f64>,
    /// The strategy's plan (`feasible`), or `infeasible` with a message.
    pub solution: Solution,
}

#[derive(Debug, Clone)]
pub struct Baselines {
    pub all_on_demand: Baseline,
    pub cheapest_now: Baseline,
    pub reserve_the_peak: Baseline,
}

impl Baselines {
    pub fn iter(&self) -> impl Iterator<Item = &Baseline> {
        [
            &self.all_on_demand,
            &self.cheapest_now,
            &self.reserve_the_peak,
        ]
        .into_iter()
    }
}

pub fn baselines(v: &Validated, options: &SolveOptions) -> Baselines {
    Baselines {
        all_on_demand: all_on_demand(v, options),
        cheapest_now: cheapest_now(v, options),
        reserve_the_peak: reserve_the_peak(v, options),
    }
}

pub fn all_on_demand(v: &Validated, options: &SolveOptions) -> Baseline {
    let scopes = pools(v).map(|pool| Scope {
        pool,
        on_demand: true,
        spot: false,
        terms: Terms::Fixed(owned(v, pool)),
        ..Scope::full(pool)
    });
    baseline("all-on-demand", v, scopes.collect(), options)
}

pub fn cheapest_now(v: &Validated, options: &SolveOptions) -> Baseline {
    let scopes = pools(v).map(|pool| Scope {
        pool,
        on_demand: true,
        spot: true,
        terms: Terms::Fixed(owned(v, pool)),
        ..Scope::full(pool)
    });
    baseline("cheapest-now", v, scopes.collect(), options)
}

pub fn reserve_the_peak(v: &Validated, options: &SolveOptions) -> Baseline {
    let scopes = pools(v).map(|pool| Scope {
        pool,
        on_demand: true,
        spot: true,
        terms: Terms::Fixed(
            owned(v, pool)
                .into_iter()
                .chain(peak_purchases(v, pool))
                .collect(),
        ),
        ..Scope::full(pool)
    });
    baseline("reserve-the-peak", v, scopes.collect(), options)
}

/// Capacity already owned: term offers that cost nothing, with a limit and a single start
/// (how the planner writes reservations and commitments found in state). Every baseline uses
/// them in full, as the plan may; a free purchase never costs anything.
fn owned(v: &Validated, pool: usize) -> Vec<(usize, u32, u32)> {
    let problem = v.problem();
    (0..problem.offers.len())
        .filter(|&o| {
            v.pool_of(o) == pool
                && problem.offers[o].kind == OfferKind::Term
                && v.term_cost_per_instance(o) == 0.0
                && v.starts(o).len() == 1
        })
        .filter_map(|o| Some((o, v.starts(o)[0], problem.offers[o].max_instances?)))
        .collect()
}

fn pools(v: &Validated) -> impl Iterator<Item = usize> {
    0..v.problem().pools.len()
}

fn baseline(
    name: &'static str,
    v: &Validated,
    scopes: Vec<Scope>,
    options: &SolveOptions,
) -> Baseline {
    let mut solution = run(v, scopes, options).into_solution(v);
    let expected_cost = match solution.status {
        Status::Infeasible => None,
        _ => Some(solution.expected_cost),
    };
    if solution.status != Status::Infeasible {
        solution.status = Status::Feasible;
        solution.bound = 0.0;
    }
    Baseline {
        name,
        expected_cost,
        solution,
    }
}

/// Reserve-the-peak's purchases in `pool`: `(offer, start, instances)`.
fn peak_purchases(v: &Validated, pool: usize) -> Vec<(usize, u32, u32)> {
    let problem = v.problem();
    let mut peak = 0u64;
    let mut last_demand = 0u32;
    for k in 0..problem.scenarios.len() {
        let d = v.demand(k, pool);
        let gangs = v.gang_gpus(k, pool);
        let mut changes: Vec<(u32, i64)> = d
            .firm
            .iter()
            .chain(&d.flex)
            .chain(&gangs)
            .filter(|s| s.value() > 0)
            .flat_map(|s| {
                [
                    (s.from(), i64::from(s.value())),
                    (s.to(), -i64::from(s.value())),
                ]
            })
            .collect();
        changes.sort_unstable();
        let mut level = 0i64;
        for (t, delta) in changes {
            level += delta;
            peak = peak.max(level as u64);
            last_demand = last_demand.max(t);
        }
    }
    // Per GPU-hour of the horizon the term can cover from its first start: a 3-year
    // commitment is no bargain over a 1-year horizon.
    let per_gpu_hour = |o: usize| {
        let def = &problem.offers[o];
        let first = v.starts(o).first().copied().unwrap_or(0);
        let covered = def
            .term_hours
            .unwrap_or(1)
            .min(problem.hours - first)
            .max(1);
        v.term_cost_per_instance(o) / (f64::from(def.gpus_per_instance) * f64::from(covered))
    };
    let best = (0..problem.offers.len())
        .filter(|&o| v.pool_of(o) == pool && problem.offers[o].kind == OfferKind::Term)
        .filter(|&o| problem.offers[o].max_instances != Some(0) && !v.starts(o).is_empty())
        // Owned capacity (free) is used by every baseline already; the peak is bought.
        .filter(|&o| v.term_cost_per_instance(o) > 0.0)
        .min_by(|&a, &b| per_gpu_hour(a).total_cmp(&per_gpu_hour(b)).then(a.cmp(&b)));
    let Some(o) = best.filter(|_| peak > 0) else {
        return Vec::new();
    };
    let def = &problem.offers[o];
    let wanted = peak.div_ceil(u64::from(def.gpus_per_instance));
    let instances = u32::try_from(wanted)
        .unwrap_or(u32::MAX)
        .min(def.max_instances.unwrap_or(u32::MAX));
    let term_hours = def.term_hours.unwrap_or(1);
    let mut purchases = Vec::new();
    let mut next = 0u32;
    for &s in v.starts(o) {
        if s >= last_demand {
            break;
        }
        if s >= next {
            purchases.push((o, s, instances));
            next = s.saturating_add(term_hours);
        }
    }
    purchases
}
