//! GCP capacity blocks (future reservations in calendar mode) and commitments
//! (`regionCommitments.insert`) against the local Compute Engine peer
//! (`tests/peers/gce_peer.py`), which answers in the documented REST JSON and keeps its own
//! record: every count below is the peer's.

mod common;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use common::gce_peer::{GcePeer, PROJECT};
use common::runtime;
use gpucap_gcp::act::{GcpCapacity, names};
use gpucap_provider::capacity::{
    ActErrorKind, CommitmentRequest, Commitments, Describe, Idempotency, Placement,
    RequestedBlocks, ReservationRequest, ResourceKind, tag,
};
use serde_json::json;

const ZONE: &str = "us-central1-a";
const MACHINE: &str = "a3-highgpu-8g";
/// The peer's clock for the cancel rules: 58 days before the block starts.
const EARLY: &str = "2026-12-14T00:00:00Z";
/// 20 days before the block starts: too late to cancel.
const LATE: &str = "2027-01-20T00:00:00Z";

fn gcp(rt: &tokio::runtime::Runtime, peer: &GcePeer) -> GcpCapacity {
    common::client(rt, peer, Duration::from_secs(20))
}

/// Two H100 machines in one zone from 2027-02-10 for 14 days.
fn block(instances: u32) -> ReservationRequest {
    ReservationRequest {
        placement: Placement {
            region: "us-central1".into(),
            zone: Some(ZONE.into()),
            instance_type: MACHINE.into(),
        },
        instances,
        start: Utc.with_ymd_and_hms(2027, 2, 10, 0, 0, 0).unwrap(),
        end: Utc.with_ymd_and_hms(2027, 2, 24, 0, 0, 0).unwrap(),
    }
}

fn commitment(instances: u32, reservations: Vec<String>) -> CommitmentRequest {
    CommitmentRequest {
        placement: Placement {
            region: "us-central1".into(),
            zone: None,
            instance_type: MACHINE.into(),
        },
        instances,
        start: Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).unwrap(),
        end: Utc.with_ymd_and_hms(2028, 1, 4, 0, 0, 0).unwrap(),
        reservations,
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
fn a_block_is_one_calendar_mode_request_followed_to_done_and_found_by_name() {
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("block-a");
    let done = rt
        .block_on(g.request_block(&block(2), &ident, false))
        .unwrap();
    let name = name_of("block-a");
    let r = &done.resource;
    assert_eq!(r.id, format!("{ZONE}/{name}"));
    assert_eq!(r.kind, ResourceKind::CapacityBlock);
    assert_eq!(r.state, "pending", "submitted, waiting for Google's review");
    assert_eq!(
        (r.instances, r.start, r.end),
        (2, Some(block(2).start), Some(block(2).end))
    );
    assert_eq!(r.tags[tag::INTENT], "intent-block-a");
    assert!(r.managed_by_gpucap());
    // PENDING -> RUNNING -> DONE through early waits.
    assert!(peer.calls("operations.wait") >= 2, "{}", peer.record());
    let fr = &peer.future_reservations()[0];
    assert_eq!(fr["reservationMode"], "CALENDAR");
    assert_eq!(fr["planningStatus"], "SUBMITTED");
    assert_eq!(fr["reservationName"], name.as_str());
    assert_eq!(fr["specificReservationRequired"], true);
    assert_eq!(fr["autoDeleteAutoCreatedReservations"], true);
    assert_eq!(fr["timeWindow"]["startTime"], "2027-02-10T00:00:00Z");
    assert_eq!(fr["timeWindow"]["endTime"], "2027-02-24T00:00:00Z");
    assert_eq!(fr["specificSkuProperties"]["totalCount"], "2");
    assert_eq!(
        fr["specificSkuProperties"]["instanceProperties"]["machineType"],
        MACHINE
    );
    let log = peer.record()["log"].clone();
    let insert = log
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["op"] == "future.insert")
        .unwrap()
        .clone();
    assert_ne!(
        insert["requestId"].as_str().unwrap(),
        "00000000-0000-0000-0000-000000000000"
    );

    // Again: found by its name, nothing sent.
    let again = rt
        .block_on(g.request_block(&block(2), &ident, false))
        .unwrap();
    assert_eq!(again.resource.id, r.id);
    assert_eq!(peer.calls("future.insert"), 1);
    assert_eq!(peer.counts("futures_created")[&name], 1);

    let found = rt
        .block_on(g.find_by_tag(
            "us-central1",
            &[ResourceKind::CapacityBlock],
            tag::INTENT,
            "intent-block-a",
        ))
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, r.id);
    peer.review_future(&json!({ "zone": ZONE, "name": name, "procurementStatus": "APPROVED" }));
    let now = rt
        .block_on(g.describe("us-central1", ResourceKind::CapacityBlock, &r.id))
        .unwrap()
        .unwrap();
    assert_eq!(now.state, "scheduled");
}

