//! `gpucap.toml`: the project configuration at the root of an infra repo.
//!
//! The doc comments on these structs are the user documentation of every key and its default
//! (`gpucap init` writes the same text as comments). Unknown keys are errors that name the key's
//! path, the line, and the closest known key. Parsing is pure: [`Config::parse`] takes the text;
//! the caller reads the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::Accelerator;
use crate::diagnostic::{InputError, Location, did_you_mean};
use crate::text::visible;
use crate::timespec::{Horizon, Span, Timestamp};

mod prices;
use gpucap_provider::Cloud;
pub use prices::{DiscountKey, KindClass, PriceSettings, PrivateOfferConfig};

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// When planning starts and how far ahead it looks.
    #[serde(default)]
    pub planning: Planning,
    /// Where the calendars and forecasts are.
    #[serde(default)]
    pub inputs: Inputs,
    /// How calendars become demand.
    #[serde(default)]
    pub demand: DemandSettings,
    /// Capacity pools, by id. A pool is one interchangeable kind of accelerator in the places a
    /// campaign may run. Default: one pool per accelerator (and placement rule) the calendars use.
    #[serde(default)]
    pub pools: BTreeMap<String, PoolConfig>,
    /// Scenarios to plan for. Default: `expected` (0.6), `slip-2w` (0.25: campaigns start two
    /// weeks late), `upside` (0.15: forecast upper quantile, campaigns ×1.2).
    #[serde(default = "default_scenarios")]
    pub scenarios: Vec<ScenarioConfig>,
    /// Budget gates' settings (the data the Rego policies see).
    #[serde(default)]
    pub budget: Budget,
    /// Where results are written.
    #[serde(default)]
    pub output: Output,
    /// Where `gpucap plan` gets prices.
    #[serde(default)]
    pub prices: PriceSettings,
    /// How spot capacity is counted (what the price list does not say).
    #[serde(default)]
    pub spot: SpotSettings,
    /// Capacity you already have (reservations, capacity blocks, commitments), counted at no
    /// extra cost. `gpucap plan --terraform-state FILE` adds what a Terraform state holds.
    #[serde(default)]
    pub capacity: Vec<CapacityConfig>,
    /// Where `gpucap apply` keeps its state, journal, audit log and lock.
    #[serde(default)]
    pub state: StateSettings,
    /// How `gpucap apply` acts on the clouds.
    #[serde(default)]
    pub apply: ApplySettings,
    /// What `gpucap release` frees.
    #[serde(default)]
    pub release: ReleaseSettings,
    /// Your cloud quotas on GPU capacity, overriding what is read live and the offline default.
    #[serde(default)]
    pub quotas: QuotaSettings,
}

/// `[quotas]`: the quotas the plan keeps within.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSettings {
    /// `"cloud/region/quota" = value` in the quota's own unit: AWS vCPUs by quota code
    /// (`"aws/us-east-1/L-417A185B" = 3072`, Running On-Demand P instances), GCP GPUs by quota
    /// name (`"gcp/us-central1/NVIDIA_H100_GPUS" = 64`), Azure vCPUs by VM family
    /// (`"azure/eastus/standardNCADSH100v5Family" = 400`). These win over live figures.
    #[serde(default)]
    pub limits: BTreeMap<String, u64>,
}

impl QuotaSettings {
    /// The configured value of `id`, if any.
    pub fn get(&self, id: &gpucap_provider::quotas::QuotaId) -> Option<u64> {
        self.limits.iter().find_map(|(k, v)| {
            gpucap_provider::quotas::QuotaId::parse(k)
                .ok()
                .filter(|k| k.matches(id))
                .map(|_| *v)
        })
    }
}

/// `[release]`: when `gpucap release` takes a reservation for idle.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseSettings {
    /// How long the cloud must have reported a reservation unused (no instance running in
    /// it) before it is cancelled, when no campaign needs it. Default `1h`. Two runs this far
    /// apart must both see it unused.
    #[serde(default = "default_idle_after")]
    pub idle_after: Span,
}

impl Default for ReleaseSettings {
    fn default() -> Self {
        ReleaseSettings {
            idle_after: default_idle_after(),
        }
    }
}

fn default_idle_after() -> Span {
    Span::hours(1)
}

/// `[apply]`: what `gpucap apply` needs besides the plan.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplySettings {
    /// Where each pool's instances launch (`[apply.pools.<pool>]`): the same facts the
    /// generated Terraform takes as root variables. A pool without them is not created; its
    /// run actions are reported as needing these settings.
    #[serde(default)]
    pub pools: BTreeMap<String, LaunchSettings>,
    /// The Azure resource group gpucap's capacity reservation groups live in. Default: the
    /// `GPUCAP_AZURE_RESOURCE_GROUP` environment variable.
    #[serde(default)]
    pub azure_resource_group: Option<String>,
    /// The GCP project gpucap's reservations live in. Default: the `GPUCAP_GCP_PROJECT`
    /// environment variable, else `GOOGLE_CLOUD_PROJECT`.
    #[serde(default)]
    pub gcp_project: Option<String>,
}

/// How a pool's instances launch (AWS; GCP reads the same fields, see each).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LaunchSettings {
    /// The machine image (`ami-…`; on GCP the boot disk's source image, e.g.
    /// `projects/deeplearning-platform-release/global/images/family/common-cu124`; on Azure
    /// an image's ARM id, `/subscriptions/…/images/…` or a gallery image version, or a
    /// marketplace URN `publisher:offer:sku:version`).
    pub image: String,
    /// Subnets the Auto Scaling group spans (`subnet-…`); at least one. On GCP the first is
    /// the instances' subnetwork (`regions/<region>/subnetworks/<name>`); on Azure the first
    /// is the VMs' subnet, by ARM id (`/subscriptions/…/virtualNetworks/…/subnets/…`).
    pub subnets: Vec<String>,
    /// Security groups (`sg-…`); on GCP the instances' network tags, which firewall rules
    /// select; on Azure the first is the network security group (ARM id) of the VMs' NIC.
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// The group's maximum size. Default: the most instances the plan ever runs in the pool.
    /// (A GCP managed instance group and an Azure scale set have no maximum without an
    /// autoscaler; unused there.)
    #[serde(default)]
    pub max_size: Option<u32>,
    /// GCP only: the pool runs work that can wait. Its on-demand instances are asked for with
    /// DWS flex-start resize requests (queued until Compute Engine can start them all at
    /// once, at the flex-start discount, and deleted at the end of their run), not started
    /// at once. Set it before the pool is first made: a pool is never re-shaped. A flex-start
    /// pool's instances take no reservation.
    #[serde(default)]
    pub flex_start: bool,
    /// With `flex_start`: how long each flex-start instance runs before Compute Engine deletes
    /// it, e.g. `36h`; 10 minutes to 7 days. Default: until the latest end of the pool's runs
    /// due now, at most 7 days.
    #[serde(default, deserialize_with = "human_duration")]
    pub max_run_duration: Option<std::time::Duration>,
}

