//! `state.json`: what gpucap itself created and still answers for. `apply` records every
//! resource here as soon as the cloud confirms it, `release` and `status` read it, and a saved
//! plan carries the state's lineage and serial so that acting on it after someone else changed
//! the state is refused (Terraform's "saved plan is stale" rule).
//!
//! ```json
//! {"version": 1, "lineage": "<uuid v4>", "serial": 3, "resources": [ … ]}
//! ```
//!
//! `lineage` is made once, when the state is first created, and never changes: a state with
//! another lineage is another state. `serial` goes up by one on every write. Unknown fields are
//! errors (not ignored): a rewrite by an older gpucap would otherwise drop them silently.

use std::path::Path;

use chrono::{DateTime, Utc};
use gpucap_provider::Cloud;
use gpucap_provider::capacity::ResourceKind;
use serde::{Deserialize, Serialize};

use super::error::StateError;

/// The state format this gpucap reads and writes.
pub const STATE_VERSION: u64 = 1;

/// The whole state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub version: u64,
    /// A UUID v4, fixed when the state is created.
    pub lineage: String,
    /// Incremented by every write.
    pub serial: u64,
    #[serde(default)]
    pub resources: Vec<ManagedResource>,
    /// The plan whose apply last wrote this state, and the state it was made against. A saved
    /// plan may be applied again after a partial apply or a crash (its own writes moved the
    /// serial); any other plan made before those writes is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_plan: Option<AppliedPlan>,
}

/// Which plan is being carried out on this state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppliedPlan {
    /// The plan's fingerprint digest.
    pub plan: String,
    /// The state the plan was made against.
    pub made_against: StateRef,
}

/// One thing gpucap created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManagedResource {
    /// The cloud's id (`cr-…`, an ASG name, a GCP resource name, an Azure resource id).
    pub id: String,
    pub kind: ResourceKind,
    pub cloud: Cloud,
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub instance_type: String,
    pub instances: u32,
    /// When the capacity starts and ends (RFC 3339). Pools and launch templates have neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// What it costs over its whole window, USD (upfront fee for blocks).
    pub cost: f64,
    /// Cannot be cancelled or refunded (capacity blocks, commitments).
    pub irreversible: bool,
    /// The fingerprint digest (`sha256:…`) of the plan that created it.
    pub plan: String,
    /// The plan action id that created it.
    pub action: String,
    /// The plan's pool it was bought for (absent in states written before gpucap recorded it):
    /// a later plan counts it for that pool first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    pub created_at: DateTime<Utc>,
    pub status: ResourceStatus,
    /// Since when the cloud has reported it unused, as first seen by `gpucap release` (cleared
    /// when it is seen in use): idle detection needs two looks, `release.idle_after` apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<DateTime<Utc>>,
}

/// Where a managed resource is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceStatus {
    /// Bought or created, not serving yet (payment pending, scheduled for a later start).
    Pending,
    /// Serving.
    Active,
    /// gpucap released it (cancelled, deleted, scaled to zero).
    Released,
    /// Its window ended by itself.
    Expired,
}

/// The lineage and serial a saved plan was made against (`None` lineage: there was no state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRef {
    pub lineage: Option<String>,
    pub serial: u64,
}

/// Why a saved plan may not be applied to the current state (Terraform's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StalePlan {
    #[error(
        "saved plan does not match the given state: it was made for state lineage {planned}, this state has lineage {current}"
    )]
    OtherLineage { planned: String, current: String },
    #[error(
        "saved plan is stale: the state was changed by another operation after the plan was created (plan made at serial {planned}, state is now at serial {current}); run `gpucap plan` again"
    )]
    Changed { planned: u64, current: u64 },
}

impl State {
    /// A new, empty state with a fresh lineage, serial 0 (not written yet).
    pub fn new() -> State {
        State {
            version: STATE_VERSION,
            lineage: uuid::Uuid::new_v4().to_string(),
            serial: 0,
            resources: Vec::new(),
            applied_plan: None,
        }
    }

