//! `GcpQuotas` through google-cloud-compute-v1's Regions client against the local Compute
//! Engine peer (`tests/peers/gce_peer.py`), which answers `regions.get` with the quotas a
//! test sets and records each call.

mod common;

use common::gce_peer::{GcePeer, PROJECT};
use gpucap_gcp::{CredentialsSource, GcpConfig, GcpQuotas, RetryPolicy};
use gpucap_provider::ErrorKind;
use gpucap_provider::quotas::{QuotaId, QuotaSource};
use serde_json::json;

fn quotas(peer: &GcePeer) -> GcpQuotas {
    GcpQuotas::new(GcpConfig {
        project: Some(PROJECT.into()),
        compute_endpoint: Some(peer.url()),
        credentials: CredentialsSource::Anonymous,
        retry: RetryPolicy::fast(3),
        ..GcpConfig::default()
    })
}

fn id(s: &str) -> QuotaId {
    QuotaId::parse(s).unwrap()
}

#[test]
fn one_regions_get_per_region_answers_every_quota_in_it() {
    let peer = GcePeer::start(&json!({"region_quotas": {
        "us-central1": {"NVIDIA_H100_GPUS": 16, "PREEMPTIBLE_NVIDIA_H100_GPUS": 8, "CPUS": 2400},
        "us-east4": {"NVIDIA_H100_GPUS": 0}
    }}));
    let q = quotas(&peer);
    let rt = common::runtime();
    let read = |s: &str| rt.block_on(q.quota(&id(s)));
    assert_eq!(read("gcp/us-central1/NVIDIA_H100_GPUS").unwrap(), Some(16));
    assert_eq!(
        read("gcp/us-central1/PREEMPTIBLE_NVIDIA_H100_GPUS").unwrap(),
        Some(8)
    );
    assert_eq!(read("gcp/us-central1/NVIDIA_B200_GPUS").unwrap(), None);
    assert_eq!(read("gcp/us-east4/NVIDIA_H100_GPUS").unwrap(), Some(0));
    assert_eq!(peer.calls("regions.get"), 2, "{}", peer.record());
}

#[test]
fn a_forbidden_read_is_an_auth_error_and_is_not_kept() {
    let peer = GcePeer::start(&json!({"region_quotas": {"us-central1": {"NVIDIA_H100_GPUS": 16}}}));
    peer.set_faults(&json!({"rules": [
        {"fault": "status", "op": "regions.get", "calls": [1], "status": 403, "reason": "forbidden",
         "message": "Required 'compute.regions.get' permission for 'projects/gpucap-test'"}
    ]}));
    let q = quotas(&peer);
    let rt = common::runtime();
    let err = rt
        .block_on(q.quota(&id("gcp/us-central1/NVIDIA_H100_GPUS")))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert_eq!(
        rt.block_on(q.quota(&id("gcp/us-central1/NVIDIA_H100_GPUS")))
            .unwrap(),
        Some(16),
        "the next ask reads again"
    );
}
