//! The act half of the AWS provider: [`AwsCapacity`] buys Capacity Blocks, creates, modifies
//! and cancels On-Demand Capacity Reservations, keeps launch-template + Auto Scaling pools,
//! and finds what exists by tag, implementing the `gpucap_provider::capacity` traits with
//! aws-sdk-ec2 and aws-sdk-autoscaling.
//!
//! Rules every method keeps, whatever the caller asks:
//!
//! - one trait call is at most one mutating HTTP request: the SDK clients are built with
//!   retries off, and nothing here retries (`gpucap apply` decides which calls are safe to
//!   repeat);
//! - everything created carries [`Idempotency::tags`](gpucap_provider::capacity::Idempotency::tags),
//!   and `CreateCapacityReservation` carries the caller's client token, so a lost answer can
//!   be reconciled by tag or repeated with the same token;
//! - only resources tagged `managed-by=gpucap` are ever changed;
//! - every failure is an [`ActError`](gpucap_provider::capacity::ActError) whose kind says
//!   whether AWS may have acted (`Unknown`) or certainly did not.
//!
//! One concept per module: `connect` (clients and credentials), `classify` (SDK errors to
//! act errors), `convert` (tags, times, resources), `blocks`, `reservations`, `pools`,
//! `describe`.

mod blocks;
pub mod classify;
mod connect;
mod convert;
mod describe;
mod pools;
mod reservations;

pub use connect::{AwsCapacity, AwsCapacityConfig};
