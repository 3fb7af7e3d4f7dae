//! Azure pools (flexible VM scale sets) against the local ARM peer
//! (`tests/peers/azure_arm_peer.py`), which keeps its own record of every scale set it
//! created and every VM it made: every count below is the peer's.

#[path = "../../../tests/support/azure_peer.rs"]
mod azure_peer;

use std::time::Duration;

use azure_peer::{AzurePeer, RESOURCE_GROUP, SUBSCRIPTION};
use chrono::{TimeZone, Utc};
use gpucap_azure::act::{AzureCapacity, AzureCapacityConfig, Credential, names};
use gpucap_provider::capacity::{
    ActErrorKind, Describe, Idempotency, Placement, PoolSize, PoolSpec, Pools, ReservationRequest,
    Reservations, ResourceKind, tag,
};
use serde_json::json;

const POOL: &str = "gpucap-h100-azure-eastus-standard-nc40ads-h100-v5";
const SKU: &str = "Standard_NC40ads_H100_v5";
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPeerTestKeyOnly gpucap-test";

fn azure_with(peer: &AzurePeer, key: Option<&str>) -> AzureCapacity {
    let mut config = AzureCapacityConfig::new(
        SUBSCRIPTION,
        RESOURCE_GROUP,
        Credential::AccessToken("peer-static-token".into()),
    )
    .with_endpoint(peer.url());
    config.poll_interval = Duration::from_millis(10);
    config.operation_timeout = Duration::from_secs(20);
    config.ssh_public_key = key.map(str::to_string);
    AzureCapacity::new(config).unwrap()
}

fn azure(peer: &AzurePeer) -> AzureCapacity {
    azure_with(peer, Some(SSH_KEY))
}

fn spec(reservations: Vec<String>) -> PoolSpec {
    PoolSpec {
        name: POOL.into(),
        region: "eastus".into(),
        instance_types: vec![SKU.into()],
        image: "microsoft-dsvm:ubuntu-hpc:2204:latest".into(),
        subnets: vec![format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/train/subnets/gpu"
        )],
        security_groups: vec![],
        capacity_reservations: reservations,
        max_size: 4,
        flex_start: None,
    }
}

fn id() -> Idempotency {
    Idempotency {
        plan: "sha256:0123456789abcdef0123".into(),
        action: POOL.into(),
        intent: "intent-pool".into(),
        client_token: Some("0f8fad5b-d9cb-469f-a165-70867728950e".into()),
    }
}

