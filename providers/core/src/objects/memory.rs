//! An in-memory [`ObjectStore`] for tests: enforces `If-None-Match`/`If-Match` exactly as S3
//! does (as measured against moto 5.2.5: 412 on a failed condition, 404 for `If-Match` on a
//! missing key, an unconditional delete of a missing key succeeds), gives content-derived
//! entity tags like S3's MD5 ones (same bytes, same tag), records every call with its inputs,
//! and injects failures: a 409 `ConditionalRequestConflict` (or any other error) before a
//! call takes effect, or a lost answer after it did.
//!
//! Several backends (standing for several machines) may share one store through an `Arc`.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use super::{Object, ObjectError, ObjectFailure, ObjectStore, PutCondition};
use crate::BoxFuture;

/// Which call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Get,
    Put,
    Delete,
    List,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::Delete => "delete",
            Op::List => "list",
        }
    }
}

/// One call as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: Op,
    /// The key (the prefix for `list`).
    pub key: String,
    /// `put`'s condition; `delete`'s `If-Match` as `PutCondition::IfMatch`.
    pub condition: PutCondition,
    /// What `put` wrote.
    pub bytes: Option<Vec<u8>>,
    /// How it ended: `ok`, or the error's kind (`412`, `409`, `404`, `lost`, …).
    pub outcome: String,
}

/// When an injected fault fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Before the call takes effect: nothing happens, the error is returned.
    Before,
    /// After the call took effect: the answer is lost ([`ObjectError::Transient`]).
    AnswerLost,
}

/// One injected fault: the next `times` calls of `op` whose key contains `key_contains`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub op: Op,
    pub key_contains: String,
    pub times: usize,
    pub when: When,
    /// The error for [`When::Before`] (its failure's key and op are filled in).
    pub error: fn(ObjectFailure) -> ObjectError,
}

impl Fault {
    /// `times` 409 `ConditionalRequestConflict`s on puts to keys containing `key_contains`.
    pub fn conflict(key_contains: &str, times: usize) -> Fault {
        Fault {
            op: Op::Put,
            key_contains: key_contains.to_string(),
            times,
            when: When::Before,
            error: |f| ObjectError::ConditionalConflict(f.with_code("ConditionalRequestConflict")),
        }
    }