/// Where `gpucap apply` keeps what it has done.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSettings {
    /// `local` (the default): files in `dir`, for one machine. `s3`: objects under `key` in
    /// `bucket`, shared by every machine that applies, with a lock that holds across them.
    #[serde(default)]
    pub backend: StateBackendKind,
    /// The local backend's directory, relative to this file. Default `.gpucap`.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// s3: the bucket's name (the bucket must exist).
    #[serde(default)]
    pub bucket: Option<String>,
    /// s3: the state object's key, e.g. `gpucap/prod/state.json`. The lock, the journal and the
    /// audit log sit beside it: `<key>.lock`, `<key>.journal/`, `<key>.audit/`.
    #[serde(default)]
    pub key: Option<String>,
    /// s3: the bucket's region. Default: the AWS default chain's (`AWS_REGION`, the profile).
    #[serde(default)]
    pub region: Option<String>,
    /// s3: an S3-compatible endpoint instead of AWS's (MinIO, a test server), e.g.
    /// `http://127.0.0.1:9000`; requests go path-style. `GPUCAP_S3_ENDPOINT` overrides it.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// s3: how long a lock lasts unless its run renews it (runs renew it as they write, once
    /// half of it has gone); the next run takes over a lock whose lease ran out. Longer than
    /// any single cloud call with its retries and reconciliation wait. Default `1h`.
    #[serde(default, deserialize_with = "human_duration")]
    pub lock_lease: Option<std::time::Duration>,
}

impl StateSettings {
    /// The local backend's directory (`dir`, default `.gpucap`).
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(default_state_dir)
    }
}

fn default_state_dir() -> PathBuf {
    PathBuf::from(".gpucap")
}

/// The shortest flex-start run Compute Engine takes (a resize request's
/// `requestedRunDuration`; https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig,
/// read 2026-11-25).
pub const FLEX_MIN_RUN: std::time::Duration = std::time::Duration::from_secs(10 * 60);
/// The longest: flex-start VMs run for at most seven days (same source).
pub const FLEX_MAX_RUN: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A length of time like `90s`, `30m`, `1h` (humantime).
fn human_duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "`{s}` is not a duration ({e}); expected e.g. `90s`, `30m` or `1h`"
        ))
    })
}

/// The state backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateBackendKind {
    /// A directory on this machine.
    #[default]
    Local,
    /// Objects in an S3 bucket, shared between machines.
    S3,
}

impl<'de> Deserialize<'de> for StateBackendKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "local" => Ok(StateBackendKind::Local),
            "s3" => Ok(StateBackendKind::S3),
            other => Err(serde::de::Error::custom(format!(
                "unknown state backend `{other}`; expected `local` or `s3`"
            ))),
        }
    }
}

/// The spot model. Defaults come from public spot traces (`planner::spot` says which and how).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotSettings {
    /// Interruptions per spot instance-hour. Default `0.229` (AWS GPU preemption traces, 2023).
    #[serde(default = "default_interruptions")]
    pub interruptions_per_hour: f64,
    /// Fraction of the instances asked for that can be counted on. Default `0.47` (AWS 16-node
    /// GPU availability traces, 2023).
    #[serde(default = "default_availability")]
    pub availability: f64,
    /// Spot instances asked for per offer when the cloud states no limit. Default `16`.
    #[serde(default = "default_spot_instances")]
    pub max_instances: u32,
    /// How often interruptible campaigns checkpoint, minutes. Default `30`.
    #[serde(default = "default_checkpoint")]
    pub checkpoint_interval_minutes: u32,
    /// Time to get a replacement instance running again after an interruption, minutes.
    /// Default `15`.
    #[serde(default = "default_restart")]
    pub restart_minutes: u32,
    /// Per-place overrides, keyed by `cloud`, `cloud/region` or `cloud/region/instance-type`
    /// (the longest matching key wins), e.g. `[spot.overrides."aws/us-west-2"]`.
    #[serde(default)]
    pub overrides: BTreeMap<String, SpotOverride>,
}

impl Default for SpotSettings {
    fn default() -> Self {
        SpotSettings {
            interruptions_per_hour: default_interruptions(),
            availability: default_availability(),
            max_instances: default_spot_instances(),
            checkpoint_interval_minutes: default_checkpoint(),
            restart_minutes: default_restart(),
            overrides: BTreeMap::new(),
        }
    }
}

/// Spot figures for one place, overriding the defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotOverride {
    pub interruptions_per_hour: Option<f64>,
    pub availability: Option<f64>,
    pub max_instances: Option<u32>,
}

fn default_interruptions() -> f64 {
    0.229
}
fn default_availability() -> f64 {
    0.47
}
fn default_spot_instances() -> u32 {
    16
}
fn default_checkpoint() -> u32 {
    30
}
fn default_restart() -> u32 {
    15
}

/// Capacity you already have.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityConfig {
    /// The cloud's id for it (reservation id, block id, commitment name).
    pub id: String,
    /// `reservation`, `capacity-block` or `commitment`.
    pub kind: gpucap_provider::PurchaseKind,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub instances: u32,
    /// When it starts serving. Default: already active.
    pub start: Option<Timestamp>,
    /// When it ends. Default: open-ended.
    pub end: Option<Timestamp>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Planning {
    /// First planned hour (a date is 00:00 UTC). Default: today, 00:00 UTC, so a scheduled run
    /// always plans from the day it runs.
    pub start: Option<Timestamp>,
    /// How far ahead to plan. Default `13w` (a quarter).
    #[serde(default = "default_horizon")]
    pub horizon: Span,
    /// The fewest instances worth one purchase of a capacity block, reservation or
    /// commitment: smaller purchases are not planned (a plan may still buy nothing). Where a
    /// cloud has its own minimum, the larger one holds; never more than the cloud's maximum per
    /// purchase. Default: none (1).
    pub min_purchase_instances: Option<u32>,
    /// What making one purchase costs the organisation, in USD, besides its price: the plan
    /// counts it for every purchase, so it buys fewer, larger blocks where many small ones
    /// would save less than the work they take. 0 plans by price alone (and proves the optimum).
    ///
    /// Default 1,000: about 11 hours of an engineer's time per purchase. Reviewing it against
    /// the plan and making it (1 h); an approver's sign-off (1 h); launching the instances into
    /// the reservation when it starts and joining them to the cluster (2 h); the GPU health
    /// checks new nodes get before training is scheduled on them (3 h); moving the work off
    /// before the cloud takes the capacity back at the end (2 h); checking the invoice line
    /// against the plan (1 h); and the hour a purchase that slips past its start costs in
    /// follow-up (1 h). An hour is about $90: the US median wage of software developers,
    /// $63.59 an hour (BLS Occupational Outlook Handbook, May 2023), over wages' 70 % share of
    /// employer cost (BLS Employer Costs for Employee Compensation) — some $990, rounded.
    /// These hours are gpucap's estimate, not a published figure: set your own.
    ///
    /// With a cost per purchase the optimum is slow to prove (a fixed charge), so the plan is
    /// the best found by slope scaling and a bounded search, and says how far from optimal it
    /// may be (docs/planning.md, "Fewer, larger purchases").
    #[serde(default = "default_cost_per_purchase")]
    pub cost_per_purchase: f64,
    /// How campaigns that are not interruptible are placed. `gangs` (the default): each that
    /// needs more than one node runs whole, as synchronous training does: in one place (cloud,
    /// region and instance type) on whole nodes of the accelerator's largest size, from its
    /// start to its end (`docs/problem-v3.md`), and the plan says where. `fluid`: their
    /// GPU-hours may come from any instance size in any of the pool's places, hour by hour
    /// (cheaper on paper, and the plan's fluid optimum that the price of being runnable is
    /// measured against).
    #[serde(default)]
    pub placement: Placement,
    /// What one restart of a campaign placed whole costs, in hours of the whole campaign's
    /// nodes. A restart is a change of the capacity under it (on-demand to a block, one block
    /// to the next): it stops at a checkpoint and starts again on the new nodes. Default 1:
    /// writing the checkpoint at the change (10 min), the new nodes joining the job and
    /// passing a quick GPU and network check (25 min), and reloading the checkpoint and
    /// warming the data pipeline back to full speed (25 min). gpucap's estimate, not a
    /// published figure: set your own. The plan reports each campaign's restarts at this cost,
    /// priced at its placement's on-demand rate; the solver does not yet weigh them.
    #[serde(default = "default_restart_hours")]
    pub restart_hours: f64,
}

