//! gpucap's optimum against HiGHS (highspy, from the test-peer virtualenv) solving the plain
//! hourly MILP of the same problem, formulated independently in
//! `benches/support/hourly_milp.py`: the same optimal cost to 1e-6 wherever HiGHS proves
//! optimality, and within HiGHS's bounds where it stops at its time limit.

#[path = "../benches/support/generate.rs"]
mod generate;
#[path = "../benches/support/hourly_milp.rs"]
mod hourly_milp;
#[path = "support/python.rs"]
mod python;
mod solver_check;

use std::path::Path;

use gpucap::problem::{Problem, Status, validate};
use gpucap::solver::{SolveOptions, solve};

/// HiGHS's time on any one instance here; the instances are small.
const HIGHS_SECONDS: f64 = 20.0;

fn highs(problem: &Problem) -> hourly_milp::Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("problem.json");
    std::fs::write(&path, serde_json::to_string(problem).expect("json")).expect("write");
    hourly_milp::run(&python::python(), &path, HIGHS_SECONDS).unwrap_or_else(|e| panic!("{e}"))
}

fn compare(name: &str, problem: &Problem) {
    let validated = validate(problem.clone()).expect("valid");
    let ours = solve(&validated, &SolveOptions::default());
    solver_check::assert_checks(problem, &ours);
    let theirs = highs(problem);
    let tolerance = |x: f64| 1e-6 * x.abs().max(1.0);
    match theirs.status.as_str() {
        "Infeasible" => {
            assert_eq!(
                ours.status,
                Status::Infeasible,
                "{name}: HiGHS finds it infeasible"
            );
            assert!(
                ours.purchases.is_empty() && ours.expected_cost == 0.0,
                "{name}: no plan"
            );
        }
        "Optimal" => {
            let objective = theirs.objective.expect("an objective");
            assert!(
                (ours.expected_cost - objective).abs() <= tolerance(objective),
                "{name}: gpucap {} vs HiGHS {objective}",
                ours.expected_cost
            );
        }
        other => {
            // Stopped early: the optimum lies between HiGHS's bound and its best plan.
            if let Some(objective) = theirs.objective {
                assert!(
                    ours.expected_cost <= objective + tolerance(objective),
                    "{name} ({other}): {} > {objective}",
                    ours.expected_cost
                );
            }
            if let Some(bound) = theirs.bound {
                assert!(
                    ours.expected_cost >= bound - tolerance(bound),
                    "{name} ({other}): {} < {bound}",
                    ours.expected_cost
                );
            }
        }
    }
}

#[test]
fn fixtures_match_highs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/problems");
    for name in [
        "spec-example.json",
        "nonconvex.json",
        "infeasible-capacity.json",
        "infeasible-overlap.json",
    ] {
        let problem: Problem =
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).expect("fixture"))
                .expect("problem");
        compare(name, &problem);
    }
}

#[test]
fn generated_calendars_match_highs() {
    let shapes = [
        generate::Shape {
            hours: 168,
            pools: 1,
            offers: 5,
            start_step: 24,
            scenarios: 1,
            seed: 1,
        },
        generate::Shape {
            hours: 336,
            pools: 2,
            offers: 8,
            start_step: 24,
            scenarios: 2,
            seed: 2,
        },
        generate::Shape {
            hours: 120,
            pools: 1,
            offers: 5,
            start_step: 1,
            scenarios: 2,
            seed: 3,
        },
    ];
    for shape in shapes {
        compare(&format!("{shape:?}"), &generate::generate(&shape));
    }
}

/// The capacity board's exercise (`examples/board-exercise`, 169 weeks, a 3-year contract
/// offer, capacity blocks with daily starts) as `gpucap plan --emit-problem` writes it: HiGHS
/// proves the same optimal cost on the MILP over runs of identical hours (exact; the hourly
/// MILP of 28,392 hours is too large to build and solve here).
#[test]
fn the_board_exercise_matches_highs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("problem.json");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/board-exercise/gpucap.toml");
    let out = assert_cmd::Command::cargo_bin("gpucap")
        .expect("the gpucap binary")
        .env_remove("RUST_LOG")
        .env(
            "GPUCAP_CACHE_DIR",
            std::env::temp_dir().join("gpucap-test-no-cache"),
        )
        .arg("--config")
        .arg(&config)
        .args([
            "-q",
            "plan",
            "--now",
            "2027-01-04T00:00:00Z",
            "--emit-problem",
        ])
        .arg(&path)
        .output()
        .expect("run gpucap");
    assert!(
        out.status.success(),
        "gpucap plan: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problem: Problem =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("problem")).expect("json");
    let validated = validate(problem.clone()).expect("valid");
    let ours = solve(&validated, &SolveOptions::default());
    assert_eq!(ours.status, Status::Optimal);
    solver_check::assert_checks(&problem, &ours);
    let theirs = hourly_milp::run_with(&python::python(), &path, 600.0, true)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(theirs.status, "Optimal", "HiGHS: {theirs:?}");
    let objective = theirs.objective.expect("an objective");
    assert!(
        (ours.expected_cost - objective).abs() <= 1e-6 * objective.abs().max(1.0),
        "board exercise: gpucap {} vs HiGHS {objective}",
        ours.expected_cost
    );
}
