//! End-to-end tests of `network = "allowlist"`: the real `harness once` with the scripted
//! model, Debian's `curl`, git and pip under the real sandbox, and local HTTPS servers
//! (python3 `http.server` + `ssl`, a throwaway certificate made by `openssl`) on 127.0.0.2
//! and 127.0.0.3, named by the config's test hosts file. A listed name is reached through
//! the harness's proxy (curl, `git clone` over HTTPS, `pip download` from a package index,
//! all trusting `ca_file`); another name, a connect around the proxy, UDP, DNS and a name
//! resolving to a private address under `deny_private` fail; the byte budget cuts a
//! download; each refusal is in the tool result, the events and the REPORT; with
//! `upstream`, allowed requests go through Debian's tinyproxy. Needs Landlock, curl, git,
//! openssl and python3 with pip (and tinyproxy for the chaining test).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::json;

/// An HTTPS server on the address of argv[1] that prints its port, then answers `/` with
/// argv[2], `/big` with 4 MB and every other path with the files below argv[5] (a
/// directory's `index.html`): a bare repository for git's dumb HTTP protocol, a simple
/// package index for pip.
const SERVER_PY: &str = r#"
import http.server, os, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path not in ("/", "/big"):
            path = os.path.join(sys.argv[5], self.path.split("?")[0].lstrip("/"))
            if os.path.isdir(path):
                path = os.path.join(path, "index.html")
            if ".." in self.path or not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = open(path, "rb").read()
        else:
            body = b"x" * 4000000 if self.path == "/big" else (sys.argv[2] + "\n").encode()
        self.send_response(200)
        html = self.path.split("?")[0].endswith("/") and self.path != "/"
        self.send_header("Content-Type", "text/html" if html else "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((sys.argv[1], 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

/// Tries what must fail under the allowlist: a TCP connect around the proxy (argv[2] is
/// host:port), a UDP socket, a name lookup (argv[2]), a raw socket.
const AROUND_PY: &str = r#"#!/usr/bin/env python3
import socket, sys
what = sys.argv[1]
try:
    if what == "tcp":
        host, port = sys.argv[2].rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
        print("connected")
    elif what == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", ("127.0.0.2", 53))
        print("sent udp")
    elif what == "dns":
        print(socket.getaddrinfo(sys.argv[2], 443))
    elif what == "raw":
        socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        print("made raw")
except OSError as e:
    print(f"refused: {e}")
    sys.exit(1)
"#;

/// pip itself, run by the script's interpreter (as `python3 -m pip`).
const PIP_PY: &str = r#"#!/usr/bin/env python3
import sys
from pip._internal.cli.main import main
sys.exit(main(sys.argv[1:]))
"#;

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(dir: &Path, addr: &str, says: &str) -> Server {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SERVER_PY)
        .args([addr, says])
        .arg(dir.join("cert.pem"))
        .arg(dir.join("key.pem"))
        .arg(dir.join("site"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(&mut child);
    let port = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
    Server(child, port)
}

fn tools() -> bool {
    for (tool, arg) in [
        ("curl", "--version"),
        ("openssl", "version"),
        ("python3", "-V"),
    ] {
        let found = Command::new(tool)
            .arg(arg)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            skip("egress tests", &format!("no {tool}"));
            return false;
        }
    }
    true
}

/// A simple package index of one wheel (`tinypkg` 0.1) in `dir/site`.
const INDEX_PY: &str = r#"
import os, sys, zipfile
site = sys.argv[1]
os.makedirs(os.path.join(site, "files"))
os.makedirs(os.path.join(site, "simple", "tinypkg"))
name = "tinypkg-0.1-py3-none-any.whl"
with zipfile.ZipFile(os.path.join(site, "files", name), "w") as z:
    z.writestr("tinypkg/__init__.py", "")
    z.writestr("tinypkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n")
    z.writestr("tinypkg-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("tinypkg-0.1.dist-info/RECORD", "")
with open(os.path.join(site, "simple", "tinypkg", "index.html"), "w") as f:
    f.write(f'<html><body><a href="/files/{name}">{name}</a></body></html>')
"#;

/// The site the servers serve: a bare repository with one commit in `dir/site/repo.git`,
/// ready for dumb HTTP, and the package index of [`INDEX_PY`].
fn repository(dir: &Path) {
    let src = dir.join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("README"), "cloned through the proxy\n").unwrap();
    let git = |at: &Path, args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(at)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&src, &["init", "-q", "-b", "main"]);
    git(&src, &["add", "README"]);
    git(
        &src,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    std::fs::create_dir(dir.join("site")).unwrap();
    git(dir, &["clone", "-q", "--bare", "src", "site/repo.git"]);
    git(&dir.join("site/repo.git"), &["update-server-info"]);
    let ok = Command::new("python3")
        .arg("-c")
        .arg(INDEX_PY)
        .arg(dir.join("site"))
        .status()
        .unwrap();
    assert!(ok.success());
}

/// A throwaway self-signed certificate for the test names, in `dir`.
fn certificate(dir: &Path) {
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=allowed.test"])
        .args([
            "-addext",
            "subjectAltName=DNS:allowed.test,DNS:other.test,DNS:localhost",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The standard config, Landlock required, curl and the scripts allowed, and these
/// `[tools.bash.egress]` keys; the certificate is `work/cert.pem`, the hosts file maps
/// allowed.test to 127.0.0.2 and other.test to 127.0.0.3.
fn workspace(llm: &Llm, certs: &Path, egress: &str) -> Workspace {
    workspace_then(llm, certs, egress, |c| c)
}

/// [`workspace`], its config then passed through `more`.
fn workspace_then(
    llm: &Llm,
    certs: &Path,
    egress: &str,
    more: impl FnOnce(String) -> String,
) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), |c| {
        more(c.replace(
            "allow = [\"ls *\",",
            "allow = [\"./scripts/**\", \"curl *\", \"git clone *\", \"ls *\",",
        )
        .replace("max_rounds = 4", "max_rounds = 16")
        .replace(
            "deny = [\"rm *\"]",
            &format!(
                "deny = [\"rm *\"]\nsandbox = \"landlock\"\nnetwork = \"allowlist\"\n\n[tools.bash.egress]\nhosts = \"hosts\"\n{egress}\n"
            ),
        ))
    });
    std::fs::write(
        ws.path().join("hosts"),
        "127.0.0.2 allowed.test\n127.0.0.3 other.test\n",
    )
    .unwrap();
    let work = ws.path().join("work");
    std::fs::copy(certs.join("cert.pem"), work.join("cert.pem")).unwrap();
    std::fs::create_dir(work.join("scripts")).unwrap();
    for (name, text) in [("around.py", AROUND_PY), ("pypkg.py", PIP_PY)] {
        let py = work.join("scripts").join(name);
        std::fs::write(&py, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    ws
}

/// The certificate, the site, and its servers: allowed.test on 127.0.0.2 and other.test
/// on 127.0.0.3, each saying hello from its own name.
fn two_sites() -> (tempfile::TempDir, Server, Server) {
    let certs = tempfile::tempdir().unwrap();
    certificate(certs.path());
    repository(certs.path());
    let allowed = server(certs.path(), "127.0.0.2", "hello from allowed");
    let other = server(certs.path(), "127.0.0.3", "hello from other");
    (certs, allowed, other)
}

fn curl(url: &str) -> String {
    format!("curl -sS --max-time 20 --cacert cert.pem {url}")
}

#[test]
fn only_listed_names_are_reached_and_only_through_the_proxy() {
    if !landlock() || !tools() {
        return;
    }
    let (certs, allowed, other) = two_sites();
    let (a, o) = (allowed.1, other.1);
    let llm = Llm::start(&json!([
        tool_call("c1", &curl(&format!("https://allowed.test:{a}/"))),
        tool_call("c2", &curl(&format!("https://other.test:{o}/"))),
        tool_call(
            "c3",
            &format!("curl -sS --max-time 5 --noproxy '*' --cacert cert.pem --resolve other.test:{o}:127.0.0.3 https://other.test:{o}/")
        ),
        tool_call("c4", &format!("./scripts/around.py tcp 127.0.0.3:{o}")),
        tool_call("c5", "./scripts/around.py udp"),
        tool_call("c6", "./scripts/around.py raw"),
        tool_call("c7", &format!("curl -sS --max-time 5 http://allowed.test:{a}/")),
        tool_call("c8", &format!("git clone -q https://allowed.test:{a}/repo.git cloned")),
        tool_call("c9", "cat cloned/README"),
        tool_call("c10", &format!("git clone -q https://other.test:{o}/repo.git leaked")),
        tool_call("c11", &format!("./scripts/pypkg.py download -q --no-deps --disable-pip-version-check --index-url https://allowed.test:{a}/simple/ -d dl tinypkg")),
        tool_call("c12", "ls dl"),
        text("done"),
    ]));
    let ws = workspace(
        &llm,
        certs.path(),
        "allow = [\"allowed.test\"]\ndeny_private = false\nca_file = \"work/cert.pem\"",
    );

    let check = ws.run(&["check"]);
    assert!(
        check
            .stdout
            .contains("egress: allowlist through the harness's proxy: allowed.test"),
        "{check:?}"
    );
    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout
            .contains("egress: allowlist through the harness's proxy: allowed.test"),
        "{dry:?}"
    );

    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), 12, "{results:#?}");
    assert_eq!(results[0], "hello from allowed\n[exit status: 0]");
    assert!(
        results[1].contains(&format!(
            "[harness] network: other.test:{o} is not in the allowlist"
        )),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("hello from other"), "{}", results[1]);
    for r in &results[2..4] {
        assert!(!r.contains("hello from other"), "{r}");
        assert!(
            r.contains(&format!("[harness] network: 127.0.0.3:{o} was refused: commands connect only through the harness's proxy")),
            "{r}"
        );
    }
    assert!(
        results[3].contains("refused: [Errno 13] Permission denied"),
        "{}",
        results[3]
    );
    assert!(
        results[4].contains("refused: [Errno 13] Permission denied"),
        "{}",
        results[4]
    );
    assert!(
        results[5].contains("refused: [Errno 13] Permission denied"),
        "{}",
        results[5]
    );
    // Plain HTTP is forwarded too (the server speaks TLS, so its answer is not HTTP: what
    // counts is that the proxy let the name through).
    assert!(
        !results[6].contains("not in the allowlist"),
        "{}",
        results[6]
    );
    // git over HTTPS, through the proxy by its http.proxy, trusting ca_file.
    assert_eq!(results[7], "(no output)\n[exit status: 0]");
    assert_eq!(results[8], "cloned through the proxy\n[exit status: 0]");
    assert!(
        results[9].contains(&format!(
            "[harness] network: other.test:{o} is not in the allowlist"
        )),
        "{}",
        results[9]
    );
    // pip from a package index by name, through the proxy, trusting ca_file.
    assert!(results[10].ends_with("[exit status: 0]"), "{}", results[10]);
    assert_eq!(
        results[11],
        "tinypkg-0.1-py3-none-any.whl\n[exit status: 0]"
    );

    let events = std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap();
    // Every line is checked against docs/events.schema.json.
    let denied: Vec<serde_json::Value> = common::stream::events(&events)
        .into_iter()
        .filter(|e| e["type"] == "tool.egress_denied")
        .collect();
    assert_eq!(denied.len(), 4, "{events}");
    assert_eq!(denied[0]["host"], "other.test");
    assert_eq!(denied[0]["port"], o);
    assert_eq!(
        denied[0]["command"],
        curl(&format!("https://other.test:{o}/"))
    );

    let report = ws.latest();
    assert!(report.contains("## Egress"), "{report}");
    assert!(report.contains(&format!("allowed.test:{a}")), "{report}");
    assert!(
        report.contains(&format!("other.test:{o}: is not in the allowlist")),
        "{report}"
    );
}

