//! Writing a generated root module into a directory without leaving half of it behind: every
//! file is written into a staging directory inside the output directory first (same file
//! system), and only when all are written do they replace the previous generation's files by
//! renames. Files gpucap does not generate (`terraform.tfvars`, `.terraform/`, the lock file)
//! are left alone; files of another format from an earlier run are removed, since Terraform
//! would read `main.tf` and `main.tf.json` together.

use std::fs;
use std::path::{Path, PathBuf};

use super::GenerateError;
use super::calls::Module;

const STAGING: &str = ".gpucap-staging";

/// Every top-level file any format generates.
const GENERATED: [&str; 7] = [
    "main.tf",
    "versions.tf",
    "variables.tf",
    "main.tf.json",
    "versions.tf.json",
    "variables.tf.json",
    "Pulumi.yaml",
];

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GenerateError + '_ {
    move |source| GenerateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Replaces the generated files in `out_dir` with `files` (paths relative to it).
pub fn replace(out_dir: &Path, files: &[(PathBuf, String)]) -> Result<(), GenerateError> {
    fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let staging = out_dir.join(STAGING);
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    let staged = stage(&staging, files);
    if let Err(e) = staged {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }

    // Everything is on disk: swap the old generation for the new one.
    let top: Vec<&Path> = files
        .iter()
        .map(|(p, _)| p.as_path())
        .filter(|p| p.components().count() == 1)
        .collect();
    for name in GENERATED {
        let path = out_dir.join(name);
        if !top.contains(&Path::new(name)) && path.is_file() {
            fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    for module in Module::ALL {
        let old = out_dir.join("modules").join(module.dir());
        if old.is_dir() {
            fs::remove_dir_all(&old).map_err(io(&old))?;
        }
        let new = staging.join("modules").join(module.dir());
        if new.is_dir() {
            let parent = out_dir.join("modules");
            fs::create_dir_all(&parent).map_err(io(&parent))?;
            fs::rename(&new, &old).map_err(io(&old))?;
        }
    }
    let modules = out_dir.join("modules");
    if modules.is_dir()
        && fs::read_dir(&modules)
            .map_err(io(&modules))?
            .next()
            .is_none()
    {
        fs::remove_dir(&modules).map_err(io(&modules))?;
    }
    for path in top {
        let target = out_dir.join(path);
        fs::rename(staging.join(path), &target).map_err(io(&target))?;
    }
    fs::remove_dir_all(&staging).map_err(io(&staging))
}

fn stage(staging: &Path, files: &[(PathBuf, String)]) -> Result<(), GenerateError> {
    for (rel, text) in files {
        let path = staging.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(())
}
