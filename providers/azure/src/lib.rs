//! gpucap's Azure provider: GPU VM prices from the public, unauthenticated Azure Retail Prices
//! API (`https://prices.azure.com/api/retail/prices`) — pay-as-you-go, spot, savings plans
//! and 1-/3-year reservations — normalised to [`gpucap_provider::Offer`]s.
//!
//! The wire format and its classification rules are in `shared/reference/api-formats.md`, §5.
//! [`retail`] parses and classifies one page (pure); [`client`] does the HTTP (filter,
//! pagination, throttling).
//!
//! [`act`] is the other half: capacity reservations through Azure Resource Manager, for
//! `gpucap apply` and `gpucap release`; [`quotas`] reads the subscription's vCPU quotas through
//! the same ARM client ([`AzureQuotas`]).

pub mod act;
pub mod client;
pub mod quotas;
pub mod retail;

pub use client::AzureProvider;
pub use quotas::AzureQuotas;

/// The provider as the `gpucap` binary uses it, configured from the environment:
/// `GPUCAP_AZURE_PRICES_URL` replaces the Retail Prices endpoint (for mirrors and tests).
pub fn provider() -> AzureProvider {
    match std::env::var("GPUCAP_AZURE_PRICES_URL") {
        Ok(url) if !url.is_empty() => AzureProvider::new().with_base_url(url),
        _ => AzureProvider::new(),
    }
}
