//! Hostile inputs through the built binary (an audit after issue 10): paths that are not
//! regular files where harness writes, peers that redirect, flood or send JSON serde cannot
//! read as is. Each test names the class it closes; faults come from tests/stub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::stub;

use std::path::Path;
use std::time::{Duration, Instant};

use common::runs::{harness_cmd, run_bounded};
use common::{Workspace, CANARY};
use stub::{Reply, Stub};

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_fifo()
}

/// An endpoint that answers every chat request with `body` (status 200, JSON).
fn model(body: &'static str) -> Stub {
    Stub::start(move |_, _, _| Reply::json(body))
}

/// The run ended with `code` and its stderr says `needle`.
fn fails_with(run: &common::Run, code: i32, needle: &str) {
    assert_eq!(run.code, code, "{}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "{needle:?} not in:\n{}",
        run.stderr
    );
}

type Sizes = std::sync::Arc<std::sync::Mutex<Vec<usize>>>;

/// An endpoint that answers `first` to the first chat request and [`HELLO`] to the rest,
/// logging each request body's size.
fn first_then_hello(first: String) -> (Stub, Sizes) {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let sizes = Sizes::default();
    let log = sizes.clone();
    let llm = Stub::start(move |_, _, body| {
        log.lock().unwrap().push(body.len());
        match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Reply::json(&first),
            _ => Reply::json(HELLO),
        }
    });
    (llm, sizes)
}

const HELLO: &str =
    r#"{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;

// ---------------------------------------------------------------------------------------
// Writes replace only regular files

#[test]
fn a_record_target_that_is_a_fifo_or_a_device_is_refused_before_any_request() {
    let llm = model(HELLO);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let fifo = ws.path().join("cassette.fifo");
    mkfifo(&fifo);
    // `/dev/full` is a device everywhere; as root, renaming a file over it would replace
    // the node itself.
    for target in [fifo.to_str().unwrap(), "/dev/full"] {
        let run = run_bounded(
            harness_cmd(&ws, &["once", "--demo", "--record", target]),
            target,
        );
        assert_eq!(run.code, 1, "{target}: {}", run.stderr);
        assert!(
            run.stderr.contains("not a regular file"),
            "{target}: {}",
            run.stderr
        );
    }
    assert!(is_fifo(&fifo), "the FIFO was replaced");
    assert!(!std::fs::symlink_metadata("/dev/full").unwrap().is_file());
    assert!(llm.requests().is_empty(), "{:?}", llm.requests());
}

#[test]
fn an_events_fifo_without_a_reader_is_refused_at_once() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let fifo = ws.path().join("events.fifo");
    mkfifo(&fifo);
    let dry_run = || {
        let args = [
            "once",
            "--demo",
            "--dry-run",
            "--events",
            fifo.to_str().unwrap(),
        ];
        run_bounded(harness_cmd(&ws, &args), "--events FIFO")
    };
    let start = Instant::now();
    let run = dry_run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("a FIFO with no reader"),
        "{}",
        run.stderr
    );
    assert!(start.elapsed() < Duration::from_secs(5));

    // With a reader the stream flows through it as through a file.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    // The reader's open must come first; retry the run until it has.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = dry_run();
        if run.code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{}", run.stderr);
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().unwrap();
    assert!(text.contains("\"run.completed\""), "{text}");
    assert!(!text.contains(CANARY));
}

// ---------------------------------------------------------------------------------------
// No redirect is followed, to another port of 127.0.0.1 or anywhere else

/// A peer that must never be reached; it logs what reaches it.
fn trap() -> Stub {
    Stub::start(|_, _, _| Reply::json(HELLO))
}

