//! gpucap's AWS provider: prices GPU capacity from the Price List Query API (on-demand and
//! reserved terms), EC2 spot price history, Capacity Blocks for ML and spot placement scores,
//! and normalises them to [`gpucap_provider::Offer`]s.
//!
//! Pure parsing and normalising live in their own modules (`price_list`, `spot`,
//! `capacity_blocks`, `instance_types`, `placement`, `normalise`); `client` is the only module
//! of the pricing half that talks to AWS, and `fetch` runs a whole pricing pass that survives
//! partial failure.
//!
//! The act half, [`act`], buys, reserves, scales and releases capacity ([`AwsCapacity`]);
//! [`quotas`] reads the account's EC2 instance quotas from Service Quotas ([`AwsQuotas`]);
//! [`objects`] keeps `gpucap apply`'s shared state in S3 ([`S3Objects`]).

pub mod act;
pub mod anomaly;
pub mod capacity_blocks;
pub mod client;
pub mod config;
pub mod error;
pub mod fetch;
pub mod instance_types;
mod money;
pub mod normalise;
pub mod objects;
pub mod placement;
pub mod price_list;
pub mod provider;
pub mod quotas;
pub mod retry;
pub mod spot;

pub use act::{AwsCapacity, AwsCapacityConfig};
pub use anomaly::{Anomaly, AnomalyReason};
pub use client::AwsClients;
pub use config::{AwsConfig, CapacityBlockQuery, StaticCredentials};
pub use error::AwsError;
pub use fetch::{AwsPrices, Failure, fetch, fetch_with};
pub use objects::{S3Config, S3Objects};
pub use placement::SpotPlacementScore;
pub use provider::{AwsProvider, provider};
pub use quotas::AwsQuotas;
pub use retry::RetryPolicy;
