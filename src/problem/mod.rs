//! The `gpucap.problem/v1` and `gpucap.solution/v1` documents (`shared/spec/problem-v1.md`):
//! the contract between the planner, which builds a problem from demand and offers, and the
//! solver, which answers it. Plain serde types; unknown fields are rejected on input.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const PROBLEM_SCHEMA: &str = "gpucap.problem/v1";
pub const SOLUTION_SCHEMA: &str = "gpucap.solution/v1";

/// `[from, to, value]`: `value` (GPUs or instances) in every hour `from <= t < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Segment(pub u32, pub u32, pub u32);

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Starts {
    List(Vec<u32>),
    Range(StartRange),
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
}

/// The whole problem document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Problem {
    pub schema: String,
    /// RFC 3339 UTC timestamp on a whole hour.
    pub start: String,
    pub hours: u32,
    pub pools: Vec<String>,
    pub offers: Vec<Offer>,
    pub scenarios: Vec<Scenario>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<f64>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
