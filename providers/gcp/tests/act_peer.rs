//! The GCP act provider against the local Compute Engine peer (`tests/peers/gce_peer.py`),
//! which answers in the documented REST JSON and keeps its own record: every count below is
//! the peer's.

mod common;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use common::gce_peer::GcePeer;
use common::runtime;
use gpucap_gcp::act::{GcpCapacity, names};
use gpucap_provider::capacity::{
    ActErrorKind, CapacityBlocks, Describe, Idempotency, Placement, PoolSize, Pools,
    ReservationRequest, Reservations, ResourceKind, tag,
};
use serde_json::json;

const ZONE: &str = "us-central1-a";
const MACHINE: &str = "a3-highgpu-8g";

fn gcp(rt: &tokio::runtime::Runtime, peer: &GcePeer) -> GcpCapacity {
    common::client(rt, peer, Duration::from_secs(20))
}

fn request(instances: u32) -> ReservationRequest {
    ReservationRequest {
        placement: Placement {
            region: "us-central1".into(),
            zone: Some(ZONE.into()),
            instance_type: MACHINE.into(),
        },
        instances,
        start: Utc.with_ymd_and_hms(2027, 1, 11, 12, 0, 0).unwrap(),
        end: Utc.with_ymd_and_hms(2027, 1, 18, 12, 0, 0).unwrap(),
    }
}

fn id(action: &str) -> Idempotency {
    Idempotency {
        plan: "sha256:0123456789abcdef0123".into(),
        action: action.into(),
        intent: format!("intent-{action}"),
        client_token: Some(format!("{:0>8}-d9cb-569f-a165-70867728950e", action.len())),
    }
}

fn name_of(action: &str) -> String {
    names::reservation_name(action, id(action).client_token.as_deref().unwrap())
}

#[test]
fn an_insert_is_followed_to_done_through_early_waits_and_not_made_twice() {
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("reserve-a");
    let done = rt
        .block_on(g.create_reservation(&request(4), &ident, false))
        .unwrap();
    let r = &done.resource;
    let name = name_of("reserve-a");
    assert_eq!(r.id, format!("{ZONE}/{name}"));
    assert_eq!(r.state, "active");
    assert_eq!(r.instances, 4);
    assert_eq!(r.in_use, Some(0));
    assert_eq!(r.placement.zone.as_deref(), Some(ZONE));
    assert_eq!(r.placement.region, "us-central1");
    assert_eq!(r.placement.instance_type, MACHINE);
    assert!(r.managed_by_gpucap());
    assert_eq!(r.tags[tag::ACTION], "reserve-a");
    assert_eq!(r.tags[tag::INTENT], "intent-reserve-a");
    assert_eq!(
        r.end,
        Some(request(4).end),
        "deleteAtTime is the planned end"
    );
    assert!(done.request_id.is_some(), "the Operation's name is kept");
    // The insert's Operation was PENDING, then each wait returned one step further (RUNNING
    // before DONE): the wait was looped.
    assert!(peer.calls("operations.wait") >= 2, "{}", peer.record());
    let log = peer.record()["log"].clone();
    let insert = log
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["op"] == "insert")
        .unwrap()
        .clone();
    let rid = insert["requestId"].as_str().unwrap();
    let parsed = uuid_parse(rid);
    assert_ne!(parsed, 0, "never the zero UUID");

    // Again: found by its name, nothing sent.
    let again = rt
        .block_on(g.create_reservation(&request(4), &ident, false))
        .unwrap();
    assert_eq!(again.resource.id, r.id);
    assert_eq!(peer.inserts()[&name], 1);
    assert_eq!(peer.created()[&name], 1);
    assert_eq!(peer.calls("insert"), 1);

    // Found by its intent tag across the region's zones, and described.
    let found = rt
        .block_on(g.find_by_tag(
            "us-central1",
            &[ResourceKind::Reservation],
            tag::INTENT,
            "intent-reserve-a",
        ))
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, r.id);
    assert!(
        rt.block_on(g.find_by_tag("europe-west4", &[], tag::INTENT, "intent-reserve-a"))
            .unwrap()
            .is_empty()
    );
    peer.set_usage(&json!({ name.clone(): 3 }));
    let now = rt
        .block_on(g.describe("us-central1", ResourceKind::Reservation, &r.id))
        .unwrap()
        .unwrap();
    assert_eq!((now.instances, now.in_use), (4, Some(3)));
}

fn uuid_parse(s: &str) -> u128 {
    u128::from_str_radix(&s.replace('-', ""), 16).unwrap()
}

