//! The built-in price snapshot: a dated CSV of list prices for the main GPU instance types,
//! compiled into the binary so that gpucap works offline. Every row names the document its
//! price came from and the date it was true; the loader turns rows into offers with
//! [`SourceKind::Snapshot`] provenance, and the writer produces the same format from live
//! offers (`gpucap prices --refresh --write-snapshot`) or from price catalogs
//! ([`crate::catalog_snapshot`], `gpucap prices --write-snapshot PATH --from-catalog DIR`).
//!
//! A row summarising prices that differ by zone (spot, above all) keeps their spread: the
//! row's price is the median over the region's zones, `zone_min` and `zone_max` the extremes
//! and `zones` how many zones were listed ([`Spread`]).

use std::fmt::Write as _;
use std::str::FromStr;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::{
    Accelerator, Cloud, Offer, PurchaseKind, Source, SourceKind, instance_types, validate,
};

/// The snapshot shipped with this build.
pub const BUILTIN: &str = include_str!("../data/snapshot.csv");
const BUILTIN_NAME: &str = "built-in snapshot (providers/core/data/snapshot.csv)";

/// A snapshot row that cannot be used, with its line.
#[derive(Debug, thiserror::Error)]
#[error("{name}:{line}: {message}")]
pub struct SnapshotError {
    pub name: String,
    pub line: u64,
    pub message: String,
}

/// One row, as written.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    cloud: String,
    region: String,
    zone: String,
    instance_type: String,
    accelerator: String,
    gpus_per_instance: u32,
    kind: String,
    price_per_instance_hour: String,
    upfront: String,
    term_hours: String,
    as_of: String,
    source: String,
    #[serde(default)]
    zone_min: String,
    #[serde(default)]
    zone_max: String,
    #[serde(default)]
    zones: String,
}

/// How a summarised price varied across the zones of its region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spread {
    /// The lowest and highest zone's price, USD per instance-hour.
    pub min: Decimal,
    pub max: Decimal,
    /// How many zones the source listed.
    pub zones: u32,
}

/// One snapshot row: the offer, and the zone spread it summarises, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub offer: Offer,
    pub spread: Option<Spread>,
}

/// The built-in snapshot's offers.
pub fn builtin() -> Result<Vec<Offer>, SnapshotError> {
    parse(BUILTIN, BUILTIN_NAME)
}

/// The built-in snapshot's rows, with their zone spreads.
pub fn builtin_entries() -> Result<Vec<Entry>, SnapshotError> {
    parse_entries(BUILTIN, BUILTIN_NAME)
}

/// Parses snapshot text; `name` is used in errors.
pub fn parse(text: &str, name: &str) -> Result<Vec<Offer>, SnapshotError> {
    Ok(parse_entries(text, name)?
        .into_iter()
        .map(|e| e.offer)
        .collect())
}

/// The `# not found: …` comment lines of a snapshot or published-price file, without the `#`:
/// the figures its author looked for and could not find.
pub fn not_found(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(str::trim)
        .filter(|l| l.starts_with("not found:"))
        .map(str::to_string)
        .collect()
}

/// Parses snapshot text into rows with their spreads; `name` is used in errors.
pub fn parse_entries(text: &str, name: &str) -> Result<Vec<Entry>, SnapshotError> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let err = |line: u64, message: String| SnapshotError {
        name: name.to_string(),
        line,
        message,
    };
    let headers = reader.headers().map_err(|e| err(1, e.to_string()))?.clone();
    let mut offers = Vec::new();
    for result in reader.records() {
        let record =
            result.map_err(|e| err(e.position().map_or(0, |p| p.line()), e.to_string()))?;
        let line = record.position().map_or(0, |p| p.line());
        let row: Row = record
            .deserialize(Some(&headers))
            .map_err(|e| err(line, e.to_string()))?;
        offers.push(row_to_entry(row).map_err(|m| err(line, m))?);
    }
    Ok(offers)
}

