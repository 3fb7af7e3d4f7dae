//! `gpucap prices`: compares what the clouds sell for an accelerator — on-demand, spot,
//! capacity blocks, 1- and 3-year terms — with the source and age of every figure.
//!
//! Sources, in order of preference per cloud and region: a fresh on-disk quote, a live fetch
//! (providers run concurrently, each region behind the provider's concurrency limit), a stale
//! quote (with a warning), the built-in snapshot (with a warning). `--offline` uses only the
//! snapshot, `--import FILE` only SkyPilot catalogs (both together: both). Data goes to stdout;
//! progress, warnings and hints to stderr.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Args;
use gpucap_provider::cache;
use gpucap_provider::snapshot::Spread;
use gpucap_provider::{
    Accelerator, Cloud, Offer, PurchaseKind, Query, SourceKind, catalog_snapshot, snapshot,
};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::commands::common::{Format, GlobalArgs, Outcome, exit};
use crate::commands::quotes::{self, Sources};
use crate::contract::Priced;
use crate::diagnostic::{InputError, Location};

#[derive(Debug, Args)]
pub struct PricesArgs {
    /// Only these accelerators (canonical names or aliases: h100, a100-80gb, l4, ...).
    #[arg(short, long = "accelerator", value_name = "NAME")]
    pub accelerators: Vec<String>,
    /// Only these clouds (aws, gcp, azure).
    #[arg(long = "cloud", value_name = "CLOUD")]
    pub clouds: Vec<Cloud>,
    /// Only these regions (us-east-1, us-central1, eastus, ...).
    #[arg(long = "region", value_name = "REGION")]
    pub regions: Vec<String>,
    /// Only these purchase kinds (on-demand, spot, capacity-block, reservation, commitment).
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<PurchaseKind>,
    /// Use only the built-in snapshot; no network, no cache.
    #[arg(long, conflicts_with = "refresh")]
    pub offline: bool,
    /// Fetch live even where the cache is fresh.
    #[arg(long)]
    pub refresh: bool,
    /// Write a snapshot file (default: the built-in one's source path,
    /// providers/core/data/snapshot.csv): with --refresh from the live offers, with
    /// --from-catalog from price catalogs.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "providers/core/data/snapshot.csv")]
    pub write_snapshot: Option<PathBuf>,
    /// With --write-snapshot: build it from the SkyPilot-format catalogs in DIR (each named with
    /// its source and date in DIR/sources.csv), summarising zones per region; no network.
    #[arg(long, value_name = "DIR", requires = "write_snapshot", conflicts_with_all = ["refresh", "offline", "imports"])]
    pub from_catalog: Option<PathBuf>,
    /// With --from-catalog: merge this table of published prices the catalogs do not carry
    /// (capacity blocks, 1- and 3-year terms), in the snapshot's format.
    #[arg(long, value_name = "FILE", requires = "from_catalog")]
    pub published: Option<PathBuf>,
    /// Read offers from a SkyPilot catalog CSV (vms.csv) instead of the clouds; repeatable.
    #[arg(long = "import", value_name = "FILE")]
    pub imports: Vec<PathBuf>,
    /// Where live quotes are cached (default: $XDG_CACHE_HOME/gpucap/quotes).
    #[arg(long, value_name = "DIR", env = "GPUCAP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(global: &GlobalArgs, args: PricesArgs) -> anyhow::Result<Outcome> {
    let query = build_query(&args)?;
    let now = Utc::now();
    if let (Some(path), Some(dir)) = (&args.write_snapshot, &args.from_catalog) {
        return write_from_catalog(path, dir, args.published.as_deref(), global.quiet, now);
    }
    if args.write_snapshot.is_some() && !args.refresh {
        return Err(anyhow::Error::new(
            InputError::new(
                Location::default().field("--write-snapshot"),
                "needs a source: --refresh (the live APIs) or --from-catalog DIR (price catalogs)",
            )
            .with_hint("gpucap prices --write-snapshot providers/core/data/snapshot.csv --from-catalog providers/core/data/catalog --published providers/core/data/published.csv"),
        ));
    }
    let sources = Sources {
        offline: args.offline,
        refresh: args.refresh,
        imports: args.imports.clone(),
        cache_dir: args.cache_dir.clone(),
    };
    let mut gathered = quotes::gather(&query, &args.clouds, &sources, global.quiet)?;
    let offers = std::mem::take(&mut gathered.offers);
    if let Some(path) = &args.write_snapshot {
        let fresh: Vec<Offer> = offers
            .iter()
            .filter(|o| o.source.kind == SourceKind::Live)
            .cloned()
            .collect();
        anyhow::ensure!(
            !fresh.is_empty(),
            "no live offers were fetched; not writing a snapshot to {}",
            path.display()
        );
        let text = snapshot::write(
            &fresh,
            &format!(
                "Written by `gpucap prices --refresh --write-snapshot` on {}.",
                now.format("%Y-%m-%d")
            ),
        );
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {} live offers to {}", fresh.len(), path.display());
    }

