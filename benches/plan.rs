//! The planning benchmark: `gpucap plan` on a generated quarter of many campaigns (10,000 by
//! default) on the quickstart's pools, scenarios and built-in prices
//! (`support/campaigns.rs`). Each size runs in a fresh process that is the real command line
//! (`gpucap --config … plan -o plan.json`), so its wall time, CPU time and peak memory are the
//! command's own; the table also shows the problem's size estimate and the plan's expected cost.
//!
//! ```sh
//! cargo bench --bench plan                          # 1,000, 2,000 and 10,000 campaigns
//! cargo bench --bench plan -- --campaigns 10000     # one size
//! cargo bench --bench plan -- --max-problem-size N  # passed to `gpucap plan`
//! cargo bench --bench plan -- --layout apart        # only pools that share nothing
//! cargo bench --bench plan -- --keep DIR            # keep each project in DIR/<layout>-<n>
//! ```
//!
//! Each size runs twice: with the quickstart's pools (`shared`: the two H100 pools draw on
//! the same spot offerings and AWS's cap across capacity blocks, which join them in one
//! program) and with the H100 pools in separate regions (`apart`: no limit is shared, every
//! pool is solved alone, as every pool was before shared limits existed). The table's
//! `shared limits` column counts the limits the problem carries across pools.
//!
//! The `gates s` column is one evaluation of the built-in budget gates on the saved plan, in
//! this process (the plan read back, the gates loaded, then timed alone): the gates must take
//! a small part of their budget (`MAX_POLICY_TIME`) on every plan size gpucap accepts.

#[path = "support/campaigns.rs"]
mod campaigns;
#[path = "support/measure.rs"]
mod measure;

use measure::{cpu_seconds, machine, peak_rss_mb};

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const SEED: u64 = 15;

/// Set in the child: where it writes its peak memory and CPU time after running the command line it got.
const REPORT_ENV: &str = "GPUCAP_BENCH_PLAN_REPORT";

fn main() {
    if let Some(report) = std::env::var_os(REPORT_ENV) {
        // The child: argv is exactly `gpucap`'s.
        let code = gpucap::cli::main();
        let figures = format!(
            "{} {}",
            peak_rss_mb().map_or("—".into(), |m| format!("{m:.0}")),
            cpu_seconds().map_or("—".into(), |c| format!("{c:.2}"))
        );
        std::fs::write(report, figures).expect("write the child's report");
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            1
        });
    }
    let mut sizes = vec![1_000, 2_000, 10_000];
    let mut extra = Vec::new();
    // Pools joined by shared limits may not be proven optimal in minutes: each plan stops at
    // this limit with its gap (status `feasible`), as a user's run would.
    let mut time_limit = "60".to_string();
    let mut keep: Option<std::path::PathBuf> = None;
    let mut layouts = vec![campaigns::Layout::Apart, campaigns::Layout::Shared];
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--campaigns" => {
                let n = it.next().and_then(|s| s.parse().ok());
                sizes = vec![n.expect("--campaigns N")];
            }
            "--max-problem-size" => {
                extra.extend([a, it.next().expect("--max-problem-size N")]);
            }
            "--time-limit" => time_limit = it.next().expect("--time-limit SECONDS"),
            "--keep" => keep = Some(it.next().expect("--keep DIR").into()),
            "--layout" => {
                layouts = match it.next().as_deref() {
                    Some("shared") => vec![campaigns::Layout::Shared],
                    Some("apart") => vec![campaigns::Layout::Apart],
                    _ => panic!("--layout shared|apart"),
                }
            }
            _ => {} // `--bench` and filters cargo passes
        }
    }
    extra.extend(["--time-limit".to_string(), time_limit]);
    println!("machine: {}", machine());
    println!(
        "| pools | campaigns | gpucap plan s (wall) | CPU s | peak MB | problem size | shared limits | expected cost | status | gates s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for &layout in &layouts {
        for &n in &sizes {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let dir = match &keep {
                Some(root) => root.join(format!("{layout:?}-{n}").to_lowercase()),
                None => dir.path().to_path_buf(),
            };
            let config = campaigns::write_project_with(&dir, n, SEED, layout);
            let row = run(&dir, &config, &extra);
            println!(
                "| {} | {n} | {:.2} | {} | {} | {} | {} | {} | {} | {} |",
                match layout {
                    campaigns::Layout::Shared => "shared",
                    campaigns::Layout::Apart => "apart",
                },
                row.seconds,
                row.cpu,
                row.peak_mb,
                row.size,
                row.shared,
                row.cost,
                row.status,
                row.gates
            );
        }
    }
}

