//! Test support: a tiny HTTP/1.1 peer for fault injection (a slow Redmine, a slow or endless
//! LLM endpoint). One request per connection, `Connection: close`; every request is logged as
//! `METHOD PATH`, and the bytes an endless body got out before the client hung up are counted.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the stub sends back.
pub enum Body {
    /// This text, with its Content-Length.
    Full(String),
    /// `head`, then `fill` bytes until the client hangs up; `claimed` is the Content-Length
    /// announced (none: the body is close-delimited).
    Endless {
        head: String,
        fill: u8,
        claimed: Option<u64>,
    },
}

/// One reply: status, content type, body, and how long to wait before it.
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
    pub delay: Duration,
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(body: &str) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json",
            body: Body::Full(body.to_string()),
            delay: Duration::ZERO,
        }
    }

    /// The same reply, after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&str, &str) -> Reply + Send + Sync;

/// A running stub.
pub struct Stub {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    log: Arc<Mutex<Vec<String>>>,
    sent: Arc<AtomicU64>,
}

impl Stub {
    /// Starts a stub answering each request with `handler(method, path)`.
    pub fn start(handler: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicU64::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (l, s) = (log.clone(), sent.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (h, l, s) = (handler.clone(), l.clone(), s.clone());
                std::thread::spawn(move || serve(conn, &*h, &l, &s));
            }
        });
        Stub { url, log, sent }
    }

    /// Every request so far, as `METHOD PATH`.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Bytes of endless bodies written so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Waits until a request whose line contains `needle` arrived.
    pub fn wait_for(&self, needle: &str, bound: Duration) {
        let start = Instant::now();
        while !self.requests().iter().any(|r| r.contains(needle)) {
            assert!(
                start.elapsed() < bound,
                "no request with {needle:?} within {bound:?}: {:?}",
                self.requests()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn serve(conn: TcpStream, handler: &Handler, log: &Mutex<Vec<String>>, sent: &AtomicU64) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    log.lock().unwrap().push(format!("{method} {path}"));
    let reply = handler(&method, &path);
    std::thread::sleep(reply.delay);
    let mut out = conn;
    let reason = if reply.status == 200 { "OK" } else { "Error" };
    let head = |len: Option<u64>| {
        let len = len
            .map(|n| format!("Content-Length: {n}\r\n"))
            .unwrap_or_default();
        format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\n{len}Connection: close\r\n\r\n",
            reply.status, reply.content_type
        )
    };
    match reply.body {
        Body::Full(text) => {
            let _ = out.write_all(head(Some(text.len() as u64)).as_bytes());
            let _ = out.write_all(text.as_bytes());
        }
        Body::Endless {
            head: start,
            fill,
            claimed,
        } => {
            let _ = out.write_all(head(claimed).as_bytes());
            let _ = out.write_all(start.as_bytes());
            let chunk = vec![fill; 64 * 1024];
            while out.write_all(&chunk).is_ok() {
                sent.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
    }
}
