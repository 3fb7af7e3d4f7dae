//! Negotiated prices (`[prices.discounts]`, `[[prices.offers]]`) as a user meets them, offline:
//! `gpucap prices` shows them with source `contract` beside the list price; `gpucap plan` buys at
//! them, takes a private offer when it is cheaper and not when it is dearer, and a changed
//! contract changes the plan's fingerprint.

use std::path::Path;

use assert_cmd::Command;
use gpucap::plan::{ActionKind, Plan};
use gpucap::problem::Problem;
use serde_json::Value;

const NOW: &str = "2027-01-04T00:00:00Z";

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("binary");
    cmd.env_remove("RUST_LOG").env(
        "GPUCAP_CACHE_DIR",
        std::env::temp_dir().join("gpucap-test-no-cache"),
    );
    cmd
}

/// A project of one A100 campaign (64 GPUs, four weeks) in us-east-1, with `prices` as its
/// `[prices]` extras.
fn project(dir: &Path, prices: &str) {
    std::fs::create_dir_all(dir.join("calendars")).unwrap();
    std::fs::write(
        dir.join("calendars/train.yaml"),
        "campaigns:\n  - name: finetune\n    accelerator: a100\n    gpus: 64\n    start: 2027-01-11\n    duration: 28d\n    regions: [us-east-1]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("gpucap.toml"),
        format!(
            "[planning]\nstart = 2027-01-04\nhorizon = \"6w\"\n\n[[scenarios]]\nname = \"expected\"\nprobability = 1.0\n\n[prices]\noffline = true\n{prices}"
        ),
    )
    .unwrap();
}

fn plan(dir: &Path) -> (Plan, Problem) {
    let out = gpucap()
        .arg("--config")
        .arg(dir.join("gpucap.toml"))
        .args(["-q", "plan", "--now", NOW, "-o"])
        .arg(dir.join("plan.json"))
        .arg("--emit-problem")
        .arg(dir.join("problem.json"))
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    (
        serde_json::from_str(&read("plan.json")).unwrap(),
        serde_json::from_str(&read("problem.json")).unwrap(),
    )
}

fn on_demand_price(problem: &Problem) -> f64 {
    problem
        .offers
        .iter()
        .find(|o| o.id.ends_with("us-east-1/p4d.24xlarge/on-demand"))
        .expect("the p4d on-demand offer")
        .price_per_instance_hour
}

const PRIVATE: &str = "\n[[prices.offers]]\nreference = \"PPA-7\"\nregion = \"us-east-1\"\ninstance_type = \"p4d.24xlarge\"\nterm = \"28d\"\nearliest_start = 2027-01-11\nlatest_start = 2027-01-11\nquoted = 2027-01-02\n";

#[test]
fn a_discount_lowers_the_price_planned_with_and_changes_the_fingerprint() {
    let list = tempfile::tempdir().unwrap();
    project(list.path(), "");
    let ten = tempfile::tempdir().unwrap();
    project(ten.path(), "\n[prices.discounts]\naws = 10\n");
    let more = tempfile::tempdir().unwrap();
    project(more.path(), "\n[prices.discounts]\naws = 12.5\n");
    let (list_plan, list_problem) = plan(list.path());
    let (ten_plan, ten_problem) = plan(ten.path());
    let (more_plan, more_problem) = plan(more.path());

    let listed = on_demand_price(&list_problem);
    assert!((on_demand_price(&ten_problem) - listed * 0.9).abs() < 1e-4);
    assert!((on_demand_price(&more_problem) - listed * 0.875).abs() < 1e-4);
    assert!(ten_plan.cost.expected_total < list_plan.cost.expected_total);

    let quote = ten_plan
        .quotes
        .iter()
        .find(|q| q.offer.ends_with("us-east-1/p4d.24xlarge/on-demand"))
        .expect("the quote");
    assert_eq!(quote.source, "contract");
    assert_eq!(quote.list_source.as_deref(), Some("snapshot"));
    assert_eq!(quote.list_price_per_instance_hour, Some(listed));
    assert!(
        quote.origin.contains("prices.discounts.\"aws\""),
        "{}",
        quote.origin
    );

    // Another discount, another plan: the config and the problem moved; the list quotes did
    // not (the "why" of `plan --compare-to` names the config, not the clouds' prices).
    assert_ne!(ten_plan.fingerprint.digest, more_plan.fingerprint.digest);
    let digest = |p: &Plan, kind: &str| {
        p.fingerprint
            .inputs
            .iter()
            .find(|i| i.kind == kind)
            .map(|i| i.sha256.clone())
            .unwrap_or_else(|| panic!("a {kind} input"))
    };
    for kind in ["config", "problem"] {
        assert_ne!(digest(&ten_plan, kind), digest(&more_plan, kind), "{kind}");
    }
    assert_eq!(digest(&ten_plan, "quotes"), digest(&more_plan, "quotes"));
}

