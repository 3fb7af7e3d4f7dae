//! Policy test cases: a plan and a data document, and the decisions the gates must yield.
//!
//! A case is one JSON file beside the policies:
//!
//! ```json
//! {
//!   "description": "expected cost just over the total budget",
//!   "base": "../_plan.json",
//!   "input": {"cost": {"expected_total": 5000001}},
//!   "data": {"total": 5000000, "now": "2027-01-03T06:00:00Z"},
//!   "expect": {"deny": [{"rule": "budget.total", "message_contains": "by $1"}], "warn": []}
//! }
//! ```
//!
//! `base` (optional, relative to the case file) names a plan the case's `input` is merged onto
//! (JSON merge patch, RFC 7386: objects merge, arrays and values replace), so a case states
//! only what it changes. Each `expect` set lists rule ids (or `{"rule", "message_contains"}`)
//! and must match the decisions exactly as a multiset of rule ids; a missing set expects none.
//! Files whose name starts with `_` are shared plans, not cases.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::builtin;
use super::engine::collect;
use super::{Decision, DecisionKind, Decisions, PolicyEngine, PolicyError};

/// One loaded case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's path relative to its directory, without `.json`, e.g. `budget_total/over`.
    pub name: String,
    pub path: PathBuf,
    pub description: String,
    pub input: Value,
    pub data: Value,
    pub expect: Expect,
}

/// What a case expects, per set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub deny: Vec<Expected>,
    #[serde(default)]
    pub warn: Vec<Expected>,
    #[serde(default)]
    pub approval: Vec<Expected>,
}

impl Expect {
    fn get(&self, kind: DecisionKind) -> &[Expected] {
        match kind {
            DecisionKind::Deny => &self.deny,
            DecisionKind::Warn => &self.warn,
            DecisionKind::Approval => &self.approval,
        }
    }
}

/// One expected decision: a rule id, optionally with a part of its message.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Expected {
    Rule(String),
    Detailed {
        rule: String,
        message_contains: Option<String>,
    },
}

impl Expected {
    fn rule(&self) -> &str {
        match self {
            Expected::Rule(rule) | Expected::Detailed { rule, .. } => rule,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    description: String,
    base: Option<PathBuf>,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    data: Value,
    expect: Expect,
}

/// Case files by path: the built-ins' embedded texts, or files read from a directory.
#[derive(Debug, Default)]
pub struct CaseFiles {
    /// Where names are relative to.
    pub root: PathBuf,
    pub files: BTreeMap<PathBuf, String>,
}

impl CaseFiles {
    /// The built-in test cases, compiled in from `policies/tests/`.
    pub fn builtin() -> CaseFiles {
        let root = PathBuf::from(builtin::ROOT).join("tests");
        let files: BTreeMap<PathBuf, String> = builtin::CASES
            .iter()
            .map(|(path, text)| (PathBuf::from(builtin::ROOT).join(path), (*text).to_string()))
            .collect();
        CaseFiles { root, files }
    }

    /// Every `*.json` under `dir` (recursively).
    pub fn read_dir(dir: &Path) -> Result<CaseFiles, PolicyError> {
        if !dir.is_dir() {
            return Err(PolicyError::MissingDir(dir.to_path_buf()));
        }
        let mut paths = Vec::new();
        collect(dir, "json", &mut paths)?;
        let mut files = BTreeMap::new();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
                path: path.clone(),
                source,
            })?;
            files.insert(path, text);
        }
        Ok(CaseFiles {
            root: dir.to_path_buf(),
            files,
        })
    }

    /// Parses every case (files starting with `_` are plans, not cases).
    pub fn cases(&self) -> Result<Vec<Case>, PolicyError> {
        self.files
            .iter()
            .filter(|(path, _)| {
                !path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('_'))
            })
            .map(|(path, text)| self.parse(path, text))
            .collect()
    }

    fn parse(&self, path: &Path, text: &str) -> Result<Case, PolicyError> {
        let file: CaseFile = parse_json(path, text)?;
        let mut input = match &file.base {
            Some(base) => {
                let base_path = normalize(&path.parent().unwrap_or(Path::new("")).join(base));
                // A user's case may extend a plan outside its directory (say, the built-in
                // cases' plan in a checkout); embedded paths never exist on disk.
                let text = match self.files.get(&base_path) {
                    Some(text) => text.clone(),
                    None => std::fs::read_to_string(&base_path).map_err(|e| PolicyError::Case {
                        file: path.to_path_buf(),
                        line: None,
                        message: format!("`base`: cannot read `{}`: {e}", base_path.display()),
                    })?,
                };
                parse_json::<Value>(&base_path, &text)?
            }
            None => Value::Object(Default::default()),
        };
        // No `input`: the base plan as it is (a `null` patch would replace it).
        if !file.input.is_null() {
            merge_patch(&mut input, file.input);
        }
        let name = path
            .strip_prefix(&self.root)
            .unwrap_or(path)
            .with_extension("")
            .to_string_lossy()
            .replace('\\', "/");
        Ok(Case {
            name,
            path: path.to_path_buf(),
            description: file.description,
            input,
            data: file.data,
            expect: file.expect,
        })
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, PolicyError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let at = if field == "." {
            String::new()
        } else {
            format!("`{field}`: ")
        };
        PolicyError::Case {
            file: path.to_path_buf(),
            line: Some(inner.line()).filter(|&l| l > 0),
            message: format!("{at}{inner}"),
        }
    })
}

