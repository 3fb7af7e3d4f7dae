//! The adapter to gpucap's provider interface ([`gpucap_provider::Provider`]): credentials
//! checked once, one region per `fetch`, refused rows sent to the reporter as issues, and
//! [`AwsError`]s mapped to the shared error classes. Kept thin: the work is in `fetch`.

use chrono::Utc;
use gpucap_provider::{
    Action, BoxFuture, Cloud, ErrorKind, Issue, Offer, Problem, Provider, ProviderError, Query,
    Readiness, Reporter,
};
use tokio::sync::OnceCell;

use crate::anomaly::{Anomaly, AnomalyReason};
use crate::client::AwsClients;
use crate::config::AwsConfig;
use crate::error::AwsError;
use crate::fetch::{self, AwsPrices};
use crate::normalise::Provenance;

/// Regions priced when the query names no AWS region: where AWS sells most GPU capacity.
pub const DEFAULT_REGIONS: &[&str] = &["us-east-1", "us-east-2", "us-west-2"];

/// The AWS price source.
#[derive(Debug)]
pub struct AwsProvider {
    config: AwsConfig,
    clients: OnceCell<AwsClients>,
}

/// The provider with settings from the environment (`GPUCAP_AWS_ENDPOINT_URL`,
/// `GPUCAP_AWS_PRICING_ENDPOINT_URL`, the default credential chain).
pub fn provider() -> AwsProvider {
    AwsProvider::new(AwsConfig::default().with_env_overrides())
}

impl AwsProvider {
    pub fn new(config: AwsConfig) -> Self {
        AwsProvider {
            config,
            clients: OnceCell::new(),
        }
    }

    /// Connects once; a failure is not remembered, so a later call tries again.
    async fn clients(&self) -> Result<&AwsClients, AwsError> {
        self.clients
            .get_or_try_init(|| AwsClients::connect(self.config.clone()))
            .await
    }

    async fn fetch_region(
        &self,
        query: &Query,
        region: &str,
        reporter: &dyn Reporter,
    ) -> Result<Vec<Offer>, ProviderError> {
        let clients = self
            .clients()
            .await
            .map_err(|e| to_provider_error(e, Some(region)))?;
        let mut out = AwsPrices::default();
        let at = Provenance {
            fetched_at: Utc::now(),
        };
        fetch::fetch_region(clients, region, query, &at, &mut out)
            .await
            .map_err(|e| to_provider_error(e, Some(region)))?;
        for anomaly in &out.anomalies {
            reporter.issue(to_issue(anomaly));
        }
        // A price call that failed inside a healthy region loses only that call's offers.
        for failure in &out.failures {
            reporter.issue(Issue {
                cloud: Cloud::Aws,
                region: Some(failure.region.clone()),
                subject: failure.what.clone(),
                problem: Problem::Other {
                    message: failure.error.to_string(),
                },
                action: Action::Skipped,
            });
        }
        reporter.progress(Cloud::Aws, region, "priced");
        Ok(out.offers)
    }
}

impl Provider for AwsProvider {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn readiness(&self) -> BoxFuture<'_, Readiness> {
        Box::pin(async {
            match self.clients().await {
                Ok(_) => Readiness::Ready,
                Err(e) => Readiness::Skip {
                    reason: e.to_string(),
                    hint: e.hint().unwrap_or("check the AWS settings").to_string(),
                },
            }
        })
    }

    fn regions(&self, query: &Query) -> Vec<String> {
        query.regions_for(Cloud::Aws, DEFAULT_REGIONS)
    }

    fn max_concurrency(&self) -> usize {
        // EC2's Describe* buckets are per account and region, Pricing's per account: two
        // regions at once keeps Price List calls (one per instance type) under its rate.
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

/// Maps a classified AWS error to the shared classes.
pub fn to_provider_error(e: AwsError, region: Option<&str>) -> ProviderError {
    let kind = match &e {
        AwsError::MissingCredentials { .. } => ErrorKind::Auth,
        AwsError::Throttled { .. } => ErrorKind::Throttled,
        AwsError::Api { code, .. } => match code.as_str() {
            c if c.starts_with("Unauthorized")
                || c.starts_with("AuthFailure")
                || c.starts_with("AccessDenied") =>
            {
                ErrorKind::Auth
            }
            c if c.contains("NotFound") || c == "NoSuchResourceException" => ErrorKind::NotFound,
            // Service Quotas' `ErrorReason` codes, for a quota it could not read from EC2.
            "DEPENDENCY_ACCESS_DENIED_ERROR" => ErrorKind::Auth,
            "DEPENDENCY_THROTTLING_ERROR" => ErrorKind::Throttled,
            "DEPENDENCY_SERVICE_ERROR" | "ServiceException" => ErrorKind::Unavailable,
            "InternalError" | "InternalErrorException" | "ServiceUnavailable" | "Unavailable" => {
                ErrorKind::Unavailable
            }
            _ => ErrorKind::Other,
        },
        AwsError::Transport { .. } => ErrorKind::Unavailable,
        AwsError::Malformed { .. } => ErrorKind::Malformed,
        AwsError::Config(_) => ErrorKind::Other,
    };
    let err = ProviderError::new(Cloud::Aws, kind, e.to_string());
    match region {
        Some(r) => err.in_region(r),
        None => err,
    }
}

fn to_issue(a: &Anomaly) -> Issue {
    let problem = match &a.reason {
        AnomalyReason::BadPrice { value } => match value
            .split_whitespace()
            .next()
            .unwrap_or("")
            .parse::<rust_decimal::Decimal>()
        {
            Ok(d) if d.is_zero() => Problem::ZeroPrice,
            Ok(d) => Problem::PlaceholderPrice { price: d },
            Err(_) => Problem::Other {
                message: a.reason.to_string(),
            },
        },
        AnomalyReason::UnknownUnit { unit } => Problem::UnknownUnit { unit: unit.clone() },
        AnomalyReason::GpuCountMismatch {
            listed,
            instance_type_has,
        } => Problem::GpuCountMismatch {
            listed: listed.to_string(),
            expected: *instance_type_has,
        },
        AnomalyReason::UnknownAccelerator { name } => {
            Problem::UnknownAccelerator { name: name.clone() }
        }
        AnomalyReason::Malformed { .. } | AnomalyReason::UnclassifiedTerm { .. } => {
            Problem::Other {
                message: a.reason.to_string(),
            }
        }
    };
    let subject = match &a.instance_type {
        Some(t) => format!("{} ({})", t, a.operation),
        None => a.operation.to_string(),
    };
    Issue {
        cloud: Cloud::Aws,
        region: Some(a.region.clone()),
        subject,
        problem,
        action: Action::Skipped,
    }
}
