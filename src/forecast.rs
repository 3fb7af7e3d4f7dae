//! Demand forecasts: GPU time series with quantiles, from CSV.
//!
//! Two shapes are read: Prophet's output (`ds,yhat,yhat_lower,yhat_upper`, any extra Prophet
//! columns ignored; the pool comes from the config) and a long form
//! (`timestamp,pool,p50[,p10,p90,…]`). Each row applies to every hour from its timestamp to the
//! next row's (the last row to the same step again), so daily and weekly forecasts need no
//! resampling. Values are GPUs in use; negative lower bounds (Prophet produces them) are read
//! as zero.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};

use crate::config::Quantile;
use crate::diagnostic::{InputError, Location};
use crate::limits::MAX_GPUS;
use crate::timespec::parse_timestamp;

/// One forecast value with its quantiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub median: f64,
    /// Percentile → value (Prophet's lower/upper are stored as the lowest/highest entries).
    pub quantiles: BTreeMap<u8, f64>,
    /// Line in the file, for messages.
    pub line: usize,
}

impl Point {
    /// The value for a scenario's quantile; falls back to the median when the file has no such
    /// column (a forecast without bounds has one value for every scenario).
    pub fn value(&self, q: Quantile) -> f64 {
        match q {
            Quantile::Median => self.median,
            Quantile::Lower => self
                .quantiles
                .first_key_value()
                .map_or(self.median, |(_, v)| *v),
            Quantile::Upper => self
                .quantiles
                .last_key_value()
                .map_or(self.median, |(_, v)| *v),
            Quantile::Percentile(p) => self.quantiles.get(&p).copied().unwrap_or(self.median),
        }
    }
}

/// One pool's forecast from one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub file: PathBuf,
    /// The pool as written (config pool id or accelerator name).
    pub pool: String,
    pub points: Vec<Point>,
    /// Whether the file had a column for each quantile a scenario may ask for.
    pub has_bounds: bool,
}

/// Prophet names its interval columns without a level; gpucap reads them as the 10th and
/// 90th percentiles, Prophet's default `interval_width` of 0.8.
const PROPHET_LOWER: u8 = 10;
const PROPHET_UPPER: u8 = 90;

enum Shape {
    Prophet {
        ds: usize,
        yhat: usize,
        lower: Option<usize>,
        upper: Option<usize>,
    },
    Long {
        timestamp: usize,
        pool: usize,
        median: usize,
        quantiles: Vec<(u8, usize)>,
    },
}

/// Parses forecast CSV text. `pool` is required for Prophet files and filters long-form rows.
pub fn parse(text: &str, path: &Path, pool: Option<&str>) -> Result<Vec<Series>, InputError> {
    if text.trim().is_empty() {
        return Err(
            InputError::in_file(path, "the forecast is empty").with_hint(
                "expected a CSV header `ds,yhat,yhat_lower,yhat_upper` or `timestamp,pool,p50`",
            ),
        );
    }
    // One row per line: a quoted cell that spans lines (an odd number of quotes on a line) is
    // a broken export, even where trimming would hide the line break.
    if let Some((i, _)) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.matches('"').count() % 2 == 1)
    {
        return Err(InputError::new(
            Location::file(path).line(i + 1),
            "a quoted cell holds a line break; a forecast has one row per line",
        ));
    }
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| csv_error(path, &e))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_ascii_lowercase())
        .collect::<Vec<_>>();
    let shape = detect(&headers, path)?;
    if matches!(shape, Shape::Prophet { .. }) && pool.is_none() {
        return Err(InputError::in_file(
            path,
            "a Prophet forecast does not say which pool it is for",
        )
        .with_hint("set `pool = \"...\"` on this forecast in gpucap.toml"));
    }
    // Rows per pool, in file order.
    let mut rows: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(path, &e))?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let at = |col: usize| {
            Location::file(path)
                .line(line)
                .field(headers.get(col).cloned().unwrap_or_default())
        };
        let cell = |col: usize| record.get(col).unwrap_or_default();
        // A quoted cell may hold a newline or an escape sequence; no forecast value or pool
        // name does, and it would reach messages and charts.
        if let Some(col) = (0..record.len()).find(|&c| cell(c).chars().any(crate::text::is_hidden))
        {
            return Err(InputError::new(
                at(col),
                format!(
                    "`{}` holds a line break or control character",
                    crate::text::visible(cell(col))
                ),
            ));
        }
        let number = |col: usize| -> Result<f64, InputError> {
            let s = cell(col);
            let v: f64 = s
                .parse()
                .map_err(|_| InputError::new(at(col), format!("`{s}` is not a number")))?;
            if !v.is_finite() {
                return Err(InputError::new(
                    at(col),
                    format!("`{s}` is not a finite number"),
                ));
            }
            if v > f64::from(MAX_GPUS) {
                return Err(InputError::new(
                    at(col),
                    format!(
                        "`{s}` GPUs is more than gpucap takes ({MAX_GPUS}); forecast values are GPUs in use"
                    ),
                ));
            }
            Ok(v.max(0.0))
        };
        let (time_col, row_pool, median, quantiles) = match &shape {
            Shape::Prophet {
                ds,
                yhat,
                lower,
                upper,
            } => {
                let mut q = BTreeMap::new();
                if let Some(c) = lower {
                    q.insert(PROPHET_LOWER, number(*c)?);
                }
                if let Some(c) = upper {
                    q.insert(PROPHET_UPPER, number(*c)?);
                }
                (*ds, pool.unwrap_or_default().to_string(), number(*yhat)?, q)
            }
            Shape::Long {
                timestamp,
                pool: pool_col,
                median,
                quantiles,
            } => {
                let row_pool = cell(*pool_col).to_string();
                if row_pool.is_empty() {
                    return Err(InputError::new(at(*pool_col), "empty pool"));
                }
                if pool.is_some_and(|p| p != row_pool) {
                    continue;
                }
                let mut q = BTreeMap::new();
                for &(p, c) in quantiles {
                    q.insert(p, number(c)?);
                }
                (*timestamp, row_pool, number(*median)?, q)
            }
        };
        let t = parse_timestamp(cell(time_col)).map_err(|m| InputError::new(at(time_col), m))?;
        rows.entry(row_pool)
            .or_default()
            .push((t, median, quantiles, line));
    }
    if rows.is_empty() {
        let msg = match pool {
            Some(p) if matches!(shape, Shape::Long { .. }) => format!("no rows for pool `{p}`"),
            _ => "the forecast has a header but no rows".to_string(),
        };
        return Err(InputError::in_file(path, msg));
    }
    let has_bounds = match &shape {
        Shape::Prophet { lower, upper, .. } => lower.is_some() && upper.is_some(),
        Shape::Long { quantiles, .. } => quantiles.len() >= 2,
    };
    rows.into_iter()
        .map(|(pool, rows)| {
            Ok(Series {
                file: path.to_path_buf(),
                pool,
                points: to_points(rows, path)?,
                has_bounds,
            })
        })
        .collect()
}

