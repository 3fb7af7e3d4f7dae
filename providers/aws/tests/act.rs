//! The act half (`AwsCapacity`) through the real SDK against the local EC2 capacity peer
//! (`tests/peers/ec2_capacity_peer.py`), with moto's server behind it where launch templates
//! and Auto Scaling groups are involved. The peer keeps its own record of every request and
//! everything bought, so "exactly one purchase" is counted on the cloud's side, not ours.
//!
//! None of these tests skips: a missing `python3` or moto fails them, naming what is missing.

// The shared helper uses `File::lock` (Rust 1.89), newer than the workspace MSRV.
#[path = "../../../tests/support/ec2_peer.rs"]
mod ec2_peer;
#[allow(clippy::incompatible_msrv)]
#[path = "../../../tests/support/python.rs"]
mod python;

use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use chrono::{DateTime, TimeZone, Utc};
use ec2_peer::Ec2Peer;
use gpucap_aws::{AwsCapacity, AwsCapacityConfig, StaticCredentials};
use gpucap_provider::capacity::{
    ActErrorKind, BlockOffering, BlockQuery, CapacityBlocks, Describe, Idempotency, Placement,
    PoolSize, PoolSpec, Pools, ReservationRequest, Reservations, ResourceKind, tag,
};
use serde_json::{Value, json};

const REGION: &str = "us-east-1";
const OFFER_A: &str = "cb-0123456789abcdef0";
const OFFER_B: &str = "cb-0fedcba9876543210";

fn offerings() -> Value {
    json!({"offerings": [
        {"id": OFFER_A, "instance_type": "p5.48xlarge", "zone": "us-east-1a", "instance_count": 1,
         "start": "2030-07-01T11:30:00Z", "end": "2030-07-02T11:30:00Z", "upfront_fee": "758.88"},
        {"id": OFFER_B, "instance_type": "p5.48xlarge", "zone": "us-east-1b", "instance_count": 1,
         "start": "2030-07-03T11:30:00Z", "end": "2030-07-04T11:30:00Z", "upfront_fee": "812.50"}
    ]})
}

fn credentials() -> StaticCredentials {
    StaticCredentials {
        access_key_id: "testing".into(),
        secret_access_key: "testing".into(),
    }
}

async fn capacity_with(peer: &Ec2Peer, operation_timeout: Duration) -> AwsCapacity {
    AwsCapacity::with_config(AwsCapacityConfig {
        endpoint_url: Some(peer.url()),
        static_credentials: Some(credentials()),
        operation_timeout,
        ..AwsCapacityConfig::new(REGION)
    })
    .await
    .expect("connect to the peer")
}

async fn capacity(peer: &Ec2Peer) -> AwsCapacity {
    capacity_with(peer, Duration::from_secs(30)).await
}

/// Plain SDK configuration for the test's own calls (setting up and checking).
async fn raw(peer: &Ec2Peer) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(peer.url())
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await
}

fn id(action: &str, intent: &str) -> Idempotency {
    Idempotency {
        plan: "sha256:0123456789abcdef0123456789abcdef".into(),
        action: action.into(),
        intent: intent.into(),
        client_token: Some(format!("gpucap-01234567-{action}")),
    }
}

fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, 11, 30, 0).unwrap()
}

async fn offering(cap: &AwsCapacity, zone: &str) -> BlockOffering {
    let found = cap
        .describe_offerings(&BlockQuery {
            region: REGION.into(),
            instance_type: "p5.48xlarge".into(),
            instances: 1,
            start_from: at(2030, 6, 1),
            start_to: at(2030, 8, 1),
            duration_hours: 24,
        })
        .await
        .expect("describe offerings");
    found
        .into_iter()
        .find(|o| o.placement.zone.as_deref() == Some(zone))
        .unwrap_or_else(|| panic!("no offering in {zone}"))
}

fn reservation_request(zone: &str, instances: u32) -> ReservationRequest {
    ReservationRequest {
        placement: Placement {
            region: REGION.into(),
            zone: Some(zone.into()),
            instance_type: "p5.48xlarge".into(),
        },
        instances,
        start: Utc::now(),
        end: Utc::now() + chrono::Duration::days(2),
    }
}

