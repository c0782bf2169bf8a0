//! Reliability suite: the claims of DESIGN.md's invariants, checked against the built binary.
//!
//! - crash safety: SIGKILL at random moments of many runs never leaves a torn REPORT, and
//!   nothing a later run trips over;
//! - signals: SIGINT/SIGTERM/SIGHUP/SIGQUIT during a command end its whole process group, write a partial
//!   REPORT and exit 130/143; a second signal exits at once;
//! - the fault matrix from the model's side: each fault has its exit code and REPORT;
//! - secrets: every scenario is scanned for every canary key, in every byte written;
//! - disk trouble: a read-only or full report dir is found before any token is spent; a
//!   write that fails mid-way leaves the old `REPORT-latest.md` as it was.
//!
//! Bounds, not timings: every child runs under a generous watchdog that kills it and fails
//! the test ("hung"), and no test asserts how fast anything was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// The canary behind the `file:` key ref.
const FILE_CANARY: &str = "sk-filecanary-2b8e6d04a1c97f35";
/// The canary behind the Redmine key ref (present in every config, needed by none of these runs).
const REDMINE_CANARY: &str = "rm-canary-5c1d9e7a3f60b248";
/// How long any single harness run may take before the watchdog calls it hung.
const WATCHDOG: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// helpers

/// A tiny xorshift generator: reproducible from the printed seed, no extra dependency.
struct Rng(u64);

