//! The act half of the Azure provider: [`AzureCapacity`] creates, resizes and deletes
//! capacity reservations (`Microsoft.Compute/capacityReservationGroups/capacityReservations`)
//! and makes and sizes pools (flexible `Microsoft.Compute/virtualMachineScaleSets`, their VMs
//! counted), through ARM REST api-version 2024-07-01 with reqwest (no Azure SDK), and finds
//! them again by name and by tag, implementing the `gpucap_provider::capacity` traits.
//!
//! Rules every method keeps, whatever the caller asks:
//!
//! - **Names are the idempotency.** ARM takes no client token; a PUT is create-or-update by
//!   the name in the URL. Every reservation gpucap makes is named from the plan digest and the
//!   action ([`names::reservation_name`]), every scale set from its pool
//!   ([`names::scale_set_name`]), so repeating the call cannot make a second one. Before a
//!   PUT the name is looked up (GET): what an earlier, cut-off attempt made is found and
//!   waited for, not asked for again.
//! - **Long-running operations are followed to the end**: a PUT, PATCH or DELETE is polled
//!   through `Azure-AsyncOperation` (else `Location`) until `Succeeded` or `Failed`,
//!   waiting what `Retry-After` asks. A poll cut off after the request was accepted is an
//!   `Unknown` outcome (the next attempt finds the resource by name).
//! - **A pool runs what was asked, or says it does not**: after a scale set's capacity is set,
//!   its VMs are listed until the asked number runs; fewer is a capacity error naming how
//!   many run (`pools`).
//! - everything created carries gpucap's tags ([`names::tags`]); only reservations and scale
//!   sets tagged `managed-by=gpucap` are ever resized or deleted, and a reservation with VMs
//!   associated is never deleted;
//! - every failure is an [`ActError`] classified onto the shared taxonomy ([`arm::classify`]);
//!   no token or secret is ever in an error, a log line or a `Debug` output.
//!
//! What Azure has no concept for here: capacity blocks (Azure sells none), which answer with
//! a clear error, and `gpucap apply` lists them as needing a person.
//!
//! One concept per module: `auth` (Entra ID tokens from the environment), `arm` (requests,
//! errors, long-running operations), `names` (names, tags, resources), `reservations`,
//! `pools` (scale sets).

mod arm;
mod auth;
pub mod names;
mod pools;
mod reservations;

use std::time::Duration;

use gpucap_provider::capacity::{ActError, ActErrorKind, ActResult};

pub use auth::Credential;

/// Azure Resource Manager's public endpoint.
pub const ARM_ENDPOINT: &str = "https://management.azure.com";
/// Entra ID's public authority.
pub const AUTHORITY: &str = "https://login.microsoftonline.com";
/// The Compute API version whose formats gpucap speaks (docs/azure-capacity-api.md).
pub const API_VERSION: &str = "2024-07-01";
/// Sends ARM (and Entra ID token) requests here instead; for tests and private endpoints.
pub const ENDPOINT_ENV: &str = "GPUCAP_AZURE_ENDPOINT_URL";
/// The resource group gpucap's capacity reservation groups and scale sets live in.
pub const RESOURCE_GROUP_ENV: &str = "GPUCAP_AZURE_RESOURCE_GROUP";
pub const SUBSCRIPTION_ENV: &str = "AZURE_SUBSCRIPTION_ID";
/// Test hook: the pause between polls, in milliseconds, when ARM gives no `Retry-After`.
pub const POLL_MS_ENV: &str = "GPUCAP_AZURE_POLL_MS";
/// The SSH public key a pool's Linux VMs accept (the key itself, or the path of a `.pub`
/// file): Azure makes no Linux VM without a key or a password, and gpucap never sets one.
pub const SSH_PUBLIC_KEY_ENV: &str = "GPUCAP_AZURE_SSH_PUBLIC_KEY";
/// The admin user of a pool's VMs (default `gpucap`).
pub const ADMIN_USERNAME_ENV: &str = "GPUCAP_AZURE_ADMIN_USERNAME";

/// Where and how [`AzureCapacity`] connects.
#[derive(Clone)]
pub struct AzureCapacityConfig {
    pub subscription_id: String,
    pub resource_group: String,
    /// ARM's base URL (no trailing slash).
    pub endpoint: String,
    /// Entra ID's base URL, for client-credential and federated tokens.
    pub authority: String,
    pub credential: Credential,
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long one HTTP request may take. A mutating one cut off by it is `Unknown`.
    pub request_timeout: Duration,
    /// How long a long-running operation is followed before it is reported `Unknown`.
    pub operation_timeout: Duration,
    /// The pause between polls when ARM gives no `Retry-After`.
    pub poll_interval: Duration,
    /// The longest `Retry-After` honoured (a larger one is cut to this).
    pub max_retry_after: Duration,
    /// The admin user and SSH public key of the VMs of the scale sets gpucap makes.
    pub admin_username: String,
    pub ssh_public_key: Option<String>,
}

impl std::fmt::Debug for AzureCapacityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureCapacityConfig")
            .field("subscription_id", &self.subscription_id)
            .field("resource_group", &self.resource_group)
            .field("endpoint", &self.endpoint)
            .field("authority", &self.authority)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

