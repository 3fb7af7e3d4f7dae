//! The state lock: while `apply` (or `release`, `force-unlock` aside) runs, nobody else may
//! touch the state or the journal, or two runs could both see an action as not done yet and
//! both buy it. The lock is a small JSON document naming who holds it:
//!
//! ```json
//! {"id": "<uuid>", "who": "alice", "host": "ci-runner-7", "pid": 4242, "operation": "apply",
//!  "created_at": "…", "lease_until": "…"}
//! ```
//!
//! The local backend creates it with `O_EXCL` (`create_new`), so exactly one process wins. A
//! second locker polls until its timeout, then fails naming the holder and suggesting
//! `gpucap force-unlock ID`. Local locks are not taken over when their lease runs out: on one
//! machine a dead holder is *diagnosed* (same host, pid no longer running) and left to
//! `force-unlock`, and a run that is merely slow must not be joined by a second one.
//!
//! The object-store backend ([`super::object_lock`]) shares the lock between machines, where no
//! pid can be checked: there the lease is the holder's promise to renew before it runs out,
//! and an expired lease may be taken over, by a compare-and-swap on the lock's ETag so that
//! only one taker wins. Its guards carry the lock's current version ([`HeldVersion`]).

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpucap_provider::BoxFuture;
use serde::{Deserialize, Serialize};

use super::error::StateError;
use super::fsio;

/// Who holds the lock, and for what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockInfo {
    /// A UUID v4; `force-unlock` needs it.
    pub id: String,
    /// `GITHUB_ACTOR`, `GITLAB_USER_LOGIN` or `USER`.
    pub who: String,
    pub host: String,
    pub pid: u32,
    /// `apply`, `release`, …
    pub operation: String,
    pub created_at: DateTime<Utc>,
    /// How long the holder meant to hold it. Informational for the local backend.
    pub lease_until: DateTime<Utc>,
}

impl LockInfo {
    /// A lock for `operation` by this process, now, for `lease`.
    pub fn new(operation: &str, lease: Duration) -> LockInfo {
        let now = Utc::now();
        let lease = chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            who: who(),
            host: host(),
            pid: std::process::id(),
            operation: operation.to_string(),
            created_at: now,
            lease_until: now
                .checked_add_signed(lease)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        }
    }
}

/// How to take the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub operation: String,
    /// How long to wait for another holder to let go. Zero: try once.
    pub timeout: Duration,
    /// How long this holder means to hold it (written as `lease_until`). `None`: the
    /// backend's own (`[state] lock_lease` for S3; one hour).
    pub lease: Option<Duration>,
    /// How often to look again while waiting.
    pub poll: Duration,
}

impl LockOptions {
    /// The lease a backend gives when neither the caller nor its configuration says.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(3600);

    /// Try once, the backend's lease, poll every half second.
    pub fn new(operation: &str) -> LockOptions {
        LockOptions {
            operation: operation.to_string(),
            timeout: Duration::ZERO,
            lease: None,
            poll: Duration::from_millis(500),
        }
    }

    pub fn timeout(mut self, timeout: Duration) -> LockOptions {
        self.timeout = timeout;
        self
    }

    pub fn lease(mut self, lease: Duration) -> LockOptions {
        self.lease = Some(lease);
        self
    }

    pub fn poll(mut self, poll: Duration) -> LockOptions {
        self.poll = poll;
        self
    }
}

