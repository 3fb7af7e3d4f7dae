//! `gpucap plan` reading the account's quotas live, as issue #11 asks: against a local server
//! replaying the Azure Retail Prices API (live prices) and the local ARM peer
//! (`tests/peers/azure_arm_peer.py`), which answers Compute's usage list with the quotas a test
//! sets and records every call. A quota read shows in the plan as `live` with its value and
//! the plan keeps within it (or asks for the increase it needs); `[quotas]` wins over what the
//! cloud says (and the cloud is then not asked); a refused read falls back to the stated
//! default and says so; an offline plan never calls the cloud.
//!
//! Nothing is skipped: without `python3` the peer fails to start and says so.

// Both peers' helpers include `peer_process.rs` (each is written to stand alone).
#![allow(clippy::duplicate_mod)]

#[path = "support/azure_peer.rs"]
mod azure_peer;
#[path = "support/canned_http.rs"]
mod canned_http;
#[path = "support/ec2_peer.rs"]
mod ec2_peer;
#[cfg(feature = "gcp")]
#[path = "support/gce_peer.rs"]
mod gce_peer;
#[allow(clippy::incompatible_msrv)]
#[path = "support/python.rs"]
mod python;

use std::path::Path;

use assert_cmd::Command;
use azure_peer::{AzurePeer, SUBSCRIPTION};
use ec2_peer::Ec2Peer;
use gpucap::plan::Plan;
use serde_json::json;

const TOKEN: &str = "peer-static-token-4b1d";
const QUOTA: &str = "azure/eastus/standardNDISRH100v5Family";

/// One page of the Retail Prices API: the ND96isr H100 v5 (8 GPUs, 96 vCPUs) on demand in
/// eastus.
const PAGE: &str = r#"{"BillingCurrency":"USD","Items":[
 {"currencyCode":"USD","retailPrice":98.32,"unitPrice":98.32,"armRegionName":"eastus","meterName":"ND96isr H100 v5",
  "skuName":"ND96isr H100 v5","productName":"Virtual Machines NDsr H100 v5 Series","type":"Consumption",
  "unitOfMeasure":"1 Hour","armSkuName":"Standard_ND96isr_H100_v5"}],"NextPageLink":null,"Count":1}"#;

/// Answers every request with [`PAGE`], for as long as the test runs.
fn retail_prices() -> String {
    canned_http::always(200, "OK", PAGE) + "/api/retail/prices"
}

/// A project whose one pool needs 32 H100s in eastus for two weeks: with the default 10 %
/// buffer, five ND96isr.
fn project(dir: &Path, quotas: &str) -> std::path::PathBuf {
    project_in(dir, "eastus", quotas)
}

/// The same project in `region`.
fn project_in(dir: &Path, region: &str, quotas: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("calendars")).unwrap();
    std::fs::write(
        dir.join("calendars/team.yaml"),
        format!(
            "campaigns:\n  - name: finetune\n    accelerator: H100\n    gpus: 32\n    start: 2027-01-11\n    end: 2027-01-25\n    interruptible: false\n    regions: [{region}]\n    team: research\n",
        ),
    )
    .unwrap();
    let config = dir.join("gpucap.toml");
    std::fs::write(
        &config,
        format!(
            "[planning]\nstart = 2027-01-04\nhorizon = \"4w\"\n\n[inputs]\ncalendars = [\"calendars/*\"]\n\n[pools.h100]\naccelerator = \"h100\"\nregions = [\"{region}\"]\n\n[budget]\ntotal = 10_000_000\n{quotas}"
        ),
    )
    .unwrap();
    config
}

