//! A first plan with few purchases, for a pool whose purchases carry a cost per purchase or a
//! minimum size (v2 purchase pieces).
//!
//! A cost per purchase is a fixed charge, and a fixed charge makes the relaxation weak: it pays
//! the charge only in proportion to how full a piece is, so branch and bound alone finds plans
//! no better than the plan by price plus its charges for minutes. Before branch and bound, the
//! charge is therefore spread over the instances as a price per instance, re-estimated from the
//! last plan (dynamic slope scaling, Kim and Pardalos, Operations Research Letters 24, 1999): a
//! purchase of n instances in k pieces costs `charge·k/n` more per instance in the next round,
//! so small purchases grow expensive and the next plan buys fewer, larger ones. Each round is
//! a solve without pieces (fast: its relaxation is almost always whole), and each round's
//! purchases are priced exactly, charges included, by the model with pieces. The cheapest is
//! branch and bound's start; branch and bound then looks only for cheaper plans, and its bound
//! is what proves how close the plan is.

use std::collections::HashSet;
use std::time::Instant;

use super::mip::{self, MipLimits, MipStatus};
use super::model::{Mode, PoolModel};
use super::pool::PoolData;

/// Most rounds of slope scaling.
const MAX_ROUNDS: usize = 10;

/// How often the rounds may settle on a plan (see [`first_plan`]).
const SETTLES: usize = 2;

/// Branch and bound's budget on a model with costs per purchase, in nodes times columns. From
/// the slope-scaling plan it rarely finds a cheaper one (none in 2,000 nodes and 111 s on the
/// quickstart's largest pool, 19,594 columns, where 25 nodes take 7.5 s; measured 2026-11-25),
/// so it is kept short: 2 nodes there, hundreds on a small pool, where it usually proves the
/// optimum. A budget in nodes rather than seconds gives the same plan on every machine.
const NODE_WORK: usize = 50_000;

/// The nodes branch and bound may use on a model of `columns` columns with costs per purchase.
pub(crate) fn node_limit(columns: usize) -> u32 {
    u32::try_from(NODE_WORK / columns.max(1)).unwrap_or(u32::MAX)
}

/// Fewer nodes than this cannot improve on a first plan: a model so large is not searched
/// jointly when its parts have plans of their own (`super::coupled`).
pub(crate) const FEW_NODES: u32 = 10;

/// What slope scaling found: a feasible point of the model with pieces (values for its
/// columns), its cost, and a proven lower bound on that model's optimum (the first round's:
/// the same plan without the costs per purchase can only cost less).
#[derive(Debug, Clone)]
pub(crate) struct FirstPlan {
    pub values: Vec<f64>,
    pub cost: f64,
    pub bound: f64,
}

