//! What `gpucap release` does with each resource gpucap holds: the one place its rules live.
//! Pure: the caller looks the resources up in the cloud first and passes what it found.
//!
//! The rules, in order, for every pending or active resource in the state:
//!
//! - **Ended**: its window is over, or the cloud says it expired, was cancelled or no longer
//!   exists. Only the state changes.
//! - **Left alone**: the cloud's tags do not say gpucap manages it (`managed-by=gpucap` and the
//!   state's `gpucap:action`), the lookup failed, or `release` cannot act on its cloud. gpucap
//!   never modifies what it did not create.
//! - **Owed**: capacity blocks and commitments cannot be cancelled. They are reported with what
//!   they cost and the part of it that pays for time still ahead. The one exception is a GCP
//!   capacity block (a future reservation in calendar mode): Compute Engine lets it be
//!   cancelled while its start is at least
//!   [`GCP_CALENDAR_CANCEL_NOTICE_DAYS`](gpucap_provider::purchase_rules::GCP_CALENDAR_CANCEL_NOTICE_DAYS)
//!   days away and it is not locked, so one no campaign needs is cancelled then; after that it
//!   is owed like any block. Commitments never are.
//! - **Reservations** are cancelled only when no campaign in the calendar needs them for the rest
//!   of their window *and* the cloud has reported them unused (no instance running in them) for
//!   at least `release.idle_after`. Idle detection fails safe: a cloud that does not say how
//!   much is used, or one look only, never makes a reservation idle. The first look records
//!   `idle_since` in the state; a later run, `idle_after` on, cancels.
//! - **Pools** are scaled to zero when no campaign needs them now (the calendar is the
//!   authority for a pool: its instances are the campaign's own).

use chrono::{DateTime, Utc};
use gpucap_provider::Cloud;
use gpucap_provider::capacity::{CloudResource, ResourceKind, tag};
use serde::Serialize;

use super::need::Need;
use crate::state::{ManagedResource, ResourceStatus};
use crate::timespec::rfc3339;

/// A resource from the state and what the cloud says of it now.
#[derive(Debug, Clone)]
pub struct Observed {
    pub resource: ManagedResource,
    pub cloud: Lookup,
}

/// The outcome of looking a resource up.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(CloudResource),
    Missing,
    /// The lookup failed (after retries); nothing is decided on a guess.
    Failed(String),
    /// Not looked up: nothing in the cloud decides it (blocks, commitments, ended windows).
    NotAsked,
    /// The build cannot act on this cloud.
    NoProvider,
}

/// What to do with one resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Cancel the reservation.
    Cancel,
    /// Scale the pool to zero.
    ScaleToZero { from: u32 },
    /// Keep it (needed, in use, not idle long enough, or already at zero).
    Keep,
    /// It ended by itself; record it in the state, call nothing.
    Ended { status: ResourceStatus },
    /// Cannot be released: USD it cost and USD of it paying for time still ahead.
    Owed { cost: f64, ahead: f64 },
    /// Not touched: gpucap cannot tell it manages it, or cannot act on it.
    LeftAlone,
}

impl Decision {
    pub fn acts(&self) -> bool {
        matches!(self, Decision::Cancel | Decision::ScaleToZero { .. })
    }
}

/// One resource's decision, with why.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    pub id: String,
    pub kind: ResourceKind,
    pub cloud: Cloud,
    pub region: String,
    pub instance_type: String,
    pub instances: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The action that created it.
    pub action: String,
    #[serde(flatten)]
    pub decision: Decision,
    pub reason: String,
    /// What its idle record becomes (`idle_since`): set on the first unused look, cleared when
    /// seen in use.
    #[serde(skip)]
    pub idle_since: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub resource: ManagedResource,
}

/// The rules' inputs besides the resources.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub now: DateTime<Utc>,
    /// How long a reservation must have been unused before it is cancelled.
    pub idle_after: chrono::Duration,
}

/// Decides for every live resource in `observed` (see the module docs).
pub fn select(observed: &[Observed], need: &Need<'_>, rules: Rules) -> Vec<Item> {
    observed
        .iter()
        .filter(|o| {
            matches!(
                o.resource.status,
                ResourceStatus::Pending | ResourceStatus::Active
            ) && o.resource.kind != ResourceKind::LaunchTemplate
        })
        .map(|o| decide(o, need, rules))
        .collect()
}

/// Whether a resource goes on (and is paid for) after its planned end unless it is released:
/// Azure capacity reservations have no end date; gpucap deletes them.
pub fn lives_past_its_end(r: &ManagedResource) -> bool {
    r.kind == ResourceKind::Reservation && r.cloud == Cloud::Azure
}

