//! The Azure act provider against the local ARM peer (`tests/peers/azure_arm_peer.py`), which
//! answers in the documented JSON and keeps its own record: every count below is the peer's.

#[path = "../../../tests/support/azure_peer.rs"]
mod azure_peer;

use std::time::{Duration, Instant};

use azure_peer::{AzurePeer, RESOURCE_GROUP, SUBSCRIPTION};
use chrono::{TimeZone, Utc};
use gpucap_azure::act::{AzureCapacity, AzureCapacityConfig, Credential, names};
use gpucap_provider::capacity::{
    ActErrorKind, CapacityBlocks, Describe, Idempotency, Placement, ReservationRequest,
    Reservations, ResourceKind, tag,
};
use serde_json::json;

fn provider(peer: &AzurePeer, credential: Credential) -> AzureCapacity {
    let mut config = AzureCapacityConfig::new(SUBSCRIPTION, RESOURCE_GROUP, credential)
        .with_endpoint(peer.url());
    config.poll_interval = Duration::from_millis(10);
    config.operation_timeout = Duration::from_secs(20);
    AzureCapacity::new(config).unwrap()
}

fn azure(peer: &AzurePeer) -> AzureCapacity {
    provider(peer, Credential::AccessToken("peer-static-token".into()))
}

fn request(zone: Option<&str>, instances: u32) -> ReservationRequest {
    ReservationRequest {
        placement: Placement {
            region: "eastus".into(),
            zone: zone.map(str::to_string),
            instance_type: "Standard_NC40ads_H100_v5".into(),
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
        intent: uuid_like(action),
        client_token: Some(format!("{:0>8}-d9cb-469f-a165-70867728950e", action.len())),
    }
}

fn uuid_like(seed: &str) -> String {
    format!("intent-{seed}")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_reservation_is_created_polled_to_succeeded_and_not_created_twice() {
    let peer = AzurePeer::start(&json!({ "lro_polls": 3 }));
    let az = azure(&peer);
    let rt = runtime();
    let ident = id("reserve-a");
    let done = rt
        .block_on(az.create_reservation(&request(Some("1"), 4), &ident, false))
        .unwrap();
    let r = &done.resource;
    assert_eq!(r.state, "active");
    assert_eq!(r.instances, 4);
    assert_eq!(r.placement.zone.as_deref(), Some("1"));
    assert_eq!(r.in_use, Some(0));
    assert!(r.managed_by_gpucap());
    assert_eq!(r.tags[tag::ACTION], "reserve-a");
    assert_eq!(r.tags[tag::PLAN], "0123456789abcdef");
    assert_eq!(r.tags[tag::INTENT], "intent-reserve-a");
    assert!(
        r.id.ends_with(&format!(
            "/capacityReservationGroups/gpucap-eastus-z1/capacityReservations/{}",
            names::reservation_name("reserve-a", ident.client_token.as_deref().unwrap())
        )),
        "{}",
        r.id
    );
    assert!(peer.calls("GET operation") >= 3, "{}", peer.record());
    assert_eq!(peer.calls("PUT group"), 1);
    assert_eq!(peer.calls("PUT reservation"), 1);

    // The same action again: found by its name, nothing sent.
    let again = rt
        .block_on(az.create_reservation(&request(Some("1"), 4), &ident, false))
        .unwrap();
    assert_eq!(again.resource.id, r.id);
    assert_eq!(peer.calls("PUT reservation"), 1);
    assert!(peer.created().values().all(|n| *n == 1));

    // Described by id and found by tag.
    let found = rt
        .block_on(az.describe("eastus", ResourceKind::Reservation, &r.id))
        .unwrap()
        .unwrap();
    assert_eq!(found.instances, 4);
    let by_tag = rt
        .block_on(az.find_by_tag(
            "eastus",
            &[ResourceKind::Reservation],
            tag::INTENT,
            "intent-reserve-a",
        ))
        .unwrap();
    assert_eq!(by_tag.len(), 1);
    assert!(
        rt.block_on(az.find_by_tag("westus", &[], tag::INTENT, "intent-reserve-a"))
            .unwrap()
            .is_empty()
    );

    // Resized with PATCH, then deleted.
    let resized = rt
        .block_on(az.modify_reservation("eastus", &r.id, 6, Utc::now(), false))
        .unwrap();
    assert_eq!(resized.resource.instances, 6);
    assert_eq!(peer.calls("PATCH reservation"), 1);
    let gone = rt
        .block_on(az.cancel_reservation("eastus", &r.id, false))
        .unwrap();
    assert_eq!(gone.resource.state, "cancelled");
    assert!(peer.reservations().is_empty());
    assert_eq!(peer.record()["deleted"].as_object().unwrap().len(), 1);
    assert!(
        rt.block_on(az.describe("eastus", ResourceKind::Reservation, &r.id))
            .unwrap()
            .is_none()
    );
}

#[test]
fn an_allocation_failure_is_a_capacity_error() {
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [{ "fault": "allocation", "zone": "2" }] }));
    let az = azure(&peer);
    let e = runtime()
        .block_on(az.create_reservation(&request(Some("eastus-2"), 8), &id("reserve-b"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Capacity, "{e}");
    assert_eq!(e.code.as_deref(), Some("ZonalAllocationFailed"));

    peer.set_faults(&json!({ "rules": [{ "fault": "quota" }] }));
    let e = runtime()
        .block_on(az.create_reservation(&request(None, 8), &id("reserve-q"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Quota, "{e}");
}

#[test]
fn throttling_waits_what_retry_after_asks() {
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [
        { "fault": "throttle", "op": "PUT reservation", "calls": [1], "retry_after": 1 },
        { "fault": "throttle", "op": "GET operation", "calls": [1], "retry_after": 1 }
    ] }));
    let az = azure(&peer);
    let rt = runtime();
    let started = Instant::now();
    let e = rt
        .block_on(az.create_reservation(&request(None, 2), &id("reserve-t"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Throttled, "{e}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The caller repeats: the operation poll is throttled once too, and waited out inside.
    let started = Instant::now();
    let done = rt
        .block_on(az.create_reservation(&request(None, 2), &id("reserve-t"), false))
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(done.resource.state, "active");
    assert_eq!(peer.record()["fault_counts"]["throttle"], 2);
    assert!(peer.created().values().all(|n| *n == 1));
}

#[test]
fn a_dropped_answer_is_unknown_and_the_reservation_is_found_by_name_not_made_twice() {
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [
        { "fault": "drop_response", "op": "PUT reservation", "calls": [1] }
    ] }));
    let az = azure(&peer);
    let rt = runtime();
    let ident = id("reserve-d");
    let e = rt
        .block_on(az.create_reservation(&request(None, 2), &ident, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    // ARM acted: the reservation exists, found by its intent tag.
    let found = rt
        .block_on(az.find_by_tag(
            "eastus",
            &[ResourceKind::Reservation],
            tag::INTENT,
            "intent-reserve-d",
        ))
        .unwrap();
    assert_eq!(found.len(), 1);
    // Repeating the call looks the name up first: no second PUT, the same reservation.
    let done = rt
        .block_on(az.create_reservation(&request(None, 2), &ident, false))
        .unwrap();
    assert_eq!(done.resource.id, found[0].id);
    assert_eq!(done.resource.state, "active");
    assert_eq!(peer.calls("PUT reservation"), 1);
    assert_eq!(peer.created().len(), 1);
    assert!(peer.created().values().all(|n| *n == 1));
}

#[test]
fn cancel_refuses_what_gpucap_did_not_make_and_what_vms_use() {
    let peer = AzurePeer::start(&json!({}));
    let foreign = peer.seed(&json!({
        "group": "team-infra", "name": "infra-h100", "location": "eastus",
        "sku": "Standard_NC40ads_H100_v5", "capacity": 2, "tags": { "team": "infra" }
    }));
    let az = azure(&peer);
    let rt = runtime();
    let e = rt
        .block_on(az.cancel_reservation("eastus", &foreign, false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other);
    assert!(e.message.contains("managed-by=gpucap"), "{e}");
    let e = rt
        .block_on(az.modify_reservation("eastus", &foreign, 1, Utc::now(), false))
        .unwrap_err();
    assert!(e.message.contains("managed-by=gpucap"), "{e}");
    assert_eq!(peer.calls("DELETE reservation"), 0);
    assert_eq!(peer.calls("PATCH reservation"), 0);

    let ours = rt
        .block_on(az.create_reservation(&request(None, 2), &id("reserve-v"), false))
        .unwrap()
        .resource;
    let name = names::parse_id(&ours.id).unwrap().1;
    peer.set_usage(&json!({ &name: 1 }));
    let described = rt
        .block_on(az.describe("eastus", ResourceKind::Reservation, &ours.id))
        .unwrap()
        .unwrap();
    assert_eq!(described.in_use, Some(1));
    let e = rt
        .block_on(az.cancel_reservation("eastus", &ours.id, false))
        .unwrap_err();
    assert!(e.message.contains("associated"), "{e}");
    assert_eq!(peer.calls("DELETE reservation"), 0);
    peer.set_usage(&json!({ &name: 0 }));
    let dry = rt
        .block_on(az.cancel_reservation("eastus", &ours.id, true))
        .unwrap_err();
    assert_eq!(dry.kind, ActErrorKind::DryRunOk);
    assert_eq!(peer.calls("DELETE reservation"), 0);
    rt.block_on(az.cancel_reservation("eastus", &ours.id, false))
        .unwrap();
    // Deleting what is gone already is done, not an error (a lost answer repeated).
    let again = rt
        .block_on(az.cancel_reservation("eastus", &ours.id, false))
        .unwrap();
    assert_eq!(again.resource.state, "cancelled");
    assert_eq!(peer.calls("DELETE reservation"), 1);
    assert_eq!(peer.reservations().len(), 1, "the foreign one is left");
}

#[test]
fn client_credentials_get_one_token_and_blocks_are_refused() {
    let peer = AzurePeer::start(&json!({}));
    let az = provider(
        &peer,
        Credential::ClientSecret {
            tenant: "tenant-1".into(),
            client_id: "client-1".into(),
            secret: "peer-client-secret-9c1".into(),
        },
    );
    assert!(!format!("{az:?}").contains("peer-client-secret"));
    let rt = runtime();
    rt.block_on(az.create_reservation(&request(None, 1), &id("reserve-c"), false))
        .unwrap();
    assert_eq!(peer.record()["tokens"], 1, "one token, cached");
    let e = rt
        .block_on(
            az.describe_offerings(&gpucap_provider::capacity::BlockQuery {
                region: "eastus".into(),
                instance_type: "Standard_ND96isr_H100_v5".into(),
                instances: 1,
                start_from: Utc::now(),
                start_to: Utc::now(),
                duration_hours: 24,
            }),
        )
        .unwrap_err();
    assert!(e.message.contains("no capacity blocks"), "{e}");
    // Pools are scale sets (tests/pools_peer.rs): one that is not there is `None`; launch
    // templates do not exist on Azure.
    assert!(
        rt.block_on(az.describe("eastus", ResourceKind::Pool, "x"))
            .unwrap()
            .is_none()
    );
    let e = rt
        .block_on(az.describe("eastus", ResourceKind::LaunchTemplate, "x"))
        .unwrap_err();
    assert!(e.message.contains("scale sets"), "{e}");
}

#[test]
fn a_federated_token_is_exchanged_and_a_refused_one_is_an_auth_error() {
    let peer = AzurePeer::start(&json!({}));
    let file = std::env::temp_dir().join(format!("gpucap-oidc-{}.jwt", std::process::id()));
    std::fs::write(&file, "header.payload.signature\n").unwrap();
    let az = provider(
        &peer,
        Credential::Federated {
            tenant: "tenant-1".into(),
            client_id: "client-1".into(),
            token_file: file.clone(),
        },
    );
    let rt = runtime();
    rt.block_on(az.create_reservation(&request(None, 1), &id("reserve-f"), false))
        .unwrap();
    assert_eq!(peer.record()["tokens"], 1);
    std::fs::remove_file(&file).ok();

    // Entra ID refusing the grant: an auth error that names no secret, and nothing sent.
    peer.set_faults(&json!({ "rules": [{ "fault": "status", "op": "token", "status": 401, "code": "invalid_client" }] }));
    let refused = provider(
        &peer,
        Credential::ClientSecret {
            tenant: "tenant-1".into(),
            client_id: "client-1".into(),
            secret: "peer-client-secret-9c1".into(),
        },
    );
    let before = peer.calls("PUT reservation");
    let e = rt
        .block_on(refused.create_reservation(&request(None, 1), &id("reserve-r"), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Auth, "{e}");
    assert!(!e.to_string().contains("peer-client-secret"), "{e}");
    assert_eq!(peer.calls("PUT reservation"), before);
}

#[test]
fn a_dry_run_sends_nothing_that_changes_and_names_a_missing_resource_group() {
    let peer = AzurePeer::start(&json!({ "resource_groups": [RESOURCE_GROUP] }));
    let rt = runtime();
    let e = rt
        .block_on(azure(&peer).create_reservation(&request(None, 2), &id("reserve-y"), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk, "{e}");
    let mut config = AzureCapacityConfig::new(
        SUBSCRIPTION,
        "no-such-group",
        Credential::AccessToken("t".into()),
    )
    .with_endpoint(peer.url());
    config.poll_interval = Duration::from_millis(10);
    let elsewhere = AzureCapacity::new(config).unwrap();
    let e = rt
        .block_on(elsewhere.create_reservation(&request(None, 2), &id("reserve-y"), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other, "{e}");
    assert_eq!(e.code.as_deref(), Some("ResourceGroupNotFound"));
    assert!(e.message.contains("no-such-group"), "{e}");
    let record = peer.record();
    for op in [
        "PUT group",
        "PUT reservation",
        "PATCH reservation",
        "DELETE reservation",
    ] {
        assert_eq!(record["calls"][op].as_u64().unwrap_or(0), 0, "{op}");
    }
}
