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
//! `gpucap force-unlock ID`. A lock whose holder is a process on this host that is no longer
//! running (a killed `apply`: a CI timeout, an OOM kill, a closed laptop) is taken over at once,
//! as Terraform's local backend, whose OS lock dies with its process, behaves; the backend
//! writes an audit record of it. Local leases are not judged: a run that is merely slow must not
//! be joined by a second one, and a holder on another host (a shared disk) is never judged
//! gone, since its pid cannot be checked from here.
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

use gpucap_provider::BoxFuture;

use super::error::StateError;
use super::fsio;
pub use super::holder::{LockInfo, holder_gone, host, who};

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

fn encode(info: &LockInfo) -> Result<Vec<u8>, StateError> {
    let mut bytes = serde_json::to_vec_pretty(info).map_err(|source| StateError::Encode {
        what: "lock",
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// One attempt at creating the lock file. `Ok(None)`: someone else holds it.
fn try_create(path: &Path, info: &LockInfo) -> Result<Option<()>, StateError> {
    let dir = lock_dir(path);
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
        f.write_all(&encode(info)?)
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

fn lock_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An OS lock (`flock`) on the lock file's directory, held while a lock file is replaced or
/// removed by someone other than its holder (a takeover, a `force-unlock`), so that two of
/// them cannot both act on the same holder. The kernel releases it if the process dies, so it
/// never needs healing itself. `None` where a directory cannot be locked (then nothing is
/// taken over; see [`take_over_if_gone`]).
fn dir_lock(path: &Path, wait: bool) -> Option<std::fs::File> {
    let dir = std::fs::File::open(lock_dir(path)).ok()?;
    let locked = if wait {
        dir.lock().is_ok()
    } else {
        dir.try_lock().is_ok()
    };
    locked.then_some(dir)
}

/// Replaces the lock file at `path` with `info` when its holder is a process on this host
/// that no longer runs ([`holder_gone`]), as an OS lock would have let go when it died.
/// Returns the holder replaced; `None` when the holder is alive, elsewhere, unreadable, or
/// another taker is at work. The rename is atomic: readers see the old holder or the new one.
fn take_over_if_gone(path: &Path, info: &LockInfo) -> Result<Option<LockInfo>, StateError> {
    let Ok(Some(holder)) = read_lock(path) else {
        return Ok(None);
    };
    if !holder_gone(&holder) {
        return Ok(None);
    }
    let Some(_serialised) = dir_lock(path, false) else {
        return Ok(None);
    };
    // Again under the directory lock: the file may have been removed or replaced meanwhile.
    match read_lock(path) {
        Ok(Some(still)) if still == holder => {}
        _ => return Ok(None),
    }
    fsio::write_atomic(path, &encode(info)?)?;
    tracing::warn!(
        "took over the state lock {} of {} on {} (pid {}, `{}`, since {}): that process is no longer running",
        holder.id,
        holder.who,
        holder.host,
        holder.pid,
        holder.operation,
        holder.created_at.to_rfc3339()
    );
    Ok(Some(holder))
}

/// A lock taken, and the lock it replaced if it took one over: an expired lease in an object
/// store, or locally a holder that is no longer running. The backend audits the takeover.
#[derive(Debug)]
pub struct Acquired {
    pub guard: LockGuard,
    pub took_over: Option<LockInfo>,
}

/// Takes the lock file at `path`, waiting up to `options.timeout` for a holder to let go. A
/// holder that died on this host without letting go is taken over at once.
pub async fn acquire_local(
    path: &Path,
    location: &str,
    options: &LockOptions,
) -> Result<Acquired, StateError> {
    let info = LockInfo::new(
        &options.operation,
        options.lease.unwrap_or(LockOptions::DEFAULT_LEASE),
    );
    let held = |info: LockInfo, took_over: Option<LockInfo>| {
        let release = LocalRelease {
            path: path.to_path_buf(),
            id: info.id.clone(),
        };
        Acquired {
            guard: LockGuard::new(info, location.to_string(), Box::new(release)),
            took_over,
        }
    };
    let deadline = Instant::now() + options.timeout;
    loop {
        if try_create(path, &info)?.is_some() {
            return Ok(held(info, None));
        }
        if let Some(previous) = take_over_if_gone(path, &info)? {
            return Ok(held(info, Some(previous)));
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
                    Some(()) => return Ok(held(info, None)),
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
/// removed. The read and the removal are one step for other force-unlocks and takeovers, which
/// take the same directory lock.
pub fn force_unlock_local(path: &Path, id: &str) -> Result<LockInfo, StateError> {
    // Not at the same time as a takeover of the same holder (best effort where directories
    // cannot be locked).
    let _serialised = dir_lock(path, true);
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
    fsio::sync_dir(lock_dir(path))
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

    fn take_or_take_over(path: &Path, timeout_ms: u64) -> Result<Acquired, StateError> {
        let options = LockOptions::new("apply")
            .timeout(Duration::from_millis(timeout_ms))
            .poll(Duration::from_millis(20));
        rt().block_on(acquire_local(path, "here/", &options))
    }

    fn take(path: &Path, timeout_ms: u64) -> Result<LockGuard, StateError> {
        take_or_take_over(path, timeout_ms).map(|a| a.guard)
    }

    /// A lock file held by `pid` on this host.
    fn lock_of(path: &Path, pid: u32) -> LockInfo {
        let mut info = LockInfo::new("apply", Duration::from_secs(1));
        info.pid = pid;
        std::fs::write(path, serde_json::to_vec(&info).unwrap()).unwrap();
        info
    }

    /// The pid of a process that ran and was reaped.
    fn dead_pid() -> u32 {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
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
    fn a_lock_left_by_a_dead_process_on_this_host_is_taken_over() {
        if !Path::new("/proc/self").exists() {
            return; // where pids cannot be checked, nothing is judged gone
        }
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let dead = lock_of(&path, dead_pid());
        assert!(holder_gone(&dead));
        let acquired = take_or_take_over(&path, 0).unwrap();
        assert_eq!(acquired.took_over.as_ref(), Some(&dead));
        let on_disk = read_lock(&path).unwrap().unwrap();
        assert_eq!(&on_disk, acquired.guard.info());
        assert_eq!(on_disk.pid, std::process::id());
        // The new holder's lock is a lock like any other: released by its guard.
        rt().block_on(acquired.guard.unlock()).unwrap();
        assert!(!path.exists());
        // No temp file of the atomic replacement is left beside it.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_live_holder_or_one_on_another_host_is_refused_and_named() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        // The test's parent (cargo, or the shell) is alive, and not this process.
        let live = lock_of(&path, std::os::unix::process::parent_id());
        let err = take_or_take_over(&path, 0).unwrap_err();
        match &err {
            StateError::Locked {
                holder,
                holder_gone,
                ..
            } => {
                assert_eq!(**holder, live);
                assert!(!holder_gone);
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(!msg.contains("no longer running"), "{msg}");
        assert!(
            msg.contains(&format!("gpucap force-unlock {}", live.id)),
            "{msg}"
        );
        assert_eq!(read_lock(&path).unwrap().unwrap(), live, "left as it was");

        // A dead pid on another host is never judged: its pid means nothing here.
        let mut elsewhere = lock_of(&path, dead_pid());
        elsewhere.host = "elsewhere".into();
        std::fs::write(&path, serde_json::to_vec(&elsewhere).unwrap()).unwrap();
        assert!(!holder_gone(&elsewhere));
        let err = take_or_take_over(&path, 0).unwrap_err();
        assert!(matches!(err, StateError::Locked { .. }), "{err:?}");
        assert!(err.to_string().contains("on elsewhere"), "{err}");
        assert_eq!(read_lock(&path).unwrap().unwrap(), elsewhere);
    }

    #[test]
    fn of_many_takers_of_a_dead_holder_exactly_one_wins() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lock.json");
        let dead = lock_of(&path, dead_pid());
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let takers: Vec<_> = (0..8)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    // Each keeps what it got: a winner's guard must outlive the race.
                    take_or_take_over(&path, 0)
                })
            })
            .collect();
        let results: Vec<_> = takers.into_iter().map(|t| t.join().unwrap()).collect();
        let won: Vec<&Acquired> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "{results:?}");
        assert_eq!(won[0].took_over.as_ref(), Some(&dead));
        assert_eq!(read_lock(&path).unwrap().unwrap().id, won[0].guard.id());
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

        // A holder that died without unlocking: taken over by the next locker, at once.
        let (mut child, child_lock) = spawn_child(d.path(), 0, true);
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        assert_eq!(read_lock(&path).unwrap().unwrap().id, child_lock);
        let acquired = take_or_take_over(&path, 0).unwrap();
        if Path::new("/proc/self").exists() {
            let previous = acquired.took_over.as_ref().expect("taken over");
            assert_eq!(
                (previous.id.as_str(), previous.pid),
                (child_lock.as_str(), pid)
            );
        }
        rt().block_on(acquired.guard.unlock()).unwrap();
        assert!(!path.exists());
    }
}
