//! `gpucap apply`'s engine: carries out a plan's due actions on the clouds, and never buys
//! anything twice.
//!
//! One run, in order:
//!
//! 1. take the state lock (not in a dry run), read the state, and refuse a plan made against
//!    another state ([`crate::state::StateRef::check_plan`]);
//! 2. settle whatever an earlier run left unresolved in the journal ([`reconcile`]);
//! 3. work out what is left to do now ([`work`]): purchases not in the state yet (blocks
//!    split into parts one block can hold), releases whose time has come, pools sized for now;
//! 4. carry each out through the cloud's `Capacity` provider ([`executor`]), journalling every
//!    mutating call before it is sent and recording what exists in the state after each; the
//!    capacity blocks a campaign placed whole runs on at once are quoted first and bought in
//!    one zone, or none of them ([`gangs`]);
//! 5. let go of the lock and report, with what became of every due action ([`account`]).
//!
//! The checks that need the project (inputs unchanged, gates, approvals, quote ages) are
//! [`preflight`]'s, run by the command before this. Nothing here reads flags or prints to
//! stdout: progress goes through a callback, the result is a [`Summary`].

pub mod account;
pub mod executor;
pub mod gangs;
pub mod ice;
pub mod preflight;
pub mod reconcile;
pub mod work;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

pub use account::{Accounted, Fate};
pub use executor::{ApplyError, Clouds, Counts, Executor, Outcome, Report, Settings};
pub use preflight::Approval;
pub use reconcile::Recovered;
pub use work::{Todo, Work};

use crate::config::LaunchSettings;
use crate::plan::Plan;
use crate::plan::due::DueAction;
use crate::state::{AuditRecord, LockGuard, LockOptions, State, StateBackend, StateError};

/// Everything one run needs.
pub struct Run<'a> {
    pub plan: &'a Plan,
    /// The plan's due actions (see [`crate::plan::due`]).
    pub due: &'a [DueAction<'a>],
    pub launch: &'a BTreeMap<String, LaunchSettings>,
    pub clouds: &'a Clouds,
    pub backend: &'a dyn StateBackend,
    pub settings: &'a Settings,
    /// How long to wait for another run's lock.
    pub lock_timeout: Duration,
    /// Who acts (audit log, lock).
    pub who: String,
    /// The sign-off, where the gates asked for one; recorded in the audit log.
    pub approval: Option<Approval>,
    pub progress: &'a (dyn Fn(&str) + Send + Sync),
}

/// What one run did.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run: String,
    pub dry_run: bool,
    pub plan: String,
    pub reports: Vec<Report>,
    /// What became of each due action, one each, in the plan's order ([`account`]).
    pub due: Vec<Accounted>,
    /// Due purchases the state already had.
    pub already_done: Vec<String>,
    pub recovered: RecoveredSummary,
    pub counts: Counts,
    /// The state's serial after the run (unchanged in a dry run).
    pub state_serial: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveredSummary {
    pub settled: usize,
    pub found: usize,
    pub restored: usize,
}

impl Summary {
    /// Whether everything due was carried out (or would be, in a dry run).
    pub fn complete(&self) -> bool {
        self.reports
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Done { .. } | Outcome::WouldDo { .. }))
    }

    /// USD committed by this run.
    pub fn spent(&self) -> f64 {
        self.reports
            .iter()
            .map(|r| match r.outcome {
                Outcome::Done { cost, .. } => cost,
                _ => 0.0,
            })
            .sum::<f64>()
            + 0.0 // an empty sum is -0.0
    }
}

/// Why a run refused to start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Stale(#[from] crate::state::StalePlan),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl From<StateError> for RunError {
    fn from(e: StateError) -> Self {
        RunError::Apply(ApplyError::State(e))
    }
}

/// Carries out one run (see the module docs).
pub async fn run(r: Run<'_>) -> Result<Summary, RunError> {
    let guard = if r.settings.dry_run {
        None
    } else {
        Some(
            r.backend
                .lock(&LockOptions::new("apply").timeout(r.lock_timeout))
                .await?,
        )
    };
    let result = run_locked(&r, guard.as_ref()).await;
    crate::state::lock::unlock_after(guard, result).await
}

/// The run under the lock (`None` in a dry run).
async fn run_locked(r: &Run<'_>, guard: Option<&LockGuard>) -> Result<Summary, RunError> {
    let dry_run = r.settings.dry_run;
    let state = r.backend.read_state().await?;
    r.plan
        .state
        .clone()
        .unwrap_or(crate::state::StateRef::NONE)
        .check_plan(&r.plan.fingerprint.digest, state.as_ref())?;
    let state = state.unwrap_or_else(State::new);

    let mut exec = Executor::new(
        executor::Mandate::plan(r.plan),
        r.clouds,
        r.backend,
        guard,
        r.settings,
        state,
        r.who.clone(),
        r.progress,
    );
    let recovered = if dry_run {
        let pending =
            crate::state::journal::unresolved(&r.backend.read_journal().await?.records).len();
        if pending > 0 {
            (r.progress)(&format!(
                "{pending} call(s) from an earlier run are unresolved; `gpucap apply` settles them first (a dry run does not)"
            ));
        }
        Recovered::default()
    } else {
        exec.recover().await?
    };
    if let (Some(approval), false) = (&r.approval, dry_run) {
        r.backend
            .append_audit(&AuditRecord {
                at: chrono::Utc::now(),
                who: approval.by.clone(),
                run: exec.run_id().to_string(),
                plan_fingerprint: r.plan.fingerprint.digest.clone(),
                action: "*".into(),
                api: "approval".into(),
                request_id: None,
                outcome: "approved".into(),
                cost: None,
                detail: Some(format!("{} ({})", approval.reason, approval.source)),
            })
            .await?;
    }

    let todo = work::todo(r.plan, r.due, exec.state(), r.launch, r.settings.now);
    exec.choose_zones(&todo.work, r.plan).await;
    let total = todo.work.len();
    let mut reports = Vec::with_capacity(total);
    for (i, w) in todo.work.iter().enumerate() {
        let report = exec.carry_out(w).await?;
        (r.progress)(&progress_line(i + 1, total, &report));
        reports.push(report);
    }
    exec.checkpoint().await?;
    let due = account::account(
        r.due,
        &todo.work,
        &reports,
        &todo.already_done,
        r.settings.now,
    );
    let counts = exec.counts();
    let serial = exec.state().serial;
    let run_id = exec.run_id().to_string();
    drop(exec);
    Ok(Summary {
        run: run_id,
        dry_run,
        plan: r.plan.fingerprint.digest.clone(),
        reports,
        due,
        already_done: todo.already_done,
        recovered: RecoveredSummary {
            settled: recovered.settled.len(),
            found: recovered
                .settled
                .iter()
                .filter(|(_, _, f)| f.is_some())
                .count(),
            restored: recovered.restored.len(),
        },
        counts,
        state_serial: serial,
    })
}

/// `[3/12] block-…: bought cr-… (2 x p5.48xlarge, from …) $31,456.50`
pub fn progress_line(n: usize, total: usize, report: &Report) -> String {
    let (word, text) = match &report.outcome {
        Outcome::Done { detail, .. } => ("done", detail.as_str()),
        Outcome::WouldDo { detail, .. } => ("dry run", detail.as_str()),
        Outcome::NotDone { reason } => ("NOT DONE", reason.as_str()),
        Outcome::Manual { reason } => ("by hand", reason.as_str()),
        Outcome::Pending { detail } => ("pending", detail.as_str()),
    };
    format!(
        "[{n}/{total}] {} {}: {word}: {text}",
        report.kind, report.id
    )
}
