//! Starts `tests/peers/azure_arm_peer.py`, the local Azure Resource Manager peer (capacity
//! reservation groups and reservations, long-running operations, Entra ID tokens, fault
//! injection, a record of everything created), for tests of the Azure act provider and of
//! `gpucap apply`/`release` on Azure.
//!
//! Nothing is skipped: when `python3` is missing, starting the peer panics and says so.
//!
//! Include with `#[path]`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const SCRIPT: &str = "tests/peers/azure_arm_peer.py";

/// The subscription and resource group the tests use.
pub const SUBSCRIPTION: &str = "00000000-0000-4000-8000-000000000001";
pub const RESOURCE_GROUP: &str = "gpucap-test";

/// A running peer, killed on drop.
pub struct AzurePeer {
    child: Child,
    // Held open: the peer exits when this pipe closes, even if Drop never runs.
    _stdin: Option<ChildStdin>,
    port: u16,
}

impl Drop for AzurePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace_root() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .find(|d| d.join(SCRIPT).is_file())
        .unwrap_or_else(|| panic!("{SCRIPT} not found above {}", start.display()))
        .to_path_buf()
}

impl AzurePeer {
    /// The peer under the system `python3`, its operations finishing after `lro_polls` polls.
    pub fn start(config: &Value) -> AzurePeer {
        let script = workspace_root().join(SCRIPT);
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--port", "0", "--exit-on-stdin-eof"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `python3` for the Azure ARM peer ({e}); the Azure act tests need Python 3 on PATH")
            });
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("peer stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut peer = AzurePeer {
            child,
            _stdin: stdin,
            port: 0,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the Azure ARM peer printed no port within 30 s"));
        peer.port = line.trim().parse().unwrap_or_else(|_| {
            let status = peer.child.try_wait().ok().flatten();
            panic!("the Azure ARM peer did not start (printed {line:?}, exit status {status:?})")
        });
        peer.post("/_peer/config", config);
        peer
    }

    /// The endpoint (`GPUCAP_AZURE_ENDPOINT_URL`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Replaces the fault rules: `{"seed": N, "rules": [...]}` (see the script's header).
    pub fn set_faults(&self, faults: &Value) {
        self.post("/_peer/faults", faults);
    }

    /// Sets how many VMs are associated with each reservation, by name.
    pub fn set_usage(&self, usage: &Value) {
        self.post("/_peer/usage", usage);
    }

    /// Creates a Succeeded reservation as another client would; returns its ARM id.
    pub fn seed(&self, doc: &Value) -> String {
        let mut doc = doc.clone();
        doc["subscription"] = SUBSCRIPTION.into();
        doc["resource_group"] = RESOURCE_GROUP.into();
        let (status, body) = self.http("POST", "/_peer/seed", &doc.to_string());
        assert_eq!(status, 200, "POST /_peer/seed: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["id"].as_str().unwrap().to_string()
    }

    /// Everything the peer saw and created.
    pub fn record(&self) -> Value {
        let (status, body) = self.http("GET", "/_peer/record", "");
        assert_eq!(status, 200, "GET /_peer/record: {body}");
        serde_json::from_str(&body).expect("the peer's record is JSON")
    }

    /// How often the peer received `op` (`PUT reservation`, `GET operation`, …).
    pub fn calls(&self, op: &str) -> u64 {
        self.record()["calls"][op].as_u64().unwrap_or(0)
    }

    /// How often a reservation came into existence, per name.
    pub fn created(&self) -> std::collections::BTreeMap<String, u64> {
        self.record()["created"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The reservations that exist now, as ARM shows them.
    pub fn reservations(&self) -> Vec<Value> {
        self.record()["reservations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn post(&self, path: &str, doc: &Value) {
        let (status, body) = self.http("POST", path, &doc.to_string());
        assert_eq!(status, 200, "POST {path}: {body}");
    }

    fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the peer");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        write!(
            s,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("write to the peer");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read the peer's answer");
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, body.to_string())
    }
}
