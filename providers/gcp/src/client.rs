//! The I/O edge: builds the google-cloud-rust Billing Catalog and Compute Engine clients
//! (endpoint override, their own retries off, credentials resolved up front) and makes
//! paginated, throttling-aware list calls, turning SDK types into the plain rows the pure
//! modules read.

use std::future::Future;
use std::time::Duration;

use google_cloud_auth::credentials::{Credentials, anonymous, api_key_credentials};
use google_cloud_billing_v1::client::CloudCatalog;
use google_cloud_compute_v1::client::{AcceleratorTypes, MachineTypes};
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::retry_policy::NeverRetry;

use crate::config::{COMPUTE_SERVICE, CredentialsSource, GcpConfig};
use crate::error::GcpError;
use crate::machines::{MachineRow, ZoneAccelerator, last_segment};
use crate::retry;
use crate::sku::SkuRow;

/// Largest page each API allows.
const SKU_PAGE: i32 = 5000;
const COMPUTE_PAGE: u32 = 500;

/// Connected GCP clients.
#[derive(Debug, Clone)]
pub struct GcpClients {
    config: GcpConfig,
    catalog: CloudCatalog,
    accelerator_types: AcceleratorTypes,
    machine_types: MachineTypes,
}

/// How long resolving Application Default Credentials may take. Without an ADC file the
/// library falls back to the metadata server, which off GCP fails fast on DNS, but a
/// half-reachable one must not hang a pricing run.
const ADC_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) async fn credentials(source: &CredentialsSource) -> Result<Credentials, GcpError> {
    match source {
        CredentialsSource::Adc => {
            let missing = |detail: String| GcpError::MissingCredentials { detail };
            let creds = google_cloud_auth::credentials::Builder::default()
                .build()
                .map_err(|e| missing(e.to_string()))?;
            // Building ADC succeeds even with nothing behind it (it falls back to the metadata
            // server); asking for a token once is the only way to know up front.
            match tokio::time::timeout(ADC_TIMEOUT, creds.headers(http::Extensions::new())).await {
                Ok(Ok(_)) => Ok(creds),
                Ok(Err(e)) => Err(missing(e.to_string())),
                Err(_) => Err(missing(format!("no token within {ADC_TIMEOUT:?}"))),
            }
        }
        CredentialsSource::ApiKey(key) => {
            Ok(api_key_credentials::Builder::new(key.clone()).build())
        }
        CredentialsSource::Anonymous => Ok(anonymous::Builder::new().build()),
    }
}

impl GcpClients {
    /// Resolves credentials (failing with [`GcpError::MissingCredentials`] when there are
    /// none, so the caller can skip GCP) and builds the clients.
    pub async fn connect(config: GcpConfig) -> Result<Self, GcpError> {
        let creds = credentials(&config.credentials).await?;
        let build_err =
            |e: google_cloud_gax::client_builder::Error| GcpError::Config(e.to_string());
        let mut catalog = CloudCatalog::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        if let Some(url) = &config.billing_endpoint {
            catalog = catalog.with_endpoint(url);
        }
        let mut accelerators = AcceleratorTypes::builder()
            .with_credentials(creds.clone())
            .with_retry_policy(NeverRetry);
        let mut machines = MachineTypes::builder()
            .with_credentials(creds)
            .with_retry_policy(NeverRetry);
        if let Some(url) = &config.compute_endpoint {
            accelerators = accelerators.with_endpoint(url);
            machines = machines.with_endpoint(url);
        }
        Ok(GcpClients {
            catalog: catalog.build().await.map_err(build_err)?,
            accelerator_types: accelerators.build().await.map_err(build_err)?,
            machine_types: machines.build().await.map_err(build_err)?,
            config,
        })
    }

    pub fn config(&self) -> &GcpConfig {
        &self.config
    }

    fn project(&self) -> Result<&str, GcpError> {
        self.config.project.as_deref().ok_or_else(|| {
            GcpError::Config(
                "no project for Compute Engine lists; set `project` or GOOGLE_CLOUD_PROJECT".into(),
            )
        })
    }

