//! Builds the EC2 and Auto Scaling clients the act half uses, once per process: credentials
//! from the default chain (or explicit keys for emulators), an optional endpoint override,
//! **SDK retries off** and bounded timeouts. Retries are off because the SDK would otherwise
//! repeat timeouts, IO errors and 5xx on every operation, including `PurchaseCapacityBlock`,
//! which has no client token and cannot be undone.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};

use crate::client::load_with_credentials;
use crate::config::{ENDPOINT_ENV, StaticCredentials};

/// Where and how [`AwsCapacity`] connects.
#[derive(Debug, Clone)]
pub struct AwsCapacityConfig {
    /// The home region: where credentials are resolved; every trait call names its own region.
    pub region: String,
    /// Endpoint for EC2 and Auto Scaling instead of AWS's (a local peer, a VPC endpoint);
    /// also `GPUCAP_AWS_ENDPOINT_URL` through [`AwsCapacityConfig::with_env_overrides`].
    pub endpoint_url: Option<String>,
    /// Explicit keys instead of the default chain (tests against emulators). Never printed.
    pub static_credentials: Option<StaticCredentials>,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long one call may take in all. A call cut off by it is an `Unknown` outcome.
    pub operation_timeout: Duration,
}

impl AwsCapacityConfig {
    pub fn new(region: impl Into<String>) -> Self {
        AwsCapacityConfig {
            region: region.into(),
            endpoint_url: None,
            static_credentials: None,
            connect_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(120),
        }
    }

    /// Applies `GPUCAP_AWS_ENDPOINT_URL` when set and not empty (the same variable the
    /// pricing half reads).
    pub fn with_env_overrides(mut self) -> Self {
        if let Some(url) = std::env::var(ENDPOINT_ENV).ok().filter(|s| !s.is_empty()) {
            self.endpoint_url = Some(url);
        }
        self
    }
}

/// The AWS implementation of `CapacityBlocks`, `Reservations`, `Pools` and `Describe`.
#[derive(Clone)]
pub struct AwsCapacity {
    config: AwsCapacityConfig,
    sdk: SdkConfig,
}

impl std::fmt::Debug for AwsCapacity {
    // By hand, so that nothing credential-shaped can ever reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCapacity")
            .field("region", &self.config.region)
            .field("endpoint_url", &self.config.endpoint_url)
            .field(
                "static_credentials",
                &self.config.static_credentials.is_some(),
            )
            .finish_non_exhaustive()
    }
}

impl AwsCapacity {
    /// Connects to `region` with credentials from the default chain, sending to
    /// `endpoint_url` instead of AWS when given.
    pub async fn connect(
        region: impl Into<String>,
        endpoint_url: Option<String>,
    ) -> ActResult<Self> {
        Self::with_config(AwsCapacityConfig {
            endpoint_url,
            ..AwsCapacityConfig::new(region)
        })
        .await
    }

    /// Connects to `region`, the endpoint taken from `GPUCAP_AWS_ENDPOINT_URL` when set.
    pub async fn from_env(region: impl Into<String>) -> ActResult<Self> {
        Self::with_config(AwsCapacityConfig::new(region).with_env_overrides()).await
    }

    /// Connects as configured. Fails with [`ActErrorKind::Auth`] when no credentials can be
    /// resolved, before any request is made.
    pub async fn with_config(config: AwsCapacityConfig) -> ActResult<Self> {
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(config.region.clone()))
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(config.connect_timeout)
                    .operation_timeout(config.operation_timeout)
                    .build(),
            );
        let sdk = load_with_credentials(loader, config.static_credentials.as_ref())
            .await
            .map_err(|detail| ActError {
                api: "connect".into(),
                kind: ActErrorKind::Auth,
                code: None,
                message: format!("no AWS credentials found in the default chain: {detail}"),
                request_id: None,
            })?;
        Ok(AwsCapacity { config, sdk })
    }

    /// The home region.
    pub fn region(&self) -> &str {
        &self.config.region
    }

    pub(crate) fn ec2(&self, region: &str) -> aws_sdk_ec2::Client {
        let mut b = aws_sdk_ec2::config::Builder::from(&self.sdk)
            .region(Region::new(region.to_string()))
            // Said again per client: a purchase must never be retried by the SDK.
            .retry_config(RetryConfig::disabled());
        if let Some(url) = &self.config.endpoint_url {
            b = b.endpoint_url(url);
        }
        aws_sdk_ec2::Client::from_conf(b.build())
    }

    pub(crate) fn autoscaling(&self, region: &str) -> aws_sdk_autoscaling::Client {
        let mut b = aws_sdk_autoscaling::config::Builder::from(&self.sdk)
            .region(Region::new(region.to_string()))
            .retry_config(RetryConfig::disabled());
        if let Some(url) = &self.config.endpoint_url {
            b = b.endpoint_url(url);
        }
        aws_sdk_autoscaling::Client::from_conf(b.build())
    }
}
