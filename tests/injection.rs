//! Output injection (issue 15): hostile names go through each writer and come back, read by the
//! format's own parser, as the plain strings they were: no live Pulumi interpolation, no
//! ill-formed SVG, no raw escape sequence on a terminal.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;

const NOW: &str = "2027-01-03T06:00:00Z";

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
}

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1");
    cmd
}

/// Names that would be live in Pulumi YAML if `$` were not doubled: `$$` reads as `$`, so
/// `pre$${x}` doubled only before `{` is `pre$$$${x}`… read as `pre$` and a live `${x}`.
const PULUMI_HOSTILE: &[&str] = &["pre$${x}post$$y", "a${b}c", "$${", "end$", "q\"'`: #&*!|>"];

/// Pulumi YAML's reading of a string (`pulumi-yaml`, `ast/interpolation.go`): `$$` is `$`,
/// `${…}` an interpolation, anything else itself. Returns the literal text and the references.
fn pulumi_interpolate(s: &str) -> (String, Vec<String>) {
    let (mut text, mut refs) = (String::new(), Vec::new());
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("$$") {
            text.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix("${") {
            let end = r.find('}').expect("an interpolation is closed");
            refs.push(r[..end].to_string());
            rest = &r[end + 1..];
        } else {
            let c = rest.chars().next().expect("non-empty");
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    (text, refs)
}

fn strings(v: &Yaml, out: &mut Vec<String>) {
    match v {
        Yaml::String(s) => out.push(s.clone()),
        Yaml::Sequence(items) => items.iter().for_each(|i| strings(i, out)),
        Yaml::Mapping(m) => m.values().for_each(|i| strings(i, out)),
        Yaml::Tagged(t) => strings(&t.value, out),
        _ => {}
    }
}

/// The AWS fixture plan with every campaign and team renamed to a hostile name.
fn hostile_plan(dir: &Path, names: &[&str]) -> PathBuf {
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/plans/aws.json")).expect("fixture");
    let mut plan: Json = serde_json::from_str(&text).expect("json");
    let mut renamed = std::collections::BTreeMap::new();
    let campaigns = plan["campaigns"].as_array_mut().expect("campaigns");
    for (i, c) in campaigns.iter_mut().enumerate() {
        let new = format!("{}{i}", names[i % names.len()]);
        renamed.insert(c["name"].as_str().expect("name").to_string(), new.clone());
        c["name"] = Json::from(new);
        c["team"] = Json::from(format!("team{}", names[(i + 1) % names.len()]));
    }
    // The last name as a capacity block offering id, which the program passes on.
    if let Some(a) = plan["actions"]
        .as_array_mut()
        .expect("actions")
        .iter_mut()
        .find(|a| a["offering_id"].is_string())
    {
        a["offering_id"] = Json::from(format!("cb-{}", names[names.len() - 1]));
    }
    for a in plan["actions"].as_array_mut().expect("actions") {
        if let Some(list) = a["campaigns"].as_array_mut() {
            for c in list {
                let old = c.as_str().expect("name").to_string();
                *c = Json::from(renamed[&old].clone());
            }
        }
    }
    let path = dir.join("plan.json");
    std::fs::write(&path, serde_json::to_string_pretty(&plan).expect("json")).expect("written");
    path
}

#[test]
fn pulumi_yaml_reads_hostile_names_back_as_plain_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = hostile_plan(dir.path(), PULUMI_HOSTILE);
    let out = dir.path().join("pulumi");
    let run = gpucap()
        .arg("generate")
        .arg(&plan)
        .arg("--out")
        .arg(&out)
        .args(["--now", NOW, "--format", "pulumi"])
        .output()
        .expect("run");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out.join("Pulumi.yaml")).expect("Pulumi.yaml");
    let doc: Yaml = serde_yaml_ng::from_str(&text).expect("valid YAML");
    // Every interpolation refers to something the program defines.
    let mut defined: Vec<String> = Vec::new();
    for section in ["variables", "resources", "config"] {
        if let Some(Yaml::Mapping(m)) = doc.get(section) {
            defined.extend(m.keys().filter_map(|k| k.as_str().map(str::to_string)));
        }
    }
    let mut all = Vec::new();
    for section in ["variables", "resources"] {
        strings(&doc[section], &mut all);
    }
    let mut literal = String::new();
    for s in &all {
        let (text, refs) = pulumi_interpolate(s);
        for r in refs {
            let root = r.split(['.', '[']).next().unwrap_or_default();
            assert!(
                defined.iter().any(|d| d == root),
                "live interpolation `${{{r}}}` from user text in {s:?}"
            );
        }
        literal.push_str(&text);
        literal.push('\n');
    }
    for name in PULUMI_HOSTILE {
        assert!(
            literal.contains(name),
            "{name:?} does not come back as text:\n{literal}"
        );
    }
}

