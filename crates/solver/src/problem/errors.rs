//! The errors every check of a problem document reports: a field path and a message, and the
//! hint for a field that needs a later schema.

use crate::diagnostic::{InputError, Location};

use super::{PROBLEM_SCHEMA_V2, PROBLEM_SCHEMA_V3};

/// Bad input at `field` (a path like `offers[3].starts`).
pub(super) fn error(field: impl Into<String>, message: impl Into<String>) -> InputError {
    InputError::new(Location::default().field(field), message)
}

/// `field` belongs to `gpucap.problem/v2`, and the document is v1.
pub(super) fn v2_only(field: String) -> InputError {
    error(field, format!("is a `{PROBLEM_SCHEMA_V2}` field")).with_hint(format!(
        "set `\"schema\": \"{PROBLEM_SCHEMA_V2}\"` to use it (docs/problem-v2.md)"
    ))
}

/// `field` belongs to `gpucap.problem/v3`, and the document is older.
pub(super) fn v3_only(field: String) -> InputError {
    error(field, format!("is a `{PROBLEM_SCHEMA_V3}` field")).with_hint(format!(
        "set `\"schema\": \"{PROBLEM_SCHEMA_V3}\"` to use it (docs/problem-v3.md)"
    ))
}
