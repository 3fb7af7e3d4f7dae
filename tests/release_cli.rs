//! `gpucap release` end to end: the binary, the real AWS SDK and the local EC2 capacity peer
//! (`tests/peers/ec2_capacity_peer.py`), which keeps its own record of every reservation and
//! call. What was cancelled is counted in that record, never in gpucap's.
//!
//! - a reservation no campaign needs is cancelled only after two looks `idle_after` apart that
//!   both saw it unused; one in use is kept; one whose tags do not say gpucap made it is never
//!   touched, though the state lists it;
//! - a dry run lists and changes nothing;
//! - a policy that forbids releases (a freeze) stops the run with exit 3, nothing cancelled;
//! - without a terminal and without `--auto-approve`, it refuses.

#[path = "support/ec2_peer.rs"]
mod ec2_peer;
#[path = "support/python.rs"]
mod python;

use std::path::PathBuf;
use std::process::{Command, Output};

use ec2_peer::Ec2Peer;
use serde_json::{Value, json};

/// After the example's campaigns (the last ends 2027-02-03): nothing in the calendar needs H100s.
const AFTER: &str = "2027-02-10T00:00:00Z";

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
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

    fn release(&self, peer: &Ec2Peer, now: &str, extra: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gpucap"))
            .arg("-c")
            .arg(self.path("gpucap.toml"))
            .args(["release", "--now", now, "--reconcile-wait", "1s"])
            .args(extra)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "peer-access-key")
            .env("AWS_SECRET_ACCESS_KEY", "peer-secret-key")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("GPUCAP_AWS_ENDPOINT_URL", peer.url())
            .env("GPUCAP_RETRY_BASE_MS", "5")
            .env("NO_COLOR", "1")
            .env_remove("GPUCAP_HALT_AFTER_JOURNAL")
            .output()
            .unwrap()
    }

    fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path(".gpucap/state.json")).unwrap())
            .unwrap()
    }

    fn status_of(&self, id: &str) -> String {
        self.state()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in the state"))["status"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Creates a reservation in the peer as some client would, with `tags`; returns its id.
fn reservation(peer: &Ec2Peer, tags: &[(&str, &str)]) -> String {
    let keys: Vec<(String, String)> = tags
        .iter()
        .enumerate()
        .flat_map(|(i, (k, v))| {
            [
                (
                    format!("TagSpecification.1.Tag.{}.Key", i + 1),
                    k.to_string(),
                ),
                (
                    format!("TagSpecification.1.Tag.{}.Value", i + 1),
                    v.to_string(),
                ),
            ]
        })
        .collect();
    let mut params: Vec<(&str, &str)> = vec![
        ("Action", "CreateCapacityReservation"),
        ("InstanceType", "p5.48xlarge"),
        ("InstancePlatform", "Linux/UNIX"),
        ("AvailabilityZone", "us-east-1a"),
        ("InstanceCount", "2"),
        ("TagSpecification.1.ResourceType", "capacity-reservation"),
    ];
    params.extend(keys.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (status, body) = peer.ec2(&params);
    assert_eq!(status, 200, "{body}");
    let start = body.find("<capacityReservationId>").expect("an id") + 23;
    let end = body[start..].find('<').unwrap() + start;
    body[start..end].to_string()
}

/// The state gpucap would have written after creating `ours` and (wrongly) listing `foreign`.
fn seed_state(project: &Project, resources: &[(&str, &str)]) {
    let list: Vec<Value> = resources
        .iter()
        .map(|(id, action)| {
            json!({
                "id": id, "kind": "reservation", "cloud": "aws", "region": "us-east-1",
                "zone": "us-east-1a", "instance_type": "p5.48xlarge", "instances": 2,
                "start": "2027-02-01T00:00:00Z", "cost": 1200.0, "irreversible": false,
                "plan": "sha256:seed", "action": action, "pool": "h100-east",
                "created_at": "2027-02-01T00:00:00Z", "status": "active"
            })
        })
        .collect();
    let state = json!({
        "version": 1,
        "lineage": "6f1c2a9e-3b7d-4c59-9a0e-2d8f5b1c7e44",
        "serial": 1,
        "resources": list,
    });
    std::fs::create_dir_all(project.path(".gpucap")).unwrap();
    std::fs::write(
        project.path(".gpucap/state.json"),
        serde_json::to_vec_pretty(&state).unwrap(),
    )
    .unwrap();
}

/// The peer's view of a reservation's state (`active`, `cancelled`, …), by describing it.
fn peer_state(peer: &Ec2Peer, id: &str) -> String {
    let (status, body) = peer.ec2(&[
        ("Action", "DescribeCapacityReservations"),
        ("CapacityReservationId.1", id),
    ]);
    assert_eq!(status, 200, "{body}");
    let start = body.find("<state>").expect("a state") + 7;
    let end = body[start..].find('<').unwrap() + start;
    body[start..end].to_string()
}

fn setup() -> (Project, Ec2Peer, String, String) {
    let project = Project::new();
    let peer = Ec2Peer::start(&json!({ "offerings": [] }));
    peer.set_clock(Some(AFTER));
    let ours = reservation(
        &peer,
        &[("managed-by", "gpucap"), ("gpucap:action", "reserve-a")],
    );
    let foreign = reservation(&peer, &[("team", "infra")]);
    seed_state(&project, &[(&ours, "reserve-a"), (&foreign, "reserve-b")]);
    (project, peer, ours, foreign)
}

#[test]
fn an_unneeded_reservation_is_cancelled_after_two_unused_looks_and_a_foreign_one_never() {
    let (project, peer, ours, foreign) = setup();

    // First look: unused, no campaign needs it: only marked.
    let first = project.release(&peer, AFTER, &["--auto-approve"]);
    let out = text(&first.stdout);
    assert!(first.status.success(), "{out}\n{}", text(&first.stderr));
    assert!(
        out.contains("Kept (1)") && out.contains("unused since"),
        "{out}"
    );
    assert!(out.contains("Left alone (1)"), "{out}");
    assert_eq!(peer_state(&peer, &ours), "active");
    assert!(project.state()["resources"][0]["idle_since"].is_string());

    // Someone starts an instance in it: in use, kept, the idle mark cleared.
    peer.set_usage(&json!({ &ours: 1 }));
    let busy = project.release(&peer, "2027-02-10T02:00:00Z", &["--auto-approve"]);
    assert!(busy.status.success(), "{}", text(&busy.stderr));
    assert!(
        text(&busy.stdout).contains("1 of 2 instance(s) run in it"),
        "{}",
        text(&busy.stdout)
    );
    assert_eq!(peer_state(&peer, &ours), "active");
    assert!(project.state()["resources"][0].get("idle_since").is_none());

    // Unused again: marked, then an hour later (release.idle_after = 1h by default) cancelled.
    peer.set_usage(&json!({ &ours: 0 }));
    let mark = project.release(&peer, "2027-02-10T03:00:00Z", &["--auto-approve"]);
    assert!(mark.status.success(), "{}", text(&mark.stderr));
    assert_eq!(peer_state(&peer, &ours), "active");

    // A dry run at the time it would go: listed, nothing changed.
    let before = peer.calls("CancelCapacityReservation");
    let dry = project.release(&peer, "2027-02-10T04:00:00Z", &["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(
        text(&dry.stdout).contains("Would release (1)"),
        "{}",
        text(&dry.stdout)
    );
    assert_eq!(peer_state(&peer, &ours), "active");
    assert_eq!(project.status_of(&ours), "active");
    assert!(peer.calls("CancelCapacityReservation") <= before + 1);

    let cancel = project.release(&peer, "2027-02-10T04:00:00Z", &["--auto-approve"]);
    let out = text(&cancel.stdout);
    assert!(cancel.status.success(), "{out}\n{}", text(&cancel.stderr));
    assert!(out.contains("Released (1)"), "{out}");
    assert_eq!(peer_state(&peer, &ours), "cancelled");
    assert_eq!(project.status_of(&ours), "released");

    // The foreign reservation was never the subject of a call that changes it.
    assert_eq!(peer_state(&peer, &foreign), "active");
    assert_eq!(project.status_of(&foreign), "active");
    let audit = std::fs::read_to_string(project.path(".gpucap/audit.jsonl")).unwrap();
    assert!(audit.contains("ec2:CancelCapacityReservation"), "{audit}");
    assert!(!audit.contains(&foreign), "{audit}");
    assert!(!audit.contains("peer-secret-key"));

    // Nothing is left to release.
    let again = project.release(&peer, "2027-02-10T05:00:00Z", &["--auto-approve"]);
    assert!(again.status.success());
    assert!(!text(&again.stdout).contains("Released ("));
}

#[test]
fn a_freeze_policy_stops_every_release_and_ci_needs_auto_approve() {
    let (project, peer, ours, _) = setup();
    std::fs::create_dir_all(project.path("policies/freeze")).unwrap();
    std::fs::write(
        project.path("policies/freeze/freeze.rego"),
        // The example in docs/release.md, with the freeze ending after the runs below.
        "package gpucap.policies.freeze\n\nimport rego.v1\n\ndeny contains d if {\n\tinput.operation == \"release\"\n\tcount(input.actions) > 0\n\ttime.parse_rfc3339_ns(data.now) < time.parse_rfc3339_ns(\"2027-03-01T00:00:00Z\")\n\td := {\"rule\": \"freeze.release\", \"message\": \"no releases during the year-end freeze\", \"fix\": \"wait until the freeze ends\"}\n}\n",
    )
    .unwrap();
    let toml = std::fs::read_to_string(project.path("gpucap.toml")).unwrap();
    std::fs::write(
        project.path("gpucap.toml"),
        format!("{toml}\n[budget]\npolicies = [\"policies/freeze\"]\n"),
    )
    .unwrap();

    // Without a terminal and without --auto-approve: refused before anything.
    let refused = project.release(&peer, AFTER, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("--auto-approve"));

    for now in [AFTER, "2027-02-10T02:00:00Z"] {
        let run = project.release(&peer, now, &["--auto-approve"]);
        let (out, err) = (text(&run.stdout), text(&run.stderr));
        if now == AFTER {
            // The first look only marks: nothing to release yet, so nothing to gate.
            assert!(run.status.success(), "{out}\n{err}");
        } else {
            assert_eq!(run.status.code(), Some(3), "{out}\n{err}");
            assert!(
                err.contains("no releases during the year-end freeze"),
                "{err}"
            );
            assert!(out.contains("Stopped before releasing (1)"), "{out}");
        }
    }
    assert_eq!(peer_state(&peer, &ours), "active");
    assert_eq!(project.status_of(&ours), "active");
}