/// A feasible point of `model` to start branch and bound from ([`FirstPlan`]). `None` without
/// pieces, or when no point was found.
///
/// Round 0 is the plan by price alone. After it, a purchase made costs its charge over its
/// instances more per instance, and a purchase not made its whole charge (as if of one
/// instance): the next plan keeps to the purchases made, grows them where that costs less than
/// new ones, and drops those not worth their charge. Prices only rise, so the rounds settle.
/// When a plan repeats, the purchases not made cost half as much as before, so that later
/// rounds may try them again, [`SETTLES`] times in all.
///
/// `constrain` adds to the model without pieces the rows `model` has beyond its own (the
/// limits on the pool's terms, `super::coupled::add_own_limits`), so that every round keeps
/// them.
pub(crate) fn first_plan(
    data: &PoolData,
    model: &PoolModel,
    limits: MipLimits,
    constrain: &dyn Fn(&PoolData, &mut PoolModel),
) -> Option<FirstPlan> {
    if !data.has_pieces() {
        return None;
    }
    let started = Instant::now();
    let deadline = limits.time_limit.map(|t| started + t);
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let mut plain_data = data.clone();
    for t in &mut plain_data.terms {
        t.pieces = None;
    }
    let mut plain = PoolModel::build(&plain_data, Mode::Cost);
    constrain(&plain_data, &mut plain);
    let price = plain.mip.cost.clone();
    let columns = plain.purchase_columns().to_vec();
    // Per purchase column, the charge per instance added in this round.
    let mut slope: Vec<Vec<f64>> = columns.iter().map(|cols| vec![0.0; cols.len()]).collect();
    let mut seen = HashSet::new();
    let mut settled = 0;
    let mut best: Option<(Vec<f64>, f64)> = None;
    let mut bound = f64::NEG_INFINITY;
    // v3: the gangs' placements of the first round, held in the later ones. Choosing them is
    // what makes a round slow (2.2 s against 0.34 s with them held on the quickstart's largest
    // pool, measured 2026-11-28), and the cost per purchase rarely moves a gang: branch and
    // bound, from the best round, is free to.
    let mut placements: Option<Vec<(usize, usize)>> = None;
    for round in 0..MAX_ROUNDS {
        if left().is_some_and(|l| l.is_zero()) {
            break;
        }
        for (t, cols) in columns.iter().enumerate() {
            for (s, &c) in cols.iter().enumerate() {
                plain.mip.cost[c] = price[c] + slope[t][s];
            }
        }
        let limits = MipLimits {
            time_limit: left(),
            // Rounds without pieces are whole at the root, but for gangs' placements.
            cuts: data.has_gangs(),
            cutoff: None,
            node_limit: None,
            ..limits
        };
        let solved = mip::solve(&plain.mip, limits);
        if solved.values.is_empty() {
            break;
        }
        if round == 0 {
            bound = solved.bound;
        }
        if data.has_gangs() && placements.is_none() {
            let held = plain.placements(&solved.values);
            let mut mip = std::mem::take(&mut plain.mip);
            plain.hold_placements(&mut mip, &held);
            plain.mip = mip;
            placements = Some(held);
        }
        let chosen = plain.chosen(&solved.values);
        let mut made: Vec<Vec<Option<u32>>> = columns.iter().map(|c| vec![None; c.len()]).collect();
        for &(t, s, n) in &chosen {
            made[t][s] = Some(n);
        }
        if !seen.insert(chosen.clone()) {
            settled += 1;
            if settled == SETTLES {
                break;
            }
            for (slopes, made) in slope.iter_mut().zip(&made) {
                for (slope, made) in slopes.iter_mut().zip(made) {
                    if made.is_none() {
                        *slope /= 2.0;
                    }
                }
            }
            continue;
        }
        let mut fixed = model.fixed_to(&chosen);
        if let Some(held) = &placements {
            model.hold_placements(&mut fixed, held);
        }
        let point = mip::solve(
            &fixed,
            MipLimits {
                time_limit: left(),
                ..limits
            },
        );
        if matches!(point.status, MipStatus::Optimal | MipStatus::Feasible) {
            let cost = fixed.objective(&point.values);
            tracing::debug!(round, purchases = chosen.len(), cost, "slope scaling");
            if best.as_ref().is_none_or(|(_, b)| cost < *b) {
                best = Some((point.values, cost));
            }
        }
        for (t, term) in data.terms.iter().enumerate() {
            let Some(p) = term.pieces else { continue };
            for (s, start) in term.starts.iter().enumerate() {
                let per_instance = match made[t][s] {
                    Some(n) => {
                        let n = n.max(p.min.max(1));
                        p.cost * f64::from(n.div_ceil(p.largest(start))) / f64::from(n)
                    }
                    None if round == 0 => p.cost,
                    None => continue,
                };
                slope[t][s] = slope[t][s].max(per_instance);
            }
        }
    }
    tracing::debug!(
        seconds = started.elapsed().as_secs_f64(),
        cost = best.as_ref().map(|b| b.1),
        bound,
        "a first plan by slope scaling"
    );
    best.map(|(values, cost)| FirstPlan {
        values,
        cost,
        bound,
    })
}

#[cfg(test)]
mod tests {
    use crate::problem::{Status, parse, validate};
    use crate::solver::mip::MipLimits;
    use crate::solver::model::{Mode, PoolModel};
    use crate::solver::pool::{PoolData, Scope};
    use crate::solver::{SolveOptions, solve};

    use super::first_plan;

