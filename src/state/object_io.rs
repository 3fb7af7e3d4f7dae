//! The state layer's calls to an [`ObjectStore`], made robust in one place:
//!
//! - a 409 `ConditionalRequestConflict`, throttling and a lost answer are retried with
//!   exponential backoff and jitter (backon); a 412 never is: it is handed back as
//!   [`Refused::Precondition`] for the caller to read again and decide;
//! - a conditional write whose earlier attempt may have landed (its answer was lost) can meet
//!   itself on the retry: a 412 (or, for a delete, a 404) after such an attempt is checked by
//!   reading the object back, and counts as written when it holds exactly these bytes. Every
//!   object gpucap writes is unique (a lock id, a serial, a seq, a timestamp), so equal bytes
//!   mean this writer's;
//! - every other failure becomes [`StateError::Store`] naming the object, with anything
//!   credential-like scrubbed from the store's message.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use gpucap_provider::objects::{Object, ObjectError, ObjectStore, PutCondition};

use super::error::StateError;
use super::redact;

/// How store calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Retries after the first attempt.
    pub max_times: usize,
}

impl Default for RetrySettings {
    /// 100 ms doubling to 5 s, six retries: about ten seconds in all, longer than S3's
    /// conflicts and throttling usually last.
    fn default() -> Self {
        RetrySettings {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_times: 6,
        }
    }
}

/// Why a conditional call did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// 412: the object exists (`IfNoneMatch`) or has another entity tag (`IfMatch`).
    Precondition,
    /// 404: an `IfMatch` on an object that does not exist.
    Missing,
}

/// An object store with the state layer's retry and error rules.
#[derive(Clone)]
pub struct ObjectIo {
    store: Arc<dyn ObjectStore>,
    retry: RetrySettings,
}

impl std::fmt::Debug for ObjectIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectIo")
            .field("store", &self.store.url(""))
            .field("retry", &self.retry)
            .finish()
    }
}

impl ObjectIo {
    pub fn new(store: Arc<dyn ObjectStore>, retry: RetrySettings) -> ObjectIo {
        ObjectIo { store, retry }
    }

    /// The same store with other retry settings.
    pub fn with_retry(&self, retry: RetrySettings) -> ObjectIo {
        ObjectIo {
            store: self.store.clone(),
            retry,
        }
    }

    /// `s3://bucket/key` (or the store's own scheme).
    pub fn url(&self, key: &str) -> String {
        self.store.url(key)
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.retry.min_delay)
            .with_max_delay(self.retry.max_delay)
            .with_max_times(self.retry.max_times)
            .with_jitter()
    }

    fn failed(&self, op: &'static str, key: &str, mut e: ObjectError) -> StateError {
        let f = match &mut e {
            ObjectError::PreconditionFailed(f)
            | ObjectError::ConditionalConflict(f)
            | ObjectError::NotFound(f)
            | ObjectError::Throttled(f)
            | ObjectError::Transient(f)
            | ObjectError::Auth(f)
            | ObjectError::Other(f) => f,
        };
        if let Some(clean) = redact::scrub_str(&f.message) {
            f.message = clean;
        }
        StateError::Store {
            op,
            location: self.url(key),
            error: e,
        }
    }

    /// The object at `key`, or `None`.
    pub async fn get(&self, key: &str) -> Result<Option<Object>, StateError> {
        (|| self.store.get(key))
            .retry(self.backoff())
            .when(ObjectError::is_retryable)
            .notify(|e: &ObjectError, after: Duration| note_retry("read", e, after))
            .await
            .map_err(|e| self.failed("read", key, e))
    }

    /// Every key under `prefix`, in byte order.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StateError> {
        (|| self.store.list(prefix))
            .retry(self.backoff())
            .when(ObjectError::is_retryable)
            .notify(|e: &ObjectError, after: Duration| note_retry("list", e, after))
            .await
            .map_err(|e| self.failed("list", prefix, e))
    }

    /// Writes `bytes` at `key` if `condition` holds: the new entity tag, or why not.
    pub async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        condition: PutCondition,
    ) -> Result<Result<String, Refused>, StateError> {
        let ambiguous = AtomicBool::new(false);
        let result = (|| self.store.put(key, bytes.to_vec(), condition.clone()))
            .retry(self.backoff())
            .when(ObjectError::is_retryable)
            .notify(|e: &ObjectError, after: Duration| {
                if e.may_have_happened() {
                    ambiguous.store(true, Ordering::Relaxed);
                }
                note_retry("write", e, after);
            })
            .await;
        let refused = match result {
            Ok(etag) => return Ok(Ok(etag)),
            Err(ObjectError::PreconditionFailed(_)) => Refused::Precondition,
            Err(ObjectError::NotFound(_)) if matches!(condition, PutCondition::IfMatch(_)) => {
                Refused::Missing
            }
            Err(e) => return Err(self.failed("write", key, e)),
        };
        if ambiguous.load(Ordering::Relaxed)
            && let Some(now) = self.get(key).await?
            && now.bytes == bytes
        {
            tracing::debug!(
                "{}: an earlier attempt whose answer was lost had written it",
                self.url(key)
            );
            return Ok(Ok(now.etag));
        }
        Ok(Err(refused))
    }

    /// Deletes `key` if it has entity tag `if_match`, or why not.
    pub async fn delete(
        &self,
        key: &str,
        if_match: &str,
    ) -> Result<Result<(), Refused>, StateError> {
        let ambiguous = AtomicBool::new(false);
        let result = (|| self.store.delete(key, Some(if_match)))
            .retry(self.backoff())
            .when(ObjectError::is_retryable)
            .notify(|e: &ObjectError, after: Duration| {
                if e.may_have_happened() {
                    ambiguous.store(true, Ordering::Relaxed);
                }
                note_retry("delete", e, after);
            })
            .await;
        match result {
            Ok(()) => Ok(Ok(())),
            // An earlier attempt deleted it.
            Err(ObjectError::NotFound(_)) if ambiguous.load(Ordering::Relaxed) => Ok(Ok(())),
            Err(ObjectError::NotFound(_)) => Ok(Err(Refused::Missing)),
            Err(ObjectError::PreconditionFailed(_)) => Ok(Err(Refused::Precondition)),
            Err(e) => Err(self.failed("delete", key, e)),
        }
    }
}

