//! The one error type of the state layer. `apply` must stop (and say exactly what to do) when
//! state, journal, lock or audit log cannot be trusted, so every failure names the file (or the
//! object, `s3://bucket/key`) and, for JSON, the line; none of them panics.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::holder::LockInfo;

/// What went wrong in the state layer.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file system said no.
    #[error("cannot {op} `{}`: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file is not what gpucap wrote (bad JSON, wrong shape, a corrupt journal line).
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Corrupt {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A state file of another format version.
    #[error(
        "{}: state format version {found} is not supported (this gpucap reads version {expected}); use the gpucap version that wrote it",
        path.display()
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u64,
        expected: u64,
    },
    /// Something could not be encoded as JSON (a non-finite cost, say).
    #[error("cannot encode the {what} as JSON: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// Another process holds the lock. The message names the holder and the way out.
    #[error("{}", locked_message(path, holder, *holder_gone, *takeover))]
    Locked {
        path: PathBuf,
        holder: Box<LockInfo>,
        /// The holder's pid is on this host and that process no longer runs.
        holder_gone: bool,
        /// The backend takes the lock over once the holder's lease has run out (S3).
        takeover: bool,
    },
    /// The lock file exists but cannot be read as a lock (still being written, or damaged).
    #[error(
        "the state is locked (`{}`), but the lock file cannot be read: {message}; if no gpucap is running, delete that file",
        path.display()
    )]
    LockUnreadable { path: PathBuf, message: String },
    /// `force-unlock` with an id that is not the lock's.
    #[error(
        "refusing to unlock: the lock at `{}` has id {held} (held by {who} since {since}), not {given}",
        path.display()
    )]
    LockIdMismatch {
        path: PathBuf,
        held: String,
        given: String,
        who: String,
        since: DateTime<Utc>,
    },
    /// Nothing to unlock.
    #[error("the state is not locked (`{}` does not exist)", path.display())]
    NotLocked { path: PathBuf },
    /// The lock this process took is gone or belongs to someone else now (force-unlocked, or
    /// taken over after its lease ran out).
    /// Nothing more may be written.
    #[error(
        "the state lock {id} is no longer held by this process (`{}` {now}); stop: someone force-unlocked it, or took it over after its lease ran out",
        path.display()
    )]
    LockLost {
        path: PathBuf,
        id: String,
        now: String,
    },
    /// A lock guard from another backend was passed in.
    #[error("the lock {id} does not belong to the state at {location}")]
    ForeignLock { id: String, location: String },
    /// A state write that is not based on the state on disk (it changed since it was read).
    #[error(
        "{}: the state changed since it was read (read lineage {read_lineage} serial {read_serial}, now lineage {disk_lineage} serial {disk_serial}); read it again",
        path.display()
    )]
    StateChanged {
        path: PathBuf,
        read_lineage: String,
        read_serial: u64,
        disk_lineage: String,
        disk_serial: u64,
    },
    /// Another run wrote a journal record this run was about to write, while this run held the
    /// lock: the journal moved under it, so nothing more may be sent.
    #[error(
        "{location}: journal record {seq} was written by another run while this one held the lock ({detail}); stop, and run `gpucap apply` again: it settles whatever was left unresolved"
    )]
    JournalConflict {
        location: String,
        seq: u64,
        detail: String,
    },
    /// The object store refused or did not answer. (The store's error is part of the message,
    /// not a separate cause: it would be printed twice.)
    #[error("cannot {op} `{location}`: {error}")]
    Store {
        op: &'static str,
        location: String,
        error: gpucap_provider::ObjectError,
    },
    /// The configured backend is not in this build.
    #[error("the `{backend}` state backend {message}")]
    BackendUnavailable {
        backend: &'static str,
        message: String,
    },
    /// A credential-looking value survived scrubbing; nothing was written.
    #[error("refusing to write a credential-looking value to {what} at {}", paths.join(", "))]
    Credential {
        what: &'static str,
        paths: Vec<String>,
    },
}

impl StateError {
    pub(crate) fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError {
        let path = path.to_path_buf();
        move |source| StateError::Io { op, path, source }
    }

    pub(crate) fn corrupt(path: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        StateError::Corrupt {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

fn locked_message(path: &Path, h: &LockInfo, gone: bool, takeover: bool) -> String {
    let mut s = format!(
        "the state is locked by {} on {} (pid {}, `{}`) since {}, lock id {}",
        h.who,
        h.host,
        h.pid,
        h.operation,
        h.created_at.to_rfc3339(),
        h.id
    );
    if gone {
        s.push_str(&format!(
            "; it is held by pid {} on this host, which is no longer running",
            h.pid
        ));
    }
    if takeover {
        s.push_str(&format!(
            "; its lease runs until {}, after which the next run takes it over unless the holder renews it",
            h.lease_until.to_rfc3339()
        ));
    }
    s.push_str(&format!(
        " (lock file `{}`). If no gpucap is running for it, run `gpucap force-unlock {}`",
        path.display(),
        h.id
    ));
    s
}