    // The buyer's contract (`[prices]` of the config, when there is one): discounts replace
    // list prices, private offers join them; both shown with source `contract`.
    let (priced, unpriced) = match contract_prices(global)? {
        Some(prices) => {
            let (priced, unpriced) = crate::contract::apply(&prices, &offers);
            let priced: Vec<_> = priced
                .into_iter()
                .filter(|p| {
                    query.wants(&p.offer)
                        && (args.clouds.is_empty() || args.clouds.contains(&p.offer.cloud))
                })
                .collect();
            (priced, unpriced)
        }
        None => (
            offers
                .into_iter()
                .map(|offer| Priced { offer, list: None })
                .collect(),
            Vec::new(),
        ),
    };
    if !global.quiet {
        for w in &unpriced {
            eprintln!("warning: {w}");
        }
    }
    let mut offers = priced;
    offers.sort_by(|a, b| {
        let (a, b) = (&a.offer, &b.offer);
        a.effective_price_per_gpu_hour()
            .cmp(&b.effective_price_per_gpu_hour())
            .then_with(|| {
                (a.cloud, &a.region, &a.instance_type, a.kind).cmp(&(
                    b.cloud,
                    &b.region,
                    &b.instance_type,
                    b.kind,
                ))
            })
    });

    let spreads = Spreads::of(offers.iter().map(|p| &p.offer));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.format {
        Format::Json => {
            let rows: Vec<JsonOffer> = offers
                .iter()
                .map(|p| JsonOffer::new(p, spreads.get(&p.offer), now))
                .collect();
            serde_json::to_writer_pretty(&mut out, &rows)?;
            use std::io::Write as _;
            writeln!(out)?;
        }
        Format::Table => {
            use std::io::Write as _;
            write!(out, "{}", table(&offers, &spreads, now))?;
        }
    }

    gathered.report(global.quiet);
    if offers.is_empty() {
        eprintln!("no offers match; try fewer filters, or `--offline` for the built-in snapshot");
        return Ok(Outcome(exit::ERROR));
    }
    Ok(Outcome::OK)
}

/// The config's `[prices]` when the config file exists (`gpucap prices` runs without one too).
fn contract_prices(global: &GlobalArgs) -> anyhow::Result<Option<crate::config::PriceSettings>> {
    if !global.config.is_file() {
        return Ok(None);
    }
    let (config, _) = crate::config::load(&global.config)?;
    Ok(Some(config.prices))
}

/// `--write-snapshot PATH --from-catalog DIR [--published FILE]`: the snapshot built from
/// catalogs and published prices, with the command that wrote it in its header.
fn write_from_catalog(
    path: &Path,
    dir: &Path,
    published: Option<&Path>,
    quiet: bool,
    now: DateTime<Utc>,
) -> anyhow::Result<Outcome> {
    let built = catalog_snapshot::build(dir, published, CATALOG_BOUNDS).map_err(|e| {
        let mut loc = Location::file(&e.file);
        if let Some(line) = e.line {
            loc = loc.line(line as usize);
        }
        catalog_hint(InputError::new(loc, e.message.clone()))
    })?;
    let mut command = format!(
        "gpucap prices --write-snapshot {} --from-catalog {}",
        path.display(),
        dir.display()
    );
    if let Some(p) = published {
        command.push_str(&format!(" --published {}", p.display()));
    }
    let header = catalog_snapshot::header(&built, &command, now.date_naive());
    let text = snapshot::write_entries(&built.entries, &header);
    // The file must read back as a snapshot before it replaces anything.
    snapshot::parse(&text, &path.display().to_string())
        .context("the generated snapshot does not read back")?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    if !quiet {
        for issue in &built.issues {
            eprintln!("  {issue}");
        }
        for ((cloud, kind), n) in catalog_snapshot::counts(&built.entries) {
            eprintln!("  {cloud} {kind}: {n}");
        }
        for line in &built.not_found {
            eprintln!("  {line}");
        }
    }
    eprintln!("wrote {} rows to {}", built.entries.len(), path.display());
    Ok(Outcome::OK)
}

