//! `AzureQuotas` against the local ARM peer (`tests/peers/azure_arm_peer.py`), which answers
//! Compute's usage list with the quotas a test sets, a page at a time, and records each call.

#[path = "../../../tests/support/azure_peer.rs"]
mod azure_peer;

use std::time::Duration;

use azure_peer::{AzurePeer, RESOURCE_GROUP, SUBSCRIPTION};
use gpucap_azure::AzureQuotas;
use gpucap_azure::act::{AzureCapacityConfig, Credential};
use gpucap_provider::ErrorKind;
use gpucap_provider::quotas::{QuotaId, QuotaSource};
use serde_json::json;

fn quotas(peer: &AzurePeer) -> AzureQuotas {
    let mut config = AzureCapacityConfig::new(
        SUBSCRIPTION,
        RESOURCE_GROUP,
        Credential::AccessToken("peer-static-token".into()),
    )
    .with_endpoint(peer.url());
    config.poll_interval = Duration::from_millis(10);
    AzureQuotas::new(config).unwrap()
}

fn id(s: &str) -> QuotaId {
    QuotaId::parse(s).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn every_page_of_a_region_is_read_once_and_names_match_ignoring_case() {
    let peer = AzurePeer::start(&json!({"page_size": 1, "usages": {"eastus": {
        "cores": 350, "standardNCADSH100v5Family": 80, "lowPriorityCores": 40
    }}}));
    let q = quotas(&peer);
    let rt = runtime();
    let read = |s: &str| rt.block_on(q.quota(&id(s)));
    // The last of three pages.
    assert_eq!(
        read("azure/eastus/standardNCadsH100v5Family").unwrap(),
        Some(80)
    );
    assert_eq!(read("azure/eastus/lowPriorityCores").unwrap(), Some(40));
    assert_eq!(
        read("azure/eastus/standardNDISRH100v5Family").unwrap(),
        None
    );
    assert_eq!(peer.calls("LIST usages"), 3, "{}", peer.record());
    // A location ARM does not know: nothing listed.
    assert_eq!(read("azure/nowhere/lowPriorityCores").unwrap(), None);
}

#[test]
fn a_refused_read_is_an_auth_error_without_the_token() {
    let peer = AzurePeer::start(&json!({"usages": {"eastus": {"lowPriorityCores": 40}}}));
    peer.set_faults(&json!({"rules": [
        {"fault": "status", "op": "LIST usages", "status": 403, "code": "AuthorizationFailed"}
    ]}));
    let q = quotas(&peer);
    let err = runtime()
        .block_on(q.quota(&id("azure/eastus/lowPriorityCores")))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert!(err.message.contains("AuthorizationFailed"), "{err}");
    assert!(!err.to_string().contains("peer-static-token"), "{err}");
}
