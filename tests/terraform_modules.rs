//! Checks the hand-written Terraform modules in `modules/`, the reviewed source of truth that
//! gpucap's generated root modules call: every module has the standard files, parses with two
//! independent HCL parsers (hcl-rs and python-hcl2) that agree on its structure, follows the
//! module rules (typed and described variables, validations with messages, prevent_destroy on
//! irreversible purchases, pinned providers, plan traceability), and is formatted as
//! `terraform fmt` would format it. One test also runs `terraform fmt -check`, which needs a
//! `terraform` binary (see `support/terraform.rs`); everything else needs no Terraform and no
//! network.

#[path = "support/python.rs"]
mod python;
#[path = "support/terraform.rs"]
mod terraform;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hcl::{Block, Body, Expression, ObjectKey};

/// The modules the issue asks for; more may be added, none of these may disappear.
const EXPECTED_MODULES: [&str; 8] = [
    "aws-capacity-reservation",
    "aws-capacity-block",
    "aws-gpu-pool",
    "gcp-reservation",
    "gcp-future-reservation",
    "gcp-commitment",
    "gcp-gpu-pool",
    "azure-capacity-reservation",
];

const STANDARD_FILES: [&str; 5] = [
    "main.tf",
    "variables.tf",
    "outputs.tf",
    "versions.tf",
    "README.md",
];

/// Resource types whose purchase cannot be undone; they must carry `prevent_destroy = true`.
/// Calendar-mode future reservations are matched separately (only `reservation_mode = "CALENDAR"`).
const IRREVERSIBLE_TYPES: [&str; 2] = [
    "aws_ec2_capacity_block_reservation",
    "google_compute_region_commitment",
];

fn modules_root() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("modules")
}

fn module_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(modules_root())
        .expect("read modules/")
        .map(|e| e.expect("modules/ entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn tf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read module dir")
        .map(|e| e.expect("module entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .collect();
    files.sort();
    files
}

fn all_tf_files() -> Vec<PathBuf> {
    module_dirs().iter().flat_map(|d| tf_files(d)).collect()
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .expect("dir name")
        .to_string_lossy()
        .into_owned()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn parse(path: &Path) -> Body {
    hcl::parse(&read(path))
        .unwrap_or_else(|e| panic!("hcl-rs cannot parse {}: {e}", path.display()))
}

/// All top-level blocks of a module (every `.tf` file), with the file they come from.
fn module_blocks(dir: &Path) -> Vec<(PathBuf, Block)> {
    tf_files(dir)
        .into_iter()
        .flat_map(|f| parse(&f).into_blocks().map(move |b| (f.clone(), b)))
        .collect()
}

fn labels(block: &Block) -> Vec<&str> {
    block.labels().iter().map(|l| l.as_str()).collect()
}

fn attr<'a>(body: &'a Body, key: &str) -> Option<&'a Expression> {
    body.attributes().find(|a| a.key() == key).map(|a| a.expr())
}

fn sub_blocks<'a>(body: &'a Body, ident: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
    body.blocks().filter(move |b| b.identifier() == ident)
}

fn string_value(expr: &Expression) -> Option<&str> {
    match expr {
        Expression::String(s) => Some(s),
        _ => None,
    }
}

fn object_get<'a>(expr: &'a Expression, key: &str) -> Option<&'a Expression> {
    let Expression::Object(obj) = expr else {
        return None;
    };
    obj.iter()
        .find(|(k, _)| match k {
            ObjectKey::Identifier(id) => id.as_str() == key,
            ObjectKey::Expression(Expression::String(s)) => s == key,
            _ => false,
        })
        .map(|(_, v)| v)
}

// --- structure -------------------------------------------------------------------------------

