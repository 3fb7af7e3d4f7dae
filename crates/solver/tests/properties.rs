//! Properties of `gpucap_solver::solver::solve` on small random problems:
//! - the optimum equals an independent brute-force reference (every combination of term
//!   purchases, and for each hour the cheapest on-demand and spot mix by dynamic programming);
//! - adding an offer never raises the cost;
//! - scaling every price scales the cost.
//!
//! Every solution also passes the independent checker.

#[path = "../../../benches/support/generate.rs"]
mod generate;
#[path = "../../../tests/solver_check/mod.rs"]
mod solver_check;

use std::collections::{BTreeMap, HashMap};

use gpucap_solver::problem::{
    Offer, OfferKind, PROBLEM_SCHEMA, PoolDemand, Problem, Scenario, Segment, Solution, StartRange,
    Starts, Status, validate,
};
use gpucap_solver::solver::{SolveOptions, solve};
use proptest::prelude::*;

/// Draws from the benchmark's seeded generator, so a failing case is reproducible from its seed
/// alone.
struct Rng(generate::Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(generate::Rng::new(seed))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn price(&mut self) -> f64 {
        (100 + self.below(1900)) as f64 / 100.0
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn random_offer(rng: &mut Rng, id: String, pool: &str, hours: u32) -> Offer {
    let roll = rng.below(100);
    let kind = if roll < 40 {
        OfferKind::OnDemand
    } else if roll < 65 {
        OfferKind::Spot
    } else {
        OfferKind::Term
    };
    let max_instances = if rng.chance(40) {
        None
    } else {
        Some(rng.below(4) as u32)
    };
    let mut offer = Offer {
        id,
        pool: pool.to_string(),
        kind,
        gpus_per_instance: rng.pick(&[1, 2, 4, 8]),
        price_per_instance_hour: rng.price(),
        overhead: None,
        upfront_per_instance: None,
        term_hours: None,
        starts: None,
        max_instances,
        min_purchase_instances: None,
        max_purchase_instances: None,
        cost_per_purchase: None,
        placement: None,
    };
    match kind {
        OfferKind::Spot => offer.overhead = Some(rng.below(30) as f64 / 100.0),
        OfferKind::Term => {
            offer.gpus_per_instance = rng.pick(&[4, 8]);
            offer.price_per_instance_hour = rng.price() / 2.0;
            offer.upfront_per_instance = Some(if rng.chance(50) {
                0.0
            } else {
                rng.below(50) as f64
            });
            offer.term_hours = Some(1 + rng.below(8) as u32);
            offer.starts = Some(if rng.chance(50) {
                let mut list: Vec<u32> = (0..1 + rng.below(2))
                    .map(|_| rng.below(u64::from(hours)) as u32)
                    .collect();
                list.sort_unstable();
                list.dedup();
                Starts::List(list)
            } else {
                let from = rng.below(u64::from(hours)) as u32;
                Starts::Range(StartRange {
                    from,
                    to: from + 1 + rng.below(4) as u32,
                    step: 1 + rng.below(3) as u32,
                })
            });
        }
        OfferKind::OnDemand => {}
    }
    offer
}

/// Keeps the brute force small: at most this many (term offer, start) pairs in a problem.
const MAX_TERM_CHOICES: usize = 4;

fn limit_term_choices(offers: &mut [Offer], hours: u32) {
    let choices = |o: &Offer| {
        o.starts
            .as_ref()
            .map_or(0, |s| solver_check::allowed_starts(s, hours).len())
    };
    // First fewer starts, then fewer term offers.
    for i in (0..offers.len()).rev() {
        if offers.iter().map(choices).sum::<usize>() <= MAX_TERM_CHOICES {
            return;
        }
        if let Some(starts) = &offers[i].starts {
            let first = solver_check::allowed_starts(starts, hours)
                .into_iter()
                .next();
            offers[i].starts = Some(Starts::List(first.into_iter().collect()));
        }
    }
    for i in (0..offers.len()).rev() {
        if offers.iter().map(choices).sum::<usize>() <= MAX_TERM_CHOICES {
            return;
        }
        let offer = &mut offers[i];
        if offer.kind == OfferKind::Term {
            offer.kind = OfferKind::OnDemand;
            (offer.upfront_per_instance, offer.term_hours, offer.starts) = (None, None, None);
        }
    }
}

fn random_segments(rng: &mut Rng, hours: u32, count: u64) -> Vec<Segment> {
    (0..count)
        .map(|_| {
            let from = rng.below(u64::from(hours)) as u32;
            let to = from + 1 + rng.below(u64::from(hours - from)) as u32;
            Segment(from, to, rng.below(9) as u32)
        })
        .collect()
}

/// A problem small enough for the brute-force reference.
fn random_problem(seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let hours = 1 + rng.below(10) as u32;
    let pools: Vec<String> = (0..1 + rng.below(2)).map(|p| format!("p{p}")).collect();
    let mut offers = Vec::new();
    for pool in &pools {
        if rng.chance(70) {
            // Usually something unlimited to fall back on.
            let mut od = random_offer(&mut rng, format!("{pool}/od"), pool, hours);
            od.kind = OfferKind::OnDemand;
            (
                od.overhead,
                od.upfront_per_instance,
                od.term_hours,
                od.starts,
                od.max_instances,
            ) = (None, None, None, None, None);
            offers.push(od);
        }
        for i in 0..1 + rng.below(3) {
            offers.push(random_offer(&mut rng, format!("{pool}/o{i}"), pool, hours));
        }
    }
    limit_term_choices(&mut offers, hours);
    let weights: &[f64] = rng.pick(&[&[1.0][..], &[0.5, 0.5][..], &[0.25, 0.75][..]]);
    let scenarios = weights
        .iter()
        .enumerate()
        .map(|(k, &probability)| {
            let demand: BTreeMap<String, PoolDemand> = pools
                .iter()
                .map(|pool| {
                    let (firm, flex) = (rng.below(3), rng.below(3));
                    (
                        pool.clone(),
                        PoolDemand {
                            firm: random_segments(&mut rng, hours, firm),
                            flex: random_segments(&mut rng, hours, flex),
                            gangs: Vec::new(),
                        },
                    )
                })
                .collect();
            let mut max_instances = BTreeMap::new();
            if rng.chance(20) {
                let hourly: Vec<&Offer> = offers
                    .iter()
                    .filter(|o| o.kind != OfferKind::Term)
                    .collect();
                if !hourly.is_empty() {
                    let o = hourly[rng.below(hourly.len() as u64) as usize];
                    max_instances.insert(o.id.clone(), rng.below(3) as u32);
                }
            }
            Scenario {
                name: format!("s{k}"),
                probability,
                demand,
                max_instances,
            }
        })
        .collect();
    let budget = rng.chance(20).then(|| rng.below(3000) as f64);
    Problem {
        schema: PROBLEM_SCHEMA.into(),
        start: "2027-01-04T00:00:00Z".into(),
        hours,
        period_minutes: None,
        pools,
        offers,
        scenarios,
        budget,
        shared_limits: Vec::new(),
    }
}

/// The cheapest whole on-demand and spot mix covering `firm` and `all` GPUs, by dynamic
/// programming over (firm covered, all covered), each capped at what is needed.
fn cheapest_hour(offers: &[(&Offer, Option<u32>)], firm: u64, all: u64) -> Option<f64> {
    let (fw, aw) = (firm as usize + 1, all as usize + 1);
    let mut best = vec![f64::INFINITY; fw * aw];
    best[0] = 0.0;
    for &(offer, limit) in offers {
        let g = u64::from(offer.gpus_per_instance);
        let most = limit.map_or(all.div_ceil(g), |l| u64::from(l).min(all.div_ceil(g)));
        let price = offer.price_per_instance_hour * (1.0 + offer.overhead.unwrap_or(0.0));
        let mut next = best.clone();
        for f in 0..fw {
            for a in 0..aw {
                let here = best[f * aw + a];
                if here.is_infinite() {
                    continue;
                }
                for n in 1..=most {
                    let nf = if offer.kind == OfferKind::OnDemand {
                        (f as u64 + n * g).min(firm)
                    } else {
                        f as u64
                    };
                    let na = (a as u64 + n * g).min(all);
                    let cell = &mut next[nf as usize * aw + na as usize];
                    *cell = cell.min(here + n as f64 * price);
                }
            }
        }
        best = next;
    }
    let cost = best[fw * aw - 1];
    cost.is_finite().then_some(cost)
}

/// The least expected cost over every combination of term purchases, or `None` when no
/// combination covers the demand.
fn reference(problem: &Problem) -> Option<f64> {
    let h = problem.hours as usize;
    let mut candidates: Vec<(usize, u32, u32)> = Vec::new();
    for (o, offer) in problem
        .offers
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kind == OfferKind::Term)
    {
        let peak = (0..problem.scenarios.len())
            .map(|k| {
                let (firm, flex) = solver_check::demand(problem, k, &offer.pool);
                (0..h).map(|t| firm[t] + flex[t]).max().unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        // More instances of one purchase than the peak needs can only cost more.
        let most = peak.div_ceil(u64::from(offer.gpus_per_instance)) as u32;
        let most = offer.max_instances.map_or(most, |m| m.min(most));
        for s in solver_check::allowed_starts(offer.starts.as_ref().expect("starts"), problem.hours)
        {
            candidates.push((o, s, most));
        }
    }
    let mut best: Option<f64> = None;
    let mut counts = vec![0u32; candidates.len()];
    let mut memo: HashMap<(usize, usize, u64, u64), Option<f64>> = HashMap::new();
    loop {
        if let Some(cost) = evaluate(problem, &candidates, &counts, &mut memo) {
            best = Some(best.map_or(cost, |b: f64| b.min(cost)));
        }
        // Next combination (odometer).
        let mut i = 0;
        loop {
            if i == counts.len() {
                return best;
            }
            if counts[i] < candidates[i].2 {
                counts[i] += 1;
                break;
            }
            counts[i] = 0;
            i += 1;
        }
    }
}

fn evaluate(
    problem: &Problem,
    candidates: &[(usize, u32, u32)],
    counts: &[u32],
    memo: &mut HashMap<(usize, usize, u64, u64), Option<f64>>,
) -> Option<f64> {
    let h = problem.hours as usize;
    let mut active = vec![vec![0u64; h]; problem.offers.len()];
    let mut cost = 0.0;
    for (&(o, s, _), &n) in candidates.iter().zip(counts) {
        let offer = &problem.offers[o];
        let term = offer.term_hours.expect("term");
        cost += f64::from(n)
            * (offer.price_per_instance_hour * f64::from(term)
                + offer.upfront_per_instance.unwrap_or(0.0));
        for a in &mut active[o][s as usize..(s as usize + term as usize).min(h)] {
            *a += u64::from(n);
        }
    }
    for (o, offer) in problem.offers.iter().enumerate() {
        if offer
            .max_instances
            .is_some_and(|m| active[o].iter().any(|&a| a > u64::from(m)))
        {
            return None;
        }
    }
    for (k, scenario) in problem.scenarios.iter().enumerate() {
        for (p, pool) in problem.pools.iter().enumerate() {
            let hourly: Vec<(&Offer, Option<u32>)> = problem
                .offers
                .iter()
                .filter(|o| &o.pool == pool && o.kind != OfferKind::Term)
                .map(|o| {
                    (
                        o,
                        scenario
                            .max_instances
                            .get(&o.id)
                            .copied()
                            .or(o.max_instances),
                    )
                })
                .collect();
            let (firm, flex) = solver_check::demand(problem, k, pool);
            for t in 0..h {
                let term: u64 = problem
                    .offers
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| &o.pool == pool && o.kind == OfferKind::Term)
                    .map(|(o, offer)| active[o][t] * u64::from(offer.gpus_per_instance))
                    .sum();
                let need = (
                    firm[t].saturating_sub(term),
                    (firm[t] + flex[t]).saturating_sub(term),
                );
                let hour = *memo
                    .entry((k, p, need.0, need.1))
                    .or_insert_with(|| cheapest_hour(&hourly, need.0, need.1));
                cost += scenario.probability * hour?;
            }
        }
    }
    Some(cost)
}

fn solved(problem: &Problem) -> Solution {
    let validated = validate(problem.clone()).unwrap_or_else(|e| panic!("{e}\n{problem:?}"));
    let solution = solve(
        &validated,
        &SolveOptions {
            threads: 1,
            ..SolveOptions::default()
        },
    );
    solver_check::assert_checks(problem, &solution);
    solution
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_optimum_equals_brute_force(seed in any::<u64>()) {
        let problem = random_problem(seed);
        let solution = solved(&problem);
        let covered = !(solution.status == Status::Infeasible && solution.purchases.is_empty()
            && solution.scenarios.iter().all(|s| s.usage.is_empty()) && solution.expected_cost == 0.0);
        match reference(&problem) {
            None => prop_assert!(!covered, "the reference finds no plan, the solver {:?}", solution.status),
            Some(best) => {
                prop_assert!(covered, "the reference covers the demand at {best}: {:?}", solution.message);
                prop_assert!(close(solution.expected_cost, best), "solver {} vs reference {best}", solution.expected_cost);
                let over = problem.budget.is_some_and(|b| best > b * (1.0 + 1e-9));
                let status = if over { Status::Infeasible } else { Status::Optimal };
                prop_assert_eq!(solution.status, status);
            }
        }
    }

    #[test]
    fn adding_an_offer_never_raises_the_cost(seed in any::<u64>()) {
        let mut problem = random_problem(seed);
        problem.budget = None;
        let before = solved(&problem);
        prop_assume!(before.status == Status::Optimal);
        let mut rng = Rng::new(seed ^ 0xA5A5);
        let pool = problem.pools[rng.below(problem.pools.len() as u64) as usize].clone();
        problem.offers.push(random_offer(&mut rng, "extra".into(), &pool, problem.hours));
        let after = solved(&problem);
        prop_assert_eq!(after.status, Status::Optimal);
        prop_assert!(after.expected_cost <= before.expected_cost * (1.0 + 1e-9) + 1e-9,
            "{} after adding an offer, {} before", after.expected_cost, before.expected_cost);
    }

    #[test]
    fn scaling_all_prices_scales_the_cost(seed in any::<u64>(), factor in prop::sample::select(vec![0.5, 2.0, 12.5])) {
        let mut problem = random_problem(seed);
        problem.budget = None;
        let before = solved(&problem);
        prop_assume!(before.status == Status::Optimal);
        for offer in &mut problem.offers {
            offer.price_per_instance_hour *= factor;
            offer.upfront_per_instance = offer.upfront_per_instance.map(|u| u * factor);
        }
        let after = solved(&problem);
        prop_assert_eq!(after.status, Status::Optimal);
        prop_assert!(close(after.expected_cost, factor * before.expected_cost),
            "{} after scaling by {factor}, {} before", after.expected_cost, before.expected_cost);
    }
}
