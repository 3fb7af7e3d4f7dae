//! The executor: carries out [`Work`] through a cloud's [`Capacity`], journalling every
//! mutating call before it is sent, and recording what exists in the state.
//!
//! The rules it keeps, whatever fails:
//!
//! - **Journal first.** Each mutating call is an intent (a UUID): `intent`, then `sent`, both
//!   durable, then the call, then `done`, `failed` or `unknown`. A call that reports a
//!   long-running operation (`gpucap_provider::capacity::note_operation`: GCP's inserts,
//!   pool resizes and resize-request cancels) gets
//!   an `operation` record with its name while it waits, and a re-run settles it by waiting
//!   on that operation before looking the result up. The request recorded with it
//!   carries the cloud, the region and the resource it would create, so a re-run can settle
//!   it with the cloud ([`super::reconcile`]) and rebuild the state from the journal alone.
//! - **Nothing bought twice.** A capacity block purchase (no client token, cannot be undone)
//!   is one request. After an unknown outcome it is looked up by its intent tag within a
//!   bounded wait; only when it is certainly not there is the offering re-quoted, the price
//!   checked again, and a new intent made. Reservations carry a client token derived from the
//!   plan and the action, so repeating them is safe: AWS dedupes the token; on Azure the
//!   token names the reservation, and the provider looks that name up (GET) before every
//!   PUT, so an attempt after an unknown outcome finds what the lost one made. On GCP the
//!   token names the reservation too and is the insert's `requestId` (as a UUID v5); the name
//!   is looked up before every insert, and a 409 `alreadyExists` is resolved by name. GCP
//!   pools (instance template and managed instance group) are named from the pool, looked up
//!   before every insert, and carry `requestId`s from the same token. GCP capacity blocks
//!   (future reservations in calendar mode) and commitments are not bought from an offering:
//!   they are named from the token like reservations, so a repeat finds the first one
//!   (`Executor::create_by_token`); both are irreversible in the state, and a commitment is
//!   never released. A GCP flex-start pool is grown with one DWS resize request per plan and
//!   pool, named from its own token (`Executor::request`); one that is queued is
//!   [`Outcome::Pending`], and the next run looks at the same request.
//! - **Retries only where safe.** Quotes, lookups, tokenised creates, pool changes and
//!   cancels are retried on throttling and server errors with backon (exponential backoff with
//!   jitter). Insufficient capacity is remembered ([`IceCache`]) and never retried blindly.
//! - **Only what gpucap made** is changed: the provider refuses anything not tagged
//!   `managed-by=gpucap`, and releases only touch resources in the state.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use chrono::{DateTime, Utc};
use gpucap_provider::Cloud;
use gpucap_provider::capacity::{
    ActError, ActErrorKind, ActResult, BlockOffering, BlockQuery, Capacity, CloudResource,
    CommitmentRequest, Done, FlexStart, Idempotency, Placement, PoolSize, PoolSpec,
    ReservationRequest, ResourceKind,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ice::IceCache;
use super::work::{Part, PoolWork, Work};
use crate::plan::{Action, Plan};
use crate::state::{
    AppliedPlan, AuditRecord, JournalRecord, LockGuard, ManagedResource, ResourceStatus, State,
    StateBackend, StateError, StateRef, Step,
};

/// The act providers this run may use, by cloud.
#[derive(Clone, Default)]
pub struct Clouds {
    map: BTreeMap<Cloud, Arc<dyn Capacity>>,
}

impl std::fmt::Debug for Clouds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.map.keys()).finish()
    }
}

impl Clouds {
    pub fn with(mut self, cloud: Cloud, capacity: Arc<dyn Capacity>) -> Clouds {
        self.map.insert(cloud, capacity);
        self
    }

    pub fn get(&self, cloud: &str) -> Option<&dyn Capacity> {
        let cloud: Cloud = cloud.parse().ok()?;
        self.map.get(&cloud).map(|c| c.as_ref())
    }
}

/// How the executor behaves; the command fills it from flags and config.
#[derive(Debug, Clone)]
pub struct Settings {
    pub now: DateTime<Utc>,
    /// Make every mutating call with the API's own dry run; journal, state and audit log are
    /// not touched.
    pub dry_run: bool,
    /// How much more than planned a re-quoted purchase may cost (fraction: 0.05 is 5 %).
    pub price_tolerance: f64,
    /// How long an unknown outcome is looked for before it is taken as not having happened
    /// (the cloud's describe calls are eventually consistent).
    pub reconcile_wait: Duration,
    pub reconcile_poll: Duration,
    /// Backoff for safe retries.
    pub retry_min_delay: Duration,
    pub retry_max_delay: Duration,
    pub retry_max_times: usize,
    /// How long a placement without capacity is not asked again.
    pub ice_ttl: Duration,
    /// Test hook: stop (wait to be killed) after this many journal records of this run.
    pub halt_after_journal: Option<u64>,
}

impl Settings {
    pub fn new(now: DateTime<Utc>) -> Settings {
        Settings {
            now,
            dry_run: false,
            price_tolerance: 0.05,
            reconcile_wait: Duration::from_secs(60),
            reconcile_poll: Duration::from_secs(2),
            retry_min_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(20),
            retry_max_times: 5,
            ice_ttl: Duration::from_secs(180),
            halt_after_journal: None,
        }
    }
}

/// Why apply stopped before finishing its work (as opposed to one action failing).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error(
        "intent {intent} ({api} for action {action}) is unresolved on {cloud}, and this build cannot ask {cloud}; build gpucap with the `{cloud}` feature"
    )]
    NoProvider {
        intent: String,
        api: String,
        action: String,
        cloud: String,
    },
    #[error(
        "journal record {seq} (intent {intent}, {api}) has a request this gpucap cannot read; settle it by hand with `gpucap state show` and the cloud console"
    )]
    Unreadable {
        seq: u64,
        intent: String,
        api: String,
    },
    #[error(
        "cannot settle intent {intent} ({api} for action {action}): {source}; nothing more is sent until it is settled, so re-run `gpucap apply` when {cloud} answers"
    )]
    Reconcile {
        intent: String,
        api: String,
        action: String,
        cloud: String,
        #[source]
        source: ActError,
    },
}

/// What became of one unit of work.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Carried out now.
    Done { detail: String, cost: f64 },
    /// A dry run: the cloud said the call would succeed.
    WouldDo { detail: String, cost: f64 },
    /// Not done; a re-run may finish it.
    NotDone { reason: String },
    /// Apply cannot do it; a person must.
    Manual { reason: String },
    /// Asked for and accepted, not yet there (a queued flex-start request): neither done
    /// nor failed; a re-run looks at the same request again and does not ask twice.
    Pending { detail: String },
}

/// One line of the run's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The action (or pool) id.
    pub id: String,
    /// `capacity_block`, `reservation`, `release`, `pool`, `manual`.
    pub kind: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Counters for the summary and the benchmark.
#[derive(Debug, Default, Serialize, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Cloud API requests made (quotes and lookups included).
    pub calls: u64,
    /// Of those, repeats after throttling or a server error.
    pub retries: u64,
    /// Capacity block purchase requests sent.
    pub purchases_sent: u64,
    /// Unknown outcomes settled by looking the intent up.
    pub reconciled: u64,
    /// Journal records written by this run.
    pub journal_records: u64,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    retries: AtomicU64,
    purchases_sent: AtomicU64,
    reconciled: AtomicU64,
    journal_records: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> Counts {
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            purchases_sent: self.purchases_sent.load(Ordering::Relaxed),
            reconciled: self.reconciled.load(Ordering::Relaxed),
            journal_records: self.journal_records.load(Ordering::Relaxed),
        }
    }
}

/// What a journalled request records: enough to find the call's effect again and to rebuild
/// the state from the journal alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub cloud: String,
    pub region: String,
    /// The call's parameters as sent.
    pub params: serde_json::Value,
    /// The resource the call creates (its `id` empty until the cloud names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creates: Option<ManagedResource>,
    /// The state resource the call releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releases: Option<String>,
}

