//! The fault matrix from the model's side, against the built binary: each HTTP or stream
//! fault of the scripted server has its exit code, its stop reason and its REPORT, with and
//! without streaming, and no canary ever leaks. Bounds, not timings (see tests/common/runs.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::runs::*;
use common::*;
use serde_json::{json, Value};

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