fn size(on_demand: u32, spot: u32) -> PoolSize {
    PoolSize { on_demand, spot }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_pool_is_one_flexible_scale_set_sized_and_confirmed_running_and_never_made_twice() {
    let peer = AzurePeer::start(&json!({ "lro_polls": 2, "vm_polls": 2, "page_size": 2 }));
    let az = azure(&peer);
    let rt = runtime();
    let made = rt
        .block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    assert_eq!(made.resource.id, POOL);
    assert_eq!(made.resource.kind, ResourceKind::Pool);
    assert_eq!(made.resource.instances, 0);
    let set = peer.scale_set(POOL).expect("the scale set");
    assert_eq!(set["properties"]["orchestrationMode"], "Flexible");
    assert_eq!(set["sku"]["name"], SKU);
    assert_eq!(set["tags"]["managed-by"], "gpucap");
    assert_eq!(set["tags"][tag::ACTION], POOL);
    assert_eq!(set["tags"][tag::INTENT], "intent-pool");
    let profile = &set["properties"]["virtualMachineProfile"];
    assert_eq!(profile["priority"], "Regular");
    assert_eq!(
        profile["storageProfile"]["imageReference"]["offer"],
        "ubuntu-hpc"
    );
    assert_eq!(
        profile["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"],
        SSH_KEY
    );
    assert!(set.get("zones").is_none());

    // Sized to 3: the PATCH is followed to its end, then the VMs listed (two per page) until
    // all three run.
    let done = rt
        .block_on(az.scale_pool("eastus", POOL, size(3, 0), false))
        .unwrap();
    assert_eq!(done.resource.instances, 3);
    assert_eq!(done.resource.in_use, Some(3));
    assert_eq!(peer.running(POOL), 3);
    assert!(peer.calls("LIST vms") >= 4, "{}", peer.record()["calls"]);

    // Again: found by name, nothing sent; the same size: no PATCH.
    rt.block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    rt.block_on(az.scale_pool("eastus", POOL, size(3, 0), false))
        .unwrap();
    assert_eq!(peer.calls("PUT scaleset"), 1);
    assert_eq!(peer.calls("PATCH scaleset"), 1);
    assert_eq!(peer.scale_sets_created()[POOL], 1);

    // Described, and found by its intent tag (only the on-demand scale set is the pool).
    let found = rt
        .block_on(az.describe("eastus", ResourceKind::Pool, POOL))
        .unwrap()
        .unwrap();
    assert_eq!((found.id.as_str(), found.instances), (POOL, 3));
    let by_tag = rt
        .block_on(az.find_by_tag("eastus", &[ResourceKind::Pool], tag::INTENT, "intent-pool"))
        .unwrap();
    assert_eq!(by_tag.len(), 1);
    assert_eq!(by_tag[0].id, POOL);
    assert!(
        rt.block_on(az.find_by_tag("westus", &[ResourceKind::Pool], tag::INTENT, "intent-pool"))
            .unwrap()
            .is_empty()
    );

    // Released: scaled to zero, every VM gone, the scale set kept (empty, free).
    let zero = rt
        .block_on(az.scale_pool("eastus", POOL, size(0, 0), false))
        .unwrap();
    assert_eq!(zero.resource.instances, 0);
    assert_eq!(peer.running(POOL), 0);
    assert!(peer.vms().is_empty());
    assert_eq!(peer.scale_sets().len(), 1);
}

#[test]
fn spot_runs_in_a_spot_twin_made_when_first_needed() {
    let peer = AzurePeer::start(&json!({}));
    let az = azure(&peer);
    let rt = runtime();
    rt.block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    let done = rt
        .block_on(az.scale_pool("eastus", POOL, size(1, 2), false))
        .unwrap();
    assert_eq!(done.resource.instances, 3);
    assert_eq!(done.resource.in_use, Some(3));
    let spot_name = names::scale_set_name(POOL, true);
    let spot = peer.scale_set(&spot_name).expect("the spot scale set");
    let profile = &spot["properties"]["virtualMachineProfile"];
    assert_eq!(profile["priority"], "Spot");
    assert_eq!(profile["evictionPolicy"], "Delete");
    assert_eq!(profile["billingProfile"]["maxPrice"], -1);
    assert_eq!(spot["tags"]["managed-by"], "gpucap");
    assert_eq!(peer.running(POOL), 1);
    assert_eq!(peer.running(&spot_name), 2);
    // Found by tag as one pool, not two.
    let by_tag = rt
        .block_on(az.find_by_tag("eastus", &[], tag::INTENT, "intent-pool"))
        .unwrap();
    assert_eq!(by_tag.len(), 1, "{by_tag:?}");
    assert_eq!(by_tag[0].instances, 3);
    // Back to on-demand only: the spot twin is scaled to zero, not deleted.
    rt.block_on(az.scale_pool("eastus", POOL, size(1, 0), false))
        .unwrap();
    assert_eq!(peer.running(&spot_name), 0);
    assert_eq!(peer.scale_sets_created().len(), 2);
    assert!(peer.scale_sets_created().values().all(|n| *n == 1));
}

#[test]
fn a_stockout_is_a_capacity_error_naming_the_shortfall() {
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [
        { "fault": "stockout", "sku": SKU, "available": 2, "code": "AllocationFailed" }
    ] }));
    let az = azure(&peer);
    let rt = runtime();
    rt.block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    let e = rt
        .block_on(az.scale_pool("eastus", POOL, size(3, 0), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Capacity, "{e}");
    assert_eq!(e.code.as_deref(), Some("AllocationFailed"), "{e}");
    assert!(e.message.contains("2 of 3 VM(s) run"), "{e}");
    assert!(
        e.message.contains(&format!("{POOL}: 2 of 3 running")),
        "{e}"
    );
    assert_eq!(peer.running(POOL), 2);

    // Capacity comes back: the next call replaces the failed VM.
    peer.set_faults(&json!({ "rules": [] }));
    let done = rt
        .block_on(az.scale_pool("eastus", POOL, size(3, 0), false))
        .unwrap();
    assert_eq!(done.resource.in_use, Some(3));
    assert_eq!(peer.running(POOL), 3);
}

#[test]
fn a_dropped_put_and_throttled_calls_never_make_a_second_scale_set() {
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "seed": 5, "rules": [
        { "fault": "drop_response", "op": "PUT scaleset", "calls": [1] },
        { "fault": "throttle", "op": "PATCH scaleset", "calls": [1], "retry_after": 1 },
        { "fault": "throttle", "op": "LIST vms", "calls": [1], "retry_after": 1 }
    ] }));
    let az = azure(&peer);
    let rt = runtime();
    let e = rt
        .block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Unknown, "{e}");
    // The caller repeats: the scale set is found by its name (after its operation ends).
    let made = rt
        .block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    assert_eq!(made.resource.id, POOL);
    assert_eq!(peer.calls("PUT scaleset"), 1);
    let e = rt
        .block_on(az.scale_pool("eastus", POOL, size(2, 0), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Throttled, "{e}");
    // The listing is throttled once too: read again inside, the call succeeds.
    let done = rt
        .block_on(az.scale_pool("eastus", POOL, size(2, 0), false))
        .unwrap();
    assert_eq!(done.resource.in_use, Some(2));
    assert_eq!(peer.record()["fault_counts"]["throttle"], 1 + 1);
    assert_eq!(peer.scale_sets_created()[POOL], 1);
    assert_eq!(peer.running(POOL), 2);
}

