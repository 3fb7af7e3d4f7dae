//! Starts `tests/peers/gce_peer.py`, the local Compute Engine peer (zonal reservations, zone
//! Operations, regional instance templates and managed instance groups, region Operations,
//! calendar-mode future reservations, region commitments, DWS resize requests,
//! requestId dedupe, fault injection, a record of everything created), for tests of the GCP
//! act provider and of `gpucap apply`/`release` on GCP.
//!
//! Nothing is skipped: when `python3` is missing, starting the peer panics and says so.
//!
//! Include with `#[path]`.

#![allow(dead_code)]

#[path = "peer_process.rs"]
mod peer_process;

use std::path::Path;

use peer_process::PeerProcess;
use serde_json::Value;

const SCRIPT: &str = "tests/peers/gce_peer.py";

/// The project the tests use.
pub const PROJECT: &str = "gpucap-test";

/// A running peer, killed on drop.
pub struct GcePeer {
    peer: PeerProcess,
}

impl GcePeer {
    /// The peer under the system `python3`, its Operations finishing after `op_steps` looks.
    pub fn start(config: &Value) -> GcePeer {
        let peer = GcePeer {
            peer: PeerProcess::start(
                Path::new("python3"),
                SCRIPT,
                &[],
                "the Compute Engine peer",
                "the GCP act tests",
            ),
        };
        peer.post("/_peer/config", config);
        peer
    }

    /// The endpoint (`GPUCAP_GCP_ENDPOINT_URL`).
    pub fn url(&self) -> String {
        self.peer.url()
    }

    /// Replaces the fault rules: `{"seed": N, "rules": [...]}` (see the script's header).
    pub fn set_faults(&self, faults: &Value) {
        self.post("/_peer/faults", faults);
    }

    /// Sets how many instances use each reservation, by name.
    pub fn set_usage(&self, usage: &Value) {
        self.post("/_peer/usage", usage);
    }

    /// Makes a READY reservation as another client would; returns gpucap's id (`zone/name`).
    pub fn seed(&self, doc: &Value) -> String {
        let mut doc = doc.clone();
        doc["project"] = PROJECT.into();
        self.peer.post_json("/_peer/seed", &doc);
        format!(
            "{}/{}",
            doc["zone"].as_str().unwrap(),
            doc["name"].as_str().unwrap()
        )
    }

    /// Makes an instance template and a managed instance group named `name` in `region` as
    /// another client would (`description` as given, `size` instances running).
    pub fn seed_group(
        &self,
        region: &str,
        name: &str,
        machine: &str,
        size: u32,
        description: Option<&str>,
    ) {
        let mut doc = serde_json::json!({
            "kind": "group", "project": PROJECT, "region": region, "name": name,
            "machine_type": machine, "size": size,
        });
        if let Some(d) = description {
            doc["description"] = d.into();
        }
        self.peer.post_json("/_peer/seed", &doc);
    }

    /// The instance templates that exist now, as `regionInstanceTemplates.get` shows them.
    pub fn templates(&self) -> Vec<Value> {
        self.record()["instance_templates"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The managed instance groups that exist now, as `regionInstanceGroupManagers.get` shows
    /// them, each with `_running`: its instances RUNNING with `currentAction` NONE.
    pub fn groups(&self) -> Vec<Value> {
        self.record()["instance_group_managers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Everything the peer saw and created.
    pub fn record(&self) -> Value {
        self.peer.get_json("/_peer/record")
    }

    /// How often the peer received `op` (`insert`, `operations.wait`, …).
    pub fn calls(&self, op: &str) -> u64 {
        self.record()["calls"][op].as_u64().unwrap_or(0)
    }

    /// How often a reservation came into existence, per name.
    pub fn created(&self) -> std::collections::BTreeMap<String, u64> {
        self.counts("created")
    }

    /// How many insert calls made a new Operation, per name (a deduped repeat does not).
    pub fn inserts(&self) -> std::collections::BTreeMap<String, u64> {
        self.counts("inserts")
    }

    /// A per-name count of the record (`created`, `inserts`, `deleted`, `resizes`,
    /// `template_inserts`, `group_inserts`, `templates_created`, `groups_created`,
    /// `group_resizes`, `resize_request_inserts`, `resize_requests_created`,
    /// `resize_request_cancels`).
    pub fn counts(&self, what: &str) -> std::collections::BTreeMap<String, u64> {
        self.record()[what]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The reservations that exist now, as `reservations.get` shows them.
    pub fn reservations(&self) -> Vec<Value> {
        self.record()["reservations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Future reservations as `futureReservations.get` shows them.
    pub fn future_reservations(&self) -> Vec<Value> {
        self.record()["future_reservations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Commitments as `regionCommitments.get` shows them.
    pub fn commitments(&self) -> Vec<Value> {
        self.record()["commitments"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Moves a future reservation on as Google's review would:
    /// `{"zone", "name", "procurementStatus"?, "lockTime"?}`.
    pub fn review_future(&self, doc: &Value) {
        self.post("/_peer/future", doc);
    }

    /// Resize requests (DWS flex-start) as `regionInstanceGroupManagerResizeRequests.get`
    /// shows them.
    pub fn resize_requests(&self) -> Vec<Value> {
        self.record()["resize_requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Moves a queued resize request on as Compute Engine would: `{"region", "group",
    /// "name"?, "state": "SUCCEEDED" | "FAILED" | …, "code"?}` (every request on the group
    /// when `name` is absent).
    pub fn review_resize_request(&self, doc: &Value) {
        let mut doc = doc.clone();
        doc["project"] = PROJECT.into();
        self.post("/_peer/resize_request", &doc);
    }

    /// Makes a queued resize request on a group as another client would: `{"region",
    /// "group", "name", "resizeBy"?, "state"?, "description"?}`.
    pub fn seed_resize_request(&self, doc: &Value) {
        let mut doc = doc.clone();
        doc["project"] = PROJECT.into();
        doc["kind"] = "resize_request".into();
        self.peer.post_json("/_peer/seed", &doc);
    }

    /// Sets the peer's configuration (`{"now": RFC 3339}` sets its clock).
    pub fn configure(&self, doc: &Value) {
        self.post("/_peer/config", doc);
    }

    fn post(&self, path: &str, doc: &Value) {
        self.peer.post_json(path, doc);
    }
}