impl Request {
    pub fn parse(record: &JournalRecord) -> Option<Request> {
        serde_json::from_value(record.request.clone()).ok()
    }
}

/// One call that failed in a way worth another try with backon, or that stops the run.
enum Attempt {
    Act(ActError),
    State(StateError),
}

impl From<StateError> for Attempt {
    fn from(e: StateError) -> Self {
        Attempt::State(e)
    }
}

/// What a run carries out, as the executor needs it: the digest that names it in the journal,
/// the audit log, tags and client tokens; the state it was made against; and the plan's actions
/// (a pool launches into the reservations bought for it). `gpucap apply` carries out a plan,
/// `gpucap release` a release list.
#[derive(Debug, Clone)]
pub struct Mandate<'a> {
    pub digest: String,
    pub made_against: StateRef,
    pub actions: &'a [Action],
}

impl<'a> Mandate<'a> {
    pub fn plan(plan: &'a Plan) -> Mandate<'a> {
        Mandate {
            digest: plan.fingerprint.digest.clone(),
            made_against: plan.state.clone().unwrap_or(StateRef::NONE),
            actions: &plan.actions,
        }
    }
}

/// Carries out work, one unit at a time.
pub struct Executor<'a> {
    pub(super) mandate: Mandate<'a>,
    pub(super) clouds: &'a Clouds,
    pub(super) backend: &'a dyn StateBackend,
    /// `None` only in a dry run.
    pub(super) guard: Option<&'a LockGuard>,
    pub(super) settings: &'a Settings,
    pub(super) run: String,
    pub(super) who: String,
    pub(super) state: State,
    /// Whether the state has changes not written yet.
    dirty: bool,
    ice: IceCache,
    counters: Counters,
    progress: &'a (dyn Fn(&str) + Send + Sync),
    /// Per capacity block part of a campaign placed whole: the zone all its group's parts are
    /// bought in, or why none of them is ([`Executor::choose_zones`]).
    zones: BTreeMap<String, Result<String, String>>,
}

