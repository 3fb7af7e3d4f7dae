//! From a solved problem to a plan: purchases and usage become dated actions; costs are split
//! by scenario, month, pool, team and kind; the baselines are priced against the plan; and the
//! risk of paying for idle term capacity is measured per scenario. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Duration, Timelike, Utc};
use gpucap_provider::PurchaseKind;
use rust_decimal::prelude::ToPrimitive;

use crate::calendar::Campaign;
use crate::demand::{self, DemandCurve};
use crate::planner::{OfferInfo, Planned};
use crate::problem::{OfferKind, Segment, Solution, Status, Validated};
use crate::solver::Baselines;
use crate::timespec::{Horizon, rfc3339};

use gpucap_provider::names::slug;

use super::{
    Action, ActionKind, BaselineCost, CampaignPlacement, CampaignRef, CampaignRun, Cost,
    Fingerprint, FluidCost, KindCost, MonthCost, PLAN_SCHEMA, Plan, PlanHorizon, PoolCost,
    PoolPlan, Quote, Risk, ScenarioCost, SolutionSummary, Stranded, StrandedPool, TeamCost,
};

/// Everything a plan is made from.
pub struct PlanInputs<'a> {
    pub problem: &'a Validated,
    pub planned: &'a Planned,
    pub solution: &'a Solution,
    pub baselines: &'a Baselines,
    /// The same problem with no campaign placed whole, solved (v3 problems only).
    pub fluid: Option<&'a Solution>,
    /// `[planning] restart_hours`: what a restart of a campaign placed whole costs.
    pub restart_hours: f64,
    pub demand: &'a DemandCurve,
    pub campaigns: &'a [Campaign],
    pub fingerprint: Fingerprint,
    pub now: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BuildError {
    #[error("no plan covers the demand: {0}")]
    Infeasible(String),
    #[error("the solution names offer `{0}`, which the problem does not have")]
    UnknownOffer(String),
}

/// One run or purchase with its problem offer, for costing.
struct Priced<'a> {
    index: usize,
    info: &'a OfferInfo,
}

