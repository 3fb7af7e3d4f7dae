//! The planner: demand and offers in, a `gpucap.problem/v1` out — with, for every offer in the
//! problem, what it stands for (cloud, place, purchase kind, booking rules, the quote), so the
//! solution can be turned back into actions. Pure: the caller gathers the offers, the existing
//! capacity and the clock.
//!
//! Each pool gets the offers its placement rules and the budget's residency rules allow
//! ([`offers`]); spot offers get an interruption overhead and a count of instances to rely on
//! ([`spot`]); capacity blocks, reservations and commitments become term offers with the
//! lengths and start hours their cloud sells ([`terms`]); capacity already owned becomes a free
//! term offer limited to what is owned ([`existing`]).

pub mod existing;
pub mod offers;
pub mod spot;
pub mod terms;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, Offer, PurchaseKind, Source, instance_types};
use rust_decimal::prelude::ToPrimitive;

use crate::config::Config;
use crate::demand::DemandCurve;
use crate::problem::{self, OfferKind, PROBLEM_SCHEMA, Problem, Starts};

pub use existing::ExistingCapacity;
pub use terms::TermChoice;

/// What a problem offer stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferInfo {
    pub pool: String,
    pub cloud: Cloud,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub purchase: PurchaseKind,
    pub gpus_per_instance: u32,
    /// USD per instance-hour and once per instance, as quoted.
    pub price_per_instance_hour: f64,
    pub upfront: f64,
    /// Where the price came from; `None` for capacity already owned.
    pub quote: Option<Source>,
    /// The priced offer this problem offer derives from (`pool/cloud/region/type/kind`): the
    /// term offers of one capacity-block price share it.
    pub quoted_as: String,
    /// The id of the capacity already owned this offer stands for.
    pub existing: Option<String>,
    pub offering_id: Option<String>,
    /// Length and booking rules, for term offers.
    pub term: Option<TermChoice>,
    /// Spot: extra cost of interruptions, as a fraction.
    pub overhead: f64,
}