#[test]
fn every_expected_module_exists_with_the_standard_files() {
    let names: BTreeSet<String> = module_dirs().iter().map(|d| name_of(d)).collect();
    for expected in EXPECTED_MODULES {
        assert!(
            names.contains(expected),
            "modules/{expected} is missing (found {names:?})"
        );
    }
    for dir in module_dirs() {
        for file in STANDARD_FILES {
            let path = dir.join(file);
            assert!(path.is_file(), "{} is missing", path.display());
            assert!(
                !read(&path).trim().is_empty(),
                "{} is empty",
                path.display()
            );
        }
    }
    assert!(
        modules_root().join("README.md").is_file(),
        "modules/README.md (the index) is missing"
    );
}

#[test]
fn the_index_lists_every_module() {
    let index = read(&modules_root().join("README.md"));
    for dir in module_dirs() {
        let name = name_of(&dir);
        assert!(
            index.contains(&format!("`{name}`")),
            "modules/README.md does not list `{name}`"
        );
    }
}

#[test]
fn every_readme_documents_every_variable_and_output() {
    for dir in module_dirs() {
        let readme = read(&dir.join("README.md"));
        for (file, block) in module_blocks(&dir) {
            if matches!(block.identifier(), "variable" | "output") {
                let name = labels(&block)[0];
                assert!(
                    readme.contains(&format!("`{name}`")),
                    "{}/README.md does not document {} `{name}` (from {})",
                    name_of(&dir),
                    block.identifier(),
                    file.display()
                );
            }
        }
    }
}

#[test]
fn every_variable_is_typed_described_and_every_validation_has_a_message() {
    let mut variables = 0;
    let mut validations = 0;
    for file in all_tf_files() {
        for block in parse(&file)
            .blocks()
            .filter(|b| b.identifier() == "variable")
        {
            variables += 1;
            let name = labels(block)[0];
            let at = format!("variable `{name}` in {}", file.display());
            assert!(attr(block.body(), "type").is_some(), "{at} has no type");
            let description = attr(block.body(), "description").and_then(string_value);
            assert!(
                description.is_some_and(|d| d.len() >= 10),
                "{at} has no (or a too short) description"
            );
            for validation in sub_blocks(block.body(), "validation") {
                validations += 1;
                assert!(
                    attr(validation.body(), "condition").is_some(),
                    "{at}: validation without condition"
                );
                let message = attr(validation.body(), "error_message").and_then(string_value);
                assert!(
                    message.is_some_and(|m| !m.is_empty()),
                    "{at}: validation without error_message"
                );
            }
        }
    }
    assert!(
        variables >= 80,
        "only {variables} variables found; is modules/ complete?"
    );
    assert!(
        validations >= 60,
        "only {validations} validations found; variables must be validated"
    );
}

#[test]
fn every_output_is_described() {
    for file in all_tf_files() {
        for block in parse(&file).blocks().filter(|b| b.identifier() == "output") {
            let at = format!("output `{}` in {}", labels(block)[0], file.display());
            assert!(attr(block.body(), "value").is_some(), "{at} has no value");
            assert!(
                attr(block.body(), "description")
                    .and_then(string_value)
                    .is_some(),
                "{at} has no description"
            );
        }
    }
}

#[test]
fn every_module_takes_the_plan_id_fingerprint_and_tags_or_labels() {
    for dir in module_dirs() {
        let vars: BTreeSet<String> = module_blocks(&dir)
            .iter()
            .filter(|(_, b)| b.identifier() == "variable")
            .map(|(_, b)| labels(b)[0].to_owned())
            .collect();
        let name = name_of(&dir);
        assert!(vars.contains("plan_id"), "{name} has no plan_id variable");
        assert!(
            vars.contains("plan_fingerprint"),
            "{name} has no plan_fingerprint variable"
        );
        assert!(
            vars.contains("tags") || vars.contains("labels"),
            "{name} has neither tags nor labels"
        );
        let main = read(&dir.join("main.tf"));
        assert!(
            main.contains("var.plan_id") && main.contains("var.plan_fingerprint"),
            "{name}/main.tf does not use the plan id and fingerprint"
        );
    }
}