/// Builds the plan (gates not yet evaluated).
pub fn build(inputs: PlanInputs<'_>) -> Result<Plan, BuildError> {
    let PlanInputs {
        problem: v,
        planned,
        solution,
        baselines,
        fluid,
        restart_hours,
        demand,
        campaigns,
        fingerprint,
        now,
    } = inputs;
    if solution.status == Status::Infeasible {
        return Err(BuildError::Infeasible(
            solution.message.clone().unwrap_or_default(),
        ));
    }
    let problem = v.problem();
    let horizon = demand.horizon;
    // The solution's times are periods (hours, or half or quarter hours); the plan's
    // `start_hour`, `end_hour` and pools' segments are whole hours.
    let hours = problem.hours;
    let per_hour = horizon.per_hour();
    let index: HashMap<&str, usize> = problem
        .offers
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id.as_str(), i))
        .collect();
    let lookup = |id: &str| -> Result<Priced<'_>, BuildError> {
        let i = *index
            .get(id)
            .ok_or_else(|| BuildError::UnknownOffer(id.to_string()))?;
        let info = planned
            .offers
            .get(id)
            .ok_or_else(|| BuildError::UnknownOffer(id.to_string()))?;
        Ok(Priced { index: i, info })
    };
    let pool_index: HashMap<&str, usize> = problem
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), i))
        .collect();
    let probabilities: Vec<f64> = problem.scenarios.iter().map(|s| s.probability).collect();
    let actions_scenario = most_likely(&probabilities);

    let mut ids = IdMaker::default();
    let mut actions = Vec::new();
    let mut by_kind = KindCost::default();
    let mut months: BTreeMap<String, f64> = BTreeMap::new();
    let mut pool_cost = vec![0.0; problem.pools.len()];
    let mut pool_term_cost = vec![0.0; problem.pools.len()];
    let mut pool_term_gpu_periods = vec![0.0; problem.pools.len()];
    let mut term_segments: Vec<Vec<Segment>> = vec![Vec::new(); problem.pools.len()];
    let mut existing_segments: Vec<Vec<Segment>> = vec![Vec::new(); problem.pools.len()];
    let mut irreversible = 0.0;
    let mut used_offers = BTreeSet::new();
    // What gangs' runs refer to: each purchase's action (or the capacity it stands for), and
    // the on-demand actions of the actions' scenario.
    let mut bought: HashMap<(String, u32), Carrier> = HashMap::new();
    let mut on_demand_actions: Vec<Carrier> = Vec::new();

    // First stage: term purchases.
    for purchase in &solution.purchases {
        let Priced { index: i, info } = lookup(&purchase.offer)?;
        let o = &problem.offers[i];
        let p = v.pool_of(i);
        let cover = o.term_hours.unwrap_or(0);
        let segment = Segment(
            purchase.start_hour,
            (purchase.start_hour + cover).min(hours),
            purchase.instances * o.gpus_per_instance,
        );
        if let Some(id) = &info.existing {
            existing_segments[p].push(segment);
            bought.insert(
                (purchase.offer.clone(), purchase.start_hour),
                Carrier {
                    offer: purchase.offer.clone(),
                    action: None,
                    capacity: Some(id.clone()),
                    start: horizon.time_of(purchase.start_hour),
                    end: horizon.time_of(segment.1),
                },
            );
            continue;
        }
        used_offers.insert(purchase.offer.clone());
        term_segments[p].push(segment);
        let cost = f64::from(purchase.instances) * v.term_cost_per_instance(i);
        pool_cost[p] += cost;
        pool_term_cost[p] += cost;
        pool_term_gpu_periods[p] += f64::from(cover) * f64::from(segment.2);
        *kind_slot(&mut by_kind, info.purchase) += cost;
        if info.purchase.is_irreversible() {
            irreversible += cost;
        }
        spread(
            &mut months,
            &horizon,
            purchase.start_hour,
            purchase.start_hour + cover.max(1),
            cost / f64::from(cover.max(1)),
        );
        let term = info.term.as_ref();
        let offset = Duration::minutes(term.map_or(0, |t| t.start_offset_minutes));
        let real_start = horizon.time_of(purchase.start_hour) + offset;
        let billed = term.map_or(cover, |t| t.billed_periods);
        let real_end =
            real_start + Duration::minutes(i64::from(billed) * i64::from(horizon.minutes));
        let lead = Duration::hours(i64::from(term.map_or(0, |t| t.lead_hours)));
        let kind = match info.purchase {
            PurchaseKind::CapacityBlock => ActionKind::PurchaseCapacityBlock,
            PurchaseKind::Commitment => ActionKind::Commit,
            _ if info.term.as_ref().is_some_and(|t| !t.releasable) => ActionKind::Commit,
            _ => ActionKind::Reserve,
        };
        let served = campaigns_served(demand, p, purchase.start_hour, segment.1, None, false);
        let mut action = Action {
            id: String::new(),
            kind,
            pool: info.pool.clone(),
            cloud: info.cloud.to_string(),
            region: info.region.clone(),
            zone: info.zone.clone(),
            instance_type: info.instance_type.clone(),
            instances: purchase.instances,
            gpus: segment.2,
            start: rfc3339(real_start),
            end: rfc3339(real_end),
            start_hour: purchase.start_hour / per_hour,
            end_hour: (purchase.start_hour + cover).div_ceil(per_hour),
            due: rfc3339((real_start - lead).max(now)),
            bookable_from: term
                .and_then(|t| t.max_advance_hours)
                .map(|h| rfc3339(real_start - Duration::hours(i64::from(h)))),
            cost,
            irreversible: info.purchase.is_irreversible(),
            offer: purchase.offer.clone(),
            offering_id: info.offering_id.clone(),
            campaigns: served,
            pieces: Vec::new(),
        };
        // More than the cloud sells in one purchase: bought as several.
        let pieces = crate::problem::split_purchase(
            purchase.instances,
            o.min_purchase_instances,
            o.max_purchase_instances,
        );
        if pieces.len() > 1 {
            action.pieces = pieces;
        }
        let identity = Identity::of(&action, real_start, real_end);
        let id = ids.make(&identity);
        bought.insert(
            (purchase.offer.clone(), purchase.start_hour),
            Carrier {
                offer: purchase.offer.clone(),
                action: Some(id.clone()),
                capacity: None,
                start: real_start,
                end: real_end,
            },
        );
        // A release is named after the reservation it ends.
        let release_id = term.is_some_and(|t| t.releasable).then(|| {
            ids.make(&Identity {
                kind: ActionKind::Release,
                ..identity
            })
        });
        action.id = id;
        if let Some(release_id) = release_id {
            let mut release = action.clone();
            release.id = release_id;
            release.kind = ActionKind::Release;
            release.start = action.end.clone();
            release.due = action.end.clone();
            release.start_hour = action.end_hour;
            release.bookable_from = None;
            release.cost = 0.0;
            release.irreversible = false;
            release.campaigns = Vec::new();
            actions.push(action);
            actions.push(release);
        } else {
            actions.push(action);
        }
    }
    let term_cost: f64 = pool_term_cost.iter().sum();

    // Second stage: on-demand and spot, per scenario.
    let mut by_scenario = Vec::new();
    let mut pool_scenario_run = vec![vec![0.0; problem.scenarios.len()]; problem.pools.len()];
    let mut run_segments: Vec<[Vec<Segment>; 2]> =
        vec![[Vec::new(), Vec::new()]; problem.pools.len()];
    for (k, scenario) in solution.scenarios.iter().enumerate() {
        let probability = probabilities.get(k).copied().unwrap_or(0.0);
        let (mut on_demand, mut spot) = (0.0, 0.0);
        for usage in &scenario.usage {
            let Priced { index: i, info } = lookup(&usage.offer)?;
            let o = &problem.offers[i];
            let p = v.pool_of(i);
            let hourly = v.hourly_cost(i);
            let is_spot = o.kind == OfferKind::Spot;
            for s in &usage.segments {
                let cost = hourly * f64::from(s.2) * f64::from(s.len());
                if is_spot {
                    spot += cost;
                } else {
                    on_demand += cost;
                }
                pool_scenario_run[p][k] += cost;
                spread(
                    &mut months,
                    &horizon,
                    s.0,
                    s.1,
                    probability * hourly * f64::from(s.2),
                );
                if k != actions_scenario {
                    continue;
                }
                used_offers.insert(usage.offer.clone());
                run_segments[p][usize::from(is_spot)].push(Segment(
                    s.0,
                    s.1,
                    s.2 * o.gpus_per_instance,
                ));
                let kind = if is_spot {
                    ActionKind::RunSpot
                } else {
                    ActionKind::RunOnDemand
                };
                let (start, end) = (horizon.time_of(s.0), horizon.time_of(s.1));
                let mut action = Action {
                    id: String::new(),
                    kind,
                    pool: info.pool.clone(),
                    cloud: info.cloud.to_string(),
                    region: info.region.clone(),
                    zone: info.zone.clone(),
                    instance_type: info.instance_type.clone(),
                    instances: s.2,
                    gpus: s.2 * o.gpus_per_instance,
                    start: rfc3339(start),
                    end: rfc3339(end),
                    start_hour: s.0 / per_hour,
                    end_hour: s.1.div_ceil(per_hour),
                    due: rfc3339(start.max(now)),
                    bookable_from: None,
                    cost,
                    irreversible: false,
                    offer: usage.offer.clone(),
                    offering_id: info.offering_id.clone(),
                    campaigns: campaigns_served(demand, p, s.0, s.1, Some(k), is_spot),
                    pieces: Vec::new(),
                };
                action.id = ids.make(&Identity::of(&action, start, end));
                if !is_spot {
                    on_demand_actions.push(Carrier {
                        offer: usage.offer.clone(),
                        action: Some(action.id.clone()),
                        capacity: None,
                        start,
                        end,
                    });
                }
                actions.push(action);
            }
        }
        by_kind.on_demand += probability * on_demand;
        by_kind.spot += probability * spot;
        by_scenario.push(ScenarioCost {
            name: scenario.name.clone(),
            probability,
            total: term_cost + on_demand + spot,
            on_demand,
            spot,
        });
    }
    for (p, runs) in pool_scenario_run.iter().enumerate() {
        pool_cost[p] += runs
            .iter()
            .zip(&probabilities)
            .map(|(c, q)| c * q)
            .sum::<f64>();
    }
    actions.sort_by(|a, b| {
        (a.start_hour, a.kind, &a.pool, &a.id).cmp(&(b.start_hour, b.kind, &b.pool, &b.id))
    });

    let expected_total = term_cost
        + by_scenario
            .iter()
            .map(|s| s.probability * (s.on_demand + s.spot))
            .sum::<f64>();

    let cost = Cost {
        expected_total,
        irreversible,
        by_month: months
            .into_iter()
            .map(|(month, expected)| MonthCost { month, expected })
            .collect(),
        by_pool: problem
            .pools
            .iter()
            .zip(&pool_cost)
            .map(|(pool, &expected)| PoolCost {
                pool: pool.clone(),
                expected,
            })
            .collect(),
        by_team: by_team(
            demand,
            &pool_index,
            &pool_term_cost,
            &pool_scenario_run,
            &probabilities,
        ),
        by_scenario,
        by_kind,
        fluid: fluid
            .filter(|f| matches!(f.status, Status::Optimal | Status::Feasible))
            .map(|f| FluidCost {
                expected_total: f.expected_cost - charges(v, &index, f),
                price: solution.expected_cost - f.expected_cost,
                gap: if f.status == Status::Optimal || f.expected_cost <= 0.0 {
                    0.0
                } else {
                    ((f.expected_cost - f.bound) / f.expected_cost).max(0.0)
                },
            }),
    };

    let baselines = baselines
        .iter()
        .map(|b| BaselineCost {
            name: b.name.to_string(),
            description: describe_baseline(b.name).to_string(),
            expected_total: b.expected_cost,
            saving: b.expected_cost.map(|c| c - expected_total),
            saving_fraction: b
                .expected_cost
                .filter(|&c| c > 0.0)
                .map(|c| (c - expected_total) / c),
        })
        .collect();

    let risk = risk(
        demand,
        hours,
        &term_segments,
        &existing_segments,
        &pool_term_cost,
        &pool_term_gpu_periods,
        &cost.by_scenario,
    );

    let scenario_curve = &demand.scenarios[actions_scenario.min(demand.scenarios.len() - 1)];
    let pools = demand
        .pools
        .iter()
        .enumerate()
        .map(|(p, pool)| PoolPlan {
            id: pool.id.clone(),
            accelerator: pool.accelerator.name().to_string(),
            clouds: pool
                .effective_clouds()
                .iter()
                .map(ToString::to_string)
                .collect(),
            regions: pool.regions.clone(),
            demand_firm: in_hours(&horizon, &scenario_curve.pools[p].firm),
            demand_flex: in_hours(&horizon, &scenario_curve.pools[p].flex),
            term: in_hours(
                &horizon,
                &demand::merge(hours, term_segments[p].iter().copied()),
            ),
            on_demand: in_hours(
                &horizon,
                &demand::merge(hours, run_segments[p][0].iter().copied()),
            ),
            spot: in_hours(
                &horizon,
                &demand::merge(hours, run_segments[p][1].iter().copied()),
            ),
            existing: in_hours(
                &horizon,
                &demand::merge(hours, existing_segments[p].iter().copied()),
            ),
        })
        .collect();

    let mut quoted = BTreeSet::new();
    let quotes = used_offers
        .iter()
        .filter_map(|id| {
            let info = planned.offers.get(id)?;
            let source = info.quote.as_ref()?;
            quoted.insert(info.quoted_as.clone()).then_some(())?;
            Some(Quote {
                offer: info.quoted_as.clone(),
                source: source_name(source.kind).to_string(),
                fetched_at: rfc3339(source.fetched_at),
                price_per_instance_hour: info.price_per_instance_hour,
                upfront_per_instance: info.upfront,
                offering_id: info.offering_id.clone(),
                origin: source.origin.clone(),
                list_price_per_instance_hour: info
                    .list
                    .as_ref()
                    .and_then(|l| l.price_per_instance_hour.to_f64()),
                list_source: info
                    .list
                    .as_ref()
                    .map(|l| source_name(l.source.kind).to_string()),
            })
        })
        .collect();

    Ok(Plan {
        schema: PLAN_SCHEMA.to_string(),
        created_at: rfc3339(now),
        horizon: PlanHorizon {
            start: rfc3339(horizon.start),
            end: rfc3339(horizon.end()),
            hours: horizon.hours(),
        },
        fingerprint,
        solution: SolutionSummary {
            status: match solution.status {
                Status::Optimal => "optimal",
                _ => "feasible",
            }
            .to_string(),
            expected_cost: solution.expected_cost,
            bound: solution.bound,
            term_cost: solution.term_cost,
        },
        cost,
        baselines,
        risk,
        actions_scenario: problem
            .scenarios
            .get(actions_scenario)
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        actions,
        pools,
        campaigns: campaign_refs(
            demand,
            campaigns,
            &placements(v, planned, solution, restart_hours),
            &Carriers {
                scenario: actions_scenario,
                bought: &bought,
                on_demand: &on_demand_actions,
            },
            solution,
        ),
        quotes,
        assumptions: planned.assumptions.clone(),
        quotas: planned
            .quotas
            .iter()
            .map(|q| super::QuotaCheck {
                quota: q.quota.to_string(),
                title: q.title.clone(),
                unit: q.unit.as_str().into(),
                value: q.value,
                source: q.origin.as_str().into(),
                offers: q.offers.clone(),
                limiting: q.binding,
            })
            .collect(),
        quota_increases: Vec::new(),
        gates: Default::default(),
        state: None,
    })
}