#[test]
fn a_model_endpoint_that_redirects_is_not_followed() {
    let elsewhere = trap();
    let to = format!("{}/v1/chat/completions", elsewhere.url);
    let llm = Stub::start(move |_, _, _| Reply::redirect(307, &to));
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "redirect");
    fails_with(&run, 4, "HTTP 307: a redirect to");
    assert!(run.stderr.contains("which harness does not follow"));
    assert_eq!(elsewhere.requests(), Vec::<String>::new());
    // Final, not retried, and the REPORT says why.
    assert_eq!(llm.requests().len(), 1, "{:?}", llm.requests());
    let report = ws.latest();
    assert!(report.contains("which harness does not follow"), "{report}");
    assert!(!run.stderr.contains(CANARY) && !report.contains(CANARY));
}

#[test]
fn a_redmine_that_redirects_is_not_followed() {
    let elsewhere = trap();
    let to = format!("{}/issues.json", elsewhere.url);
    let redmine = Stub::start(move |_, _, _| Reply::redirect(301, &to));
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!(
            "{c}\n[redmine]\nurl = \"{}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n",
            redmine.url
        )
    });
    let run = run_bounded(harness_cmd(&ws, &["once"]), "redmine redirect");
    fails_with(&run, 2, "a redirect (301), which harness does not follow");
    assert_eq!(elsewhere.requests(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// A flood of tool calls costs what `[loop].max_tool_calls` calls cost

#[test]
fn a_reply_of_thousands_of_tool_calls_leaves_a_small_report() {
    const CALLS: usize = 20_000;
    let flood = {
        let calls: Vec<String> = (0..CALLS)
            .map(|i| {
                format!(
                    r#"{{"id":"c{i}","type":"function","function":{{"name":"bash","arguments":"{{\"command\":\"echo {i}\"}}"}}}}"#
                )
            })
            .collect();
        format!(
            r#"{{"choices":[{{"message":{{"role":"assistant","content":null,"tool_calls":[{}]}},"finish_reason":"tool_calls"}}]}}"#,
            calls.join(",")
        )
    };
    let (llm, sizes) = first_then_hello(flood);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "flood");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("made 20000 tool calls; only the first 32 were taken"),
        "{}",
        run.stderr
    );
    // Narration, the REPORT and the next request hold the 32 calls taken, not 20,000.
    assert!(run.stderr.lines().count() < 100, "{}", run.stderr.len());
    let report = ws.latest();
    assert!(report.len() < 64 * 1024, "REPORT of {} bytes", report.len());
    let sizes = sizes.lock().unwrap().clone();
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(sizes[1] < 64 * 1024, "second request of {} bytes", sizes[1]);
}

// ---------------------------------------------------------------------------------------
// JSON a peer may send: lone surrogates, NUL, escape sequences