/// `gpucap plan` with live prices and the ARM peer: the plan, stderr.
fn plan(config: &Path, prices: &str, peer: &AzurePeer, extra: &[&str]) -> (Plan, String) {
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("GPUCAP_CACHE_DIR", cache.path())
        .env("GPUCAP_AZURE_PRICES_URL", prices)
        .env("GPUCAP_AZURE_ENDPOINT_URL", peer.url())
        .env("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
        .env("AZURE_ACCESS_TOKEN", TOKEN)
        .arg("--config")
        .arg(config)
        // No `--now`: the quotes are fetched now and their age is checked against it.
        .args(["plan", "--format", "json", "--time-limit", "30"])
        .args(extra);
    run_plan(&mut cmd)
}

/// Runs `gpucap plan --format json …` as `cmd` says: the plan on stdout, and stderr, in which
/// the secret [`TOKEN`] must not appear.
fn run_plan(cmd: &mut Command) -> (Plan, String) {
    let out = cmd.output().expect("run gpucap");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains(TOKEN), "the secret leaked: {stderr}");
    let plan: Plan = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no plan on stdout ({e}); stderr:\n{stderr}"));
    (plan, stderr)
}

/// The plan's check of [`QUOTA`] (Azure spells its quota names in any case).
fn check<'a>(plan: &'a Plan, stderr: &str) -> &'a gpucap::plan::QuotaCheck {
    plan.quotas
        .iter()
        .find(|q| q.quota.eq_ignore_ascii_case(QUOTA))
        .unwrap_or_else(|| panic!("{QUOTA} is not checked: {:?}\n{stderr}", plan.quotas))
}

/// The plan's check of quota `id` (`cloud/region/name`, exactly).
fn check_of<'a>(plan: &'a Plan, stderr: &str, id: &str) -> &'a gpucap::plan::QuotaCheck {
    plan.quotas
        .iter()
        .find(|q| q.quota == id)
        .unwrap_or_else(|| panic!("{id} is not checked: {:?}\n{stderr}", plan.quotas))
}

/// The most vCPUs of the quota the plan's actions use at once.
fn most_used(plan: &Plan, q: &gpucap::plan::QuotaCheck) -> u64 {
    let mut used = vec![0u64; plan.horizon.hours as usize];
    for a in &plan.actions {
        if let Some(&w) = q.offers.get(&a.offer) {
            let to = (a.end_hour as usize).min(used.len());
            for u in used.iter_mut().take(to).skip(a.start_hour as usize) {
                *u += u64::from(w) * u64::from(a.instances);
            }
        }
    }
    used.into_iter().max().unwrap_or(0)
}

#[test]
fn a_live_quota_is_read_once_used_and_kept() {
    let prices = retail_prices();
    // Room for the five ND96isr (480 vCPUs) the demand needs with its 10 % buffer, and a bit.
    let peer = AzurePeer::start(&json!({"usages": {"eastus": {
        "cores": 2000, "standardNDISRH100v5Family": 500, "lowPriorityCores": 0
    }}}));
    let dir = tempfile::tempdir().unwrap();
    let (plan, stderr) = plan(&project(dir.path(), ""), &prices, &peer, &[]);
    assert!(
        stderr.contains("reading quotas: azure eastus (standardNDISRH100v5Family)"),
        "{stderr}"
    );
    let q = check(&plan, &stderr);
    assert_eq!((q.source.as_str(), q.value), ("live", 500), "{q:?}");
    let used = most_used(&plan, q);
    assert!(used > 0 && used <= 500, "{used} vCPUs of 500\n{stderr}");
    assert!(
        plan.quota_increases.is_empty(),
        "{:?}",
        plan.quota_increases
    );
    assert_eq!(peer.calls("LIST usages"), 1, "{}", peer.record());
}

