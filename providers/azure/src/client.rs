//! The HTTP side of the Azure provider: builds the OData filter for a region and the
//! accelerators asked for, follows `NextPageLink` to the last page, and retries HTTP 429 and
//! 5xx with the shared backoff policy.

use std::sync::Arc;
use std::time::Duration;

use gpucap_provider::provider::BoxFuture;
use gpucap_provider::{
    Clock, Cloud, ErrorKind, Offer, Provider, ProviderError, PurchaseKind, Query, Readiness,
    Reporter, RetryPolicy, SystemClock, instance_types,
};

use crate::retail;

/// The public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://prices.azure.com/api/retail/prices";
/// The version that returns savings-plan prices (and makes filter values case-sensitive).
pub const API_VERSION: &str = "2023-01-01-preview";
/// Regions fetched when the query names none: where Azure sells ND/NC H100 and A100 VMs.
pub const DEFAULT_REGIONS: &[&str] = &[
    "eastus",
    "eastus2",
    "southcentralus",
    "westus2",
    "westus3",
    "westeurope",
];
/// Following more pages than this means the filter matched far more than GPU VMs.
const MAX_PAGES: usize = 200;

/// The Azure Retail Prices client.
#[derive(Clone)]
pub struct AzureProvider {
    http: reqwest::Client,
    base_url: String,
    retry: RetryPolicy,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for AzureProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureProvider")
            .field("base_url", &self.base_url)
            .field("retry", &self.retry)
            .finish()
    }
}

impl Default for AzureProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl AzureProvider {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .user_agent(concat!("gpucap/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        AzureProvider {
            http,
            base_url: DEFAULT_BASE_URL.to_string(),
            retry: RetryPolicy::CLOUD_API,
            clock: Arc::new(SystemClock),
        }
    }

    /// Points the client at another endpoint (a mirror, or a replay server in tests).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The first page's URL for `region` and `query`.
    pub fn first_page_url(
        &self,
        query: &Query,
        region: &str,
    ) -> Result<reqwest::Url, ProviderError> {
        let mut url = reqwest::Url::parse(&self.base_url).map_err(|e| {
            ProviderError::new(
                Cloud::Azure,
                ErrorKind::Other,
                format!("bad base URL `{}`: {e}", self.base_url),
            )
        })?;
        url.query_pairs_mut()
            .append_pair("api-version", API_VERSION)
            .append_pair("$filter", &odata_filter(query, region));
        Ok(url)
    }

    async fn fetch_region(
        &self,
        query: &Query,
        region: &str,
        reporter: &dyn Reporter,
    ) -> Result<Vec<Offer>, ProviderError> {
        let fetched_at = self.clock.now();
        let origin = format!(
            "Azure Retail Prices API ({}) armRegionName eq '{region}'",
            host_of(&self.base_url)
        );
        let mut url = self.first_page_url(query, region)?.to_string();
        let mut offers = Vec::new();
        for page_no in 1..=MAX_PAGES {
            let page = self
                .retry
                .run(|| self.get_page(&url, region, page_no))
                .await?;
            let mut issues = Vec::new();
            offers.extend(retail::offers(
                &page.items,
                query,
                &origin,
                fetched_at,
                &mut issues,
            ));
            for issue in issues {
                reporter.issue(issue);
            }
            reporter.progress(Cloud::Azure, region, &format!("page {page_no}"));
            match page.next_page_link.filter(|l| !l.is_empty()) {
                Some(next) if next == url => {
                    return Err(ProviderError::malformed(
                        Cloud::Azure,
                        format!("NextPageLink of page {page_no} points to itself"),
                    )
                    .in_region(region));
                }
                Some(next) => url = next,
                None => return Ok(offers),
            }
        }
        Err(ProviderError::malformed(
            Cloud::Azure,
            format!("more than {MAX_PAGES} pages; the filter matched too much"),
        )
        .in_region(region))
    }