/// Names that break XML written by hand: markup, entities, CDATA ends, and (for the escape
/// test) controls and bidirectional overrides.
const XML_HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "a & b &amp; c",
    "q\"'>",
    "]]><!--",
    "ansi\u{1b}[31mred\u{1b}[0m",
    "bell\u{7}cr\rtab",
    "rlo\u{202E}txt.exe",
];

#[test]
fn the_demand_svg_stays_well_formed_and_shows_hostile_names_as_text() {
    use gpucap::calendar::RawCampaign;
    use gpucap::config::Config;
    use gpucap::diagnostic::Location;
    use gpucap::timespec::{Span, Timestamp, parse_timestamp};

    let config = Config::parse(
        "[planning]\nstart = 2027-01-01\nhorizon = \"10d\"\n",
        Path::new("gpucap.toml"),
    )
    .expect("config");
    let campaigns: Vec<_> = XML_HOSTILE
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut raw = RawCampaign::new(format!("c{i}"), "h100".parse().expect("h100"));
            raw.gpus = Some(8);
            raw.start = Some(Timestamp(parse_timestamp("2027-01-02").expect("t")));
            raw.duration = Some(Span::days(2));
            let mut c = raw.validate(Location::default()).expect("valid");
            // Past input validation (which refuses controls): the writer must still be safe.
            c.name = (*name).to_string();
            c
        })
        .collect();
    let curve = gpucap::demand::build(&config, config.horizon(chrono::Utc::now()), &campaigns, &[])
        .expect("demand");
    let svg = gpucap::render::chart::demand_svg(&curve, 0).expect("svg");
    let doc = roxmltree::Document::parse(&svg).expect("a well-formed SVG");
    let text: String = doc
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!text.contains('\u{1b}'), "no raw escape in the SVG text");
    for name in XML_HOSTILE {
        let shown = gpucap::text::visible(name);
        assert!(
            text.contains(shown.as_ref()),
            "{shown:?} not found as text in:\n{text}"
        );
    }
    assert!(
        doc.descendants().all(|n| n.tag_name().name() != "script"),
        "no element from a name"
    );
}

#[test]
fn names_with_control_or_bidi_characters_are_refused_at_input() {
    for name in ["ansi\u{1b}[31mred", "rlo\u{202E}exe", "cr\rlf"] {
        let yaml = format!(
            "campaigns:\n  - name: \"{}\"\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-01\n    duration: 1d\n",
            name.escape_default()
        );
        let err = gpucap::calendar::parse(
            &yaml,
            Path::new("c.yaml"),
            gpucap::timespec::parse_timestamp("2027-06-01").expect("t"),
        )
        .expect_err("refused");
        assert_eq!(
            err.location.field.as_deref(),
            Some("campaigns[0].name"),
            "{err}"
        );
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }
}

/// A problem file is input that `check_name` never saw: its offer ids and scenario names reach
/// the `solve` tables through the one escaping function, so no escape sequence comes out raw.
#[test]
fn the_solve_tables_show_hostile_names_escaped() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/problems/spec-example.json"))
        .expect("fixture");
    let hostile = text
        .replace(
            "aws/us-east-1/p5.48xlarge/spot",
            "spot\\u001b[2J\\u202eevil",
        )
        .replace("\"slip-2w\"", "\"slip\\r\\u001b]0;owned\\u0007\"");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("problem.json");
    std::fs::write(&path, hostile).expect("written");
    let out = gpucap()
        .args(["solve", "--format", "table"])
        .arg(&path)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains(['\u{1b}', '\r', '\u{7}', '\u{202e}']),
        "raw control characters in:\n{stdout}"
    );
    assert!(stdout.contains("spot\\u{1b}[2J\\u{202e}evil"), "{stdout}");
    assert!(
        stdout.contains("scenario `slip\\r\\u{1b}]0;owned\\u{7}`"),
        "{stdout}"
    );
}
