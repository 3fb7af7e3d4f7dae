//! `gpucap apply` end to end: the binary, a plan made by `gpucap plan`, the real AWS SDK, and
//! the local EC2 capacity peer (`tests/peers/ec2_capacity_peer.py`), which keeps its own
//! record of what it sold. Every test counts purchases in that record, never in gpucap's.
//!
//! - a plan is applied, a re-run has nothing to do, the state lists what was bought;
//! - killed (SIGKILL) after every journal record, and in the middle of a purchase, then
//!   re-run: the dead run's lock is taken over (said, and audited), every block is bought
//!   exactly once and the state equals the plan;
//! - the peer drops the answer of a purchase it carried out: found by tag, not bought again;
//! - two applies at once: one waits and fails naming the holder, the state stays whole;
//! - a stale plan (a calendar edited after planning) is refused;
//! - a dry run changes nothing and accounts for every due action (would do, for a person and
//!   why, or waiting for a later run); the audit log holds no credential.

#[path = "support/ec2_peer.rs"]
mod ec2_peer;
#[path = "support/python.rs"]
mod python;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ec2_peer::Ec2Peer;
use serde_json::Value;

const NOW: &str = "2026-12-28T00:00:00Z";
const SECRET: &str = "peer-secret-key-7f3a9c";

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// The offline-apply example, copied into a temporary directory.
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let example = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .join("examples/apply-offline");
        for f in ["gpucap.toml", "campaigns.yaml"] {
            std::fs::copy(example.join(f), dir.path().join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", example.join(f).display()));
        }
        Project { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gpucap(&self, peer: Option<&Ec2Peer>, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpucap"));
        cmd.arg("-c").arg(self.path("gpucap.toml")).args(args);
        cmd.env_remove("GPUCAP_HALT_AFTER_JOURNAL")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "peer-access-key")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1");
        if let Some(peer) = peer {
            cmd.env("GPUCAP_AWS_ENDPOINT_URL", peer.url());
        }
        cmd
    }

    fn run(&self, peer: Option<&Ec2Peer>, args: &[&str]) -> Output {
        self.gpucap(peer, args).output().unwrap()
    }

    /// `gpucap plan` at `now`, written to `name`; returns the plan.
    fn plan(&self, now: &str, name: &str) -> Value {
        let out = self.path(name);
        let run = self.run(
            None,
            &["plan", "--now", now, "-q", "-o", out.to_str().unwrap()],
        );
        assert!(run.status.success(), "{}", text(&run.stderr));
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
    }

    fn apply(&self, peer: &Ec2Peer, plan: &str, extra: &[&str]) -> Output {
        let plan = self.path(plan);
        let mut args = vec![
            "apply",
            plan.to_str().unwrap(),
            "--now",
            NOW,
            "--auto-approve",
            "--window",
            "30d",
        ];
        if !extra.contains(&"--reconcile-wait") {
            args.extend_from_slice(&["--reconcile-wait", "1s"]);
        }
        args.extend_from_slice(extra);
        self.run(Some(peer), &args)
    }

    fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path(".gpucap/state.json")).unwrap())
            .unwrap()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The peer's offerings for a plan: `examples/apply-offline/offerings.py`.
fn offerings(project: &Project, plan: &str) -> Value {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/apply-offline/offerings.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(project.path(plan))
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed to run {}: {e}", script.display()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Purchases the peer recorded, per offering id.
fn purchases(peer: &Ec2Peer) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for p in peer.record()["purchases"].as_array().unwrap() {
        let id = p["offering_id"]
            .as_str()
            .or_else(|| p["capacity_block_offering_id"].as_str())
            .unwrap_or("?")
            .to_string();
        *out.entry(id).or_insert(0) += 1;
    }
    out
}

/// The block parts the plan's due purchases come to (what must be bought once each).
fn planned_parts(offerings: &Value) -> usize {
    offerings["offerings"].as_array().unwrap().len()
}

fn blocks_in_state(project: &Project) -> usize {
    project.state()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "capacity_block")
        .count()
}

fn setup() -> (Project, Ec2Peer, usize) {
    let project = Project::new();
    project.plan(NOW, "plan.json");
    let offers = offerings(&project, "plan.json");
    let parts = planned_parts(&offers);
    assert!(parts >= 2, "the example buys several blocks: {offers}");
    let peer = Ec2Peer::start(&offers);
    (project, peer, parts)
}

