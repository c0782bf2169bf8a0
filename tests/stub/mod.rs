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
    /// These bytes as the whole response, status line and headers included (a redirect, a
    /// body that is not UTF-8); `status` and `content_type` are not used.
    Raw(Vec<u8>),
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

    /// A redirect (`status` 3xx) to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        let raw = format!(
            "HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        Reply::raw(raw.into_bytes())
    }

    /// These bytes as the whole response.
    pub fn raw(bytes: Vec<u8>) -> Reply {
        Reply {
            status: 0,
            content_type: "",
            body: Body::Raw(bytes),
            delay: Duration::ZERO,
        }
    }

    /// The same reply, after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&str, &str, &str) -> Reply + Send + Sync;

/// A running stub.
pub struct Stub {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    log: Arc<Mutex<Vec<String>>>,
    sent: Arc<AtomicU64>,
}

impl Stub {
    /// Starts a stub answering each request with `handler(method, path, body)`.
    pub fn start(handler: impl Fn(&str, &str, &str) -> Reply + Send + Sync + 'static) -> Stub {
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
    let reply = handler(&method, &path, &String::from_utf8_lossy(&body));
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
        Body::Raw(bytes) => {
            let _ = out.write_all(&bytes);
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

/// A Redmine with one open issue, #7, enough for intake and the claim: the current user,
/// the scope list, the statuses, the issue with its journals, and `PUT` of notes, status and
/// assignee (applied and kept as journals) and custom fields (kept, shown on the issue).
/// `notes()` reads the journals back, `puts()` every PUT body.
pub struct MiniRedmine {
    pub stub: Stub,
    journals: Arc<Mutex<Vec<String>>>,
    puts: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl MiniRedmine {
    /// Starts it; every `PUT` is answered after `put_delay`.
    pub fn start(put_delay: Duration) -> MiniRedmine {
        MiniRedmine::start_with(put_delay, None)
    }

    /// Like [`start`](Self::start); with `session_download`, the issue carries a session
    /// attachment of vertical `test` whose download answers after that long.
    pub fn start_with(put_delay: Duration, session_download: Option<Duration>) -> MiniRedmine {
        let journals = Arc::new(Mutex::new(Vec::<String>::new()));
        let state = Arc::new(Mutex::new((1u64, None::<u64>)));
        // Custom fields as Redmine keeps them (id -> value), set by PUT, shown on the issue.
        let fields = Arc::new(Mutex::new(std::collections::BTreeMap::<
            u64,
            serde_json::Value,
        >::new()));
        let puts = Arc::new(Mutex::new(Vec::new()));
        let (f, p) = (fields.clone(), puts.clone());
        let j = journals.clone();
        let stub = Stub::start(move |method, path, body| {
            const UPDATED: &str = "2026-01-01T00:00:00Z";
            let issue = |full: bool| {
                let (status, assignee) = *state.lock().unwrap();
                let journals: Vec<serde_json::Value> = j
                    .lock()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        serde_json::json!({"id": i + 1, "notes": n, "created_on": "2026-01-01T00:00:00Z"})
                    })
                    .collect();
                let mut v = serde_json::json!({
                    "id": 7, "subject": "Seven", "description": "Do seven.",
                    "status": {"id": status, "name": if status == 2 { "In Progress" } else { "New" }},
                    "updated_on": UPDATED,
                });
                if let Some(a) = assignee {
                    v["assigned_to"] = serde_json::json!({"id": a, "name": "bot"});
                }
                v["custom_fields"] = f
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(id, value)| serde_json::json!({"id": id, "name": format!("cf{id}"), "value": value}))
                    .collect();
                if full {
                    v["journals"] = journals.into();
                    if session_download.is_some() {
                        v["attachments"] = serde_json::json!([{
                            "id": 5, "filename": "session-test-7-run1.jsonl.gz", "filesize": 100,
                            "content_url": "/attachments/download/5/session-test-7-run1.jsonl.gz",
                        }]);
                    }
                }
                v
            };
            match (method, path.split('?').next().unwrap_or_default()) {
                ("GET", "/users/current.json") => Reply::json(r#"{"user":{"id":1,"login":"bot"}}"#),
                ("GET", "/issue_statuses.json") => Reply::json(
                    r#"{"issue_statuses":[{"id":1,"name":"New"},{"id":2,"name":"In Progress"}]}"#,
                ),
                ("GET", "/issues.json") => Reply::json(
                    &serde_json::json!({"issues": [issue(false)], "total_count": 1}).to_string(),
                ),
                ("GET", "/issues/7.json") => {
                    Reply::json(&serde_json::json!({"issue": issue(true)}).to_string())
                }
                ("PUT", "/issues/7.json") => {
                    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
                    p.lock().unwrap().push(v.clone());
                    let fields = &v["issue"];
                    for cf in fields["custom_fields"].as_array().into_iter().flatten() {
                        if let Some(id) = cf["id"].as_u64() {
                            f.lock().unwrap().insert(id, cf["value"].clone());
                        }
                    }
                    if let Some(n) = fields["notes"].as_str() {
                        j.lock().unwrap().push(n.to_string());
                    }
                    let mut s = state.lock().unwrap();
                    if let Some(id) = fields["status_id"].as_u64() {
                        s.0 = id;
                    }
                    if let Some(id) = fields["assigned_to_id"].as_u64() {
                        s.1 = Some(id);
                    }
                    Reply {
                        status: 204,
                        content_type: "application/json",
                        body: Body::Full(String::new()),
                        delay: put_delay,
                    }
                }
                ("GET", p) if p.starts_with("/attachments/download/") => Reply {
                    status: 200,
                    content_type: "application/octet-stream",
                    body: Body::Full("not reached".into()),
                    delay: session_download.unwrap_or_default(),
                },
                _ => Reply {
                    status: 404,
                    content_type: "application/json",
                    body: Body::Full("{}".into()),
                    delay: Duration::ZERO,
                },
            }
        });
        MiniRedmine {
            stub,
            journals,
            puts,
        }
    }

    /// The bodies of every `PUT /issues/7.json`, in order.
    pub fn puts(&self) -> Vec<serde_json::Value> {
        self.puts.lock().unwrap().clone()
    }

    /// The notes written so far, in order.
    pub fn notes(&self) -> Vec<String> {
        self.journals.lock().unwrap().clone()
    }
}
