//! Pool plans → the `gpucap.solution/v1` document, with every cost recomputed from the
//! whole-number decisions (never taken from the MIP's floating-point objective).

use crate::problem::{
    GangPlacement, Purchase, SOLUTION_SCHEMA, SOLUTION_SCHEMA_V2, SOLUTION_SCHEMA_V3,
    ScenarioSolution, Solution, Status, Usage, Validated, pieces::fewest_pieces,
};

use super::model::PoolPlan;

/// The solution for `plans` (one per pool, in any order). Status and bound are the caller's.
pub(crate) fn solution(v: &Validated, plans: &[PoolPlan]) -> Solution {
    let problem = v.problem();
    let purchases: Vec<(usize, u32, u32)> = plans
        .iter()
        .flat_map(|p| p.purchases.iter().copied())
        .collect();
    // Back-to-back purchases bought again as fewer where that costs less (`chains`).
    let mut purchases = super::chains::merged(v, purchases);
    purchases.sort_unstable();
    let mut placements: Vec<(usize, usize)> = plans
        .iter()
        .flat_map(|p| p.placements.iter().copied())
        .collect();
    placements.sort_unstable();
    let mut first_restarts = std::collections::BTreeMap::new();
    // Folds from +0.0: an empty f64 sum is -0.0, which would print as `-0.0`.
    let v2 = problem.is_v2();
    // v2: a purchase is made of the fewest pieces its maximum allows (the cheapest split, see
    // `fewest_pieces`), each paying the offer's cost per purchase.
    let pieces = |o: usize, n: u32| {
        if v2 {
            fewest_pieces(n, v.piece_rules(o).1)
        } else {
            0
        }
    };
    let term_cost = purchases
        .iter()
        .map(|&(o, _, n)| {
            f64::from(n) * v.term_cost_per_instance(o)
                + f64::from(pieces(o, n)) * v.piece_rules(o).2
        })
        .fold(0.0, |a, b| a + b);
    let scenarios: Vec<ScenarioSolution> = problem
        .scenarios
        .iter()
        .enumerate()
        .map(|(k, scenario)| {
            let mut usage: Vec<(usize, Vec<_>)> = plans
                .iter()
                .filter_map(|p| p.usage.get(k))
                .flatten()
                .cloned()
                .collect();
            usage.sort_by_key(|(o, _)| *o);
            let cost = usage
                .iter()
                .map(|(o, segments)| {
                    let instance_hours: u64 = segments
                        .iter()
                        .map(|s| u64::from(s.len()) * u64::from(s.value()))
                        .sum();
                    instance_hours as f64 * v.hourly_cost(*o)
                })
                .fold(0.0, |a, b| a + b);
            let (runs_on, restarts) = super::runs::runs(v, k, &purchases, &usage, &placements);
            if k == 0 {
                first_restarts = restarts;
            }
            let usage = usage
                .into_iter()
                .map(|(o, segments)| Usage {
                    offer: problem.offers[o].id.clone(),
                    segments,
                })
                .collect();
            ScenarioSolution {
                name: scenario.name.clone(),
                cost,
                usage,
                runs_on,
            }
        })
        .collect();
    let expected_cost = problem
        .scenarios
        .iter()
        .zip(&scenarios)
        .map(|(s, k)| s.probability * k.cost)
        .fold(term_cost, |a, b| a + b);
    let purchases = purchases
        .into_iter()
        .map(|(o, start_hour, instances)| Purchase {
            offer: problem.offers[o].id.clone(),
            start_hour,
            instances,
            pieces: pieces(o, instances),
        })
        .collect();
    let gangs = placements
        .iter()
        .map(|&(g, q)| GangPlacement {
            gang: v.gangs().gangs[g].id.clone(),
            placement: v.gangs().placements[q].name.clone(),
            restarts: first_restarts.get(&g).copied().unwrap_or(0),
        })
        .collect();
    Solution {
        schema: if problem.is_v3() {
            SOLUTION_SCHEMA_V3
        } else if v2 {
            SOLUTION_SCHEMA_V2
        } else {
            SOLUTION_SCHEMA
        }
        .to_string(),
        status: Status::Feasible,
        expected_cost,
        bound: 0.0,
        term_cost,
        purchases,
        scenarios,
        gangs,
        message: None,
        out_of_time: false,
    }
}

/// The solution when demand cannot be covered: no plan, and why.
pub(crate) fn infeasible(v: &Validated, message: String) -> Solution {
    let mut solution = solution(v, &[]);
    solution.status = Status::Infeasible;
    solution.message = Some(message);
    solution
}
