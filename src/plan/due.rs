//! Which of a plan's actions are due in a window: the one rule `gpucap generate` (writing the
//! module calls) and `gpucap apply` (calling the cloud APIs) both act on, so the two can never
//! disagree about what "due now" means. Pure: the caller passes the time.
//!
//! An action is *over* when its capacity has ended (`end <= now`), *later* when it is not due
//! before the window closes (`due > now + window`), and *due* otherwise. Releases are kept apart:
//! a renderer writes no code for them (a reservation's end is part of the reservation), while
//! `apply` carries them out.

use chrono::{DateTime, Duration, Utc};

use super::{Action, ActionKind, Plan};
use crate::diagnostic::{InputError, Location};
use crate::timespec;

/// The window to select in: actions due by `now + window` whose capacity is not over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub now: DateTime<Utc>,
    pub window: Duration,
}

impl Window {
    /// When the window closes: actions due after this are left for later runs.
    pub fn deadline(&self) -> DateTime<Utc> {
        self.now + self.window
    }
}

/// An action with its times parsed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DueAction<'a> {
    pub action: &'a Action,
    pub due: DateTime<Utc>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// A plan's actions sorted by the window, in plan order within each list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selected<'a> {
    /// Actions other than releases that are due in the window and not over.
    pub due: Vec<DueAction<'a>>,
    /// Releases due in the window whose release time has not passed (the same rules as
    /// [`Selected::due`]; a release's `start` and `end` are both its time).
    pub due_releases: Vec<DueAction<'a>>,
    /// Actions other than releases due after the window.
    pub later: usize,
    /// Actions other than releases whose capacity has ended.
    pub over: usize,
    /// Every release in the plan, whatever its time.
    pub releases: usize,
}

/// Sorts the plan's actions by `window`. The times of every action are checked, in plan order;
/// a malformed one is an error naming its field (`actions[3].due`).
pub fn select<'a>(plan: &'a Plan, window: &Window) -> Result<Selected<'a>, InputError> {
    let deadline = window.deadline();
    let mut selected = Selected::default();
    for (i, action) in plan.actions.iter().enumerate() {
        let at = |field: &str, text: &str| {
            timespec::parse_timestamp(text).map_err(|e| {
                InputError::new(
                    Location::default().field(format!("actions[{i}].{field}")),
                    e,
                )
            })
        };
        let parsed = DueAction {
            action,
            due: at("due", &action.due)?,
            start: at("start", &action.start)?,
            end: at("end", &action.end)?,
        };
        let is_due = parsed.end > window.now && parsed.due <= deadline;
        if action.kind == ActionKind::Release {
            selected.releases += 1;
            if is_due {
                selected.due_releases.push(parsed);
            }
        } else if parsed.end <= window.now {
            selected.over += 1;
        } else if parsed.due > deadline {
            selected.later += 1;
        } else {
            selected.due.push(parsed);
        }
    }
    Ok(selected)
}
