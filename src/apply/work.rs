//! What `apply` has to do now: the plan's due actions, less what the state says is already
//! done, turned into units of work the executor carries out one by one. Pure: the plan, the
//! state, the launch settings and the time in; a list of [`Work`] out.
//!
//! - A purchase larger than the cloud sells in one piece is bought as the pieces the plan lists
//!   (`Action::pieces`; for a plan without them, the cloud's purchase rule,
//!   `gpucap_provider::purchase_rules`, splits it the same way: 71 AWS block instances are
//!   64 + 7), each its own purchase with its own id (`<action>#<n>`), so a crash between two
//!   pieces leaves the state saying exactly which were bought.
//! - Runs are not bought: they are the size of a pool. Every pool the plan runs instances in
//!   gets one [`PoolWork`] with the size the plan runs *now* (on-demand and spot), so a pool
//!   whose runs are over is scaled to zero by the same rule.
//! - A release cancels the reservation its reserve action created, once its time has come.
//! - GCP capacity blocks are requested (future reservations in calendar mode, [`Work::Block`]
//!   like every block; the executor sends them by name), and GCP commitments are signed
//!   ([`Work::Commit`]); neither is ever released by apply.
//! - What apply cannot do (commitments on AWS and Azure, clouds without an act provider, pools
//!   without launch settings) is [`Work::Manual`], reported and counted as not done.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use gpucap_provider::capacity::ResourceKind;

use crate::config::LaunchSettings;
use crate::plan::due::DueAction;
use crate::plan::{Action, ActionKind, Plan};
use crate::state::{ManagedResource, ResourceStatus, State};
use crate::timespec;

/// The clouds apply can act on (for some kinds of action, see [`cannot_act`]).
pub const ACT_CLOUDS: &[&str] = &["aws", "azure", "gcp"];

/// Why `gpucap apply` cannot carry out an action of `kind` (a run: the pool it runs in) on
/// `cloud`, or `None` when it can. Commitments are signed by apply on GCP only ([`todo`] says
/// so for the other clouds).
pub fn cannot_act(cloud: &str, kind: ActionKind) -> Option<String> {
    match cloud {
        "aws" => None,
        "azure" => match kind {
            ActionKind::Reserve | ActionKind::Release | ActionKind::Commit => None,
            ActionKind::PurchaseCapacityBlock => Some(
                "Azure sells no capacity blocks; buy this capacity by hand or re-plan without Azure blocks".into(),
            ),
            ActionKind::RunOnDemand | ActionKind::RunSpot => None,
        },
        "gcp" => match kind {
            ActionKind::Reserve
            | ActionKind::Release
            | ActionKind::Commit
            | ActionKind::PurchaseCapacityBlock
            | ActionKind::RunOnDemand
            | ActionKind::RunSpot => None,
        },
        _ => Some(format!(
            "`gpucap apply` acts on AWS, Azure and GCP only so far; use `gpucap generate` for {cloud}"
        )),
    }
}

/// One unit of work.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// Buy a capacity block part.
    Block(Part),
    /// Create a capacity reservation.
    Reserve(Part),
    /// Sign a commitment (GCP `regionCommitments.insert`): irreversible, never released.
    Commit(Part),
    /// Cancel a reservation gpucap created, its planned end having come.
    Release {
        action: String,
        resource: ManagedResource,
    },
    /// Make a pool exist and set its size.
    Pool(PoolWork),
    /// Scale a pool gpucap made to zero (`gpucap release`).
    ScaleToZero {
        action: String,
        resource: ManagedResource,
    },
    /// Due, but apply cannot carry it out; a person must.
    Manual { action: String, reason: String },
}

impl Work {
    /// The plan action (or pool) this work is for, as progress lines name it.
    pub fn label(&self) -> &str {
        match self {
            Work::Block(p) | Work::Reserve(p) | Work::Commit(p) => &p.id,
            Work::Release { action, .. } | Work::Manual { action, .. } => action,
            Work::Pool(p) => &p.name,
            Work::ScaleToZero { resource, .. } => &resource.id,
        }
    }
}

/// One purchase: all of an action, or one part of a split one.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// `<action>` or `<action>#<n>`: the id in the journal, the tags and the state.
    pub id: String,
    pub action: Action,
    pub instances: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// This part's share of the action's planned cost, USD.
    pub planned_cost: f64,
}

