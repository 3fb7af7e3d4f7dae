//! v3's placements and gangs (`docs/problem-v3.md`), checked and resolved to indices.
//!
//! A placement is a name offers share (`aws/us-east-1/p5.48xlarge`); a gang runs whole on the
//! on-demand and term offers of one of its placements. The rules that make that well defined
//! live here: a placement's offers are in one pool and hold the same GPUs per instance, and a
//! gang is one campaign with the same placements wherever it appears.

use std::collections::{BTreeMap, HashMap};

use crate::diagnostic::InputError;
use crate::limits::MAX_POOL_GPUS;

use super::errors::{error, v3_only};
use super::{OfferKind, Problem};

/// A placement with its offers resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub name: String,
    pub pool: usize,
    /// GPUs per instance of every offer in it: a gang's node.
    pub gpus_per_node: u32,
    /// Its offers, by index; the on-demand and term ones are what gangs run on.
    pub offers: Vec<usize>,
}

/// A gang across scenarios: its id, pool and the placements it may run in (by index).
#[derive(Debug, Clone, PartialEq)]
pub struct GangInfo {
    pub id: String,
    pub pool: usize,
    pub placements: Vec<usize>,
}

/// A gang in one scenario: `nodes` instances of its placement in every hour `from <= t < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GangDemand {
    /// Index into [`Gangs::gangs`].
    pub gang: usize,
    pub from: u32,
    pub to: u32,
    pub nodes: u32,
}

/// Every placement and gang of a problem.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gangs {
    pub placements: Vec<Placement>,
    /// Offer index → its placement's index.
    pub offer_placement: Vec<Option<usize>>,
    pub gangs: Vec<GangInfo>,
    /// `demand[k][p]`: the gangs of pool p in scenario k.
    pub demand: Vec<Vec<Vec<GangDemand>>>,
}

/// Checks the placements of the offers and the gangs of every scenario.
pub fn check(problem: &Problem, offer_pools: &[usize]) -> Result<Gangs, InputError> {
    let mut gangs = Gangs {
        offer_placement: vec![None; problem.offers.len()],
        demand: vec![vec![Vec::new(); problem.pools.len()]; problem.scenarios.len()],
        ..Gangs::default()
    };
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, offer) in problem.offers.iter().enumerate() {
        let Some(name) = offer.placement.as_deref() else {
            continue;
        };
        let at = format!("offers[{i}].placement");
        if !problem.is_v3() {
            return Err(v3_only(at));
        }
        if name.trim().is_empty() {
            return Err(error(at, "a placement cannot be empty"));
        }
        crate::text::check_name(name).map_err(|m| error(at.clone(), m))?;
        let index = *by_name.entry(name).or_insert_with(|| {
            gangs.placements.push(Placement {
                name: name.to_string(),
                pool: offer_pools[i],
                gpus_per_node: offer.gpus_per_instance,
                offers: Vec::new(),
            });
            gangs.placements.len() - 1
        });
        let placement = &mut gangs.placements[index];
        if placement.pool != offer_pools[i] {
            return Err(error(
                at,
                format!(
                    "placement `{name}` is also that of an offer of pool `{}`: a placement is in one pool",
                    problem.pools[placement.pool]
                ),
            ));
        }
        if placement.gpus_per_node != offer.gpus_per_instance {
            return Err(error(
                at,
                format!(
                    "the offers of placement `{name}` hold {} GPUs per instance, this one {}: a placement is one node size",
                    placement.gpus_per_node, offer.gpus_per_instance
                ),
            ));
        }
        placement.offers.push(i);
        gangs.offer_placement[i] = Some(index);
    }
    let mut known: BTreeMap<&str, usize> = BTreeMap::new();
    for (k, scenario) in problem.scenarios.iter().enumerate() {
        for (pool, d) in &scenario.demand {
            let Some(p) = problem.pools.iter().position(|q| q == pool) else {
                continue; // the demand's own check names the unknown pool
            };
            let mut seen = HashMap::new();
            for (j, g) in d.gangs.iter().enumerate() {
                let at = format!("scenarios[{k}].demand.{pool}.gangs[{j}]");
                if !problem.is_v3() {
                    return Err(v3_only(at));
                }
                let placements = check_gang(problem, &gangs, &by_name, p, g, &at)?;
                if let Some(first) = seen.insert(g.id.as_str(), j) {
                    return Err(error(
                        format!("{at}.id"),
                        format!("`{}` is also the id of gangs[{first}]", g.id),
                    ));
                }
                let index = match known.get(g.id.as_str()) {
                    Some(&index) => {
                        let info = &gangs.gangs[index];
                        if info.pool != p || info.placements != placements {
                            return Err(error(
                                format!("{at}.placements"),
                                format!(
                                    "gang `{}` must have the same pool and placements in every scenario",
                                    g.id
                                ),
                            )
                            .with_hint("a gang's placement is chosen once, for all scenarios"));
                        }
                        index
                    }
                    None => {
                        gangs.gangs.push(GangInfo {
                            id: g.id.clone(),
                            pool: p,
                            placements,
                        });
                        known.insert(&g.id, gangs.gangs.len() - 1);
                        gangs.gangs.len() - 1
                    }
                };
                gangs.demand[k][p].push(GangDemand {
                    gang: index,
                    from: g.from,
                    to: g.to,
                    nodes: g.nodes,
                });
            }
        }
    }
    Ok(gangs)
}

