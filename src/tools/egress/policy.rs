//! Tools stage (egress), PURE: what `network = "allowlist"` lets through the harness's own
//! proxy. In: the host patterns of `[tools.bash.egress]`, a host name, an address, the head
//! of a proxy request. Out: whether the name is listed ([`allowed`]), whether an address is
//! one never to reach ([`private`]), the request read and rewritten ([`parse_head`]).
//!
//! Names are plain ASCII (an internationalised name must be written in its `xn--` form):
//! compared without case and without a trailing dot. A pattern is an exact name or `*.`
//! and a suffix, which matches every name below the suffix but not the suffix itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The named lists `presets` may use, in the binary.
pub const PRESETS: &[(&str, &[&str])] = &[
    ("@python", &["pypi.org", "files.pythonhosted.org"]),
    (
        "@rust",
        &["crates.io", "static.crates.io", "index.crates.io"],
    ),
    ("@node", &["registry.npmjs.org"]),
    ("@debian", &["deb.debian.org", "security.debian.org"]),
];

/// The hosts of preset `name`, `None` when there is no such preset.
pub fn preset(name: &str) -> Option<&'static [&'static str]> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
}

/// One entry of the allow list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// This name only.
    Exact(String),
    /// Every name below this one (`*.crates.io` holds `crates.io` here).
    Below(String),
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Exact(n) => write!(f, "{n}"),
            Pattern::Below(n) => write!(f, "*.{n}"),
        }
    }
}

/// Reads one `allow` entry. Err: why it is not a pattern.
pub fn parse_pattern(entry: &str) -> Result<Pattern, String> {
    match entry.strip_prefix("*.") {
        Some(rest) => normalize_host(rest).map(Pattern::Below),
        None if entry.contains('*') => Err(format!(
            "{entry:?}: a wildcard is only allowed as a leading \"*.\""
        )),
        None => normalize_host(entry).map(Pattern::Exact),
    }
}

/// `host` as compared: lower case, without one trailing dot. Err: not a plain ASCII host
/// name (or IPv4 address), with the reason.
pub fn normalize_host(host: &str) -> Result<String, String> {
    let bare = host.strip_suffix('.').unwrap_or(host);
    if !bare.is_ascii() {
        return Err(format!(
            "{host:?}: only ASCII names are allowed (write an internationalised name in its xn-- form)"
        ));
    }
    let name = bare.to_ascii_lowercase();
    if name.is_empty() || name.len() > 253 {
        return Err(format!("{host:?}: not a host name"));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if !name.split('.').all(label_ok) {
        return Err(format!("{host:?}: not a host name"));
    }
    Ok(name)
}

/// Whether `host` (normalized) is listed in `patterns`.
pub fn allowed(patterns: &[Pattern], host: &str) -> bool {
    patterns.iter().any(|p| match p {
        Pattern::Exact(n) => n == host,
        Pattern::Below(n) => host
            .strip_suffix(n.as_str())
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
    })
}

/// Whether `ip` is an address a command must never reach through the proxy with
/// `deny_private`: loopback, private, link-local (the cloud metadata address among them),
/// shared (CGNAT), multicast, broadcast, unspecified, reserved; for IPv6 also unique-local,
/// site-local, and an IPv4 address embedded as mapped, compatible or NAT64.
pub fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
}

fn private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) && private_v4(embedded()))
        || (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] && private_v4(embedded()))
}

/// What a client asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The host named (normalized).
    pub host: String,
    /// The port named (80 for an `http://` URL without one; a CONNECT must name it).
    pub port: u16,
    /// `None` for CONNECT (a tunnel); else the head to send on, in origin form with
    /// `Connection: close` and without the proxy's own headers.
    pub forward: Option<Vec<u8>>,
}