#[test]
fn a_reply_with_lone_surrogates_nul_and_escapes_is_read_and_reported_safely() {
    // `\ud800` alone is valid JSON grammar but no character: serde refused the whole reply,
    // so a model that cut an emoji in two failed the turn.
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let llm = Stub::start(move |_, _, _| {
        match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Reply::json(
                r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo half-\\ud83d-emoji\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            ),
            _ => Reply::json(
                r#"{"choices":[{"message":{"role":"assistant","content":"done \ud83d\ude00 cut \ud800 nul \u0000 esc \u001b[2J\u001b]0;title\u0007 end"},"finish_reason":"stop"}]}"#,
            ),
        }
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "surrogates");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("allowed, exit 0"), "{}", run.stderr);
    let report = ws.latest();
    let body = common::body(&report);
    assert!(
        body.starts_with("done \u{1f600} cut \u{fffd} nul \u{fffd} esc \u{fffd}[2J"),
        "{body:?}"
    );
    assert!(
        !report.contains('\u{1b}') && !report.contains('\0') && !report.contains('\u{7}'),
        "{report:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Keys: what cannot be masked reliably is never sent

#[test]
fn a_key_with_a_byte_order_mark_or_an_invisible_space_is_refused_before_any_request() {
    // An endpoint that echoes the request's headers in its 401, as some proxies do. The
    // key's bytes came back decoded as Latin-1, where the masking did not find the key and
    // its ASCII part reached stderr and the REPORT.
    let echo = Stub::start(|_, _, _| Reply {
        status: 401,
        content_type: "text/plain",
        body: stub::Body::Full("echo".into()),
        delay: Duration::ZERO,
    });
    let dir = tempfile::tempdir().unwrap();
    let bom = dir.path().join("key");
    std::fs::write(&bom, format!("\u{feff}{CANARY}\n")).unwrap();
    for (key_ref, why) in [
        (
            format!("file:{}", bom.display()),
            "(U+FEFF, a byte order mark) at character 1",
        ),
        (
            format!("literal:\u{200b}{CANARY}"),
            "(U+200B, an invisible space) at character 1",
        ),
        (format!("literal:{CANARY} "), "begins or ends with blanks"),
        // Too short for the masking, which leaves values under 4 characters alone.
        ("literal:k3y".to_string(), "shorter than 4 characters"),
    ] {
        let ws = Workspace::new(&format!("{}/v1", echo.url), |c| {
            c.replace("env:HARNESS_TEST_LLM_KEY", &key_ref)
        });
        let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), &key_ref);
        fails_with(&run, 1, why);
        assert!(run.stderr.contains("[litellm].key_ref"), "{}", run.stderr);
        assert!(!run.stderr.contains(CANARY), "{}", run.stderr);
        assert!(ws.report_files().is_empty());
    }
    assert_eq!(echo.requests(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------
// Signals while a synchronous stage holds the one runtime thread

#[test]
fn a_signal_while_a_cmd_key_ref_runs_is_honoured_at_once() {
    // The key program sleeps; the run used to wait for it (up to its 30 s limit), then fail
    // with exit 1 as if the program had printed no key.
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let marker = format!("{}.{signal}", std::process::id());
        let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
            c.replace(
                "env:HARNESS_TEST_LLM_KEY",
                &format!("cmd:sh -c 'sleep 20; echo {marker}'"),
            )
        });
        let child = harness_cmd(&ws, &["once", "--demo"]).spawn().unwrap();
        common::wait_for_process(&format!("sleep 20; echo {marker}"));
        let start = Instant::now();
        // SAFETY: kill only sends a signal to our own child.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let run = common::runs::finish(child, "signal during cmd:");
        fails_with(&run, code, "interrupted by signal");
        assert!(start.elapsed() < Duration::from_secs(5), "{}", run.stderr);
        // The key program went with it.
        assert!(
            !common::process_running(&format!("echo {marker}")),
            "the key program outlived harness"
        );
        assert!(ws.report_files().is_empty());
    }
}

// ---------------------------------------------------------------------------------------
// Output: a stderr that cannot be written loses narration, never the exit code