fn note_retry(what: &str, e: &ObjectError, after: Duration) {
    tracing::info!(
        "state store: {what}: {e}; retrying in {:.1} s",
        after.as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::test_runtime as rt;
    use gpucap_provider::objects::memory::{Fault, MemoryObjects, Op};

    fn io(store: &Arc<MemoryObjects>) -> ObjectIo {
        ObjectIo::new(
            store.clone(),
            RetrySettings {
                min_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
                max_times: 4,
            },
        )
    }

    #[test]
    fn conflicts_are_retried_and_preconditions_are_not() {
        let store = Arc::new(MemoryObjects::new("t"));
        let io = io(&store);
        let rt = rt();
        store.inject(Fault::conflict("k", 3));
        let etag = rt
            .block_on(io.put("k", b"1", PutCondition::IfNoneMatch))
            .unwrap()
            .unwrap();
        assert_eq!(
            store.calls_to(Op::Put, "k").len(),
            4,
            "three 409s, then written"
        );
        let refused = rt
            .block_on(io.put("k", b"2", PutCondition::IfNoneMatch))
            .unwrap();
        assert_eq!(refused, Err(Refused::Precondition));
        assert_eq!(
            store.calls_to(Op::Put, "k").len(),
            5,
            "a 412 is not retried"
        );
        let missing = rt
            .block_on(io.put("m", b"2", PutCondition::IfMatch(etag.clone())))
            .unwrap();
        assert_eq!(missing, Err(Refused::Missing));

        // Conflicts that outlast the retries are an error naming the object.
        store.inject(Fault::conflict("k", 10));
        let err = rt
            .block_on(io.put("k", b"3", PutCondition::IfMatch(etag)))
            .unwrap_err();
        assert!(err.to_string().contains("mem://t/k"), "{err}");
        assert!(err.to_string().contains("409"), "{err}");
    }

    #[test]
    fn a_write_whose_answer_was_lost_is_found_on_the_retry() {
        let store = Arc::new(MemoryObjects::new("t"));
        let io = io(&store);
        let rt = rt();
        store.inject(Fault::answer_lost(Op::Put, "lock"));
        let etag = rt
            .block_on(io.put("lock", b"mine", PutCondition::IfNoneMatch))
            .unwrap()
            .unwrap();
        assert_eq!(store.peek("lock").unwrap().etag, etag);
        // Someone else's object is not mistaken for ours.
        store.set("other", b"theirs");
        store.inject(Fault::answer_lost(Op::Put, "other"));
        let refused = rt
            .block_on(io.put("other", b"mine", PutCondition::IfNoneMatch))
            .unwrap();
        assert_eq!(refused, Err(Refused::Precondition));
        // A delete whose answer was lost finds the object gone on the retry: done.
        store.inject(Fault::answer_lost(Op::Delete, "lock"));
        rt.block_on(io.delete("lock", &etag)).unwrap().unwrap();
        assert!(store.peek("lock").is_none());
        assert_eq!(
            rt.block_on(io.delete("lock", &etag)).unwrap(),
            Err(Refused::Missing)
        );
    }

    #[test]
    fn store_errors_are_scrubbed_of_credentials() {
        struct Leaky;
        impl ObjectStore for Leaky {
            fn url(&self, key: &str) -> String {
                format!("s3://b/{key}")
            }
            fn get<'a>(
                &'a self,
                key: &'a str,
            ) -> gpucap_provider::BoxFuture<'a, Result<Option<Object>, ObjectError>> {
                Box::pin(std::future::ready(Err(ObjectError::Auth(
                    gpucap_provider::ObjectFailure::new(
                        "get",
                        key,
                        "key AKIAIOSFODNN7EXAMPLE is not allowed",
                    ),
                ))))
            }
            fn put<'a>(
                &'a self,
                _: &'a str,
                _: Vec<u8>,
                _: PutCondition,
            ) -> gpucap_provider::BoxFuture<'a, Result<String, ObjectError>> {
                unimplemented!()
            }
            fn delete<'a>(
                &'a self,
                _: &'a str,
                _: Option<&'a str>,
            ) -> gpucap_provider::BoxFuture<'a, Result<(), ObjectError>> {
                unimplemented!()
            }
            fn list<'a>(
                &'a self,
                _: &'a str,
            ) -> gpucap_provider::BoxFuture<'a, Result<Vec<String>, ObjectError>> {
                unimplemented!()
            }
        }
        let io = ObjectIo::new(Arc::new(Leaky), RetrySettings::default());
        let err = rt().block_on(io.get("state.json")).unwrap_err().to_string();
        assert!(!err.contains("AKIAIOSFODNN7"), "{err}");
        assert!(
            err.contains("s3://b/state.json") && err.contains("not allowed"),
            "{err}"
        );
    }
}