/// The index of the most likely scenario (the first on ties).
fn most_likely(probabilities: &[f64]) -> usize {
    let mut best = 0;
    for (k, &q) in probabilities.iter().enumerate() {
        if q > probabilities[best] {
            best = k;
        }
    }
    best
}

fn kind_slot(by_kind: &mut KindCost, kind: PurchaseKind) -> &mut f64 {
    match kind {
        PurchaseKind::OnDemand => &mut by_kind.on_demand,
        PurchaseKind::Spot => &mut by_kind.spot,
        PurchaseKind::CapacityBlock => &mut by_kind.capacity_block,
        PurchaseKind::Reservation => &mut by_kind.reservation,
        PurchaseKind::Commitment => &mut by_kind.commitment,
    }
}

fn source_name(kind: gpucap_provider::SourceKind) -> &'static str {
    use gpucap_provider::SourceKind::*;
    match kind {
        Live => "live",
        Cache => "cache",
        Snapshot => "snapshot",
        Import => "import",
        Contract => "contract",
    }
}

fn describe_baseline(name: &str) -> &'static str {
    match name {
        "all-on-demand" => "the cheapest on-demand offers every hour; no spot, no terms",
        "cheapest-now" => {
            "the cheapest on-demand and spot mix every hour (spot for interruptible work); no terms"
        }
        "reserve-the-peak" => {
            "per pool, the term with the lowest price per GPU-hour bought for the peak, the rest on demand and spot"
        }
        _ => "",
    }
}

