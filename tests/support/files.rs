//! Files the tests set up: copies of the examples and fixtures in temporary directories.
//!
//! Include with `#[path = "support/files.rs"] mod files;`.

#![allow(dead_code)]

use std::fs;
use std::path::Path;

/// Copies the directory `from` into `to` (made when missing), recursively; a failure names the
/// path.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("read dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}
