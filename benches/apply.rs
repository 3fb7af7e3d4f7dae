//! `cargo bench --bench apply`: applies a plan of 200 capacity block purchases through the
//! real AWS SDK against the local EC2 capacity peer, with faults injected at a fixed seed
//! (throttling, 503s, connection resets, answers dropped after the purchase happened, and
//! eventually consistent describes). Prints the time, the calls made, the retries, the
//! unknown outcomes settled, and the duplicate purchases counted by the peer (must be 0).
//!
//! A benchmark, not a test: it prints figures for docs/apply.md and fails only when something
//! was bought twice or not at all.

#[path = "../tests/support/ec2_peer.rs"]
mod ec2_peer;
#[path = "../tests/support/python.rs"]
mod python;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpucap::apply::{self, Clouds, Settings};
use gpucap::plan::Plan;
use gpucap::plan::due::{self, Window};
use gpucap::state::LocalBackend;
use gpucap_provider::Cloud;
use gpucap_provider::capacity::Capacity;
use serde_json::json;

const ACTIONS: usize = 200;
const SEED: u64 = 42;

fn main() {
    let now: DateTime<Utc> = "2027-01-01T00:00:00Z".parse().unwrap();
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"];
    let mut actions = Vec::new();
    let mut offerings = Vec::new();
    for i in 0..ACTIONS {
        let start =
            now + chrono::Duration::days(1 + (i / 8) as i64) + chrono::Duration::minutes(690);
        let days = 1 + (i % 7) as i64;
        let end = start + chrono::Duration::days(days);
        let zone = zones[i % zones.len()];
        let n = 1 + (i % 8) as u32;
        let cost = 1_000.0 * f64::from(n) * days as f64;
        let id = format!("block-bench-aws-{zone}-p5-48xlarge-{n}x-{i:03}");
        actions.push(json!({
            "id": id, "kind": "purchase_capacity_block", "pool": "bench", "cloud": "aws",
            "region": "us-east-1", "zone": zone, "instance_type": "p5.48xlarge",
            "instances": n, "gpus": n * 8, "start": start.to_rfc3339(), "end": end.to_rfc3339(),
            "start_hour": 0, "end_hour": 0, "due": now.to_rfc3339(), "bookable_from": null,
            "cost": cost, "irreversible": true, "offer": format!("offer-{i}"),
            "offering_id": null, "campaigns": []
        }));
        offerings.push(json!({
            "id": format!("cb-{i:03}"), "instance_type": "p5.48xlarge", "zone": zone,
            "instance_count": n, "start": start.to_rfc3339(), "end": end.to_rfc3339(),
            "upfront_fee": format!("{cost:.2}"), "currency": "USD"
        }));
    }
    let plan: Plan = serde_json::from_value(json!({
        "schema": "gpucap.plan/v1", "created_at": now.to_rfc3339(),
        "horizon": {"start": now.to_rfc3339(), "end": (now + chrono::Duration::days(60)).to_rfc3339(), "hours": 1440},
        "fingerprint": {"digest": format!("sha256:{}", "5e".repeat(32)), "inputs": []},
        "solution": {"status": "optimal", "expected_cost": 0.0, "bound": 0.0, "term_cost": 0.0},
        "cost": {"expected_total": 0.0, "irreversible": 0.0, "by_scenario": [], "by_month": [],
                 "by_pool": [], "by_team": [], "by_kind": {"on_demand": 0.0, "spot": 0.0,
                 "capacity_block": 0.0, "reservation": 0.0, "commitment": 0.0}},
        "baselines": [], "risk": {"worst_scenario": "", "worst_total": 0.0, "stranded": []},
        "actions_scenario": "expected", "actions": actions, "pools": [], "campaigns": [],
        "quotes": [], "assumptions": []
    }))
    .expect("the bench plan is a plan");

    let peer = ec2_peer::Ec2Peer::start(&json!({ "offerings": offerings }));
    let faults = json!({"seed": SEED, "rules": [
        {"fault": "throttle", "probability": 0.10},
        {"fault": "status", "status": 503, "probability": 0.05},
        {"fault": "reset", "probability": 0.03},
        {"fault": "drop_response", "action": "PurchaseCapacityBlock", "probability": 0.05},
        {"fault": "describe_delay", "seconds": 0.3}
    ]});
    peer.set_faults(&faults);

    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let aws = runtime.block_on(async {
        let mut config = gpucap_aws::act::AwsCapacityConfig::new("us-east-1");
        config.endpoint_url = Some(peer.url());
        config.static_credentials = Some(gpucap_aws::StaticCredentials {
            access_key_id: "bench-access-key".into(),
            secret_access_key: "bench-secret-key".into(),
        });
        config.operation_timeout = Duration::from_secs(10);
        gpucap_aws::act::AwsCapacity::with_config(config)
            .await
            .expect("connect to the peer")
    });
    let clouds = Clouds::default().with(Cloud::Aws, Arc::new(aws) as Arc<dyn Capacity>);
    let settings = Settings {
        reconcile_wait: Duration::from_secs(1),
        reconcile_poll: Duration::from_millis(100),
        retry_min_delay: Duration::from_millis(20),
        retry_max_delay: Duration::from_millis(500),
        retry_max_times: 8,
        ..Settings::new(now)
    };
    let selected = due::select(
        &plan,
        &Window {
            now,
            window: chrono::Duration::days(7),
        },
    )
    .unwrap();
    let progress = |_: &str| {};
    let started = Instant::now();
    let summary = runtime
        .block_on(apply::run(apply::Run {
            plan: &plan,
            due: &selected.due,
            launch: &BTreeMap::new(),
            clouds: &clouds,
            backend: &backend,
            settings: &settings,
            lock_timeout: Duration::from_secs(1),
            who: "bench".into(),
            approval: None,
            progress: &progress,
        }))
        .expect("the run finishes");
    let elapsed = started.elapsed();

    let record = peer.record();
    let mut sold: BTreeMap<String, u64> = BTreeMap::new();
    for p in record["purchases"].as_array().unwrap() {
        *sold
            .entry(p["offering_id"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    let duplicates: u64 = sold.values().map(|n| n.saturating_sub(1)).sum();
    let not_done = summary
        .reports
        .iter()
        .filter(|r| !matches!(r.outcome, apply::Outcome::Done { .. }))
        .count();
    println!("apply benchmark: {ACTIONS} capacity block purchases, faults at seed {SEED}");
    println!("  faults injected     {}", record["fault_counts"]);
    println!("  time                {:.2} s", elapsed.as_secs_f64());
    println!("  requests (peer)     {}", record["requests"]);
    println!("  API calls (gpucap)  {}", summary.counts.calls);
    println!("  retries             {}", summary.counts.retries);
    println!("  purchases sent      {}", summary.counts.purchases_sent);
    println!("  unknown, settled    {}", summary.counts.reconciled);
    println!("  journal records     {}", summary.counts.journal_records);
    println!("  blocks sold (peer)  {}", sold.len());
    println!("  not done            {not_done}");
    println!("  duplicate purchases {duplicates}");
    assert_eq!(duplicates, 0, "something was bought twice: {sold:?}");
    assert_eq!(
        sold.len(),
        ACTIONS - not_done,
        "the state and the peer disagree"
    );
}