fn decide(o: &Observed, need: &Need<'_>, rules: Rules) -> Item {
    let r = &o.resource;
    let now = rules.now;
    let item = |decision: Decision, reason: String| Item {
        id: r.id.clone(),
        kind: r.kind,
        cloud: r.cloud,
        region: r.region.clone(),
        instance_type: r.instance_type.clone(),
        instances: r.instances,
        pool: r.pool.clone(),
        action: r.action.clone(),
        decision,
        reason,
        idle_since: r.idle_since,
        resource: r.clone(),
    };
    let windowed = matches!(
        r.kind,
        ResourceKind::Reservation | ResourceKind::CapacityBlock | ResourceKind::Commitment
    );
    if windowed
        && !lives_past_its_end(r)
        && let Some(end) = r.end.filter(|end| *end <= now)
    {
        return item(
            Decision::Ended {
                status: ResourceStatus::Expired,
            },
            format!("its window ended at {}", rfc3339(end)),
        );
    }
    if r.kind == ResourceKind::CapacityBlock && r.cloud == Cloud::Gcp {
        return requested_block(o, need, rules, item);
    }
    if matches!(
        r.kind,
        ResourceKind::CapacityBlock | ResourceKind::Commitment
    ) || r.irreversible
    {
        let ahead = r.cost * share_ahead(r, now);
        return item(
            Decision::Owed {
                cost: r.cost,
                ahead,
            },
            format!(
                "{} cannot be cancelled: ${:.2} paid or committed, ${ahead:.2} of it for the time until {}",
                words(r.kind),
                r.cost,
                r.end.map_or("its end".to_string(), rfc3339)
            ),
        );
    }
    let found = match &o.cloud {
        Lookup::Found(c) => c,
        Lookup::Missing => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Expired,
                },
                "it no longer exists in the cloud".into(),
            );
        }
        Lookup::Failed(e) => {
            return item(Decision::LeftAlone, format!("could not look it up: {e}"));
        }
        Lookup::NoProvider => {
            return item(
                Decision::LeftAlone,
                format!(
                    "`gpucap release` cannot act on {} in this run; release it by hand or with the generated Terraform",
                    r.cloud
                ),
            );
        }
        Lookup::NotAsked => {
            return item(Decision::Keep, "nothing to release".into());
        }
    };
    if let Some(why) = not_ours(r, found) {
        return item(Decision::LeftAlone, why);
    }
    match found.state.as_str() {
        "expired" | "failed" => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Expired,
                },
                format!("the cloud says it is {}", found.state),
            );
        }
        "cancelled" => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Released,
                },
                "the cloud says it was cancelled".into(),
            );
        }
        _ => {}
    }
    match r.kind {
        ResourceKind::Pool => {
            let needed = match &r.pool {
                Some(pool) => need.pool_now(pool, now),
                None => need.of(r, now, Some(now + chrono::Duration::hours(1))),
            };
            if let Some(n) = needed {
                return item(Decision::Keep, format!("{n}"));
            }
            if found.instances == 0 {
                return item(Decision::Keep, "already at zero".into());
            }
            item(
                Decision::ScaleToZero {
                    from: found.instances,
                },
                format!(
                    "no campaign needs it now; {} instance(s) wanted",
                    found.instances
                ),
            )
        }
        ResourceKind::Reservation => reservation(r, found, need, rules, item),
        _ => item(Decision::Keep, "nothing to release".into()),
    }
}