/// One gang's fields; returns its placements by index, sorted.
fn check_gang(
    problem: &Problem,
    gangs: &Gangs,
    by_name: &HashMap<&str, usize>,
    pool: usize,
    g: &super::Gang,
    at: &str,
) -> Result<Vec<usize>, InputError> {
    if g.id.trim().is_empty() {
        return Err(error(format!("{at}.id"), "a gang needs an id"));
    }
    crate::text::check_name(&g.id).map_err(|m| error(format!("{at}.id"), m))?;
    if !(g.from < g.to && g.to <= problem.hours) {
        return Err(error(
            format!("{at}.to"),
            format!(
                "a gang runs from `from` to `to` with 0 <= from < to <= {} (the horizon), found [{}, {})",
                problem.hours, g.from, g.to
            ),
        ));
    }
    if g.nodes == 0 {
        return Err(error(
            format!("{at}.nodes"),
            "must be a positive whole number, found 0",
        ));
    }
    if g.placements.is_empty() {
        return Err(error(
            format!("{at}.placements"),
            "a gang needs at least one placement",
        ));
    }
    let mut out: Vec<usize> = Vec::with_capacity(g.placements.len());
    for (i, name) in g.placements.iter().enumerate() {
        let field = format!("{at}.placements[{i}]");
        let &index = by_name
            .get(name.as_str())
            .ok_or_else(|| error(field.clone(), format!("no offer has placement `{name}`")))?;
        let placement = &gangs.placements[index];
        if placement.pool != pool {
            return Err(error(
                field,
                format!(
                    "placement `{name}` is in pool `{}`, not in this gang's pool",
                    problem.pools[placement.pool]
                ),
            ));
        }
        let runnable = placement
            .offers
            .iter()
            .any(|&o| problem.offers[o].kind != OfferKind::Spot);
        if !runnable {
            return Err(error(
                field,
                format!("placement `{name}` has only spot offers, which a gang cannot run on"),
            ));
        }
        let gpus = u64::from(g.nodes) * u64::from(placement.gpus_per_node);
        if gpus > MAX_POOL_GPUS {
            return Err(error(
                format!("{at}.nodes"),
                format!(
                    "{} nodes of {} GPUs is more than the {MAX_POOL_GPUS} gpucap plans for in one pool",
                    g.nodes, placement.gpus_per_node
                ),
            ));
        }
        if let Some(&first) = out.first() {
            let size = gangs.placements[first].gpus_per_node;
            if size != placement.gpus_per_node {
                return Err(error(
                    field,
                    format!(
                        "placement `{name}` has nodes of {} GPUs and `{}` of {size}: a gang's placements have one node size",
                        placement.gpus_per_node, gangs.placements[first].name
                    ),
                ));
            }
        }
        out.push(index);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `problem` with each gang's GPUs as firm demand of its pool and no placements, as a v2
/// problem: the same work as fluid GPU-hours. Its optimum is never above the v3 optimum; the
/// difference is the price of being runnable (`docs/problem-v3.md`). A gang's node size is that
/// of its first placement (all of its placements have one size).
pub fn as_fluid(problem: &Problem) -> Problem {
    let node = |placement: &str| {
        problem
            .offers
            .iter()
            .find(|o| o.placement.as_deref() == Some(placement))
            .map_or(0, |o| o.gpus_per_instance)
    };
    let mut fluid = problem.clone();
    // Periods shorter than an hour are v3's; without them the fluid problem is a v2 one.
    if fluid.is_v3() && fluid.period_minutes.is_none() {
        fluid.schema = super::PROBLEM_SCHEMA_V2.to_string();
    }
    for scenario in &mut fluid.scenarios {
        for d in scenario.demand.values_mut() {
            for g in std::mem::take(&mut d.gangs) {
                let size = g.placements.first().map_or(0, |p| node(p));
                d.firm
                    .push(super::Segment(g.from, g.to, g.nodes.saturating_mul(size)));
            }
        }
    }
    for offer in &mut fluid.offers {
        offer.placement = None;
    }
    fluid
}
