//! The solver benchmark: generated campaign calendars of growing size (horizon 2 weeks → 1
//! year, 1 → 4 pools, 5 → 100 offers, term starts weekly → daily → hourly, 1 → 8 scenarios),
//! each solved by gpucap in a fresh process (for its peak memory), with the three baselines, and
//! — where Python and highspy are available — by HiGHS on the plain hourly MILP. Instances
//! named `coupled` are v2 problems whose pools share an on-demand vCPU quota and a cap on
//! capacity blocks held, with blocks bought in pieces at a cost each (`generate::couple`):
//! their pools are solved together in one program.
//!
//! ```sh
//! cargo bench --bench solver                     # everything (HiGHS runs take a while)
//! cargo bench --bench solver -- --quick          # the small instances only
//! cargo bench --bench solver -- --no-highs       # gpucap and the baselines only
//! cargo bench --bench solver -- --highs-limit 120 --only 1y
//! ```
//!
//! HiGHS comes from the test-peer virtualenv (`tests/support/python.rs`, or `GPUCAP_TEST_PYTHON`).
//!
//! Last, the capacity board's exercise (`examples/board-exercise`: 169 weeks, a 3-year contract
//! offer, capacity blocks with daily starts), emitted by `gpucap plan` and priced by price alone:
//! gpucap's proven optimum against HiGHS on the MILP over runs of identical hours (exact), which
//! may stop at its limit with a bound and a plan that must bracket gpucap's optimum. It moved
//! here from the default test run, where HiGHS took up to 10 minutes (`--only board` runs it
//! alone).

#[path = "support/generate.rs"]
mod generate;
#[path = "support/hourly_milp.rs"]
mod hourly_milp;
#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/support/python.rs"]
mod python;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use generate::{Shape, generate};
use gpucap::problem::{OfferKind, Problem, validate};
use gpucap::solver::{self, SolveOptions};
use measure::{machine, peak_rss_mb};

const SEED: u64 = 7;

/// HiGHS models past this many columns are not built (Python would need many gigabytes).
const HIGHS_MAX_COLUMNS: u64 = 4_000_000;

fn instances() -> Vec<(&'static str, Shape)> {
    let shape = |hours, pools, offers, start_step, scenarios| Shape {
        hours,
        pools,
        offers,
        start_step,
        scenarios,
        seed: SEED,
    };
    vec![
        ("2w 1p 5o weekly 1s", shape(336, 1, 5, 168, 1)),
        ("1m 1p 10o daily 2s", shape(720, 1, 10, 24, 2)),
        ("3m 2p 20o daily 2s", shape(2184, 2, 20, 24, 2)),
        ("2w 3p 30o daily 4s", shape(336, 3, 30, 24, 4)),
        ("1m 3p 30o daily 4s", shape(720, 3, 30, 24, 4)),
        ("3m 3p 30o daily 4s", shape(2184, 3, 30, 24, 4)),
        ("6m 3p 30o daily 4s", shape(4368, 3, 30, 24, 4)),
        ("1y 3p 30o daily 4s", shape(8760, 3, 30, 24, 4)),
        ("1y 3p 30o weekly 4s", shape(8760, 3, 30, 168, 4)),
        ("1y 4p 100o daily 8s", shape(8760, 4, 100, 24, 8)),
        ("1m 3p 30o hourly 4s", shape(720, 3, 30, 1, 4)),
        ("3m 3p 30o hourly 4s", shape(2184, 3, 30, 1, 4)),
        ("1y 3p 30o hourly 4s", shape(8760, 3, 30, 1, 4)),
    ]
}

/// Instances whose pools are coupled by shared limits (see the module doc).
const COUPLED: [(&str, usize, u32, u32, usize); 4] = [
    // (name, pools, hours, start step, scenarios)
    ("2w 3p 30o daily 4s coupled", 3, 336, 24, 4),
    ("1m 3p 30o daily 4s coupled", 3, 720, 24, 4),
    ("3m 3p 30o daily 4s coupled", 3, 2184, 24, 4),
    ("1y 3p 30o weekly 4s coupled", 3, 8760, 168, 4),
];

/// The plain instances, then the coupled ones: `(name, shape, coupled)`.
fn all_instances() -> Vec<(&'static str, Shape, bool)> {
    let plain = instances().into_iter().map(|(n, s)| (n, s, false));
    let coupled = COUPLED
        .iter()
        .map(|&(name, pools, hours, start_step, scenarios)| {
            let shape = Shape {
                hours,
                pools,
                offers: 30,
                start_step,
                scenarios,
                seed: SEED,
            };
            (name, shape, true)
        });
    plain.chain(coupled).collect()
}

