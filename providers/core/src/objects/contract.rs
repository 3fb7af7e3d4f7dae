//! What every [`ObjectStore`] must do, as one check that runs against the in-memory fake (unit
//! tests) and against the S3 implementation on moto's server (the AWS crate's tests), so the
//! fake the state tests rely on behaves as the real store does. It panics on the first
//! difference, naming it: it is test code.

use super::{ObjectError, ObjectStore, PutCondition};

/// Runs the contract on keys under `prefix` (which must hold nothing yet).
pub async fn check(store: &dyn ObjectStore, prefix: &str) {
    let k = |name: &str| format!("{prefix}{name}");
    let key = k("obj");

    assert_eq!(store.get(&key).await.expect("get a missing key"), None);

    // If-None-Match: created once.
    let e1 = store
        .put(&key, b"one".to_vec(), PutCondition::IfNoneMatch)
        .await
        .expect("IfNoneMatch on a new key");
    let got = store.get(&key).await.expect("get").expect("the object");
    assert_eq!(
        (got.bytes.as_slice(), got.etag.as_str()),
        (&b"one"[..], e1.as_str())
    );
    let again = store
        .put(&key, b"two".to_vec(), PutCondition::IfNoneMatch)
        .await;
    assert!(
        matches!(again, Err(ObjectError::PreconditionFailed(_))),
        "IfNoneMatch on an existing key: {again:?}"
    );

    // If-Match: replaced only from the version read.
    let e2 = store
        .put(&key, b"two".to_vec(), PutCondition::IfMatch(e1.clone()))
        .await
        .expect("IfMatch on the current tag");
    assert_ne!(e1, e2, "new content, new tag");
    let stale = store
        .put(&key, b"three".to_vec(), PutCondition::IfMatch(e1.clone()))
        .await;
    assert!(
        matches!(stale, Err(ObjectError::PreconditionFailed(_))),
        "IfMatch on a stale tag: {stale:?}"
    );
    assert_eq!(store.get(&key).await.unwrap().unwrap().bytes, b"two");
    let missing = store
        .put(&k("nope"), b"x".to_vec(), PutCondition::IfMatch(e2.clone()))
        .await;
    assert!(
        matches!(missing, Err(ObjectError::NotFound(_))),
        "IfMatch on a missing key: {missing:?}"
    );
    assert_eq!(
        store.get(&k("nope")).await.unwrap(),
        None,
        "and writes nothing"
    );
    let e3 = store
        .put(&key, b"four".to_vec(), PutCondition::None)
        .await
        .expect("an unconditional put");

    // Deletes with If-Match.
    let wrong = store.delete(&key, Some(&e2)).await;
    assert!(
        matches!(wrong, Err(ObjectError::PreconditionFailed(_))),
        "delete with a stale tag: {wrong:?}"
    );
    assert!(store.get(&key).await.unwrap().is_some(), "still there");
    let gone = store.delete(&k("nope"), Some(&e3)).await;
    assert!(
        matches!(gone, Err(ObjectError::NotFound(_))),
        "delete with If-Match of a missing key: {gone:?}"
    );
    store
        .delete(&key, Some(&e3))
        .await
        .expect("delete with the current tag");
    assert_eq!(store.get(&key).await.unwrap(), None);
    store
        .delete(&key, None)
        .await
        .expect("an unconditional delete of a missing key");

    // Listing: every key under the prefix, in byte order, nothing beside it.
    for name in ["l/b", "l/a", "l/c/d", "lx/e"] {
        store
            .put(
                &k(name),
                name.as_bytes().to_vec(),
                PutCondition::IfNoneMatch,
            )
            .await
            .expect("put for listing");
    }
    assert_eq!(
        store.list(&k("l/")).await.expect("list"),
        vec![k("l/a"), k("l/b"), k("l/c/d")]
    );
    assert!(
        store
            .list(&k("none/"))
            .await
            .expect("list empty")
            .is_empty()
    );
}
