//! What a gpucap provider is, independent of the CLI: the accelerator catalog that every
//! cloud's names are normalised to, the offer model, the [`Provider`] interface with its
//! classified errors and shared retry policy, and the offline price sources every provider
//! falls back to (the on-disk quote cache, the built-in snapshot, SkyPilot catalog imports).
//! Beside prices, the act half's [`capacity`] traits and the [`objects`] store that shared
//! `gpucap apply` state lives in.
//!
//! Provider crates (`gpucap-aws`, `gpucap-gcp`, `gpucap-azure`) depend on this crate, never on
//! the `gpucap` binary, so that the heavy cloud SDKs stay out of the engine's build. The
//! contract they implement is documented in [`provider`].

pub mod accelerator;

pub use accelerator::{Accelerator, UnknownAccelerator};
pub mod cloud;

pub use cloud::Cloud;
pub mod offer;

pub use offer::{Offer, PurchaseKind, Source, SourceKind};
pub mod cache;
pub mod capacity;
pub mod catalog_snapshot;
pub mod error;
pub mod instance_types;
pub mod names;
pub mod objects;
pub mod provider;
pub mod purchase_rules;
pub mod quotas;
pub mod regions;
pub mod retry;
pub mod skypilot;
pub mod snapshot;
pub mod validate;

pub use error::{ErrorKind, ProviderError};
pub use objects::{Object, ObjectError, ObjectFailure, ObjectStore, PutCondition};
pub use provider::{
    Action, BoxFuture, Clock, CollectingReporter, Issue, Problem, Provider, Query, Readiness,
    Reporter, SystemClock,
};
pub use retry::{RetryPolicy, Throttling};