    /// Every Compute Engine SKU in the Billing Catalog (USD list prices).
    pub async fn compute_skus(&self) -> Result<Vec<SkuRow>, GcpError> {
        const OP: &str = "services.skus.list";
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let req = self
                .catalog
                .list_skus()
                .set_parent(COMPUTE_SERVICE)
                .set_currency_code("USD")
                .set_page_size(SKU_PAGE)
                .set_page_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            out.extend(page.skus.into_iter().map(sku_row));
            if page.next_page_token.is_empty() {
                return Ok(out);
            }
            token = page.next_page_token;
        }
    }

    /// Accelerator types offered per zone, across the project's zones.
    pub async fn zone_accelerators(&self) -> Result<Vec<ZoneAccelerator>, GcpError> {
        const OP: &str = "acceleratorTypes.aggregatedList";
        let project = self.project()?.to_string();
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let req = self
                .accelerator_types
                .aggregated_list()
                .set_project(project.clone())
                .set_max_results(COMPUTE_PAGE)
                .set_page_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            for (scope, list) in page.items {
                for a in list.accelerator_types {
                    let zone = a
                        .zone
                        .as_deref()
                        .map(last_segment)
                        .unwrap_or_else(|| last_segment(&scope))
                        .to_string();
                    out.push(ZoneAccelerator {
                        zone,
                        name: a.name.unwrap_or_default(),
                        maximum_cards_per_instance: a.maximum_cards_per_instance,
                    });
                }
            }
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(out),
            }
        }
    }

    /// Machine types that come with GPUs, per zone.
    pub async fn accelerator_machine_types(&self) -> Result<Vec<MachineRow>, GcpError> {
        const OP: &str = "machineTypes.aggregatedList";
        let project = self.project()?.to_string();
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let req = self
                .machine_types
                .aggregated_list()
                .set_project(project.clone())
                .set_max_results(COMPUTE_PAGE)
                .set_page_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            for (scope, list) in page.items {
                for m in list
                    .machine_types
                    .into_iter()
                    .filter(|m| !m.accelerators.is_empty())
                {
                    let zone = m
                        .zone
                        .as_deref()
                        .map(last_segment)
                        .unwrap_or_else(|| last_segment(&scope))
                        .to_string();
                    out.push(MachineRow {
                        name: m.name.unwrap_or_default(),
                        zone,
                        guest_cpus: m.guest_cpus,
                        memory_mb: m.memory_mb,
                        accelerators: m
                            .accelerators
                            .into_iter()
                            .map(|a| (a.guest_accelerator_type, a.guest_accelerator_count))
                            .collect(),
                    });
                }
            }
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(out),
            }
        }
    }

    /// Sends one request, retried with backoff while Google throttles it (the client's own
    /// retries are off, see `connect`).
    async fn send<O, Fut>(&self, op: &'static str, send: impl Fn() -> Fut) -> Result<O, GcpError>
    where
        Fut: Future<Output = Result<O, GaxError>>,
    {
        retry::throttled(self.config.retry, || {
            let sent = send();
            async move { sent.await.map_err(|e| GcpError::from_gax(op, e)) }
        })
        .await
    }
}

fn sku_row(s: google_cloud_billing_v1::model::Sku) -> SkuRow {
    let category = s.category.unwrap_or_default();
    let pricing = s
        .pricing_info
        .into_iter()
        .next()
        .and_then(|p| p.pricing_expression)
        .unwrap_or_default();
    let currency = pricing
        .tiered_rates
        .iter()
        .find_map(|t| t.unit_price.as_ref().map(|m| m.currency_code.clone()))
        .unwrap_or_default();
    SkuRow {
        sku_id: s.sku_id,
        description: s.description,
        resource_family: category.resource_family,
        resource_group: category.resource_group,
        usage_type: category.usage_type,
        service_regions: s.service_regions,
        usage_unit: pricing.usage_unit,
        currency_code: currency,
        tiers: pricing
            .tiered_rates
            .iter()
            .map(|t| {
                let (units, nanos) = t.unit_price.as_ref().map_or((0, 0), |m| (m.units, m.nanos));
                (t.start_usage_amount, units, nanos)
            })
            .collect(),
    }
}
