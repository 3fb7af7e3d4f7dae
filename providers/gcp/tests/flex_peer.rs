//! Flex-start GCP pools (DWS resize requests, `regionInstanceGroupManagerResizeRequests`)
//! against the local Compute Engine peer (`tests/peers/gce_peer.py`), which runs each
//! request's lifecycle (CREATING, then ACCEPTED at its Operation's DONE, then SUCCEEDED or
//! FAILED when the test says Compute Engine found capacity or gave up; CANCELLED on `cancel`,
//! which it takes only while ACCEPTED) and keeps its own record: every count below is the
//! peer's.

mod common;

use std::time::Duration;

use common::gce_peer::GcePeer;
use common::runtime;
use gpucap_gcp::act::GcpCapacity;
use gpucap_provider::capacity::{ActErrorKind, FlexStart, Idempotency, PoolSize, PoolSpec, Pools};
use serde_json::{Value, json};

const REGION: &str = "us-central1";
const POOL: &str = "gpucap-h100-gcp-us-central1-a3-highgpu-1g";
const MACHINE: &str = "a3-highgpu-1g";
const DAY: u64 = 24 * 3600;

fn gcp(rt: &tokio::runtime::Runtime, peer: &GcePeer) -> GcpCapacity {
    common::client(rt, peer, Duration::from_secs(5))
}

fn spec(flex: bool) -> PoolSpec {
    PoolSpec {
        name: POOL.into(),
        region: REGION.into(),
        instance_types: vec![MACHINE.into()],
        image: "projects/deeplearning-platform-release/global/images/family/common-cu124".into(),
        subnets: vec!["regions/us-central1/subnetworks/train".into()],
        security_groups: vec!["gpu-train".into()],
        capacity_reservations: vec!["us-central1-a/gpucap-r1-0123456789ab".into()],
        max_size: 8,
        flex_start: flex.then_some(FlexStart { run_seconds: DAY }),
    }
}

fn id(token: &str) -> Idempotency {
    Idempotency {
        plan: "sha256:0123456789abcdef0123".into(),
        action: POOL.into(),
        intent: format!("intent-{token}"),
        client_token: Some(token.into()),
    }
}

const POOL_TOKEN: &str = "7c9e6679-7425-50de-944b-e07fc1f90ae7";
const FLEX_TOKEN: &str = "a1b2c3d4-e5f6-5789-9abc-def012345678";

fn flex() -> FlexStart {
    FlexStart { run_seconds: DAY }
}

fn size(on_demand: u32) -> PoolSize {
    PoolSize { on_demand, spot: 0 }
}

fn group(peer: &GcePeer) -> Value {
    peer.groups()
        .into_iter()
        .find(|g| g["name"] == POOL)
        .expect("the pool's group")
}

/// A flex-start pool made, as apply makes it.
fn made(rt: &tokio::runtime::Runtime, g: &GcpCapacity, flex: bool) {
    rt.block_on(g.ensure_pool(&spec(flex), &id(POOL_TOKEN), false))
        .unwrap();
}

