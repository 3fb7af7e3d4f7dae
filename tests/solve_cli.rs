//! `gpucap solve` as a user runs it: every fixture in `tests/fixtures/problems/` through the
//! binary and the independent checker, the table summary, infeasible problems explained, and
//! each kind of malformed problem rejected with its field path and exit status 2.

mod solver_check;

use std::path::PathBuf;

use assert_cmd::Command;
use gpucap::problem::{Problem, Solution, Status};

fn fixture(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures/problems")
    .join(name)
}

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Solves a fixture with the binary and checks the solution.
fn solve(name: &str) -> (Problem, Solution) {
    let path = fixture(name);
    let out = gpucap()
        .arg("solve")
        .arg(&path)
        .output()
        .expect("run gpucap");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problem: Problem =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("problem");
    let solution: Solution =
        serde_json::from_slice(&out.stdout).expect("a solution document on stdout");
    solver_check::assert_checks(&problem, &solution);
    (problem, solution)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

#[test]
fn the_spec_example_is_solved_to_optimality() {
    let (_, s) = solve("spec-example.json");
    assert_eq!(s.status, Status::Optimal);
    // Cross-checked with HiGHS on the hourly model (tests/solver_highs.rs).
    assert!(close(s.expected_cost, 358_182.992), "{}", s.expected_cost);
    assert!(s.message.is_none());
}

#[test]
fn mixed_instance_sizes_and_scenario_limits() {
    let (_, s) = solve("mixed-sizes.json");
    assert_eq!(s.status, Status::Optimal);
    assert!(close(s.expected_cost, 56_160.188), "{}", s.expected_cost);
    assert!(!s.purchases.is_empty(), "blocks pay off here");
}

#[test]
fn a_cost_not_convex_in_term_capacity_is_still_exact() {
    let (_, s) = solve("nonconvex.json");
    assert_eq!(s.status, Status::Optimal);
    assert!(close(s.expected_cost, 434.0), "{}", s.expected_cost);
}

#[test]
fn demand_beyond_every_limit_says_where_and_how_much() {
    let (_, s) = solve("infeasible-capacity.json");
    assert_eq!(s.status, Status::Infeasible);
    let message = s.message.expect("a message");
    for part in [
        "pool `h100`",
        "scenario `expected`",
        "hours 24–72",
        "2027-01-05T00:00:00Z",
        "64 GPUs",
        "16 GPUs short",
        "max_instances",
    ] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
}

#[test]
fn terms_that_cannot_cover_every_hour_at_once_are_explained() {
    let (_, s) = solve("infeasible-overlap.json");
    assert_eq!(s.status, Status::Infeasible);
    let message = s.message.expect("a message");
    assert!(
        message.contains("pool `h100`") && message.contains("8 of the 8 GPUs"),
        "{message}"
    );
    assert!(
        message.contains("cannot cover them all at once"),
        "{message}"
    );
}

#[test]
fn an_unmeetable_budget_reports_the_least_expected_cost() {
    let (_, s) = solve("over-budget.json");
    assert_eq!(s.status, Status::Infeasible);
    assert!(
        close(s.expected_cost, 56_160.188),
        "the plan given is the least-cost one"
    );
    let message = s.message.expect("a message");
    assert!(
        message.contains("$56160.19") && message.contains("$50000.00"),
        "{message}"
    );
}

#[test]
fn the_table_summarises_the_plan() {
    let out = gpucap()
        .args(["solve", "--format", "table"])
        .arg(fixture("mixed-sizes.json"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for part in [
        "status: optimal",
        "$56,160.19",
        "buy (shared by all scenarios)",
        "aws/p5/block-3d",
        "scenario `slip`",
        "cost by kind",
        "simpler strategies",
        "all-on-demand",
        "reserve-the-peak",
    ] {
        assert!(text.contains(part), "`{part}` missing from:\n{text}");
    }
}

#[test]
fn problems_can_come_on_stdin() {
    let text = std::fs::read_to_string(fixture("nonconvex.json")).expect("fixture");
    let out = gpucap()
        .args(["solve", "-"])
        .write_stdin(text)
        .output()
        .expect("run");
    assert!(out.status.success());
    let s: Solution = serde_json::from_slice(&out.stdout).expect("solution");
    assert_eq!(s.status, Status::Optimal);
}

/// Runs `gpucap solve` on `text` and returns stderr, asserting exit status 2.
fn rejected(text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("problem.json");
    std::fs::write(&path, text).expect("write");
    let out = gpucap().arg("solve").arg(&path).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2 for:\n{text}\nstderr: {stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout when rejected");
    stderr
}

/// The spec example with one textual change.
fn example_with(from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(fixture("spec-example.json")).expect("fixture");
    assert!(text.contains(from), "the example has no `{from}`");
    text.replacen(from, to, 1)
}

fn assert_error(stderr: &str, parts: &[&str]) {
    for part in parts {
        assert!(stderr.contains(part), "`{part}` missing from: {stderr}");
    }
}

#[test]
fn a_start_outside_the_horizon_names_the_field() {
    let err = rejected(&example_with("\"starts\": [0]", "\"starts\": [2200]"));
    assert_error(
        &err,
        &[
            "`offers[3].starts`",
            "start 2200 is outside the horizon [0, 2184)",
        ],
    );
}

#[test]
fn unknown_fields_are_errors() {
    let err = rejected(&example_with(
        "\"hours\": 2184,",
        "\"hours\": 2184, \"horizon\": 3,",
    ));
    assert_error(&err, &["unknown field `horizon`", "problem.json:"]);
    let err = rejected(&example_with(
        "\"overhead\": 0.12,",
        "\"overhead\": 0.12, \"region\": \"x\",",
    ));
    assert_error(&err, &["offers[1]", "unknown field `region`"]);
}

#[test]
fn negative_counts_are_errors() {
    let err = rejected(&example_with(
        "\"gpus_per_instance\": 8",
        "\"gpus_per_instance\": -8",
    ));
    assert_error(&err, &["offers[0].gpus_per_instance", "-8"]);
    let err = rejected(&example_with(
        "\"max_instances\": 32",
        "\"max_instances\": -1",
    ));
    assert_error(&err, &["offers[0].max_instances", "-1"]);
    let err = rejected(&example_with("[0, 168, 64]", "[0, 168, -64]"));
    assert_error(&err, &["scenarios[0].demand.h100.firm[0]"]);
}

#[test]
fn negative_prices_and_probabilities_are_errors() {
    let err = rejected(&example_with(
        "\"price_per_instance_hour\": 55.04",
        "\"price_per_instance_hour\": -55.04",
    ));
    assert_error(
        &err,
        &[
            "`offers[0].price_per_instance_hour`",
            "must be a finite number >= 0, found -55.04",
        ],
    );
    let err = rejected(&example_with(
        "\"upfront_per_instance\": 5285.0",
        "\"upfront_per_instance\": -1",
    ));
    assert_error(&err, &["`offers[2].upfront_per_instance`"]);
    let err = rejected(&example_with("\"overhead\": 0.12", "\"overhead\": -0.12"));
    assert_error(&err, &["`offers[1].overhead`"]);
    let err = rejected(&example_with(
        "\"probability\": 0.7",
        "\"probability\": -0.7",
    ));
    assert_error(&err, &["`scenarios[0].probability`"]);
    let err = rejected(&example_with(
        "\"probability\": 0.7",
        "\"probability\": 0.6",
    ));
    assert_error(&err, &["`scenarios`", "sum to 0.9"]);
}

#[test]
fn unknown_pools_and_offers_are_errors() {
    let err = rejected(&example_with("\"pool\": \"h100\"", "\"pool\": \"h10\""));
    assert_error(
        &err,
        &[
            "`offers[0].pool`",
            "unknown pool `h10`",
            "did you mean `h100`",
        ],
    );
    let err = rejected(&example_with(
        "\"demand\": {\"h100\"",
        "\"demand\": {\"b200\"",
    ));
    assert_error(&err, &["`scenarios[0].demand.b200`", "unknown pool `b200`"]);
    let err = rejected(&example_with(
        "\"aws/us-east-1/p5.48xlarge/spot\": 2",
        "\"aws/us-east-1/p5.48xlarge/spott\": 2",
    ));
    assert_error(
        &err,
        &[
            "scenarios[1].max_instances.aws/us-east-1/p5.48xlarge/spott",
            "unknown offer",
        ],
    );
    let err = rejected(&example_with(
        "\"aws/us-east-1/p5.48xlarge/spot\": 2",
        "\"gcp/us-central1/a2-ultragpu-8g/cud-1y\": 2",
    ));
    assert_error(&err, &["is a `term` offer"]);
}

#[test]
fn duplicate_ids_are_errors() {
    let err = rejected(&example_with(
        "[\"h100\", \"a100-80gb\"]",
        "[\"h100\", \"h100\"]",
    ));
    assert_error(&err, &["`pools[1]`", "duplicate pool id `h100`"]);
    let err = rejected(&example_with(
        "\"id\": \"aws/us-east-1/p5.48xlarge/spot\"",
        "\"id\": \"aws/us-east-1/p5.48xlarge/on-demand\"",
    ));
    assert_error(&err, &["`offers[1].id`", "duplicate offer id"]);
    let err = rejected(&example_with(
        "\"name\": \"slip-2w\"",
        "\"name\": \"expected\"",
    ));
    assert_error(
        &err,
        &["`scenarios[1].name`", "duplicate scenario name `expected`"],
    );
}

#[test]
fn infinite_numbers_are_errors() {
    let err = rejected(&example_with(
        "\"price_per_instance_hour\": 55.04",
        "\"price_per_instance_hour\": 1e999",
    ));
    assert_error(
        &err,
        &["problem.json:", "offers[0].price_per_instance_hour"],
    );
    let err = rejected(&example_with(
        "\"price_per_instance_hour\": 55.04",
        "\"price_per_instance_hour\": NaN",
    ));
    assert_error(&err, &["problem.json:"]);
}

#[test]
fn other_rules_of_the_spec() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "\"gpucap.problem/v1\"",
            "\"gpucap.problem/v4\"",
            &[
                "`schema`",
                "gpucap.problem/v1",
                "gpucap.problem/v2",
                "gpucap.problem/v3",
            ],
        ),
        (
            "\"2027-01-04T00:00:00Z\"",
            "\"2027-01-04T00:30:00Z\"",
            &["`start`", "whole hour"],
        ),
        (
            "\"2027-01-04T00:00:00Z\"",
            "\"2027-01-04T02:00:00+02:00\"",
            &["`start`", "UTC"],
        ),
        (
            "\"hours\": 2184",
            "\"hours\": 0",
            &["`hours`", "between 1 and 105120"],
        ),
        ("\"hours\": 2184", "\"hours\": 105121", &["`hours`"]),
        (
            "\"gpus_per_instance\": 8",
            "\"gpus_per_instance\": 0",
            &["`offers[0].gpus_per_instance`", "positive"],
        ),
        (
            "\"term_hours\": 168",
            "\"term_hours\": 0",
            &["`offers[2].term_hours`"],
        ),
        ("\"step\": 24", "\"step\": 0", &["`offers[2].starts.step`"]),
        (
            "\"kind\": \"on_demand\"",
            "\"kind\": \"reserved\"",
            &["offers[0].kind", "unknown variant `reserved`"],
        ),
        (
            "\"overhead\": 0.12",
            "\"overhead\": 0.12, \"term_hours\": 5",
            &["`offers[1].term_hours`", "only `term` offers"],
        ),
        ("\"budget\": 2500000.0", "\"budget\": -5", &["`budget`"]),
        (
            "\"budget\": 2500000.0",
            "\"budget\": 2500000.0, \"x\": 1",
            &["unknown field `x`"],
        ),
        (
            "[168, 500, 128]",
            "[500, 168, 128]",
            &["`scenarios[0].demand.h100.firm[1]`", "from < to"],
        ),
        (
            "[168, 500, 128]",
            "[168, 2185, 128]",
            &["`scenarios[0].demand.h100.firm[1]`", "2184"],
        ),
        (
            "[168, 500, 128]",
            "[168, 500]",
            &["scenarios[0].demand.h100.firm[1]", "[from, to, value]"],
        ),
        (
            "\"starts\": {",
            "\"starts\": \"daily\", \"s\": {",
            &["offers[2].starts", "a list of start hours"],
        ),
    ];
    for (from, to, parts) in cases {
        let err = rejected(&example_with(from, to));
        assert_error(&err, parts);
    }
}

#[test]
fn a_term_offer_needs_its_term_and_starts() {
    let err = rejected(&example_with("\"term_hours\": 168, ", ""));
    assert_error(&err, &["`offers[2].term_hours`", "needs `term_hours`"]);
}

#[test]
fn gangs_are_placed_whole_and_the_table_says_where_they_run() {
    // docs/problem-v3.md's example: the gang runs in the east on blocks and on-demand, restarts
    // twice, and costs $240 more than the same GPUs as fluid work (HiGHS: $7,312).
    let (_, s) = solve("gangs.json");
    assert_eq!(s.status, Status::Optimal);
    assert!(close(s.expected_cost, 7_552.0), "{}", s.expected_cost);
    let out = gpucap()
        .args(["solve", "--format", "table"])
        .arg(fixture("gangs.json"))
        .output()
        .expect("run gpucap");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "gangs in scenario `expected`: each in one placement, on whole nodes, start to end",
        "aws/us-east-1/p5.48xlarge",
        "east/block/1d bought at 24",
        "cost $7,312.00: being runnable costs $240.00 (3.3 %)",
    ] {
        assert!(text.contains(expected), "no `{expected}` in:\n{text}");
    }
}

#[test]
fn docs_problem_v3_shows_the_fixture_and_its_solution() {
    // The page's two JSON blocks: the problem is the fixture, the solution is gpucap's.
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    );
    let page = std::fs::read_to_string(root.join("docs/problem-v3.md")).expect("the page");
    let blocks: Vec<serde_json::Value> = page
        .split("```json\n")
        .skip(1)
        .map(|b| serde_json::from_str(b.split("```").next().unwrap_or("")).expect("JSON"))
        .collect();
    assert_eq!(blocks.len(), 2, "a problem and a solution");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("gangs.json")).expect("fixture"))
            .expect("JSON");
    assert_eq!(blocks[0], fixture);
    let (_, solution) = solve("gangs.json");
    assert_eq!(blocks[1], serde_json::to_value(&solution).expect("JSON"));
}