/// A pool and the size the plan gives it now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolWork {
    /// Deterministic cloud-side name: `gpucap-<pool>-<region>-<instance type>`.
    pub name: String,
    pub pool: String,
    pub cloud: String,
    pub region: String,
    pub instance_type: String,
    pub on_demand: u32,
    pub spot: u32,
    /// The most the plan ever runs in it (the group's maximum unless configured).
    pub peak: u32,
    /// The run actions active now.
    pub actions: Vec<String>,
    pub launch: LaunchSettings,
}

/// Everything to do, and what was left.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Todo {
    pub work: Vec<Work>,
    /// Due purchases the state says are done already.
    pub already_done: Vec<String>,
}

/// Whether a state resource was made for `action` (whole or a part of it).
pub fn belongs_to(resource: &ManagedResource, action: &str) -> bool {
    resource.action == action
        || resource
            .action
            .strip_prefix(action)
            .is_some_and(|rest| rest.starts_with('#'))
}

fn live(r: &ManagedResource) -> bool {
    !matches!(r.status, ResourceStatus::Released)
}

/// The work for the due purchases and releases, and the pools at `now`.
pub fn todo(
    plan: &Plan,
    due: &[DueAction<'_>],
    state: &State,
    launch: &BTreeMap<String, LaunchSettings>,
    now: DateTime<Utc>,
) -> Todo {
    let mut out = Todo::default();
    // Commitments go after the reservations they are attached to (GCP).
    let mut commitments = Vec::new();
    for d in due {
        let a = d.action;
        let manual = |reason: String| Work::Manual {
            action: a.id.clone(),
            reason,
        };
        if !a.kind.is_run()
            && let Some(reason) = cannot_act(&a.cloud, a.kind)
        {
            out.work.push(manual(reason));
            continue;
        }
        match a.kind {
            ActionKind::PurchaseCapacityBlock | ActionKind::Reserve => {
                let kind = if a.kind == ActionKind::Reserve {
                    ResourceKind::Reservation
                } else {
                    ResourceKind::CapacityBlock
                };
                let sizes = a.piece_sizes();
                let parts = u32::try_from(sizes.len()).unwrap_or(u32::MAX);
                let mut any = false;
                for (n, instances) in (1..).zip(sizes) {
                    let id = crate::plan::piece_id(&a.id, n, parts);
                    let done = state
                        .resources
                        .iter()
                        .any(|r| r.action == id && r.kind == kind && live(r));
                    if done {
                        continue;
                    }
                    any = true;
                    let part = Part {
                        id,
                        action: a.clone(),
                        instances,
                        start: d.start,
                        end: d.end,
                        planned_cost: a.cost * f64::from(instances) / f64::from(a.instances.max(1)),
                    };
                    out.work.push(if kind == ResourceKind::Reservation {
                        Work::Reserve(part)
                    } else {
                        Work::Block(part)
                    });
                }
                if !any {
                    out.already_done.push(a.id.clone());
                }
            }
            ActionKind::Commit if a.cloud == "gcp" => {
                let done = state.resources.iter().any(|r| {
                    r.action == a.id && r.kind == ResourceKind::Commitment && live(r)
                });
                if done {
                    out.already_done.push(a.id.clone());
                } else {
                    commitments.push(Work::Commit(Part {
                        id: a.id.clone(),
                        action: a.clone(),
                        instances: a.instances,
                        start: d.start,
                        end: d.end,
                        planned_cost: a.cost,
                    }));
                }
            }
            ActionKind::Commit => out.work.push(manual(
                "commitments (savings plans, reserved-instance terms) are signed by a person or by the generated Terraform; `gpucap apply` signs them on GCP only".into(),
            )),
            ActionKind::RunOnDemand | ActionKind::RunSpot => {}
            ActionKind::Release => {}
        }
    }
    out.work.extend(commitments);
    out.work.extend(releases(plan, state, now));
    out.work.extend(pools(plan, state, launch, now));
    out
}

/// Reservations whose release time has come and that gpucap still holds.
fn releases(plan: &Plan, state: &State, now: DateTime<Utc>) -> Vec<Work> {
    let mut out = Vec::new();
    for release in plan
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Release)
    {
        let Ok(at) = timespec::parse_timestamp(&release.start) else {
            continue;
        };
        if at > now {
            continue;
        }
        // The reserve action it ends: same offer, ending when the release starts.
        let Some(reserve) = plan.actions.iter().find(|a| {
            a.kind == ActionKind::Reserve && a.offer == release.offer && a.end == release.start
        }) else {
            continue;
        };
        // An irreversible reservation is attached to a commitment (GCP): it lives as long as
        // the commitment, and is not gpucap's to cancel.
        for r in state.resources.iter().filter(|r| {
            r.kind == ResourceKind::Reservation
                && belongs_to(r, &reserve.id)
                && live(r)
                && !r.irreversible
        }) {
            if r.status == ResourceStatus::Expired {
                continue;
            }
            out.push(Work::Release {
                action: release.id.clone(),
                resource: r.clone(),
            });
        }
    }
    out
}