#[test]
fn the_egress_section_is_in_the_note_read_back_from_the_real_redmine() {
    let _g = real_redmine!();
    if !landlock() || !tools() {
        return;
    }
    let (certs, allowed, other) = two_sites();
    let (a, o) = (allowed.1, other.1);
    let llm = Llm::start(&json!([
        tool_call("c1", &curl(&format!("https://allowed.test:{a}/"))),
        tool_call("c2", &curl(&format!("https://other.test:{o}/"))),
        text("# Fetched\n\nOne host answered."),
    ]));
    let ws = workspace_then(
        &llm,
        certs.path(),
        "allow = [\"allowed.test\"]\ndeny_private = false\nca_file = \"work/cert.pem\"",
        |c| {
            redmine::config(
                c,
                &format!("{}\n{}", redmine::SCOPE_NEW, redmine::WRITEBACK),
            )
        },
    );
    let run = redmine::run(&ws, &["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    let task: u64 = front(&report, "task_id").as_str().unwrap().parse().unwrap();
    // Read back through the API, as the people on the issue see it.
    let notes = redmine::notes(&redmine::issue(task));
    let note = notes
        .iter()
        .find(|n| n.starts_with("[harness-report]"))
        .unwrap_or_else(|| panic!("{notes:#?}"));
    assert!(note.contains("One host answered."), "{note}");
    let egress = note.find("Egress").unwrap_or_else(|| panic!("{note}"));
    let section = &note[egress..];
    assert!(section.contains(&format!("allowed.test:{a}")), "{note}");
    assert!(
        section.contains(&format!("other.test:{o}: is not in the allowlist")),
        "{note}"
    );
    assert!(!note.contains("hello from other"), "{note}");
}

#[test]
fn private_addresses_are_refused_and_the_budget_cuts_a_download() {
    if !landlock() || !tools() {
        return;
    }
    let certs = tempfile::tempdir().unwrap();
    certificate(certs.path());
    let allowed = server(certs.path(), "127.0.0.2", "hello from allowed");
    let a = allowed.1;
    let llm = Llm::start(&json!([
        tool_call("c1", &curl(&format!("https://allowed.test:{a}/"))),
        tool_call("c2", "./scripts/around.py dns deb.debian.org"),
        text("done"),
    ]));
    let ws = workspace(&llm, certs.path(), "allow = [\"allowed.test\"]");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains(&format!(
            "[harness] network: allowed.test:{a} resolves only to private addresses (deny_private)"
        )),
        "{}",
        results[0]
    );
    // No name can be looked up from inside: DNS is UDP (or TCP to a resolver), both closed.
    assert!(
        results[1].starts_with("refused: ") && results[1].ends_with("[exit status: 1]"),
        "{}",
        results[1]
    );

    let llm = Llm::start(&json!([
        tool_call(
            "c1",
            &curl(&format!("-o /dev/null https://allowed.test:{a}/big"))
        ),
        tool_call("c2", &curl(&format!("https://allowed.test:{a}/"))),
        text("done"),
    ]));
    let ws = workspace(
        &llm,
        certs.path(),
        "allow = [\"allowed.test\"]\ndeny_private = false\nmax_bytes = 100000",
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains("was cut: the egress budget of 100000 bytes is spent"),
        "{}",
        results[0]
    );
    assert!(!results[0].ends_with("[exit status: 0]"), "{}", results[0]);
    assert!(results[1].contains("is spent"), "{}", results[1]);
    let report = ws.latest();
    assert!(
        report.contains("100000 of 100000 bytes (budget spent)"),
        "{report}"
    );
}

#[test]
fn the_allowlist_is_refused_where_commands_are_not_confined() {
    let llm = Llm::start(&json!([text("done")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "deny = [\"rm *\"]",
            "deny = [\"rm *\"]\nsandbox = \"off\"\nnetwork = \"allowlist\"\n[tools.bash.egress]\nallow = [\"pypi.org\"]\n",
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("network = \"allowlist\" needs the sandbox"),
        "{run:?}"
    );
}

#[test]
fn check_warns_when_the_list_opens_harness_s_own_services() {
    let llm = Llm::start(&json!([text("done")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "deny = [\"rm *\"]",
            "deny = [\"rm *\"]\nnetwork = \"allowlist\"\n[tools.bash.egress]\nallow = [\"127.0.0.1\"]\n",
        )
    });
    let check = ws.run(&["check"]);
    assert!(
        check.stdout.contains(
            "the allow list lets commands reach the LLM proxy ([litellm].base_url) at 127.0.0.1"
        ),
        "{check:?}"
    );
}

/// Debian's tinyproxy on a free port of 127.0.0.1, logging requests to `dir/tinyproxy.log`.
struct Tinyproxy(Child, u16);

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tinyproxy(dir: &Path) -> Option<Tinyproxy> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 5\nLogLevel Connect\nLogFile \"{}\"\n",
            dir.join("tinyproxy.log").display()
        ),
    )
    .unwrap();
    let child = Command::new("tinyproxy")
        .arg("-d")
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        skip(
            "the upstream chaining test",
            "no tinyproxy (apt-get install tinyproxy)",
        );
        return None;
    };
    let proxy = Tinyproxy(child, port);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(proxy);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("tinyproxy did not listen on {port}");
}

