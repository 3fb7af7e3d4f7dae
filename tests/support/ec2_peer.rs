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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const SCRIPT: &str = "tests/peers/ec2_capacity_peer.py";

/// A running peer (and moto behind it, when asked), killed on drop.
pub struct Ec2Peer {
    child: Child,
    // Held open: the peer exits when this pipe closes, even if Drop never runs.
    _stdin: Option<ChildStdin>,
    moto: Option<Child>,
    port: u16,
}

impl Drop for Ec2Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(moto) = &mut self.moto {
            let _ = moto.kill();
            let _ = moto.wait();
        }
    }
}

/// The workspace root: the nearest ancestor of the including crate that holds the peer.
fn workspace_root() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .find(|d| d.join(SCRIPT).is_file())
        .unwrap_or_else(|| panic!("{SCRIPT} not found above {}", start.display()))
        .to_path_buf()
}

impl Ec2Peer {
    /// The peer alone, under the system `python3`, selling `config`'s offerings
    /// (`{"offerings": [...]}`, see the script's header).
    pub fn start(config: &Value) -> Ec2Peer {
        Self::start_with_python("python3", config)
    }

    /// The peer alone, under the given Python 3.
    pub fn start_with_python(python: impl Into<PathBuf>, config: &Value) -> Ec2Peer {
        Self::spawn(python.into(), None, None, config)
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
        let moto = Command::new(&moto_server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", moto_server.display()));
        let mut moto = Some(moto);
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                if let Some(m) = &mut moto {
                    let _ = m.kill();
                }
                panic!("moto_server did not listen on {port} within 60 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Self::spawn(
            bin.join("python"),
            Some(format!("http://127.0.0.1:{port}")),
            moto,
            config,
        )
    }

    fn spawn(
        python: PathBuf,
        upstream: Option<String>,
        moto: Option<Child>,
        config: &Value,
    ) -> Ec2Peer {
        let script = workspace_root().join(SCRIPT);
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .args(["--port", "0", "--exit-on-stdin-eof"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(u) = &upstream {
            cmd.args(["--upstream", u]);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(mut m) = moto {
                    let _ = m.kill();
                    let _ = m.wait();
                }
                panic!(
                    "cannot run `{}` for the EC2 capacity peer ({e}); the AWS act tests need Python 3 on PATH",
                    python.display()
                )
            }
        };
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("peer stdout");
        // The first line is the port; read it on a thread so that a hung peer cannot hang us.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut peer = Ec2Peer {
            child,
            _stdin: stdin,
            moto,
            port: 0,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the EC2 capacity peer printed no port within 30 s"));
        peer.port = line.trim().parse().unwrap_or_else(|_| {
            let status = peer.child.try_wait().ok().flatten();
            panic!("the EC2 capacity peer did not start (printed {line:?}, exit status {status:?})")
        });
        peer.post("/_peer/config", config);
        peer
    }

    /// The endpoint to give the SDK (`endpoint_url`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
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
        let (status, body) = self.http("GET", "/_peer/record", JSON, "");
        assert_eq!(status, 200, "GET /_peer/record: {body}");
        serde_json::from_str(&body).expect("the peer's record is JSON")
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
        self.http(
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
        let (status, body) = self.http("POST", path, JSON, &doc.to_string());
        assert_eq!(status, 200, "POST {path}: {body}");
    }

    fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the peer");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        write!(
            s,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n{body}",
            headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}\r\n"))
                .collect::<String>(),
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

const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];

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