/// Adds `per_hour` for every hour in `[from, to)` to the calendar months those hours fall in
/// (hours past the horizon included).
fn spread(
    months: &mut BTreeMap<String, f64>,
    horizon: &Horizon,
    from: u32,
    to: u32,
    per_hour: f64,
) {
    if per_hour == 0.0 {
        return;
    }
    for (month, periods) in horizon.month_periods(from, to) {
        *months.entry(month).or_default() += per_hour * f64::from(periods);
    }
}

/// Segments over the horizon's periods as segments over whole hours, each hour at the most
/// its periods hold (the same segments on a grid of whole hours).
fn in_hours(horizon: &Horizon, segments: &[Segment]) -> Vec<Segment> {
    let per = horizon.per_hour();
    if per == 1 {
        return segments.to_vec();
    }
    let values = demand::hourly(horizon.periods, segments);
    let hourly: Vec<u32> = values
        .chunks(per as usize)
        .map(|c| c.iter().copied().max().unwrap_or(0))
        .collect();
    let mut out: Vec<Segment> = Vec::new();
    for (h, &v) in hourly.iter().enumerate() {
        let h = h as u32;
        match out.last_mut() {
            Some(last) if last.1 == h && last.2 == v => last.1 = h + 1,
            _ if v > 0 => out.push(Segment(h, h + 1, v)),
            _ => {}
        }
    }
    out
}

