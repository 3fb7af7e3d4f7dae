//! The `gpucap.problem/v1` and `/v2` documents and their solutions (`docs/problem-v1.md`,
//! `docs/problem-v2.md`): the contract between the planner, which builds a problem from demand
//! and offers, and the solver, which answers it. Plain serde types; unknown fields are rejected
//! on input. v2 adds shared limits (a cap on a weighted sum of instances in use across offers
//! and pools, such as a cloud quota) and purchase pieces (a per-purchase minimum, maximum and
//! fixed cost on term offers); a v1 document may not use them.
//!
//! [`parse`] reads a problem from JSON text (syntax and type errors carry the line, column and
//! field path); [`validate`] checks every rule of the spec and returns a [`Validated`] problem,
//! the only form the solver accepts.

mod errors;
pub mod gangs;
mod parse;
pub mod pieces;
pub mod size;
pub mod validate;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

pub use parse::parse;
pub use pieces::split_purchase;
pub use validate::{Validated, validate};

pub const PROBLEM_SCHEMA: &str = "gpucap.problem/v1";
pub const SOLUTION_SCHEMA: &str = "gpucap.solution/v1";
/// The problem with shared limits and purchase pieces (`docs/problem-v2.md`).
pub const PROBLEM_SCHEMA_V2: &str = "gpucap.problem/v2";
/// The answer to a v2 problem: purchases also say how many pieces they are made of.
pub const SOLUTION_SCHEMA_V2: &str = "gpucap.solution/v2";
/// The problem with gangs: campaigns that run whole, in one placement (`docs/problem-v3.md`).
pub const PROBLEM_SCHEMA_V3: &str = "gpucap.problem/v3";
/// The answer to a v3 problem: also where each gang runs, and on what, hour by hour.
pub const SOLUTION_SCHEMA_V3: &str = "gpucap.solution/v3";

/// `[from, to, value]`: `value` (GPUs or instances) in every hour `from <= t < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Segment(pub u32, pub u32, pub u32);

/// Reads `[from, to, value]`, with a message that shows that form when the input has another.
impl<'de> Deserialize<'de> for Segment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SegmentVisitor;
        impl<'de> Visitor<'de> for SegmentVisitor {
            type Value = Segment;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a segment `[from, to, value]` of three whole numbers >= 0")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Segment, A::Error> {
                let mut next = |i: usize| {
                    seq.next_element::<u32>()?
                        .ok_or_else(|| de::Error::invalid_length(i, &self))
                };
                let segment = Segment(next(0)?, next(1)?, next(2)?);
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(4, &self));
                }
                Ok(segment)
            }
        }
        deserializer.deserialize_seq(SegmentVisitor)
    }
}

impl Segment {
    pub fn from(&self) -> u32 {
        self.0
    }
    pub fn to(&self) -> u32 {
        self.1
    }
    pub fn value(&self) -> u32 {
        self.2
    }
    /// Hours covered.
    pub fn len(&self) -> u32 {
        self.1.saturating_sub(self.0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Demand of one pool in one scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolDemand {
    /// Must run on capacity that is not interruptible (on-demand or term).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firm: Vec<Segment>,
    /// Interruptible work: may also run on spot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flex: Vec<Segment>,
    /// v3: work that runs whole, on `nodes` instances of one placement at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gangs: Vec<Gang>,
}

/// v3: a gang, such as a synchronous training run. In every hour `from <= t < to` it holds
/// `nodes` instances of on-demand or term offers, all of one of its `placements` (an offer's
/// `placement`), the same placement in every scenario it appears in. Its GPUs are firm demand
/// besides the pool's `firm`: `nodes` times the placement's `gpus_per_instance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gang {
    /// The campaign's name; the same gang in every scenario it appears in.
    pub id: String,
    pub from: u32,
    pub to: u32,
    pub nodes: u32,
    /// The placements it may run in, by the offers' `placement`.
    pub placements: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub probability: f64,
    #[serde(default)]
    pub demand: BTreeMap<String, PoolDemand>,
    /// Per-offer overrides of `max_instances` (on-demand and spot offers only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_instances: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferKind {
    OnDemand,
    Spot,
    Term,
}

/// Allowed start hours of a term purchase: a list, or `{from, to, step}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Starts {
    List(Vec<u32>),
    Range(StartRange),
}

/// Picks the form by the JSON type (array or object), so that an error inside either form names
/// the field at fault instead of "did not match any variant".
impl<'de> Deserialize<'de> for Starts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StartsVisitor;
        impl<'de> Visitor<'de> for StartsVisitor {
            type Value = Starts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of start hours like `[0, 168]` or a range like `{\"from\": 0, \"to\": 2016, \"step\": 24}`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Starts, A::Error> {
                Vec::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Starts::List)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Starts, A::Error> {
                StartRange::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Starts::Range)
            }
        }
        deserializer.deserialize_any(StartsVisitor)
    }
}

