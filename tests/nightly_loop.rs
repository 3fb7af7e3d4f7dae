//! The nightly CI loop of `examples/nightly-offline`, end to end and offline: the binary, the
//! real AWS SDK, the EC2 capacity peer for capacity blocks, moto's server behind it for launch
//! templates and Auto Scaling groups, and moto's S3 for the shared state, journal, audit log
//! and lock. What was bought is counted in the peer's record.
//!
//! - night 1 plans and applies: the blocks are bought once each;
//! - the calendar changes; night 2 plans against the applied plan, and the diff names the
//!   blocks as bought since, the new campaign's on-demand run as added and the calendar as
//!   what moved; its apply buys nothing again and sizes the pool for the new campaign;
//! - after the campaigns, release scales the pool to zero and records the blocks as ended.

#[path = "support/ec2_peer.rs"]
mod ec2_peer;
#[path = "support/moto_s3.rs"]
mod moto_s3;
#[path = "support/python.rs"]
mod python;

use std::path::PathBuf;
use std::process::{Command, Output};

use ec2_peer::Ec2Peer;
use moto_s3::MotoS3;
use serde_json::{Value, json};

const NIGHT1: &str = "2026-12-28T00:00:00Z";
const NIGHT2: &str = "2027-01-19T00:00:00Z";
const AFTER: &str = "2027-02-10T00:00:00Z";

struct Repo {
    dir: tempfile::TempDir,
    peer: Ec2Peer,
    s3: MotoS3,
}

impl Repo {
    /// The example copied into a fresh "infra repo", its subnet set to one of moto's.
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let example = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .join("examples/nightly-offline");
        for f in ["gpucap.toml", "campaigns.yaml", "night2-campaign.yaml"] {
            std::fs::copy(example.join(f), dir.path().join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", example.join(f).display()));
        }
        std::fs::create_dir_all(dir.path().join("plans")).unwrap();
        let peer = Ec2Peer::with_moto(&json!({ "offerings": [] }));
        let (status, xml) = peer.ec2(&[("Action", "DescribeSubnets")]);
        assert_eq!(status, 200, "moto's DescribeSubnets: {xml}");
        let subnet = between(&xml, "<subnetId>", "<").expect("moto has a default subnet");
        let config = dir.path().join("gpucap.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("SUBNET", &subnet)).unwrap();
        let s3 = MotoS3::start("gpucap-state");
        Repo { dir, peer, s3 }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gpucap(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_gpucap"))
            .arg("-c")
            .arg(self.path("gpucap.toml"))
            .args(args)
            .current_dir(self.dir.path())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "peer-access-key")
            .env("AWS_SECRET_ACCESS_KEY", "peer-secret-key")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("GPUCAP_AWS_ENDPOINT_URL", self.peer.url())
            .env("GPUCAP_S3_ENDPOINT", self.s3.url())
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1")
            .env_remove("GPUCAP_HALT_AFTER_JOURNAL")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "gpucap {args:?} failed ({}):\n{}\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    }

    /// The peer sells what the plan's blocks were quoted at (`examples/apply-offline`).
    fn offer(&self, plan: &str) {
        let script = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
        )
        .join("examples/apply-offline/offerings.py");
        let out = Command::new("python3")
            .arg(&script)
            .arg(self.path(plan))
            .output()
            .unwrap_or_else(|e| panic!("python3 is needed to run {}: {e}", script.display()));
        assert!(out.status.success(), "{}", text(&out.stderr));
        self.peer
            .configure(&serde_json::from_slice(&out.stdout).unwrap());
    }

    /// What the state on S3 holds, as `gpucap state list` reads it.
    fn resources(&self, kind: &str) -> Vec<Value> {
        let out = self.gpucap(&["state", "list", "--format", "json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == kind)
            .cloned()
            .collect()
    }

    fn purchases(&self) -> usize {
        self.peer.record()["purchases"].as_array().unwrap().len()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn between(s: &str, start: &str, end: &str) -> Option<String> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)? + i;
    Some(s[i..j].to_string())
}

fn ids(plan: &Value, kind: &str) -> Vec<String> {
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == kind)
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect()
}

/// The desired capacity moto holds for the group.
fn desired(repo: &Repo, group: &str) -> u64 {
    let (status, xml) = repo.peer.autoscaling(&[
        ("Action", "DescribeAutoScalingGroups"),
        ("AutoScalingGroupNames.member.1", group),
    ]);
    assert_eq!(status, 200, "{xml}");
    between(&xml, "<DesiredCapacity>", "<")
        .unwrap_or_else(|| panic!("{group} is not in moto: {xml}"))
        .parse()
        .unwrap()
}

#[test]
fn three_nights_plan_apply_diff_and_release() {
    let repo = Repo::new();

    // Night 1: plan, apply what is due. Both blocks are bought, once each.
    repo.peer.set_clock(Some(NIGHT1));
    repo.gpucap(&["plan", "--now", NIGHT1, "-q", "-o", "plans/current.json"]);
    let night1: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.path("plans/current.json")).unwrap())
            .unwrap();
    let blocks = ids(&night1, "purchase_capacity_block");
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    repo.offer("plans/current.json");
    repo.gpucap(&[
        "apply",
        "plans/current.json",
        "--now",
        NIGHT1,
        "--window",
        "30d",
        "--auto-approve",
    ]);
    assert_eq!(repo.purchases(), 2);
    assert_eq!(repo.resources("capacity_block").len(), 2);
    std::fs::copy(
        repo.path("plans/current.json"),
        repo.path("plans/applied.json"),
    )
    .unwrap();