/// Where a head ends (`\r\n\r\n`), if it does.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Reads a request head (up to and with its blank line): `CONNECT host:port` or a request
/// in absolute form (`GET http://host[:port]/path`). Err: the status line to answer and why.
pub fn parse_head(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request is not text".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("not an HTTP request line: {first:?}"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() {
        return Err(format!("not an HTTP/1 request line: {first:?}"));
    }
    let headers: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(target, None)?;
        return Ok(Request {
            host,
            port,
            forward: None,
        });
    }
    let rest = target.strip_prefix("http://").ok_or_else(|| {
        format!("{target:?}: a proxy request names an http:// URL (https goes through CONNECT)")
    })?;
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = authority(auth, Some(80))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for h in headers {
        let name = h.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("host") {
            let value = h.split_once(':').map(|(_, v)| v.trim()).unwrap_or_default();
            let (named, _) = authority(value, Some(port))?;
            if named != host {
                return Err(format!(
                    "the Host header ({value}) names another host than the URL ({host})"
                ));
            }
            continue;
        }
        if [
            "proxy-authorization",
            "proxy-connection",
            "connection",
            "keep-alive",
        ]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        out.push_str(h);
        out.push_str("\r\n");
    }
    let host_line = if port == 80 {
        host.clone()
    } else {
        format!("{host}:{port}")
    };
    out.push_str(&format!("Host: {host_line}\r\nConnection: close\r\n\r\n"));
    Ok(Request {
        host,
        port,
        forward: Some(out.into_bytes()),
    })
}

/// `host[:port]`, the port `default` when missing (required when `None`). No userinfo, no
/// IPv6 literal: the allow list holds names.
fn authority(auth: &str, default: Option<u16>) -> Result<(String, u16), String> {
    if auth.contains('@') || auth.starts_with('[') {
        return Err(format!("{auth:?}: name a host and a port, nothing else"));
    }
    let (host, port) = match auth.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("{auth:?}: not a port"))?,
        ),
        None => (
            auth,
            default.ok_or_else(|| format!("{auth:?}: CONNECT names a port"))?,
        ),
    };
    Ok((normalize_host(host)?, port))
}

/// `upstream = "http://host:port"`: the host (normalized) and port. Err: why not.
pub fn upstream(url: &str) -> Result<(String, u16), String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "{url:?}: must be an http:// URL (http://host:port)"
        ));
    };
    let auth = rest.strip_suffix('/').unwrap_or(rest);
    if auth.contains('@') {
        return Err(format!(
            "{url:?}: credentials are not supported (the proxy never adds any)"
        ));
    }
    if auth.contains('/') || auth.contains('?') {
        return Err(format!("{url:?}: name a host and a port, no path"));
    }
    authority(auth, None).map_err(|_| format!("{url:?}: must be http://host:port"))
}

/// The host of `url` (`scheme://[user@]host[:port]/...`), normalized; `None` when it has
/// none or names an IPv6 literal.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.split(['/', '?', '#']).next()?;
    let auth = auth.rsplit_once('@').map_or(auth, |(_, a)| a);
    if auth.starts_with('[') {
        return None;
    }
    let host = auth.split_once(':').map_or(auth, |(h, _)| h);
    normalize_host(host).ok()
}

