//! Azure's side of [`gpucap_provider::quotas::QuotaSource`]: a subscription's vCPU quotas per
//! VM family (`standardNCADSH100v5Family`) and for spot (`lowPriorityCores`) in a region, from
//! Compute's usage list, `GET /subscriptions/{subscription}/providers/Microsoft.Compute/
//! locations/{location}/usages` (api-version 2024-07-01, the one [`crate::act`] speaks), whose
//! `value[]` gives each quota's `name.value`, `limit` and `currentValue`, paged by `nextLink`
//! (https://learn.microsoft.com/en-us/rest/api/compute/usage/list, read 2026-11-25).
//!
//! Authentication, the endpoint override and retries are the act half's ([`AzureCapacity`]):
//! a token from the environment sent to ARM only, throttling waited out. One listing per
//! region and run; a failed one is not kept, so a later ask tries again.

use std::collections::BTreeMap;

use gpucap_provider::capacity::{ActError, ActErrorKind};
use gpucap_provider::quotas::{QuotaId, QuotaSource};
use gpucap_provider::{BoxFuture, Cloud, ErrorKind, ProviderError};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::act::{AzureCapacity, AzureCapacityConfig};

const API: &str = "usages.list";

/// Reads a subscription's quotas per region.
#[derive(Debug)]
pub struct AzureQuotas {
    arm: AzureCapacity,
    /// Region → quota name (lower case) → limit, for the regions read in this run.
    regions: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

impl AzureQuotas {
    pub fn new(config: AzureCapacityConfig) -> Result<Self, ProviderError> {
        Ok(AzureQuotas {
            arm: AzureCapacity::new(config).map_err(to_provider_error)?,
            regions: Mutex::new(BTreeMap::new()),
        })
    }

    /// From the environment ([`AzureCapacityConfig::reads_from_env`]): an `Auth` error
    /// naming what is missing when the subscription or the credential is not there.
    pub fn from_env() -> Result<Self, ProviderError> {
        Self::new(AzureCapacityConfig::reads_from_env().map_err(to_provider_error)?)
    }

    async fn read_region(&self, region: &str) -> Result<BTreeMap<String, u64>, ProviderError> {
        let path = format!(
            "/subscriptions/{}/providers/Microsoft.Compute/locations/{region}/usages",
            self.arm.config().subscription_id
        );
        let url = self.arm.url(&path, "");
        let items = self
            .arm
            .list(API, url)
            .await
            .map_err(|e| to_provider_error(e).in_region(region))?;
        Ok(limits(&items))
    }

    async fn read(&self, id: &QuotaId) -> Result<Option<u64>, ProviderError> {
        let mut regions = self.regions.lock().await;
        if !regions.contains_key(&id.region) {
            let read = self.read_region(&id.region).await?;
            regions.insert(id.region.clone(), read);
        }
        Ok(regions
            .get(&id.region)
            .and_then(|m| m.get(&id.name.to_ascii_lowercase()))
            .copied())
    }
}

/// Quota name (lower case: Azure's own spelling varies, `standardNCadsH100v5Family`) →
/// limit, from the usage items; items without a name or a whole, non-negative limit are left
/// out.
fn limits(items: &[Value]) -> BTreeMap<String, u64> {
    items
        .iter()
        .filter_map(|u| {
            let name = u["name"]["value"].as_str()?;
            let limit = u["limit"].as_u64()?;
            Some((name.to_ascii_lowercase(), limit))
        })
        .collect()
}

/// The act half's error kinds onto the price half's.
fn to_provider_error(e: ActError) -> ProviderError {
    let kind = match e.kind {
        ActErrorKind::Auth => ErrorKind::Auth,
        ActErrorKind::Throttled => ErrorKind::Throttled,
        ActErrorKind::NotFound => ErrorKind::NotFound,
        ActErrorKind::Transient | ActErrorKind::Unknown => ErrorKind::Unavailable,
        _ => ErrorKind::Other,
    };
    ProviderError::new(Cloud::Azure, kind, e.to_string())
}

impl QuotaSource for AzureQuotas {
    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn quota<'a>(&'a self, id: &'a QuotaId) -> BoxFuture<'a, Result<Option<u64>, ProviderError>> {
        Box::pin(self.read(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usages_give_limits_by_name_ignoring_case() {
        let items: Vec<Value> = serde_json::from_str(
            r#"[
              {"unit":"Count","currentValue":0,"limit":100,"name":{"value":"standardNCADSH100v5Family","localizedValue":"Standard NCADS H100 v5 Family vCPUs"}},
              {"unit":"Count","currentValue":4,"limit":40,"name":{"value":"lowPriorityCores","localizedValue":"Total Regional Low-priority vCPUs"}},
              {"unit":"Count","currentValue":0,"limit":-1,"name":{"value":"odd"}},
              {"unit":"Count","limit":5}
            ]"#,
        )
        .unwrap();
        let got = limits(&items);
        assert_eq!(got.get("standardncadsh100v5family"), Some(&100));
        assert_eq!(got.get("lowprioritycores"), Some(&40));
        assert_eq!(got.len(), 2, "{got:?}");
    }
}