#[test]
fn a_full_stderr_does_not_turn_a_run_into_a_panic() {
    let llm = model(HELLO);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    for (args, code) in [
        (&["once", "--demo"][..], 0),
        (&["once", "--demo", "--dry-run"][..], 0),
        // An error's own line cannot be printed either: its code still stands.
        (&["once", "--demo", "--replay", "missing.json"][..], 1),
    ] {
        let mut cmd = harness_cmd(&ws, args);
        cmd.stderr(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        );
        let out = cmd.output().unwrap();
        // The subscriber's complaint about a failed write panicked: exit 101.
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
    assert!(ws.latest().contains("hello"));
}

// ---------------------------------------------------------------------------------------
// Redmine: an issue of megabytes shows as one bounded line

#[test]
fn an_enormous_redmine_subject_is_one_bounded_line_everywhere() {
    let issue = serde_json::json!({
        "id": 7, "subject": format!("{}\u{1b}[2J\nsecond line", "S".repeat(2_000_000)),
        "description": "Do seven.", "status": {"id": 1, "name": "New"},
        "updated_on": "2026-01-01T00:00:00Z", "project": {"id": 1, "name": "p"},
        "tracker": {"id": 1, "name": "t"}, "author": {"id": 1, "name": "a"},
        "custom_fields": [{"id": 1, "name": "Class", "value": "C".repeat(1_000_000)}],
    });
    let list = serde_json::json!({"issues": [issue.clone()], "total_count": 1}).to_string();
    let one = serde_json::json!({"issue": issue}).to_string();
    let redmine = Stub::start(move |_, path, _| match path.split('?').next().unwrap() {
        "/users/current.json" => Reply::json(r#"{"user":{"id":1,"login":"bot"}}"#),
        "/issues.json" => Reply::json(&list),
        "/issues/7.json" => Reply::json(&one),
        _ => Reply::json("{}"),
    });
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!(
            "{c}\n[redmine]\nurl = \"{}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n",
            redmine.url
        )
    });
    // The class does not route: the error names it, cut.
    let run = run_bounded(harness_cmd(&ws, &["once", "--dry-run"]), "huge subject");
    fails_with(&run, 1, "unknown class");
    assert!(
        run.stderr.len() < 4096,
        "stderr of {} bytes",
        run.stderr.len()
    );
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!(
            "{c}\n[redmine]\nurl = \"{}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\nclass_field = \"None\"\n",
            redmine.url
        )
    });
    for args in [&["once", "--dry-run"][..], &["scope"][..]] {
        let run = run_bounded(harness_cmd(&ws, args), "huge subject");
        assert_eq!(
            run.code,
            0,
            "{args:?}: {}",
            &run.stderr[..run.stderr.len().min(2000)]
        );
        for out in [&run.stdout, &run.stderr] {
            assert!(out.len() < 8192, "{args:?}: {} bytes", out.len());
            assert!(!out.contains('\u{1b}'), "{args:?}: {out}");
        }
        assert!(run.stdout.contains("SSS…"), "{args:?}: {}", run.stdout);
    }
}

#[test]
fn a_200_with_an_error_body_names_the_error_masked() {
    // A proxy that answers 200 with an error object echoing the request's key.
    let body: &'static str = Box::leak(
        format!(r#"{{"error":{{"message":"upstream refused key {CANARY}","type":"x"}}}}"#)
            .into_boxed_str(),
    );
    let llm = model(body);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "200 error");
    fails_with(
        &run,
        4,
        "the reply has no choices but an error: upstream refused key [redacted]",
    );
    assert!(!run.stderr.contains(CANARY));
    assert!(!ws.all_files_text().contains(CANARY));
}

#[test]
fn a_signal_ends_check_at_once_even_while_the_proxy_hangs() {
    // `harness check` waited out the proxy's whole timeout, then exited 1.
    let proxy = Stub::start(|_, _, _| Reply::json(r#"{"data":[]}"#).after(Duration::from_secs(60)));
    let ws = Workspace::new(&format!("{}/v1", proxy.url), |c| {
        c.replace(
            "timeout_secs = 10\nmax_retries",
            "timeout_secs = 120\nmax_retries",
        )
    });
    let child = harness_cmd(&ws, &["check"]).spawn().unwrap();
    proxy.wait_for("/models", Duration::from_secs(20));
    let start = Instant::now();
    // SAFETY: kill only sends a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let run = common::runs::finish(child, "check");
    fails_with(&run, 130, "interrupted by signal 2");
    assert!(start.elapsed() < Duration::from_secs(5), "{}", run.stderr);
}

#[test]
fn a_signal_while_the_session_downloads_releases_the_claim_at_once() {
    // The session attachment's download hangs; the signal used to wait for it (the Redmine
    // timeout, times the retries) before the claim was released.
    let redmine = stub::MiniRedmine::start_with(Duration::ZERO, Some(Duration::from_secs(60)));
    let llm = model(HELLO);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        format!(
            "{}\n[redmine]\nurl = \"{}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\ntimeout_secs = 120\n",
            c.replace("[session]\nenabled = false", "[session]\nenabled = true"),
            redmine.stub.url
        )
    });
    let child = harness_cmd(&ws, &["once"]).spawn().unwrap();
    redmine
        .stub
        .wait_for("/attachments/download/", Duration::from_secs(20));
    let start = Instant::now();
    // SAFETY: kill only sends a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let run = common::runs::finish(child, "signal during the session download");
    fails_with(&run, 143, "interrupted by signal 15 before the turn");
    assert!(start.elapsed() < Duration::from_secs(5), "{}", run.stderr);
    let notes = redmine.notes();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("[harness-claim]"), "{notes:?}");
    assert!(notes[1].starts_with("[harness-release]"), "{notes:?}");
    assert!(llm.requests().is_empty(), "{:?}", llm.requests());
    assert!(ws.report_files().is_empty());
}