/// The bounds of one catalog import (`--import`, `--from-catalog`).
pub(crate) const CATALOG_BOUNDS: gpucap_provider::skypilot::Bounds =
    gpucap_provider::skypilot::Bounds {
        rows: crate::limits::MAX_CATALOG_ROWS,
        bytes: crate::limits::MAX_CATALOG_BYTES,
    };

/// A hint for a catalog past its bounds ([`CATALOG_BOUNDS`]).
pub(crate) fn catalog_hint(err: InputError) -> InputError {
    if err
        .message
        .starts_with(gpucap_provider::skypilot::PAST_BOUNDS)
    {
        err.with_hint("keep only the rows of GPU instance types, or split the catalog by cloud (MAX_CATALOG_ROWS and MAX_CATALOG_BYTES in src/limits.rs)")
    } else {
        err
    }
}

fn build_query(args: &PricesArgs) -> anyhow::Result<Query> {
    let mut accelerators = Vec::new();
    for name in &args.accelerators {
        let acc = Accelerator::parse(name).map_err(|e| {
            let err = InputError::new(Location::default().field("--accelerator"), e.to_string());
            let known: Vec<&str> = Accelerator::all().map(Accelerator::name).collect();
            err.with_hint(format!("known accelerators: {}", known.join(", ")))
        })?;
        accelerators.push(acc);
    }
    for region in &args.regions {
        if Cloud::of_region(region).is_none() {
            return Err(anyhow::Error::new(
                InputError::new(
                    Location::default().field("--region"),
                    format!("`{region}` is not an AWS, GCP or Azure region name"),
                )
                .with_hint(
                    "regions look like us-east-1 (aws), us-central1 (gcp) or eastus (azure)",
                ),
            ));
        }
    }
    Ok(Query {
        accelerators,
        regions: args.regions.clone(),
        kinds: args.kinds.clone(),
    })
}

/// One offer as `--format json` prints it.
#[derive(Debug, Serialize)]
struct JsonOffer<'a> {
    cloud: Cloud,
    region: &'a str,
    zone: Option<&'a str>,
    instance_type: &'a str,
    accelerator: Accelerator,
    gpus_per_instance: u32,
    gpu_memory_gb: Option<u32>,
    kind: PurchaseKind,
    price_per_instance_hour: Decimal,
    price_per_gpu_hour: Decimal,
    upfront: Decimal,
    term_hours: Option<u32>,
    earliest_start: Option<DateTime<Utc>>,
    lead_time_hours: Option<u32>,
    max_instances: Option<u32>,
    offering_id: Option<&'a str>,
    source: SourceKind,
    /// `contract` prices: the list price the contract replaces, and its source.
    #[serde(skip_serializing_if = "Option::is_none")]
    list_price_per_instance_hour: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    list_source: Option<SourceKind>,
    origin: &'a str,
    fetched_at: DateTime<Utc>,
    age_hours: i64,
    stale: bool,
    /// Spot prices are indicative figures of their date, never quotes.
    indicative: bool,
    /// For a figure summarising a region's zones (the snapshot's spot rows): the price is the
    /// median, these are the cheapest and dearest zone and how many zones there were.
    zone_min: Option<Decimal>,
    zone_max: Option<Decimal>,
    zones: Option<u32>,
}