    /// The next `op` on a matching key takes effect but its answer is lost.
    pub fn answer_lost(op: Op, key_contains: &str) -> Fault {
        Fault {
            op,
            key_contains: key_contains.to_string(),
            times: 1,
            when: When::AnswerLost,
            error: ObjectError::Transient,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    objects: BTreeMap<String, Object>,
    calls: Vec<Call>,
    faults: VecDeque<Fault>,
}

/// The fake store. `url` is `mem://<name>/<key>`.
#[derive(Debug)]
pub struct MemoryObjects {
    name: String,
    inner: Mutex<Inner>,
}

/// The entity tag of `bytes`: derived from the content, quoted, like S3's.
pub fn etag_of(bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    format!("\"{:016x}\"", h.finish())
}

impl MemoryObjects {
    pub fn new(name: &str) -> MemoryObjects {
        MemoryObjects {
            name: name.to_string(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a fault; faults fire in the order they were added.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push_back(fault);
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls of `op` on keys containing `key_contains`.
    pub fn calls_to(&self, op: Op, key_contains: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.op == op && c.key.contains(key_contains))
            .collect()
    }

    /// The stored object at `key`, without recording a call.
    pub fn peek(&self, key: &str) -> Option<Object> {
        self.lock().objects.get(key).cloned()
    }

    /// Every stored key, without recording a call.
    pub fn keys(&self) -> Vec<String> {
        self.lock().objects.keys().cloned().collect()
    }

    /// Writes an object directly (a test's setup, or a tamperer), without recording a call.
    pub fn set(&self, key: &str, bytes: &[u8]) -> String {
        let etag = etag_of(bytes);
        self.lock().objects.insert(
            key.to_string(),
            Object {
                bytes: bytes.to_vec(),
                etag: etag.clone(),
            },
        );
        etag
    }

    /// The first fault for this call, if any; counts it down.
    fn fault(inner: &mut Inner, op: Op, key: &str) -> Option<Fault> {
        let i = inner
            .faults
            .iter()
            .position(|f| f.op == op && key.contains(&f.key_contains) && f.times > 0)?;
        let fault = inner.faults[i].clone();
        inner.faults[i].times -= 1;
        if inner.faults[i].times == 0 {
            inner.faults.remove(i);
        }
        Some(fault)
    }

    /// Runs one call: a fault before, the operation, a lost answer after; records it.
    fn call<T>(
        &self,
        op: Op,
        key: &str,
        condition: PutCondition,
        bytes: Option<Vec<u8>>,
        apply: impl FnOnce(&mut BTreeMap<String, Object>) -> Result<T, ObjectError>,
    ) -> Result<T, ObjectError> {
        let mut inner = self.lock();
        let failure = || ObjectFailure::new(op.name(), key, "injected by the fake");
        let fault = Self::fault(&mut inner, op, key);
        let result = match &fault {
            Some(f) if f.when == When::Before => Err((f.error)(failure())),
            Some(_) => {
                // Whatever the call did (or refused), its answer never arrives.
                let _ = apply(&mut inner.objects);
                Err(ObjectError::Transient(failure()))
            }
            None => apply(&mut inner.objects),
        };
        let outcome = match (&result, &fault) {
            (Ok(_), _) => "ok".to_string(),
            (Err(_), Some(f)) if f.when == When::AnswerLost => "lost".to_string(),
            (Err(e), _) => kind(e).to_string(),
        };
        inner.calls.push(Call {
            op,
            key: key.to_string(),
            condition,
            bytes,
            outcome,
        });
        result
    }
}

fn kind(e: &ObjectError) -> &'static str {
    match e {
        ObjectError::PreconditionFailed(_) => "412",
        ObjectError::ConditionalConflict(_) => "409",
        ObjectError::NotFound(_) => "404",
        ObjectError::Throttled(_) => "503",
        ObjectError::Transient(_) => "transient",
        ObjectError::Auth(_) => "403",
        ObjectError::Other(_) => "other",
    }
}

impl ObjectStore for MemoryObjects {
    fn url(&self, key: &str) -> String {
        format!("mem://{}/{key}", self.name)
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Object>, ObjectError>> {
        let result = self.call(Op::Get, key, PutCondition::None, None, |objects| {
            Ok(objects.get(key).cloned())
        });
        Box::pin(std::future::ready(result))
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<String, ObjectError>> {
        let recorded = (condition.clone(), Some(bytes.clone()));
        let result = self.call(Op::Put, key, recorded.0, recorded.1, |objects| {
            let fail = |m: &str| ObjectFailure::new("put", key, m);
            match (&condition, objects.get(key)) {
                (PutCondition::IfNoneMatch, Some(_)) => {
                    return Err(ObjectError::PreconditionFailed(
                        fail("the object exists").with_code("PreconditionFailed"),
                    ));
                }
                (PutCondition::IfMatch(_), None) => {
                    return Err(ObjectError::NotFound(
                        fail("no such key").with_code("NoSuchKey"),
                    ));
                }
                (PutCondition::IfMatch(want), Some(have)) if *want != have.etag => {
                    return Err(ObjectError::PreconditionFailed(
                        fail("the entity tag differs").with_code("PreconditionFailed"),
                    ));
                }
                _ => {}
            }
            let etag = etag_of(&bytes);
            objects.insert(
                key.to_string(),
                Object {
                    bytes,
                    etag: etag.clone(),
                },
            );
            Ok(etag)
        });
        Box::pin(std::future::ready(result))
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        if_match: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        let condition = if_match.map_or(PutCondition::None, |e| PutCondition::IfMatch(e.into()));
        let result = self.call(Op::Delete, key, condition, None, |objects| {
            let fail = |m: &str| ObjectFailure::new("delete", key, m);
            match (if_match, objects.get(key)) {
                (Some(_), None) => Err(ObjectError::NotFound(
                    fail("no such key").with_code("NoSuchKey"),
                )),
                (Some(want), Some(have)) if want != have.etag => {
                    Err(ObjectError::PreconditionFailed(
                        fail("the entity tag differs").with_code("PreconditionFailed"),
                    ))
                }
                _ => {
                    objects.remove(key);
                    Ok(())
                }
            }
        });
        Box::pin(std::future::ready(result))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ObjectError>> {
        let result = self.call(Op::List, prefix, PutCondition::None, None, |objects| {
            Ok(objects
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, _)| k.clone())
                .collect())
        });
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn the_fake_keeps_the_contract() {
        block(super::super::contract::check(
            &MemoryObjects::new("t"),
            "c/",
        ));
    }

    #[test]
    fn faults_fire_before_or_after_the_call_and_are_recorded() {
        let s = MemoryObjects::new("t");
        s.inject(Fault::conflict("lock", 2));
        for _ in 0..2 {
            let e = block(s.put("a.lock", b"x".to_vec(), PutCondition::IfNoneMatch)).unwrap_err();
            assert!(matches!(e, ObjectError::ConditionalConflict(_)), "{e:?}");
            assert!(e.is_retryable() && !e.may_have_happened());
        }
        assert!(s.peek("a.lock").is_none(), "a 409 writes nothing");
        block(s.put("a.lock", b"x".to_vec(), PutCondition::IfNoneMatch)).unwrap();

        s.inject(Fault::answer_lost(Op::Put, "state"));
        let e = block(s.put("state", b"1".to_vec(), PutCondition::IfNoneMatch)).unwrap_err();
        assert!(e.may_have_happened(), "{e:?}");
        assert_eq!(s.peek("state").unwrap().bytes, b"1", "it happened");
        let outcomes: Vec<String> = s.calls().into_iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes, ["409", "409", "ok", "lost"]);
        assert_eq!(
            s.calls_to(Op::Put, "state")[0].condition,
            PutCondition::IfNoneMatch
        );
    }
}