#[test]
fn allowed_requests_are_chained_through_the_site_s_proxy() {
    if !landlock() || !tools() {
        return;
    }
    let certs = tempfile::tempdir().unwrap();
    certificate(certs.path());
    let Some(upstream) = tinyproxy(certs.path()) else {
        return;
    };
    let site = server(certs.path(), "127.0.0.1", "hello via upstream");
    let p = site.1;
    let llm = Llm::start(&json!([
        tool_call("c1", &curl(&format!("https://localhost:{p}/"))),
        tool_call("c2", &curl(&format!("https://other.test:{p}/"))),
        text("done"),
    ]));
    let ws = workspace(
        &llm,
        certs.path(),
        &format!(
            "allow = [\"localhost\"]\ndeny_private = false\nupstream = \"http://127.0.0.1:{}\"",
            upstream.1
        ),
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results[0], "hello via upstream\n[exit status: 0]");
    // Refused by harness before the upstream is asked.
    assert!(
        results[1].contains("is not in the allowlist"),
        "{}",
        results[1]
    );
    let log = std::fs::read_to_string(certs.path().join("tinyproxy.log")).unwrap();
    assert!(log.contains(&format!("CONNECT localhost:{p}")), "{log}");
    assert!(!log.contains("other.test"), "{log}");
}
