//! Gangs (`gpucap.problem/v3`) on generated problems: every solution passes the independent
//! checker (one placement per gang, whole nodes in every hour, runs on capacity held then and
//! never drawn twice), and placement rules only ever cost more than the same GPUs as fluid
//! firm demand. `solver_highs` compares the optima with HiGHS.

#[path = "../../../benches/support/gangs.rs"]
mod gangs;
#[path = "../../../benches/support/generate.rs"]
mod generate;
#[path = "../../../tests/solver_check/mod.rs"]
mod solver_check;

use std::path::Path;

use gpucap_solver::problem::{Status, parse, validate};
use gpucap_solver::solver::{SolveOptions, solve};

#[test]
fn generated_gang_problems_check_and_cost_no_less_than_fluid_work() {
    let mut placed = 0;
    for seed in 0..16 {
        let problem = gangs::problem(seed);
        let v = validate(problem.clone()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let solution = solve(&v, &SolveOptions::default());
        solver_check::assert_checks(&problem, &solution);
        let fluid = gangs::fluid(&problem);
        let relaxed = solve(
            &validate(fluid.clone()).expect("valid"),
            &SolveOptions::default(),
        );
        solver_check::assert_checks(&fluid, &relaxed);
        // Any plan that keeps the gang rules keeps the fluid problem's: the fluid optimum is
        // never above a plan with gangs. (With costs per purchase a plan may be `feasible`:
        // the search stops at its node budget, `docs/problem-v2.md`.)
        if solution.status != Status::Infeasible {
            if relaxed.status == Status::Optimal {
                assert!(
                    solution.expected_cost >= relaxed.expected_cost * (1.0 - 1e-9),
                    "seed {seed}: gangs cost {} < fluid {}",
                    solution.expected_cost,
                    relaxed.expected_cost
                );
            }
            placed += 1;
        }
    }
    assert!(
        placed >= 10,
        "only {placed} of 16 generated problems had a plan"
    );
}

#[test]
fn the_fixture_checks() {
    let text = include_str!("../../../tests/fixtures/problems/gangs.json");
    let problem = parse(text, Path::new("gangs.json")).expect("parses");
    let solution = solve(
        &validate(problem.clone()).expect("valid"),
        &SolveOptions::default(),
    );
    solver_check::assert_checks(&problem, &solution);
    assert_eq!(solution.status, Status::Optimal);
}

#[test]
fn gang_rules_are_checked_with_the_field_named() {
    let text = include_str!("../../../tests/fixtures/problems/gangs.json");
    let cases = [
        (
            r#""placements": ["aws/us-east-1/p5.48xlarge", "aws/us-west-2/p5.48xlarge"]"#,
            r#""placements": ["aws/us-east-1/p5.4xlarge"]"#,
            "scenarios[0].demand.h100.gangs[0].placements[0]",
            "no offer has placement",
        ),
        (
            r#""nodes": 3"#,
            r#""nodes": 0"#,
            "scenarios[0].demand.h100.gangs[0].nodes",
            "positive",
        ),
        (
            r#""to": 60"#,
            r#""to": 80"#,
            "scenarios[0].demand.h100.gangs[0].to",
            "horizon",
        ),
        (
            r#""price_per_instance_hour": 45.0, "max_instances": 2,"#,
            r#""price_per_instance_hour": 45.0, "max_instances": 2, "gpus_per_instance": 4,"#,
            "",
            "",
        ),
        (
            r#""schema": "gpucap.problem/v3""#,
            r#""schema": "gpucap.problem/v2""#,
            "offers[0].placement",
            "gpucap.problem/v3",
        ),
    ];
    for (from, to, field, message) in cases {
        assert!(text.contains(from), "{from}");
        let changed = text.replace(from, to);
        match parse(&changed, Path::new("gangs.json")) {
            Ok(problem) => {
                let err = validate(problem).expect_err(to);
                assert_eq!(err.location.field.as_deref(), Some(field), "{err}");
                assert!(err.message.contains(message), "{err}");
            }
            // A second `gpus_per_instance` is a duplicate key: serde refuses it.
            Err(err) => assert!(field.is_empty(), "{err}"),
        }
    }
}