#[test]
fn a_small_live_quota_makes_the_plan_ask_for_an_increase() {
    let prices = retail_prices();
    // Two ND96isr's worth: the demand needs five.
    let peer = AzurePeer::start(&json!({"usages": {"eastus": {"standardNDISRH100v5Family": 192}}}));
    let dir = tempfile::tempdir().unwrap();
    let (plan, stderr) = plan(&project(dir.path(), ""), &prices, &peer, &[]);
    let q = check(&plan, &stderr);
    assert_eq!((q.source.as_str(), q.value), ("live", 192), "{q:?}");
    let inc = plan
        .quota_increases
        .iter()
        .find(|i| i.region == "eastus" && i.quota == "standardNDISRH100v5Family")
        .unwrap_or_else(|| panic!("no increase asked: {:?}\n{stderr}", plan.quota_increases));
    assert!(inc.needed, "{inc:?}");
    assert_eq!((inc.current, inc.current_source.as_str()), (192, "live"));
    assert!(inc.requested >= 480, "{inc:?}");
    assert!(
        plan.gates
            .deny
            .iter()
            .any(|d| d.rule == "quota.increase_needed"),
        "{:?}",
        plan.gates.deny
    );
}

#[test]
fn the_config_wins_over_the_cloud_which_is_then_not_asked() {
    let prices = retail_prices();
    let peer =
        AzurePeer::start(&json!({"usages": {"eastus": {"standardNDISRH100v5Family": 9600}}}));
    let dir = tempfile::tempdir().unwrap();
    let config = project(
        dir.path(),
        &format!("\n[quotas.limits]\n\"{QUOTA}\" = 768\n"),
    );
    let (plan, stderr) = plan(&config, &prices, &peer, &[]);
    let q = check(&plan, &stderr);
    assert_eq!((q.source.as_str(), q.value), ("config", 768), "{q:?}");
    assert!(most_used(&plan, q) <= 768);
    assert_eq!(peer.calls("LIST usages"), 0, "{}", peer.record());
    assert!(!stderr.contains("reading quotas"), "{stderr}");
}

#[test]
fn a_refused_read_falls_back_to_the_stated_default_and_says_why() {
    let prices = retail_prices();
    let peer =
        AzurePeer::start(&json!({"usages": {"eastus": {"standardNDISRH100v5Family": 9600}}}));
    peer.set_faults(&json!({"rules": [
        {"fault": "status", "op": "LIST usages", "status": 403, "code": "AuthorizationFailed"}
    ]}));
    let dir = tempfile::tempdir().unwrap();
    let (plan, stderr) = plan(&project(dir.path(), ""), &prices, &peer, &[]);
    let q = check(&plan, &stderr);
    println!("{stderr}");
    // The stated offline default for an Azure family: 768 vCPUs.
    assert_eq!((q.source.as_str(), q.value), ("default", 768), "{q:?}");
    let note = plan
        .assumptions
        .iter()
        .find(|a| a.starts_with("azure quotas"))
        .unwrap_or_else(|| panic!("no note on the quota read: {:?}", plan.assumptions));
    assert!(
        note.contains("eastus/standardNDISRH100v5Family")
            && note.contains("AuthorizationFailed")
            && note.contains("offline default"),
        "{note}"
    );
    assert!(!note.contains(TOKEN), "{note}");
    assert!(stderr.contains(&format!("warning: {note}")), "{stderr}");
    assert!(
        plan.assumptions
            .iter()
            .any(|a| a.contains("gpucap's assumption, not a cloud figure")),
        "{:?}",
        plan.assumptions
    );
}

#[test]
fn an_offline_plan_never_calls_the_cloud() {
    let prices = retail_prices();
    let peer =
        AzurePeer::start(&json!({"usages": {"eastus": {"standardNDISRH100v5Family": 9600}}}));
    let dir = tempfile::tempdir().unwrap();
    let (plan, stderr) = plan(&project(dir.path(), ""), &prices, &peer, &["--offline"]);
    let q = check(&plan, &stderr);
    assert_eq!(q.source, "default", "{q:?}");
    assert_eq!(peer.record()["requests"], 0, "{}", peer.record());
}

