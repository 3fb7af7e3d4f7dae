//! The state lock as one object in an object store (`<key>.lock` in S3), shared by every
//! machine that runs `gpucap apply` on the same state. The rules, each one request:
//!
//! - **take**: `PutObject` of the [`LockInfo`] JSON with `If-None-Match: *`. Exactly one
//!   writer can create it; the others get a 412, read who holds it, and poll until their
//!   `--lock-timeout`, then fail naming the holder and since when.
//! - **renew**: a long run moves its `lease_until` forward with `PutObject If-Match: <its own
//!   ETag>` once more than half of the lease has gone ([`ObjectLock::ensure_held`], which
//!   every journal append and state write calls first). A 412 there means someone took the
//!   lock: the run stops ([`StateError::LockLost`]).
//! - **take over**: a lock whose `lease_until` has passed may be replaced, but only by
//!   `PutObject If-Match: <the expired lock's ETag>`: of two runs that find the same expired
//!   lock, one write matches and the other gets a 412, so exactly one wins. The takeover is
//!   logged as a warning and the caller records it in the audit log.
//! - **release**: `DeleteObject If-Match: <its own ETag>`, so a run can never delete a lock
//!   someone else took in the meantime (Terraform's S3 lockfile reads, compares the id, then
//!   deletes unconditionally, which has exactly that race).
//! - **force-unlock ID**: read the lock; if its id is ID, `DeleteObject If-Match` on the ETag
//!   of that read. A lock renewed in between is read again; one that changed hands is refused.
//!
//! Leases are judged by the clocks of the machines involved (the holder writes
//! `lease_until`, a taker compares it with its own time), so they must be far longer than any
//! clock skew, and longer than the longest pause between two journal records of a run (one
//! cloud call with its retries and reconciliation wait). The default is one hour.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use gpucap_provider::BoxFuture;
use gpucap_provider::objects::PutCondition;

use super::error::StateError;
pub use super::lock::Acquired;
use super::lock::{self, Held, HeldVersion, LockGuard, LockInfo, LockOptions, LockRelease};
use super::object_io::{ObjectIo, Refused};

/// The lock object at one key.
#[derive(Debug, Clone)]
pub struct ObjectLock {
    io: ObjectIo,
    key: String,
    /// The locked state's location (what guards carry).
    location: String,
}