#[test]
fn a_flex_start_pool_asks_once_and_is_pending_until_capacity_is_found() {
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    made(&rt, &g, true);
    // The template makes flex-start VMs that take no reservation; the group leaves failed
    // VMs to the request.
    let t = &peer.templates()[0];
    let s = &t["properties"]["scheduling"];
    assert_eq!(s["provisioningModel"], "FLEX_START", "{t}");
    assert_eq!(s["instanceTerminationAction"], "DELETE", "{t}");
    assert_eq!(s["automaticRestart"], false, "{t}");
    assert_eq!(s["onHostMaintenance"], "TERMINATE", "{t}");
    assert_eq!(
        t["properties"]["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    let grp = group(&peer);
    assert_eq!(
        grp["instanceLifecyclePolicy"]["defaultActionOnFailure"], "DO_NOTHING",
        "{grp}"
    );
    assert_eq!(grp["distributionPolicy"]["targetShape"], "ANY_SINGLE_ZONE");

    // Asked: one request of 3 for a day, queued (ACCEPTED): pending, not done.
    let done = rt
        .block_on(g.request_pool(REGION, POOL, size(3), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    assert_eq!(done.resource.state, "pending", "{done:?}");
    let requests = peer.resize_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    let name = r["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gpucap-flex-"), "{name}");
    assert_eq!(done.request_id.as_deref(), Some(name.as_str()));
    assert_eq!(r["state"], "ACCEPTED");
    assert_eq!(r["resizeBy"], 3);
    assert_eq!(r["requestedRunDuration"]["seconds"], "86400");
    let tags: Value = serde_json::from_str(r["description"].as_str().unwrap()).unwrap();
    assert_eq!(tags["managed-by"], "gpucap");
    assert_eq!(group(&peer)["targetSize"], 0, "queued: nothing runs yet");
    let record = peer.record();
    let insert = record["log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["op"] == "resizeRequests.insert")
        .unwrap();
    let rid = insert["requestId"].as_str().expect("a requestId");
    assert_ne!(rid, "00000000-0000-0000-0000-000000000000");
    assert!(peer.calls("regionOperations.wait") >= 1, "{record}");

    // Asked again (a re-run): the request is found by name, not sent again.
    let again = rt
        .block_on(g.request_pool(REGION, POOL, size(3), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    assert_eq!(again.resource.state, "pending");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);

    // Capacity found: every instance at once; the next look reports them running.
    peer.review_resize_request(&json!({ "region": REGION, "group": POOL, "state": "SUCCEEDED" }));
    let done = rt
        .block_on(g.request_pool(REGION, POOL, size(3), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    assert_eq!(done.resource.state, "active", "{done:?}");
    assert_eq!(done.resource.in_use, Some(3));
    assert_eq!(
        peer.counts("resize_request_inserts"),
        std::collections::BTreeMap::from([(name.clone(), 1)])
    );
    assert_eq!(group(&peer)["targetSize"], 3);
    assert_eq!(peer.calls("groups.resize"), 0, "grown by the request only");
}

#[test]
fn a_lost_answer_is_found_by_name_and_a_failed_request_is_not_asked_again() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    made(&rt, &g, true);
    peer.set_faults(&json!({ "rules": [
        { "fault": "drop_response", "op": "resizeRequests.insert", "calls": [1] }
    ] }));
    let lost = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap_err();
    assert_eq!(lost.kind, ActErrorKind::Unknown, "{lost}");
    // The executor repeats an unknown outcome: the repeat finds the request by name.
    let found = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    assert_eq!(found.resource.state, "pending");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);
    assert_eq!(peer.resize_requests().len(), 1);

    // Compute Engine gives up: an error of the kind it names, and no second request.
    peer.review_resize_request(&json!({ "region": REGION, "group": POOL, "state": "FAILED" }));
    let failed = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap_err();
    assert_eq!(failed.kind, ActErrorKind::Capacity, "{failed}");
    assert!(failed.message.contains("FAILED"), "{failed}");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);
    assert_eq!(peer.resize_requests().len(), 1);
}

#[test]
fn scaling_to_zero_cancels_only_the_queued_requests_gpucap_made() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    made(&rt, &g, true);
    rt.block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    // Someone else's queued request on the same group.
    peer.seed_resize_request(&json!({
        "region": REGION, "group": POOL, "name": "team-queue", "resizeBy": 1
    }));

    let dry = rt
        .block_on(g.scale_pool(REGION, POOL, size(0), true))
        .unwrap_err();
    assert_eq!(dry.kind, ActErrorKind::DryRunOk, "{dry}");
    assert_eq!(peer.calls("resizeRequests.cancel"), 0);

    rt.block_on(g.scale_pool(REGION, POOL, size(0), false))
        .unwrap();
    let requests = peer.resize_requests();
    let state = |n: &str| {
        requests
            .iter()
            .find(|r| r["name"].as_str().unwrap().starts_with(n))
            .map(|r| r["state"].clone())
            .unwrap()
    };
    assert_eq!(state("gpucap-flex-"), "CANCELLED", "{requests:?}");
    assert_eq!(state("team-queue"), "ACCEPTED", "{requests:?}");
    assert_eq!(peer.calls("resizeRequests.cancel"), 1);
    assert_eq!(group(&peer)["targetSize"], 0);

    // Nothing queued of gpucap's is left: a second release cancels nothing.
    rt.block_on(g.scale_pool(REGION, POOL, size(0), false))
        .unwrap();
    assert_eq!(peer.calls("resizeRequests.cancel"), 1);
}

#[test]
fn a_pool_made_without_flex_start_is_never_asked_and_a_dry_run_asks_nothing() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    made(&rt, &g, false);
    let e = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert!(e.message.contains("flex_start"), "{e}");
    assert!(peer.resize_requests().is_empty());

    let peer = GcePeer::start(&json!({}));
    let g = gcp(&rt, &peer);
    made(&rt, &g, true);
    let dry = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), true))
        .unwrap_err();
    assert_eq!(dry.kind, ActErrorKind::DryRunOk, "{dry}");
    assert!(dry.message.contains("would ask"), "{dry}");
    assert_eq!(peer.calls("resizeRequests.insert"), 0);
    // Out of Compute Engine's bounds (10 minutes to 7 days): refused before any call.
    let long = FlexStart {
        run_seconds: 8 * DAY,
    };
    let e = rt
        .block_on(g.request_pool(REGION, POOL, size(2), long, &id(FLEX_TOKEN), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert_eq!(peer.calls("resizeRequests.insert"), 0);
}

#[test]
fn a_new_plan_follows_an_earlier_queued_request_or_cancels_it_when_it_wants_fewer() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    made(&rt, &g, true);
    rt.block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(FLEX_TOKEN), false))
        .unwrap();
    // Another plan (another token) wanting as many: the queued request is followed, no
    // second one is made.
    let other = "0f1e2d3c-4b5a-5968-8776-a5b4c3d2e1f0";
    let followed = rt
        .block_on(g.request_pool(REGION, POOL, size(2), flex(), &id(other), false))
        .unwrap();
    assert_eq!(followed.resource.state, "pending");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);
    assert_eq!(peer.resize_requests().len(), 1);
    // A plan wanting fewer than is queued: gpucap's queued request is cancelled, nothing
    // is asked.
    rt.block_on(g.request_pool(REGION, POOL, size(0), flex(), &id(other), false))
        .unwrap();
    let requests = peer.resize_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["state"], "CANCELLED");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);
}