#[test]
fn a_plan_is_applied_once_and_a_rerun_has_nothing_to_do() {
    let (project, peer, parts) = setup();
    let run = project.apply(&peer, "plan.json", &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("Spent $"), "{out}");
    assert!(err.contains("capacity_block"), "one line per action: {err}");
    let bought = purchases(&peer);
    assert_eq!(bought.len(), parts, "{bought:?}");
    assert!(bought.values().all(|n| *n == 1), "{bought:?}");
    assert_eq!(blocks_in_state(&project), parts);

    let list = project.run(None, &["state", "list", "--format", "json"]);
    let listed: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), parts);
    let table = project.run(None, &["state", "list"]);
    assert!(text(&table.stdout).contains("capacity_block"));

    let again = project.apply(&peer, "plan.json", &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("Already done earlier"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(purchases(&peer), bought, "nothing bought on the re-run");

    // The audit log names the purchases and never the secret key.
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("ec2:PurchaseCapacityBlock"));
    for file in ["audit.jsonl", "journal.jsonl", "state.json"] {
        let body = std::fs::read_to_string(project.path(&format!(".gpucap/{file}"))).unwrap();
        assert!(!body.contains(SECRET), "{file} holds the secret key");
        assert!(
            !body.contains("peer-access-key"),
            "{file} holds the access key"
        );
    }
    assert!(!out.contains(SECRET) && !err.contains(SECRET));
}

#[test]
fn the_next_plan_counts_what_was_bought_and_buys_only_the_rest() {
    let (project, peer, parts) = setup();
    let first: Value =
        serde_json::from_str(&std::fs::read_to_string(project.path("plan.json")).unwrap()).unwrap();
    let run = project.apply(&peer, "plan.json", &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let bought = purchases(&peer);
    assert_eq!(bought.len(), parts);

    // The next night plans against the state: what was bought is owned, not bought again.
    let second = project.plan(NOW, "plan2.json");
    let blocks = |plan: &Value| -> Vec<String> {
        plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["kind"] == "purchase_capacity_block")
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (before, after) = (blocks(&first), blocks(&second));
    assert!(!before.is_empty());
    assert!(
        after.iter().all(|id| !before.contains(id)),
        "bought blocks planned again: {after:?}"
    );
    let owned: u64 = second["pools"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["existing"].as_array().unwrap())
        .count() as u64;
    assert!(
        owned > 0,
        "the bought blocks count as owned: {}",
        second["pools"]
    );
    let cost = |plan: &Value| plan["cost"]["irreversible"].as_f64().unwrap();
    assert!(
        cost(&second) < cost(&first),
        "irreversible spend {} then {}",
        cost(&first),
        cost(&second)
    );
    assert_eq!(second["state"]["serial"], project.state()["serial"]);

    // Applying it buys nothing the first apply bought.
    let again = project.apply(&peer, "plan2.json", &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let now = purchases(&peer);
    assert!(
        bought.iter().all(|(k, n)| now.get(k) == Some(n)),
        "{bought:?} then {now:?}"
    );
}

#[test]
fn a_dry_run_changes_nothing() {
    let (project, peer, _) = setup();
    let run = project.apply(&peer, "plan.json", &["--dry-run"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).contains("Would do"),
        "{}",
        text(&run.stdout)
    );
    // "N action(s) due", then each of the N with what would become of it.
    let due = due_count(&text(&run.stderr));
    let out = text(&run.stdout);
    let ledger: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Due actions ("))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(out.contains(&format!("Due actions ({due}): ")), "{out}");
    assert_eq!(ledger.len(), due, "{out}");
    let fates = ["would do", "for a person", "later run", "done earlier"];
    for line in &ledger {
        assert!(
            fates.iter().any(|f| line.trim_start().starts_with(f)),
            "{line}"
        );
        if line.trim_start().starts_with("for a person")
            || line.trim_start().starts_with("later run")
        {
            assert!(line.contains(": "), "says why: {line}");
        }
    }
    assert!(
        ledger
            .iter()
            .any(|l| l.trim_start().starts_with("would do")),
        "{out}"
    );
    // The JSON says the same of every due action.
    let json = project.apply(&peer, "plan.json", &["--dry-run", "--format", "json"]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let summary: Value = serde_json::from_slice(&json.stdout).unwrap();
    let listed = summary["due"].as_array().unwrap();
    assert_eq!(listed.len(), due, "{summary}");
    assert!(
        listed
            .iter()
            .all(|a| a["fate"].is_string() && a["action"].is_string())
    );
    assert!(purchases(&peer).is_empty());
    assert!(!project.path(".gpucap").exists(), "not even the state");
}

/// N in the "N action(s) due by …" line apply prints on stderr.
fn due_count(stderr: &str) -> usize {
    stderr
        .lines()
        .find_map(|l| l.split_once(" action(s) due by ").map(|(n, _)| n))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no \"action(s) due\" line: {stderr}"))
}

/// Runs apply until it halts after journal record `n` (or finishes first), kills it with
/// SIGKILL, and reports whether it halted.
fn apply_and_kill_at(project: &Project, peer: &Ec2Peer, n: u64) -> bool {
    let plan = project.path("plan.json");
    let mut child = project
        .gpucap(
            Some(peer),
            &[
                "apply",
                plan.to_str().unwrap(),
                "--now",
                NOW,
                "--window",
                "30d",
                "--auto-approve",
            ],
        )
        .env("GPUCAP_HALT_AFTER_JOURNAL", n.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("halted after journal record") {
                let _ = tx.send(true);
            }
        }
        let _ = tx.send(false);
    });
    let halted = rx.recv_timeout(Duration::from_secs(120)).unwrap_or(false);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    halted
}

