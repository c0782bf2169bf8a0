//! Test support: a temp dir with a config, the scripted OpenAI-compatible server run in
//! process (crates/scripted-llm's library; the LiteLLM runs start its binary), and a runner for the built
//! `harness` binary that never gives it stdin.
#![allow(dead_code)]

#[macro_use]
pub mod redmine;
pub mod forge;
pub mod proxy;
pub mod runs;
pub mod stream;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The canary used as the LiteLLM key in tests: it must never appear in any output.
pub const CANARY: &str = "sk-canary-7f3a9c1e5b2d4f60";

/// The scripted OpenAI-compatible server (crates/scripted-llm), running in this test process
/// on a thread of its own: the same server the LiteLLM runs start as a binary, without a
/// process per test. Dropping it closes the port.
pub struct Llm {
    server: scripted_llm::Server,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl Llm {
    /// Starts the server with a script (a JSON list of steps or a script object).
    pub fn start(script: &Value) -> Llm {
        let models = ["glm-5.3", "glm-5.2", "glm-4.7-flash", "glm-5-turbo"];
        let server = scripted_llm::Server::start_with_models(
            &serde_json::to_string(script).unwrap(),
            models.iter().map(|m| m.to_string()).collect(),
        )
        .unwrap_or_else(|e| panic!("scripted-llm did not start: {e}"));
        let url = server.url().to_string();
        Llm { server, url }
    }

    /// The base URL harness is configured with.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url)
    }

    /// Every logged request.
    pub fn requests(&self) -> Vec<Value> {
        match self.server.requests() {
            Value::Array(all) => all,
            other => panic!("requests: {other}"),
        }
    }

    /// The chat requests' bodies, in order.
    pub fn chat_bodies(&self) -> Vec<Value> {
        chat_bodies_at(&self.url)
    }

    /// `{pos, steps, requests, connections}`.
    pub fn state(&self) -> Value {
        self.server.state()
    }
}

/// A minimal HTTP GET over a raw socket (the control endpoints answer with Connection: close).
pub fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A temp workspace: `harness.toml`, `work/` (the work root) and `reports/`.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

/// The standard test config; `{BASE_URL}` is replaced, and `extra` is appended.
pub const CONFIG: &str = r#"
vertical = "test"
work_root = "work"
report_dir = "reports"

[loop]
max_rounds = 4
# The suites written before `finish` existed end turns with a text reply; the finishing
# tests switch this to "tool".
finish = "message"

# Likewise they run each task as if for the first time; the session tests turn this on.
[session]
enabled = false

[litellm]
base_url = "{BASE_URL}"
key_ref = "env:HARNESS_TEST_LLM_KEY"
timeout_secs = 10
max_retries = 2

[models]
mopac-primary = "glm-5.3"
mopac-code = "glm-5.2"
default_tier = "mopac-primary"

[models.classes]
primary = "mopac-primary"
code = "mopac-code"

[tools.bash]
timeout_secs = 10
max_output_bytes = 4000
default = "deny"
allow = ["ls *", "ls", "echo *", "cat *", "pwd", "printf *", "env", "wc *"]
deny = ["rm *"]

[demo]
id = "demo-1"
subject = "Test demo"
prompt = "Say hello."
class = "primary"
"#;

impl Workspace {
    /// A workspace whose config points at `base_url`, with `edit` applied to the config text.
    pub fn new(base_url: &str, edit: impl FnOnce(String) -> String) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        let text = edit(CONFIG.replace("{BASE_URL}", base_url));
        std::fs::write(dir.path().join("harness.toml"), text).unwrap();
        Workspace { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("harness.toml")
    }

    pub fn reports(&self) -> PathBuf {
        self.dir.path().join("reports")
    }

