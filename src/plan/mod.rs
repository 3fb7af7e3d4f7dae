//! The plan document (`gpucap.plan/v1`): what `gpucap plan` writes with `-o plan.json`, what the
//! budget gates read, and what `gpucap generate` and `gpucap apply` act on.
//!
//! A plan is the solver's answer turned into dated actions people can review, with the costs,
//! baselines, risk and gate results beside them, and a fingerprint of every input so that acting
//! on it later can refuse a plan whose inputs have moved. The types here are plain serde data;
//! [`build`] makes one from a problem and its solution, [`fingerprint`] hashes the inputs and
//! tells which have moved since, [`gates`] evaluates the budget gates on a plan, [`due`] picks
//! the actions due in a window, [`read`] reads a saved plan back, and [`diff`] says what changed
//! from one plan to the next. `plan`, `generate` and
//! `apply` share these, so they agree on what a plan says and when it is stale.
//!
//! The fields the gates read (`cost`, `actions`, `campaigns`, `quotes`) are the contract written
//! down in `policies/README.md`; the rest is for people, charts and renderers.

pub mod build;
pub mod diff;
pub mod due;
pub mod fingerprint;
pub mod gates;
pub mod quota;
pub mod read;
pub mod validate;

use serde::{Deserialize, Serialize};

use crate::policy::Decisions;
use crate::problem::Segment;

pub const PLAN_SCHEMA: &str = "gpucap.plan/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    /// When the plan was made (RFC 3339, UTC): the `now` of booking windows and quote ages.
    pub created_at: String,
    pub horizon: PlanHorizon,
    /// `sha256:<hex>` over every input; `apply` refuses a plan whose inputs hash differently.
    pub fingerprint: Fingerprint,
    /// The solver's verdict on the problem the plan was built from.
    pub solution: SolutionSummary,
    pub cost: Cost,
    /// The same demand priced by simple strategies, and what the plan saves against each.
    pub baselines: Vec<BaselineCost>,
    pub risk: Risk,
    /// The scenario whose on-demand and spot usage the `run_*` actions follow (the most likely).
    pub actions_scenario: String,
    pub actions: Vec<Action>,
    pub pools: Vec<PoolPlan>,
    pub campaigns: Vec<CampaignRef>,
    pub quotes: Vec<Quote>,
    /// Modelling assumptions that were not in any price list (spot overhead, booking windows).
    pub assumptions: Vec<String>,
    /// The quotas the plan was checked against, and what each offer uses of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<QuotaCheck>,
    /// Quota increases to request: needed to cover the demand, or saving money.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quota_increases: Vec<QuotaIncrease>,
    /// The budget gates' decisions on this plan (empty until evaluated).
    #[serde(default)]
    pub gates: Decisions,
    /// The apply state (lineage and serial) the plan was made against; absent when there was
    /// no state yet. `apply` refuses the plan when another operation has written the state
    /// since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::state::StateRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanHorizon {
    pub start: String,
    pub end: String,
    pub hours: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `sha256:<64 hex>` over the sorted input digests below.
    pub digest: String,
    pub inputs: Vec<InputDigest>,
}

/// One input the plan depends on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InputDigest {
    /// `config`, `calendar`, `forecast`, `quotes`, `state`, `policy`.
    pub kind: String,
    /// File path as given (relative to the config), or a name for non-file inputs.
    pub name: String,
    /// `sha256:<64 hex>` of the content.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolutionSummary {
    /// `optimal` or `feasible`.
    pub status: String,
    pub expected_cost: f64,
    pub bound: f64,
    pub term_cost: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Term purchases plus the probability-weighted on-demand and spot cost.
    pub expected_total: f64,
    /// Capacity blocks and commitments: spent once bought, whatever happens.
    pub irreversible: f64,
    pub by_scenario: Vec<ScenarioCost>,
    /// Term cost spread over the hours each purchase is active (so a term running past the
    /// horizon has months after it), plus expected on-demand and spot cost per hour.
    pub by_month: Vec<MonthCost>,
    pub by_pool: Vec<PoolCost>,
    /// Each pool's cost shared among teams by their GPU-hours in the pool, per scenario.
    pub by_team: Vec<TeamCost>,
    pub by_kind: KindCost,
    /// Where campaigns run whole: the same GPU-hours as fluid work (any instance size, any
    /// place, hour by hour), solved the same way. The plan's expected total less its
    /// `expected_total` is the price of being runnable. Absent when no campaign is placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fluid: Option<FluidCost>,
}