#[test]
fn a_scale_set_gpucap_did_not_make_is_never_changed() {
    let peer = AzurePeer::start(&json!({}));
    peer.seed_scale_set(&json!({
        "name": POOL, "location": "eastus", "sku": SKU, "capacity": 2, "tags": { "team": "infra" }
    }));
    let az = azure(&peer);
    let rt = runtime();
    let e = rt
        .block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Other);
    assert!(
        e.message.contains("gpucap changes only what it made"),
        "{e}"
    );
    let e = rt
        .block_on(az.scale_pool("eastus", POOL, size(0, 0), false))
        .unwrap_err();
    assert!(e.message.contains("managed-by=gpucap"), "{e}");
    assert_eq!(peer.calls("PUT scaleset"), 0);
    assert_eq!(peer.calls("PATCH scaleset"), 0);
    assert_eq!(peer.running(POOL), 2);
}

#[test]
fn without_an_ssh_key_or_a_subnet_nothing_is_sent_and_the_error_says_what_to_set() {
    let peer = AzurePeer::start(&json!({}));
    let rt = runtime();
    let e = rt
        .block_on(azure_with(&peer, None).ensure_pool(&spec(vec![]), &id(), false))
        .unwrap_err();
    assert!(e.message.contains("GPUCAP_AZURE_SSH_PUBLIC_KEY"), "{e}");
    let mut no_subnet = spec(vec![]);
    no_subnet.subnets.clear();
    let e = rt
        .block_on(azure(&peer).ensure_pool(&no_subnet, &id(), false))
        .unwrap_err();
    assert!(e.message.contains("subnet"), "{e}");
    let mut bad_image = spec(vec![]);
    bad_image.image = "ami-0123".into();
    let e = rt
        .block_on(azure(&peer).ensure_pool(&bad_image, &id(), false))
        .unwrap_err();
    assert!(e.message.contains("marketplace URN"), "{e}");
    // A dry run reads, and says what it would make.
    let e = rt
        .block_on(azure(&peer).ensure_pool(&spec(vec![]), &id(), true))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::DryRunOk, "{e}");
    assert_eq!(peer.calls("PUT scaleset"), 0);
    assert!(peer.scale_sets().is_empty());
}

#[test]
fn the_on_demand_scale_set_runs_in_the_pools_reservation_group_and_its_zone() {
    let peer = AzurePeer::start(&json!({}));
    let az = azure(&peer);
    let rt = runtime();
    let reservation = rt
        .block_on(az.create_reservation(
            &ReservationRequest {
                placement: Placement {
                    region: "eastus".into(),
                    zone: Some("1".into()),
                    instance_type: SKU.into(),
                },
                instances: 2,
                start: Utc.with_ymd_and_hms(2027, 1, 11, 12, 0, 0).unwrap(),
                end: Utc.with_ymd_and_hms(2027, 1, 18, 12, 0, 0).unwrap(),
            },
            &Idempotency {
                action: "reserve-h100".into(),
                intent: "intent-reserve".into(),
                ..id()
            },
            false,
        ))
        .unwrap();
    rt.block_on(az.ensure_pool(&spec(vec![reservation.resource.id.clone()]), &id(), false))
        .unwrap();
    let set = peer.scale_set(POOL).unwrap();
    assert_eq!(set["zones"], json!(["1"]));
    let group = set["properties"]["virtualMachineProfile"]["capacityReservation"]
        ["capacityReservationGroup"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        group.ends_with("/capacityReservationGroups/gpucap-eastus-z1"),
        "{group}"
    );
    // Its spot twin keeps the zone but never the reservation.
    rt.block_on(az.scale_pool("eastus", POOL, size(1, 1), false))
        .unwrap();
    let spot = peer.scale_set(&names::scale_set_name(POOL, true)).unwrap();
    assert_eq!(spot["zones"], json!(["1"]));
    assert!(
        spot["properties"]["virtualMachineProfile"]
            .get("capacityReservation")
            .is_none()
    );
}

#[test]
fn a_conflict_is_transient_and_the_repeat_makes_the_scale_set_once() {
    let peer = AzurePeer::start(&json!({}));
    // 409 Conflict: another operation runs on it (ARM refuses before acting).
    peer.set_faults(&json!({ "rules": [
        { "fault": "status", "status": 409, "code": "Conflict", "op": "PUT scaleset", "calls": [1] },
        { "fault": "status", "status": 409, "code": "Conflict", "op": "PATCH scaleset", "calls": [1] }
    ] }));
    let az = azure(&peer);
    let rt = runtime();
    let e = rt
        .block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Transient, "{e}");
    rt.block_on(az.ensure_pool(&spec(vec![]), &id(), false))
        .unwrap();
    let e = rt
        .block_on(az.scale_pool("eastus", POOL, size(1, 0), false))
        .unwrap_err();
    assert_eq!(e.kind, ActErrorKind::Transient, "{e}");
    let done = rt
        .block_on(az.scale_pool("eastus", POOL, size(1, 0), false))
        .unwrap();
    assert_eq!(done.resource.in_use, Some(1));
    assert_eq!(peer.scale_sets_created()[POOL], 1);
    assert_eq!(peer.record()["scale_set_puts"][POOL], 1);
}
