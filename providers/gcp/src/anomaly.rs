//! Surprises in a GCP response (a zero price, an unknown unit, a SKU description that fits no
//! known pattern, a machine type whose GPUs contradict its SKU) that were reported instead of
//! silently used.

use std::fmt;

/// One SKU or resource the normaliser refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    /// A SKU id, a machine type, or a zone: whatever the row was.
    pub subject: String,
    /// Which API answered (`services.skus.list`, `machineTypes.aggregatedList`, …).
    pub operation: &'static str,
    pub reason: AnomalyReason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnomalyReason {
    /// A price that is zero, negative or has out-of-range nanos.
    BadPrice { value: String },
    /// A usage unit or currency gpucap cannot turn into USD per hour.
    UnknownUnit { unit: String },
    /// A field the offer needs is missing or unparsable.
    Malformed { detail: String },
    /// A machine type needs a component price no SKU gave (core, RAM or GPU).
    MissingComponent { detail: String },
}

impl fmt::Display for AnomalyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnomalyReason::BadPrice { value } => {
                write!(f, "price `{value}` is not a positive amount")
            }
            AnomalyReason::UnknownUnit { unit } => write!(f, "unknown unit or currency `{unit}`"),
            AnomalyReason::Malformed { detail } => write!(f, "malformed response: {detail}"),
            AnomalyReason::MissingComponent { detail } => write!(f, "no price for {detail}"),
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`: {}", self.operation, self.subject, self.reason)
    }
}
