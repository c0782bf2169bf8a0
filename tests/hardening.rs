//! Hardening through the built binary (issue 10 §3, §4, §6, §7): signals before the turn,
//! bounded inputs, masked URLs and readable config errors, delivery failures. Faults come
//! from a tiny HTTP stub (tests/stub) that can delay, or send an endless body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod stub;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Workspace, CANARY};
use stub::{Reply, Stub};

const REDMINE_CANARY: &str = "rm-canary-0c4e7d1a9b3f";

/// The harness command for `ws`, with both canaries and no stdin.
fn harness(ws: &Workspace, args: &[&str]) -> Command {
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
    let child = harness(ws, args).spawn().unwrap();
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
    let redmine = Stub::start(|_, path| {
        if path.starts_with("/users/current.json") {
            Reply::json(r#"{"user":{"id":1,"login":"bot"}}"#)
        } else {
            // The scope listing takes a minute: the signal arrives while intake waits.
            Reply::json(r#"{"issues":[{"id":7,"subject":"x","updated_on":"2026-01-01T00:00:00Z"}],"total_count":1}"#)
                .after(Duration::from_secs(60))
        }
    });
    let llm = Stub::start(|_, _| Reply::json("{}"));
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
    let llm = Stub::start(|_, path| {
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