/// Campaigns (and forecasts) with demand in pool `p` during `[from, to)`: in scenario `only`
/// or in any scenario; flex demand only when `flex_only`.
fn campaigns_served(
    demand: &DemandCurve,
    p: usize,
    from: u32,
    to: u32,
    only: Option<usize>,
    flex_only: bool,
) -> Vec<String> {
    let mut names = BTreeSet::new();
    for (k, s) in demand.scenarios.iter().enumerate() {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        for c in &s.pools[p].contributions {
            if flex_only && !c.flex {
                continue;
            }
            if c.segments.iter().any(|seg| seg.0 < to && from < seg.1) {
                names.insert(c.label.clone());
            }
        }
    }
    names.into_iter().collect()
}

/// Each pool's cost in each scenario shared among teams by their GPU-hours there.
fn by_team(
    demand: &DemandCurve,
    pool_index: &HashMap<&str, usize>,
    pool_term_cost: &[f64],
    pool_scenario_run: &[Vec<f64>],
    probabilities: &[f64],
) -> Vec<TeamCost> {
    let mut teams: BTreeMap<Option<String>, f64> = BTreeMap::new();
    for (k, scenario) in demand.scenarios.iter().enumerate() {
        let q = probabilities.get(k).copied().unwrap_or(0.0);
        for (pool, curve) in demand.pools.iter().zip(&scenario.pools) {
            let Some(&p) = pool_index.get(pool.id.as_str()) else {
                continue;
            };
            let cost = pool_term_cost[p] + pool_scenario_run[p].get(k).copied().unwrap_or(0.0);
            if cost == 0.0 {
                continue;
            }
            let mut hours: BTreeMap<Option<String>, f64> = BTreeMap::new();
            for c in &curve.contributions {
                *hours.entry(c.team.clone()).or_default() += c.gpu_periods() as f64;
            }
            let total: f64 = hours.values().sum();
            if total == 0.0 {
                *teams.entry(None).or_default() += q * cost;
                continue;
            }
            for (team, h) in hours {
                *teams.entry(team).or_default() += q * cost * h / total;
            }
        }
    }
    // Named teams first, then the unassigned.
    let mut out: Vec<TeamCost> = teams
        .iter()
        .filter(|(t, _)| t.is_some())
        .chain(teams.iter().filter(|(t, _)| t.is_none()))
        .filter(|(_, c)| **c != 0.0)
        .map(|(team, &expected)| TeamCost {
            team: team.clone(),
            expected,
        })
        .collect();
    out.dedup();
    out
}

/// Worst scenario, and term GPU-hours bought but idle in each scenario (capacity already owned
/// is used first; idle hours are priced at the pool's average term price per GPU-hour).
/// `hours` and the segments count the horizon's periods.
fn risk(
    demand: &DemandCurve,
    hours: u32,
    term: &[Vec<Segment>],
    existing: &[Vec<Segment>],
    pool_term_cost: &[f64],
    pool_term_gpu_periods: &[f64],
    by_scenario: &[ScenarioCost],
) -> Risk {
    let worst = by_scenario
        .iter()
        .fold(None::<&ScenarioCost>, |w, s| match w {
            Some(w) if w.total >= s.total => Some(w),
            _ => Some(s),
        });
    let term_hourly: Vec<Vec<u32>> = term.iter().map(|t| demand::hourly(hours, t)).collect();
    let owned_hourly: Vec<Vec<u32>> = existing.iter().map(|t| demand::hourly(hours, t)).collect();
    let stranded = demand
        .scenarios
        .iter()
        .map(|s| {
            let mut gpu_hours = 0u64;
            let mut cost = 0.0;
            let mut pools = Vec::new();
            for (p, curve) in s.pools.iter().enumerate() {
                let firm = demand::hourly(hours, &curve.firm);
                let flex = demand::hourly(hours, &curve.flex);
                let mut idle = 0u64;
                for t in 0..hours as usize {
                    let need = firm[t] + flex[t];
                    let after_owned = need.saturating_sub(owned_hourly[p][t]);
                    idle += u64::from(term_hourly[p][t].saturating_sub(after_owned));
                }
                let mut pool_cost = 0.0;
                if pool_term_gpu_periods[p] > 0.0 {
                    pool_cost = idle as f64 * pool_term_cost[p] / pool_term_gpu_periods[p];
                    cost += pool_cost;
                }
                let idle_hours = demand.horizon.hours_of(idle);
                gpu_hours += idle_hours;
                if idle > 0 {
                    pools.push(StrandedPool {
                        pool: demand.pools[p].id.clone(),
                        gpu_hours: idle_hours,
                        cost: pool_cost,
                    });
                }
            }
            Stranded {
                scenario: s.name.clone(),
                probability: s.probability,
                gpu_hours,
                cost,
                pools,
            }
        })
        .collect();
    Risk {
        worst_scenario: worst.map(|w| w.name.clone()).unwrap_or_default(),
        worst_total: worst.map_or(0.0, |w| w.total),
        stranded,
    }
}

/// What a solution counts for the work of its purchases (each piece's cost, as
/// `Validated::piece_rules` gives it), which its expected cost includes and the plan's costs do
/// not. `index`: offer id to problem offer.
fn charges(v: &Validated, index: &HashMap<&str, usize>, solution: &Solution) -> f64 {
    solution
        .purchases
        .iter()
        .filter_map(|p| Some(f64::from(p.pieces) * v.piece_rules(*index.get(p.offer.as_str())?).2))
        .sum()
}

