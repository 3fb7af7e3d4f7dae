//! Generated `gpucap.problem/v3` problems with gangs, small enough for HiGHS to prove in
//! seconds: one or two pools, each with two placements of 8-GPU on-demand and block offers,
//! 1-GPU on-demand and 8-GPU spot offers that only fluid work may use, fluid firm and flex
//! demand, and gangs of 1 to 6 nodes that may run in one or both placements. A second scenario
//! slips the gangs and grows them; a quota may cap on-demand across pools, and blocks may
//! cost something per purchase. From a seed, the same problem on every machine.

#![allow(dead_code)]

use std::collections::BTreeMap;

use gpucap_solver::problem::{
    Gang, OfferKind, PROBLEM_SCHEMA_V3, PoolDemand, Problem, Scenario, Segment, SharedLimit,
    StartRange, Starts,
};

// The includer also includes `generate.rs` as `generate`, for its seeded generator.
use super::generate::{Rng, offer};

/// The problem of `seed`.
pub fn problem(seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let hours = [72, 96, 120, 168][rng.range(0, 4) as usize];
    let pools: Vec<String> = (0..rng.range(1, 3)).map(|p| format!("pool{p}")).collect();
    let charged = rng.chance(0.5);
    let mut offers = Vec::new();
    let mut on_demand = BTreeMap::new();
    for pool in &pools {
        for place in ["east", "west"] {
            let placement = format!("{pool}/{place}/8x");
            let price = rng.range(40, 60) as f64;
            let mut od = offer(
                format!("{pool}/{place}/od"),
                pool,
                OfferKind::OnDemand,
                8,
                price,
            );
            od.placement = Some(placement.clone());
            if rng.chance(0.3) {
                od.max_instances = Some(rng.range(2, 6) as u32);
            }
            on_demand.insert(od.id.clone(), 192);
            offers.push(od);
            let term = [24, 48][rng.range(0, 2) as usize];
            let mut block = offer(
                format!("{pool}/{place}/block"),
                pool,
                OfferKind::Term,
                8,
                0.0,
            );
            block.upfront_per_instance = Some(price * f64::from(term) * (0.55 + 0.3 * rng.unit()));
            block.term_hours = Some(term);
            block.starts = Some(Starts::Range(StartRange {
                from: 0,
                to: hours,
                step: [12, 24][rng.range(0, 2) as usize],
            }));
            block.placement = Some(placement);
            if charged {
                block.max_purchase_instances = Some(4);
                block.cost_per_purchase = Some([100.0, 500.0][rng.range(0, 2) as usize]);
            }
            offers.push(block);
        }
        let small = rng.range(5, 8) as f64;
        offers.push(offer(
            format!("{pool}/small"),
            pool,
            OfferKind::OnDemand,
            1,
            small,
        ));
        let spot = rng.range(15, 25) as f64;
        let mut spot = offer(format!("{pool}/spot"), pool, OfferKind::Spot, 8, spot);
        spot.max_instances = Some(rng.range(1, 4) as u32);
        offers.push(spot);
    }
    // Gangs: the same campaigns in both scenarios, slipped and grown in the second.
    let mut gangs: Vec<(String, u32, u32, u32, Vec<String>, String)> = Vec::new();
    for pool in &pools {
        for g in 0..rng.range(1, 4) {
            let from = rng.range(0, u64::from(hours) / 2) as u32;
            let to = (from + rng.range(12, u64::from(hours) / 2) as u32).min(hours);
            let nodes = rng.range(1, 7) as u32;
            let places: Vec<String> = match rng.range(0, 3) {
                0 => vec![format!("{pool}/east/8x")],
                1 => vec![format!("{pool}/west/8x")],
                _ => vec![format!("{pool}/east/8x"), format!("{pool}/west/8x")],
            };
            gangs.push((
                format!("{pool}-train-{g}"),
                from,
                to,
                nodes,
                places,
                pool.clone(),
            ));
        }
    }
    let scenarios = rng.range(1, 3) as usize;
    let slip = rng.range(6, 24) as u32;
    let mut fluid = BTreeMap::new();
    for pool in &pools {
        let firm_from = rng.range(0, u64::from(hours) / 2) as u32;
        let firm = vec![Segment(firm_from, hours, rng.range(1, 12) as u32)];
        let flex_to = rng.range(u64::from(hours) / 2, u64::from(hours)) as u32;
        let flex = vec![Segment(0, flex_to, rng.range(0, 20) as u32)];
        fluid.insert(pool.clone(), (firm, flex));
    }
    let scenarios = (0..scenarios)
        .map(|k| {
            let mut demand: BTreeMap<String, PoolDemand> = BTreeMap::new();
            for pool in &pools {
                let (firm, flex) = fluid[pool].clone();
                let flex = flex.into_iter().filter(|s| s.2 > 0).collect();
                demand.insert(
                    pool.clone(),
                    PoolDemand {
                        firm,
                        flex,
                        gangs: Vec::new(),
                    },
                );
            }
            for (id, from, to, nodes, places, pool) in &gangs {
                let (from, to, nodes) = if k == 0 {
                    (*from, *to, *nodes)
                } else {
                    (
                        (from + slip).min(hours - 1),
                        (to + slip).min(hours),
                        nodes + 1,
                    )
                };
                if let Some(d) = demand.get_mut(pool) {
                    d.gangs.push(Gang {
                        id: id.clone(),
                        from,
                        to,
                        nodes,
                        placements: places.clone(),
                    });
                }
            }
            Scenario {
                name: ["expected", "slip"][k].to_string(),
                probability: if scenarios == 1 { 1.0 } else { [0.7, 0.3][k] },
                demand,
                max_instances: BTreeMap::new(),
            }
        })
        .collect();
    let mut shared_limits = Vec::new();
    if rng.chance(0.4) {
        shared_limits.push(SharedLimit {
            id: "quota".into(),
            unit: "vCPUs".into(),
            cap: 192 * rng.range(4, 10),
            offers: on_demand,
            reason: Some("on-demand P instances".into()),
        });
    }
    // Half-hour periods sometimes: the same numbers, each period half an hour (costs halve).
    let period_minutes = rng.chance(0.3).then_some(30);
    Problem {
        schema: PROBLEM_SCHEMA_V3.to_string(),
        start: "2027-01-04T00:00:00Z".into(),
        hours,
        period_minutes,
        pools,
        offers,
        scenarios,
        budget: None,
        shared_limits,
    }
}

/// `problem` with every gang turned into firm GPUs of its pool, as a v2 problem: the same
/// demand with no placement rules, whose optimum can only be lower.
pub fn fluid(problem: &Problem) -> Problem {
    let mut fluid = problem.clone();
    if fluid.period_minutes.is_none() {
        fluid.schema = "gpucap.problem/v2".into();
    }
    for offer in &mut fluid.offers {
        offer.placement = None;
    }
    for scenario in &mut fluid.scenarios {
        for d in scenario.demand.values_mut() {
            for g in std::mem::take(&mut d.gangs) {
                d.firm.push(Segment(g.from, g.to, g.nodes * 8));
            }
        }
    }
    fluid
}
