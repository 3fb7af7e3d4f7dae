//! AWS's side of [`gpucap_provider::quotas::QuotaSource`]: the EC2 instance quotas (vCPUs per
//! family, e.g. `L-417A185B` "Running On-Demand P instances") read from Service Quotas
//! (API version 2019-06-24,
//! https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_GetServiceQuota.html,
//! read 2026-11-25). The quota codes are the ones [`gpucap_provider::quotas::draw`] yields.
//!
//! Each quota is asked once per run: answers (a value, or "AWS does not know it") are kept,
//! errors are not, so a later ask after a throttled one tries again.

use std::collections::BTreeMap;

use gpucap_provider::quotas::{QuotaId, QuotaSource};
use gpucap_provider::{BoxFuture, Cloud, ProviderError};
use tokio::sync::{Mutex, OnceCell};

use crate::client::AwsClients;
use crate::config::AwsConfig;
use crate::provider::to_provider_error;

/// Reads EC2 quotas with the AWS provider's settings (credential chain, endpoint override,
/// retries on throttling).
#[derive(Debug)]
pub struct AwsQuotas {
    config: AwsConfig,
    clients: OnceCell<AwsClients>,
    answered: Mutex<BTreeMap<(String, String), Option<u64>>>,
}

impl AwsQuotas {
    pub fn new(config: AwsConfig) -> Self {
        AwsQuotas {
            config,
            clients: OnceCell::new(),
            answered: Mutex::new(BTreeMap::new()),
        }
    }

    /// With the environment's settings (`GPUCAP_AWS_ENDPOINT_URL`, the default credential
    /// chain), as the price provider ([`crate::provider`]).
    pub fn from_env() -> Self {
        Self::new(AwsConfig::default().with_env_overrides())
    }

    /// Whether credentials resolve; the error (never a secret) says why not.
    pub async fn ready(&self) -> Result<(), ProviderError> {
        self.clients().await.map(|_| ())
    }

    async fn clients(&self) -> Result<&AwsClients, ProviderError> {
        self.clients
            .get_or_try_init(|| AwsClients::connect(self.config.clone()))
            .await
            .map_err(|e| to_provider_error(e, None))
    }

    async fn read(&self, id: &QuotaId) -> Result<Option<u64>, ProviderError> {
        let key = (id.region.clone(), id.name.clone());
        if let Some(v) = self.answered.lock().await.get(&key) {
            return Ok(*v);
        }
        let clients = self.clients().await?;
        let value = clients
            .ec2_quota(&id.region, &id.name)
            .await
            .map_err(|e| to_provider_error(e, Some(&id.region)))?;
        // Quotas are whole vCPUs; AWS sends a float (`384.0`). A negative or non-finite figure
        // is not a quota.
        let value = match value {
            Some(v) if v.is_finite() && v >= 0.0 => Some(v.floor() as u64),
            Some(v) => {
                return Err(ProviderError::malformed(
                    Cloud::Aws,
                    format!("quota {} has value {v}", id.name),
                )
                .in_region(&id.region));
            }
            None => None,
        };
        self.answered.lock().await.insert(key, value);
        Ok(value)
    }
}

impl QuotaSource for AwsQuotas {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn quota<'a>(&'a self, id: &'a QuotaId) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(self.read(id))
    }
}
