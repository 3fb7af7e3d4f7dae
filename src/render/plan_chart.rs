//! Charts of a plan (`gpucap plan --chart-dir DIR`): per pool, GPUs over time with the planned
//! capacity stacked by kind against the demand; and the expected cost per month stacked by kind.
//! SVG or PNG by the file's extension, drawn with plotters and the embedded font of [`super::chart`].

use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{ImageFormat, register_font, step_points};
use super::plan_view::{self, KINDS, horizon_start, money};
use crate::demand::hourly;
use crate::plan::{Plan, PoolPlan};

const WIDTH: u32 = 1200;
const HEIGHT_PER_POOL: u32 = 440;
const COST_HEIGHT: u32 = 520;
/// Horizons longer than this (five years) are drawn up to it.
const MAX_HOURS: u32 = 5 * 8784;

const EXISTING: RGBColor = RGBColor(186, 176, 172);
const TERM: RGBColor = RGBColor(78, 121, 167);
const ON_DEMAND: RGBColor = RGBColor(242, 142, 43);
const SPOT: RGBColor = RGBColor(89, 161, 79);
const RESERVATION: RGBColor = RGBColor(118, 183, 178);
const COMMITMENT: RGBColor = RGBColor(176, 122, 161);
const DEMAND: RGBColor = RGBColor(30, 30, 30);
const FIRM: RGBColor = RGBColor(200, 40, 50);

/// Colours of [`KINDS`] in the cost chart: blocks, reservations, commitments, on-demand, spot.
const KIND_COLORS: [RGBColor; 5] = [TERM, RESERVATION, COMMITMENT, ON_DEMAND, SPOT];

#[derive(Debug, thiserror::Error)]
pub enum PlanChartError {
    #[error("cannot draw the chart: {0}")]
    Draw(String),
    #[error("cannot write a chart to `{}`: the file name must end in .svg or .png", .0.display())]
    Format(PathBuf),
    #[error("the plan has no pool `{0}`")]
    UnknownPool(String),
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// GPUs over time for one pool (`Some(id)`) or every pool as small multiples (`None`), written
/// to `path` (`.svg` or `.png`).
pub fn write_capacity_chart(
    plan: &Plan,
    pool: Option<&str>,
    path: &Path,
) -> Result<(), PlanChartError> {
    let pools: Vec<&PoolPlan> = match pool {
        Some(id) => vec![
            plan.pools
                .iter()
                .find(|p| p.id == id)
                .ok_or_else(|| PlanChartError::UnknownPool(id.to_string()))?,
        ],
        None => plan.pools.iter().collect(),
    };
    write(&Capacity { plan, pools }, path)
}

/// Expected cost per month, stacked by kind, written to `path` (`.svg` or `.png`).
pub fn write_cost_chart(plan: &Plan, path: &Path) -> Result<(), PlanChartError> {
    write(&CostByMonth { plan }, path)
}

/// Every chart of the plan into `dir` (created if missing): `capacity-<pool>.svg` for each pool
/// and `cost-by-month.svg`. Returns the files written, in that order.
pub fn write_charts(plan: &Plan, dir: &Path) -> Result<Vec<PathBuf>, PlanChartError> {
    std::fs::create_dir_all(dir).map_err(|source| PlanChartError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for (path, bytes) in render_charts(plan, dir)? {
        std::fs::write(&path, bytes).map_err(|source| PlanChartError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The charts [`write_charts`] writes, as paths in `dir` and their bytes, written nowhere: a
/// caller that writes several outputs renders them all before writing any.
pub fn render_charts(plan: &Plan, dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, PlanChartError> {
    let mut written = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for pool in &plan.pools {
        let base = file_stem(&pool.id);
        // Two ids may sanitise alike (`a/b`, `a:b`): number the later ones.
        let mut name = base.clone();
        let mut n = 1;
        while names.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        let path = dir.join(format!("capacity-{name}.svg"));
        names.push(name);
        let bytes = render(
            &Capacity {
                plan,
                pools: vec![pool],
            },
            &path,
        )?;
        written.push((path, bytes));
    }
    let path = dir.join("cost-by-month.svg");
    let bytes = render(&CostByMonth { plan }, &path)?;
    written.push((path, bytes));
    Ok(written)
}

/// A pool id as a file name part: ASCII letters, digits, `.`, `_`, `-`; anything else becomes
/// `_`; no leading dot; at most 64 characters; never empty.
pub fn file_stem(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    while s.starts_with('.') {
        s.replace_range(..1, "_");
    }
    if s.is_empty() { "pool".into() } else { s }
}

/// Text from the plan as it goes into a chart: control characters (invalid in SVG's XML) and
/// bidirectional overrides shown escaped; plotters escapes `<`, `>` and `&`.
fn label(s: &str) -> String {
    crate::text::visible(s).into_owned()
}

/// Something drawable on either backend.
trait Picture {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), PlanChartError>
    where
        DB::ErrorType: 'static;
}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlanChartError {
    PlanChartError::Draw(e.to_string())
}

fn write(picture: &impl Picture, path: &Path) -> Result<(), PlanChartError> {
    let bytes = render(picture, path)?;
    std::fs::write(path, bytes).map_err(|source| PlanChartError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The picture in the format `path`'s extension names.
fn render(picture: &impl Picture, path: &Path) -> Result<Vec<u8>, PlanChartError> {
    register_font();
    let (w, h) = picture.size();
    let bytes = match ImageFormat::from_path(path) {
        Some(ImageFormat::Svg) => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
                picture.draw(root)?;
            }
            svg.into_bytes()
        }
        Some(ImageFormat::Png) => {
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                picture.draw(root)?;
            }
            let image = image::RgbImage::from_raw(w, h, rgb)
                .ok_or_else(|| PlanChartError::Draw("bitmap size mismatch".into()))?;
            let mut png = Vec::new();
            image
                .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
                .map_err(|e| PlanChartError::Draw(e.to_string()))?;
            png
        }
        None => return Err(PlanChartError::Format(path.to_path_buf())),
    };
    Ok(bytes)
}

/// `Jan 18` under the x axis; hours when the horizon start does not parse.
fn date_label(start: Option<DateTime<Utc>>, hour: f64) -> String {
    let hour = hour.max(0.0) as i64;
    match start.and_then(|s| s.checked_add_signed(Duration::hours(hour))) {
        Some(t) => t.format("%b %d").to_string(),
        None => format!("h{hour}"),
    }
}

/// `$400k`, `$1.2M` on a money axis.
fn money_tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("${:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("${:.0}k", v / 1e3)
    } else {
        format!("${v:.0}")
    }
}

struct Capacity<'a> {
    plan: &'a Plan,
    pools: Vec<&'a PoolPlan>,
}

impl Picture for Capacity<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT_PER_POOL * self.pools.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), PlanChartError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(draw_err)?;
        if self.pools.is_empty() {
            root.draw(&Text::new(
                "no pools in the plan",
                (40, 40),
                ("sans-serif", 20).into_font(),
            ))
            .map_err(draw_err)?;
        }
        let areas = root.split_evenly((self.pools.len().max(1), 1));
        for (pool, area) in self.pools.iter().zip(areas) {
            draw_pool(self.plan, pool, &area)?;
        }
        root.present().map_err(draw_err)
    }
}

