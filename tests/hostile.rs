//! Hostile inputs through the built binary (an audit after issue 10): paths that are not
//! regular files where harness writes, peers that redirect, flood or send JSON serde cannot
//! read as is. Each test names the class it closes; faults come from tests/stub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod stub;

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