/// How campaigns that are not interruptible are placed (`[planning] placement`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Fluid,
    #[default]
    Gangs,
}

impl Default for Planning {
    fn default() -> Self {
        Planning {
            start: None,
            horizon: default_horizon(),
            min_purchase_instances: None,
            placement: Placement::default(),
            cost_per_purchase: default_cost_per_purchase(),
            restart_hours: default_restart_hours(),
        }
    }
}

/// See [`Planning::cost_per_purchase`].
pub const DEFAULT_COST_PER_PURCHASE: f64 = 1_000.0;

fn default_cost_per_purchase() -> f64 {
    DEFAULT_COST_PER_PURCHASE
}

/// See [`Planning::restart_hours`].
pub const DEFAULT_RESTART_HOURS: f64 = 1.0;

fn default_restart_hours() -> f64 {
    DEFAULT_RESTART_HOURS
}

fn default_horizon() -> Span {
    Span::days(91)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// Calendar files or glob patterns, relative to this file: `.yaml`/`.yml`, `.toml` or
    /// `.ics`. Default `["calendars/*"]`.
    #[serde(default = "default_calendars")]
    pub calendars: Vec<String>,
    /// Demand forecasts (CSV). Default: none.
    #[serde(default)]
    pub forecasts: Vec<ForecastInput>,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs {
            calendars: default_calendars(),
            forecasts: Vec::new(),
        }
    }
}

fn default_calendars() -> Vec<String> {
    vec!["calendars/*".to_string()]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForecastInput {
    /// The CSV file, relative to this file.
    pub path: PathBuf,
    /// The pool its demand belongs to. Required for Prophet files (`ds,yhat,…`); long-form files
    /// (`timestamp,pool,p50,…`) name the pool on each row, and this then filters them.
    pub pool: Option<String>,
    /// `true`: the forecast work is interruptible and may run on spot. Default `false` (firm).
    #[serde(default)]
    pub flex: bool,
    /// Team the forecast demand is charged to. Optional.
    pub team: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemandSettings {
    /// Fraction added to every campaign without its own `buffer` (failed runs, experiments).
    /// Default `0`.
    #[serde(default)]
    pub buffer: f64,
}

impl Default for DemandSettings {
    fn default() -> Self {
        DemandSettings { buffer: 0.0 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Canonical accelerator name or alias.
    pub accelerator: Accelerator,
    /// Clouds the pool may use. Default: all (or those of `regions`).
    #[serde(default)]
    pub clouds: Vec<Cloud>,
    /// Regions the pool may use. Default: any region of its clouds.
    #[serde(default)]
    pub regions: Vec<String>,
}

/// A scenario: a way the quarter may turn out, with its probability.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioConfig {
    pub name: String,
    /// Probabilities of all scenarios sum to 1.
    pub probability: f64,
    /// Campaigns start this much later than written (their length is kept). Default `0h`.
    #[serde(default = "zero_span")]
    pub slip: Span,
    /// Campaign GPUs are multiplied by this (after buffers). Default `1.0`.
    #[serde(default = "one")]
    pub scale: f64,
    /// Which forecast value to use: `median` (Prophet `yhat`, `p50`), `lower`, `upper`
    /// (the lowest / highest quantile in the file) or a column like `p90`. Default `median`.
    #[serde(default)]
    pub forecast: Quantile,
}

fn zero_span() -> Span {
    Span::hours(0)
}

fn one() -> f64 {
    1.0
}

fn default_scenarios() -> Vec<ScenarioConfig> {
    let s = |name: &str, probability, slip, scale, forecast| ScenarioConfig {
        name: name.to_string(),
        probability,
        slip: Span::days(slip),
        scale,
        forecast,
    };
    vec![
        s("expected", 0.6, 0, 1.0, Quantile::Median),
        s("slip-2w", 0.25, 14, 1.0, Quantile::Median),
        s("upside", 0.15, 0, 1.2, Quantile::Upper),
    ]
}

/// A forecast quantile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quantile {
    #[default]
    Median,
    Lower,
    Upper,
    /// `pNN`: the NN-th percentile column.
    Percentile(u8),
}

impl Quantile {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "median" | "p50" => Ok(Quantile::Median),
            "lower" => Ok(Quantile::Lower),
            "upper" => Ok(Quantile::Upper),
            _ => s
                .strip_prefix('p')
                .and_then(|n| n.parse::<u8>().ok())
                .filter(|n| (1..=99).contains(n))
                .map(Quantile::Percentile)
                .ok_or_else(|| format!("`{s}` is not a quantile; expected `median`, `lower`, `upper` or `p1`..`p99`")),
        }
    }
}

impl<'de> Deserialize<'de> for Quantile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Quantile::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Budget settings. They are the `data` document of the budget-gate policies.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Maximum expected total cost of the plan, USD. Default: no limit.
    pub total: Option<f64>,
    /// Maximum expected cost in any calendar month, USD. Default: no limit.
    pub monthly: Option<f64>,
    /// Maximum expected cost per team, USD.
    #[serde(default)]
    pub teams: BTreeMap<String, f64>,
    /// Irreversible spend (capacity blocks, commitments) above this needs an approval, USD.
    /// Default: no approval needed.
    pub approval_above: Option<f64>,
    /// Clouds a plan may buy from (data residency, contracts). Default: all.
    #[serde(default)]
    pub allowed_clouds: Vec<Cloud>,
    /// Regions a plan may buy in. Default: all.
    #[serde(default)]
    pub allowed_regions: Vec<String>,
    /// Oldest acceptable price quote. Default `24h`.
    pub max_quote_age: Option<Span>,
    /// Extra Rego policy directories, relative to this file.
    #[serde(default)]
    pub policies: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Directory for plans, problems and charts, relative to this file. Default `gpucap-out`.
    #[serde(default = "default_output_dir")]
    pub dir: PathBuf,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            dir: default_output_dir(),
        }
    }
}

