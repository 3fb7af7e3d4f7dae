//! One interface over where `apply` keeps its state, journal, audit log and lock, so that the
//! executor is written once: [`LocalBackend`] here (a directory), and
//! [`super::ObjectBackend`] for S3 (shared between machines).
//!
//! # Why the methods return futures
//!
//! The executor is already async: every cloud call it makes is a
//! [`BoxFuture`] from the provider traits. The S3 backend is async
//! too (aws-sdk-s3). Had this trait been synchronous, the S3 backend would have to block inside
//! the executor's runtime (`block_in_place`, which only works on a multi-threaded runtime and
//! stalls a worker), and the lock's polling would sleep a runtime thread. With `BoxFuture`
//! returns the executor simply `.await`s each step in order, the trait stays object-safe
//! (`Box<dyn StateBackend>` picked from `[state] backend`), and the local backend pays only a
//! boxed ready future: its file operations are small, fsync'd and done inline.
//!
//! # Writes need the lock
//!
//! [`StateBackend::write_state`] and [`StateBackend::append_journal`] take the [`LockGuard`] as
//! proof; the backend also checks that the lock is still this guard's (someone may have
//! force-unlocked it, or taken over its expired lease) and fails with [`StateError::LockLost`]
//! otherwise; the S3 backend renews the guard's lease there when it is due. The audit log is
//! append-only and needs no lock.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gpucap_provider::BoxFuture;

use super::audit::{AuditLog, AuditRecord};
use super::error::StateError;
use super::journal::{self, Journal, JournalRead, JournalRecord};
use super::lock::{self, LockGuard, LockInfo, LockOptions};
use super::managed::{STATE_VERSION, State};
use super::{StateRef, fsio};
use crate::config::{StateBackendKind, StateSettings};

/// Where `apply` keeps what it has done.
pub trait StateBackend: Send + Sync {
    /// Where this is, for messages (`.gpucap/` or `s3://bucket/key`).
    fn location(&self) -> String;

    /// Takes the lock, waiting up to `options.timeout` for the holder to let go; then fails
    /// with [`StateError::Locked`], which names the holder.
    fn lock<'a>(&'a self, options: &'a LockOptions)
    -> BoxFuture<'a, Result<LockGuard, StateError>>;

    /// Who holds the lock now, if anyone.
    fn read_lock(&self) -> BoxFuture<'_, Result<Option<LockInfo>, StateError>>;

    /// Removes the lock if its id is `id`; refuses otherwise. Returns what was removed.
    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>>;

    /// The state, or `None` before the first write.
    fn read_state(&self) -> BoxFuture<'_, Result<Option<State>, StateError>>;

    /// The lineage and serial a plan made now records ([`StateRef::NONE`] without a state).
    fn state_ref(&self) -> BoxFuture<'_, Result<StateRef, StateError>> {
        Box::pin(async move {
            Ok(self
                .read_state()
                .await?
                .map_or(StateRef::NONE, |s| s.reference()))
        })
    }

    /// Writes `state` atomically and increments `state.serial`. Fails with
    /// [`StateError::StateChanged`] unless `state` has the lineage and serial of the state
    /// stored now (i.e. it was read, or last written, by this caller).
    fn write_state<'a>(
        &'a self,
        lock: &'a LockGuard,
        state: &'a mut State,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// The whole journal (a torn last line skipped, see [`journal`]).
    fn read_journal(&self) -> BoxFuture<'_, Result<JournalRead, StateError>>;

    /// The journal records recovery must look at: those after the last point
    /// [`StateBackend::mark_settled`] recorded (all of them, for a backend that keeps no such
    /// point). A journal that only grows would otherwise be read whole by every run.
    fn read_unsettled_journal(&self) -> BoxFuture<'_, Result<JournalRead, StateError>> {
        self.read_journal()
    }

    /// Records that every journal record up to `seq` is settled and its effect written to the
    /// state, so later runs need not read them to recover. The default keeps nothing.
    fn mark_settled<'a>(
        &'a self,
        lock: &'a LockGuard,
        seq: u64,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let _ = (lock, seq);
        Box::pin(async { Ok(()) })
    }

    /// Appends one record durably (fsync'd, or stored, before the future resolves) with the
    /// next seq, and returns it with that seq. Send the cloud call only after this returns.
    fn append_journal<'a>(
        &'a self,
        lock: &'a LockGuard,
        record: JournalRecord,
    ) -> BoxFuture<'a, Result<JournalRecord, StateError>>;

    /// Every audit record, oldest first.
    fn read_audit(&self) -> BoxFuture<'_, Result<Vec<AuditRecord>, StateError>>;

    /// Appends one audit record durably.
    fn append_audit<'a>(&'a self, record: &'a AuditRecord)
    -> BoxFuture<'a, Result<(), StateError>>;
}