    async fn get_page(
        &self,
        url: &str,
        region: &str,
        page_no: usize,
    ) -> Result<retail::Page, ProviderError> {
        let err = |kind: ErrorKind, message: String| {
            ProviderError::new(Cloud::Azure, kind, message).in_region(region)
        };
        let response = self.http.get(url).send().await.map_err(|e| {
            let kind = if e.is_timeout() || e.is_connect() || e.is_request() {
                ErrorKind::Unavailable
            } else {
                ErrorKind::Other
            };
            err(kind, format!("GET page {page_no}: {e}")).with_source(e)
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| {
            err(
                ErrorKind::Unavailable,
                format!("reading page {page_no}: {e}"),
            )
            .with_source(e)
        })?;
        if !status.is_success() {
            let snippet: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            return Err(err(
                ErrorKind::from_http_status(status.as_u16()),
                format!("HTTP {status} on page {page_no}: {snippet}"),
            ));
        }
        retail::parse_page(&body)
            .map_err(|e| err(ErrorKind::Malformed, format!("page {page_no}: {e}")).with_source(e))
    }
}

fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| url.to_string())
}

/// The OData `$filter` for one region: Linux VM meters of the known GPU sizes carrying the
/// accelerators asked for; pay-as-you-go only when no term kind is wanted.
pub fn odata_filter(query: &Query, region: &str) -> String {
    let skus: Vec<String> = instance_types::INSTANCE_TYPES
        .iter()
        .filter(|s| s.cloud == Cloud::Azure)
        .filter(|s| {
            instance_types::lookup(Cloud::Azure, s.instance_type)
                .is_some_and(|(a, _)| query.wants_accelerator(a))
        })
        .map(|s| format!("armSkuName eq '{}'", s.instance_type))
        .collect();
    let mut filter = format!(
        "serviceName eq 'Virtual Machines' and armRegionName eq '{}'",
        odata_escape(region)
    );
    if !skus.is_empty() {
        filter.push_str(&format!(" and ({})", skus.join(" or ")));
    }
    let wants_terms = query.wants_kind(PurchaseKind::Reservation);
    let wants_payg = [
        PurchaseKind::OnDemand,
        PurchaseKind::Spot,
        PurchaseKind::Commitment,
    ]
    .into_iter()
    .any(|k| query.wants_kind(k));
    match (wants_payg, wants_terms) {
        (true, false) => filter.push_str(" and priceType eq 'Consumption'"),
        (false, true) => filter.push_str(" and priceType eq 'Reservation'"),
        _ => {}
    }
    filter
}

fn odata_escape(s: &str) -> String {
    s.replace('\'', "''")
}

impl Provider for AzureProvider {
    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn readiness(&self) -> BoxFuture<'_, Readiness> {
        // The Retail Prices API needs no credentials.
        Box::pin(async { Readiness::Ready })
    }

    fn regions(&self, query: &Query) -> Vec<String> {
        query.regions_for(Cloud::Azure, DEFAULT_REGIONS)
    }

    fn max_concurrency(&self) -> usize {
        // The API publishes no quota and throttles eagerly; stay gentle.
        2
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

#[cfg(test)]
mod tests {
    use gpucap_provider::Accelerator;

    use super::*;

    #[test]
    fn filter_names_region_skus_and_price_type() {
        let q = Query {
            accelerators: vec![Accelerator::parse("h100").expect("h100")],
            kinds: vec![PurchaseKind::OnDemand, PurchaseKind::Spot],
            ..Default::default()
        };
        let f = odata_filter(&q, "eastus");
        assert!(
            f.starts_with("serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and ("),
            "{f}"
        );
        assert!(f.contains("armSkuName eq 'Standard_ND96isr_H100_v5' or armSkuName eq 'Standard_NC40ads_H100_v5'"), "{f}");
        assert!(!f.contains("A100"), "{f}");
        assert!(f.ends_with(" and priceType eq 'Consumption'"), "{f}");
        assert!(!odata_filter(&Query::default(), "eastus").contains("priceType"));
    }

    #[test]
    fn the_url_encodes_the_filter() {
        let url = AzureProvider::new()
            .first_page_url(&Query::default(), "west'us")
            .expect("url")
            .to_string();
        assert!(url.starts_with("https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview&%24filter="), "{url}");
        assert!(url.contains("west%27%27us"), "{url}");
    }
}
