//! The checks before any call, Terraform's "saved plan is stale" rules and the budget gates'
//! sign-off: a plan is applied only as it was reviewed. Pure: the plan, what was found now,
//! and the time in; the reasons to refuse out.
//!
//! - the inputs the plan was made from (config, calendars, forecasts, policies, state files)
//!   still hash the same (the caller computes the differences with
//!   [`crate::plan::fingerprint`]);
//! - the apply state has not been written by another operation since (see
//!   [`crate::state::StateRef::check_plan`]);
//! - the quotes the due actions rely on are not older than their validity;
//! - the gates do not deny it, and an approval is on record where they ask for one.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::plan::due::DueAction;
use crate::timespec;

/// Quote sources that are a price seen at a time (and so can age), as opposed to list prices
/// from the built-in snapshot or an import, which capacity blocks re-quote anyway.
const AGING_SOURCES: &[&str] = &["live", "cache"];

/// The quotes the due actions rely on that are older than `max_age`, in words.
pub fn stale_quotes(
    plan: &Plan,
    due: &[DueAction<'_>],
    now: DateTime<Utc>,
    max_age: Duration,
) -> Vec<String> {
    let mut out = Vec::new();
    for d in due {
        let Some(q) = plan.quotes.iter().find(|q| q.offer == d.action.offer) else {
            continue;
        };
        if !AGING_SOURCES.contains(&q.source.as_str()) {
            continue;
        }
        let Ok(at) = timespec::parse_timestamp(&q.fetched_at) else {
            out.push(format!(
                "quote for `{}` has an unreadable time `{}`",
                q.offer, q.fetched_at
            ));
            continue;
        };
        let age = now - at;
        if age > max_age {
            out.push(format!(
                "the {} quote for `{}` (action {}) is {} h old, more than the {} h it is valid",
                q.source,
                q.offer,
                d.action.id,
                age.num_hours(),
                max_age.num_hours()
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A recorded sign-off for a plan that the gates say needs one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The plan's fingerprint digest it approves.
    pub plan: String,
    /// Who approved: the CI actor or user.
    pub by: String,
    pub reason: String,
    /// Where it came from: `--approve` or the approvals file's path.
    #[serde(default)]
    pub source: String,
}

/// The identity an `--approve` is recorded under: the CI actor, else the user.
pub fn approver() -> String {
    crate::state::lock::who()
}

/// Reads the approvals file next to a plan (`approvals.json`: a JSON list of approvals) and
/// returns the one for `digest`, if any. A file that is not valid is an error naming it.
pub fn approval_from_file(path: &Path, digest: &str) -> Result<Option<Approval>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    };
    let list: Vec<Approval> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}:{}:{}: not a list of approvals ({{\"plan\", \"by\", \"reason\"}}): {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    Ok(list.into_iter().find(|a| a.plan == digest).map(|mut a| {
        a.source = path.display().to_string();
        a
    }))
}

/// The irreversible spend among the due actions (USD).
pub fn irreversible_due(due: &[DueAction<'_>]) -> f64 {
    due.iter()
        .filter(|d| d.action.irreversible)
        .map(|d| d.action.cost)
        .sum::<f64>()
        + 0.0 // an empty sum is -0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approvals_file_is_read_for_the_plan_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.json");
        assert_eq!(approval_from_file(&path, "sha256:aa"), Ok(None));
        std::fs::write(
            &path,
            r#"[{"plan": "sha256:bb", "by": "carol", "reason": "Q1 training"},
               {"plan": "sha256:aa", "by": "alice", "reason": "approved in #123"}]"#,
        )
        .unwrap();
        let a = approval_from_file(&path, "sha256:aa").unwrap().unwrap();
        assert_eq!(
            (a.by.as_str(), a.reason.as_str()),
            ("alice", "approved in #123")
        );
        assert_eq!(approval_from_file(&path, "sha256:cc"), Ok(None));
        std::fs::write(&path, r#"{"plan": 1}"#).unwrap();
        let err = approval_from_file(&path, "sha256:aa").unwrap_err();
        assert!(err.contains("approvals.json:1:"), "{err}");
    }
}
