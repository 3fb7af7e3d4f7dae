//! `gpucap demand` and `gpucap init` run as a user runs them: on the bundled examples, and on
//! broken inputs that must fail with a located message, exit status 2 and no files written.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("GPUCAP_CONFIG").env("NO_COLOR", "1");
    cmd
}

fn example(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples")
    .join(name)
    .join("gpucap.toml")
}

fn demand_json(config: &Path) -> Value {
    let out = gpucap()
        .arg("--config")
        .arg(config)
        .args(["demand", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn every_example_builds_its_demand() {
    let examples = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let config = entry.unwrap().path().join("gpucap.toml");
        if config.exists() {
            let doc = demand_json(&config);
            assert!(doc["hours"].as_u64().unwrap() > 0, "{}", config.display());
            seen += 1;
        }
    }
    assert!(seen >= 1);
}

#[test]
fn quickstart_json_is_the_demand_part_of_a_problem() {
    let doc = demand_json(&example("quickstart"));
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["hours", "pools", "scenarios", "start"],
        "exactly these keys"
    );
    assert_eq!(doc["start"], "2027-01-04T00:00:00Z");
    assert_eq!(doc["hours"], 13 * 7 * 24);
    assert_eq!(
        doc["pools"],
        serde_json::json!(["a100-us", "h100-us", "h100-us-east", "l4-us"])
    );
    let names: Vec<&str> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["expected", "slip-2w", "upside"]);
    // llm-70b-pretrain: 512 GPUs + 10 % buffer = 564 (rounded up), 2027-01-18 .. 2027-02-28.
    assert_eq!(
        doc["scenarios"][0]["demand"]["h100-us-east"]["firm"],
        serde_json::json!([[336, 1320, 564]])
    );
    // Two weeks later in the slip scenario.
    assert_eq!(
        doc["scenarios"][1]["demand"]["h100-us-east"]["firm"],
        serde_json::json!([[672, 1656, 564]])
    );
    // ×1.25 in the upside scenario: ceil(512 × 1.1 × 1.25) = 704.
    assert_eq!(
        doc["scenarios"][2]["demand"]["h100-us-east"]["firm"],
        serde_json::json!([[336, 1320, 704]])
    );
    insta::assert_json_snapshot!("quickstart_demand", doc);
}

#[test]
fn quickstart_table_names_pools_peaks_and_drivers() {
    gpucap()
        .arg("--config")
        .arg(example("quickstart"))
        .arg("demand")
        .assert()
        .success()
        .stdout(predicate::str::contains("h100-us-east"))
        .stdout(predicate::str::contains(
            "peak driven by: llm-70b-pretrain 564",
        ))
        .stdout(predicate::str::contains("weekly-safety-evals (flex)"))
        .stdout(predicate::str::contains("slip-2w"));
}

#[test]
fn charts_are_written_as_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    for (name, magic) in [
        ("d.svg", b"<svg".as_slice()),
        ("d.png", b"\x89PNG".as_slice()),
    ] {
        let path = dir.path().join(name);
        gpucap()
            .arg("--config")
            .arg(example("quickstart"))
            .arg("demand")
            .arg("--chart")
            .arg(&path)
            .assert()
            .success();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes.windows(magic.len()).take(200).any(|w| w == magic),
            "{name} starts like a {name}"
        );
        if name.ends_with(".svg") {
            let text = String::from_utf8(bytes).unwrap();
            assert!(
                text.contains("h100-us-east (h100)"),
                "pool captions are in the SVG"
            );
            assert!(
                text.contains("llm-70b-pretrain"),
                "campaigns are in the legend"
            );
        }
    }
    gpucap()
        .arg("--config")
        .arg(example("quickstart"))
        .args(["demand", "--chart", "out.pdf"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(".svg"));
}

#[test]
fn init_scaffolds_a_project_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    gpucap().arg("init").arg(dir.path()).assert().success();
    let config = dir.path().join("gpucap.toml");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("[planning]")
    );
    gpucap()
        .arg("--config")
        .arg(&config)
        .args(["demand", "--format", "json"])
        .assert()
        .success();
    // A newcomer's first plan prices from the snapshot: no cloud is asked, so it answers at
    // once without network or credentials, and says nothing about them.
    let plan = gpucap()
        .arg("--config")
        .arg(&config)
        .args(["plan", "--now", "2026-12-01T00:00:00Z"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&plan.stderr);
    assert_eq!(plan.status.code(), Some(0), "{stderr}");
    for asked in ["credentials", "unavailable", "not read", "skipping"] {
        assert!(!stderr.contains(asked), "`{asked}` in:\n{stderr}");
    }
    gpucap()
        .arg("init")
        .arg(dir.path())
        .assert()
        .failure()
        .stderr(predicate::str::contains("--force"));
}

