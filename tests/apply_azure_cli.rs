//! `gpucap apply` and `gpucap release` on Azure end to end: the binary, the Azure act provider
//! and the local ARM peer (`tests/peers/azure_arm_peer.py`), which keeps its own record of
//! every reservation it created. Every count is the peer's, never gpucap's.
//!
//! The built-in price snapshot holds no Azure capacity reservation offers (a reservation costs
//! the on-demand price, so the planner has no reason to choose one), so the plan is made by
//! `gpucap plan` for an Azure pool and two `reserve` actions are added to it, priced like the
//! pool's on-demand offer. The plan's input fingerprints stay those `gpucap plan` wrote, so
//! `apply` accepts it.
//!
//! - the plan is applied: two reservations (one regional, one zonal), each created once, a
//!   re-run has nothing to do, nothing secret in the files;
//! - killed (SIGKILL) after every journal record, and in the middle of a PUT, then
//!   force-unlocked and re-run: each reservation is created exactly once;
//! - an answer lost after ARM acted: found by name, not created again;
//! - `gpucap release` deletes an idle reservation no campaign needs, after two looks; keeps
//!   one a VM uses; never touches one it did not make.

#[path = "support/azure_peer.rs"]
mod azure_peer;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use azure_peer::{AzurePeer, RESOURCE_GROUP, SUBSCRIPTION};
use serde_json::{Value, json};

