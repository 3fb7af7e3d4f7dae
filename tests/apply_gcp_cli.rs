//! `gpucap apply` and `gpucap release` on GCP end to end: the binary (built with the `gcp`
//! feature), the GCP act provider and the local Compute Engine peer
//! (`tests/peers/gce_peer.py`), which keeps its own record of every reservation it created
//! and every insert it received. Every count is the peer's, never gpucap's.
//!
//! Run with `cargo test --features gcp --test apply_gcp_cli` (the Google SDK is not a default
//! feature; without it this file is not built).
//!
//! The built-in price snapshot holds no GCP reservation offers (a reservation costs the
//! on-demand price, so the planner has no reason to choose one), so the plan is made by
//! `gpucap plan` for a GCP pool and two zonal `reserve` actions are added to it, priced like
//! the pool's on-demand offer. The plan's input fingerprints stay those `gpucap plan` wrote, so
//! `apply` accepts it.
//!
//! - the plan is applied: two reservations, each inserted once, a re-run has nothing to do;
//! - killed (SIGKILL) after every journal record, and in the middle of an insert, then
//!   force-unlocked and re-run: each reservation is inserted (created) exactly once;
//! - an answer lost after Compute Engine acted: found by name, not inserted again; rate limits,
//!   resets and 5xx retried;
//! - `gpucap release` deletes an idle reservation no campaign needs, after two looks; keeps
//!   one an instance uses; never touches one it did not make.
//!
//! Pools: [`Project::with_pool`] adds launch settings and an on-demand run from now, so apply
//! makes the pool's instance template and managed instance group and sizes it:
//!
//! - one template and one group, at the planned size with every instance running (counted by
//!   the peer's `listManagedInstances`), each inserted once; a re-run sends nothing;
//! - killed after every journal record and re-run: still each exactly once;
//! - a dropped group insert, throttled inserts, gets and resizes and a failed wait: settled by
//!   name, no second insert;
//! - instances stuck `CREATING` with `ZONE_RESOURCE_POOL_EXHAUSTED`: reported as a capacity
//!   shortfall ("0 of 3"), not done;
//! - `gpucap release` scales the pool to zero once no campaign needs it, and leaves a group it
//!   did not make alone;
//! - killed while waiting on the resize's Operation: the re-run waits on that Operation and
//!   does not resize again.
//!
//! Flex-start: [`Project::with_flex`] makes the pool `flex_start = true`, so its run is asked
//! for with one DWS resize request:
//!
//! - queued (`ACCEPTED`): reported pending, asked once, looked at again by the next run; done
//!   once Compute Engine fulfils it;
//! - killed after every journal record and re-run: exactly one resize request;
//! - a lost answer to the insert: found by name, not asked twice;
//! - `gpucap release` cancels the queued request gpucap made, never another client's.

#[path = "support/gce_peer.rs"]
mod gce_peer;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gce_peer::{GcePeer, PROJECT};
use serde_json::{Value, json};