impl<'a> Executor<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mandate: Mandate<'a>,
        clouds: &'a Clouds,
        backend: &'a dyn StateBackend,
        guard: Option<&'a LockGuard>,
        settings: &'a Settings,
        state: State,
        who: String,
        progress: &'a (dyn Fn(&str) + Send + Sync),
    ) -> Executor<'a> {
        Executor {
            mandate,
            clouds,
            backend,
            guard,
            settings,
            run: uuid::Uuid::new_v4().to_string(),
            who,
            state,
            dirty: false,
            ice: IceCache::new(settings.ice_ttl),
            counters: Counters::default(),
            progress,
            zones: BTreeMap::new(),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn counts(&self) -> Counts {
        self.counters.snapshot()
    }

    pub(super) fn note(&self, line: &str) {
        (self.progress)(line);
    }

    fn plan_digest(&self) -> &str {
        &self.mandate.digest
    }

    /// The state's record of which plan (or release) last wrote it.
    fn applied(&self) -> AppliedPlan {
        AppliedPlan {
            plan: self.mandate.digest.clone(),
            made_against: self.mandate.made_against.clone(),
        }
    }

    // ---- journal, audit, state -------------------------------------------------------

    /// Appends a journal record (durably) and its audit line. Never called in a dry run.
    pub(super) async fn journal(
        &self,
        record: JournalRecord,
        cost: Option<f64>,
    ) -> Result<JournalRecord, StateError> {
        let guard = self
            .guard
            .expect("the executor journals only when it holds the lock");
        let written = self.backend.append_journal(guard, record).await?;
        let n = self
            .counters
            .journal_records
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        let cost = cost.filter(|_| written.step == Step::Done);
        self.backend
            .append_audit(&AuditRecord::of(&written, &self.who, cost))
            .await?;
        if self.settings.halt_after_journal == Some(n) {
            halt(n, &written);
        }
        Ok(written)
    }

    /// The `intent` record of a new call: what it is, and the request that lets a later run
    /// find its effect.
    async fn begin(
        &self,
        id: &Idempotency,
        api: &str,
        request: &Request,
    ) -> Result<JournalRecord, StateError> {
        let request = serde_json::to_value(request).unwrap_or_default();
        self.journal(JournalRecord::intent(&self.run, id, api, request), None)
            .await
    }

    /// Records a resource in the state (written by [`Executor::save`]).
    pub(super) fn record(&mut self, resource: ManagedResource) {
        self.state.applied_plan = Some(self.applied());
        self.state.upsert(resource);
        self.dirty = true;
    }

    /// What the cloud says of a resource now (read-only, retried like every lookup); `None`
    /// when this build has no provider for its cloud.
    pub async fn describe(&self, r: &ManagedResource) -> Option<ActResult<Option<CloudResource>>> {
        let cloud = self.cloud_of(r.cloud.as_str())?;
        Some(
            self.safe("describe", || cloud.describe(&r.region, r.kind, &r.id))
                .await,
        )
    }

    /// Changes a resource in the state (written by [`Executor::save`]) when `f` changes it.
    pub fn amend(&mut self, cloud: Cloud, id: &str, f: impl FnOnce(&mut ManagedResource)) {
        if let Some(r) = self
            .state
            .resources
            .iter_mut()
            .find(|r| r.cloud == cloud && r.id == id)
        {
            let before = r.clone();
            f(r);
            self.dirty |= *r != before;
        }
    }

    pub(super) fn set_status(&mut self, cloud: Cloud, id: &str, status: ResourceStatus) {
        if let Some(r) = self
            .state
            .resources
            .iter_mut()
            .find(|r| r.cloud == cloud && r.id == id)
            && r.status != status
        {
            r.status = status;
            self.dirty = true;
        }
    }

    /// Whether the state has changes [`Executor::save`] has not written yet.
    pub fn has_unsaved_changes(&self) -> bool {
        self.dirty && !self.settings.dry_run
    }

    /// Writes the state if it changed.
    pub async fn save(&mut self) -> Result<(), StateError> {
        if !self.dirty || self.settings.dry_run {
            return Ok(());
        }
        let guard = self
            .guard
            .expect("the executor writes state only when it holds the lock");
        // A write names what made it: a saved plan made before it is stale from now on, unless
        // it is the one being carried out (see `StateRef::check_plan`).
        self.state.applied_plan = Some(self.applied());
        self.backend.write_state(guard, &mut self.state).await?;
        self.dirty = false;
        Ok(())
    }

    // ---- calls ----------------------------------------------------------------------

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.settings.retry_min_delay)
            .with_max_delay(self.settings.retry_max_delay)
            .with_max_times(self.settings.retry_max_times)
            .with_jitter()
    }

    /// A read-only call (quotes, lookups), retried on throttling, server errors and lost
    /// answers, none of which can have changed anything.
    pub(super) async fn safe<T, F, Fut>(&self, what: &str, f: F) -> ActResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ActResult<T>>,
    {
        let mut f = f;
        let call = || {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            f()
        };
        call.retry(self.backoff())
            // Read-only calls: an unknown outcome changed nothing, so it is retried too.
            .when(|e: &ActError| {
                matches!(
                    e.kind,
                    ActErrorKind::Throttled | ActErrorKind::Transient | ActErrorKind::Unknown
                )
            })
            .notify(|e: &ActError, after: Duration| {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
                tracing::info!("{what}: {e}; retrying in {:.1} s", after.as_secs_f64());
            })
            .await
    }

    /// A journalled mutating call that is safe to repeat (client token, absolute size,
    /// describe-then-create by name): `sent` before every attempt and the outcome after each,
    /// repeated on throttling, server errors and (the call being idempotent) unknown outcomes.
    /// Returns the result and the last journal record of the intent (`sent`, `failed` or
    /// `unknown`); the caller writes `done`.
    async fn repeatable<F, Fut>(
        &self,
        intent: &JournalRecord,
        mut f: F,
    ) -> Result<(ActResult, JournalRecord), StateError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ActResult>,
    {
        let last = std::sync::Mutex::new(intent.clone());
        let remember = |record: &JournalRecord| {
            if let Ok(mut l) = last.lock() {
                *l = record.clone();
            }
        };
        let attempt = || {
            // Futures do nothing until polled: the request leaves only after `sent` is durable.
            let call = f();
            let prior = last
                .lock()
                .map(|l| l.clone())
                .unwrap_or_else(|p| p.into_inner().clone());
            let remember = &remember;
            async move {
                let sent = self
                    .journal(prior.next(Step::Sent), None)
                    .await
                    .map_err(Attempt::State)?;
                remember(&sent);
                self.counters.calls.fetch_add(1, Ordering::Relaxed);
                // A long-running operation the call reports is journalled (`operation`, its
                // name in `request_id`) while the call waits for it.
                let (tx, mut started) = tokio::sync::mpsc::unbounded_channel::<String>();
                let sink: gpucap_provider::capacity::OperationSink = Arc::new(move |op: &str| {
                    let _ = tx.send(op.to_string());
                });
                let call = gpucap_provider::capacity::with_operation_sink(sink, call);
                tokio::pin!(call);
                let mut latest = sent;
                let result = loop {
                    tokio::select! {
                        biased;
                        Some(op) = started.recv() => {
                            let mut noted = latest.next(Step::Operation);
                            noted.request_id = Some(op);
                            latest = self.journal(noted, None).await.map_err(Attempt::State)?;
                            remember(&latest);
                        }
                        result = &mut call => break result,
                    }
                };
                // An operation reported just before the call returned is journalled too, so a
                // call's records do not depend on timing.
                while let Ok(op) = started.try_recv() {
                    let mut noted = latest.next(Step::Operation);
                    noted.request_id = Some(op);
                    latest = self.journal(noted, None).await.map_err(Attempt::State)?;
                    remember(&latest);
                }
                match result {
                    Ok(done) => Ok(done),
                    Err(e) => {
                        let failed = self
                            .journal(latest.errored(&e), None)
                            .await
                            .map_err(Attempt::State)?;
                        remember(&failed);
                        Err(Attempt::Act(e))
                    }
                }
            }
        };
        let result = attempt
            .retry(self.backoff())
            .when(|a: &Attempt| {
                matches!(a, Attempt::Act(e) if matches!(
                    e.kind,
                    ActErrorKind::Throttled | ActErrorKind::Transient | ActErrorKind::Unknown
                ))
            })
            .notify(|a: &Attempt, after: Duration| {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
                if let Attempt::Act(e) = a {
                    tracing::info!("{e}; repeating in {:.1} s", after.as_secs_f64());
                }
            })
            .await;
        let last = last.into_inner().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(done) => Ok((Ok(done), last)),
            Err(Attempt::State(e)) => Err(e),
            Err(Attempt::Act(e)) => Ok((Err(e), last)),
        }
    }

    // ---- work -----------------------------------------------------------------------

    /// Carries out one unit of work. Errors are only those that must stop the run.
    pub async fn carry_out(&mut self, work: &Work) -> Result<Report, ApplyError> {
        let report = match work {
            Work::Block(part) => Report {
                id: part.id.clone(),
                kind: "capacity_block",
                outcome: self.block(part).await?,
            },
            Work::Reserve(part) => Report {
                id: part.id.clone(),
                kind: "reservation",
                outcome: self.reserve(part).await?,
            },
            Work::Commit(part) => Report {
                id: part.id.clone(),
                kind: "commitment",
                outcome: self.commit(part).await?,
            },
            Work::Release { action, resource } => Report {
                id: action.clone(),
                kind: "release",
                outcome: self.release(action, resource).await?,
            },
            Work::Pool(pool) => Report {
                id: pool.name.clone(),
                kind: "pool",
                outcome: self.pool(pool).await?,
            },
            Work::ScaleToZero { action, resource } => Report {
                id: action.clone(),
                kind: "pool",
                outcome: self.scale_to_zero(resource).await?,
            },
            Work::Manual { action, reason } => Report {
                id: action.clone(),
                kind: "manual",
                outcome: Outcome::Manual {
                    reason: reason.clone(),
                },
            },
        };
        self.save().await?;
        Ok(report)
    }

    fn cloud_of(&self, cloud: &str) -> Option<&'a dyn Capacity> {
        self.clouds.get(cloud)
    }

    fn idempotency(&self, action: &str, token: Option<String>) -> Idempotency {
        Idempotency {
            plan: self.plan_digest().to_string(),
            action: action.to_string(),
            intent: uuid::Uuid::new_v4().to_string(),
            client_token: token,
        }
    }

    /// Chooses, before anything is bought, the one zone for each group of capacity block parts
    /// that a campaign placed whole runs on at once (`super::gangs`): the zone a block it runs
    /// on at the same time was bought in (by an earlier run, perhaps one that was killed), or
    /// else the cheapest zone where every part is offered now. A group offered in no one zone
    /// is bought nowhere: each of its parts is then not done, saying where each is offered.
    pub async fn choose_zones(&mut self, works: &[Work], plan: &Plan) {
        let placed: BTreeSet<String> = plan
            .campaigns
            .iter()
            .filter(|c| c.placement.is_some())
            .map(|c| c.name.clone())
            .collect();
        for group in super::gangs::groups(works, &placed) {
            let parts: Vec<&Part> = group
                .parts
                .iter()
                .filter_map(|&i| match &works[i] {
                    Work::Block(p) => Some(p),
                    _ => None,
                })
                .collect();
            let decision = match bought_zone(&self.state, plan, &group.campaigns, &parts) {
                Some(zone) => Ok(zone),
                None if parts.len() < 2 => continue,
                None => {
                    let mut quotes = Vec::with_capacity(parts.len());
                    let mut failed = None;
                    for part in &parts {
                        match self.zone_quotes(part).await {
                            Ok(q) => quotes.push(q),
                            Err(reason) => {
                                failed = Some(reason);
                                break;
                            }
                        }
                    }
                    match failed {
                        Some(reason) => Err(reason),
                        None => super::gangs::common_zone(&group.campaigns, &parts, &quotes),
                    }
                }
            };
            if let Ok(zone) = &decision {
                self.note(&format!(
                    "  {} capacity block part(s) of {} in {zone}, together",
                    parts.len(),
                    group.campaigns.join(", ")
                ));
            }
            for part in parts {
                self.zones.insert(part.id.clone(), decision.clone());
            }
        }
    }

    /// Per zone, the cheapest offering now that matches `part` (its window, count and price
    /// tolerance); `Err` when it cannot be quoted.
    async fn zone_quotes(&self, part: &Part) -> Result<BTreeMap<String, f64>, String> {
        let a = &part.action;
        let Some(cloud) = self.cloud_of(&a.cloud) else {
            return Err(format!("no {} provider in this build", a.cloud));
        };
        let query = block_query(part);
        let offerings = self
            .safe("DescribeCapacityBlockOfferings", || {
                cloud.describe_offerings(&query)
            })
            .await
            .map_err(|e| format!("re-quoting failed: {e}"))?;
        let zones: BTreeSet<String> = offerings
            .iter()
            .filter_map(|o| o.placement.zone.clone())
            .collect();
        let mut out = BTreeMap::new();
        for zone in zones {
            let mut here = part.clone();
            here.action.zone = Some(zone.clone());
            if let Ok(o) = pick_offering(&here, &offerings, self.settings.price_tolerance) {
                out.insert(zone, o.upfront_fee);
            }
        }
        Ok(out)
    }

    /// A capacity block part: re-quote, check, buy once, settle an unknown outcome. On GCP a
    /// block is a future reservation in calendar mode, requested by name instead
    /// ([`Executor::requested_block`]). A part of a campaign placed whole is bought in its
    /// group's zone, or not at all ([`Executor::choose_zones`]).
    async fn block(&mut self, part: &Part) -> Result<Outcome, ApplyError> {
        let zoned;
        let part = match self.zones.get(&part.id) {
            Some(Err(reason)) => {
                return Ok(Outcome::NotDone {
                    reason: reason.clone(),
                });
            }
            Some(Ok(zone)) => {
                let mut p = part.clone();
                p.action.zone = Some(zone.clone());
                zoned = p;
                &zoned
            }
            None => part,
        };
        let a = &part.action;
        let Some(cloud) = self.cloud_of(&a.cloud) else {
            return Ok(no_provider(&a.cloud));
        };
        if a.cloud == "gcp" {
            return self.requested_block(cloud, part).await;
        }
        let placement = Placement {
            region: a.region.clone(),
            zone: a.zone.clone(),
            instance_type: a.instance_type.clone(),
        };
        let query = block_query(part);
        let attempts = self.settings.retry_max_times.max(1) + 1;
        let mut last_reason = String::new();
        for attempt in 1..=attempts {
            if attempt > 1 {
                tokio::time::sleep(self.settings.retry_min_delay * (1 << (attempt - 2).min(5)))
                    .await;
            }
            if let Some((age, message)) = self.ice.check(&placement) {
                return Ok(Outcome::NotDone {
                    reason: format!(
                        "no capacity for {} in {} ({} s ago: {message}); a later run tries again",
                        a.instance_type,
                        a.zone.as_deref().unwrap_or(&a.region),
                        age.as_secs()
                    ),
                });
            }
            let offerings = match self
                .safe("DescribeCapacityBlockOfferings", || {
                    cloud.describe_offerings(&query)
                })
                .await
            {
                Ok(o) => o,
                Err(e) => {
                    return Ok(Outcome::NotDone {
                        reason: format!("re-quoting failed: {e}"),
                    });
                }
            };
            let offering = match pick_offering(part, &offerings, self.settings.price_tolerance) {
                Ok(o) => o,
                Err(reason) => return Ok(Outcome::NotDone { reason }),
            };
            if self.settings.dry_run {
                self.counters.calls.fetch_add(1, Ordering::Relaxed);
                let id = self.idempotency(&part.id, None);
                return Ok(dry_run_outcome(
                    cloud.purchase_block(&offering, &id, true).await,
                    format!(
                        "would buy {} x {} in {} from {} for ${:.2} ({})",
                        part.instances,
                        a.instance_type,
                        offering.placement.zone.as_deref().unwrap_or(&a.region),
                        offering.start,
                        offering.upfront_fee,
                        offering.offering_id
                    ),
                    offering.upfront_fee,
                ));
            }
            let id = self.idempotency(&part.id, None);
            let resource = ManagedResource {
                id: String::new(),
                kind: ResourceKind::CapacityBlock,
                cloud: cloud_enum(&a.cloud),
                region: a.region.clone(),
                zone: offering.placement.zone.clone().or_else(|| a.zone.clone()),
                instance_type: a.instance_type.clone(),
                instances: part.instances,
                start: Some(offering.start),
                end: Some(offering.end),
                cost: offering.upfront_fee,
                irreversible: true,
                plan: self.plan_digest().to_string(),
                action: part.id.clone(),
                created_at: self.settings.now,
                pool: Some(part.action.pool.clone()),
                status: ResourceStatus::Pending,
                idle_since: None,
            };
            let request = Request {
                cloud: a.cloud.clone(),
                region: a.region.clone(),
                params: json!({
                    "offering_id": offering.offering_id,
                    "instances": offering.instances,
                    "start": offering.start,
                    "end": offering.end,
                    "upfront_fee": offering.upfront_fee,
                    "currency": offering.currency,
                }),
                creates: Some(resource.clone()),
                releases: None,
            };
            let intent = self
                .begin(&id, "ec2:PurchaseCapacityBlock", &request)
                .await?;
            let sent = self.journal(intent.next(Step::Sent), None).await?;
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            self.counters.purchases_sent.fetch_add(1, Ordering::Relaxed);
            let result = cloud.purchase_block(&offering, &id, false).await;
            match result {
                Ok(done) => {
                    let outcome = self
                        .finish_created(&sent, resource, &done, offering.upfront_fee)
                        .await?;
                    return Ok(outcome);
                }
                Err(e) if e.kind == ActErrorKind::Unknown => {
                    let unknown = self.journal(sent.errored(&e), None).await?;
                    self.note(&format!(
                        "  {}: {e}; looking for intent {} before anything else",
                        part.id, id.intent
                    ));
                    match self.settle(&unknown, &request).await? {
                        Some(found) => {
                            return Ok(Outcome::Done {
                                detail: format!(
                                    "bought {} ({} x {}, found by its intent tag after an unknown outcome)",
                                    found, part.instances, a.instance_type
                                ),
                                cost: offering.upfront_fee,
                            });
                        }
                        None => {
                            last_reason = format!("{e}; the purchase did not happen");
                            continue;
                        }
                    }
                }
                Err(e) => {
                    self.journal(sent.errored(&e), None).await?;
                    match e.kind {
                        ActErrorKind::Throttled | ActErrorKind::Transient => {
                            self.counters.retries.fetch_add(1, Ordering::Relaxed);
                            last_reason = e.to_string();
                            continue;
                        }
                        ActErrorKind::OfferExpired => {
                            last_reason = e.to_string();
                            continue;
                        }
                        ActErrorKind::Capacity => {
                            self.ice.remember(&placement, &e.message);
                            return Ok(Outcome::NotDone {
                                reason: format!(
                                    "{e}; not retried for {} s",
                                    self.settings.ice_ttl.as_secs()
                                ),
                            });
                        }
                        _ => {
                            return Ok(Outcome::NotDone {
                                reason: explain(&e),
                            });
                        }
                    }
                }
            }
        }
        Ok(Outcome::NotDone {
            reason: format!("gave up after {attempts} attempt(s): {last_reason}"),
        })
    }

    /// A GCP capacity block: a future reservation in calendar mode for the part's window,
    /// named from the client token, so repeating it (after a throttle, a lost answer or a
    /// crash) finds the first request instead of making a second.
    async fn requested_block(
        &mut self,
        cloud: &'a dyn Capacity,
        part: &Part,
    ) -> Result<Outcome, ApplyError> {
        let a = &part.action;
        let request = ReservationRequest {
            placement: Placement {
                region: a.region.clone(),
                zone: a.zone.clone(),
                instance_type: a.instance_type.clone(),
            },
            instances: part.instances,
            start: part.start,
            end: part.end,
        };
        let words = format!(
            "request {} x {} in {} from {} to {} (future reservation, calendar mode)",
            part.instances,
            a.instance_type,
            a.zone.as_deref().unwrap_or(&a.region),
            crate::timespec::rfc3339(part.start),
            crate::timespec::rfc3339(part.end)
        );
        let params = serde_json::to_value(&request).unwrap_or_default();
        self.create_by_token(
            part,
            ResourceKind::CapacityBlock,
            "gcp:futureReservations.insert",
            params,
            words,
            |id, dry_run| cloud.request_block(&request, id, dry_run),
        )
        .await
    }

    /// A GCP commitment (`regionCommitments.insert`), named from the client token. It cannot
    /// be undone: the state marks it irreversible and `release` never touches it.
    async fn commit(&mut self, part: &Part) -> Result<Outcome, ApplyError> {
        let a = &part.action;
        let Some(cloud) = self.cloud_of(&a.cloud) else {
            return Ok(no_provider(&a.cloud));
        };
        // Compute Engine requires committed GPUs to be reserved, with the reservations
        // attached: the reservations gpucap made for this type in the region, longest-lived
        // first, until they hold the count (the provider checks them in the cloud).
        let mut live: Vec<&ManagedResource> = self
            .state
            .resources
            .iter()
            .filter(|r| {
                r.kind == ResourceKind::Reservation
                    && r.cloud.as_str() == a.cloud
                    && r.region == a.region
                    && r.instance_type == a.instance_type
                    && !matches!(r.status, ResourceStatus::Released | ResourceStatus::Expired)
            })
            .collect();
        live.sort_by(|x, y| y.end.cmp(&x.end).then_with(|| x.id.cmp(&y.id)));
        let mut reservations: Vec<String> = Vec::new();
        let mut held = 0;
        for r in live {
            if held >= part.instances {
                break;
            }
            held += r.instances;
            reservations.push(r.id.clone());
        }
        let attached = reservations.clone();
        let request = CommitmentRequest {
            placement: Placement {
                region: a.region.clone(),
                zone: None,
                instance_type: a.instance_type.clone(),
            },
            instances: part.instances,
            start: part.start,
            end: part.end,
            reservations,
        };
        let words = format!(
            "sign a commitment to {} x {} in {} until {}",
            part.instances,
            a.instance_type,
            a.region,
            crate::timespec::rfc3339(part.end)
        );
        let params = serde_json::to_value(&request).unwrap_or_default();
        let outcome = self
            .create_by_token(
                part,
                ResourceKind::Commitment,
                "gcp:regionCommitments.insert",
                params,
                words,
                |id, dry_run| cloud.create_commitment(&request, id, dry_run),
            )
            .await?;
        if matches!(outcome, Outcome::Done { .. }) {
            // An attached reservation lives as long as the commitment: never released by gpucap.
            for id in &attached {
                self.amend(cloud_enum(&a.cloud), id, |r| r.irreversible = true);
            }
        }
        Ok(outcome)
    }

    /// A create named from a client token derived from plan and part (GCP future reservations
    /// and commitments, both irreversible once made): journalled, repeated where safe (the
    /// name finds an earlier attempt's work), an unknown outcome settled by the intent tag.
    async fn create_by_token<F>(
        &mut self,
        part: &Part,
        kind: ResourceKind,
        api: &'static str,
        params: serde_json::Value,
        words: String,
        call: F,
    ) -> Result<Outcome, ApplyError>
    where
        F: Fn(&Idempotency, bool) -> gpucap_provider::BoxFuture<'a, ActResult>,
    {
        let a = &part.action;
        let token = client_token(self.plan_digest(), &part.id);
        let id = self.idempotency(&part.id, Some(token));
        if self.settings.dry_run {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            return Ok(dry_run_outcome(
                call(&id, true).await,
                format!("would {words}"),
                part.planned_cost,
            ));
        }
        let resource = ManagedResource {
            id: String::new(),
            kind,
            cloud: cloud_enum(&a.cloud),
            region: a.region.clone(),
            zone: a.zone.clone(),
            instance_type: a.instance_type.clone(),
            instances: part.instances,
            start: Some(part.start),
            end: Some(part.end),
            cost: part.planned_cost,
            irreversible: true,
            plan: self.plan_digest().to_string(),
            action: part.id.clone(),
            created_at: self.settings.now,
            pool: Some(a.pool.clone()),
            status: ResourceStatus::Pending,
            idle_since: None,
        };
        let journalled = Request {
            cloud: a.cloud.clone(),
            region: a.region.clone(),
            params,
            creates: Some(resource.clone()),
            releases: None,
        };
        let intent = self.begin(&id, api, &journalled).await?;
        let (result, last) = self.repeatable(&intent, || call(&id, false)).await?;
        match result {
            Ok(done) => {
                if kind == ResourceKind::CapacityBlock {
                    self.counters.purchases_sent.fetch_add(1, Ordering::Relaxed);
                }
                self.finish_created(&last, resource, &done, part.planned_cost)
                    .await
            }
            Err(e) if e.kind == ActErrorKind::Unknown => {
                match self.settle(&last, &journalled).await? {
                    Some(found) => Ok(Outcome::Done {
                        detail: format!("made {found} (found by its intent tag)"),
                        cost: part.planned_cost,
                    }),
                    None => Ok(Outcome::NotDone {
                        reason: format!(
                            "{e}; a re-run asks again under the same name, which finds it if it was made"
                        ),
                    }),
                }
            }
            Err(e) => Ok(Outcome::NotDone {
                reason: explain(&e),
            }),
        }
    }

    /// `done` in the journal, the resource in the state.
    async fn finish_created(
        &mut self,
        sent: &JournalRecord,
        mut resource: ManagedResource,
        done: &Done,
        cost: f64,
    ) -> Result<Outcome, ApplyError> {
        self.journal(
            sent.done(&done.resource.id, done.request_id.as_deref()),
            Some(cost),
        )
        .await?;
        resource.id = done.resource.id.clone();
        resource.status = status_of(&done.resource);
        let detail = format!(
            "{} {} ({} x {}{})",
            match (resource.kind, resource.cloud) {
                (ResourceKind::CapacityBlock, Cloud::Gcp) => "requested",
                (ResourceKind::CapacityBlock, _) => "bought",
                (ResourceKind::Commitment, _) => "signed",
                _ => "created",
            },
            resource.id,
            resource.instances,
            resource.instance_type,
            resource
                .start
                .map(|s| format!(", from {}", crate::timespec::rfc3339(s)))
                .unwrap_or_default()
        );
        self.record(resource);
        Ok(Outcome::Done { detail, cost })
    }

    /// Looks an unknown outcome up by its intent tag; records what was found (or that
    /// nothing was) in the journal and the state. Returns the found resource id.
    pub(super) async fn settle(
        &mut self,
        pending: &JournalRecord,
        request: &Request,
    ) -> Result<Option<String>, ApplyError> {
        if pending.step == Step::Intent {
            // `sent` is written before a request leaves: this one never left.
            self.journal(pending.next(Step::Reconciled), None).await?;
            self.counters.reconciled.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        let Some(cloud) = self.cloud_of(&request.cloud) else {
            return Err(ApplyError::NoProvider {
                intent: pending.intent.clone(),
                api: pending.api.clone(),
                action: pending.action.clone(),
                cloud: request.cloud.clone(),
            });
        };
        if pending.step == Step::Operation
            && let Some(operation) = pending.request_id.as_deref()
        {
            // The call was under way as this operation: wait for it to end, then look.
            self.note(&format!("  waiting on {operation} first"));
            // Once: the provider waits up to its own operation timeout.
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = cloud.wait_operation(operation).await {
                tracing::info!("{operation}: {e}; looking the result up anyway");
            }
        }
        let found = if request.creates.is_some() {
            self.look_up(cloud, pending, request).await?
        } else {
            None
        };
        let mut settled = pending.next(Step::Reconciled);
        settled.resource_id = found.as_ref().map(|r| r.id.clone());
        self.journal(settled, None).await?;
        self.counters.reconciled.fetch_add(1, Ordering::Relaxed);
        let Some(found) = found else {
            return Ok(None);
        };
        if let Some(mut resource) = request.creates.clone() {
            resource.id = found.id.clone();
            resource.status = status_of(&found);
            self.record(resource);
        }
        Ok(Some(found.id))
    }

    /// Polls the intent tag until the resource shows up or the wait runs out.
    async fn look_up(
        &self,
        cloud: &dyn Capacity,
        pending: &JournalRecord,
        request: &Request,
    ) -> Result<Option<CloudResource>, ApplyError> {
        let deadline = tokio::time::Instant::now() + self.settings.reconcile_wait;
        // Only the kind the call creates (a pool is found by its group: a launch template
        // alone is an unfinished pool, which `ensure_pool` completes).
        let kinds: Vec<ResourceKind> = request.creates.iter().map(|r| r.kind).collect();
        loop {
            let found = self
                .safe("find by intent tag", || {
                    cloud.find_by_tag(
                        &request.region,
                        &kinds,
                        gpucap_provider::capacity::tag::INTENT,
                        &pending.intent,
                    )
                })
                .await
                .map_err(|source| ApplyError::Reconcile {
                    intent: pending.intent.clone(),
                    api: pending.api.clone(),
                    action: pending.action.clone(),
                    cloud: request.cloud.clone(),
                    source,
                })?;
            if let Some(r) = found.into_iter().find(|r| r.managed_by_gpucap()) {
                return Ok(Some(r));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(self.settings.reconcile_poll).await;
        }
    }

    /// A capacity reservation, created with a client token derived from plan and action.
    async fn reserve(&mut self, part: &Part) -> Result<Outcome, ApplyError> {
        let a = &part.action;
        let Some(cloud) = self.cloud_of(&a.cloud) else {
            return Ok(no_provider(&a.cloud));
        };
        let placement = Placement {
            region: a.region.clone(),
            zone: a.zone.clone(),
            instance_type: a.instance_type.clone(),
        };
        if let Some((age, message)) = self.ice.check(&placement) {
            return Ok(Outcome::NotDone {
                reason: format!(
                    "no capacity for {} ({} s ago: {message}); a later run tries again",
                    a.instance_type,
                    age.as_secs()
                ),
            });
        }
        let request = ReservationRequest {
            placement: placement.clone(),
            instances: part.instances,
            start: part.start.max(self.settings.now),
            end: part.end,
        };
        let token = client_token(self.plan_digest(), &part.id);
        let id = self.idempotency(&part.id, Some(token));
        if self.settings.dry_run {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            return Ok(dry_run_outcome(
                cloud.create_reservation(&request, &id, true).await,
                format!(
                    "would reserve {} x {} in {} until {}",
                    part.instances,
                    a.instance_type,
                    a.zone.as_deref().unwrap_or(&a.region),
                    crate::timespec::rfc3339(part.end)
                ),
                part.planned_cost,
            ));
        }
        let resource = ManagedResource {
            id: String::new(),
            kind: ResourceKind::Reservation,
            cloud: cloud_enum(&a.cloud),
            region: a.region.clone(),
            zone: a.zone.clone(),
            instance_type: a.instance_type.clone(),
            instances: part.instances,
            start: Some(request.start),
            end: Some(part.end),
            cost: part.planned_cost,
            irreversible: false,
            plan: self.plan_digest().to_string(),
            action: part.id.clone(),
            created_at: self.settings.now,
            pool: Some(part.action.pool.clone()),
            status: ResourceStatus::Pending,
            idle_since: None,
        };
        let journalled = Request {
            cloud: a.cloud.clone(),
            region: a.region.clone(),
            params: serde_json::to_value(&request).unwrap_or_default(),
            creates: Some(resource.clone()),
            releases: None,
        };
        let intent = self
            .begin(&id, reservation_api(&a.cloud, false), &journalled)
            .await?;
        let (result, last) = self
            .repeatable(&intent, || cloud.create_reservation(&request, &id, false))
            .await?;
        match result {
            Ok(done) => {
                self.finish_created(&last, resource, &done, part.planned_cost)
                    .await
            }
            Err(e) if e.kind == ActErrorKind::Unknown => {
                match self.settle(&last, &journalled).await? {
                    Some(found) => Ok(Outcome::Done {
                        detail: format!("created {found} (found by its intent tag)"),
                        cost: part.planned_cost,
                    }),
                    None => Ok(Outcome::NotDone {
                        reason: format!("{e}; a re-run repeats it with the same client token"),
                    }),
                }
            }
            Err(e) => {
                if e.kind == ActErrorKind::Capacity {
                    self.ice.remember(&placement, &e.message);
                }
                Ok(Outcome::NotDone {
                    reason: explain(&e),
                })
            }
        }
    }

    /// Cancels a reservation gpucap made, once its planned end has come.
    async fn release(
        &mut self,
        action: &str,
        resource: &ManagedResource,
    ) -> Result<Outcome, ApplyError> {
        let Some(cloud) = self.cloud_of(resource.cloud.as_str()) else {
            return Ok(no_provider(resource.cloud.as_str()));
        };
        if resource.kind == ResourceKind::Commitment {
            return Ok(Outcome::Manual {
                reason: format!(
                    "{} is a commitment: it cannot be cancelled, and gpucap never tries",
                    resource.id
                ),
            });
        }
        // A requested capacity block (a GCP future reservation) has its own cancel, which the
        // cloud allows only before the block's notice period.
        let block = resource.kind == ResourceKind::CapacityBlock;
        let cancel = |dry_run: bool| {
            if block {
                cloud.cancel_block(&resource.region, &resource.id, dry_run)
            } else {
                cloud.cancel_reservation(&resource.region, &resource.id, dry_run)
            }
        };
        if self.settings.dry_run {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            return Ok(dry_run_outcome(
                cancel(true).await,
                format!("would cancel {}", resource.id),
                0.0,
            ));
        }
        let id = self.idempotency(action, None);
        let request = Request {
            cloud: resource.cloud.as_str().to_string(),
            region: resource.region.clone(),
            params: json!({ "reservation_id": resource.id }),
            creates: None,
            releases: Some(resource.id.clone()),
        };
        let api = if block {
            "gcp:futureReservations.cancel"
        } else {
            reservation_api(resource.cloud.as_str(), true)
        };
        let intent = self.begin(&id, api, &request).await?;
        let (result, last) = self.repeatable(&intent, || cancel(false)).await?;
        match result {
            Ok(done) => {
                self.journal(last.done(&resource.id, done.request_id.as_deref()), None)
                    .await?;
                self.set_status(resource.cloud, &resource.id, ResourceStatus::Released);
                Ok(Outcome::Done {
                    detail: format!("cancelled {}", resource.id),
                    cost: 0.0,
                })
            }
            Err(e) => {
                // Already gone by itself (its end date came)? Then it is expired, not failed.
                let now = self
                    .safe("describe", || {
                        cloud.describe(&resource.region, resource.kind, &resource.id)
                    })
                    .await;
                if let Ok(Some(r)) = &now
                    && matches!(r.state.as_str(), "expired" | "cancelled")
                {
                    self.set_status(resource.cloud, &resource.id, ResourceStatus::Expired);
                    return Ok(Outcome::Done {
                        detail: format!("{} had already ended ({})", resource.id, r.state),
                        cost: 0.0,
                    });
                }
                Ok(Outcome::NotDone {
                    reason: explain(&e),
                })
            }
        }
    }

    /// A pool: created if absent, then sized for now.
    async fn pool(&mut self, pool: &PoolWork) -> Result<Outcome, ApplyError> {
        let Some(cloud) = self.cloud_of(&pool.cloud) else {
            return Ok(no_provider(&pool.cloud));
        };
        let reservations: Vec<String> = self
            .state
            .resources
            .iter()
            .filter(|r| {
                matches!(
                    r.kind,
                    ResourceKind::Reservation | ResourceKind::CapacityBlock
                ) && r.region == pool.region
                    && r.instance_type == pool.instance_type
                    && !matches!(r.status, ResourceStatus::Released | ResourceStatus::Expired)
                    && self
                        .mandate
                        .actions
                        .iter()
                        .any(|a| a.pool == pool.pool && super::work::belongs_to(r, &a.id))
            })
            .map(|r| r.id.clone())
            .collect();
        let spec = PoolSpec {
            name: pool.name.clone(),
            region: pool.region.clone(),
            instance_types: vec![pool.instance_type.clone()],
            image: pool.launch.image.clone(),
            subnets: pool.launch.subnets.clone(),
            security_groups: pool.launch.security_groups.clone(),
            capacity_reservations: reservations,
            max_size: pool
                .launch
                .max_size
                .unwrap_or(pool.peak)
                .max(pool.on_demand + pool.spot)
                .max(1),
            flex_start: pool.launch.flex_start.then(|| FlexStart {
                run_seconds: self.flex_run_seconds(pool),
            }),
        };
        let size = PoolSize {
            on_demand: pool.on_demand,
            spot: pool.spot,
        };
        let known = self
            .state
            .resources
            .iter()
            .any(|r| r.kind == ResourceKind::Pool && r.id == pool.name);
        let words = format!(
            "{} on-demand + {} spot x {}",
            size.on_demand, size.spot, pool.instance_type
        );
        if self.settings.dry_run {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            if !known {
                let id = self.idempotency(
                    &pool.name,
                    Some(client_token(self.plan_digest(), &pool.name)),
                );
                let r = cloud.ensure_pool(&spec, &id, true).await;
                if let Err(e) = &r
                    && e.kind != ActErrorKind::DryRunOk
                {
                    return Ok(Outcome::NotDone { reason: explain(e) });
                }
            }
            if let Some(flex) = spec.flex_start {
                let id = self.idempotency(&pool.name, Some(self.flex_token(pool)));
                return Ok(dry_run_outcome(
                    cloud
                        .request_pool(&pool.region, &pool.name, size, flex, &id, true)
                        .await,
                    format!("would ask for {words} (flex-start) in {}", pool.name),
                    0.0,
                ));
            }
            return Ok(dry_run_outcome(
                cloud.scale_pool(&pool.region, &pool.name, size, true).await,
                format!("would size {} to {words}", pool.name),
                0.0,
            ));
        }
        if !known {
            let id = self.idempotency(
                &pool.name,
                Some(client_token(self.plan_digest(), &pool.name)),
            );
            let resource = ManagedResource {
                id: pool.name.clone(),
                kind: ResourceKind::Pool,
                cloud: cloud_enum(&pool.cloud),
                region: pool.region.clone(),
                zone: None,
                instance_type: pool.instance_type.clone(),
                instances: 0,
                start: None,
                end: None,
                cost: 0.0,
                irreversible: false,
                plan: self.plan_digest().to_string(),
                action: pool.name.clone(),
                created_at: self.settings.now,
                pool: Some(pool.pool.clone()),
                status: ResourceStatus::Active,
                idle_since: None,
            };
            let request = Request {
                cloud: pool.cloud.clone(),
                region: pool.region.clone(),
                params: serde_json::to_value(&spec).unwrap_or_default(),
                creates: Some(resource.clone()),
                releases: None,
            };
            let intent = self
                .begin(&id, pool_api(&pool.cloud, false), &request)
                .await?;
            let (result, last) = self
                .repeatable(&intent, || cloud.ensure_pool(&spec, &id, false))
                .await?;
            match result {
                Ok(done) => {
                    self.journal(
                        last.done(&done.resource.id, done.request_id.as_deref()),
                        None,
                    )
                    .await?;
                    self.record(resource);
                }
                Err(e) => {
                    return Ok(Outcome::NotDone {
                        reason: explain(&e),
                    });
                }
            }
        }
        if let Some(flex) = spec.flex_start {
            return self.request(cloud, pool, size, flex, &words).await;
        }
        self.scale(cloud, &pool.cloud, &pool.region, &pool.name, size, &words)
            .await
    }

    /// The client token of a flex-start pool's resize request: one per plan and pool.
    fn flex_token(&self, pool: &PoolWork) -> String {
        client_token(self.plan_digest(), &format!("{}#flex-start", pool.name))
    }

    /// How long a flex-start pool's instances run: `max_run_duration`, else until the latest
    /// end of the pool's runs due now, within Compute Engine's 10 minutes to 7 days.
    fn flex_run_seconds(&self, pool: &PoolWork) -> u64 {
        let (least, most) = (
            crate::config::FLEX_MIN_RUN.as_secs(),
            crate::config::FLEX_MAX_RUN.as_secs(),
        );
        if let Some(d) = pool.launch.max_run_duration {
            return d.as_secs().clamp(least, most);
        }
        let latest = self
            .mandate
            .actions
            .iter()
            .filter(|a| pool.actions.contains(&a.id))
            .filter_map(|a| crate::timespec::parse_timestamp(&a.end).ok())
            .max();
        latest
            .map(|end| (end - self.settings.now).num_seconds().max(0) as u64)
            .unwrap_or(most)
            .clamp(least, most)
    }

    /// Sizes a flex-start pool: what its on-demand group lacks is asked for with one queued
    /// request per plan (`Pools::request_pool`), journalled like any call that is safe to
    /// repeat (the request is found by name). A request still queued is `Pending`.
    async fn request(
        &mut self,
        cloud: &'a dyn Capacity,
        pool: &PoolWork,
        size: PoolSize,
        flex: FlexStart,
        words: &str,
    ) -> Result<Outcome, ApplyError> {
        let id = self.idempotency(&pool.name, Some(self.flex_token(pool)));
        let request = Request {
            cloud: pool.cloud.clone(),
            region: pool.region.clone(),
            params: json!({
                "name": pool.name, "on_demand": size.on_demand, "spot": size.spot,
                "flex_start_run_seconds": flex.run_seconds,
            }),
            creates: None,
            releases: None,
        };
        let intent = self.begin(&id, flex_api(&pool.cloud), &request).await?;
        let (result, last) = self
            .repeatable(&intent, || {
                cloud.request_pool(&pool.region, &pool.name, size, flex, &id, false)
            })
            .await?;
        match result {
            Ok(done) => {
                self.journal(last.done(&pool.name, done.request_id.as_deref()), None)
                    .await?;
                let asked = done.request_id.clone().unwrap_or_default();
                if done.resource.state == "pending" {
                    return Ok(Outcome::Pending {
                        detail: format!(
                            "{} asked for {words} (flex-start, resize request {asked}); queued until Compute Engine can start them all, the next `gpucap apply` looks again",
                            pool.name
                        ),
                    });
                }
                let target = done.resource.instances;
                if let Some(r) = self
                    .state
                    .resources
                    .iter_mut()
                    .find(|r| r.kind == ResourceKind::Pool && r.id == pool.name)
                    && r.instances != target
                {
                    r.instances = target;
                    self.dirty = true;
                }
                let running = done
                    .resource
                    .in_use
                    .map(|n| format!("; {n} running"))
                    .unwrap_or_default();
                Ok(Outcome::Done {
                    detail: format!(
                        "sized {} to {words} (flex-start, resize request {asked}){running}",
                        pool.name
                    ),
                    cost: 0.0,
                })
            }
            Err(e) => Ok(Outcome::NotDone {
                reason: explain(&e),
            }),
        }
    }

    /// Scales a pool gpucap made to zero (`gpucap release`: no campaign needs it now).
    async fn scale_to_zero(&mut self, resource: &ManagedResource) -> Result<Outcome, ApplyError> {
        let Some(cloud) = self.cloud_of(resource.cloud.as_str()) else {
            return Ok(no_provider(resource.cloud.as_str()));
        };
        let size = PoolSize {
            on_demand: 0,
            spot: 0,
        };
        if self.settings.dry_run {
            self.counters.calls.fetch_add(1, Ordering::Relaxed);
            return Ok(dry_run_outcome(
                cloud
                    .scale_pool(&resource.region, &resource.id, size, true)
                    .await,
                format!("would scale {} to zero", resource.id),
                0.0,
            ));
        }
        self.scale(
            cloud,
            resource.cloud.as_str(),
            &resource.region,
            &resource.id,
            size,
            "zero",
        )
        .await
    }

    /// Sets a pool's size (absolute, so repeating it is harmless), journalled.
    async fn scale(
        &mut self,
        cloud: &'a dyn Capacity,
        cloud_name: &str,
        region: &str,
        name: &str,
        size: PoolSize,
        words: &str,
    ) -> Result<Outcome, ApplyError> {
        let id = self.idempotency(name, None);
        let request = Request {
            cloud: cloud_name.to_string(),
            region: region.to_string(),
            params: json!({ "name": name, "on_demand": size.on_demand, "spot": size.spot }),
            creates: None,
            releases: None,
        };
        let intent = self
            .begin(&id, pool_api(cloud_name, true), &request)
            .await?;
        let (result, last) = self
            .repeatable(&intent, || cloud.scale_pool(region, name, size, false))
            .await?;
        match result {
            Ok(done) => {
                self.journal(last.done(name, done.request_id.as_deref()), None)
                    .await?;
                if let Some(r) = self
                    .state
                    .resources
                    .iter_mut()
                    .find(|r| r.kind == ResourceKind::Pool && r.id == name)
                    && r.instances != size.on_demand + size.spot
                {
                    r.instances = size.on_demand + size.spot;
                    self.dirty = true;
                }
                // GCP and Azure answer only once they have counted the instances that run
                // (`listManagedInstances`, the scale set's VMs); AWS's count is from before
                // the update.
                let running = match (cloud_name, done.resource.in_use) {
                    ("gcp" | "azure", Some(n)) => format!("; {n} running"),
                    _ => String::new(),
                };
                Ok(Outcome::Done {
                    detail: format!("sized {name} to {words}{running}"),
                    cost: 0.0,
                })
            }
            Err(e) => Ok(Outcome::NotDone {
                reason: explain(&e),
            }),
        }
    }
}

/// The journal's name of a reservation create (or cancel) on `cloud`.
fn reservation_api(cloud: &str, cancel: bool) -> &'static str {
    match (cloud, cancel) {
        ("azure", false) => "azure:capacityReservations.createOrUpdate",
        ("azure", true) => "azure:capacityReservations.delete",
        ("gcp", false) => "gcp:reservations.insert",
        ("gcp", true) => "gcp:reservations.delete",
        (_, false) => "ec2:CreateCapacityReservation",
        (_, true) => "ec2:CancelCapacityReservation",
    }
}