impl<'a> JsonOffer<'a> {
    fn new(p: &'a Priced, spread: Option<&Spread>, now: DateTime<Utc>) -> Self {
        let o = &p.offer;
        JsonOffer {
            list_price_per_instance_hour: p.list.as_ref().map(|l| l.price_per_instance_hour),
            list_source: p.list.as_ref().map(|l| l.source.kind),
            cloud: o.cloud,
            region: &o.region,
            zone: o.zone.as_deref(),
            instance_type: &o.instance_type,
            accelerator: o.accelerator,
            gpus_per_instance: o.gpus_per_instance,
            gpu_memory_gb: o.gpu_memory_gb,
            kind: o.kind,
            price_per_instance_hour: o.price_per_instance_hour,
            price_per_gpu_hour: o.effective_price_per_gpu_hour().round_dp(6),
            upfront: o.upfront,
            term_hours: o.term_hours,
            earliest_start: o.earliest_start,
            lead_time_hours: o.lead_time_hours,
            max_instances: o.max_instances,
            offering_id: o.offering_id.as_deref(),
            source: o.source.kind,
            origin: &o.source.origin,
            fetched_at: o.source.fetched_at,
            age_hours: (now - o.source.fetched_at).num_hours(),
            stale: if o.source.kind == SourceKind::Contract {
                is_stale(p, now)
            } else {
                cache::is_stale(o, now)
            },
            indicative: o.kind == PurchaseKind::Spot,
            zone_min: spread.map(|s| s.min),
            zone_max: spread.map(|s| s.max),
            zones: spread.map(|s| s.zones),
        }
    }
}

/// The zone spreads of the built-in snapshot's rows, found by what they price.
struct Spreads(BTreeMap<SpreadKey, Spread>);

type SpreadKey = (Cloud, String, String, PurchaseKind, Option<u32>);

impl Spreads {
    fn key(o: &Offer) -> SpreadKey {
        (
            o.cloud,
            o.region.clone(),
            o.instance_type.clone(),
            o.kind,
            o.term_hours,
        )
    }

    /// Read from the snapshot only when some offer comes from it.
    fn of<'o>(mut offers: impl Iterator<Item = &'o Offer>) -> Self {
        if !offers.any(|o| o.source.kind == SourceKind::Snapshot) {
            return Spreads(BTreeMap::new());
        }
        let map = snapshot::builtin_entries()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.offer.zone.is_none())
            .filter_map(|e| e.spread.map(|s| (Self::key(&e.offer), s)))
            .collect();
        Spreads(map)
    }

    fn get(&self, o: &Offer) -> Option<&Spread> {
        if o.source.kind != SourceKind::Snapshot || o.zone.is_some() {
            return None;
        }
        self.0.get(&Self::key(o))
    }
}

/// The columns of the comparison table, by purchase kind and term.
const COLUMNS: [(&str, PurchaseKind, Option<u32>); 5] = [
    ("on-demand", PurchaseKind::OnDemand, None),
    ("spot", PurchaseKind::Spot, None),
    ("capacity block", PurchaseKind::CapacityBlock, None),
    ("1-year", PurchaseKind::Reservation, Some(8760)),
    ("3-year", PurchaseKind::Reservation, Some(26280)),
];

fn column_of(o: &Offer) -> Option<usize> {
    match (o.kind, o.term_hours) {
        (PurchaseKind::OnDemand, _) => Some(0),
        (PurchaseKind::Spot, _) => Some(1),
        (PurchaseKind::CapacityBlock, _) => Some(2),
        (PurchaseKind::Reservation | PurchaseKind::Commitment, Some(h)) if h <= 8784 => Some(3),
        (PurchaseKind::Reservation | PurchaseKind::Commitment, Some(_)) => Some(4),
        _ => None,
    }
}

