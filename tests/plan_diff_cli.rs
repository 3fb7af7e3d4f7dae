//! `gpucap plan --compare-to PREVIOUS.json`, the nightly loop as CI runs it: plan, change a
//! calendar, plan again against the first plan. The markdown, the JSON and the table name the
//! actions added, removed and changed, the totals and the calendar as the input that moved; a
//! resized purchase is one change; an identical plan says there are no changes (and
//! `--detailed-exitcode` exits 0); a missing or malformed previous plan is bad input naming the
//! file, refused before any planning.

#[path = "support/files.rs"]
mod files;
use files::copy_dir;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gpucap::plan::Plan;
use serde_json::Value;

const NOW: &str = "2026-12-15T00:00:00Z";
const CALENDAR: &str = "calendars/llm-team-q1.yaml";

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn plan(config: &Path, extra: &[&str]) -> Run {
    let out = Command::cargo_bin("gpucap")
        .expect("the gpucap binary")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env(
            "GPUCAP_CACHE_DIR",
            std::env::temp_dir().join("gpucap-test-no-cache"),
        )
        .arg("--config")
        .arg(config)
        .args(["plan", "--now", NOW])
        .args(extra)
        .output()
        .expect("run gpucap");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A copy of the quickstart, planned once into `prev.json`.
fn planned_quickstart() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("examples/quickstart"), dir.path());
    let config = dir.path().join("gpucap.toml");
    let previous = dir.path().join("prev.json");
    let run = plan(&config, &["-q", "-o", previous.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    (dir, config, previous)
}

fn edit(path: &Path, edit: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    let edited = edit(text.clone());
    assert_ne!(edited, text, "the edit changes {}", path.display());
    std::fs::write(path, edited).unwrap();
}

fn read_plan(path: &Path) -> Plan {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list of actions")
        .iter()
        .map(|a| a["id"].as_str().expect("an id").to_string())
        .collect()
}

#[test]
fn a_moved_and_a_new_campaign_are_named_with_the_calendar_that_moved() {
    let (dir, config, previous_path) = planned_quickstart();
    let previous = read_plan(&previous_path);
    // Fine-tuning two weeks later (its on-demand run moves past its old window), and a new
    // campaign on L4s, which the quickstart did not buy before.
    edit(&dir.path().join(CALENDAR), |t| {
        t.replace(
            "start: 2027-02-01T08:00:00-05:00",
            "start: 2027-02-15T08:00:00-05:00",
        ) + "
  - name: vision-eval
    accelerator: l4
    gpus: 16
    start: 2027-02-08
    duration: 5d
    interruptible: false
    priority: normal
    team: research
"
    });
    let compare = ["--compare-to", previous_path.to_str().unwrap()];

    // JSON: the plan document as `-o` writes it, plus the diff.
    let out = dir.path().join("plan.json");
    let mut args = vec!["-q", "--format", "json", "-o", out.to_str().unwrap()];
    args.extend(compare);
    let run = plan(&config, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json: Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    let current: Plan = serde_json::from_value(json.clone()).expect("still a gpucap.plan/v1");
    assert_eq!(current, read_plan(&out), "stdout is the -o plan and a diff");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(written.get("diff").is_none(), "-o writes the plan only");

    let diff = &json["diff"];
    assert_eq!(
        diff["previous"]["file"].as_str(),
        previous_path.to_str(),
        "{diff:#}"
    );
    assert_eq!(diff["previous"]["created_at"], previous.created_at.as_str());
    let (added, removed) = (ids(&diff["added"]), ids(&diff["removed"]));
    let before: Vec<&str> = previous.actions.iter().map(|a| a.id.as_str()).collect();
    let now: Vec<&str> = current.actions.iter().map(|a| a.id.as_str()).collect();
    for id in &added {
        assert!(
            now.contains(&id.as_str()) && !before.contains(&id.as_str()),
            "{id}"
        );
    }
    for id in &removed {
        assert!(
            before.contains(&id.as_str()) && !now.contains(&id.as_str()),
            "{id}"
        );
    }
    // The fine-tuning (interruptible, on spot) moved two weeks: each of its spot runs from
    // 02-01 13:00 is removed and the same run from 02-15 added.
    let moved: Vec<&String> = removed
        .iter()
        .filter(|id| id.starts_with("spot-a100-us-") && id.ends_with("-20270201t1300-14d"))
        .collect();
    assert!(!moved.is_empty(), "{removed:?}");
    for from in moved {
        let to = from.replace("-20270201t1300-", "-20270215t1300-");
        assert!(added.contains(&to), "{from} moved to {to}: {added:?}");
    }
    assert!(
        added.iter().any(|id| id.contains("-l4-us-")),
        "the L4 campaign is new work: {added:?}"
    );
    assert_eq!(
        diff["why"]["inputs"],
        serde_json::json!([{"kind": "calendar", "name": CALENDAR, "change": "changed"}]),
        "only the calendar moved"
    );
    let expected = &diff["totals"]["expected"];
    assert_eq!(expected["old"].as_f64(), Some(previous.cost.expected_total));
    assert_eq!(expected["new"].as_f64(), Some(current.cost.expected_total));
    let delta = expected["delta"].as_f64().unwrap();
    assert!(delta > 0.0, "the L4 campaign costs something: {delta}");
    assert_eq!(
        diff["unchanged"].as_u64().unwrap() as usize
            + diff["changed"].as_array().unwrap().len()
            + added.len(),
        current.actions.len()
    );

    // Markdown, for the pull-request comment.
    let mut args = vec!["-q", "--format", "markdown"];
    args.extend(compare);
    let run = plan(&config, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = &run.stdout;
    assert!(
        md.contains("### Changes since the last applied plan\n"),
        "{md}"
    );
    let changed = diff["changed"].as_array().unwrap().len();
    let summary = format!(
        "**\\+{} action{}, −{}, \\~{changed} changed · expected cost +\\$",
        added.len(),
        if added.len() == 1 { "" } else { "s" },
        removed.len()
    );
    assert!(md.contains(&summary), "{summary} in:\n{md}");
    for id in added.iter().chain(&removed) {
        assert!(md.contains(&format!("`{id}`")), "{id} in:\n{md}");
    }
    assert!(
        md.contains(&format!("- calendar `{CALENDAR}` changed\n")),
        "{md}"
    );
    // The section comes before the gates, right after the summary.
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} in:\n{md}"));
    assert!(at("### Changes since") < at("### Budget gates"));

    // The terminal table.
    let run = plan(&config, &compare);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = &run.stdout;
    assert!(
        table.contains(&format!("changes since {}", previous_path.display())),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("│ +   on-demand")),
        "{table}"
    );
    assert!(
        table.lines().any(|l| l.starts_with("│ -   spot")),
        "{table}"
    );
    assert!(
        table.contains(&format!("- calendar {CALENDAR} changed")),
        "{table}"
    );
}

/// A small project planned as a nightly job does (from `tests/plan_cli.rs`): one capacity block
/// per campaign.
const NIGHTLY_CONFIG: &str = r#"
[planning]
horizon = "8w"

[inputs]
calendars = ["campaigns.yaml"]

[pools.h100-east]
accelerator = "h100"
regions = ["us-east-1"]

[[scenarios]]
name = "expected"
probability = 1.0

[prices]
offline = true

# Room for the pretraining's nodes on demand in the half hour after its block (the default,
# 1,536 vCPUs, runs 8 p5.48xlarge): a larger pretraining is then one larger block.
[quotas.limits]
"aws/us-east-1/L-417A185B" = 4_608
"#;

const NIGHTLY_CAMPAIGNS: &str = r#"
campaigns:
  - name: pretrain
    accelerator: h100
    gpus: 64
    start: 2027-01-11T12:00:00Z
    duration: 7d
    interruptible: false
    priority: critical
  - name: finetune
    accelerator: h100
    gpus: 32
    start: 2027-01-20T12:00:00Z
    duration: 14d
    interruptible: false
    priority: high
"#;

#[test]
fn a_resized_block_is_one_change_and_a_later_night_says_when_it_was_planned() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gpucap.toml");
    std::fs::write(&config, NIGHTLY_CONFIG).unwrap();
    std::fs::write(dir.path().join("campaigns.yaml"), NIGHTLY_CAMPAIGNS).unwrap();
    let previous = dir.path().join("monday.json");
    let run = plan(&config, &["-q", "-o", previous.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let monday = read_plan(&previous);

    std::fs::write(
        dir.path().join("campaigns.yaml"),
        NIGHTLY_CAMPAIGNS.replace("gpus: 64", "gpus: 72"),
    )
    .unwrap();
    let compare = ["--compare-to", previous.to_str().unwrap()];
    let mut args = vec!["-q", "--format", "json"];
    args.extend(compare);
    let run = plan(&config, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json: Value = serde_json::from_str(&run.stdout).unwrap();
    let diff = &json["diff"];
    let resized: Vec<&Value> = diff["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["after"]["kind"] == "purchase_capacity_block")
        .collect();
    assert_eq!(resized.len(), 1, "{diff:#}");
    let c = resized[0];
    assert_eq!(c["matched_by"], "purchase");
    assert_ne!(c["id"], c["previous_id"], "a new count is a new id");
    let fields = c["fields"].as_array().unwrap();
    let instances = fields.iter().find(|f| f["field"] == "instances").unwrap();
    assert_eq!(
        (&instances["old"], &instances["new"]),
        (&8.into(), &9.into())
    );
    let (added, removed) = (ids(&diff["added"]), ids(&diff["removed"]));
    for id in [&c["id"], &c["previous_id"]] {
        let id = id.as_str().unwrap().to_string();
        assert!(!added.contains(&id) && !removed.contains(&id), "{id}");
    }
    let old_block = monday.actions.iter().find(|a| a.instances == 8).unwrap();
    assert_eq!(c["previous_id"], old_block.id.as_str());
    let irreversible = diff["totals"]["irreversible"]["delta"].as_f64().unwrap();
    assert!(
        (irreversible - (c["cost"]["delta"].as_f64().unwrap())).abs() < 0.01,
        "the block is the only irreversible change: {irreversible}"
    );

    let mut args = vec!["-q", "--format", "markdown"];
    args.extend(compare);
    let md = plan(&config, &args).stdout;
    assert!(md.contains("8 → 9 instances (64 → 72 GPUs)"), "{md}");
    assert!(md.contains(&format!("(was `{}`)", old_block.id)), "{md}");

    // The next night, nothing else edited: planned a day later, from the same files.
    let out = Command::cargo_bin("gpucap")
        .unwrap()
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(&config)
        .args(["plan", "-q", "--format", "markdown", "--now"])
        .arg("2026-12-16T00:00:00Z")
        .args(compare)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("- planned at 2026-12-16 UTC, 1 d after the previous plan (2026-12-15 UTC)"),
        "{md}"
    );
}

#[test]
fn an_identical_plan_has_no_changes_and_the_detailed_exit_code_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = root().join("examples/quickstart/gpucap.toml");
    let previous = dir.path().join("prev.json");
    let run = plan(&config, &["-q", "-o", previous.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let compare = ["--compare-to", previous.to_str().unwrap()];

    let mut args = vec!["-q", "--format", "json", "--detailed-exitcode"];
    args.extend(compare);
    let run = plan(&config, &args);
    assert_eq!(
        run.code, 0,
        "no changes since the previous plan: {}",
        run.stderr
    );
    let json: Value = serde_json::from_str(&run.stdout).unwrap();
    let diff = &json["diff"];
    for list in ["added", "removed", "changed"] {
        assert_eq!(diff[list], serde_json::json!([]), "{list}");
    }
    assert_eq!(diff["unchanged"], json["actions"].as_array().unwrap().len());
    assert_eq!(diff["totals"]["expected"]["delta"], 0.0);
    assert_eq!(diff["why"]["inputs"], serde_json::json!([]));
    // Without a previous plan, any action is a change, as before.
    let run = plan(&config, &["-q", "--format", "json", "--detailed-exitcode"]);
    assert_eq!(run.code, 2, "{}", run.stderr);

    let mut args = vec!["-q", "--format", "markdown"];
    args.extend(compare);
    let md = plan(&config, &args).stdout;
    assert!(
        md.contains(&format!("No changes since `{}`", previous.display())),
        "{md}"
    );
    assert!(!md.contains("| \\+ |") && !md.contains("| \\- |"), "{md}");

    let table = plan(&config, &compare).stdout;
    assert!(
        table.contains(&format!("No changes since {}", previous.display())),
        "{table}"
    );
}

#[test]
fn a_missing_or_malformed_previous_plan_is_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = root().join("examples/quickstart/gpucap.toml");
    let missing = dir.path().join("last-applied.json");
    let run = plan(&config, &["--compare-to", missing.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{}: `--compare-to`: cannot read the previous plan",
            missing.display()
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint: "), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    assert!(
        !run.stderr.contains("solving"),
        "refused before planning: {}",
        run.stderr
    );

    // Not a plan: the config itself, and a plan with its schema edited.
    let run = plan(&config, &["--compare-to", config.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("error: {}:1:1:", config.display())),
        "{}",
        run.stderr
    );
    let previous = dir.path().join("prev.json");
    let run = plan(&config, &["-q", "-o", previous.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    edit(&previous, |t| {
        t.replacen("gpucap.plan/v1", "gpucap.plan/v0", 1)
    });
    let run = plan(&config, &["--compare-to", previous.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{}: `schema`: `gpucap.plan/v0` is not `gpucap.plan/v1`",
            previous.display()
        )),
        "{}",
        run.stderr
    );
}
