//! What a gpucap provider is, independent of the CLI: the accelerator catalog that every
//! cloud's names are normalised to, and (as providers land) offers, quotes and their errors.
//!
//! Provider crates (`gpucap-aws`, `gpucap-gcp`, `gpucap-azure`) depend on this crate, never on
//! the `gpucap` binary, so that the heavy cloud SDKs stay out of the engine's build.

pub mod accelerator;

pub use accelerator::{Accelerator, UnknownAccelerator};
pub mod cloud;

pub use cloud::Cloud;
pub mod offer;

pub use offer::{Offer, PurchaseKind, Source, SourceKind};
