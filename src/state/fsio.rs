//! Durable file writes. A crash at any instant must leave either the old or the new state file
//! (never half of one) and must never lose a journal line `append` reported as written:
//! whole-file writes go temp file → fsync → rename → fsync directory; appends fsync before
//! they return.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::error::StateError;

/// Prefix of the temporary files [`write_atomic`] leaves behind if it is interrupted. Readers
/// never look at them; the next locked write removes them.
pub(crate) fn temp_prefix(name: &str) -> String {
    format!(".{name}.tmp-")
}

/// Replaces `path` with `bytes` atomically: a temp file in the same directory, written and
/// fsync'd, renamed over `path`, then the directory fsync'd so that the rename itself is durable.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let dir = parent(path);
    std::fs::create_dir_all(dir).map_err(StateError::io("create directory", dir))?;
    let name = file_name(path);
    let tmp = dir.join(format!("{}{}", temp_prefix(&name), uuid::Uuid::new_v4()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(StateError::io("create", &tmp))?;
        f.write_all(bytes).map_err(StateError::io("write", &tmp))?;
        f.sync_all().map_err(StateError::io("fsync", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(StateError::io("rename into place", path))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes temp files an interrupted [`write_atomic`] of `path` left behind. Best effort; call
/// it only while holding the lock (another writer's temp file is in use otherwise).
pub(crate) fn remove_stale_temps(path: &Path) {
    let prefix = temp_prefix(&file_name(path));
    let Ok(entries) = std::fs::read_dir(parent(path)) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

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

/// Cuts everything after the last newline of `path` (a line torn by a crash mid-append) and
/// fsyncs. A missing or empty file is left alone.
pub(crate) fn cut_torn_tail(path: &Path) -> Result<(), StateError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StateError::io("open", path)(e)),
    };
    let len = f.metadata().map_err(StateError::io("stat", path))?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))
        .and_then(|_| f.read_exact(&mut last))
        .map_err(StateError::io("read", path))?;
    if last[0] == b'\n' {
        return Ok(());
    }
    // Rare (only after a crash): read it all to find the last newline.
    let bytes = std::fs::read(path).map_err(StateError::io("read", path))?;
    let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    tracing::warn!(
        "{}: cutting {} bytes of a line torn by an interrupted write",
        path.display(),
        bytes.len() - keep
    );
    f.set_len(keep as u64)
        .map_err(StateError::io("cut the torn tail of", path))?;
    f.sync_all().map_err(StateError::io("fsync", path))
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

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