fn detect(headers: &[String], path: &Path) -> Result<Shape, InputError> {
    let col = |name: &str| headers.iter().position(|h| h == name);
    if let (Some(ds), Some(yhat)) = (col("ds"), col("yhat")) {
        return Ok(Shape::Prophet {
            ds,
            yhat,
            lower: col("yhat_lower"),
            upper: col("yhat_upper"),
        });
    }
    if let (Some(timestamp), Some(pool)) = (col("timestamp"), col("pool")) {
        let median = col("p50").or_else(|| col("median")).ok_or_else(|| {
            InputError::new(
                Location::file(path).line(1),
                "the long-form forecast has no `p50` column",
            )
        })?;
        let mut quantiles = Vec::new();
        for (i, h) in headers.iter().enumerate() {
            if i == timestamp || i == pool || i == median {
                continue;
            }
            match h
                .strip_prefix('p')
                .and_then(|n| n.parse::<u8>().ok())
                .filter(|n| (1..=99).contains(n))
            {
                Some(p) => quantiles.push((p, i)),
                None => {
                    return Err(InputError::new(
                        Location::file(path).line(1).field(h.clone()),
                        format!("unknown column `{h}`"),
                    )
                    .with_hint("long-form columns are `timestamp`, `pool`, `p50` and quantiles `p1`..`p99`"));
                }
            }
        }
        return Ok(Shape::Long {
            timestamp,
            pool,
            median,
            quantiles,
        });
    }
    Err(InputError::new(
        Location::file(path).line(1),
        format!("unrecognised forecast header `{}`", headers.join(",")),
    )
    .with_hint("expected Prophet output (`ds,yhat,yhat_lower,yhat_upper`) or `timestamp,pool,p50[,p10,p90]`"))
}

type Row = (DateTime<Utc>, f64, BTreeMap<u8, f64>, usize);