/// The plan the price of being runnable is measured against ([`Cost::fluid`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FluidCost {
    /// Its expected total, as [`Cost::expected_total`] counts it (prices only).
    pub expected_total: f64,
    /// What the plan costs more than it, each counting `[planning] cost_per_purchase` for
    /// every purchase (what both were solved for): the price of being runnable.
    pub price: f64,
    /// How far above the fluid optimum it may be, as a fraction (0: proven optimal).
    pub gap: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioCost {
    pub name: String,
    pub probability: f64,
    /// Term cost plus this scenario's on-demand and spot cost (unweighted).
    pub total: f64,
    pub on_demand: f64,
    pub spot: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonthCost {
    /// `YYYY-MM`.
    pub month: String,
    pub expected: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCost {
    pub pool: String,
    pub expected: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamCost {
    /// `None` for campaigns and forecasts without a team.
    pub team: Option<String>,
    pub expected: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KindCost {
    pub on_demand: f64,
    pub spot: f64,
    pub capacity_block: f64,
    pub reservation: f64,
    pub commitment: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineCost {
    /// `all-on-demand`, `cheapest-now`, `reserve-the-peak`.
    pub name: String,
    /// What the strategy means, in words.
    pub description: String,
    /// `None` when the strategy cannot cover the demand (e.g. on-demand limits).
    pub expected_total: Option<f64>,
    /// `expected_total - plan.cost.expected_total`.
    pub saving: Option<f64>,
    /// `saving / expected_total`.
    pub saving_fraction: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Risk {
    /// The costliest scenario.
    pub worst_scenario: String,
    pub worst_total: f64,
    /// Per scenario: term capacity paid for but idle.
    pub stranded: Vec<Stranded>,
}

/// Term (reserved, block, committed) GPU-hours paid for but not used in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stranded {
    pub scenario: String,
    pub probability: f64,
    pub gpu_hours: u64,
    /// The term price of those GPU-hours.
    pub cost: f64,
    /// The same per pool (pools with idle term capacity only): where the idle capacity is, e.g.
    /// a commitment idling in one pool while capacity blocks serve another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<StrandedPool>,
}

/// Term GPU-hours paid for but idle in one pool and scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrandedPool {
    pub pool: String,
    pub gpu_hours: u64,
    /// The pool's average term price of those GPU-hours.
    pub cost: f64,
}

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Buy a capacity block (AWS Capacity Blocks for ML, GCP calendar-mode reservation).
    PurchaseCapacityBlock,
    /// Make a commitment (savings plan, CUD, reserved-instance term).
    Commit,
    /// Create a capacity reservation for a window.
    Reserve,
    /// Run N on-demand instances in a pool from `start` to `end`.
    RunOnDemand,
    /// Run N spot instances in a pool from `start` to `end`.
    RunSpot,
    /// Release (cancel) a reservation at `start`.
    Release,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::PurchaseCapacityBlock => "purchase_capacity_block",
            ActionKind::Commit => "commit",
            ActionKind::Reserve => "reserve",
            ActionKind::RunOnDemand => "run_on_demand",
            ActionKind::RunSpot => "run_spot",
            ActionKind::Release => "release",
        }
    }

    /// Runs: instances a pool runs for a while, not purchases.
    pub fn is_run(self) -> bool {
        matches!(self, ActionKind::RunOnDemand | ActionKind::RunSpot)
    }

    /// Term purchases: bought once for the first stage, shared by every scenario.
    pub fn is_term(self) -> bool {
        matches!(
            self,
            ActionKind::PurchaseCapacityBlock | ActionKind::Commit | ActionKind::Reserve
        )
    }
}

/// One dated thing to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// Stable, readable id made from what the action buys: kind, pool, cloud, place (zone, else
    /// region), instance type, instance count, and the absolute start (UTC) and length of the
    /// window, e.g. `block-h100-us-aws-us-east-1-p5-48xlarge-4x-20270105t1130-7d` (times are
    /// `YYYYMMDD`, with `tHHMM` when not midnight; lengths `7d`, `1d12h`, `30m`). A `release`
    /// is named after the reservation it ends (`release-` and the same parts). Lowercase ASCII
    /// letters, digits and single dashes; a true duplicate in one plan gets `-2`, `-3`, ….
    ///
    /// Never the plan's day, hours from the horizon start or list positions: re-planning the
    /// same need on another day gives the same id, a changed need (other count, other window)
    /// a new one, and a re-plan that changes one pool changes only its actions. Journals,
    /// idempotency tokens, cloud tags and Terraform module names can be keyed on it.
    pub id: String,
    pub kind: ActionKind,
    pub pool: String,
    pub cloud: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub instances: u32,
    pub gpus: u32,
    /// When the capacity starts and ends (RFC 3339, UTC). For `release`, both are the release
    /// time.
    pub start: String,
    pub end: String,
    /// The same as whole hours from the horizon start: the hours the action touches, from the
    /// one `start` falls in to the one `end` ends (`end_hour` may pass the horizon for terms).
    /// A plan laid on half hours (AWS blocks start at 11:30) rounds them out, so two
    /// back-to-back actions may share an hour; `start` and `end` are exact.
    pub start_hour: u32,
    pub end_hour: u32,
    /// The latest time the action must be taken: `start` less the offer's lead time. `apply`
    /// and `generate` act on actions due within their window.
    pub due: String,
    /// The earliest time it can be taken (booking window), where the cloud limits it.
    pub bookable_from: Option<String>,
    /// USD: the whole term for purchases; the run's cost in [`Plan::actions_scenario`] for runs.
    pub cost: f64,
    pub irreversible: bool,
    /// The problem offer this action buys or runs (`gpucap.problem/v1` offer id).
    pub offer: String,
    /// The cloud's id for the offering (capacity block offering, SKU), where known.
    pub offering_id: Option<String>,
    /// Campaigns (and forecasts) whose demand the capacity serves in its window.
    pub campaigns: Vec<String>,
    /// A purchase larger than the cloud sells in one piece: the pieces it is bought as, each
    /// its own purchase (`71` AWS block instances → `[64, 7]`). Empty when it is one piece.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pieces: Vec<u32>,
}

