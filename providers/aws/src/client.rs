//! The I/O edge: builds the EC2 and Pricing SDK clients (endpoint override, SDK retries off,
//! credentials checked up front) and makes one paginated, throttling-aware call per
//! operation. Each call turns SDK types into the plain rows the pure modules reduce.

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::InstanceTypeInfo;
use aws_sdk_pricing::types::{Filter as PriceFilter, FilterType};
use aws_smithy_runtime_api::http::Response as HttpResponse;
use chrono::{DateTime, Utc};
use std::future::Future;

use crate::anomaly::AnomalyReason;
use crate::capacity_blocks::OfferingRow;
use crate::config::AwsConfig;
use crate::error::AwsError;
use crate::instance_types::DeviceInfo;
use crate::placement::{self, SpotPlacementScore};
use crate::retry;
use crate::spot::SpotPricePoint;

/// Service Quotas' name for EC2.
const EC2_SERVICE_CODE: &str = "ec2";
/// Service Quotas' error for a quota (or an applied value) that does not exist.
const NO_SUCH_RESOURCE: &str = "NoSuchResourceException";

/// Largest page each API allows (fewer round trips, fewer chances to be throttled).
const EC2_PAGE: i32 = 1000;
const PRICING_PAGE: i32 = 100;
/// `DescribeInstanceTypes` caps its page at 100.
const INSTANCE_TYPES_PAGE: i32 = 100;

/// Connected AWS clients sharing one credential set.
#[derive(Debug, Clone)]
pub struct AwsClients {
    config: AwsConfig,
    sdk: SdkConfig,
}