#[test]
fn an_exhausted_zone_is_capacity_and_nothing_is_left() {
    let peer = GcePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [{ "fault": "pool_exhausted", "zone": ZONE }] }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-b"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Capacity, "{e}");
    assert_eq!(e.code.as_deref(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert!(e.message.contains("does not have enough resources"), "{e}");
    assert!(peer.reservations().is_empty());

    peer.set_faults(&json!({ "rules": [{ "fault": "pool_exhausted", "code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" }] }));
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-b"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Capacity, "{e}");

    // The same requestId answers with the failed Operation (as Compute Engine does): the
    // provider asks again under a chained id, so the new outcome shows.
    peer.set_faults(&json!({ "rules": [{ "fault": "quota" }] }));
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-b"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Quota, "{e}");

    peer.set_faults(&json!({ "rules": [{ "fault": "op_rate" }] }));
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-b"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Throttled, "{e}");
}

#[test]
fn rate_limits_are_throttling_and_server_errors_on_an_insert_are_unknown() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    peer.set_faults(&json!({ "rules": [{ "fault": "throttle", "op": "insert", "times": 1 }] }));
    let e = rt
        .block_on(g.create_reservation(&request(1), &id("reserve-c"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Throttled, "{e}");
    assert_eq!(e.code.as_deref(), Some("rateLimitExceeded"));

    peer.set_faults(
        &json!({ "rules": [{ "fault": "throttle", "status": 429, "op": "insert", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.create_reservation(&request(1), &id("reserve-c"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Throttled, "{e}");

    peer.set_faults(
        &json!({ "rules": [{ "fault": "status", "status": 503, "op": "insert", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.create_reservation(&request(1), &id("reserve-c"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");

    peer.set_faults(
        &json!({ "rules": [{ "fault": "status", "status": 503, "op": "get", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.describe("us-central1", ResourceKind::Reservation, "us-central1-a/x"))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Transient, "{e}");

    // After all that, one good attempt makes exactly one.
    peer.set_faults(&json!({ "rules": [] }));
    rt.block_on(g.create_reservation(&request(1), &id("reserve-c"), false))
        .unwrap();
    assert_eq!(peer.created()[&name_of("reserve-c")], 1);
}

#[test]
fn already_exists_is_looked_up_by_name_and_taken_when_it_is_gpucaps() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("reserve-d");
    rt.block_on(g.create_reservation(&request(2), &ident, false))
        .unwrap();
    // The look-up before the insert misses (a stale read), so the insert is sent: 409.
    peer.set_faults(
        &json!({ "rules": [{ "fault": "status", "status": 404, "op": "get", "times": 1 }] }),
    );
    let done = rt
        .block_on(g.create_reservation(&request(2), &ident, false))
        .unwrap();
    assert_eq!(done.resource.instances, 2);
    let record = peer.record();
    assert_eq!(record["calls"]["insert"], 2, "{record}");
    assert_eq!(peer.created()[&name_of("reserve-d")], 1);

    // A reservation of that name someone else made is not taken.
    let foreign = name_of("reserve-e");
    peer.seed(&json!({ "zone": ZONE, "name": foreign, "machine_type": MACHINE, "count": 2, "description": "team reservation" }));
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-e"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert!(e.message.contains("does not say gpucap made it"), "{e}");
}

#[test]
fn a_dropped_insert_response_is_reconciled_by_name_and_a_repeat_is_deduped() {
    let peer = GcePeer::start(&json!({ "op_steps": 2 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("reserve-f");
    peer.set_faults(
        &json!({ "rules": [{ "fault": "drop_response", "op": "insert", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.create_reservation(&request(3), &ident, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    // The next attempt finds it by name (waiting out CREATING): nothing is sent again.
    let done = rt
        .block_on(g.create_reservation(&request(3), &ident, false))
        .unwrap();
    assert_eq!(done.resource.state, "active");
    let name = name_of("reserve-f");
    assert_eq!(peer.inserts()[&name], 1);
    assert_eq!(peer.calls("insert"), 1);

    // When the look-up misses too, the insert goes again with the same requestId and the
    // peer (as Compute Engine) answers with the first Operation.
    let ident = id("reserve-gg");
    let next_get = peer.calls("get") + 2;
    peer.set_faults(&json!({ "rules": [
        { "fault": "drop_response", "op": "insert", "times": 1 },
        { "fault": "status", "status": 404, "op": "get", "calls": [next_get] }
    ] }));
    let e = rt
        .block_on(g.create_reservation(&request(1), &ident, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    rt.block_on(g.create_reservation(&request(1), &ident, false))
        .unwrap();
    let record = peer.record();
    assert_eq!(record["deduped"], 1, "{record}");
    assert_eq!(peer.created()[&name_of("reserve-gg")], 1);
    assert_eq!(peer.inserts()[&name_of("reserve-gg")], 1);
}

#[test]
fn delete_only_what_gpucap_made_and_only_when_idle() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let foreign =
        peer.seed(&json!({ "zone": ZONE, "name": "team-a3", "machine_type": MACHINE, "count": 8 }));
    let e = rt
        .block_on(g.cancel_reservation("us-central1", &foreign, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert!(e.message.contains("not made by gpucap"), "{e}");
    // A gpucap-looking name is not enough: the description must say so too.
    let lookalike = peer.seed(&json!({ "zone": ZONE, "name": "gpucap-lookalike", "machine_type": MACHINE, "count": 1, "description": "{\"managed-by\":\"someone\"}" }));
    assert!(
        rt.block_on(g.cancel_reservation("us-central1", &lookalike, false))
            .is_err()
    );
    let e = rt
        .block_on(g.modify_reservation("us-central1", &foreign, 2, Utc::now(), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert!(peer.counts("deleted").is_empty());
    assert!(peer.counts("resizes").is_empty());

    let ours = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-h"), false))
        .unwrap()
        .resource
        .id;
    // Resize (reservations.resize), then in use: not deleted.
    let resized = rt
        .block_on(g.modify_reservation("us-central1", &ours, 5, Utc::now(), false))
        .unwrap();
    assert_eq!(resized.resource.instances, 5);
    let name = name_of("reserve-h");
    peer.set_usage(&json!({ name.clone(): 1 }));
    let e = rt
        .block_on(g.cancel_reservation("us-central1", &ours, false))
        .unwrap_err();
    assert!(e.message.contains("using reservation"), "{e}");
    peer.set_usage(&json!({ name.clone(): 0 }));
    let e = rt
        .block_on(g.cancel_reservation("us-central1", &ours, true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk);
    let done = rt
        .block_on(g.cancel_reservation("us-central1", &ours, false))
        .unwrap();
    assert_eq!(done.resource.state, "cancelled");
    assert_eq!(peer.counts("deleted")[&name], 1);
    // Again: already gone, which is what was asked.
    rt.block_on(g.cancel_reservation("us-central1", &ours, false))
        .unwrap();
    assert_eq!(peer.counts("deleted")[&name], 1);
    assert_eq!(peer.reservations().len(), 2, "the foreign ones stay");
}

#[test]
fn dry_runs_read_blocks_and_zoneless_requests_are_refused_and_a_missing_pool_is_not_found() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let e = rt
        .block_on(g.create_reservation(&request(2), &id("reserve-i"), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk, "{e}");
    assert_eq!(peer.calls("insert"), 0);
    assert_eq!(peer.calls("list"), 1);

    let mut zoneless = request(2);
    zoneless.placement.zone = None;
    let e = rt
        .block_on(g.create_reservation(&zoneless, &id("reserve-i"), false))
        .unwrap_err();
    assert!(e.message.contains("zonal"), "{e}");
    let mut no_token = id("reserve-i");
    no_token.client_token = None;
    assert!(
        rt.block_on(g.create_reservation(&request(2), &no_token, false))
            .is_err()
    );

    let e = rt
        .block_on(g.scale_pool(
            "us-central1",
            "p",
            PoolSize {
                on_demand: 1,
                spot: 0,
            },
            false,
        ))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::NotFound, "{e}");
    assert!(e.message.contains("does not exist"), "{e}");
    let e = rt
        .block_on(
            g.describe_offerings(&gpucap_provider::capacity::BlockQuery {
                region: "us-central1".into(),
                instance_type: MACHINE.into(),
                instances: 1,
                start_from: Utc::now(),
                start_to: Utc::now(),
                duration_hours: 24,
            }),
        )
        .unwrap_err();
    assert!(e.message.contains("calendar mode"), "{e}");
    assert_eq!(peer.calls("insert"), 0);
}

#[test]
fn made_again_and_deleted_again_inside_the_request_id_window() {
    // The peer, like Compute Engine, answers a repeated requestId with the first Operation:
    // the second insert and the second delete of the same name must still happen.
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("reserve-j");
    let name = name_of("reserve-j");
    for round in 1..=2 {
        let made = rt
            .block_on(g.create_reservation(&request(1), &ident, false))
            .unwrap();
        assert_eq!(peer.created()[&name], round);
        rt.block_on(g.cancel_reservation("us-central1", &made.resource.id, false))
            .unwrap();
        assert_eq!(peer.counts("deleted")[&name], round);
    }
    assert!(peer.reservations().is_empty());
    assert_eq!(peer.record()["deduped"], 2, "{}", peer.record());
}
