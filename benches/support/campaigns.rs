//! A generated project for `gpucap plan` at scale: the quickstart's pools, scenarios and
//! built-in price snapshot (`examples/quickstart/gpucap.toml`), with a calendar of any number of
//! campaigns in its quarter, made from a seed when the benchmark or test runs (no large file
//! in the repository).
//!
//! The campaigns look like a large organisation's quarter: GPUs from 8 to 512 (mostly small,
//! a tenth not whole 8-GPU nodes), durations from a few hours (evals, most
//! of them) through days (fine-tunes) to six weeks (pre-training), starts on any hour of the quarter, about a third interruptible, some with a
//! placement rule (US east), buffers on some.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// splitmix64: small, fast, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// The quarter the campaigns fall in: the quickstart's (13 weeks from Monday 2027-01-04).
const QUARTER_HOURS: u64 = 13 * 7 * 24;

/// The config: the quickstart's pools, scenarios and offline prices, no budget limits (the
/// benchmark measures planning, not the gates' verdict), calendars from `calendars/`. Plans
/// by price alone (no cost per purchase), which the solver proves optimal: the figures compare
/// with the planner before costs per purchase existed.
const CONFIG: &str = r#"# Generated: a quarter of many campaigns on the quickstart's pools.
[planning]
start = 2027-01-04
horizon = "13w"
cost_per_purchase = 0

[inputs]
calendars = ["calendars/*"]

[pools.h100-us]
accelerator = "h100"
regions = ["us-east-1", "us-east-2", "us-west-2", "us-central1", "us-east4", "eastus", "southcentralus"]

[pools.h100-us-east]
accelerator = "h100"
regions = ["us-east-1", "us-east-2", "us-east4"]

[pools.a100-us]
accelerator = "a100-80gb"
regions = ["us-east-1", "us-west-2", "us-central1", "eastus"]

[pools.l4-us]
accelerator = "l4"
regions = ["us-east-1", "us-central1"]

[[scenarios]]
name = "expected"
probability = 0.6

[[scenarios]]
name = "slip-2w"
probability = 0.25
slip = "14d"

[[scenarios]]
name = "upside"
probability = 0.15
scale = 1.25

[prices]
offline = true

# Quotas far above any demand here, so none binds: this project measures the planner on pools
# that share no quota. With gpucap's modest offline default they would all be coupled (see
# docs/purchase-rules-and-quotas.md, "When quotas bind").
[quotas.limits]
"aws/us-east-1/L-417A185B" = 100_000_000
"aws/us-east-1/L-7212CCBC" = 100_000_000
"aws/us-east-1/L-DB2E81BA" = 100_000_000
"aws/us-east-2/L-417A185B" = 100_000_000
"aws/us-east-2/L-7212CCBC" = 100_000_000
"aws/us-west-2/L-417A185B" = 100_000_000
"aws/us-west-2/L-7212CCBC" = 100_000_000
"gcp/us-central1/NVIDIA_A100_80GB_GPUS" = 100_000_000
"gcp/us-central1/NVIDIA_H100_GPUS" = 100_000_000
"gcp/us-central1/NVIDIA_L4_GPUS" = 100_000_000
"gcp/us-central1/PREEMPTIBLE_NVIDIA_A100_80GB_GPUS" = 100_000_000
"gcp/us-central1/PREEMPTIBLE_NVIDIA_H100_GPUS" = 100_000_000
"gcp/us-east4/NVIDIA_H100_GPUS" = 100_000_000
"gcp/us-east4/PREEMPTIBLE_NVIDIA_H100_GPUS" = 100_000_000
"azure/eastus/lowPriorityCores" = 100_000_000
"azure/eastus/standardNCADISH100v5Family" = 100_000_000
"azure/eastus/standardNCADSA100v4Family" = 100_000_000
"azure/eastus/standardNCADSH100v5Family" = 100_000_000
"azure/eastus/standardNDAMSRA100v4Family" = 100_000_000
"azure/eastus/standardNDISRH100v5Family" = 100_000_000
"azure/southcentralus/standardNCADISH100v5Family" = 100_000_000
"azure/southcentralus/standardNCADSH100v5Family" = 100_000_000
"#;

