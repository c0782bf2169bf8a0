//! Tools adapter (egress): the run's HTTP proxy for `network = "allowlist"`, on its own
//! thread and tokio runtime. In: the [`Settings`] of `[tools.bash.egress]`; CONNECT and
//! absolute-form requests from the run's commands on 127.0.0.1. Out: tunnels to the listed
//! hosts, refusals (403 to the client, a [`Refusal`] in the [`Log`]). I/O: TCP, DNS.
//!
//! The proxy resolves each name itself (the hosts file of the settings first), refuses a
//! name that resolves only to private addresses under `deny_private`, splices TLS bytes
//! without reading them and never adds a credential. With an upstream (the site's own
//! proxy) it asks that proxy for a tunnel (`CONNECT host:port`) instead of connecting
//! itself; a name that resolves here is still held to `deny_private`, one that does not
//! is left to the upstream to resolve. Every byte through it, both ways,
//! counts against `max_bytes`: when the budget is spent every open connection is cut and
//! every new one refused.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::policy::{self, Pattern};

/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its head, and an upstream to accept.
const HEAD_WAIT: Duration = Duration::from_secs(30);
const CONNECT_WAIT: Duration = Duration::from_secs(15);

/// What the proxy lets through.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The allow list, presets expanded.
    pub patterns: Vec<Pattern>,
    /// Refuse loopback, private, link-local and the like after resolution.
    pub deny_private: bool,
    /// Bytes through the proxy per run, both ways together.
    pub max_bytes: u64,
    /// Names resolved from the hosts file instead of DNS.
    pub hosts: Vec<(String, IpAddr)>,
    /// The site's proxy to chain through (host, port).
    pub upstream: Option<(String, u16)>,
}

/// One refused request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The host asked for (as sent when it was not a name).
    pub host: String,
    /// The port asked for (0 when the request named none).
    pub port: u16,
    /// Why, as the model reads it after `host:port`.
    pub reason: String,
}

impl Refusal {
    /// The line the model reads in the tool result.
    pub fn line(&self) -> String {
        format!(
            "[harness] network: {}:{} {}",
            self.host, self.port, self.reason
        )
    }
}

/// Per `host:port` reached: connections and bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reached {
    /// Connections made.
    pub connections: u64,
    /// Bytes both ways.
    pub bytes: u64,
}

/// What the proxy did in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Log {
    /// `host:port` -> what went through.
    pub allowed: BTreeMap<String, Reached>,
    /// Every refusal, in order.
    pub refused: Vec<Refusal>,
    /// Bytes through the proxy, both ways.
    pub bytes: u64,
    /// The budget.
    pub max_bytes: u64,
    /// Whether the budget was spent (connections cut).
    pub cut: bool,
}

struct Shared {
    settings: Settings,
    log: Mutex<Log>,
    used: AtomicU64,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn refuse(&self, host: &str, port: u16, reason: String) {
        self.log().refused.push(Refusal {
            host: host.to_string(),
            port,
            reason,
        });
    }

    /// Takes up to `n` bytes of the budget; returns how many may pass.
    fn take(&self, n: u64) -> u64 {
        let max = self.settings.max_bytes;
        let mut granted = 0;
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                granted = n.min(max.saturating_sub(used));
                Some(used + granted)
            });
        granted
    }

    fn spent(&self) -> bool {
        self.used.load(Ordering::SeqCst) >= self.settings.max_bytes
    }
}

/// The harness's handle on a run's proxy; dropping it stops the thread and cuts every
/// connection.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("addr", &self.addr).finish()
    }
}

impl Proxy {
    /// Listens on 127.0.0.1 on a port the kernel picks and serves on a thread of its own.
    pub fn start(settings: Settings) -> Result<Proxy> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .context("egress proxy: cannot listen on 127.0.0.1")?;
        listener
            .set_nonblocking(true)
            .context("egress proxy: cannot make its socket non-blocking")?;
        let addr = listener
            .local_addr()
            .context("egress proxy: no local address")?;
        let (cut, _) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            log: Mutex::new(Log {
                max_bytes: settings.max_bytes,
                ..Log::default()
            }),
            settings,
            used: AtomicU64::new(0),
            cut,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("egress proxy: cannot start its runtime")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("egress-proxy".to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = serve(listener, theirs) => {}
                        _ = stopped => {}
                    }
                });
                // Lookups still running in the blocking pool are not waited for.
                runtime.shutdown_background();
            })
            .context("egress proxy: cannot start its thread")?;
        Ok(Proxy {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where commands reach it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it did so far.
    pub fn log(&self) -> Log {
        let mut log = self.shared.log().clone();
        log.bytes = self.shared.used.load(Ordering::SeqCst);
        log.cut = log.bytes >= log.max_bytes;
        log
    }

    /// The refusals from the `from`-th on (a command's own, counted before it ran).
    pub fn refusals_from(&self, from: usize) -> Vec<Refusal> {
        self.shared
            .log()
            .refused
            .get(from..)
            .map(<[Refusal]>::to_vec)
            .unwrap_or_default()
    }

    /// Records refusals made elsewhere (the supervisor's, of a connect around the proxy).
    pub fn recorder(&self) -> impl Fn(String, u16, String) + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move |host, port, reason| shared.refuse(&host, port, reason)
    }

    /// How many refusals there are so far.
    pub fn refusal_count(&self) -> usize {
        self.shared.log().refused.len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors, say: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut cut = shared.cut.subscribe();
            if *cut.borrow_and_update() {
                // Spent already: the request is answered with the refusal, not dropped.
                handle(client, &shared).await;
                return;
            }
            tokio::select! {
                () = handle(client, &shared) => {}
                _ = cut.wait_for(|c| *c) => {}
            }
        });
    }
}

