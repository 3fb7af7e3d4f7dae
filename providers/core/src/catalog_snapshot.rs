//! Builds the built-in price snapshot from machine-readable public data instead of typing it:
//! SkyPilot-format catalogs (on-demand and spot prices per zone) and a small table of published
//! prices the catalogs do not carry (capacity blocks, 1- and 3-year terms), each with its source
//! and date (`gpucap prices --write-snapshot PATH --from-catalog DIR --published FILE`).
//!
//! A catalog directory holds the catalog CSVs and a `sources.csv` naming, for each file, where
//! it came from and the date its prices are dated with; a catalog file without that line is an
//! error, so no row of the snapshot lacks a source or a date. Prices listed per zone are
//! summarised per region: the median, with the lowest and highest zone kept as the row's
//! [`Spread`]. Spot prices are therefore indicative figures of a date, not quotes. The published
//! table may not price what a catalog already prices, and its `# not found:` lines (figures
//! looked for and not found) are carried into the snapshot's header.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;

use crate::provider::Issue;
use crate::snapshot::{self, Entry, Spread};
use crate::{Cloud, Offer, PurchaseKind, skypilot};

/// The file in a catalog directory that names each catalog's source and date.
pub const SOURCES: &str = "sources.csv";

/// Input that cannot be used, with its file and line.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct BuildError {
    pub file: PathBuf,
    pub line: Option<u64>,
    pub message: String,
}

/// One catalog file and its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogFile {
    pub path: PathBuf,
    pub source: String,
    pub as_of: NaiveDate,
}

/// The snapshot's rows and what was learnt building them.
#[derive(Debug)]
pub struct Built {
    pub entries: Vec<Entry>,
    pub catalogs: Vec<CatalogFile>,
    /// Catalog rows refused or corrected by the importer.
    pub issues: Vec<Issue>,
    /// `not found: …` lines of the published table.
    pub not_found: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SourceRow {
    file: String,
    source: String,
    as_of: String,
}

/// Reads `dir/sources.csv` and checks that it names every `*.csv` catalog of `dir` and nothing
/// else.
pub fn read_sources(dir: &Path) -> Result<Vec<CatalogFile>, BuildError> {
    let path = dir.join(SOURCES);
    let fail = |line: Option<u64>, message: String| BuildError {
        file: path.clone(),
        line,
        message,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        fail(
            None,
            format!("{e}; a catalog directory names each file's source and date in {SOURCES} (columns file,source,as_of)"),
        )
    })?;
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| fail(Some(1), e.to_string()))?
        .clone();
    let mut files = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| fail(e.position().map(|p| p.line()), e.to_string()))?;
        let line = record.position().map(|p| p.line());
        let row: SourceRow = record
            .deserialize(Some(&headers))
            .map_err(|e| fail(line, e.to_string()))?;
        if row.source.is_empty() {
            return Err(fail(line, format!("`source` of `{}` is empty", row.file)));
        }
        let as_of = NaiveDate::parse_from_str(&row.as_of, "%Y-%m-%d").map_err(|_| {
            fail(
                line,
                format!("`as_of` `{}` is not a date (YYYY-MM-DD)", row.as_of),
            )
        })?;
        let file = dir.join(&row.file);
        if !file.is_file() {
            return Err(fail(
                line,
                format!("`{}` is not a file in {}", row.file, dir.display()),
            ));
        }
        files.push(CatalogFile {
            path: file,
            source: row.source,
            as_of,
        });
    }
    let listed: Vec<&Path> = files.iter().map(|f| f.path.as_path()).collect();
    let entries = std::fs::read_dir(dir).map_err(|e| BuildError {
        file: dir.into(),
        line: None,
        message: e.to_string(),
    })?;
    let mut unlisted: Vec<String> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "csv")
                && p.file_name().is_some_and(|n| n != SOURCES)
                && !listed.contains(&p.as_path())
        })
        .map(|p| p.display().to_string())
        .collect();
    unlisted.sort();
    if !unlisted.is_empty() {
        return Err(fail(
            None,
            format!(
                "no source and date for {}; add a line for each",
                unlisted.join(", ")
            ),
        ));
    }
    if files.is_empty() {
        return Err(fail(None, "names no catalog file".into()));
    }
    Ok(files)
}

