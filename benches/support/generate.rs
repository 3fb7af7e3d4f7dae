//! Generated campaign calendars and offer sets for the solver benchmark: year-scale problems
//! that look like what `gpucap plan` builds, from a seed, without any data files.
//!
//! Prices are list prices per instance-hour from the SkyPilot catalog (AWS p5/p4de/p5en/g6e,
//! GCP a3/a2-ultra/g2, Azure ND v4/v5), with region variants a few percent apart. Terms are
//! priced at typical discounts: capacity blocks 40–45 % below on-demand, 1-year commitments
//! 37 %, 3-year 58 %. Demand: training campaigns (firm, 64–512 GPUs, 3 days to 6 weeks, not
//! always whole instances), a weekly-varying flex baseline, and sweeps; scenarios slip, grow,
//! shrink or lose spot capacity.

#![allow(dead_code)]

use std::collections::BTreeMap;

use gpucap_solver::problem::{
    Offer, OfferKind, PROBLEM_SCHEMA, PoolDemand, Problem, Scenario, Segment, StartRange, Starts,
};

/// The size of one generated problem.
#[derive(Debug, Clone)]
pub struct Shape {
    pub hours: u32,
    pub pools: usize,
    pub offers: usize,
    /// Hours between allowed term starts (168 weekly, 24 daily, 1 hourly).
    pub start_step: u32,
    pub scenarios: usize,
    pub seed: u64,
}

/// splitmix64: small, fast, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// One accelerator pool: list prices per instance-hour of the 8-GPU instance of each cloud.
struct PoolPrices {
    name: &'static str,
    aws: f64,
    aws_spot: f64,
    gcp: f64,
    gcp_spot: f64,
    azure: f64,
    azure_spot: f64,
}

const POOLS: [PoolPrices; 4] = [
    PoolPrices {
        name: "h100",
        aws: 55.04,
        aws_spot: 21.50,
        gcp: 88.25,
        gcp_spot: 28.46,
        azure: 98.32,
        azure_spot: 39.20,
    },
    PoolPrices {
        name: "a100-80gb",
        aws: 27.45,
        aws_spot: 8.03,
        gcp: 40.22,
        gcp_spot: 10.68,
        azure: 32.77,
        azure_spot: 3.60,
    },
    PoolPrices {
        name: "h200",
        aws: 63.30,
        aws_spot: 18.74,
        gcp: 84.80,
        gcp_spot: 29.25,
        azure: 84.80,
        azure_spot: 36.60,
    },
    PoolPrices {
        name: "l40s",
        aws: 30.13,
        aws_spot: 9.04,
        gcp: 22.36,
        gcp_spot: 6.40,
        azure: 27.20,
        azure_spot: 2.99,
    },
];

/// The offers of a pool, in the order they are added as the offer count grows.
#[derive(Clone, Copy)]
enum Template {
    OnDemand {
        cloud: &'static str,
        gpus: u32,
        quota: Option<u32>,
    },
    Spot {
        cloud: &'static str,
        gpus: u32,
        max: u32,
        overhead: f64,
    },
    Block {
        hours: u32,
        discount: f64,
        max: u32,
    },
    Commit {
        cloud: &'static str,
        years: u32,
        discount: f64,
    },
}

const TEMPLATES: [Template; 15] = [
    Template::OnDemand {
        cloud: "aws",
        gpus: 8,
        quota: None,
    },
    Template::Spot {
        cloud: "aws",
        gpus: 8,
        max: 8,
        overhead: 0.12,
    },
    Template::Block {
        hours: 168,
        discount: 0.43,
        max: 32,
    },
    Template::OnDemand {
        cloud: "gcp",
        gpus: 8,
        quota: None,
    },
    Template::Commit {
        cloud: "gcp",
        years: 1,
        discount: 0.37,
    },
    Template::OnDemand {
        cloud: "gcp",
        gpus: 1,
        quota: Some(64),
    },
    Template::Spot {
        cloud: "gcp",
        gpus: 8,
        max: 6,
        overhead: 0.15,
    },
    Template::Block {
        hours: 24,
        discount: 0.40,
        max: 16,
    },
    Template::Commit {
        cloud: "aws",
        years: 1,
        discount: 0.37,
    },
    Template::OnDemand {
        cloud: "azure",
        gpus: 8,
        quota: Some(24),
    },
    Template::Spot {
        cloud: "azure",
        gpus: 8,
        max: 4,
        overhead: 0.20,
    },
    Template::Block {
        hours: 336,
        discount: 0.45,
        max: 32,
    },
    Template::OnDemand {
        cloud: "gcp",
        gpus: 4,
        quota: Some(16),
    },
    Template::Spot {
        cloud: "gcp",
        gpus: 1,
        max: 32,
        overhead: 0.15,
    },
    Template::Commit {
        cloud: "aws",
        years: 3,
        discount: 0.58,
    },
];

