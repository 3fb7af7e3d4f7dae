//! What the GCP provider prices and where it sends requests. The doc comments are the user
//! documentation of the `[providers.gcp]` settings.

use crate::retry::{self, RetryPolicy};

/// Environment variables that point the Cloud Billing / Compute Engine clients elsewhere.
pub const BILLING_ENDPOINT_ENV: &str = "GPUCAP_GCP_BILLING_ENDPOINT_URL";
pub const COMPUTE_ENDPOINT_ENV: &str = "GPUCAP_GCP_COMPUTE_ENDPOINT_URL";
/// Environment variable holding an API key for the Billing Catalog (instead of ADC).
pub const API_KEY_ENV: &str = "GPUCAP_GCP_API_KEY";
/// Project whose Compute Engine view lists machine and accelerator types.
pub const PROJECT_ENV: &str = "GOOGLE_CLOUD_PROJECT";

/// The Compute Engine service in the Billing Catalog.
pub const COMPUTE_SERVICE: &str = "services/6F81-5844-456A";

/// Settings of the GCP provider.
#[derive(Debug, Clone)]
pub struct GcpConfig {
    /// Project used for Compute Engine lists (machine and accelerator types per zone).
    pub project: Option<String>,
    /// Regions to price (`us-central1`, …); empty means every region the catalog lists.
    pub regions: Vec<String>,
    /// Billing Catalog endpoint instead of `https://cloudbilling.googleapis.com`.
    pub billing_endpoint: Option<String>,
    /// Compute Engine endpoint instead of `https://compute.googleapis.com`.
    pub compute_endpoint: Option<String>,
    pub credentials: CredentialsSource,
    pub retry: RetryPolicy,
}

/// Where credentials come from.
#[derive(Clone, Default)]
pub enum CredentialsSource {
    /// Application Default Credentials (gcloud login, a service-account key file, metadata).
    #[default]
    Adc,
    /// An API key: enough for the Billing Catalog, not for Compute Engine.
    ApiKey(String),
    /// No credentials, for emulators and replay servers.
    Anonymous,
}

impl std::fmt::Debug for CredentialsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialsSource::Adc => f.write_str("Adc"),
            CredentialsSource::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            CredentialsSource::Anonymous => f.write_str("Anonymous"),
        }
    }
}

impl Default for GcpConfig {
    fn default() -> Self {
        GcpConfig {
            project: None,
            regions: Vec::new(),
            billing_endpoint: None,
            compute_endpoint: None,
            credentials: CredentialsSource::Adc,
            retry: retry::DEFAULT_POLICY,
        }
    }
}

impl GcpConfig {
    /// Applies the endpoint, API key and project environment variables when set.
    pub fn with_env_overrides(mut self) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        if let Some(url) = var(BILLING_ENDPOINT_ENV) {
            self.billing_endpoint = Some(url);
        }
        if let Some(url) = var(COMPUTE_ENDPOINT_ENV) {
            self.compute_endpoint = Some(url);
        }
        if let Some(key) = var(API_KEY_ENV) {
            self.credentials = CredentialsSource::ApiKey(key);
        }
        if self.project.is_none() {
            self.project = var(PROJECT_ENV);
        }
        self
    }
}
