//! Where in a user's input something is wrong, and what to do about it.
//!
//! Every parser (config, calendars, forecasts, problems) reports bad input as an
//! [`InputError`]: the file, the line and column when the parser knows them, the field path,
//! what was expected, and a hint. The CLI prints it as `file:line:col: field: message` and exits
//! with status 2, so people and editors can jump to the spot.

use std::fmt;
use std::path::{Path, PathBuf};

/// A position in an input file. Line and column are 1-based.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Field path inside the document, e.g. `campaigns[3].gpus` or `pools.h100.regions`.
    pub field: Option<String>,
}

impl Location {
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Location {
            file: Some(path.into()),
            ..Default::default()
        }
    }

    pub fn line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    pub fn column(mut self, column: usize) -> Self {
        self.column = Some(column);
        self
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Sets line and column from a byte offset into `text`.
    pub fn at_offset(self, text: &str, offset: usize) -> Self {
        let (line, column) = line_column(text, offset);
        self.line(line).column(column)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(file) = &self.file {
            let mut s = file.display().to_string();
            if let Some(line) = self.line {
                s.push_str(&format!(":{line}"));
                if let Some(col) = self.column {
                    s.push_str(&format!(":{col}"));
                }
            }
            parts.push(s);
        } else if let Some(line) = self.line {
            parts.push(format!("line {line}"));
        }
        if let Some(field) = &self.field {
            parts.push(format!("`{field}`"));
        }
        f.write_str(&parts.join(": "))
    }
}

/// Bad input: what is wrong, where, and (when we can tell) how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    pub location: Location,
    pub message: String,
    pub hint: Option<String>,
}

impl InputError {
    pub fn new(location: Location, message: impl Into<String>) -> Self {
        InputError {
            location,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// An error about a whole file (unreadable, empty).
    pub fn in_file(path: &Path, message: impl Into<String>) -> Self {
        InputError::new(Location::file(path), message)
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loc = self.location.to_string();
        if loc.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{loc}: {}", self.message)
        }
    }
}

/// A warning about input that is usable but probably not what was meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub location: Location,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loc = self.location.to_string();
        if loc.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{loc}: {}", self.message)
        }
    }
}

/// Suggests the closest of `candidates` to a misspelt `word`, for "did you mean" hints.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (c, strsim::damerau_levenshtein(word, c)))
        .filter(|&(c, d)| d <= 2.max(c.len() / 3))
        .min_by_key(|&(_, d)| d)
        .map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_print_like_compiler_messages() {
        let loc = Location::file("cal.yaml")
            .line(3)
            .column(7)
            .field("campaigns[0].gpus");
        assert_eq!(loc.to_string(), "cal.yaml:3:7: `campaigns[0].gpus`");
        let err = InputError::new(loc, "must be positive");
        assert_eq!(
            err.to_string(),
            "cal.yaml:3:7: `campaigns[0].gpus`: must be positive"
        );
    }

    #[test]
    fn offsets_map_to_lines_and_columns() {
        let text = "ab\ncdé\nf";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 7), (2, 4));
        assert_eq!(line_column(text, 100), (3, 2));
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        assert_eq!(
            did_you_mean("horizn", ["start", "horizon"]),
            Some("horizon")
        );
        assert_eq!(did_you_mean("banana", ["start", "horizon"]), None);
    }
}