fn draw_pool<DB: DrawingBackend>(
    plan: &Plan,
    pool: &PoolPlan,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), PlanChartError>
where
    DB::ErrorType: 'static,
{
    let hours = plan.horizon.hours.clamp(1, MAX_HOURS);
    let start = horizon_start(plan);
    let bands: [(&str, RGBColor, Vec<u32>); 4] = [
        ("existing", EXISTING, hourly(hours, &pool.existing)),
        (
            "term (blocks, reservations, commitments)",
            TERM,
            hourly(hours, &pool.term),
        ),
        ("on-demand", ON_DEMAND, hourly(hours, &pool.on_demand)),
        ("spot", SPOT, hourly(hours, &pool.spot)),
    ];
    let firm = hourly(hours, &pool.demand_firm);
    let flex = hourly(hours, &pool.demand_flex);
    let demand: Vec<u32> = firm
        .iter()
        .zip(&flex)
        .map(|(a, b)| a.saturating_add(*b))
        .collect();
    // Cumulative tops of the capacity bands, bottom to top.
    let mut tops: Vec<Vec<u32>> = Vec::new();
    let mut running = vec![0u32; hours as usize];
    for (_, _, band) in &bands {
        for (r, v) in running.iter_mut().zip(band) {
            *r = r.saturating_add(*v);
        }
        tops.push(running.clone());
    }
    let peak = running
        .iter()
        .chain(&demand)
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} ({}): planned GPUs by kind against demand, scenario \"{}\"",
                label(&pool.id),
                label(&pool.accelerator),
                label(&plan.actions_scenario)
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        // Headroom above the peak keeps the legend off the data.
        .build_cartesian_2d(0f64..hours as f64, 0f64..peak as f64 * 1.5)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_labels(12)
        .x_label_formatter(&|h| date_label(start, *h))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("date (UTC)")
        .y_desc("GPUs")
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(draw_err)?;
    // Drawn top band first, so each fill covers only its own band; the legend then lists
    // bands top to bottom, as they appear.
    for ((name, color, band), top) in bands.iter().zip(&tops).rev() {
        if band.iter().all(|&v| v == 0) {
            continue;
        }
        let color = *color;
        chart
            .draw_series(
                AreaSeries::new(step_points(top), 0.0, color.mix(0.85)).border_style(color),
            )
            .map_err(draw_err)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    if demand.iter().any(|&v| v > 0) {
        chart
            .draw_series(LineSeries::new(
                step_points(&demand),
                DEMAND.stroke_width(2),
            ))
            .map_err(draw_err)?
            .label("demand (firm + flex)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], DEMAND.stroke_width(2)));
    }
    if flex.iter().any(|&v| v > 0) && firm.iter().any(|&v| v > 0) {
        chart
            .draw_series(DashedLineSeries::new(
                step_points(&firm),
                6,
                4,
                FIRM.stroke_width(2),
            ))
            .map_err(draw_err)?
            .label("firm demand")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], FIRM.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(draw_err)?;
    Ok(())
}

/// The cost chart's data: per month, one value per shown kind, bottom to top.
struct Bars {
    months: Vec<String>,
    names: Vec<&'static str>,
    colors: Vec<RGBColor>,
    values: Vec<Vec<f64>>,
    caption: String,
}

impl Bars {
    /// By kind when the months can be split, else the monthly totals alone.
    fn of(plan: &Plan) -> Bars {
        match plan_view::cost_by_month(plan) {
            Some(m) => {
                let shown: Vec<usize> = (0..KINDS.len())
                    .filter(|&k| m.iter().any(|x| x.kinds[k] > 0.0))
                    .collect();
                Bars {
                    months: m.iter().map(|x| label(&x.month)).collect(),
                    names: shown.iter().map(|&k| KINDS[k].0).collect(),
                    colors: shown.iter().map(|&k| KIND_COLORS[k]).collect(),
                    values: m
                        .iter()
                        .map(|x| shown.iter().map(|&k| x.kinds[k].max(0.0)).collect())
                        .collect(),
                    caption: format!(
                        "Expected cost per month by kind, USD (on-demand and spot split \
                         estimated from scenario \"{}\")",
                        label(&plan.actions_scenario)
                    ),
                }
            }
            None => Bars {
                months: plan.cost.by_month.iter().map(|m| label(&m.month)).collect(),
                names: vec!["expected"],
                colors: vec![TERM],
                values: plan
                    .cost
                    .by_month
                    .iter()
                    .map(|m| vec![m.expected.max(0.0)])
                    .collect(),
                caption: "Expected cost per month, USD".into(),
            },
        }
    }
}

struct CostByMonth<'a> {
    plan: &'a Plan,
}

