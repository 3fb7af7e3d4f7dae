//! The act half of the GCP provider: [`GcpCapacity`] creates, resizes and deletes zonal
//! Compute Engine reservations (`reservations.insert`, `resize`, `delete`), makes and sizes
//! pools (a regional instance template and managed instance group per pool and purchase
//! model: `regionInstanceTemplates.insert`, `regionInstanceGroupManagers.insert`, `resize`,
//! `listManagedInstances`; see [`pools`]), grows flex-start pools with DWS resize requests
//! and cancels the queued ones it made (`regionInstanceGroupManagerResizeRequests.insert`,
//! `cancel`; see [`flex`]), requests capacity blocks as future reservations in
//! calendar mode and cancels them while Compute Engine allows it (`futureReservations.insert`,
//! `cancel`, `delete`; see [`future`]), and signs commitments (`regionCommitments.insert`; see
//! [`commitments`]), through google-cloud-compute-v1's REST/JSON client, and finds them again
//! by name and by gpucap's marks, implementing the `gpucap_provider::capacity` traits.
//!
//! Rules every method keeps, whatever the caller asks:
//!
//! - **Every mutating call carries a `requestId`**, a UUID v5 derived from the plan digest
//!   and the action (never the zero UUID): Compute Engine ignores a repeat of a request it has
//!   already completed and answers with the same Operation.
//! - **Names are the identity.** Reservations have no labels; every reservation gpucap makes
//!   is named from the plan digest and the action ([`names::reservation_name`]), every pool's
//!   template and group from the pool's deterministic name ([`names::pool_resource_name`]),
//!   and each one's `description` carries gpucap's tags as JSON ([`names::description`]). Before an insert
//!   the name is looked up, and a 409 `alreadyExists` is answered by looking the name up: if
//!   the description says gpucap made it, what was asked is done. This also covers a
//!   `requestId` older than Compute Engine's dedupe window (about an hour).
//! - **Operations are followed to `DONE`** with `zoneOperations.wait` (reservations) or
//!   `regionOperations.wait` (pools) in a loop (it returns after at most two minutes,
//!   sometimes earlier, not necessarily `DONE`), and the Operation's `error.errors[]` is
//!   mapped onto the shared taxonomy ([`ops`]). Every Operation a mutating call starts is
//!   reported through `gpucap_provider::capacity::note_operation` before the wait, so the
//!   executor journals it and a killed run waits on it instead of sending the call again.
//! - **A pool's resize is not its instances.** After a resize is `DONE`, the group's
//!   instances are listed until they run (`currentAction` `NONE`, `RUNNING`); fewer running
//!   than asked is an error of the kind the instances' `lastAttempt` names (capacity when none
//!   does), never success.
//! - only reservations, templates, groups and future reservations whose name and description
//!   say gpucap made them are ever used, resized, cancelled or deleted; a reservation with
//!   instances in it is not deleted; a future reservation is cancelled only before it locks;
//!   a commitment is never touched after it is signed (there is no API to undo one);
//! - no token is ever in an error, a log line or a `Debug` output.
//!
//! What this round does not do on GCP: capacity blocks are not quoted (calendar mode has no
//! offering to re-quote: the plan's price is taken as is, and Google reviews the request);
//! a request cancelled within 24 hours of its approval (which Compute Engine allows from four
//! days before the start) is left to a person, as the API does not say when it was approved;
//! a flex-start request is asked for at most once per plan and pool (a `FAILED` one waits for
//! a new plan), and a pool made without `flex_start` is not turned into one; pools are
//! made and sized, never deleted (a pool no campaign needs is scaled to zero). A pool whose
//! capacity is one capacity block targets the block's reservation by name; a pool with a
//! block *and* other reservations takes any matching reservation, which does not include the
//! block's (it is made `specificReservationRequired`).

mod commitments;
mod flex;
mod future;
pub mod names;
mod ops;
mod pools;
mod reservations;

use std::time::Duration;

use google_cloud_compute_v1::client::{
    FutureReservations, MachineTypes, RegionCommitments, RegionInstanceGroupManagerResizeRequests,
    RegionInstanceGroupManagers, RegionInstanceTemplates, RegionOperations,
    Reservations as ReservationsClient, ZoneOperations,
};
use google_cloud_gax::retry_policy::NeverRetry;
use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};

/// Sends Compute Engine requests here instead, with anonymous credentials; for tests.
pub const ENDPOINT_ENV: &str = "GPUCAP_GCP_ENDPOINT_URL";
/// The project gpucap's reservations and pools live in (else `GOOGLE_CLOUD_PROJECT`).
pub const PROJECT_ENV: &str = "GPUCAP_GCP_PROJECT";
pub const GOOGLE_PROJECT_ENV: &str = "GOOGLE_CLOUD_PROJECT";
/// Test hook: the pause after a failed `zoneOperations.wait` (or `regionOperations.wait`),
/// and between two looks at a pool's instances, in milliseconds.
pub const POLL_MS_ENV: &str = "GPUCAP_GCP_POLL_MS";