fn encode(info: &LockInfo) -> Result<Vec<u8>, StateError> {
    let mut bytes = serde_json::to_vec_pretty(info).map_err(|source| StateError::Encode {
        what: "lock",
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// `info` as written now: created now, leased for `lease` from now.
fn fresh(info: &LockInfo, lease: Duration) -> LockInfo {
    let now = Utc::now();
    LockInfo {
        created_at: now,
        lease_until: lease_end(now, lease),
        ..info.clone()
    }
}

fn lease_end(from: chrono::DateTime<Utc>, lease: Duration) -> chrono::DateTime<Utc> {
    chrono::Duration::from_std(lease)
        .ok()
        .and_then(|d| from.checked_add_signed(d))
        .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC)
}

fn holder_words(info: &LockInfo) -> String {
    format!(
        "now holds lock {} of {} on {} (pid {}, `{}`, since {})",
        info.id,
        info.who,
        info.host,
        info.pid,
        info.operation,
        info.created_at.to_rfc3339()
    )
}

impl ObjectLock {
    pub fn new(io: ObjectIo, key: String, location: String) -> ObjectLock {
        ObjectLock { io, key, location }
    }

    /// `s3://bucket/<key>.lock`.
    pub fn url(&self) -> String {
        self.io.url(&self.key)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(self.url())
    }

    /// The lock and its ETag, or `None` when nobody holds it.
    pub async fn read(&self) -> Result<Option<(LockInfo, String)>, StateError> {
        let Some(object) = self.io.get(&self.key).await? else {
            return Ok(None);
        };
        let info =
            serde_json::from_slice(&object.bytes).map_err(|e| StateError::LockUnreadable {
                path: self.path(),
                message: e.to_string(),
            })?;
        Ok(Some((info, object.etag)))
    }

    /// Takes the lock (see the module docs), leased for `options.lease` or else `lease`.
    pub async fn acquire(
        &self,
        options: &LockOptions,
        lease: Duration,
    ) -> Result<Acquired, StateError> {
        let lease = options.lease.unwrap_or(lease);
        let mut info = LockInfo::new(&options.operation, lease);
        let deadline = Instant::now() + options.timeout;
        // What was last seen in the way: a holder, or why the lock could not be read.
        let mut seen: Option<Result<LockInfo, String>> = None;
        let mut quick_retries = 0;
        loop {
            info = fresh(&info, lease);
            if let Ok(etag) = self
                .io
                .put(&self.key, &encode(&info)?, PutCondition::IfNoneMatch)
                .await?
            {
                return Ok(self.held(info, etag, lease, None));
            }
            let mut again_now = false;
            match self.io.get(&self.key).await? {
                // Released between the two calls.
                None => again_now = true,
                Some(object) => match serde_json::from_slice::<LockInfo>(&object.bytes) {
                    Err(e) => seen = Some(Err(e.to_string())),
                    Ok(holder) if holder.lease_until <= Utc::now() => {
                        let mine = fresh(&info, lease);
                        let swapped = self
                            .io
                            .put(
                                &self.key,
                                &encode(&mine)?,
                                PutCondition::IfMatch(object.etag.clone()),
                            )
                            .await?;
                        match swapped {
                            Ok(etag) => {
                                tracing::warn!(
                                    "took over the state lock {} of {} on {} (pid {}, `{}`, since {}): its lease ran out at {}",
                                    holder.id,
                                    holder.who,
                                    holder.host,
                                    holder.pid,
                                    holder.operation,
                                    holder.created_at.to_rfc3339(),
                                    holder.lease_until.to_rfc3339()
                                );
                                return Ok(self.held(mine, etag, lease, Some(holder)));
                            }
                            // Another taker won, or the holder renewed or let go: look again.
                            Err(_) => {
                                again_now = true;
                                seen = Some(Ok(holder));
                            }
                        }
                    }
                    Ok(holder) => seen = Some(Ok(holder)),
                },
            }
            if again_now && quick_retries < 3 {
                quick_retries += 1;
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(match seen {
                    Some(Ok(holder)) => StateError::Locked {
                        path: self.path(),
                        holder_gone: lock::holder_gone(&holder),
                        holder: Box::new(holder),
                        takeover: true,
                    },
                    Some(Err(message)) => StateError::LockUnreadable {
                        path: self.path(),
                        message,
                    },
                    None => StateError::LockUnreadable {
                        path: self.path(),
                        message: "it kept changing hands while being read".to_string(),
                    },
                });
            }
            let wait = options
                .poll
                .max(Duration::from_millis(1))
                .min(deadline - now);
            tokio::time::sleep(wait).await;
        }
    }

    fn held(
        &self,
        info: LockInfo,
        etag: String,
        lease: Duration,
        took_over: Option<LockInfo>,
    ) -> Acquired {
        let version = Arc::new(HeldVersion::new(Held {
            etag,
            info: info.clone(),
            lease,
        }));
        let release = ObjectRelease {
            lock: self.clone(),
            version: version.clone(),
        };
        Acquired {
            guard: LockGuard::versioned(info, self.location.clone(), Box::new(release), version),
            took_over,
        }
    }

    /// Fails with [`StateError::LockLost`] unless the stored lock is still the version this
    /// guard last wrote; renews the lease when more than half of it has gone.
    pub async fn ensure_held(&self, guard: &LockGuard) -> Result<(), StateError> {
        let Some(version) = guard.version() else {
            return Err(StateError::ForeignLock {
                id: guard.id().to_string(),
                location: self.location.clone(),
            });
        };
        let held = version.get();
        let lost = |now: String| StateError::LockLost {
            path: self.path(),
            id: guard.id().to_string(),
            now,
        };
        match self.io.get(&self.key).await? {
            None => return Err(lost("no longer exists".to_string())),
            Some(object) if object.etag != held.etag => {
                return Err(lost(
                    match serde_json::from_slice::<LockInfo>(&object.bytes) {
                        Ok(info) => holder_words(&info),
                        Err(e) => format!("was replaced by something unreadable: {e}"),
                    },
                ));
            }
            Some(_) => {}
        }
        let now = Utc::now();
        let half = chrono::Duration::from_std(held.lease / 2).unwrap_or(chrono::Duration::MAX);
        let renew_from = held
            .info
            .lease_until
            .checked_sub_signed(half)
            .unwrap_or(held.info.lease_until);
        if now < renew_from {
            return Ok(());
        }
        if now >= held.info.lease_until {
            tracing::warn!(
                "the state lock {}'s lease ran out at {}; renewing it (nobody had taken it over)",
                held.info.id,
                held.info.lease_until.to_rfc3339()
            );
        }
        let next = LockInfo {
            lease_until: lease_end(now, held.lease),
            ..held.info.clone()
        };
        match self
            .io
            .put(
                &self.key,
                &encode(&next)?,
                PutCondition::IfMatch(held.etag.clone()),
            )
            .await?
        {
            Ok(etag) => {
                tracing::debug!(
                    "renewed the state lock {} until {}",
                    next.id,
                    next.lease_until.to_rfc3339()
                );
                version.set(Held {
                    etag,
                    info: next,
                    lease: held.lease,
                });
                Ok(())
            }
            Err(Refused::Missing) => Err(lost("no longer exists".to_string())),
            Err(Refused::Precondition) => Err(lost(match self.read().await {
                Ok(Some((info, _))) => holder_words(&info),
                Ok(None) => "no longer exists".to_string(),
                Err(e) => e.to_string(),
            })),
        }
    }

    /// Removes the lock if its id is `id` (see the module docs). Returns what was removed.
    pub async fn force_unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        for _ in 0..5 {
            let Some((info, etag)) = self.read().await? else {
                return Err(StateError::NotLocked { path: self.path() });
            };
            if info.id != id {
                return Err(StateError::LockIdMismatch {
                    path: self.path(),
                    held: info.id,
                    given: id.to_string(),
                    who: info.who,
                    since: info.created_at,
                });
            }
            match self.io.delete(&self.key, &etag).await? {
                Ok(()) => return Ok(info),
                // Renewed (or released) since it was read: read it again.
                Err(_) => continue,
            }
        }
        Err(StateError::LockUnreadable {
            path: self.path(),
            message: "it kept changing while being removed (is its holder still running and renewing it?)".to_string(),
        })
    }

    /// Deletes the lock if it is still `version`.
    async fn release(&self, version: &HeldVersion) -> Result<(), StateError> {
        let held = version.get();
        let lost = |now: String| StateError::LockLost {
            path: self.path(),
            id: held.info.id.clone(),
            now,
        };
        match self.io.delete(&self.key, &held.etag).await? {
            Ok(()) => Ok(()),
            Err(Refused::Missing) => Err(lost("no longer exists".to_string())),
            Err(Refused::Precondition) => Err(lost(match self.read().await {
                Ok(Some((info, _))) => holder_words(&info),
                Ok(None) => "no longer exists".to_string(),
                Err(e) => e.to_string(),
            })),
        }
    }
}

/// How an object lock lets go: `DeleteObject If-Match` on its current version.
struct ObjectRelease {
    lock: ObjectLock,
    version: Arc<HeldVersion>,
}

impl LockRelease for ObjectRelease {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StateError>> {
        Box::pin(async move { self.lock.release(&self.version).await })
    }

    /// Deleting the object needs a request. On a multi-threaded runtime (the CLI's) it is made
    /// here, blocking this thread; elsewhere the lock stays until its lease runs out.
    fn release_on_drop(self: Box<Self>) {
        let held = self.version.get();
        let result = match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| handle.block_on(self.lock.release(&self.version)))
            }
            _ => {
                tracing::warn!(
                    "the state lock {} at {} was dropped without being released; it stays until its lease runs out at {}, or `gpucap force-unlock {}`",
                    held.info.id,
                    self.lock.url(),
                    held.info.lease_until.to_rfc3339(),
                    held.info.id
                );
                return;
            }
        };
        if let Err(e) = result {
            tracing::warn!("releasing the state lock {}: {e}", held.info.id);
        }
    }
}
