//! `gpucap demand`: the demand curve built from the project's calendars and forecasts — a
//! per-pool summary and terminal chart, the JSON demand part of `gpucap.problem/v1`, and an SVG
//! or PNG chart.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_BORDERS_ONLY};

use super::project::{Project, write_atomically};
use crate::commands::common::{Format, GlobalArgs, Outcome, stdout, stdout_color};
use crate::demand::DemandCurve;
use crate::demand::summary::{compare_scenarios, summarise};
use crate::render::chart::{ImageFormat, demand_png, demand_svg};
use crate::render::stack::Stack;
use crate::render::terminal::{Size, stacked_chart, thousands};
use crate::text::visible;

#[derive(Debug, Args)]
pub struct DemandArgs {
    /// Output on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write a chart of GPUs over time, stacked by campaign (`.svg` or `.png`).
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// Scenario shown in the summary and charts. Default: the first in the config.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Width of the terminal chart in columns (1 to 1,000).
    #[arg(long, default_value_t = 72, allow_negative_numbers = true, value_parser = parse_width)]
    pub width: usize,
}

/// `--width COLUMNS`: a whole number of columns from 1 to [`crate::limits::MAX_CHART_WIDTH`];
/// a negative or absurd width gets a message about the value, not about the flag.
fn parse_width(s: &str) -> Result<usize, String> {
    use crate::limits::MAX_CHART_WIDTH;
    let positive = || format!("the width must be a positive number of columns, found `{s}`");
    let digits = s.trim();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(positive());
    }
    match digits.parse::<usize>() {
        Ok(0) => Err(positive()),
        Ok(w) if w <= MAX_CHART_WIDTH => Ok(w),
        _ => Err(format!(
            "the width must be at most {MAX_CHART_WIDTH} columns, found `{s}`"
        )),
    }
}

pub fn run(global: &GlobalArgs, args: DemandArgs) -> anyhow::Result<Outcome> {
    if let Some(chart) = &args.chart
        && ImageFormat::from_path(chart).is_none()
    {
        bail!(
            "`--chart {}`: charts are `.svg` or `.png` files",
            chart.display()
        );
    }
    let project = Project::load(&global.config, chrono::Utc::now())?;
    let curve = project.demand()?;
    for w in &curve.warnings {
        tracing::warn!("{w}");
    }
    let scenario = match &args.scenario {
        None => 0,
        Some(name) => curve
            .scenarios
            .iter()
            .position(|s| &s.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = curve.scenarios.iter().map(|s| s.name.as_str()).collect();
                anyhow::anyhow!(
                    "unknown scenario `{name}`; the config has: {}",
                    names.join(", ")
                )
            })?,
    };
    // Render everything before writing anything, so a failure writes nothing.
    let chart = match &args.chart {
        Some(path) => Some((
            path,
            match ImageFormat::from_path(path) {
                Some(ImageFormat::Png) => demand_png(&curve, scenario)?,
                _ => demand_svg(&curve, scenario)?.into_bytes(),
            },
        )),
        None => None,
    };
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&curve.document())? + "\n",
        Format::Table => report(
            &project,
            &curve,
            scenario,
            args.width,
            stdout_color(global.color),
        ),
    };
    if let Some((path, bytes)) = chart {
        write_atomically(path, &bytes)?;
        eprintln!("wrote {}", path.display());
    }
    stdout(&text)?;
    Ok(Outcome::OK)
}

