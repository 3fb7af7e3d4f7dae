//! Hostile and absurd input through the CLI (issue 15): every case exits with a clear error
//! naming the file and field (status 2 for bad input), never a panic, a hang or a gate that
//! passes a plan on a number that is not one.

#[path = "support/canned_http.rs"]
mod canned_http;

#[path = "support/files.rs"]
mod files;
use files::copy_dir;

use std::path::{Path, PathBuf};

use assert_cmd::Command;

const NOW: &str = "2026-12-15T00:00:00Z";

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
}

fn gpucap() -> Command {
    let mut cmd = Command::cargo_bin("gpucap").expect("the gpucap binary");
    cmd.env_remove("RUST_LOG").env("NO_COLOR", "1").env(
        "GPUCAP_CACHE_DIR",
        std::env::temp_dir().join("gpucap-test-no-cache"),
    );
    cmd
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(config: &Path, args: &[&str]) -> Run {
    let out = gpucap()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run gpucap");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A copy of the quickstart with `edit` applied to its config; returns the dir and the config.
fn quickstart(edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&root().join("examples/quickstart"), dir.path());
    let config = dir.path().join("gpucap.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, edit(text)).expect("written");
    (dir, config)
}

fn no_panic(r: &Run) {
    assert!(
        !r.stderr.contains("panicked") && !r.stderr.contains("RUST_BACKTRACE"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_budget_that_is_not_a_number_is_bad_input_before_any_gate() {
    for (from, to, field) in [
        ("total = 9_000_000", "total = nan", "budget.total"),
        ("monthly = 4_000_000", "monthly = -inf", "budget.monthly"),
        ("monthly = 4_000_000", "monthly = -5", "budget.monthly"),
        (
            "research = 6_000_000",
            "research = nan",
            "budget.teams.research",
        ),
    ] {
        let (_dir, config) = quickstart(|t| t.replace(from, to));
        let r = run(&config, &["plan", "--now", NOW, "--format", "json"]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{to}: {}", r.stderr);
        assert!(r.stderr.contains(field), "{to}: {}", r.stderr);
        assert!(r.stderr.contains("gpucap.toml"), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "no plan on stdout: {}", r.stdout);
    }
}

/// A copy of the quickstart with `edit` applied to one of its files.
fn quickstart_file(file: &str, edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let (dir, config) = quickstart(|t| t);
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).expect("file");
    std::fs::write(&path, edit(text)).expect("written");
    (dir, config)
}

#[test]
fn absurd_durations_and_dates_are_errors_not_panics() {
    let cases: Vec<(tempfile::TempDir, PathBuf, &str)> = vec![
        {
            let (d, c) = quickstart(|t| t.replace("slip = \"14d\"", "slip = \"1000000y\""));
            (d, c, "scenarios[1].slip")
        },
        {
            let (d, c) = quickstart_file("calendars/llm-team-q1.yaml", |t| {
                t.replace("duration: 3w", "duration: 3000000000000000h")
            });
            (d, c, "campaigns[1].duration")
        },
        {
            let (d, c) = quickstart_file("calendars/llm-team-q1.yaml", |t| {
                t + "  - name: huge-work\n    accelerator: h100\n    gpu_hours: 1.0e15\n    window: {start: 2027-02-01T00:00:00Z, end: 2027-02-01T01:00:00Z}\n"
            });
            (d, c, "gpu_hours")
        },
        {
            let (d, c) = quickstart_file("calendars/evals.ics", |t| {
                t.replacen(
                    "DTEND;TZID=America/Los_Angeles:20270105T210000",
                    "DURATION:P999999999999D",
                    1,
                )
            });
            (d, c, "DURATION")
        },
    ];
    for (_dir, config, field) in &cases {
        let r = run(config, &["plan", "--now", NOW, "-q"]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{field}: {}", r.stderr);
        assert!(r.stderr.contains(field), "{field}: {}", r.stderr);
    }
}

#[test]
fn float_and_negative_flags_get_a_message_about_the_value() {
    let config = root().join("examples/quickstart/gpucap.toml");
    for value in ["nan", "inf", "-5", "0"] {
        let r = run(&config, &["plan", "--now", NOW, "--time-limit", value]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{value}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("`{value}`")), "{}", r.stderr);
        assert!(!r.stderr.contains("unexpected argument"), "{}", r.stderr);
    }
    let r = run(&config, &["plan", "--now", "3000-01-01"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("outside the years"), "{}", r.stderr);
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, "{}").expect("written");
    for (flag, value, says) in [
        ("--window", "1000000y", "longer than 20 years"),
        ("--window", "-7d", "negative"),
        ("--price-tolerance", "-5", "percentage"),
    ] {
        let out = gpucap()
            .args(["generate"])
            .arg(&plan)
            .args(["-o"])
            .arg(dir.path().join("tf"))
            .args([flag, value])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(
            stderr.contains(says) || stderr.contains("plan"),
            "{flag} {value}: {stderr}"
        );
        assert!(!stderr.contains("unexpected argument"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    for value in ["nan", "-inf"] {
        let out = gpucap()
            .args(["solve", "-", "--time-limit", value])
            .write_stdin("{}")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        assert!(stderr.contains(&format!("`{value}`")), "{stderr}");
    }
}

#[test]
fn numbers_past_their_range_are_refused_not_wrapped_or_allocated() {
    // scale: bounded, and the message shows the number readably.
    let (_d, config) = quickstart(|t| t.replace("scale = 1.25", "scale = 1e300"));
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    no_panic(&r);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("scenarios[2].scale"), "{}", r.stderr);
    assert!(r.stderr.contains("1e300"), "{}", r.stderr);

    // The largest legal scale: 100 times the demand is still a problem the solver takes (its
    // tables grow with the term levels, not every GPU), so it is planned and the budget gates
    // deny it. Under a lower size limit it is refused before solving, naming the pools.
    let (_d, config) = quickstart(|t| t.replace("scale = 1.25", "scale = 100"));
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(!r.stderr.contains("too large"), "{}", r.stderr);
    let r = run(
        &config,
        &["plan", "--now", NOW, "-q", "--max-problem-size", "100000"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("too large to solve"), "{}", r.stderr);
    assert!(r.stderr.contains("`h100-us`"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);

    // Forecast values: a GPU count, never 1e30 or 3e9 (which summed wrapped in u32).
    for value in ["1e30", "3000000000", "inf"] {
        let (_d, config) = quickstart_file("forecasts/inference-h100.csv", |t| {
            t.replacen(",102.0000\n", &format!(",{value}\n"), 1)
        });
        let r = run(&config, &["plan", "--now", NOW, "-q"]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{value}: {}", r.stderr);
        assert!(r.stderr.contains("inference-h100.csv:2"), "{}", r.stderr);
        assert!(r.stderr.contains("yhat"), "{}", r.stderr);
    }
}

#[test]
fn a_problem_file_with_absurd_demand_is_refused_before_solving() {
    let text = std::fs::read_to_string(root().join("tests/fixtures/problems/spec-example.json"))
        .expect("fixture");
    // Nine million GPUs changing every hour: within the per-pool bound, but 2,184 segments of
    // over a million term levels each.
    let hourly = (0..2184u32)
        .map(|h| format!("[{h}, {}, {}]", h + 1, 9_000_000 + h % 2))
        .collect::<Vec<_>>()
        .join(", ");
    for (to, says) in [
        // Past the per-pool bound: the solver once tabulated 4e9 levels (8.5 GB).
        (
            "[[0, 168, 4294967295]]".to_string(),
            "more than the 10000000",
        ),
        // Within it, but too large a problem to solve: refused with its size.
        (format!("[{hourly}]"), "too large to solve"),
    ] {
        let hostile = text.replacen("[[0, 168, 64], [168, 500, 128]]", &to, 1);
        assert_ne!(hostile, text);
        let out = gpucap()
            .args(["solve", "-"])
            .write_stdin(hostile)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn a_recursive_policy_is_refused_not_a_stack_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = dir.path().join("rec");
    std::fs::create_dir_all(&policies).expect("mkdir");
    std::fs::write(
        policies.join("r.rego"),
        "package gpucap.policies.rec\n\nimport rego.v1\n\nf(x) := y if {\n\ty := f(x + 1)\n}\n\n\
         deny contains d if {\n\tf(1) > 0\n\td := {\"rule\": \"r\", \"message\": \"m\", \"fix\": \"f\"}\n}\n",
    )
    .expect("written");
    let out = gpucap()
        .args(["policy", "test"])
        .arg(&policies)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("r.rego: line 5: function `f` calls itself"),
        "{stderr}"
    );
}

#[test]
fn a_region_that_does_not_exist_is_refused_in_the_config_with_the_nearest_one() {
    let (_dir, config) = quickstart(|text| {
        text.replace(
            "regions = [\"us-east-1\", \"us-east-2\", \"us-east4\"]",
            "regions = [\"us-east-1\", \"us-east-99\", \"us-east4\"]",
        )
    });
    for args in [&["demand"][..], &["plan", "--now", NOW, "-q"][..]] {
        let r = run(&config, args);
        no_panic(&r);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains(
                "gpucap.toml: `pools.h100-us-east.regions[1]`: aws has no region `us-east-99`"
            ),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains("did you mean `us-east-1`?"),
            "{}",
            r.stderr
        );
        assert!(
            !r.stderr.contains("campaign"),
            "not blamed on a campaign: {}",
            r.stderr
        );
    }
}

#[test]
fn catalog_rows_selling_no_gpus_are_refused_and_unknown_instance_types_are_not_offers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n";
    let good = "p5.48xlarge,H100,8.0,192.0,2048.0,x,98.32,,us-east-1,use1-az4,x86_64\n";
    let zero = dir.path().join("zero.csv");
    std::fs::write(
        &zero,
        format!(
            "{header}{good}p5.48xlarge,H100,0,192.0,2048.0,x,98.32,,us-east-1,use1-az6,x86_64\n"
        ),
    )
    .expect("written");
    let out = gpucap()
        .args(["prices", "--format", "json", "--import"])
        .arg(&zero)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("zero.csv:3") && stderr.contains("`AcceleratorCount` `0`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no offers printed");

    let unknown = dir.path().join("unknown.csv");
    std::fs::write(
        &unknown,
        format!("{header}p9.huge,H100,4.0,192.0,2048.0,x,50.0,,us-east-1,use1-az4,x86_64\n{good}"),
    )
    .expect("written");
    let out = gpucap()
        .args(["prices", "--format", "json", "--import"])
        .arg(&unknown)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let offers: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let types: Vec<&str> = offers
        .as_array()
        .expect("offers")
        .iter()
        .map(|o| o["instance_type"].as_str().expect("a type"))
        .collect();
    assert_eq!(types, ["p5.48xlarge"], "{stderr}");
    assert!(
        stderr.contains("unknown.csv:2 p9.huge")
            && stderr.contains("not in gpucap's instance-type table"),
        "{stderr}"
    );
}

/// Once the plan has a cost, builds a string of 1.1 × 10⁹ bytes, ten times longer at each
/// step (`concat` copies fast): a gigabyte well within the time the timer allows.
fn greedy_policy() -> String {
    let mut steps = String::from("\ts0 := \"xxxxxxxxxx\"\n");
    for i in 1..=7 {
        let parts = vec![format!("s{}", i - 1); 10].join(", ");
        steps += &format!("\ts{i} := concat(\"\", [{parts}])\n");
    }
    let parts = ["s7"; 11].join(", ");
    format!(
        "package gpucap.policies.greedy\n\nimport rego.v1\n\ndeny contains d if {{\n\
         \tinput.cost.expected_total > 0\n{steps}\tcount(concat(\"\", [{parts}])) > 0\n\
         \td := {{\"rule\": \"greedy\", \"message\": \"m\", \"fix\": \"f\"}}\n}}\n"
    )
}

#[test]
fn a_policy_that_takes_gigabytes_stops_the_plan_with_its_name_not_an_out_of_memory() {
    let (dir, config) = quickstart(|text| {
        text.replace(
            "max_quote_age = \"24h\"",
            "max_quote_age = \"24h\"\npolicies = [\"greedy\"]",
        )
    });
    let policies = dir.path().join("greedy");
    std::fs::create_dir_all(&policies).expect("mkdir");
    std::fs::write(policies.join("greedy.rego"), greedy_policy()).expect("written");
    let plan = dir.path().join("plan.json");
    let r = run(
        &config,
        &[
            "plan",
            "--now",
            NOW,
            "-q",
            "-o",
            plan.to_str().expect("utf-8"),
        ],
    );
    no_panic(&r);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("greedy.rego"), "{}", r.stderr);
    assert!(
        r.stderr.contains("more than 1024 MiB of memory"),
        "{}",
        r.stderr
    );
    assert!(!plan.exists(), "the gate failed closed: no plan written");
}

#[test]
fn plan_files_are_checked_before_anything_is_generated_from_them() {
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/plans/aws.json")).expect("fixture");
    let base: serde_json::Value = serde_json::from_str(&text).expect("json");
    type Edit = fn(&mut serde_json::Value);
    let cases: [(Edit, &str); 15] = [
        (
            |p| p["actions"][0]["instances"] = 4294967295u32.into(),
            "actions[0].instances",
        ),
        (
            |p| p["actions"][0]["instances"] = 0.into(),
            "actions[0].instances",
        ),
        (
            |p| p["actions"][0]["end"] = "2027-01-10T00:00:00Z".into(),
            "actions[0].end",
        ),
        (
            |p| p["actions"][0]["cost"] = (-5.0).into(),
            "actions[0].cost",
        ),
        (
            |p| p["actions"][0]["region"] = "us-central1".into(),
            "actions[0].region",
        ),
        (
            |p| p["actions"][0]["region"] = "us-east-99".into(),
            "actions[0].region",
        ),
        (
            |p| {
                let id = p["actions"][0]["id"].clone();
                p["actions"][1]["id"] = id;
            },
            "actions[1].id",
        ),
        (|p| p["created_at"] = "yesterday".into(), "created_at"),
        // Hours that disagree with the horizon's start and end.
        (|p| p["horizon"]["hours"] = 2000.into(), "horizon.hours"),
        (
            |p| p["actions"][0]["cloud"] = "ibm".into(),
            "actions[0].cloud",
        ),
        (
            |p| p["actions"][0]["zone"] = "eu-west-1a".into(),
            "actions[0].zone",
        ),
        (
            |p| p["actions"][0]["start"] = "+262143-01-01T00:00:00Z".into(),
            "actions[0].start",
        ),
        // Within the cloud's purchase rules: AWS sells at most 64 instances per block, blocks
        // of whole days it sells (1-14, then weeks), and pieces that make up the purchase.
        (
            |p| {
                p["actions"][0]["instances"] = 71.into();
                p["actions"][0]["pieces"] = serde_json::json!([65, 6]);
            },
            "actions[0].pieces",
        ),
        (
            |p| p["actions"][0]["pieces"] = serde_json::json!([4, 3]),
            "actions[0].pieces",
        ),
        (
            |p| p["actions"][0]["end"] = "2027-01-19T12:00:00Z".into(),
            "actions[0].end",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (edit, field)) in cases.iter().enumerate() {
        let mut plan = base.clone();
        edit(&mut plan);
        let path = dir.path().join(format!("plan-{i}.json"));
        std::fs::write(&path, serde_json::to_string(&plan).expect("json")).expect("written");
        let out_dir = dir.path().join(format!("tf-{i}"));
        let out = gpucap()
            .arg("generate")
            .arg(&path)
            .arg("-o")
            .arg(&out_dir)
            .args(["--now", "2027-01-03T06:00:00Z"])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: {stderr}");
        assert!(stderr.contains(&format!("`{field}`")), "{field}: {stderr}");
        assert!(stderr.contains(&format!("plan-{i}.json")), "{stderr}");
        assert!(!out_dir.exists(), "{field}: nothing written");
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_run_that_fails_late_writes_nothing_and_clobbers_nothing() {
    let config = root().join("examples/quickstart/gpucap.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("plan-dir")).expect("mkdir");
    // The plan and problem would be fine; `-o` names a directory: nothing is written.
    let r = run(
        &config,
        &[
            "plan",
            "--now",
            NOW,
            "-q",
            "--emit-problem",
            out.join("problem.json").to_str().expect("utf-8"),
            "-o",
            out.join("plan-dir").to_str().expect("utf-8"),
        ],
    );
    no_panic(&r);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("plan-dir"), "{}", r.stderr);
    assert!(r.stderr.contains("a directory"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("gpucap-tmp"),
        "the target is named: {}",
        r.stderr
    );
    assert_eq!(
        entries(&out),
        ["plan-dir"],
        "no problem file, no temporary file"
    );

    // A chart directory that is a file fails after the plan is made: still nothing written.
    std::fs::write(out.join("charts"), "not a dir").expect("written");
    let r = run(
        &config,
        &[
            "plan",
            "--now",
            NOW,
            "-q",
            "-o",
            out.join("plan.json").to_str().expect("utf-8"),
            "--chart-dir",
            out.join("charts").to_str().expect("utf-8"),
        ],
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert_eq!(entries(&out), ["charts", "plan-dir"], "{}", r.stderr);

    // A device is never replaced by a file.
    #[cfg(unix)]
    {
        let r = run(&config, &["plan", "--now", NOW, "-q", "-o", "/dev/null"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("a device"), "{}", r.stderr);
        use std::os::unix::fs::FileTypeExt as _;
        assert!(
            std::fs::metadata("/dev/null")
                .expect("exists")
                .file_type()
                .is_char_device()
        );
    }

    // `-o -` writes the plan through to stdout.
    let r = run(
        &config,
        &["plan", "--now", NOW, "-q", "--format", "json", "-o", "-"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.matches("\"schema\": \"gpucap.plan/v1\"").count() >= 2);
}

#[test]
fn plan_and_problem_files_that_are_not_files_or_not_text_are_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = dir.path().join("binary.json");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x7b]).expect("written");
    for args in [
        vec!["generate".to_string(), dir.path().display().to_string()],
        vec!["generate".to_string(), binary.display().to_string()],
        vec!["solve".to_string(), dir.path().display().to_string()],
        vec!["solve".to_string(), binary.display().to_string()],
    ] {
        let mut cmd = gpucap();
        cmd.args(&args);
        if args[0] == "generate" {
            cmd.arg("-o").arg(dir.path().join("tf"));
        }
        let out = cmd.output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    }
}

#[test]
fn inputs_once_accepted_although_wrong_are_refused() {
    // A quoted newline in a forecast cell.
    let (_d, config) = quickstart_file("forecasts/inference-h100.csv", |t| {
        t.replacen("2027-01-05,", "\"2027-01-05\n\",", 1)
    });
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("inference-h100.csv"), "{}", r.stderr);
    assert!(r.stderr.contains("line break"), "{}", r.stderr);

    // `campaigns:` with nothing after it.
    let (_d, config) = quickstart_file("calendars/llm-team-q1.yaml", |_| "campaigns:\n".into());
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("`campaigns`"), "{}", r.stderr);

    // A calendar that is a symlink to nothing.
    #[cfg(unix)]
    {
        let (dir, config) = quickstart(|t| t);
        std::os::unix::fs::symlink(
            dir.path().join("calendars/gone.yaml"),
            dir.path().join("calendars/team-b.yaml"),
        )
        .expect("symlink");
        let r = run(&config, &["plan", "--now", NOW, "-q"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("team-b.yaml"), "{}", r.stderr);
    }

    // Two [[capacity]] entries with one id: the config's error, not "a bug".
    let (_d, config) = quickstart(|t| {
        // The first [[capacity]] table, up to the next table header.
        let from = t.find("[[capacity]]").expect("capacity");
        let to = t[from + 1..].find("\n[").map_or(t.len(), |e| from + 1 + e);
        let block = t[from..to].to_string();
        t + "\n" + &block
    });
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("capacity[1].id"), "{}", r.stderr);
    assert!(!r.stderr.contains("a bug"), "{}", r.stderr);
}

/// A problem Cbc cannot finish in seconds: odd instance sizes against 2,000 hours of demand
/// that changes every few hours, in four scenarios (a debug build finds no plan in 20 s).
fn hard_problem() -> String {
    let hours = 2000u32;
    let mut seed = 7u64;
    let mut next = move |lo: u32, hi: u32| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + ((seed >> 33) as u32) % (hi - lo + 1)
    };
    let mut segments = |count: usize| {
        let (mut out, mut h) = (Vec::new(), 0);
        while h < hours && out.len() < count {
            let end = (h + next(3, 30)).min(hours);
            out.push(format!("[{h}, {end}, {}]", next(20, 400)));
            h = end;
        }
        out.join(", ")
    };
    let scenarios: Vec<String> = (0..4)
        .map(|i| {
            format!(
                r#"{{"name": "s{i}", "probability": 0.25, "demand": {{"p": {{"firm": [{}], "flex": [{}]}}}}}}"#,
                segments(usize::MAX),
                segments(20)
            )
        })
        .collect();
    format!(
        r#"{{"schema": "gpucap.problem/v1", "start": "2027-01-04T00:00:00Z", "hours": {hours}, "pools": ["p"],
  "offers": [
    {{"id": "od-7", "pool": "p", "kind": "on_demand", "gpus_per_instance": 7, "price_per_instance_hour": 7.3}},
    {{"id": "od-5", "pool": "p", "kind": "on_demand", "gpus_per_instance": 5, "price_per_instance_hour": 5.4}},
    {{"id": "spot-3", "pool": "p", "kind": "spot", "gpus_per_instance": 3, "price_per_instance_hour": 1.9, "overhead": 0.1, "max_instances": 20}},
    {{"id": "term-11", "pool": "p", "kind": "term", "gpus_per_instance": 11, "price_per_instance_hour": 6.1, "term_hours": 168, "starts": {{"from": 0, "to": 1832, "step": 12}}, "max_instances": 40}},
    {{"id": "term-13", "pool": "p", "kind": "term", "gpus_per_instance": 13, "price_per_instance_hour": 7.0, "term_hours": 336, "starts": {{"from": 0, "to": 1664, "step": 24}}, "max_instances": 40}}
  ],
  "scenarios": [{}]}}"#,
        scenarios.join(", ")
    )
}

#[test]
fn at_the_time_limit_the_best_plan_comes_back_with_its_gap_and_progress_shows_at_v() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hard.json");
    std::fs::write(&path, hard_problem()).expect("written");
    let started = std::time::Instant::now();
    let out = gpucap()
        .arg("solve")
        .arg(&path)
        .args(["--time-limit", "1", "-v"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the limit ended the solve"
    );
    let solution: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(solution["status"], "feasible", "{solution}");
    let message = solution["message"].as_str().expect("a message");
    assert!(
        message.starts_with("stopped at the time limit: this is the best plan found")
            && message.contains("gap ")
            && message.contains("--time-limit"),
        "{message}"
    );
    let (cost, bound) = (
        solution["expected_cost"].as_f64().expect("cost"),
        solution["bound"].as_f64().expect("bound"),
    );
    assert!(
        bound > 0.0 && bound < cost,
        "a proven bound below the plan: {solution}"
    );
    // -v: a line as the pool starts and one as it ends, with its status.
    assert!(stderr.contains("pool p: solving "), "{stderr}");
    assert!(
        stderr.contains("pool p: no plan yet") || stderr.contains("pool p: feasible"),
        "{stderr}"
    );

    // Without -v and off a terminal: no progress at all.
    let out = gpucap()
        .arg("solve")
        .arg(root().join("tests/fixtures/problems/spec-example.json"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("pool "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Answers every request on 127.0.0.1 with `403 Forbidden` (which no client retries), for as
/// long as the test runs: the clouds' clients resolve their credentials, sign and send, and
/// fail at once.
fn forbidding_server() -> String {
    canned_http::always(403, "Forbidden", "{}")
}

/// A marker value for every credential variable gpucap or the clouds' SDKs read
/// (`gpucap::logging::CREDENTIAL_VARS`): none may reach stderr.
const CREDENTIAL_MARKERS: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", "AKIAMARKER0ACCESS0ID"),
    (
        "AWS_SECRET_ACCESS_KEY",
        "marker-aws-secret-access-key-0000000001",
    ),
    ("AWS_SESSION_TOKEN", "marker-aws-session-token-0000000001"),
    ("AWS_SECURITY_TOKEN", "marker-aws-security-token-0000000001"),
    ("AZURE_ACCESS_TOKEN", "marker-azure-access-token-0000000001"),
    (
        "AZURE_CLIENT_SECRET",
        "marker-azure-client-secret-0000000001",
    ),
    ("AZURE_CLIENT_ID", "marker-azure-client-id-0000000001"),
    ("GPUCAP_GCP_API_KEY", "marker-gcp-api-key-0000000001"),
    (
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "marker-google-oauth-token-0000000001",
    ),
    (
        "CLOUDSDK_AUTH_ACCESS_TOKEN",
        "marker-cloudsdk-token-0000000001",
    ),
];

#[test]
fn credentials_in_the_environment_never_reach_the_log_at_any_verbosity() {
    let every: Vec<&str> = gpucap::logging::CREDENTIAL_VARS.to_vec();
    let marked: Vec<&str> = CREDENTIAL_MARKERS.iter().map(|(k, _)| *k).collect();
    assert_eq!(marked, every, "a marker for every credential variable");
    let server = forbidding_server();
    let (dir, config) = quickstart(|t| {
        t + &format!(
            "\n[state]\nbackend = \"s3\"\nbucket = \"gpucap-markers\"\nkey = \"state.json\"\nregion = \"us-east-1\"\nendpoint = \"{server}\"\n"
        )
    });
    let plan = root().join("tests/fixtures/plans/aws.json");
    let plan = plan.to_str().expect("utf-8");
    let commands: [&[&str]; 7] = [
        &[
            "prices",
            "--cloud",
            "aws",
            "-a",
            "h100",
            "--region",
            "us-east-1",
        ],
        &["prices", "--cloud", "gcp", "-a", "h100"],
        &[
            "prices", "--cloud", "azure", "-a", "h100", "--region", "eastus",
        ],
        &["plan", "--now", NOW, "--time-limit", "20", "-o", "-"],
        &["apply", plan, "--auto-approve"],
        &["release", "--auto-approve"],
        &["state", "list"],
    ];
    for args in commands {
        for (verbosity, rust_log) in [("-v", None), ("-vv", None), ("-vv", Some("trace"))] {
            let mut cmd = gpucap();
            cmd.current_dir(dir.path())
                .env("GPUCAP_CACHE_DIR", dir.path().join("no-cache"))
                .env("AWS_REGION", "us-east-1")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env("AWS_CONFIG_FILE", dir.path().join("no-aws-config"))
                .env(
                    "AWS_SHARED_CREDENTIALS_FILE",
                    dir.path().join("no-aws-credentials"),
                )
                .env("AZURE_TENANT_ID", "00000000-0000-0000-0000-00000000000a")
                .env(
                    "AZURE_SUBSCRIPTION_ID",
                    "00000000-0000-0000-0000-00000000000b",
                )
                .env("AZURE_AUTHORITY_HOST", &server)
                .env("GOOGLE_CLOUD_PROJECT", "gpucap-markers")
                .env("GPUCAP_AWS_ENDPOINT_URL", &server)
                .env("GPUCAP_AWS_PRICING_ENDPOINT_URL", &server)
                .env("GPUCAP_S3_ENDPOINT", &server)
                .env(
                    "GPUCAP_AZURE_PRICES_URL",
                    format!("{server}/api/retail/prices"),
                )
                .env("GPUCAP_AZURE_ENDPOINT_URL", &server)
                .env("GPUCAP_GCP_BILLING_ENDPOINT_URL", &server)
                .env("GPUCAP_GCP_COMPUTE_ENDPOINT_URL", &server)
                .env("GPUCAP_GCP_ENDPOINT_URL", &server)
                .env("GPUCAP_RETRY_BASE_MS", "1")
                .envs(CREDENTIAL_MARKERS.iter().copied())
                .arg("--config")
                .arg(&config)
                .arg(verbosity)
                .args(args)
                .timeout(std::time::Duration::from_secs(300));
            if let Some(filter) = rust_log {
                cmd.env("RUST_LOG", filter);
            }
            let out = cmd.output().expect("run gpucap");
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
            for (name, marker) in CREDENTIAL_MARKERS {
                for (stream, text) in [("stderr", &stderr), ("stdout", &stdout)] {
                    assert!(
                        !text.contains(marker),
                        "{args:?} {verbosity} RUST_LOG={rust_log:?}: {name} in {stream}:\n{}",
                        text.lines()
                            .filter(|l| l.contains(marker))
                            .take(3)
                            .collect::<Vec<_>>()
                            .join("\n")
                    );
                }
            }
        }
    }
}

const CATALOG_HEADER: &str = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n";

/// A catalog directory holding `aws_vms.csv` (as `write` fills it) and its `sources.csv`.
fn catalog_dir(write: impl FnOnce(&mut dyn std::io::Write)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("sources.csv"),
        "file,source,as_of\naws_vms.csv,test catalog,2026-11-01\n",
    )
    .expect("written");
    let file = std::fs::File::create(dir.path().join("aws_vms.csv")).expect("created");
    let mut out = std::io::BufWriter::new(file);
    write(&mut out);
    std::io::Write::flush(&mut out).expect("flushed");
    dir
}

#[test]
fn a_catalog_with_a_header_and_no_rows_says_so() {
    let dir = catalog_dir(|out| out.write_all(CATALOG_HEADER.as_bytes()).expect("written"));
    let csv = dir.path().join("aws_vms.csv");
    let out = gpucap()
        .args(["prices", "--format", "json", "--import"])
        .arg(&csv)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("aws_vms.csv: the file has a header but no rows"),
        "{stderr}"
    );
    assert!(!stderr.contains("no offers match"), "{stderr}");

    let snapshot = dir.path().join("snapshot.csv");
    let out = gpucap()
        .args(["prices", "--write-snapshot"])
        .arg(&snapshot)
        .arg("--from-catalog")
        .arg(dir.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has a header but no rows"), "{stderr}");
    assert!(!snapshot.exists());
}

#[test]
fn a_catalog_of_a_million_rows_ends_in_an_error_not_an_abort() {
    // The catalog of issue 35, which once died allocating 592 MB under a 4 GiB address-space
    // limit: the import streams it and stops past `MAX_CATALOG_ROWS`, holding no more.
    let row = "p5.48xlarge,H100,8.0,192.0,2048.0,x,98.32,60.00,us-east-1,use1-az4,x86_64\n";
    let dir = catalog_dir(|out| {
        out.write_all(CATALOG_HEADER.as_bytes()).expect("written");
        for _ in 0..1_000_000 {
            out.write_all(row.as_bytes()).expect("written");
        }
    });
    let snapshot = dir.path().join("snapshot.csv");
    let out = gpucap()
        .args(["prices", "--write-snapshot"])
        .arg(&snapshot)
        .arg("--from-catalog")
        .arg(dir.path())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let limit = gpucap::limits::MAX_CATALOG_ROWS;
    assert!(
        stderr.contains(&format!(
            "aws_vms.csv:{}: the catalog is too large to import: more than {limit} rows",
            limit + 2
        )),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
    assert!(!snapshot.exists());
}

#[test]
fn a_calendar_nested_a_hundred_thousand_deep_is_refused_before_parsing() {
    // 200 KB of flow sequences nested 100,000 deep: once 33 s to refuse, now one scan.
    let (_d, config) = quickstart_file("calendars/llm-team-q1.yaml", |_| {
        format!(
            "campaigns: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )
    });
    let r = run(&config, &["demand"]);
    no_panic(&r);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "llm-team-q1.yaml:1: lists and tables are nested more than {} levels deep",
            gpucap::limits::MAX_NESTING_DEPTH
        )),
        "{}",
        r.stderr
    );
    // The config too.
    let (_d, config) =
        quickstart(|t| t + &format!("\nx = {}{}\n", "[".repeat(100_000), "]".repeat(100_000)));
    let r = run(&config, &["demand"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("gpucap.toml:"), "{}", r.stderr);
    assert!(r.stderr.contains("nested more than"), "{}", r.stderr);
}

#[test]
fn inputs_that_make_no_sense_are_refused_naming_the_field() {
    // A capacity zone outside its region.
    let (_d, config) = quickstart(|t| {
        t.replace(
            "region = \"us-east-1\"\ninstance_type = \"p5.48xlarge\"\ninstances = 4",
            "region = \"us-east-1\"\nzone = \"eu-west-1a\"\ninstance_type = \"p5.48xlarge\"\ninstances = 4",
        )
    });
    let r = run(&config, &["plan", "--now", NOW, "-q"]);
    no_panic(&r);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "gpucap.toml: `capacity[0].zone`: `eu-west-1a` is not a zone of aws region `us-east-1`"
        ),
        "{}",
        r.stderr
    );

    // A checkpoint interval of 4,294,967,295 minutes (and a restart as long).
    for field in ["checkpoint_interval_minutes", "restart_minutes"] {
        let (_d, config) = quickstart(|t| t + &format!("\n[spot]\n{field} = 4294967295\n"));
        let r = run(&config, &["plan", "--now", NOW, "-q"]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{field}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "`spot.{field}`: must be at most 1440 minutes (a day), found `4294967295`"
            )),
            "{}",
            r.stderr
        );
    }

    // A problem whose purchase starts all lie past its horizon, or whose range is empty.
    let text = std::fs::read_to_string(root().join("tests/fixtures/problems/spec-example.json"))
        .expect("fixture");
    for (to, says) in [
        (
            r#""starts": {"from": 5000, "to": 6000, "step": 24}"#,
            "`offers[2].starts.from`: start 5000 is outside the horizon [0, 2184)",
        ),
        (
            r#""starts": {"from": 48, "to": 24, "step": 24}"#,
            "`offers[2].starts.to`: `to` 24 must be after `from` 48",
        ),
    ] {
        let hostile = text.replacen(r#""starts": {"from": 24, "to": 2016, "step": 24}"#, to, 1);
        assert_ne!(hostile, text);
        let out = gpucap()
            .args(["solve", "-"])
            .write_stdin(hostile)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn demand_widths_must_be_positive_and_sane() {
    let config = root().join("examples/quickstart/gpucap.toml");
    for (width, says) in [
        (
            "-5",
            "the width must be a positive number of columns, found `-5`",
        ),
        (
            "0",
            "the width must be a positive number of columns, found `0`",
        ),
        (
            "4000000000",
            "the width must be at most 1000 columns, found `4000000000`",
        ),
    ] {
        let r = run(&config, &["demand", "--width", width]);
        no_panic(&r);
        assert_eq!(r.code, 2, "{width}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{width}: {}", r.stderr);
        assert!(!r.stderr.contains("unexpected argument"), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
}