struct Row {
    seconds: f64,
    cpu: String,
    peak_mb: String,
    size: String,
    shared: usize,
    cost: String,
    status: String,
    gates: String,
}

/// Seconds one evaluation of the built-in gates takes on the saved plan, with the config's
/// budget as data; the decision counts after them.
fn gates_seconds(config: &Path, plan: &Path) -> String {
    let (config, _) = gpucap::config::load(config).expect("the config");
    let saved = gpucap::plan::read::read(plan).expect("the saved plan");
    let engine = gpucap::policy::PolicyEngine::load(&[]).expect("the built-in gates");
    let now = "2027-01-01T00:00:00Z".parse().expect("a time");
    let started = Instant::now();
    let decisions = gpucap::plan::gates::evaluate(&engine, &config.budget, &saved.plan, now)
        .unwrap_or_else(|e| panic!("the gates failed on the plan: {e}"));
    let seconds = started.elapsed().as_secs_f64();
    format!(
        "{seconds:.3} ({} deny, {} warn)",
        decisions.deny.len(),
        decisions.warn.len()
    )
}

/// `gpucap plan` on `config` in a fresh process.
fn run(dir: &Path, config: &Path, extra: &[String]) -> Row {
    let exe = std::env::current_exe().expect("the benchmark executable");
    let report = dir.join("peak");
    let plan = dir.join("plan.json");
    let problem = dir.join("problem.json");
    let started = Instant::now();
    let out = Command::new(exe)
        .env(REPORT_ENV, &report)
        .args(["-q", "--config"])
        .arg(config)
        .args(["plan", "--now", "2027-01-01T00:00:00Z", "-o"])
        .arg(&plan)
        .arg("--emit-problem")
        .arg(&problem)
        .args(extra)
        .output()
        .expect("run gpucap plan");
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "gpucap plan failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan_path = plan;
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_path).expect("the plan")).expect("plan JSON");
    let problem = std::fs::read_to_string(&problem).expect("the problem");
    let problem = gpucap::problem::parse(&problem, Path::new("problem.json")).expect("parses");
    let shared = problem.shared_limits.len();
    let size = gpucap::problem::validate(problem)
        .map(|v| gpucap::problem::size::estimate(&v).total.to_string())
        .unwrap_or_else(|e| format!("invalid: {e}"));
    let solution = &plan["solution"];
    let gates = gates_seconds(config, &plan_path);
    let figures = std::fs::read_to_string(&report).unwrap_or_default();
    let mut figures = figures.split_whitespace().map(str::to_string);
    Row {
        seconds,
        peak_mb: figures.next().unwrap_or_default(),
        cpu: figures.next().unwrap_or_default(),
        size,
        shared,
        cost: solution["expected_cost"]
            .as_f64()
            .map_or("—".into(), |c| format!("{c:.0}")),
        status: match (
            solution["status"].as_str(),
            solution["expected_cost"].as_f64(),
            solution["bound"].as_f64(),
        ) {
            (Some("feasible"), Some(cost), Some(bound)) if cost > 0.0 => {
                format!("feasible, gap {:.2} %", (cost - bound) / cost * 100.0)
            }
            (status, _, _) => status.unwrap_or("—").to_string(),
        },
        gates,
    }
}