/// The user gpucap runs as: the CI actor when there is one.
pub fn who() -> String {
    ["GITHUB_ACTOR", "GITLAB_USER_LOGIN", "USER", "USERNAME"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// This machine's host name (without a libc call: the kernel's file, then the environment).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| {
            ["HOSTNAME", "COMPUTERNAME"]
                .iter()
                .filter_map(|k| std::env::var(k).ok())
                .find(|v| !v.trim().is_empty())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Whether the lock's holder is a process on this host that no longer runs. Only answers `true`
/// where it can tell (Linux `/proc`); a reused pid makes it answer `false`, never wrongly `true`.
pub fn holder_gone(info: &LockInfo) -> bool {
    info.host == host()
        && info.pid != std::process::id()
        && Path::new("/proc/self").exists()
        && !Path::new("/proc").join(info.pid.to_string()).exists()
}

/// How a held lock lets go. The guard calls [`LockRelease::release`] from
/// [`LockGuard::unlock`], and [`LockRelease::release_on_drop`] when dropped without it.
pub trait LockRelease: Send + Sync {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>>;
    /// Best effort, without waiting or reporting (a `Drop` cannot).
    fn release_on_drop(self: Box<Self>);
}

/// A held lock. Dropping it releases the lock (best effort); [`LockGuard::unlock`] releases it
/// and reports failures. State writes take `&LockGuard` as proof the caller holds the lock.
pub struct LockGuard {
    info: LockInfo,
    location: String,
    release: Option<Box<dyn LockRelease>>,
    version: Option<Arc<HeldVersion>>,
}

/// The version of a lock kept in an object store as its holder last wrote it: the ETag, and
/// the lock document with the lease it carries. Writes under the lock check the stored lock
/// still has this ETag, a lease renewal replaces it, and the release deletes only this
/// version. Shared by the guard and its release (a renewal through one is seen by the other),
/// hence the interior mutability.
#[derive(Debug)]
pub struct HeldVersion {
    current: Mutex<Held>,
}

/// See [`HeldVersion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub etag: String,
    pub info: LockInfo,
    /// How long each renewal extends the lease.
    pub lease: Duration,
}

impl HeldVersion {
    pub fn new(held: Held) -> HeldVersion {
        HeldVersion {
            current: Mutex::new(held),
        }
    }

    pub fn get(&self) -> Held {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, held: Held) {
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = held;
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("info", &self.info)
            .field("location", &self.location)
            .field("held", &self.release.is_some())
            .finish()
    }
}

impl LockGuard {
    /// For backends: a guard for the lock `info` at `location` (the backend's
    /// [`super::StateBackend::location`]).
    pub fn new(info: LockInfo, location: String, release: Box<dyn LockRelease>) -> LockGuard {
        LockGuard {
            info,
            location,
            release: Some(release),
            version: None,
        }
    }

    /// For object-store backends: a guard that also carries the lock's current version.
    pub fn versioned(
        info: LockInfo,
        location: String,
        release: Box<dyn LockRelease>,
        version: Arc<HeldVersion>,
    ) -> LockGuard {
        LockGuard {
            info,
            location,
            release: Some(release),
            version: Some(version),
        }
    }

    /// The lock's current version, for guards of object-store backends.
    pub fn version(&self) -> Option<&Arc<HeldVersion>> {
        self.version.as_ref()
    }

    /// The lock as taken (its lease as first written; renewals are in [`Self::version`]).
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// Where the locked state is.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Releases the lock, reporting a failure (e.g. it was force-unlocked meanwhile).
    pub async fn unlock(mut self) -> Result<(), StateError> {
        match self.release.take() {
            Some(r) => r.release().await,
            None => Ok(()),
        }
    }
}

/// Lets go of `guard` (if any) however the run under it ended, and returns the run's result: a
/// failure to unlock fails a run that succeeded, and is only logged beside a run that failed.
/// A shared (S3) lock left behind would stop every other machine until its lease ran out.
pub async fn unlock_after<T, E: From<StateError>>(
    guard: Option<LockGuard>,
    result: Result<T, E>,
) -> Result<T, E> {
    if let Some(guard) = guard {
        match (guard.unlock().await, &result) {
            (Ok(()), _) => {}
            (Err(e), Ok(_)) => return Err(e.into()),
            (Err(e), Err(_)) => tracing::warn!("releasing the state lock after the failure: {e}"),
        }
    }
    result
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r.release_on_drop();
        }
    }
}

// ---- the local lock file ----