// ---------------------------------------------------------------------------------------
// An output never overwrites one of harness's own inputs

#[test]
fn record_and_events_never_overwrite_the_config_or_a_key_file() {
    let llm = model(HELLO);
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("llm.key");
    std::fs::write(&key, format!("{CANARY}\n")).unwrap();
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        c.replace(
            "env:HARNESS_TEST_LLM_KEY",
            &format!("file:{}", key.display()),
        )
    });
    let config = std::fs::read_to_string(ws.config()).unwrap();
    let config_path = ws.config();
    let (config_arg, key_arg) = (config_path.to_str().unwrap(), key.to_str().unwrap());
    // `--record harness.toml` replaced the config with a cassette and exited 0;
    // `--events harness.toml` appended JSON lines to it.
    for (args, why) in [
        (
            vec!["once", "--demo", "--record", config_arg],
            "is the config file",
        ),
        (
            vec!["once", "--demo", "--record", "harness.toml"],
            "is the config file",
        ),
        (
            vec!["once", "--demo", "--record", key_arg],
            "is the key file of [litellm].key_ref",
        ),
        (
            vec!["once", "--demo", "--events", config_arg],
            "is the config file",
        ),
    ] {
        let run = run_bounded(harness_cmd(&ws, &args), why);
        fails_with(&run, 1, why);
    }
    assert_eq!(std::fs::read_to_string(ws.config()).unwrap(), config);
    assert_eq!(
        std::fs::read_to_string(&key).unwrap(),
        format!("{CANARY}\n")
    );
    assert!(llm.requests().is_empty(), "{:?}", llm.requests());
}

#[test]
fn a_tool_call_with_a_name_and_an_id_of_megabytes_stays_small_everywhere() {
    let big = "N".repeat(2_000_000);
    let first = format!(
        r#"{{"choices":[{{"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"{big}","type":"function","function":{{"name":"{big}","arguments":"{{}}"}}}}]}},"finish_reason":"tool_calls"}}]}}"#
    );
    let (llm, sizes) = first_then_hello(first);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let events = ws.path().join("events.jsonl");
    let run = run_bounded(
        harness_cmd(
            &ws,
            &["once", "--demo", "--events", events.to_str().unwrap()],
        ),
        "huge name",
    );
    assert_eq!(run.code, 0, "{}", &run.stderr[..run.stderr.len().min(2000)]);
    assert!(
        run.stderr.len() < 8192,
        "stderr of {} bytes",
        run.stderr.len()
    );
    let stream = std::fs::read_to_string(&events).unwrap();
    assert!(stream.len() < 64 * 1024, "events of {} bytes", stream.len());
    assert!(ws.latest().len() < 64 * 1024);
    let sizes = sizes.lock().unwrap().clone();
    assert!(sizes[1] < 64 * 1024, "second request of {} bytes", sizes[1]);
}

