//! Durable file writes. A crash at any instant must leave either the old or the new state file
//! (never half of one) and must never lose a journal line `append` reported as written:
//! whole-file writes go temp file → fsync → rename → fsync directory; appends fsync before
//! they return.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::error::StateError;

/// Appends `line` (which must end in `\n`) to `path` and fsyncs before returning. The file is
/// created (and its directory entry made durable) on first use.
pub(crate) fn append_durable(path: &Path, line: &[u8]) -> Result<(), StateError> {
    let dir = parent(path);
    std::fs::create_dir_all(dir).map_err(StateError::io("create directory", dir))?;
    let existed = path.exists();
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(StateError::io("open for appending", path))?;
    // One write call: with O_APPEND a short line lands in one piece or, on a crash, as a torn
    // tail that readers skip.
    f.write_all(line)
        .map_err(StateError::io("append to", path))?;
    f.sync_all().map_err(StateError::io("fsync", path))?;
    if !existed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Makes renames and creations in `dir` durable. A no-op where directories cannot be opened
/// (Windows).
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StateError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(StateError::io("fsync directory", dir))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Reads `path`, or `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::Io {
            op: "read",
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
