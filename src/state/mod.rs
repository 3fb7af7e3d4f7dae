//! What gpucap knows about capacity that already exists, and what it has done itself.
//!
//! - [`terraform`] reads reservations, capacity blocks and commitments bought earlier from a
//!   Terraform state, so that a plan counts them instead of buying again.
//! - The rest is `gpucap apply`'s own record, behind one [`StateBackend`]: the [`State`] of
//!   what gpucap created, the write-ahead [`journal`] of every cloud call, the [`audit`] log
//!   and the [`lock`] that keeps two runs from buying the same thing. Credentials never reach
//!   the journal or the audit log ([`redact`]). Two backends, picked by `[state] backend`
//!   ([`backend::open`]):
//!   - [`LocalBackend`]: a directory on one machine (`state.json`, `journal.jsonl`,
//!     `audit.jsonl`, `lock.json`);
//!   - [`ObjectBackend`]: objects in S3 ([`s3`]), shared by every machine that applies: the
//!     state replaced only by compare-and-swap on its ETag, one immutable object per journal
//!     and audit record, and a lock object taken with `If-None-Match`, renewed, taken over
//!     when its lease ran out, and released with `If-Match` ([`object_lock`]). The store is
//!     the narrow `gpucap_provider::objects::ObjectStore`, so the SDK stays in `gpucap-aws`
//!     and the tests run on an in-memory fake; [`object_io`] holds the retry rules.
//!
//! An executor uses it like this:
//!
//! ```no_run
//! # use gpucap_provider::capacity::Idempotency;
//! # async fn run(backend: &dyn gpucap::state::StateBackend, run: &str, id: &Idempotency)
//! #     -> Result<(), gpucap::state::StateError> {
//! use std::time::Duration;
//! use gpucap::state::{JournalRecord, LockOptions, State, Step, journal};
//!
//! let guard = backend.lock(&LockOptions::new("apply").timeout(Duration::from_secs(60))).await?;
//! let mut state = backend.read_state().await?.unwrap_or_default();
//! // Anything in flight from a crashed run is settled first.
//! let history = backend.read_journal().await?;
//! for pending in journal::unresolved(&history.records) {
//!     // ... find it by its `gpucap:intent` tag, then record what was found:
//!     backend.append_journal(&guard, pending.next(Step::Reconciled)).await?;
//! }
//! // Each call: intent, sent (both durable), the call, then its outcome.
//! let intent = backend
//!     .append_journal(&guard, JournalRecord::intent(run, id, "ec2:PurchaseCapacityBlock", serde_json::json!({})))
//!     .await?;
//! let sent = backend.append_journal(&guard, intent.next(Step::Sent)).await?;
//! // ... send; on success:
//! backend.append_journal(&guard, sent.done("cr-0123", Some("req-1"))).await?;
//! // state.upsert(resource);
//! backend.write_state(&guard, &mut state).await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

pub mod audit;
pub mod backend;
pub mod error;
mod fsio;
mod holder;
pub mod journal;
pub mod lock;
pub mod managed;
pub mod object_backend;
pub mod object_io;
pub mod object_lock;
pub mod redact;
pub mod s3;
pub mod terraform;

pub use audit::{AuditLog, AuditRecord};
pub use backend::{LocalBackend, StateBackend};
pub use error::StateError;
pub use journal::{Journal, JournalRead, JournalRecord, Step};
pub use lock::{LockGuard, LockInfo, LockOptions};
pub use managed::{AppliedPlan, ManagedResource, ResourceStatus, StalePlan, State, StateRef};
pub use object_backend::ObjectBackend;

/// A current-thread runtime for the state tests, which drive the async backend by hand.
#[cfg(test)]
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}
