//! [`ObjectBackend`]: `apply`'s state, journal, audit log and lock in an object store (S3), so
//! that CI runs on different machines share one state and one lock. Everything lives under the
//! configured key (say `gpucap/prod/state.json`):
//!
//! | object | what |
//! | --- | --- |
//! | `<key>` | the state JSON, as the local `state.json` |
//! | `<key>.lock` | the lock, while a run holds it ([`super::object_lock`]) |
//! | `<key>.journal/<seq>.json` | one journal record per object, `seq` zero-padded to 20 digits |
//! | `<key>.audit/<time>-<nonce>/<n>.json` | one audit record per object, one prefix per process |
//!
//! **Journal: one immutable object per record.** Each append is one `PutObject` with
//! `If-None-Match: *` of the record at the next seq, stored before `append_journal` returns,
//! after the lock has been checked (and renewed when due). Objects are written whole or not at
//! all, so the local journal's torn last line cannot happen; and since a seq can be created
//! only once, a run that lost its lock and appends anyway cannot overwrite anything: it gets a
//! 412 ([`StateError::JournalConflict`]). The alternative, one object per run rewritten with
//! `If-Match` on each append, uploads the whole run's journal on every record (quadratic in
//! its length: a 750-record run would upload some 280 MB). Reading lists the prefix and fetches
//! the records 16 at a time; `next_seq` is the last seq plus one, as locally.
//!
//! **Audit log: immutable objects too**, created with `If-None-Match: *`, never appended to in
//! place: S3 has no append, and a rewrite could lose someone else's line. Each process writes
//! under its own prefix (its start time and a random nonce), numbered in order; reading sorts
//! all of them by time.
//!
//! **State: compare-and-swap on its ETag.** A write is `PutObject If-Match: <the ETag read or
//! last written here>` (`If-None-Match: *` for the first), after checking the lock, so a process
//! that lost its lock can never overwrite newer state: a 412 becomes
//! [`StateError::LockLost`] (the lock changed hands) or [`StateError::StateChanged`].
//!
//! Every call is retried on 409 `ConditionalRequestConflict`, throttling and lost answers, and
//! never blindly on a 412 ([`super::object_io`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use gpucap_provider::BoxFuture;
use gpucap_provider::objects::{Object, ObjectError, ObjectFailure, ObjectStore, PutCondition};
use serde::de::DeserializeOwned;

use super::StateBackend;
use super::audit::AuditRecord;
use super::error::StateError;
use super::journal::{JournalRead, JournalRecord, encode_line};
use super::lock::{LockGuard, LockInfo, LockOptions};
use super::managed::{STATE_VERSION, State};
use super::object_io::{ObjectIo, RetrySettings};
use super::object_lock::ObjectLock;

/// The settled point of the journal: every record up to `through` is settled and in the state.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settled {
    through: u64,
}

/// How many objects are fetched at once when reading the journal or the audit log.
const READ_CONCURRENCY: usize = 16;

/// The state, lock, journal and audit log under one key of an object store.
pub struct ObjectBackend {
    io: ObjectIo,
    key: String,
    lock: ObjectLock,
    /// The lease when the caller names none.
    lease: Duration,
    /// The stored state's version as last read or written here.
    state_version: Mutex<Option<StateVersion>>,
    /// The next journal seq, under the lock with this id.
    journal_next: tokio::sync::Mutex<Option<(String, u64)>>,
    /// One lock check (and renewal) at a time.
    checking: tokio::sync::Mutex<()>,
    /// This process's audit prefix, and the number of its next audit object.
    audit_session: String,
    audit_next: AtomicU64,
}

impl std::fmt::Debug for ObjectBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectBackend")
            .field("location", &self.location())
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct StateVersion {
    lineage: String,
    serial: u64,
    etag: String,
}

impl ObjectBackend {
    /// The backend for the state at `key` (e.g. `gpucap/prod/state.json`) in `store`, with
    /// the default lease (one hour) and retries.
    pub fn new(store: Arc<dyn ObjectStore>, key: &str) -> ObjectBackend {
        Self::build(
            ObjectIo::new(store, RetrySettings::default()),
            key,
            LockOptions::DEFAULT_LEASE,
        )
    }

    fn build(io: ObjectIo, key: &str, lease: Duration) -> ObjectBackend {
        let key = key.to_string();
        let lock = ObjectLock::new(io.clone(), format!("{key}.lock"), io.url(&key));
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        ObjectBackend {
            lock,
            lease,
            state_version: Mutex::new(None),
            journal_next: tokio::sync::Mutex::new(None),
            checking: tokio::sync::Mutex::new(()),
            audit_session: format!(
                "{}-{}",
                Utc::now().format("%Y%m%dT%H%M%S%.6fZ"),
                &nonce[..12]
            ),
            audit_next: AtomicU64::new(1),
            io,
            key,
        }
    }

