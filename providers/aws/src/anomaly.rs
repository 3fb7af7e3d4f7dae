//! Surprises in a response (a zero price, an unknown unit, a GPU count that contradicts the
//! instance type) that were left out of the offers and reported instead of silently used.

use std::fmt;

/// One price row or resource the normaliser refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    /// The region the row came from (`us-east-1`), or `global` for cross-region calls.
    pub region: String,
    /// The instance type it is about, when known.
    pub instance_type: Option<String>,
    /// Which API answered (`GetProducts`, `DescribeSpotPriceHistory`, …).
    pub operation: &'static str,
    pub reason: AnomalyReason,
}

/// What was wrong with a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnomalyReason {
    /// A price that is zero, negative or not a decimal number.
    BadPrice { value: String },
    /// A unit or currency gpucap does not know how to turn into USD per hour.
    UnknownUnit { unit: String },
    /// The price row says one GPU count, `DescribeInstanceTypes` another.
    GpuCountMismatch { listed: u32, instance_type_has: u32 },
    /// The accelerator name matches nothing in gpucap's catalog.
    UnknownAccelerator { name: String },
    /// A field the offer needs is missing or unparsable.
    Malformed { detail: String },
    /// A reserved term whose attributes do not say its length or purchase option.
    UnclassifiedTerm { detail: String },
}

impl fmt::Display for AnomalyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnomalyReason::BadPrice { value } => {
                write!(f, "price `{value}` is not a positive decimal")
            }
            AnomalyReason::UnknownUnit { unit } => write!(f, "unknown unit or currency `{unit}`"),
            AnomalyReason::GpuCountMismatch {
                listed,
                instance_type_has,
            } => write!(
                f,
                "price row lists {listed} GPUs but the instance type has {instance_type_has}"
            ),
            AnomalyReason::UnknownAccelerator { name } => write!(f, "unknown accelerator `{name}`"),
            AnomalyReason::Malformed { detail } => write!(f, "malformed response: {detail}"),
            AnomalyReason::UnclassifiedTerm { detail } => {
                write!(f, "unclassified reserved term: {detail}")
            }
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.operation, self.region)?;
        if let Some(t) = &self.instance_type {
            write!(f, " `{t}`")?;
        }
        write!(f, ": {}", self.reason)
    }
}