/// Serves one client connection: one request, then its tunnel or its one response.
async fn handle(mut client: TcpStream, shared: &Shared) {
    let mut buf = Vec::with_capacity(1024);
    let Some((request, end)) = read_request(&mut client, shared, &mut buf).await else {
        return;
    };
    let (host, port) = (request.host.as_str(), request.port);
    let refuse = |reason: String| {
        let line = format!("[harness] network: {host}:{port} {reason}");
        shared.refuse(host, port, reason);
        line
    };
    if !policy::allowed(&shared.settings.patterns, host) {
        let line = refuse("is not in the allowlist".to_string());
        answer(&mut client, "403 Forbidden", &line).await;
        return;
    }
    if shared.spent() {
        let line = refuse(format!(
            "was refused: the egress budget of {} bytes is spent",
            shared.settings.max_bytes
        ));
        answer(&mut client, "403 Forbidden", &line).await;
        return;
    }
    let (upstream, from_upstream) = match reach(shared, host, port).await {
        Ok(r) => r,
        Err(reason) => {
            let line = refuse(reason);
            answer(&mut client, "502 Bad Gateway", &line).await;
            return;
        }
    };
    let key = format!("{host}:{port}");
    shared
        .log()
        .allowed
        .entry(key.clone())
        .or_default()
        .connections += 1;
    let opened = Opened {
        key: &key,
        forward: request.forward.as_deref(),
        early: &buf[end..],
        from_upstream: &from_upstream,
    };
    relay(shared, client, upstream, &opened).await;
}

/// The client's request head, read into `buf` within [`HEAD_WAIT`] and parsed, with the
/// index past it; `None` when there is none or it is refused (the client is answered 400, a
/// head that does not parse is logged as a refusal).
async fn read_request(
    client: &mut TcpStream,
    shared: &Shared,
    buf: &mut Vec<u8>,
) -> Option<(policy::Request, usize)> {
    let end = match tokio::time::timeout(HEAD_WAIT, read_head(client, buf)).await {
        Ok(Some(end)) => end,
        _ => {
            answer(
                client,
                "400 Bad Request",
                "[harness] network: no request head",
            )
            .await;
            return None;
        }
    };
    match policy::parse_head(&buf[..end]) {
        Ok(r) => Some((r, end)),
        Err(why) => {
            let first = String::from_utf8_lossy(&buf[..end.min(200)]).into_owned();
            let host = first.split(' ').nth(1).unwrap_or("?").to_string();
            shared.refuse(&host, 0, format!("was refused: {why}"));
            answer(
                client,
                "400 Bad Request",
                &format!("[harness] network: {why}"),
            )
            .await;
            None
        }
    }
}

/// A connection to `host:port` (directly, or a tunnel through the upstream proxy) and the
/// bytes the upstream sent past its answer. Err: the refusal's reason.
async fn reach(shared: &Shared, host: &str, port: u16) -> Result<(TcpStream, Vec<u8>), String> {
    let resolved = resolve(shared, host, port).await;
    match (&shared.settings.upstream, resolved) {
        (_, Err(why @ Unresolved::Private)) | (None, Err(why @ Unresolved::Not)) => {
            Err(why.reason().to_string())
        }
        (None, Ok(addrs)) => connect_any(&addrs)
            .await
            .map(|s| (s, Vec::new()))
            .ok_or_else(|| "could not be reached".to_string()),
        (Some((uh, up)), _) => through_upstream(uh, *up, host, port).await,
    }
}

/// What an allowed request brings to its relay.
struct Opened<'a> {
    /// `host:port`, the key of the log and the budget.
    key: &'a str,
    /// The head to send on; `None` for a tunnel (CONNECT).
    forward: Option<&'a [u8]>,
    /// What the client sent past its head.
    early: &'a [u8],
    /// What the upstream proxy sent past its answer.
    from_upstream: &'a [u8],
}