    /// How long a lock lasts unless renewed, when the caller does not say (`[state]
    /// lock_lease`).
    pub fn with_lease(self, lease: Duration) -> ObjectBackend {
        ObjectBackend { lease, ..self }
    }

    /// How store calls are retried (tests shorten the pauses).
    pub fn with_retry(self, retry: RetrySettings) -> ObjectBackend {
        Self::build(self.io.with_retry(retry), &self.key, self.lease)
    }

    pub fn state_key(&self) -> &str {
        &self.key
    }

    pub fn lock_key(&self) -> String {
        format!("{}.lock", self.key)
    }

    pub fn journal_prefix(&self) -> String {
        format!("{}.journal/", self.key)
    }

    pub fn audit_prefix(&self) -> String {
        format!("{}.audit/", self.key)
    }

    fn journal_key(&self, seq: u64) -> String {
        format!("{}{seq:020}.json", self.journal_prefix())
    }

    fn path(&self, key: &str) -> PathBuf {
        PathBuf::from(self.io.url(key))
    }

    /// Fails unless `guard` is this backend's lock and still held; renews its lease when due.
    async fn check_guard(&self, guard: &LockGuard) -> Result<(), StateError> {
        if guard.location() != self.location() {
            return Err(StateError::ForeignLock {
                id: guard.id().to_string(),
                location: self.location(),
            });
        }
        let _one_at_a_time = self.checking.lock().await;
        self.lock.ensure_held(guard).await
    }

    fn remember(&self, version: Option<StateVersion>) {
        *self
            .state_version
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = version;
    }

    fn remembered(&self) -> Option<StateVersion> {
        self.state_version
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn read_state_now(&self) -> Result<Option<(State, String)>, StateError> {
        let Some(object) = self.io.get(&self.key).await? else {
            return Ok(None);
        };
        let state = State::parse(&object.bytes, &self.path(&self.key))?;
        self.remember(Some(StateVersion {
            lineage: state.lineage.clone(),
            serial: state.serial,
            etag: object.etag.clone(),
        }));
        Ok(Some((state, object.etag)))
    }

    fn state_changed(&self, state: &State, now: Option<&State>) -> StateError {
        StateError::StateChanged {
            path: self.path(&self.key),
            read_lineage: state.lineage.clone(),
            read_serial: state.serial,
            disk_lineage: now.map_or_else(|| "(none)".to_string(), |s| s.lineage.clone()),
            disk_serial: now.map_or(0, |s| s.serial),
        }
    }

    async fn write_state_now(
        &self,
        guard: &LockGuard,
        state: &mut State,
    ) -> Result<(), StateError> {
        self.check_guard(guard).await?;
        // The version `state` was read as: remembered, or read now.
        let condition = match self.remembered() {
            Some(v) if v.lineage == state.lineage && v.serial == state.serial => {
                PutCondition::IfMatch(v.etag)
            }
            _ => match self.read_state_now().await? {
                None if state.serial == 0 => PutCondition::IfNoneMatch,
                Some((now, etag)) if now.lineage == state.lineage && now.serial == state.serial => {
                    PutCondition::IfMatch(etag)
                }
                now => return Err(self.state_changed(state, now.as_ref().map(|(s, _)| s))),
            },
        };
        let mut next = state.clone();
        next.version = STATE_VERSION;
        next.serial = state.serial + 1;
        match self.io.put(&self.key, &next.to_bytes()?, condition).await? {
            Ok(etag) => {
                self.remember(Some(StateVersion {
                    lineage: next.lineage.clone(),
                    serial: next.serial,
                    etag,
                }));
                *state = next;
                Ok(())
            }
            Err(_) => {
                // Someone wrote since: if the lock changed hands, that is the news.
                self.lock.ensure_held(guard).await?;
                let now = self.read_state_now().await?;
                Err(self.state_changed(state, now.as_ref().map(|(s, _)| s)))
            }
        }
    }

    /// The seq of the last journal record stored (0 for none).
    async fn last_seq(&self) -> Result<u64, StateError> {
        let keys = self.io.list(&self.journal_prefix()).await?;
        match keys.last() {
            None => Ok(0),
            Some(k) => self.seq_of(k),
        }
    }

    fn seq_of(&self, key: &str) -> Result<u64, StateError> {
        key.strip_prefix(&self.journal_prefix())
            .and_then(|rest| rest.strip_suffix(".json"))
            .filter(|n| n.len() == 20)
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| {
                StateError::corrupt(
                    &self.path(key),
                    None,
                    "not a journal record's name (`<20-digit seq>.json`); only gpucap writes under this prefix",
                )
            })
    }