/// Builds the snapshot's rows from the catalogs of `dir` and, if given, the published table.
/// The catalogs are read as they stream in, all of them together within `bounds`.
pub fn build(
    dir: &Path,
    published: Option<&Path>,
    bounds: skypilot::Bounds,
) -> Result<Built, BuildError> {
    let catalogs = read_sources(dir)?;
    let mut offers = Vec::new();
    let mut issues = Vec::new();
    let mut left = bounds;
    for catalog in &catalogs {
        let file = std::fs::File::open(&catalog.path).map_err(|e| BuildError {
            file: catalog.path.clone(),
            line: None,
            message: e.to_string(),
        })?;
        let fetched_at = catalog
            .as_of
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc())
            .unwrap_or_default();
        let imported = skypilot::import_reader(
            std::io::BufReader::new(file),
            &catalog.path,
            fetched_at,
            left,
        )
        .map_err(|e| BuildError {
            file: e.file,
            line: e.line,
            message: if left != bounds && e.message.starts_with(skypilot::PAST_BOUNDS) {
                format!(
                    "{} left of the {} rows and {} bytes all catalogs of {} may hold together",
                    e.message,
                    bounds.rows,
                    bounds.bytes,
                    dir.display()
                )
            } else {
                e.message
            },
        })?;
        left.rows -= imported.rows;
        left.bytes -= imported.bytes;
        issues.extend(imported.issues);
        offers.extend(imported.offers.into_iter().map(|mut o| {
            o.source.origin = catalog.source.clone();
            o
        }));
    }
    let (mut entries, echoed) = drop_echoed_spot(summarise(&offers));
    let mut not_found = Vec::new();
    if !echoed.is_empty() {
        not_found.push(format!(
            "not found: spot prices for {} (the catalog lists the on-demand price as the spot price in every zone; left out)",
            echoed.join(", ")
        ));
    }
    if let Some(path) = published {
        let fail = |line: Option<u64>, message: String| BuildError {
            file: path.into(),
            line,
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(None, e.to_string()))?;
        let name = path.display().to_string();
        let rows =
            snapshot::parse_entries(&text, &name).map_err(|e| fail(Some(e.line), e.message))?;
        entries = merge(entries, rows).map_err(|m| fail(None, m))?;
        not_found.extend(snapshot::not_found(&text));
    }
    Ok(Built {
        entries,
        catalogs,
        issues,
        not_found,
    })
}

/// What one snapshot row prices: the same thing in every zone of a region.
type Key = (Cloud, String, String, PurchaseKind, Option<u32>);

fn key(o: &Offer) -> Key {
    (
        o.cloud,
        o.region.clone(),
        o.instance_type.clone(),
        o.kind,
        o.term_hours,
    )
}

/// One row per region, instance type and kind: the median of the zones' prices, with the
/// lowest and highest kept. Offers listed without a zone count as one zone each.
pub fn summarise(offers: &[Offer]) -> Vec<Entry> {
    let mut groups: BTreeMap<Key, Vec<&Offer>> = BTreeMap::new();
    for o in offers {
        groups.entry(key(o)).or_default().push(o);
    }
    groups
        .into_values()
        .map(|group| {
            let mut prices: Vec<Decimal> =
                group.iter().map(|o| o.price_per_instance_hour).collect();
            prices.sort();
            let n = prices.len();
            let median = if n % 2 == 1 {
                prices[n / 2]
            } else {
                ((prices[n / 2 - 1] + prices[n / 2]) / Decimal::TWO).round_dp(6)
            };
            let mut offer = group[0].clone();
            offer.zone = None;
            offer.price_per_instance_hour = median.normalize();
            offer.max_instances = None;
            Entry {
                offer,
                spread: Some(Spread {
                    min: prices[0],
                    max: prices[n - 1],
                    zones: n as u32,
                }),
            }
        })
        .collect()
}