fn purchases(peer: &Ec2Peer) -> Vec<Value> {
    peer.record()["purchases"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn reservations(peer: &Ec2Peer) -> Vec<Value> {
    peer.record()["reservations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn offerings_are_read_from_the_wire() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let a = offering(&cap, "us-east-1a").await;
    assert_eq!(a.offering_id, OFFER_A);
    assert_eq!(a.placement.instance_type, "p5.48xlarge");
    assert_eq!(a.instances, 1);
    assert_eq!((a.start, a.end), (at(2030, 7, 1), at(2030, 7, 2)));
    assert_eq!(a.upfront_fee, 758.88);
    assert_eq!(a.currency, "USD");
}

#[tokio::test(flavor = "multi_thread")]
async fn purchase_buys_exactly_one_block_tagged_with_the_intent() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    let id = id("block-1", "intent-purchase-1");

    let done = cap
        .purchase_block(&offer, &id, false)
        .await
        .expect("bought");
    assert_eq!(done.resource.kind, ResourceKind::CapacityBlock);
    assert!(done.resource.id.starts_with("cr-"), "{:?}", done.resource);
    assert_eq!(done.resource.state, "payment-pending");
    assert!(done.request_id.is_some(), "the request id is kept");
    assert_eq!(done.resource.tags, id.tags());

    let bought = purchases(&peer);
    assert_eq!(bought.len(), 1, "{bought:#?}");
    assert_eq!(bought[0]["offering_id"], OFFER_A);
    assert_eq!(bought[0]["intent"], "intent-purchase-1");
    assert_eq!(bought[0]["tags"][tag::MANAGED_BY], tag::MANAGED_BY_VALUE);
    assert_eq!(
        bought[0]["tag_resource_types"],
        json!(["capacity-reservation"])
    );
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 1);

    // Payment settles: Describe shows it scheduled for its window.
    let seen = cap
        .describe(REGION, ResourceKind::CapacityBlock, &done.resource.id)
        .await
        .unwrap()
        .expect("described");
    assert_eq!(seen.state, "scheduled");
    assert_eq!(seen.end, Some(at(2030, 7, 2)));
    assert!(seen.managed_by_gpucap());
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_purchase_answer_is_unknown_and_found_by_the_intent_tag() {
    let peer = Ec2Peer::with_moto(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    peer.set_faults(&json!({"seed": 1, "rules": [
        {"fault": "drop_response", "action": "PurchaseCapacityBlock"}
    ]}));
    let id = id("block-2", "intent-dropped-2");

    let err = cap.purchase_block(&offer, &id, false).await.unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Unknown, "{err}");
    assert_eq!(err.api, "PurchaseCapacityBlock");
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 1, "never resent");

    // Reconcile: the block is there, found by the intent tag, and was bought once.
    let found = cap
        .find_by_tag(REGION, &[], tag::INTENT, "intent-dropped-2")
        .await
        .expect("find by tag");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, ResourceKind::CapacityBlock);
    assert_eq!(found[0].tags, id.tags());
    let record = peer.record();
    assert_eq!(record["purchases"].as_array().unwrap().len(), 1);
    assert_eq!(record["fault_counts"]["drop_response"], 1);
    assert_eq!(record["intents"]["intent-dropped-2"]["purchases"], 1);
    // Nothing else carries another intent.
    assert!(
        cap.find_by_tag(REGION, &[], tag::INTENT, "intent-other")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_5xx_purchase_is_sent_once_and_is_unknown() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    for (n, status) in [(1u64, 503), (2, 500)] {
        peer.set_faults(&json!({"seed": 1, "rules": [
            {"fault": "status", "status": status, "action": "PurchaseCapacityBlock"}
        ]}));
        let err = cap
            .purchase_block(&offer, &id("block-3", "intent-5xx"), false)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ActErrorKind::Unknown, "{err}");
        assert!(err.request_id.is_some(), "{err:?}");
        assert_eq!(
            peer.calls("PurchaseCapacityBlock"),
            n,
            "HTTP {status}: exactly one request, no SDK retry"
        );
    }
    assert!(purchases(&peer).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn reset_and_timeout_are_unknown_and_never_resent() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity_with(&peer, Duration::from_secs(2)).await;
    let offer = offering(&cap, "us-east-1a").await;

    peer.set_faults(&json!({"seed": 1, "rules": [
        {"fault": "reset", "action": "PurchaseCapacityBlock"}
    ]}));
    let err = cap
        .purchase_block(&offer, &id("block-4", "intent-reset"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Unknown, "{err}");
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 1);
    assert!(
        purchases(&peer).is_empty(),
        "a reset before acting buys nothing"
    );

    // The peer answers after the client gave up, and buys: the dangerous case again.
    peer.set_faults(&json!({"seed": 1, "rules": [
        {"fault": "latency", "seconds": 4, "action": "PurchaseCapacityBlock"}
    ]}));
    let err = cap
        .purchase_block(&offer, &id("block-4", "intent-slow"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Unknown, "{err}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 2);
    let bought = purchases(&peer);
    assert_eq!(bought.len(), 1, "{bought:#?}");
    assert_eq!(bought[0]["intent"], "intent-slow");
}

#[tokio::test(flavor = "multi_thread")]
async fn throttling_is_classified_not_retried() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    // 400 as the brief of the peer says, and 503 as EC2 documents RequestLimitExceeded: the
    // code decides, not the status.
    for (n, status) in [(1u64, 400), (2, 503)] {
        peer.set_faults(&json!({"seed": 1, "rules": [
            {"fault": "throttle", "status": status, "action": ["PurchaseCapacityBlock", "CreateCapacityReservation"]}
        ]}));
        let err = cap
            .purchase_block(&offer, &id("block-5", "intent-throttled"), false)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ActErrorKind::Throttled, "{err}");
        assert_eq!(err.code.as_deref(), Some("RequestLimitExceeded"));
        assert_eq!(peer.calls("PurchaseCapacityBlock"), n);
        let err = cap
            .create_reservation(
                &reservation_request("us-east-1a", 1),
                &id("odcr-5", "i5"),
                false,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind, ActErrorKind::Throttled, "{err}");
        assert_eq!(peer.calls("CreateCapacityReservation"), n);
    }
    let record = peer.record();
    assert_eq!(record["fault_counts"]["throttle"], 4);
    assert!(record["purchases"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_offering_is_offer_expired() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    peer.set_faults(&json!({"seed": 1, "rules": [
        {"fault": "expire_offering", "offering_id": OFFER_A}
    ]}));
    let err = cap
        .purchase_block(&offer, &id("block-6", "intent-expired"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::OfferExpired, "{err}");
    assert_eq!(
        err.code.as_deref(),
        Some("InvalidCapacityBlockOfferingIdExpired")
    );
    assert!(err.request_id.is_some());
    assert!(purchases(&peer).is_empty());
    // A re-quote no longer lists it.
    let other = offering(&cap, "us-east-1b").await;
    assert_eq!(other.offering_id, OFFER_B);
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_is_dry_run_ok_and_buys_nothing() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let offer = offering(&cap, "us-east-1a").await;
    let err = cap
        .purchase_block(&offer, &id("block-7", "intent-dry"), true)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::DryRunOk, "{err}");
    let err = cap
        .create_reservation(
            &reservation_request("us-east-1a", 2),
            &id("odcr-7", "i7"),
            true,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::DryRunOk, "{err}");
    assert!(purchases(&peer).is_empty());
    assert!(reservations(&peer).is_empty());
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_reservation_twice_with_one_token_reserves_once() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let request = reservation_request("us-east-1a", 2);
    let id = id("odcr-8", "intent-odcr-8");

    let first = cap.create_reservation(&request, &id, false).await.unwrap();
    let again = cap.create_reservation(&request, &id, false).await.unwrap();
    assert_eq!(first.resource.id, again.resource.id);
    assert_eq!(first.resource.kind, ResourceKind::Reservation);
    assert_eq!(first.resource.instances, 2);
    assert_eq!(peer.calls("CreateCapacityReservation"), 2);
    let made = reservations(&peer);
    assert_eq!(made.len(), 1, "{made:#?}");
    assert_eq!(made[0]["client_token"], "gpucap-01234567-odcr-8");
    assert_eq!(made[0]["tags"][tag::INTENT], "intent-odcr-8");
    assert_eq!(
        made[0]["tag_resource_types"],
        json!(["capacity-reservation"])
    );
    assert_eq!(made[0]["state"], "active", "starts now: not future-dated");
    assert_eq!(made[0]["end_date_type"], "limited");
    // It ends by itself at the end of the need.
    let end = DateTime::parse_from_rfc3339(made[0]["end"].as_str().unwrap()).unwrap();
    assert_eq!(end.timestamp(), request.end.timestamp());
    assert_eq!(
        first.resource.end.map(|e| e.timestamp()),
        Some(request.end.timestamp())
    );

    // The same token with other parameters is refused.
    let err = cap
        .create_reservation(&reservation_request("us-east-1a", 3), &id, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::IdempotencyConflict, "{err}");
    assert_eq!(reservations(&peer).len(), 1);

    // No token, no call.
    let untokened = Idempotency {
        client_token: None,
        ..id.clone()
    };
    let err = cap
        .create_reservation(&request, &untokened, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert_eq!(peer.calls("CreateCapacityReservation"), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn insufficient_capacity_is_capacity() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    peer.set_faults(&json!({"seed": 1, "rules": [
        {"fault": "ice", "instance_type": "p5.48xlarge", "zone": "us-east-1a"}
    ]}));
    let err = cap
        .create_reservation(
            &reservation_request("us-east-1a", 1),
            &id("odcr-9", "i9"),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Capacity, "{err}");
    assert_eq!(err.code.as_deref(), Some("InsufficientInstanceCapacity"));
    // Another zone has room.
    let done = cap
        .create_reservation(
            &reservation_request("us-east-1b", 1),
            &id("odcr-9b", "i9b"),
            false,
        )
        .await
        .unwrap();
    assert_eq!(done.resource.placement.zone.as_deref(), Some("us-east-1b"));
    // A block in the starved zone too.
    let offer = offering(&cap, "us-east-1a").await;
    let err = cap
        .purchase_block(&offer, &id("block-9", "i9c"), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Capacity, "{err}");
    assert!(purchases(&peer).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn modify_and_cancel_only_gpucap_reservations() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let made = cap
        .create_reservation(
            &reservation_request("us-east-1a", 2),
            &id("odcr-10", "i10"),
            false,
        )
        .await
        .unwrap();
    let cr = made.resource.id.clone();
    let new_end = Utc::now() + chrono::Duration::days(1);
    let done = cap
        .modify_reservation(REGION, &cr, 4, new_end, false)
        .await
        .unwrap();
    assert_eq!(done.resource.instances, 4);
    let record = reservations(&peer);
    assert_eq!(record[0]["instances"], 4);

    let err = cap.cancel_reservation(REGION, &cr, true).await.unwrap_err();
    assert_eq!(err.kind, ActErrorKind::DryRunOk);
    assert_eq!(reservations(&peer)[0]["state"], "active");
    let done = cap.cancel_reservation(REGION, &cr, false).await.unwrap();
    assert_eq!(done.resource.state, "cancelled");
    assert_eq!(reservations(&peer)[0]["state"], "cancelled");

    // Missing: NotFound, nothing sent but the lookup.
    let err = cap
        .cancel_reservation(REGION, "cr-0ffffffffffffffff", false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::NotFound, "{err}");

    // A Capacity Block cannot be cancelled; gpucap says so without asking AWS.
    let offer = offering(&cap, "us-east-1a").await;
    let block = cap
        .purchase_block(&offer, &id("block-10", "i10b"), false)
        .await
        .unwrap();
    let err = cap
        .cancel_reservation(REGION, &block.resource.id, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert!(err.message.contains("Capacity Block"), "{err}");

    // Someone else's reservation (no managed-by tag) is never touched.
    let ec2 = aws_sdk_ec2::Client::new(&raw(&peer).await);
    let theirs = ec2
        .create_capacity_reservation()
        .instance_type("p5.48xlarge")
        .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-east-1a")
        .instance_count(1)
        .send()
        .await
        .unwrap();
    let theirs = theirs
        .capacity_reservation()
        .and_then(|c| c.capacity_reservation_id())
        .unwrap()
        .to_string();
    let err = cap
        .modify_reservation(REGION, &theirs, 1, new_end, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert!(err.message.contains("managed-by=gpucap"), "{err}");
    let err = cap
        .cancel_reservation(REGION, &theirs, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert_eq!(peer.calls("ModifyCapacityReservation"), 1);
    assert_eq!(
        peer.calls("CancelCapacityReservation"),
        2,
        "the dry run and the cancel"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn new_reservations_appear_in_describe_late() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    peer.set_faults(&json!({"seed": 1, "rules": [{"fault": "describe_delay", "seconds": 2}]}));
    let made = cap
        .create_reservation(
            &reservation_request("us-east-1a", 1),
            &id("odcr-11", "i11"),
            false,
        )
        .await
        .unwrap();
    let early = cap
        .describe(REGION, ResourceKind::Reservation, &made.resource.id)
        .await
        .unwrap();
    assert!(early.is_none(), "not visible yet: {early:?}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let late = cap
        .describe(REGION, ResourceKind::Reservation, &made.resource.id)
        .await
        .unwrap()
        .expect("visible after the delay");
    assert_eq!(late.instances, 1);
}

/// A subnet of moto's default VPC.
async fn subnet(sdk: &SdkConfig) -> String {
    let ec2 = aws_sdk_ec2::Client::new(sdk);
    let subnets = ec2.describe_subnets().send().await.expect("moto subnets");
    subnets
        .subnets()
        .iter()
        .find_map(|s| s.subnet_id())
        .expect("moto has a default subnet")
        .to_string()
}

fn pool_spec(name: &str, subnet: &str) -> PoolSpec {
    PoolSpec {
        name: name.into(),
        region: REGION.into(),
        instance_types: vec!["p5.48xlarge".into(), "p4d.24xlarge".into()],
        image: "ami-0123456789abcdef0".into(),
        subnets: vec![subnet.into()],
        security_groups: Vec::new(),
        capacity_reservations: Vec::new(),
        max_size: 8,
        flex_start: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_are_created_once_and_scaled_on_demand_plus_spot() {
    let peer = Ec2Peer::with_moto(&offerings());
    let cap = capacity(&peer).await;
    let sdk = raw(&peer).await;
    let spec = pool_spec("gpucap-train-us-east-1", &subnet(&sdk).await);
    let id = id("pool-1", "intent-pool-1");

    // Dry run first: nothing is created.
    let err = cap.ensure_pool(&spec, &id, true).await.unwrap_err();
    assert_eq!(err.kind, ActErrorKind::DryRunOk, "{err}");
    assert_eq!(peer.calls("CreateAutoScalingGroup"), 0);

    let done = cap.ensure_pool(&spec, &id, false).await.expect("pool");
    assert_eq!(done.resource.kind, ResourceKind::Pool);
    assert_eq!(done.resource.id, spec.name);
    assert!(done.resource.managed_by_gpucap(), "{:?}", done.resource);
    // Again: described, not created twice.
    cap.ensure_pool(&spec, &id, false)
        .await
        .expect("pool again");
    assert_eq!(
        peer.calls("CreateLaunchTemplate"),
        2,
        "the dry run and the real one"
    );
    assert_eq!(peer.calls("CreateAutoScalingGroup"), 1);

    // The launch template and the group carry the tags; the group's propagate.
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let lts = ec2
        .describe_launch_templates()
        .launch_template_names(&spec.name)
        .send()
        .await
        .unwrap();
    let lt = &lts.launch_templates()[0];
    let lt_tags: std::collections::BTreeMap<_, _> = lt
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect();
    assert_eq!(lt_tags, id.tags());
    let asg = aws_sdk_autoscaling::Client::new(&sdk);
    let groups = asg
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(&spec.name)
        .send()
        .await
        .unwrap();
    let group = &groups.auto_scaling_groups()[0];
    assert_eq!(group.max_size(), Some(8));
    assert_eq!(group.desired_capacity(), Some(0));
    for t in group.tags() {
        assert_eq!(t.propagate_at_launch(), Some(true), "{t:?}");
    }
    let group_tags: std::collections::BTreeMap<_, _> = group
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
        .collect();
    assert_eq!(group_tags, id.tags());
    let policy = group
        .mixed_instances_policy()
        .expect("mixed instances policy");
    let types: Vec<_> = policy
        .launch_template()
        .unwrap()
        .overrides()
        .iter()
        .filter_map(|o| o.instance_type())
        .collect();
    assert_eq!(types, ["p5.48xlarge", "p4d.24xlarge"]);

    // Scale: one on-demand, two spot.
    let done = cap
        .scale_pool(
            REGION,
            &spec.name,
            PoolSize {
                on_demand: 1,
                spot: 2,
            },
            false,
        )
        .await
        .expect("scaled");
    assert_eq!(done.resource.instances, 3);
    let groups = asg
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(&spec.name)
        .send()
        .await
        .unwrap();
    let group = &groups.auto_scaling_groups()[0];
    assert_eq!(group.desired_capacity(), Some(3));
    let dist = group
        .mixed_instances_policy()
        .and_then(|p| p.instances_distribution())
        .expect("distribution");
    assert_eq!(dist.on_demand_base_capacity(), Some(1));
    assert_eq!(dist.on_demand_percentage_above_base_capacity(), Some(0));
    let kept: Vec<_> = group
        .mixed_instances_policy()
        .and_then(|p| p.launch_template())
        .map(|lt| {
            lt.overrides()
                .iter()
                .filter_map(|o| o.instance_type())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        kept,
        ["p5.48xlarge", "p4d.24xlarge"],
        "overrides survive a scale"
    );

    // More than the group can hold is refused before sending.
    let err = cap
        .scale_pool(
            REGION,
            &spec.name,
            PoolSize {
                on_demand: 5,
                spot: 5,
            },
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert_eq!(peer.calls("UpdateAutoScalingGroup"), 1);

    // Found by its intent tag: the template and the group.
    let mut kinds: Vec<_> = cap
        .find_by_tag(REGION, &[], tag::INTENT, "intent-pool-1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.kind)
        .collect();
    kinds.sort();
    assert_eq!(kinds, [ResourceKind::LaunchTemplate, ResourceKind::Pool]);
    let described = cap
        .describe(REGION, ResourceKind::Pool, &spec.name)
        .await
        .unwrap()
        .expect("described");
    assert_eq!(described.instances, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_and_templates_without_the_managed_by_tag_are_never_touched() {
    let peer = Ec2Peer::with_moto(&offerings());
    let cap = capacity(&peer).await;
    let sdk = raw(&peer).await;
    let subnet = subnet(&sdk).await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let asg = aws_sdk_autoscaling::Client::new(&sdk);

    // Someone else's template and group.
    ec2.create_launch_template()
        .launch_template_name("theirs")
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id("ami-0123456789abcdef0")
                .instance_type(aws_sdk_ec2::types::InstanceType::from("p5.48xlarge"))
                .build(),
        )
        .send()
        .await
        .unwrap();
    asg.create_auto_scaling_group()
        .auto_scaling_group_name("theirs")
        .launch_template(
            aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                .launch_template_name("theirs")
                .build(),
        )
        .min_size(0)
        .max_size(4)
        .desired_capacity(1)
        .vpc_zone_identifier(&subnet)
        .tags(
            aws_sdk_autoscaling::types::Tag::builder()
                .key("team")
                .value("research")
                .resource_id("theirs")
                .resource_type("auto-scaling-group")
                .build(),
        )
        .send()
        .await
        .unwrap();

    let err = cap
        .scale_pool(
            REGION,
            "theirs",
            PoolSize {
                on_demand: 0,
                spot: 0,
            },
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert!(err.message.contains("managed-by=gpucap"), "{err}");
    let err = cap
        .ensure_pool(
            &pool_spec("theirs", &subnet),
            &id("pool-2", "i-pool-2"),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert_eq!(peer.calls("UpdateAutoScalingGroup"), 0);
    assert_eq!(peer.calls("SetDesiredCapacity"), 0);
    assert_eq!(peer.calls("CreateLaunchTemplate"), 1, "only the test's own");

    // A gpucap pool whose name collides with their template: the template is not adopted.
    asg.delete_auto_scaling_group()
        .auto_scaling_group_name("theirs")
        .force_delete(true)
        .send()
        .await
        .unwrap();
    let err = cap
        .ensure_pool(
            &pool_spec("theirs", &subnet),
            &id("pool-2", "i-pool-2"),
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Other, "{err}");
    assert!(err.message.contains("launch template"), "{err}");
    assert_eq!(
        peer.calls("CreateAutoScalingGroup"),
        1,
        "only the test's own"
    );

    // A pool that does not exist cannot be scaled.
    let scaled = cap.scale_pool(
        REGION,
        "missing",
        PoolSize {
            on_demand: 1,
            spot: 0,
        },
        false,
    );
    assert_eq!(scaled.await.unwrap_err().kind, ActErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reservation_far_ahead_is_future_dated() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    let start = Utc::now() + chrono::Duration::days(10);
    let request = ReservationRequest {
        start,
        end: start + chrono::Duration::days(14),
        ..reservation_request("us-east-1a", 2)
    };
    let done = cap
        .create_reservation(&request, &id("odcr-12", "i12"), false)
        .await
        .unwrap();
    assert_eq!(done.resource.state, "scheduled");
    let made = reservations(&peer);
    assert_eq!(made[0]["delivery_preference"], "incremental");
    let recorded = DateTime::parse_from_rfc3339(made[0]["start"].as_str().unwrap()).unwrap();
    assert_eq!(recorded.timestamp(), start.timestamp());
}

#[tokio::test(flavor = "multi_thread")]
async fn faults_pick_calls_by_index_and_repeat_with_the_seed() {
    let peer = Ec2Peer::start(&offerings());
    let cap = capacity(&peer).await;
    // Only the second call is throttled; the third, with the same token, is the first one's.
    peer.set_faults(&json!({"seed": 3, "rules": [
        {"fault": "throttle", "action": "CreateCapacityReservation", "calls": [2]}
    ]}));
    let request = reservation_request("us-east-1a", 1);
    let id = id("odcr-13", "i13");
    let first = cap.create_reservation(&request, &id, false).await.unwrap();
    let err = cap
        .create_reservation(&request, &id, false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ActErrorKind::Throttled);
    let third = cap.create_reservation(&request, &id, false).await.unwrap();
    assert_eq!(first.resource.id, third.resource.id);
    assert_eq!(reservations(&peer).len(), 1);

    // A probabilistic fault fires on the same calls for the same seed.
    let mut patterns = Vec::new();
    for _ in 0..2 {
        peer.set_faults(&json!({"seed": 42, "rules": [
            {"fault": "status", "status": 500, "action": "DescribeCapacityReservations", "probability": 0.5}
        ]}));
        let mut failed = Vec::new();
        for _ in 0..12 {
            let seen = cap
                .describe(REGION, ResourceKind::Reservation, &first.resource.id)
                .await;
            failed.push(seen.is_err());
        }
        patterns.push(failed);
    }
    assert_eq!(patterns[0], patterns[1]);
    assert!(
        patterns[0].contains(&true) && patterns[0].contains(&false),
        "{patterns:?}"
    );
}

#[test]
#[should_panic(expected = "the AWS act tests need Python 3 on PATH")]
fn a_missing_python_fails_and_says_so() {
    Ec2Peer::start_with_python("/nonexistent/python3", &offerings());
}
