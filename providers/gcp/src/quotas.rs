//! GCP's side of [`gpucap_provider::quotas::QuotaSource`]: a project's regional quotas
//! (`NVIDIA_H100_GPUS`, `PREEMPTIBLE_NVIDIA_H100_GPUS`, …, in GPUs) from Compute Engine
//! `regions.get`, whose `quotas[]` lists each metric with its `limit` and `usage` (Compute
//! Engine API v1, https://cloud.google.com/compute/docs/reference/rest/v1/regions/get, read
//! 2026-11-25).
//!
//! One `regions.get` per region and run: the first quota asked in a region reads them all,
//! the others are answered from that read. A failed read is not kept, so a later ask tries
//! again.

use std::collections::BTreeMap;

use google_cloud_compute_v1::client::Regions;
use google_cloud_gax::retry_policy::NeverRetry;
use gpucap_provider::quotas::{QuotaId, QuotaSource};
use gpucap_provider::{BoxFuture, Cloud, ProviderError};
use tokio::sync::{Mutex, OnceCell};

use crate::client::credentials;
use crate::config::GcpConfig;
use crate::error::GcpError;
use crate::provider::to_provider_error;
use crate::retry;

/// Reads regional quotas with the GCP provider's settings (project, credentials, endpoint).
#[derive(Debug)]
pub struct GcpQuotas {
    config: GcpConfig,
    client: OnceCell<Regions>,
    /// Region → metric → limit, for the regions read in this run.
    regions: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

impl GcpQuotas {
    pub fn new(config: GcpConfig) -> Self {
        GcpQuotas {
            config,
            client: OnceCell::new(),
            regions: Mutex::new(BTreeMap::new()),
        }
    }

    /// With the environment's settings (`GOOGLE_CLOUD_PROJECT`,
    /// `GPUCAP_GCP_COMPUTE_ENDPOINT_URL`, Application Default Credentials).
    pub fn from_env() -> Self {
        Self::new(GcpConfig::default().with_env_overrides())
    }

    /// Whether a project is set and credentials resolve; the error says why not.
    pub async fn ready(&self) -> Result<(), ProviderError> {
        self.client().await.map(|_| ())
    }

    fn project(&self) -> Result<&str, GcpError> {
        self.config.project.as_deref().ok_or_else(|| {
            GcpError::Config("no project to read quotas of; set GOOGLE_CLOUD_PROJECT".into())
        })
    }

    async fn client(&self) -> Result<&Regions, ProviderError> {
        let build = || async {
            self.project()?;
            let creds = credentials(&self.config.credentials).await?;
            let mut b = Regions::builder()
                .with_credentials(creds)
                .with_retry_policy(NeverRetry);
            if let Some(url) = &self.config.compute_endpoint {
                b = b.with_endpoint(url);
            }
            b.build().await.map_err(|e| GcpError::Config(e.to_string()))
        };
        self.client
            .get_or_try_init(build)
            .await
            .map_err(|e| to_provider_error(e, None))
    }

    /// Every quota of `region`: one `regions.get`.
    async fn read_region(&self, region: &str) -> Result<BTreeMap<String, u64>, ProviderError> {
        const OP: &str = "regions.get";
        let client = self.client().await?;
        let project = self
            .project()
            .map_err(|e| to_provider_error(e, Some(region)))?
            .to_string();
        let req = client
            .get()
            .set_project(project)
            .set_region(region.to_string());
        let found = retry::throttled(self.config.retry, || {
            let sent = req.clone().send();
            async move { sent.await.map_err(|e| GcpError::from_gax(OP, e)) }
        })
        .await
        .map_err(|e| to_provider_error(e, Some(region)))?;
        Ok(limits(found.quotas.iter().filter_map(|q| {
            Some((q.metric.as_ref()?.name()?.to_string(), q.limit?))
        })))
    }

    async fn read(&self, id: &QuotaId) -> Result<Option<u64>, ProviderError> {
        let mut regions = self.regions.lock().await;
        if !regions.contains_key(&id.region) {
            let read = self.read_region(&id.region).await?;
            regions.insert(id.region.clone(), read);
        }
        Ok(regions
            .get(&id.region)
            .and_then(|m| m.get(&id.name.to_ascii_uppercase()))
            .copied())
    }
}

/// The limits of `(metric, limit)` pairs as whole units; a negative or non-finite limit is no
/// quota gpucap can use and is left out.
fn limits(pairs: impl Iterator<Item = (String, f64)>) -> BTreeMap<String, u64> {
    pairs
        .filter(|(_, l)| l.is_finite() && *l >= 0.0)
        .map(|(m, l)| (m.to_ascii_uppercase(), l.floor() as u64))
        .collect()
}

impl QuotaSource for GcpQuotas {
    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn quota<'a>(&'a self, id: &'a QuotaId) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(self.read(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_whole_units_and_bad_ones_are_left_out() {
        let got = limits(
            [
                ("NVIDIA_H100_GPUS".to_string(), 16.0),
                ("PREEMPTIBLE_NVIDIA_H100_GPUS".to_string(), 8.5),
                ("CPUS".to_string(), -1.0),
                ("X".to_string(), f64::NAN),
            ]
            .into_iter(),
        );
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            vec![
                ("NVIDIA_H100_GPUS".to_string(), 16),
                ("PREEMPTIBLE_NVIDIA_H100_GPUS".to_string(), 8)
            ]
        );
    }
}