impl Starts {
    /// The allowed start hours in a horizon of `hours`, ascending and without repeats.
    pub fn hours(&self, hours: u32) -> Vec<u32> {
        let mut list = match self {
            Starts::List(list) => list.clone(),
            Starts::Range(r) => {
                let end = r.to.min(hours);
                let step = r.step.max(1) as usize;
                (r.from..end).step_by(step).collect()
            }
        };
        list.sort_unstable();
        list.dedup();
        list
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRange {
    pub from: u32,
    pub to: u32,
    pub step: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offer {
    pub id: String,
    pub pool: String,
    pub kind: OfferKind,
    pub gpus_per_instance: u32,
    pub price_per_instance_hour: f64,
    /// `spot` only: fraction of extra cost for work lost to interruptions. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    /// `term` only: paid once per instance bought. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upfront_per_instance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term_hours: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<Starts>,
    /// Instances in use in any one hour; `None` (JSON `null` or absent) is no limit.
    #[serde(default)]
    pub max_instances: Option<u32>,
    /// v2, `term` only: the fewest instances one piece of a purchase may have. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_purchase_instances: Option<u32>,
    /// v2, `term` only: the most instances one piece of a purchase may have (a cloud's
    /// per-request maximum). Default no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_purchase_instances: Option<u32>,
    /// v2, `term` only: USD paid once per piece bought (the work of making a purchase).
    /// Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_purchase: Option<f64>,
    /// v3: where its instances run, such as `aws/us-east-1/p5.48xlarge`. A gang runs on the
    /// on-demand and term offers of one placement only. Default: none (fluid work only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
}

impl Offer {
    /// Whether the offer uses any v2-only field.
    pub fn has_purchase_rules(&self) -> bool {
        self.min_purchase_instances.is_some()
            || self.max_purchase_instances.is_some()
            || self.cost_per_purchase.is_some()
    }
}

/// v2: in every hour of every scenario, `Σ weight × instances in use ≤ cap` over the listed
/// offers. Instances in use are, for a `term` offer, the instances held (bought and within
/// their term); for an `on_demand` or `spot` offer, that scenario's usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedLimit {
    pub id: String,
    /// What the weights count, free text: "instances", "GPUs", "vCPUs".
    pub unit: String,
    pub cap: u64,
    /// Offer id → weight per instance (>= 1).
    pub offers: BTreeMap<String, u32>,
    /// Where the limit comes from (a quota's name, a config key), for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The whole problem document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub schema: String,
    /// RFC 3339 UTC timestamp on a whole hour.
    pub start: String,
    /// The horizon's length in periods (hours unless `period_minutes` says otherwise).
    pub hours: u32,
    /// v3: minutes per period, 60 (the default), 30 or 15. Every time in the document (`hours`,
    /// segments, gangs' `from` and `to`, `term_hours`, `starts`, a solution's `start_hour`) then
    /// counts periods; prices stay per instance-hour. Half hours let a plan meet AWS capacity
    /// blocks, which start at 11:30 UTC, without an hour of on-demand at each edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_minutes: Option<u32>,
    pub pools: Vec<String>,
    pub offers: Vec<Offer>,
    pub scenarios: Vec<Scenario>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<f64>,
    /// v2: caps on weighted sums of instances in use across offers (and pools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_limits: Vec<SharedLimit>,
}

impl Problem {
    /// Whether the document may use v2's fields: `gpucap.problem/v2` or `/v3`.
    pub fn is_v2(&self) -> bool {
        self.schema == PROBLEM_SCHEMA_V2 || self.is_v3()
    }

    /// Whether the document is `gpucap.problem/v3` (gangs and placements).
    pub fn is_v3(&self) -> bool {
        self.schema == PROBLEM_SCHEMA_V3
    }

    /// Minutes per period: `period_minutes`, else 60.
    pub fn period_minutes(&self) -> u32 {
        self.period_minutes.unwrap_or(60)
    }

    /// Hours per period: what an hourly price is multiplied by for one period.
    pub fn period_hours(&self) -> f64 {
        f64::from(self.period_minutes()) / 60.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Optimal,
    Feasible,
    Infeasible,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Purchase {
    pub offer: String,
    pub start_hour: u32,
    pub instances: u32,
    /// v2: the pieces the purchase is made of (each within the offer's minimum and maximum
    /// per purchase; [`split_purchase`] gives their sizes). 0, and left out, in v1 solutions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pieces: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub offer: String,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSolution {
    pub name: String,
    pub cost: f64,
    pub usage: Vec<Usage>,
    /// v3: what each gang runs on, hour by hour.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs_on: Vec<GangRun>,
}

/// v3: a gang's `instances` of one offer (for a term offer, of its purchase at `start_hour`) in
/// every hour `from <= t < to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GangRun {
    pub gang: String,
    pub offer: String,
    /// The purchase it runs on, for a term offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_hour: Option<u32>,
    pub from: u32,
    pub to: u32,
    pub instances: u32,
}

/// v3: where a gang runs, in every scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GangPlacement {
    pub gang: String,
    pub placement: String,
    /// Times its capacity changes under it in the first scenario (each a restart from a
    /// checkpoint).
    pub restarts: u32,
}

/// The solution document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Solution {
    pub schema: String,
    pub status: Status,
    pub expected_cost: f64,
    pub bound: f64,
    pub term_cost: f64,
    pub purchases: Vec<Purchase>,
    pub scenarios: Vec<ScenarioSolution>,
    /// v3: the placement of every gang.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gangs: Vec<GangPlacement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The solver stopped at its time limit before finding any plan for some pools: `status`
    /// is `infeasible`, yet a plan may exist. Not part of the document.
    #[serde(skip)]
    pub out_of_time: bool,
}