/// A GCP future reservation in calendar mode: cancelled when no campaign needs its window and
/// Compute Engine still allows it (start at least the notice period away, not locked); owed
/// otherwise.
fn requested_block(
    o: &Observed,
    need: &Need<'_>,
    rules: Rules,
    item: impl Fn(Decision, String) -> Item,
) -> Item {
    let r = &o.resource;
    let now = rules.now;
    let notice =
        chrono::Duration::days(gpucap_provider::purchase_rules::GCP_CALENDAR_CANCEL_NOTICE_DAYS);
    let owed = |why: String| {
        let ahead = r.cost * share_ahead(r, now);
        item(
            Decision::Owed {
                cost: r.cost,
                ahead,
            },
            format!(
                "a GCP capacity block can no longer be cancelled ({why}): ${:.2} committed, ${ahead:.2} of it for the time until {}",
                r.cost,
                r.end.map_or("its end".to_string(), rfc3339)
            ),
        )
    };
    let Some(start) = r.start else {
        return owed("its start is not recorded".into());
    };
    let last_chance = start - notice;
    if now >= last_chance {
        return owed(format!(
            "Compute Engine allows it only while the start, {}, is at least {} days away, that is until {}",
            rfc3339(start),
            notice.num_days(),
            rfc3339(last_chance)
        ));
    }
    let found = match &o.cloud {
        Lookup::Found(c) => c,
        Lookup::Missing => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Released,
                },
                "it no longer exists in the cloud".into(),
            );
        }
        Lookup::Failed(e) => {
            return item(Decision::LeftAlone, format!("could not look it up: {e}"));
        }
        Lookup::NoProvider | Lookup::NotAsked => {
            return item(
                Decision::LeftAlone,
                format!(
                    "`gpucap release` cannot ask {} about it in this run; cancel it by hand before {} if no campaign needs it",
                    r.cloud,
                    rfc3339(last_chance)
                ),
            );
        }
    };
    if let Some(why) = not_ours(r, found) {
        return item(Decision::LeftAlone, why);
    }
    match found.state.as_str() {
        "cancelled" => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Released,
                },
                "the cloud says it was cancelled".into(),
            );
        }
        "failed" => {
            return item(
                Decision::Ended {
                    status: ResourceStatus::Expired,
                },
                "the cloud says it was declined or failed".into(),
            );
        }
        "locked" | "active" => {
            return owed(format!("the cloud says it is {}", found.state));
        }
        _ => {}
    }
    if let Some(n) = need.of(r, start.max(now), r.end) {
        return item(Decision::Keep, format!("{n}"));
    }
    item(
        Decision::Cancel,
        format!(
            "no campaign needs it from {} to {}; Compute Engine lets it be cancelled until {}",
            rfc3339(start),
            r.end.map_or("its end".to_string(), rfc3339),
            rfc3339(last_chance)
        ),
    )
}

fn reservation(
    r: &ManagedResource,
    found: &CloudResource,
    need: &Need<'_>,
    rules: Rules,
    item: impl Fn(Decision, String) -> Item,
) -> Item {
    let now = rules.now;
    let end = found.end.or(r.end);
    let from = r.start.map_or(now, |s| s.max(now));
    // Idle bookkeeping first: it runs whatever is decided.
    let idle_since = match found.in_use {
        Some(0) => Some(r.idle_since.unwrap_or(now)),
        _ => None,
    };
    let with_idle = |mut i: Item| {
        i.idle_since = idle_since;
        i
    };
    if let Some(n) = need.of(r, from, end) {
        return with_idle(item(Decision::Keep, format!("{n}")));
    }
    let Some(since) = idle_since else {
        let reason = match found.in_use {
            Some(n) => format!(
                "{n} of {} instance(s) run in it, though no campaign needs it",
                found.instances
            ),
            None => "the cloud does not say whether instances run in it; kept".into(),
        };
        return with_idle(item(Decision::Keep, reason));
    };
    let at = since + rules.idle_after;
    if now >= at {
        with_idle(item(
            Decision::Cancel,
            format!(
                "no campaign needs it until {} and it has been unused since {}",
                end.map_or("its end".to_string(), rfc3339),
                rfc3339(since)
            ),
        ))
    } else {
        with_idle(item(
            Decision::Keep,
            format!(
                "unused since {} and no campaign needs it: cancelled by a run from {} on if still unused",
                rfc3339(since),
                rfc3339(at)
            ),
        ))
    }
}

/// Why the cloud's copy is not provably gpucap's (the state's action must match its tags).
fn not_ours(r: &ManagedResource, c: &CloudResource) -> Option<String> {
    if !c.managed_by_gpucap() {
        return Some(format!(
            "its tags do not say {}={}; gpucap leaves alone what it did not create",
            tag::MANAGED_BY,
            tag::MANAGED_BY_VALUE
        ));
    }
    match c.tags.get(tag::ACTION) {
        Some(a) if *a != r.action => Some(format!(
            "its tag {}={a} does not match the state's action `{}`; left alone",
            tag::ACTION,
            r.action
        )),
        _ => None,
    }
}

/// The share of a resource's window still ahead at `now` (1 before it starts, 0 after it ends).
fn share_ahead(r: &ManagedResource, now: DateTime<Utc>) -> f64 {
    match (r.start, r.end) {
        (Some(start), Some(end)) if end > start => {
            let total = (end - start).num_seconds() as f64;
            let ahead = (end - now.max(start)).num_seconds() as f64;
            (ahead / total).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

fn words(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::CapacityBlock => "a capacity block",
        ResourceKind::Commitment => "a commitment",
        ResourceKind::Reservation => "a reservation attached to a commitment",
        _ => "it",
    }
}