/// The journal's name of a flex-start pool's request on `cloud`.
fn flex_api(cloud: &str) -> &'static str {
    match cloud {
        "gcp" => "gcp:regionInstanceGroupManagerResizeRequests.insert",
        _ => "request_pool",
    }
}

/// The journal's name of a pool create (or resize) on `cloud`.
fn pool_api(cloud: &str, resize: bool) -> &'static str {
    match (cloud, resize) {
        ("azure", false) => "azure:virtualMachineScaleSets.createOrUpdate",
        ("azure", true) => "azure:virtualMachineScaleSets.update",
        ("gcp", false) => "gcp:regionInstanceGroupManagers.insert",
        ("gcp", true) => "gcp:regionInstanceGroupManagers.resize",
        (_, false) => "autoscaling:CreateAutoScalingGroup",
        (_, true) => "autoscaling:UpdateAutoScalingGroup",
    }
}

/// The deterministic client token of a call: a UUID v5 of the plan digest and the action (or
/// part) id, so a re-run after a crash sends the same token (AWS allows 64 ASCII characters).
pub fn client_token(plan: &str, action: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("gpucap:{plan}:{action}").as_bytes(),
    )
    .to_string()
}

/// The zone of a capacity block in `state` that a group's campaigns run on at the same time as
/// one of its `parts`: a part of one of their actions, or of another action of the plan that
/// carries one of the `campaigns` in an overlapping window.
fn bought_zone(
    state: &State,
    plan: &Plan,
    campaigns: &[String],
    parts: &[&Part],
) -> Option<String> {
    let actions: BTreeSet<&str> = parts.iter().map(|p| p.action.id.as_str()).collect();
    state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::CapacityBlock)
        .find_map(|r| {
            let base = r.action.split('#').next().unwrap_or(&r.action);
            let at_once = match (r.start, r.end) {
                (Some(start), Some(end)) => parts.iter().any(|p| start < p.end && p.start < end),
                _ => false,
            };
            let carries = plan
                .actions
                .iter()
                .any(|a| a.id == base && a.campaigns.iter().any(|c| campaigns.contains(c)));
            (actions.contains(base) || (carries && at_once))
                .then(|| r.zone.clone())
                .flatten()
        })
}