/// Leaves out spot rows whose every zone lists exactly the on-demand price: a catalog that
/// fills an unknown spot price with the on-demand one (SkyPilot's Azure H100 rows) cannot be
/// told from a real one there, so the figure is not used. Returns what was left out.
pub fn drop_echoed_spot(entries: Vec<Entry>) -> (Vec<Entry>, Vec<String>) {
    let on_demand: BTreeMap<Key, Option<Spread>> = entries
        .iter()
        .filter(|e| e.offer.kind == PurchaseKind::OnDemand)
        .map(|e| {
            let mut k = key(&e.offer);
            k.3 = PurchaseKind::Spot;
            (k, e.spread.clone())
        })
        .collect();
    let mut dropped = Vec::new();
    let kept = entries
        .into_iter()
        .filter(|e| {
            let echoed = e.offer.kind == PurchaseKind::Spot
                && matches!(
                    (on_demand.get(&key(&e.offer)), &e.spread),
                    (Some(Some(od)), Some(spot)) if od.min == od.max && spot.min == spot.max && spot.min == od.min
                );
            if echoed {
                dropped.push(format!(
                    "{} {} {}",
                    e.offer.cloud, e.offer.region, e.offer.instance_type
                ));
            }
            !echoed
        })
        .collect();
    (kept, dropped)
}

/// The catalogs' rows and the published ones; a published row pricing what a catalog already
/// prices is an error (two figures for one thing, and no rule to choose).
pub fn merge(catalog: Vec<Entry>, published: Vec<Entry>) -> Result<Vec<Entry>, String> {
    let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
    for (i, e) in catalog.iter().enumerate() {
        seen.insert(key(&e.offer), i);
    }
    let mut out = catalog;
    for e in published {
        let k = key(&e.offer);
        if seen.contains_key(&k) {
            let (cloud, region, instance, kind, _) = &k;
            return Err(format!(
                "{cloud} {region} {instance} {kind} is priced by a catalog already; remove the published row"
            ));
        }
        seen.insert(k, out.len());
        out.push(e);
    }
    Ok(out)
}

/// The label a row is counted under: its kind, and its term for terms.
pub fn kind_label(o: &Offer) -> String {
    match (o.kind, o.term_hours) {
        (PurchaseKind::Reservation | PurchaseKind::Commitment, Some(h))
            if h.is_multiple_of(8760) =>
        {
            format!("{} {}y", o.kind, h / 8760)
        }
        (kind, _) => kind.to_string(),
    }
}

/// Rows per cloud and kind, for the header and the report.
pub fn counts(entries: &[Entry]) -> BTreeMap<(Cloud, String), usize> {
    let mut counts = BTreeMap::new();
    for e in entries {
        *counts
            .entry((e.offer.cloud, kind_label(&e.offer)))
            .or_default() += 1;
    }
    counts
}