/// A project in a temporary directory with one calendar file.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(config_extra: &str, calendar_name: &str, calendar: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gpucap.toml"),
            format!("[planning]\nstart = 2027-01-04\nhorizon = \"4w\"\n{config_extra}"),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("calendars")).unwrap();
        std::fs::write(dir.path().join("calendars").join(calendar_name), calendar).unwrap();
        Project { dir }
    }

    /// Runs `demand --chart` and expects exit 2, no chart written, and all `needles` on stderr.
    fn fails_with(&self, needles: &[&str]) {
        let chart = self.dir.path().join("chart.svg");
        let out = gpucap()
            .arg("--config")
            .arg(self.dir.path().join("gpucap.toml"))
            .arg("demand")
            .arg("--chart")
            .arg(&chart)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "exit status 2 for bad input; stderr:\n{stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing on stdout");
        assert!(!chart.exists(), "no partial output");
        assert!(!stderr.contains("panicked"), "{stderr}");
        for n in needles {
            assert!(stderr.contains(n), "stderr lacks `{n}`:\n{stderr}");
        }
    }
}

const GOOD: &str = "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-05\n    duration: 2d\n";

#[test]
fn bad_calendars_are_located() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "c.yaml",
            "campaigns:\n  - name: a\n    accelerator: h10\n    gpus: 8\n",
            &["c.yaml:3", "did you mean `h100`"],
        ),
        (
            "c.yaml",
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-09\n    end: 2027-01-05\n",
            &["c.yaml:6", "campaigns[0].end", "ends"],
        ),
        (
            "c.yaml",
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 0\n    start: 2027-01-05\n    duration: 1d\n",
            &["c.yaml:4", "positive"],
        ),
        (
            "c.yaml",
            "campaigns:\n  - name: a\n    accelerator: h100\n    gpus: 8\n    start: 2027-01-05\n    duration: 1d\n  - name: a\n    accelerator: l4\n    gpus: 1\n    start: 2027-01-05\n    duration: 1d\n",
            &["c.yaml:7", "duplicate campaign name `a`", "c.yaml:2"],
        ),
        (
            "c.yaml",
            "campaigns:\n  - name: a\n    accelerator: [h100\n",
            &["c.yaml:"],
        ),
        ("c.yaml", "", &["empty"]),
        ("c.yaml", "  \n", &["empty"]),
        (
            "c.toml",
            "[[campaigns]]\nname = \"a\"\naccelerator = \"h100\"\ngpus = \"many\"\n",
            &["c.toml:4", "campaigns[0].gpus"],
        ),
        (
            "c.ics",
            "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nnot a content line\nEND:VEVENT\nEND:VCALENDAR\n",
            &["c.ics:4"],
        ),
        (
            "c.ics",
            "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:1\nSUMMARY:x\nDTSTART:20270105T000000Z\nDURATION:PT4H\nEND:VEVENT\nEND:VCALENDAR\n",
            &["c.ics:3", "accelerator"],
        ),
        ("c.txt", "campaigns: []\n", &[]),
    ];
    for (name, text, needles) in cases {
        if name.ends_with(".txt") {
            // Not a calendar extension: a glob passes over it, so nothing is wrong — but there
            // is then no demand; covered by the config test below.
            continue;
        }
        Project::new("", name, text).fails_with(needles);
    }
}

#[test]
fn bad_configs_and_forecasts_are_located() {
    Project::new("[pools.x]\nacclerator = \"h100\"\n", "c.yaml", GOOD).fails_with(&[
        "gpucap.toml:5",
        "pools.x.acclerator",
        "did you mean `accelerator`",
    ]);
    Project::new(
        "[[scenarios]]\nname = \"a\"\nprobability = 0.4\n",
        "c.yaml",
        GOOD,
    )
    .fails_with(&["sum to 0.4"]);
    Project::new("[pools.x]\naccelerator = \"l4\"\n", "c.yaml", GOOD)
        .fails_with(&["campaign `a` fits no pool", "hint:"]);

    let p = Project::new(
        "[[inputs.forecasts]]\npath = \"f.csv\"\npool = \"h100\"\n",
        "c.yaml",
        GOOD,
    );
    std::fs::write(
        p.dir.path().join("f.csv"),
        "ds,yhat\n2027-01-05,4\n2027-01-04,5\n",
    )
    .unwrap();
    p.fails_with(&["f.csv:3", "out of order"]);
    std::fs::write(
        p.dir.path().join("f.csv"),
        "ds,yhat\n2027-01-05,4\n2027-01-05,5\n",
    )
    .unwrap();
    p.fails_with(&["f.csv:3", "duplicate"]);
    std::fs::write(p.dir.path().join("f.csv"), "").unwrap();
    p.fails_with(&["f.csv", "empty"]);
    std::fs::write(p.dir.path().join("f.csv"), "ds,yhat\n2027-01-05,four\n").unwrap();
    p.fails_with(&["f.csv:2", "yhat", "not a number"]);

    let missing = tempfile::tempdir().unwrap();
    gpucap()
        .arg("--config")
        .arg(missing.path().join("gpucap.toml"))
        .arg("demand")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("gpucap init"));
}

#[test]
fn campaigns_outside_the_horizon_warn_but_do_not_fail() {
    let p = Project::new(
        "",
        "c.yaml",
        "campaigns:\n  - name: later\n    accelerator: h100\n    gpus: 8\n    start: 2028-01-05\n    duration: 2d\n",
    );
    gpucap()
        .arg("--config")
        .arg(p.dir.path().join("gpucap.toml"))
        .args(["demand", "--format", "json"])
        .assert()
        .success()
        .stderr(predicate::str::contains("outside the planning horizon"));
}