fn default_output_dir() -> PathBuf {
    PathBuf::from("gpucap-out")
}

impl Config {
    /// Parses and validates the text of a `gpucap.toml`. `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, InputError> {
        crate::nesting::check(text, path, crate::nesting::Syntax::Toml)?;
        let de =
            toml::de::Deserializer::parse(text).map_err(|e| toml_error(text, path, &e, None))?;
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            toml_error(text, path, e.inner(), Some(field))
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), InputError> {
        let at = |field: String| Location::file(path).field(field);
        let total: f64 = self.scenarios.iter().map(|s| s.probability).sum();
        if self.scenarios.is_empty() {
            return Err(InputError::new(
                at("scenarios".into()),
                "at least one scenario is needed",
            ));
        }
        let mut names = std::collections::HashSet::new();
        for (i, s) in self.scenarios.iter().enumerate() {
            if !(s.probability > 0.0 && s.probability <= 1.0) {
                return Err(InputError::new(
                    at(format!("scenarios[{i}].probability")),
                    format!("probability must be in (0, 1], found {}", s.probability),
                ));
            }
            if !(s.scale.is_finite() && s.scale > 0.0 && s.scale <= crate::limits::MAX_SCALE) {
                return Err(InputError::new(
                    at(format!("scenarios[{i}].scale")),
                    format!(
                        "scale must be a positive number up to {}, found {}",
                        crate::limits::MAX_SCALE,
                        crate::limits::show(s.scale)
                    ),
                ));
            }
            if s.slip.as_hours() < 0 {
                return Err(InputError::new(
                    at(format!("scenarios[{i}].slip")),
                    "slip cannot be negative",
                ));
            }
            if let Err(m) = crate::text::check_name(&s.name) {
                return Err(InputError::new(at(format!("scenarios[{i}].name")), m));
            }
            if s.name.trim().is_empty() || !names.insert(s.name.as_str()) {
                return Err(InputError::new(
                    at(format!("scenarios[{i}].name")),
                    format!("scenario names must be unique and non-empty: `{}`", s.name),
                ));
            }
        }
        if (total - 1.0).abs() > 1e-9 {
            return Err(InputError::new(
                at("scenarios".into()),
                format!("scenario probabilities sum to {total}, not 1"),
            )
            .with_hint("adjust the `probability` of the scenarios so they add up to 1"));
        }
        if !(self.demand.buffer.is_finite() && (0.0..=10.0).contains(&self.demand.buffer)) {
            return Err(InputError::new(
                at("demand.buffer".into()),
                format!(
                    "buffer must be a fraction between 0 and 10, found {}",
                    self.demand.buffer
                ),
            ));
        }
        self.validate_budget(path)?;
        if self.planning.horizon.as_hours() <= 0
            || self.planning.horizon.as_hours() > i64::from(crate::problem::validate::MAX_HOURS)
        {
            return Err(InputError::new(
                at("planning.horizon".into()),
                "horizon must be between 1 hour and 12 years",
            ));
        }
        if self.planning.min_purchase_instances == Some(0) {
            return Err(InputError::new(
                at("planning.min_purchase_instances".into()),
                "must be a whole number of instances >= 1",
            ));
        }
        let cost = self.planning.cost_per_purchase;
        if !(cost.is_finite() && cost >= 0.0) {
            return Err(InputError::new(
                at("planning.cost_per_purchase".into()),
                format!("must be an amount in USD >= 0, found {cost}"),
            ));
        }
        let restart = self.planning.restart_hours;
        if !(restart.is_finite() && (0.0..=168.0).contains(&restart)) {
            return Err(InputError::new(
                at("planning.restart_hours".into()),
                format!("must be hours from 0 to 168 (a week), found {restart}"),
            ));
        }
        for (id, pool) in &self.pools {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(InputError::new(
                    at(format!("pools.{id}")),
                    "pool ids use letters, digits, `-`, `_` and `.` only",
                ));
            }
            for (i, region) in pool.regions.iter().enumerate() {
                let cloud = known_region(region, at(format!("pools.{id}.regions[{i}]")))?;
                if !pool.clouds.is_empty() && !pool.clouds.contains(&cloud) {
                    return Err(InputError::new(
                        at(format!("pools.{id}.regions[{i}]")),
                        format!(
                            "region `{region}` is in {cloud}, which is not in this pool's `clouds`"
                        ),
                    ));
                }
            }
        }
        for (i, region) in self.budget.allowed_regions.iter().enumerate() {
            known_region(region, at(format!("budget.allowed_regions[{i}]")))?;
        }
        for (i, f) in self.inputs.forecasts.iter().enumerate() {
            if let Some(team) = &f.team
                && let Err(m) = crate::text::check_name(team)
            {
                return Err(InputError::new(
                    at(format!("inputs.forecasts[{i}].team")),
                    m,
                ));
            }
            if let Some(pool) = &f.pool
                && !self.pools.is_empty()
                && !self.pools.contains_key(pool)
                && Accelerator::parse(pool).is_err()
            {
                let mut err = InputError::new(
                    at(format!("inputs.forecasts[{i}].pool")),
                    format!("unknown pool `{pool}`"),
                );
                if let Some(s) = did_you_mean(pool, self.pools.keys().map(String::as_str)) {
                    err = err.with_hint(format!("did you mean `{s}`?"));
                }
                return Err(err);
            }
        }
        for (pool, launch) in &self.apply.pools {
            let field = |name: &str| at(format!("apply.pools.{pool}.{name}"));
            if !self.pools.is_empty() && !self.pools.contains_key(pool) {
                let mut err = InputError::new(
                    at(format!("apply.pools.{pool}")),
                    format!("unknown pool `{pool}`"),
                );
                if let Some(s) = did_you_mean(pool, self.pools.keys().map(String::as_str)) {
                    err = err.with_hint(format!("did you mean `{s}`?"));
                }
                return Err(err);
            }
            if launch.image.trim().is_empty() {
                return Err(InputError::new(field("image"), "must name a machine image"));
            }
            if launch.subnets.is_empty() || launch.subnets.iter().any(|s| s.trim().is_empty()) {
                return Err(InputError::new(
                    field("subnets"),
                    "must list at least one subnet, none empty",
                ));
            }
            if launch.max_size == Some(0) {
                return Err(InputError::new(field("max_size"), "must be at least 1"));
            }
            if let Some(d) = launch.max_run_duration {
                if !launch.flex_start {
                    return Err(InputError::new(
                        field("max_run_duration"),
                        "applies to flex-start pools only; set `flex_start = true` too",
                    ));
                }
                if !(FLEX_MIN_RUN..=FLEX_MAX_RUN).contains(&d) {
                    return Err(InputError::new(
                        field("max_run_duration"),
                        "must be between 10 minutes and 7 days (Compute Engine's bounds for a flex-start run)",
                    ));
                }
            }
            if launch.flex_start
                && let Some(p) = self.pools.get(pool)
                && let Some(other) = p
                    .regions
                    .iter()
                    .find(|r| Cloud::of_region(r) != Some(Cloud::Gcp))
            {
                return Err(InputError::new(
                    field("flex_start"),
                    format!(
                        "flex-start (DWS resize requests) is GCP's; pool `{pool}` also runs in `{other}`"
                    ),
                ));
            }
        }
        let spot = &self.spot;
        let mut spot_figures = vec![(
            "spot".to_string(),
            Some(spot.interruptions_per_hour),
            Some(spot.availability),
        )];
        for (key, o) in &spot.overrides {
            spot_figures.push((
                format!("spot.overrides.\"{key}\""),
                o.interruptions_per_hour,
                o.availability,
            ));
            let mut parts = key.split('/');
            let cloud_ok = parts.next().is_some_and(|c| c.parse::<Cloud>().is_ok());
            let region = parts.next();
            let region_ok = region.is_none_or(|r| Cloud::of_region(r).is_some());
            if !(cloud_ok && region_ok) {
                return Err(InputError::new(
                    at(format!("spot.overrides.\"{key}\"")),
                    format!(
                        "`{key}` is not `cloud`, `cloud/region` or `cloud/region/instance-type`"
                    ),
                )
                .with_hint("for example `aws`, `aws/us-west-2` or `aws/us-west-2/p5.48xlarge`"));
            }
            if let Some(region) = region {
                known_region(region, at(format!("spot.overrides.\"{key}\"")))?;
            }
        }
        for (field, minutes) in [
            (
                "checkpoint_interval_minutes",
                spot.checkpoint_interval_minutes,
            ),
            ("restart_minutes", spot.restart_minutes),
        ] {
            if minutes > crate::limits::MAX_SPOT_MINUTES {
                return Err(InputError::new(
                    at(format!("spot.{field}")),
                    format!(
                        "must be at most {} minutes (a day), found `{minutes}`",
                        crate::limits::MAX_SPOT_MINUTES
                    ),
                )
                .with_hint("a campaign that cannot checkpoint or restart within a day is not interruptible: set `interruptible: false` on it instead"));
            }
        }
        for (at_key, rate, availability) in spot_figures {
            if let Some(r) = rate
                && !(r.is_finite() && r >= 0.0)
            {
                return Err(InputError::new(
                    at(format!("{at_key}.interruptions_per_hour")),
                    format!("must be a number >= 0, found {r}"),
                ));
            }
            if let Some(a) = availability
                && !(0.0..=1.0).contains(&a)
            {
                return Err(InputError::new(
                    at(format!("{at_key}.availability")),
                    format!("must be a fraction in [0, 1], found {a}"),
                ));
            }
        }
        for key in self.quotas.limits.keys() {
            let id = gpucap_provider::quotas::QuotaId::parse(key)
                .map_err(|m| InputError::new(at(format!("quotas.limits.\"{key}\"")), m))?;
            if Cloud::of_region(&id.region).is_some_and(|c| c != id.cloud) {
                return Err(InputError::new(
                    at(format!("quotas.limits.\"{key}\"")),
                    format!("`{}` is not a region of {}", id.region, id.cloud),
                ));
            }
        }
        self.validate_state(&at)?;
        prices::validate(&self.prices).map_err(|(field, m)| InputError::new(at(field), m))?;
        let mut ids = std::collections::HashMap::new();
        for (i, c) in self.capacity.iter().enumerate() {
            if let Some(first) = ids.insert(c.id.as_str(), i) {
                return Err(InputError::new(
                    at(format!("capacity[{i}].id")),
                    format!("`{}` is also the id of capacity[{first}]", visible(&c.id)),
                )
                .with_hint("each [[capacity]] entry is one reservation, block or commitment"));
            }
            if let Err(m) = crate::text::check_name(&c.id) {
                return Err(InputError::new(at(format!("capacity[{i}].id")), m));
            }
            if !(1..=crate::limits::MAX_INSTANCES).contains(&c.instances) {
                return Err(InputError::new(
                    at(format!("capacity[{i}].instances")),
                    format!(
                        "must be between 1 and {}, found {}",
                        crate::limits::MAX_INSTANCES,
                        c.instances
                    ),
                ));
            }
            let cloud = known_region(&c.region, at(format!("capacity[{i}].region")))?;
            if let Some(zone) = &c.zone
                && !gpucap_provider::regions::zone_in_region(cloud, &c.region, zone)
            {
                return Err(InputError::new(
                    at(format!("capacity[{i}].zone")),
                    format!(
                        "`{}` is not a zone of {cloud} region `{}`",
                        visible(zone),
                        c.region
                    ),
                )
                .with_hint(match cloud {
                    Cloud::Azure => "Azure zones are numbers: `1`, `2` or `3`".to_string(),
                    Cloud::Gcp => format!("zones of `{0}` are named like `{0}-a`", c.region),
                    Cloud::Aws => format!("zones of `{0}` are named like `{0}a`", c.region),
                }));
            }
            if c.kind == gpucap_provider::PurchaseKind::OnDemand
                || c.kind == gpucap_provider::PurchaseKind::Spot
            {
                return Err(InputError::new(
                    at(format!("capacity[{i}].kind")),
                    format!("`{}` is not capacity you own", c.kind),
                )
                .with_hint("use `reservation`, `capacity-block` or `commitment`"));
            }
            if let (Some(a), Some(b)) = (c.start, c.end)
                && b <= a
            {
                return Err(InputError::new(
                    at(format!("capacity[{i}].end")),
                    "end must be after start",
                ));
            }
        }
        Ok(())
    }

    /// Every `[budget]` amount is a finite number of dollars in `[0, MAX_USD]`. A gate compares
    /// the plan with these; a NaN or infinite limit would let every plan through (NaN compares
    /// false, and JSON has no NaN: it would reach the policies as "no limit"). So this runs before
    /// any gate, and the gates never see such a value.
    fn validate_budget(&self, path: &Path) -> Result<(), InputError> {
        use crate::limits::{MAX_USD, finite_in};
        let b = &self.budget;
        let amounts = [
            ("budget.total".to_string(), b.total),
            ("budget.monthly".to_string(), b.monthly),
            ("budget.approval_above".to_string(), b.approval_above),
        ]
        .into_iter()
        .chain(
            b.teams
                .iter()
                .map(|(team, v)| (format!("budget.teams.{team}"), Some(*v))),
        );
        for team in b.teams.keys() {
            if let Err(m) = crate::text::check_name(team) {
                return Err(InputError::new(
                    Location::file(path).field(format!("budget.teams.{}", visible(team))),
                    m,
                ));
            }
        }
        for (field, value) in amounts {
            if let Some(v) = value
                && !finite_in(v, 0.0, MAX_USD)
            {
                return Err(InputError::new(
                    Location::file(path).field(field),
                    format!("must be a number of US dollars between 0 and {MAX_USD:e}, found {v}"),
                )
                .with_hint("leave the key out for no limit"));
            }
        }
        if let Some(age) = b.max_quote_age
            && age.as_hours() < 0
        {
            return Err(InputError::new(
                Location::file(path).field("budget.max_quote_age"),
                "cannot be negative",
            ));
        }
        Ok(())
    }

    /// `[state]`: each backend's own keys, and what the s3 backend cannot do without.
    fn validate_state(&self, at: &dyn Fn(String) -> Location) -> Result<(), InputError> {
        let st = &self.state;
        let field = |name: &str| at(format!("state.{name}"));
        match st.backend {
            StateBackendKind::Local => {
                let s3_only = [
                    ("bucket", st.bucket.is_some()),
                    ("key", st.key.is_some()),
                    ("region", st.region.is_some()),
                    ("endpoint", st.endpoint.is_some()),
                    ("lock_lease", st.lock_lease.is_some()),
                ];
                if let Some((name, _)) = s3_only.iter().find(|(_, set)| *set) {
                    return Err(InputError::new(
                        field(name),
                        format!("`{name}` is for `backend = \"s3\"`; the local backend keeps its files in `dir`"),
                    )
                    .with_hint("set `backend = \"s3\"`, or remove it"));
                }
                if st.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
                    return Err(InputError::new(
                        field("dir"),
                        "the state directory cannot be empty",
                    )
                    .with_hint("leave `dir` out for the default `.gpucap`"));
                }
            }
            StateBackendKind::S3 => {
                if st.dir.is_some() {
                    return Err(InputError::new(
                        field("dir"),
                        "`dir` is the local backend's directory; the s3 backend keeps everything under `key` in `bucket`",
                    )
                    .with_hint("remove `dir`"));
                }
                let bucket = st.bucket.as_deref().map(str::trim).unwrap_or_default();
                if bucket.is_empty() {
                    return Err(InputError::new(
                        field("bucket"),
                        "the s3 state backend needs `bucket`",
                    )
                    .with_hint(
                        "the name of an existing S3 bucket, e.g. `bucket = \"acme-infra-state\"`",
                    ));
                }
                if bucket.contains('/') || bucket.contains(char::is_whitespace) {
                    return Err(InputError::new(
                        field("bucket"),
                        format!("`{bucket}` is not a bucket name"),
                    )
                    .with_hint(
                        "just the name, without `s3://` or a path; the path goes in `key`",
                    ));
                }
                let key = st.key.as_deref().unwrap_or_default();
                if key.trim().is_empty() {
                    return Err(
                        InputError::new(field("key"), "the s3 state backend needs `key`")
                            .with_hint(
                                "the state object's key, e.g. `key = \"gpucap/prod/state.json\"`",
                            ),
                    );
                }
                if key.starts_with('/') || key.ends_with('/') || key.contains("//") {
                    return Err(InputError::new(
                        field("key"),
                        format!("`{key}` is not an object key: no leading or trailing `/`, no empty parts"),
                    )
                    .with_hint("e.g. `key = \"gpucap/prod/state.json\"`"));
                }
                if st.region.as_deref().is_some_and(|r| r.trim().is_empty()) {
                    return Err(
                        InputError::new(field("region"), "the region cannot be empty")
                            .with_hint("leave `region` out to take AWS_REGION or the profile's"),
                    );
                }
                if let Some(url) = &st.endpoint
                    && !(url.starts_with("http://") || url.starts_with("https://"))
                {
                    return Err(InputError::new(
                        field("endpoint"),
                        format!("`{url}` is not an http:// or https:// URL"),
                    ));
                }
                if st
                    .lock_lease
                    .is_some_and(|d| d < std::time::Duration::from_secs(1))
                {
                    return Err(
                        InputError::new(field("lock_lease"), "must be at least `1s`")
                            .with_hint("the default is `1h`; runs renew it as they go"),
                    );
                }
            }
        }
        Ok(())
    }

    /// The planning horizon, with `now` as the default start.
    pub fn horizon(&self, now: DateTime<Utc>) -> Horizon {
        let start = self.planning.start.map(|t| t.0).unwrap_or_else(|| {
            now.date_naive()
                .and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc())
                .unwrap_or(now)
        });
        Horizon::new(start, self.planning.horizon)
    }
}

