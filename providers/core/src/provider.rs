//! The interface every cloud provider implements, and what the caller hands it: the query
//! (which accelerators, regions and purchase kinds) and a reporter for progress and for data
//! the provider refused to use.
//!
//! # Contract for provider crates (`gpucap-aws`, `gpucap-gcp`, `gpucap-azure`)
//!
//! * Implement [`Provider`]. The caller (the `gpucap` binary, `gpucap prices`) asks
//!   [`Provider::readiness`] once, then calls [`Provider::fetch`] once per region from
//!   [`Provider::regions`], running up to [`Provider::max_concurrency`] regions of one provider
//!   at a time and all providers concurrently, on a multi-threaded tokio runtime.
//! * `fetch` returns every offer it could price in that region, already normalised
//!   ([`crate::Offer`]: canonical accelerator, GPUs per instance, USD per instance-hour as a
//!   `Decimal`, upfront fee, term, `Source { kind: Live, origin, fetched_at }`). Apply
//!   [`Query::wants`] before returning; the caller filters again anyway.
//! * Retry throttling with [`crate::RetryPolicy::run`]; follow every page.
//! * A failure of the whole region is an `Err(ProviderError)` with its [`crate::ErrorKind`];
//!   the caller keeps the other regions' results, falls back to the cache, and reports it.
//! * Data that is wrong but not fatal (a zero or placeholder price, a GPU count that
//!   contradicts [`crate::instance_types`], an unknown unit) is not used silently: skip or
//!   correct the offer and send an [`Issue`] to the [`Reporter`]. [`crate::validate::check`]
//!   does the common checks.
//! * The root crate wires each provider in behind a Cargo feature of the same name (`aws`,
//!   `gcp`, `azure`, on by default) through one constructor per crate:
//!   `gpucap_<cloud>::provider() -> impl Provider` (taking its settings from the environment:
//!   endpoint overrides, credentials), so nothing else of the crate is public API to the root.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::{Accelerator, Cloud, Offer, ProviderError, PurchaseKind};

/// What the caller wants priced. Empty lists mean "all".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub accelerators: Vec<Accelerator>,
    /// Region names; providers take the ones of their own cloud ([`Cloud::of_region`]).
    pub regions: Vec<String>,
    pub kinds: Vec<PurchaseKind>,
}

impl Query {
    pub fn wants_accelerator(&self, accelerator: Accelerator) -> bool {
        self.accelerators.is_empty() || self.accelerators.contains(&accelerator)
    }

    pub fn wants_kind(&self, kind: PurchaseKind) -> bool {
        self.kinds.is_empty() || self.kinds.contains(&kind)
    }

    pub fn wants_region(&self, region: &str) -> bool {
        self.regions.is_empty() || self.regions.iter().any(|r| r == region)
    }

    /// Whether an offer matches every filter of the query.
    pub fn wants(&self, offer: &Offer) -> bool {
        self.wants_accelerator(offer.accelerator)
            && self.wants_kind(offer.kind)
            && self.wants_region(&offer.region)
    }

    /// The regions of the query that belong to `cloud`, or `defaults` when the query names
    /// none of that cloud's regions.
    pub fn regions_for(&self, cloud: Cloud, defaults: &[&str]) -> Vec<String> {
        let own: Vec<String> = self
            .regions
            .iter()
            .filter(|r| Cloud::of_region(r) == Some(cloud))
            .cloned()
            .collect();
        if self.regions.is_empty() {
            defaults.iter().map(|r| r.to_string()).collect()
        } else {
            own
        }
    }
}

/// Whether a provider can run in this environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Skip this cloud; the hint tells the user what to set up (credentials, a feature).
    Skip {
        reason: String,
        hint: String,
    },
}

/// A boxed future, so that [`Provider`] is object-safe and the caller can hold
/// `Vec<Box<dyn Provider>>` of crates compiled in or not.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One cloud's price source.
pub trait Provider: Send + Sync {
    fn cloud(&self) -> Cloud;

    /// Checks credentials and settings without fetching prices.
    fn readiness(&self) -> BoxFuture<'_, Readiness>;

    /// The regions to fetch for a query (usually [`Query::regions_for`] with the provider's
    /// default GPU regions).
    fn regions(&self, query: &Query) -> Vec<String>;

    /// How many regions of this provider may be fetched at once, to stay inside its rate
    /// limits.
    fn max_concurrency(&self) -> usize {
        4
    }

    /// Every offer in `region` that matches `query`, fetched live.
    fn fetch<'a>(
        &'a self,
        query: &'a Query,
        region: &'a str,
        reporter: &'a dyn Reporter,
    ) -> BoxFuture<'a, Result<Vec<Offer>, ProviderError>>;
}

