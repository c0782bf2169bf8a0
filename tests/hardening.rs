//! Hardening through the built binary (issue 10 §3, §4, §6, §7): signals before the turn,
//! bounded inputs, masked URLs and readable config errors, delivery failures. Faults come
//! from a tiny HTTP stub (tests/stub) that can delay, or send an endless body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::stub;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::runs::harness_cmd;
use common::{Workspace, CANARY};
use stub::{Reply, Stub};

/// Exit code (128 + N for death by signal N) and stderr, waiting at most `bound`.
fn finish(mut child: Child, bound: Duration) -> (i32, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("harness still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    (code, err)
}

fn with_redmine(config: String, url: &str) -> String {
    format!(
        "{config}\n[redmine]\nurl = \"{url}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n"
    )
}

/// Starts harness, sends SIGTERM once `peer` saw a request for `needle`, and proves the run
/// ended at once with 143; returns its stderr.
fn sigterm_when(ws: &Workspace, args: &[&str], peer: &Stub, needle: &str) -> String {
    let child = harness_cmd(ws, args).spawn().unwrap();
    peer.wait_for(needle, Duration::from_secs(20));
    let start = Instant::now();
    // SAFETY: kill only sends a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let (code, err) = finish(child, Duration::from_secs(20));
    assert_eq!(code, 143, "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "not at once: {err}"
    );
    err
}

fn no_writes(requests: &[String]) -> bool {
    requests.iter().all(|r| r.starts_with("GET "))
}

// ---------------------------------------------------------------------------------------
// §3 a signal before the turn

#[test]
fn a_signal_during_a_slow_intake_claims_nothing_and_posts_nothing() {
    let redmine = Stub::start(|_, path, _| {
        if path.starts_with("/users/current.json") {
            Reply::json(r#"{"user":{"id":1,"login":"bot"}}"#)
        } else {
            // The scope listing takes a minute: the signal arrives while intake waits.
            Reply::json(r#"{"issues":[{"id":7,"subject":"x","updated_on":"2026-01-01T00:00:00Z"}],"total_count":1}"#)
                .after(Duration::from_secs(60))
        }
    });
    let llm = Stub::start(|_, _, _| Reply::json("{}"));
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        with_redmine(c, &redmine.url)
    });
    let err = sigterm_when(&ws, &["once"], &redmine, "/issues.json");
    assert!(err.contains("before the turn"), "{err}");
    assert!(no_writes(&redmine.requests()), "{:?}", redmine.requests());
    assert_eq!(llm.requests(), Vec::<String>::new());
    assert!(!ws.reports().join("REPORT-latest.md").exists());
}

#[test]
fn a_signal_during_the_llm_preflight_spends_no_token_and_writes_no_report() {
    let llm = Stub::start(|_, path, _| {
        if path.ends_with("/models") {
            Reply::json(r#"{"data":[{"id":"glm-5.3"}]}"#).after(Duration::from_secs(60))
        } else {
            Reply::json("{}")
        }
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        c.replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let err = sigterm_when(&ws, &["once", "--demo"], &llm, "/models");
    assert!(err.contains("before the turn"), "{err}");
    assert_eq!(llm.requests(), vec!["GET /v1/models".to_string()]);
    assert!(!ws.reports().join("REPORT-latest.md").exists());
}

/// A slow LLM preflight (`GET /models` takes a minute) behind a Redmine intake that claims.
fn claiming_run(redmine: &stub::MiniRedmine) -> (Workspace, Stub) {
    let llm = Stub::start(|_, path, _| {
        Reply::json(r#"{"data":[{"id":"glm-5.3"}]}"#).after(if path.ends_with("/models") {
            Duration::from_secs(60)
        } else {
            Duration::ZERO
        })
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        with_redmine(
            c.replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n"),
            &redmine.stub.url,
        )
    });
    (ws, llm)
}

/// The claim note and then the release note, of one run, and nothing else.
fn assert_claimed_then_released(notes: &[String]) {
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("[harness-claim] run="), "{notes:?}");
    assert!(notes[1].starts_with("[harness-release] run="), "{notes:?}");
    let run = |n: &str| {
        n.split_whitespace()
            .nth(1)
            .map(|r| r.trim_end_matches(':').to_string())
    };
    assert_eq!(run(&notes[0]), run(&notes[1]), "{notes:?}");
    assert!(notes[1].contains("interrupted by signal 15"), "{notes:?}");
}

#[test]
fn a_signal_after_the_claim_releases_it() {
    let redmine = stub::MiniRedmine::start(Duration::ZERO);
    let (ws, llm) = claiming_run(&redmine);
    sigterm_when(&ws, &["once"], &llm, "/models");
    assert_claimed_then_released(&redmine.notes());
    assert!(!ws.reports().join("REPORT-latest.md").exists());
}

#[test]
fn a_signal_during_the_claim_lets_it_finish_then_releases_it() {
    // The claim's PUT takes a second: the signal arrives while it is in flight. The claim
    // is not cut midway (its note would stay, unreleased); it is released right after.
    let redmine = stub::MiniRedmine::start(Duration::from_secs(1));
    let (ws, llm) = claiming_run(&redmine);
    sigterm_when(&ws, &["once"], &redmine.stub, "PUT /issues/7.json");
    assert_claimed_then_released(&redmine.notes());
    assert_eq!(llm.requests(), Vec::<String>::new());
    assert!(!ws.reports().join("REPORT-latest.md").exists());
}

// ---------------------------------------------------------------------------------------
// §4 bounded memory on every input

/// Runs harness with `--config path` (no workspace), bounded in time.
fn run_with_config(path: &std::path::Path) -> (i32, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--demo", "--config"])
        .arg(path)
        .env_remove("HARNESS_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(10))
}

#[test]
fn a_config_that_is_not_a_small_regular_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = dir.path().join("big.toml");
    std::fs::write(&big, format!("# {}\n", "x".repeat(1024 * 1024))).unwrap();
    for (path, why) in [
        (std::path::Path::new("/dev/zero"), "is a device"),
        (fifo.as_path(), "is a FIFO"),
        (dir.path(), "is a directory"),
        (big.as_path(), "larger than 1 MiB"),
    ] {
        let start = Instant::now();
        let (code, err) = run_with_config(path);
        assert_eq!(code, 1, "{}: {err}", path.display());
        assert!(err.contains(why), "{}: {err}", path.display());
        assert!(err.contains("cannot read config"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5), "{err}");
    }
}

#[test]
fn a_key_file_that_is_a_device_is_refused() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("env:HARNESS_TEST_LLM_KEY", "file:/dev/zero")
    });
    let child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let (code, err) = finish(child, Duration::from_secs(10));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/dev/zero is a device"), "{err}");
}

