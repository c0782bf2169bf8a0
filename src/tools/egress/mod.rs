//! Tools stage (egress): `network = "allowlist"`, the run's own HTTP proxy and what commands
//! get to use it. The list and the request checks are pure ([`policy`]); the proxy is a thin
//! tokio adapter on its own thread ([`proxy`]); the kernel holds commands to the proxy's
//! address (`sandbox::unix::supervisor`, the Landlock TCP port rule).

pub mod policy;
pub mod proxy;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use crate::config::EgressConfig;
use crate::tools::sandbox::{unix::supervisor::TcpGuard, Status};

/// Starts the run's proxy for `egress`. Fails when the commands are not confined (the
/// allowlist would then be a suggestion: a command could connect anywhere) or the hosts file
/// cannot be read.
pub fn start(egress: &EgressConfig, status: &Status) -> Result<proxy::Proxy> {
    if !matches!(status, Status::Landlock { .. }) {
        bail!(
            "[tools.bash].network = \"allowlist\" needs the sandbox (Landlock and seccomp), but it is {}; without it commands could connect anywhere",
            status.describe()
        );
    }
    proxy::Proxy::start(settings(egress)?)
}

/// The proxy's settings for `egress`, its hosts file read.
pub fn settings(egress: &EgressConfig) -> Result<proxy::Settings> {
    let hosts = match &egress.hosts {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("[tools.bash.egress].hosts: cannot read {}", path.display())
            })?;
            policy::parse_hosts(&text).map_err(|e| {
                anyhow::anyhow!("[tools.bash.egress].hosts: {}: {e}", path.display())
            })?
        }
        None => Vec::new(),
    };
    if let Some(ca) = &egress.ca_file {
        if !ca.is_file() {
            bail!(
                "[tools.bash.egress].ca_file: {} is not a file",
                ca.display()
            );
        }
    }
    Ok(proxy::Settings {
        patterns: egress.allow.clone(),
        deny_private: egress.deny_private,
        max_bytes: egress.max_bytes,
        hosts,
        upstream: egress.upstream.clone(),
    })
}

/// What the seccomp supervisor holds TCP connects to: `proxy`'s address; every other one
/// is refused and written into the proxy's log.
pub fn guard(proxy: &proxy::Proxy) -> TcpGuard {
    let record = proxy.recorder();
    let addr = match proxy.addr() {
        SocketAddr::V4(a) => a,
        // The proxy listens on 127.0.0.1 only.
        SocketAddr::V6(_) => SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0),
    };
    TcpGuard {
        proxy: addr,
        refused: Arc::new(move |to: SocketAddr| {
            record(
                to.ip().to_string(),
                to.port(),
                "was refused: commands connect only through the harness's proxy".to_string(),
            )
        }),
    }
}

/// The variables that point a command's tools at the proxy at `addr`: curl, wget, Python
/// (pip, requests, urllib), cargo, npm and git read one or more of them. `NO_PROXY` is
/// empty, so nothing goes around the proxy (it would fail anyway: the kernel allows no
/// other connection). PURE.
pub fn proxy_env(addr: SocketAddr) -> Vec<(String, String)> {
    let url = format!("http://{addr}");
    let mut env: Vec<(String, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
        "npm_config_proxy",
        "npm_config_https_proxy",
    ]
    .iter()
    .map(|k| (k.to_string(), url.clone()))
    .collect();
    env.push(("NO_PROXY".to_string(), String::new()));
    env.push(("no_proxy".to_string(), String::new()));
    env
}

/// The variables that make the commands' TLS clients (OpenSSL's, curl, git, Python's
/// requests and pip, cargo, npm and node) trust the bundle at `ca` instead of the system's
/// (node: besides). PURE.
pub fn ca_env(ca: &std::path::Path) -> Vec<(String, String)> {
    [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "CARGO_HTTP_CAINFO",
        "NODE_EXTRA_CA_CERTS",
        "npm_config_cafile",
    ]
    .iter()
    .map(|k| (k.to_string(), ca.display().to_string()))
    .collect()
}

/// `env` with `proxy_env(addr)`, [`ca_env`] of `ca` and git's `http.proxy` appended to its
/// `GIT_CONFIG_*` list (which git reads before any repository's config, so a repository
/// cannot unset it). PURE.
pub fn with_proxy(
    mut env: Vec<(String, String)>,
    addr: SocketAddr,
    ca: Option<&std::path::Path>,
) -> Vec<(String, String)> {
    let mut add = proxy_env(addr);
    add.extend(ca.map(ca_env).unwrap_or_default());
    env.retain(|(k, _)| !add.iter().any(|(a, _)| a == k));
    env.extend(add);
    let count = env
        .iter()
        .find(|(k, _)| k == "GIT_CONFIG_COUNT")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    env.retain(|(k, _)| k != "GIT_CONFIG_COUNT");
    env.push((format!("GIT_CONFIG_KEY_{count}"), "http.proxy".to_string()));
    env.push((
        format!("GIT_CONFIG_VALUE_{count}"),
        format!("http://{addr}"),
    ));
    env.push(("GIT_CONFIG_COUNT".to_string(), (count + 1).to_string()));
    env.sort();
    env
}