/// What to ask EC2 for one capacity block part: its instances, from its start, for its hours.
fn block_query(part: &Part) -> BlockQuery {
    let hours = u32::try_from((part.end - part.start).num_hours()).unwrap_or(0);
    BlockQuery {
        region: part.action.region.clone(),
        instance_type: part.action.instance_type.clone(),
        instances: part.instances,
        start_from: part.start,
        start_to: part.start,
        duration_hours: hours,
    }
}

/// The offering that matches a part: the same window, zone and count, at a price within the
/// tolerance. Otherwise why not, in words that say what moved.
pub fn pick_offering(
    part: &Part,
    offerings: &[BlockOffering],
    tolerance: f64,
) -> Result<BlockOffering, String> {
    let a = &part.action;
    let same_window: Vec<&BlockOffering> = offerings
        .iter()
        .filter(|o| o.start == part.start && o.end == part.end && o.instances == part.instances)
        .collect();
    if same_window.is_empty() {
        let seen = offerings
            .iter()
            .take(3)
            .map(|o| {
                format!(
                    "{} x {} from {} to {}",
                    o.instances,
                    o.placement.zone.as_deref().unwrap_or("?"),
                    crate::timespec::rfc3339(o.start),
                    crate::timespec::rfc3339(o.end)
                )
            })
            .collect::<Vec<_>>();
        return Err(format!(
            "the plan is stale: no capacity block of {} x {} from {} to {} is offered now{}; run `gpucap plan` again",
            part.instances,
            a.instance_type,
            crate::timespec::rfc3339(part.start),
            crate::timespec::rfc3339(part.end),
            if seen.is_empty() {
                String::new()
            } else {
                format!(" (offered: {})", seen.join("; "))
            }
        ));
    }
    let in_zone: Vec<&BlockOffering> = same_window
        .iter()
        .copied()
        .filter(|o| a.zone.is_none() || o.placement.zone == a.zone)
        .collect();
    if in_zone.is_empty() {
        return Err(format!(
            "the plan is stale: the block is now offered in {} instead of {}; run `gpucap plan` again",
            same_window
                .iter()
                .filter_map(|o| o.placement.zone.as_deref())
                .collect::<Vec<_>>()
                .join(", "),
            a.zone.as_deref().unwrap_or("?")
        ));
    }
    let cheapest = in_zone
        .into_iter()
        .min_by(|x, y| x.upfront_fee.total_cmp(&y.upfront_fee))
        .cloned()
        .expect("not empty");
    let limit = part.planned_cost * (1.0 + tolerance);
    if cheapest.upfront_fee > limit + 0.005 {
        return Err(format!(
            "the plan is stale: the block now costs ${:.2}, {:.1} % more than the planned ${:.2} (tolerance {:.1} %); run `gpucap plan` again, or raise --price-tolerance",
            cheapest.upfront_fee,
            (cheapest.upfront_fee / part.planned_cost.max(f64::MIN_POSITIVE) - 1.0) * 100.0,
            part.planned_cost,
            tolerance * 100.0
        ));
    }
    Ok(cheapest)
}

