//! `[state] backend = "s3"` end to end, against moto's S3 server on 127.0.0.1 (state, journal,
//! audit log and lock) and the local EC2 capacity peer (`tests/peers/ec2_capacity_peer.py`,
//! which counts what it sold). Every purchase count comes from the peer's own record, every
//! object from moto, never from gpucap's word.
//!
//! - two `gpucap apply` started together on one S3 state: one acts, the other fails naming
//!   the holder (short `--lock-timeout`), or waits and finds nothing left to do;
//! - a run killed (SIGKILL) while holding the lock, at several journal boundaries: its short
//!   lease runs out, the next run takes the lock over (saying so, and in the audit log),
//!   settles the journal and finishes without buying anything twice;
//! - force-unlock, `state list` and `state show` on S3;
//! - the library on moto: a state write after the lock was stolen is refused, and of two runs
//!   finding the same expired lock exactly one takes it over.

#![cfg(feature = "aws")]

#[path = "support/ec2_peer.rs"]
mod ec2_peer;
#[path = "support/moto_s3.rs"]
mod moto_s3;
#[path = "support/python.rs"]
mod python;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ec2_peer::Ec2Peer;
use gpucap::state::{LockOptions, ObjectBackend, State, StateBackend, StateError};
use moto_s3::MotoS3;
use serde_json::Value;

const NOW: &str = "2026-12-28T00:00:00Z";
const KEY: &str = "gpucap/prod/state.json";
const SECRET: &str = "s3-test-secret-key-91c4e2";

/// The offline-apply example in a temporary directory, its state in moto's S3.
struct Project {
    dir: tempfile::TempDir,
    moto: MotoS3,
    objects: Objects,
}

/// Reads moto's objects with a signed client of its own (moto refuses anonymous reads).
struct Objects {
    rt: tokio::runtime::Runtime,
    store: gpucap_aws::S3Objects,
}

impl Objects {
    fn new(moto: &MotoS3) -> Objects {
        Objects {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            store: gpucap_aws::S3Objects::new(s3_config(moto)),
        }
    }

    fn get(&self, key: &str) -> Option<String> {
        use gpucap_provider::objects::ObjectStore as _;
        self.rt
            .block_on(self.store.get(key))
            .unwrap_or_else(|e| panic!("reading {key} from moto: {e}"))
            .map(|o| String::from_utf8(o.bytes).unwrap())
    }
}

fn s3_config(moto: &MotoS3) -> gpucap_aws::S3Config {
    gpucap_aws::S3Config {
        region: Some("us-east-1".into()),
        endpoint_url: Some(moto.url()),
        static_credentials: Some(gpucap_aws::StaticCredentials {
            access_key_id: moto_s3::ACCESS_KEY.into(),
            secret_access_key: SECRET.into(),
        }),
        ..gpucap_aws::S3Config::new(moto.bucket.clone())
    }
}