impl Rng {
    fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("rng seed {seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The harness command for a workspace, with the canaries in its environment and no stdin.
fn harness_cmd(ws: &Workspace, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.args(args)
        .arg("--config")
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env_remove("HARNESS_CONFIG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .env("HARNESS_TEST_REDMINE_KEY", REDMINE_CANARY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` under the watchdog; a child still running at the bound is killed and
/// the test fails.
fn wait_bounded(child: &mut Child, bound: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {bound:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs to completion under the watchdog (see [`finish`]).
fn run_bounded(mut cmd: Command, what: &str) -> Run {
    finish(cmd.spawn().unwrap(), what)
}

/// Waits for a spawned run under the watchdog; stdout and stderr are drained on threads so
/// a chatty child cannot block on a full pipe. Death by signal N reads as exit 128 + N.
fn finish(mut child: Child, what: &str) -> Run {
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child, WATCHDOG, what);
    Run {
        code: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

fn assert_no_panic(run: &Run, what: &str) {
    assert!(
        !run.stderr.contains("panicked"),
        "{what}: the harness panicked:\n{}",
        run.stderr
    );
}

/// A REPORT is complete: front matter whose every value parses as JSON, the closing
/// delimiter, and a body that ends with `body_end` (or, with `None`, any non-empty body).
fn assert_complete(path: &Path, text: &str, body_end: Option<&str>) {
    let fail = |why: &str| -> ! { panic!("{}: {why}:\n{text}", path.display()) };
    let Some(rest) = text.strip_prefix("---\n") else {
        fail("no opening ---")
    };
    let Some((front_matter, body)) = rest.split_once("\n---\n\n") else {
        fail("no closing ---")
    };
    let mut keys = BTreeSet::new();
    for line in front_matter.lines() {
        let Some((key, value)) = line.split_once(": ") else {
            fail(&format!("front matter line without `: `: {line:?}"))
        };
        if serde_json::from_str::<Value>(value).is_err() {
            fail(&format!("value of {key} is not JSON"));
        }
        keys.insert(key.to_string());
    }
    for key in ["harness_report", "run_id", "stop_reason", "round_log"] {
        if !keys.contains(key) {
            fail(&format!("front matter has no {key}"));
        }
    }
    match body_end {
        Some(end) if !body.ends_with(end) => fail(&format!("body does not end with {end:?}")),
        None if body.trim().is_empty() => fail("empty body"),
        _ => {}
    }
}

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    rd.map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".harness-tmp-")
        })
        .collect()
}

/// Every REPORT in the workspace's report dir (REPORT-latest.md included) is complete.
fn assert_all_reports_complete(ws: &Workspace, body_end: Option<&str>) {
    for p in ws.report_files() {
        assert_complete(&p, &std::fs::read_to_string(&p).unwrap(), body_end);
    }
    let latest = ws.reports().join("REPORT-latest.md");
    if latest.exists() {
        assert_complete(
            &latest,
            &std::fs::read_to_string(&latest).unwrap(),
            body_end,
        );
    }
}

/// Adds allow rules in front of the standard config's.
fn allow(config: String, rules: &[&str]) -> String {
    let quoted: Vec<String> = rules.iter().map(|r| format!("{r:?}, ")).collect();
    config.replacen("allow = [", &format!("allow = [{}", quoted.concat()), 1)
}

fn set(config: String, from: &str, to: &str) -> String {
    assert!(config.contains(from), "config has no {from:?}");
    config.replacen(from, to, 1)
}

// ---------------------------------------------------------------------------------------
// crash safety

/// A cassette with one text reply; its body is large enough (64 KiB) that a kill lands in
/// the middle of a write now and then, and ends with a marker a torn write would lose.
const END_MARKER: &str = "END-OF-REPORT-7d1f\n";

fn write_cassette(path: &Path) {
    let filler: String = (0..800)
        .map(|i| format!("line {i:04}: the quick brown fox jumps over the lazy dog\n"))
        .collect();
    let reply = format!("# Crash test\n\n{filler}{END_MARKER}");
    let cassette = json!({
        "harness_cassette": 1,
        "replies": [{
            "model": "glm-5.3",
            "response": {
                "model": "glm-5.3",
                "choices": [{"message": {"content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
            }
        }]
    });
    std::fs::write(path, serde_json::to_vec(&cassette).unwrap()).unwrap();
}

#[test]
fn sigkill_at_random_moments_never_leaves_a_torn_report() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let cassette = ws.path().join("crash.cassette.json");
    write_cassette(&cassette);
    let args = ["once", "--demo", "--replay", cassette.to_str().unwrap()];

    // Calibrate: how long a whole run takes here (the median of five), so that the kills
    // spread over all of it, half of them over its second half, where the writes are.
    let mut took: Vec<u64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let run = run_bounded(harness_cmd(&ws, &args), "calibration run");
            assert_eq!(run.code, 0, "{run:?}");
            start.elapsed().as_micros() as u64
        })
        .collect();
    took.sort();
    let mut window_us = took[2].max(1000);

    let mut rng = Rng::from_clock();
    let budget = Duration::from_secs(15);
    let started = Instant::now();
    let (mut killed, mut finished, mut runs) = (0u32, 0u32, 0u32);
    let mut checked = BTreeSet::new();
    while runs < 600 && (runs < 300 || started.elapsed() < budget) {
        runs += 1;
        let mut child = harness_cmd(&ws, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let delay = match runs % 2 {
            0 => rng.below(window_us),
            _ => window_us / 2 + rng.below(window_us / 2),
        };
        std::thread::sleep(Duration::from_micros(delay));
        let _ = child.kill(); // SIGKILL
        let status = wait_bounded(&mut child, WATCHDOG, "killed run");
        // The window follows the machine's load: it shrinks while runs outpace the kills and
        // grows while every run dies early.
        match status.signal() {
            Some(9) => {
                killed += 1;
                window_us = window_us * 21 / 20;
            }
            _ => {
                assert_eq!(status.code(), Some(0), "run {runs}: {status:?}");
                finished += 1;
                window_us = (window_us * 9 / 10).max(1000);
            }
        }
        // Whatever the kill interrupted, every REPORT visible now is whole.
        let latest = ws.reports().join("REPORT-latest.md");
        if let Ok(text) = std::fs::read_to_string(&latest) {
            assert_complete(&latest, &text, Some(END_MARKER));
        }
        for p in ws.report_files() {
            if checked.insert(p.clone()) {
                assert_complete(&p, &std::fs::read_to_string(&p).unwrap(), Some(END_MARKER));
            }
        }
        // A later run is never tripped up by what a killed one left.
        if runs % 50 == 0 {
            let run = run_bounded(harness_cmd(&ws, &args), "run after kills");
            assert_eq!(run.code, 0, "after {runs} runs: {run:?}");
            assert_no_panic(&run, "run after kills");
        }
    }
    eprintln!(
        "crash safety: {runs} runs in {:?} ({killed} killed, {finished} finished), window {window_us} us",
        started.elapsed()
    );
    assert!(killed > 0, "no run was ever killed: the window is wrong");
    assert_all_reports_complete(&ws, Some(END_MARKER));

    // Temp files of killed runs are invisible to readers (dot names, never REPORT-*), and
    // the next run clears those older than ten minutes.
    let leftovers = temp_files(&ws.reports());
    // A temp file longer than the 5-byte probe is a REPORT write the kill cut short.
    let mid_write = leftovers
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 5))
        .count();
    eprintln!(
        "crash safety: {} temp files left by killed runs, {mid_write} of them REPORT writes",
        leftovers.len()
    );
    assert!(leftovers.len() as u32 <= killed * 2 + 1);
    let old = std::time::SystemTime::now() - Duration::from_secs(11 * 60);
    for p in &leftovers {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let run = run_bounded(harness_cmd(&ws, &args), "cleanup run");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());
    assert_all_reports_complete(&ws, Some(END_MARKER));
}

// ---------------------------------------------------------------------------------------
// signals

/// `(pid, ppid, pgid)` of every process.
fn processes() -> Vec<(i32, i32, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" {
            out.push((pid, f[1].parse().unwrap_or(0), f[2].parse().unwrap_or(0)));
        }
    }
    out
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Waits until a descendant of `root` runs a command line containing `needle`; returns its
/// process group.
fn wait_for_descendant(root: i32, needle: &str, child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        let procs = processes();
        let mut family = BTreeSet::from([root]);
        // Parents precede children often but not always: iterate to a fixed point.
        loop {
            let before = family.len();
            for (pid, ppid, _) in &procs {
                if family.contains(ppid) {
                    family.insert(*pid);
                }
            }
            if family.len() == before {
                break;
            }
        }
        for (pid, _, pgid) in &procs {
            if *pid != root && family.contains(pid) && cmdline(*pid).contains(needle) {
                return *pgid;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("harness exited ({status:?}) before running {needle:?}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no process running {needle:?} appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether any live process is in group `pgid` (zombies excluded).
fn group_alive(pgid: i32) -> bool {
    processes().iter().any(|(_, _, g)| *g == pgid)
}

fn assert_group_gone(pgid: i32) {
    let start = Instant::now();
    while group_alive(pgid) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "process group {pgid} of the bash command outlived the harness"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A run whose model asks for a long `sleep`; returns the running harness, the server, the
/// workspace and the sleep's process group once it is running.
fn start_sleeping_run(seconds: &str) -> (Child, Llm, Workspace, i32) {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": format!("sleep {seconds}"),
         "content": "Let me wait a while."},
        text("never reached"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| with_redmine(allow(c, &["sleep *"])));
    let mut child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let pgid = wait_for_descendant(child.id() as i32, &format!("sleep {seconds}"), &mut child);
    (child, llm, ws, pgid)
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn a_signal_during_a_command_kills_its_group_and_writes_a_partial_report() {
    for (sig, code, seconds) in [
        (libc::SIGINT, 130, "31.25"),
        (libc::SIGTERM, 143, "32.25"),
        (libc::SIGHUP, 129, "37.25"),
        (libc::SIGQUIT, 131, "38.25"),
    ] {
        let (child, llm, ws, pgid) = start_sleeping_run(seconds);
        signal(&child, sig);
        let run = finish(child, "interrupted run");
        assert_eq!(run.code, code, "signal {sig}: {run:?}");
        assert_no_panic(&run, "interrupted run");
        assert_group_gone(pgid);
        let report = ws.latest();
        assert_complete(Path::new("REPORT-latest.md"), &report, None);
        assert_eq!(front(&report, "stop_reason"), "interrupted", "{report}");
        assert_eq!(front(&report, "rounds"), 1);
        assert_eq!(
            front(&report, "round_log")[0]["tools"][0]["ending"],
            "interrupted",
            "{report}"
        );
        // The partial REPORT carries the last text the model produced.
        assert_eq!(body(&report), "Let me wait a while.\n");
        // The interrupted command was never followed by another request.
        assert_eq!(llm.chat_bodies().len(), 1);
        assert_no_canary(&ws, &run, &llm, &[]);
    }
}

#[test]
fn a_sigkilled_harness_leaves_no_command_running() {
    // SIGKILL cannot be handled: the watchdog between the harness and bash sees its parent
    // die and kills the command's whole group, grandchildren included.
    let (child, llm, ws, pgid) = start_sleeping_run("39.25");
    signal(&child, libc::SIGKILL);
    let run = finish(child, "killed run");
    assert_eq!(run.code, 137, "{run:?}");
    assert_group_gone(pgid);
    assert_all_reports_complete(&ws, None);
    assert_no_canary(&ws, &run, &llm, &[]);
}

#[test]
fn a_second_signal_exits_at_once_and_still_kills_the_group() {
    // Two signals back to back: whichever way the race between them goes, the run ends at
    // once with 128 + one of them, and the command's group does not survive it.
    // The race is real, so each pair is tried a few times.
    for (first, second, seconds) in [
        (libc::SIGTERM, libc::SIGINT, "33.25"),
        (libc::SIGINT, libc::SIGINT, "34.25"),
        (libc::SIGTERM, libc::SIGTERM, "35.25"),
        (libc::SIGINT, libc::SIGTERM, "36.25"),
    ] {
        let (child, llm, ws, pgid) = start_sleeping_run(seconds);
        signal(&child, first);
        signal(&child, second);
        let run = finish(child, "twice-signalled run");
        assert!(
            run.code == 128 + first || run.code == 128 + second,
            "signals {first}, {second}: {run:?}"
        );
        assert_no_panic(&run, "twice-signalled run");
        assert_group_gone(pgid);
        // If a REPORT was written, it is whole.
        assert_all_reports_complete(&ws, None);
        assert_no_canary(&ws, &run, &llm, &[]);
    }
}

// ---------------------------------------------------------------------------------------
// the fault matrix

/// A change to the standard config text.
type Edit = fn(String) -> String;

struct Fault {
    name: &'static str,
    steps: Value,
    /// Applied to the config text.
    edit: Edit,
    code: i32,
    stop_reason: &'static str,
    /// Substrings the REPORT's `error` must contain (lowercased), for failures.
    error_has: &'static [&'static str],
    /// The REPORT body, exactly; empty for "no reply".
    body: String,
    /// Chat requests the server must have seen.
    requests: usize,
}

fn one_retry(c: String) -> String {
    set(c, "max_retries = 2", "max_retries = 1")
}

fn short_timeout(c: String) -> String {
    set(
        one_retry(c),
        "timeout_secs = 10\nmax_retries",
        "timeout_secs = 1\nmax_retries",
    )
}

fn streaming(c: String) -> String {
    set(
        c,
        "max_retries = 2\n",
        "max_retries = 2\nstreaming = true\n",
    )
}

fn streaming_one_retry(c: String) -> String {
    one_retry(streaming(c))
}

fn keep(c: String) -> String {
    c
}

/// A case the harness recovers from: exit 0, `completed`, the last step's text as the body.
fn recovers(name: &'static str, steps: Vec<Value>, edit: Edit, requests: usize) -> Fault {
    let body = format!("{}\n", steps.last().unwrap()["content"].as_str().unwrap());
    Fault {
        name,
        steps: Value::Array(steps),
        edit,
        code: 0,
        stop_reason: "completed",
        error_has: &[],
        body,
        requests,
    }
}

/// A case that ends the turn: exit 4, `llm_error`, no reply, `error` naming `error_has`.
fn fails(
    name: &'static str,
    steps: Vec<Value>,
    edit: Edit,
    error_has: &'static [&'static str],
    requests: usize,
) -> Fault {
    Fault {
        name,
        steps: Value::Array(steps),
        edit,
        code: 4,
        stop_reason: "llm_error",
        error_has,
        body: String::new(),
        requests,
    }
}

/// A fault step with no options.
fn step(kind: &str) -> Value {
    json!({ "type": kind })
}

fn err(status: u16) -> Value {
    json!({"type": "error", "status": status, "body": {"error": {"message": format!("scripted {status}")}}})
}

fn http_faults() -> Vec<Fault> {
    let ok = || text("Recovered: all good.");
    let slow_down = json!({"type": "error", "status": 429, "headers": {"Retry-After": "1"}});
    let tool = json!({"type": "tool_call", "id": "c1", "command": "echo hi", "content": "Checking first."});
    let (drop, hang, malformed) = (step("drop"), step("hang"), step("malformed"));
    vec![
        recovers("429 with Retry-After", vec![slow_down, ok()], keep, 2),
        recovers("429 without Retry-After", vec![err(429), ok()], keep, 2),
        fails("429 every time", vec![err(429); 3], one_retry, &["429"], 2),
        recovers("502 then success", vec![err(502), ok()], keep, 2),
        Fault {
            body: "Checking first.\n".to_string(),
            ..fails(
                "500 after a tool round",
                vec![tool, err(500), err(500)],
                one_retry,
                &["500"],
                3,
            )
        },
        fails(
            "401 is not retried",
            vec![err(401), ok()],
            keep,
            &["401"],
            1,
        ),
        recovers(
            "dropped connection then success",
            vec![drop.clone(), ok()],
            keep,
            2,
        ),
        fails("dropped every time", vec![drop; 3], one_retry, &[], 2),
        fails(
            "hang past timeout_secs",
            vec![hang.clone(); 3],
            short_timeout,
            &["time"],
            2,
        ),
        recovers("hang once then success", vec![hang, ok()], short_timeout, 2),
        recovers(
            "malformed body then success",
            vec![malformed.clone(), ok()],
            keep,
            2,
        ),
        fails(
            "malformed every time",
            vec![malformed; 3],
            one_retry,
            &[],
            2,
        ),
        fails(
            "empty reply every time",
            vec![step("empty"); 3],
            one_retry,
            &[],
            2,
        ),
    ]
}

fn stream_faults() -> Vec<Fault> {
    let ok = || text("Streamed: all good.");
    let cut = |n: usize| json!({"type": "drop", "after_chunks": n});
    let died = json!({"type": "stream_error", "after_chunks": 1, "message": "upstream died"});
    let on = streaming;
    let on_1 = streaming_one_retry;
    vec![
        recovers("stream: clean", vec![ok()], on, 1),
        recovers("stream: truncated then success", vec![cut(2), ok()], on, 2),
        recovers(
            "stream: in-band error then success",
            vec![died, ok()],
            on,
            2,
        ),
        fails(
            "stream: malformed every time",
            vec![step("malformed"); 2],
            on_1,
            &[],
            2,
        ),
        fails(
            "stream: truncated every time",
            vec![cut(3), cut(1)],
            on_1,
            &[],
            2,
        ),
    ]
}

/// Whether this build knows `[litellm] streaming` (a config key added by a later change).
fn streaming_supported() -> bool {
    let ws = Workspace::new("http://127.0.0.1:9/v1", streaming);
    let run = ws.run(&["once", "--demo", "--dry-run"]);
    run.code == 0
}

/// Runs one fault case; returns a description of what went wrong, if anything.
fn run_fault(f: &Fault, key: KeyRef) -> Result<(), String> {
    let llm = Llm::start(&f.steps);
    let ws = Workspace::new(&llm.base_url(), |c| with_redmine(key.apply((f.edit)(c))));
    let record = ws.path().join("work/recorded.cassette.json");
    let mut cmd = harness_cmd(
        &ws,
        &["once", "--demo", "--record", record.to_str().unwrap()],
    );
    key.env(&mut cmd);
    let run = run_bounded(cmd, f.name);
    let what = format!("{} ({key:?}): {run:?}", f.name);
    if run.stderr.contains("panicked") {
        return Err(format!("panicked: {what}"));
    }
    if run.code != f.code {
        return Err(format!("exit {} != {}: {what}", run.code, f.code));
    }
    let report = ws.latest();
    assert_complete(Path::new("REPORT-latest.md"), &report, None);
    if front(&report, "stop_reason") != f.stop_reason {
        return Err(format!("stop_reason: {what}\n{report}"));
    }
    let error = front(&report, "error");
    if f.code == 0 && !error.is_null() {
        return Err(format!("error set on success: {what}\n{report}"));
    }
    let lower = error.as_str().unwrap_or("").to_lowercase();
    for needle in f.error_has {
        if !lower.contains(needle) {
            return Err(format!("error lacks {needle:?}: {what}\n{report}"));
        }
    }
    let got_body = body(&report);
    if f.body.is_empty() {
        if !got_body.starts_with("_No reply") {
            return Err(format!("unexpected body: {what}\n{report}"));
        }
    } else if got_body != f.body {
        return Err(format!("body {got_body:?} != {:?}: {what}", f.body));
    }
    let requests = llm.chat_bodies().len();
    if requests != f.requests {
        return Err(format!(
            "{requests} chat requests, expected {}: {what}",
            f.requests
        ));
    }
    if f.code == 0 && !run.stdout.trim_end().ends_with(".md") {
        return Err(format!("stdout is not the REPORT path: {what}"));
    }
    assert_no_canary(&ws, &run, &llm, &[("file canary", FILE_CANARY)]);
    Ok(())
}

/// Which key ref the litellm key comes from.
#[derive(Debug, Clone)]
enum KeyRef {
    Env,
    File(PathBuf),
}

impl KeyRef {
    fn apply(&self, config: String) -> String {
        match self {
            KeyRef::Env => config,
            KeyRef::File(p) => set(
                config,
                "key_ref = \"env:HARNESS_TEST_LLM_KEY\"",
                &format!("key_ref = \"file:{}\"", p.display()),
            ),
        }
    }

    fn env(&self, cmd: &mut Command) {
        if let KeyRef::File(_) = self {
            cmd.env_remove("HARNESS_TEST_LLM_KEY");
        }
    }
}

#[test]
fn the_fault_matrix_from_the_model_side() {
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("llm.key");
    std::fs::write(&key_file, format!("{FILE_CANARY}\n")).unwrap();
    let mut faults = http_faults();
    if streaming_supported() {
        faults.extend(stream_faults());
    } else {
        eprintln!("SKIPPED: the streaming faults ([litellm] streaming is not in this build)");
    }
    // Cases alternate between an env: and a file: key ref, and run a few at a time: they
    // mostly wait on backoff.
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = faults
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let key = if i % 2 == 0 {
                    KeyRef::Env
                } else {
                    KeyRef::File(key_file.clone())
                };
                s.spawn(move || run_fault(f, key))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ---------------------------------------------------------------------------------------
// secrets

/// Adds a `[redmine]` section whose key is the Redmine canary, so that every run carries a
/// third secret it must never print.
fn with_redmine(config: String) -> String {
    format!(
        "{config}\n[redmine]\nurl = \"http://127.0.0.1:9\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n"
    )
}

/// Fails if any canary (or either half of one) appears in stdout, stderr, any file under the
/// workspace but its config, or anything the server received but the Authorization header.
fn assert_no_canary(ws: &Workspace, run: &Run, llm: &Llm, extra: &[(&str, &str)]) {
    let mut requests = llm.requests();
    for r in &mut requests {
        if let Some(h) = r["headers"].as_object_mut() {
            h.remove("authorization");
        }
    }
    let sources = [
        ("stdout", run.stdout.clone()),
        ("stderr", run.stderr.clone()),
        ("files", ws.all_files_text()),
        ("requests", serde_json::to_string(&requests).unwrap()),
    ];
    let mut canaries = vec![
        ("llm canary", CANARY),
        ("redmine canary", REDMINE_CANARY),
        ("file canary", FILE_CANARY),
    ];
    canaries.extend_from_slice(extra);
    for (source, text) in &sources {
        for (name, canary) in &canaries {
            let (a, b) = canary.split_at(canary.len() / 2);
            for needle in [*canary, a, b] {
                assert!(
                    !text.contains(needle),
                    "{name} ({needle}) leaked into {source}:\n{text}"
                );
            }
        }
    }
}

#[test]
fn secrets_never_leak_even_when_the_model_goes_looking() {
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("llm.key");
    std::fs::write(&key_file, format!("{FILE_CANARY}\n")).unwrap();
    for key in [KeyRef::Env, KeyRef::File(key_file.clone())] {
        // The model reads the environment and the key file, and the server echoes an
        // error body holding the key: none of it may come back out.
        let llm = Llm::start(&json!([
            tool_call("c1", "env"),
            tool_call("c2", &format!("cat {}", key_file.display())),
            tool_call("c3", &format!("echo {CANARY} {FILE_CANARY} {REDMINE_CANARY}")),
            {"type": "error", "status": 401, "body": {"error": {"message": format!("bad key {CANARY} / {FILE_CANARY}")}}},
        ]));
        let ws = Workspace::new(&llm.base_url(), |c| {
            with_redmine(key.apply(set(c, "max_rounds = 4", "max_rounds = 6")))
        });
        let record = ws.path().join("recorded.cassette.json");
        let mut cmd = harness_cmd(
            &ws,
            &[
                "once",
                "--demo",
                "-vv",
                "--record",
                record.to_str().unwrap(),
            ],
        );
        key.env(&mut cmd);
        let run = run_bounded(cmd, "secret hunt");
        assert_eq!(run.code, 4, "{key:?}: {run:?}");
        assert_no_panic(&run, "secret hunt");
        assert_eq!(llm.chat_bodies().len(), 4, "{run:?}");
        // The echo of the secret in use came back masked; the others are not secrets of
        // this run, so the model sees them as it wrote them, and they only live in the
        // requests the harness sent. Scan everything but that.
        let in_use = match key {
            KeyRef::Env => CANARY,
            KeyRef::File(_) => FILE_CANARY,
        };
        let bodies = llm.chat_bodies();
        let echoed = bodies[3]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(echoed.contains("[redacted]"), "{echoed}");
        assert!(!echoed.contains(in_use), "{echoed}");
        let sources = [
            ("stdout", run.stdout.clone()),
            ("stderr", run.stderr.clone()),
            ("files", ws.all_files_text()),
        ];
        for (source, text) in sources {
            assert!(
                !text.contains(in_use),
                "{key:?}: the key leaked into {source}:\n{text}"
            );
        }
        // The tool results of `env` and `cat` never carried the key in use.
        for b in &bodies[1..3] {
            let tools: Vec<&Value> = b["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .collect();
            let text = serde_json::to_string(&tools).unwrap();
            assert!(!text.contains(in_use), "{key:?}: {text}");
            assert!(!text.contains(REDMINE_CANARY), "{key:?}: {text}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// disk trouble

/// Runs harness with `RLIMIT_FSIZE` set to `bytes`: a write past it fails with EFBIG (with
/// SIGXFSZ ignored) or kills the process with SIGXFSZ, as a full disk would fail it mid-way.
fn run_with_file_size_limit(ws: &Workspace, bytes: u64, ignore_sigxfsz: bool) -> Run {
    let mut cmd = harness_cmd(ws, &["once", "--demo"]);
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the hook.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if ignore_sigxfsz {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    run_bounded(cmd, "file-size-limited run")
}

fn connections(llm: &Llm) -> u64 {
    llm.state()["connections"].as_u64().unwrap()
}

/// A report dir that cannot be written is found before the first request.
fn assert_refused_before_tokens(report_dir: &str, why: &str) {
    let llm = Llm::start(&json!([text("should never be asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_redmine(set(
            c,
            "report_dir = \"reports\"",
            &format!("report_dir = {report_dir:?}"),
        ))
    });
    std::fs::write(ws.path().join("a-file"), "not a directory").unwrap();
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), why);
    assert_eq!(run.code, 1, "{why}: {run:?}");
    assert_no_panic(&run, why);
    assert!(run.stderr.contains("report dir"), "{why}: {}", run.stderr);
    assert_eq!(connections(&llm), 0, "{why}: the model was reached");
}

#[test]
fn an_unwritable_report_dir_is_refused_before_any_token() {
    // Proven everywhere, root included: a parent that is a regular file, and a directory
    // on a filesystem that refuses new files (procfs).
    assert_refused_before_tokens("a-file/reports", "parent is a file");
    assert_refused_before_tokens("/proc/self/fdinfo", "procfs directory");

    // The real thing, where the kernel lets us: an immutable directory (root cannot write
    // into it either).
    let llm = Llm::start(&json!([text("should never be asked")]));
    let ws = Workspace::new(&llm.base_url(), with_redmine);
    std::fs::create_dir(ws.reports()).unwrap();
    let immutable = Command::new("chattr")
        .arg("+i")
        .arg(ws.reports())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if immutable {
        let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "immutable dir");
        let _ = Command::new("chattr").arg("-i").arg(ws.reports()).status();
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stderr.contains("not writable"), "{}", run.stderr);
        assert_eq!(connections(&llm), 0, "the model was reached");
    } else {
        eprintln!("SKIPPED: chattr +i is not available here (no CAP_LINUX_IMMUTABLE or an unsupported filesystem)");
    }
}

#[test]
fn a_full_report_dir_is_refused_before_any_token() {
    // A file-size limit of 1 byte fails the preflight probe's write the way a full disk
    // does (EFBIG there, ENOSPC on a disk): proven everywhere, root included.
    let llm = Llm::start(&json!([text("should never be asked")]));
    let ws = Workspace::new(&llm.base_url(), with_redmine);
    let run = run_with_file_size_limit(&ws, 1, true);
    assert_eq!(run.code, 1, "{run:?}");
    assert_no_panic(&run, "full disk");
    assert!(run.stderr.contains("not writable"), "{}", run.stderr);
    assert_eq!(connections(&llm), 0, "the model was reached");
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());

    // A really full filesystem, where a private mount namespace is allowed.
    let probe = Command::new("unshare")
        .args(["-m", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !probe {
        eprintln!("SKIPPED: a real full tmpfs (unshare -m is not permitted here)");
        return;
    }
    let llm = Llm::start(&json!([text("should never be asked")]));
    let ws = Workspace::new(&llm.base_url(), with_redmine);
    std::fs::create_dir(ws.reports()).unwrap();
    let script = r#"mount -t tmpfs -o size=64k tmpfs "$0" || exit 99
dd if=/dev/zero of="$0/fill" bs=4k >/dev/null 2>&1
exec "$@""#;
    let cmd = harness_cmd(&ws, &[]);
    let harness = cmd.get_program().to_owned();
    let args: Vec<_> = ["once", "--demo", "--config"]
        .iter()
        .map(std::ffi::OsString::from)
        .chain([ws.config().into_os_string()])
        .collect();
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["-m", "sh", "-c", script])
        .arg(ws.reports())
        .arg(harness)
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
        .current_dir(ws.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = run_bounded(wrapped, "full tmpfs");
    if run.code == 99 {
        eprintln!("SKIPPED: a real full tmpfs (mounting is not permitted here)");
        return;
    }
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("not writable"), "{}", run.stderr);
    assert_eq!(connections(&llm), 0, "the model was reached");
}

#[test]
fn a_write_that_fails_midway_leaves_the_old_latest_intact() {
    let llm = Llm::start(
        &json!({"loop": true, "steps": [text("# Report\n\nThe first, complete answer.")]}),
    );
    let ws = Workspace::new(&llm.base_url(), with_redmine);
    let run = ws.run_env(
        &["once", "--demo"],
        &[
            ("HARNESS_TEST_LLM_KEY", CANARY),
            ("HARNESS_TEST_REDMINE_KEY", REDMINE_CANARY),
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let old = ws.latest();
    let old_files = ws.report_files();

    // 300 bytes: the preflight probe (5 bytes) passes, the REPORT (about 1 KiB) cannot.
    // First as an error (EFBIG: the writeback fails, exit 1), then as a crash (SIGXFSZ kills
    // the process in the middle of the write).
    let run = run_with_file_size_limit(&ws, 300, true);
    assert_eq!(run.code, 1, "{run:?}");
    assert_no_panic(&run, "failed write");
    assert_eq!(ws.latest(), old);
    assert_eq!(ws.report_files(), old_files);
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());
    assert_no_canary(&ws, &run, &llm, &[]);

    let run = run_with_file_size_limit(&ws, 300, false);
    assert_eq!(run.code, 128 + libc::SIGXFSZ, "{run:?}");
    assert_eq!(ws.latest(), old);
    assert_eq!(ws.report_files(), old_files);

    // And the next unhindered run is not bothered by the killed one's temp file.
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_all_reports_complete(&ws, None);
}