    /// Parses `state.json` text; `path` names it in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<State, StateError> {
        // Check the version first, so that a newer format is reported as such rather than as
        // an unknown field.
        let doc: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| StateError::corrupt(path, Some(e.line()), format!("not JSON: {e}")))?;
        let version = doc.get("version").and_then(serde_json::Value::as_u64);
        match version {
            Some(STATE_VERSION) => {}
            Some(found) => {
                return Err(StateError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found,
                    expected: STATE_VERSION,
                });
            }
            None => {
                return Err(StateError::corrupt(
                    path,
                    None,
                    "not a gpucap state file: no numeric `version`",
                ));
            }
        }
        let state: State = serde_path_to_error::deserialize(doc).map_err(|e| {
            StateError::corrupt(path, None, format!("`{}`: {}", e.path(), e.inner()))
        })?;
        if uuid::Uuid::parse_str(&state.lineage).is_err() {
            return Err(StateError::corrupt(
                path,
                None,
                format!("`lineage` is not a UUID: `{}`", state.lineage),
            ));
        }
        Ok(state)
    }

    /// The JSON text written to disk (pretty, ends with a newline).
    pub fn to_bytes(&self) -> Result<Vec<u8>, StateError> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|source| StateError::Encode {
            what: "state",
            source,
        })?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// What a plan made now should record.
    pub fn reference(&self) -> StateRef {
        StateRef {
            lineage: Some(self.lineage.clone()),
            serial: self.serial,
        }
    }

    /// The resources an action created (a pool action may create a template and a group).
    pub fn by_action<'a>(&'a self, action: &'a str) -> impl Iterator<Item = &'a ManagedResource> {
        self.resources.iter().filter(move |r| r.action == action)
    }

    /// The first resource an action created.
    pub fn find_by_action(&self, action: &str) -> Option<&ManagedResource> {
        self.resources.iter().find(|r| r.action == action)
    }

    /// The resource with this cloud id.
    pub fn get(&self, cloud: Cloud, id: &str) -> Option<&ManagedResource> {
        self.resources
            .iter()
            .find(|r| r.cloud == cloud && r.id == id)
    }

    /// Adds `resource`, or replaces the one with the same cloud and id (keeping its place).
    /// Returns the replaced one.
    pub fn upsert(&mut self, resource: ManagedResource) -> Option<ManagedResource> {
        match self
            .resources
            .iter_mut()
            .find(|r| r.cloud == resource.cloud && r.id == resource.id)
        {
            Some(slot) => Some(std::mem::replace(slot, resource)),
            None => {
                self.resources.push(resource);
                None
            }
        }
    }

    /// Removes the resource with this cloud id.
    pub fn remove(&mut self, cloud: Cloud, id: &str) -> Option<ManagedResource> {
        let i = self
            .resources
            .iter()
            .position(|r| r.cloud == cloud && r.id == id)?;
        Some(self.resources.remove(i))
    }
}

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

impl StateRef {
    /// The reference of "no state yet".
    pub const NONE: StateRef = StateRef {
        lineage: None,
        serial: 0,
    };

    /// Refuses the saved plan `plan` (its fingerprint digest), made against `self`, unless
    /// the state is as it was then, or every write since was an apply of this same plan (a
    /// re-run after a partial apply or a crash finishes the work).
    pub fn check_plan(&self, plan: &str, current: Option<&State>) -> Result<(), StalePlan> {
        if let Some(applied) = current.and_then(|s| s.applied_plan.as_ref())
            && applied.plan == plan
            && applied.made_against == *self
        {
            return Ok(());
        }
        self.check_current(&current.map_or(StateRef::NONE, State::reference))
    }