    /// Runs `harness ARGS --config <this config>` with the canary key in the environment.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[("HARNESS_TEST_LLM_KEY", CANARY)])
    }

    /// `harness ARGS --config <this config>` with the canary key, stdin closed and stdout
    /// and stderr piped, to spawn (several at once, or to signal).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare(args);
        cmd.env("HARNESS_TEST_LLM_KEY", CANARY)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `harness ARGS --config <this config>` in the workspace, no stdin, no inherited
    /// `RUST_LOG`/`HARNESS_CONFIG`.
    fn bare(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
        cmd.args(args)
            .arg("--config")
            .arg(self.config())
            .current_dir(self.path())
            .env_remove("RUST_LOG")
            .env_remove("HARNESS_CONFIG")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs harness with exactly these extra variables.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.bare(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run::from(cmd.output().unwrap())
    }

    /// The REPORT files written (excluding REPORT-latest.md), sorted.
    pub fn report_files(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(self.reports()) else {
            return vec![];
        };
        let mut v: Vec<PathBuf> = rd
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with("REPORT-") && n != "REPORT-latest.md"
            })
            .collect();
        v.sort();
        v
    }

    pub fn latest(&self) -> String {
        std::fs::read_to_string(self.reports().join("REPORT-latest.md")).unwrap()
    }

    /// Every file under the workspace, concatenated (for secret scans).
    pub fn all_files_text(&self) -> String {
        let mut out = String::new();
        let mut stack = vec![self.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|n| n != "harness.toml") {
                    out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
                }
            }
        }
        out
    }
}

/// A finished harness process.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// This run with its stdout's wrapped `check` lines joined again (a continuation line,
    /// indented, goes back onto the line before it after a space): tests match a check line
    /// whole, wherever `harness check` broke it to fit 100 columns.
    pub fn unwrapped(mut self) -> Run {
        self.stdout = unwrap_check(&self.stdout);
        self
    }
}

