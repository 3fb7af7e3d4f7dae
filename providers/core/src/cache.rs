//! The on-disk quote cache: offers fetched live are kept per cloud and region, each with the
//! time it was fetched, so that a later run can reuse fresh quotes and fall back to stale ones
//! (with a warning) when the live call fails.
//!
//! Entries are merged, never replaced wholesale: a partial or empty fetch updates the offers it
//! returned and leaves the others as they were (they keep their own, older `fetched_at` and
//! expire on their own). Time comes from an injected [`Clock`], so expiry is testable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::{Clock, Cloud, Offer, PurchaseKind, SourceKind};

/// How long a cached quote of each kind counts as fresh.
pub fn ttl(kind: PurchaseKind) -> Duration {
    match kind {
        // Spot prices move several times a day and AWS publishes them per AZ each hour.
        PurchaseKind::Spot => Duration::hours(1),
        // Capacity block offerings are bought by others within hours and repriced often.
        PurchaseKind::CapacityBlock => Duration::hours(1),
        // List prices (on-demand, reservations, commitments) change a few times a year.
        PurchaseKind::OnDemand | PurchaseKind::Reservation | PurchaseKind::Commitment => {
            Duration::days(7)
        }
    }
}

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("quote cache {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("quote cache {path} is corrupt: {source}")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// What the cache holds for one cloud and region, split by freshness.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Lookup {
    pub fresh: Vec<Offer>,
    pub stale: Vec<Offer>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    offers: Vec<Offer>,
}

/// The cache directory (one JSON file per cloud and region).
#[derive(Clone)]
pub struct QuoteCache {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for QuoteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuoteCache")
            .field("dir", &self.dir)
            .finish()
    }
}

impl QuoteCache {
    pub fn new(dir: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        QuoteCache {
            dir: dir.into(),
            clock,
        }
    }