/// Opens the exchange (the tunnel's 200, or the forwarded head) and copies both ways until
/// either side ends or the budget is spent.
async fn relay(shared: &Shared, mut client: TcpStream, mut upstream: TcpStream, o: &Opened<'_>) {
    let key = o.key;
    let sent = match o.forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
        }
        Some(head) => {
            let mut first = head.to_vec();
            first.extend_from_slice(o.early);
            pass(shared, key, &mut upstream, &first).await
        }
    };
    if sent.is_err() {
        return;
    }
    if o.forward.is_none() && !o.early.is_empty() {
        // A client that sent its first TLS bytes before the 200: they go on, counted.
        if pass(shared, key, &mut upstream, o.early).await.is_err() {
            return;
        }
    }
    if !o.from_upstream.is_empty()
        && pass(shared, key, &mut client, o.from_upstream)
            .await
            .is_err()
    {
        return;
    }
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let _ = tokio::join!(pump(shared, key, cr, uw), pump(shared, key, ur, cw));
}

/// Reads until the head's blank line; the index past it, `None` on EOF or an overlong head.
async fn read_head(client: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = policy::head_end(buf) {
            return Some(end);
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn answer(client: &mut TcpStream, status: &str, line: &str) {
    let body = format!("{line}\n");
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(text.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// Why a name has no address to connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unresolved {
    /// It resolves, but only to private addresses (under `deny_private`).
    Private,
    /// It does not resolve.
    Not,
}

impl Unresolved {
    fn reason(self) -> &'static str {
        match self {
            Unresolved::Private => "resolves only to private addresses (deny_private)",
            Unresolved::Not => "does not resolve",
        }
    }
}

/// A tunnel to `host:port` through the upstream proxy `uh:up` (`CONNECT`), and the bytes
/// the upstream sent past its answer. Err: the refusal's reason.
async fn through_upstream(
    uh: &str,
    up: u16,
    host: &str,
    port: u16,
) -> Result<(TcpStream, Vec<u8>), String> {
    let unreachable = || format!("was refused: the upstream proxy {uh}:{up} could not be reached");
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((uh, up))
        .await
        .map_err(|_| unreachable())?
        .collect();
    let mut stream = connect_any(&addrs).await.ok_or_else(unreachable)?;
    let ask = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    stream
        .write_all(ask.as_bytes())
        .await
        .map_err(|_| unreachable())?;
    let mut buf = Vec::new();
    let end = tokio::time::timeout(HEAD_WAIT, read_head(&mut stream, &mut buf))
        .await
        .ok()
        .flatten()
        .ok_or_else(|| format!("was refused: the upstream proxy {uh}:{up} did not answer"))?;
    let status = String::from_utf8_lossy(&buf[..end]);
    let line = status.lines().next().unwrap_or_default().to_string();
    if line.split(' ').nth(1) != Some("200") {
        return Err(format!(
            "was refused by the upstream proxy {uh}:{up} ({})",
            line.chars().take(80).collect::<String>()
        ));
    }
    Ok((stream, buf[end..].to_vec()))
}

/// The addresses of `host`: its hosts-file entries if any, else DNS; without the private
/// ones under `deny_private`.
async fn resolve(shared: &Shared, host: &str, port: u16) -> Result<Vec<SocketAddr>, Unresolved> {
    let listed: Vec<SocketAddr> = shared
        .settings
        .hosts
        .iter()
        .filter(|(name, _)| name == host)
        .map(|(_, ip)| SocketAddr::new(*ip, port))
        .collect();
    let found = if listed.is_empty() {
        match tokio::net::lookup_host((host, port)).await {
            Ok(addrs) => addrs.collect(),
            Err(_) => return Err(Unresolved::Not),
        }
    } else {
        listed
    };
    let kept: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| !(shared.settings.deny_private && policy::private(a.ip())))
        .collect();
    if kept.is_empty() && !found.is_empty() {
        return Err(Unresolved::Private);
    }
    if kept.is_empty() {
        return Err(Unresolved::Not);
    }
    Ok(kept)
}

async fn connect_any(addrs: &[SocketAddr]) -> Option<TcpStream> {
    for addr in addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(addr)).await {
            return Some(s);
        }
    }
    None
}

/// Writes `bytes` to `to` within the budget; Err when it is spent (the connection is cut).
async fn pass(
    shared: &Shared,
    key: &str,
    to: &mut (impl AsyncWriteExt + Unpin),
    bytes: &[u8],
) -> std::io::Result<()> {
    let granted = shared.take(bytes.len() as u64) as usize;
    to.write_all(&bytes[..granted]).await?;
    if let Some(r) = shared.log().allowed.get_mut(key) {
        r.bytes += granted as u64;
    }
    if granted < bytes.len() {
        shared.refuse(
            key.rsplit_once(':').map_or(key, |(h, _)| h),
            key.rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .unwrap_or(0),
            format!(
                "was cut: the egress budget of {} bytes is spent",
                shared.settings.max_bytes
            ),
        );
        shared.cut.send_replace(true);
        return Err(std::io::Error::other("egress budget spent"));
    }
    Ok(())
}

