//! Test support: a fault-injecting HTTP/1.1 proxy in front of the real Redmine, in threads of
//! the test process, forwarding to 127.0.0.1 only. Each request gets a number; whether it
//! fails, and how, is a pure function of that number and the seed (splitmix64), so a run's
//! faults are reproducible. It counts what it forwarded (requests per run for the bench).
//!
//! Faults (a fraction `rate` of the requests, split as below):
//! - `500`: answered 500 at once, never forwarded (a busy DB, a failing proxy);
//! - `500-after`: forwarded, applied by Redmine, its answer replaced by a 500;
//! - `409`: for a write (PUT, POST), answered 409 Conflict without forwarding; for a read, `500`;
//! - `drop-after`: forwarded and applied, then the connection is closed without an answer;
//! - `stall`: held for `stall` (longer than the client's timeout), then closed, never forwarded.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to inject.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// The fraction of requests that fail (0 forwards everything).
    pub rate: f64,
    /// How long a stalled request is held before its connection is closed.
    pub stall: Duration,
    /// The seed of the fault sequence.
    pub seed: u64,
}

impl Faults {
    /// No faults: a counting proxy.
    pub fn none() -> Faults {
        Faults {
            rate: 0.0,
            stall: Duration::ZERO,
            seed: 0,
        }
    }
}

/// The kinds, with their share of the faults.
const KINDS: [(&str, f64); 5] = [
    ("500", 0.30),
    ("500-after", 0.20),
    ("409", 0.20),
    ("drop-after", 0.20),
    ("stall", 0.10),
];

/// A running proxy; it stops accepting when dropped.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    port: u16,
}

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    counts: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    fn count(&self, what: String) {
        *self.counts.lock().unwrap().entry(what).or_default() += 1;
    }
}

impl Proxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`, loopback only).
    pub fn start(upstream: &str, faults: Faults) -> Proxy {
        let target = upstream
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("not an http URL: {upstream}"))
            .trim_end_matches('/')
            .to_string();
        assert!(
            target.starts_with("127.0.0.1:"),
            "the proxy forwards to 127.0.0.1 only, not {target}"
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (stats.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (s, target) = (s.clone(), target.clone());
                std::thread::spawn(move || serve(conn, &target, &s, faults));
            }
        });
        Proxy {
            url: format!("http://127.0.0.1:{port}"),
            stats,
            stop,
            port,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// Counts by `METHOD kind` (`GET list`, `PUT issue`, ...) and by `fault <kind>`.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.stats.counts.lock().unwrap().clone()
    }

    /// The faults injected, by kind.
    pub fn faults(&self) -> BTreeMap<String, u64> {
        self.counts()
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("fault ")?.to_string(), v)))
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The fault for request number `n`, if any.
fn fault(faults: Faults, n: u64) -> Option<&'static str> {
    if faults.rate <= 0.0 {
        return None;
    }
    let mut z = faults
        .seed
        .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let u = (z >> 11) as f64 / (1u64 << 53) as f64;
    if u >= faults.rate {
        return None;
    }
    let mut at = u / faults.rate;
    for (kind, share) in KINDS {
        if at < share {
            return Some(kind);
        }
        at -= share;
    }
    Some(KINDS[0].0)
}

/// One request read from a client: its head (request line and headers) and body.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0usize);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

/// What a request is, for the counts.
fn kind(method: &str, path: &str) -> String {
    let p = path.split('?').next().unwrap_or("");
    let what = if p == "/issues.json" || p.ends_with("/issues.json") {
        "list"
    } else if p.starts_with("/issues/") {
        "issue"
    } else if p.starts_with("/uploads") {
        "upload"
    } else {
        p.trim_start_matches('/')
    };
    format!("{method} {what}")
}

fn serve(conn: TcpStream, target: &str, stats: &Stats, faults: Faults) {
    let mut out = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    while let Some(req) = read_request(&mut r) {
        let n = stats.requests.fetch_add(1, Ordering::SeqCst);
        stats.count(kind(&req.method, &req.path));
        let write = req.method != "GET";
        let fault = fault(faults, n).map(|f| if f == "409" && !write { "500" } else { f });
        if let Some(f) = fault {
            stats.count(format!("fault {f}"));
        }
        let answer = match fault {
            Some("500") => status(500, "Internal Server Error", "{\"errors\":[\"injected\"]}"),
            Some("409") => status(409, "Conflict", "{\"errors\":[\"injected conflict\"]}"),
            Some("stall") => {
                std::thread::sleep(faults.stall);
                let _ = out.shutdown(Shutdown::Both);
                return;
            }
            _ => {
                let Some(upstream) = forward(target, &req) else {
                    let _ = out.shutdown(Shutdown::Both);
                    return;
                };
                match fault {
                    Some("500-after") => {
                        status(500, "Internal Server Error", "{\"errors\":[\"injected\"]}")
                    }
                    Some("drop-after") => {
                        let _ = out.shutdown(Shutdown::Both);
                        return;
                    }
                    _ => upstream,
                }
            }
        };
        if out.write_all(&answer).is_err() {
            return;
        }
    }
}

fn status(code: u16, reason: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends `req` to the upstream on a connection of its own and returns the answer, framed
/// for a keep-alive client (Content-Length, no chunking).
fn forward(target: &str, req: &Request) -> Option<Vec<u8>> {
    let mut up = TcpStream::connect(target).ok()?;
    up.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
    let mut head = format!("{} {} HTTP/1.1\r\n", req.method, req.path);
    for (k, v) in &req.headers {
        if !k.eq_ignore_ascii_case("connection") && !k.eq_ignore_ascii_case("keep-alive") {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    up.write_all(head.as_bytes()).ok()?;
    up.write_all(&req.body).ok()?;
    let mut raw = Vec::new();
    up.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?.to_string();
    let mut out = format!("{status_line}\r\n");
    let mut chunked = false;
    for l in lines {
        let (k, _) = l.split_once(':')?;
        let k = k.trim();
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
            continue;
        }
        if k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("connection") {
            continue;
        }
        out.push_str(l);
        out.push_str("\r\n");
    }
    if chunked {
        body = dechunk(&body);
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    Some(bytes)
}

fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = s.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&s[..eol]);
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        let rest = &s[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        s = rest.get(n + 2..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fault_sequence_is_a_function_of_the_seed() {
        let f = super::Faults {
            rate: 0.1,
            stall: std::time::Duration::ZERO,
            seed: 26,
        };
        let a: Vec<_> = (0..1000).map(|n| super::fault(f, n)).collect();
        let b: Vec<_> = (0..1000).map(|n| super::fault(f, n)).collect();
        assert_eq!(a, b);
        let failed = a.iter().filter(|x| x.is_some()).count();
        assert!((60..140).contains(&failed), "{failed}");
    }
}