#[test]
fn a_streamed_tool_call_with_a_huge_index_is_one_call() {
    // One 150-byte event with `"index": 1000000000` grew the call list to that length:
    // gigabytes, then an abort. (5,000,000 here keeps a regression cheap to see: the call
    // at the gap's end was never run, placeholders were.)
    const EVENTS: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":5000000,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"echo far-call\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let llm =
        Stub::start(
            move |_, _, _| match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => Reply {
                    status: 200,
                    content_type: "text/event-stream",
                    body: stub::Body::Full(EVENTS.into()),
                    delay: Duration::ZERO,
                },
                _ => Reply::json(HELLO),
            },
        );
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        c.replace("max_retries = 2\n", "max_retries = 2\nstreaming = true\n")
    });
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "huge index");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("1 tool call"), "{}", run.stderr);
    assert!(
        run.stderr.contains("\"echo far-call\" -> allowed"),
        "{}",
        run.stderr
    );
}

#[test]
fn token_counts_of_u64_max_saturate_and_still_stop_a_budget() {
    // `prompt_tokens: u64::MAX` overflowed the turn's sum: a panic (exit 101), no REPORT.
    let first = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo x\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615,"total_tokens":0}}"#;
    let (llm, _) = first_then_hello(first.to_string());
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        format!("{c}\n[budget]\nmax_total_tokens = 1000\n")
    });
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "u64::MAX usage");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = ws.latest();
    assert_eq!(common::front(&report, "stop_reason"), "budget", "{report}");
    assert_eq!(
        common::front(&report, "total_tokens"),
        serde_json::json!(u64::MAX)
    );
}

#[test]
fn a_reply_with_odd_token_counts_is_still_a_reply() {
    // `null`, negative or float counts made serde refuse the whole reply: three attempts,
    // then an LLM error (exit 4) for a reply that was fine.
    let llm = model(
        r#"{"choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":null,"completion_tokens":-1,"total_tokens":2.5}}"#,
    );
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "odd usage");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(llm.requests().len(), 1, "{:?}", llm.requests());
    assert_eq!(common::front(&ws.latest(), "total_tokens"), 2);
}

#[test]
fn tool_call_arguments_sent_as_an_object_run() {
    let first = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":{"command":"echo object-args"}}}]},"finish_reason":"tool_calls"}]}"#;
    let (llm, _) = first_then_hello(first.to_string());
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "object arguments");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("\"echo object-args\" -> allowed"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_sse_content_type_in_any_case_is_a_stream() {
    const EVENTS: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"streamed\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let llm = Stub::start(|_, _, _| Reply {
        status: 200,
        content_type: "Text/Event-Stream; charset=UTF-8",
        body: stub::Body::Full(EVENTS.into()),
        delay: Duration::ZERO,
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        c.replace("max_retries = 2\n", "max_retries = 2\nstreaming = true\n")
    });
    let run = run_bounded(harness_cmd(&ws, &["once", "--demo"]), "SSE content type");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(common::body(&ws.latest()), "streamed\n");
}

// ---------------------------------------------------------------------------------------
// A file-size limit as a shell sets it (SIGXFSZ not ignored)

#[test]
fn a_file_size_limit_fails_the_report_write_instead_of_killing_the_run() {
    use std::os::unix::process::CommandExt;
    let reply = format!("{} the end", "L".repeat(8000));
    let body: &'static str = Box::leak(
        format!(r#"{{"choices":[{{"message":{{"role":"assistant","content":"{reply}"}},"finish_reason":"stop"}}]}}"#)
            .into_boxed_str(),
    );
    let llm = model(body);
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| c);
    let mut cmd = harness_cmd(&ws, &["once", "--demo"]);
    // `ulimit -f 4` in a shell: SIGXFSZ keeps its default, which killed harness (exit 153,
    // no REPORT anywhere, a temp file left in the report dir).
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the hook.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let run = run_bounded(cmd, "RLIMIT_FSIZE");
    fails_with(&run, 1, "the REPORT could not be written");
    assert!(run.stderr.contains(&reply), "{}", run.stderr.len());
    let leftovers: Vec<_> = std::fs::read_dir(ws.reports())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".harness-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
