//! The act half of a provider: the calls that buy, reserve, scale and release capacity, one
//! narrow trait per capability, and the classified outcome of each call.
//!
//! `gpucap apply` (the `apply` module of the root crate) journals every call before it is
//! sent and reconciles unknown outcomes through [`Describe`]; the traits here only make calls.
//! Each cloud crate implements them (AWS through aws-sdk-ec2 and aws-sdk-autoscaling); the
//! root crate's apply tests use a fake that records its inputs.
//!
//! # Identity and idempotency
//!
//! Every mutating request carries an [`Idempotency`]: the plan and action it belongs to, the
//! journal intent id, and a deterministic client token where the API takes one. Implementations
//! must tag what they create with [`Idempotency::tags`] (so it can be found after a crash) and
//! must pass the token unchanged (so a retried call cannot create a second resource). A call
//! that has no token and cannot be undone (AWS `PurchaseCapacityBlock`) is made exactly once
//! per call of the trait method: no SDK retry, no retry here.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::BoxFuture;

/// Tag keys gpucap writes on everything it creates. `managed-by` is how `release` and
/// reconciliation tell gpucap's resources from everyone else's.
pub mod tag {
    pub const MANAGED_BY: &str = "managed-by";
    pub const MANAGED_BY_VALUE: &str = "gpucap";
    pub const PLAN: &str = "gpucap:plan";
    pub const ACTION: &str = "gpucap:action";
    pub const INTENT: &str = "gpucap:intent";
}

/// What makes one mutating call unique and findable again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Idempotency {
    /// The plan's fingerprint digest (`sha256:…`), shortened to 16 hex digits in tags.
    pub plan: String,
    /// The plan action id (stable across re-plans of the same need).
    pub action: String,
    /// The journal intent id of this call (unique per attempt of a non-tokenised call).
    pub intent: String,
    /// The client token, where the API takes one: derived from plan and action only, so that a
    /// re-run after a crash sends the same token.
    pub client_token: Option<String>,
}

impl Idempotency {
    /// The tags every created resource carries.
    pub fn tags(&self) -> BTreeMap<String, String> {
        let short = self
            .plan
            .strip_prefix("sha256:")
            .unwrap_or(&self.plan)
            .chars()
            .take(16)
            .collect::<String>();
        BTreeMap::from([
            (
                tag::MANAGED_BY.to_string(),
                tag::MANAGED_BY_VALUE.to_string(),
            ),
            (tag::PLAN.to_string(), short),
            (tag::ACTION.to_string(), self.action.clone()),
            (tag::INTENT.to_string(), self.intent.clone()),
        ])
    }
}

/// Where capacity lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Placement {
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
}

/// A capacity block the cloud offers now for a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockOffering {
    pub offering_id: String,
    pub placement: Placement,
    pub instances: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// USD for the whole block, paid up front.
    pub upfront_fee: f64,
    pub currency: String,
}

/// What to search for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockQuery {
    pub region: String,
    pub instance_type: String,
    pub instances: u32,
    /// Earliest and latest acceptable start.
    pub start_from: DateTime<Utc>,
    pub start_to: DateTime<Utc>,
    pub duration_hours: u32,
}

/// A request for an on-demand capacity reservation (AWS ODCR, GCP reservation, Azure
/// capacity reservation) that ends by itself at `end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationRequest {
    pub placement: Placement,
    pub instances: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// A GPU pool: launch template plus auto-scaling group (AWS), instance template plus managed
/// instance group (GCP). Images, subnets and security groups come from the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSpec {
    /// Deterministic name, e.g. `gpucap-<pool>-<region>`; the cloud-side identity.
    pub name: String,
    pub region: String,
    pub instance_types: Vec<String>,
    pub image: String,
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    /// Reservation and block ids the pool should launch into first.
    pub capacity_reservations: Vec<String>,
    pub max_size: u32,
    /// Work that can wait: the pool's on-demand instances are asked for as queued flex-start
    /// capacity (GCP: DWS resize requests) instead of at once. Only GCP takes it.
    #[serde(default)]
    pub flex_start: Option<FlexStart>,
}

/// A flex-start pool's terms: how long each instance runs before the cloud deletes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlexStart {
    pub run_seconds: u64,
}

/// How many instances a pool should run, split by purchase model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSize {
    pub on_demand: u32,
    pub spot: u32,
}

/// What kind of thing gpucap created (in state, journal and `gpucap state list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    CapacityBlock,
    Reservation,
    Commitment,
    LaunchTemplate,
    Pool,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::CapacityBlock => "capacity_block",
            ResourceKind::Reservation => "reservation",
            ResourceKind::Commitment => "commitment",
            ResourceKind::LaunchTemplate => "launch_template",
            ResourceKind::Pool => "pool",
        }
    }
}

/// A resource as the cloud describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudResource {
    /// The cloud's id (`cr-…`, an ASG name, a GCP resource name).
    pub id: String,
    pub kind: ResourceKind,
    pub placement: Placement,
    pub instances: u32,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    /// The cloud's own state word (`payment-pending`, `scheduled`, `active`, `cancelled`, …).
    pub state: String,
    pub tags: BTreeMap<String, String>,
    /// How many of its instances run now, as the cloud reports it (a reservation's total
    /// minus its available count; zero before it starts). `None`: the cloud does not say, and
    /// `gpucap release` then never takes it for idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use: Option<u32>,
}

