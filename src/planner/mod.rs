//! The planner: demand and offers in, a `gpucap.problem/v2` out — with, for every offer in the
//! problem, what it stands for (cloud, place, purchase kind, booking rules, the quote), so the
//! solution can be turned back into actions. Pure: the caller gathers the offers, the existing
//! capacity and the clock.
//!
//! Each pool gets the offers its placement rules and the budget's residency rules allow
//! ([`offers`]); spot offers get an interruption overhead and a count of instances to rely on
//! ([`spot`]); capacity blocks, reservations and commitments become term offers with the
//! lengths and start hours their cloud sells ([`terms`]); capacity already owned becomes a free
//! term offer limited to what is owned ([`existing`]); limits several offers draw on together
//! (an offering several pools buy, a cloud's cap across purchases, the account's quotas) become
//! one shared limit across them ([`limits`]). Purchase sizes, lengths, starts and booking
//! windows come from the clouds' purchase rules ([`gpucap_provider::purchase_rules`]).
//! Term offers carry the purchase rules of `[planning]` (a minimum per purchase, a cost per
//! purchase) besides their cloud's own ([`planning_rules`]).

pub mod existing;
pub mod gangs;
pub mod limits;
pub mod offers;
pub mod periods;
pub mod spot;
pub mod terms;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, Offer, PurchaseKind, Source, instance_types, purchase_rules, quotas};
use rust_decimal::prelude::ToPrimitive;

use crate::calendar::Campaign;
use crate::config::Config;
use crate::demand::DemandCurve;
use crate::diagnostic::InputError;
use crate::problem::{self, OfferKind, PROBLEM_SCHEMA_V2, PROBLEM_SCHEMA_V3, Problem, Starts};

pub use existing::ExistingCapacity;
pub use limits::{QuotaBook, QuotaLimit, QuotaOrigin};
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
    /// The list price a contract price replaces (a `[prices.discounts]` discount, or a private
    /// offer priced off a list), with its source.
    pub list: Option<crate::contract::ListPrice>,
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
    /// The quotas the problem keeps within (each is a shared limit of the problem).
    pub quotas: Vec<QuotaLimit>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlannerError {
    #[error("pool `{pool}` needs {accelerator} GPUs in {places} but no offer matches")]
    NoOffers {
        pool: String,
        accelerator: String,
        places: String,
    },
    /// A campaign asks for what its pool does not sell (its file, line and field named).
    #[error("{0}")]
    Campaign(InputError),
}

impl PlannerError {
    pub fn hint(&self) -> String {
        match self {
            PlannerError::Campaign(e) => e.hint.clone().unwrap_or_default(),
            PlannerError::NoOffers { .. } => "widen the pool's clouds or regions (or budget.allowed_clouds / allowed_regions), import a price catalog (`[prices] imports`), or check `gpucap prices --accelerator …` for where it is sold".into(),
        }
    }
}

/// Builds the problem for `demand` from `offers` and `existing` capacity, planning at `now`,
/// with the quotas of the config (or the offline default).
pub fn build(
    config: &Config,
    demand: &DemandCurve,
    campaigns: &[Campaign],
    offers: &[Offer],
    existing: &[ExistingCapacity],
    now: DateTime<Utc>,
) -> Result<Planned, PlannerError> {
    let book = QuotaBook {
        config: config.quotas.clone(),
        live: Default::default(),
    };
    build_with(config, demand, campaigns, offers, existing, now, &book)
}

