//! The capacity board's exercise (`examples/board-exercise`, issue #12) planned as a user runs
//! it: every figure its README gives is computed here from gpucap's own plan and must appear in
//! the README word for word, so the README cannot drift from what gpucap says.

#[path = "support/files.rs"]
mod files;
use files::copy_dir;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gpucap::plan::{ActionKind, Plan};

/// The exercise is planned as of its first day, so booking windows do not depend on today.
const NOW: &str = "2027-01-04T00:00:00Z";

fn example_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/board-exercise")
}

fn plan(config: &Path) -> Plan {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("plan.json");
    let run = Command::cargo_bin("gpucap")
        .expect("the gpucap binary")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env(
            "GPUCAP_CACHE_DIR",
            std::env::temp_dir().join("gpucap-test-no-cache"),
        )
        .arg("--config")
        .arg(config)
        .args(["-q", "plan", "--now", NOW, "-o"])
        .arg(&out)
        .output()
        .expect("run gpucap");
    assert_eq!(
        run.status.code(),
        Some(0),
        "gpucap plan failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&out).expect("the plan")).expect("a plan")
}

/// `$1,234,567`, whole dollars.
fn usd(x: f64) -> String {
    format!("${}", thousands(x.round() as u64))
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The p50 of production inference in force at `day` (YYYY-MM-DD), from the forecast file.
fn inference_p50_at(day: &str) -> u32 {
    let text = std::fs::read_to_string(example_dir().join("forecasts/production-inference.csv"))
        .expect("the forecast");
    let mut value = None;
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').collect();
        if cols[0] > day {
            break;
        }
        value = Some(cols[2].parse().expect("a p50"));
    }
    value.expect("a row before the day")
}

fn scenario_total(plan: &Plan, name: &str) -> f64 {
    plan.cost
        .by_scenario
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("scenario {name}"))
        .total
}

fn baseline(plan: &Plan, name: &str) -> f64 {
    plan.baselines
        .iter()
        .find(|b| b.name == name)
        .and_then(|b| b.expected_total)
        .unwrap_or_else(|| panic!("baseline {name}"))
}