fn row_to_entry(row: Row) -> Result<Entry, String> {
    let spread = match (
        row.zone_min.as_str(),
        row.zone_max.as_str(),
        row.zones.as_str(),
    ) {
        ("", "", "") => None,
        (min, max, zones) => {
            let money = |field: &str, s: &str| {
                Decimal::from_str(s).map_err(|e| format!("`{field}` `{s}`: {e}"))
            };
            let spread = Spread {
                min: money("zone_min", min)?,
                max: money("zone_max", max)?,
                zones: zones
                    .parse()
                    .map_err(|e| format!("`zones` `{zones}`: {e}"))?,
            };
            if spread.min > spread.max {
                return Err(format!("`zone_min` {min} is above `zone_max` {max}"));
            }
            Some(spread)
        }
    };
    let offer = row_to_offer(row)?;
    if let Some(s) = &spread
        && (offer.price_per_instance_hour < s.min || offer.price_per_instance_hour > s.max)
    {
        return Err(format!(
            "`price_per_instance_hour` {} is outside its zones' range {}–{}",
            offer.price_per_instance_hour, s.min, s.max
        ));
    }
    Ok(Entry { offer, spread })
}

fn row_to_offer(row: Row) -> Result<Offer, String> {
    let cloud = Cloud::from_str(&row.cloud)?;
    let accelerator = Accelerator::parse(&row.accelerator).map_err(|e| e.to_string())?;
    if let Some((known, gpus)) = instance_types::lookup(cloud, &row.instance_type)
        && (known != accelerator || gpus != row.gpus_per_instance)
    {
        return Err(format!(
            "`{}` has {gpus} x {known}, not {} x {accelerator}",
            row.instance_type, row.gpus_per_instance
        ));
    }
    let kind = PurchaseKind::from_str(&row.kind)?;
    let money =
        |field: &str, s: &str| Decimal::from_str(s).map_err(|e| format!("`{field}` `{s}`: {e}"));
    let price = money("price_per_instance_hour", &row.price_per_instance_hour)?;
    let upfront = if row.upfront.is_empty() {
        Decimal::ZERO
    } else {
        money("upfront", &row.upfront)?
    };
    if price.is_zero() && upfront.is_zero() {
        return Err(validate::price(price)
            .err()
            .map_or("no price".into(), |p| p.to_string()));
    }
    let term_hours = match row.term_hours.as_str() {
        "" => None,
        h => Some(
            h.parse::<u32>()
                .map_err(|e| format!("`term_hours` `{h}`: {e}"))?,
        ),
    };
    let fetched_at = parse_as_of(&row.as_of)?;
    if row.source.trim().is_empty() {
        return Err("`source` is empty; every snapshot price must say where it came from".into());
    }
    Ok(Offer {
        cloud,
        region: row.region,
        zone: Some(row.zone).filter(|z| !z.is_empty()),
        instance_type: row.instance_type,
        accelerator,
        gpus_per_instance: row.gpus_per_instance,
        gpu_memory_gb: Some(accelerator.spec().memory_gb),
        kind,
        price_per_instance_hour: price,
        upfront,
        term_hours,
        earliest_start: None,
        lead_time_hours: None,
        max_instances: None,
        offering_id: None,
        source: Source {
            kind: SourceKind::Snapshot,
            origin: row.source,
            fetched_at,
        },
    })
}

fn parse_as_of(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| format!("`as_of` `{s}` is not a date (YYYY-MM-DD) or RFC 3339 time"))
}

/// Writes offers in the snapshot format, with a header saying how they were obtained.
pub fn write(offers: &[Offer], generated_by: &str) -> String {
    let entries: Vec<Entry> = offers
        .iter()
        .map(|o| Entry {
            offer: o.clone(),
            spread: None,
        })
        .collect();
    write_entries(
        &entries,
        &[
            format!("gpucap price snapshot. {generated_by}"),
            "Each row: the price, the document or API call it came from (`source`) and when it was true (`as_of`).".into(),
        ],
    )
}

