//! Campaigns that run whole: with `[planning] placement = "gangs"`, each campaign that is not
//! interruptible and needs more than one node becomes a gang of the problem
//! (`docs/problem-v3.md`). It runs on whole nodes of the accelerator's largest size in one
//! place (pool, cloud, region and instance type), from its start to its end. Pure: it rewrites
//! the problem the planner built.
//!
//! A pool's *node size* is the largest `gpus_per_instance` of its on-demand and term offers
//! (8 GPUs for H100s and A100s). Every offer of that size has the placement
//! `pool/cloud/region/instance_type`. A campaign's demand leaves the pool's fluid `firm`
//! segments and becomes a gang of `ceil(GPUs / node size)` nodes in each scenario, placed in any
//! of the pool's placements. Work that fits one node, interruptible work and forecasts stay
//! fluid. A campaign whose demand in a scenario is not one run also stays fluid; that happens
//! only when a scenario's horizon clips it into pieces.

use std::collections::{BTreeMap, BTreeSet};

use crate::calendar::Campaign;
use crate::demand::{DemandCurve, merge};
use crate::problem::{Gang, OfferKind, PROBLEM_SCHEMA_V3, Problem};

use super::OfferInfo;

/// The placement name of an offer: `pool/cloud/region/instance_type`.
fn placement_of(info: &OfferInfo) -> String {
    format!(
        "{}/{}/{}/{}",
        info.pool, info.cloud, info.region, info.instance_type
    )
}

/// Makes the non-interruptible campaigns of more than one node gangs of `problem`, and gives
/// the offers of each pool's node size their placement. Returns a warning for each campaign
/// left fluid for want of a placement.
pub fn place(
    problem: &mut Problem,
    demand: &DemandCurve,
    campaigns: &[Campaign],
    infos: &BTreeMap<String, OfferInfo>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    // Per pool: its node size and its placements that can carry a gang.
    let mut node: BTreeMap<String, u32> = BTreeMap::new();
    for o in problem.offers.iter().filter(|o| o.kind != OfferKind::Spot) {
        let size = node.entry(o.pool.clone()).or_insert(0);
        *size = (*size).max(o.gpus_per_instance);
    }
    let mut placements: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for o in &mut problem.offers {
        let Some(info) = infos.get(&o.id) else {
            continue;
        };
        if node.get(&o.pool) == Some(&o.gpus_per_instance) {
            let name = placement_of(info);
            if o.kind != OfferKind::Spot {
                placements
                    .entry(o.pool.clone())
                    .or_default()
                    .insert(name.clone());
            }
            o.placement = Some(name);
        }
    }
    let gangs: BTreeSet<&str> = campaigns
        .iter()
        .filter(|c| !c.interruptible)
        .map(|c| c.name.as_str())
        .collect();
    let mut any = false;
    let hours = problem.hours;
    for (scenario, curve) in problem.scenarios.iter_mut().zip(&demand.scenarios) {
        for (pool, pool_curve) in demand.pools.iter().zip(&curve.pools) {
            let size = node.get(&pool.id).copied().unwrap_or(0);
            let places: Vec<String> = placements
                .get(&pool.id)
                .map(|p| p.iter().cloned().collect())
                .unwrap_or_default();
            let mut fluid = Vec::new();
            let mut placed = Vec::new();
            for c in pool_curve.contributions.iter().filter(|c| !c.flex) {
                let gang = match c.segments.as_slice() {
                    [s] if gangs.contains(c.label.as_str()) && size > 0 && s.value() > size => {
                        Some(*s)
                    }
                    _ => None,
                };
                match gang {
                    Some(s) if !places.is_empty() => placed.push(Gang {
                        id: c.label.clone(),
                        from: s.from(),
                        to: s.to(),
                        nodes: s.value().div_ceil(size),
                        placements: places.clone(),
                    }),
                    Some(_) => {
                        warnings.push(format!(
                            "campaign `{}` runs as fluid work in pool `{}`: no on-demand or term offer there sells nodes of {size} GPUs",
                            c.label, pool.id
                        ));
                        fluid.extend(c.segments.iter().copied());
                    }
                    None => fluid.extend(c.segments.iter().copied()),
                }
            }
            if placed.is_empty() {
                continue;
            }
            any = true;
            let entry = scenario.demand.entry(pool.id.clone()).or_default();
            entry.firm = merge(hours, fluid.into_iter());
            entry.gangs = placed;
        }
    }
    if any {
        problem.schema = PROBLEM_SCHEMA_V3.to_string();
    } else {
        // No gang: the problem stays v2, which has no placements.
        for o in &mut problem.offers {
            o.placement = None;
        }
    }
    warnings.sort();
    warnings.dedup();
    warnings
}