/// Orders check and interval assignment: row i covers `[t_i, t_{i+1})`.
fn to_points(rows: Vec<Row>, path: &Path) -> Result<Vec<Point>, InputError> {
    for pair in rows.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.0 == a.0 {
            return Err(InputError::new(
                Location::file(path).line(b.3),
                format!(
                    "duplicate row for {} (first at line {})",
                    crate::timespec::rfc3339(b.0),
                    a.3
                ),
            ));
        }
        if b.0 < a.0 {
            return Err(InputError::new(
                Location::file(path).line(b.3),
                format!(
                    "rows out of order: {} comes after {} (line {})",
                    crate::timespec::rfc3339(b.0),
                    crate::timespec::rfc3339(a.0),
                    a.3
                ),
            )
            .with_hint("sort the forecast by time"));
        }
    }
    let last_step = match rows.as_slice() {
        [.., a, b] => b.0 - a.0,
        // A single row: a date covers its day, a timestamp its hour.
        [only] if only.0.time() == chrono::NaiveTime::MIN => Duration::days(1),
        _ => Duration::hours(1),
    };
    let ends: Vec<DateTime<Utc>> = rows
        .iter()
        .skip(1)
        .map(|r| r.0)
        .chain(rows.last().map(|r| r.0 + last_step))
        .collect();
    Ok(rows
        .into_iter()
        .zip(ends)
        .map(|((start, median, quantiles, line), end)| Point {
            start,
            end,
            median,
            quantiles,
            line,
        })
        .collect())
}

fn csv_error(path: &Path, e: &csv::Error) -> InputError {
    let mut loc = Location::file(path);
    if let Some(p) = e.position() {
        loc = loc.line(p.line() as usize);
    }
    InputError::new(loc, format!("malformed CSV: {e}"))
}

/// Reads and parses a forecast file. The text it parsed comes back with the series, so that a
/// digest of the forecast is of exactly what was used.
pub fn load(path: &Path, pool: Option<&str>) -> Result<(Vec<Series>, String), InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::in_file(path, format!("cannot read the forecast: {e}")))?;
    let series = parse(&text, path, pool)?;
    Ok((series, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str, pool: Option<&str>) -> Result<Vec<Series>, InputError> {
        parse(text, Path::new("f.csv"), pool)
    }

    #[test]
    fn prophet_daily_rows_cover_their_days() {
        let s = p(
            "ds,trend,yhat,yhat_lower,yhat_upper\n2027-01-01,1,10.5,-2,20\n2027-01-02,1,12,8,16\n",
            Some("h100"),
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].pool, "h100");
        let pts = &s[0].points;
        assert_eq!(pts[0].end - pts[0].start, Duration::days(1));
        assert_eq!(pts[1].end - pts[1].start, Duration::days(1));
        assert_eq!(
            pts[0].value(Quantile::Lower),
            0.0,
            "negative bounds read as zero"
        );
        assert_eq!(pts[0].value(Quantile::Upper), 20.0);
        assert_eq!(pts[1].value(Quantile::Median), 12.0);
    }

    #[test]
    fn long_form_splits_pools_and_reads_quantiles() {
        let text = "timestamp,pool,p10,p50,p90\n2027-01-04T00:00:00Z,h100,1,2,3\n2027-01-04T00:00:00Z,l4,4,5,6\n2027-01-11T00:00:00Z,h100,1,3,5\n";
        let s = p(text, None).unwrap();
        assert_eq!(
            s.iter().map(|s| s.pool.as_str()).collect::<Vec<_>>(),
            ["h100", "l4"]
        );
        assert_eq!(
            s[0].points[1].end - s[0].points[1].start,
            Duration::weeks(1),
            "weekly step repeats"
        );
        assert_eq!(s[0].points[1].value(Quantile::Percentile(90)), 5.0);
        assert_eq!(p(text, Some("l4")).unwrap().len(), 1);
    }

    #[test]
    fn bad_rows_are_located() {
        let e = p("ds,yhat\n2027-01-02,1\n2027-01-01,1\n", Some("x")).unwrap_err();
        assert_eq!(e.location.line, Some(3));
        assert!(e.message.contains("out of order"), "{e}");
        let e = p("ds,yhat\n2027-01-02,1\n2027-01-02,1\n", Some("x")).unwrap_err();
        assert!(e.message.contains("duplicate"), "{e}");
        let e = p("ds,yhat\n2027-01-02,lots\n", Some("x")).unwrap_err();
        assert_eq!(e.location.line, Some(2));
        assert_eq!(e.location.field.as_deref(), Some("yhat"));
        let e = p("ds,yhat\n2027-01-02,NaN\n", Some("x")).unwrap_err();
        assert!(e.message.contains("finite"), "{e}");
        let e = p("date,value\n", None).unwrap_err();
        assert!(e.message.contains("unrecognised"), "{e}");
        let e = p("ds,yhat\n2027-01-02,1\n", None).unwrap_err();
        assert!(e.hint.unwrap().contains("pool"));
        let e = p("ds,yhat\n2027-01-02,1,7\n", Some("x")).unwrap_err();
        assert_eq!(e.location.line, Some(2), "{e}");
        assert!(p("", Some("x")).unwrap_err().message.contains("empty"));
        let e = p("timestamp,pool,p50,p99x\n", None).unwrap_err();
        assert!(e.message.contains("p99x"), "{e}");
    }
}