/// One row per cloud/region/instance type; each cell is the cheapest $/GPU-hour of its kind
/// (over zones and reservation/commitment variants) with the source and age of that figure and
/// a note number; the notes under the table give each figure's origin and date. Spot cells of
/// the snapshot show the zones' range beside the median.
fn table(offers: &[Priced], spreads: &Spreads, now: DateTime<Utc>) -> String {
    type Key<'a> = (Cloud, &'a str, &'a str);
    let mut rows: BTreeMap<Key, [Option<&Priced>; 5]> = BTreeMap::new();
    for p in offers {
        let o = &p.offer;
        let Some(col) = column_of(o) else { continue };
        let cells = rows
            .entry((o.cloud, &o.region, &o.instance_type))
            .or_default();
        if cells[col].is_none_or(|c| {
            o.effective_price_per_gpu_hour() < c.offer.effective_price_per_gpu_hour()
        }) {
            cells[col] = Some(p);
        }
    }
    let mut rows: Vec<(Key, [Option<&Priced>; 5])> = rows.into_iter().collect();
    let best = |cells: &[Option<&Priced>; 5]| {
        cells
            .iter()
            .flatten()
            .map(|p| p.offer.effective_price_per_gpu_hour())
            .min()
    };
    rows.sort_by(|a, b| best(&a.1).cmp(&best(&b.1)).then(a.0.cmp(&b.0)));

    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    let mut header = vec!["cloud", "region", "instance", "accelerator", "gpus"];
    header.extend(COLUMNS.iter().map(|c| c.0));
    t.set_header(header);
    let mut notes = Notes::default();
    for ((cloud, region, instance), cells) in rows {
        let first = cells.iter().flatten().next().map(|p| &p.offer);
        let mut line = vec![
            cloud.to_string(),
            region.to_string(),
            instance.to_string(),
            first.map(|o| o.accelerator.to_string()).unwrap_or_default(),
            first
                .map(|o| o.gpus_per_instance.to_string())
                .unwrap_or_default(),
        ];
        line.extend(
            cells
                .iter()
                .map(|c| c.map_or_else(|| "-".to_string(), |o| cell(o, spreads, &mut notes, now))),
        );
        t.add_row(line);
    }
    format!(
        "$ per GPU-hour (upfront fees spread over the term); source, age and note per figure; contract prices with the list price they replace\n{t}\n{}",
        notes.render()
    )
}

/// The origins and dates of the figures in a table, numbered as first cited.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn cite(&mut self, o: &Offer) -> usize {
        let kind = match o.kind {
            PurchaseKind::Spot => "spot, indicative".to_string(),
            _ => catalog_snapshot::kind_label(o),
        };
        let note = format!(
            "{kind}, as of {}: {}",
            o.source.fetched_at.format("%Y-%m-%d"),
            o.source.origin
        );
        match self.0.iter().position(|n| *n == note) {
            Some(i) => i + 1,
            None => {
                self.0.push(note);
                self.0.len()
            }
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (i, note) in self.0.iter().enumerate() {
            out.push_str(&format!("[{}] {note}\n", i + 1));
        }
        if self.0.iter().any(|n| n.starts_with("spot")) {
            out.push_str("spot prices move hourly: a snapshot's spot figure is the median over the region's zones on its date, (cheapest–dearest zone) beside it\n");
        }
        out
    }
}

fn cell(p: &Priced, spreads: &Spreads, notes: &mut Notes, now: DateTime<Utc>) -> String {
    let o = &p.offer;
    let source = match o.source.kind {
        SourceKind::Live => "live",
        SourceKind::Cache => "cache",
        SourceKind::Snapshot => "snap",
        SourceKind::Import => "import",
        SourceKind::Contract => "contract",
    };
    let stale = if is_stale(p, now) { " STALE" } else { "" };
    let range = spreads
        .get(o)
        .filter(|s| s.min != s.max)
        .map(|s| {
            let gpus = Decimal::from(o.gpus_per_instance.max(1));
            format!(" ({:.3}–{:.3})", s.min / gpus, s.max / gpus)
        })
        .unwrap_or_default();
    let list = p
        .list
        .as_ref()
        .map(|l| {
            let mut listed = o.clone();
            listed.price_per_instance_hour = l.price_per_instance_hour;
            listed.upfront = l.upfront;
            format!(" (list {:.3})", listed.effective_price_per_gpu_hour())
        })
        .unwrap_or_default();
    format!(
        "{:.3} {source} {}{stale}{range}{list} [{}]",
        o.effective_price_per_gpu_hour(),
        age(now - o.source.fetched_at),
        notes.cite(o)
    )
}

/// A fetched quote past its cache lifetime. A contract price is as stale as the list price it
/// discounts; the snapshot and a private offer at its own rate are dated, not stale.
fn is_stale(p: &Priced, now: DateTime<Utc>) -> bool {
    let kind = p
        .list
        .as_ref()
        .map_or(p.offer.source.kind, |l| l.source.kind);
    !matches!(kind, SourceKind::Snapshot | SourceKind::Contract) && cache::is_stale(&p.offer, now)
}

fn age(d: chrono::Duration) -> String {
    if d.num_days() >= 1 {
        format!("{}d", d.num_days())
    } else if d.num_hours() >= 1 {
        format!("{}h", d.num_hours())
    } else {
        format!("{}m", d.num_minutes().max(0))
    }
}
