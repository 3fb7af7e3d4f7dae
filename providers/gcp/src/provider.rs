//! The adapter to gpucap's provider interface ([`gpucap_provider::Provider`]). The Billing
//! Catalog and Compute Engine lists are global, so they are fetched once per provider (the
//! first region's `fetch`) and each region's `fetch` prices its own zones from them.

use std::sync::Arc;

use chrono::Utc;
use gpucap_provider::{
    Action, BoxFuture, Cloud, ErrorKind, Issue, Offer, Problem, Provider, ProviderError, Query,
    Readiness, Reporter,
};
use tokio::sync::OnceCell;

use crate::anomaly::{Anomaly, AnomalyReason};
use crate::client::GcpClients;
use crate::config::GcpConfig;
use crate::error::GcpError;
use crate::fetch::{self, Lists};
use crate::machines::region_of;

/// Regions priced when the query names no GCP region: where GCP sells most GPU capacity.
pub const DEFAULT_REGIONS: &[&str] = &["us-central1", "us-east4", "europe-west4"];

/// The GCP price source.
#[derive(Debug)]
pub struct GcpProvider {
    config: GcpConfig,
    clients: OnceCell<GcpClients>,
    lists: OnceCell<Arc<Lists>>,
}

/// The provider with settings from the environment (`GOOGLE_CLOUD_PROJECT`,
/// `GPUCAP_GCP_API_KEY`, `GPUCAP_GCP_BILLING_ENDPOINT_URL`, `GPUCAP_GCP_COMPUTE_ENDPOINT_URL`,
/// Application Default Credentials).
pub fn provider() -> GcpProvider {
    GcpProvider::new(GcpConfig::default().with_env_overrides())
}

impl GcpProvider {
    pub fn new(config: GcpConfig) -> Self {
        GcpProvider {
            config,
            clients: OnceCell::new(),
            lists: OnceCell::new(),
        }
    }

    async fn clients(&self) -> Result<&GcpClients, GcpError> {
        self.clients
            .get_or_try_init(|| GcpClients::connect(self.config.clone()))
            .await
    }

    /// The global lists, fetched once; a failure is not remembered, so the next region retries.
    async fn lists(&self) -> Result<Arc<Lists>, GcpError> {
        let clients = self.clients().await?;
        self.lists
            .get_or_try_init(|| async { fetch::fetch_lists(clients).await.map(Arc::new) })
            .await
            .cloned()
    }

    async fn fetch_region(
        &self,
        query: &Query,
        region: &str,
        reporter: &dyn Reporter,
    ) -> Result<Vec<Offer>, ProviderError> {
        let lists = self
            .lists()
            .await
            .map_err(|e| to_provider_error(e, Some(region)))?;
        let (offers, anomalies) =
            fetch::price(&lists, query, &|zone| region_of(zone) == region, Utc::now());
        // SKU anomalies are global; each region reports them once it is the one priced first.
        for anomaly in anomalies
            .iter()
            .filter(|a| a.operation != "services.skus.list" || region_is_first(query, region, self))
        {
            reporter.issue(to_issue(anomaly, region));
        }
        reporter.progress(Cloud::Gcp, region, "priced");
        Ok(offers)
    }
}

fn region_is_first(query: &Query, region: &str, provider: &GcpProvider) -> bool {
    provider.regions(query).first().is_some_and(|r| r == region)
}

impl Provider for GcpProvider {
    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn readiness(&self) -> BoxFuture<'_, Readiness> {
        Box::pin(async {
            if self.config.project.is_none() {
                return Readiness::Skip {
                    reason: "no GCP project for Compute Engine lists".into(),
                    hint:
                        "set GOOGLE_CLOUD_PROJECT to a project with the Compute Engine API enabled"
                            .into(),
                };
            }
            match self.clients().await {
                Ok(_) => Readiness::Ready,
                Err(e) => Readiness::Skip {
                    reason: e.to_string(),
                    hint: e.hint().unwrap_or("check the GCP settings").to_string(),
                },
            }
        })
    }

    fn regions(&self, query: &Query) -> Vec<String> {
        query.regions_for(Cloud::Gcp, DEFAULT_REGIONS)
    }

    fn fetch<'a>(
        &'a self,
        query: &'a Query,
        region: &'a str,
        reporter: &'a dyn Reporter,
    ) -> BoxFuture<'a, Result<Vec<Offer>, ProviderError>> {
        Box::pin(self.fetch_region(query, region, reporter))
    }
}

/// Maps a classified GCP error to the shared classes.
pub fn to_provider_error(e: GcpError, region: Option<&str>) -> ProviderError {
    let kind = match &e {
        GcpError::MissingCredentials { .. } => ErrorKind::Auth,
        GcpError::Throttled { .. } => ErrorKind::Throttled,
        GcpError::Api { code, .. } => match code.as_str() {
            "PERMISSION_DENIED" | "UNAUTHENTICATED" => ErrorKind::Auth,
            "NOT_FOUND" => ErrorKind::NotFound,
            "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED" => ErrorKind::Unavailable,
            _ => ErrorKind::Other,
        },
        GcpError::Transport { .. } => ErrorKind::Unavailable,
        GcpError::Malformed { .. } => ErrorKind::Malformed,
        GcpError::Config(_) => ErrorKind::Other,
    };
    let err = ProviderError::new(Cloud::Gcp, kind, e.to_string());
    match region {
        Some(r) => err.in_region(r),
        None => err,
    }
}

fn to_issue(a: &Anomaly, region: &str) -> Issue {
    let problem = match &a.reason {
        AnomalyReason::BadPrice { value } if value == "units 0, nanos 0" => Problem::ZeroPrice,
        AnomalyReason::BadPrice { .. } => Problem::Other {
            message: a.reason.to_string(),
        },
        AnomalyReason::UnknownUnit { unit } => Problem::UnknownUnit { unit: unit.clone() },
        AnomalyReason::Malformed { .. } | AnomalyReason::MissingComponent { .. } => {
            Problem::Other {
                message: a.reason.to_string(),
            }
        }
    };
    let region = (a.operation != "services.skus.list").then(|| region.to_string());
    Issue {
        cloud: Cloud::Gcp,
        region,
        subject: a.subject.clone(),
        problem,
        action: Action::Skipped,
    }
}