/// A model endpoint whose every chat reply is `body`, and a workspace using it (`edit` on
/// the config); returns harness's exit code, stderr, and the REPORT.
fn endless_reply(
    content_type: &'static str,
    claimed: Option<u64>,
    head: &str,
    edit: fn(String) -> String,
) -> (i32, String, String, Stub) {
    let head = head.to_string();
    let llm = Stub::start(move |_, _, _| Reply {
        status: 200,
        content_type,
        body: stub::Body::Endless {
            head: head.clone(),
            fill: b'x',
            claimed,
        },
        delay: Duration::ZERO,
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), edit);
    let child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let (code, err) = finish(child, Duration::from_secs(60));
    let report = std::fs::read_to_string(ws.reports().join("REPORT-latest.md")).unwrap_or_default();
    (code, err, report, llm)
}

#[test]
fn an_endless_model_reply_is_cut_at_the_cap_and_is_an_llm_error() {
    let keep = |c: String| c;
    // 2 GiB announced: refused before reading it.
    let (code, err, report, llm) = endless_reply("application/json", Some(2 << 30), "", keep);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("larger than 16 MiB"), "{err}");
    assert!(report.contains("larger than 16 MiB"), "{report}");
    // Final: one attempt, whatever max_retries says.
    assert_eq!(llm.requests().len(), 1, "{:?}", llm.requests());

    // No length announced: read up to the cap, then dropped.
    let (code, err, _, llm) = endless_reply("application/json", None, "", keep);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("larger than 16 MiB"), "{err}");
    assert!(
        llm.sent() < 64 << 20,
        "the client read {} bytes",
        llm.sent()
    );
}

