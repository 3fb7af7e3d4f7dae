//! What gpucap knows about capacity that already exists, and what it has done itself.
//!
//! - [`terraform`] reads reservations, capacity blocks and commitments bought earlier from a
//!   Terraform state, so that a plan counts them instead of buying again.
//! - The rest is `gpucap apply`'s own record: the [`State`] of what gpucap created
//!   (`state.json`, in [`managed`]), the write-ahead [`journal`] of every cloud call
//!   (`journal.jsonl`), the [`audit`] log (`audit.jsonl`) and the [`lock`] that keeps two runs from buying the same thing. Credentials never reach the journal or the audit log ([`redact`]).

pub mod audit;
pub mod error;
mod fsio;
pub mod journal;
pub mod lock;
pub mod managed;
pub mod redact;
pub mod terraform;

pub use audit::{AuditLog, AuditRecord};
pub use error::StateError;
pub use journal::{Journal, JournalRead, JournalRecord, Step};
pub use lock::{LockGuard, LockInfo, LockOptions};
pub use managed::{ManagedResource, ResourceStatus, StalePlan, State, StateRef};
