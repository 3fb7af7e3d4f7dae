//! A local HTTP server on 127.0.0.1 that answers requests with canned JSON responses: the
//! replay that the live-price, quota and credential tests point the clouds' clients at.
//!
//! Include with `#[path = "support/canned_http.rs"] mod canned_http;`.

#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

/// Answers every request with `status reason` and `body`, for as long as the test runs;
/// returns the server's base URL (`http://127.0.0.1:PORT`).
pub fn always(status: u16, reason: &'static str, body: &'static str) -> String {
    let (listener, url) = bind();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { return };
            answer(socket, status, reason, body);
        }
    });
    url
}

/// Answers `responses.len()` requests, one response each in order (`reason` for all), then
/// stops listening; returns the server's base URL.
pub fn in_turn(responses: Vec<(u16, String)>, reason: &'static str) -> String {
    let (listener, url) = bind();
    std::thread::spawn(move || {
        for (status, body) in responses {
            let Ok((socket, _)) = listener.accept() else {
                return;
            };
            answer(socket, status, reason, &body);
        }
    });
    url
}

fn bind() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    (listener, url)
}

/// Reads the request's head, then writes the response and closes.
fn answer(mut socket: TcpStream, status: u16, reason: &str, body: &str) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let reply = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(reply.as_bytes());
}