fn is_irreversible(block: &Block) -> bool {
    let kind = labels(block)[0];
    IRREVERSIBLE_TYPES.contains(&kind)
        || (kind == "google_compute_future_reservation"
            && attr(block.body(), "reservation_mode").and_then(string_value) == Some("CALENDAR"))
}

fn prevents_destroy(block: &Block) -> bool {
    sub_blocks(block.body(), "lifecycle").any(|l| {
        matches!(
            attr(l.body(), "prevent_destroy"),
            Some(Expression::Bool(true))
        )
    })
}

#[test]
fn irreversible_purchases_prevent_destroy_and_say_why() {
    let mut irreversible = BTreeSet::new();
    for dir in module_dirs() {
        for (file, block) in module_blocks(&dir) {
            if block.identifier() != "resource" || !is_irreversible(&block) {
                continue;
            }
            let address = labels(&block).join(".");
            assert!(
                prevents_destroy(&block),
                "{address} in {} lacks lifecycle {{ prevent_destroy = true }}",
                file.display()
            );
            let text = read(&file);
            assert!(
                text.contains("only forget"),
                "{} must say in a comment that destroying {address} only forgets state",
                file.display()
            );
            irreversible.insert(labels(&block)[0].to_owned());
        }
    }
    let expected: BTreeSet<String> = [
        "aws_ec2_capacity_block_reservation",
        "google_compute_region_commitment",
        "google_compute_future_reservation",
    ]
    .map(String::from)
    .into();
    assert_eq!(
        irreversible, expected,
        "every irreversible kind must be present and checked"
    );
}

#[test]
fn reversible_capacity_does_not_prevent_destroy() {
    // gpucap's `release` action is a destroy of these; prevent_destroy would block it.
    for dir in module_dirs() {
        for (file, block) in module_blocks(&dir) {
            if block.identifier() == "resource" && !is_irreversible(&block) {
                assert!(
                    !prevents_destroy(&block),
                    "{} in {} is reversible but prevents destroy",
                    labels(&block).join("."),
                    file.display()
                );
            }
        }
    }
}

#[test]
fn versions_pin_terraform_and_every_provider_used() {
    for dir in module_dirs() {
        let name = name_of(&dir);
        let versions = parse(&dir.join("versions.tf"));
        let terraform = versions
            .blocks()
            .find(|b| b.identifier() == "terraform")
            .unwrap_or_else(|| panic!("{name}/versions.tf has no terraform block"));
        let required_version = attr(terraform.body(), "required_version").and_then(string_value);
        assert!(
            required_version.is_some_and(|v| v.contains(">=")),
            "{name}: required_version must be a constraint such as \">= 1.5.0\""
        );
        let providers = sub_blocks(terraform.body(), "required_providers")
            .next()
            .unwrap_or_else(|| panic!("{name}/versions.tf has no required_providers"));
        let mut declared = BTreeSet::new();
        for provider in providers.body().attributes() {
            let source = object_get(provider.expr(), "source").and_then(string_value);
            let version = object_get(provider.expr(), "version").and_then(string_value);
            assert!(
                source.is_some_and(|s| s.starts_with("hashicorp/")),
                "{name}: provider `{}` needs a hashicorp/ source",
                provider.key()
            );
            let version = version.unwrap_or_else(|| {
                panic!(
                    "{name}: provider `{}` has no version constraint",
                    provider.key()
                )
            });
            assert!(
                version.contains(">=") && version.contains('<'),
                "{name}: provider `{}` version `{version}` needs a lower and an upper bound",
                provider.key()
            );
            declared.insert(provider.key().to_owned());
        }
        for (_, block) in module_blocks(&dir) {
            if !matches!(block.identifier(), "resource" | "data") {
                continue;
            }
            let provider = match attr(block.body(), "provider") {
                Some(Expression::Variable(v)) => v.as_str().to_owned(),
                Some(other) => other.to_string(),
                None => labels(&block)[0]
                    .split('_')
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            };
            assert!(
                declared.contains(&provider),
                "{name}: {} uses provider `{provider}`, which versions.tf does not require",
                labels(&block).join(".")
            );
        }
    }
}