    /// One pool: 4 instances all week, one more on days 1-2 and one more on day 4, from blocks
    /// of 1, 2 or 7 days (cheaper per hour the longer) or on demand, with `cost` per purchase.
    fn staircase(cost: f64) -> crate::problem::Validated {
        let text = format!(
            r#"{{
             "schema": "gpucap.problem/v2",
             "start": "2027-01-04T00:00:00Z",
             "hours": 168,
             "pools": ["p"],
             "offers": [
              {{"id": "od", "pool": "p", "kind": "on_demand", "gpus_per_instance": 8,
               "price_per_instance_hour": 60.0}},
              {{"id": "day", "pool": "p", "kind": "term", "gpus_per_instance": 8,
               "price_per_instance_hour": 40.0, "term_hours": 24,
               "starts": {{"from": 0, "to": 168, "step": 24}}, "cost_per_purchase": {cost}}},
              {{"id": "two-days", "pool": "p", "kind": "term", "gpus_per_instance": 8,
               "price_per_instance_hour": 39.0, "term_hours": 48,
               "starts": {{"from": 0, "to": 168, "step": 24}}, "cost_per_purchase": {cost}}},
              {{"id": "week", "pool": "p", "kind": "term", "gpus_per_instance": 8,
               "price_per_instance_hour": 36.0, "term_hours": 168,
               "starts": {{"from": 0, "to": 168, "step": 24}}, "cost_per_purchase": {cost}}}
             ],
             "scenarios": [
              {{"name": "expected", "probability": 1.0, "demand": {{
               "p": {{"firm": [[0, 24, 32], [24, 72, 40], [72, 96, 32], [96, 120, 40],
                             [120, 168, 32]]}}
              }}}}
             ]
            }}"#
        );
        validate(parse(&text, std::path::Path::new("staircase.json")).expect("parses"))
            .expect("valid")
    }

    #[test]
    fn a_cost_per_purchase_drops_the_purchases_not_worth_it() {
        let by_price = solve(&staircase(0.0), &SolveOptions::default());
        assert_eq!(by_price.status, Status::Optimal);
        // By price: the week for 4 instances ($24,192), two days ($1,872) and one day ($960)
        // for the fifth.
        assert_eq!(by_price.purchases.len(), 3, "{:?}", by_price.purchases);
        assert!((by_price.expected_cost - 27_024.0).abs() < 1e-6);
        // At $500 a purchase, the day's block saves $480 over on demand, less than its
        // charge: the fifth instance runs on demand that day ($1,440), and the plan costs
        // $28,504 with its two charges, against $28,524 for the plan by price with three.
        let charged = solve(&staircase(500.0), &SolveOptions::default());
        assert!(
            matches!(charged.status, Status::Optimal | Status::Feasible),
            "{:?}",
            charged.message
        );
        assert_eq!(charged.purchases.len(), 2, "{:?}", charged.purchases);
        assert!(
            (charged.expected_cost - 28_504.0).abs() < 1e-6,
            "{}",
            charged.expected_cost
        );
        assert!(charged.bound <= charged.expected_cost + 1e-6);
    }

    #[test]
    fn slope_scaling_itself_finds_the_plan_with_fewer_purchases() {
        let v = staircase(500.0);
        let data = PoolData::new(&v, &Scope::full(0));
        let model = PoolModel::build(&data, Mode::Cost);
        let limits = MipLimits::plain(None);
        let first = first_plan(&data, &model, limits, &|_, _| {}).expect("a first plan");
        assert!(
            (first.cost + model.constant - 28_504.0).abs() < 1e-6,
            "{}",
            first.cost
        );
        assert_eq!(model.chosen(&first.values).len(), 2);
        // The plan by price, without charges, bounds it: $27,024.
        assert!(
            (first.bound + model.constant - 27_024.0).abs() < 1e-6,
            "{}",
            first.bound
        );
        // Without pieces there is nothing to spread.
        let plain = staircase(0.0);
        let data = PoolData::new(&plain, &Scope::full(0));
        let model = PoolModel::build(&data, Mode::Cost);
        assert!(first_plan(&data, &model, limits, &|_, _| {}).is_none());
    }
}