/// Reads the lock file: `None` when there is none.
pub fn read_lock(path: &Path) -> Result<Option<LockInfo>, StateError> {
    let Some(bytes) = fsio::read_optional(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StateError::LockUnreadable {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}

/// One attempt at creating the lock file. `Ok(None)`: someone else holds it.
fn try_create(path: &Path, info: &LockInfo) -> Result<Option<()>, StateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(StateError::io("create directory", dir))?;
    let mut f = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => {
            return Err(StateError::Io {
                op: "create the lock file",
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    let written = (|| {
        let mut bytes = serde_json::to_vec_pretty(info).map_err(|source| StateError::Encode {
            what: "lock",
            source,
        })?;
        bytes.push(b'\n');
        f.write_all(&bytes)
            .map_err(StateError::io("write the lock file", path))?;
        f.sync_all().map_err(StateError::io("fsync", path))?;
        fsio::sync_dir(dir)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(Some(()))
}

/// Takes the lock file at `path`, waiting up to `options.timeout` for a holder to let go.
pub async fn acquire_local(
    path: &Path,
    location: &str,
    options: &LockOptions,
) -> Result<LockGuard, StateError> {
    let info = LockInfo::new(
        &options.operation,
        options.lease.unwrap_or(LockOptions::DEFAULT_LEASE),
    );
    let deadline = Instant::now() + options.timeout;
    loop {
        if try_create(path, &info)?.is_some() {
            let release = LocalRelease {
                path: path.to_path_buf(),
                id: info.id.clone(),
            };
            return Ok(LockGuard::new(
                info,
                location.to_string(),
                Box::new(release),
            ));
        }
        let now = Instant::now();
        if now >= deadline {
            // The holder may be between creating and writing its file: that reads as
            // unreadable, and is reported as such only at the deadline.
            return Err(match read_lock(path) {
                Ok(Some(holder)) => StateError::Locked {
                    path: path.to_path_buf(),
                    holder_gone: holder_gone(&holder),
                    holder: Box::new(holder),
                    takeover: false,
                },
                // Released just now: one more try.
                Ok(None) => match try_create(path, &info)? {
                    Some(()) => {
                        let release = LocalRelease {
                            path: path.to_path_buf(),
                            id: info.id.clone(),
                        };
                        return Ok(LockGuard::new(
                            info,
                            location.to_string(),
                            Box::new(release),
                        ));
                    }
                    None => StateError::LockUnreadable {
                        path: path.to_path_buf(),
                        message: "it changed hands while being read".to_string(),
                    },
                },
                Err(e) => e,
            });
        }
        let wait = options
            .poll
            .max(Duration::from_millis(1))
            .min(deadline - now);
        tokio::time::sleep(wait).await;
    }
}

/// Fails with [`StateError::LockLost`] unless the lock file at `path` still holds lock `id`.
pub fn ensure_held(path: &Path, id: &str) -> Result<(), StateError> {
    let lost = |now: String| StateError::LockLost {
        path: path.to_path_buf(),
        id: id.to_string(),
        now,
    };
    match read_lock(path) {
        Ok(Some(info)) if info.id == id => Ok(()),
        Ok(Some(info)) => Err(lost(format!(
            "now holds lock {} of {} on {}",
            info.id, info.who, info.host
        ))),
        Ok(None) => Err(lost("no longer exists".to_string())),
        Err(e) => Err(lost(format!("cannot be read: {e}"))),
    }
}

/// Removes the lock file at `path` if it holds lock `id`; refuses otherwise. Returns what was
/// removed. There is a window between the read and the removal (as in Terraform's S3 unlock);
/// locally only another `force-unlock` can fall into it.
pub fn force_unlock_local(path: &Path, id: &str) -> Result<LockInfo, StateError> {
    let Some(info) = read_lock(path)? else {
        return Err(StateError::NotLocked {
            path: path.to_path_buf(),
        });
    };
    if info.id != id {
        return Err(StateError::LockIdMismatch {
            path: path.to_path_buf(),
            held: info.id,
            given: id.to_string(),
            who: info.who,
            since: info.created_at,
        });
    }
    remove_lock_file(path)?;
    Ok(info)
}

fn remove_lock_file(path: &Path) -> Result<(), StateError> {
    std::fs::remove_file(path).map_err(StateError::io("remove the lock file", path))?;
    fsio::sync_dir(path.parent().unwrap_or(Path::new(".")))
}

struct LocalRelease {
    path: PathBuf,
    id: String,
}

impl LocalRelease {
    fn release_now(&self) -> Result<(), StateError> {
        ensure_held(&self.path, &self.id)?;
        remove_lock_file(&self.path)
    }
}

impl LockRelease for LocalRelease {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        let result = self.release_now();
        Box::pin(async move { result })
    }

    fn release_on_drop(self: Box<Self>) {
        if let Err(e) = self.release_now() {
            tracing::warn!("releasing the state lock {}: {e}", self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    use std::sync::mpsc;

    use crate::state::test_runtime as rt;

    fn take(path: &Path, timeout_ms: u64) -> Result<LockGuard, StateError> {
        let options = LockOptions::new("apply")
            .timeout(Duration::from_millis(timeout_ms))
            .poll(Duration::from_millis(20));
        rt().block_on(acquire_local(path, "here/", &options))
    }

    #[test]
    fn a_second_locker_waits_then_fails_naming_the_holder_or_gets_it_once_released() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = {
            let path = path.clone();
            std::thread::spawn(move || {
                let guard = take(&path, 0).unwrap();
                held_tx.send(guard.info().clone()).unwrap();
                release_rx.recv().unwrap();
                rt().block_on(guard.unlock()).unwrap();
            })
        };
        let info = held_rx.recv().unwrap();

        // A short timeout: waits, then fails naming who, since when and the lock id.
        let started = Instant::now();
        let impatient = {
            let path = path.clone();
            std::thread::spawn(move || take(&path, 300))
        };
        let err = impatient.join().unwrap().unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300));
        match &err {
            StateError::Locked {
                holder,
                holder_gone,
                ..
            } => {
                assert_eq!(**holder, info);
                assert!(!holder_gone, "the holder is this very process");
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("locked by {} on {}", info.who, info.host)),
            "{msg}"
        );
        assert!(msg.contains(&info.created_at.to_rfc3339()), "{msg}");
        assert!(
            msg.contains(&format!("gpucap force-unlock {}", info.id)),
            "{msg}"
        );

        // A patient one gets it once the holder lets go.
        let patient = {
            let path = path.clone();
            std::thread::spawn(move || {
                let guard = take(&path, 10_000)?;
                let id = guard.id().to_string();
                rt().block_on(guard.unlock())?;
                Ok::<_, StateError>(id)
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        let id = patient.join().unwrap().unwrap();
        assert_ne!(id, info.id);
        assert!(!path.exists());
    }

    #[test]
    fn the_lock_file_names_its_holder_and_drop_releases_it() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let guard = take(&path, 0).unwrap();
        let on_disk = read_lock(&path).unwrap().unwrap();
        assert_eq!(&on_disk, guard.info());
        assert_eq!(on_disk.pid, std::process::id());
        assert_eq!(on_disk.operation, "apply");
        assert!(on_disk.lease_until > on_disk.created_at);
        assert!(uuid::Uuid::parse_str(&on_disk.id).is_ok());
        drop(guard);
        assert!(!path.exists());
        assert!(read_lock(&path).unwrap().is_none());
    }

    #[test]
    fn force_unlock_needs_the_right_id() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let guard = take(&path, 0).unwrap();
        let err = force_unlock_local(&path, "not-the-id").unwrap_err();
        assert!(matches!(err, StateError::LockIdMismatch { .. }), "{err:?}");
        assert!(err.to_string().contains(guard.id()), "{err}");
        assert!(path.exists());
        let removed = force_unlock_local(&path, guard.id()).unwrap();
        assert_eq!(&removed, guard.info());
        assert!(!path.exists());
        assert!(matches!(
            force_unlock_local(&path, guard.id()),
            Err(StateError::NotLocked { .. })
        ));
        // The force-unlocked guard finds its lock gone and says so.
        let err = rt().block_on(guard.unlock()).unwrap_err();
        assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
    }

    #[test]
    fn a_lock_left_by_a_dead_process_on_this_host_is_diagnosed_not_taken_over() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let mut child = Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let mut info = LockInfo::new("apply", Duration::from_secs(1));
        info.pid = dead_pid;
        info.lease_until = info.created_at; // expired, too
        std::fs::write(&path, serde_json::to_vec(&info).unwrap()).unwrap();
        let err = take(&path, 0).unwrap_err();
        let msg = err.to_string();
        if Path::new("/proc/self").exists() {
            assert!(
                msg.contains(&format!(
                    "held by pid {dead_pid} on this host, which is no longer running"
                )),
                "{msg}"
            );
        }
        assert!(
            msg.contains(&format!("gpucap force-unlock {}", info.id)),
            "{msg}"
        );
        // Another host's pid is never judged.
        info.host = "elsewhere".into();
        assert!(!holder_gone(&info));
    }

    #[test]
    fn an_unreadable_lock_file_is_reported_at_the_deadline() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        std::fs::write(&path, b"{\"id\": ").unwrap();
        let err = take(&path, 50).unwrap_err();
        assert!(matches!(err, StateError::LockUnreadable { .. }), "{err:?}");
    }

    const CHILD_DIR: &str = "GPUCAP_TEST_LOCK_CHILD_DIR";
    const CHILD_HOLD_MS: &str = "GPUCAP_TEST_LOCK_CHILD_HOLD_MS";
    const CHILD_ABANDON: &str = "GPUCAP_TEST_LOCK_CHILD_ABANDON";

    /// Not a test on its own: the body of the child process of
    /// [`two_processes_compete_for_the_lock`] (a no-op without its environment).
    #[test]
    fn lock_child_process() {
        let Some(dir) = std::env::var_os(CHILD_DIR) else {
            return;
        };
        let hold: u64 = std::env::var(CHILD_HOLD_MS).unwrap().parse().unwrap();
        let guard = take(&Path::new(&dir).join("lock.json"), 0).unwrap();
        println!("LOCKED {}", guard.id());
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        std::thread::sleep(Duration::from_millis(hold));
        if std::env::var_os(CHILD_ABANDON).is_some() {
            // Like a crash: no destructor runs, the lock file stays.
            std::process::exit(0);
        }
        rt().block_on(guard.unlock()).unwrap();
    }

    fn spawn_child(dir: &Path, hold_ms: u64, abandon: bool) -> (std::process::Child, String) {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "state::lock::tests::lock_child_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_HOLD_MS, hold_ms.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if abandon {
            cmd.env(CHILD_ABANDON, "1");
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut lines = stdout.lines();
        while let Some(line) = lines.next() {
            let line = line.unwrap();
            // The harness prints `test … ... ` before the child's own output.
            if let Some((_, id)) = line.split_once("LOCKED ") {
                // Keep draining, or the child's later output fails on a closed pipe.
                std::thread::spawn(move || lines.for_each(drop));
                return (child, id.trim().to_string());
            }
        }
        panic!(
            "the child exited without taking the lock: {:?}",
            child.wait()
        );
    }

    #[test]
    fn two_processes_compete_for_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");

        // A live holder in another process: named, not "gone"; then released and taken.
        let (mut child, child_lock) = spawn_child(d.path(), 1500, false);
        let err = take(&path, 100).unwrap_err();
        match &err {
            StateError::Locked {
                holder,
                holder_gone,
                ..
            } => {
                assert_eq!(holder.pid, child.id());
                assert_eq!(holder.id, child_lock);
                assert!(!holder_gone);
            }
            other => panic!("{other:?}"),
        }
        let guard = take(&path, 20_000).unwrap();
        assert!(child.wait().unwrap().success());
        rt().block_on(guard.unlock()).unwrap();

        // A holder that died without unlocking: diagnosed, then force-unlocked.
        let (mut child, child_lock) = spawn_child(d.path(), 0, true);
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        let err = take(&path, 0).unwrap_err();
        let msg = err.to_string();
        if Path::new("/proc/self").exists() {
            assert!(
                msg.contains(&format!(
                    "held by pid {pid} on this host, which is no longer running"
                )),
                "{msg}"
            );
        }
        assert!(
            msg.contains(&format!("gpucap force-unlock {child_lock}")),
            "{msg}"
        );
        force_unlock_local(&path, &child_lock).unwrap();
        let guard = take(&path, 0).unwrap();
        rt().block_on(guard.unlock()).unwrap();
    }
}