/// The snapshot file's header: what it is, the command that wrote it, its sources, how spot is
/// summarised, the rows per cloud and kind, and what could not be found.
pub fn header(built: &Built, command: &str, written_on: NaiveDate) -> Vec<String> {
    let mut h = vec![
        "gpucap built-in price snapshot: public list prices in USD per instance-hour for the main GPU".into(),
        "instance types, used when no live API, cache or import is available (`gpucap prices --offline`,".into(),
        "`[prices] offline = true`). Generated, not typed: do not edit by hand, rebuild it.".into(),
        String::new(),
        format!("Written on {written_on} by:"),
        format!("  {command}"),
        "(from the live APIs instead: `gpucap prices --refresh --write-snapshot PATH`).".into(),
        String::new(),
        "Catalogs (on-demand and spot prices per zone), each row dated with its file's date:".into(),
    ];
    for c in &built.catalogs {
        let name = c
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        h.push(format!("  {name}: {}, as of {}", c.source, c.as_of));
    }
    h.extend([
        "Published prices the catalogs do not carry (capacity blocks, 1- and 3-year terms, a few".into(),
        "instance types missing from the catalogs) come from the published table; each row names its page.".into(),
        String::new(),
        "Prices listed per zone are summarised per region: `price_per_instance_hour` is the median over".into(),
        "the `zones` the catalog lists, `zone_min` and `zone_max` the cheapest and dearest zone. Spot".into(),
        "prices are INDICATIVE figures of their `as_of` date (they move hourly): plan with live prices".into(),
        "before buying. Terms (`term_hours` 8760 or 26280) bill every hour of the term, used or not.".into(),
        String::new(),
    ]);
    let counts = counts(&built.entries);
    for cloud in Cloud::ALL {
        let parts: Vec<String> = counts
            .iter()
            .filter(|((c, _), _)| *c == cloud)
            .map(|((_, kind), n)| format!("{kind} {n}"))
            .collect();
        if !parts.is_empty() {
            h.push(format!("Rows, {cloud}: {}", parts.join(", ")));
        }
    }
    if !built.not_found.is_empty() {
        h.push(String::new());
        h.extend(built.not_found.iter().cloned());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Accelerator, Source, SourceKind};
    use chrono::Utc;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).expect("decimal")
    }

    fn spot(zone: &str, price: &str) -> Offer {
        Offer {
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: Some(zone.into()),
            instance_type: "p5.48xlarge".into(),
            accelerator: Accelerator::parse("h100").expect("h100"),
            gpus_per_instance: 8,
            gpu_memory_gb: Some(80),
            kind: PurchaseKind::Spot,
            price_per_instance_hour: d(price),
            upfront: Decimal::ZERO,
            term_hours: None,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: None,
            source: Source {
                kind: SourceKind::Import,
                origin: "catalog".into(),
                fetched_at: Utc::now(),
            },
        }
    }

    #[test]
    fn zones_become_one_row_with_the_median_and_the_spread() {
        let odd = summarise(&[spot("a", "19"), spot("b", "11"), spot("c", "55.04")]);
        assert_eq!(odd.len(), 1);
        assert_eq!(odd[0].offer.price_per_instance_hour, d("19"));
        assert_eq!(odd[0].offer.zone, None);
        assert_eq!(
            odd[0].spread,
            Some(Spread {
                min: d("11"),
                max: d("55.04"),
                zones: 3
            })
        );
        let even = summarise(&[spot("a", "10"), spot("b", "13")]);
        assert_eq!(even[0].offer.price_per_instance_hour, d("11.5"));
    }

    #[test]
    fn spot_that_repeats_on_demand_everywhere_is_left_out() {
        let mut od = spot("a", "98.32");
        od.kind = PurchaseKind::OnDemand;
        let (kept, dropped) = drop_echoed_spot(summarise(&[od.clone(), spot("a", "98.32")]));
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].offer.kind, PurchaseKind::OnDemand);
        assert_eq!(dropped, ["aws us-east-1 p5.48xlarge"]);
        // One zone's spot at the on-demand price is a real (capped) spot price.
        let mut od_b = od.clone();
        od_b.zone = Some("b".into());
        let (kept, dropped) =
            drop_echoed_spot(summarise(&[od, od_b, spot("a", "98.32"), spot("b", "20")]));
        assert_eq!(kept.len(), 2);
        assert!(dropped.is_empty());
    }

    #[test]
    fn a_published_row_may_not_price_what_a_catalog_prices() {
        let catalog = summarise(&[spot("a", "19")]);
        let published = vec![Entry {
            offer: spot("x", "20"),
            spread: None,
        }];
        let err = merge(catalog.clone(), published).expect_err("duplicate");
        assert!(err.contains("aws us-east-1 p5.48xlarge spot"), "{err}");
        let mut block = spot("x", "39.33");
        block.kind = PurchaseKind::CapacityBlock;
        let merged = merge(
            catalog,
            vec![Entry {
                offer: block,
                spread: None,
            }],
        )
        .expect("a different kind");
        assert_eq!(merged.len(), 2);
    }

    #[test]
    fn every_catalog_file_needs_a_source_and_a_date() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("aws.csv"), "x\n").expect("write");
        let err = read_sources(dir.path()).expect_err("no sources.csv");
        assert!(err.to_string().contains("sources.csv"), "{err}");
        std::fs::write(
            dir.path().join(SOURCES),
            "file,source,as_of\naws.csv,somewhere,yesterday\n",
        )
        .expect("write");
        let err = read_sources(dir.path()).expect_err("bad date");
        assert!(err.to_string().contains(":2: `as_of` `yesterday`"), "{err}");
        std::fs::write(
            dir.path().join(SOURCES),
            "file,source,as_of\naws.csv,somewhere,2026-11-24\n",
        )
        .expect("write");
        std::fs::write(dir.path().join("gcp.csv"), "x\n").expect("write");
        let err = read_sources(dir.path()).expect_err("gcp.csv unlisted");
        assert!(err.to_string().contains("gcp.csv"), "{err}");
    }
}
