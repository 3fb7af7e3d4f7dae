//! Writing a command's output files all or nothing, and never over what is not a file.
//!
//! A command that writes several files (`gpucap plan -o plan.json --emit-problem p.json
//! --chart-dir charts`) stages each one as a temporary file beside its target, synced to disk,
//! and renames them over their targets only when all were written: a run that fails at any
//! step leaves no new output and no temporary file behind ([`Outputs`] removes what it staged
//! when dropped uncommitted). A target that exists must be a regular file (a symlink is written
//! through to the file it names); a directory, FIFO or device is refused, so `-o /dev/full` can
//! never turn a device node into a file. `-` and `/dev/stdout` are written through to stdout.
//! Errors name the target, never the temporary file.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::diagnostic::{InputError, Location};

/// A distinct temporary name per staged file within this process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where one output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// `-` or `/dev/stdout`.
    Stdout,
    /// A regular file (the resolved path of a symlink), existing or to be created.
    File(PathBuf),
}

/// Whether `path` names stdout.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-") || path == Path::new("/dev/stdout")
}

fn refuse(path: &Path, what: &str) -> anyhow::Error {
    InputError::new(
        Location::file(path),
        format!("is {what}; gpucap writes its outputs only to regular files"),
    )
    .with_hint("name a file (it is created or replaced), or `-` for stdout")
    .into()
}

/// Checks what `path` names and resolves a symlink to the file it points at.
fn target(path: &Path) -> anyhow::Result<Target> {
    if is_stdout(path) {
        return Ok(Target::Stdout);
    }
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Target::File(path.to_path_buf()));
        }
        Err(e) => return Err(anyhow::anyhow!("cannot write `{}`: {e}", path.display())),
    };
    if meta.file_type().is_symlink() {
        let resolved = fs::canonicalize(path)
            .map_err(|_| refuse(path, "a symlink to a file that does not exist"))?;
        let meta = fs::metadata(&resolved)
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?;
        return kind(path, &meta).map(|()| Target::File(resolved));
    }
    kind(path, &meta).map(|()| Target::File(path.to_path_buf()))
}

fn kind(path: &Path, meta: &fs::Metadata) -> anyhow::Result<()> {
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return Err(refuse(path, "a FIFO"));
        }
        if ft.is_char_device() || ft.is_block_device() {
            return Err(refuse(path, "a device"));
        }
        if ft.is_socket() {
            return Err(refuse(path, "a socket"));
        }
    }
    if ft.is_dir() {
        return Err(refuse(path, "a directory"));
    }
    Err(refuse(path, "not a regular file"))
}

/// Outputs staged for writing; nothing reaches a target before [`Outputs::commit`].
#[derive(Debug, Default)]
pub struct Outputs {
    /// `(temporary file, target as the user named it, resolved target)`.
    files: Vec<(PathBuf, PathBuf, PathBuf)>,
    stdout: Vec<Vec<u8>>,
}

impl Outputs {
    pub fn new() -> Self {
        Outputs::default()
    }

    /// Writes `bytes` to a synced temporary file beside `path` (creating its directory), after
    /// checking that `path` may be replaced.
    pub fn stage(&mut self, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        let resolved = match target(path)? {
            Target::Stdout => {
                self.stdout.push(bytes.to_vec());
                return Ok(());
            }
            Target::File(p) => p,
        };
        if self.files.iter().any(|(_, _, r)| *r == resolved) {
            return Err(InputError::new(
                Location::file(path),
                "is named for two outputs of this run",
            )
            .into());
        }
        let dir = resolved
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let fail = |e: std::io::Error| anyhow::anyhow!("cannot write `{}`: {e}", path.display());
        fs::create_dir_all(dir).map_err(fail)?;
        let name = resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(
            ".{name}.gpucap-tmp{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            // A full disk may only say so here.
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(fail(e));
        }
        self.files.push((tmp, path.to_path_buf(), resolved));
        Ok(())
    }

    /// Renames every staged file over its target and writes the stdout outputs.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let files = std::mem::take(&mut self.files);
        let mut left = files.iter();
        for (tmp, named, resolved) in left.by_ref() {
            if let Err(e) = fs::rename(tmp, resolved) {
                let _ = fs::remove_file(tmp);
                for (rest, _, _) in left {
                    let _ = fs::remove_file(rest);
                }
                return Err(anyhow::anyhow!("cannot write `{}`: {e}", named.display()));
            }
        }
        for bytes in std::mem::take(&mut self.stdout) {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes).and_then(|()| out.flush())?;
        }
        Ok(())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for (tmp, _, _) in &self.files {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// One file, all at once: [`Outputs`] with a single output.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = Outputs::new();
    out.stage(path, bytes)?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("gpucap-tmp"))
            .collect()
    }

    #[test]
    fn directories_and_fifos_are_refused_by_name_and_nothing_is_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = write_atomically(dir.path(), b"x").unwrap_err();
        let input = err.downcast_ref::<InputError>().expect("an input error");
        assert!(input.message.contains("a directory"), "{err}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo");
            let status = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .expect("mkfifo");
            assert!(status.success());
            let err = write_atomically(&fifo, b"x").unwrap_err();
            assert!(err.to_string().contains("a FIFO"), "{err}");
            use std::os::unix::fs::FileTypeExt as _;
            assert!(
                fs::symlink_metadata(&fifo)
                    .expect("still there")
                    .file_type()
                    .is_fifo()
            );
        }
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_device_is_never_replaced() {
        let err = write_atomically(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(err.to_string().contains("/dev/null"), "{err}");
        assert!(
            !fs::symlink_metadata("/dev/null")
                .expect("exists")
                .file_type()
                .is_file()
        );
    }

    #[test]
    fn symlinks_are_written_through_and_uncommitted_outputs_vanish() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real.json");
        fs::write(&real, "old").expect("written");
        #[cfg(unix)]
        {
            let link = dir.path().join("link.json");
            std::os::unix::fs::symlink(&real, &link).expect("symlink");
            write_atomically(&link, b"new").expect("written through");
            assert!(
                fs::symlink_metadata(&link)
                    .expect("link")
                    .file_type()
                    .is_symlink()
            );
            assert_eq!(fs::read_to_string(&real).expect("read"), "new");
        }
        {
            let mut out = Outputs::new();
            out.stage(&real, b"never").expect("staged");
            out.stage(&dir.path().join("sub/other.json"), b"never")
                .expect("staged");
            // Dropped without commit: a later step failed.
        }
        assert_ne!(fs::read_to_string(&real).expect("read"), "never");
        assert!(!dir.path().join("sub/other.json").exists());
        assert!(leftovers(dir.path()).is_empty());
        assert!(leftovers(&dir.path().join("sub")).is_empty());
    }
}