/// The backend `[state]` configures; relative directories are relative to `config_dir` (the
/// directory of `gpucap.toml`). Fails only when the build lacks the configured backend (S3
/// without the `aws` feature); nothing is read or connected until the first call.
pub fn open(
    settings: &StateSettings,
    config_dir: &Path,
) -> Result<Box<dyn StateBackend>, StateError> {
    match settings.backend {
        StateBackendKind::Local => Ok(Box::new(LocalBackend::new(config_dir.join(settings.dir())))),
        StateBackendKind::S3 => super::s3::open(settings),
    }
}

/// State in a local directory (default `.gpucap/` beside `gpucap.toml`):
/// `state.json`, `journal.jsonl`, `audit.jsonl` and, while locked, `lock.json`. The directory is
/// created on first write.
#[derive(Debug)]
pub struct LocalBackend {
    dir: PathBuf,
    /// The journal opened under the lock with this id (reopened under another lock, since
    /// another process may have appended in between).
    journal: Mutex<Option<(String, Journal)>>,
}

impl LocalBackend {
    pub const STATE_FILE: &str = "state.json";
    pub const JOURNAL_FILE: &str = "journal.jsonl";
    pub const AUDIT_FILE: &str = "audit.jsonl";
    pub const LOCK_FILE: &str = "lock.json";

    pub fn new(dir: impl Into<PathBuf>) -> LocalBackend {
        LocalBackend {
            dir: dir.into(),
            journal: Mutex::new(None),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn state_path(&self) -> PathBuf {
        self.dir.join(Self::STATE_FILE)
    }

    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(Self::JOURNAL_FILE)
    }

    pub fn audit_path(&self) -> PathBuf {
        self.dir.join(Self::AUDIT_FILE)
    }

    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(Self::LOCK_FILE)
    }

    /// Fails unless `guard` is this backend's lock and still held.
    fn check_guard(&self, guard: &LockGuard) -> Result<(), StateError> {
        if guard.location() != self.location() {
            return Err(StateError::ForeignLock {
                id: guard.id().to_string(),
                location: self.location(),
            });
        }
        lock::ensure_held(&self.lock_path(), guard.id())
    }

    fn read_state_now(&self) -> Result<Option<State>, StateError> {
        let path = self.state_path();
        match fsio::read_optional(&path)? {
            None => Ok(None),
            Some(bytes) => State::parse(&bytes, &path).map(Some),
        }
    }

    fn write_state_now(&self, guard: &LockGuard, state: &mut State) -> Result<(), StateError> {
        self.check_guard(guard)?;
        let path = self.state_path();
        let (disk_lineage, disk_serial) = match self.read_state_now()? {
            Some(disk) => (Some(disk.lineage), disk.serial),
            None => (None, 0),
        };
        let same = match &disk_lineage {
            Some(l) => *l == state.lineage && disk_serial == state.serial,
            None => state.serial == 0,
        };
        if !same {
            return Err(StateError::StateChanged {
                path,
                read_lineage: state.lineage.clone(),
                read_serial: state.serial,
                disk_lineage: disk_lineage.unwrap_or_else(|| "(none)".to_string()),
                disk_serial,
            });
        }
        let mut next = state.clone();
        next.version = STATE_VERSION;
        next.serial = state.serial + 1;
        fsio::remove_stale_temps(&path);
        fsio::write_atomic(&path, &next.to_bytes()?)?;
        *state = next;
        Ok(())
    }

    fn append_journal_now(
        &self,
        guard: &LockGuard,
        record: JournalRecord,
    ) -> Result<JournalRecord, StateError> {
        self.check_guard(guard)?;
        let mut slot = self
            .journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.as_ref().is_none_or(|(id, _)| id != guard.id()) {
            *slot = Some((guard.id().to_string(), Journal::open(&self.journal_path())?));
        }
        match slot.as_mut() {
            Some((_, j)) => j.append(record),
            None => unreachable_journal(),
        }
    }
}

/// Never reached: the slot was filled just above. An error rather than a panic all the same.
fn unreachable_journal() -> Result<JournalRecord, StateError> {
    Err(StateError::Io {
        op: "open",
        path: PathBuf::from(LocalBackend::JOURNAL_FILE),
        source: std::io::Error::other("journal not open"),
    })
}

impl StateBackend for LocalBackend {
    fn location(&self) -> String {
        format!("{}/", self.dir.display())
    }