/// Turns a toml/serde error into an [`InputError`] with line, column, key path and a
/// did-you-mean hint for unknown keys.
fn toml_error(text: &str, path: &Path, err: &toml::de::Error, field: Option<String>) -> InputError {
    let mut loc = Location::file(path);
    if let Some(span) = err.span() {
        loc = loc.at_offset(text, span.start);
    }
    let message = err.message().trim().to_string();
    let mut hint = None;
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or_default();
        let expected: Vec<&str> = message
            .split("expected ")
            .nth(1)
            .map(|s| {
                s.split(['`', ',', ' '])
                    .filter(|w| !w.is_empty() && *w != "one" && *w != "of" && *w != "or")
                    .collect()
            })
            .unwrap_or_default();
        let parent = field.as_deref().filter(|f| !f.is_empty() && *f != ".");
        let full = match parent {
            Some(p) if p == key || p.ends_with(&format!(".{key}")) => p.to_string(),
            Some(p) => format!("{p}.{key}"),
            None => key.to_string(),
        };
        loc = loc.field(full.clone());
        hint = did_you_mean(key, expected.iter().copied()).map(|s| format!("did you mean `{s}`?"));
        let mut e = InputError::new(loc, format!("unknown key `{full}`"));
        e.hint = hint.or_else(|| {
            (!expected.is_empty()).then(|| format!("known keys here: {}", expected.join(", ")))
        });
        return e;
    }
    if let Some(f) = field.filter(|f| !f.is_empty() && f != ".") {
        loc = loc.field(f);
    }
    let e = InputError::new(loc, message);
    match hint {
        Some(h) => e.with_hint(h),
        None => e,
    }
}