/// The human report: header, per-pool table, monthly GPU-hours, peak drivers, charts and the
/// scenario comparison.
fn report(
    project: &Project,
    curve: &DemandCurve,
    scenario: usize,
    width: usize,
    color: bool,
) -> String {
    let h = &curve.horizon;
    let sc = &curve.scenarios[scenario];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Demand from {} to {} ({} h) — {} campaigns in {} calendars, {} forecast series; scenario `{}` (p = {})\n",
        h.start.format("%Y-%m-%d %H:%M"),
        h.end().format("%Y-%m-%d %H:%M"),
        h.hours(),
        project.campaigns.len(),
        project.calendar_files.len(),
        project.forecasts.len(),
        visible(&sc.name),
        sc.probability,
    );
    let summaries = summarise(curve, scenario);
    let mut table = Table::new();
    table.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
        "pool",
        "accelerator",
        "places",
        "peak GPUs",
        "peak at (UTC)",
        "firm / flex at peak",
        "firm GPU-h",
        "flex GPU-h",
    ]);
    for (pool, s) in curve.pools.iter().zip(&summaries) {
        let clouds = pool
            .effective_clouds()
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join("+");
        let places = match pool.regions.len() {
            0 => format!("{clouds}, any region"),
            1..=3 => visible(&pool.regions.join(", ")).into_owned(),
            n => format!("{clouds}, {n} regions"),
        };
        table.add_row(vec![
            Cell::new(visible(&pool.id)),
            Cell::new(&s.accelerator),
            Cell::new(places),
            Cell::new(s.peak_gpus).set_alignment(CellAlignment::Right),
            Cell::new(s.peak_hour.map_or("-".into(), |t| {
                h.time_of(t).format("%Y-%m-%d %H:%M").to_string()
            })),
            Cell::new(format!("{} / {}", s.peak_firm_gpus, s.peak_flex_gpus))
                .set_alignment(CellAlignment::Right),
            Cell::new(thousands(s.firm_gpu_hours)).set_alignment(CellAlignment::Right),
            Cell::new(thousands(s.flex_gpu_hours)).set_alignment(CellAlignment::Right),
        ]);
    }
    let _ = writeln!(out, "{table}\n");

    for ((pool, s), pc) in curve.pools.iter().zip(&summaries).zip(&sc.pools) {
        let _ = writeln!(out, "── {} ({}) ──", visible(&pool.id), pool.accelerator);
        if !s.drivers.is_empty() {
            let drivers: Vec<String> = s
                .drivers
                .iter()
                .take(6)
                .map(|d| {
                    format!(
                        "{} {}{}",
                        visible(&d.label),
                        d.gpus,
                        if d.flex { " (flex)" } else { "" }
                    )
                })
                .collect();
            let more = s.drivers.len().saturating_sub(6);
            let _ = writeln!(
                out,
                "peak driven by: {}{}",
                drivers.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            );
        }
        let mut months = Table::new();
        months
            .load_preset(UTF8_BORDERS_ONLY)
            .set_header(vec!["month", "firm GPU-h", "flex GPU-h"]);
        for m in &s.months {
            months.add_row(vec![
                Cell::new(&m.month),
                Cell::new(thousands(m.firm_gpu_hours)).set_alignment(CellAlignment::Right),
                Cell::new(thousands(m.flex_gpu_hours)).set_alignment(CellAlignment::Right),
            ]);
        }
        let _ = writeln!(out, "{months}");
        let stack = Stack::of_pool(pc, h.periods, 8);
        out.push_str(&stacked_chart(&stack, h, Size { width, height: 12 }, color));
        out.push('\n');
    }

    let mut scenarios = Table::new();
    let mut header = vec![
        "scenario".to_string(),
        "probability".into(),
        "GPU-hours".into(),
    ];
    header.extend(
        curve
            .pools
            .iter()
            .map(|p| format!("peak {}", visible(&p.id))),
    );
    scenarios.load_preset(UTF8_BORDERS_ONLY).set_header(header);
    for s in compare_scenarios(curve) {
        let mut row = vec![
            Cell::new(visible(&s.name)),
            Cell::new(s.probability).set_alignment(CellAlignment::Right),
            Cell::new(thousands(s.gpu_hours)).set_alignment(CellAlignment::Right),
        ];
        row.extend(
            s.peak_gpus
                .iter()
                .map(|p| Cell::new(p).set_alignment(CellAlignment::Right)),
        );
        scenarios.add_row(row);
    }
    let _ = writeln!(out, "{scenarios}");
    out
}

#[cfg(test)]
mod tests {
    use super::parse_width;

    #[test]
    fn widths_are_positive_columns_up_to_the_limit() {
        assert_eq!(parse_width("72"), Ok(72));
        assert_eq!(parse_width("1000"), Ok(1000));
        for bad in ["-5", "0", "nan", "1.5", ""] {
            let err = parse_width(bad).unwrap_err();
            assert!(err.contains("must be a positive number"), "{bad}: {err}");
            assert!(err.contains(&format!("`{bad}`")), "{bad}: {err}");
        }
        for big in [
            "1001",
            "4000000000",
            "99999999999999999999999999999999999999999",
        ] {
            let err = parse_width(big).unwrap_err();
            assert!(err.contains("at most 1000"), "{big}: {err}");
        }
    }
}
