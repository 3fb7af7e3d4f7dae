//! The pools part of `examples/apply-offline` (`pools.toml`, `pools-campaigns.yaml`, the
//! second half of `run.sh`), run as written against the local Compute Engine peer
//! (`tests/peers/gce_peer.py`) and the local Azure Resource Manager peer
//! (`tests/peers/azure_arm_peer.py`). Every count is the peers', never gpucap's.
//!
//! - the example plans an on-demand run on GCP and a spot run on Azure from the day it
//!   applies;
//! - apply makes one managed instance group (3 instances running) and one Azure pool (its
//!   on-demand scale set at 0, its spot twin at 1 VM running), each once; the state lists both
//!   pools; a re-run resizes nothing;
//! - `gpucap release` after the campaigns scales both to zero.
//!
//! Run with `cargo test --features gcp --test apply_offline_pools` (the GCP pool needs the
//! Google SDK, not a default feature; without it this file is not built).

// Both peer helpers include the same process helper (`support/peer_process.rs`), each as
// its own private module.
#![allow(clippy::duplicate_mod)]

#[path = "support/azure_peer.rs"]
mod azure_peer;
#[path = "support/gce_peer.rs"]
mod gce_peer;

use std::path::PathBuf;
use std::process::{Command, Output};

use azure_peer::AzurePeer;
use gce_peer::GcePeer;
use serde_json::{Value, json};

/// The day `run.sh` applies on.
const NOW: &str = "2026-12-28T00:00:00Z";
/// After both campaigns (5 days from NOW).
const AFTER: &str = "2027-01-05T00:00:00Z";
const GCP_POOL: &str = "gpucap-h100-gcp-us-central1-a3-highgpu-1g";
const AZURE_POOL: &str = "gpucap-a100-azure-eastus-standard-nd96asr-v4";
const AZURE_SPOT: &str = "gpucap-a100-azure-eastus-standard-nd96asr-v4-spot";
const TOKEN: &str = "peer-token-offline-example";

struct Example {
    dir: tempfile::TempDir,
}

impl Example {
    /// The example's pool files, copied into a temporary directory.
    fn new() -> Example {
        let dir = tempfile::tempdir().unwrap();
        let example = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .join("examples/apply-offline");
        for f in ["pools.toml", "pools-campaigns.yaml"] {
            std::fs::copy(example.join(f), dir.path().join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", example.join(f).display()));
        }
        Example { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// gpucap with the environment `run.sh` sets for the pools part.
    fn gpucap(&self, gce: &GcePeer, arm: &AzurePeer, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpucap"));
        cmd.arg("-c").arg(self.path("pools.toml")).args(args);
        for k in [
            "GPUCAP_HALT_AFTER_JOURNAL",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GPUCAP_GCP_PROJECT",
            "GPUCAP_AZURE_RESOURCE_GROUP",
            "AZURE_TENANT_ID",
            "AZURE_CLIENT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_FEDERATED_TOKEN_FILE",
            "AZURE_AUTHORITY_HOST",
        ] {
            cmd.env_remove(k);
        }
        cmd.env("GPUCAP_GCP_ENDPOINT_URL", gce.url())
            .env("GPUCAP_GCP_POLL_MS", "20")
            .env("GPUCAP_AZURE_ENDPOINT_URL", arm.url())
            .env("GPUCAP_AZURE_POLL_MS", "20")
            .env("AZURE_SUBSCRIPTION_ID", azure_peer::SUBSCRIPTION)
            .env("AZURE_ACCESS_TOKEN", TOKEN)
            .env(
                "GPUCAP_AZURE_SSH_PUBLIC_KEY",
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPeerExampleKey gpucap-offline",
            )
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1");
        cmd.output().unwrap()
    }

    fn state(&self) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.path(".gpucap-pools/state.json")).unwrap(),
        )
        .unwrap()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(run: &Output) -> String {
    let out = text(&run.stdout);
    assert!(run.status.success(), "{out}\n{}", text(&run.stderr));
    out
}

fn gcp_group(gce: &GcePeer) -> Value {
    let groups = gce.groups();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0]["name"], GCP_POOL);
    groups[0].clone()
}

