//! What can go wrong loading or evaluating policies, with the file and line where we know them.

use std::path::PathBuf;

use crate::diagnostic::{InputError, Location};

/// A policy, policy directory, test case or data document that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Rego that regorus cannot parse (or compile).
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
        /// The offending line with a caret under the column, as regorus prints it.
        snippet: String,
    },
    /// An error regorus reports without a position.
    #[error("{file}: {message}")]
    Invalid { file: PathBuf, message: String },
    #[error("policy directory `{0}` does not exist")]
    MissingDir(PathBuf),
    #[error("policy directory `{0}` contains no `.rego` files")]
    EmptyDir(PathBuf),
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A user policy whose package is not under `gpucap.policies`: the engine would never
    /// collect its decisions, which is almost certainly not what was meant.
    #[error(
        "{file}: package `{package}` is outside `gpucap.policies`, so its rules would never run"
    )]
    Package { file: PathBuf, package: String },
    /// Evaluation failed (an unknown function, a type error in a builtin, conflicting rule
    /// values, …).
    #[error("{}evaluating `{package}.{set}` failed: {message}", prefix(location))]
    Eval {
        package: String,
        set: &'static str,
        message: String,
        /// Where: from regorus when it says, else the package's file (and the line that calls
        /// an unknown function).
        location: Location,
    },
    /// A `deny`/`warn`/`approval` element that is not a decision object.
    #[error("`{package}.{set}` yielded {value}, which is not a decision: {reason}")]
    BadDecision {
        package: String,
        set: &'static str,
        value: String,
        reason: String,
    },
    /// The data document is not an object or has a key of the wrong type.
    #[error("policy data: {0}")]
    BadData(String),
    /// A plan field the gates read has the wrong type.
    #[error("plan: {0}")]
    BadPlan(String),
    /// A test case file that is not a valid case.
    #[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Case {
        file: PathBuf,
        line: Option<usize>,
        message: String,
    },
}

impl PolicyError {
    /// What the user can do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            PolicyError::Syntax { snippet, .. } if !snippet.is_empty() => Some(format!(
                "the policy must be Rego v1 (`deny contains d if {{ … }}`)\n{snippet}"
            )),
            PolicyError::Syntax { .. } => {
                Some("the policy must be Rego v1 (`deny contains d if { … }`)".into())
            }
            PolicyError::MissingDir(_) => {
                Some("check the path; in gpucap.toml, `budget.policies` paths are relative to the config file".into())
            }
            PolicyError::EmptyDir(_) => {
                Some("a policy directory holds `*.rego` files (subdirectories are searched)".into())
            }
            PolicyError::Package { package, .. } => {
                let tail = package.rsplit('.').next().unwrap_or("my_gate");
                Some(format!(
                    "name the package `gpucap.policies.{tail}` and define `deny`, `warn` or `approval` in it"
                ))
            }
            PolicyError::BadDecision { .. } => Some(
                "yield objects such as {\"rule\": \"team.gate\", \"message\": \"…\", \"fix\": \"…\"}".into(),
            ),
            PolicyError::Case { .. } => Some(
                "a case is {\"description\", \"input\", \"data\", \"expect\": {\"deny\": [], \"warn\": [], \"approval\": []}}".into(),
            ),
            _ => None,
        }
    }

    /// Where in which file, when known.
    pub fn location(&self) -> Location {
        match self {
            PolicyError::Syntax {
                file, line, column, ..
            } => Location::file(file).line(*line).column(*column),
            PolicyError::Eval { location, .. } => location.clone(),
            PolicyError::Invalid { file, .. } | PolicyError::Package { file, .. } => {
                Location::file(file)
            }
            PolicyError::Case { file, line, .. } => {
                let loc = Location::file(file);
                match line {
                    Some(l) => loc.line(*l),
                    None => loc,
                }
            }
            PolicyError::MissingDir(p) | PolicyError::EmptyDir(p) => Location::file(p),
            PolicyError::Read { path, .. } => Location::file(path),
            _ => Location::default(),
        }
    }

    /// Whether the user's input is at fault (exit status 2) rather than the machine (status 1).
    pub fn is_input(&self) -> bool {
        !matches!(self, PolicyError::Read { .. })
    }

    /// Splits a regorus error (`\n--> file:line:col\n  |\n3 | text\n  |   ^\nerror: msg`) into
    /// its parts; errors without a position keep their text.
    pub(crate) fn from_regorus(file: &str, err: &anyhow::Error) -> PolicyError {
        let text = format!("{err:#}");
        match parse_position(&text) {
            Some(p) => PolicyError::Syntax {
                file: PathBuf::from(p.file),
                line: p.line,
                column: p.column,
                message: p.message,
                snippet: p.snippet,
            },
            None => PolicyError::Invalid {
                file: PathBuf::from(file),
                message: text.trim().to_string(),
            },
        }
    }
}

