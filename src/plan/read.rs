//! Reading a saved plan (`gpucap plan -o plan.json`) back: `gpucap generate` and `gpucap apply`
//! both start from one, and both should name the file, line and field of what is wrong in the
//! same words. [`parse`] is pure; [`read`] also reads the file and keeps the exact bytes it
//! parsed, so a digest of the plan is of what was acted on.

use std::path::{Path, PathBuf};

use super::{PLAN_SCHEMA, Plan};
use crate::diagnostic::{InputError, Location};

/// A plan file as read.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedPlan {
    pub plan: Plan,
    /// Exactly the bytes that were parsed.
    pub bytes: Vec<u8>,
}

/// Why a plan file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be read (a runtime failure, not bad input).
    #[error("cannot read `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid plan.
    #[error(transparent)]
    Input(#[from] InputError),
}

impl ReadError {
    /// As a command's error: an [`InputError`] stays one (so it is reported with its hint and
    /// exits 2), an I/O failure keeps its cause.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            ReadError::Input(e) => anyhow::Error::new(e),
            other => anyhow::Error::new(other),
        }
    }
}

/// Reads and parses a plan file, naming the file, line and field of what is wrong.
pub fn read(path: &Path) -> Result<SavedPlan, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    // A directory or a file that is not text is the caller's to fix (exit 2), not an I/O
    // failure.
    if path.is_dir() {
        return Err(InputError::in_file(path, "is a directory, not a plan file").into());
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        InputError::new(
            Location::file(path),
            format!(
                "is not UTF-8 text (byte {}); a plan is the JSON `gpucap plan -o` writes",
                e.valid_up_to()
            ),
        )
    })?;
    let plan = parse(text, path)?;
    Ok(SavedPlan { plan, bytes })
}

/// Parses a `gpucap.plan/v1` document; `path` is only for messages.
pub fn parse(text: &str, path: &Path) -> Result<Plan, InputError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let plan: Plan = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let mut location = Location::file(path)
            .line(inner.line())
            .column(inner.column());
        if field != "." {
            location = location.field(field);
        }
        InputError::new(location, inner.to_string())
            .with_hint("a plan is the `gpucap.plan/v1` JSON that `gpucap plan -o plan.json` writes")
    })?;
    if plan.schema != PLAN_SCHEMA {
        return Err(InputError::new(
            Location::file(path).field("schema"),
            format!("`{}` is not `{PLAN_SCHEMA}`", plan.schema),
        ));
    }
    super::validate::validate(&plan, path)?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_line_and_field() {
        let path = Path::new("plan.json");
        let err = parse("{\"schema\": 3}", path).unwrap_err();
        assert_eq!(err.location.file.as_deref(), Some(path));
        assert_eq!(err.location.field.as_deref(), Some("schema"), "{err}");
        assert_eq!(err.location.line, Some(1), "{err}");
        assert!(err.hint.is_some());
        let err = parse("[]", path).unwrap_err();
        assert_eq!(err.location.field, None, "{err}");
    }

    #[test]
    fn read_keeps_the_bytes_and_says_which_file_it_cannot_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let missing = dir.path().join("missing.json");
        let err = read(&missing).unwrap_err();
        assert!(matches!(err, ReadError::Io { .. }), "{err}");
        assert!(err.to_string().contains("missing.json"), "{err}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, b"{}").expect("written");
        let err = read(&bad).unwrap_err().into_anyhow();
        assert!(err.downcast_ref::<InputError>().is_some(), "{err}");

        let good = dir.path().join("plan.json");
        let text = serde_json::to_string_pretty(&super::super::tests::empty_plan()).expect("json");
        std::fs::write(&good, &text).expect("written");
        let saved = read(&good).expect("a plan");
        assert_eq!(saved.bytes, text.as_bytes());
        assert_eq!(saved.plan, super::super::tests::empty_plan());
    }
}