/// Which regions the two H100 pools span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The quickstart's: `h100-us` spans the US, `h100-us-east` three of its regions, so the
    /// two draw on the same spot offerings and AWS's cap across capacity blocks, which join
    /// them in one program.
    Shared,
    /// `h100-us` without AWS and the US east (GCP us-central1, Azure eastus and
    /// southcentralus), `h100-us-east` as before: the pools share no offering, and no shared
    /// limit binds, so every pool is solved on its own (the planner before shared limits).
    Apart,
}

/// Writes `gpucap.toml` and `calendars/generated.yaml` with `campaigns` campaigns under `dir`;
/// returns the config's path.
pub fn write_project(dir: &Path, campaigns: usize, seed: u64) -> PathBuf {
    write_project_with(dir, campaigns, seed, Layout::Shared)
}

/// [`write_project`] with the pools laid out as `layout` says.
pub fn write_project_with(dir: &Path, campaigns: usize, seed: u64, layout: Layout) -> PathBuf {
    std::fs::create_dir_all(dir.join("calendars")).expect("create the calendars directory");
    let config = dir.join("gpucap.toml");
    let text = match layout {
        Layout::Shared => CONFIG.to_string(),
        Layout::Apart => CONFIG.replacen(
            r#"regions = ["us-east-1", "us-east-2", "us-west-2", "us-central1", "us-east4", "eastus", "southcentralus"]"#,
            r#"regions = ["us-central1", "eastus", "southcentralus"]"#,
            1,
        ),
    };
    assert!(
        layout == Layout::Shared || text != CONFIG,
        "the h100-us regions line of the config above changed: update Layout::Apart"
    );
    std::fs::write(&config, text).expect("write gpucap.toml");
    std::fs::write(
        dir.join("calendars/generated.yaml"),
        calendar(campaigns, seed),
    )
    .expect("write the calendar");
    config
}

/// A YAML calendar of `n` campaigns.
pub fn calendar(n: usize, seed: u64) -> String {
    let mut rng = Rng(seed ^ 0x5DEE_CE66_D1CE_5EED);
    let mut out = String::from("campaigns:\n");
    for i in 0..n {
        // Accelerators in rough proportion to what teams run: H100 most, then A100, then L4.
        let (accelerator, east) = match rng.range(0, 10) {
            0..=4 => ("h100", false),
            5..=6 => ("h100", true),
            7..=8 => ("a100-80gb", false),
            _ => ("l4", false),
        };
        // GPUs: a power of two from 8 to 512, smaller ones more often; a few not whole nodes.
        let mut gpus = 8u64 << rng.range(0, 7).min(rng.range(0, 7)).min(rng.range(0, 7));
        if rng.chance(0.1) {
            gpus += 4;
        }
        // Duration: hours (evals), days (fine-tunes) or weeks (pre-training).
        let hours = match rng.range(0, 100) {
            0..=59 => rng.range(2, 24),
            60..=92 => rng.range(24, 24 * 7),
            _ => rng.range(24 * 7, 24 * 42),
        };
        let start = rng.range(0, QUARTER_HOURS - 2);
        let hours = hours.min(QUARTER_HOURS - start).max(1);
        let (day, hour) = (start / 24, start % 24);
        let date = chrono_free_date(day);
        let interruptible = rng.chance(0.35);
        let _ = write!(
            out,
            "  - name: c{i:05}\n    accelerator: {accelerator}\n    gpus: {gpus}\n    start: {date}T{hour:02}:00:00Z\n    duration: {hours}h\n    interruptible: {interruptible}\n    team: team-{}\n",
            rng.range(0, 12)
        );
        if east {
            out.push_str("    regions: [us-east-1, us-east-2, us-east4]\n");
        }
        if rng.chance(0.2) {
            out.push_str("    buffer: 0.1\n");
        }
    }
    out
}

/// `2027-01-04` plus `days` days, as `YYYY-MM-DD` (the quarter stays inside 2027).
fn chrono_free_date(days: u64) -> String {
    const MONTHS: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut day = 3 + days; // 0-based day of 2027
    let mut month = 0;
    while day >= MONTHS[month] {
        day -= MONTHS[month];
        month += 1;
    }
    format!("2027-{:02}-{:02}", month + 1, day + 1)
}