/// Reads and parses a config file. The text it parsed comes back with it, so that a digest of
/// the config (a plan's fingerprint) is of exactly what was used, not of a second read.
pub fn load(path: &Path) -> Result<(Config, String), InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        InputError::in_file(path, format!("cannot read the config: {e}"))
            .with_hint("run `gpucap init` to create one, or pass `--config PATH`")
    })?;
    let config = Config::parse(&text, path)?;
    Ok((config, text))
}

/// The cloud of `region`, a region that cloud has ([`gpucap_provider::regions`]); else an
/// error at `at` suggesting the nearest one.
fn known_region(region: &str, at: Location) -> Result<Cloud, InputError> {
    let Some(cloud) = Cloud::of_region(region) else {
        let mut err = InputError::new(
            at,
            format!(
                "`{}` is not a region name of AWS, GCP or Azure",
                visible(region)
            ),
        );
        err = match gpucap_provider::regions::closest(region) {
            Some(near) => err.with_hint(format!("did you mean `{near}`?")),
            None => {
                err.with_hint("use API region names like `us-east-1`, `us-central1` or `eastus`")
            }
        };
        return Err(err);
    };
    if gpucap_provider::regions::exists(cloud, region) {
        return Ok(cloud);
    }
    let known = "if it is newer than gpucap's list of regions (providers/core/data/regions.csv), add it there";
    let hint = match gpucap_provider::regions::closest(region) {
        Some(near) => format!("did you mean `{near}`? ({known})"),
        None => known.to_string(),
    };
    Err(InputError::new(at, format!("{cloud} has no region `{}`", visible(region))).with_hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, InputError> {
        Config::parse(text, Path::new("gpucap.toml"))
    }

    #[test]
    fn empty_config_has_documented_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.planning.horizon, Span::days(91));
        assert_eq!(c.inputs.calendars, vec!["calendars/*"]);
        assert_eq!(c.scenarios.len(), 3);
        assert_eq!(c.output.dir, PathBuf::from("gpucap-out"));
        assert_eq!(c.demand.buffer, 0.0);
        assert_eq!(c.planning.cost_per_purchase, 1_000.0);
        assert_eq!(c.planning.min_purchase_instances, None);
    }

    #[test]
    fn purchase_options_are_checked() {
        let c = parse("[planning]\nmin_purchase_instances = 4\ncost_per_purchase = 0\n").unwrap();
        assert_eq!(c.planning.min_purchase_instances, Some(4));
        assert_eq!(c.planning.cost_per_purchase, 0.0);
        let err = parse("[planning]\ncost_per_purchase = -5.0\n").unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("planning.cost_per_purchase")
        );
        let err = parse("[planning]\nmin_purchase_instances = 0\n").unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("planning.min_purchase_instances")
        );
    }

    #[test]
    fn flex_start_is_gcp_only_and_its_run_within_compute_engines_bounds() {
        let pool = |region: &str, launch: &str| {
            format!(
                "[pools.h100]\naccelerator = \"h100\"\nregions = [\"{region}\"]\n\n[apply.pools.h100]\nimage = \"i\"\nsubnets = [\"s\"]\n{launch}"
            )
        };
        let c = parse(&pool(
            "us-central1",
            "flex_start = true\nmax_run_duration = \"36h\"\n",
        ))
        .unwrap();
        let launch = &c.apply.pools["h100"];
        assert!(launch.flex_start);
        assert_eq!(
            launch.max_run_duration,
            Some(std::time::Duration::from_secs(36 * 3600))
        );
        for (text, field) in [
            (
                pool("us-east-1", "flex_start = true\n"),
                "apply.pools.h100.flex_start",
            ),
            (
                pool("us-central1", "max_run_duration = \"1h\"\n"),
                "apply.pools.h100.max_run_duration",
            ),
            (
                pool(
                    "us-central1",
                    "flex_start = true\nmax_run_duration = \"8d\"\n",
                ),
                "apply.pools.h100.max_run_duration",
            ),
            (
                pool(
                    "us-central1",
                    "flex_start = true\nmax_run_duration = \"5m\"\n",
                ),
                "apply.pools.h100.max_run_duration",
            ),
        ] {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.location.field.as_deref(), Some(field), "{err}");
        }
    }

    #[test]
    fn unknown_keys_name_their_path_line_and_a_suggestion() {
        let err = parse("[planning]\nhorizon = \"2w\"\n\n[pools.h100]\nacclerator = \"h100\"\n")
            .unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("pools.h100.acclerator"),
            "{err}"
        );
        assert_eq!(err.location.line, Some(5), "{err}");
        assert_eq!(err.hint.as_deref(), Some("did you mean `accelerator`?"));
    }

    #[test]
    fn bad_values_name_the_field() {
        let err = parse("[[scenarios]]\nname = \"a\"\nprobability = 0.5\n").unwrap_err();
        assert!(err.message.contains("sum to 0.5"), "{err}");
        let err = parse("[pools.x]\naccelerator = \"h10\"\n").unwrap_err();
        assert!(err.to_string().contains("did you mean `h100`"), "{err}");
        assert_eq!(err.location.line, Some(2), "{err}");
        let err = parse("[planning]\nhorizon = \"soon\"\n").unwrap_err();
        assert!(err.to_string().contains("not a duration"), "{err}");
        let err = parse("[pools.x]\naccelerator = \"h100\"\nregions = [\"Mars\"]\n").unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("pools.x.regions[0]"));
    }

    #[test]
    fn regions_that_do_not_exist_are_refused_with_the_nearest_real_one() {
        for (text, field) in [
            (
                "[pools.x]\naccelerator = \"h100\"\nregions = [\"us-east-1\", \"us-east-99\"]\n",
                "pools.x.regions[1]",
            ),
            (
                "[budget]\nallowed_regions = [\"us-east-99\"]\n",
                "budget.allowed_regions[0]",
            ),
            (
                "[spot.overrides.\"aws/us-east-99\"]\navailability = 0.5\n",
                "spot.overrides.\"aws/us-east-99\"",
            ),
            (
                "[[capacity]]\nid = \"r\"\nkind = \"reservation\"\nregion = \"us-east-99\"\ninstance_type = \"p5.48xlarge\"\ninstances = 1\n",
                "capacity[0].region",
            ),
        ] {
            let err = parse(text).expect_err(field);
            assert_eq!(err.location.field.as_deref(), Some(field), "{err}");
            assert!(
                err.to_string().contains("aws has no region `us-east-99`"),
                "{err}"
            );
            assert!(
                err.hint
                    .as_deref()
                    .is_some_and(|h| h.starts_with("did you mean `us-east-1`?")),
                "{:?}",
                err.hint
            );
        }
        parse("[pools.x]\naccelerator = \"h100\"\nregions = [\"us-east-1\", \"eastus2\", \"europe-west4\"]\n")
            .expect("real regions");
    }

    #[test]
    fn state_section_defaults_to_local_dot_gpucap_and_rejects_other_backends() {
        let c = parse("").unwrap();
        assert_eq!(c.state.backend, StateBackendKind::Local);
        assert_eq!(c.state.dir(), PathBuf::from(".gpucap"));
        let c = parse("[state]\nbackend = \"local\"\ndir = \"ops/state\"\n").unwrap();
        assert_eq!(c.state.dir(), PathBuf::from("ops/state"));
        let err = parse("[state]\nbackend = \"gcs\"\n").unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("state.backend"),
            "{err}"
        );
        assert_eq!(err.location.line, Some(2), "{err}");
        assert!(
            err.message
                .contains("unknown state backend `gcs`; expected `local` or `s3`"),
            "{err}"
        );
        let err = parse("[state]\ndirr = \"x\"\n").unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("state.dirr"), "{err}");
        assert_eq!(err.hint.as_deref(), Some("did you mean `dir`?"));
        let err = parse("[state]\ndir = \"\"\n").unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("state.dir"), "{err}");
        // The s3 backend's keys are not the local backend's.
        let err = parse("[state]\nbucket = \"b\"\n").unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("state.bucket"), "{err}");
        assert!(err.message.contains("for `backend = \"s3\"`"), "{err}");
    }

    #[test]
    fn the_s3_state_backend_needs_a_bucket_and_a_key_and_nothing_local() {
        let c = parse(
            "[state]\nbackend = \"s3\"\nbucket = \"acme-state\"\nkey = \"gpucap/prod/state.json\"\nregion = \"eu-west-1\"\nendpoint = \"http://127.0.0.1:9000\"\nlock_lease = \"90s\"\n",
        )
        .unwrap();
        assert_eq!(c.state.backend, StateBackendKind::S3);
        assert_eq!(c.state.bucket.as_deref(), Some("acme-state"));
        assert_eq!(c.state.key.as_deref(), Some("gpucap/prod/state.json"));
        assert_eq!(c.state.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.state.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(c.state.lock_lease, Some(std::time::Duration::from_secs(90)));
        let c =
            parse("[state]\nbackend = \"s3\"\nbucket = \"b-1\"\nkey = \"state.json\"\n").unwrap();
        assert_eq!((c.state.region, c.state.lock_lease), (None, None));

        let s3 = |rest: &str| parse(&format!("[state]\nbackend = \"s3\"\n{rest}")).unwrap_err();
        let cases = [
            ("key = \"k\"\n", "state.bucket", "needs `bucket`"),
            (
                "bucket = \"  \"\nkey = \"k\"\n",
                "state.bucket",
                "needs `bucket`",
            ),
            (
                "bucket = \"s3://b/x\"\nkey = \"k\"\n",
                "state.bucket",
                "not a bucket name",
            ),
            ("bucket = \"b\"\n", "state.key", "needs `key`"),
            (
                "bucket = \"b\"\nkey = \"/k/\"\n",
                "state.key",
                "not an object key",
            ),
            (
                "bucket = \"b\"\nkey = \"k\"\ndir = \".gpucap\"\n",
                "state.dir",
                "local backend's directory",
            ),
            (
                "bucket = \"b\"\nkey = \"k\"\nregion = \"\"\n",
                "state.region",
                "cannot be empty",
            ),
            (
                "bucket = \"b\"\nkey = \"k\"\nendpoint = \"localhost:9000\"\n",
                "state.endpoint",
                "not an http",
            ),
            (
                "bucket = \"b\"\nkey = \"k\"\nlock_lease = \"500ms\"\n",
                "state.lock_lease",
                "at least `1s`",
            ),
            (
                "bucket = \"b\"\nkey = \"k\"\nlock_lease = \"soon\"\n",
                "state.lock_lease",
                "not a duration",
            ),
        ];
        for (rest, field, words) in cases {
            let err = s3(rest);
            assert_eq!(err.location.field.as_deref(), Some(field), "{rest}: {err}");
            assert!(err.message.contains(words), "{rest}: {err}");
        }
    }

    #[test]
    fn budgets_that_are_not_finite_amounts_are_rejected_by_name() {
        for (text, field) in [
            ("[budget]\ntotal = nan\n", "budget.total"),
            ("[budget]\ntotal = -nan\n", "budget.total"),
            ("[budget]\nmonthly = -inf\n", "budget.monthly"),
            ("[budget]\nmonthly = inf\n", "budget.monthly"),
            ("[budget]\ntotal = -1\n", "budget.total"),
            ("[budget]\napproval_above = nan\n", "budget.approval_above"),
            ("[budget]\ntotal = 1e300\n", "budget.total"),
            ("[budget.teams]\nresearch = nan\n", "budget.teams.research"),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.location.field.as_deref(), Some(field), "{text}: {err}");
            assert!(err.message.contains("US dollars"), "{err}");
        }
        let ok = parse("[budget]\ntotal = 0\nmonthly = 1e6\n").unwrap();
        assert_eq!(ok.budget.total, Some(0.0));
    }

    #[test]
    fn capacity_counts_and_names_are_checked() {
        let entry = |instances: &str, id: &str| {
            format!(
                "[[capacity]]\nid = \"{id}\"\nkind = \"reservation\"\nregion = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\ninstances = {instances}\n"
            )
        };
        let err = parse(&entry("0", "cr-1")).unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("capacity[0].instances"));
        let err = parse(&entry("4294967295", "cr-1")).unwrap_err();
        assert_eq!(err.location.field.as_deref(), Some("capacity[0].instances"));
        let err = parse(&entry("1", "cr-\\u001b[31m")).unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("capacity[0].id"),
            "{err}"
        );
        let twice = entry("1", "cr-1") + &entry("2", "cr-1");
        let err = parse(&twice).unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("capacity[1].id"),
            "{err}"
        );
        parse(&entry("4", "cr-1")).unwrap();
    }

    #[test]
    fn contract_prices_name_the_field_in_their_errors() {
        let field = |text: &str| parse(text).unwrap_err().location.field.unwrap_or_default();
        assert_eq!(
            field("[prices.discounts]\naws = 100\n"),
            "prices.discounts.\"aws\""
        );
        assert_eq!(
            field("[prices.discounts]\naws = -1\n"),
            "prices.discounts.\"aws\""
        );
        assert_eq!(
            field("[prices.discounts]\nibm = 5\n"),
            "prices.discounts.\"ibm\""
        );
        assert_eq!(
            field("[prices.discounts]\naws = nan\n"),
            "prices.discounts.\"aws\""
        );
        let offer = "[[prices.offers]]\nreference = \"PPA-1\"\nregion = \"us-east-1\"\ninstance_type = \"p4d.24xlarge\"\nterm = \"3y\"\nquoted = 2027-01-04\n";
        assert!(parse(&format!("{offer}discount = 20\n")).is_ok());
        assert_eq!(field(offer), "prices.offers[0].price_per_instance_hour");
        assert_eq!(
            field(&format!("{offer}discount = 100\n")),
            "prices.offers[0].discount"
        );
        assert_eq!(
            field(&format!("{offer}discount = 20\nupfront = 5\n")),
            "prices.offers[0].upfront"
        );
        assert_eq!(
            field(&format!("{offer}discount = 20\nkind = \"spot\"\n")),
            "prices.offers[0].kind"
        );
        assert_eq!(
            field(&format!("{offer}discount = 20\nmax_instances = 0\n")),
            "prices.offers[0].max_instances"
        );
        assert_eq!(
            field(&format!(
                "{offer}discount = 20\nearliest_start = 2027-06-01\nlatest_start = 2027-04-01\n"
            )),
            "prices.offers[0].latest_start"
        );
        assert_eq!(
            field(
                &offer
                    .replace("p4d.24xlarge", "m5.large")
                    .replace("quoted", "discount = 1\nquoted")
            ),
            "prices.offers[0].instance_type"
        );
        assert_eq!(
            field(&format!(
                "{offer}discount = 20\n{offer}price_per_instance_hour = 1\n"
            )),
            "prices.offers[1].reference"
        );
    }

    #[test]
    fn toml_dates_and_strings_both_work_for_start() {
        let a = parse("[planning]\nstart = 2027-01-04\n").unwrap();
        let b = parse("[planning]\nstart = \"2027-01-04\"\n").unwrap();
        assert_eq!(a.planning.start, b.planning.start);
        let now = Utc::now();
        assert_eq!(
            a.horizon(now).start.to_rfc3339(),
            "2027-01-04T00:00:00+00:00"
        );
    }
}