fn on_demand_price(pool: &PoolPrices, cloud: &str) -> f64 {
    match cloud {
        "aws" => pool.aws,
        "gcp" => pool.gcp,
        _ => pool.azure,
    }
}

fn spot_price(pool: &PoolPrices, cloud: &str) -> f64 {
    match cloud {
        "aws" => pool.aws_spot,
        "gcp" => pool.gcp_spot,
        _ => pool.azure_spot,
    }
}

fn round_cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn offers(shape: &Shape, pool: usize, count: usize, rng: &mut Rng) -> Vec<Offer> {
    let prices = &POOLS[pool];
    let starts = Starts::Range(StartRange {
        from: 0,
        to: shape.hours,
        step: shape.start_step,
    });
    (0..count)
        .map(|i| {
            let template = TEMPLATES[i % TEMPLATES.len()];
            let region = i / TEMPLATES.len();
            // Other regions are a few percent dearer.
            let markup = 1.0 + 0.04 * region as f64 + 0.02 * rng.unit();
            let base = offer(String::new(), prices.name, OfferKind::OnDemand, 8, 0.0);
            let id = |what: String| format!("{}/r{region}/{what}", prices.name);
            match template {
                Template::OnDemand { cloud, gpus, quota } => Offer {
                    id: id(format!("{cloud}/{gpus}g/on-demand")),
                    gpus_per_instance: gpus,
                    price_per_instance_hour: round_cents(
                        on_demand_price(prices, cloud) * markup * f64::from(gpus) / 8.0,
                    ),
                    max_instances: quota,
                    ..base
                },
                Template::Spot {
                    cloud,
                    gpus,
                    max,
                    overhead,
                } => Offer {
                    id: id(format!("{cloud}/{gpus}g/spot")),
                    kind: OfferKind::Spot,
                    gpus_per_instance: gpus,
                    price_per_instance_hour: round_cents(
                        spot_price(prices, cloud) * markup * f64::from(gpus) / 8.0,
                    ),
                    overhead: Some(overhead),
                    max_instances: Some(max),
                    ..base
                },
                Template::Block {
                    hours,
                    discount,
                    max,
                } => Offer {
                    id: id(format!("aws/capacity-block/{hours}h")),
                    kind: OfferKind::Term,
                    price_per_instance_hour: 0.0,
                    upfront_per_instance: Some(round_cents(
                        prices.aws * markup * (1.0 - discount) * f64::from(hours),
                    )),
                    term_hours: Some(hours),
                    starts: Some(starts.clone()),
                    max_instances: Some(max),
                    ..base
                },
                Template::Commit {
                    cloud,
                    years,
                    discount,
                } => Offer {
                    id: id(format!("{cloud}/commit/{years}y")),
                    kind: OfferKind::Term,
                    price_per_instance_hour: round_cents(
                        on_demand_price(prices, cloud) * markup * (1.0 - discount),
                    ),
                    upfront_per_instance: Some(0.0),
                    term_hours: Some(8760 * years),
                    starts: Some(starts.clone()),
                    ..base
                },
            }
        })
        .collect()
}

/// A training campaign: firm GPUs over an interval.
#[derive(Debug, Clone, Copy)]
struct Campaign {
    from: u32,
    hours: u32,
    gpus: u32,
}

fn campaigns(hours: u32, rng: &mut Rng) -> Vec<Campaign> {
    let count = (hours / (24 * 12)).max(1);
    (0..count)
        .map(|_| {
            let day = rng.range(0, u64::from(hours / 24).max(1)) as u32;
            let hour = [0, 9, 14][rng.range(0, 3) as usize];
            let length = rng.range(72, 24 * 42) as u32;
            // Mostly whole 8-GPU instances, sometimes not (e.g. 100 GPUs).
            let mut gpus = 8 * rng.range(8, 65) as u32;
            if rng.chance(0.2) {
                gpus += 4;
            }
            Campaign {
                from: (day * 24 + hour).min(hours - 1),
                hours: length,
                gpus,
            }
        })
        .collect()
}