/// Copies one direction until EOF (then half-closes) or the budget is spent.
async fn pump(
    shared: &Shared,
    key: &str,
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        pass(shared, key, &mut to, &buf[..n]).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn settings(allow: &[&str], max_bytes: u64) -> Settings {
        Settings {
            patterns: allow
                .iter()
                .map(|p| policy::parse_pattern(p).unwrap())
                .collect(),
            deny_private: false,
            max_bytes,
            hosts: vec![
                ("allowed.test".into(), "127.0.0.1".parse().unwrap()),
                ("other.test".into(), "127.0.0.1".parse().unwrap()),
            ],
            upstream: None,
        }
    }

    /// A server on 127.0.0.1 that answers each connection with `reply` after reading.
    fn server(reply: Vec<u8>) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming().flatten().take(4) {
                let mut s = s;
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b);
                let _ = s.write_all(&reply);
            }
        });
        port
    }

    fn ask(proxy: &Proxy, head: &str) -> Vec<u8> {
        let mut s = std::net::TcpStream::connect(proxy.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    }

    #[test]
    fn a_listed_name_is_tunnelled_and_another_refused() {
        let port = server(b"pong".to_vec());
        let proxy = Proxy::start(settings(&["allowed.test"], 1 << 20)).unwrap();
        let got = ask(
            &proxy,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\nping"),
        );
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("pong"), "{text}");
        let got = ask(
            &proxy,
            &format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n"),
        );
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 403"), "{text}");
        assert!(text.contains(&format!(
            "[harness] network: other.test:{port} is not in the allowlist"
        )));
        let log = proxy.log();
        assert_eq!(log.allowed[&format!("allowed.test:{port}")].connections, 1);
        assert_eq!(log.bytes, 8);
        assert_eq!(proxy.refusals_from(0).len(), 1);
        assert_eq!(proxy.refusals_from(1), Vec::new());
    }

    #[test]
    fn a_private_address_is_refused_under_deny_private() {
        let port = server(b"pong".to_vec());
        let mut s = settings(&["allowed.test"], 1 << 20);
        s.deny_private = true;
        let proxy = Proxy::start(s).unwrap();
        let got = ask(
            &proxy,
            &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\n\r\n"),
        );
        assert!(String::from_utf8_lossy(&got).contains("resolves only to private addresses"));
        assert_eq!(proxy.log().allowed.len(), 0);
    }

    #[test]
    fn requests_are_chained_through_an_upstream_proxy() {
        let port = server(b"pong".to_vec());
        // The upstream: another proxy, which knows the name (the first does not).
        let upstream = Proxy::start(settings(&["allowed.test"], 1 << 20)).unwrap();
        let chained = |allow: &[&str]| {
            let mut s = settings(allow, 1 << 20);
            s.hosts.clear();
            s.upstream = Some(("127.0.0.1".into(), upstream.addr().port()));
            Proxy::start(s).unwrap()
        };
        let first = chained(&["allowed.test", "other.test"]);
        let got = ask(
            &first,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\nping"),
        );
        assert!(String::from_utf8_lossy(&got).ends_with("pong"));
        let got = ask(
            &first,
            &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\n\r\n"),
        );
        assert!(String::from_utf8_lossy(&got).ends_with("pong"));
        assert_eq!(
            upstream.log().allowed[&format!("allowed.test:{port}")].connections,
            2
        );
        let got = ask(
            &first,
            &format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 502"));
        let refused = first.refusals_from(0);
        assert!(
            refused[0]
                .reason
                .starts_with("was refused by the upstream proxy 127.0.0.1:")
                && refused[0].reason.ends_with("(HTTP/1.1 403 Forbidden)"),
            "{refused:?}"
        );
        drop(upstream);
        let got = ask(
            &first,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(String::from_utf8_lossy(&got).contains("could not be reached"));
    }

    #[test]
    fn the_budget_cuts_a_download_and_refuses_what_follows() {
        let port = server(vec![b'x'; 100_000]);
        let proxy = Proxy::start(settings(&["allowed.test"], 1000)).unwrap();
        let got = ask(
            &proxy,
            &format!("GET http://allowed.test:{port}/big HTTP/1.1\r\n\r\n"),
        );
        assert!(got.len() < 1000, "{}", got.len());
        let log = proxy.log();
        assert_eq!((log.bytes, log.cut), (1000, true));
        assert!(log.refused[0].reason.contains("was cut"));
        let got = ask(
            &proxy,
            &format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(String::from_utf8_lossy(&got).contains("is spent"));
    }
}