impl Action {
    /// The purchase rule of this action's cloud and instrument
    /// (`gpucap_provider::purchase_rules`), for a capacity block or a reservation on a cloud
    /// gpucap has a rule for.
    pub fn purchase_rule(&self) -> Option<&'static gpucap_provider::purchase_rules::PurchaseRule> {
        use gpucap_provider::{Cloud, PurchaseKind, purchase_rules};
        let kind = match self.kind {
            ActionKind::PurchaseCapacityBlock => PurchaseKind::CapacityBlock,
            ActionKind::Reserve => PurchaseKind::Reservation,
            _ => return None,
        };
        purchase_rules::for_offer(self.cloud.parse::<Cloud>().ok()?, kind, None)
    }

    /// The sizes of the purchases this action is made of: [`Action::pieces`], or for a plan
    /// made without them, its cloud's purchase rule ([`Action::purchase_rule`]) split as the
    /// planner would (`problem::split_purchase`: 71 AWS block instances are 64 + 7). `apply`
    /// buys each as its own purchase (`<action>#<n>`) and `generate` writes a call for each.
    /// Runs are one piece.
    pub fn piece_sizes(&self) -> Vec<u32> {
        if !self.pieces.is_empty() {
            return self.pieces.clone();
        }
        match self.purchase_rule() {
            Some(rule) => crate::problem::split_purchase(
                self.instances,
                Some(rule.min_instances),
                rule.max_instances,
            ),
            None => vec![self.instances],
        }
    }
}

/// The id of piece `n` (from 1) of `count`: the action's own id for a purchase of one piece,
/// `<action>#<n>` otherwise. `apply` records each piece under it; Terraform names it so.
pub fn piece_id(action: &str, n: u32, count: u32) -> String {
    if count <= 1 {
        action.to_string()
    } else {
        format!("{action}#{n}")
    }
}

/// A quota the plan keeps within.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaCheck {
    /// `cloud/region/name`, e.g. `aws/us-east-1/L-417A185B`.
    pub quota: String,
    pub title: String,
    /// `vCPUs` or `GPUs`.
    pub unit: String,
    pub value: u64,
    /// `config`, `live` or `default`.
    pub source: String,
    /// Problem offer id → what one instance uses of the quota.
    pub offers: std::collections::BTreeMap<String, u32>,
    /// `false`: the offers could never use it all (their pools' peak demand is within it), so
    /// the problem leaves it out; the plan is within it whatever it buys.
    pub limiting: bool,
}

/// A quota the plan needs raised (to cover demand) or would save money with: how much, by
/// when, and why. The gates see these (`input.quota_increases`); a plan that depends on one
/// (`needed`) is denied until the higher quota is granted and set in `[quotas]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaIncrease {
    /// `request-quota-increase-<cloud>-<region>-<quota>`.
    pub id: String,
    /// Always `request_quota_increase`.
    pub kind: String,
    pub cloud: String,
    pub region: String,
    /// The quota's code or name as the cloud spells it (`L-417A185B`, `NVIDIA_H100_GPUS`).
    pub quota: String,
    pub title: String,
    /// `vCPUs` or `GPUs`.
    pub unit: String,
    /// The quota the plan was made with, and where that figure came from (`config`, `live`,
    /// `default`).
    pub current: u64,
    pub current_source: String,
    /// The quota to ask for, and the increase.
    pub requested: u64,
    pub increase: u64,
    /// When the higher quota is first used (RFC 3339), and the latest time to ask for it
    /// (that less the lead time the cloud takes to grant it, as gpucap assumes it).
    pub first_needed: String,
    pub request_by: String,
    /// The plan covers its demand only with this increase.
    pub needed: bool,
    /// What the increase saves, USD (expected), when it is not needed but cheaper.
    pub saving: Option<f64>,
    pub reason: String,
}

