//! Recursive Rego functions, refused before evaluation.
//!
//! OPA rejects recursion at compile time; regorus detects it between rules but not between
//! functions, where `f(x) := f(x + 1)` recurses until the process's stack overflows (an abort
//! that no error handling can catch). So the functions of each package are read here, by the
//! shape Rego gives a top-level definition (`name(args) := …` or `name(args) if { … }` starting
//! a line), and a call graph between them is checked for cycles. Calls through `data.…` paths to
//! another package are not followed; the execution timer bounds what remains.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::PolicySource;
use super::error::PolicyError;

/// A function defined in a package: where, and the names it calls.
struct Function {
    file: PathBuf,
    line: usize,
    calls: BTreeSet<String>,
}

fn identifier_at_start(line: &str) -> Option<&str> {
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(line.len());
    let name = &line[..end];
    (end > 0 && line[end..].starts_with('(') && !name.starts_with(|c: char| c.is_ascii_digit()))
        .then_some(name)
}

fn package_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("package "))
        .map(|p| p.trim().to_string())
}

/// Each function's body: the lines from its head to the next top-level line.
fn functions(source: &PolicySource, out: &mut BTreeMap<String, Vec<(Function, String)>>) {
    let lines: Vec<&str> = source.text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(name) = identifier_at_start(lines[i]) else {
            i += 1;
            continue;
        };
        let mut body = lines[i][name.len()..].to_string();
        let mut j = i + 1;
        while j < lines.len() {
            let l = lines[j];
            let top_level = !l.is_empty() && !l.starts_with([' ', '\t', '}', ')', ']', '#']);
            if top_level {
                break;
            }
            body.push('\n');
            body.push_str(l);
            j += 1;
        }
        out.entry(name.to_string()).or_default().push((
            Function {
                file: source.path.clone(),
                line: i + 1,
                calls: BTreeSet::new(),
            },
            body,
        ));
        i = j;
    }
}

fn called(body: &str, name: &str) -> bool {
    body.match_indices(name).any(|(at, _)| {
        let before = body[..at].chars().next_back();
        let after = &body[at + name.len()..];
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && after.starts_with('(')
    })
}

/// Refuses the first function (per package) that can call itself, directly or through others.
pub fn check(sources: &[PolicySource]) -> Result<(), PolicyError> {
    let mut by_package: BTreeMap<String, Vec<&PolicySource>> = BTreeMap::new();
    for s in sources.iter().filter(|s| !s.builtin) {
        if let Some(p) = package_of(&s.text) {
            by_package.entry(p).or_default().push(s);
        }
    }
    for files in by_package.values() {
        let mut defined: BTreeMap<String, Vec<(Function, String)>> = BTreeMap::new();
        for s in files {
            functions(s, &mut defined);
        }
        let names: Vec<String> = defined.keys().cloned().collect();
        let mut graph: BTreeMap<String, (PathBuf, usize, BTreeSet<String>)> = BTreeMap::new();
        for (name, defs) in &mut defined {
            let mut calls = BTreeSet::new();
            for (f, body) in defs.iter_mut() {
                for other in &names {
                    if called(body, other) {
                        f.calls.insert(other.clone());
                        calls.insert(other.clone());
                    }
                }
            }
            let (first, _) = &defs[0];
            graph.insert(name.clone(), (first.file.clone(), first.line, calls));
        }
        for start in graph.keys() {
            // Depth-first from `start`: does any path come back to it?
            let mut stack: Vec<&String> = graph[start].2.iter().collect();
            let mut seen = BTreeSet::new();
            while let Some(n) = stack.pop() {
                if n == start {
                    let (file, line, _) = &graph[start];
                    return Err(PolicyError::Invalid {
                        file: file.clone(),
                        message: format!(
                            "line {line}: function `{start}` calls itself (directly or through other functions); Rego does not allow recursion, and it would never end"
                        ),
                    });
                }
                if seen.insert(n)
                    && let Some((_, _, next)) = graph.get(n)
                {
                    stack.extend(next.iter());
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> PolicySource {
        PolicySource {
            path: PathBuf::from("p.rego"),
            text: text.to_string(),
            builtin: false,
        }
    }

    #[test]
    fn direct_and_mutual_recursion_are_refused_other_calls_pass() {
        let direct = "package gpucap.policies.r\n\nf(x) := y if {\n\ty := f(x + 1)\n}\n";
        let err = check(&[source(direct)]).unwrap_err().to_string();
        assert!(err.contains("line 3: function `f` calls itself"), "{err}");
        let mutual =
            "package gpucap.policies.r\n\ng(x) := h(x)\n\nh(x) := y if {\n\ty := g(x)\n}\n";
        assert!(check(&[source(mutual)]).is_err());
        let fine =
            "package gpucap.policies.r\n\nsq(x) := x * x\n\nquad(x) := sq(sq(x))\n\nsqrt(x) := x\n";
        check(&[source(fine)]).unwrap();
    }
}