impl CloudResource {
    /// Whether its tags say gpucap created it.
    pub fn managed_by_gpucap(&self) -> bool {
        managed_by_gpucap(&self.tags)
    }
}

/// Whether a resource's tags say gpucap created it: the one rule for what gpucap may modify or
/// delete.
pub fn managed_by_gpucap(tags: &BTreeMap<String, String>) -> bool {
    tags.get(tag::MANAGED_BY).map(String::as_str) == Some(tag::MANAGED_BY_VALUE)
}

/// Why a mutating call did not succeed, classified the same way on every cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActErrorKind {
    /// No capacity for that type and place now (`InsufficientInstanceCapacity`,
    /// `ZONE_RESOURCE_POOL_EXHAUSTED`, `AllocationFailed`).
    Capacity,
    /// An account quota is too small (`VcpuLimitExceeded`, `QUOTA_EXCEEDED`).
    Quota,
    /// Slow down (`RequestLimitExceeded`, 429); safe to retry after a pause.
    Throttled,
    /// The quoted offering is gone (`InvalidCapacityBlockOfferingIdExpired`/`NotFound`).
    OfferExpired,
    /// The token was used with other parameters (`IdempotentParameterMismatch`).
    IdempotencyConflict,
    /// A dry run that would have succeeded (`DryRunOperation`).
    DryRunOk,
    /// Credentials missing or not allowed (`UnauthorizedOperation`, 403).
    Auth,
    /// The request never reached the cloud, or was refused before acting (a 5xx the API
    /// documents as not applied): nothing happened.
    Transient,
    /// Nobody knows whether the cloud acted: a timeout, a reset connection or a 5xx after the
    /// request was sent. Must be reconciled before anything else.
    Unknown,
    /// The resource is not there.
    NotFound,
    /// Anything else (invalid parameters, a state that forbids the change).
    Other,
}

impl ActErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActErrorKind::Capacity => "insufficient capacity",
            ActErrorKind::Quota => "quota exceeded",
            ActErrorKind::Throttled => "throttled",
            ActErrorKind::OfferExpired => "offering expired",
            ActErrorKind::IdempotencyConflict => "idempotency conflict",
            ActErrorKind::DryRunOk => "dry run succeeded",
            ActErrorKind::Auth => "not authorised",
            ActErrorKind::Transient => "transient failure",
            ActErrorKind::Unknown => "unknown outcome",
            ActErrorKind::NotFound => "not found",
            ActErrorKind::Other => "error",
        }
    }
}

impl fmt::Display for ActErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed or refused mutating call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{api}: {kind}{}: {message}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
pub struct ActError {
    pub api: String,
    pub kind: ActErrorKind,
    /// The cloud's error code, e.g. `InsufficientInstanceCapacity`.
    pub code: Option<String>,
    pub message: String,
    /// The cloud's request id, where it gave one.
    pub request_id: Option<String>,
}

/// A successful call: what now exists, and the cloud's request id for the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub resource: CloudResource,
    pub request_id: Option<String>,
}

pub type ActResult<T = Done> = Result<T, ActError>;

/// Capacity blocks: quote and buy. Purchases cannot be undone.
pub trait CapacityBlocks: Send + Sync {
    fn describe_offerings(
        &self,
        query: &BlockQuery,
    ) -> BoxFuture<'_, ActResult<Vec<BlockOffering>>>;
    /// Exactly one request, never retried, tagged with `id.tags()`.
    fn purchase_block(
        &self,
        offering: &BlockOffering,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
}

/// Where a provider reports a long-running operation it started (GCP's Operations), while the
/// call that started it still waits for it: the caller journals the name, so that a run killed
/// during the wait settles the call by waiting on that operation
/// ([`Describe::wait_operation`]) instead of asking again blind. Installed around one call with
/// [`with_operation_sink`]; outside one, [`note_operation`] does nothing.
pub type OperationSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

tokio::task_local! {
    static OPERATION_SINK: OperationSink;
}

/// Runs `call` with `sink` receiving the operations it reports.
pub async fn with_operation_sink<F: std::future::Future>(
    sink: OperationSink,
    call: F,
) -> F::Output {
    OPERATION_SINK.scope(sink, call).await
}

/// Reports a long-running operation the current call started, as the cloud names it (GCP:
/// `zones/{zone}/operations/{name}` or `regions/{region}/operations/{name}`).
pub fn note_operation(operation: &str) {
    let _ = OPERATION_SINK.try_with(|sink| sink(operation));
}

/// Capacity blocks a cloud takes as a named request rather than sells from a quoted offering
/// (GCP future reservations in calendar mode), and their cancellation where the cloud still
/// allows it. Clouds that sell blocks from offerings ([`CapacityBlocks::purchase_block`])
/// keep the defaults, which refuse.
pub trait RequestedBlocks: Send + Sync {
    /// Requests the block (`request` gives place, count and window), named from
    /// `id.client_token` so that a repeat finds the first request instead of making a second.
    fn request_block(
        &self,
        _request: &ReservationRequest,
        _id: &Idempotency,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        Box::pin(async {
            Err(ActError {
                api: "request_block".into(),
                kind: ActErrorKind::Other,
                code: None,
                message: "this cloud sells capacity blocks from quoted offerings only".into(),
                request_id: None,
            })
        })
    }
    /// Cancels a requested block gpucap made, if the cloud still allows it; a clear error
    /// (kind `Other`) saying it can no longer be cancelled otherwise.
    fn cancel_block(
        &self,
        _region: &str,
        _block_id: &str,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        Box::pin(async {
            Err(ActError {
                api: "cancel_block".into(),
                kind: ActErrorKind::Other,
                code: None,
                message: "capacity blocks on this cloud cannot be cancelled".into(),
                request_id: None,
            })
        })
    }
}

/// A resource-based commitment: `instances` machines' worth of the machine type's vCPUs,
/// memory and GPUs in a region, for the term from `start` to `end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitmentRequest {
    pub placement: Placement,
    pub instances: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Reservations gpucap made (state ids) to attach, where the cloud wants GPUs committed
    /// with a reservation.
    #[serde(default)]
    pub reservations: Vec<String>,
}