    // The calendar changes: an evaluation sweep starting on night 2.
    let mut calendar = std::fs::read_to_string(repo.path("campaigns.yaml")).unwrap();
    calendar.push_str(&std::fs::read_to_string(repo.path("night2-campaign.yaml")).unwrap());
    std::fs::write(repo.path("campaigns.yaml"), calendar).unwrap();

    // Night 2: the diff against the applied plan, for the pull request.
    repo.peer.set_clock(Some(NIGHT2));
    let md = repo.gpucap(&[
        "plan",
        "--now",
        NIGHT2,
        "-q",
        "--format",
        "markdown",
        "--compare-to",
        "plans/applied.json",
        "-o",
        "plans/current.json",
    ]);
    let md = text(&md.stdout);
    assert!(md.contains("2 bought since, now owned"), "{md}");
    for id in &blocks {
        assert!(
            md.contains(id.as_str()),
            "{id} not named in the diff:\n{md}"
        );
    }
    assert!(
        md.contains("campaigns.yaml"),
        "the calendar is named as what moved:\n{md}"
    );
    let json_diff = repo.gpucap(&[
        "plan",
        "--now",
        NIGHT2,
        "-q",
        "--format",
        "json",
        "--compare-to",
        "plans/applied.json",
    ]);
    let doc: Value = serde_json::from_slice(&json_diff.stdout).unwrap();
    let diff = &doc["diff"];
    let bought: Vec<&str> = diff["bought"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(bought, blocks, "{diff}");
    let added: Vec<&str> = diff["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert!(added.contains(&"run_on_demand"), "{diff}");
    // Nothing still ahead was dropped: what is removed ended before night 2 (the first
    // campaign's last on-demand hour).
    let removed = diff["removed"].as_array().unwrap();
    assert!(
        removed.iter().all(|a| a["end"].as_str().unwrap() <= NIGHT2),
        "{diff}"
    );
    let night2: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.path("plans/current.json")).unwrap())
            .unwrap();
    assert!(
        ids(&night2, "purchase_capacity_block").is_empty(),
        "night 2 plans no block again: {:?}",
        ids(&night2, "purchase_capacity_block")
    );

    // Its apply buys nothing more and starts the sweep's on-demand instances in the pool.
    repo.gpucap(&[
        "apply",
        "plans/current.json",
        "--now",
        NIGHT2,
        "--auto-approve",
    ]);
    assert_eq!(repo.purchases(), 2, "night 2 bought nothing again");
    let pools = repo.resources("pool");
    assert_eq!(pools.len(), 1, "{pools:?}");
    let group = pools[0]["id"].as_str().unwrap().to_string();
    // The sweep's 16 GPUs run whole (campaigns are placed as gangs by default): two
    // p5.48xlarge of eight H100s each, not sixteen 1-GPU p5.4xlarge at the same price per GPU.
    assert_eq!(desired(&repo, &group), 2);

    // After the campaigns: release scales the pool to zero; the blocks ended by themselves.
    repo.peer.set_clock(Some(AFTER));
    let dry = repo.gpucap(&["release", "--now", AFTER, "--dry-run"]);
    assert!(
        text(&dry.stdout).contains("Would release (1)"),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(desired(&repo, &group), 2, "a dry run changes nothing");
    let out = repo.gpucap(&["release", "--now", AFTER, "--auto-approve"]);
    let out = text(&out.stdout);
    assert!(out.contains("Released (1)"), "{out}");
    assert!(out.contains("Ended by itself (2)"), "{out}");
    assert_eq!(desired(&repo, &group), 0);
    assert!(
        repo.resources("capacity_block")
            .iter()
            .all(|b| b["status"] == "expired"),
        "{:?}",
        repo.resources("capacity_block")
    );
    assert_eq!(repo.purchases(), 2);

    // Everything lived in the bucket: the state, write-once journal and audit objects, and no
    // lock left behind by any of the runs.
    let keys = repo.s3.keys("nightly/");
    assert!(keys.contains(&"nightly/state.json".to_string()), "{keys:?}");
    assert!(
        keys.iter()
            .any(|k| k.starts_with("nightly/state.json.journal/")),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k.starts_with("nightly/state.json.audit/")),
        "{keys:?}"
    );
    assert!(
        !keys.contains(&"nightly/state.json.lock".to_string()),
        "{keys:?}"
    );
    // Each clean run moved the journal's settled point: the next run's recovery reads only
    // what came after it, not the whole history.
    assert!(
        keys.contains(&"nightly/state.json.journal.settled".to_string()),
        "{keys:?}"
    );
    assert!(!repo.path(".gpucap").exists(), "nothing was kept locally");
}