const NOW: &str = "2026-12-28T00:00:00Z";
/// After the campaigns (the last ends 2027-02-03), before the reservations' planned end.
const AFTER: &str = "2027-02-10T00:00:00Z";
/// The planned end of both reservations (their `deleteAtTime`).
const RESERVED_UNTIL: &str = "2027-03-01T00:00:00Z";
const ZONE_A: &str = "us-central1-a";
const ZONE_B: &str = "us-central1-b";
const FIRST: &str = "reserve-h100-gcp-gcp-us-central1-a-a3-highgpu-8g-2x-20261228-63d";
const SECOND: &str = "reserve-h100-gcp-gcp-us-central1-b-a3-highgpu-8g-1x-20261228-63d";
/// The on-demand run added to the pool plan: running now, in the pool's GCP group.
const RUN_NOW: &str = "od-h100-gcp-gcp-us-central1-a3-highgpu-1g-3x-20261228-14d";
/// The pool's deterministic name: its instance template's and managed instance group's.
const POOL_NAME: &str = "gpucap-h100-gcp-us-central1-a3-highgpu-1g";
const RUN_INSTANCES: u64 = 3;
/// The GCP capacity block added by [`Project::with_purchases`]: 44 days after [`NOW`], so
/// Compute Engine still lets it be cancelled (at least 30 days ahead) until 2027-01-11.
const BLOCK: &str = "block-h100-gcp-gcp-us-central1-a-a3-highgpu-8g-2x-20270210-14d";
const BLOCK_START: &str = "2027-02-10T00:00:00Z";
const BLOCK_END: &str = "2027-02-24T00:00:00Z";
const BLOCK_COST: f64 = 61_000.0;
/// The one-year GCP commitment added by [`Project::with_purchases`].
const COMMIT: &str = "commit-h100-gcp-gcp-us-central1-a3-highgpu-8g-1x-20261228-1y";
const COMMIT_END: &str = "2027-12-28T00:00:00Z";
const COMMIT_COST: f64 = 377_500.0;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// The offline-apply example's calendar with one GCP pool, and a plan with two zonal GCP
    /// reservations due now.
    fn new() -> Project {
        Project::make(false)
    }

    /// As [`Project::new`], with launch settings for the pool (`[apply.pools.h100-gcp]`) and
    /// an on-demand run of [`RUN_INSTANCES`] in it from now on: apply makes the pool's
    /// instance template and managed instance group and sizes the group.
    fn with_pool() -> Project {
        Project::make(true)
    }

    /// As [`Project::new`], with a GCP capacity block ([`BLOCK`]: a calendar-mode future
    /// reservation of 2 x a3-highgpu-8g in us-central1-a from [`BLOCK_START`] for 14 days) and
    /// a one-year GCP commitment ([`COMMIT`]: 1 x a3-highgpu-8g in us-central1), both due now.
    fn with_purchases() -> Project {
        let project = Project::make(false);
        project.add_purchases();
        project
    }

    fn make(pool: bool) -> Project {
        Project::make_with(pool, "")
    }

    /// As [`Project::with_pool`], the pool flex-start (`flex_start = true` in its launch
    /// settings): its on-demand run is asked for with a DWS resize request.
    fn with_flex() -> Project {
        Project::make_full(true, "flex_start = true\n", "")
    }

    /// [`Project::make`] with `extra` (whole TOML tables) in the config.
    fn make_with(pool: bool, extra: &str) -> Project {
        Project::make_full(pool, "", extra)
    }

    /// [`Project::make_with`] with `launch` (keys) added to the pool's launch settings.
    fn make_full(pool: bool, launch: &str, extra: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let example = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .join("examples/apply-offline");
        std::fs::copy(
            example.join("campaigns.yaml"),
            dir.path().join("campaigns.yaml"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("gpucap.toml"),
            format!(
                r#"[planning]
horizon = "8w"
# The pool's runs on 1-GPU instance types: these tests are about the pool's apply, not
# about placing campaigns whole.
placement = "fluid"

[inputs]
calendars = ["campaigns.yaml"]

[pools.h100-gcp]
accelerator = "h100"
regions = ["us-central1"]

[[scenarios]]
name = "expected"
probability = 1.0

[prices]
offline = true

{extra}
[state]
backend = "local"
dir = ".gpucap"

[apply]
gcp_project = "{PROJECT}"
{}"#,
                if pool {
                    format!(
                        r#"
[apply.pools.h100-gcp]
image = "projects/deeplearning-platform-release/global/images/family/common-cu124"
subnets = ["regions/us-central1/subnetworks/train"]
security_groups = ["gpu-train"]
{launch}"#
                    )
                } else {
                    String::new()
                }
            ),
        )
        .unwrap();
        let project = Project { dir };
        project.plan(pool);
        project
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gpucap(&self, peer: &GcePeer, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpucap"));
        cmd.arg("-c").arg(self.path("gpucap.toml")).args(args);
        for k in [
            "GPUCAP_HALT_AFTER_JOURNAL",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            cmd.env_remove(k);
        }
        // The project comes from `apply.gcp_project`; the variable would send gpucap elsewhere.
        cmd.env("GPUCAP_GCP_PROJECT", "not-this-project")
            .env("GPUCAP_GCP_ENDPOINT_URL", peer.url())
            .env("GPUCAP_GCP_POLL_MS", "20")
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1");
        cmd
    }

    /// `gpucap plan`, then the two reservations (and with `pool`, a run from now) added (see
    /// the module docs).
    fn plan(&self, pool: bool) {
        let out = self.path("plan.json");
        let run = Command::new(env!("CARGO_BIN_EXE_gpucap"))
            .arg("-c")
            .arg(self.path("gpucap.toml"))
            .args(["plan", "--now", NOW, "-q", "-o", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", text(&run.stderr));
        let mut plan: Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let run_action = plan["actions"][0].clone();
        assert_eq!(run_action["cloud"], "gcp", "{run_action}");
        assert_eq!(run_action["region"], "us-central1", "{run_action}");
        // Reservations of whole A3 machines, whichever H100 size the plan ran on demand.
        let reserve = |id: &str, zone: &str, instances: u32| {
            let mut a = run_action.clone();
            a["id"] = id.into();
            a["kind"] = "reserve".into();
            a["instance_type"] = "a3-highgpu-8g".into();
            a["zone"] = zone.into();
            a["instances"] = instances.into();
            a["gpus"] = (8 * instances).into();
            a["start"] = NOW.into();
            a["end"] = RESERVED_UNTIL.into();
            a["start_hour"] = 0.into();
            a["end_hour"] = (63 * 24).into();
            a["due"] = NOW.into();
            a["cost"] = (88.25 * 63.0 * 24.0 * f64::from(instances)).into();
            a["irreversible"] = false.into();
            a["campaigns"] = json!([]);
            a
        };
        let mut run_now = run_action.clone();
        run_now["id"] = RUN_NOW.into();
        run_now["instances"] = RUN_INSTANCES.into();
        run_now["gpus"] = RUN_INSTANCES.into();
        run_now["start"] = NOW.into();
        run_now["end"] = "2027-01-11T00:00:00Z".into();
        run_now["start_hour"] = 0.into();
        run_now["end_hour"] = (14 * 24).into();
        run_now["due"] = NOW.into();
        let actions = plan["actions"].as_array_mut().unwrap();
        actions.push(reserve(FIRST, ZONE_A, 2));
        actions.push(reserve(SECOND, ZONE_B, 1));
        if pool {
            assert_eq!(run_now["kind"], "run_on_demand", "{run_now}");
            assert_eq!(run_now["instance_type"], "a3-highgpu-1g", "{run_now}");
            actions.push(run_now);
        }
        std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    }

    /// Adds [`BLOCK`] and [`COMMIT`] to the plan (see [`Project::with_purchases`]).
    fn add_purchases(&self) {
        let out = self.path("plan.json");
        let mut plan: Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let reserve = plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == FIRST)
            .unwrap()
            .clone();
        let mut block = reserve.clone();
        block["id"] = BLOCK.into();
        block["kind"] = "purchase_capacity_block".into();
        block["instances"] = 2.into();
        block["gpus"] = 16.into();
        block["start"] = BLOCK_START.into();
        block["end"] = BLOCK_END.into();
        block["start_hour"] = (44 * 24).into();
        block["end_hour"] = (58 * 24).into();
        block["due"] = NOW.into();
        block["cost"] = BLOCK_COST.into();
        block["irreversible"] = true.into();
        let irreversible = plan["cost"]["irreversible"].as_f64().unwrap();
        plan["cost"]["irreversible"] = (irreversible + BLOCK_COST + COMMIT_COST).into();
        block["offer"] = "gcp/us-central1-a/a3-highgpu-8g/calendar".into();
        let mut commit = reserve;
        commit["id"] = COMMIT.into();
        commit["kind"] = "commit".into();
        commit["zone"] = Value::Null;
        commit["instances"] = 1.into();
        commit["gpus"] = 8.into();
        commit["start"] = NOW.into();
        commit["end"] = COMMIT_END.into();
        commit["start_hour"] = 0.into();
        commit["end_hour"] = (365 * 24).into();
        commit["due"] = NOW.into();
        commit["cost"] = COMMIT_COST.into();
        commit["irreversible"] = true.into();
        commit["offer"] = "gcp/us-central1/a3-highgpu-8g/cud-1y".into();
        let actions = plan["actions"].as_array_mut().unwrap();
        actions.push(block);
        actions.push(commit);
        std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    }

    fn resources_in_state(&self, kind: &str) -> Vec<Value> {
        self.state()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == kind && r["cloud"] == "gcp")
            .cloned()
            .collect()
    }

    fn apply(&self, peer: &GcePeer, extra: &[&str]) -> Output {
        self.apply_at(peer, NOW, extra)
    }

    fn apply_at(&self, peer: &GcePeer, now: &str, extra: &[&str]) -> Output {
        let plan = self.path("plan.json");
        let mut args = vec![
            "apply",
            plan.to_str().unwrap(),
            "--now",
            now,
            "--auto-approve",
            "--window",
            "30d",
        ];
        if !extra.contains(&"--reconcile-wait") {
            args.extend_from_slice(&["--reconcile-wait", "1s"]);
        }
        args.extend_from_slice(extra);
        self.gpucap(peer, &args).output().unwrap()
    }

    fn release(&self, peer: &GcePeer, now: &str, extra: &[&str]) -> Output {
        self.gpucap(peer, &["release", "--now", now, "--reconcile-wait", "1s"])
            .args(extra)
            .output()
            .unwrap()
    }

    fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path(".gpucap/state.json")).unwrap())
            .unwrap()
    }

    fn reservations_in_state(&self) -> Vec<Value> {
        self.state()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "reservation" && r["cloud"] == "gcp")
            .cloned()
            .collect()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Each of the plan's two reservations was inserted and created exactly once, and both exist.