impl From<PolicyError> for InputError {
    fn from(err: PolicyError) -> InputError {
        let hint = err.hint();
        let location = err.location();
        let message = match &err {
            PolicyError::Syntax { message, .. } => message.clone(),
            PolicyError::Invalid { message, .. } => message.clone(),
            PolicyError::Case { message, .. } => message.clone(),
            PolicyError::Eval {
                package,
                set,
                message,
                ..
            } => format!("evaluating `{package}.{set}` failed: {message}"),
            PolicyError::Package { package, .. } => format!(
                "package `{package}` is outside `gpucap.policies`, so its rules would never run"
            ),
            PolicyError::MissingDir(_) => "policy directory does not exist".into(),
            PolicyError::EmptyDir(_) => "policy directory contains no `.rego` files".into(),
            _ => err.to_string(),
        };
        let e = InputError::new(location, message);
        match hint {
            Some(h) => e.with_hint(h),
            None => e,
        }
    }
}

fn prefix(location: &Location) -> String {
    let shown = location.to_string();
    if shown.is_empty() {
        shown
    } else {
        format!("{shown}: ")
    }
}

pub(crate) struct Position {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub snippet: String,
}

/// Finds regorus's `--> file:line:col` marker and the `error: …` line after it.
pub(crate) fn parse_position(text: &str) -> Option<Position> {
    let start = text.find("--> ")?;
    let rest = &text[start + 4..];
    let (head, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut parts = head.trim().rsplitn(3, ':');
    let column = parts.next()?.trim().parse().ok()?;
    let line = parts.next()?.trim().parse().ok()?;
    let file = parts.next()?.to_string();
    let mut snippet = Vec::new();
    let mut message = None;
    for l in body.lines() {
        if let Some(m) = l.strip_prefix("error: ") {
            message = Some(m.trim().to_string());
            break;
        }
        snippet.push(l);
    }
    // Anything regorus printed before the marker (a context line) belongs to the message too.
    let before = text[..start].trim();
    let message = message.unwrap_or_else(|| "invalid policy".into());
    let message = if before.is_empty() {
        message
    } else {
        format!("{before} {message}")
    };
    Some(Position {
        file,
        line,
        column,
        message,
        snippet: snippet.join("\n").trim_end().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regorus_positions_are_split_into_file_line_column_and_message() {
        let text = "\n--> my/gate.rego:7:3\n  |\n7 |   deny contains x if {\n  |   ^\nerror: unexpected token";
        let p = parse_position(text).expect("a position");
        assert_eq!(p.file, "my/gate.rego");
        assert_eq!((p.line, p.column), (7, 3));
        assert_eq!(p.message, "unexpected token");
        assert!(p.snippet.contains("7 |   deny contains x if {"));
    }

    #[test]
    fn text_without_position_is_kept() {
        assert!(parse_position("something odd").is_none());
        let err = PolicyError::from_regorus("a.rego", &anyhow::anyhow!("something odd"));
        assert_eq!(err.to_string(), "a.rego: something odd");
    }
}