/// The problem and the key to read its solution.
#[derive(Debug, Clone)]
pub struct Planned {
    pub problem: Problem,
    /// Problem offer id → what it stands for.
    pub offers: BTreeMap<String, OfferInfo>,
    /// Modelling assumptions, in words, for the plan.
    pub assumptions: Vec<String>,
    /// Things worth a look (existing capacity no pool can use, pools without offers).
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlannerError {
    #[error("pool `{pool}` needs {accelerator} GPUs in {places} but no offer matches")]
    NoOffers {
        pool: String,
        accelerator: String,
        places: String,
    },
}

impl PlannerError {
    pub fn hint(&self) -> String {
        match self {
            PlannerError::NoOffers { .. } => "widen the pool's clouds or regions (or budget.allowed_clouds / allowed_regions), import a price catalog (`[prices] imports`), or check `gpucap prices --accelerator …` for where it is sold".into(),
        }
    }
}

/// Builds the problem for `demand` from `offers` and `existing` capacity, planning at `now`.
pub fn build(
    config: &Config,
    demand: &DemandCurve,
    offers: &[Offer],
    existing: &[ExistingCapacity],
    now: DateTime<Utc>,
) -> Result<Planned, PlannerError> {
    let horizon = demand.horizon;
    let doc = demand.document();
    let mut problem_offers = Vec::new();
    let mut infos = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut assumptions = vec![spot::describe(&config.spot)];
    let mut kinds_seen = std::collections::BTreeSet::new();

    let mut add = |o: problem::Offer, info: OfferInfo| {
        infos.insert(o.id.clone(), info);
        problem_offers.push(o);
    };

    for (p, pool) in demand.pools.iter().enumerate() {
        let selected = offers::for_pool(pool, offers, &config.budget);
        let needs_gpus = demand
            .scenarios
            .iter()
            .any(|s| !s.pools[p].firm.is_empty() || !s.pools[p].flex.is_empty());
        if selected.is_empty() && needs_gpus {
            let clouds: Vec<String> = pool
                .effective_clouds()
                .iter()
                .map(|c| c.to_string())
                .collect();
            return Err(PlannerError::NoOffers {
                pool: pool.id.clone(),
                accelerator: pool.accelerator.name().to_string(),
                places: if pool.regions.is_empty() {
                    clouds.join(", ")
                } else {
                    pool.regions.join(", ")
                },
            });
        }
        for o in selected {
            kinds_seen.insert(o.kind);
            let base = offer_base_id(&pool.id, o);
            let quoted_as = base.clone();
            let info = |term: Option<TermChoice>, overhead: f64| OfferInfo {
                pool: pool.id.clone(),
                cloud: o.cloud,
                region: o.region.clone(),
                zone: o.zone.clone(),
                instance_type: o.instance_type.clone(),
                purchase: o.kind,
                gpus_per_instance: o.gpus_per_instance,
                price_per_instance_hour: money(o.price_per_instance_hour),
                upfront: money(o.upfront),
                quote: Some(o.source.clone()),
                quoted_as: quoted_as.clone(),
                existing: None,
                offering_id: o.offering_id.clone(),
                term,
                overhead,
            };
            match o.kind {
                PurchaseKind::OnDemand => add(
                    problem::Offer {
                        id: base,
                        pool: pool.id.clone(),
                        kind: OfferKind::OnDemand,
                        gpus_per_instance: o.gpus_per_instance,
                        price_per_instance_hour: money(o.price_per_instance_hour),
                        overhead: None,
                        upfront_per_instance: None,
                        term_hours: None,
                        starts: None,
                        max_instances: o.max_instances,
                        min_purchase_instances: None,
                        max_purchase_instances: None,
                        cost_per_purchase: None,
                    },
                    info(None, 0.0),
                ),
                PurchaseKind::Spot => {
                    let figures = spot::figures(&config.spot, o.cloud, &o.region, &o.instance_type);
                    let overhead = spot::overhead(&figures, &config.spot);
                    add(
                        problem::Offer {
                            id: base,
                            pool: pool.id.clone(),
                            kind: OfferKind::Spot,
                            gpus_per_instance: o.gpus_per_instance,
                            price_per_instance_hour: money(o.price_per_instance_hour),
                            overhead: Some(overhead),
                            upfront_per_instance: None,
                            term_hours: None,
                            starts: None,
                            max_instances: Some(spot::usable_instances(&figures, o)),
                            min_purchase_instances: None,
                            max_purchase_instances: None,
                            cost_per_purchase: None,
                        },
                        info(None, overhead),
                    );
                }
                _ => {
                    for choice in terms::choices(o, &horizon, now) {
                        if choice.starts.is_empty() || choice.cover_hours == 0 {
                            continue;
                        }
                        let hourly = money(o.price_per_instance_hour);
                        let upfront = money(o.upfront);
                        // The problem bills `price × term_hours + upfront`; where the billed
                        // length differs from the hours covered (AWS blocks), all of it is
                        // upfront.
                        let (price, upfront) = if choice.billed_hours == choice.cover_hours {
                            (hourly, upfront)
                        } else {
                            (0.0, hourly * f64::from(choice.billed_hours) + upfront)
                        };
                        add(
                            problem::Offer {
                                id: format!("{base}/{}", choice.label),
                                pool: pool.id.clone(),
                                kind: OfferKind::Term,
                                gpus_per_instance: o.gpus_per_instance,
                                price_per_instance_hour: price,
                                overhead: None,
                                upfront_per_instance: Some(upfront),
                                term_hours: Some(choice.cover_hours),
                                starts: Some(Starts::List(choice.starts.clone())),
                                max_instances: o.max_instances,
                                min_purchase_instances: None,
                                max_purchase_instances: None,
                                cost_per_purchase: None,
                            },
                            info(Some(choice), 0.0),
                        );
                    }
                }
            }
        }
    }

    for e in existing {
        match existing_offer(demand, e) {
            Some((o, info)) => add(o, info),
            None => warnings.push(format!(
                "existing {} `{}` ({} {} {}, {} instances, from {}) is not counted: no pool uses it within the horizon",
                e.kind, e.id, e.cloud, e.region, e.instance_type, e.instances, e.source
            )),
        }
    }

    if kinds_seen.contains(&PurchaseKind::CapacityBlock) {
        assumptions.push(format!(
            "capacity blocks: AWS blocks of {} days starting 11:30 UTC after a day's notice, bookable up to 8 weeks ahead (later starts are booked by a later run at that day's price); other clouds' blocks of {} days from 00:00 UTC",
            list(terms::AWS_BLOCK_DAYS),
            list(terms::BLOCK_DAYS)
        ));
    }
    if kinds_seen.contains(&PurchaseKind::Reservation) {
        assumptions.push(format!(
            "reservations without a term: windows of {} days from 00:00 UTC, billed per hour and released at the end",
            list(terms::RESERVATION_DAYS)
        ));
    }
    if kinds_seen.contains(&PurchaseKind::Commitment) {
        assumptions.push("commitments start now (the planning start, or the next hour once planning has begun) and are paid for their whole term, also past the horizon".into());
    }
    assumptions.push("on-demand capacity is assumed available up to the offer's stated limit (none when the cloud states none); pools are planned independently, so an offer shared by two pools may be counted in both".into());

    let problem = Problem {
        schema: PROBLEM_SCHEMA.to_string(),
        start: doc.start,
        hours: doc.hours,
        pools: doc.pools,
        offers: problem_offers,
        scenarios: doc.scenarios,
        budget: None,
        shared_limits: Vec::new(),
    };
    Ok(Planned {
        problem,
        offers: infos,
        assumptions,
        warnings,
    })
}

/// `pool/cloud/region[/zone]/instance-type/kind`.
fn offer_base_id(pool: &str, o: &Offer) -> String {
    let mut id = format!("{pool}/{}/{}", o.cloud, o.region);
    if let Some(zone) = &o.zone {
        id.push('/');
        id.push_str(zone);
    }
    id.push('/');
    id.push_str(&o.instance_type);
    id.push('/');
    id.push_str(o.kind.as_str());
    id
}

/// Existing capacity as a free term offer of the first pool that may use it.
fn existing_offer(
    demand: &DemandCurve,
    e: &ExistingCapacity,
) -> Option<(problem::Offer, OfferInfo)> {
    let (accelerator, gpus) = instance_types::lookup(e.cloud, &e.instance_type)?;
    let fits = |p: &&crate::demand::Pool| {
        p.accelerator == accelerator
            && p.effective_clouds().contains(&e.cloud)
            && (p.regions.is_empty() || p.regions.contains(&e.region))
    };
    let pool = demand
        .pools
        .iter()
        .filter(fits)
        .find(|p| e.pool.as_deref() == Some(p.id.as_str()))
        .or_else(|| demand.pools.iter().find(fits))?;
    // Only the hours it covers whole: a block from 11:30 to 11:30 serves neither the hour it
    // starts in nor the one it ends in, so counting them would leave half an hour unplanned.
    let horizon = demand.horizon;
    let from = e.start.map_or(0, |t| horizon.hour_ceil(t)).max(0);
    let to = e
        .end
        .map_or(i64::from(horizon.hours), |t| horizon.hour_floor(t))
        .min(i64::from(horizon.hours));
    if from >= to || e.instances == 0 {
        return None;
    }
    let (from, to) = (from as u32, to as u32);
    let id = format!("{}/existing/{}", pool.id, e.id);
    let offer = problem::Offer {
        id,
        pool: pool.id.clone(),
        kind: OfferKind::Term,
        gpus_per_instance: gpus,
        price_per_instance_hour: 0.0,
        overhead: None,
        upfront_per_instance: Some(0.0),
        term_hours: Some(to - from),
        starts: Some(Starts::List(vec![from])),
        max_instances: Some(e.instances),
        min_purchase_instances: None,
        max_purchase_instances: None,
        cost_per_purchase: None,
    };
    let info = OfferInfo {
        pool: pool.id.clone(),
        cloud: e.cloud,
        region: e.region.clone(),
        zone: e.zone.clone(),
        instance_type: e.instance_type.clone(),
        purchase: e.kind,
        gpus_per_instance: gpus,
        price_per_instance_hour: 0.0,
        upfront: 0.0,
        quote: None,
        quoted_as: offer.id.clone(),
        existing: Some(format!("{} ({})", e.id, e.source)),
        offering_id: Some(e.id.clone()),
        term: None,
        overhead: 0.0,
    };
    Some((offer, info))
}

fn money(d: rust_decimal::Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

fn list(days: &[u32]) -> String {
    days.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
