//! Runs `hourly_milp.py` (HiGHS on the plain hourly MILP of a problem, through highspy) and
//! reads its one-line JSON report. Shared by the benchmark and the solver tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Report {
    /// HiGHS's model status: `Optimal`, `Infeasible`, `Time limit reached`, …
    pub status: String,
    /// The cost of the best plan HiGHS found, if any.
    pub objective: Option<f64>,
    /// HiGHS's lower bound, if any.
    pub bound: Option<f64>,
    /// HiGHS's run time, model building in Python left out.
    pub seconds: f64,
}

impl Report {
    pub fn optimal(&self) -> bool {
        self.status == "Optimal"
    }
}

/// HiGHS on the hourly MILP of the problem in `problem`, stopping after `time_limit` seconds.
pub fn run(python: &Path, problem: &Path, time_limit: f64) -> Result<Report, String> {
    run_with(python, problem, time_limit, false)
}

/// As [`run`]; `runs`: merge identical hours into runs first (exact, for long horizons).
pub fn run_with(
    python: &Path,
    problem: &Path,
    time_limit: f64,
    runs: bool,
) -> Result<Report, String> {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("benches/support/hourly_milp.py");
    let out = Command::new(python)
        .arg(script)
        .arg(problem)
        .args(["--time-limit", &time_limit.to_string()])
        .args(runs.then_some("--runs"))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("not a report: {e}"))?;
    Ok(Report {
        status: v["status"].as_str().unwrap_or_default().to_string(),
        objective: v["objective"].as_f64(),
        bound: v["bound"].as_f64(),
        seconds: v["seconds"].as_f64().unwrap_or(f64::NAN),
    })
}
