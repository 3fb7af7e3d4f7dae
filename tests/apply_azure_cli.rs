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
//!
//! Pools: [`Project::with_pool`] adds launch settings and an on-demand run from now, so apply
//! makes the pool's flexible VM scale set and sizes it:
//!
//! - one scale set at the planned capacity with every VM running (counted by the peer), put
//!   once; a re-run sends nothing;
//! - killed after every journal record, and while its PUT is under way, and re-run: still
//!   each exactly once;
//! - a dropped PUT, throttled PATCH and VM listing and a failed operation poll: settled by
//!   name, no second PUT;
//! - a stockout: reported as a capacity shortfall ("0 of 3", `AllocationFailed`), not done;
//! - `gpucap release` scales the pool to zero once no campaign needs it, and leaves a scale
//!   set it did not make alone.

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
/// The on-demand run added to the pool plan: running now, in the pool's scale set.
const RUN_NOW: &str = "od-h100-azure-azure-eastus-standard-nc40ads-h100-v5-3x-20261228-14d";
/// The pool's deterministic name: its on-demand scale set's.
const POOL_NAME: &str = "gpucap-h100-azure-eastus-standard-nc40ads-h100-v5";
const RUN_INSTANCES: u64 = 3;
/// A public key (not a secret), as `GPUCAP_AZURE_SSH_PUBLIC_KEY` gives it.
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPeerTestKeyOnly gpucap-test";
const SUBNET: &str = "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/train/subnets/gpu";

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// The offline-apply example's calendar with one Azure pool, and a plan with two Azure
    /// reservations due now.
    fn new() -> Project {
        Project::make(false)
    }

    /// As [`Project::new`], with launch settings for the pool (`[apply.pools.h100-azure]`)
    /// and an on-demand run of [`RUN_INSTANCES`] in it from now on: apply makes the pool's
    /// scale set and sizes it.
    fn with_pool() -> Project {
        Project::make(true)
    }

    fn make(pool: bool) -> Project {
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
{}"#,
                if pool {
                    format!(
                        r#"
[apply.pools.h100-azure]
image = "microsoft-dsvm:ubuntu-hpc:2204:latest"
subnets = ["{SUBNET}"]
"#
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
            "GPUCAP_AZURE_ADMIN_USERNAME",
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
            .env("GPUCAP_AZURE_SSH_PUBLIC_KEY", SSH_KEY)
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
        actions.push(reserve(REGIONAL, Value::Null, 8));
        actions.push(reserve(ZONAL, "1".into(), 4));
        actions.push(release);
        if pool {
            assert_eq!(run_now["kind"], "run_on_demand", "{run_now}");
            assert_eq!(
                run_now["instance_type"], "Standard_NC40ads_H100_v5",
                "{run_now}"
            );
            actions.push(run_now);
        }
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

/// Applies a fresh `make()` project once to learn how many journal records a full run
/// writes (`records`), then for each record n: a fresh project killed after record n,
/// force-unlocked and re-run, and `check`ed.
fn kill_at_every_journal_boundary(
    make: fn() -> Project,
    records: u64,
    check: impl Fn(&Project, &AzurePeer, &str),
) {
    let probe = make();
    let probe_peer = AzurePeer::start(&json!({}));
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
        check(&project, &peer, &format!("kill after record {n}"));
    }
    eprintln!(
        "{records} kill points checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_creates_each_reservation_exactly_once() {
    // A full run writes intent, sent and done for each of the two reservations.
    kill_at_every_journal_boundary(Project::new, 6, |project, peer, context| {
        assert_created_once(peer, context);
        assert_eq!(project.reservations_in_state().len(), 2, "{context}");
    });
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

/// The pool's scale set came into existence once, was PUT once, and is at the planned
/// capacity with every VM running.
fn assert_pool_once(peer: &AzurePeer, context: &str) {
    assert_eq!(
        peer.scale_sets_created(),
        std::collections::BTreeMap::from([(POOL_NAME.to_string(), 1)]),
        "{context}: created"
    );
    assert_eq!(
        peer.record()["scale_set_puts"],
        json!({ POOL_NAME: 1 }),
        "{context}: PUTs"
    );
    let sets = peer.scale_sets();
    assert_eq!(sets.len(), 1, "{context}: {sets:?}");
    assert_eq!(sets[0]["name"], POOL_NAME, "{context}");
    assert_eq!(sets[0]["sku"]["capacity"], RUN_INSTANCES, "{context}");
    assert_eq!(peer.running(POOL_NAME) as u64, RUN_INSTANCES, "{context}");
}

fn pools_in_state(project: &Project) -> Vec<Value> {
    project.state()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "pool" && r["cloud"] == "azure")
        .cloned()
        .collect()
}

#[test]
fn a_plan_with_an_azure_run_makes_one_scale_set_of_the_planned_size() {
    let project = Project::with_pool();
    let peer = AzurePeer::start(&json!({ "lro_polls": 3, "vm_polls": 2 }));
    let dry = project.apply(&peer, &["--dry-run"]);
    let out = text(&dry.stdout);
    assert!(dry.status.success(), "{out}\n{}", text(&dry.stderr));
    assert!(out.contains("Would do (3)"), "{out}");
    assert!(peer.scale_sets().is_empty());
    assert_eq!(peer.calls("PUT scaleset") + peer.calls("PATCH scaleset"), 0);

    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert!(
        out.contains(&format!(
            "sized {POOL_NAME} to 3 on-demand + 0 spot x Standard_NC40ads_H100_v5; 3 running"
        )),
        "{out}"
    );
    assert_created_once(&peer, "reservations beside the pool");
    assert_pool_once(&peer, "first run");
    let set = peer.scale_set(POOL_NAME).unwrap();
    assert_eq!(set["properties"]["orchestrationMode"], "Flexible");
    assert_eq!(set["tags"]["managed-by"], "gpucap");
    assert_eq!(set["tags"]["gpucap:action"], POOL_NAME);
    let profile = &set["properties"]["virtualMachineProfile"];
    assert_eq!(profile["priority"], "Regular");
    assert_eq!(
        profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"]
            [0]["properties"]["subnet"]["id"],
        SUBNET
    );
    assert_eq!(
        profile["storageProfile"]["imageReference"]["publisher"],
        "microsoft-dsvm"
    );
    // The PATCH was followed to Succeeded, then the VMs listed until all three ran.
    assert!(peer.calls("GET operation") >= 3, "{}", peer.record());
    assert!(peer.calls("LIST vms") >= 2, "{}", peer.record()["calls"]);
    let pools = pools_in_state(&project);
    assert_eq!(pools.len(), 1, "{pools:?}");
    assert_eq!(pools[0]["id"], POOL_NAME);
    assert_eq!(pools[0]["instances"], RUN_INSTANCES);
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("azure:virtualMachineScaleSets.createOrUpdate")
            && audit.contains("azure:virtualMachineScaleSets.update"),
        "{audit}"
    );
    for file in ["audit.jsonl", "journal.jsonl", "state.json"] {
        let body = std::fs::read_to_string(project.path(&format!(".gpucap/{file}"))).unwrap();
        assert!(!body.contains(TOKEN), "{file} holds the bearer token");
    }
    assert!(!out.contains(TOKEN) && !err.contains(TOKEN));

    // Again: the scale set is at its capacity; nothing is put or patched.
    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_pool_once(&peer, "second run");
    assert_eq!(peer.calls("PUT scaleset"), 1);
    assert_eq!(peer.calls("PATCH scaleset"), 1);
}

#[test]
fn killed_at_every_journal_boundary_then_rerun_makes_the_pool_exactly_once() {
    // Two reservations, the pool's creation and its resize: intent, sent and done each.
    kill_at_every_journal_boundary(Project::with_pool, 12, |project, peer, context| {
        assert_created_once(peer, context);
        assert_pool_once(peer, context);
        assert_eq!(pools_in_state(project).len(), 1, "{context}");
    });
}

#[test]
fn killed_while_a_scale_set_put_is_under_way_then_rerun_makes_it_once() {
    let project = Project::with_pool();
    let peer = AzurePeer::start(&json!({}));
    // The scale set's PUT takes 2 s to act; the run is killed while it waits.
    peer.set_faults(&json!({ "seed": 1, "rules": [
        { "fault": "latency", "op": "PUT scaleset", "calls": [1], "seconds": 2 }
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
    while peer.calls("PUT scaleset") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let _ = child.kill();
    let _ = child.wait();
    peer.set_faults(&json!({ "seed": 1, "rules": [] }));
    force_unlock(&project, &peer);
    // Give the delayed PUT time to land, then re-run: the scale set is found by its name.
    std::thread::sleep(Duration::from_millis(2500));
    let rerun = project.apply(&peer, &["--reconcile-wait", "3s"]);
    assert!(
        rerun.status.success(),
        "{}\n{}",
        text(&rerun.stdout),
        text(&rerun.stderr)
    );
    assert_created_once(&peer, "after the kill");
    assert_pool_once(&peer, "after the kill");
    assert_eq!(pools_in_state(&project).len(), 1);
}

#[test]
fn a_dropped_put_and_throttling_are_reconciled_without_a_second_scale_set() {
    let project = Project::with_pool();
    let peer = AzurePeer::start(&json!({ "lro_polls": 2 }));
    peer.set_faults(&json!({ "seed": 6, "rules": [
        { "fault": "drop_response", "op": "PUT scaleset", "calls": [1] },
        { "fault": "throttle", "op": "PATCH scaleset", "calls": [1], "retry_after": 1 },
        { "fault": "throttle", "op": "LIST vms", "calls": [1], "retry_after": 1 },
        { "fault": "status", "op": "GET operation", "calls": [3], "status": 503 }
    ] }));
    let run = project.apply(&peer, &[]);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert_pool_once(&peer, "faults");
    // The PUT whose answer was lost was found by name, not sent again; the throttled PATCH
    // did nothing and was sent again.
    assert_eq!(peer.calls("PUT scaleset"), 1);
    assert_eq!(peer.calls("PATCH scaleset"), 2);
    let record = peer.record();
    assert_eq!(record["fault_counts"]["drop_response"], 1, "{record}");
    assert_eq!(record["fault_counts"]["throttle"], 2, "{record}");
    assert_eq!(pools_in_state(&project).len(), 1);
}

#[test]
fn a_stockout_is_a_capacity_shortfall_not_success() {
    let project = Project::with_pool();
    let peer = AzurePeer::start(&json!({}));
    peer.set_faults(&json!({ "rules": [
        { "fault": "stockout", "sku": "Standard_NC40ads_H100_v5", "available": 0 }
    ] }));
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(out.contains("AllocationFailed"), "{out}\n{err}");
    assert!(out.contains("0 of 3"), "{out}\n{err}");
    assert!(out.contains("insufficient capacity"), "{out}\n{err}");
    // The scale set exists at its capacity (the next apply looks again); none of its VMs
    // runs, and the PATCH was not repeated blindly.
    let set = peer.scale_set(POOL_NAME).unwrap();
    assert_eq!(set["sku"]["capacity"], RUN_INSTANCES);
    assert_eq!(peer.running(POOL_NAME), 0);
    assert_eq!(peer.calls("PATCH scaleset"), 1);
}

#[test]
fn release_scales_a_pool_no_campaign_needs_to_zero_and_leaves_a_foreign_scale_set() {
    let project = Project::with_pool();
    let peer = AzurePeer::start(&json!({}));
    let run = project.apply(&peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_pool_once(&peer, "applied");
    // Someone else's scale set in the same resource group is never touched.
    let theirs = "gpucap-h100-azure-eastus-team";
    peer.seed_scale_set(&json!({
        "name": theirs, "location": "eastus", "sku": "Standard_NC40ads_H100_v5",
        "capacity": 2, "tags": { "team": "infra" }
    }));

    let released = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&released.stdout);
    assert!(
        released.status.success(),
        "{out}\n{}",
        text(&released.stderr)
    );
    let ours = peer.scale_set(POOL_NAME).unwrap();
    assert_eq!(ours["sku"]["capacity"], 0, "{out}");
    assert_eq!(peer.running(POOL_NAME), 0);
    assert_eq!(peer.scale_set(theirs).unwrap()["sku"]["capacity"], 2);
    assert_eq!(peer.running(theirs), 2);
    assert_eq!(peer.record()["scale_set_patches"], json!({ POOL_NAME: 2 }));
    assert_eq!(peer.scale_sets_created().len(), 1, "nothing made");
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(
        audit.contains("azure:virtualMachineScaleSets.update"),
        "{audit}"
    );
}