/// [`build`] with the quotas of `book` (the config's and those read live).
pub fn build_with(
    config: &Config,
    demand: &DemandCurve,
    campaigns: &[Campaign],
    offers: &[Offer],
    existing: &[ExistingCapacity],
    now: DateTime<Utc>,
    book: &QuotaBook,
) -> Result<Planned, PlannerError> {
    let horizon = demand.horizon;
    let doc = demand.document();
    let mut problem_offers = Vec::new();
    let mut infos = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut assumptions = vec![spot::describe(&config.spot)];
    let mut kinds_seen = std::collections::BTreeSet::new();
    // Private offers join the list offers; discounts apply to each offer a pool selects.
    let (private, unpriced) = crate::contract::private_offers(&config.prices, offers);
    warnings.extend(unpriced);
    let private_lists: BTreeMap<Option<String>, Option<crate::contract::ListPrice>> = private
        .iter()
        .map(|p| (p.offer.offering_id.clone(), p.list.clone()))
        .collect();
    let with_private: Vec<Offer>;
    let offers = if private.is_empty() {
        offers
    } else {
        with_private = offers
            .iter()
            .cloned()
            .chain(private.into_iter().map(|p| p.offer))
            .collect();
        &with_private[..]
    };
    let mut members = Vec::new();
    let mut unquoted = std::collections::BTreeSet::new();
    // Each pool's most GPUs in any hour and scenario (firm peak plus flex peak, a bound): no
    // offer of the pool is ever worth more instances than this.
    let peaks: BTreeMap<String, u64> = demand
        .pools
        .iter()
        .enumerate()
        .map(|(p, pool)| {
            let most = |segments: &[problem::Segment]| {
                segments
                    .iter()
                    .map(|s| u64::from(s.value()))
                    .max()
                    .unwrap_or(0)
            };
            let peak = demand
                .scenarios
                .iter()
                .map(|s| most(&s.pools[p].firm) + most(&s.pools[p].flex))
                .max()
                .unwrap_or(0);
            (pool.id.clone(), peak)
        })
        .collect();

    let mut add =
        |o: problem::Offer, info: OfferInfo, accelerator: gpucap_provider::Accelerator| {
            let draw = quotas::draw(
                info.cloud,
                &info.region,
                &info.instance_type,
                accelerator,
                info.gpus_per_instance,
                info.purchase,
            );
            if draw.is_none() && info.purchase != PurchaseKind::CapacityBlock {
                unquoted.insert(format!("{} {}", info.cloud, info.instance_type));
            }
            let mut offering = format!("{}/{}", info.cloud, info.region);
            if let Some(zone) = &info.zone {
                offering.push('/');
                offering.push_str(zone);
            }
            offering.push_str(&format!("/{}/{}", info.instance_type, info.purchase));
            if let Some(e) = &info.existing {
                offering.push_str(&format!("/{e}"));
            }
            members.push(limits::Member {
                offer: o.id.clone(),
                pool: o.pool.clone(),
                offering,
                // Capacity already owned is limited to what is owned, in its own offer.
                offering_cap: if info.existing.is_some() {
                    None
                } else {
                    o.max_instances
                },
                cloud: info.cloud,
                kind: info.purchase,
                draw,
                useful: {
                    let need = peaks
                        .get(&o.pool)
                        .map(|&g| g.div_ceil(u64::from(o.gpus_per_instance.max(1))));
                    match (o.max_instances.map(u64::from), need) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    }
                },
            });
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
        for listed in selected {
            let priced = crate::contract::discounted(&config.prices, listed);
            let o = &priced.offer;
            let private = crate::contract::private_offer(&config.prices, o);
            let list = match private {
                Some(_) => private_lists.get(&o.offering_id).cloned().flatten(),
                None => priced.list.clone(),
            };
            kinds_seen.insert(o.kind);
            let mut base = offer_base_id(&pool.id, o);
            if let Some(p) = private {
                base.push('/');
                base.push_str(&p.reference);
            }
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
                list: list.clone(),
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
                        placement: None,
                    },
                    info(None, 0.0),
                    o.accelerator,
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
                            placement: None,
                        },
                        info(None, overhead),
                        o.accelerator,
                    );
                }
                _ => {
                    // Sizes one purchase can have: the cloud's rule.
                    let rule = purchase_rules::for_offer(o.cloud, o.kind, o.term_hours);
                    let max_purchase = rule.and_then(|r| r.max_instances);
                    let min_purchase = rule
                        .filter(|r| r.min_instances > 1)
                        .map(|r| r.min_instances);
                    let choices = match private {
                        Some(p) => {
                            let (earliest, latest) = crate::contract::window(p);
                            terms::in_window(o, &horizon, now, earliest, latest)
                        }
                        None => terms::choices(o, &horizon, now),
                    };
                    for choice in choices {
                        if choice.starts.is_empty() || choice.cover_periods == 0 {
                            continue;
                        }
                        let hourly = money(o.price_per_instance_hour);
                        let upfront = money(o.upfront);
                        // The problem bills `price × term × period + upfront`; where the billed
                        // length differs from the periods covered (AWS blocks on whole hours),
                        // all of it is upfront.
                        let (price, upfront) = if choice.billed_periods == choice.cover_periods {
                            (hourly, upfront)
                        } else {
                            let billed = f64::from(choice.billed_periods) * horizon.period_hours();
                            (0.0, hourly * billed + upfront)
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
                                term_hours: Some(choice.cover_periods),
                                starts: Some(Starts::List(choice.starts.clone())),
                                max_instances: o.max_instances,
                                min_purchase_instances: min_purchase,
                                max_purchase_instances: max_purchase,
                                cost_per_purchase: None,
                                placement: None,
                            },
                            info(Some(choice), 0.0),
                            o.accelerator,
                        );
                    }
                }
            }
        }
    }

    for e in existing {
        match existing_offer(demand, e) {
            Some((o, info, accelerator)) => add(o, info, accelerator),
            None => warnings.push(format!(
                "existing {} `{}` ({} {} {}, {} instances, from {}) is not counted: no pool uses it within the horizon",
                e.kind, e.id, e.cloud, e.region, e.instance_type, e.instances, e.source
            )),
        }
    }

    if kinds_seen.contains(&PurchaseKind::CapacityBlock) {
        let aws = purchase_rules::for_offer(Cloud::Aws, PurchaseKind::CapacityBlock, None);
        let gcp = purchase_rules::for_offer(Cloud::Gcp, PurchaseKind::CapacityBlock, None);
        assumptions.push(format!(
            "capacity blocks as the clouds sell them (purchase rules, gpucap_provider::purchase_rules): AWS blocks of {} days from 11:30 UTC after a day's notice, up to 64 instances each and 256 across blocks, bookable up to 8 weeks ahead (later starts are booked by a later run at that day's price); GCP calendar-mode reservations of {} days from 00:00 UTC, up to 80 VMs each; a purchase larger than one block is bought as several (pieces)",
            ranges(&terms::block_days(aws, horizon.hours())),
            ranges(&terms::block_days(gcp, horizon.hours())),
        ));
    }
    if kinds_seen.contains(&PurchaseKind::Reservation) {
        assumptions.push(format!(
            "reservations without a term: windows of {} days from 00:00 UTC, billed per hour and released at the end",
            list(terms::RESERVATION_DAYS)
        ));
    }
    if !config.prices.offers.is_empty() {
        assumptions.push("private offers ([[prices.offers]]) start at 00:00 UTC on any day of their start window and are paid for their whole term, also past the horizon".into());
    }
    if kinds_seen.contains(&PurchaseKind::Commitment) {
        assumptions.push("commitments start now (the planning start, or the next hour once planning has begun) and are paid for their whole term, also past the horizon".into());
    }
    assumptions.push("on-demand capacity is assumed available up to the offer's stated limit and the account's quotas; a limit several pools draw on (an offering, a quota, a cap across purchases) holds once across them".into());
    let (shared_limits, quota_limits) = limits::shared_limits(&members, book);
    if quota_limits
        .iter()
        .any(|q| q.origin == QuotaOrigin::Default)
    {
        assumptions.push(quotas::OFFLINE_DEFAULT_NOTE.to_string());
    }
    for u in &unquoted {
        warnings.push(format!(
            "{u}: gpucap does not know which quota this instance type draws on, so no quota limits it; set its cap with the offer's own limit or plan without it"
        ));
    }
    for offer in &mut problem_offers {
        let owned = infos.get(&offer.id).is_some_and(|i| i.existing.is_some());
        if offer.kind == OfferKind::Term && !owned {
            planning_rules(offer, &config.planning);
        }
    }

    let mut problem = Problem {
        // Periods shorter than an hour are a v3 field.
        schema: if doc.period_minutes.is_some() {
            PROBLEM_SCHEMA_V3
        } else {
            PROBLEM_SCHEMA_V2
        }
        .to_string(),
        start: doc.start,
        hours: doc.hours,
        period_minutes: doc.period_minutes,
        pools: doc.pools,
        offers: problem_offers,
        scenarios: doc.scenarios,
        budget: None,
        shared_limits,
    };
    if config.planning.placement == crate::config::Placement::Gangs {
        warnings.extend(
            gangs::place(&mut problem, demand, campaigns, &infos)
                .map_err(PlannerError::Campaign)?,
        );
        assumptions.push("campaigns that are not interruptible and need more than one node run whole: in one place (cloud, region, instance type), on whole nodes of the pool's largest instance size (or their `gpus_per_node`), from start to end; the capacity under one may change only at a restart from a checkpoint, which is not priced; campaigns with `migration: allowed` are fluid".into());
    }
    Ok(Planned {
        problem,
        offers: infos,
        assumptions,
        warnings,
        quotas: quota_limits,
    })
}