    /// Refuses a plan made against `self` when the state is now `current` and differs.
    pub fn check_current(&self, current: &StateRef) -> Result<(), StalePlan> {
        match (&self.lineage, &current.lineage) {
            (Some(planned), Some(now)) if planned != now => Err(StalePlan::OtherLineage {
                planned: planned.clone(),
                current: now.clone(),
            }),
            (Some(planned), None) => Err(StalePlan::OtherLineage {
                planned: planned.clone(),
                current: "(no state)".to_string(),
            }),
            _ if self.serial != current.serial || self.lineage != current.lineage => {
                Err(StalePlan::Changed {
                    planned: self.serial,
                    current: current.serial,
                })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn block(id: &str, action: &str) -> ManagedResource {
        ManagedResource {
            id: id.to_string(),
            kind: ResourceKind::CapacityBlock,
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: Some("us-east-1a".into()),
            instance_type: "p5.48xlarge".into(),
            instances: 2,
            start: Some("2027-02-01T11:30:00Z".parse().unwrap()),
            end: Some("2027-02-08T11:30:00Z".parse().unwrap()),
            cost: 31_456.5,
            irreversible: true,
            plan: "sha256:0123".into(),
            action: action.into(),
            created_at: "2027-01-20T10:00:00Z".parse().unwrap(),
            pool: None,
            status: ResourceStatus::Pending,
            idle_since: None,
        }
    }

    #[test]
    fn round_trips_and_helpers_find_upsert_remove() {
        let mut s = State::new();
        assert!(s.upsert(block("cr-1", "a1")).is_none());
        assert!(s.upsert(block("cr-2", "a2")).is_none());
        let mut changed = block("cr-1", "a1");
        changed.status = ResourceStatus::Active;
        assert_eq!(s.upsert(changed).unwrap().status, ResourceStatus::Pending);
        assert_eq!(s.resources.len(), 2);
        assert_eq!(s.resources[0].status, ResourceStatus::Active);
        assert_eq!(s.find_by_action("a2").unwrap().id, "cr-2");
        assert!(s.find_by_action("a3").is_none());
        let bytes = s.to_bytes().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("\"kind\": \"capacity_block\""), "{text}");
        assert!(
            text.contains("\"start\": \"2027-02-01T11:30:00Z\""),
            "{text}"
        );
        assert_eq!(State::parse(&bytes, Path::new("state.json")).unwrap(), s);
        assert_eq!(s.remove(Cloud::Aws, "cr-2").unwrap().action, "a2");
        assert!(s.remove(Cloud::Aws, "cr-2").is_none());
        assert!(s.get(Cloud::Gcp, "cr-1").is_none());
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        let p = Path::new("state.json");
        for (text, want) in [
            ("", "not JSON"),
            ("[1]", "no numeric `version`"),
            ("{\"version\": 2}", "version 2 is not supported"),
            (
                "{\"version\":1,\"lineage\":\"x\",\"serial\":0,\"resources\":[]}",
                "not a UUID",
            ),
            (
                "{\"version\":1,\"lineage\":\"7c0e7b44-5c0b-4a5e-9a55-3e8f1f0f6f11\",\"serial\":0,\"extra\":1}",
                "unknown field `extra`",
            ),
            (
                "{\"version\":1,\"lineage\":\"7c0e7b44-5c0b-4a5e-9a55-3e8f1f0f6f11\",\"serial\":-1}",
                "serial",
            ),
        ] {
            let err = State::parse(text.as_bytes(), p).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
            assert!(err.starts_with("state.json"), "{err}");
        }
    }

    #[test]
    fn stale_plans_are_refused_like_terraform() {
        let s = State::new();
        let at_plan = s.reference();
        assert!(at_plan.check_current(&s.reference()).is_ok());
        let mut later = s.reference();
        later.serial += 1;
        let err = at_plan.check_current(&later).unwrap_err().to_string();
        assert!(err.starts_with("saved plan is stale"), "{err}");
        let other = State::new().reference();
        let err = at_plan.check_current(&other).unwrap_err().to_string();
        assert!(err.starts_with("saved plan does not match"), "{err}");
        // Planned with no state, and someone created one since.
        assert!(StateRef::NONE.check_current(&StateRef::NONE).is_ok());
        assert!(StateRef::NONE.check_current(&at_plan).is_err());
    }
}
