//! [`S3Objects`] through the real aws-sdk-s3 against moto's S3 server on 127.0.0.1: the same
//! object-store contract the in-memory fake keeps (`gpucap_provider::objects::contract`), so
//! the state tests that run on the fake hold on S3 too; and the failures that are not
//! conditions (a missing bucket, nobody listening) come out as the right variants.

#[path = "../../../tests/support/moto_s3.rs"]
mod moto_s3;
#[allow(clippy::incompatible_msrv)]
#[path = "../../../tests/support/python.rs"]
mod python;

use std::time::Duration;

use gpucap_aws::{S3Config, S3Objects, StaticCredentials};
use gpucap_provider::objects::{ObjectError, ObjectStore, PutCondition, contract};
use moto_s3::MotoS3;

fn config(bucket: &str, endpoint: String) -> S3Config {
    S3Config {
        region: Some("us-east-1".into()),
        endpoint_url: Some(endpoint),
        static_credentials: Some(StaticCredentials {
            access_key_id: moto_s3::ACCESS_KEY.into(),
            secret_access_key: moto_s3::SECRET_KEY.into(),
        }),
        operation_timeout: Duration::from_secs(20),
        ..S3Config::new(bucket)
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn s3_keeps_the_object_store_contract_on_moto() {
    let moto = MotoS3::start("gpucap-contract");
    let rt = rt();
    let store = rt
        .block_on(S3Objects::connect(config(&moto.bucket, moto.url())))
        .unwrap();
    assert_eq!(store.url("a/b.json"), "s3://gpucap-contract/a/b.json");
    rt.block_on(contract::check(&store, "gpucap/prod/"));
    // What the contract left, seen from outside the SDK.
    assert_eq!(
        moto.keys("gpucap/prod/l/"),
        ["gpucap/prod/l/a", "gpucap/prod/l/b", "gpucap/prod/l/c/d"]
    );
    // Listing pages through more keys than one page holds (1000).
    for i in 0..1005 {
        rt.block_on(store.put(&format!("many/{i:05}"), b"x".to_vec(), PutCondition::None))
            .unwrap();
    }
    let keys = rt.block_on(store.list("many/")).unwrap();
    assert_eq!(keys.len(), 1005);
    assert_eq!(keys.last().map(String::as_str), Some("many/01004"));
}

#[test]
fn failures_that_are_not_conditions_say_what_they_are() {
    let moto = MotoS3::start("gpucap-errors");
    let rt = rt();
    let store = S3Objects::new(config("no-such-bucket", moto.url()));
    let err = rt
        .block_on(store.put("k", b"x".to_vec(), PutCondition::IfNoneMatch))
        .unwrap_err();
    assert!(
        matches!(&err, ObjectError::Other(f) if f.code.as_deref() == Some("NoSuchBucket")),
        "{err:?}"
    );
    assert!(err.to_string().contains("bucket exist"), "{err}");
    // A get of a missing key is no object, but a missing bucket is an error.
    assert!(rt.block_on(store.get("k")).is_err());

    // Nobody listening: no usable answer, worth a retry.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut c = config("gpucap-errors", format!("http://127.0.0.1:{port}"));
    c.connect_timeout = Duration::from_secs(2);
    let dead = S3Objects::new(c);
    let err = rt.block_on(dead.get("k")).unwrap_err();
    assert!(matches!(err, ObjectError::Transient(_)), "{err:?}");
    assert!(err.is_retryable());

    // Nothing credential-shaped in what it prints about itself or its errors.
    let printed = format!("{store:?} {dead:?} {err}");
    assert!(!printed.contains(moto_s3::SECRET_KEY), "{printed}");
}
