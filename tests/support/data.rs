//! Data the tests read, kept in the repository under `tests/data/` (extracts of public price
//! catalogs and spot traces; each folder's README says where they come from). A missing file
//! fails the test with its path: these tests never skip.
//!
//! Include with `#[path = "support/data.rs"] mod data;`.

#![allow(dead_code)]

use std::path::PathBuf;

/// `tests/data/<relative>`, which must be a file.
pub fn file(relative: &str) -> PathBuf {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/data")
    .join(relative);
    assert!(
        path.is_file(),
        "test data file {} is missing; it is part of the repository (see the README.md beside it)",
        path.display()
    );
    path
}

/// The text of `tests/data/<relative>`.
pub fn read(relative: &str) -> String {
    let path = file(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