/// Where each gang of the solution runs, by campaign name, from the offers of its placement,
/// with its restarts priced at `restart_hours` of its nodes at the placement's on-demand rate
/// (or, without one, its cheapest term's rate over its term).
fn placements(
    v: &Validated,
    planned: &Planned,
    solution: &Solution,
    restart_hours: f64,
) -> BTreeMap<String, CampaignPlacement> {
    let problem = v.problem();
    let mut out = BTreeMap::new();
    for g in &solution.gangs {
        let offer = problem
            .offers
            .iter()
            .find(|o| o.placement.as_deref() == Some(g.placement.as_str()));
        let Some((offer, info)) = offer.and_then(|o| Some((o, planned.offers.get(&o.id)?))) else {
            continue;
        };
        let nodes = problem
            .scenarios
            .first()
            .and_then(|s| {
                s.demand
                    .values()
                    .flat_map(|d| &d.gangs)
                    .find(|x| x.id == g.gang)
            })
            .map_or(0, |x| x.nodes);
        // What an hour of one node costs here: on demand, or else the cheapest term's rate.
        let rate = |kind: OfferKind| {
            problem
                .offers
                .iter()
                .enumerate()
                .filter(|(_, o)| {
                    o.kind == kind && o.placement.as_deref() == Some(g.placement.as_str())
                })
                .filter_map(|(i, o)| match kind {
                    OfferKind::Term => o
                        .term_hours
                        .filter(|&h| h > 0)
                        .map(|h| v.term_cost_per_instance(i) / (f64::from(h) * v.period_hours())),
                    _ => Some(o.price_per_instance_hour),
                })
                .min_by(f64::total_cmp)
        };
        let node_hour = rate(OfferKind::OnDemand)
            .or_else(|| rate(OfferKind::Term))
            .unwrap_or(0.0);
        out.insert(
            g.gang.clone(),
            CampaignPlacement {
                cloud: info.cloud.to_string(),
                region: info.region.clone(),
                zone: None,
                instance_type: info.instance_type.clone(),
                gpus_per_node: offer.gpus_per_instance,
                nodes,
                restarts: g.restarts,
                restart_cost: f64::from(g.restarts) * restart_hours * f64::from(nodes) * node_hour,
            },
        );
    }
    out
}

/// What a gang's run can be on: a purchase's action, capacity already owned, or an on-demand
/// action, with the offer and the window it holds.
#[derive(Debug, Clone)]
struct Carrier {
    offer: String,
    action: Option<String>,
    capacity: Option<String>,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// The carriers of the actions' scenario: purchases by `(offer, start hour)`, and the on-demand
/// actions.
struct Carriers<'a> {
    scenario: usize,
    bought: &'a HashMap<(String, u32), Carrier>,
    on_demand: &'a [Carrier],
}

impl Carriers<'_> {
    /// The stretches of `gang`'s runs in the solution's actions' scenario, on the actions and
    /// capacity they are on, each clipped to the carrier's window (a block bought for hour 11
    /// starts at 11:30), in time order. A run on demand is split where its offer's actions
    /// change.
    fn runs(&self, solution: &Solution, horizon: &Horizon, gang: &str) -> Vec<CampaignRun> {
        let Some(scenario) = solution.scenarios.get(self.scenario) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for run in scenario.runs_on.iter().filter(|r| r.gang == gang) {
            let (from, to) = (horizon.time_of(run.from), horizon.time_of(run.to));
            let carriers: Vec<&Carrier> = match run.start_hour {
                Some(hour) => self
                    .bought
                    .get(&(run.offer.clone(), hour))
                    .into_iter()
                    .collect(),
                None => self
                    .on_demand
                    .iter()
                    .filter(|c| c.offer == run.offer && c.start < to && from < c.end)
                    .collect(),
            };
            for c in carriers {
                let (start, end) = (from.max(c.start), to.min(c.end));
                if start >= end {
                    continue;
                }
                out.push(CampaignRun {
                    action: c.action.clone(),
                    capacity: c.capacity.clone(),
                    start: rfc3339(start),
                    end: rfc3339(end),
                    instances: run.instances,
                });
            }
        }
        out.sort_by(|a, b| {
            (&a.start, &a.action, &a.capacity).cmp(&(&b.start, &b.action, &b.capacity))
        });
        out
    }
}