#[test]
fn an_endless_sse_event_is_cut_at_the_cap_and_is_an_llm_error() {
    let streaming =
        |c: String| c.replace("max_retries = 2\n", "max_retries = 2\nstreaming = true\n");
    let (code, err, report, llm) = endless_reply("text/event-stream", None, "data: ", streaming);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("larger than 16 MiB"), "{err}");
    assert!(report.contains("stop_reason: \"llm_error\""), "{report}");
    assert_eq!(llm.requests().len(), 1, "{:?}", llm.requests());
    assert!(
        llm.sent() < 64 << 20,
        "the client read {} bytes",
        llm.sent()
    );
}

#[test]
fn an_endless_redmine_reply_is_an_intake_error() {
    let redmine = Stub::start(|_, _, _| Reply {
        status: 200,
        content_type: "application/json",
        body: stub::Body::Endless {
            head: "{\"user\":\"".into(),
            fill: b'x',
            claimed: None,
        },
        delay: Duration::ZERO,
    });
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| with_redmine(c, &redmine.url));
    let child = harness_cmd(&ws, &["once"]).spawn().unwrap();
    let (code, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than 16 MiB"), "{err}");
    assert_eq!(redmine.requests().len(), 1, "{:?}", redmine.requests());
    assert!(redmine.sent() < 64 << 20, "read {} bytes", redmine.sent());
}