#[test]
fn a_private_offer_is_bought_when_cheaper_and_not_when_dearer() {
    let cheap = tempfile::tempdir().unwrap();
    project(
        cheap.path(),
        &format!("{PRIVATE}price_per_instance_hour = 20.0\n"),
    );
    let (p, _) = plan(cheap.path());
    let commits: Vec<_> = p
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Commit)
        .collect();
    assert_eq!(commits.len(), 1, "{:#?}", p.actions);
    assert!(
        commits[0].offer.ends_with("/PPA-7/28d"),
        "{}",
        commits[0].offer
    );
    assert_eq!(commits[0].instances, 8);
    assert_eq!(commits[0].start, "2027-01-11T00:00:00Z");
    assert!((commits[0].cost - 8.0 * 20.0 * 28.0 * 24.0).abs() < 1e-6);
    let quote = p
        .quotes
        .iter()
        .find(|q| q.offer.ends_with("/PPA-7"))
        .expect("the contract's quote");
    assert_eq!(quote.source, "contract");
    assert_eq!(quote.list_source, None);
    assert_eq!(quote.fetched_at, "2027-01-02T00:00:00Z");

    let dear = tempfile::tempdir().unwrap();
    project(
        dear.path(),
        &format!("{PRIVATE}price_per_instance_hour = 40.0\n"),
    );
    let (p, problem) = plan(dear.path());
    assert!(problem.offers.iter().any(|o| o.id.contains("PPA-7")));
    assert!(
        p.actions.iter().all(|a| a.kind != ActionKind::Commit),
        "{:#?}",
        p.actions
    );
}

#[test]
fn prices_shows_contract_prices_beside_the_list() {
    let dir = tempfile::tempdir().unwrap();
    project(
        dir.path(),
        &format!(
            "\n[prices.discounts]\naws = 10\n\"aws.p4d.capacity_block\" = 5\n{PRIVATE}discount = 20\n"
        ),
    );
    let out = gpucap()
        .arg("--config")
        .arg(dir.path().join("gpucap.toml"))
        .args([
            "prices",
            "--offline",
            "-a",
            "a100",
            "--cloud",
            "aws",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let find = |region: &str, kind: &str| {
        rows.iter()
            .find(|r| r["region"] == region && r["kind"] == kind)
            .unwrap_or_else(|| panic!("{region} {kind}: {rows:#?}"))
    };
    let dec = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    let od = find("us-east-1", "on-demand");
    assert_eq!(od["source"], "contract");
    assert_eq!(od["list_source"], "snapshot");
    assert!(
        (dec(&od["price_per_instance_hour"]) - 0.9 * dec(&od["list_price_per_instance_hour"]))
            .abs()
            < 1e-4
    );
    let block = find("us-east-2", "capacity-block");
    assert!(
        (dec(&block["price_per_instance_hour"])
            - 0.95 * dec(&block["list_price_per_instance_hour"]))
        .abs()
            < 1e-4
    );
    let private = find("us-east-1", "commitment");
    assert_eq!(private["offering_id"], "contract:PPA-7");
    // 20 % off the on-demand list price (the snapshot lists no 28-day term), not off the
    // discounted price.
    assert!(
        (dec(&private["price_per_instance_hour"]) - 0.8 * dec(&od["list_price_per_instance_hour"]))
            .abs()
            < 1e-4
    );

    let table = gpucap()
        .arg("--config")
        .arg(dir.path().join("gpucap.toml"))
        .args(["prices", "--offline", "-a", "a100", "--cloud", "aws"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    // The per-GPU list price beside the contract price (to the table's decimals).
    let od_list = format!("{:.4}", dec(&od["list_price_per_instance_hour"]) / 8.0);
    assert!(
        text.contains("contract") && text.contains(&format!("(list {}", &od_list[..4])),
        "{text}"
    );
    assert!(
        !text.contains("STALE"),
        "contract prices on the snapshot are dated, not stale: {text}"
    );
}