/// The id of the lock a killed run left.
fn lock_id(project: &Project) -> Option<String> {
    let text = std::fs::read_to_string(project.path(".gpucap/lock.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["id"].as_str().map(str::to_string)
}

/// Asserts that `rerun` took over the lock `id` a killed run left: it said so, and the audit log
/// has one record of it naming that lock.
fn assert_took_over(project: &Project, rerun: &Output, id: &str) {
    let err = text(&rerun.stderr);
    assert!(
        err.contains(&format!("took over the state lock {id}"))
            && err.contains("no longer running"),
        "{err}"
    );
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    let takeovers: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["outcome"] == "lock-takeover")
        .collect();
    assert_eq!(takeovers.len(), 1, "{audit}");
    let detail = takeovers[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains(id) && detail.contains("is no longer running"),
        "{detail}"
    );
}

/// Applies the plan once, whole, and returns how many journal records that wrote: an intent,
/// `sent` and `done` for each of the `parts` block parts.
fn journal_records_of_a_full_run(project: &Project, peer: &Ec2Peer, parts: usize) -> u64 {
    let run = project.apply(peer, "plan.json", &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let records = std::fs::read_to_string(project.path(".gpucap/journal.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(records, 3 * parts as u64);
    records
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_buys_everything_exactly_once() {
    // A full run writes: per block part intent, sent, done (3 records).
    let (probe, probe_peer, parts) = setup();
    let records = journal_records_of_a_full_run(&probe, &probe_peer, parts);

    let started = Instant::now();
    for n in 1..=records {
        let (project, peer, _) = setup();
        assert!(
            apply_and_kill_at(&project, &peer, n),
            "the run did not reach journal record {n}"
        );
        let id = lock_id(&project).expect("a killed run leaves its lock");
        // The lock held by a dead process on this host is taken over by the next run, without
        // waiting and without a person.
        let rerun = project.apply(&peer, "plan.json", &[]);
        assert!(
            rerun.status.success(),
            "kill after record {n}: {}\n{}",
            text(&rerun.stdout),
            text(&rerun.stderr)
        );
        assert_took_over(&project, &rerun, &id);
        assert!(!project.path(".gpucap/lock.json").exists());
        let bought = purchases(&peer);
        assert_eq!(bought.len(), parts, "kill after record {n}: {bought:?}");
        assert!(
            bought.values().all(|c| *c == 1),
            "kill after record {n}: bought twice: {bought:?}"
        );
        assert_eq!(blocks_in_state(&project), parts, "kill after record {n}");
    }
    eprintln!(
        "{records} kill points checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn killed_in_the_middle_of_a_purchase_then_rerun_buys_it_once() {
    let (project, peer, parts) = setup();
    // The first purchase takes 3 s to answer; the run is killed while it waits.
    peer.set_faults(&serde_json::json!({"seed": 1, "rules": [
        {"fault": "latency", "action": "PurchaseCapacityBlock", "calls": [1], "seconds": 3}
    ]}));
    let plan = project.path("plan.json");
    let mut child = project
        .gpucap(
            Some(&peer),
            &[
                "apply",
                plan.to_str().unwrap(),
                "--now",
                NOW,
                "--window",
                "30d",
                "--auto-approve",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while peer.calls("PurchaseCapacityBlock") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    peer.set_faults(&serde_json::json!({"seed": 1, "rules": []}));
    let id = lock_id(&project).expect("the killed run's lock");
    let rerun = project.apply(&peer, "plan.json", &[]);
    assert!(rerun.status.success(), "{}", text(&rerun.stderr));
    assert_took_over(&project, &rerun, &id);
    let bought = purchases(&peer);
    assert_eq!(bought.len(), parts, "{bought:?}");
    assert!(bought.values().all(|c| *c == 1), "{bought:?}");
    assert_eq!(blocks_in_state(&project), parts);
}

#[test]
fn a_dropped_answer_is_found_by_tag_and_not_bought_again() {
    let (project, peer, parts) = setup();
    peer.set_faults(&serde_json::json!({"seed": 3, "rules": [
        {"fault": "drop_response", "action": "PurchaseCapacityBlock", "calls": [1]},
        {"fault": "describe_delay", "seconds": 0.5}
    ]}));
    let run = project.apply(&peer, "plan.json", &["--reconcile-wait", "5s"]);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    let bought = purchases(&peer);
    assert_eq!(bought.len(), parts);
    assert!(bought.values().all(|c| *c == 1), "{bought:?}");
    assert!(
        text(&run.stderr).contains("looking for intent"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn two_applies_at_once_one_waits_and_fails_naming_the_holder() {
    let (project, peer, parts) = setup();
    // The first run is slow (each purchase answers after 1 s) and holds the lock meanwhile.
    peer.set_faults(&serde_json::json!({"seed": 1, "rules": [
        {"fault": "latency", "action": "PurchaseCapacityBlock", "seconds": 1}
    ]}));
    let plan = project.path("plan.json");
    let first = project
        .gpucap(
            Some(&peer),
            &[
                "apply",
                plan.to_str().unwrap(),
                "--now",
                NOW,
                "--window",
                "30d",
                "--auto-approve",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !project.path(".gpucap/lock.json").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = project.apply(&peer, "plan.json", &["--lock-timeout", "200ms"]);
    assert!(!second.status.success());
    let err = text(&second.stderr);
    assert!(
        err.contains("lock") && err.contains("force-unlock"),
        "{err}"
    );
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", text(&first.stderr));
    let bought = purchases(&peer);
    assert_eq!(bought.len(), parts);
    assert!(bought.values().all(|c| *c == 1), "{bought:?}");
    assert_eq!(blocks_in_state(&project), parts, "the state is whole");
}

#[test]
fn a_plan_whose_calendar_changed_is_refused_as_stale() {
    let (project, peer, _) = setup();
    let calendar = project.path("campaigns.yaml");
    let text_before = std::fs::read_to_string(&calendar).unwrap();
    std::fs::write(&calendar, text_before.replace("gpus: 64", "gpus: 72")).unwrap();
    let run = project.apply(&peer, "plan.json", &[]);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    assert!(
        err.contains("saved plan is stale") && err.contains("campaigns.yaml"),
        "{err}"
    );
    assert!(
        err.contains("gpucap plan"),
        "suggests planning again: {err}"
    );
    assert!(purchases(&peer).is_empty());
}

#[test]
fn irreversible_spend_above_the_approval_limit_needs_a_recorded_approval() {
    let project = Project::new();
    let config = project.path("gpucap.toml");
    let text_before = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text_before + "\n[budget]\napproval_above = 50000\n",
    )
    .unwrap();
    let plan = project.plan(NOW, "plan.json");
    let offers = offerings(&project, "plan.json");
    let peer = Ec2Peer::start(&offers);

    let refused = project.apply(&peer, "plan.json", &[]);
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("needs an approval"),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        purchases(&peer).is_empty(),
        "nothing bought without approval"
    );

    // An approvals file next to the plan, for this plan's fingerprint, is an approval.
    let digest = plan["fingerprint"]["digest"].as_str().unwrap();
    std::fs::write(
        project.path("approvals.json"),
        format!(
            r#"[{{"plan": "{digest}", "by": "carol", "reason": "Q1 pretraining, ticket 42"}}]"#
        ),
    )
    .unwrap();
    let approved = project.apply(&peer, "plan.json", &[]);
    assert!(approved.status.success(), "{}", text(&approved.stderr));
    assert!(text(&approved.stderr).contains("approved by carol"));
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    let approval = audit
        .lines()
        .find(|l| l.contains("\"api\":\"approval\""))
        .expect("the approval is in the audit log");
    assert!(
        approval.contains("carol") && approval.contains("ticket 42"),
        "{approval}"
    );
    assert_eq!(purchases(&peer).len(), planned_parts(&offers));
}

#[test]
fn apply_without_a_plan_file_plans_first() {
    let project = Project::new();
    project.plan(NOW, "plan.json");
    let peer = Ec2Peer::start(&offerings(&project, "plan.json"));
    let run = project.run(
        Some(&peer),
        &["apply", "--now", NOW, "--window", "30d", "--auto-approve"],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(
        text(&run.stderr).contains("planned in"),
        "{}",
        text(&run.stderr)
    );
    assert!(!purchases(&peer).is_empty());
}

/// The example with one campaign of 560 H100s (70 nodes) for a week, placed whole: its plan
/// buys two capacity blocks that carry it at once (AWS sells at most 64 instances a block).
/// Returns the project and the peer's offerings for the plan, every part in us-east-1a.
fn gang_project() -> (Project, Value) {
    let project = Project::new();
    std::fs::write(
        project.path("campaigns.yaml"),
        "campaigns:\n  - name: pretrain\n    team: research\n    accelerator: h100\n    \
         gpus: 560\n    start: 2027-01-11T12:00:00Z\n    duration: 7d\n    \
         interruptible: false\n    priority: critical\n",
    )
    .unwrap();
    let plan = project.plan(NOW, "plan.json");
    let pretrain = plan["campaigns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "pretrain")
        .expect("the campaign in the plan");
    assert_eq!(pretrain["placement"]["nodes"], 70, "{pretrain}");
    let offers = offerings(&project, "plan.json");
    assert!(planned_parts(&offers) >= 2, "two or more parts: {offers}");
    (project, offers)
}

/// The zones of the peer's purchases: each offering's zone, as `offerings` configured it.
fn purchase_zones(peer: &Ec2Peer, offerings: &[Value]) -> Vec<String> {
    peer.record()["purchases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let id = &p["offering_id"];
            offerings
                .iter()
                .find(|o| &o["id"] == id)
                .and_then(|o| o["zone"].as_str())
                .unwrap_or("?")
                .to_string()
        })
        .collect()
}

#[test]
fn the_blocks_a_campaign_runs_on_at_once_are_bought_in_one_zone() {
    let (project, offers) = gang_project();
    // The first part is also offered, cheaper, in us-east-1b, and the last one only there
    // besides us-east-1a: bought part by part, the cheapest offers would split the campaign's
    // nodes between two zones. Every part in us-east-1b costs least as a whole.
    let mut list = offers["offerings"].as_array().unwrap().clone();
    let mut in_b = list[0].clone();
    in_b["id"] = format!("{}-b", in_b["id"].as_str().unwrap()).into();
    in_b["zone"] = "us-east-1b".into();
    let fee: f64 = in_b["upfront_fee"].as_str().unwrap().parse().unwrap();
    in_b["upfront_fee"] = format!("{:.2}", fee * 0.9).into();
    let last = list.len() - 1;
    let mut last_in_b = list[last].clone();
    last_in_b["id"] = format!("{}-b", last_in_b["id"].as_str().unwrap()).into();
    last_in_b["zone"] = "us-east-1b".into();
    list.push(in_b);
    list.push(last_in_b);
    let parts = planned_parts(&offers);
    let peer = Ec2Peer::start(&serde_json::json!({"offerings": list}));
    let run = project.apply(&peer, "plan.json", &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    let zones = purchase_zones(&peer, &list);
    assert_eq!(zones.len(), parts, "{zones:?}\n{err}");
    let first = &zones[0];
    assert!(
        zones.iter().all(|z| z == first),
        "one zone: {zones:?}\n{err}"
    );
    if parts == 2 {
        assert_eq!(first, "us-east-1b", "the cheaper zone for both: {err}");
    }
    assert!(err.contains("pretrain in "), "{err}");
}

#[test]
fn when_the_second_zone_stops_offering_a_part_nothing_of_the_campaign_is_bought() {
    let (project, offers) = gang_project();
    // The last part's offering in us-east-1a vanished; it is offered only in a second zone,
    // us-east-1b. No zone offers every part, so none is bought, not even those offered in
    // us-east-1a.
    let mut list = offers["offerings"].as_array().unwrap().clone();
    let last = list.len() - 1;
    list[last]["zone"] = "us-east-1b".into();
    let peer = Ec2Peer::start(&serde_json::json!({"offerings": list}));
    let run = project.apply(&peer, "plan.json", &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(
        purchase_zones(&peer, &list),
        Vec::<String>::new(),
        "{out}\n{err}"
    );
    assert_eq!(peer.calls("PurchaseCapacityBlock"), 0, "{err}");
    assert!(
        err.contains("are not all offered in one zone, so none of them is bought")
            && err.contains("`pretrain`")
            && err.contains("offered in us-east-1b"),
        "{err}"
    );

    // Then us-east-1a offers the last part again, and the next run buys them all there.
    let mut list = offers["offerings"].as_array().unwrap().clone();
    list[last]["id"] = format!("{}-again", list[last]["id"].as_str().unwrap()).into();
    peer.configure(&serde_json::json!({"offerings": list}));
    let run = project.apply(&peer, "plan.json", &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let zones = purchase_zones(&peer, &list);
    assert_eq!(zones.len(), planned_parts(&offers), "{zones:?}");
    assert!(zones.iter().all(|z| z == "us-east-1a"), "{zones:?}");
}

#[test]
fn a_campaign_placed_whole_killed_at_every_journal_boundary_stays_in_one_zone() {
    // Every part offered in us-east-1a and us-east-1b, us-east-1b cheaper for the group. After
    // the kill, us-east-1a becomes the cheaper zone: a re-run that had forgotten where the
    // first part was bought would buy the rest there and split the campaign's nodes.
    let offers_in = |offers: &Value, cheaper: &str| -> Vec<Value> {
        let mut list = Vec::new();
        for o in offers["offerings"].as_array().unwrap() {
            for zone in ["us-east-1a", "us-east-1b"] {
                let mut o = o.clone();
                o["id"] = format!("{}-{zone}", o["id"].as_str().unwrap()).into();
                o["zone"] = zone.into();
                if zone == cheaper {
                    let fee: f64 = o["upfront_fee"].as_str().unwrap().parse().unwrap();
                    o["upfront_fee"] = format!("{:.2}", fee * 0.95).into();
                }
                list.push(o);
            }
        }
        list
    };
    let (probe, offers) = gang_project();
    let parts = planned_parts(&offers);
    let probe_peer =
        Ec2Peer::start(&serde_json::json!({"offerings": offers_in(&offers, "us-east-1b")}));
    let records = journal_records_of_a_full_run(&probe, &probe_peer, parts);

    for n in 1..=records {
        let (project, _) = gang_project();
        let before = offers_in(&offers, "us-east-1b");
        let peer = Ec2Peer::start(&serde_json::json!({"offerings": before}));
        assert!(
            apply_and_kill_at(&project, &peer, n),
            "the run did not reach journal record {n}"
        );
        let after = offers_in(&offers, "us-east-1a");
        peer.configure(&serde_json::json!({"offerings": after}));
        let rerun = project.apply(&peer, "plan.json", &[]);
        assert!(
            rerun.status.success(),
            "kill after record {n}: {}",
            text(&rerun.stderr)
        );
        let bought = purchases(&peer);
        assert_eq!(bought.len(), parts, "kill after record {n}: {bought:?}");
        assert!(
            bought.values().all(|c| *c == 1),
            "kill after record {n}: {bought:?}"
        );
        let all: Vec<Value> = before.iter().chain(&after).cloned().collect();
        let zones = purchase_zones(&peer, &all);
        assert!(
            zones.iter().all(|z| *z == zones[0]),
            "kill after record {n}: the campaign's blocks in {zones:?}\n{}",
            text(&rerun.stderr)
        );
    }
}