fn assert_created_once(peer: &GcePeer, context: &str) {
    for (what, counts) in [("created", peer.created()), ("inserted", peer.inserts())] {
        assert_eq!(counts.len(), 2, "{context}: {what} {counts:?}");
        assert!(
            counts.values().all(|n| *n == 1),
            "{context}: {what} twice: {counts:?}"
        );
    }
    let live = peer.reservations();
    assert_eq!(live.len(), 2, "{context}: {live:?}");
    assert!(
        live.iter().all(|r| r["status"] == "READY"),
        "{context}: {live:?}"
    );
}

#[test]
fn a_plan_with_gcp_reservations_is_applied_once_and_a_rerun_has_nothing_to_do() {
    let project = Project::new();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("Done (2)"), "{out}");
    assert_created_once(&peer, "first run");
    let live = peer.reservations();
    for r in &live {
        let name = r["name"].as_str().unwrap();
        assert!(name.starts_with("gpucap-") && name.len() <= 63, "{name}");
        let tags: Value = serde_json::from_str(r["description"].as_str().unwrap()).unwrap();
        assert_eq!(tags["managed-by"], "gpucap");
        assert!(tags["gpucap:intent"].is_string());
        assert_eq!(r["deleteAtTime"], "2027-03-01T00:00:00Z");
        assert_eq!(
            r["specificReservation"]["instanceProperties"]["machineType"],
            "a3-highgpu-8g"
        );
    }
    let in_a = live
        .iter()
        .find(|r| r["zone"].as_str().unwrap().ends_with(ZONE_A))
        .unwrap();
    assert_eq!(in_a["specificReservation"]["count"], "2");
    // Every insert carried a requestId, none the zero UUID, and went to the configured project.
    let record = peer.record();
    for l in record["log"].as_array().unwrap() {
        assert!(
            l["path"]
                .as_str()
                .unwrap()
                .starts_with(&format!("/compute/v1/projects/{PROJECT}/")),
            "{l}"
        );
        if l["op"] == "insert" {
            let rid = l["requestId"].as_str().unwrap();
            assert_ne!(rid, "00000000-0000-0000-0000-000000000000");
        }
    }
    let state = project.reservations_in_state();
    assert_eq!(state.len(), 2);
    assert!(state.iter().all(|r| r["status"] == "active"), "{state:?}");
    assert!(
        state
            .iter()
            .any(|r| r["id"] == format!("{ZONE_A}/{}", in_a["name"].as_str().unwrap())),
        "{state:?}"
    );

    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("Already done earlier"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(peer.calls("insert"), 2);

    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("gcp:reservations.insert"), "{audit}");
}

#[test]
fn a_dry_run_reads_only_and_an_exhausted_zone_is_reported_not_retried_blindly() {
    let project = Project::new();
    let peer = GcePeer::start(&json!({}));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("Would do (2)"), "{out}");
    assert_eq!(peer.calls("insert"), 0);
    assert!(!project.path(".gpucap/state.json").exists());

    peer.set_faults(&json!({ "rules": [{ "fault": "pool_exhausted", "zone": ZONE_A }] }));
    let run = project.apply(&peer, &[]);
    let out = text(&run.stdout);
    assert!(
        out.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{out}\n{}",
        text(&run.stderr)
    );
    assert_eq!(
        peer.inserts().get(&gce_name(&peer, ZONE_B)).copied(),
        Some(1)
    );
    let live = peer.reservations();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(live[0]["zone"].as_str().unwrap().ends_with(ZONE_B));
}

