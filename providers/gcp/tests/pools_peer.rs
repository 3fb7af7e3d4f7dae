//! GCP pools (regional instance templates and managed instance groups) against the local
//! Compute Engine peer (`tests/peers/gce_peer.py`), which answers in the documented REST JSON
//! and keeps its own record: every count below is the peer's.

mod common;

use std::time::Duration;

use common::gce_peer::GcePeer;
use common::runtime;
use gpucap_gcp::act::GcpCapacity;
use gpucap_provider::capacity::{
    ActErrorKind, Describe, Idempotency, PoolSize, PoolSpec, Pools, ResourceKind, tag,
};
use serde_json::{Value, json};

const REGION: &str = "us-central1";
const POOL: &str = "gpucap-h100-gcp-us-central1-a3-highgpu-1g";
const MACHINE: &str = "a3-highgpu-1g";

fn gcp(rt: &tokio::runtime::Runtime, peer: &GcePeer) -> GcpCapacity {
    common::client(rt, peer, Duration::from_secs(5))
}

fn spec(reservations: &[&str]) -> PoolSpec {
    PoolSpec {
        name: POOL.into(),
        region: REGION.into(),
        instance_types: vec![MACHINE.into()],
        image: "projects/deeplearning-platform-release/global/images/family/common-cu124".into(),
        subnets: vec!["regions/us-central1/subnetworks/train".into()],
        security_groups: vec!["gpu-train".into()],
        capacity_reservations: reservations.iter().map(|r| r.to_string()).collect(),
        max_size: 8,
        flex_start: None,
    }
}

fn id() -> Idempotency {
    Idempotency {
        plan: "sha256:0123456789abcdef0123".into(),
        action: POOL.into(),
        intent: "intent-pool".into(),
        client_token: Some("7c9e6679-7425-50de-944b-e07fc1f90ae7".into()),
    }
}

fn size(on_demand: u32, spot: u32) -> PoolSize {
    PoolSize { on_demand, spot }
}

fn group<'a>(groups: &'a [Value], name: &str) -> &'a Value {
    groups
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {groups:?}"))
}