impl Picture for CostByMonth<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, COST_HEIGHT)
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), PlanChartError>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(draw_err)?;
        let plan = self.plan;
        let Bars {
            months,
            names,
            colors,
            values,
            caption,
        } = Bars::of(plan);
        // Integer ranges are inclusive in plotters: `0..=last` is one segment per month.
        let last = months.len().saturating_sub(1) as u32;
        let peak = values
            .iter()
            .map(|v| v.iter().sum::<f64>())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1.0);
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((0u32..last).into_segmented(), 0f64..peak * 1.3)
            .map_err(draw_err)?;
        let month_of = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                months.get(*i as usize).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(months.len().max(1))
            .x_label_formatter(&month_of)
            .y_label_formatter(&|v| money_tick(*v))
            .x_desc("month (UTC)")
            .y_desc("expected cost (USD)")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(draw_err)?;
        for (k, (name, color)) in names.iter().zip(&colors).enumerate() {
            let color = *color;
            let bars = values.iter().enumerate().filter_map(|(i, v)| {
                let below: f64 = v[..k].iter().sum();
                let value = v[k];
                (value > 0.0).then(|| {
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(i as u32), below),
                            (SegmentValue::Exact(i as u32 + 1), below + value),
                        ],
                        color.filled(),
                    );
                    bar.set_margin(0, 0, 8, 8);
                    bar
                })
            });
            chart
                .draw_series(bars)
                .map_err(draw_err)?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
        }
        // Each month's total above its bar.
        let totals = plan.cost.by_month.iter().enumerate().map(|(i, m)| {
            let top: f64 = values.get(i).map(|v| v.iter().sum()).unwrap_or(0.0);
            Text::new(
                money(m.expected),
                (SegmentValue::CenterOf(i as u32), top + peak * 0.02),
                TextStyle::from(("sans-serif", 12).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        });
        chart.draw_series(totals).map_err(draw_err)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(draw_err)?;
        root.present().map_err(draw_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("h100-us"), "h100-us");
        assert_eq!(file_stem("../../etc/passwd"), "_._.._etc_passwd");
        assert_eq!(file_stem(""), "pool");
        assert_eq!(file_stem("a b/c"), "a_b_c");
        assert_eq!(file_stem(&"x".repeat(300)).len(), 64);
    }

    #[test]
    fn money_ticks_are_short() {
        assert_eq!(money_tick(400_000.0), "$400k");
        assert_eq!(money_tick(1_250_000.0), "$1.2M");
        assert_eq!(money_tick(12.0), "$12");
    }
}