#[test]
fn a_dropped_insert_is_found_by_name_and_someone_elses_request_is_refused() {
    let peer = GcePeer::start(&json!({}));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("block-b");
    peer.set_faults(
        &json!({ "rules": [{ "fault": "drop_response", "op": "future.insert", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.request_block(&block(1), &ident, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    let done = rt
        .block_on(g.request_block(&block(1), &ident, false))
        .unwrap();
    assert_eq!(done.resource.id, format!("{ZONE}/{}", name_of("block-b")));
    assert_eq!(peer.calls("future.insert"), 1, "no second request");
    assert_eq!(peer.counts("futures_created")[&name_of("block-b")], 1);

    // A request under gpucap's name that gpucap did not make: the first look-up misses (a
    // 404), the insert is a 409, which is looked up, and refused.
    peer.set_faults(&json!({ "rules": [
        { "fault": "status", "status": 404, "op": "future.get", "times": 1 }
    ] }));
    let theirs = id("block-cc");
    // Made by hand with the same name (no gpucap tags).
    let made_by_hand = json!({ "name": name_of("block-cc"), "description": "team request",
        "reservationMode": "CALENDAR", "timeWindow": { "startTime": "2027-02-10T00:00:00Z", "endTime": "2027-02-24T00:00:00Z" },
        "specificSkuProperties": { "totalCount": "1", "instanceProperties": { "machineType": MACHINE } } });
    let client = reqwest_insert(&peer, &made_by_hand);
    assert_eq!(client, 200);
    let e = rt
        .block_on(g.request_block(&block(1), &theirs, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert!(e.message.contains("does not say gpucap made it"), "{e}");
    assert_eq!(
        peer.counts("future_inserts")[&name_of("block-cc")],
        1,
        "only the hand-made one"
    );
}

/// Inserts a future reservation straight into the peer, as another client would; the answer.
fn raw_insert(peer: &GcePeer, body: &serde_json::Value) -> serde_json::Value {
    let url = format!(
        "{}/compute/v1/projects/{PROJECT}/zones/{ZONE}/futureReservations?requestId=7f1c2a9e-0b7d-5e21-9c44-8a6f0d2e1b73",
        peer.url()
    );
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, urllib.request; r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST', headers={'Content-Type': 'application/json'})); print(r.read().decode())",
            &url,
            &body.to_string(),
        ])
        .output()
        .expect("python3");
    serde_json::from_slice(&out.stdout).expect("an Operation")
}

#[test]
fn a_journalled_operation_is_waited_on_until_done() {
    let peer = GcePeer::start(&json!({ "op_steps": 4 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let op = raw_insert(
        &peer,
        &json!({ "name": "gpucap-resumed", "timeWindow": { "startTime": "2027-04-10T00:00:00Z", "endTime": "2027-04-20T00:00:00Z" },
            "specificSkuProperties": { "totalCount": "1", "instanceProperties": { "machineType": MACHINE } } }),
    );
    assert_eq!(op["status"], "PENDING", "{op}");
    let name = op["name"].as_str().unwrap();
    rt.block_on(g.wait_operation(&format!("zones/{ZONE}/operations/{name}")))
        .unwrap();
    // PENDING -> RUNNING -> ... -> DONE: the wait was looped until DONE.
    assert!(peer.calls("operations.wait") >= 3, "{}", peer.record());
    let e = rt
        .block_on(g.wait_operation(&format!("zones/{ZONE}/operations/operation-gone")))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    let e = rt.block_on(g.wait_operation("operation-1")).unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
}

/// Inserts a future reservation straight into the peer, as another client would.
fn reqwest_insert(peer: &GcePeer, body: &serde_json::Value) -> u16 {
    let url = format!(
        "{}/compute/v1/projects/{PROJECT}/zones/{ZONE}/futureReservations?requestId=6f1c2a9e-0b7d-5e21-9c44-8a6f0d2e1b73",
        peer.url()
    );
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, urllib.request; r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST', headers={'Content-Type': 'application/json'})); print(r.status)",
            &url,
            &body.to_string(),
        ])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn a_block_is_cancelled_and_deleted_only_while_allowed_and_only_if_gpucap_made_it() {
    let peer = GcePeer::start(&json!({ "now": EARLY }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let early = rt
        .block_on(g.request_block(&block(2), &id("block-d"), false))
        .unwrap();
    let late = rt
        .block_on(g.request_block(&block(1), &id("block-ee"), false))
        .unwrap();
    let locked = rt
        .block_on(g.request_block(&block(3), &id("block-fff"), false))
        .unwrap();

    // 58 days ahead: cancelled, then deleted (a cancelled request blocks new ones like it).
    let dry = rt
        .block_on(g.cancel_block("us-central1", &early.resource.id, true))
        .unwrap_err();
    assert_eq!(dry.kind, ActErrorKind::DryRunOk, "{dry}");
    let done = rt
        .block_on(g.cancel_block("us-central1", &early.resource.id, false))
        .unwrap();
    assert_eq!(done.resource.state, "cancelled");
    let name = name_of("block-d");
    assert_eq!(peer.counts("future_cancels")[&name], 1);
    assert_eq!(peer.counts("future_deleted")[&name], 1);
    // Again (a lost answer): already gone, nothing sent.
    let again = rt
        .block_on(g.cancel_block("us-central1", &early.resource.id, false))
        .unwrap();
    assert_eq!(again.resource.state, "cancelled");
    assert_eq!(peer.calls("future.cancel"), 1);

    // Locked by Google's procurement: refused before any call.
    peer.review_future(
        &json!({ "zone": ZONE, "name": name_of("block-fff"), "procurementStatus": "PROCURING" }),
    );
    let e = rt
        .block_on(g.cancel_block("us-central1", &locked.resource.id, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other);
    assert!(e.message.contains("can no longer be cancelled"), "{e}");
    assert!(e.message.contains("PROCURING"), "{e}");
    assert_eq!(peer.calls("future.cancel"), 1);

    // 20 days ahead: Compute Engine refuses; the error says why.
    peer.configure(&json!({ "now": LATE }));
    let e = rt
        .block_on(g.cancel_block("us-central1", &late.resource.id, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other);
    assert!(e.message.contains("can no longer be cancelled"), "{e}");
    assert!(e.message.contains("30 days"), "{e}");
    let still: Vec<_> = peer
        .future_reservations()
        .into_iter()
        .filter(|f| f["status"]["procurementStatus"] != "CANCELLED")
        .collect();
    assert_eq!(still.len(), 2, "{still:?}");

    // Someone else's request is never cancelled.
    let hand = json!({ "name": "gpucap-team-block", "description": "team",
        "timeWindow": { "startTime": "2027-04-10T00:00:00Z", "endTime": "2027-04-20T00:00:00Z" },
        "specificSkuProperties": { "totalCount": "1", "instanceProperties": { "machineType": MACHINE } } });
    assert_eq!(reqwest_insert(&peer, &hand), 200);
    let e = rt
        .block_on(g.cancel_block("us-central1", &format!("{ZONE}/gpucap-team-block"), false))
        .unwrap_err();
    assert!(e.message.contains("not made by gpucap"), "{e}");
    assert!(
        !peer
            .counts("future_cancels")
            .contains_key("gpucap-team-block")
    );
}

#[test]
fn a_commitment_is_signed_once_with_the_machines_resources_and_never_cancelled() {
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let rt = runtime();
    let g = gcp(&rt, &peer);
    let ident = id("commit-a");
    // Committed GPUs must be reserved, with the reservations attached: none, or too few, is
    // refused before any insert.
    let e = rt
        .block_on(g.create_commitment(&commitment(4, vec![]), &ident, false))
        .unwrap_err();
    assert!(e.message.contains("hold 0 of the 4"), "{e}");
    peer.seed(&json!({ "zone": ZONE, "name": "gpucap-reserve-x-0123456789ab", "machine_type": MACHINE, "count": 3 }));
    peer.seed(&json!({ "zone": ZONE, "name": "gpucap-reserve-y-0123456789ab", "machine_type": MACHINE, "count": 2 }));
    peer.seed(&json!({ "zone": ZONE, "name": "gpucap-reserve-l4-0123456789ab", "machine_type": "g2-standard-4", "count": 9 }));
    let x = format!("{ZONE}/gpucap-reserve-x-0123456789ab");
    let y = format!("{ZONE}/gpucap-reserve-y-0123456789ab");
    let l4 = format!("{ZONE}/gpucap-reserve-l4-0123456789ab");
    let e = rt
        .block_on(g.create_commitment(&commitment(4, vec![x.clone(), l4.clone()]), &ident, false))
        .unwrap_err();
    assert!(e.message.contains("hold 3 of the 4"), "{e}");
    assert_eq!(peer.calls("commitments.insert"), 0);
    let done = rt
        .block_on(g.create_commitment(
            &commitment(
                4,
                vec![l4, x.clone(), y.clone(), format!("{ZONE}/gpucap-gone")],
            ),
            &ident,
            false,
        ))
        .unwrap();
    let name = name_of("commit-a");
    assert_eq!(done.resource.id, format!("us-central1/{name}"));
    assert_eq!(done.resource.kind, ResourceKind::Commitment);
    assert_eq!(done.resource.state, "active");
    assert!(done.resource.managed_by_gpucap());
    // Followed with regionOperations.wait, looped through RUNNING.
    assert!(
        peer.calls("regionOperations.wait") >= 2,
        "{}",
        peer.record()
    );
    let c = &peer.commitments()[0];
    assert_eq!(c["plan"], "TWELVE_MONTH");
    assert_eq!(c["type"], "ACCELERATOR_OPTIMIZED_A3");
    assert_eq!(c["autoRenew"], false);
    // 4 x a3-highgpu-8g: 208 vCPUs, 1,916,928 MB and 8 H100s each (the machine type fixture).
    let by_type = |t: &str| {
        c["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["type"] == t)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_type("VCPU")["amount"], "832");
    assert_eq!(by_type("MEMORY")["amount"], "7667712");
    assert_eq!(by_type("ACCELERATOR")["amount"], "32");
    assert_eq!(
        by_type("ACCELERATOR")["acceleratorType"],
        "nvidia-h100-80gb"
    );
    // The two H100 reservations (3 + 2 machines hold the 4), not the L4 one.
    assert_eq!(
        c["existingReservations"],
        json!([
            format!("projects/{PROJECT}/zones/{ZONE}/reservations/gpucap-reserve-x-0123456789ab"),
            format!("projects/{PROJECT}/zones/{ZONE}/reservations/gpucap-reserve-y-0123456789ab")
        ])
    );

    // Again: found by name, nothing sent.
    rt.block_on(g.create_commitment(&commitment(4, vec![]), &ident, false))
        .unwrap();
    assert_eq!(peer.calls("commitments.insert"), 1);
    let found = rt
        .block_on(g.find_by_tag(
            "us-central1",
            &[ResourceKind::Commitment],
            tag::INTENT,
            "intent-commit-a",
        ))
        .unwrap();
    assert_eq!(found.len(), 1);

    // A dropped answer: the next attempt finds it by name.
    let other = id("commit-bb");
    peer.set_faults(
        &json!({ "rules": [{ "fault": "drop_response", "op": "commitments.insert", "times": 1 }] }),
    );
    let e = rt
        .block_on(g.create_commitment(&commitment(1, vec![y.clone()]), &other, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    rt.block_on(g.create_commitment(&commitment(1, vec![y.clone()]), &other, false))
        .unwrap();
    assert_eq!(peer.counts("commitments_created")[&name_of("commit-bb")], 1);
    assert_eq!(peer.calls("commitments.insert"), 2);

    // A term that is neither one year nor three, and a machine with no commitment type, are
    // refused before any call.
    let mut odd = commitment(1, vec![y.clone()]);
    odd.end = odd.start + chrono::Duration::days(90);
    let e = rt
        .block_on(g.create_commitment(&odd, &id("commit-c"), false))
        .unwrap_err();
    assert!(e.message.contains("one or three years"), "{e}");
    let mut cpu = commitment(1, vec![y]);
    cpu.placement.instance_type = "n2-standard-8".into();
    let e = rt
        .block_on(g.create_commitment(&cpu, &id("commit-d"), false))
        .unwrap_err();
    assert!(e.message.contains("no commitment type"), "{e}");
    assert_eq!(peer.calls("commitments.insert"), 2);
    // No call the peer saw could have deleted or cancelled one.
    let record = peer.record();
    assert!(
        record["log"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["method"] != "DELETE"),
        "{record}"
    );
}