// --- two parsers agree -----------------------------------------------------------------------

/// Per top-level block (`resource.aws_x.this`, `variable.plan_id`, `locals`, …): the attribute
/// keys and the count of each nested block type in its body.
type Shape = Vec<(String, BTreeSet<String>, BTreeMap<String, usize>)>;

fn shape_hcl_rs(body: &Body) -> Shape {
    let mut shape: Shape = body
        .blocks()
        .map(|b| {
            let address = std::iter::once(b.identifier())
                .chain(labels(b))
                .collect::<Vec<_>>()
                .join(".");
            let attrs = b.body().attributes().map(|a| a.key().to_owned()).collect();
            let mut nested = BTreeMap::new();
            for n in b.body().blocks() {
                *nested.entry(n.identifier().to_owned()).or_insert(0) += 1;
            }
            (address, attrs, nested)
        })
        .collect();
    shape.sort();
    shape
}

/// python-hcl2 8.x marks blocks with `__is_block__`, keeps the quotes around block labels and
/// groups repeated blocks in lists; this script turns its output into the same shape.
const PY_SHAPE: &str = r#"
import json, sys, hcl2

def leaf_blocks(x):
    # A block body, or a labelled block (`dynamic "x" { … }`) wrapped in one dict per label.
    if not isinstance(x, dict):
        return 0
    if x.get("__is_block__"):
        return 1
    return sum(leaf_blocks(v) for k, v in x.items() if not k.startswith("__"))

def is_block(v):
    return isinstance(v, list) and len(v) > 0 and all(leaf_blocks(x) > 0 for x in v)

def walk(prefix, node, out):
    if node.get("__is_block__"):
        attrs = sorted(k for k, v in node.items() if not k.startswith("__") and not is_block(v))
        nested = {k: sum(map(leaf_blocks, v)) for k, v in node.items() if not k.startswith("__") and is_block(v)}
        out.append([".".join(prefix), attrs, nested])
        return
    for label, child in node.items():
        if not label.startswith("__") and isinstance(child, dict):
            walk(prefix + [label.strip('"')], child, out)

result = {}
for path in sys.argv[1:]:
    with open(path) as f:
        doc = hcl2.load(f)
    out = []
    for kind, blocks in doc.items():
        for block in blocks:
            walk([kind], block, out)
    result[path] = out
print(json.dumps(result))
"#;

type PyShape = BTreeMap<String, Vec<(String, Vec<String>, BTreeMap<String, usize>)>>;