    fn lock<'a>(
        &'a self,
        options: &'a LockOptions,
    ) -> BoxFuture<'a, Result<LockGuard, StateError>> {
        Box::pin(async move {
            let acquired =
                lock::acquire_local(&self.lock_path(), &self.location(), options).await?;
            let guard = acquired.guard;
            if let Some(previous) = acquired.took_over {
                let why = format!(
                    "whose process (pid {} on this host) is no longer running",
                    previous.pid
                );
                let record = AuditRecord::lock_takeover(guard.id(), &previous, &why);
                if let Err(e) = AuditLog::new(&self.audit_path()).append(&record) {
                    let _ = guard.unlock().await;
                    return Err(e);
                }
            }
            Ok(guard)
        })
    }

    fn read_lock(&self) -> BoxFuture<'_, Result<Option<LockInfo>, StateError>> {
        Box::pin(std::future::ready(lock::read_lock(&self.lock_path())))
    }

    fn force_unlock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LockInfo, StateError>> {
        Box::pin(std::future::ready(lock::force_unlock_local(
            &self.lock_path(),
            id,
        )))
    }

    fn read_state(&self) -> BoxFuture<'_, Result<Option<State>, StateError>> {
        Box::pin(std::future::ready(self.read_state_now()))
    }

    fn write_state<'a>(
        &'a self,
        lock: &'a LockGuard,
        state: &'a mut State,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(std::future::ready(self.write_state_now(lock, state)))
    }

    fn read_journal(&self) -> BoxFuture<'_, Result<JournalRead, StateError>> {
        Box::pin(std::future::ready(journal::read(&self.journal_path())))
    }

    fn append_journal<'a>(
        &'a self,
        lock: &'a LockGuard,
        record: JournalRecord,
    ) -> BoxFuture<'a, Result<JournalRecord, StateError>> {
        Box::pin(std::future::ready(self.append_journal_now(lock, record)))
    }

    fn read_audit(&self) -> BoxFuture<'_, Result<Vec<AuditRecord>, StateError>> {
        Box::pin(std::future::ready(AuditLog::new(&self.audit_path()).read()))
    }

    fn append_audit<'a>(
        &'a self,
        record: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(std::future::ready(
            AuditLog::new(&self.audit_path()).append(record),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::journal::Step;
    use crate::state::managed::tests::block;
    use gpucap_provider::capacity::Idempotency;

    use crate::state::test_runtime as rt;

    fn lock(b: &LocalBackend) -> LockGuard {
        rt().block_on(b.lock(&LockOptions::new("apply"))).unwrap()
    }

    #[test]
    fn a_dead_holder_s_lock_is_taken_over_and_audited() {
        if !Path::new("/proc/self").exists() {
            return; // where pids cannot be checked, nothing is judged gone
        }
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join(".gpucap"));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let mut dead = LockInfo::new("apply", std::time::Duration::from_secs(3600));
        dead.pid = child.id();
        std::fs::create_dir_all(b.dir()).unwrap();
        std::fs::write(b.lock_path(), serde_json::to_vec(&dead).unwrap()).unwrap();

        let guard = lock(&b);
        assert_ne!(guard.id(), dead.id);
        let audit = rt().block_on(b.read_audit()).unwrap();
        assert_eq!(audit.len(), 1, "{audit:?}");
        let record = &audit[0];
        assert_eq!(record.outcome, "lock-takeover");
        assert_eq!(record.run, guard.id());
        let detail = record.detail.as_deref().unwrap();
        assert!(detail.contains(&dead.id), "{detail}");
        assert!(
            detail.contains(&format!(
                "pid {} on this host) is no longer running",
                dead.pid
            )),
            "{detail}"
        );
        // Writes under the new lock work, and its release removes it.
        let mut state = State::new();
        rt().block_on(b.write_state(&guard, &mut state)).unwrap();
        rt().block_on(guard.unlock()).unwrap();
        assert!(!b.lock_path().exists());
    }

    #[test]
    fn serial_increments_on_every_write_and_lineage_is_made_once() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join(".gpucap"));
        let rt = rt();
        assert!(rt.block_on(b.read_state()).unwrap().is_none());
        assert_eq!(rt.block_on(b.state_ref()).unwrap(), StateRef::NONE);
        let guard = lock(&b);
        let mut state = State::new();
        let lineage = state.lineage.clone();
        rt.block_on(b.write_state(&guard, &mut state)).unwrap();
        assert_eq!(state.serial, 1);
        state.upsert(block("cr-1", "a1"));
        rt.block_on(b.write_state(&guard, &mut state)).unwrap();
        rt.block_on(b.write_state(&guard, &mut state)).unwrap();
        let read = rt.block_on(b.read_state()).unwrap().unwrap();
        assert_eq!(read, state);
        assert_eq!((read.serial, read.lineage.as_str()), (3, lineage.as_str()));

        // A write based on an older read is refused, as is a state of another lineage.
        let mut stale = read.clone();
        stale.serial = 2;
        let err = rt.block_on(b.write_state(&guard, &mut stale)).unwrap_err();
        assert!(matches!(err, StateError::StateChanged { .. }), "{err:?}");
        let mut other = State::new();
        other.serial = 3;
        assert!(rt.block_on(b.write_state(&guard, &mut other)).is_err());
        let mut fresh = State::new();
        assert!(rt.block_on(b.write_state(&guard, &mut fresh)).is_err());
        assert_eq!(rt.block_on(b.read_state()).unwrap().unwrap().serial, 3);
        rt.block_on(guard.unlock()).unwrap();
    }

    #[test]
    fn an_interrupted_write_leaves_the_old_state_readable() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path());
        let rt = rt();
        let guard = lock(&b);
        let mut state = State::new();
        state.upsert(block("cr-1", "a1"));
        rt.block_on(b.write_state(&guard, &mut state)).unwrap();
        // A crash after the temp file was written but before the rename.
        let temp = d.path().join(".state.json.tmp-2f1c");
        std::fs::write(&temp, b"{\"version\": 1, \"lineage\": \"half").unwrap();
        let read = rt.block_on(b.read_state()).unwrap().unwrap();
        assert_eq!(read, state);
        // The next locked write succeeds and clears the leftover.
        rt.block_on(b.write_state(&guard, &mut state)).unwrap();
        assert!(!temp.exists());
        assert_eq!(state.serial, 2);
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
        rt.block_on(guard.unlock()).unwrap();
    }

    #[test]
    fn a_corrupt_state_file_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path());
        std::fs::write(b.state_path(), b"{\n  \"version\": 1,\n  oops\n}").unwrap();
        let err = rt().block_on(b.read_state()).unwrap_err().to_string();
        assert!(err.contains("state.json:3:"), "{err}");
    }

    #[test]
    fn writes_need_the_lock_still_held() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join("a"));
        let other = LocalBackend::new(d.path().join("b"));
        let rt = rt();
        let theirs = lock(&other);
        let mut state = State::new();
        let err = rt.block_on(b.write_state(&theirs, &mut state)).unwrap_err();
        assert!(matches!(err, StateError::ForeignLock { .. }), "{err:?}");
        let guard = lock(&b);
        rt.block_on(b.force_unlock(guard.id())).unwrap();
        let err = rt.block_on(b.write_state(&guard, &mut state)).unwrap_err();
        assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
        let id = Idempotency {
            plan: "sha256:ab".into(),
            action: "a1".into(),
            intent: "i-1".into(),
            client_token: None,
        };
        let rec = JournalRecord::intent("r", &id, "x", serde_json::Value::Null);
        assert!(rt.block_on(b.append_journal(&guard, rec)).is_err());
        assert!(rt.block_on(b.read_journal()).unwrap().records.is_empty());
        assert_eq!(state.serial, 0);
    }

    #[test]
    fn the_journal_continues_across_lock_sessions() {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path());
        let rt = rt();
        let id = Idempotency {
            plan: "sha256:ab".into(),
            action: "a1".into(),
            intent: "i-1".into(),
            client_token: Some("gpucap-ab-a1-0".into()),
        };
        let guard = lock(&b);
        let i = rt
            .block_on(b.append_journal(
                &guard,
                JournalRecord::intent(
                    "r1",
                    &id,
                    "ec2:CreateCapacityReservation",
                    serde_json::json!({}),
                ),
            ))
            .unwrap();
        rt.block_on(b.append_journal(&guard, i.next(Step::Sent)))
            .unwrap();
        rt.block_on(guard.unlock()).unwrap();

        // Another process appends meanwhile (a second backend on the same directory).
        let b2 = LocalBackend::new(d.path());
        let g2 = lock(&b2);
        let u = rt
            .block_on(b2.append_journal(&g2, i.next(Step::Unknown)))
            .unwrap();
        assert_eq!(u.seq, 3);
        rt.block_on(g2.unlock()).unwrap();

        let guard = lock(&b);
        let history = rt.block_on(b.read_journal()).unwrap();
        let open = journal::unresolved(&history.records);
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].step, Step::Unknown);
        let r = rt
            .block_on(b.append_journal(&guard, open[0].next(Step::Reconciled)))
            .unwrap();
        assert_eq!(r.seq, 4);
        let history = rt.block_on(b.read_journal()).unwrap();
        assert!(journal::unresolved(&history.records).is_empty());

        let audit = AuditRecord::of(&r, "alice", None);
        rt.block_on(b.append_audit(&audit)).unwrap();
        assert_eq!(rt.block_on(b.read_audit()).unwrap(), vec![audit]);
        rt.block_on(guard.unlock()).unwrap();
    }

    #[test]
    fn open_uses_the_configured_directory_beside_the_config() {
        let settings = StateSettings::default();
        let b = open(&settings, Path::new("/repo/infra")).unwrap();
        assert_eq!(b.location(), "/repo/infra/.gpucap/");
    }
}
