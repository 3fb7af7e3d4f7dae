//! moto's server on 127.0.0.1 as an S3 peer for the state backend's tests: started on a free
//! port from the test venv (`tests/peers/requirements.txt`), with one bucket made, killed on
//! drop. moto enforces `If-None-Match`/`If-Match` on `PutObject` and `If-Match` on
//! `DeleteObject` as S3 does (see the project's measurements); it does not simulate 409
//! conflicts or throttling (the in-memory fake does).
//!
//! Nothing is skipped: when the venv or moto cannot start, this panics naming what is missing.
//!
//! Include with `#[path]` next to the venv helper as `mod python;` (`tests/support/python.rs`).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fake credentials moto accepts; real-looking enough for the SDK, useless anywhere else.
pub const ACCESS_KEY: &str = "testing";
pub const SECRET_KEY: &str = "moto-secret-key-5e2b1d";

/// A running moto server with a bucket.
pub struct MotoS3 {
    child: Child,
    port: u16,
    pub bucket: String,
}

impl Drop for MotoS3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl MotoS3 {
    /// moto on a free port, with `bucket` created.
    pub fn start(bucket: &str) -> MotoS3 {
        let server = super::python::bin_dir().join("moto_server");
        assert!(
            server.is_file(),
            "moto_server is missing from the test venv ({}); tests/peers/requirements.txt must list moto[server]",
            server.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", server.display()));
        let moto = MotoS3 {
            child,
            port,
            bucket: bucket.to_string(),
        };
        // Ready once it answers HTTP: a listening socket alone is not enough, as the server may
        // still reset the first connections while it starts. moto's server accepts unsigned
        // requests: a plain PUT makes the bucket.
        let deadline = Instant::now() + Duration::from_secs(60);
        let (status, body) = loop {
            match moto.try_http("PUT", &format!("/{bucket}"), "") {
                Ok(answer) => break answer,
                Err(e) => assert!(
                    Instant::now() < deadline,
                    "moto_server did not answer on 127.0.0.1:{port} within 60 s: {e}"
                ),
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(status, 200, "creating bucket {bucket} in moto: {body}");
        moto
    }

    /// The endpoint to give the SDK (path-style).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every key in the bucket under `prefix` (moto's ListObjectsV2, unsigned; reading an
    /// object needs a signed request, i.e. an S3 client).
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        let (status, body) = self.http(
            "GET",
            &format!("/{}?list-type=2&prefix={prefix}", self.bucket),
            "",
        );
        assert_eq!(status, 200, "listing {prefix}: {body}");
        body.split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(str::to_string)
            .collect()
    }

    fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        self.try_http(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path} to moto: {e}"))
    }

    fn try_http(&self, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        write!(
            s,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok((status, body.to_string()))
    }
}
