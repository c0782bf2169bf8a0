//! Reliability suite: the claims of DESIGN.md's invariants, checked against the built binary.
//!
//! - crash safety: SIGKILL at random moments of many runs never leaves a torn REPORT, and
//!   nothing a later run trips over;
//! - signals: SIGINT/SIGTERM/SIGHUP/SIGQUIT during a command end its whole process group, write a partial
//!   REPORT and exit 130/143; a second signal exits at once;
//! - the fault matrix from the model's side lives in `tests/faults.rs`;
//! - secrets: every scenario is scanned for every canary key, in every byte written;
//! - disk trouble: a read-only or full report dir is found before any token is spent; a
//!   write that fails mid-way leaves the old `REPORT-latest.md` as it was.
//!
//! Bounds, not timings: every child runs under a generous watchdog that kills it and fails
//! the test ("hung"), and no test asserts how fast anything was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::runs::*;
use common::*;
use serde_json::{json, Value};

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
        let family = family(root, &procs);
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
    start_run_of(&format!("sleep {seconds}"), &format!("sleep {seconds}"))
}

/// A run whose model asks for `command`; returns as [`start_sleeping_run`] once a process
/// running `needle` is there.
fn start_run_of(command: &str, needle: &str) -> (Child, Llm, Workspace, i32) {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": command,
         "content": "Let me wait a while."},
        text("never reached"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_redmine(allow(c, &["sleep *", "cat", "tail *"]))
    });
    let mut child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let pgid = wait_for_descendant(child.id() as i32, needle, &mut child);
    (child, llm, ws, pgid)
}

/// `root` and its descendants among `procs`.
fn family(root: i32, procs: &[(i32, i32, i32)]) -> BTreeSet<i32> {
    let mut family = BTreeSet::from([root]);
    // Parents precede children often but not always: iterate to a fixed point.
    loop {
        let before = family.len();
        for (pid, ppid, _) in procs {
            if family.contains(ppid) {
                family.insert(*pid);
            }
        }
        if family.len() == before {
            return family;
        }
    }
}

/// The pids of the descendants of `root` (itself excluded) named `comm`.
fn descendants_named(root: i32, comm: &str) -> Vec<i32> {
    family(root, &processes())
        .into_iter()
        .filter(|p| *p != root)
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
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
    // SIGKILL cannot be handled: the command spawner, the parent of bash, sees the harness
    // go and kills the command's whole group, grandchildren included.
    let (child, llm, ws, pgid) = start_sleeping_run("39.25");
    signal(&child, libc::SIGKILL);
    let run = finish(child, "killed run");
    assert_eq!(run.code, 137, "{run:?}");
    assert_group_gone(pgid);
    assert_all_reports_complete(&ws, None);
    assert_no_canary(&ws, &run, &llm, &[]);
}

#[test]
fn a_sigkilled_harness_leaves_no_process_of_a_pipeline_nor_its_spawner() {
    // A plain pipeline runs without bash: both stages are the spawner's children, in the
    // first stage's group. Killing the harness must take both, and the spawner itself.
    let (child, llm, ws, pgid) = start_run_of("sleep 38.25 | tail -n 1", "tail -n 1");
    let harness = child.id() as i32;
    let spawners = descendants_named(harness, "harness-spawn");
    assert_eq!(spawners.len(), 1, "one spawner per run");
    let stages: Vec<i32> = processes()
        .into_iter()
        .filter(|(_, _, g)| *g == pgid)
        .map(|(pid, ppid, _)| {
            assert_eq!(ppid, spawners[0], "every stage is the spawner's child");
            pid
        })
        .collect();
    assert_eq!(stages.len(), 2, "both stages in one group: {stages:?}");
    signal(&child, libc::SIGKILL);
    let run = finish(child, "killed run");
    assert_eq!(run.code, 137, "{run:?}");
    assert_group_gone(pgid);
    let start = Instant::now();
    while Path::new(&format!("/proc/{}/comm", spawners[0])).exists()
        && std::fs::read_to_string(format!("/proc/{}/stat", spawners[0]))
            .is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the spawner outlived the harness"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_all_reports_complete(&ws, None);
    assert_no_canary(&ws, &run, &llm, &[]);
}

/// Live processes (zombies excluded) whose command line holds `needle`.
fn running(needle: &str) -> Vec<i32> {
    processes()
        .into_iter()
        .map(|(pid, _, _)| pid)
        .filter(|pid| cmdline(*pid).contains(needle))
        .collect()
}

fn assert_none_running(needle: &str) {
    let start = Instant::now();
    while !running(needle).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{needle} outlived its command: {:?}",
            running(needle)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A workspace whose model runs `commands`, allowed `/usr/bin/python3` and `sleep`, with
/// `timeout_secs`; `None` where this machine has no /usr/bin/python3 (CI has).
fn python_run(commands: &[&str], timeout_secs: u32) -> Option<(Llm, Workspace)> {
    if !Path::new("/usr/bin/python3").exists() {
        assert!(std::env::var_os("CI").is_none(), "CI must have python3");
        eprintln!("SKIPPED: no /usr/bin/python3");
        return None;
    }
    let mut steps: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call(&format!("c{i}"), c))
        .collect();
    steps.push(text("done"));
    let llm = Llm::start(&Value::Array(steps));
    let ws = Workspace::new(&llm.base_url(), |c| {
        set(
            allow(c, &["/usr/bin/python3 *", "sleep *"]),
            "[tools.bash]\ntimeout_secs = 10",
            &format!("[tools.bash]\ntimeout_secs = {timeout_secs}"),
        )
    });
    Some((llm, ws))
}