    /// `$XDG_CACHE_HOME/gpucap/quotes` or `~/.cache/gpucap/quotes`.
    pub fn default_dir() -> Option<PathBuf> {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .map(|base| base.join("gpucap").join("quotes"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, cloud: Cloud, region: &str) -> PathBuf {
        let safe: String = region
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{cloud}-{safe}.json"))
    }

    fn read(&self, path: &Path) -> Result<File, CacheError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| CacheError::Corrupt {
                path: path.into(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
            Err(source) => Err(CacheError::Io {
                path: path.into(),
                source,
            }),
        }
    }

    /// The cached offers of a cloud and region, marked as coming from the cache.
    pub fn lookup(&self, cloud: Cloud, region: &str) -> Result<Lookup, CacheError> {
        let now = self.clock.now();
        let mut out = Lookup::default();
        for mut offer in self.read(&self.path(cloud, region))?.offers {
            let fresh = now - offer.source.fetched_at < ttl(offer.kind);
            offer.source.kind = SourceKind::Cache;
            if fresh {
                out.fresh.push(offer)
            } else {
                out.stale.push(offer)
            }
        }
        Ok(out)
    }

    /// Merges freshly fetched offers into the cache: each replaces the cached offer with the
    /// same identity; cached offers the fetch did not return are kept.
    pub fn store(&self, cloud: Cloud, region: &str, offers: &[Offer]) -> Result<(), CacheError> {
        if offers.is_empty() {
            return Ok(());
        }
        let path = self.path(cloud, region);
        let mut file = self.read(&path).unwrap_or_default();
        file.offers
            .retain(|old| !offers.iter().any(|new| same_offer(old, new)));
        file.offers.extend(offers.iter().cloned().map(|mut o| {
            o.source.kind = SourceKind::Live;
            o
        }));
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let json = serde_json::to_vec_pretty(&file).map_err(|source| CacheError::Corrupt {
            path: path.clone(),
            source,
        })?;
        // Write then rename, so a crash never leaves half a file.
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

/// Two offers are the same thing sold when everything but the price and provenance matches.
fn same_offer(a: &Offer, b: &Offer) -> bool {
    a.cloud == b.cloud
        && a.region == b.region
        && a.zone == b.zone
        && a.instance_type == b.instance_type
        && a.kind == b.kind
        && a.term_hours == b.term_hours
        && a.offering_id == b.offering_id
}

/// When a cached figure is too old to trust without saying so.
pub fn is_stale(offer: &Offer, now: DateTime<Utc>) -> bool {
    now - offer.source.fetched_at >= ttl(offer.kind)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rust_decimal::Decimal;

    use super::*;
    use crate::{Accelerator, Source};

    struct TestClock(Mutex<DateTime<Utc>>);
    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().expect("clock")
        }
    }

    fn offer(kind: PurchaseKind, zone: &str, price: i64, at: DateTime<Utc>) -> Offer {
        Offer {
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: Some(zone.into()),
            instance_type: "p5.48xlarge".into(),
            accelerator: Accelerator::parse("h100").expect("h100"),
            gpus_per_instance: 8,
            gpu_memory_gb: Some(80),
            kind,
            price_per_instance_hour: Decimal::from(price),
            upfront: Decimal::ZERO,
            term_hours: None,
            earliest_start: None,
            lead_time_hours: None,
            max_instances: None,
            offering_id: None,
            source: Source {
                kind: SourceKind::Live,
                origin: "test".into(),
                fetched_at: at,
            },
        }
    }

    fn setup() -> (tempfile::TempDir, Arc<TestClock>, QuoteCache) {
        let dir = tempfile::tempdir().expect("tempdir");
        let t0 = DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let clock = Arc::new(TestClock(Mutex::new(t0)));
        let cache = QuoteCache::new(dir.path(), clock.clone());
        (dir, clock, cache)
    }

    #[test]
    fn spot_expires_after_an_hour_list_prices_after_a_week() {
        let (_dir, clock, cache) = setup();
        let t0 = clock.now();
        cache
            .store(
                Cloud::Aws,
                "us-east-1",
                &[
                    offer(PurchaseKind::Spot, "a", 30, t0),
                    offer(PurchaseKind::OnDemand, "a", 98, t0),
                ],
            )
            .expect("store");
        let l = cache.lookup(Cloud::Aws, "us-east-1").expect("lookup");
        assert_eq!((l.fresh.len(), l.stale.len()), (2, 0));
        assert!(l.fresh.iter().all(|o| o.source.kind == SourceKind::Cache));

        *clock.0.lock().expect("clock") = t0 + Duration::minutes(61);
        let l = cache.lookup(Cloud::Aws, "us-east-1").expect("lookup");
        assert_eq!(
            l.stale.iter().map(|o| o.kind).collect::<Vec<_>>(),
            vec![PurchaseKind::Spot]
        );
        assert_eq!(
            l.fresh.iter().map(|o| o.kind).collect::<Vec<_>>(),
            vec![PurchaseKind::OnDemand]
        );

        *clock.0.lock().expect("clock") = t0 + Duration::days(8);
        assert_eq!(
            cache
                .lookup(Cloud::Aws, "us-east-1")
                .expect("lookup")
                .stale
                .len(),
            2
        );
    }

    #[test]
    fn partial_and_empty_fetches_never_erase_good_data() {
        let (_dir, clock, cache) = setup();
        let t0 = clock.now();
        cache
            .store(
                Cloud::Aws,
                "us-east-1",
                &[
                    offer(PurchaseKind::Spot, "a", 30, t0),
                    offer(PurchaseKind::Spot, "b", 31, t0),
                ],
            )
            .expect("store");
        cache
            .store(Cloud::Aws, "us-east-1", &[])
            .expect("empty store");
        let t1 = t0 + Duration::minutes(5);
        cache
            .store(
                Cloud::Aws,
                "us-east-1",
                &[offer(PurchaseKind::Spot, "a", 33, t1)],
            )
            .expect("partial");
        let mut l = cache.lookup(Cloud::Aws, "us-east-1").expect("lookup").fresh;
        l.sort_by(|x, y| x.zone.cmp(&y.zone));
        assert_eq!(l.len(), 2);
        assert_eq!(
            (l[0].price_per_instance_hour, l[0].source.fetched_at),
            (Decimal::from(33), t1)
        );
        assert_eq!(
            (l[1].price_per_instance_hour, l[1].source.fetched_at),
            (Decimal::from(31), t0)
        );
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let (dir, _clock, cache) = setup();
        std::fs::write(dir.path().join("aws-us-east-1.json"), "{not json").expect("write");
        let err = cache.lookup(Cloud::Aws, "us-east-1").expect_err("corrupt");
        assert!(err.to_string().contains("aws-us-east-1.json"), "{err}");
        assert!(
            cache
                .lookup(Cloud::Gcp, "us-central1")
                .expect("missing is empty")
                .fresh
                .is_empty()
        );
    }
}