    async fn append_journal_now(
        &self,
        guard: &LockGuard,
        mut record: JournalRecord,
    ) -> Result<JournalRecord, StateError> {
        self.check_guard(guard).await?;
        let mut next = self.journal_next.lock().await;
        let seq = match &*next {
            Some((id, seq)) if id == guard.id() => *seq,
            _ => self.last_seq().await? + 1,
        };
        record.seq = seq;
        let key = self.journal_key(seq);
        let line = encode_line(&record, "the journal")?;
        match self.io.put(&key, &line, PutCondition::IfNoneMatch).await? {
            Ok(_) => {
                *next = Some((guard.id().to_string(), seq + 1));
                Ok(record)
            }
            Err(_) => {
                *next = None;
                let detail = match self.io.get(&key).await {
                    Ok(Some(o)) => match serde_json::from_slice::<JournalRecord>(&o.bytes) {
                        Ok(r) => format!(
                            "run {}: {} {} of {}",
                            r.run,
                            r.step.as_str(),
                            r.api,
                            r.action
                        ),
                        Err(e) => format!("unreadable: {e}"),
                    },
                    Ok(None) => "since removed".to_string(),
                    Err(e) => e.to_string(),
                };
                Err(StateError::JournalConflict {
                    location: self.io.url(&key),
                    seq,
                    detail,
                })
            }
        }
    }

    /// The objects at `keys`, parsed, in that order.
    async fn read_all<T: DeserializeOwned>(
        &self,
        keys: Vec<String>,
    ) -> Result<Vec<(String, T)>, StateError> {
        let objects = fetch_all(&self.io, keys).await?;
        let mut out = Vec::with_capacity(objects.len());
        for (key, object) in objects {
            let Some(object) = object else {
                return Err(StateError::corrupt(
                    &self.path(&key),
                    None,
                    "listed, then gone: records are never deleted; was it removed by hand?",
                ));
            };
            let value = serde_json::from_slice(&object.bytes).map_err(|e| {
                StateError::corrupt(&self.path(&key), Some(e.line()), e.to_string())
            })?;
            out.push((key, value));
        }
        Ok(out)
    }

    /// Where the settled point is kept: `<key>.journal.settled`, `{"through": SEQ}`.
    pub fn settled_key(&self) -> String {
        format!("{}.journal.settled", self.key)
    }

    /// The seq every record up to which is settled (0: none recorded).
    async fn settled_through(&self) -> Result<u64, StateError> {
        let key = self.settled_key();
        let Some(object) = self.io.get(&key).await? else {
            return Ok(0);
        };
        let doc: Settled = serde_json::from_slice(&object.bytes)
            .map_err(|e| StateError::corrupt(&self.path(&key), Some(e.line()), e.to_string()))?;
        Ok(doc.through)
    }

    async fn mark_settled_now(&self, guard: &LockGuard, seq: u64) -> Result<(), StateError> {
        self.check_guard(guard).await?;
        if seq <= self.settled_through().await? {
            return Ok(());
        }
        let key = self.settled_key();
        let body =
            serde_json::to_vec(&Settled { through: seq }).map_err(|source| StateError::Encode {
                what: "the journal's settled point",
                source,
            })?;
        // Under the lock nobody else writes it; a plain put is enough.
        self.io
            .put(&key, &body, PutCondition::None)
            .await?
            .map_err(|_| StateError::corrupt(&self.path(&key), None, "could not be written"))?;
        Ok(())
    }

    /// The journal records after `after` (all with 0).
    async fn read_journal_now(&self) -> Result<JournalRead, StateError> {
        self.read_journal_after(0).await
    }

    async fn read_journal_after(&self, after: u64) -> Result<JournalRead, StateError> {
        // Names first: a stranger under the prefix is reported before anything is fetched.
        let listed = self.io.list(&self.journal_prefix()).await?;
        let mut keys = Vec::with_capacity(listed.len());
        let mut seqs = Vec::with_capacity(listed.len());
        for key in listed {
            let seq = self.seq_of(&key)?;
            if seq > after {
                keys.push(key);
                seqs.push(seq);
            }
        }
        let mut records = Vec::with_capacity(keys.len());
        let read = self.read_all::<JournalRecord>(keys).await?;
        for ((key, record), seq) in read.into_iter().zip(seqs) {
            if record.seq != seq {
                return Err(StateError::corrupt(
                    &self.path(&key),
                    None,
                    format!("holds journal seq {}, not {seq}", record.seq),
                ));
            }
            records.push(record);
        }
        Ok(JournalRead {
            records,
            ..JournalRead::default()
        })
    }