/// The name of the reservation in `zone` that the peer saw inserted.
fn gce_name(peer: &GcePeer, zone: &str) -> String {
    peer.reservations()
        .iter()
        .find(|r| r["zone"].as_str().unwrap().ends_with(zone))
        .map(|r| r["name"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// Runs apply until it halts after journal record `n` (or finishes first), kills it with
/// SIGKILL, and reports whether it halted.
fn apply_and_kill_at(project: &Project, peer: &GcePeer, n: u64) -> bool {
    let plan = project.path("plan.json");
    let mut child = project
        .gpucap(
            peer,
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

fn force_unlock(project: &Project, peer: &GcePeer) {
    let text_ = std::fs::read_to_string(project.path(".gpucap/lock.json")).expect("a lock");
    let v: Value = serde_json::from_str(&text_).unwrap();
    let id = v["id"].as_str().unwrap();
    let unlock = project
        .gpucap(peer, &["force-unlock", id])
        .output()
        .unwrap();
    assert!(unlock.status.success(), "{}", text(&unlock.stderr));
}

/// Kills a run of the project `make` builds after each of its `records` journal records (a
/// full run writes exactly that many), runs it again to the end, and has `check` count what the
/// peer made, with the kill point as context.
fn kill_at_every_journal_boundary(
    make: fn() -> Project,
    records: u64,
    check: impl Fn(&Project, &GcePeer, &str),
) {
    kill_at_every_journal_boundary_with(make, &json!({}), records, check);
}

/// [`kill_at_every_journal_boundary`] with every peer started with `peer_config`.
fn kill_at_every_journal_boundary_with(
    make: fn() -> Project,
    peer_config: &Value,
    records: u64,
    check: impl Fn(&Project, &GcePeer, &str),
) {
    let probe = make();
    let probe_peer = GcePeer::start(peer_config);
    let run = probe.apply(&probe_peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let written = std::fs::read_to_string(probe.path(".gpucap/journal.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(written, records);

    let started = Instant::now();
    for n in 1..=records {
        let project = make();
        let peer = GcePeer::start(peer_config);
        assert!(
            apply_and_kill_at(&project, &peer, n),
            "the run did not reach journal record {n}"
        );
        force_unlock(&project, &peer);
        let rerun = project.apply(&peer, &[]);
        assert!(
            rerun.status.success(),
            "kill after record {n}: {}\n{}",
            text(&rerun.stdout),
            text(&rerun.stderr)
        );
        check(&project, &peer, &format!("kill after record {n}"));
    }
    eprintln!(
        "{records} kill points checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_creates_each_reservation_exactly_once() {
    // A full run writes intent, sent, operation (the insert's Operation, journalled while it
    // is waited for) and done for each of the two reservations.
    kill_at_every_journal_boundary(Project::new, 8, |project, peer, context| {
        assert_created_once(peer, context);
        assert_eq!(project.reservations_in_state().len(), 2, "{context}");
    });
}

#[test]
fn killed_while_an_insert_is_under_way_then_rerun_inserts_it_once() {
    let project = Project::new();
    let peer = GcePeer::start(&json!({}));
    // The first insert takes 2 s to act; the run is killed while it waits.
    peer.set_faults(&json!({ "seed": 1, "rules": [
        { "fault": "latency", "op": "insert", "calls": [1], "seconds": 2 }
    ] }));
    let plan = project.path("plan.json");
    let mut child = project
        .gpucap(
            &peer,
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
    while peer.calls("insert") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let _ = child.kill();
    let _ = child.wait();
    peer.set_faults(&json!({ "seed": 1, "rules": [] }));
    force_unlock(&project, &peer);
    let rerun = project.apply(&peer, &["--reconcile-wait", "3s"]);
    assert!(
        rerun.status.success(),
        "{}\n{}",
        text(&rerun.stdout),
        text(&rerun.stderr)
    );
    // Give the delayed insert time to land, then count.
    std::thread::sleep(Duration::from_millis(2500));
    let created = peer.created();
    assert_eq!(created.len(), 2, "{created:?}");
    assert!(created.values().all(|n| *n == 1), "{created:?}");
    assert_eq!(project.reservations_in_state().len(), 2);
}

#[test]
fn a_lost_answer_is_found_by_name_and_rate_limits_resets_and_5xx_are_retried() {
    let project = Project::new();
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    peer.set_faults(&json!({ "seed": 3, "rules": [
        { "fault": "drop_response", "op": "insert", "calls": [1] },
        { "fault": "throttle", "op": "insert", "calls": [2] },
        { "fault": "throttle", "status": 429, "op": "get", "calls": [2] },
        { "fault": "status", "op": "operations.wait", "calls": [1], "status": 503 },
        { "fault": "reset", "op": "get", "calls": [4] }
    ] }));
    let run = project.apply(&peer, &[]);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert_created_once(&peer, "faults");
    let record = peer.record();
    assert_eq!(record["fault_counts"]["drop_response"], 1, "{record}");
    assert_eq!(record["fault_counts"]["throttle"], 2, "{record}");
}

#[test]
fn release_deletes_an_idle_unneeded_reservation_it_made_and_nothing_else() {
    let project = Project::new();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // Reservations someone else made in the same zone: one with a gpucap-looking name.
    peer.seed(&json!({ "zone": ZONE_A, "name": "infra-h100", "machine_type": "a3-highgpu-8g", "count": 2, "description": "team infra" }));
    peer.seed(&json!({ "zone": ZONE_A, "name": "gpucap-not-really", "machine_type": "a3-highgpu-8g", "count": 1 }));
    let in_b = gce_name(&peer, ZONE_B);
    let in_a = peer
        .reservations()
        .iter()
        .find(|r| {
            r["zone"].as_str().unwrap().ends_with(ZONE_A)
                && r["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("managed-by"))
        })
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    // An instance runs in the one in zone b.
    peer.set_usage(&json!({ &in_b: 1 }));

    let first = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&first.stdout);
    assert!(first.status.success(), "{out}\n{}", text(&first.stderr));
    assert!(out.contains("unused since"), "{out}");
    assert!(out.contains("1 of 1 instance(s) run in it"), "{out}");
    assert_eq!(peer.calls("delete"), 0);

    let second = project.release(&peer, "2027-02-10T01:00:00Z", &["--auto-approve"]);
    let out = text(&second.stdout);
    assert!(second.status.success(), "{out}\n{}", text(&second.stderr));
    assert!(out.contains("Released (1)"), "{out}");
    assert_eq!(peer.calls("delete"), 1);
    assert_eq!(peer.counts("deleted").get(&in_a), Some(&1));
    let left: Vec<String> = peer
        .reservations()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert!(left.contains(&in_b), "{left:?}");
    assert!(left.contains(&"infra-h100".to_string()), "{left:?}");
    assert!(left.contains(&"gpucap-not-really".to_string()), "{left:?}");
    assert_eq!(left.len(), 3);
    let released: Vec<Value> = project
        .reservations_in_state()
        .into_iter()
        .filter(|r| r["status"] == "released")
        .collect();
    assert_eq!(released.len(), 1);
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("gcp:reservations.delete"), "{audit}");
}

/// The pool's instance template and managed instance group each came into existence once,
/// were inserted once, and the group is at the planned size with every instance running.
fn assert_pool_once(peer: &GcePeer, context: &str) {
    for what in [
        "templates_created",
        "groups_created",
        "template_inserts",
        "group_inserts",
    ] {
        let counts = peer.counts(what);
        assert_eq!(
            counts,
            std::collections::BTreeMap::from([(POOL_NAME.to_string(), 1)]),
            "{context}: {what}"
        );
    }
    let templates = peer.templates();
    assert_eq!(templates.len(), 1, "{context}: {templates:?}");
    let groups = peer.groups();
    assert_eq!(groups.len(), 1, "{context}: {groups:?}");
    let g = &groups[0];
    assert_eq!(g["name"], POOL_NAME, "{context}");
    assert_eq!(g["targetSize"], RUN_INSTANCES, "{context}: {g}");
    assert_eq!(g["_running"], RUN_INSTANCES, "{context}: {g}");
}

fn pools_in_state(project: &Project) -> Vec<Value> {
    project.state()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "pool" && r["cloud"] == "gcp")
        .cloned()
        .collect()
}

#[test]
fn a_plan_with_a_gcp_run_makes_one_template_and_one_group_of_the_planned_size() {
    let project = Project::with_pool();
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("Would do (3)"), "{out}");
    assert!(peer.templates().is_empty() && peer.groups().is_empty());
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(
        out.contains(&format!(
            "sized {POOL_NAME} to 3 on-demand + 0 spot x a3-highgpu-1g; 3 running"
        )),
        "{out}"
    );
    assert_created_once(&peer, "reservations beside the pool");
    assert_pool_once(&peer, "first run");
    let t = &peer.templates()[0];
    assert_eq!(t["properties"]["machineType"], "a3-highgpu-1g");
    assert_eq!(
        t["properties"]["scheduling"]["provisioningModel"],
        "STANDARD"
    );
    assert_eq!(
        t["properties"]["networkInterfaces"][0]["subnetwork"],
        "regions/us-central1/subnetworks/train"
    );
    let g = &peer.groups()[0];
    let tags: Value = serde_json::from_str(g["description"].as_str().unwrap()).unwrap();
    assert_eq!(tags["managed-by"], "gpucap");
    assert_eq!(tags["gpucap:action"], POOL_NAME);
    // The resize was followed to DONE with regionOperations.wait, then the instances counted.
    assert!(
        peer.calls("regionOperations.wait") >= 2,
        "{}",
        peer.record()
    );
    assert!(peer.calls("groups.listManagedInstances") >= 1);
    let record = peer.record();
    for l in record["log"].as_array().unwrap() {
        if matches!(
            l["op"].as_str(),
            Some("templates.insert" | "groups.insert" | "groups.resize")
        ) {
            let rid = l["requestId"].as_str().expect("a requestId");
            assert_ne!(rid, "00000000-0000-0000-0000-000000000000");
        }
    }
    let pools = pools_in_state(&project);
    assert_eq!(pools.len(), 1, "{pools:?}");
    assert_eq!(pools[0]["id"], POOL_NAME);
    assert_eq!(pools[0]["instances"], RUN_INSTANCES);
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("gcp:regionInstanceGroupManagers.insert")
            && audit.contains("gcp:regionInstanceGroupManagers.resize"),
        "{audit}"
    );

    // Again: the group is at its size; nothing is inserted or resized.
    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_pool_once(&peer, "second run");
    assert_eq!(peer.calls("groups.resize"), 1);
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_makes_the_pool_exactly_once() {
    // Two reservations (intent, sent, operation, done each: 8), the pool's creation (intent,
    // sent, the template's and the group's insert Operations, done: 5) and its resize
    // (intent, sent, the resize's Operation, done: 4).
    kill_at_every_journal_boundary(Project::with_pool, 17, |project, peer, context| {
        assert_created_once(peer, context);
        assert_pool_once(peer, context);
        assert_eq!(peer.calls("templates.insert"), 1, "{context}");
        assert_eq!(peer.calls("groups.insert"), 1, "{context}");
        assert_eq!(pools_in_state(project).len(), 1, "{context}");
    });
}

#[test]
fn killed_while_waiting_on_a_resize_the_rerun_waits_on_its_operation_and_resizes_once() {
    // Where the journal records the resize's Operation.
    let probe = Project::with_pool();
    let probe_peer = GcePeer::start(&json!({}));
    let run = probe.apply(&probe_peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let journal = journal_of(&probe);
    let at = journal
        .iter()
        .position(|r| {
            r["step"] == "operation" && r["api"] == "gcp:regionInstanceGroupManagers.resize"
        })
        .expect("an operation record for the pool's resize");
    for api in [
        "gcp:regionInstanceGroupManagers.insert",
        "gcp:regionInstanceGroupManagers.resize",
    ] {
        let ops: Vec<&Value> = journal
            .iter()
            .filter(|r| r["step"] == "operation" && r["api"] == api)
            .collect();
        assert!(!ops.is_empty(), "no operation record for {api}");
        for op in ops {
            assert!(
                op["request_id"]
                    .as_str()
                    .unwrap()
                    .starts_with("regions/us-central1/operations/operation-"),
                "{op}"
            );
        }
    }

    // Killed right after that record, the Operation still running (it needs 40 looks, and
    // every read in the region is one).
    let project = Project::with_pool();
    let peer = GcePeer::start(&json!({ "op_steps": 40 }));
    assert!(apply_and_kill_at(&project, &peer, at as u64 + 1));
    assert_eq!(peer.calls("groups.resize"), 1);
    let last = journal_of(&project).pop().unwrap();
    assert_eq!(last["step"], "operation", "{last}");
    assert_eq!(
        last["api"], "gcp:regionInstanceGroupManagers.resize",
        "{last}"
    );
    let noted = last["request_id"].as_str().unwrap().to_string();
    let before = peer.record()["log"].as_array().unwrap().len();
    peer.configure(&json!({ "op_steps": 2 }));
    force_unlock(&project, &peer);
    let rerun = project.apply(&peer, &[]);
    let (out, err) = (text(&rerun.stdout), text(&rerun.stderr));
    assert!(rerun.status.success(), "{out}\n{err}");
    assert!(
        err.contains("waiting on regions/us-central1/operations/"),
        "{err}"
    );
    // The re-run's first call waits on the journalled Operation; the group is at its size
    // then, so the resize is not sent again.
    let record = peer.record();
    let first = &record["log"].as_array().unwrap()[before];
    assert_eq!(first["op"], "regionOperations.wait", "{first}");
    assert!(
        first["path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}/wait", noted.rsplit('/').next().unwrap())),
        "{first} vs {noted}"
    );
    assert_eq!(peer.counts("group_resizes").get(POOL_NAME), Some(&1));
    assert_eq!(peer.calls("groups.resize"), 1);
    assert_pool_once(&peer, "after the resumed wait");
}

fn journal_of(project: &Project) -> Vec<Value> {
    std::fs::read_to_string(project.path(".gpucap/journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_dropped_group_insert_and_throttling_are_reconciled_without_a_second_create() {
    let project = Project::with_pool();
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    peer.set_faults(&json!({ "seed": 4, "rules": [
        { "fault": "throttle", "op": "templates.insert", "calls": [1] },
        { "fault": "drop_response", "op": "groups.insert", "calls": [1] },
        { "fault": "throttle", "status": 429, "op": "groups.get", "calls": [2] },
        { "fault": "throttle", "op": "groups.resize", "calls": [1] },
        { "fault": "status", "status": 503, "op": "regionOperations.wait", "calls": [2] }
    ] }));
    let run = project.apply(&peer, &[]);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert_pool_once(&peer, "faults");
    // The throttled template insert did nothing and was sent again; the group insert whose
    // answer was lost was found by name, not sent again.
    assert_eq!(peer.calls("templates.insert"), 2);
    assert_eq!(peer.calls("groups.insert"), 1);
    let record = peer.record();
    assert_eq!(record["fault_counts"]["drop_response"], 1, "{record}");
    assert_eq!(record["fault_counts"]["throttle"], 3, "{record}");
    assert_eq!(pools_in_state(&project).len(), 1);
}

#[test]
fn instances_that_cannot_be_created_are_a_capacity_shortfall_not_success() {
    let project = Project::with_pool();
    let peer = GcePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [{ "fault": "stockout", "group": POOL_NAME }] }));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(out.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{out}\n{err}");
    assert!(out.contains("0 of 3"), "{out}\n{err}");
    // The group exists at its target size (it keeps trying); none of its instances run, and
    // the resize was not repeated blindly.
    let g = &peer.groups()[0];
    assert_eq!(g["targetSize"], RUN_INSTANCES);
    assert_eq!(g["_running"], 0);
    assert_eq!(peer.calls("groups.resize"), 1);
}

#[test]
fn release_scales_a_pool_no_campaign_needs_to_zero() {
    let project = Project::with_pool();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_pool_once(&peer, "applied");
    // Someone else's group in the same region is never touched.
    peer.seed_group(
        "us-central1",
        "gpucap-h100-gcp-us-central1-team",
        "a3-highgpu-1g",
        2,
        None,
    );

    let released = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&released.stdout);
    assert!(
        released.status.success(),
        "{out}\n{}",
        text(&released.stderr)
    );
    let groups = peer.groups();
    let ours = groups.iter().find(|g| g["name"] == POOL_NAME).unwrap();
    assert_eq!(ours["targetSize"], 0, "{out}");
    assert_eq!(ours["_running"], 0);
    let theirs = groups
        .iter()
        .find(|g| g["name"] == "gpucap-h100-gcp-us-central1-team")
        .unwrap();
    assert_eq!(theirs["targetSize"], 2);
    assert_eq!(peer.counts("group_resizes").get(POOL_NAME), Some(&2));
    assert_eq!(peer.counts("groups_created").len(), 1, "nothing made");
}

/// The plan's future reservation and commitment each came into existence once, from one
/// insert, and the state holds each once, irreversible.
fn assert_purchases_once(project: &Project, peer: &GcePeer, context: &str) {
    for what in [
        "futures_created",
        "future_inserts",
        "commitments_created",
        "commitment_inserts",
    ] {
        let counts = peer.counts(what);
        assert_eq!(counts.len(), 1, "{context}: {what} {counts:?}");
        assert!(
            counts.values().all(|n| *n == 1),
            "{context}: {what} {counts:?}"
        );
    }
    assert_eq!(peer.future_reservations().len(), 1, "{context}");
    assert_eq!(peer.commitments().len(), 1, "{context}");
    for kind in ["capacity_block", "commitment"] {
        let held = project.resources_in_state(kind);
        assert_eq!(held.len(), 1, "{context}: {kind} {held:?}");
        assert_eq!(held[0]["irreversible"], true, "{context}: {kind}");
    }
}

#[test]
fn a_gcp_block_and_commitment_are_each_made_once_and_a_rerun_has_nothing_to_do() {
    let project = Project::with_purchases();
    let peer = GcePeer::start(&json!({ "op_steps": 3 }));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("Would do (4)"), "{out}");
    assert_eq!(
        peer.calls("future.insert") + peer.calls("commitments.insert"),
        0
    );

    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("Done (4)"), "{out}");
    assert!(
        !out.contains("by hand"),
        "nothing is left to a person: {out}"
    );
    assert_created_once(&peer, "reservations beside them");
    assert_purchases_once(&project, &peer, "first run");
    let fr = &peer.future_reservations()[0];
    assert_eq!(fr["reservationMode"], "CALENDAR");
    assert_eq!(fr["planningStatus"], "SUBMITTED");
    assert_eq!(fr["timeWindow"]["startTime"], BLOCK_START);
    assert_eq!(fr["timeWindow"]["endTime"], BLOCK_END);
    assert_eq!(fr["specificSkuProperties"]["totalCount"], "2");
    let tags: Value = serde_json::from_str(fr["description"].as_str().unwrap()).unwrap();
    assert_eq!(tags["managed-by"], "gpucap");
    assert_eq!(tags["gpucap:action"], BLOCK);
    let c = &peer.commitments()[0];
    assert_eq!(c["plan"], "TWELVE_MONTH");
    assert_eq!(c["type"], "ACCELERATOR_OPTIMIZED_A3");
    let tags: Value = serde_json::from_str(c["description"].as_str().unwrap()).unwrap();
    assert_eq!(tags["gpucap:action"], COMMIT);
    // Committed GPUs must be reserved: the reservation made just before (2 machines in zone a,
    // enough for the 1 committed) is attached.
    let attached = c["existingReservations"].as_array().unwrap();
    assert_eq!(attached.len(), 1, "{c}");
    assert_eq!(
        attached[0],
        format!(
            "projects/{PROJECT}/zones/{ZONE_A}/reservations/{}",
            gce_name(&peer, ZONE_A)
        )
    );
    // The attached reservation now lives as long as the commitment: irreversible in the
    // state, so neither a due release nor `gpucap release` deletes it; the other is as it was.
    let reservations = project.reservations_in_state();
    let by_zone = |z: &str| {
        reservations
            .iter()
            .find(|r| r["zone"] == z)
            .unwrap_or_else(|| panic!("{reservations:?}"))
    };
    assert_eq!(by_zone(ZONE_A)["irreversible"], true);
    assert_eq!(by_zone(ZONE_B)["irreversible"], false);
    // The block and the commitment are recorded with their planned cost.
    let block = &project.resources_in_state("capacity_block")[0];
    assert_eq!(block["cost"], BLOCK_COST);
    assert_eq!(
        block["id"],
        format!("{ZONE_A}/{}", fr["name"].as_str().unwrap())
    );
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("gcp:futureReservations.insert")
            && audit.contains("gcp:regionCommitments.insert"),
        "{audit}"
    );

    let again = project.apply(&peer, &[]);
    let out = text(&again.stdout);
    assert!(again.status.success(), "{out}\n{}", text(&again.stderr));
    assert!(out.contains("Already done earlier"), "{out}");
    assert_eq!(peer.calls("future.insert"), 1);
    assert_eq!(peer.calls("commitments.insert"), 1);
    assert_purchases_once(&project, &peer, "second run");
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_makes_each_block_and_commitment_exactly_once() {
    // Two reservations, the block and the commitment: intent, sent, operation and done each.
    kill_at_every_journal_boundary(Project::with_purchases, 16, |project, peer, context| {
        assert_created_once(peer, context);
        assert_purchases_once(project, peer, context);
        assert_eq!(peer.calls("future.insert"), 1, "{context}");
        assert_eq!(peer.calls("commitments.insert"), 1, "{context}");
    });
}

#[test]
fn a_lost_answer_to_a_block_or_commitment_insert_is_found_by_name_not_sent_again() {
    let project = Project::with_purchases();
    let peer = GcePeer::start(&json!({}));
    peer.set_faults(&json!({ "seed": 5, "rules": [
        { "fault": "drop_response", "op": "future.insert", "calls": [1] },
        { "fault": "drop_response", "op": "commitments.insert", "calls": [1] },
        { "fault": "throttle", "op": "future.get", "calls": [2] }
    ] }));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert_purchases_once(&project, &peer, "dropped answers");
    assert_eq!(peer.calls("future.insert"), 1, "{}", peer.record());
    assert_eq!(peer.calls("commitments.insert"), 1, "{}", peer.record());
    assert_eq!(peer.record()["fault_counts"]["drop_response"], 2);

    // A re-run after the lost answers sends nothing.
    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(peer.calls("future.insert"), 1);
    assert_eq!(peer.calls("commitments.insert"), 1);
}

#[test]
fn release_cancels_an_unneeded_block_while_allowed_and_never_touches_the_commitment() {
    let project = Project::with_purchases();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_purchases_once(&project, &peer, "applied");
    let name = peer.future_reservations()[0]["name"]
        .as_str()
        .unwrap()
        .to_string();

    // 2027-01-05: the block starts 36 days later; no campaign needs it (the last ends
    // 2027-02-03). The peer's clock says the same, so its 30-day rule agrees.
    let when = "2027-01-05T00:00:00Z";
    peer.configure(&json!({ "now": when }));
    let released = project.release(&peer, when, &["--auto-approve"]);
    let out = text(&released.stdout);
    assert!(
        released.status.success(),
        "{out}\n{}",
        text(&released.stderr)
    );
    assert_eq!(peer.counts("future_cancels").get(&name), Some(&1), "{out}");
    assert_eq!(peer.counts("future_deleted").get(&name), Some(&1), "{out}");
    assert!(peer.future_reservations().is_empty());
    assert_eq!(
        project.resources_in_state("capacity_block")[0]["status"],
        "released"
    );
    // The commitment is owed, not released: it exists, and nothing was sent to it but its
    // insert.
    assert!(out.contains("commitment cannot be cancelled"), "{out}");
    assert!(
        out.contains("a reservation attached to a commitment cannot be cancelled"),
        "{out}"
    );
    assert_eq!(peer.calls("delete"), 0, "no reservation was deleted: {out}");
    assert_eq!(peer.commitments().len(), 1);
    assert_eq!(
        project.resources_in_state("commitment")[0]["status"],
        "active"
    );
    let record = peer.record();
    let to_commitments: Vec<&Value> = record["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["path"].as_str().unwrap().contains("/commitments"))
        .filter(|l| l["method"] != "GET")
        .collect();
    assert_eq!(to_commitments.len(), 1, "{to_commitments:?}");
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("gcp:futureReservations.cancel"), "{audit}");
}

#[test]
fn release_refuses_to_cancel_a_block_inside_its_notice_period() {
    let project = Project::with_purchases();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // 2027-01-20: 21 days before the block starts; Compute Engine no longer allows a cancel.
    let when = "2027-01-20T00:00:00Z";
    peer.configure(&json!({ "now": when }));
    let released = project.release(&peer, when, &["--auto-approve"]);
    let out = text(&released.stdout);
    assert!(
        released.status.success(),
        "{out}\n{}",
        text(&released.stderr)
    );
    assert!(out.contains("can no longer be cancelled"), "{out}");
    assert!(
        out.contains("2027-01-11"),
        "the last day it could be: {out}"
    );
    assert_eq!(peer.calls("future.cancel"), 0);
    assert_eq!(peer.future_reservations().len(), 1);
    assert_ne!(
        project.resources_in_state("capacity_block")[0]["status"],
        "released"
    );
}

#[test]
fn killed_while_waiting_on_an_insert_operation_the_rerun_waits_on_it_and_sends_nothing_again() {
    // Where the journal records the future reservation's insert Operation.
    let probe = Project::with_purchases();
    let probe_peer = GcePeer::start(&json!({}));
    let run = probe.apply(&probe_peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let journal: Vec<Value> = std::fs::read_to_string(probe.path(".gpucap/journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = journal
        .iter()
        .position(|r| r["step"] == "operation" && r["api"] == "gcp:futureReservations.insert")
        .expect("an operation record for the future reservation's insert");
    assert!(
        journal[at]["request_id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("zones/{ZONE_A}/operations/operation-")),
        "{}",
        journal[at]
    );
    for kind in ["gcp:reservations.insert", "gcp:regionCommitments.insert"] {
        let op = journal
            .iter()
            .find(|r| r["step"] == "operation" && r["api"] == kind)
            .unwrap_or_else(|| panic!("no operation record for {kind}"));
        assert!(
            op["request_id"].as_str().unwrap().contains("/operations/"),
            "{op}"
        );
    }

    // Killed right after that record, with the Operation still running (it needs 20 looks).
    let project = Project::with_purchases();
    let peer = GcePeer::start(&json!({ "op_steps": 20 }));
    assert!(apply_and_kill_at(&project, &peer, at as u64 + 1));
    assert_eq!(peer.calls("future.insert"), 1);
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(project.path(".gpucap/journal.jsonl"))
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["step"], "operation", "{last}");
    let noted = last["request_id"].as_str().unwrap().to_string();
    let before = peer.record()["log"].as_array().unwrap().len();
    peer.configure(&json!({ "op_steps": 2 }));
    force_unlock(&project, &peer);
    let rerun = project.apply(&peer, &[]);
    let (out, err) = (text(&rerun.stdout), text(&rerun.stderr));
    assert!(rerun.status.success(), "{out}\n{err}");
    assert!(err.contains("waiting on zones/"), "{err}");
    // The re-run's first call waits on the journalled Operation; the request is not sent again.
    let record = peer.record();
    let log = record["log"].as_array().unwrap();
    let first = &log[before];
    assert_eq!(first["op"], "operations.wait", "{first}");
    assert!(
        first["path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}/wait", noted.rsplit('/').next().unwrap())),
        "{first} vs {noted}"
    );
    assert_eq!(peer.calls("future.insert"), 1);
    assert_purchases_once(&project, &peer, "after the resumed wait");
}

#[test]
fn the_approval_gate_counts_a_gcp_block_and_commitment_as_irreversible_spend() {
    // Irreversible spend above $100,000 needs a sign-off; the block and the commitment are
    // $438,500 of it.
    let project = Project::make_with(false, "[budget]\napproval_above = 100000.0\n");
    project.add_purchases();
    let peer = GcePeer::start(&json!({}));
    let refused = project.apply(&peer, &[]);
    let err = text(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("needs an approval"), "{err}");
    assert!(
        err.contains("irreversible spend $438,500 in 2 actions"),
        "the block and the commitment, and nothing else: {err}"
    );
    assert_eq!(peer.record()["requests"], 0, "nothing was sent");
    let approved = project.apply(&peer, &["--approve", "Q1 training, ticket 42"]);
    let (out, err) = (text(&approved.stdout), text(&approved.stderr));
    assert!(approved.status.success(), "{out}\n{err}");
    assert_purchases_once(&project, &peer, "approved");
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("Q1 training, ticket 42"), "{audit}");
}

/// The flex-start pool's one resize request, as the peer shows it: asked (inserted) once and
/// made once.
fn the_one_resize_request(peer: &GcePeer, context: &str) -> Value {
    let requests = peer.resize_requests();
    assert_eq!(requests.len(), 1, "{context}: {requests:?}");
    let r = requests[0].clone();
    let name = r["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gpucap-flex-"), "{context}: {name}");
    for what in ["resize_request_inserts", "resize_requests_created"] {
        let counts = peer.counts(what);
        assert_eq!(
            counts,
            std::collections::BTreeMap::from([(name.clone(), 1)]),
            "{context}: {what}"
        );
    }
    r
}

#[test]
fn a_flex_start_pool_is_asked_for_once_pending_until_capacity_is_found_then_done() {
    let project = Project::with_flex();
    let peer = GcePeer::start(&json!({}));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("(flex-start)"), "{out}");
    assert!(peer.resize_requests().is_empty());

    // Asked for: queued, so pending (not done, not failed), and the run says so.
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(!run.status.success(), "pending is not done: {out}\n{err}");
    assert!(out.contains("Pending (1)"), "{out}");
    assert!(out.contains("resize request gpucap-flex-"), "{out}");
    assert!(!out.contains("Not done"), "{out}");
    let r = the_one_resize_request(&peer, "first run");
    assert_eq!(r["state"], "ACCEPTED");
    assert_eq!(r["resizeBy"], RUN_INSTANCES);
    // No `max_run_duration`: until the run's end (14 days away), at most 7 days.
    assert_eq!(r["requestedRunDuration"]["seconds"], "604800");
    let t = &peer.templates()[0];
    assert_eq!(
        t["properties"]["scheduling"]["provisioningModel"],
        "FLEX_START"
    );
    let g = &peer.groups()[0];
    assert_eq!(g["targetSize"], 0, "queued: nothing runs yet");
    assert_eq!(peer.calls("groups.resize"), 0, "{}", peer.record());
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("gcp:regionInstanceGroupManagerResizeRequests.insert"),
        "{audit}"
    );

    // Again while queued: looked at, not asked again.
    let again = project.apply(&peer, &[]);
    assert!(text(&again.stdout).contains("Pending (1)"));
    the_one_resize_request(&peer, "second run");

    // Capacity found: done, every instance running, still the one request.
    peer.review_resize_request(
        &json!({ "region": "us-central1", "group": POOL_NAME, "state": "SUCCEEDED" }),
    );
    let done = project.apply(&peer, &[]);
    let (out, err) = (text(&done.stdout), text(&done.stderr));
    assert!(done.status.success(), "{out}\n{err}");
    assert!(
        out.contains("(flex-start, resize request gpucap-flex-"),
        "{out}"
    );
    assert!(out.contains("3 running"), "{out}");
    let r = the_one_resize_request(&peer, "fulfilled");
    assert_eq!(r["state"], "SUCCEEDED");
    let g = &peer.groups()[0];
    assert_eq!(g["targetSize"], RUN_INSTANCES);
    assert_eq!(g["_running"], RUN_INSTANCES);
    assert_eq!(peer.calls("groups.resize"), 0);
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_asks_for_exactly_one_resize_request() {
    // Two reservations (8 records), the pool's creation (intent, sent, the template's and
    // the group's insert Operations, done: 5) and its resize request (intent, sent, the
    // insert's Operation, done: 4). Compute Engine finds the capacity at the first look
    // after the request is queued, so every run ends done.
    kill_at_every_journal_boundary_with(
        Project::with_flex,
        &json!({ "flex_steps": 1 }),
        17,
        |project, peer, context| {
            assert_created_once(peer, context);
            let r = the_one_resize_request(peer, context);
            assert_eq!(r["state"], "SUCCEEDED", "{context}");
            assert_eq!(peer.calls("resizeRequests.insert"), 1, "{context}");
            let g = &peer.groups()[0];
            assert_eq!(g["targetSize"], RUN_INSTANCES, "{context}");
            assert_eq!(peer.calls("groups.resize"), 0, "{context}");
            assert_eq!(pools_in_state(project).len(), 1, "{context}");
        },
    );
}

#[test]
fn a_dropped_resize_request_answer_is_found_by_name_not_asked_twice() {
    let project = Project::with_flex();
    let peer = GcePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [
        { "fault": "drop_response", "op": "resizeRequests.insert", "calls": [1] },
        { "fault": "throttle", "op": "resizeRequests.list", "calls": [1] }
    ] }));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(out.contains("Pending (1)"), "{out}\n{err}");
    the_one_resize_request(&peer, "dropped answer");
    assert_eq!(peer.calls("resizeRequests.insert"), 1);
    let record = peer.record();
    assert_eq!(record["fault_counts"]["drop_response"], 1, "{record}");
    assert_eq!(record["fault_counts"]["throttle"], 1, "{record}");
}

