//! Campaigns that run whole: with `[planning] placement = "gangs"` (the default), each campaign
//! that is not interruptible, may not move (`migration`, default `none`) and needs more than
//! one node becomes a gang of the problem (`docs/problem-v3.md`). It runs on whole nodes in one
//! place (pool, cloud, region and instance type), from its start to its end. Pure: it rewrites
//! the problem the planner built.
//!
//! Every on-demand, spot and term offer with a known place gets the placement
//! `pool/cloud/region/instance_type`. A campaign's *node size* is its `gpus_per_node`, or else
//! its pool's largest `gpus_per_instance` of on-demand and term offers (8 GPUs for H100s and
//! A100s). Its demand leaves the pool's fluid `firm` segments and becomes a gang of
//! `ceil(GPUs / node size)` nodes in each scenario, placed in any of the pool's placements that
//! sell nodes of that size. Work that fits one node (unless it says `gpus_per_node`),
//! interruptible work, campaigns that may move and forecasts stay fluid. A campaign whose
//! demand in a scenario is not one run also stays fluid; that happens only when a scenario's
//! horizon clips it into pieces.

use std::collections::{BTreeMap, BTreeSet};

use crate::calendar::{Campaign, Migration};
use crate::demand::{Contribution, DemandCurve, merge};
use crate::diagnostic::InputError;
use crate::problem::{Gang, OfferKind, PROBLEM_SCHEMA_V3, Problem, Segment};

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

/// Per pool, node size (GPUs per instance) → the placements of on-demand and term offers
/// selling nodes of that size.
type Places = BTreeMap<String, BTreeMap<u32, BTreeSet<String>>>;

/// Makes the campaigns that run whole gangs of `problem` (the module doc says which), and
/// gives every offer with a known place its placement. Returns a warning for each campaign
/// left fluid for want of a placement or past [`MAX_GANGS_PER_POOL`], or an error naming a
/// campaign whose `gpus_per_node` its pool does not sell.
pub fn place(
    problem: &mut Problem,
    demand: &DemandCurve,
    campaigns: &[Campaign],
    infos: &BTreeMap<String, OfferInfo>,
) -> Result<Vec<String>, InputError> {
    let mut warnings = Vec::new();
    let mut places: Places = BTreeMap::new();
    for o in &mut problem.offers {
        let Some(info) = infos.get(&o.id) else {
            continue;
        };
        let name = placement_of(info);
        if o.kind != OfferKind::Spot {
            places
                .entry(o.pool.clone())
                .or_default()
                .entry(o.gpus_per_instance)
                .or_default()
                .insert(name.clone());
        }
        o.placement = Some(name);
    }
    let whole: BTreeMap<&str, &Campaign> = campaigns
        .iter()
        .filter(|c| !c.interruptible && c.migration == Migration::None)
        .map(|c| (c.name.as_str(), c))
        .collect();
    // A campaign's node size in a pool: its own, or the pool's largest.
    let node_of = |c: &Campaign, pool: &str| {
        c.gpus_per_node.or_else(|| {
            places
                .get(pool)
                .and_then(|sizes| sizes.keys().next_back().copied())
        })
    };
    // A firm contribution that runs whole: one run of a campaign above, of more than one node
    // of its size (or of any size it names), with that run and its node size.
    let candidate = |c: &Contribution, pool: &str| -> Option<(Segment, u32)> {
        let campaign = whole.get(c.label.as_str())?;
        let node = node_of(campaign, pool).filter(|&n| n > 0)?;
        match c.segments.as_slice() {
            [s] if s.value() > node || campaign.gpus_per_node.is_some() => Some((*s, node)),
            _ => None,
        }
    };
    // A size the campaign names must be sold in its pool.
    for (p, pool) in demand.pools.iter().enumerate() {
        for c in demand
            .scenarios
            .iter()
            .flat_map(|s| &s.pools[p].contributions)
        {
            let Some(campaign) = whole.get(c.label.as_str()) else {
                continue;
            };
            let sizes = places.get(&pool.id);
            if let Some(n) = campaign.gpus_per_node
                && !sizes.is_some_and(|s| s.contains_key(&n))
            {
                let sold: Vec<String> = sizes
                    .map(|s| s.keys().map(u32::to_string).collect())
                    .unwrap_or_default();
                let sold = match sold.as_slice() {
                    [] => "no nodes".to_string(),
                    [one] => format!("nodes of {one} GPUs"),
                    [rest @ .., last] => format!("nodes of {} or {last} GPUs", rest.join(", ")),
                };
                return Err(InputError::new(
                    campaign.source.clone().field("gpus_per_node"),
                    format!(
                        "campaign `{}` asks for nodes of {n} GPUs, but pool `{}` sells {sold} in its places",
                        campaign.name, pool.id
                    ),
                )
                .with_hint("set `gpus_per_node` to a size the pool sells, or remove it to run on the largest"));
            }
        }
    }
    // Per pool, the campaigns that may be gangs: the largest by GPU-hours in any scenario.
    let mut chosen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (p, pool) in demand.pools.iter().enumerate() {
        let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
        for curve in &demand.scenarios {
            for c in curve.pools[p].contributions.iter().filter(|c| !c.flex) {
                if let Some((s, _)) = candidate(c, &pool.id) {
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
            let mut fluid = Vec::new();
            let mut placed = Vec::new();
            let whole = chosen.get(pool.id.as_str());
            for c in pool_curve.contributions.iter().filter(|c| !c.flex) {
                let Some((s, node)) = candidate(c, &pool.id) else {
                    fluid.extend(c.segments.iter().copied());
                    continue;
                };
                let at: Vec<String> = places
                    .get(&pool.id)
                    .and_then(|sizes| sizes.get(&node))
                    .map(|p| p.iter().cloned().collect())
                    .unwrap_or_default();
                if at.is_empty() {
                    warnings.push(format!(
                        "campaign `{}` runs as fluid work in pool `{}`: no on-demand or term offer there sells nodes of {node} GPUs",
                        c.label, pool.id
                    ));
                    fluid.extend(c.segments.iter().copied());
                } else if !whole.is_some_and(|w| w.contains(&c.label)) {
                    // Past the pool's most whole runs: fluid (warned above).
                    fluid.extend(c.segments.iter().copied());
                } else {
                    placed.push(Gang {
                        id: c.label.clone(),
                        from: s.from(),
                        to: s.to(),
                        nodes: s.value().div_ceil(node),
                        placements: at,
                    });
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
    Ok(warnings)
}