/// `[planning]`'s purchase rules on a term offer that is bought (not capacity already owned):
/// the cost per purchase, and the minimum per purchase combined with the cloud's (the larger
/// one, but never above the cloud's maximum per purchase, which would forbid every purchase).
pub fn planning_rules(offer: &mut problem::Offer, planning: &crate::config::Planning) {
    let min = offer
        .min_purchase_instances
        .max(planning.min_purchase_instances);
    offer.min_purchase_instances = match (min, offer.max_purchase_instances) {
        (Some(min), Some(max)) => Some(min.min(max)),
        (min, _) => min,
    };
    offer.cost_per_purchase = Some(planning.cost_per_purchase);
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
) -> Option<(problem::Offer, OfferInfo, gpucap_provider::Accelerator)> {
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
    // Only the periods it covers whole: on a grid of whole hours a block from 11:30 to 11:30
    // serves neither the hour it starts in nor the one it ends in, so counting them would
    // leave half an hour unplanned. On half hours it serves all of its periods.
    let horizon = demand.horizon;
    let from = e.start.map_or(0, |t| horizon.ceil(t)).max(0);
    let to = e
        .end
        .map_or(i64::from(horizon.periods), |t| horizon.floor(t))
        .min(i64::from(horizon.periods));
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
        placement: None,
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
        list: None,
        quoted_as: offer.id.clone(),
        existing: Some(format!("{} ({})", e.id, e.source)),
        offering_id: Some(e.id.clone()),
        term: None,
        overhead: 0.0,
    };
    Some((offer, info, accelerator))
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

/// `1-14, 21-91 by 7` for the lengths offered.
fn ranges(days: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < days.len() {
        let step = days.get(i + 1).map_or(0, |n| n - days[i]);
        let mut j = i;
        while j + 1 < days.len() && days[j + 1] - days[j] == step {
            j += 1;
        }
        if j == i || step == 0 {
            parts.push(days[i].to_string());
            i += 1;
        } else if step == 1 {
            parts.push(format!("{}-{}", days[i], days[j]));
            i = j + 1;
        } else {
            parts.push(format!("{}-{} by {step}", days[i], days[j]));
            i = j + 1;
        }
    }
    parts.join(", ")
}
