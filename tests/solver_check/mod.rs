//! An independent checker of `gpucap.solution/v1`, `/v2` and `/v3` documents, written from
//! `docs/problem-v1.md`, `docs/problem-v2.md` and `docs/problem-v3.md` and not from the solver:
//! it expands everything hour by hour, recomputes every cost, and checks coverage, limits,
//! allowed starts, purchase pieces, shared limits, and that every gang runs whole, in one
//! placement, on capacity that is there and not drawn twice. Every solve in the solver tests
//! goes through it.
//!
//! Include with `mod solver_check;`.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use gpucap_solver::problem::{OfferKind, Problem, Solution, Starts, Status};

/// The GPUs per node of a placement: the `gpus_per_instance` of its offers.
fn node_size(problem: &Problem, placement: &str) -> Option<u64> {
    problem
        .offers
        .iter()
        .find(|o| o.placement.as_deref() == Some(placement))
        .map(|o| u64::from(o.gpus_per_instance))
}

/// Relative tolerance for recomputed costs (the spec's 1e-6).
const TOLERANCE: f64 = 1e-6;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// The allowed starts of a term offer, expanded as the spec says.
pub fn allowed_starts(starts: &Starts, hours: u32) -> BTreeSet<u32> {
    match starts {
        Starts::List(list) => list.iter().copied().collect(),
        Starts::Range(r) => {
            let mut out = BTreeSet::new();
            let mut s = u64::from(r.from);
            while s < u64::from(r.to.min(hours)) {
                out.insert(s as u32);
                s += u64::from(r.step);
            }
            out
        }
    }
}

/// GPUs needed per hour: `(firm, flex)` for a pool in a scenario.
pub fn demand(problem: &Problem, k: usize, pool: &str) -> (Vec<u64>, Vec<u64>) {
    let h = problem.hours as usize;
    let (mut firm, mut flex) = (vec![0u64; h], vec![0u64; h]);
    if let Some(d) = problem.scenarios[k].demand.get(pool) {
        for s in &d.firm {
            for t in s.0..s.1 {
                firm[t as usize] += u64::from(s.2);
            }
        }
        for s in &d.flex {
            for t in s.0..s.1 {
                flex[t as usize] += u64::from(s.2);
            }
        }
        // v3: a gang's GPUs are firm, `nodes` of its placements' node size.
        for g in &d.gangs {
            let size = g
                .placements
                .first()
                .and_then(|p| node_size(problem, p))
                .unwrap_or(0);
            for t in g.from..g.to {
                firm[t as usize] += u64::from(g.nodes) * size;
            }
        }
    }
    (firm, flex)
}