/// `harness check`'s stdout with each wrapped line joined again.
pub fn unwrap_check(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with(' ') && !out.is_empty() {
            out.pop();
            out.push(' ');
            out.push_str(line.trim_start());
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// One REPORT front-matter value, parsed as JSON.
pub fn front(report: &str, key: &str) -> Value {
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in REPORT:\n{report}"));
    serde_json::from_str(&line[key.len() + 2..]).unwrap()
}

/// The reply part of a REPORT (after the front matter).
pub fn body(report: &str) -> String {
    report
        .splitn(3, "---\n")
        .nth(2)
        .unwrap_or("")
        .trim_start_matches('\n')
        .to_string()
}

/// The tool results (`role: tool` contents) of a chat request body, in order.
pub fn tool_results(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// The names of the tools a chat request body offered, in order.
pub fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `harness once --demo` in `ws` (it must exit 0) and returns the tool results the
/// model saw last.
pub fn once_tool_results(ws: &Workspace, llm: &Llm) -> Vec<String> {
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    tool_results(llm.chat_bodies().last().unwrap())
}

/// Script steps.
pub fn tool_call(id: &str, command: &str) -> Value {
    serde_json::json!({"type": "tool_call", "id": id, "command": command})
}

pub fn text(content: &str) -> Value {
    serde_json::json!({"type": "text", "content": content})
}

/// The first line a piped child prints (a server's address or port).
pub fn first_line(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

/// An HTTP request over a raw socket with extra headers; returns (status, body).
pub fn http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    http_bytes(method, url, headers, body.unwrap_or("").as_bytes())
}

/// [`http`] with a body of any bytes (an upload).
pub fn http_bytes(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method != "GET" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let resp = String::from_utf8_lossy(&raw).into_owned();
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Whether a real-server suite may run; says loudly that it skipped when not (see [`skip`]).
pub fn real_server(flag: &str, what: &str) -> bool {
    if std::env::var_os(flag).is_some() {
        return true;
    }
    skip(
        &format!("{what} tests"),
        &format!("{flag} is not set; scripts/test.sh starts the server and sets it"),
    );
    false
}

/// Whether this run is CI's (`CI` set to anything but empty, `0` or `false`): there nothing
/// may skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Records that the tests of `what` did not run because of `why`: under CI a failure (a
/// test that skips there would pass without testing anything); elsewhere one loud line per
/// test binary and subject, written to the process's stderr itself (libtest captures
/// `eprintln!` of passing tests, so a skip said that way is never seen), plus a line in
/// `$HARNESS_TEST_SKIP_LOG` when it is set (scripts/test.sh prints them all at the end).
pub fn skip(what: &str, why: &str) {
    assert!(!in_ci(), "{what} cannot be skipped under CI: {why}");
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.iter().any(|w| w == what) {
        return;
    }
    said.push(what.to_string());
    say_skipped(what, why);
}

/// The loud line on the process's stderr and the line in `$HARNESS_TEST_SKIP_LOG`.
fn say_skipped(what: &str, why: &str) {
    let line = format!("SKIPPED: {what}: {why}");
    let _ = writeln!(std::io::stderr(), "\n!!!!! {line} !!!!!\n");
    if let Some(log) = std::env::var_os("HARNESS_TEST_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Like [`skip`], for a real server no CI machine can provide (a live forge: none is
/// installable there, tests/forge.rs runs scripted ones instead): the same loud line and
/// skip log, but not a failure under CI.
pub fn skip_unprovided(what: &str, why: &str) {
    say_skipped(what, why);
}

/// Runs this test binary's `test` alone without `flag`, once under `CI=true` (it must fail)
/// and once without CI (it must pass and say SKIPPED where a plain `cargo test` shows it):
/// proof that a missing server can neither pass CI nor go unseen.
pub fn assert_skips_loudly(test: &str, flag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips.txt");
    let run = |ci: Option<&str>| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([test, "--exact", "--test-threads=1"])
            .env_remove(flag)
            .env_remove("CI")
            .env("HARNESS_TEST_SKIP_LOG", &log)
            .stdin(Stdio::null());
        if let Some(ci) = ci {
            cmd.env("CI", ci);
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, text) = run(Some("true"));
    assert!(!ok, "{test} passed under CI=true without {flag}:\n{text}");
    assert!(text.contains("cannot be skipped under CI"), "{text}");
    let (ok, text) = run(None);
    assert!(ok, "{test} failed without {flag}:\n{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(
        text.contains("!!!!! SKIPPED: "),
        "the skip is not shown:\n{text}"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.starts_with("SKIPPED: "),
        "not in the skip log: {logged:?}"
    );
}

/// The PLAN's `sandbox:` line for the standard config on this kernel (Landlock when it has
/// it, then with the read set and the exec set).
pub fn sandbox_plan_line() -> String {
    use harness::tools::sandbox;
    let status = sandbox::decide(
        harness::config::SandboxMode::Auto,
        sandbox::kernel_abi(),
        /*network*/ false,
    )
    .unwrap();
    match status {
        sandbox::Status::Landlock { .. } => format!(
            "{}; read set: work_root, a private TMPDIR, @system; exec only bash, cat, echo, env, ls, printf, pwd, wc (+ their dynamic loader, as an interpreter only; no memfd); unix sockets: none",
            status.plan_line(0)
        ),
        _ => status.plan_line(0),
    }
}

/// The chat request bodies a `scripted-llm` at `url` received, in order.
pub fn chat_bodies_at(url: &str) -> Vec<Value> {
    let all: Vec<Value> =
        serde_json::from_str(&http_get(&format!("{url}/_fake/requests"))).unwrap();
    all.into_iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or("")
                .ends_with("/chat/completions")
        })
        .map(|r| r["body"].clone())
        .collect()
}

/// Whether this kernel has Landlock; says so loudly when it does not (CI's kernel has it).
pub fn landlock() -> bool {
    match harness::tools::sandbox::kernel_abi() {
        Ok(_) => true,
        Err(why) => {
            skip(
                "Landlock tests",
                &format!("{why} (CI's kernel has Landlock)"),
            );
            false
        }
    }
}

/// Writes an executable bash script.
/// The dynamic loader of this machine's programs, where it sits at a known path.
pub fn loader_path() -> Option<&'static str> {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/bash\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Whether a process whose command line (arguments joined by blanks) contains `needle` runs.
pub fn process_running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
    })
}

/// Waits until some process runs a command line containing `needle` (a unique argument,
/// e.g. `sleep 7.25`), so a test can signal a harness in the middle of a command.
pub fn wait_for_process(needle: &str) {
    let start = std::time::Instant::now();
    loop {
        if process_running(needle) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{needle:?} never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs git with a throwaway identity; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