/// The deterministic cloud-side name of a pool.
pub fn pool_name(pool: &str, region: &str, instance_type: &str) -> String {
    let mut out = gpucap_provider::names::slug(&format!("gpucap-{pool}-{region}-{instance_type}"));
    // Auto Scaling group and launch template names allow 255 and 128 characters.
    out.truncate(128);
    out.trim_end_matches('-').to_string()
}

/// How the work for a pool apply cannot act on is labelled: `<pool name> (pool <pool>)`.
pub fn pool_label(pool: &str, region: &str, instance_type: &str) -> String {
    format!("{} (pool {pool})", pool_name(pool, region, instance_type))
}

/// One [`PoolWork`] per (pool, cloud, region, instance type) the plan runs instances in, or
/// that the state holds a pool for, sized for `now`.
fn pools(
    plan: &Plan,
    state: &State,
    launch: &BTreeMap<String, LaunchSettings>,
    now: DateTime<Utc>,
) -> Vec<Work> {
    #[derive(Default)]
    struct Acc {
        on_demand: u32,
        spot: u32,
        /// (time, change) for the peak: ends sort before starts at the same time.
        events: Vec<(DateTime<Utc>, i64)>,
        actions: Vec<String>,
    }
    let mut by_key: BTreeMap<(String, String, String, String), Acc> = BTreeMap::new();
    for a in plan.actions.iter().filter(|a| a.kind.is_run()) {
        let (Ok(start), Ok(end)) = (
            timespec::parse_timestamp(&a.start),
            timespec::parse_timestamp(&a.end),
        ) else {
            continue;
        };
        let key = (
            a.pool.clone(),
            a.cloud.clone(),
            a.region.clone(),
            a.instance_type.clone(),
        );
        let acc = by_key.entry(key).or_default();
        acc.events.push((start, i64::from(a.instances)));
        acc.events.push((end, -i64::from(a.instances)));
        if start <= now && now < end {
            match a.kind {
                ActionKind::RunSpot => acc.spot += a.instances,
                _ => acc.on_demand += a.instances,
            }
            acc.actions.push(a.id.clone());
        }
    }
    let mut out = Vec::new();
    for ((pool, cloud, region, instance_type), acc) in by_key {
        let name = pool_name(&pool, &region, &instance_type);
        let exists = state
            .resources
            .iter()
            .any(|r| r.kind == ResourceKind::Pool && r.id == name && live(r));
        if acc.on_demand + acc.spot == 0 && !exists {
            // Nothing runs now and there is nothing to scale down.
            continue;
        }
        let label = pool_label(&pool, &region, &instance_type);
        if let Some(reason) = cannot_act(&cloud, ActionKind::RunOnDemand) {
            out.push(Work::Manual {
                action: label,
                reason,
            });
            continue;
        }
        let Some(settings) = launch.get(&pool) else {
            out.push(Work::Manual {
                action: label,
                reason: format!(
                    "the plan runs {} on-demand and {} spot instance(s) now, but the config has no `[apply.pools.{pool}]` (image, subnets) to launch them with",
                    acc.on_demand, acc.spot
                ),
            });
            continue;
        };
        out.push(Work::Pool(PoolWork {
            name,
            pool,
            cloud,
            region,
            instance_type,
            on_demand: acc.on_demand,
            spot: acc.spot,
            peak: peak(acc.events),
            actions: acc.actions,
            launch: settings.clone(),
        }));
    }
    out
}

/// The most instances running at once, from (time, +n at start / -n at end) events.
fn peak(mut events: Vec<(DateTime<Utc>, i64)>) -> u32 {
    events.sort();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, change) in events {
        now += change;
        most = most.max(now);
    }
    u32::try_from(most).unwrap_or(u32::MAX)
}