#[test]
fn the_readme_gives_gpucaps_own_answer() {
    let readme = std::fs::read_to_string(example_dir().join("README.md")).expect("the README");
    let plan = plan(&example_dir().join("gpucap.toml"));
    let mut expected: Vec<String> = Vec::new();

    // How much to commit: the one commitment, from the contract offer.
    let commits: Vec<_> = plan
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Commit)
        .collect();
    assert_eq!(commits.len(), 1, "one commitment: {commits:#?}");
    let commit = commits[0];
    assert!(
        commit.offer.contains("AWS-PPA-2027-renewal"),
        "the contract offer is what gpucap commits to: {}",
        commit.offer
    );
    let quote = plan
        .quotes
        .iter()
        .find(|q| commit.offer.starts_with(&q.offer))
        .expect("the contract's quote");
    assert_eq!(quote.source, "contract");
    assert_eq!(quote.list_source.as_deref(), Some("snapshot"));
    expected.push(format!(
        "commit **{} {} ({} A100s)** for 3 years from {}, {} over the term",
        commit.instances,
        commit.instance_type,
        thousands(u64::from(commit.gpus)),
        &commit.start[..10],
        usd(commit.cost)
    ));
    expected.push(format!(
        "${:.4} per instance-hour, 20 % off the ${:.4} list price",
        quote.price_per_instance_hour,
        quote.list_price_per_instance_hour.expect("a list price")
    ));

    // The rule of thumb: 70 % of production inference when the commitment starts.
    let baseline_gpus = inference_p50_at(&commit.start[..10]);
    let rule_gpus = (0.7 * f64::from(baseline_gpus)).ceil() as u32;
    let rule_instances = rule_gpus.div_ceil(8);
    expected.push(format!(
        "70 % of the {baseline_gpus} A100s production inference needs then is {rule_gpus} A100s, \
         **{rule_instances} instances**"
    ));
    let ratio = f64::from(commit.instances) / f64::from(rule_instances);
    expected.push(format!("{ratio:.1} times the rule of thumb"));

    // The rule of thumb planned: the same exercise with the offer capped at that size.
    let capped = tempfile::tempdir().expect("tempdir");
    copy_dir(&example_dir(), capped.path());
    let config = capped.path().join("gpucap.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replace(
        "quoted = 2027-01-04\n",
        &format!("quoted = 2027-01-04\nmax_instances = {rule_instances}\n"),
    );
    std::fs::write(&config, text).expect("write");
    let rule = plan_capped(&config, rule_instances);
    let extra = rule.cost.expected_total - plan.cost.expected_total;
    assert!(
        extra > 0.0,
        "the capped plan cannot be cheaper: {extra} (gpucap's plan is optimal)"
    );
    expected.push(format!(
        "expected cost {}, {} more than gpucap's plan",
        usd(rule.cost.expected_total),
        usd(extra)
    ));

    // What the burst runs on.
    let blocks: Vec<_> = plan
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::PurchaseCapacityBlock)
        .collect();
    assert!(!blocks.is_empty(), "the burst runs on capacity blocks");
    for b in &blocks {
        expected.push(format!(
            "| {} × {} in {} | {} → {} | {} |",
            b.instances,
            b.instance_type,
            b.region,
            b.start.replace('T', " ").trim_end_matches(":00Z"),
            b.end.replace('T', " ").trim_end_matches(":00Z"),
            usd(b.cost)
        ));
    }
    let training_on_demand: f64 = plan
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::RunOnDemand && a.pool == "a100-training")
        .map(|a| a.cost)
        .sum();
    expected.push(format!(
        "on-demand instances for the hours the blocks leave ({})",
        usd(training_on_demand)
    ));

    // The expected cost against the simple strategies.
    let all_on_demand = baseline(&plan, "all-on-demand");
    let cheapest_now = baseline(&plan, "cheapest-now");
    let saving = |b: f64| 100.0 * (b - plan.cost.expected_total) / b;
    expected.push(format!(
        "| gpucap's plan | {} |",
        usd(plan.cost.expected_total)
    ));
    expected.push(format!(
        "| all on-demand | {} | {} ({:.1} %) |",
        usd(all_on_demand),
        usd(all_on_demand - plan.cost.expected_total),
        saving(all_on_demand)
    ));
    expected.push(format!(
        "| cheapest-now | {} | {} ({:.1} %) |",
        usd(cheapest_now),
        usd(cheapest_now - plan.cost.expected_total),
        saving(cheapest_now)
    ));

    // Each scenario, and what sits idle when the feature slips.
    for name in ["expected", "feature-slips-a-quarter", "success-burst"] {
        let stranded = plan
            .risk
            .stranded
            .iter()
            .find(|s| s.scenario == name)
            .expect("idle capacity per scenario");
        expected.push(format!(
            "| `{name}` | {} | {} GPU-h ({}) |",
            usd(scenario_total(&plan, name)),
            thousands(stranded.gpu_hours),
            usd(stranded.cost)
        ));
    }
    let slip = plan
        .risk
        .stranded
        .iter()
        .find(|s| s.scenario == "feature-slips-a-quarter")
        .expect("the slip scenario");
    let idle = |pool: &str| {
        slip.pools
            .iter()
            .find(|p| p.pool == pool)
            .unwrap_or_else(|| panic!("idle capacity in {pool}"))
    };
    let committed = idle("a100-east");
    let blocks_idle = idle("a100-training");
    expected.push(format!(
        "**{} GPU-hours of committed capacity sit idle ({})**",
        thousands(committed.gpu_hours),
        usd(committed.cost)
    ));
    expected.push(format!(
        "the capacity blocks bought for Q3 go unused: {} GPU-hours ({})",
        thousands(blocks_idle.gpu_hours),
        usd(blocks_idle.cost)
    ));

    let missing: Vec<&String> = expected.iter().filter(|e| !readme.contains(*e)).collect();
    assert!(
        missing.is_empty(),
        "examples/board-exercise/README.md does not say what gpucap says; missing:\n{}",
        missing
            .iter()
            .map(|s| format!("  {s}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The capped exercise's plan, checked to commit exactly the cap.
fn plan_capped(config: &Path, cap: u32) -> Plan {
    let p = plan(config);
    let committed: u32 = p
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::Commit)
        .map(|a| a.instances)
        .sum();
    assert_eq!(committed, cap, "the capped plan commits the cap");
    p
}