const NOW: &str = "2026-12-28T00:00:00Z";
/// After the campaigns (the last ends 2027-02-03) and the reservations' planned ends.
const AFTER: &str = "2027-02-10T00:00:00Z";
const TOKEN: &str = "peer-bearer-token-5d2e77";
const REGIONAL: &str = "reserve-h100-azure-azure-eastus-standard-nc40ads-h100-v5-8x-20261228-7d";
const RELEASE: &str = "release-h100-azure-azure-eastus-standard-nc40ads-h100-v5-8x-20261228-7d";
/// The planned end of both reservations, and when the plan releases the regional one.
const RESERVED_UNTIL: &str = "2027-01-04T00:00:00Z";
const ZONAL: &str = "reserve-h100-azure-azure-eastus-1-standard-nc40ads-h100-v5-4x-20261228-7d";

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// The offline-apply example's calendar with one Azure pool, and a plan with two Azure
    /// reservations due now.
    fn new() -> Project {
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

[inputs]
calendars = ["campaigns.yaml"]

[pools.h100-azure]
accelerator = "h100"
regions = ["eastus"]

[[scenarios]]
name = "expected"
probability = 1.0

[prices]
offline = true

[state]
backend = "local"
dir = ".gpucap"

[apply]
azure_resource_group = "{RESOURCE_GROUP}"
"#
            ),
        )
        .unwrap();
        let project = Project { dir };
        project.plan();
        project
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gpucap(&self, peer: &AzurePeer, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpucap"));
        cmd.arg("-c").arg(self.path("gpucap.toml")).args(args);
        for k in [
            "GPUCAP_HALT_AFTER_JOURNAL",
            "AZURE_TENANT_ID",
            "AZURE_CLIENT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_FEDERATED_TOKEN_FILE",
            "AZURE_AUTHORITY_HOST",
        ] {
            cmd.env_remove(k);
        }
        cmd.env("AZURE_SUBSCRIPTION_ID", SUBSCRIPTION)
            // The resource group comes from `apply.azure_resource_group`; the variable would
            // send gpucap elsewhere.
            .env("GPUCAP_AZURE_RESOURCE_GROUP", "not-this-group")
            .env("AZURE_ACCESS_TOKEN", TOKEN)
            .env("GPUCAP_AZURE_ENDPOINT_URL", peer.url())
            .env("GPUCAP_AZURE_POLL_MS", "20")
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1");
        cmd
    }

    /// `gpucap plan`, then the two reservations added (see the module docs).
    fn plan(&self) {
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
        assert_eq!(run_action["cloud"], "azure", "{run_action}");
        let reserve = |id: &str, zone: Value, instances: u32| {
            let mut a = run_action.clone();
            a["id"] = id.into();
            a["kind"] = "reserve".into();
            a["zone"] = zone;
            a["instances"] = instances.into();
            a["gpus"] = instances.into();
            a["start"] = NOW.into();
            a["end"] = RESERVED_UNTIL.into();
            a["start_hour"] = 0.into();
            a["end_hour"] = 168.into();
            a["due"] = NOW.into();
            a["cost"] = (6.98 * 168.0 * f64::from(instances)).into();
            a["irreversible"] = false.into();
            a["campaigns"] = json!([]);
            a
        };
        // The regional one is released at its end by the plan itself.
        let mut release = reserve(RELEASE, Value::Null, 8);
        release["kind"] = "release".into();
        release["start"] = RESERVED_UNTIL.into();
        release["due"] = RESERVED_UNTIL.into();
        release["start_hour"] = 168.into();
        release["cost"] = 0.0.into();
        let actions = plan["actions"].as_array_mut().unwrap();
        actions.push(reserve(REGIONAL, Value::Null, 8));
        actions.push(reserve(ZONAL, "1".into(), 4));
        actions.push(release);
        std::fs::write(&out, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    }

    fn apply(&self, peer: &AzurePeer, extra: &[&str]) -> Output {
        self.apply_at(peer, NOW, extra)
    }

    fn apply_at(&self, peer: &AzurePeer, now: &str, extra: &[&str]) -> Output {
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

    fn release(&self, peer: &AzurePeer, now: &str, extra: &[&str]) -> Output {
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
            .filter(|r| r["kind"] == "reservation" && r["cloud"] == "azure")
            .cloned()
            .collect()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Each of the plan's two reservations was created exactly once, and both exist.
fn assert_created_once(peer: &AzurePeer, context: &str) {
    let created = peer.created();
    assert_eq!(created.len(), 2, "{context}: {created:?}");
    assert!(
        created.values().all(|n| *n == 1),
        "{context}: created twice: {created:?}"
    );
    let live = peer.reservations();
    assert_eq!(live.len(), 2, "{context}: {live:?}");
    assert!(
        live.iter()
            .all(|r| r["properties"]["provisioningState"] == "Succeeded"),
        "{context}: {live:?}"
    );
}

#[test]
fn a_plan_with_azure_reservations_is_applied_once_and_a_rerun_has_nothing_to_do() {
    let project = Project::new();
    let peer = AzurePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(out.contains("Done (2)"), "{out}");
    assert_created_once(&peer, "first run");
    let live = peer.reservations();
    let zonal = live.iter().find(|r| r["zones"] == json!(["1"])).unwrap();
    assert_eq!(zonal["sku"]["capacity"], 4);
    assert!(
        zonal["id"]
            .as_str()
            .unwrap()
            .contains("/capacityReservationGroups/gpucap-eastus-z1/")
    );
    for r in &live {
        assert_eq!(r["tags"]["managed-by"], "gpucap");
        assert!(r["tags"]["gpucap:intent"].is_string());
        assert!(r["name"].as_str().unwrap().len() <= 64);
    }
    let state = project.reservations_in_state();
    assert_eq!(state.len(), 2);
    assert!(state.iter().all(|r| r["status"] == "active"), "{state:?}");

    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("Already done earlier"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(peer.calls("PUT reservation"), 2);

    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("azure:capacityReservations.createOrUpdate"));
    for file in ["audit.jsonl", "journal.jsonl", "state.json"] {
        let body = std::fs::read_to_string(project.path(&format!(".gpucap/{file}"))).unwrap();
        assert!(!body.contains(TOKEN), "{file} holds the bearer token");
    }
    assert!(!out.contains(TOKEN) && !err.contains(TOKEN));
}

#[test]
fn a_dry_run_changes_nothing_and_the_plans_release_deletes_the_reservation_at_its_time() {
    let project = Project::new();
    let peer = AzurePeer::start(&json!({}));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("Would do (2)"), "{out}");
    assert_eq!(peer.calls("PUT reservation"), 0);
    assert_eq!(peer.calls("PUT group"), 0);
    assert!(!project.path(".gpucap/state.json").exists());

    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_created_once(&peer, "apply");

    // At the planned end the plan's release deletes the regional reservation (Azure's do not
    // end by themselves); the zonal one has no release in the plan and stays.
    let at_end = project.apply_at(&peer, "2027-01-04T01:00:00Z", &[]);
    let out = text(&at_end.stdout);
    assert!(at_end.status.success(), "{out}\n{}", text(&at_end.stderr));
    assert!(out.contains(RELEASE), "{out}");
    assert_eq!(peer.calls("DELETE reservation"), 1);
    let left = peer.reservations();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["zones"], json!(["1"]));
    let released: Vec<Value> = project
        .reservations_in_state()
        .into_iter()
        .filter(|r| r["status"] == "released")
        .collect();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0]["action"], REGIONAL);
}