#[test]
fn hcl_rs_and_python_hcl2_agree_on_every_file() {
    let files = all_tf_files();
    assert!(
        files.len() >= 32,
        "expected at least 32 .tf files, found {}",
        files.len()
    );
    let out = Command::new(python::python())
        .arg("-c")
        .arg(PY_SHAPE)
        .args(&files)
        .output()
        .expect("run python-hcl2");
    assert!(
        out.status.success(),
        "python-hcl2 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: PyShape = serde_json::from_slice(&out.stdout).expect("python-hcl2 shape JSON");
    for file in &files {
        let ours = shape_hcl_rs(&parse(file));
        let key = file.to_string_lossy().into_owned();
        let mut theirs: Shape = py
            .get(&key)
            .unwrap_or_else(|| panic!("python-hcl2 did not report {key}"))
            .iter()
            .map(|(a, attrs, nested)| (a.clone(), attrs.iter().cloned().collect(), nested.clone()))
            .collect();
        theirs.sort();
        assert!(!ours.is_empty(), "{key} has no blocks");
        assert_eq!(
            ours, theirs,
            "hcl-rs and python-hcl2 disagree on the structure of {key}"
        );
    }
}

// --- formatting ------------------------------------------------------------------------------

/// A line with strings and comments removed, keeping only the brackets that count for nesting.
/// Handles `${ … }` interpolations (which may contain strings of their own).
fn brackets(line: &str) -> Vec<char> {
    enum Mode {
        Code,
        Str,
        Interp(usize),
    }
    let mut stack = vec![Mode::Code];
    let mut out = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match stack.last_mut().expect("mode") {
            Mode::Str => match c {
                '\\' => i += 1,
                '"' => {
                    stack.pop();
                }
                '$' | '%' if chars.get(i + 1) == Some(&'{') => {
                    stack.push(Mode::Interp(0));
                    i += 1;
                }
                _ => {}
            },
            Mode::Code | Mode::Interp(_) => {
                let in_interp = matches!(stack.last(), Some(Mode::Interp(_)));
                match c {
                    '"' => stack.push(Mode::Str),
                    '#' if !in_interp => break,
                    '/' if !in_interp && chars.get(i + 1) == Some(&'/') => break,
                    '{' | '[' | '(' => {
                        if let Some(Mode::Interp(depth)) = stack.last_mut() {
                            *depth += 1;
                        } else {
                            out.push(c);
                        }
                    }
                    '}' | ']' | ')' => match stack.last_mut() {
                        Some(Mode::Interp(0)) => {
                            stack.pop();
                        }
                        Some(Mode::Interp(depth)) => *depth -= 1,
                        _ => out.push(c),
                    },
                    _ => {}
                }
            }
        }
        i += 1;
    }
    out
}

fn is_comment(trimmed: &str) -> bool {
    trimmed.starts_with('#') || trimmed.starts_with("//")
}

/// `key = value` on one line (key an identifier or a quoted string): the position of its `=`.
fn single_line_attribute(line: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let key_len = if let Some(rest) = trimmed.strip_prefix('"') {
        rest.find('"')? + 2
    } else {
        trimmed.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))?
    };
    if key_len == 0 {
        return None;
    }
    let after = &trimmed[key_len..];
    let spaces = after.len() - after.trim_start_matches(' ').len();
    let rest = &after[spaces..];
    if !rest.starts_with('=') || rest.starts_with("==") || spaces == 0 {
        return None;
    }
    let b = brackets(line);
    let opens = b.iter().filter(|c| matches!(c, '{' | '[' | '(')).count();
    let closes = b.len() - opens;
    (opens == closes).then_some(indent + key_len + spaces)
}