/// Where and how [`GcpCapacity`] connects.
#[derive(Debug, Clone)]
pub struct GcpCapacityConfig {
    pub project: String,
    /// Compute Engine's base URL; `None` is Google's (with Application Default Credentials).
    pub endpoint: Option<String>,
    /// How long an Operation is followed before it is reported `Unknown`, and how long a
    /// resized pool's instances are watched before the shortfall is reported.
    pub operation_timeout: Duration,
    /// The pause after a failed `zoneOperations.wait`, and between two looks at a pool's
    /// instances.
    pub poll_interval: Duration,
}

impl GcpCapacityConfig {
    pub fn new(project: impl Into<String>) -> Self {
        GcpCapacityConfig {
            project: project.into(),
            endpoint: None,
            operation_timeout: Duration::from_secs(30 * 60),
            poll_interval: Duration::from_secs(2),
        }
    }

    /// Sends requests to `url` (a local peer), with anonymous credentials.
    pub fn with_endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into().trim_end_matches('/').to_string());
        self
    }

    /// The project (`project`, else `GPUCAP_GCP_PROJECT`, else `GOOGLE_CLOUD_PROJECT`), and
    /// `GPUCAP_GCP_ENDPOINT_URL`.
    pub fn from_env(project: Option<&str>) -> ActResult<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let Some(project) = project
            .map(str::to_string)
            .filter(|p| !p.trim().is_empty())
            .or_else(|| var(PROJECT_ENV))
            .or_else(|| var(GOOGLE_PROJECT_ENV))
        else {
            return Err(setup(format!(
                "no GCP project: set `apply.gcp_project` in the config, or {PROJECT_ENV} or {GOOGLE_PROJECT_ENV}"
            )));
        };
        let mut config = GcpCapacityConfig::new(project);
        if let Some(url) = var(ENDPOINT_ENV) {
            config = config.with_endpoint(url);
        }
        if let Some(ms) = var(POLL_MS_ENV).and_then(|v| v.parse::<u64>().ok()) {
            config.poll_interval = Duration::from_millis(ms);
        }
        Ok(config)
    }
}

fn setup(message: String) -> ActError {
    ActError {
        api: "gcp:connect".into(),
        kind: ActErrorKind::Auth,
        code: None,
        message,
        request_id: None,
    }
}

/// The GCP implementation of `CapacityBlocks`, `Reservations`, `Pools` and `Describe`.
#[derive(Clone)]
pub struct GcpCapacity {
    config: GcpCapacityConfig,
    reservations: ReservationsClient,
    operations: ZoneOperations,
    templates: RegionInstanceTemplates,
    groups: RegionInstanceGroupManagers,
    resize_requests: RegionInstanceGroupManagerResizeRequests,
    region_operations: RegionOperations,
    future: FutureReservations,
    commitments: RegionCommitments,
    machines: MachineTypes,
}

impl std::fmt::Debug for GcpCapacity {
    // By hand, so that nothing credential-shaped can ever reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcpCapacity")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl GcpCapacity {
    /// Builds the clients: anonymous credentials with an endpoint override, else Application
    /// Default Credentials (resolved on the first call, whose failure is an `Auth` error). The
    /// SDK's own retries are off: the executor retries what is safe.
    pub async fn new(config: GcpCapacityConfig) -> ActResult<Self> {
        let creds = match &config.endpoint {
            Some(_) => google_cloud_auth::credentials::anonymous::Builder::new().build(),
            None => google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| setup(format!("no Application Default Credentials: {e}")))?,
        };
        let build_err = |e: google_cloud_gax::client_builder::Error| {
            setup(format!("cannot build the Compute Engine client: {e}"))
        };
        let mut reservations = ReservationsClient::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut operations = ZoneOperations::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut templates = RegionInstanceTemplates::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut groups = RegionInstanceGroupManagers::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut resize_requests = RegionInstanceGroupManagerResizeRequests::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut region_operations = RegionOperations::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut future = FutureReservations::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut commitments = RegionCommitments::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut machines = MachineTypes::builder()
            .with_credentials(creds)
            .with_retry_policy(NeverRetry);
        if let Some(url) = &config.endpoint {
            reservations = reservations.with_endpoint(url);
            operations = operations.with_endpoint(url);
            templates = templates.with_endpoint(url);
            groups = groups.with_endpoint(url);
            resize_requests = resize_requests.with_endpoint(url);
            region_operations = region_operations.with_endpoint(url);
            future = future.with_endpoint(url);
            commitments = commitments.with_endpoint(url);
            machines = machines.with_endpoint(url);
        }
        Ok(GcpCapacity {
            reservations: reservations.build().await.map_err(build_err)?,
            operations: operations.build().await.map_err(build_err)?,
            templates: templates.build().await.map_err(build_err)?,
            groups: groups.build().await.map_err(build_err)?,
            resize_requests: resize_requests.build().await.map_err(build_err)?,
            region_operations: region_operations.build().await.map_err(build_err)?,
            future: future.build().await.map_err(build_err)?,
            commitments: commitments.build().await.map_err(build_err)?,
            machines: machines.build().await.map_err(build_err)?,
            config,
        })
    }

    /// A provider configured from the environment (see [`GcpCapacityConfig::from_env`]).
    pub async fn from_env(project: Option<&str>) -> ActResult<Self> {
        Self::new(GcpCapacityConfig::from_env(project)?).await
    }

    pub fn config(&self) -> &GcpCapacityConfig {
        &self.config
    }
}
