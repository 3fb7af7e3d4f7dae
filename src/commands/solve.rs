//! `gpucap solve PROBLEM.json`: reads a `gpucap.problem/v1`, solves it, and prints the
//! `gpucap.solution/v1` (or, with `--format table`, a summary a person can read: what to buy
//! and when, per scenario usage, cost by kind, the bound, and what simpler strategies cost).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_BORDERS_ONLY};

use crate::commands::common::{Format, GlobalArgs, Outcome, stdout};
use crate::problem::{self, OfferKind, Solution, Status, Usage, Validated};
use crate::render::terminal::thousands;
use crate::solver::{self, SolveOptions};
use crate::text::visible;
use crate::timespec;

#[derive(Debug, Args)]
pub struct SolveArgs {
    /// The problem (`gpucap.problem/v1`, `/v2` or `/v3` JSON); `-` reads stdin.
    pub problem: PathBuf,
    /// Output on stdout: the solution document, or a summary.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Stop after this many seconds with the best plan found (status `feasible`; default 600).
    #[arg(
        long,
        value_name = "SECONDS",
        allow_hyphen_values = true,
        value_parser = crate::commands::common::parse_time_limit
    )]
    pub time_limit: Option<Duration>,
    /// Refuse problems larger than this many solver steps (the tables and curves of the second
    /// stage; see docs/limits.md). Default 2,000,000,000.
    #[arg(long, value_name = "SIZE")]
    pub max_problem_size: Option<u64>,
    /// Pools solved at once (default: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

pub fn run(global: &GlobalArgs, args: SolveArgs) -> anyhow::Result<Outcome> {
    let (text, path) = read(&args.problem)?;
    let parsed = problem::parse(&text, &path)?;
    let validated = problem::validate(parsed).map_err(|mut e| {
        e.location.file = Some(path.clone());
        e
    })?;
    problem::size::check(&validated, args.max_problem_size).map_err(|mut e| {
        e.location.file = Some(path.clone());
        e
    })?;
    let options = SolveOptions {
        time_limit: Some(args.time_limit.unwrap_or(crate::limits::DEFAULT_TIME_LIMIT)),
        threads: args.threads,
        observer: super::solving::SolveProgress::observer(
            validated.problem().pools.len(),
            None,
            global.verbose > 0,
            global.quiet,
        ),
        ..SolveOptions::default()
    };
    let started = Instant::now();
    let solution = solver::solve(&validated, &options);
    tracing::info!("solved in {:.3} s", started.elapsed().as_secs_f64());
    // The baselines in the table solve the pools again; their progress would only confuse.
    let options = SolveOptions {
        observer: Default::default(),
        ..options
    };
    if let Some(message) = &solution.message {
        tracing::warn!("{message}");
    }
    match args.format {
        Format::Json => stdout(&(serde_json::to_string_pretty(&solution)? + "\n"))?,
        Format::Table => stdout(&summary(&validated, &solution, &options))?,
    }
    Ok(Outcome::OK)
}