#[test]
fn a_pool_is_made_once_resized_and_its_running_instances_counted() {
    let peer = GcePeer::start(&json!({ "op_steps": 3, "instance_steps": 2 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let made = rt
        .block_on(g.ensure_pool(&spec(&["us-central1-a/gpucap-r1-abc"]), &id(), false))
        .unwrap();
    assert_eq!(made.resource.id, POOL);
    assert_eq!(made.resource.kind, ResourceKind::Pool);
    assert_eq!(made.resource.instances, 0);
    assert!(made.resource.managed_by_gpucap());
    // Each Operation was PENDING, then every wait returned one step further (early): looped.
    assert!(
        peer.calls("regionOperations.wait") >= 4,
        "{}",
        peer.record()
    );

    let t = &peer.templates()[0];
    assert_eq!(t["name"], POOL);
    let props = &t["properties"];
    assert_eq!(props["machineType"], MACHINE);
    assert_eq!(props["scheduling"]["provisioningModel"], "STANDARD");
    assert_eq!(props["scheduling"]["onHostMaintenance"], "TERMINATE");
    assert_eq!(
        props["reservationAffinity"]["consumeReservationType"],
        "SPECIFIC_RESERVATION"
    );
    assert_eq!(
        props["reservationAffinity"]["values"],
        json!(["gpucap-r1-abc"])
    );
    assert_eq!(
        props["disks"][0]["initializeParams"]["sourceImage"],
        spec(&[]).image
    );
    assert_eq!(
        props["networkInterfaces"][0]["subnetwork"],
        "regions/us-central1/subnetworks/train"
    );
    assert_eq!(props["tags"]["items"], json!(["gpu-train"]));
    let groups = peer.groups();
    let mig = group(&groups, POOL);
    assert_eq!(mig["targetSize"], 0);
    assert_eq!(mig["distributionPolicy"]["targetShape"], "ANY_SINGLE_ZONE");
    assert!(
        mig["distributionPolicy"]["zones"][0]["zone"]
            .as_str()
            .unwrap()
            .ends_with("/zones/us-central1-a"),
        "{mig}"
    );
    let tags: Value = serde_json::from_str(mig["description"].as_str().unwrap()).unwrap();
    assert_eq!(tags["managed-by"], "gpucap");
    assert_eq!(tags["gpucap:intent"], "intent-pool");

    // Every mutating call carried a requestId, never the zero UUID.
    let record = peer.record();
    for l in record["log"].as_array().unwrap() {
        if matches!(
            l["op"].as_str(),
            Some("templates.insert" | "groups.insert" | "groups.resize")
        ) {
            let rid = l["requestId"].as_str().expect("a requestId");
            assert_ne!(rid, "00000000-0000-0000-0000-000000000000");
        }
    }

    // Again: found by name, nothing inserted.
    let again = rt
        .block_on(g.ensure_pool(&spec(&[]), &id(), false))
        .unwrap();
    assert_eq!(again.resource.id, POOL);
    assert_eq!(peer.calls("templates.insert"), 1);
    assert_eq!(peer.calls("groups.insert"), 1);

    let scaled = rt
        .block_on(g.scale_pool(REGION, POOL, size(3, 0), false))
        .unwrap();
    assert_eq!(scaled.resource.instances, 3);
    assert_eq!(scaled.resource.in_use, Some(3), "all three run");
    assert!(peer.calls("groups.listManagedInstances") >= 1);
    let groups = peer.groups();
    assert_eq!(group(&groups, POOL)["targetSize"], 3);
    assert_eq!(group(&groups, POOL)["_running"], 3);
    assert_eq!(groups.len(), 1, "no spot group without spot");

    // The same size again: nothing sent.
    rt.block_on(g.scale_pool(REGION, POOL, size(3, 0), false))
        .unwrap();
    assert_eq!(peer.calls("groups.resize"), 1);

    // Found by its intent tag and described.
    let found = rt
        .block_on(g.find_by_tag(REGION, &[ResourceKind::Pool], tag::INTENT, "intent-pool"))
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, POOL);
    let described = rt
        .block_on(g.describe(REGION, ResourceKind::Pool, POOL))
        .unwrap()
        .unwrap();
    assert_eq!(described.instances, 3);
    assert_eq!(described.placement.instance_type, MACHINE);
}

#[test]
fn spot_runs_in_a_spot_group_made_from_the_pool_template() {
    let peer = GcePeer::start(&json!({ "instance_steps": 0 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    rt.block_on(g.ensure_pool(&spec(&[]), &id(), false))
        .unwrap();
    let done = rt
        .block_on(g.scale_pool(REGION, POOL, size(1, 2), false))
        .unwrap();
    assert_eq!(done.resource.instances, 3);
    assert_eq!(done.resource.in_use, Some(3));
    let spot = format!("{POOL}-spot");
    let templates = peer.templates();
    let t = templates
        .iter()
        .find(|t| t["name"] == spot.as_str())
        .unwrap();
    assert_eq!(t["properties"]["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(
        t["properties"]["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    let groups = peer.groups();
    assert_eq!(group(&groups, POOL)["targetSize"], 1);
    assert_eq!(group(&groups, &spot)["targetSize"], 2);
    let tags: Value =
        serde_json::from_str(group(&groups, &spot)["description"].as_str().unwrap()).unwrap();
    assert_eq!(
        tags["managed-by"], "gpucap",
        "the spot group is gpucap's too"
    );
    // One pool, found once by its intent.
    let found = rt
        .block_on(g.find_by_tag(REGION, &[ResourceKind::Pool], tag::INTENT, "intent-pool"))
        .unwrap();
    assert_eq!(found.len(), 1);

    // Spot over: the spot group goes to zero, nothing is made again.
    rt.block_on(g.scale_pool(REGION, POOL, size(1, 0), false))
        .unwrap();
    assert_eq!(group(&peer.groups(), &spot)["targetSize"], 0);
    assert_eq!(peer.counts("groups_created")[&spot], 1);
}

#[test]
fn a_stockout_is_capacity_with_the_running_count_not_success() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    rt.block_on(g.ensure_pool(&spec(&[]), &id(), false))
        .unwrap();
    peer.set_faults(&json!({ "rules": [{ "fault": "stockout", "group": POOL }] }));
    let e = rt
        .block_on(g.scale_pool(REGION, POOL, size(2, 0), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Capacity, "{e}");
    assert_eq!(
        e.code.as_deref(),
        Some("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{e}"
    );
    assert!(e.message.contains("0 of 2"), "{e}");
    // The resize itself happened (the group keeps trying); nothing runs.
    let groups = peer.groups();
    assert_eq!(group(&groups, POOL)["targetSize"], 2);
    assert_eq!(group(&groups, POOL)["_running"], 0);
}

#[test]
fn a_dropped_insert_and_throttling_are_settled_by_name_without_a_second_create() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    peer.set_faults(&json!({ "seed": 5, "rules": [
        { "fault": "throttle", "op": "templates.insert", "calls": [1] },
        { "fault": "drop_response", "op": "groups.insert", "calls": [1] },
        { "fault": "throttle", "status": 429, "op": "groups.get", "calls": [3] },
        { "fault": "status", "status": 503, "op": "regionOperations.wait", "calls": [1] }
    ] }));
    // The executor repeats what is throttled or unknown; each attempt reads the names first.
    let mut kinds = Vec::new();
    let done = loop {
        match rt.block_on(g.ensure_pool(&spec(&[]), &id(), false)) {
            Ok(d) => break d,
            Err(e) => {
                assert!(
                    matches!(
                        e.kind,
                        ActErrorKind::Throttled | ActErrorKind::Unknown | ActErrorKind::Quota
                    ),
                    "{e}"
                );
                kinds.push(e.kind);
                assert!(kinds.len() < 6, "{kinds:?}");
            }
        }
    };
    assert_eq!(done.resource.id, POOL);
    assert!(kinds.contains(&ActErrorKind::Throttled), "{kinds:?}");
    assert!(kinds.contains(&ActErrorKind::Unknown), "{kinds:?}");
    assert_eq!(peer.counts("templates_created")[POOL], 1);
    assert_eq!(peer.counts("groups_created")[POOL], 1);
    assert_eq!(
        peer.counts("group_inserts")[POOL],
        1,
        "never inserted twice"
    );
    assert_eq!(
        peer.calls("groups.insert"),
        1,
        "the lost insert was found by name"
    );
    assert_eq!(
        peer.calls("templates.insert"),
        2,
        "the throttled one did nothing"
    );
    assert_eq!(peer.record()["fault_counts"]["drop_response"], 1);
}

#[test]
fn a_group_gpucap_did_not_make_is_never_resized() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    peer.seed_group(REGION, POOL, MACHINE, 1, Some("the infra team's"));
    let e = rt
        .block_on(g.ensure_pool(&spec(&[]), &id(), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other);
    assert!(e.message.contains("does not say gpucap made it"), "{e}");
    let e = rt
        .block_on(g.scale_pool(REGION, POOL, size(4, 0), false))
        .unwrap_err();
    assert!(e.message.contains("does not say gpucap made it"), "{e}");
    assert_eq!(peer.calls("groups.resize"), 0);
    assert_eq!(
        peer.calls("templates.insert") + peer.calls("groups.insert"),
        0
    );
    assert_eq!(group(&peer.groups(), POOL)["targetSize"], 1);
}

#[test]
fn a_dry_run_reads_only() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let e = rt
        .block_on(g.ensure_pool(&spec(&[]), &id(), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk, "{e}");
    assert_eq!(peer.calls("groups.get"), 1);
    let e = rt
        .block_on(g.scale_pool(REGION, POOL, size(2, 1), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk, "{e}");
    assert!(peer.templates().is_empty() && peer.groups().is_empty());
    assert_eq!(peer.calls("groups.resize"), 0);
}