impl Project {
    fn new(bucket: &str, lease: Option<&str>) -> Project {
        let moto = MotoS3::start(bucket);
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
        let config = dir.path().join("gpucap.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        let local = "[state]\nbackend = \"local\"\ndir = \".gpucap\"\n";
        assert!(
            text.contains(local),
            "the example's [state] changed: {text}"
        );
        let mut s3 = format!(
            "[state]\nbackend = \"s3\"\nbucket = \"{bucket}\"\nkey = \"{KEY}\"\nregion = \"us-east-1\"\nendpoint = \"{}\"\n",
            moto.url()
        );
        if let Some(lease) = lease {
            s3.push_str(&format!("lock_lease = \"{lease}\"\n"));
        }
        std::fs::write(&config, text.replace(local, &s3)).unwrap();
        let objects = Objects::new(&moto);
        Project { dir, moto, objects }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gpucap(&self, peer: Option<&Ec2Peer>, args: &[&str]) -> Command {
        self.gpucap_with("gpucap.toml", peer, args)
    }

    fn gpucap_with(&self, config: &str, peer: Option<&Ec2Peer>, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpucap"));
        cmd.arg("-c").arg(self.path(config)).args(args);
        cmd.env_remove("GPUCAP_HALT_AFTER_JOURNAL")
            .env_remove("GPUCAP_S3_ENDPOINT")
            .env_remove("AWS_PROFILE")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", moto_s3::ACCESS_KEY)
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

    fn plan(&self) {
        let out = self.path("plan.json");
        let run = self.run(
            None,
            &["plan", "--now", NOW, "-q", "-o", out.to_str().unwrap()],
        );
        assert!(run.status.success(), "{}", text(&run.stderr));
    }

    fn apply_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "apply",
            self.path("plan.json").to_str().unwrap(),
            "--now",
            NOW,
            "--auto-approve",
            "--window",
            "30d",
            "--reconcile-wait",
            "1s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn apply(&self, peer: &Ec2Peer, extra: &[&str]) -> Output {
        let args = self.apply_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(Some(peer), &args)
    }

    fn spawn_apply(&self, peer: &Ec2Peer, extra: &[&str]) -> Child {
        let args = self.apply_args(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.gpucap(Some(peer), &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The state as moto holds it.
    fn state(&self) -> Value {
        let body = self
            .objects
            .get(KEY)
            .unwrap_or_else(|| panic!("no state object at {KEY} in moto"));
        serde_json::from_str(&body).unwrap()
    }

    fn lock(&self) -> Option<Value> {
        self.objects
            .get(&format!("{KEY}.lock"))
            .map(|b| serde_json::from_str(&b).unwrap())
    }

    fn blocks_in_state(&self) -> usize {
        self.state()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "capacity_block")
            .count()
    }

    /// Every audit record in moto.
    fn audit(&self) -> Vec<Value> {
        self.moto
            .keys(&format!("{KEY}.audit/"))
            .iter()
            .map(|k| serde_json::from_str(&self.objects.get(k).unwrap()).unwrap())
            .collect()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The peer's offerings for the plan (`examples/apply-offline/offerings.py`).
fn offerings(project: &Project) -> Value {
    let script = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    )
    .join("examples/apply-offline/offerings.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(project.path("plan.json"))
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

fn setup(bucket: &str, lease: Option<&str>) -> (Project, Ec2Peer, usize) {
    let project = Project::new(bucket, lease);
    project.plan();
    let offers = offerings(&project);
    let parts = offers["offerings"].as_array().unwrap().len();
    assert!(parts >= 2, "the example buys several blocks: {offers}");
    let peer = Ec2Peer::start(&offers);
    (project, peer, parts)
}

fn assert_bought_once_each(peer: &Ec2Peer, parts: usize, context: &str) {
    let bought = purchases(peer);
    assert_eq!(bought.len(), parts, "{context}: {bought:?}");
    assert!(
        bought.values().all(|n| *n == 1),
        "{context}: bought twice: {bought:?}"
    );
}

#[test]
fn a_plan_is_applied_with_its_state_in_s3_and_nothing_local() {
    let (project, peer, parts) = setup("gpucap-apply", None);
    let run = project.apply(&peer, &[]);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "{out}\n{err}");
    assert_bought_once_each(&peer, parts, "first run");
    assert_eq!(project.blocks_in_state(), parts);
    assert!(project.lock().is_none(), "released");
    assert!(!project.path(".gpucap").exists(), "nothing written locally");
    // The journal: three immutable objects per part, seqs 1…n.
    let journal = project.moto.keys(&format!("{KEY}.journal/"));
    assert_eq!(journal.len(), 3 * parts, "{journal:?}");
    assert_eq!(
        journal.last().unwrap(),
        &format!("{KEY}.journal/{:020}.json", 3 * parts)
    );
    let audit = project.audit();
    assert!(
        audit
            .iter()
            .any(|a| a["api"] == "ec2:PurchaseCapacityBlock" && a["outcome"] == "done"),
        "{audit:?}"
    );
    // No credential in any object.
    for key in project.moto.keys("gpucap/") {
        let body = project.objects.get(&key).unwrap();
        assert!(!body.contains(SECRET), "{key} holds the secret key");
    }
    assert!(!out.contains(SECRET) && !err.contains(SECRET));

    // A re-run (on another "machine": nothing local either way) has nothing to do.
    let again = project.apply(&peer, &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("Already done earlier"),
        "{}",
        text(&again.stdout)
    );
    assert_bought_once_each(&peer, parts, "re-run");

    // `state list` and `state show` read it from S3.
    let list = project.run(None, &["state", "list", "--format", "json"]);
    assert!(list.status.success(), "{}", text(&list.stderr));
    let listed: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), parts);
    let id = listed[0]["id"].as_str().unwrap();
    let show = project.run(None, &["state", "show", id]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert!(
        shown["journal"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["step"] == "done" && r["resource_id"] == id),
        "{shown}"
    );

    // GPUCAP_S3_ENDPOINT overrides the configured endpoint (here one nobody listens on).
    let config = std::fs::read_to_string(project.path("gpucap.toml")).unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    std::fs::write(
        project.path("elsewhere.toml"),
        config.replace(&project.moto.url(), &format!("http://127.0.0.1:{dead}")),
    )
    .unwrap();
    let elsewhere = |env: Option<String>| {
        let mut cmd = project.gpucap_with(
            "elsewhere.toml",
            None,
            &["state", "list", "--format", "json"],
        );
        if let Some(url) = env {
            cmd.env("GPUCAP_S3_ENDPOINT", url);
        }
        cmd.output().unwrap()
    };
    let overridden = elsewhere(Some(project.moto.url()));
    assert!(overridden.status.success(), "{}", text(&overridden.stderr));
    assert_eq!(
        serde_json::from_slice::<Value>(&overridden.stdout).unwrap(),
        listed
    );
    let unreachable = elsewhere(None);
    assert!(!unreachable.status.success());
    assert!(
        text(&unreachable.stderr).contains(&format!("s3://gpucap-apply/{KEY}")),
        "names the object it could not read: {}",
        text(&unreachable.stderr)
    );
}

#[test]
fn two_applies_started_together_one_acts_the_other_fails_naming_the_holder() {
    let (project, peer, parts) = setup("gpucap-race", None);
    // Purchases answer after 1 s, so the winner holds the lock for seconds.
    peer.set_faults(&serde_json::json!({"seed": 1, "rules": [
        {"fault": "latency", "action": "PurchaseCapacityBlock", "seconds": 1}
    ]}));
    let a = project.spawn_apply(&peer, &["--lock-timeout", "300ms"]);
    let b = project.spawn_apply(&peer, &["--lock-timeout", "300ms"]);
    let (pid_a, pid_b) = (a.id(), b.id());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (winner_pid, loser) = match (a.status.success(), b.status.success()) {
        (true, false) => (pid_a, b),
        (false, true) => (pid_b, a),
        _ => panic!(
            "exactly one must succeed:\nA {}: {}\nB {}: {}",
            a.status,
            text(&a.stderr),
            b.status,
            text(&b.stderr)
        ),
    };
    let err = text(&loser.stderr);
    assert!(
        err.contains("the state is locked by")
            && err.contains(&format!("pid {winner_pid}"))
            && err.contains("gpucap force-unlock")
            && err.contains(&format!("s3://gpucap-race/{KEY}.lock")),
        "the loser names the holder: {err}"
    );
    assert_bought_once_each(&peer, parts, "race");
    assert_eq!(project.blocks_in_state(), parts);
    assert!(project.lock().is_none());
}

#[test]
fn two_patient_applies_started_together_one_acts_the_other_finds_nothing_left() {
    let (project, peer, parts) = setup("gpucap-wait", None);
    peer.set_faults(&serde_json::json!({"seed": 1, "rules": [
        {"fault": "latency", "action": "PurchaseCapacityBlock", "seconds": 1}
    ]}));
    let a = project.spawn_apply(&peer, &["--lock-timeout", "120s"]);
    let b = project.spawn_apply(&peer, &["--lock-timeout", "120s"]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for (name, run) in [("A", &a), ("B", &b)] {
        assert!(
            run.status.success(),
            "{name}: {}\n{}",
            text(&run.stdout),
            text(&run.stderr)
        );
    }
    let idle = [&a, &b]
        .iter()
        .filter(|r| text(&r.stdout).contains("Already done earlier"))
        .count();
    assert_eq!(
        idle,
        1,
        "one waited and found everything done:\nA: {}\nB: {}",
        text(&a.stdout),
        text(&b.stdout)
    );
    assert_bought_once_each(&peer, parts, "patient race");
    assert_eq!(project.blocks_in_state(), parts);
}

/// Runs apply until it halts after journal record `n`, then SIGKILLs it. Returns the id of
/// the lock it left in S3.
fn kill_at(project: &Project, peer: &Ec2Peer, n: usize) -> String {
    let args = project.apply_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = project
        .gpucap(Some(peer), &args)
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
    let _ = child.kill(); // SIGKILL: no destructor, no release
    let _ = child.wait();
    assert!(halted, "the run did not reach journal record {n}");
    let lock = project
        .lock()
        .unwrap_or_else(|| panic!("a run killed after record {n} leaves its lock in S3"));
    lock["id"].as_str().unwrap().to_string()
}

#[test]
fn a_killed_run_s_lock_is_taken_over_once_its_lease_ran_out_and_nothing_is_bought_twice() {
    // Kill points: after the first intent, after the first `sent` (the call may be in
    // flight), after the first `done` (bought, not yet in the state), after the last record.
    let (probe, probe_peer, parts) = setup("gpucap-probe", Some("2s"));
    let run = probe.apply(&probe_peer, &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let records = probe.moto.keys(&format!("{KEY}.journal/")).len();
    assert_eq!(records, 3 * parts);
    drop((probe, probe_peer));

    for n in [1, 2, 3, records] {
        let (project, peer, parts) = setup(&format!("gpucap-kill-{n}"), Some("2s"));
        let dead = kill_at(&project, &peer, n);
        let started = Instant::now();
        let rerun = project.apply(&peer, &["--lock-timeout", "60s"]);
        let (out, err) = (text(&rerun.stdout), text(&rerun.stderr));
        assert!(rerun.status.success(), "kill after {n}: {out}\n{err}");
        assert!(
            err.contains(&format!("took over the state lock {dead}")),
            "kill after {n}: says it took the lock over: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "waited for the 2 s lease, not the 60 s timeout"
        );
        assert_bought_once_each(&peer, parts, &format!("kill after record {n}"));
        assert_eq!(project.blocks_in_state(), parts, "kill after record {n}");
        assert!(project.lock().is_none(), "released after the run");
        let takeovers: Vec<Value> = project
            .audit()
            .into_iter()
            .filter(|a| a["outcome"] == "lock-takeover")
            .collect();
        assert_eq!(takeovers.len(), 1, "kill after {n}: {takeovers:?}");
        assert!(
            takeovers[0]["detail"].as_str().unwrap().contains(&dead),
            "{takeovers:?}"
        );
    }
}

#[test]
fn a_killed_run_s_live_lock_stops_the_next_until_force_unlock() {
    let (project, peer, parts) = setup("gpucap-unlock", None);
    let dead = kill_at(&project, &peer, 2);
    let blocked = project.apply(&peer, &["--lock-timeout", "1s"]);
    assert!(!blocked.status.success());
    let err = text(&blocked.stderr);
    assert!(
        err.contains(&format!("gpucap force-unlock {dead}")) && err.contains("lease runs until"),
        "{err}"
    );
    let wrong = project.run(None, &["force-unlock", "not-the-id"]);
    assert!(!wrong.status.success());
    assert!(project.lock().is_some(), "a wrong id removes nothing");
    let unlock = project.run(None, &["force-unlock", &dead]);
    assert!(unlock.status.success(), "{}", text(&unlock.stderr));
    assert!(project.lock().is_none());
    assert!(
        project
            .audit()
            .iter()
            .any(|a| a["outcome"] == "force-unlock" && a["run"] == dead.as_str()),
        "the force-unlock is audited"
    );
    let rerun = project.apply(&peer, &[]);
    assert!(rerun.status.success(), "{}", text(&rerun.stderr));
    assert_bought_once_each(&peer, parts, "after force-unlock");
    assert_eq!(project.blocks_in_state(), parts);
}

// ---- the library on moto ----------------------------------------------------------------

fn s3_backend(moto: &MotoS3) -> ObjectBackend {
    ObjectBackend::new(Arc::new(gpucap_aws::S3Objects::new(s3_config(moto))), KEY)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_state_write_after_the_lock_was_stolen_is_refused_on_s3() {
    let moto = MotoS3::start("gpucap-stolen");
    let rt = runtime();
    let (first, second) = (s3_backend(&moto), s3_backend(&moto));
    rt.block_on(async {
        let guard = first.lock(&LockOptions::new("apply")).await.unwrap();
        let mut state = State::new();
        first.write_state(&guard, &mut state).await.unwrap();
        let mut mine = first.read_state().await.unwrap().unwrap();

        // Another client force-unlocks it, locks, and writes newer state.
        second.force_unlock(guard.id()).await.unwrap();
        let theirs_guard = second.lock(&LockOptions::new("apply")).await.unwrap();
        let mut theirs = second.read_state().await.unwrap().unwrap();
        second
            .write_state(&theirs_guard, &mut theirs)
            .await
            .unwrap();
        assert_eq!(theirs.serial, 2);

        // The first one's write is refused; the newer state stands.
        let err = first.write_state(&guard, &mut mine).await.unwrap_err();
        assert!(matches!(err, StateError::LockLost { .. }), "{err:?}");
        assert!(err.to_string().contains(theirs_guard.id()), "{err}");
        assert_eq!(first.read_state().await.unwrap().unwrap(), theirs);
        // Its journal appends and its release are refused too; the new lock stays.
        assert!(first.read_journal().await.unwrap().records.is_empty());
        assert!(matches!(
            guard.unlock().await,
            Err(StateError::LockLost { .. })
        ));
        assert_eq!(
            second.read_lock().await.unwrap().unwrap().id,
            theirs_guard.id()
        );
        theirs_guard.unlock().await.unwrap();
    });
    assert!(Objects::new(&moto).get(&format!("{KEY}.lock")).is_none());
}

#[test]
fn of_two_runs_finding_the_same_expired_lock_on_s3_exactly_one_takes_it_over() {
    let moto = MotoS3::start("gpucap-takeover");
    let rt = runtime();
    let objects = Objects::new(&moto);
    for round in 0..5 {
        let dead = s3_backend(&moto);
        let abandoned = rt
            .block_on(dead.lock(&LockOptions::new("apply").lease(Duration::from_secs(1))))
            .unwrap();
        let dead_id = abandoned.id().to_string();
        std::mem::forget(abandoned); // crashed: never released
        std::thread::sleep(Duration::from_millis(1100));
        let (a, b) = (Arc::new(s3_backend(&moto)), Arc::new(s3_backend(&moto)));
        let take = |backend: Arc<ObjectBackend>| {
            std::thread::spawn(move || {
                runtime().block_on(async move {
                    backend
                        .lock(&LockOptions::new("apply").timeout(Duration::from_millis(300)))
                        .await
                        .map(|g| {
                            let id = g.id().to_string();
                            std::mem::forget(g);
                            id
                        })
                })
            })
        };
        let (ta, tb) = (take(a.clone()), take(b.clone()));
        let results = [ta.join().unwrap(), tb.join().unwrap()];
        let winners: Vec<&String> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let lock: Value =
            serde_json::from_str(&objects.get(&format!("{KEY}.lock")).unwrap()).unwrap();
        assert_eq!(lock["id"], winners[0].as_str(), "round {round}");
        assert_ne!(winners[0], &dead_id);
        for r in &results {
            if let Err(e) = r {
                assert!(
                    matches!(e, StateError::Locked { holder, .. } if holder.id == *winners[0]),
                    "round {round}: the loser names the winner: {e}"
                );
            }
        }
        // Clean up for the next round (a fresh client: the takers' runtimes are gone).
        rt.block_on(s3_backend(&moto).force_unlock(winners[0]))
            .unwrap();
    }
}
