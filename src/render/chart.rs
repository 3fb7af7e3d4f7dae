//! SVG and PNG charts (plotters): GPUs over time per pool, stacked by campaign. The font is
//! embedded (DejaVu Sans), so charts render the same on a CI runner without system fonts.

use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::stack::Stack;
use crate::demand::DemandCurve;
use crate::text::visible;

/// Chart files gpucap can write, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub fn from_path(path: &std::path::Path) -> Option<ImageFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "svg" => Some(ImageFormat::Svg),
            "png" => Some(ImageFormat::Png),
            _ => None,
        }
    }
}

/// Tableau 10: distinguishable, colour-blind-friendlier than a rainbow.
const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(89, 161, 79),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];

const WIDTH: u32 = 1200;
const HEIGHT_PER_POOL: u32 = 420;
/// Bands per pool before the rest are grouped as "other".
const BANDS: usize = 10;

#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart: {0}")]
pub struct ChartError(String);

pub(super) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; failure would be a packaging bug, and text would
        // then be missing rather than the program failing.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Corner points of a step function with one value per hour: two points where the value
/// changes, none in between (a year of hourly data stays small in SVG).
pub(super) fn step_points(values: &[u32]) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    let mut previous = None;
    for (t, &v) in values.iter().enumerate() {
        if previous != Some(v) {
            if let Some(p) = previous {
                points.push((t as f64, p as f64));
            }
            points.push((t as f64, v as f64));
            previous = Some(v);
        }
    }
    if let Some(p) = previous {
        points.push((values.len() as f64, p as f64));
    }
    points
}

/// The demand chart of one scenario as an SVG document.
pub fn demand_svg(curve: &DemandCurve, scenario: usize) -> Result<String, ChartError> {
    register_font();
    let mut svg = String::new();
    {
        let size = (WIDTH, HEIGHT_PER_POOL * curve.pools.len().max(1) as u32);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw_demand(root, curve, scenario)?;
    }
    Ok(svg)
}

/// The demand chart of one scenario as PNG bytes.
pub fn demand_png(curve: &DemandCurve, scenario: usize) -> Result<Vec<u8>, ChartError> {
    register_font();
    let (w, h) = (WIDTH, HEIGHT_PER_POOL * curve.pools.len().max(1) as u32);
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw_demand(root, curve, scenario)?;
    }
    let image = image::RgbImage::from_raw(w, h, rgb)
        .ok_or_else(|| ChartError("bitmap size mismatch".into()))?;
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| ChartError(e.to_string()))?;
    Ok(png)
}

fn draw_demand<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    curve: &DemandCurve,
    scenario: usize,
) -> Result<(), ChartError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| ChartError(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let sc = &curve.scenarios[scenario];
    let areas = root.split_evenly((curve.pools.len().max(1), 1));
    for ((pool, pc), area) in curve.pools.iter().zip(&sc.pools).zip(areas) {
        let stack = Stack::of_pool(pc, curve.horizon.periods, BANDS);
        let peak = stack.peak().max(1);
        let hours = curve.horizon.periods as f64;
        let horizon = curve.horizon;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!(
                    "{} ({}) — scenario \"{}\": GPUs by campaign, peak {}",
                    visible(&pool.id),
                    pool.accelerator,
                    visible(&sc.name),
                    stack.peak()
                ),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(56)
            // Headroom above the peak keeps the legend off the data.
            .build_cartesian_2d(0f64..hours, 0f64..peak as f64 * 1.45)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(10)
            .x_label_formatter(&|h| horizon.time_of(*h as u32).format("%b %d").to_string())
            .y_label_formatter(&|v| format!("{v:.0}"))
            .y_desc("GPUs")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        // Cumulative tops, drawn from the top band down so each fill covers only its own band.
        let mut cumulative: Vec<Vec<u32>> = Vec::new();
        let mut running = vec![0u32; curve.horizon.periods as usize];
        for band in &stack.values {
            for (r, v) in running.iter_mut().zip(band) {
                *r += v;
            }
            cumulative.push(running.clone());
        }
        for (band, top) in cumulative.iter().enumerate().rev() {
            let color = PALETTE[band % PALETTE.len()];
            let steps = step_points(top);
            chart
                .draw_series(AreaSeries::new(steps, 0.0, color.mix(0.9)).border_style(color))
                .map_err(err)?
                .label(visible(&stack.labels[band]))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_have_corners_only_where_values_change() {
        assert_eq!(
            step_points(&[2, 2, 5, 5, 0]),
            [
                (0.0, 2.0),
                (2.0, 2.0),
                (2.0, 5.0),
                (4.0, 5.0),
                (4.0, 0.0),
                (5.0, 0.0)
            ]
        );
        assert!(step_points(&[]).is_empty());
    }
}