/// Formatting problems `terraform fmt` would fix, found without Terraform: two-space
/// indentation by nesting, aligned `=` in runs of single-line attributes, no tabs, no trailing
/// whitespace, one final newline, and a blank line before every top-level block.
fn format_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !text.ends_with('\n') || text.ends_with("\n\n") {
        problems.push("the file must end with exactly one newline".to_owned());
    }
    let lines: Vec<&str> = text.lines().collect();
    // One entry per line that left brackets open: how many are still open.
    let mut open_levels: Vec<usize> = Vec::new();
    // The current run of single-line attributes: (line number, indentation, `=` column, key end).
    let mut run: Vec<(usize, usize, usize, usize)> = Vec::new();
    // terraform fmt puts every `=` of a run one space after the run's longest key.
    let flush = |run: &mut Vec<(usize, usize, usize, usize)>, problems: &mut Vec<String>| {
        let col = run.iter().map(|r| r.3 + 1).max().unwrap_or(0);
        for &(n, _, eq, _) in run.iter() {
            if eq != col {
                problems.push(format!(
                    "line {n}: `=` at column {eq}, terraform fmt puts it at {col}"
                ));
            }
        }
        run.clear();
    };
    for (idx, line) in lines.iter().enumerate() {
        let n = idx + 1;
        if line.contains('\t') {
            problems.push(format!("line {n}: tab character"));
        }
        if line.ends_with(' ') || line.ends_with('\r') {
            problems.push(format!("line {n}: trailing whitespace"));
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            if idx > 0 && lines[idx - 1].trim().is_empty() {
                problems.push(format!("line {n}: two blank lines in a row"));
            }
            flush(&mut run, &mut problems);
            continue;
        }
        let b = brackets(line);
        let starts_closed = matches!(trimmed.chars().next(), Some('}' | ']' | ')'));
        let depth = open_levels.len() - usize::from(starts_closed && !open_levels.is_empty());
        let indent = line.len() - trimmed.len();
        if indent != 2 * depth {
            problems.push(format!(
                "line {n}: indented {indent} spaces, expected {}",
                2 * depth
            ));
        }
        if depth == 0 && trimmed.ends_with('{') && idx > 0 {
            let prev = lines[idx - 1].trim();
            if !(prev.is_empty() || is_comment(prev)) {
                problems.push(format!(
                    "line {n}: a top-level block must follow a blank line"
                ));
            }
        }
        // Alignment runs: consecutive single-line attributes at the same indentation.
        match single_line_attribute(line).filter(|_| !is_comment(trimmed)) {
            Some(eq) => {
                if run.last().is_some_and(|r| r.1 != indent || r.0 + 1 != n) {
                    flush(&mut run, &mut problems);
                }
                run.push((n, indent, eq, line[..eq].trim_end().len()));
            }
            None => flush(&mut run, &mut problems),
        }
        // Track nesting.
        let mut new_opens = 0usize;
        for c in b {
            if matches!(c, '{' | '[' | '(') {
                new_opens += 1;
            } else if new_opens > 0 {
                new_opens -= 1;
            } else if let Some(top) = open_levels.last_mut() {
                *top -= 1;
                if *top == 0 {
                    open_levels.pop();
                }
            } else {
                problems.push(format!("line {n}: unbalanced closing bracket"));
            }
        }
        if new_opens > 0 {
            open_levels.push(new_opens);
        }
    }
    flush(&mut run, &mut problems);
    if !open_levels.is_empty() {
        problems.push("unclosed brackets at the end of the file".to_owned());
    }
    problems
}

#[test]
fn every_tf_file_is_formatted_canonically() {
    let mut all = Vec::new();
    for file in all_tf_files() {
        for p in format_problems(&read(&file)) {
            all.push(format!("{}: {p}", file.display()));
        }
    }
    assert!(
        all.is_empty(),
        "formatting problems (run `terraform fmt -recursive modules/`):\n{}",
        all.join("\n")
    );
}

#[test]
fn the_format_check_catches_misformatted_hcl() {
    // The checker must be able to fail: each of these is something `terraform fmt` changes.
    let good = "variable \"x\" {\n  type        = string\n  description = \"an x\"\n}\n";
    assert_eq!(format_problems(good), Vec::<String>::new());
    let cases = [
        (
            "misaligned",
            "variable \"x\" {\n  type = string\n  description = \"an x\"\n}\n",
        ),
        ("over-aligned", "variable \"x\" {\n  type   = string\n}\n"),
        ("bad indent", "variable \"x\" {\n    type = string\n}\n"),
        ("tab", "variable \"x\" {\n\ttype = string\n}\n"),
        ("no newline", "variable \"x\" {\n  type = string\n}"),
        ("trailing space", "variable \"x\" {\n  type = string \n}\n"),
        (
            "glued blocks",
            "variable \"x\" {\n  type = string\n}\nvariable \"y\" {\n  type = string\n}\n",
        ),
        ("closing indent", "locals {\n  a = [\n    1,\n    ]\n}\n"),
    ];
    for (what, text) in cases {
        assert!(
            !format_problems(text).is_empty(),
            "the format check missed: {what}"
        );
    }
}

#[test]
fn terraform_fmt_check_passes() {
    let out = terraform::fmt_check(&modules_root());
    assert!(
        out.status.success(),
        "terraform fmt -check found unformatted files:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