fn dry_run_outcome(result: ActResult, detail: String, cost: f64) -> Outcome {
    match result {
        Err(e) if e.kind == ActErrorKind::DryRunOk => Outcome::WouldDo { detail, cost },
        Ok(_) => Outcome::WouldDo { detail, cost },
        Err(e) => Outcome::NotDone {
            reason: explain(&e),
        },
    }
}

/// An error in words a person can act on.
pub fn explain(e: &ActError) -> String {
    match e.kind {
        ActErrorKind::Quota => format!(
            "{e}; ask for a higher quota (AWS Service Quotas, Azure Quotas, GCP IAM & Admin > Quotas: the limit named above) or lower the plan's on-demand limits"
        ),
        ActErrorKind::Auth => format!(
            "{e}; the credentials in use may not make this call (see the IAM policy and the Azure and GCP permissions in docs/apply.md)"
        ),
        ActErrorKind::IdempotencyConflict => format!(
            "{e}; a call with this client token was made with other parameters: the plan changed under the same action id"
        ),
        _ => e.to_string(),
    }
}

fn no_provider(cloud: &str) -> Outcome {
    Outcome::Manual {
        reason: format!(
            "gpucap cannot act on {cloud} in this run (built without the `{cloud}` feature, or no {cloud} credentials: see the warning above)"
        ),
    }
}

fn cloud_enum(cloud: &str) -> Cloud {
    cloud.parse().unwrap_or(Cloud::Aws)
}

/// The state word of a resource the cloud described.
fn status_of(r: &CloudResource) -> ResourceStatus {
    match r.state.as_str() {
        "active" | "InService" => ResourceStatus::Active,
        "expired" => ResourceStatus::Expired,
        "cancelled" => ResourceStatus::Released,
        _ => ResourceStatus::Pending,
    }
}

/// The test hook behind `GPUCAP_HALT_AFTER_JOURNAL`: says where it stopped and waits to be
/// killed, so a crash test can SIGKILL the process at an exact journal boundary.
fn halt(n: u64, record: &JournalRecord) -> ! {
    eprintln!(
        "gpucap: halted after journal record {n} ({} {} of {}); waiting to be killed",
        record.step.as_str(),
        record.api,
        record.action
    );
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
