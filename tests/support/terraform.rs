//! The `terraform` binary for the tests that run `terraform fmt -check`: `$GPUCAP_TERRAFORM`
//! when set, else `terraform` on `PATH`. Without one those tests fail, saying what is missing
//! and how to get it; they never skip.
//!
//! Include with `#[path = "support/terraform.rs"] mod terraform;`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HOW: &str = "install Terraform (https://developer.hashicorp.com/terraform/install), or set \
                   GPUCAP_TERRAFORM to the path of a terraform binary";

/// The terraform binary; panics with what is missing and how to get it.
pub fn terraform() -> PathBuf {
    if let Some(path) = std::env::var_os("GPUCAP_TERRAFORM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "GPUCAP_TERRAFORM is {}, which is not a file; {HOW}",
            path.display()
        );
        return path;
    }
    let name = format!("terraform{}", std::env::consts::EXE_SUFFIX);
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "this test runs `terraform fmt -check`, and no `{name}` is on PATH \
                 (GPUCAP_TERRAFORM is not set); {HOW}"
            )
        })
}

/// `terraform fmt -check -recursive -diff DIR`, offline and without the user's CLI config.
pub fn fmt_check(dir: &Path) -> Output {
    let terraform = terraform();
    Command::new(&terraform)
        .args(["fmt", "-check", "-recursive", "-diff"])
        .arg(dir)
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", terraform.display()))
}