fn campaign_refs(
    demand: &DemandCurve,
    campaigns: &[Campaign],
    placed: &BTreeMap<String, CampaignPlacement>,
    carriers: &Carriers<'_>,
    solution: &Solution,
) -> Vec<CampaignRef> {
    // Peak GPUs and window of each label in the actions' scenario.
    let mut extent: BTreeMap<&str, (u32, u32, u32)> = BTreeMap::new();
    if let Some(s) = demand.scenarios.get(carriers.scenario) {
        for curve in &s.pools {
            for c in &curve.contributions {
                for seg in c.segments.iter().filter(|seg| seg.value() > 0) {
                    let e = extent
                        .entry(c.label.as_str())
                        .or_insert((0, seg.from(), seg.to()));
                    *e = (e.0.max(seg.value()), e.1.min(seg.from()), e.2.max(seg.to()));
                }
            }
        }
    }
    let horizon = &demand.horizon;
    let sized = |name: &str| {
        let (gpus, from, to) = extent.get(name).copied().unwrap_or((0, 0, 0));
        let when =
            (gpus > 0).then(|| (rfc3339(horizon.time_of(from)), rfc3339(horizon.time_of(to))));
        let (start, end) = when.unzip();
        (gpus, start, end)
    };
    let mut pool_of: BTreeMap<&str, (&str, bool, Option<&String>)> = BTreeMap::new();
    for s in &demand.scenarios {
        for (pool, curve) in demand.pools.iter().zip(&s.pools) {
            for c in &curve.contributions {
                pool_of.entry(c.label.as_str()).or_insert((
                    pool.id.as_str(),
                    c.flex,
                    c.team.as_ref(),
                ));
            }
        }
    }
    let mut refs: Vec<CampaignRef> = campaigns
        .iter()
        .filter_map(|c| {
            let (pool, _, _) = pool_of.get(c.name.as_str())?;
            let (gpus, start, end) = sized(&c.name);
            let placement = placed.get(&c.name).cloned();
            let runs_on = if placement.is_some() {
                carriers.runs(solution, horizon, &c.name)
            } else {
                Vec::new()
            };
            Some(CampaignRef {
                name: c.name.clone(),
                team: c.team.clone(),
                priority: format!("{:?}", c.priority).to_lowercase(),
                interruptible: c.interruptible,
                pool: pool.to_string(),
                gpus,
                start,
                end,
                placement,
                runs_on,
            })
        })
        .collect();
    for (label, (pool, flex, team)) in &pool_of {
        if label.starts_with("forecast:") {
            let (gpus, start, end) = sized(label);
            refs.push(CampaignRef {
                name: label.to_string(),
                team: team.cloned(),
                priority: "normal".into(),
                interruptible: *flex,
                pool: pool.to_string(),
                gpus,
                start,
                end,
                placement: None,
                runs_on: Vec::new(),
            });
        }
    }
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    refs
}

/// What an action buys, which its id is made from: kind, pool, cloud, place, instance type,
/// instance count and the absolute window (UTC). Never the plan's day, the horizon's hours or
/// list positions, so re-planning the same need on another day gives the same id, and a changed
/// need (other count, other window) a new one.
#[derive(Debug, Clone, Copy)]
struct Identity<'a> {
    kind: ActionKind,
    pool: &'a str,
    cloud: &'a str,
    /// The zone, else the region.
    place: &'a str,
    instance_type: &'a str,
    instances: u32,
    /// When the capacity starts and ends, as the action records it (for a release: the
    /// reservation's window).
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

impl<'a> Identity<'a> {
    fn of(action: &'a Action, start: DateTime<Utc>, end: DateTime<Utc>) -> Self {
        Identity {
            kind: action.kind,
            pool: &action.pool,
            cloud: &action.cloud,
            place: action.zone.as_deref().unwrap_or(&action.region),
            instance_type: &action.instance_type,
            instances: action.instances,
            start,
            end,
        }
    }

    /// `<kind>-<pool>-<cloud>-<place>-<instance type>-<n>x-<start>-<length>`, slugged:
    /// `block-h100-us-aws-us-east-1-p5-48xlarge-4x-20270105t1130-7d`. The end is written as the
    /// length from the start (the same information, shorter), so more ids fit whole where
    /// Terraform labels and cloud names are cut (64 and 63 characters, with a hash).
    fn id(&self) -> String {
        let prefix = match self.kind {
            ActionKind::PurchaseCapacityBlock => "block",
            ActionKind::Commit => "commit",
            ActionKind::Reserve => "reserve",
            ActionKind::RunOnDemand => "od",
            ActionKind::RunSpot => "spot",
            ActionKind::Release => "release",
        };
        slug(&format!(
            "{prefix}-{}-{}-{}-{}-{}x-{}-{}",
            self.pool,
            self.cloud,
            self.place,
            self.instance_type,
            self.instances,
            stamp(self.start),
            length(self.start, self.end),
        ))
    }
}

/// A UTC time, compact: `20270105` at midnight, `20270105t1130` otherwise (`t113015` when it
/// has seconds). The three forms differ in length, so distinct times give distinct stamps.
fn stamp(t: DateTime<Utc>) -> String {
    let format = if t.second() != 0 {
        "%Y%m%dt%H%M%S"
    } else if t.hour() == 0 && t.minute() == 0 {
        "%Y%m%d"
    } else {
        "%Y%m%dt%H%M"
    };
    t.format(format).to_string()
}

/// The time from `start` to `end`, compact: `7d`, `1h`, `84d14h`, `1d2h30m` (seconds as `s`;
/// zero parts left out; `0h` for none).
fn length(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    let mut rest = (end - start).num_seconds().max(0);
    let mut out = String::new();
    for (unit, size) in [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)] {
        let n = rest / size;
        rest %= size;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out.push_str("0h");
    }
    out
}

/// Hands out action ids, unique within a plan: a second action with the same identity (which
/// the solver does not produce, but two offers could) gets `-2`, then `-3`, ….
#[derive(Default)]
struct IdMaker {
    used: BTreeSet<String>,
}