fn clip(from: u32, length: u32, hours: u32, gpus: u32) -> Option<Segment> {
    let to = from.saturating_add(length).min(hours);
    (from < to && gpus > 0).then_some(Segment(from, to, gpus))
}

/// Flex demand: a level that changes every week, and sweeps of a few days.
fn flex(hours: u32, rng: &mut Rng) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut week = 0;
    while week < hours {
        let level = 8 * rng.range(1, 9) as u32;
        out.extend(clip(week, 168, hours, level));
        week += 168;
    }
    for _ in 0..(hours / (24 * 10)).max(1) {
        let from = rng.range(0, u64::from(hours)) as u32;
        out.extend(clip(
            from,
            rng.range(24, 120) as u32,
            hours,
            8 * rng.range(2, 13) as u32,
        ));
    }
    out
}

/// How a scenario differs from the expected calendar.
#[derive(Clone, Copy)]
enum Variant {
    Expected,
    Slip(u32),
    Scale(f64),
    Cancel(f64),
    SpotCrunch,
}

const VARIANTS: [(&str, Variant); 8] = [
    ("expected", Variant::Expected),
    ("slip-2w", Variant::Slip(336)),
    ("upside", Variant::Scale(1.25)),
    ("spot-crunch", Variant::SpotCrunch),
    ("slip-1w", Variant::Slip(168)),
    ("downside", Variant::Cancel(0.3)),
    ("slip-4w", Variant::Slip(672)),
    ("surge", Variant::Scale(1.5)),
];

fn scenario_demand(
    variant: Variant,
    calendars: &[(Vec<Campaign>, Vec<Segment>)],
    pools: &[String],
    hours: u32,
    rng: &mut Rng,
) -> BTreeMap<String, PoolDemand> {
    let mut demand = BTreeMap::new();
    for (p, (campaigns, flex)) in calendars.iter().enumerate() {
        let firm = campaigns
            .iter()
            .filter_map(|c| match variant {
                Variant::Slip(h) => clip(c.from + h, c.hours, hours, c.gpus),
                Variant::Scale(f) => clip(
                    c.from,
                    c.hours,
                    hours,
                    ((f64::from(c.gpus) * f / 8.0).round() as u32) * 8,
                ),
                Variant::Cancel(p) if rng.chance(p) => None,
                _ => clip(c.from, c.hours, hours, c.gpus),
            })
            .collect();
        demand.insert(
            pools[p].clone(),
            PoolDemand {
                firm,
                flex: flex.clone(),
                gangs: Vec::new(),
            },
        );
    }
    demand
}

/// An offer with only what every offer has; the rest left to its defaults.
pub fn offer(id: String, pool: &str, kind: OfferKind, gpus: u32, price: f64) -> Offer {
    Offer {
        id,
        pool: pool.to_string(),
        kind,
        gpus_per_instance: gpus,
        price_per_instance_hour: price,
        overhead: None,
        upfront_per_instance: None,
        term_hours: None,
        starts: None,
        max_instances: None,
        min_purchase_instances: None,
        max_purchase_instances: None,
        cost_per_purchase: None,
        placement: None,
    }
}

