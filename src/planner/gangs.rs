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
use crate::demand::{Contribution, DemandCurve, merge};
use crate::problem::{Gang, OfferKind, PROBLEM_SCHEMA_V3, Problem};

use super::OfferInfo;

/// The most campaigns one pool places whole; the rest of its campaigns stay fluid, with a
/// warning. Each gang is a choice among the pool's places, with rows in every hour it runs,
/// and the solver proves plans of a few dozen in seconds (the quickstart's four in 9 s, all
/// steps) but not of hundreds: a generated quarter of 2,000 campaigns (some 1,000 would be
/// gangs) ran for minutes past a 30-second time limit (measured 2026-11-28). The largest
/// campaigns, by GPU-hours, are placed first: they are the synchronous runs that most need
/// one place, and the smaller ones move the plan's cost least.
pub const MAX_GANGS_PER_POOL: usize = 24;

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
    // Per pool, the campaigns that may be gangs: the largest by GPU-hours in any scenario.
    // A firm contribution that could run whole on nodes of `size` GPUs: one run of a campaign
    // that is not interruptible, of more than one node.
    let candidate = |c: &Contribution, size: u32| match c.segments.as_slice() {
        [s] if gangs.contains(c.label.as_str()) && size > 0 && s.value() > size => Some(*s),
        _ => None,
    };
    let mut chosen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (p, pool) in demand.pools.iter().enumerate() {
        let size = node.get(&pool.id).copied().unwrap_or(0);
        let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
        for curve in &demand.scenarios {
            for c in curve.pools[p].contributions.iter().filter(|c| !c.flex) {
                if let Some(s) = candidate(c, size) {
                    let gpu_hours = u64::from(s.value()) * u64::from(s.len());
                    let e = sizes.entry(c.label.as_str()).or_insert(0);
                    *e = (*e).max(gpu_hours);
                }
            }
        }
        let mut ranked: Vec<(&str, u64)> = sizes.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        if ranked.len() > MAX_GANGS_PER_POOL {
            let left: Vec<&str> = ranked[MAX_GANGS_PER_POOL..].iter().map(|r| r.0).collect();
            let shown: Vec<String> = left.iter().take(3).map(|n| format!("`{n}`")).collect();
            let more = left.len().saturating_sub(3);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            warnings.push(format!(
                "pool `{}`: {} campaigns run as fluid work ({}{more}): a pool places at most {MAX_GANGS_PER_POOL} campaigns whole, the largest by GPU-hours, so that it is solved in seconds",
                pool.id,
                left.len(),
                shown.join(", ")
            ));
        }
        chosen.insert(
            pool.id.as_str(),
            ranked
                .into_iter()
                .take(MAX_GANGS_PER_POOL)
                .map(|r| r.0.to_string())
                .collect(),
        );
    }
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
            let whole = chosen.get(pool.id.as_str());
            for c in pool_curve.contributions.iter().filter(|c| !c.flex) {
                let gang = match candidate(c, size) {
                    // A campaign past the pool's most whole runs stays fluid (warned above).
                    Some(_)
                        if !places.is_empty() && !whole.is_some_and(|w| w.contains(&c.label)) =>
                    {
                        fluid.extend(c.segments.iter().copied());
                        continue;
                    }
                    g => g,
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