/// A hosts file (`address name...` per line, `#` comments), as name -> addresses.
/// Err: the first line that is not one.
pub fn parse_hosts(text: &str) -> Result<Vec<(String, IpAddr)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let ip: IpAddr = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("line {}: does not start with an address", i + 1))?;
        let mut any = false;
        for name in words {
            out.push((
                normalize_host(name).map_err(|e| format!("line {}: {e}", i + 1))?,
                ip,
            ));
            any = true;
        }
        if !any {
            return Err(format!("line {}: names no host", i + 1));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Vec<Pattern> {
        list.iter().map(|p| parse_pattern(p).unwrap()).collect()
    }

    #[test]
    fn names_match_exactly_or_below_a_suffix() {
        let p = patterns(&["pypi.org", "*.crates.io"]);
        for (host, ok) in [
            ("pypi.org", true),
            ("www.pypi.org", false),
            ("evilpypi.org", false),
            ("static.crates.io", true),
            ("a.b.crates.io", true),
            ("crates.io", false),
            ("xcrates.io", false),
            ("example.com", false),
        ] {
            assert_eq!(allowed(&p, host), ok, "{host}");
        }
    }

    #[test]
    fn names_are_compared_without_case_or_trailing_dot_and_ascii_only() {
        assert_eq!(normalize_host("PyPI.Org.").unwrap(), "pypi.org");
        assert!(normalize_host("bücher.de").unwrap_err().contains("xn--"));
        assert_eq!(
            normalize_host("xn--bcher-kva.de").unwrap(),
            "xn--bcher-kva.de"
        );
        for bad in ["", ".", "a..b", "-a.com", "a_b.com", "a b", "a/b"] {
            assert!(normalize_host(bad).is_err(), "{bad:?}");
        }
        assert!(parse_pattern("a.*.com").is_err());
        assert!(parse_pattern("*").is_err());
        assert_eq!(
            parse_pattern("*.X.io").unwrap(),
            Pattern::Below("x.io".into())
        );
    }

    #[test]
    fn private_addresses_are_known_in_every_form() {
        for ip in [
            "127.0.0.2",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
        ] {
            assert!(private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["151.101.0.223", "2a04:4e42::223", "::ffff:151.101.0.223"] {
            assert!(!private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_connect_names_host_and_port() {
        let r = parse_head(b"CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.forward),
            ("pypi.org", 443, None)
        );
        assert!(parse_head(b"CONNECT pypi.org HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT user@pypi.org:443 HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn a_forward_request_is_rewritten_to_origin_form() {
        let head = b"GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let r = parse_head(head).unwrap();
        assert_eq!((r.host.as_str(), r.port), ("example.com", 8080));
        assert_eq!(
            String::from_utf8(r.forward.unwrap()).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nAccept: */*\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n"
        );
        let r = parse_head(b"GET http://example.com HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(r.port, 80);
        assert!(String::from_utf8(r.forward.unwrap())
            .unwrap()
            .starts_with("GET / HTTP/1.0\r\n"));
    }

    #[test]
    fn a_forward_request_must_be_absolute_and_name_one_host() {
        assert!(parse_head(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").is_err());
        assert!(parse_head(b"GET https://example.com/ HTTP/1.1\r\n\r\n").is_err());
        let fronted = b"GET http://allowed.org/ HTTP/1.1\r\nHost: other.org\r\n\r\n";
        assert!(parse_head(fronted).unwrap_err().contains("another host"));
        assert!(parse_head(b"\x00\xff\r\n\r\n").is_err());
    }

    #[test]
    fn an_upstream_is_an_http_host_and_port() {
        assert_eq!(
            upstream("http://Proxy.corp:3128/").unwrap(),
            ("proxy.corp".to_string(), 3128)
        );
        for bad in [
            "https://p:3128",
            "http://u:pw@p:3128",
            "http://p",
            "http://p:3128/x",
            "p:3128",
        ] {
            assert!(upstream(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_url_names_its_host() {
        assert_eq!(
            url_host("http://127.0.0.1:4000/v1").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            url_host("https://u:p@Redmine.Example.org/").as_deref(),
            Some("redmine.example.org")
        );
        assert_eq!(url_host("https://[::1]:3000"), None);
    }

    #[test]
    fn a_hosts_file_maps_names_to_addresses() {
        let got = parse_hosts("# test\n127.0.0.2 a.test B.test\n\n::1 c.test # six\n").unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], ("b.test".to_string(), "127.0.0.2".parse().unwrap()));
        assert!(parse_hosts("a.test 127.0.0.1\n").is_err());
        assert!(parse_hosts("127.0.0.1\n").is_err());
    }

    #[test]
    fn every_preset_is_a_list_of_names() {
        for (name, hosts) in PRESETS {
            assert!(name.starts_with('@'));
            for h in *hosts {
                assert_eq!(normalize_host(h).as_deref(), Ok(*h));
            }
        }
        assert_eq!(preset("@rust").map(<[_]>::len), Some(3));
        assert_eq!(preset("@go"), None);
    }
}