/// RFC 7386 JSON merge patch: objects merge key by key, `null` removes a key, anything else
/// replaces.
pub fn merge_patch(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            if let Value::Object(map) = target {
                for (key, value) in patch {
                    if value.is_null() {
                        map.remove(&key);
                    } else {
                        merge_patch(map.entry(key).or_insert(Value::Null), value);
                    }
                }
            }
        }
        other => *target = other,
    }
}

/// `a/b/../c` → `a/c`, without touching the file system (embedded files have no directory).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// How one case went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    pub description: String,
    /// Empty when the case passed; otherwise one line per difference.
    pub failures: Vec<String>,
    pub decisions: Decisions,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Evaluates a case and compares the decisions with what it expects. `now` is used only when
/// the case's data has no `now` of its own.
pub fn run(engine: &PolicyEngine, case: &Case, now: DateTime<Utc>) -> Result<Outcome, PolicyError> {
    let decisions = engine.evaluate(&case.input, &case.data, now)?;
    let mut failures = Vec::new();
    for kind in DecisionKind::ALL {
        compare(
            kind,
            case.expect.get(kind),
            decisions.get(kind),
            &mut failures,
        );
    }
    Ok(Outcome {
        name: case.name.clone(),
        description: case.description.clone(),
        failures,
        decisions,
    })
}

fn compare(
    kind: DecisionKind,
    expected: &[Expected],
    actual: &[Decision],
    failures: &mut Vec<String>,
) {
    let mut want: Vec<&str> = expected.iter().map(Expected::rule).collect();
    let mut got: Vec<&str> = actual.iter().map(|d| d.rule.as_str()).collect();
    want.sort_unstable();
    got.sort_unstable();
    if want != got {
        failures.push(format!(
            "{}: expected [{}], got [{}]",
            kind.as_str(),
            want.join(", "),
            got.join(", ")
        ));
    }
    for e in expected {
        if let Expected::Detailed {
            rule,
            message_contains: Some(part),
        } = e
        {
            let found = actual
                .iter()
                .any(|d| &d.rule == rule && d.message.contains(part.as_str()));
            if !found {
                let messages: Vec<String> = actual
                    .iter()
                    .filter(|d| &d.rule == rule)
                    .map(|d| format!("{:?}", d.message))
                    .collect();
                failures.push(format!(
                    "{}: no `{rule}` message contains {part:?}; messages: [{}]",
                    kind.as_str(),
                    messages.join(", ")
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_merges_objects_and_replaces_arrays() {
        let mut plan = json!({"cost": {"expected_total": 1, "irreversible": 2}, "actions": [1, 2]});
        merge_patch(
            &mut plan,
            json!({"cost": {"expected_total": 5, "irreversible": null}, "actions": [3]}),
        );
        assert_eq!(plan, json!({"cost": {"expected_total": 5}, "actions": [3]}));
    }

    #[test]
    fn base_paths_resolve_relative_to_the_case() {
        assert_eq!(
            normalize(Path::new("tests/budget_total/../_plan.json")),
            PathBuf::from("tests/_plan.json")
        );
    }

    #[test]
    fn bad_case_names_file_line_and_field() {
        let files = CaseFiles {
            root: PathBuf::from("t"),
            files: BTreeMap::from([(
                PathBuf::from("t/a.json"),
                "{\"description\": \"x\",\n \"expect\": {\"deny\": 3}}".to_string(),
            )]),
        };
        let err = files.cases().expect_err("invalid case");
        let text = err.to_string();
        assert!(text.starts_with("t/a.json:2: `expect.deny`"), "{text}");
    }
}
