//! What every provider test against the local Compute Engine peer sets up: the peer itself
//! (`tests/support/gce_peer.rs`), a runtime, and a client pointed at the peer that polls every
//! 10 ms.

#![allow(dead_code)]

#[path = "../../../../tests/support/gce_peer.rs"]
pub mod gce_peer;

use std::time::Duration;

use gce_peer::{GcePeer, PROJECT};
use gpucap_gcp::act::{GcpCapacity, GcpCapacityConfig};

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client of `peer` that gives up on an Operation or a pool's instances after
/// `operation_timeout`.
pub fn client(
    rt: &tokio::runtime::Runtime,
    peer: &GcePeer,
    operation_timeout: Duration,
) -> GcpCapacity {
    let mut config = GcpCapacityConfig::new(PROJECT).with_endpoint(peer.url());
    config.poll_interval = Duration::from_millis(10);
    config.operation_timeout = operation_timeout;
    rt.block_on(GcpCapacity::new(config)).unwrap()
}
