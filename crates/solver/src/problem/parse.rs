//! JSON text → [`Problem`]: syntax and type errors with the line, column and field path.

use std::path::Path;

use crate::diagnostic::{InputError, Location};

use super::Problem;

/// Reads a `gpucap.problem/v1` or `/v2` document. `path` is only used in messages. The result still
/// needs [`super::validate`].
pub fn parse(text: &str, path: &Path) -> Result<Problem, InputError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let problem: Problem = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        json_error(path, e.inner(), Some(field))
    })?;
    de.end().map_err(|e| json_error(path, &e, None))?;
    Ok(problem)
}

fn json_error(path: &Path, err: &serde_json::Error, field: Option<String>) -> InputError {
    let mut location = Location::file(path);
    if err.line() > 0 {
        location = location.line(err.line()).column(err.column());
    }
    if let Some(field) = field.filter(|f| !f.is_empty() && f != ".") {
        location = location.field(field);
    }
    // serde_json appends " at line L column C", which the location already says.
    let text = err.to_string();
    let message = match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let hint = if message.starts_with("unknown field") {
        Some(
            "unknown fields are errors in gpucap.problem/v1 and /v2; see docs/problem-v1.md and docs/problem-v2.md in the gpucap repository",
        )
    } else if message.contains("expected u32") {
        Some("counts, hours and GPUs are whole numbers >= 0")
    } else {
        None
    };
    let error = InputError::new(location, message);
    match hint {
        Some(hint) => error.with_hint(hint),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = parse("{\n  \"schema\": ,\n}", Path::new("p.json")).unwrap_err();
        assert_eq!(err.location.line, Some(2));
        assert!(err.to_string().starts_with("p.json:2:"), "{err}");
    }

    #[test]
    fn type_errors_name_the_field() {
        let text = r#"{"schema": "gpucap.problem/v1", "start": "2027-01-04T00:00:00Z", "hours": 10,
            "pools": ["a"], "offers": [{"id": "x", "pool": "a", "kind": "term",
            "gpus_per_instance": 8, "price_per_instance_hour": 1.0, "term_hours": 5,
            "starts": {"from": 0, "to": 10, "stepp": 2}}], "scenarios": []}"#;
        let err = parse(text, Path::new("p.json")).unwrap_err();
        assert_eq!(
            err.location.field.as_deref(),
            Some("offers[0].starts.stepp"),
            "{err}"
        );
        assert!(err.message.contains("unknown field `stepp`"), "{err}");
    }
}