/// Runs apply until it halts after journal record `n` (or finishes first), kills it with
/// SIGKILL, and reports whether it halted.
fn apply_and_kill_at(project: &Project, peer: &AzurePeer, n: u64) -> bool {
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

fn force_unlock(project: &Project, peer: &AzurePeer) {
    let text_ = std::fs::read_to_string(project.path(".gpucap/lock.json")).expect("a lock");
    let v: Value = serde_json::from_str(&text_).unwrap();
    let id = v["id"].as_str().unwrap();
    let unlock = project
        .gpucap(peer, &["force-unlock", id])
        .output()
        .unwrap();
    assert!(unlock.status.success(), "{}", text(&unlock.stderr));
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_creates_each_reservation_exactly_once() {
    // A full run writes intent, sent and done for each of the two reservations.
    let probe = Project::new();
    let probe_peer = AzurePeer::start(&json!({}));
    let run = probe.apply(&probe_peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let records = std::fs::read_to_string(probe.path(".gpucap/journal.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(records, 6);

    let started = Instant::now();
    for n in 1..=records {
        let project = Project::new();
        let peer = AzurePeer::start(&json!({}));
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
        assert_created_once(&peer, &format!("kill after record {n}"));
        assert_eq!(
            project.reservations_in_state().len(),
            2,
            "kill after record {n}"
        );
    }
    eprintln!(
        "{records} kill points checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn killed_while_a_put_is_under_way_then_rerun_creates_it_once() {
    let project = Project::new();
    let peer = AzurePeer::start(&json!({}));
    // The first reservation PUT takes 2 s to act; the run is killed while it waits.
    peer.set_faults(&json!({ "seed": 1, "rules": [
        { "fault": "latency", "op": "PUT reservation", "calls": [1], "seconds": 2 }
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
    while peer.calls("PUT reservation") == 0 && Instant::now() < deadline {
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
    // Give the delayed PUT time to land, then count.
    std::thread::sleep(Duration::from_millis(2500));
    let created = peer.created();
    assert_eq!(created.len(), 2, "{created:?}");
    assert!(created.values().all(|n| *n == 1), "{created:?}");
    assert_eq!(project.reservations_in_state().len(), 2);
}

#[test]
fn a_lost_answer_is_found_by_name_and_throttling_resets_and_5xx_are_retried() {
    let project = Project::new();
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "seed": 3, "rules": [
        { "fault": "drop_response", "op": "PUT reservation", "calls": [1] },
        { "fault": "throttle", "op": "PUT group", "calls": [2], "retry_after": 1 },
        { "fault": "status", "op": "GET operation", "calls": [1], "status": 503 },
        { "fault": "reset", "op": "GET reservation", "calls": [1] },
        { "fault": "reset", "op": "PUT reservation", "calls": [2] }
    ] }));
    let run = project.apply(&peer, &[]);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert_created_once(&peer, "faults");
    assert_eq!(peer.record()["fault_counts"]["drop_response"], 1);
    assert_eq!(peer.record()["fault_counts"]["throttle"], 1);
    assert_eq!(peer.record()["fault_counts"]["reset"], 2);
    // The lost PUT was not sent again (its reservation was found by its name); the reset one
    // did nothing and was sent again: three PUTs for two reservations.
    assert_eq!(peer.calls("PUT reservation"), 3);
}

#[test]
fn release_deletes_an_idle_unneeded_reservation_it_made_and_nothing_else() {
    let project = Project::new();
    let peer = AzurePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // A reservation someone else made, in another group of the same resource group.
    peer.seed(&json!({
        "group": "team-infra", "name": "infra-h100", "location": "eastus",
        "sku": "Standard_NC40ads_H100_v5", "capacity": 2, "tags": { "team": "infra" }
    }));
    let live = peer.reservations();
    let zonal = live.iter().find(|r| r["zones"] == json!(["1"])).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    // A VM runs in the zonal one.
    peer.set_usage(&json!({ &zonal: 1 }));

    let first = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&first.stdout);
    assert!(first.status.success(), "{out}\n{}", text(&first.stderr));
    assert!(out.contains("unused since"), "{out}");
    assert!(out.contains("1 of 4 instance(s) run in it"), "{out}");
    assert_eq!(peer.calls("DELETE reservation"), 0);

    let second = project.release(&peer, "2027-02-10T01:00:00Z", &["--auto-approve"]);
    let out = text(&second.stdout);
    assert!(second.status.success(), "{out}\n{}", text(&second.stderr));
    assert!(out.contains("Released (1)"), "{out}");
    assert_eq!(peer.calls("DELETE reservation"), 1);
    let left: Vec<String> = peer
        .reservations()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert!(left.contains(&zonal), "{left:?}");
    assert!(left.contains(&"infra-h100".to_string()), "{left:?}");
    assert_eq!(left.len(), 2);
    let released: Vec<Value> = project
        .reservations_in_state()
        .into_iter()
        .filter(|r| r["status"] == "released")
        .collect();
    assert_eq!(released.len(), 1);
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("azure:capacityReservations.delete"),
        "{audit}"
    );
}