/// The problem of `shape`.
pub fn generate(shape: &Shape) -> Problem {
    let mut rng = Rng::new(shape.seed);
    let pools: Vec<String> = POOLS
        .iter()
        .take(shape.pools)
        .map(|p| p.name.to_string())
        .collect();
    let mut offers_all = Vec::new();
    for p in 0..shape.pools {
        let count = shape.offers / shape.pools + usize::from(p < shape.offers % shape.pools);
        offers_all.extend(offers(shape, p, count, &mut rng));
    }
    let calendars: Vec<(Vec<Campaign>, Vec<Segment>)> = (0..shape.pools)
        .map(|_| {
            (
                campaigns(shape.hours, &mut rng),
                flex(shape.hours, &mut rng),
            )
        })
        .collect();
    let weights: Vec<f64> = (0..shape.scenarios)
        .map(|k| if k == 0 { 3.0 } else { 0.5 + rng.unit() })
        .collect();
    let sum: f64 = weights.iter().sum();
    let mut scenarios: Vec<Scenario> = (0..shape.scenarios)
        .map(|k| {
            let (name, variant) = VARIANTS[k % VARIANTS.len()];
            let name = if k < VARIANTS.len() {
                name.to_string()
            } else {
                format!("{name}-{k}")
            };
            let max_instances = match variant {
                Variant::SpotCrunch => offers_all
                    .iter()
                    .filter(|o| o.kind == OfferKind::Spot)
                    .map(|o| (o.id.clone(), o.max_instances.unwrap_or(0) / 4))
                    .collect(),
                _ => BTreeMap::new(),
            };
            Scenario {
                name,
                probability: (weights[k] / sum * 1e6).round() / 1e6,
                demand: scenario_demand(variant, &calendars, &pools, shape.hours, &mut rng),
                max_instances,
            }
        })
        .collect();
    // Rounded probabilities must still sum to 1.
    let rest: f64 = scenarios.iter().skip(1).map(|s| s.probability).sum();
    scenarios[0].probability = 1.0 - rest;
    Problem {
        schema: PROBLEM_SCHEMA.to_string(),
        start: "2027-01-04T00:00:00Z".to_string(),
        hours: shape.hours,
        period_minutes: None,
        pools,
        offers: offers_all,
        scenarios,
        budget: None,
        shared_limits: Vec::new(),
    }
}

/// `problem` as a `gpucap.problem/v2` with the quotas and purchase rules a cloud imposes,
/// coupling its pools:
/// - `aws-on-demand-vcpus`: AWS's on-demand P-instance quota counts vCPUs across instance
///   families, so every pool's AWS on-demand offers share one cap, weighted 24 vCPUs per GPU
///   (a p5.48xlarge has 8 GPUs and 192 vCPUs); the cap is `quota_fraction` of the vCPUs the
///   pools' peak demands together would need;
/// - `capacity-blocks-held`: at most `blocks_held` capacity-block instances held at once over
///   all pools;
/// - every capacity block bought in pieces of at most `block_pieces` instances, at
///   `cost_per_purchase` each.
pub fn couple(
    mut problem: Problem,
    quota_fraction: f64,
    blocks_held: u64,
    block_pieces: u32,
    cost_per_purchase: f64,
) -> Problem {
    problem.schema = "gpucap.problem/v2".to_string();
    let peak: u64 = problem
        .pools
        .iter()
        .map(|pool| {
            problem
                .scenarios
                .iter()
                .map(|s| {
                    let Some(d) = s.demand.get(pool) else {
                        return 0;
                    };
                    let mut level = vec![0i64; problem.hours as usize + 1];
                    for seg in d.firm.iter().chain(&d.flex) {
                        level[seg.0 as usize] += i64::from(seg.2);
                        level[seg.1 as usize] -= i64::from(seg.2);
                    }
                    let mut run = 0i64;
                    level
                        .iter()
                        .map(|l| {
                            run += l;
                            run
                        })
                        .max()
                        .unwrap_or(0) as u64
                })
                .max()
                .unwrap_or(0)
        })
        .sum();
    let on_demand: BTreeMap<String, u32> = problem
        .offers
        .iter()
        .filter(|o| o.kind == OfferKind::OnDemand && o.id.contains("/aws/"))
        .map(|o| (o.id.clone(), 24 * o.gpus_per_instance))
        .collect();
    let blocks: BTreeMap<String, u32> = problem
        .offers
        .iter()
        .filter(|o| o.id.contains("capacity-block"))
        .map(|o| (o.id.clone(), 1))
        .collect();
    for o in &mut problem.offers {
        if o.id.contains("capacity-block") {
            o.max_purchase_instances = Some(block_pieces);
            o.cost_per_purchase = Some(cost_per_purchase);
        }
    }
    if !on_demand.is_empty() {
        problem
            .shared_limits
            .push(gpucap_solver::problem::SharedLimit {
                id: "aws-on-demand-vcpus".to_string(),
                unit: "vCPUs".to_string(),
                cap: (quota_fraction * peak as f64 * 24.0) as u64,
                offers: on_demand,
                reason: Some("AWS Running On-Demand P instances (vCPUs)".to_string()),
            });
    }
    if !blocks.is_empty() {
        problem
            .shared_limits
            .push(gpucap_solver::problem::SharedLimit {
                id: "capacity-blocks-held".to_string(),
                unit: "instances".to_string(),
                cap: blocks_held,
                offers: blocks,
                reason: None,
            });
    }
    problem
}
