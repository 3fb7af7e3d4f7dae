//! `gpucap release`'s engine: frees what gpucap holds and no campaign needs any more, and
//! reports what cannot be freed with the money still tied up in it.
//!
//! One run, in order:
//!
//! 1. take the state lock (not in a dry run) and read the state;
//! 2. settle whatever an earlier run left unresolved in the journal (as `apply` does);
//! 3. look every live reservation and pool up in the cloud ([`Executor::describe`]);
//! 4. decide for each ([`select`], pure, on the demand the calendar gives now: [`need`]);
//! 5. ask the caller (the gates and the confirmation) whether to go on;
//! 6. cancel and scale down through the same [`Executor`] as `apply`, so every call is
//!    journalled before it is sent and audited; record what ended by itself and the idle
//!    marks in the state;
//! 7. let go of the lock and report.
//!
//! Nothing here prints or reads flags: progress goes through a callback, the result is a
//! [`Summary`].

pub mod need;
pub mod select;

#[cfg(test)]
mod tests;

use std::time::Duration;

use gpucap_provider::capacity::ResourceKind;
use serde::Serialize;

use crate::apply::executor::Mandate;
use crate::apply::{ApplyError, Clouds, Counts, Executor, Report, Settings, Work};
use crate::demand::DemandCurve;
use crate::state::{LockGuard, LockOptions, ResourceStatus, State, StateBackend};
pub use need::{Need, NeededBy};
pub use select::{Decision, Item, Lookup, Observed, Rules};

/// Whether to go on once the list is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Go,
    /// Release nothing (the gates denied it, or nobody confirmed); the reason is reported.
    Stop(String),
}

/// Everything one run needs.
pub struct Run<'a> {
    /// Demand from the calendar and forecasts as of `settings.now`.
    pub demand: &'a DemandCurve,
    pub clouds: &'a Clouds,
    pub backend: &'a dyn StateBackend,
    pub settings: &'a Settings,
    /// How long a reservation must have been unused before it is cancelled.
    pub idle_after: chrono::Duration,
    pub lock_timeout: Duration,
    pub who: String,
    /// Asked once, with the decisions, before anything is released.
    pub approve: &'a (dyn Fn(&[Item]) -> Verdict + Send + Sync),
    pub progress: &'a (dyn Fn(&str) + Send + Sync),
}

/// What one run decided and did.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub run: String,
    pub dry_run: bool,
    /// Every live resource, with its decision and why.
    pub items: Vec<Item>,
    /// The calls made for the items that release something.
    pub reports: Vec<Report>,
    /// Why nothing was released, when the caller said stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Unresolved calls of an earlier run settled first.
    pub settled: usize,
    pub counts: Counts,
    pub state_serial: u64,
}

impl Summary {
    /// Whether every release asked for was carried out (or would be, in a dry run).
    pub fn complete(&self) -> bool {
        self.stopped.is_none()
            && self.reports.iter().all(|r| {
                matches!(
                    r.outcome,
                    crate::apply::Outcome::Done { .. } | crate::apply::Outcome::WouldDo { .. }
                )
            })
    }

    /// USD that cannot be released: paid or committed for time still ahead.
    pub fn owed_ahead(&self) -> f64 {
        self.items
            .iter()
            .map(|i| match i.decision {
                Decision::Owed { ahead, .. } => ahead,
                _ => 0.0,
            })
            .sum::<f64>()
            + 0.0
    }
}

/// Carries out one run (see the module docs).
pub async fn run(r: Run<'_>) -> Result<Summary, ApplyError> {
    let guard = if r.settings.dry_run {
        None
    } else {
        Some(
            r.backend
                .lock(&LockOptions::new("release").timeout(r.lock_timeout))
                .await?,
        )
    };
    let result = run_locked(&r, guard.as_ref()).await;
    crate::state::lock::unlock_after(guard, result).await
}

/// The run under the lock (`None` in a dry run).
async fn run_locked(r: &Run<'_>, guard: Option<&LockGuard>) -> Result<Summary, ApplyError> {
    let dry_run = r.settings.dry_run;
    let state = r.backend.read_state().await?.unwrap_or_else(State::new);
    let run_id = uuid::Uuid::new_v4().to_string();
    let mandate = Mandate {
        // What names this run's calls in the journal, the audit log and the state's
        // `applied_plan` (so a plan saved before it is stale once it wrote the state).
        digest: format!("release:{run_id}"),
        made_against: state.reference(),
        actions: &[],
    };
    let mut exec = Executor::new(
        mandate,
        r.clouds,
        r.backend,
        guard,
        r.settings,
        state,
        r.who.clone(),
        r.progress,
    );
    let settled = if dry_run {
        0
    } else {
        exec.recover().await?.settled.len()
    };

    // Look up what the cloud decides (live reservations and pools whose window is not over).
    let now = r.settings.now;
    let live: Vec<_> = exec
        .state()
        .resources
        .iter()
        .filter(|x| matches!(x.status, ResourceStatus::Pending | ResourceStatus::Active))
        .cloned()
        .collect();
    let mut observed = Vec::with_capacity(live.len());
    for resource in live {
        // GCP capacity blocks (future reservations) can be cancelled for a while: asked too.
        let requested_block = resource.kind == ResourceKind::CapacityBlock
            && resource.cloud == gpucap_provider::Cloud::Gcp;
        let ask = (matches!(
            resource.kind,
            ResourceKind::Reservation | ResourceKind::Pool
        ) || requested_block)
            && (resource.end.is_none_or(|end| end > now) || select::lives_past_its_end(&resource));
        let cloud = if !ask {
            Lookup::NotAsked
        } else {
            match exec.describe(&resource).await {
                None => Lookup::NoProvider,
                Some(Ok(Some(found))) => Lookup::Found(found),
                Some(Ok(None)) => Lookup::Missing,
                Some(Err(e)) => Lookup::Failed(e.to_string()),
            }
        };
        observed.push(Observed { resource, cloud });
    }
    let items = select::select(
        &observed,
        &Need::new(r.demand),
        Rules {
            now,
            idle_after: r.idle_after,
        },
    );

    let verdict = (r.approve)(&items);
    let mut reports = Vec::new();
    let stopped = match verdict {
        Verdict::Stop(why) => Some(why),
        Verdict::Go => {
            let todo: Vec<&Item> = items.iter().filter(|i| i.decision.acts()).collect();
            for (n, item) in todo.iter().enumerate() {
                let action = format!("release:{}", item.action);
                let work = match item.decision {
                    Decision::Cancel => Work::Release {
                        action,
                        resource: item.resource.clone(),
                    },
                    _ => Work::ScaleToZero {
                        action,
                        resource: item.resource.clone(),
                    },
                };
                let report = exec.carry_out(&work).await?;
                (r.progress)(&crate::apply::progress_line(n + 1, todo.len(), &report));
                reports.push(report);
            }
            None
        }
    };
    // What the state learns without a call: windows over, resources gone, idle marks. Recorded
    // whatever the verdict (they change nothing in the cloud).
    if !dry_run {
        for item in &items {
            let ended = match item.decision {
                Decision::Ended { status } => Some(status),
                _ => None,
            };
            let idle_since = item.idle_since;
            exec.amend(item.cloud, &item.id, |x| {
                if let Some(status) = ended {
                    x.status = status;
                }
                x.idle_since = idle_since;
            });
        }
        exec.save().await?;
        exec.checkpoint().await?;
    }
    let counts = exec.counts();
    let serial = exec.state().serial;
    Ok(Summary {
        run: run_id,
        dry_run,
        items,
        reports,
        stopped,
        settled,
        counts,
        state_serial: serial,
    })
}
