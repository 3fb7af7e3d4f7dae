//! A local HTTP/1.1 server that replays scripted responses, in the clouds' exact wire formats,
//! to the real SDK clients, and records what they asked. A route matches when its needle
//! occurs in the request (request line, headers or body: an `X-Amz-Target`, an EC2
//! `Action=…`, a REST path); its replies are served in order and the last one repeats, so a
//! route can throttle twice and then succeed. Unmatched requests get a 404.
//!
//! Included by the AWS and GCP provider tests with `#[path]`.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<String>) -> Self {
        Reply {
            status,
            content_type,
            body: body.into(),
        }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request line and headers.
    pub head: String,
    pub body: String,
}

struct Route {
    needle: String,
    replies: VecDeque<Reply>,
}

#[derive(Default)]
struct State {
    routes: Vec<Route>,
    requests: Vec<Recorded>,
}

pub struct Replay {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Replay {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the replay server");
        let addr = listener.local_addr().expect("replay address");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Replay { addr, state, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a route; earlier routes win when several match.
    pub fn on(&self, needle: &str, replies: Vec<Reply>) {
        assert!(!replies.is_empty(), "a route needs at least one reply");
        self.state.lock().unwrap().routes.push(Route {
            needle: needle.to_string(),
            replies: replies.into(),
        });
    }

    /// Adds a route that wins over every route added so far.
    pub fn on_first(&self, needle: &str, replies: Vec<Reply>) {
        assert!(!replies.is_empty(), "a route needs at least one reply");
        self.state.lock().unwrap().routes.insert(
            0,
            Route {
                needle: needle.to_string(),
                replies: replies.into(),
            },
        );
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Requests whose head or body contains `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.head.contains(needle) || r.body.contains(needle))
            .count()
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    loop {
        let Some(request) = read_request(&mut stream).await else {
            return;
        };
        let reply = {
            let mut s = state.lock().unwrap();
            s.requests.push(request.clone());
            let route = s
                .routes
                .iter_mut()
                .find(|r| request.head.contains(&r.needle) || request.body.contains(&r.needle));
            match route {
                Some(r) if r.replies.len() > 1 => r.replies.pop_front(),
                Some(r) => r.replies.front().cloned(),
                None => None,
            }
            .unwrap_or_else(|| {
                Reply::new(
                    404,
                    "text/plain",
                    format!("no route for {}", request.head.lines().next().unwrap_or("")),
                )
            })
        };
        let head = format!(
            "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\nx-amzn-requestid: replay\r\n\r\n",
            reply.status,
            reply.content_type,
            reply.body.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(reply.body.as_bytes()).await.is_err()
        {
            return;
        }
    }
}

/// Reads one request (headers and a `content-length` body); `None` at end of stream.
async fn read_request(stream: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[header_end..header_end + length]).into_owned();
    Some(Recorded { head, body })
}
