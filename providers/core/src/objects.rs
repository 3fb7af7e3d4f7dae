//! A narrow interface to an object store (S3 and S3-compatible stores), for state that several
//! machines share: `gpucap apply`'s state, journal, audit log and lock.
//!
//! Five calls are all the state layer needs, and each is one request: [`ObjectStore::get`],
//! [`ObjectStore::put`] with a [`PutCondition`], [`ObjectStore::delete`] with an optional
//! `If-Match`, and [`ObjectStore::list`]. The conditions are what make a shared lock and a
//! shared state safe: `If-None-Match: *` creates an object only if it does not exist (the
//! lock, immutable journal and audit objects), `If-Match: <etag>` replaces or deletes an object
//! only if it is still the version the caller read (the state, a lease renewal or takeover, a
//! release). S3 has enforced both on `PutObject` since 2024 and `If-Match` on `DeleteObject`
//! since 2025.
//!
//! Implementations make one request per call and retry nothing: the caller decides what is
//! safe to repeat, from the [`ObjectError`] variant. They live in the provider crates (the AWS
//! crate's `S3Objects`), so that the SDKs stay out of the engine; the in-memory [`memory`]
//! fake (feature `testing`, with the [`contract`] every implementation keeps) enforces the same conditions for tests, records its calls and injects
//! failures.

use std::fmt;

use crate::BoxFuture;

#[cfg(any(test, feature = "testing"))]
pub mod contract;
#[cfg(any(test, feature = "testing"))]
pub mod memory;

/// An object as read: its bytes and its entity tag (opaque, passed back as it came in
/// conditions; S3's come with their double quotes).
#[derive(Clone, PartialEq, Eq)]
pub struct Object {
    pub bytes: Vec<u8>,
    pub etag: String,
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("bytes", &self.bytes.len())
            .field("etag", &self.etag)
            .finish()
    }
}

/// When a [`ObjectStore::put`] may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCondition {
    /// Always (last writer wins).
    None,
    /// Only if no object has the key (`If-None-Match: *`); else
    /// [`ObjectError::PreconditionFailed`].
    IfNoneMatch,
    /// Only if the object exists and has this entity tag (`If-Match`); else
    /// [`ObjectError::PreconditionFailed`], or [`ObjectError::NotFound`] when there is no object.
    IfMatch(String),
}

/// What a failed call was and on which key, in words without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFailure {
    /// The call: `get`, `put`, `delete`, `list`.
    pub op: &'static str,
    /// The key (or the prefix, for `list`).
    pub key: String,
    /// The store's error code (`PreconditionFailed`, `SlowDown`, …), where it gave one.
    pub code: Option<String>,
    /// What the store said; never a credential.
    pub message: String,
}

impl ObjectFailure {
    pub fn new(op: &'static str, key: impl Into<String>, message: impl Into<String>) -> Self {
        ObjectFailure {
            op,
            key: key.into(),
            code: None,
            message: message.into(),
        }
    }

    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }
}

impl fmt::Display for ObjectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.op, self.key)?;
        if let Some(code) = &self.code {
            write!(f, " ({code})")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Why an object call failed. The variant says what the caller may do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// HTTP 412: the condition did not hold (the object exists for `IfNoneMatch`, or has
    /// another entity tag for `IfMatch`). Nothing was written. Never retry it blindly: read
    /// again and decide.
    #[error("precondition failed (HTTP 412): {0}")]
    PreconditionFailed(ObjectFailure),
    /// HTTP 409 `ConditionalRequestConflict`: another conditional write to the key was in
    /// flight. Nothing was written; retry after a pause.
    #[error("conflicting conditional write (HTTP 409): {0}")]
    ConditionalConflict(ObjectFailure),
    /// HTTP 404: no such object (also an `IfMatch` on a key that does not exist).
    #[error("no such object (HTTP 404): {0}")]
    NotFound(ObjectFailure),
    /// Throttled (HTTP 503 `SlowDown`, 429). Nothing was done; retry after a pause.
    #[error("throttled: {0}")]
    Throttled(ObjectFailure),
    /// A timeout, a dropped connection, a 5xx: the request may or may not have been carried
    /// out. A retry of a conditional write may then meet its own first attempt.
    #[error("no usable answer: {0}")]
    Transient(ObjectFailure),
    /// Credentials missing, refused or not allowed to do this (HTTP 401/403).
    #[error("not allowed: {0}")]
    Auth(ObjectFailure),
    /// Anything else (a missing bucket, a bad request): retrying will not help.
    #[error("{0}")]
    Other(ObjectFailure),
}

impl ObjectError {
    pub fn failure(&self) -> &ObjectFailure {
        match self {
            ObjectError::PreconditionFailed(f)
            | ObjectError::ConditionalConflict(f)
            | ObjectError::NotFound(f)
            | ObjectError::Throttled(f)
            | ObjectError::Transient(f)
            | ObjectError::Auth(f)
            | ObjectError::Other(f) => f,
        }
    }

    /// Worth another try after a pause: 409 conflicts, throttling, lost answers.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ObjectError::ConditionalConflict(_)
                | ObjectError::Throttled(_)
                | ObjectError::Transient(_)
        )
    }

    /// The request may have been carried out although it failed (a lost answer).
    pub fn may_have_happened(&self) -> bool {
        matches!(self, ObjectError::Transient(_))
    }
}

/// An object store: one bucket (or container) of keys.
pub trait ObjectStore: Send + Sync {
    /// The URL of `key` in this store, for messages (`s3://bucket/key`).
    fn url(&self, key: &str) -> String;

    /// The object at `key`, or `None` when there is none.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Object>, ObjectError>>;

    /// Writes `bytes` at `key` if `condition` holds; returns the new entity tag.
    fn put<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> BoxFuture<'a, Result<String, ObjectError>>;

    /// Deletes `key`; with `if_match`, only if the object has that entity tag
    /// ([`ObjectError::PreconditionFailed`] otherwise, [`ObjectError::NotFound`] when there is
    /// no object). Without it, deleting a missing key succeeds.
    fn delete<'a>(
        &'a self,
        key: &'a str,
        if_match: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ObjectError>>;

    /// Every key that starts with `prefix`, in ascending (byte) order.
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>, ObjectError>>;
}
