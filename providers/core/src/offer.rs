//! The one offer model every cloud's price list is normalised to: something a cloud sells that
//! adds GPUs to a pool, with its price, term, limits, and where and when the price was learnt.
//!
//! Money is `rust_decimal::Decimal` end to end (the clouds send prices as decimal strings);
//! conversion to `f64` happens only when an offer is written into an optimisation problem.

use std::fmt;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::{Accelerator, Cloud};

/// How capacity is bought.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurchaseKind {
    /// Pay per hour, no commitment, may be unavailable.
    OnDemand,
    /// Interruptible spare capacity at a variable price.
    Spot,
    /// A pre-paid fixed window (AWS Capacity Blocks for ML, GCP calendar-mode future
    /// reservations / DWS). Irreversible.
    CapacityBlock,
    /// A capacity reservation billed per hour while it exists (AWS ODCR, GCP reservation, Azure
    /// capacity reservation), or a reserved-instance term (Azure 1y/3y reservations).
    Reservation,
    /// A spend or resource commitment (savings plan, RI, CUD). Irreversible.
    Commitment,
}

impl PurchaseKind {
    pub const ALL: [PurchaseKind; 5] = [
        PurchaseKind::OnDemand,
        PurchaseKind::Spot,
        PurchaseKind::CapacityBlock,
        PurchaseKind::Reservation,
        PurchaseKind::Commitment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PurchaseKind::OnDemand => "on-demand",
            PurchaseKind::Spot => "spot",
            PurchaseKind::CapacityBlock => "capacity-block",
            PurchaseKind::Reservation => "reservation",
            PurchaseKind::Commitment => "commitment",
        }
    }

    /// Whether the money is spent once bought, whatever happens (gates treat these apart).
    pub fn is_irreversible(self) -> bool {
        matches!(self, PurchaseKind::CapacityBlock | PurchaseKind::Commitment)
    }
}

impl fmt::Display for PurchaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PurchaseKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PurchaseKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s || k.as_str().replace('-', "_") == s)
            .ok_or_else(|| {
                format!("unknown purchase kind `{s}`; expected on-demand, spot, capacity-block, reservation or commitment")
            })
    }
}

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// Fetched from the cloud's API in this run.
    Live,
    /// Read from the on-disk quote cache (fetched live earlier).
    Cache,
    /// The dated snapshot compiled into gpucap.
    Snapshot,
    /// A file the user imported (e.g. a SkyPilot catalog CSV).
    Import,
    /// The buyer's own contract (`gpucap.toml` `[prices]`): a negotiated discount applied to a
    /// list price, or a private offer.
    Contract,
}

/// Provenance of one price: its kind, a human-readable origin (API and request, snapshot
/// entry's source URL, imported file), and when it was true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub kind: SourceKind,
    pub origin: String,
    pub fetched_at: DateTime<Utc>,
}

/// One thing a cloud sells that adds GPUs to a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    pub cloud: Cloud,
    pub region: String,
    /// Availability zone, where the price or the capacity is zonal.
    pub zone: Option<String>,
    pub instance_type: String,
    pub accelerator: Accelerator,
    pub gpus_per_instance: u32,
    /// Memory per GPU, GB.
    pub gpu_memory_gb: Option<u32>,
    pub kind: PurchaseKind,
    /// USD per instance-hour (for terms: per hour of the whole term, used or not).
    pub price_per_instance_hour: Decimal,
    /// USD paid once per instance when bought.
    pub upfront: Decimal,
    /// Length of a term purchase in hours; `None` for on-demand and spot.
    pub term_hours: Option<u32>,
    /// Earliest time the capacity can start, where the API says (capacity block offerings).
    pub earliest_start: Option<DateTime<Utc>>,
    /// Notice needed before the capacity starts, hours.
    pub lead_time_hours: Option<u32>,
    /// Most instances obtainable at once, where known.
    pub max_instances: Option<u32>,
    /// The cloud's id for this offering (capacity block offering id, SKU, meter id).
    pub offering_id: Option<String>,
    pub source: Source,
}

impl Offer {
    /// USD per GPU-hour, counting the upfront fee spread over the term.
    pub fn effective_price_per_gpu_hour(&self) -> Decimal {
        let gpus = Decimal::from(self.gpus_per_instance.max(1));
        let upfront_per_hour = match self.term_hours {
            Some(h) if h > 0 => self.upfront / Decimal::from(h),
            _ => Decimal::ZERO,
        };
        (self.price_per_instance_hour + upfront_per_hour) / gpus
    }
}