/// The problem of one instance: coupled ones with half the vCPUs the pools' peaks would need,
/// 8 capacity-block instances held at once, blocks bought 4 instances a piece at $250.
fn problem_of(shape: &Shape, coupled: bool) -> Problem {
    let problem = generate(shape);
    if coupled {
        generate::couple(problem, 0.5, 8, 4, 250.0)
    } else {
        problem
    }
}

struct Args {
    quick: bool,
    highs: bool,
    highs_limit: f64,
    only: Option<String>,
    child: Option<PathBuf>,
}

fn args() -> Args {
    let mut args = Args {
        quick: false,
        highs: true,
        highs_limit: 600.0,
        only: None,
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => args.quick = true,
            "--no-highs" => args.highs = false,
            "--highs-limit" => {
                args.highs_limit = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--highs-limit SECONDS")
            }
            "--only" => args.only = it.next(),
            "--child" => args.child = it.next().map(PathBuf::from),
            _ => {} // `--bench` and filters cargo passes
        }
    }
    args
}

fn main() {
    let args = args();
    if let Some(path) = &args.child {
        child(path);
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let python = if args.highs { highs_python() } else { None };
    println!("machine: {}", machine());
    println!(
        "| instance | hours | pools | offers | scenarios | term starts | gpucap s | peak MB | optimal cost | all on-demand | cheapest-now | reserve-the-peak | saved vs cheapest-now | HiGHS s | HiGHS cost | HiGHS / gpucap |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, shape, coupled) in all_instances() {
        if args.quick && shape.hours > 2184 {
            continue;
        }
        if args.only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let problem = problem_of(&shape, coupled);
        let path = dir.path().join(format!("{}.json", name.replace(' ', "-")));
        std::fs::write(&path, serde_json::to_string(&problem).expect("json"))
            .expect("write the problem");
        let ours = run_child(&path);
        let validated = validate(problem.clone()).expect("generated problems are valid");
        let baselines = solver::baselines(&validated, &SolveOptions::default());
        let money = |c: Option<f64>| c.map_or("—".to_string(), |c| format!("{:.0}", c));
        let cheapest_now = baselines.cheapest_now.expected_cost;
        let saved = cheapest_now.map_or("—".into(), |c| {
            format!("{:.1} %", (c - ours.cost) / c * 100.0)
        });
        let (highs_time, highs_cost, ratio) = match &python {
            Some(py) => highs(py, &path, &problem, args.highs_limit, ours.seconds),
            None => ("—".into(), "—".into(), "—".into()),
        };
        let starts: usize = validated
            .problem()
            .offers
            .iter()
            .enumerate()
            .map(|(o, _)| validated.starts(o).len())
            .sum();
        println!(
            "| {name} | {} | {} | {} | {} | {starts} | {:.3} | {} | {} | {} | {} | {} | {saved} | {highs_time} | {highs_cost} | {ratio} |",
            shape.hours,
            shape.pools,
            shape.offers,
            shape.scenarios,
            ours.seconds,
            ours.peak_mb.map_or("—".into(), |m| format!("{m:.0}")),
            if ours.optimal {
                format!("{:.0}", ours.cost)
            } else {
                format!("{:.0} ({})", ours.cost, ours.status)
            },
            money(baselines.all_on_demand.expected_cost),
            money(cheapest_now),
            money(baselines.reserve_the_peak.expected_cost),
        );
    }
    if args
        .only
        .as_deref()
        .is_none_or(|o| "board exercise".contains(o))
        && !args.quick
    {
        board_exercise(dir.path(), python.as_deref(), args.highs_limit);
    }
}

/// The board exercise as `gpucap plan --emit-problem` writes it, by price alone: gpucap's time
/// and proven optimum, and HiGHS's on the MILP over runs, with whether they agree (the same
/// optimum to 1e-6, or gpucap's optimum within HiGHS's bound and plan where it stopped).
fn board_exercise(dir: &Path, python: Option<&Path>, limit: f64) {
    let path = dir.join("board-exercise.json");
    let config =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/board-exercise/gpucap.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_gpucap"))
        .env_remove("RUST_LOG")
        .env("GPUCAP_CACHE_DIR", dir.join("no-cache"))
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
        .expect("run gpucap plan");
    assert!(
        out.status.success(),
        "gpucap plan: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut problem: Problem =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("problem")).expect("json");
    // By price alone: the default cost per purchase makes the optimum slow to prove.
    for offer in &mut problem.offers {
        offer.cost_per_purchase = None;
    }
    std::fs::write(&path, serde_json::to_string(&problem).expect("json")).expect("write");
    let ours = run_child(&path);
    let theirs = python.map(|py| hourly_milp::run_with(py, &path, limit, true));
    let (seconds, cost, verdict) = match theirs {
        None => ("—".to_string(), "—".to_string(), "—".to_string()),
        Some(Err(e)) => (
            format!("failed: {}", e.lines().last().unwrap_or("")),
            "—".into(),
            "—".into(),
        ),
        Some(Ok(r)) => {
            let slack = |x: f64| 1e-6 * x.abs().max(1.0);
            let agrees = match (r.optimal(), r.objective, r.bound) {
                (true, Some(c), _) => (c - ours.cost).abs() <= slack(c),
                (false, objective, Some(b)) => {
                    ours.cost >= b - slack(b) && objective.is_none_or(|c| ours.cost <= c + slack(c))
                }
                _ => false,
            };
            (
                format!("{:.1}", r.seconds),
                format!(
                    "{} ({})",
                    r.objective.map_or("none".into(), |c| format!("{c:.0}")),
                    r.status
                ),
                if agrees { "agree" } else { "DIFFER" }.to_string(),
            )
        }
    };
    println!();
    println!("| board exercise | gpucap s | gpucap cost | HiGHS s (runs) | HiGHS cost | verdict |");
    println!("|---|---:|---:|---:|---:|---|");
    println!(
        "| by price, {} offers | {:.3} | {:.0} ({}) | {seconds} | {cost} | {verdict} |",
        problem.offers.len(),
        ours.seconds,
        ours.cost,
        ours.status
    );
}

struct Ours {
    seconds: f64,
    peak_mb: Option<f64>,
    cost: f64,
    optimal: bool,
    status: String,
}

/// Solves one problem in a fresh process, so that its peak memory is its own.
fn run_child(path: &Path) -> Ours {
    let exe = std::env::current_exe().expect("the benchmark executable");
    let out = Command::new(exe)
        .arg("--child")
        .arg(path)
        .output()
        .expect("run the benchmark child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the child's report");
    Ours {
        seconds: v["seconds"].as_f64().unwrap_or(f64::NAN),
        peak_mb: v["peak_mb"].as_f64(),
        cost: v["cost"].as_f64().unwrap_or(f64::NAN),
        optimal: v["status"] == "optimal",
        status: v["status"].as_str().unwrap_or_default().to_string(),
    }
}

fn child(path: &Path) {
    let text = std::fs::read_to_string(path).expect("read the problem");
    let problem: Problem = serde_json::from_str(&text).expect("a problem");
    let validated = validate(problem).expect("valid");
    let started = Instant::now();
    let solution = solver::solve(&validated, &SolveOptions::default());
    let seconds = started.elapsed().as_secs_f64();
    let report = serde_json::json!({
        "seconds": seconds,
        "peak_mb": peak_rss_mb(),
        "cost": solution.expected_cost,
        "status": solution.status,
    });
    println!("{report}");
}

fn highs_python() -> Option<PathBuf> {
    match std::panic::catch_unwind(python::python) {
        Ok(p) => Some(p),
        Err(_) => {
            eprintln!("no Python with highspy: HiGHS columns left empty");
            None
        }
    }
}

/// Columns of the plain hourly MILP (to skip models Python cannot hold).
fn hourly_columns(problem: &Problem) -> u64 {
    let hours = u64::from(problem.hours);
    let terms = problem
        .offers
        .iter()
        .filter(|o| o.kind == OfferKind::Term)
        .count() as u64;
    let hourly = problem
        .offers
        .iter()
        .filter(|o| o.kind != OfferKind::Term)
        .count() as u64;
    hours * (2 * terms + hourly * problem.scenarios.len() as u64)
}

/// HiGHS on the hourly MILP: time, cost, and its time over gpucap's.
fn highs(
    python: &Path,
    path: &Path,
    problem: &Problem,
    limit: f64,
    ours: f64,
) -> (String, String, String) {
    let columns = hourly_columns(problem);
    if columns > HIGHS_MAX_COLUMNS {
        return (
            format!("not run ({columns} columns)"),
            "—".into(),
            "—".into(),
        );
    }
    let report = match hourly_milp::run(python, path, limit) {
        Ok(report) => report,
        Err(e) => {
            let last = e.lines().last().unwrap_or("").to_string();
            return (format!("failed: {last}"), "—".into(), "—".into());
        }
    };
    let (seconds, optimal) = (report.seconds, report.optimal());
    let cost = match report.objective {
        Some(c) if optimal => format!("{c:.0}"),
        Some(c) => format!(
            "{c:.0} (gap {:.2} %)",
            (c - report.bound.unwrap_or(0.0)) / c * 100.0
        ),
        None => "none".into(),
    };
    let time = if optimal {
        format!("{seconds:.2}")
    } else {
        format!("> {limit:.0} ({})", report.status)
    };
    let ratio = if optimal {
        format!("{:.0}×", seconds / ours)
    } else {
        format!("> {:.0}×", limit / ours)
    };
    (time, cost, ratio)
}