/// One line for `harness check` and the PLAN: the effective list and its limits. PURE.
pub fn describe(egress: &EgressConfig) -> String {
    format!(
        "allowlist through the harness's proxy: {} ({}private addresses refused, max {} bytes{})",
        egress.describe(),
        if egress.deny_private { "" } else { "NO " },
        egress.max_bytes,
        egress
            .hosts
            .as_ref()
            .map(|h| format!(", names from {}", h.display()))
            .unwrap_or_default()
            + &egress
                .upstream
                .as_ref()
                .map(|(h, p)| format!(", chained through http://{h}:{p}"))
                .unwrap_or_default()
    )
}

/// The REPORT's **Egress** section (and so the Redmine note's): the list, the bytes, each
/// `host:port` reached and each refusal. PURE.
pub fn section(egress: &EgressConfig, log: &proxy::Log) -> String {
    let mut out = format!(
        "## Egress\n\nnetwork = \"allowlist\": {}\n\nBytes: {} of {} bytes{}\n",
        egress.describe(),
        log.bytes,
        log.max_bytes,
        if log.cut { " (budget spent)" } else { "" }
    );
    out.push_str("\nReached:\n");
    if log.allowed.is_empty() {
        out.push_str("- none\n");
    }
    for (target, r) in &log.allowed {
        let s = if r.connections == 1 { "" } else { "s" };
        out.push_str(&format!(
            "- {target}: {} connection{s}, {} bytes\n",
            r.connections, r.bytes
        ));
    }
    out.push_str("\nRefused:\n");
    if log.refused.is_empty() {
        out.push_str("- none\n");
    }
    for r in &log.refused {
        out.push_str(&format!("- {}:{}: {}\n", r.host, r.port, r.reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_names_what_was_reached_refused_and_spent() {
        let egress = EgressConfig {
            allow: vec![policy::Pattern::Exact("pypi.org".into())],
            presets: Vec::new(),
            deny_private: true,
            max_bytes: 1000,
            hosts: None,
            ca_file: None,
            upstream: None,
        };
        let mut log = proxy::Log {
            max_bytes: 1000,
            bytes: 1000,
            cut: true,
            ..proxy::Log::default()
        };
        log.allowed.insert(
            "pypi.org:443".into(),
            proxy::Reached {
                connections: 2,
                bytes: 1000,
            },
        );
        log.refused.push(proxy::Refusal {
            host: "example.com".into(),
            port: 443,
            reason: "is not in the allowlist".into(),
        });
        assert_eq!(
            section(&egress, &log),
            "## Egress\n\nnetwork = \"allowlist\": pypi.org\n\nBytes: 1000 of 1000 bytes (budget spent)\n\nReached:\n- pypi.org:443: 2 connections, 1000 bytes\n\nRefused:\n- example.com:443: is not in the allowlist\n"
        );
    }

    #[test]
    fn commands_are_pointed_at_the_proxy_and_git_too() {
        let env = vec![
            ("GIT_CONFIG_COUNT".to_string(), "2".to_string()),
            ("HTTPS_PROXY".to_string(), "http://elsewhere:1".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let got = with_proxy(
            env,
            "127.0.0.1:4242".parse().unwrap(),
            Some(std::path::Path::new("/etc/ca.pem")),
        );
        let get = |k: &str| got.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTPS_PROXY"), Some("http://127.0.0.1:4242"));
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:4242"));
        assert_eq!(get("CARGO_HTTP_PROXY"), Some("http://127.0.0.1:4242"));
        assert_eq!(get("NO_PROXY"), Some(""));
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("3"));
        assert_eq!(get("GIT_CONFIG_KEY_2"), Some("http.proxy"));
        assert_eq!(get("GIT_CONFIG_VALUE_2"), Some("http://127.0.0.1:4242"));
        assert_eq!(got.iter().filter(|(k, _)| k == "HTTPS_PROXY").count(), 1);
        assert_eq!(get("GIT_SSL_CAINFO"), Some("/etc/ca.pem"));
        assert_eq!(get("SSL_CERT_FILE"), Some("/etc/ca.pem"));
    }
}
