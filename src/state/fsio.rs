//! Durable file writes. A crash at any instant must leave either the old or the new state file
//! (never half of one) and must never lose a journal line `append` reported as written:
//! whole-file writes go temp file → fsync → rename → fsync directory; appends fsync before
//! they return.

use std::fs::File;
use std::path::Path;

use super::error::StateError;

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
