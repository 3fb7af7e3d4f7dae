//! One of the local peers in `tests/peers/` as a running process, and the plain HTTP/1.0 client
//! the tests talk to it with: started with `--port 0 --exit-on-stdin-eof`, its port read from
//! the first line it prints, killed on drop. The EC2, Azure and Compute Engine peer helpers are
//! each this plus their own control calls.
//!
//! Nothing is skipped: a peer that cannot start panics naming what is missing.
//!
//! Included by the peer helpers as `#[path = "peer_process.rs"] mod peer_process;`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// The `Content-Type` of the peers' JSON control API.
pub const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];

/// A child process killed (and reaped) when this is dropped, also while a test unwinds.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running peer.
pub struct PeerProcess {
    child: KillOnDrop,
    // Held open: the peer exits when this pipe closes, even if Drop never runs.
    _stdin: Option<ChildStdin>,
    port: u16,
}

/// `script` (relative to the workspace root) found above the including crate.
pub fn script_path(script: &str) -> PathBuf {
    let start = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR")
            .expect("CARGO_MANIFEST_DIR, which cargo sets when it runs the tests"),
    );
    start
        .ancestors()
        .map(|d| d.join(script))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{script} not found above {}", start.display()))
}

impl PeerProcess {
    /// Runs `script` under `python` with `args` and waits (at most 30 s) for its port. `name`
    /// says which peer in panics ("the EC2 capacity peer"), `users` who needs it ("the AWS act
    /// tests").
    pub fn start(
        python: &Path,
        script: &str,
        args: &[&str],
        name: &str,
        users: &str,
    ) -> PeerProcess {
        let mut child = Command::new(python)
            .arg(script_path(script))
            .args(["--port", "0", "--exit-on-stdin-eof"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{}` for {name} ({e}); {users} need Python 3 on PATH",
                    python.display()
                )
            });
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("peer stdout");
        // The first line is the port; read it on a thread so that a hung peer cannot hang us.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut peer = PeerProcess {
            child: KillOnDrop(child),
            _stdin: stdin,
            port: 0,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{name} printed no port within 30 s"));
        peer.port = line.trim().parse().unwrap_or_else(|_| {
            let status = peer.child.0.try_wait().ok().flatten();
            panic!("{name} did not start (printed {line:?}, exit status {status:?})")
        });
        peer
    }

    /// Its base URL, for an SDK's endpoint override.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET path` of the JSON control API.
    pub fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.http("GET", path, JSON, "");
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e})"))
    }

    /// `POST path` of the JSON control API, which must answer 200; returns the body.
    pub fn post_json(&self, path: &str, doc: &Value) -> String {
        let (status, body) = self.http("POST", path, JSON, &doc.to_string());
        assert_eq!(status, 200, "POST {path}: {body}");
        body
    }

    /// One request; returns the status and the body.
    pub fn http(
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
