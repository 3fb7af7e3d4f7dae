//! Capacity that already exists — reservations, capacity blocks and commitments bought earlier,
//! found in gpucap's own state, in Terraform state or listed in `gpucap.toml` — so that a plan
//! counts it at no extra cost instead of buying it twice. This is what makes the nightly loop a
//! rolling horizon: each night plans only what is not bought yet.

use chrono::{DateTime, Utc};
use gpucap_provider::capacity::ResourceKind;
use gpucap_provider::{Cloud, PurchaseKind};
use serde::{Deserialize, Serialize};

use crate::state::{ResourceStatus, State};

/// One piece of capacity the user already has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingCapacity {
    /// The cloud's id (reservation id, block id, commitment name) or the Terraform address.
    pub id: String,
    /// Where gpucap learnt of it: `config`, `terraform-state:<file>`, `state`.
    pub source: String,
    /// `reservation`, `capacity-block` or `commitment`.
    pub kind: PurchaseKind,
    pub cloud: Cloud,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub instances: u32,
    /// When it starts serving (`None`: already active).
    pub start: Option<DateTime<Utc>>,
    /// When it ends (`None`: open-ended, e.g. a reservation without an end date).
    pub end: Option<DateTime<Utc>>,
    /// The pool it was bought for, when known (gpucap's own state): counted for that pool
    /// first, otherwise for the first pool that may use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

impl ExistingCapacity {
    /// What gpucap's own state holds and still serves after `now`: capacity blocks,
    /// reservations and commitments that are pending or active (released and expired ones,
    /// pools and launch templates are not capacity a plan can count).
    pub fn owned(state: &State, now: DateTime<Utc>) -> Vec<ExistingCapacity> {
        state
            .resources
            .iter()
            .filter(|r| matches!(r.status, ResourceStatus::Pending | ResourceStatus::Active))
            .filter(|r| r.end.is_none_or(|end| end > now))
            .filter_map(|r| {
                let kind = match r.kind {
                    ResourceKind::CapacityBlock => PurchaseKind::CapacityBlock,
                    ResourceKind::Reservation => PurchaseKind::Reservation,
                    ResourceKind::Commitment => PurchaseKind::Commitment,
                    ResourceKind::LaunchTemplate | ResourceKind::Pool => return None,
                };
                Some(ExistingCapacity {
                    id: r.id.clone(),
                    source: "state".into(),
                    kind,
                    cloud: r.cloud,
                    region: r.region.clone(),
                    zone: r.zone.clone(),
                    instance_type: r.instance_type.clone(),
                    instances: r.instances,
                    start: r.start,
                    end: r.end,
                    pool: r.pool.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ManagedResource;

    fn resource(
        id: &str,
        kind: ResourceKind,
        status: ResourceStatus,
        end: &str,
    ) -> ManagedResource {
        let at = |s: &str| s.parse::<DateTime<Utc>>().expect("a timestamp");
        ManagedResource {
            id: id.into(),
            kind,
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: Some("us-east-1a".into()),
            instance_type: "p5.48xlarge".into(),
            instances: 4,
            start: Some(at("2027-01-01T11:30:00Z")),
            end: Some(at(end)),
            cost: 1.0,
            irreversible: kind == ResourceKind::CapacityBlock,
            plan: "sha256:x".into(),
            action: format!("action-{id}"),
            pool: Some("train".into()),
            created_at: at("2026-12-01T00:00:00Z"),
            status,
            idle_since: None,
        }
    }

    #[test]
    fn the_state_counts_what_still_serves_and_only_that() {
        let mut state = State::new();
        for r in [
            resource(
                "cr-live",
                ResourceKind::CapacityBlock,
                ResourceStatus::Active,
                "2027-01-08T11:30:00Z",
            ),
            resource(
                "cr-paid",
                ResourceKind::CapacityBlock,
                ResourceStatus::Pending,
                "2027-01-08T11:30:00Z",
            ),
            resource(
                "cr-odcr",
                ResourceKind::Reservation,
                ResourceStatus::Active,
                "2027-01-08T00:00:00Z",
            ),
            resource(
                "cr-gone",
                ResourceKind::Reservation,
                ResourceStatus::Released,
                "2027-01-08T00:00:00Z",
            ),
            resource(
                "cr-over",
                ResourceKind::CapacityBlock,
                ResourceStatus::Active,
                "2027-01-02T00:00:00Z",
            ),
            resource(
                "gpucap-train",
                ResourceKind::Pool,
                ResourceStatus::Active,
                "2027-01-08T00:00:00Z",
            ),
        ] {
            state.upsert(r);
        }
        let now = "2027-01-03T00:00:00Z".parse().expect("a timestamp");
        let owned = ExistingCapacity::owned(&state, now);
        let ids: Vec<&str> = owned.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["cr-live", "cr-paid", "cr-odcr"]);
        assert!(
            owned
                .iter()
                .all(|e| e.source == "state" && e.pool.as_deref() == Some("train"))
        );
        assert_eq!(owned[2].kind, PurchaseKind::Reservation);
        assert_eq!(owned[0].instances, 4);
    }
}