/// A date where the time is midnight UTC (how dated price lists are written), else RFC 3339.
fn as_of(t: DateTime<Utc>) -> String {
    if t.time() == chrono::NaiveTime::MIN {
        t.format("%Y-%m-%d").to_string()
    } else {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

/// Writes rows in the snapshot format under `header` (one comment line each, `#` added).
pub fn write_entries(entries: &[Entry], header: &[String]) -> String {
    let mut out = String::new();
    for line in header {
        if line.is_empty() {
            out.push_str("#\n");
        } else {
            let _ = writeln!(out, "# {line}");
        }
    }
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        let (a, b) = (&a.offer, &b.offer);
        (
            a.cloud,
            &a.region,
            &a.instance_type,
            a.kind,
            a.term_hours,
            &a.zone,
        )
            .cmp(&(
                b.cloud,
                &b.region,
                &b.instance_type,
                b.kind,
                b.term_hours,
                &b.zone,
            ))
    });
    for e in sorted {
        let o = &e.offer;
        let spread = e.spread.as_ref();
        let _ = writer.serialize(Row {
            cloud: o.cloud.to_string(),
            region: o.region.clone(),
            zone: o.zone.clone().unwrap_or_default(),
            instance_type: o.instance_type.clone(),
            accelerator: o.accelerator.to_string(),
            gpus_per_instance: o.gpus_per_instance,
            kind: o.kind.to_string(),
            price_per_instance_hour: o.price_per_instance_hour.normalize().to_string(),
            upfront: o.upfront.normalize().to_string(),
            term_hours: o.term_hours.map(|h| h.to_string()).unwrap_or_default(),
            as_of: as_of(o.source.fetched_at),
            source: o.source.origin.clone(),
            zone_min: spread.map_or_else(String::new, |s| s.min.normalize().to_string()),
            zone_max: spread.map_or_else(String::new, |s| s.max.normalize().to_string()),
            zones: spread.map_or_else(String::new, |s| s.zones.to_string()),
        });
    }
    out.push_str(&String::from_utf8_lossy(
        &writer.into_inner().unwrap_or_default(),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_snapshot_loads_and_covers_the_main_accelerators() {
        let offers = builtin().expect("built-in snapshot parses");
        let has = |cloud: Cloud, acc: &str| {
            offers
                .iter()
                .any(|o| o.cloud == cloud && o.accelerator.name() == acc)
        };
        for acc in [
            "h200",
            "h100",
            "a100",
            "a100-80gb",
            "l40s",
            "l4",
            "a10g",
            "trainium",
        ] {
            assert!(has(Cloud::Aws, acc), "aws {acc}");
        }
        for acc in ["h100", "a100", "l4"] {
            assert!(has(Cloud::Gcp, acc), "gcp {acc}");
        }
        for acc in ["h100", "a100", "a100-80gb"] {
            assert!(has(Cloud::Azure, acc), "azure {acc}");
        }
        assert!(
            offers
                .iter()
                .all(|o| o.source.kind == SourceKind::Snapshot && !o.source.origin.is_empty())
        );
        assert!(
            offers
                .iter()
                .all(|o| o.effective_price_per_gpu_hour() > Decimal::ZERO)
        );
    }

    #[test]
    fn written_snapshots_read_back_identically() {
        let offers = builtin().expect("built-in");
        let text = write(&offers, "test");
        let again = parse(&text, "rewritten").expect("reparses");
        assert_eq!(again.len(), offers.len());
        for o in &offers {
            assert!(again.contains(o), "{o:?} lost");
        }
    }

    #[test]
    fn bad_rows_name_their_line_and_field() {
        let header = "cloud,region,zone,instance_type,accelerator,gpus_per_instance,kind,price_per_instance_hour,upfront,term_hours,as_of,source\n";
        let ok =
            "aws,us-east-1,,p5.48xlarge,h100,8,on-demand,98.32,0,,2024-12-01,AWS pricing page\n";
        let text = format!(
            "# comment\n{header}{ok}aws,us-east-1,,p5.48xlarge,h100,12,on-demand,98.32,0,,2024-12-01,x\n"
        );
        let err = parse(&text, "snap.csv").expect_err("count contradicts");
        assert!(
            err.to_string()
                .starts_with("snap.csv:4: `p5.48xlarge` has 8 x h100"),
            "{err}"
        );
        let text = format!(
            "{header}{ok}aws,us-east-1,,p5.48xlarge,h100,8,on-demand,ninety,0,,2024-12-01,x\n"
        );
        let err = parse(&text, "snap.csv").expect_err("bad price");
        assert!(
            err.to_string()
                .contains(":3: `price_per_instance_hour` `ninety`"),
            "{err}"
        );
        let text =
            format!("{header}aws,us-east-1,,p5.48xlarge,h100,8,on-demand,1,0,,2024-12-01,\n");
        assert!(
            parse(&text, "s")
                .expect_err("no source")
                .to_string()
                .contains("`source` is empty")
        );
    }
}