#[test]
fn a_huge_command_makes_a_bounded_report() {
    let command = format!("echo {}", "a".repeat(1 << 20));
    let llm = common::Llm::start(&serde_json::json!([
        common::tool_call("call_1", &command),
        common::text("done")
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    let (code, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let report = ws.latest();
    assert!(
        report.len() < 16 * 1024,
        "the REPORT is {} bytes",
        report.len()
    );
    assert!(report.contains("bytes cut ...]"), "{report}");
}

// ---------------------------------------------------------------------------------------
// §6 secrets and messages

const URL_PASSWORD: &str = "pw-url-9d2f1c77";

/// Output of one run: exit code, stdout, stderr.
fn output(ws: &Workspace, args: &[&str]) -> (i32, String, String) {
    let out = harness_cmd(ws, args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_password_in_a_url_is_masked_everywhere() {
    let llm =
        common::Llm::start(&serde_json::json!({"loop": true, "steps": [common::text("done")]}));
    let with_password = llm
        .base_url()
        .replace("http://", &format!("http://bot:{URL_PASSWORD}@"));
    let ws = Workspace::new(&with_password, |c| {
        c.replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let mut seen = String::new();
    for args in [
        &["once", "--demo"][..],
        &["once", "--demo", "--dry-run"],
        &["check"],
        &["once", "--demo", "-v"],
    ] {
        let (code, out, err) = output(&ws, args);
        assert!(code == 0 || args == ["check"], "{args:?}: {code} {err}");
        seen.push_str(&out);
        seen.push_str(&err);
    }
    seen.push_str(&ws.latest());
    assert!(!seen.contains(URL_PASSWORD), "{seen}");
    assert!(seen.contains("bot:[redacted]@127.0.0.1"), "{seen}");
    assert!(
        ws.latest().contains("backend: \"http://bot:[redacted]@"),
        "{}",
        ws.latest()
    );

    // In errors too: the endpoint does not answer.
    let ws = Workspace::new(&format!("http://bot:{URL_PASSWORD}@127.0.0.1:9/v1"), |c| c);
    let (code, out, err) = output(&ws, &["once", "--demo"]);
    assert_eq!(code, 4, "{err}");
    // No model was reached: no REPORT, the error (masked) on stderr.
    assert!(ws.report_files().is_empty(), "{err}");
    for text in [&out, &err] {
        assert!(!text.contains(URL_PASSWORD), "{text}");
    }
    assert!(err.contains("bot:[redacted]@127.0.0.1:9"), "{err}");
}

#[test]
fn config_type_errors_are_all_reported_at_once_in_words() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("max_rounds = 4", "max_rounds = \"four\"")
            .replace("mopac-code = \"glm-5.2\"", "mopac-code = 52")
            .replace(
                "timeout_secs = 10\nmax_output_bytes",
                "timeout_secs = \"ten\"\nmax_output_bytes",
            )
            .replace("vertical = \"test\"", "vertical = \"test\"\nvertcal = 1")
    });
    let (code, out, err) = output(&ws, &["once", "--demo"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
    for expected in [
        "[loop].max_rounds: must be a whole number, not a string (\"four\")",
        "[models].mopac-code: must be a model name or a list of model names, not a whole number (52)",
        "[tools.bash].timeout_secs: must be a whole number, not a string (\"ten\")",
        "vertcal: unknown key",
    ] {
        assert!(err.contains(expected), "{expected:?} in {err}");
    }
    for jargon in ["i64", "untagged", "RawTier", "invalid type"] {
        assert!(!err.contains(jargon), "{jargon:?} in {err}");
    }
}

// ---------------------------------------------------------------------------------------
// §7 delivery

#[test]
fn a_result_that_cannot_reach_stdout_is_a_failure_but_a_closed_pipe_is_not() {
    let llm =
        common::Llm::start(&serde_json::json!({"loop": true, "steps": [common::text("done")]}));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    for args in [&["version"][..], &["gate", "--", "ls"], &["once", "--demo"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = harness_cmd(&ws, args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write the result to stdout"),
            "{args:?}: {err}"
        );
    }
    // The REPORT of the run whose path could not be printed is on disk, and says so.
    assert!(ws.reports().join("REPORT-latest.md").is_file());

    // A reader that went away (`| head`) is not the run's failure.
    let mut child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
    drop(child.stdout.take());
    let (code, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_report_that_cannot_be_written_keeps_the_reply_on_stderr() {
    use std::os::unix::process::CommandExt;
    let reply = "The answer that cost tokens, kept.";
    let llm =
        common::Llm::start(&serde_json::json!({"loop": true, "steps": [common::text(reply)]}));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let mut cmd = harness_cmd(&ws, &["once", "--demo"]);
    // A file-size limit of 300 bytes: the preflight probe (a few bytes) passes, the REPORT
    // cannot be written, as on a full disk.
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the hook.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 300,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the REPORT could not be written"), "{err}");
    assert!(err.contains(reply), "{err}");
    assert!(err.contains("stop_reason: \"completed\""), "{err}");
    assert!(!err.contains(CANARY));
}

/// A REPORT for Redmine issue 7, as `harness once` writes it.
const REPORT: &str = "---\nharness_report: 1\nrun_id: \"r-1\"\nsource: \"redmine\"\ntask_id: \"7\"\nmodel: \"glm-5.3\"\ntier: \"mopac-primary\"\ntotal_tokens: 120\nrounds: 2\nstop_reason: \"completed\"\nerror: null\n---\n\nThe reply.\n";

#[test]
fn writeback_checks_the_front_matter_and_accepts_crlf() {
    let redmine = Stub::start(|_, _, _| Reply {
        status: 404,
        content_type: "application/json",
        body: stub::Body::Full("{}".into()),
        delay: Duration::ZERO,
    });
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| with_redmine(c, &redmine.url));
    let bad = ws.path().join("bad.md");
    std::fs::write(
        &bad,
        REPORT
            .replace("harness_report: 1", "harness_report: 7")
            .replace("rounds: 2", "rounds: \"two\"")
            .replace("\"completed\"", "\"finished\""),
    )
    .unwrap();
    let (code, _, err) = output(&ws, &["writeback", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    for expected in [
        "harness_report: 7 is not a REPORT version this harness reads (1)",
        "rounds: must be a whole number, 0 or more, not \"two\"",
        "stop_reason: \"finished\" is not one of completed, needs_input, agent_failed, max_rounds, budget, llm_error, interrupted, check_failed",
    ] {
        assert!(err.contains(expected), "{expected:?} in {err}");
    }
    assert_eq!(
        redmine.requests(),
        Vec::<String>::new(),
        "a bad REPORT reached Redmine"
    );

    // The same REPORT saved with CRLF line ends is read: the write-back goes on to Redmine.
    let crlf = ws.path().join("crlf.md");
    std::fs::write(&crlf, REPORT.replace('\n', "\r\n")).unwrap();
    let (code, _, err) = output(&ws, &["writeback", crlf.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("front matter"), "{err}");
    assert!(
        redmine
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /issues/7.json")),
        "{:?}",
        redmine.requests()
    );
}

#[test]
fn an_empty_gate_command_is_a_usage_error() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    for command in ["", "   "] {
        let (code, out, err) = output(&ws, &["gate", "--", command]);
        assert_eq!(code, 1, "{command:?}: {err}");
        assert_eq!(out, "");
        assert!(err.contains("the command is empty"), "{err}");
    }
}
