//! Capacity that already exists — reservations, capacity blocks and commitments bought earlier,
//! found in Terraform state or listed in `gpucap.toml` — so that a plan counts it at no extra
//! cost instead of buying it twice.

use chrono::{DateTime, Utc};
use gpucap_provider::{Cloud, PurchaseKind};
use serde::{Deserialize, Serialize};

/// One piece of capacity the user already has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExistingCapacity {
    /// The cloud's id (reservation id, block id, commitment name) or the Terraform address.
    pub id: String,
    /// Where gpucap learnt of it: `config`, `terraform-state:<file>`, `state`.
    pub source: String,
    /// `reservation`, `capacity-block` or `commitment`.
    pub kind: PurchaseKind,
    pub cloud: Cloud,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub instances: u32,
    /// When it starts serving (`None`: already active).
    pub start: Option<DateTime<Utc>>,
    /// When it ends (`None`: open-ended, e.g. a reservation without an end date).
    pub end: Option<DateTime<Utc>>,
}
