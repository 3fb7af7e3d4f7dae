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

#[cfg(test)]
mod tests {
    use super::*;

    fn action(id: &str, kind: ActionKind, due: &str, start: &str, end: &str) -> Action {
        Action {
            id: id.into(),
            kind,
            pool: "h100".into(),
            cloud: "aws".into(),
            region: "us-east-1".into(),
            zone: None,
            instance_type: "p5.48xlarge".into(),
            instances: 1,
            gpus: 8,
            start: start.into(),
            end: end.into(),
            start_hour: 0,
            end_hour: 0,
            due: due.into(),
            bookable_from: None,
            cost: 0.0,
            irreversible: false,
            offer: "o".into(),
            offering_id: None,
            campaigns: Vec::new(),
            pieces: Vec::new(),
        }
    }

    fn plan(actions: Vec<Action>) -> Plan {
        let mut plan = super::super::tests::empty_plan();
        plan.actions = actions;
        plan
    }

    fn window() -> Window {
        Window {
            now: "2027-01-10T00:00:00Z".parse().expect("a time"),
            window: Duration::days(7),
        }
    }

    #[test]
    fn actions_are_over_later_or_due_and_releases_are_apart() {
        let plan = plan(vec![
            // Ended before now: over.
            action(
                "old",
                ActionKind::RunOnDemand,
                "2027-01-01T00:00:00Z",
                "2027-01-01T00:00:00Z",
                "2027-01-05T00:00:00Z",
            ),
            // Due after the deadline: later.
            action(
                "next-month",
                ActionKind::Reserve,
                "2027-01-20T00:00:00Z",
                "2027-01-21T00:00:00Z",
                "2027-01-30T00:00:00Z",
            ),
            // Due exactly at the deadline, running now: due.
            action(
                "edge",
                ActionKind::PurchaseCapacityBlock,
                "2027-01-17T00:00:00Z",
                "2027-01-18T00:00:00Z",
                "2027-01-20T00:00:00Z",
            ),
            // Overdue but not over: due.
            action(
                "running",
                ActionKind::RunSpot,
                "2027-01-02T00:00:00Z",
                "2027-01-02T00:00:00Z",
                "2027-01-12T00:00:00Z",
            ),
            // Releases: one in the window, one past, one later.
            action(
                "release-soon",
                ActionKind::Release,
                "2027-01-11T00:00:00Z",
                "2027-01-11T00:00:00Z",
                "2027-01-11T00:00:00Z",
            ),
            action(
                "release-past",
                ActionKind::Release,
                "2027-01-09T00:00:00Z",
                "2027-01-09T00:00:00Z",
                "2027-01-09T00:00:00Z",
            ),
            action(
                "release-later",
                ActionKind::Release,
                "2027-01-25T00:00:00Z",
                "2027-01-25T00:00:00Z",
                "2027-01-25T00:00:00Z",
            ),
        ]);
        let s = select(&plan, &window()).expect("valid times");
        let ids = |v: &[DueAction]| v.iter().map(|d| d.action.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&s.due), ["edge", "running"]);
        assert_eq!(ids(&s.due_releases), ["release-soon"]);
        assert_eq!((s.later, s.over, s.releases), (1, 1, 3));
        assert_eq!(
            s.due[0].start,
            "2027-01-18T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }

    #[test]
    fn a_bad_time_names_the_action_and_field() {
        let mut bad = action(
            "x",
            ActionKind::Reserve,
            "2027-01-11T00:00:00Z",
            "2027-01-12T00:00:00Z",
            "2027-01-13T00:00:00Z",
        );
        bad.end = "soon".into();
        let ok = action(
            "ok",
            ActionKind::Reserve,
            "2027-01-11T00:00:00Z",
            "2027-01-12T00:00:00Z",
            "2027-01-13T00:00:00Z",
        );
        let err = select(&plan(vec![ok, bad]), &window()).unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("actions[1].end"),
            "{err}"
        );
    }
}
