//! A Python virtualenv holding the test peers in `tests/peers/requirements.txt` (python-hcl2,
//! moto's server, highspy, and the CI examples' linters), created on first use under the target directory and reused while
//! the requirements are unchanged. Several test binaries may ask at once; a file lock makes one
//! of them build it.
//!
//! Include with `#[path = "support/python.rs"] mod python;` (adjust the path from other crates).

#![allow(dead_code)]

use std::fs::{self, File};
use std::path::PathBuf;
use std::process::Command;

const REQUIREMENTS: &str = include_str!("../peers/requirements.txt");

/// The virtualenv's `python`, with the peers installed. Panics with the pip output when the
/// environment cannot be built (a test that needs a peer cannot run without it).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUCAP_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let root = venv_root();
    fs::create_dir_all(&root).expect("create the test venv directory");
    let lock = File::create(root.join(".lock")).expect("create the venv lock file");
    lock.lock().expect("lock the test venv");
    let venv = root.join("venv");
    let python = venv.join("bin").join("python");
    let stamp = root.join("requirements.installed");
    let fresh = fs::read_to_string(&stamp)
        .map(|s| s == REQUIREMENTS)
        .unwrap_or(false);
    if !(fresh && python.exists()) {
        run(Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv));
        let req = root.join("requirements.txt");
        fs::write(&req, REQUIREMENTS).expect("write requirements");
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&req));
        fs::write(&stamp, REQUIREMENTS).expect("write the venv stamp");
    }
    drop(lock);
    python
}

/// Directory of the venv's executables (`moto_server` lives there).
pub fn bin_dir() -> PathBuf {
    python().parent().expect("venv bin").to_path_buf()
}

fn venv_root() -> PathBuf {
    // CARGO_TARGET_TMPDIR is only set for integration tests; fall back to the target dir.
    option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(
                std::env::var_os("CARGO_MANIFEST_DIR")
                    .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
            )
            .join("target")
            .join("tmp")
        })
        .join("gpucap-test-peers")
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
