//! `gpucap policy test` and `gpucap policy eval` as a user runs them: the built-in cases pass,
//! a user's policy directory is honoured (from the command line and from gpucap.toml), an
//! invalid policy is reported with its file and line (exit 2), and a failing case fails the run.

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures/policies")
    .join(name)
}

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG")
        .env_remove("GPUCAP_CONFIG")
        .env("NO_COLOR", "1")
        // No config: the commands must not pick up a gpucap.toml from the working directory.
        .arg("--config")
        .arg(fixture("no-such-gpucap.toml"));
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn builtin_cases_pass() {
    let out = gpucap()
        .args(["policy", "test"])
        .output()
        .expect("run gpucap");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for case in [
        "ok      budget_total/over",
        "ok      budget_monthly/at_limit",
        "ok      budget_team/null_team",
        "ok      approval_irreversible/above",
        "ok      residency/region_allowed_cloud_not",
        "ok      spot_critical/critical_interruptible",
        "ok      quote_age/stale_snapshot",
    ] {
        assert!(stdout.contains(case), "missing `{case}` in:\n{stdout}");
    }
    let last = stdout.lines().last().expect("a summary line");
    assert!(last.ends_with("passed, 0 failed"), "{last}");
    let passed: usize = last
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(passed >= 30, "{last}");
}

#[test]
fn user_directory_cases_run_with_its_policies() {
    let out = gpucap()
        .args(["policy", "test"])
        .arg(fixture("team"))
        .output()
        .expect("run gpucap");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("tests/block_too_big"), "{stdout}");
    assert!(stdout.contains("tests/block_ok"), "{stdout}");
    assert!(
        !stdout.contains("_plan"),
        "a shared plan ran as a case:\n{stdout}"
    );
}

#[test]
fn user_policy_denies_show_up_in_eval() {
    let out = gpucap()
        .args(["policy", "eval", "--now", "2027-01-03T06:00:00Z", "--plan"])
        .arg(fixture("team/tests/_plan.json"))
        .arg("--policies")
        .arg(fixture("team"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let decisions: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let deny = decisions["deny"].as_array().expect("a deny list");
    assert_eq!(deny.len(), 1, "{decisions:#}");
    assert_eq!(deny[0]["rule"], "acme.block_size");
    assert_eq!(deny[0]["policy"], "gpucap.policies.acme_block_size");
    assert_eq!(deny[0]["excess"].as_f64(), Some(32.0));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("fix: split the block"), "{stderr}");
    assert!(stderr.contains("plan denied: 1 deny"), "{stderr}");
}

#[test]
fn config_budget_and_policy_directories_are_used() {
    let out = Command::cargo_bin("gpucap")
        .expect("the gpucap binary")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(fixture("project/gpucap.toml"))
        .args(["policy", "eval", "--now", "2027-01-03T06:00:00Z", "--plan"])
        .arg(fixture("team/tests/_plan.json"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let decisions: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let rules: Vec<&str> = decisions["deny"]
        .as_array()
        .expect("deny")
        .iter()
        .map(|d| d["rule"].as_str().expect("a rule"))
        .collect();
    assert_eq!(rules, ["acme.block_size", "budget.total"]);
    assert_eq!(
        decisions["deny"][1]["message"],
        "expected cost $330,000 exceeds the total budget $200,000 by $130,000"
    );
    assert_eq!(decisions["approval"][0]["rule"], "approval.irreversible");
}

#[test]
fn a_plan_within_policy_exits_zero() {
    let out = gpucap()
        .args(["policy", "eval", "--now", "2027-01-03T06:00:00Z", "--plan"])
        .arg(fixture("team/tests/_plan.json"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let decisions: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(decisions["deny"], serde_json::json!([]));
    assert!(text(&out.stderr).contains("plan allowed"));
}

#[test]
fn invalid_policy_names_file_and_line() {
    let out = gpucap()
        .args(["policy", "test"])
        .arg(fixture("invalid"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let file = fixture("invalid/broken.rego");
    let at = format!("{}:", file.display());
    assert!(stderr.contains(&at), "no `{at}` in:\n{stderr}");
    // Line 7 has `> > 1`.
    assert!(stderr.contains(&format!("{at}7:")), "{stderr}");
    assert!(
        stderr.contains("> > 1"),
        "the offending line is shown:\n{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn package_outside_gpucap_policies_is_explained() {
    let out = gpucap()
        .args(["policy", "test"])
        .arg(fixture("outside"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("acme.budget"), "{stderr}");
    assert!(stderr.contains("gpucap.policies.budget"), "{stderr}");
}

#[test]
fn missing_directory_is_an_input_error() {
    let out = gpucap()
        .args(["policy", "test"])
        .arg(fixture("no-such-dir"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("policy directory does not exist"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_failing_case_fails_the_run() {
    let out = gpucap()
        .args(["policy", "test"])
        .arg(fixture("failing"))
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("FAILED  "), "{stdout}");
    assert!(
        stdout.contains("warn: expected [], got [always.warn]"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with(", 1 failed"), "{stdout}");
}

#[test]
fn a_plan_with_a_cost_of_the_wrong_type_is_rejected_not_passed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema": "gpucap.plan/v1", "cost": {"expected_total": "5123456.78"}}"#,
    )
    .expect("write the plan");
    let out = gpucap()
        .args(["policy", "eval", "--plan"])
        .arg(&plan)
        .output()
        .expect("run gpucap");
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&plan.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("`cost.expected_total` must be a number"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no decisions on a bad plan");
}