fn read(path: &Path) -> anyhow::Result<(String, PathBuf)> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the problem from stdin")?;
        return Ok((text, PathBuf::from("<stdin>")));
    }
    if path.is_dir() {
        return Err(crate::diagnostic::InputError::in_file(
            path,
            "is a directory, not a problem file",
        )
        .into());
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        crate::diagnostic::InputError::in_file(
            path,
            format!(
                "is not UTF-8 text (byte {}); a problem is `gpucap.problem` JSON",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    Ok((text, path.to_path_buf()))
}

/// `$1,234,567.89`.
fn dollars(x: f64) -> String {
    let cents = (x * 100.0).round();
    let sign = if cents < 0.0 { "-" } else { "" };
    let cents = cents.abs() as u64;
    format!("{sign}${}.{:02}", thousands(cents / 100), cents % 100)
}

/// Instances × hours of one offer's usage.
fn instance_hours(usage: &Usage) -> u64 {
    usage
        .segments
        .iter()
        .map(|s| u64::from(s.len()) * u64::from(s.value()))
        .sum()
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(header.iter().map(Cell::new));
    t
}

fn right(text: impl ToString) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

/// The time of period `period` (an hour unless the problem says `period_minutes`).
fn when(v: &Validated, period: u32) -> String {
    timespec::rfc3339(v.time_of(period))
}

fn summary(v: &Validated, s: &Solution, options: &SolveOptions) -> String {
    let problem = v.problem();
    let mut out = String::new();
    let status = match s.status {
        Status::Optimal => "optimal",
        Status::Feasible => "feasible (not proven optimal)",
        Status::Infeasible => "infeasible",
    };
    let gap = if s.expected_cost > 0.0 {
        (s.expected_cost - s.bound) / s.expected_cost * 100.0
    } else {
        0.0
    };
    out += &format!(
        "status: {status}\nexpected cost: {}   bound: {}   gap: {gap:.4} %\nhorizon: {} from {}; {} pools, {} offers, {} scenarios\n",
        dollars(s.expected_cost),
        dollars(s.bound),
        match problem.period_minutes() {
            60 => format!("{} hours", problem.hours),
            m => format!("{} periods of {m} minutes", problem.hours),
        },
        problem.start,
        problem.pools.len(),
        problem.offers.len(),
        problem.scenarios.len()
    );
    if let Some(message) = &s.message {
        out += &format!("\n{message}\n");
    }
    if s.status == Status::Infeasible
        && s.purchases.is_empty()
        && s.scenarios.iter().all(|k| k.usage.is_empty())
    {
        return out;
    }
    out += &purchases(v, s);
    for (k, scenario) in s.scenarios.iter().enumerate() {
        out += &usage(v, s, k, &scenario.name);
    }
    out += &gangs(v, s, options);
    out += &by_kind(v, s);
    out += &baselines(v, s, options);
    out
}

/// v3: where each gang runs and on what in the first scenario, and what the same GPUs would
/// cost as fluid work (the price of being runnable).
fn gangs(v: &Validated, s: &Solution, options: &SolveOptions) -> String {
    if s.gangs.is_empty() {
        return String::new();
    }
    let Some(first) = s.scenarios.first() else {
        return String::new();
    };
    let mut t = table(&[
        "gang",
        "placement",
        "runs on",
        "hours",
        "instances",
        "restarts",
    ]);
    for g in &s.gangs {
        let runs: Vec<_> = first.runs_on.iter().filter(|r| r.gang == g.gang).collect();
        for (i, r) in runs.iter().enumerate() {
            let on = match r.start_hour {
                Some(start) => format!("{} bought at {start}", visible(&r.offer)),
                None => visible(&r.offer).into_owned(),
            };
            let (name, placement, restarts) = if i == 0 {
                (
                    visible(&g.gang).into_owned(),
                    visible(&g.placement).into_owned(),
                    g.restarts.to_string(),
                )
            } else {
                Default::default()
            };
            t.add_row(vec![
                Cell::new(name),
                Cell::new(placement),
                Cell::new(on),
                right(format!("{}–{}", r.from, r.to)),
                right(r.instances),
                right(restarts),
            ]);
        }
    }
    let fluid = problem::validate(problem::gangs::as_fluid(v.problem()))
        .map(|f| solver::solve(&f, options));
    let price = match fluid {
        Ok(f) if f.status == Status::Optimal && f.expected_cost > 0.0 => format!(
            "the same GPUs as fluid work (any instance, any placement) cost {}: being runnable costs {} ({:.1} %)\n",
            dollars(f.expected_cost),
            dollars(s.expected_cost - f.expected_cost),
            (s.expected_cost - f.expected_cost) / f.expected_cost * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "\ngangs in scenario `{}`: each in one placement, on whole nodes, start to end\n{t}\n{price}",
        visible(&first.name)
    )
}

fn offer_index(v: &Validated, id: &str) -> usize {
    v.problem()
        .offers
        .iter()
        .position(|o| o.id == id)
        .unwrap_or(0)
}

fn purchases(v: &Validated, s: &Solution) -> String {
    if s.purchases.is_empty() {
        return "\nbuy: no term purchases\n".into();
    }
    let mut t = table(&["term offer", "start", "hours", "instances", "cost"]);
    for p in &s.purchases {
        let o = offer_index(v, &p.offer);
        let term = v.problem().offers[o].term_hours.unwrap_or(0);
        let end = p.start_hour.saturating_add(term);
        t.add_row(vec![
            Cell::new(visible(&p.offer)),
            Cell::new(when(v, p.start_hour)),
            right(format!("{}–{end}", p.start_hour)),
            right(p.instances),
            right(dollars(
                f64::from(p.instances) * v.term_cost_per_instance(o),
            )),
        ]);
    }
    format!(
        "\nbuy (shared by all scenarios): term cost {}\n{t}\n",
        dollars(s.term_cost)
    )
}

fn usage(v: &Validated, s: &Solution, k: usize, name: &str) -> String {
    let scenario = &s.scenarios[k];
    let probability = v.problem().scenarios[k].probability;
    let mut t = table(&[
        "offer",
        "kind",
        "instance-hours",
        "peak",
        "first–last hour",
        "cost",
    ]);
    for u in &scenario.usage {
        let o = offer_index(v, &u.offer);
        let hours = instance_hours(u);
        let peak = u.segments.iter().map(|x| x.value()).max().unwrap_or(0);
        let span = match (u.segments.first(), u.segments.last()) {
            (Some(a), Some(b)) => format!("{}–{}", a.from(), b.to()),
            _ => String::new(),
        };
        let kind = if v.problem().offers[o].kind == OfferKind::Spot {
            "spot"
        } else {
            "on-demand"
        };
        t.add_row(vec![
            Cell::new(visible(&u.offer)),
            Cell::new(kind),
            right(hours),
            right(peak),
            right(span),
            right(dollars(hours as f64 * v.hourly_cost(o))),
        ]);
    }
    let body = if scenario.usage.is_empty() {
        "no on-demand or spot use".to_string()
    } else {
        t.to_string()
    };
    format!(
        "\nscenario `{}` (probability {probability}): on-demand and spot {}\n{body}\n",
        visible(name),
        dollars(scenario.cost)
    )
}

fn by_kind(v: &Validated, s: &Solution) -> String {
    let mut on_demand = 0.0;
    let mut spot = 0.0;
    for (k, scenario) in s.scenarios.iter().enumerate() {
        let p = v.problem().scenarios[k].probability;
        for u in &scenario.usage {
            let o = offer_index(v, &u.offer);
            let hours = instance_hours(u);
            let cost = p * hours as f64 * v.hourly_cost(o);
            if v.problem().offers[o].kind == OfferKind::Spot {
                spot += cost
            } else {
                on_demand += cost
            }
        }
    }
    let mut t = table(&["kind", "expected cost", "share"]);
    for (kind, cost) in [
        ("term", s.term_cost),
        ("on-demand", on_demand),
        ("spot", spot),
    ] {
        let share = if s.expected_cost > 0.0 {
            cost / s.expected_cost * 100.0
        } else {
            0.0
        };
        t.add_row(vec![
            Cell::new(kind),
            right(dollars(cost)),
            right(format!("{share:.1} %")),
        ]);
    }
    format!("\ncost by kind (expected over scenarios)\n{t}\n")
}

fn baselines(v: &Validated, s: &Solution, options: &SolveOptions) -> String {
    let mut t = table(&["strategy", "expected cost", "vs. this plan"]);
    for b in solver::baselines(v, options).iter() {
        let (cost, delta) = match b.expected_cost {
            Some(c) if s.expected_cost > 0.0 => (
                dollars(c),
                format!("{:+.1} %", (c - s.expected_cost) / s.expected_cost * 100.0),
            ),
            Some(c) => (dollars(c), String::new()),
            None => ("cannot cover the demand".into(), String::new()),
        };
        t.add_row(vec![Cell::new(b.name), right(cost), right(delta)]);
    }
    format!("\nsimpler strategies on the same problem\n{t}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_group_thousands() {
        assert_eq!(dollars(1873210.554), "$1,873,210.55");
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(999.999), "$1,000.00");
    }
}