/// A python script that leaves a process behind outside its group, as a daemon does
/// (fork, `setsid`, fork), running `needle` as its command line.
fn daemonizing(needle: &str) -> String {
    format!(
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(37.75)', '{needle}'])\n    os._exit(0)\nos.wait()\nprint('parent done')\n"
    )
}

#[test]
fn a_process_that_left_the_command_s_group_ends_with_the_command() {
    let needle = "daemon-needle-4471";
    let Some((llm, ws)) = python_run(&["/usr/bin/python3 daemon.py"], 10) else {
        return;
    };
    std::fs::write(ws.path().join("work/daemon.py"), daemonizing(needle)).unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results[0], "parent done\n[exit status: 0]");
    assert_none_running(needle);
}

#[test]
fn a_pipeline_stage_that_left_the_group_is_killed_at_the_timeout() {
    // A later stage of a plain pipeline is no group leader, so `setsid` takes it out of the
    // group the timeout kills; the spawner kills every stage by pid too, or the harness
    // would wait for it.
    let needle = "stage-needle-4472";
    let Some((llm, ws)) = python_run(&["sleep 36.75 | /usr/bin/python3 stage.py"], 1) else {
        return;
    };
    std::fs::write(
        ws.path().join("work/stage.py"),
        format!(
            "import os, sys\nos.setsid()\nos.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(36.5)', '{needle}'])\n"
        ),
    )
    .unwrap();
    let mut child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(30), "timed-out pipeline");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(results[0].contains("timed out"), "{results:#?}");
    assert_none_running(needle);
    assert_none_running("sleep 36.75");
}

/// Field `i` (0 = state) after the `(comm)` of `/proc/PID/stat`.
fn stat_field(pid: i32, i: usize) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(i).unwrap().parse().unwrap()
}

#[test]
fn commands_never_get_the_operator_s_terminal() {
    // harness started from a terminal (a pty as its controlling terminal): its commands run
    // in a session without one, so none can open /dev/tty or push input into it.
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors; no name, termios or size.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    let llm = Llm::start(&json!([tool_call("c1", "sleep 34.25"), text("done")]));
    let ws = Workspace::new(&llm.base_url(), |c| allow(c, &["sleep *"]));
    let mut cmd = harness_cmd(&ws, &["once", "--demo"]);
    // SAFETY: between fork and exec only setsid and ioctl, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = wait_for_descendant(child.id() as i32, "sleep 34.25", &mut child);
    // tty_nr is field 4 after the state.
    assert_ne!(
        stat_field(child.id() as i32, 4),
        0,
        "the harness has the pty"
    );
    let sleep = processes()
        .into_iter()
        .find(|(_, _, g)| *g == pgid)
        .map(|(pid, _, _)| pid)
        .unwrap();
    let (tty, session) = (stat_field(sleep, 4), stat_field(sleep, 3));
    signal(&child, libc::SIGTERM);
    let run = finish(child, "terminal run");
    // SAFETY: closing the two descriptors openpty made.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }
    assert_eq!(run.code, 143, "{run:?}");
    assert_eq!(tty, 0, "the command has a controlling terminal");
    assert_ne!(session, stat_field(std::process::id() as i32, 3));
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

/// Runs harness with `RLIMIT_FSIZE` set to `bytes` (see [`with_file_size_limit`]).
fn run_with_file_size_limit(ws: &Workspace, bytes: u64, ignore_sigxfsz: bool) -> Run {
    let cmd = harness_cmd(ws, &["once", "--demo"]);
    run_bounded(
        with_file_size_limit(cmd, bytes, ignore_sigxfsz),
        "file-size-limited run",
    )
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
    let wrapped = in_full_tmpfs(
        &harness_cmd(&ws, &["once", "--demo"]),
        &ws.reports(),
        ws.path(),
    );
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
    // First with SIGXFSZ ignored by the caller, then at its default (a shell's `ulimit -f`):
    // harness ignores SIGXFSZ itself, so both are the same error (EFBIG, exit 1), where the
    // second used to kill the process in the middle of the write (exit 153, no REPORT).
    let run = run_with_file_size_limit(&ws, 300, true);
    assert_eq!(run.code, 1, "{run:?}");
    assert_no_panic(&run, "failed write");
    assert_eq!(ws.latest(), old);
    assert_eq!(ws.report_files(), old_files);
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());
    assert_no_canary(&ws, &run, &llm, &[]);

    let run = run_with_file_size_limit(&ws, 300, false);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("the REPORT could not be written"),
        "{run:?}"
    );
    assert_eq!(ws.latest(), old);
    assert_eq!(ws.report_files(), old_files);
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());

    // A run killed in the middle of the write (SIGKILL, a power cut) leaves its temp file,
    // never a torn REPORT; the next unhindered run is not bothered by it.
    std::fs::write(
        ws.reports().join(".harness-tmp-killed"),
        "---\nharness_report: 1\n",
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_all_reports_complete(&ws, None);
}