/// One pool: where it may run and, hour by hour, demand against planned capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolPlan {
    pub id: String,
    pub accelerator: String,
    pub clouds: Vec<String>,
    pub regions: Vec<String>,
    /// Demand in [`Plan::actions_scenario`], GPUs.
    pub demand_firm: Vec<Segment>,
    pub demand_flex: Vec<Segment>,
    /// Planned capacity in [`Plan::actions_scenario`], GPUs, by kind.
    pub term: Vec<Segment>,
    pub on_demand: Vec<Segment>,
    pub spot: Vec<Segment>,
    /// Capacity that already exists (state, config) counted at no extra cost, GPUs.
    pub existing: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRef {
    pub name: String,
    pub team: Option<String>,
    /// `critical`, `high`, `normal`, `low`; forecasts are `normal`.
    pub priority: String,
    pub interruptible: bool,
    pub pool: String,
    /// Its GPUs at their peak in [`Plan::actions_scenario`], after the buffer and the
    /// scenario's scale (0 where it has no demand in that scenario).
    #[serde(default)]
    pub gpus: u32,
    /// When its demand starts and ends in [`Plan::actions_scenario`] (RFC 3339, on the plan's
    /// hour grid); absent where it has none there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Where the campaign runs when it is placed whole (`[planning] placement = "gangs"`, the
    /// default); `null` for fluid work, which may run on any instance in any of the pool's
    /// places.
    #[serde(default)]
    pub placement: Option<CampaignPlacement>,
    /// What a placed campaign runs on in [`Plan::actions_scenario`]: the actions (or capacity
    /// already owned) and when, in time order. Empty for fluid work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs_on: Vec<CampaignRun>,
}

/// A stretch of a placed campaign's run on one action of the plan, or on capacity already
/// owned: `instances` of it from `start` to `end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRun {
    /// The id of the plan's action it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The id of the capacity already owned it runs on (`[[capacity]]` or state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    pub start: String,
    pub end: String,
    pub instances: u32,
}

/// Where a campaign placed as a gang runs: one cloud, region and instance type, on whole nodes,
/// from its start to its end (`docs/problem-v3.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignPlacement {
    pub cloud: String,
    pub region: String,
    /// The zone, where the plan fixes one; `null` when it is chosen when buying.
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpus_per_node: u32,
    /// Nodes at once, in the plan's first scenario.
    pub nodes: u32,
    /// Times the capacity under it changes in the first scenario (each a restart from a
    /// checkpoint).
    pub restarts: u32,
    /// What those restarts cost, USD: `restarts × [planning] restart_hours × nodes ×` the
    /// placement's on-demand price per node-hour. Reported, not yet weighed by the solver.
    #[serde(default)]
    pub restart_cost: f64,
}

/// A price the plan relies on, and where and when it was learnt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quote {
    /// The problem offer id.
    pub offer: String,
    /// `live`, `cache`, `snapshot`, `import`, `contract` (`[prices]` of the config), or `state`
    /// for capacity already owned.
    pub source: String,
    pub fetched_at: String,
    /// USD per instance-hour as quoted (for blocks: the effective hourly rate).
    pub price_per_instance_hour: f64,
    pub upfront_per_instance: f64,
    pub offering_id: Option<String>,
    /// Where the price came from in words (API, snapshot entry's URL, file).
    pub origin: String,
    /// `contract` prices only: the list price the contract price replaces (a discount, or a
    /// private offer priced off a list), and that list price's source, whose age the quote-age
    /// gate checks. Absent for list prices and private offers at a stated rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_price_per_instance_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_source: Option<String>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plan with nothing in it, for tests to fill in.
    pub(crate) fn empty_plan() -> Plan {
        Plan {
            schema: PLAN_SCHEMA.into(),
            created_at: "2027-01-01T00:00:00Z".into(),
            horizon: PlanHorizon {
                start: "2027-01-01T00:00:00Z".into(),
                end: "2027-02-01T00:00:00Z".into(),
                hours: 744,
            },
            fingerprint: Fingerprint {
                digest: String::new(),
                inputs: Vec::new(),
            },
            solution: SolutionSummary {
                status: "optimal".into(),
                expected_cost: 0.0,
                bound: 0.0,
                term_cost: 0.0,
            },
            cost: Cost::default(),
            baselines: Vec::new(),
            risk: Risk::default(),
            actions_scenario: "base".into(),
            actions: Vec::new(),
            pools: Vec::new(),
            campaigns: Vec::new(),
            quotes: Vec::new(),
            assumptions: Vec::new(),
            quotas: Vec::new(),
            quota_increases: Vec::new(),
            gates: Decisions::default(),
            state: None,
        }
    }
}