    async fn read_audit_now(&self) -> Result<Vec<AuditRecord>, StateError> {
        let keys = self.io.list(&self.audit_prefix()).await?;
        let mut all = self.read_all::<AuditRecord>(keys).await?;
        // Key order within a process, time order across processes.
        all.sort_by(|(ka, a), (kb, b)| a.at.cmp(&b.at).then_with(|| ka.cmp(kb)));
        Ok(all.into_iter().map(|(_, r)| r).collect())
    }

    async fn append_audit_now(&self, record: &AuditRecord) -> Result<(), StateError> {
        let line = encode_line(record, "the audit log")?;
        let n = self.audit_next.fetch_add(1, Ordering::Relaxed);
        let key = format!("{}{}/{n:06}.json", self.audit_prefix(), self.audit_session);
        match self.io.put(&key, &line, PutCondition::IfNoneMatch).await? {
            Ok(_) => Ok(()),
            Err(_) => Err(StateError::Store {
                op: "write",
                location: self.io.url(&key),
                error: ObjectError::PreconditionFailed(ObjectFailure::new(
                    "put",
                    &key,
                    "an audit object with this key exists already, and audit objects are never overwritten",
                )),
            }),
        }
    }

    async fn lock_now(&self, options: &LockOptions) -> Result<LockGuard, StateError> {
        let acquired = self.lock.acquire(options, self.lease).await?;
        let guard = acquired.guard;
        if let Some(previous) = acquired.took_over {
            let why = format!(
                "whose lease ran out at {}",
                previous.lease_until.to_rfc3339()
            );
            let record = AuditRecord::lock_takeover(guard.id(), &previous, &why);
            if let Err(e) = self.append_audit_now(&record).await {
                let _ = guard.unlock().await;
                return Err(e);
            }
        }
        Ok(guard)
    }
}

/// Fetches `keys` (`None` for one gone meanwhile), [`READ_CONCURRENCY`] at a time, in order.
async fn fetch_all(
    io: &ObjectIo,
    keys: Vec<String>,
) -> Result<Vec<(String, Option<Object>)>, StateError> {
    let permits = Arc::new(tokio::sync::Semaphore::new(READ_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, key) in keys.iter().cloned().enumerate() {
        let io = io.clone();
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.ok();
            (i, io.get(&key).await)
        });
    }
    let mut got: Vec<Option<Option<Object>>> = vec![None; keys.len()];
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.map_err(|e| StateError::Store {
            op: "read",
            location: io.url(""),
            error: ObjectError::Other(ObjectFailure::new("get", "", format!("a read failed: {e}"))),
        })?;
        got[i] = Some(result?);
    }
    Ok(keys
        .into_iter()
        .zip(got)
        .map(|(k, o)| (k, o.flatten()))
        .collect())
}

impl StateBackend for ObjectBackend {
    fn location(&self) -> String {
        self.io.url(&self.key)
    }

    fn lock<'a>(
        &'a self,
        options: &'a LockOptions,
    ) -> BoxFuture<'a, Result<LockGuard, StateError>> {
        Box::pin(self.lock_now(options))
    }

    fn read_lock(&self) -> BoxFuture<'_, Result<Option<LockInfo>, StateError>> {
        Box::pin(async move { Ok(self.lock.read().await?.map(|(info, _)| info)) })
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(self.lock.force_unlock(id))
    }

    fn read_state(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(async move { Ok(self.read_state_now().await?.map(|(s, _)| s)) })
    }

    fn write_state<'a>(
        &'a self,
        lock: &'a LockGuard,
        state: &'a mut State,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(self.write_state_now(lock, state))
    }

    fn read_journal(&self) -> BoxFuture<'_, Result<JournalRead, StateError>> {
        Box::pin(self.read_journal_now())
    }

    fn read_unsettled_journal(&self) -> BoxFuture<'_, Result<JournalRead, StateError>> {
        Box::pin(async move {
            let through = self.settled_through().await?;
            self.read_journal_after(through).await
        })
    }

    fn mark_settled<'a>(
        &'a self,
        lock: &'a LockGuard,
        seq: u64,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(self.mark_settled_now(lock, seq))
    }

    fn append_journal<'a>(
        &'a self,
        lock: &'a LockGuard,
        record: JournalRecord,
    ) -> BoxFuture<'a, Result<JournalRecord, StateError>> {
        Box::pin(self.append_journal_now(lock, record))
    }

    fn read_audit(&self) -> BoxFuture<'_, Result<Vec<AuditRecord>, StateError>> {
        Box::pin(self.read_audit_now())
    }

    fn append_audit<'a>(
        &'a self,
        record: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(self.append_audit_now(record))
    }
}

#[cfg(test)]
#[path = "object_backend_tests.rs"]
mod tests;
