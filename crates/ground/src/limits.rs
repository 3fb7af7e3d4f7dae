//! The bounds on every number gpucap reads, in one place, each with the reason for it.
//!
//! gpucap spends money on the strength of files many people edit, so a number outside what any
//! real input could hold is bad input: an error naming the file and field, never a wrapped
//! integer, a panic in date arithmetic, an allocation of gigabytes or a gate that passes because
//! a limit is NaN. `docs/limits.md` lists these; raising one is a change here.

/// Longest duration anywhere (campaign lengths, slips, windows, horizons, `--window`): 20 years.
/// Longer than any planning horizon (12 years) with room for slips, and short enough that a
/// supported date plus two of them stays inside chrono's and Rego's (year 2262) time range.
pub const MAX_SPAN_HOURS: i64 = 20 * 365 * 24;

/// Earliest year a date may name. Older dates are typos (`0207-01-01`).
pub const MIN_YEAR: i32 = 1970;

/// Latest year a date may name: Rego's time builtins count nanoseconds in an `i64`, which ends
/// in 2262; 2200 leaves room for a horizon and a slip of [`MAX_SPAN_HOURS`] after it.
pub const MAX_YEAR: i32 = 2200;

/// Most GPUs one campaign, forecast value or plan action may name: several times the largest
/// clusters built so far. More is a typo, and would overflow the solver's counts when summed.
pub const MAX_GPUS: u32 = 1_000_000;

/// Most GPUs a pool may need at one hour, all campaigns and forecasts together (u32 counts
/// in the problem stay exact well below this).
pub const MAX_POOL_GPUS: u64 = 10_000_000;

/// Largest scenario `scale`: an upside scenario scales demand by a fraction; 100× is no longer
/// a scenario of the same calendar.
pub const MAX_SCALE: f64 = 100.0;

/// Largest amount of money (budgets, costs, fees), USD: a trillion dollars. Beyond it a float's
/// cents are no longer exact.
pub const MAX_USD: f64 = 1e12;

/// Most instances one plan action may buy or run: [`MAX_GPUS`] of single-GPU instances.
pub const MAX_INSTANCES: u32 = MAX_GPUS;

/// Longest solver time limit, seconds: a week. A plan that needs longer needs a smaller problem.
pub const MAX_TIME_LIMIT_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// The solver's time limit when `--time-limit` is not given (`plan`, `solve`): past it the best
/// plan found is returned with its proven gap (`status: feasible`), rather than running for hours.
pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Largest problem gpucap hands the solver, counted as its table work (`problem::size`: per
/// pool and scenario, the covering tables, the best on-demand/spot split at each demand level,
/// each segment's curve over its term levels, and the model's values). The estimate follows the
/// solver's own steps, each a few nanoseconds: measured in release builds on 2 cores, a quarter
/// of 10,000 campaigns is 1.5 billion and plans in about 10 s, the quickstart at `scale = 100`
/// is 0.13 billion and plans in 0.4 s, and a million GPUs changing every hour is 0.27 billion
/// and solves in 1 s. The inputs that once took gigabytes and hours (a demand of 4 billion
/// GPUs, `scale = 10000`) are far above it. The error says which pools make it large.
pub const MAX_PROBLEM_SIZE: u64 = 2_000_000_000;

/// Most term purchase starts (each term offer's allowed start hours, summed) one problem may
/// offer the solver: each is an integer variable, and Cbc runs out of memory long before 10⁸.
pub const MAX_TERM_STARTS: u64 = 1_000_000;

/// Longest one evaluation of the budget gates may take (regorus's execution timer). The
/// built-in gates take milliseconds; a policy past this is looping or exploding, and the
/// evaluation fails, which stops the run before any plan is written.
pub const MAX_POLICY_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// More time one evaluation of the budget gates may take for each value (number, string, list,
/// object) of the plan they read: the built-in gates are linear in the plan, so their budget
/// is too. A 10,000-campaign quarter holds about a million values and gets 10 s more; release
/// builds evaluate the gates at well under 1 µs a value.
pub const POLICY_TIME_PER_PLAN_VALUE: std::time::Duration = std::time::Duration::from_micros(10);

/// Most memory one evaluation of the budget gates may take, bytes above what the process held
/// when it began (regorus's allocator-backed memory limit): 1 GiB. The built-in gates take
/// kilobytes; a comprehension over `numbers.range(1, 1e8)` takes gigabytes within the
/// [`MAX_POLICY_TIME`], so without this bound it would end the process for lack of memory
/// rather than in an error naming the policy.
pub const MAX_POLICY_MEMORY: u64 = 1 << 30;

/// Longest spot checkpoint interval or restart time, minutes: a day. At the default 0.229
/// interruptions an hour, checkpointing once a day already loses more time than it runs.
pub const MAX_SPOT_MINUTES: u32 = 24 * 60;

/// Widest terminal chart, columns (`demand --width`): wider than any terminal, and the chart
/// never has more columns than the horizon has hours anyway.
pub const MAX_CHART_WIDTH: usize = 1_000;

/// Deepest nesting of lists and tables in a config or calendar (YAML flow `[[[…]]]`, TOML
/// inline arrays): real files nest a few levels, and the YAML parser takes seconds per
/// thousand levels before its own limit (128) is checked.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Most rows one catalog import reads (`prices --import`, `--from-catalog`, summed over the
/// directory): SkyPilot's full catalogs hold under 100,000 rows a cloud, and each row held
/// costs a few hundred bytes, so this bounds an import to a few hundred MB.
pub const MAX_CATALOG_ROWS: u64 = 500_000;

/// Most bytes one catalog import reads (as [`MAX_CATALOG_ROWS`]): 256 MiB, over a kilobyte a
/// row where real rows take 150 bytes; it also bounds one row's length.
pub const MAX_CATALOG_BYTES: u64 = 256 << 20;

/// Whether `v` is a finite number in `[min, max]`.
pub fn finite_in(v: f64, min: f64, max: f64) -> bool {
    v.is_finite() && v >= min && v <= max
}

/// A number as a message shows it: plainly, or in exponent form when it is huge or tiny
/// (`1e300`, not three hundred digits).
pub fn show(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}
