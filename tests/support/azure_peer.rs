//! Starts `tests/peers/azure_arm_peer.py`, the local Azure Resource Manager peer (capacity
//! reservation groups and reservations, flexible VM scale sets and their VMs, long-running
//! operations, Entra ID tokens, fault injection, a record of everything created), for tests
//! of the Azure act provider and of
//! `gpucap apply`/`release` on Azure.
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

const SCRIPT: &str = "tests/peers/azure_arm_peer.py";

/// The subscription and resource group the tests use.
pub const SUBSCRIPTION: &str = "00000000-0000-4000-8000-000000000001";
pub const RESOURCE_GROUP: &str = "gpucap-test";

/// A running peer, killed on drop.
pub struct AzurePeer {
    peer: PeerProcess,
}

impl AzurePeer {
    /// The peer under the system `python3`, its operations finishing after `lro_polls` polls.
    pub fn start(config: &Value) -> AzurePeer {
        let peer = AzurePeer {
            peer: PeerProcess::start(
                Path::new("python3"),
                SCRIPT,
                &[],
                "the Azure ARM peer",
                "the Azure act tests",
            ),
        };
        peer.post("/_peer/config", config);
        peer
    }

    /// The endpoint (`GPUCAP_AZURE_ENDPOINT_URL`).
    pub fn url(&self) -> String {
        self.peer.url()
    }

    /// Replaces the fault rules: `{"seed": N, "rules": [...]}` (see the script's header).
    pub fn set_faults(&self, faults: &Value) {
        self.post("/_peer/faults", faults);
    }

    /// Sets how many VMs are associated with each reservation, by name.
    pub fn set_usage(&self, usage: &Value) {
        self.post("/_peer/usage", usage);
    }

    /// Creates a Succeeded reservation as another client would; returns its ARM id.
    pub fn seed(&self, doc: &Value) -> String {
        let mut doc = doc.clone();
        doc["subscription"] = SUBSCRIPTION.into();
        doc["resource_group"] = RESOURCE_GROUP.into();
        let body = self.peer.post_json("/_peer/seed", &doc);
        let v: Value = serde_json::from_str(&body).unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    /// Creates a Succeeded flexible scale set with `capacity` running VMs, as another client
    /// would; returns its ARM id.
    pub fn seed_scale_set(&self, doc: &Value) -> String {
        let mut doc = doc.clone();
        doc["subscription"] = SUBSCRIPTION.into();
        doc["resource_group"] = RESOURCE_GROUP.into();
        let body = self.peer.post_json("/_peer/seed_scale_set", &doc);
        let v: Value = serde_json::from_str(&body).unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    /// The scale sets that exist now, as ARM shows them.
    pub fn scale_sets(&self) -> Vec<Value> {
        self.record()["scale_sets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The scale set named `name`, as ARM shows it.
    pub fn scale_set(&self, name: &str) -> Option<Value> {
        self.scale_sets().into_iter().find(|s| s["name"] == name)
    }

    /// The VMs that exist now, with their instance view.
    pub fn vms(&self) -> Vec<Value> {
        self.record()["vms"].as_array().cloned().unwrap_or_default()
    }

    /// How many VMs of scale set `name` run (Succeeded and `PowerState/running`).
    pub fn running(&self, name: &str) -> usize {
        self.vms()
            .iter()
            .filter(|v| {
                v["properties"]["virtualMachineScaleSet"]["id"]
                    .as_str()
                    .is_some_and(|id| id.ends_with(&format!("/virtualMachineScaleSets/{name}")))
                    && v["properties"]["provisioningState"] == "Succeeded"
            })
            .count()
    }

    /// How often a scale set came into existence, per name.
    pub fn scale_sets_created(&self) -> std::collections::BTreeMap<String, u64> {
        self.record()["scale_set_created"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Everything the peer saw and created.
    pub fn record(&self) -> Value {
        self.peer.get_json("/_peer/record")
    }

    /// How often the peer received `op` (`PUT reservation`, `GET operation`, …).
    pub fn calls(&self, op: &str) -> u64 {
        self.record()["calls"][op].as_u64().unwrap_or(0)
    }

    /// How often a reservation came into existence, per name.
    pub fn created(&self) -> std::collections::BTreeMap<String, u64> {
        self.record()["created"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The reservations that exist now, as ARM shows them.
    pub fn reservations(&self) -> Vec<Value> {
        self.record()["reservations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn post(&self, path: &str, doc: &Value) {
        self.peer.post_json(path, doc);
    }
}