/// Commitments: signed once, never cancelled. Clouds `gpucap apply` does not sign commitments
/// on keep the default, which refuses.
pub trait Commitments: Send + Sync {
    /// Signs the commitment, named from `id.client_token` so that a repeat finds the first one.
    /// There is no cancel: a commitment cannot be undone.
    fn create_commitment(
        &self,
        _request: &CommitmentRequest,
        _id: &Idempotency,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        Box::pin(async {
            Err(ActError {
                api: "create_commitment".into(),
                kind: ActErrorKind::Other,
                code: None,
                message: "`gpucap apply` does not sign commitments on this cloud".into(),
                request_id: None,
            })
        })
    }
}

/// Reservations that can be changed and cancelled.
pub trait Reservations: Send + Sync {
    /// Creates with `id.client_token`; a retry with the same token returns the same one.
    fn create_reservation(
        &self,
        request: &ReservationRequest,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
    fn modify_reservation(
        &self,
        region: &str,
        reservation_id: &str,
        instances: u32,
        end: DateTime<Utc>,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
    fn cancel_reservation(
        &self,
        region: &str,
        reservation_id: &str,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
}

/// Pools of instances.
pub trait Pools: Send + Sync {
    /// Creates the pool (launch template, group) if it does not exist; otherwise leaves it.
    fn ensure_pool(
        &self,
        spec: &PoolSpec,
        id: &Idempotency,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
    /// Sets the desired size (absolute, so repeating it is harmless).
    fn scale_pool(
        &self,
        region: &str,
        name: &str,
        size: PoolSize,
        dry_run: bool,
    ) -> BoxFuture<'_, ActResult>;
    /// Sizes a flex-start pool ([`PoolSpec::flex_start`]): what its on-demand group lacks is
    /// asked for as one queued request, named from `id.client_token` so that a repeat finds
    /// it instead of asking twice; shrinking is [`Pools::scale_pool`]'s. A request accepted
    /// but not yet fulfilled answers `Ok` with the resource's `state` `pending`. Clouds
    /// without queued capacity keep the default, which refuses.
    fn request_pool(
        &self,
        _region: &str,
        _name: &str,
        _size: PoolSize,
        _flex: FlexStart,
        _id: &Idempotency,
        _dry_run: bool,
    ) -> BoxFuture<'_, ActResult> {
        Box::pin(async {
            Err(ActError {
                api: "request_pool".into(),
                kind: ActErrorKind::Other,
                code: None,
                message: "this cloud has no flex-start (queued) capacity for pools".into(),
                request_id: None,
            })
        })
    }
}

/// Finding what exists, for reconciliation and for `release`.
pub trait Describe: Send + Sync {
    /// Every resource of one of `kinds` (all kinds when empty) in `region` whose tag `key` has
    /// `value` (e.g. the intent tag). Naming the kinds keeps a lookup to the APIs that can hold
    /// the answer.
    fn find_by_tag(
        &self,
        region: &str,
        kinds: &[ResourceKind],
        key: &str,
        value: &str,
    ) -> BoxFuture<'_, ActResult<Vec<CloudResource>>>;
    fn describe(
        &self,
        region: &str,
        kind: ResourceKind,
        id: &str,
    ) -> BoxFuture<'_, ActResult<Option<CloudResource>>>;
    /// Waits until a long-running operation a call reported ([`note_operation`]) is over,
    /// whatever its outcome (the caller reads the result back). Clouds that report none keep
    /// the default, which returns at once.
    fn wait_operation(&self, _operation: &str) -> BoxFuture<'_, ActResult<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// Everything apply needs from one cloud.
pub trait Capacity:
    CapacityBlocks + RequestedBlocks + Commitments + Reservations + Pools + Describe
{
}
impl<T: CapacityBlocks + RequestedBlocks + Commitments + Reservations + Pools + Describe> Capacity
    for T
{
}