/// Checks `solution` against `problem`; returns every violation found.
pub fn check(problem: &Problem, solution: &Solution) -> Result<(), String> {
    let mut errors: Vec<String> = Vec::new();
    let mut fail = |e: String| errors.push(e);
    let v3 = problem.schema == "gpucap.problem/v3";
    let v2 = problem.schema == "gpucap.problem/v2" || v3;
    let schema = if v3 {
        "gpucap.solution/v3"
    } else if v2 {
        "gpucap.solution/v2"
    } else {
        "gpucap.solution/v1"
    };
    if solution.schema != schema {
        fail(format!("schema is {}, not {schema}", solution.schema));
    }
    let no_plan =
        solution.purchases.is_empty() && solution.scenarios.iter().all(|s| s.usage.is_empty());
    if solution.status == Status::Infeasible {
        if solution.message.as_deref().is_none_or(str::is_empty) {
            fail("infeasible without a message".into());
        }
        if no_plan && solution.expected_cost == 0.0 {
            return finish(errors);
        }
    }
    let h = problem.hours as usize;
    let offers: BTreeMap<&str, usize> = problem
        .offers
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id.as_str(), i))
        .collect();

    // First stage: purchases at allowed starts, within limits.
    let mut term_cost = 0.0;
    let mut seen = BTreeSet::new();
    let mut active = vec![vec![0u64; h]; problem.offers.len()];
    for p in &solution.purchases {
        let Some(&o) = offers.get(p.offer.as_str()) else {
            fail(format!("purchase of unknown offer {}", p.offer));
            continue;
        };
        let offer = &problem.offers[o];
        if offer.kind != OfferKind::Term {
            fail(format!("purchase of non-term offer {}", p.offer));
            continue;
        }
        if !seen.insert((o, p.start_hour)) {
            fail(format!("two entries for {} at {}", p.offer, p.start_hour));
        }
        if p.instances == 0 {
            fail(format!("zero purchase of {} listed", p.offer));
        }
        let starts = allowed_starts(
            offer.starts.as_ref().expect("term offers have starts"),
            problem.hours,
        );
        if !starts.contains(&p.start_hour) || p.start_hour >= problem.hours {
            fail(format!(
                "{} bought at {}, not an allowed start",
                p.offer, p.start_hour
            ));
        }
        let term = offer.term_hours.expect("term offers have term_hours");
        term_cost += f64::from(p.instances)
            * (offer.price_per_instance_hour * f64::from(term) * problem.period_hours()
                + offer.upfront_per_instance.unwrap_or(0.0));
        if v2 {
            // k pieces of min..=max instances each, each paying the cost per purchase.
            let k = u64::from(p.pieces);
            let n = u64::from(p.instances);
            let min = u64::from(offer.min_purchase_instances.unwrap_or(1));
            let max = offer.max_purchase_instances.map(u64::from);
            if k == 0 || min * k > n || max.is_some_and(|max| n > max * k) {
                fail(format!(
                    "{} at {}: {n} instances cannot be {k} pieces of {min}..={max:?}",
                    p.offer, p.start_hour
                ));
            }
            term_cost += k as f64 * offer.cost_per_purchase.unwrap_or(0.0);
        } else if p.pieces != 0 {
            fail(format!("{}: pieces in a v1 solution", p.offer));
        }
        let end = (u64::from(p.start_hour) + u64::from(term)).min(h as u64) as usize;
        for a in &mut active[o][(p.start_hour as usize).min(h)..end] {
            *a += u64::from(p.instances);
        }
    }
    for (o, offer) in problem.offers.iter().enumerate() {
        if let Some(max) = offer.max_instances
            && let Some(t) = (0..h).find(|&t| active[o][t] > u64::from(max))
        {
            fail(format!(
                "{}: {} instances active at hour {t}, limit {max}",
                offer.id, active[o][t]
            ));
        }
    }
    if !close(term_cost, solution.term_cost) {
        fail(format!(
            "term_cost {} but purchases cost {term_cost}",
            solution.term_cost
        ));
    }

    // Second stage, per scenario.
    if solution.scenarios.len() != problem.scenarios.len() {
        fail(format!(
            "{} scenarios in the solution, {} in the problem",
            solution.scenarios.len(),
            problem.scenarios.len()
        ));
        return finish(errors);
    }
    let mut expected = term_cost;
    for (k, (scenario, answer)) in problem
        .scenarios
        .iter()
        .zip(&solution.scenarios)
        .enumerate()
    {
        if scenario.name != answer.name {
            fail(format!(
                "scenario {k} is {} in the solution, {} in the problem",
                answer.name, scenario.name
            ));
        }
        let mut running = vec![vec![0u64; h]; problem.offers.len()];
        let mut cost = 0.0;
        for usage in &answer.usage {
            let Some(&o) = offers.get(usage.offer.as_str()) else {
                fail(format!("usage of unknown offer {}", usage.offer));
                continue;
            };
            let offer = &problem.offers[o];
            if offer.kind == OfferKind::Term {
                fail(format!("usage of term offer {}", usage.offer));
                continue;
            }
            let price = offer.price_per_instance_hour
                * (1.0 + offer.overhead.unwrap_or(0.0))
                * problem.period_hours();
            for s in &usage.segments {
                if !(s.0 < s.1 && s.1 <= problem.hours && s.2 > 0) {
                    fail(format!("{}: bad segment {s:?}", usage.offer));
                    continue;
                }
                for t in s.0..s.1 {
                    if running[o][t as usize] > 0 {
                        fail(format!("{}: overlapping segments at hour {t}", usage.offer));
                    }
                    running[o][t as usize] += u64::from(s.2);
                }
                cost += f64::from(s.1 - s.0) * f64::from(s.2) * price;
            }
            let limit = scenario
                .max_instances
                .get(&offer.id)
                .copied()
                .or(offer.max_instances);
            if let Some(limit) = limit
                && let Some(t) = (0..h).find(|&t| running[o][t] > u64::from(limit))
            {
                fail(format!(
                    "{} in {}: {} instances at hour {t}, limit {limit}",
                    offer.id, scenario.name, running[o][t]
                ));
            }
        }
        for limit in &problem.shared_limits {
            for t in 0..h {
                let used: u64 = limit
                    .offers
                    .iter()
                    .filter_map(|(id, &w)| {
                        let &o = offers.get(id.as_str())?;
                        let n = match problem.offers[o].kind {
                            OfferKind::Term => active[o][t],
                            _ => running[o][t],
                        };
                        Some(u64::from(w) * n)
                    })
                    .sum();
                if used > limit.cap {
                    fail(format!(
                        "shared limit {} in {} at hour {t}: {used} {} over the cap {}",
                        limit.id, scenario.name, limit.unit, limit.cap
                    ));
                    break;
                }
            }
        }
        if !close(cost, answer.cost) {
            fail(format!(
                "scenario {} costs {} but its usage costs {cost}",
                scenario.name, answer.cost
            ));
        }
        expected += scenario.probability * cost;
        if v3 {
            check_gangs(problem, solution, k, &running, &mut fail);
        }
        for pool in &problem.pools {
            let (firm, flex) = demand(problem, k, pool);
            for t in 0..h {
                let mut firm_cover = 0u64;
                let mut all_cover = 0u64;
                for (o, offer) in problem
                    .offers
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| &o.pool == pool)
                {
                    let g = u64::from(offer.gpus_per_instance);
                    match offer.kind {
                        OfferKind::Term => {
                            firm_cover += g * active[o][t];
                            all_cover += g * active[o][t];
                        }
                        OfferKind::OnDemand => {
                            firm_cover += g * running[o][t];
                            all_cover += g * running[o][t];
                        }
                        OfferKind::Spot => all_cover += g * running[o][t],
                    }
                }
                if firm_cover < firm[t] || all_cover < firm[t] + flex[t] {
                    fail(format!(
                        "{pool} in {} at hour {t}: firm {} covered {firm_cover}, all {} covered {all_cover}",
                        scenario.name,
                        firm[t],
                        firm[t] + flex[t]
                    ));
                    break;
                }
            }
        }
    }
    if !close(expected, solution.expected_cost) {
        fail(format!(
            "expected_cost {} but recomputed {expected}",
            solution.expected_cost
        ));
    }
    if solution.bound > solution.expected_cost * (1.0 + 1e-9) + 1e-9 {
        fail(format!(
            "bound {} above the cost {}",
            solution.bound, solution.expected_cost
        ));
    }
    if solution.status == Status::Optimal
        && solution.expected_cost - solution.bound
            > TOLERANCE * solution.expected_cost.abs().max(1e-9)
    {
        fail(format!(
            "optimal with bound {} and cost {}",
            solution.bound, solution.expected_cost
        ));
    }
    match (problem.budget, solution.status) {
        (Some(b), Status::Optimal | Status::Feasible)
            if solution.expected_cost > b * (1.0 + 1e-9) =>
        {
            fail(format!(
                "cost {} over the budget {b}",
                solution.expected_cost
            ));
        }
        (Some(b), Status::Infeasible) if solution.expected_cost <= b => {
            fail(format!(
                "infeasible, yet the plan given costs {} within the budget {b}",
                solution.expected_cost
            ));
        }
        _ => {}
    }
    finish(errors)
}