impl AzureCapacityConfig {
    pub fn new(
        subscription_id: impl Into<String>,
        resource_group: impl Into<String>,
        credential: Credential,
    ) -> Self {
        AzureCapacityConfig {
            subscription_id: subscription_id.into(),
            resource_group: resource_group.into(),
            endpoint: ARM_ENDPOINT.to_string(),
            authority: AUTHORITY.to_string(),
            credential,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            operation_timeout: Duration::from_secs(30 * 60),
            poll_interval: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
            admin_username: "gpucap".to_string(),
            ssh_public_key: None,
        }
    }

    /// Sends ARM and token requests to `url` (a local peer).
    pub fn with_endpoint(mut self, url: impl Into<String>) -> Self {
        let url = url.into().trim_end_matches('/').to_string();
        self.authority = url.clone();
        self.endpoint = url;
        self
    }

    /// Everything from the environment: `AZURE_SUBSCRIPTION_ID`, the resource group
    /// (`resource_group`, else `GPUCAP_AZURE_RESOURCE_GROUP`), the credential
    /// ([`Credential::from_env`]), `GPUCAP_AZURE_ENDPOINT_URL`, `AZURE_AUTHORITY_HOST`, and
    /// for pools `GPUCAP_AZURE_SSH_PUBLIC_KEY` and `GPUCAP_AZURE_ADMIN_USERNAME`.
    pub fn from_env(resource_group: Option<&str>) -> ActResult<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let Some(subscription) = var(SUBSCRIPTION_ENV) else {
            return Err(setup(format!(
                "{SUBSCRIPTION_ENV} is not set: gpucap needs the subscription to act in"
            )));
        };
        let Some(group) = resource_group
            .map(str::to_string)
            .filter(|g| !g.trim().is_empty())
            .or_else(|| var(RESOURCE_GROUP_ENV))
        else {
            return Err(setup(format!(
                "{RESOURCE_GROUP_ENV} is not set: gpucap needs the resource group its capacity reservation groups live in"
            )));
        };
        let mut config = Self::subscription_from_env(&subscription)?;
        config.resource_group = group;
        if let Some(user) = var(ADMIN_USERNAME_ENV) {
            config.admin_username = user.trim().to_string();
        }
        if let Some(key) = var(SSH_PUBLIC_KEY_ENV) {
            let key = key.trim().to_string();
            config.ssh_public_key = Some(if key.starts_with("ssh-") || key.starts_with("ecdsa-") {
                key
            } else {
                std::fs::read_to_string(&key)
                    .map(|k| k.trim().to_string())
                    .map_err(|e| setup(format!("{SSH_PUBLIC_KEY_ENV}: cannot read {key}: {e}")))?
            });
        }
        Ok(config)
    }

    /// For reads of the whole subscription (quotas), which name no resource group:
    /// `AZURE_SUBSCRIPTION_ID`, the credential, `GPUCAP_AZURE_ENDPOINT_URL` and
    /// `AZURE_AUTHORITY_HOST`; the resource group is left empty.
    pub fn reads_from_env() -> ActResult<Self> {
        match std::env::var(SUBSCRIPTION_ENV) {
            Ok(s) if !s.trim().is_empty() => Self::subscription_from_env(&s),
            _ => Err(setup(format!(
                "{SUBSCRIPTION_ENV} is not set: gpucap needs the subscription to read"
            ))),
        }
    }

    /// The subscription's settings from the environment, without a resource group.
    fn subscription_from_env(subscription: &str) -> ActResult<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let credential = Credential::from_env()?;
        let mut config = AzureCapacityConfig::new(subscription, String::new(), credential);
        if let Some(authority) = var("AZURE_AUTHORITY_HOST") {
            config.authority = authority.trim_end_matches('/').to_string();
        }
        if let Some(url) = var(ENDPOINT_ENV) {
            config = config.with_endpoint(url);
        }
        // Test hook: a shorter pause between polls (the local peer answers at once).
        if let Some(ms) = var(POLL_MS_ENV).and_then(|v| v.parse::<u64>().ok()) {
            config.poll_interval = Duration::from_millis(ms);
        }
        Ok(config)
    }
}

fn setup(message: String) -> ActError {
    ActError {
        api: "connect".into(),
        kind: ActErrorKind::Auth,
        code: None,
        message,
        request_id: None,
    }
}

/// The Azure implementation of `CapacityBlocks`, `Reservations`, `Pools` and `Describe`.
#[derive(Clone)]
pub struct AzureCapacity {
    config: AzureCapacityConfig,
    http: reqwest::Client,
    tokens: std::sync::Arc<auth::TokenCache>,
}

impl std::fmt::Debug for AzureCapacity {
    // By hand, so that nothing credential-shaped can ever reach a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureCapacity")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AzureCapacity {
    /// A provider as configured. Makes no request: a missing or refused credential shows on
    /// the first call, as an [`ActErrorKind::Auth`] error.
    pub fn new(config: AzureCapacityConfig) -> ActResult<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("gpucap/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            // One request per connection attempt is not needed, but a pooled socket the peer
            // (or a proxy) closed must not turn a read into an unknown outcome.
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| setup(format!("cannot build the HTTP client: {e}")))?;
        Ok(AzureCapacity {
            config,
            http,
            tokens: std::sync::Arc::new(auth::TokenCache::default()),
        })
    }

    /// A provider configured from the environment (see [`AzureCapacityConfig::from_env`]).
    pub fn from_env(resource_group: Option<&str>) -> ActResult<Self> {
        Self::new(AzureCapacityConfig::from_env(resource_group)?)
    }

    pub fn config(&self) -> &AzureCapacityConfig {
        &self.config
    }
}