impl AwsClients {
    /// Loads the default credential chain (or the configured static keys) and fails with
    /// [`AwsError::MissingCredentials`] when it yields nothing, so the caller can skip AWS.
    pub async fn connect(config: AwsConfig) -> Result<Self, AwsError> {
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(config.pricing_region.clone()))
            // Retries are ours (crate::retry), so that throttling behaviour is testable.
            .retry_config(RetryConfig::disabled());
        let sdk = load_with_credentials(loader, config.static_credentials.as_ref())
            .await
            .map_err(|detail| AwsError::MissingCredentials { detail })?;
        Ok(AwsClients { config, sdk })
    }

    pub fn config(&self) -> &AwsConfig {
        &self.config
    }

    fn ec2(&self, region: &str) -> aws_sdk_ec2::Client {
        let mut b =
            aws_sdk_ec2::config::Builder::from(&self.sdk).region(Region::new(region.to_string()));
        if let Some(url) = &self.config.endpoint_url {
            b = b.endpoint_url(url);
        }
        aws_sdk_ec2::Client::from_conf(b.build())
    }

    fn pricing(&self) -> aws_sdk_pricing::Client {
        let mut b = aws_sdk_pricing::config::Builder::from(&self.sdk);
        if let Some(url) = self
            .config
            .pricing_endpoint_url
            .as_ref()
            .or(self.config.endpoint_url.as_ref())
        {
            b = b.endpoint_url(url);
        }
        aws_sdk_pricing::Client::from_conf(b.build())
    }

    /// Service Quotas in `region`, at the same endpoint override as EC2 (a local peer answers
    /// both).
    fn service_quotas(&self, region: &str) -> aws_sdk_servicequotas::Client {
        let mut b = aws_sdk_servicequotas::config::Builder::from(&self.sdk)
            .region(Region::new(region.to_string()));
        if let Some(url) = &self.config.endpoint_url {
            b = b.endpoint_url(url);
        }
        aws_sdk_servicequotas::Client::from_conf(b.build())
    }

    /// The value of EC2 quota `code` in `region` (in the quota's unit, vCPUs for the instance
    /// quotas): the applied value (`GetServiceQuota`), else — AWS answers
    /// `NoSuchResourceException` where it has no applied value for the account — the AWS
    /// default (`GetAWSDefaultServiceQuota`); `None` when neither exists.
    pub async fn ec2_quota(&self, region: &str, code: &str) -> Result<Option<f64>, AwsError> {
        let client = self.service_quotas(region);
        let applied = {
            const OP: &str = "GetServiceQuota";
            let req = client
                .get_service_quota()
                .service_code(EC2_SERVICE_CODE)
                .quota_code(code);
            self.send(OP, || req.clone().send())
                .await
                .map(|r| r.quota().cloned())
        };
        let quota = match applied {
            Err(AwsError::Api { code: c, .. }) if c == NO_SUCH_RESOURCE => {
                const OP: &str = "GetAWSDefaultServiceQuota";
                let req = client
                    .get_aws_default_service_quota()
                    .service_code(EC2_SERVICE_CODE)
                    .quota_code(code);
                match self.send(OP, || req.clone().send()).await {
                    Ok(r) => r.quota().cloned(),
                    Err(AwsError::Api { code: c, .. }) if c == NO_SUCH_RESOURCE => None,
                    Err(e) => return Err(e),
                }
            }
            other => other?,
        };
        let Some(quota) = quota else {
            return Ok(None);
        };
        if let (None, Some(reason)) = (quota.value(), quota.error_reason()) {
            // The quota exists but Service Quotas could not read it from EC2.
            return Err(AwsError::Api {
                operation: "GetServiceQuota",
                code: reason
                    .error_code()
                    .map(|c| c.as_str().to_string())
                    .unwrap_or_else(|| "ErrorReason".into()),
                message: reason.error_message().unwrap_or_default().to_string(),
            });
        }
        Ok(quota.value())
    }

    /// Every instance type in the region with GPUs or Neuron devices (or the configured ones),
    /// as (name, devices).
    pub async fn accelerated_instance_types(
        &self,
        region: &str,
    ) -> Result<Vec<(String, Vec<DeviceInfo>)>, AwsError> {
        const OP: &str = "DescribeInstanceTypes";
        let client = self.ec2(region);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut req = client
                .describe_instance_types()
                .max_results(INSTANCE_TYPES_PAGE)
                .set_next_token(token.clone());
            // No server-side filter selects "has accelerators", so every type is listed and
            // filtered here; explicit types cannot be combined with MaxResults.
            if !self.config.instance_types.is_empty() {
                req = req.set_max_results(None).set_instance_types(Some(
                    self.config
                        .instance_types
                        .iter()
                        .map(|t| t.as_str().into())
                        .collect(),
                ));
            }
            let page = self.send(OP, || req.clone().send()).await?;
            out.extend(page.instance_types().iter().filter_map(devices));
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Current spot price events of the given instance types in the region (Linux/UNIX).
    pub async fn spot_price_history(
        &self,
        region: &str,
        instance_types: &[String],
    ) -> Result<Vec<SpotPricePoint>, AwsError> {
        const OP: &str = "DescribeSpotPriceHistory";
        let client = self.ec2(region);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        // StartTime = now asks for the price in effect now per pool, not 90 days of history.
        let now = aws_smithy_types::DateTime::from_secs(Utc::now().timestamp());
        loop {
            let req = client
                .describe_spot_price_history()
                .set_instance_types(Some(
                    instance_types.iter().map(|t| t.as_str().into()).collect(),
                ))
                .product_descriptions("Linux/UNIX")
                .start_time(now)
                .max_results(EC2_PAGE)
                .set_next_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            out.extend(page.spot_price_history().iter().map(|p| {
                SpotPricePoint {
                    availability_zone: p.availability_zone().unwrap_or_default().to_string(),
                    instance_type: p
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    product_description: p
                        .product_description()
                        .map(|d| d.as_str().to_string())
                        .unwrap_or_default(),
                    spot_price: p.spot_price().unwrap_or_default().to_string(),
                    timestamp: p.timestamp().and_then(to_chrono),
                }
            }));
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Price List products (one JSON string each) for an instance type in a region, filtered
    /// to shared-tenancy Linux without pre-installed software, as used capacity.
    pub async fn products(
        &self,
        region: &str,
        instance_type: &str,
    ) -> Result<Vec<String>, AwsError> {
        const OP: &str = "GetProducts";
        let client = self.pricing();
        let filters = [
            ("regionCode", region),
            ("instanceType", instance_type),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        ]
        .into_iter()
        .map(|(field, value)| {
            PriceFilter::builder()
                .r#type(FilterType::TermMatch)
                .field(field)
                .value(value)
                .build()
                .map_err(|e| AwsError::Config(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let req = client
                .get_products()
                .service_code("AmazonEC2")
                .format_version("aws_v1")
                .set_filters(Some(filters.clone()))
                .max_results(PRICING_PAGE)
                .set_next_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            out.extend(page.price_list().iter().cloned());
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Capacity block offerings for a block of `count` instances for `hours`.
    pub async fn capacity_block_offerings(
        &self,
        region: &str,
        instance_type: &str,
        count: u32,
        hours: u32,
    ) -> Result<Vec<OfferingRow>, AwsError> {
        const OP: &str = "DescribeCapacityBlockOfferings";
        let client = self.ec2(region);
        let to_i32 =
            |v: u32| i32::try_from(v).map_err(|_| AwsError::Config(format!("{v} is too large")));
        let (count, hours) = (to_i32(count)?, to_i32(hours)?);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let req = client
                .describe_capacity_block_offerings()
                .instance_type(instance_type)
                .instance_count(count)
                .capacity_duration_hours(hours)
                .max_results(EC2_PAGE)
                .set_next_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            out.extend(page.capacity_block_offerings().iter().map(|o| OfferingRow {
                offering_id: o.capacity_block_offering_id().map(str::to_string),
                instance_type: o.instance_type().map(str::to_string),
                availability_zone: o.availability_zone().map(str::to_string),
                instance_count: o.instance_count(),
                start_date: o.start_date().and_then(to_chrono),
                end_date: o.end_date().and_then(to_chrono),
                duration_hours: o.capacity_block_duration_hours(),
                upfront_fee: o.upfront_fee().map(str::to_string),
                currency_code: o.currency_code().map(str::to_string),
            }));
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Per-zone spot placement scores for the instance types across the regions, asked from
    /// the first region's endpoint (the API evaluates the listed regions from anywhere).
    pub async fn spot_placement_scores(
        &self,
        instance_types: &[String],
        regions: &[String],
        target_capacity: u32,
    ) -> Result<(Vec<SpotPlacementScore>, Vec<AnomalyReason>), AwsError> {
        const OP: &str = "GetSpotPlacementScores";
        let asked_from = regions
            .first()
            .map(String::as_str)
            .unwrap_or(&self.config.pricing_region);
        let client = self.ec2(asked_from);
        let target = i32::try_from(target_capacity)
            .map_err(|_| AwsError::Config("target capacity too large".into()))?;
        let (mut scores, mut refused) = (Vec::new(), Vec::new());
        let mut token: Option<String> = None;
        loop {
            let req = client
                .get_spot_placement_scores()
                .set_instance_types(Some(instance_types.to_vec()))
                .set_region_names(Some(regions.to_vec()))
                .target_capacity(target)
                .single_availability_zone(true)
                .max_results(EC2_PAGE)
                .set_next_token(token.clone());
            let page = self.send(OP, || req.clone().send()).await?;
            for s in page.spot_placement_scores() {
                match placement::parse(
                    s.region(),
                    s.availability_zone_id(),
                    s.score(),
                    instance_types,
                    target_capacity,
                ) {
                    Ok(s) => scores.push(s),
                    Err(r) => refused.push(r),
                }
            }
            token = next_token(page.next_token());
            if token.is_none() {
                return Ok((scores, refused));
            }
        }
    }

    /// Sends one request, retried with backoff while AWS throttles it (the SDK's own retries
    /// are off, see `connect`).
    async fn send<O, E, Fut>(&self, op: &'static str, send: impl Fn() -> Fut) -> Result<O, AwsError>
    where
        Fut: Future<Output = Result<O, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        retry::throttled(self.config.retry, || {
            let sent = send();
            async move { sent.await.map_err(|e| AwsError::from_sdk(op, e)) }
        })
        .await
    }
}

/// The token of the next page; AWS ends a listing with an absent or empty token.
fn next_token(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_string)
}

/// The accelerator devices of an instance type, `None` when it has none.
fn devices(info: &InstanceTypeInfo) -> Option<(String, Vec<DeviceInfo>)> {
    let name = info.instance_type()?.as_str().to_string();
    let gpus: Vec<DeviceInfo> = info
        .gpu_info()
        .map(|g| {
            g.gpus()
                .iter()
                .map(|d| DeviceInfo {
                    name: d.name().unwrap_or_default().to_string(),
                    count: d.count(),
                    memory_mib: d.memory_info().and_then(|m| m.size_in_mib()),
                })
                .collect()
        })
        .unwrap_or_default();
    let neuron: Vec<DeviceInfo> = info
        .neuron_info()
        .map(|n| {
            n.neuron_devices()
                .iter()
                .map(|d| DeviceInfo {
                    name: d.name().unwrap_or_default().to_string(),
                    count: d.count(),
                    memory_mib: d.memory_info().and_then(|m| m.size_in_mib()),
                })
                .collect()
        })
        .unwrap_or_default();
    let all: Vec<DeviceInfo> = gpus.into_iter().chain(neuron).collect();
    (!all.is_empty()).then_some((name, all))
}

fn to_chrono(t: &aws_smithy_types::DateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// Loads an SDK configuration with the configured static keys (or the default chain) and checks
/// that credentials resolve, so that a caller without any fails before its first request. The
/// error is a description of what was tried; the chain's errors name sources (profile, IMDS,
/// environment), never secret values. Shared by the price and the act clients.
pub(crate) async fn load_with_credentials(
    mut loader: aws_config::ConfigLoader,
    static_credentials: Option<&crate::config::StaticCredentials>,
) -> Result<SdkConfig, String> {
    if let Some(c) = static_credentials {
        loader = loader.credentials_provider(Credentials::new(
            c.access_key_id.clone(),
            c.secret_access_key.clone(),
            None,
            None,
            "gpucap-static",
        ));
    }
    let sdk = loader.load().await;
    let provider = sdk
        .credentials_provider()
        .ok_or_else(|| "no credential provider configured".to_string())?;
    provider
        .provide_credentials()
        .await
        .map_err(|e| crate::error::in_words(&e))?;
    Ok(sdk)
}
