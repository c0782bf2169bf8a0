//! The egress proxy's costs (`network = "allowlist"`): bytes through a CONNECT tunnel
//! against the same bytes sent directly (time per MiB), one tunnelled connection against a
//! direct one (time per connection), and the resident memory the proxy adds to the process.
//! Everything on 127.0.0.1. Figures only, no assertions.
//!
//! `cargo bench --bench egress` (plain `std::time`, like `bench/gate.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use harness::tools::egress::{policy, proxy};

const MIB: usize = 1024 * 1024;
const SENT_MIB: usize = 128;
const CONNECTIONS: usize = 200;

/// A server that reads everything sent on each connection and answers with one byte.
fn sink() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                }
                let _ = s.write_all(b"k");
            });
        }
    });
    addr
}

/// A stream to the sink: directly, or through `proxy` (CONNECT answered).
fn open(sink: SocketAddr, proxy: Option<SocketAddr>) -> TcpStream {
    let Some(proxy) = proxy else {
        return TcpStream::connect(sink).unwrap();
    };
    let mut s = TcpStream::connect(proxy).unwrap();
    write!(s, "CONNECT bench.test:{} HTTP/1.1\r\n\r\n", sink.port()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    s
}

/// Sends `mib` MiB and waits for the sink's answer.
fn send(mut s: TcpStream, mib: usize) {
    let chunk = vec![7u8; 64 * 1024];
    for _ in 0..mib * (MIB / chunk.len()) {
        s.write_all(&chunk).unwrap();
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut k = [0u8; 1];
    s.read_exact(&mut k).unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let sink = sink();
    let before = rss_kib();
    let proxy = proxy::Proxy::start(proxy::Settings {
        patterns: vec![policy::parse_pattern("bench.test").unwrap()],
        deny_private: false,
        max_bytes: u64::MAX,
        hosts: vec![("bench.test".into(), "127.0.0.1".parse().unwrap())],
        upstream: None,
    })
    .unwrap();
    let via = Some(proxy.addr());

    let timed = |p: Option<SocketAddr>| {
        let start = Instant::now();
        send(open(sink, p), SENT_MIB);
        start.elapsed()
    };
    let direct = median((0..3).map(|_| timed(None)).collect());
    let tunnelled = median((0..3).map(|_| timed(via)).collect());
    let per_mib = |d: Duration| d.as_secs_f64() * 1e3 / SENT_MIB as f64;
    println!(
        "egress_per_mib\t{:.3} ms\t(tunnelled {:.3} ms/MiB, direct {:.3} ms/MiB, {SENT_MIB} MiB)",
        per_mib(tunnelled) - per_mib(direct),
        per_mib(tunnelled),
        per_mib(direct)
    );

    let connect = |p: Option<SocketAddr>| {
        median(
            (0..CONNECTIONS)
                .map(|_| {
                    let start = Instant::now();
                    send(open(sink, p), 0);
                    start.elapsed()
                })
                .collect(),
        )
    };
    let direct = connect(None);
    let tunnelled = connect(via);
    println!(
        "egress_per_connection\t{:.1} us\t(tunnelled {:.1} us, direct {:.1} us, median of {CONNECTIONS})",
        (tunnelled.as_secs_f64() - direct.as_secs_f64()) * 1e6,
        tunnelled.as_secs_f64() * 1e6,
        direct.as_secs_f64() * 1e6
    );
    println!(
        "egress_rss\t{} KiB\t(the process's VmRSS {} KiB after the runs; {} KiB before the proxy)",
        rss_kib().saturating_sub(before),
        rss_kib(),
        before
    );
    drop(proxy);
}