/// What was wrong with a piece of data that a provider or importer refused to use as is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "kebab-case")]
pub enum Problem {
    /// A price of zero for something that is sold.
    ZeroPrice,
    /// A value the source uses for "unknown" (e.g. the catalog's 700.0), or a negative price.
    PlaceholderPrice { price: Decimal },
    /// The listed GPU count is not what the instance type has.
    GpuCountMismatch { listed: String, expected: u32 },
    /// A unit of measure gpucap does not know how to convert to per-hour.
    UnknownUnit { unit: String },
    /// An instance type or accelerator name gpucap cannot map to a canonical accelerator.
    UnknownAccelerator { name: String },
    /// A spot price above the on-demand price of the same instance.
    SpotAboveOnDemand { spot: Decimal, on_demand: Decimal },
    /// Anything else, in words.
    Other { message: String },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ZeroPrice => write!(f, "price is zero"),
            Problem::PlaceholderPrice { price } => {
                write!(f, "price {price} is a placeholder, not a price")
            }
            Problem::GpuCountMismatch { listed, expected } => {
                write!(
                    f,
                    "listed with {listed} GPUs but the instance type has {expected}"
                )
            }
            Problem::UnknownUnit { unit } => write!(f, "unknown unit of measure `{unit}`"),
            Problem::UnknownAccelerator { name } => write!(f, "unknown accelerator `{name}`"),
            Problem::SpotAboveOnDemand { spot, on_demand } => {
                write!(
                    f,
                    "spot price {spot} is above the on-demand price {on_demand}"
                )
            }
            Problem::Other { message } => f.write_str(message),
        }
    }
}

/// Whether the data was dropped or used after correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Skipped,
    Corrected,
    /// Used as is, but worth a look.
    Kept,
}

/// One piece of surprising data: where it was, what was wrong, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub cloud: Cloud,
    pub region: Option<String>,
    /// What the data was about: instance type and kind, SKU, or `file:line`.
    pub subject: String,
    #[serde(flatten)]
    pub problem: Problem,
    pub action: Action,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cloud)?;
        if let Some(region) = &self.region {
            write!(f, " {region}")?;
        }
        let action = match self.action {
            Action::Skipped => "skipped",
            Action::Corrected => "corrected",
            Action::Kept => "kept",
        };
        write!(f, " {}: {} ({action})", self.subject, self.problem)
    }
}

/// Where providers send progress and issues. Implementations must be cheap and thread-safe.
pub trait Reporter: Send + Sync {
    fn issue(&self, issue: Issue);

    /// A page or request finished; `what` says which (for progress bars and `-v` logs).
    fn progress(&self, _cloud: Cloud, _region: &str, _what: &str) {}
}

/// A reporter that keeps every issue, for tests and for printing a summary at the end.
#[derive(Debug, Default)]
pub struct CollectingReporter {
    issues: Mutex<Vec<Issue>>,
}

impl CollectingReporter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The issues reported so far.
    pub fn issues(&self) -> Vec<Issue> {
        self.issues.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Reporter for CollectingReporter {
    fn issue(&self, issue: Issue) {
        if let Ok(mut v) = self.issues.lock() {
            v.push(issue);
        }
    }
}

/// The time a fetch happened, injectable so that caches and tests control it.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_regions_are_split_by_cloud() {
        let q = Query {
            regions: vec!["us-east-1".into(), "eastus".into()],
            ..Default::default()
        };
        assert_eq!(q.regions_for(Cloud::Azure, &["westus"]), vec!["eastus"]);
        assert_eq!(q.regions_for(Cloud::Aws, &["us-west-2"]), vec!["us-east-1"]);
        assert!(q.regions_for(Cloud::Gcp, &["us-central1"]).is_empty());
        assert_eq!(
            Query::default().regions_for(Cloud::Gcp, &["us-central1"]),
            vec!["us-central1"]
        );
    }

    #[test]
    fn issues_read_as_sentences() {
        let issue = Issue {
            cloud: Cloud::Azure,
            region: Some("eastus".into()),
            subject: "Standard_ND96isr_H100_v5".into(),
            problem: Problem::GpuCountMismatch {
                listed: "12".into(),
                expected: 8,
            },
            action: Action::Corrected,
        };
        assert_eq!(
            issue.to_string(),
            "azure eastus Standard_ND96isr_H100_v5: listed with 12 GPUs but the instance type has 8 (corrected)"
        );
    }
}
