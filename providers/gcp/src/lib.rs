//! gpucap's GCP provider: prices accelerator-optimised machines (A2, A3, G2) from the Cloud
//! Billing Catalog's component SKUs (GPU, vCPU, RAM; on-demand, spot, 1- and 3-year
//! commitments), placed in the zones where Compute Engine offers them, and normalises them to
//! [`gpucap_provider::Offer`]s.
//!
//! Pure reading lives in `sku`, `names`, `machines` and `normalise`; `client` is the only module
//! that talks to Google, and `fetch` runs a whole pricing pass that survives partial failure.
//! [`quotas`] reads the project's regional GPU quotas ([`GcpQuotas`]).

pub mod act;
pub mod anomaly;
pub mod client;
pub mod config;
pub mod error;
pub mod fetch;
pub mod machines;
pub mod names;
pub mod normalise;
pub mod provider;
pub mod quotas;
pub mod retry;
pub mod sku;

pub use anomaly::{Anomaly, AnomalyReason};
pub use client::GcpClients;
pub use config::{CredentialsSource, GcpConfig};
pub use error::GcpError;
pub use fetch::{Failure, GcpPrices, fetch, fetch_with};
pub use provider::{GcpProvider, provider};
pub use quotas::GcpQuotas;
pub use retry::RetryPolicy;