/// AWS: the EC2 peer answers Service Quotas (and refuses the price calls, so AWS's prices come
/// from the built-in snapshot: still a live run, which reads quotas).
#[test]
fn aws_quotas_are_read_from_service_quotas_with_the_default_where_none_is_applied() {
    let peer = Ec2Peer::start(&json!({
        "service_quotas": {"us-east-1": {"L-417A185B": 1536}},
        "service_quota_defaults": {"L-7212CCBC": 0}
    }));
    let dir = tempfile::tempdir().unwrap();
    let config = project_in(dir.path(), "us-east-1", "");
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("GPUCAP_CACHE_DIR", cache.path())
        .env("GPUCAP_AWS_ENDPOINT_URL", peer.url())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "peer-access-key")
        .env("AWS_SECRET_ACCESS_KEY", TOKEN)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.path().join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.path().join("no-aws-credentials"),
        )
        .env("GPUCAP_RETRY_BASE_MS", "5")
        .arg("--config")
        .arg(&config)
        .args(["plan", "--format", "json", "--time-limit", "30"]);
    let (plan, stderr) = run_plan(&mut cmd);
    assert!(
        stderr.contains("reading quotas: aws us-east-1 (L-417A185B, L-7212CCBC)"),
        "{stderr}"
    );
    let find = |name: &str| check_of(&plan, &stderr, &format!("aws/us-east-1/{name}"));
    let on_demand = find("L-417A185B");
    assert_eq!((on_demand.source.as_str(), on_demand.value), ("live", 1536));
    assert!(most_used(&plan, on_demand) <= 1536);
    // No applied value: AWS's default for P spot requests, 0 — so no spot runs.
    let spot = find("L-7212CCBC");
    assert_eq!((spot.source.as_str(), spot.value), ("live", 0));
    assert_eq!(most_used(&plan, spot), 0);
    let calls = peer.record()["service_quota_calls"].clone();
    assert_eq!(
        calls.as_array().map(Vec::len),
        Some(3),
        "one GetServiceQuota per quota and one GetAWSDefaultServiceQuota: {calls}"
    );
}

/// GCP (built with `--features gcp`): the Compute Engine peer answers `regions.get` (and
/// refuses the Billing Catalog, so GCP's prices come from the built-in snapshot: still a live
/// run, which reads quotas).
#[cfg(feature = "gcp")]
#[test]
fn gcp_quotas_are_read_from_the_region_once() {
    let peer = gce_peer::GcePeer::start(&json!({"region_quotas": {"us-central1": {
        "CPUS": 2400, "NVIDIA_H100_GPUS": 48, "PREEMPTIBLE_NVIDIA_H100_GPUS": 0
    }}}));
    let dir = tempfile::tempdir().unwrap();
    let config = project_in(dir.path(), "us-central1", "");
    let cache = tempfile::tempdir().unwrap();
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env("NO_COLOR", "1")
        .env("GPUCAP_CACHE_DIR", cache.path())
        .env("GOOGLE_CLOUD_PROJECT", gce_peer::PROJECT)
        .env("GPUCAP_GCP_API_KEY", TOKEN)
        .env("GPUCAP_GCP_COMPUTE_ENDPOINT_URL", peer.url())
        .env("GPUCAP_GCP_BILLING_ENDPOINT_URL", peer.url())
        .env("GPUCAP_RETRY_BASE_MS", "5")
        .arg("--config")
        .arg(&config)
        .args(["plan", "--format", "json", "--time-limit", "30"]);
    let (plan, stderr) = run_plan(&mut cmd);
    assert!(
        stderr.contains("reading quotas: gcp us-central1 (NVIDIA_H100_GPUS"),
        "{stderr}"
    );
    let find = |name: &str| check_of(&plan, &stderr, &format!("gcp/us-central1/{name}"));
    let on_demand = find("NVIDIA_H100_GPUS");
    assert_eq!((on_demand.source.as_str(), on_demand.value), ("live", 48));
    assert!(most_used(&plan, on_demand) <= 48);
    assert_eq!(peer.calls("regions.get"), 1, "{}", peer.record());
}