#[test]
fn release_cancels_a_pending_resize_request_it_made_and_no_other() {
    let project = Project::with_flex();
    let peer = GcePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(
        text(&run.stdout).contains("Pending (1)"),
        "{}",
        text(&run.stderr)
    );
    let ours = the_one_resize_request(&peer, "applied")["name"]
        .as_str()
        .unwrap()
        .to_string();
    // Someone else's queued request on the same group is never touched.
    peer.seed_resize_request(&json!({
        "region": "us-central1", "group": POOL_NAME, "name": "team-queue", "resizeBy": 1
    }));

    let released = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&released.stdout);
    assert!(
        released.status.success(),
        "{out}\n{}",
        text(&released.stderr)
    );
    let requests = peer.resize_requests();
    let state = |n: &str| {
        requests
            .iter()
            .find(|r| r["name"] == n)
            .map(|r| r["state"].clone())
            .unwrap_or_else(|| panic!("no request {n}: {requests:?}"))
    };
    assert_eq!(state(&ours), "CANCELLED", "{out}");
    assert_eq!(state("team-queue"), "ACCEPTED", "{out}");
    assert_eq!(
        peer.counts("resize_request_cancels"),
        std::collections::BTreeMap::from([(ours.clone(), 1)])
    );
    assert_eq!(peer.groups()[0]["targetSize"], 0);
    assert_eq!(
        peer.calls("resizeRequests.insert"),
        1,
        "nothing asked again"
    );
}
