//! Every due action accounted for. `apply` says "N action(s) due"; its summary then says what
//! became of each of those N: done (or would be, in a dry run), done by an earlier run, not
//! done or pending (a re-run finishes it), left for a person (and why), or waiting for a later
//! run (a run of instances due in the window that has not started yet: its pool is sized by
//! the first run after it starts). The work list cannot say this by itself: a purchase may be
//! split into parts, every run active now folds into its pool's one size, and purchases the
//! state already holds make no work at all.
//!
//! Pure: the due actions, the work, what came of each unit of work, and the time in; one
//! [`Accounted`] per due action out, in the plan's order.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::executor::{Outcome, Report};
use super::work::{self, Work};
use crate::plan::Action;
use crate::plan::due::DueAction;

/// What became of one due action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accounted {
    /// The plan action's id.
    pub action: String,
    /// The action's kind (`purchase_capacity_block`, `run_on_demand`, …).
    pub kind: &'static str,
    #[serde(flatten)]
    pub fate: Fate,
    /// How it was carried out, where not by one call of its own: `in pool <name>` (a run),
    /// `3 parts` (a split purchase, as done as its least done part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// The fates of a due action, from the least done to the most.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "fate", rename_all = "snake_case")]
pub enum Fate {
    /// Tried and not done; a re-run may finish it.
    NotDone { reason: String },
    /// `gpucap apply` cannot do it; a person must.
    Manual { reason: String },
    /// Asked for, not there yet; a re-run looks again.
    Pending { detail: String },
    /// Due in the window, but not to be acted on before a later run.
    Later { reason: String },
    /// A dry run: the cloud said it would succeed.
    WouldDo { detail: String },
    /// Carried out by this run.
    Done { detail: String },
    /// The state holds it from an earlier run.
    DoneEarlier,
}

impl Fate {
    /// The words a person reads in the summary's list.
    pub fn label(&self) -> &'static str {
        match self {
            Fate::NotDone { .. } => "not done",
            Fate::Manual { .. } => "for a person",
            Fate::Pending { .. } => "pending",
            Fate::Later { .. } => "later run",
            Fate::WouldDo { .. } => "would do",
            Fate::Done { .. } => "done",
            Fate::DoneEarlier => "done earlier",
        }
    }

    /// The detail or the reason.
    pub fn text(&self) -> &str {
        match self {
            Fate::NotDone { reason } | Fate::Manual { reason } | Fate::Later { reason } => reason,
            Fate::Pending { detail } | Fate::WouldDo { detail } | Fate::Done { detail } => detail,
            Fate::DoneEarlier => "the state holds it from an earlier run",
        }
    }

    fn of(outcome: &Outcome) -> Fate {
        match outcome {
            Outcome::Done { detail, .. } => Fate::Done {
                detail: detail.clone(),
            },
            Outcome::WouldDo { detail, .. } => Fate::WouldDo {
                detail: detail.clone(),
            },
            Outcome::NotDone { reason } => Fate::NotDone {
                reason: reason.clone(),
            },
            Outcome::Manual { reason } => Fate::Manual {
                reason: reason.clone(),
            },
            Outcome::Pending { detail } => Fate::Pending {
                detail: detail.clone(),
            },
        }
    }

    /// Lower is less done: a split purchase is as done as its least done part.
    fn rank(&self) -> u8 {
        match self {
            Fate::NotDone { .. } => 0,
            Fate::Manual { .. } => 1,
            Fate::Pending { .. } => 2,
            Fate::Later { .. } => 3,
            Fate::WouldDo { .. } => 4,
            Fate::Done { .. } => 5,
            Fate::DoneEarlier => 6,
        }
    }
}

/// One [`Accounted`] per due action. `reports[i]` is what came of `work[i]` (a run that stopped
/// early has fewer reports than work: the rest is not done).
pub fn account(
    due: &[DueAction<'_>],
    work: &[Work],
    reports: &[Report],
    already_done: &[String],
    now: DateTime<Utc>,
) -> Vec<Accounted> {
    due.iter()
        .map(|d| {
            let (fate, via) = fate(d, work, reports, already_done, now);
            Accounted {
                action: d.action.id.clone(),
                kind: d.action.kind.as_str(),
                fate,
                via,
            }
        })
        .collect()
}

fn fate(
    d: &DueAction<'_>,
    work: &[Work],
    reports: &[Report],
    already_done: &[String],
    now: DateTime<Utc>,
) -> (Fate, Option<String>) {
    let a = d.action;
    if already_done.contains(&a.id) {
        return (Fate::DoneEarlier, None);
    }
    if a.kind.is_run() && d.start > now {
        let reason = format!(
            "starts {}, after this run; the first run after that sizes pool `{}` for it",
            crate::timespec::rfc3339(d.start),
            work::pool_name(&a.pool, &a.region, &a.instance_type)
        );
        return (Fate::Later { reason }, None);
    }
    let mut fates: Vec<Fate> = Vec::new();
    let mut pool = None;
    for (i, w) in work.iter().enumerate().filter(|(_, w)| carries(w, a)) {
        fates.push(match reports.get(i) {
            Some(r) => Fate::of(&r.outcome),
            None => Fate::NotDone {
                reason: "the run stopped before it; re-run `gpucap apply`".into(),
            },
        });
        if let Work::Pool(p) = w {
            pool = Some(format!("in pool {}", p.name));
        }
    }
    let parts = fates.len();
    let via = pool.or_else(|| (parts > 1).then(|| format!("{parts} parts")));
    // The least done part decides (the first of them, in the work's order).
    match fates.into_iter().min_by_key(Fate::rank) {
        Some(fate) => (fate, via),
        None => {
            let reason = "this run found nothing to do for it (is its size zero?)".into();
            (Fate::NotDone { reason }, None)
        }
    }
}

/// Whether `w` carries out (some of) action `a`.
fn carries(w: &Work, a: &Action) -> bool {
    match w {
        Work::Block(p) | Work::Reserve(p) | Work::Commit(p) => p.action.id == a.id,
        Work::Pool(p) => p.actions.contains(&a.id),
        Work::Release { action, .. } | Work::ScaleToZero { action, .. } => *action == a.id,
        Work::Manual { action, .. } => {
            *action == a.id
                || (a.kind.is_run()
                    && *action == work::pool_label(&a.pool, &a.region, &a.instance_type))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fates_rank_from_least_done_to_most() {
        let all = [
            Fate::NotDone { reason: "r".into() },
            Fate::Manual { reason: "r".into() },
            Fate::Pending { detail: "d".into() },
            Fate::Later { reason: "r".into() },
            Fate::WouldDo { detail: "d".into() },
            Fate::Done { detail: "d".into() },
            Fate::DoneEarlier,
        ];
        let ranks: Vec<u8> = all.iter().map(Fate::rank).collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
        let labels: std::collections::BTreeSet<&str> = all.iter().map(Fate::label).collect();
        assert_eq!(labels.len(), all.len(), "one label each");
    }
}
