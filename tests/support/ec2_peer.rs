//! Starts `tests/peers/ec2_capacity_peer.py`, the local EC2 capacity peer (capacity blocks,
//! capacity reservations, fault injection, a record of everything bought), for tests that
//! drive the real AWS SDK against it. With [`Ec2Peer::with_moto`] it also starts moto's
//! server and forwards every other action (launch templates, Auto Scaling) there, so one
//! endpoint serves both.
//!
//! Nothing is skipped: when `python3` (or moto's venv) is missing, starting the peer panics
//! and names what is missing.
//!
//! Include with `#[path]`; [`Ec2Peer::with_moto`] needs the venv helper included next to it
//! as `mod python;` (`tests/support/python.rs`).

#![allow(dead_code)]

#[path = "peer_process.rs"]
mod peer_process;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use peer_process::{KillOnDrop, PeerProcess};
use serde_json::Value;

const SCRIPT: &str = "tests/peers/ec2_capacity_peer.py";

/// A running peer (and moto behind it, when asked), killed on drop (the peer first).
pub struct Ec2Peer {
    peer: PeerProcess,
    moto: Option<KillOnDrop>,
}

impl Ec2Peer {
    /// The peer alone, under the system `python3`, selling `config`'s offerings
    /// (`{"offerings": [...]}`, see the script's header).
    pub fn start(config: &Value) -> Ec2Peer {
        Self::start_with_python("python3", config)
    }

    /// The peer alone, under the given Python 3.
    pub fn start_with_python(python: impl Into<PathBuf>, config: &Value) -> Ec2Peer {
        Self::spawn(&python.into(), None, None, config)
    }

    /// moto's server behind the peer (from the test venv, built on first use), so that the
    /// one endpoint also serves launch templates and Auto Scaling.
    pub fn with_moto(config: &Value) -> Ec2Peer {
        let bin = super::python::bin_dir();
        let moto_server = bin.join("moto_server");
        assert!(
            moto_server.is_file(),
            "moto_server is missing from the test venv ({}); tests/peers/requirements.txt must list moto[server]",
            moto_server.display()
        );
        let port = free_port();
        let moto = KillOnDrop(
            Command::new(&moto_server)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", moto_server.display())),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            // moto is killed as the panic unwinds.
            assert!(
                Instant::now() <= deadline,
                "moto_server did not listen on {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self::spawn(
            &bin.join("python"),
            Some(format!("http://127.0.0.1:{port}")),
            Some(moto),
            config,
        )
    }

    fn spawn(
        python: &Path,
        upstream: Option<String>,
        moto: Option<KillOnDrop>,
        config: &Value,
    ) -> Ec2Peer {
        let upstream: Vec<&str> = match &upstream {
            Some(u) => vec!["--upstream", u],
            None => Vec::new(),
        };
        let peer = Ec2Peer {
            peer: PeerProcess::start(
                python,
                SCRIPT,
                &upstream,
                "the EC2 capacity peer",
                "the AWS act tests",
            ),
            moto,
        };
        peer.post("/_peer/config", config);
        peer
    }

    /// The endpoint to give the SDK (`endpoint_url`).
    pub fn url(&self) -> String {
        self.peer.url()
    }

    /// Replaces the fault rules: `{"seed": N, "rules": [...]}` (see the script's header).
    pub fn set_faults(&self, faults: &Value) {
        self.post("/_peer/faults", faults);
    }

    /// Replaces the offerings and settings.
    pub fn configure(&self, config: &Value) {
        self.post("/_peer/config", config);
    }

    /// Everything the peer saw and sold.
    pub fn record(&self) -> Value {
        self.peer.get_json("/_peer/record")
    }

    /// How often the peer received `action`.
    pub fn calls(&self, action: &str) -> u64 {
        self.record()["actions"][action].as_u64().unwrap_or(0)
    }

    /// Moves the peer's clock to `now` (RFC 3339), or back to the real time.
    pub fn set_clock(&self, now: Option<&str>) {
        self.post("/_peer/clock", &serde_json::json!({ "now": now }));
    }

    /// Sets how many instances run in each reservation: `{"cr-…": N}`.
    pub fn set_usage(&self, usage: &Value) {
        self.post("/_peer/usage", usage);
    }

    /// One EC2 Query call (form-encoded, `Action=…`), as a client other than gpucap makes it;
    /// returns the status and the XML.
    pub fn ec2(&self, params: &[(&str, &str)]) -> (u16, String) {
        self.query("ec2", "2016-11-15", params)
    }

    /// One Auto Scaling Query call (answered by moto behind the peer).
    pub fn autoscaling(&self, params: &[(&str, &str)]) -> (u16, String) {
        self.query("autoscaling", "2011-01-01", params)
    }

    /// A Query-protocol call to `service`. The Authorization header is unsigned: it only names
    /// the service, which is how moto's server routes a request.
    fn query(&self, service: &str, version: &str, params: &[(&str, &str)]) -> (u16, String) {
        let form: Vec<String> = params
            .iter()
            .chain(&[("Version", version)])
            .map(|(k, v)| format!("{k}={}", form_escape(v)))
            .collect();
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        );
        self.peer.http(
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Authorization", &auth),
            ],
            &form.join("&"),
        )
    }

    fn post(&self, path: &str, doc: &Value) {
        self.peer.post_json(path, doc);
    }
}

/// `application/x-www-form-urlencoded` escaping of one value.
fn form_escape(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}
