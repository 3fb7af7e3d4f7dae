//! Where prices come from, shared by `gpucap prices` and `gpucap plan`: the quote cache, the
//! live providers compiled into this build, SkyPilot catalog imports and the built-in snapshot.
//!
//! Sources, in order of preference per cloud and region: a fresh on-disk quote, a live fetch
//! (providers run concurrently, each region behind the provider's concurrency limit), a stale
//! quote (with a warning), the built-in snapshot (with a warning). Offline runs use only the
//! snapshot, imports only the files given (both together: both).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use gpucap_provider::cache::QuoteCache;
use gpucap_provider::{
    Cloud, CollectingReporter, Issue, Offer, Provider, ProviderError, Query, Readiness, Reporter,
    SystemClock, skypilot, snapshot,
};

use crate::diagnostic::{InputError, Location};

/// Which sources to use.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Only the built-in snapshot (plus imports).
    pub offline: bool,
    /// Ignore fresh cached quotes and fetch again.
    pub refresh: bool,
    /// SkyPilot catalog CSVs to read instead of the live APIs.
    pub imports: Vec<PathBuf>,
    /// Where live quotes are cached (default: $XDG_CACHE_HOME/gpucap/quotes).
    pub cache_dir: Option<PathBuf>,
}

/// The offers found, and what went wrong on the way.
pub struct Gathered {
    pub offers: Vec<Offer>,
    /// Providers or regions that failed, with the fallback used.
    pub failures: Vec<String>,
    reporter: Arc<CliReporter>,
}

impl Gathered {
    /// Prints the prices that were refused or corrected and the failures, on stderr.
    pub fn report(&self, quiet: bool) {
        self.reporter.summarise();
        if !quiet {
            for failure in &self.failures {
                eprintln!("warning: {failure}");
            }
        }
    }
}

/// Collects the offers `query` asks for on `clouds` (empty: every cloud).
pub fn gather(
    query: &Query,
    clouds: &[Cloud],
    sources: &Sources,
    quiet: bool,
) -> anyhow::Result<Gathered> {
    let reporter = Arc::new(CliReporter::new(quiet));
    let mut offers = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    if sources.offline || !sources.imports.is_empty() {
        if sources.offline {
            offers.extend(snapshot::builtin().context("the built-in snapshot is broken")?);
        }
        for path in &sources.imports {
            let imported =
                skypilot::import_file(path, super::prices::CATALOG_BOUNDS).map_err(|e| {
                    let mut loc = Location::file(&e.file);
                    if let Some(line) = e.line {
                        loc = loc.line(line as usize);
                    }
                    super::prices::catalog_hint(InputError::new(loc, e.message.clone()))
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
        let cache_dir = sources.cache_dir.clone().or_else(QuoteCache::default_dir);
        let cache = cache_dir.map(|d| QuoteCache::new(d, Arc::new(SystemClock)));
        let live = runtime.block_on(fetch_all(
            query,
            clouds,
            sources.refresh,
            cache,
            reporter.clone(),
        ));
        failures = live.failures;
        offers = live.offers;
    }
    offers.retain(|o| query.wants(o) && (clouds.is_empty() || clouds.contains(&o.cloud)));
    Ok(Gathered {
        offers,
        failures,
        reporter,
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
    clouds: &[Cloud],
    refresh: bool,
    cache: Option<QuoteCache>,
    reporter: Arc<CliReporter>,
) -> Live {
    let wanted = |c: Cloud| clouds.is_empty() || clouds.contains(&c);
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