impl IdMaker {
    fn make(&mut self, identity: &Identity<'_>) -> String {
        let base = identity.id();
        let mut id = base.clone();
        let mut n = 2;
        while !self.used.insert(id.clone()) {
            id = format!("{base}-{n}");
            n += 1;
        }
        id
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::timespec::parse_timestamp;

    fn at(s: &str) -> DateTime<Utc> {
        parse_timestamp(s).unwrap()
    }

    fn block() -> Identity<'static> {
        Identity {
            kind: ActionKind::PurchaseCapacityBlock,
            pool: "h100-us",
            cloud: "aws",
            place: "us-east-1a",
            instance_type: "p5.48xlarge",
            instances: 4,
            start: at("2026-12-01T11:30:00Z"),
            end: at("2026-12-08T11:30:00Z"),
        }
    }

    #[test]
    fn ids_say_what_is_bought_where_and_when() {
        assert_eq!(
            block().id(),
            "block-h100-us-aws-us-east-1a-p5-48xlarge-4x-20261201t1130-7d"
        );
        let run = Identity {
            kind: ActionKind::RunOnDemand,
            place: "us-east-1",
            instances: 12,
            start: at("2027-01-04T00:00:00Z"),
            end: at("2027-01-05T13:00:00Z"),
            ..block()
        };
        assert_eq!(
            run.id(),
            "od-h100-us-aws-us-east-1-p5-48xlarge-12x-20270104-1d13h"
        );
        let release = Identity {
            kind: ActionKind::Release,
            ..block()
        };
        assert_eq!(
            release.id(),
            "release-h100-us-aws-us-east-1a-p5-48xlarge-4x-20261201t1130-7d"
        );
    }

    #[test]
    fn the_same_purchase_gets_the_same_id_and_a_changed_one_a_new_id() {
        assert_eq!(block().id(), block().id());
        // Made separately (as on another day's re-plan), with equal values.
        let pool = String::from("h100-us");
        let again = Identity {
            pool: &pool,
            start: at("2026-12-01T12:30:00+01:00"),
            ..block()
        };
        assert_eq!(again.id(), block().id());

        let changed = [
            Identity {
                instances: 5,
                ..block()
            },
            Identity {
                end: at("2026-12-15T11:30:00Z"),
                ..block()
            },
            Identity {
                start: at("2026-12-02T11:30:00Z"),
                ..block()
            },
            Identity {
                end: at("2026-12-08T11:30:01Z"),
                ..block()
            },
            Identity {
                kind: ActionKind::Reserve,
                ..block()
            },
            Identity {
                kind: ActionKind::Release,
                ..block()
            },
            Identity {
                place: "us-east-1b",
                ..block()
            },
            Identity {
                pool: "h100-us-east",
                ..block()
            },
            Identity {
                instance_type: "p5e.48xlarge",
                ..block()
            },
        ];
        let mut ids: BTreeSet<String> = changed.iter().map(Identity::id).collect();
        ids.insert(block().id());
        assert_eq!(ids.len(), changed.len() + 1, "{ids:#?}");
    }

    #[test]
    fn stamps_and_lengths_are_compact_and_distinct() {
        assert_eq!(stamp(at("2027-01-04T00:00:00Z")), "20270104");
        assert_eq!(stamp(at("2027-01-04T12:00:00Z")), "20270104t1200");
        assert_eq!(stamp(at("2027-01-04T11:30:00Z")), "20270104t1130");
        assert_eq!(stamp(at("2027-01-04T00:00:05Z")), "20270104t000005");
        assert_eq!(stamp(at("2027-01-04T05:30:00+05:30")), "20270104");
        let start = at("2027-01-04T11:30:00Z");
        let after = |s: &str| length(start, at(s));
        assert_eq!(after("2027-01-11T11:30:00Z"), "7d");
        assert_eq!(after("2027-01-04T12:30:00Z"), "1h");
        assert_eq!(after("2027-03-29T01:30:00Z"), "83d14h");
        assert_eq!(after("2027-01-05T14:00:00Z"), "1d2h30m");
        assert_eq!(after("2027-01-04T11:30:09Z"), "9s");
        assert_eq!(after("2027-01-04T11:30:00Z"), "0h");
        assert_eq!(length(start, at("2028-01-04T11:30:00Z")), "365d");
    }

    #[test]
    fn ids_are_slugs() {
        let odd = Identity {
            pool: "H100 / US--East_",
            cloud: "azure",
            place: "eastus",
            instance_type: "Standard_ND96isr_H100_v5",
            ..block()
        };
        let id = odd.id();
        assert_eq!(
            id,
            "block-h100-us-east-azure-eastus-standard-nd96isr-h100-v5-4x-20261201t1130-7d"
        );
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(!id.contains("--") && !id.starts_with('-') && !id.ends_with('-'));
        assert_eq!(slug("--A  b__c--"), "a-b-c");
    }

    #[test]
    fn true_collisions_get_a_suffix() {
        let mut ids = IdMaker::default();
        let base = block().id();
        assert_eq!(ids.make(&block()), base);
        assert_eq!(ids.make(&block()), format!("{base}-2"));
        assert_eq!(ids.make(&block()), format!("{base}-3"));
        let other = Identity {
            instances: 8,
            ..block()
        };
        assert_eq!(ids.make(&other), other.id());
    }
}