/// What a gang runs on in one hour: instances per `(offer, start of the purchase)`.
type Instances = BTreeMap<(usize, Option<u32>), u32>;

/// v3, scenario k: every gang has one placement among its own; in every hour of its run its
/// `runs_on` hold exactly its nodes, all of that placement's on-demand or term offers, a term
/// run on a purchase held then; no instrument (an on-demand offer, or a purchase) gives gangs
/// more instances than are in use or held; the restarts of the first scenario are the hours
/// where a gang's instruments change.
fn check_gangs(
    problem: &Problem,
    solution: &Solution,
    k: usize,
    running: &[Vec<u64>],
    fail: &mut impl FnMut(String),
) {
    let h = problem.hours as usize;
    let scenario = &problem.scenarios[k];
    let runs = &solution.scenarios[k].runs_on;
    let offer_index: BTreeMap<&str, usize> = problem
        .offers
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id.as_str(), i))
        .collect();
    let mut gangs = BTreeMap::new();
    for d in scenario.demand.values() {
        for g in &d.gangs {
            gangs.insert(g.id.as_str(), g);
        }
    }
    // Instances drawn by gangs per instrument `(offer, start)` and hour.
    let mut drawn: BTreeMap<(usize, Option<u32>), Vec<u64>> = BTreeMap::new();
    // Per gang and hour, its instruments and instances.
    let mut held: BTreeMap<&str, Vec<Instances>> = BTreeMap::new();
    for run in runs {
        let Some(gang) = gangs.get(run.gang.as_str()) else {
            fail(format!(
                "{}: runs_on names gang {}, which is not in it",
                scenario.name, run.gang
            ));
            continue;
        };
        let Some(placement) = solution.gangs.iter().find(|p| p.gang == run.gang) else {
            fail(format!("gang {} has runs but no placement", run.gang));
            continue;
        };
        let Some(&o) = offer_index.get(run.offer.as_str()) else {
            fail(format!(
                "gang {} runs on unknown offer {}",
                run.gang, run.offer
            ));
            continue;
        };
        let offer = &problem.offers[o];
        if offer.placement.as_deref() != Some(placement.placement.as_str()) {
            fail(format!(
                "gang {} runs on {}, outside its placement {}",
                run.gang, run.offer, placement.placement
            ));
        }
        if !(gang.from <= run.from && run.from < run.to && run.to <= gang.to) || run.instances == 0
        {
            fail(format!(
                "gang {}: run {run:?} outside its hours [{}, {})",
                run.gang, gang.from, gang.to
            ));
            continue;
        }
        match (offer.kind, run.start_hour) {
            (OfferKind::OnDemand, None) => {}
            (OfferKind::Term, Some(start)) => {
                let term = offer.term_hours.unwrap_or(0);
                let bought = solution
                    .purchases
                    .iter()
                    .any(|p| p.offer == run.offer && p.start_hour == start);
                if !bought
                    || run.from < start
                    || u64::from(run.to) > u64::from(start) + u64::from(term)
                {
                    fail(format!(
                        "gang {}: run {run:?} is not on a purchase held then",
                        run.gang
                    ));
                }
            }
            _ => fail(format!(
                "gang {}: run {run:?} on a spot offer, or a term offer without its purchase",
                run.gang
            )),
        }
        let hours = held
            .entry(run.gang.as_str())
            .or_insert_with(|| vec![BTreeMap::new(); h]);
        let used = drawn
            .entry((o, run.start_hour))
            .or_insert_with(|| vec![0; h]);
        for t in run.from..run.to {
            *hours[t as usize].entry((o, run.start_hour)).or_default() += run.instances;
            used[t as usize] += u64::from(run.instances);
        }
    }
    for (&(o, start), used) in &drawn {
        let offer = &problem.offers[o];
        for t in 0..h {
            let there = match start {
                None => running[o][t],
                Some(s) => {
                    let end = u64::from(s) + u64::from(offer.term_hours.unwrap_or(0));
                    let inside = u64::from(s) <= t as u64 && (t as u64) < end;
                    solution
                        .purchases
                        .iter()
                        .filter(|p| inside && p.offer == offer.id && p.start_hour == s)
                        .map(|p| u64::from(p.instances))
                        .sum::<u64>()
                }
            };
            if used[t] > there {
                fail(format!(
                    "{} in {} at hour {t}: gangs run on {} instances of {}{}, {there} there",
                    scenario.name,
                    offer.id,
                    used[t],
                    offer.id,
                    start.map(|s| format!(" bought at {s}")).unwrap_or_default()
                ));
                break;
            }
        }
    }
    for (id, gang) in &gangs {
        let placement = solution
            .gangs
            .iter()
            .filter(|p| p.gang == *id)
            .collect::<Vec<_>>();
        let [placement] = placement.as_slice() else {
            fail(format!(
                "gang {id} has {} placements in the solution",
                placement.len()
            ));
            continue;
        };
        if !gang.placements.contains(&placement.placement) {
            fail(format!(
                "gang {id} is placed in {}, not one of its own",
                placement.placement
            ));
        }
        let empty = vec![BTreeMap::new(); h];
        let hours = held.get(id).unwrap_or(&empty);
        for t in gang.from..gang.to {
            let n: u32 = hours[t as usize].values().sum();
            if n != gang.nodes {
                fail(format!(
                    "gang {id} in {} at hour {t}: {n} nodes, needs {}",
                    scenario.name, gang.nodes
                ));
                break;
            }
        }
        if k == 0 {
            let restarts = (gang.from + 1..gang.to)
                .filter(|&t| hours[t as usize] != hours[t as usize - 1])
                .count();
            if restarts != placement.restarts as usize {
                fail(format!(
                    "gang {id}: {} restarts reported, its runs change {restarts} times",
                    placement.restarts
                ));
            }
        }
    }
}

fn finish(errors: Vec<String>) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// Panics with the violations, and the problem, when `solution` does not check.
pub fn assert_checks(problem: &Problem, solution: &Solution) {
    if let Err(e) = check(problem, solution) {
        panic!(
            "solution fails the checker:\n{e}\nproblem: {}\nsolution: {}",
            serde_json::to_string(problem).unwrap_or_default(),
            serde_json::to_string(solution).unwrap_or_default()
        );
    }
}
