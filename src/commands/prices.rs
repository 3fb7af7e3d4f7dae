//! `gpucap prices`: compares what the clouds sell for an accelerator — on-demand, spot,
//! capacity blocks, 1- and 3-year terms — with the source and age of every figure.
//!
//! Sources, in order of preference per cloud and region: a fresh on-disk quote, a live fetch
//! (providers run concurrently, each region behind the provider's concurrency limit), a stale
//! quote (with a warning), the built-in snapshot (with a warning). `--offline` uses only the
//! snapshot, `--import FILE` only SkyPilot catalogs (both together: both). Data goes to stdout;
//! progress, warnings and hints to stderr.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::Args;
use gpucap_provider::cache::{self, QuoteCache};
use gpucap_provider::{
    Accelerator, Cloud, CollectingReporter, Issue, Offer, Provider, ProviderError, PurchaseKind,
    Query, Readiness, Reporter, SourceKind, SystemClock, skypilot, snapshot,
};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::cli::{Format, GlobalArgs, Outcome};
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
    /// With --refresh: write the live offers as a snapshot file (default: the built-in one's
    /// source path, providers/core/data/snapshot.csv).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "providers/core/data/snapshot.csv", requires = "refresh")]
    pub write_snapshot: Option<PathBuf>,
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
    let reporter = Arc::new(CliReporter::new(global.quiet));
    let mut offers = Vec::new();
    let mut failures: Vec<String> = Vec::new();

    if args.offline || !args.imports.is_empty() {
        if args.offline {
            offers.extend(snapshot::builtin().context("the built-in snapshot is broken")?);
        }
        for path in &args.imports {
            let imported = skypilot::import_file(path).map_err(|e| {
                let mut loc = Location::file(&e.file);
                if let Some(line) = e.line {
                    loc = loc.line(line as usize);
                }
                InputError::new(loc, e.message.clone())
            })?;
            for issue in imported.issues {
                reporter.issue(issue);
            }
            offers.extend(imported.offers);
        }
    } else {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting tokio")?;
        let cache_dir = args.cache_dir.clone().or_else(QuoteCache::default_dir);
        let cache = cache_dir.map(|d| QuoteCache::new(d, Arc::new(SystemClock)));
        let live = runtime.block_on(fetch_all(&query, &args, cache, reporter.clone()));
        failures = live.failures;
        if let Some(path) = &args.write_snapshot {
            let fresh: Vec<Offer> = live
                .offers
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
        offers = live.offers;
    }

    offers.retain(|o| query.wants(o) && (args.clouds.is_empty() || args.clouds.contains(&o.cloud)));
    offers.sort_by(|a, b| {
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

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.format {
        Format::Json => {
            let rows: Vec<JsonOffer> = offers.iter().map(|o| JsonOffer::new(o, now)).collect();
            serde_json::to_writer_pretty(&mut out, &rows)?;
            use std::io::Write as _;
            writeln!(out)?;
        }
        Format::Table => {
            use std::io::Write as _;
            write!(out, "{}", table(&offers, now))?;
        }
    }

    reporter.summarise();
    for failure in &failures {
        eprintln!("warning: {failure}");
    }
    if offers.is_empty() {
        eprintln!("no offers match; try fewer filters, or `--offline` for the built-in snapshot");
        return Ok(Outcome(crate::cli::exit::ERROR));
    }
    Ok(Outcome::OK)
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

/// A cloud without a live provider in this build, and the hint to show.
type MissingProvider = (Cloud, &'static str);

/// The providers compiled into this build, and hints for those that are not.
fn providers() -> (Vec<Arc<dyn Provider>>, Vec<MissingProvider>) {
    #[allow(unused_mut)]
    let mut built: Vec<Arc<dyn Provider>> = Vec::new();
    #[allow(unused_mut)]
    let mut missing: Vec<MissingProvider> = Vec::new();
    #[cfg(feature = "azure")]
    built.push(Arc::new(gpucap_azure::provider()));
    #[cfg(not(feature = "azure"))]
    missing.push((Cloud::Azure, "rebuild with `--features azure`"));
    #[cfg(feature = "aws")]
    built.push(Arc::new(gpucap_aws::provider()));
    #[cfg(feature = "gcp")]
    built.push(Arc::new(gpucap_gcp::provider()));
    for cloud in [Cloud::Aws, Cloud::Gcp] {
        if !built.iter().any(|p| p.cloud() == cloud) {
            missing.push((cloud, "this build has no live provider for it; its prices come from the built-in snapshot"));
        }
    }
    (built, missing)
}

struct Live {
    offers: Vec<Offer>,
    failures: Vec<String>,
}

/// Fetches every wanted provider and region concurrently, with cache and snapshot fallback.
async fn fetch_all(
    query: &Query,
    args: &PricesArgs,
    cache: Option<QuoteCache>,
    reporter: Arc<CliReporter>,
) -> Live {
    let wanted = |c: Cloud| args.clouds.is_empty() || args.clouds.contains(&c);
    let snap = snapshot::builtin().unwrap_or_default();
    let (built, missing) = providers();
    let mut offers = Vec::new();
    let mut failures = Vec::new();
    for (cloud, hint) in missing.into_iter().filter(|(c, _)| wanted(*c)) {
        eprintln!("hint: {cloud}: {hint}");
        offers.extend(snap.iter().filter(|o| o.cloud == cloud).cloned());
    }
    let query = Arc::new(query.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut total = 0u64;
    for provider in built.into_iter().filter(|p| wanted(p.cloud())) {
        let cloud = provider.cloud();
        if let Readiness::Skip { reason, hint } = provider.readiness().await {
            eprintln!("hint: skipping {cloud}: {reason}; {hint}");
            offers.extend(snap.iter().filter(|o| o.cloud == cloud).cloned());
            continue;
        }
        let limit = Arc::new(tokio::sync::Semaphore::new(
            provider.max_concurrency().max(1),
        ));
        for region in provider.regions(&query) {
            total += 1;
            let (provider, query, reporter, limit, cache) = (
                provider.clone(),
                query.clone(),
                reporter.clone(),
                limit.clone(),
                cache.clone(),
            );
            let refresh = args.refresh;
            tasks.spawn(async move {
                let _permit = limit.acquire_owned().await;
                let outcome = fetch_region(
                    provider.as_ref(),
                    &query,
                    &region,
                    cache.as_ref(),
                    refresh,
                    reporter.as_ref(),
                )
                .await;
                reporter.region_done(cloud, &region);
                (cloud, region, outcome)
            });
        }
    }
    reporter.start(total);
    while let Some(joined) = tasks.join_next().await {
        let Ok((cloud, region, outcome)) = joined else {
            continue;
        };
        match outcome {
            Ok(found) => offers.extend(found),
            Err((err, fallback)) => {
                let used = if !fallback.is_empty() {
                    offers.extend(fallback);
                    "using stale cached quotes"
                } else {
                    let from_snapshot: Vec<Offer> = snap
                        .iter()
                        .filter(|o| o.cloud == cloud && o.region == region)
                        .cloned()
                        .collect();
                    let what = if from_snapshot.is_empty() {
                        "no fallback prices"
                    } else {
                        "using the built-in snapshot"
                    };
                    offers.extend(from_snapshot);
                    what
                };
                failures.push(format!("{err} ({used})"));
            }
        }
    }
    reporter.finish();
    Live { offers, failures }
}

/// One region: fresh cache, else live (stored in the cache), else the error and stale quotes.
async fn fetch_region(
    provider: &dyn Provider,
    query: &Query,
    region: &str,
    cache: Option<&QuoteCache>,
    refresh: bool,
    reporter: &dyn Reporter,
) -> Result<Vec<Offer>, (ProviderError, Vec<Offer>)> {
    let cloud = provider.cloud();
    let cached = cache.and_then(|c| match c.lookup(cloud, region) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("{e}; ignoring the cache");
            None
        }
    });
    if !refresh
        && let Some(l) = &cached
        && l.stale.is_empty()
        && l.fresh.iter().any(|o| query.wants(o))
    {
        return Ok(l.fresh.clone());
    }
    match provider.fetch(query, region, reporter).await {
        Ok(found) => {
            if let Some(c) = cache
                && let Err(e) = c.store(cloud, region, &found)
            {
                tracing::warn!("{e}");
            }
            Ok(found)
        }
        Err(err) => {
            let fallback = cached
                .map(|l| l.fresh.into_iter().chain(l.stale).collect())
                .unwrap_or_default();
            Err((err, fallback))
        }
    }
}

/// Progress on stderr (hidden when stderr is not a terminal) and issues collected for the end.
struct CliReporter {
    issues: CollectingReporter,
    bar: Mutex<Option<indicatif::ProgressBar>>,
    quiet: bool,
}

impl CliReporter {
    fn new(quiet: bool) -> Self {
        CliReporter {
            issues: CollectingReporter::new(),
            bar: Mutex::new(None),
            quiet,
        }
    }

    fn start(&self, regions: u64) {
        if self.quiet || regions == 0 {
            return;
        }
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(regions),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} fetching prices [{bar:30}] {pos}/{len} regions {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn region_done(&self, cloud: Cloud, region: &str) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.inc(1);
            bar.set_message(format!("{cloud} {region}"));
        }
    }

    fn finish(&self) {
        if let Ok(mut b) = self.bar.lock()
            && let Some(bar) = b.take()
        {
            bar.finish_and_clear();
        }
    }

    /// Prints what was refused or corrected, one line each.
    fn summarise(&self) {
        let issues = self.issues.issues();
        if issues.is_empty() || self.quiet {
            return;
        }
        eprintln!("{} price(s) were not used as given:", issues.len());
        for issue in &issues {
            eprintln!("  {issue}");
        }
    }
}

impl Reporter for CliReporter {
    fn issue(&self, issue: Issue) {
        self.issues.issue(issue);
    }

    fn progress(&self, cloud: Cloud, region: &str, what: &str) {
        tracing::debug!("{cloud} {region}: {what}");
    }
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
    origin: &'a str,
    fetched_at: DateTime<Utc>,
    age_hours: i64,
    stale: bool,
}

impl<'a> JsonOffer<'a> {
    fn new(o: &'a Offer, now: DateTime<Utc>) -> Self {
        JsonOffer {
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
            stale: cache::is_stale(o, now),
        }
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
/// (over zones and reservation/commitment variants) with the source and age of that figure.
fn table(offers: &[Offer], now: DateTime<Utc>) -> String {
    type Key<'a> = (Cloud, &'a str, &'a str);
    let mut rows: BTreeMap<Key, [Option<&Offer>; 5]> = BTreeMap::new();
    for o in offers {
        let Some(col) = column_of(o) else { continue };
        let cells = rows
            .entry((o.cloud, &o.region, &o.instance_type))
            .or_default();
        if cells[col]
            .is_none_or(|c| o.effective_price_per_gpu_hour() < c.effective_price_per_gpu_hour())
        {
            cells[col] = Some(o);
        }
    }
    let mut rows: Vec<(Key, [Option<&Offer>; 5])> = rows.into_iter().collect();
    let best = |cells: &[Option<&Offer>; 5]| {
        cells
            .iter()
            .flatten()
            .map(|o| o.effective_price_per_gpu_hour())
            .min()
    };
    rows.sort_by(|a, b| best(&a.1).cmp(&best(&b.1)).then(a.0.cmp(&b.0)));

    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    let mut header = vec!["cloud", "region", "instance", "accelerator", "gpus"];
    header.extend(COLUMNS.iter().map(|c| c.0));
    t.set_header(header);
    for ((cloud, region, instance), cells) in rows {
        let first = cells.iter().flatten().next();
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
                .map(|c| c.map_or_else(|| "-".to_string(), |o| cell(o, now))),
        );
        t.add_row(line);
    }
    format!("$ per GPU-hour (upfront fees spread over the term); source and age per figure\n{t}\n")
}

fn cell(o: &Offer, now: DateTime<Utc>) -> String {
    let source = match o.source.kind {
        SourceKind::Live => "live",
        SourceKind::Cache => "cache",
        SourceKind::Snapshot => "snap",
        SourceKind::Import => "import",
    };
    let stale = if o.source.kind != SourceKind::Snapshot && cache::is_stale(o, now) {
        " STALE"
    } else {
        ""
    };
    format!(
        "{:.3} {source} {}{stale}",
        o.effective_price_per_gpu_hour(),
        age(now - o.source.fetched_at)
    )
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