#[test]
fn the_example_sizes_a_gcp_pool_and_an_azure_spot_pool_then_releases_them() {
    let example = Example::new();
    let gce = GcePeer::start(&json!({}));
    let arm = AzurePeer::start(&json!({}));
    let plan_file = example.path("pools-plan.json");
    ok(&example.gpucap(
        &gce,
        &arm,
        &[
            "plan",
            "--now",
            NOW,
            "-q",
            "-o",
            plan_file.to_str().unwrap(),
        ],
    ));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    let runs: Vec<(String, String, String, u64)> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().unwrap().to_string(),
                a["cloud"].as_str().unwrap().to_string(),
                a["instance_type"].as_str().unwrap().to_string(),
                a["instances"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        vec![
            (
                "run_on_demand".into(),
                "gcp".into(),
                "a3-highgpu-1g".into(),
                3
            ),
            (
                "run_spot".into(),
                "azure".into(),
                "Standard_ND96asr_v4".into(),
                1
            ),
        ]
    );

    let apply = [
        "apply",
        plan_file.to_str().unwrap(),
        "--now",
        NOW,
        "--window",
        "30d",
        "--auto-approve",
    ];
    let out = ok(&example.gpucap(&gce, &arm, &apply));
    assert!(out.contains("Done (2)"), "{out}");
    assert!(
        out.contains(&format!(
            "sized {GCP_POOL} to 3 on-demand + 0 spot x a3-highgpu-1g; 3 running"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "sized {AZURE_POOL} to 0 on-demand + 1 spot x Standard_ND96asr_v4; 1 running"
        )),
        "{out}"
    );
    // GCP: one template and one group, each inserted once, every instance running.
    let g = gcp_group(&gce);
    assert_eq!(
        (g["targetSize"].as_u64(), g["_running"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(gce.counts("groups_created").get(GCP_POOL), Some(&1));
    assert_eq!(gce.calls("groups.insert"), 1);
    // Azure: the pool's on-demand scale set (empty) and its spot twin with one VM running,
    // each created once.
    assert_eq!(
        arm.scale_sets_created(),
        std::collections::BTreeMap::from([
            (AZURE_POOL.to_string(), 1),
            (AZURE_SPOT.to_string(), 1)
        ])
    );
    let spot = arm.scale_set(AZURE_SPOT).unwrap();
    assert_eq!(
        spot["properties"]["virtualMachineProfile"]["priority"],
        "Spot"
    );
    assert_eq!(spot["sku"]["capacity"], 1);
    assert_eq!(arm.scale_set(AZURE_POOL).unwrap()["sku"]["capacity"], 0);
    assert_eq!(arm.running(AZURE_SPOT), 1);
    let pools: Vec<(String, String, u64)> = example.state()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "pool")
        .map(|r| {
            (
                r["cloud"].as_str().unwrap().to_string(),
                r["id"].as_str().unwrap().to_string(),
                r["instances"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pools,
        vec![
            ("azure".into(), AZURE_POOL.into(), 1),
            ("gcp".into(), GCP_POOL.into(), 3)
        ]
    );
    for file in ["audit.jsonl", "journal.jsonl", "state.json"] {
        let body = std::fs::read_to_string(example.path(&format!(".gpucap-pools/{file}"))).unwrap();
        assert!(!body.contains(TOKEN), "{file} holds the bearer token");
    }

    // Again: both at their size; nothing made or resized.
    ok(&example.gpucap(&gce, &arm, &apply));
    assert_eq!(gce.calls("groups.insert"), 1);
    assert_eq!(gce.calls("groups.resize"), 1);
    assert_eq!(arm.calls("PUT scaleset"), 2);
    assert_eq!(arm.calls("PATCH scaleset"), 1);

    // After the campaigns, release scales both pools to zero.
    let out = ok(&example.gpucap(&gce, &arm, &["release", "--now", AFTER, "--auto-approve"]));
    assert!(out.contains("Released (2)"), "{out}");
    let g = gcp_group(&gce);
    assert_eq!(
        (g["targetSize"].as_u64(), g["_running"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(arm.scale_set(AZURE_SPOT).unwrap()["sku"]["capacity"], 0);
    assert_eq!(arm.running(AZURE_SPOT), 0);
    assert!(arm.vms().is_empty());
}

/// `run.sh` walks through the same files with the same settings as this test.
#[test]
fn run_sh_uses_the_pool_files_and_the_peers_this_test_uses() {
    let script = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/apply-offline/run.sh"),
    )
    .unwrap();
    for needle in [
        "pools.toml",
        "pools-campaigns.yaml",
        "tests/peers/gce_peer.py",
        "tests/peers/azure_arm_peer.py",
        "GPUCAP_AZURE_SSH_PUBLIC_KEY",
        "--features gcp",
        "--now \"$now\"",
        AFTER,
    ] {
        assert!(script.contains(needle), "run.sh does not mention {needle}");
    }
}
