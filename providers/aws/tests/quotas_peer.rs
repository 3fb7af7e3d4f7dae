//! `AwsQuotas` through the real Service Quotas SDK against the local EC2 peer
//! (`tests/peers/ec2_capacity_peer.py`), which speaks Service Quotas' JSON 1.1 wire format
//! (moto 5.2.5 knows only `vpc` quotas and cannot be told an `ec2` one) and records each call.
//!
//! Nothing is skipped: without `python3` the peer fails to start and says so.

#[path = "../../../tests/support/ec2_peer.rs"]
mod ec2_peer;
// `ec2_peer` names the venv helper (for moto, which these tests do not start).
#[allow(clippy::incompatible_msrv)]
#[path = "../../../tests/support/python.rs"]
mod python;

use ec2_peer::Ec2Peer;
use gpucap_aws::{AwsConfig, AwsQuotas, RetryPolicy, StaticCredentials};
use gpucap_provider::ErrorKind;
use gpucap_provider::quotas::{QuotaId, QuotaSource};
use serde_json::json;

fn quotas(peer: &Ec2Peer) -> AwsQuotas {
    AwsQuotas::new(AwsConfig {
        endpoint_url: Some(peer.url()),
        static_credentials: Some(StaticCredentials {
            access_key_id: "AKIDPEERTEST".into(),
            secret_access_key: "peer-secret-not-real".into(),
        }),
        retry: RetryPolicy::fast(3),
        ..AwsConfig::default()
    })
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
fn applied_values_are_read_per_region_then_the_default_then_none() {
    let peer = Ec2Peer::start(&json!({
        "service_quotas": {"us-east-1": {"L-417A185B": 384.0}, "us-west-2": {"L-417A185B": 96.0}},
        "service_quota_defaults": {"L-7212CCBC": 0.0}
    }));
    let q = quotas(&peer);
    let rt = runtime();
    let read = |s: &str| rt.block_on(q.quota(&id(s)));
    assert_eq!(read("aws/us-east-1/L-417A185B").unwrap(), Some(384));
    assert_eq!(read("aws/us-west-2/L-417A185B").unwrap(), Some(96));
    // No applied value: AWS's default, from GetAWSDefaultServiceQuota.
    assert_eq!(read("aws/us-east-1/L-7212CCBC").unwrap(), Some(0));
    // Neither: not known.
    assert_eq!(read("aws/us-east-1/L-DB2E81BA").unwrap(), None);
    // Asked again: answered from what was read.
    assert_eq!(read("aws/us-east-1/L-417A185B").unwrap(), Some(384));

    let calls = peer.record()["service_quota_calls"].clone();
    let calls: Vec<(String, String, String)> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["op"].as_str().unwrap().to_string(),
                c["region"].as_str().unwrap().to_string(),
                c["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let c = |op: &str, r: &str, code: &str| (op.to_string(), r.to_string(), code.to_string());
    assert_eq!(
        calls,
        vec![
            c("GetServiceQuota", "us-east-1", "L-417A185B"),
            c("GetServiceQuota", "us-west-2", "L-417A185B"),
            c("GetServiceQuota", "us-east-1", "L-7212CCBC"),
            c("GetAWSDefaultServiceQuota", "us-east-1", "L-7212CCBC"),
            c("GetServiceQuota", "us-east-1", "L-DB2E81BA"),
            c("GetAWSDefaultServiceQuota", "us-east-1", "L-DB2E81BA"),
        ]
    );
}

#[test]
fn access_denied_is_an_auth_error_and_throttling_is_retried() {
    let peer = Ec2Peer::start(&json!({"service_quotas": {"us-east-1": {"L-417A185B": 384.0}}}));
    peer.set_faults(&json!({"rules": [
        {"fault": "throttle", "action": "GetServiceQuota", "calls": [1, 2]},
        {"fault": "status", "action": "GetServiceQuota", "calls": [4], "status": 400,
         "code": "AccessDeniedException", "message": "User is not authorized to perform servicequotas:GetServiceQuota"}
    ]}));
    let q = quotas(&peer);
    let rt = runtime();
    assert_eq!(
        rt.block_on(q.quota(&id("aws/us-east-1/L-417A185B")))
            .unwrap(),
        Some(384),
        "two throttled answers, then the value"
    );
    let err = rt
        .block_on(q.quota(&id("aws/us-east-1/L-7212CCBC")))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert!(err.message.contains("AccessDeniedException"), "{err}");
    assert!(!err.to_string().contains("peer-secret"), "{err}");
}
