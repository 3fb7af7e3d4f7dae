//! Who holds a state lock: the [`LockInfo`] document every backend writes, and the facts about
//! this process and machine it is made of ([`who`], [`host`]). It depends on nothing else in
//! the state layer, so the error type can name a holder without importing the lock itself
//! (`error` → `holder`, and `lock` → `fsio` → `error`: a DAG).

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
