//! The order of commitments (DESIGN.md): what a run produces is durable before the session
//! records the run as finished, so a write that fails at any step after the turn loses no
//! answer. Each step's write is made to fail in turn, with the real binary against the
//! scripted server: the REPORT (a file-size limit, `RLIMIT_FSIZE`, as `ulimit -f` or a full
//! disk fails it mid-way), the session and the cassette (a really full tmpfs mounted in a
//! private mount namespace, where the kernel lets us). After each, the next unhindered run
//! must do what is still owed: work the task again, never "nothing new".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::runs::*;
use common::*;
use serde_json::{json, Value};

fn finish_done(id: &str, summary: &str) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish",
        "arguments": {"status": "done", "summary": summary}}]})
}

/// A workspace with sessions on and turns that end with `finish`.
fn sessions(llm: &Llm) -> Workspace {
    Workspace::new(&llm.base_url(), |c| {
        c.replace("finish = \"message\"", "finish = \"tool\"")
            .replace("[session]\nenabled = false", "[session]\nenabled = true")
    })
}

fn session_file(ws: &Workspace) -> PathBuf {
    ws.reports().join("sessions/test/demo/demo-1.jsonl.gz")
}

/// An answer far larger than its gzipped session: a file-size limit between the two lets
/// the session through and stops the REPORT.
fn long_answer(n: u32) -> String {
    format!("# Answer {n}\n\n{}", "The answer, at length. ".repeat(2000))
}

/// `harness once --demo EXTRA` with writes past `bytes` failing (EFBIG; harness ignores
/// SIGXFSZ itself, so the shell's default disposition is kept here).
fn run_with_file_size_limit(ws: &Workspace, bytes: u64, extra: &[&str]) -> Run {
    let cmd = with_file_size_limit(harness_cmd(ws, &once(extra)), bytes, false);
    run_bounded(cmd, "file-size-limited run")
}

/// `harness once --demo EXTRA` with a full tmpfs on `dir`; `None` (said loudly) where the
/// kernel does not let us mount.
fn run_with_full_dir(ws: &Workspace, dir: &Path, extra: &[&str]) -> Option<Run> {
    std::fs::create_dir_all(dir).unwrap();
    let cmd = in_full_tmpfs(&harness_cmd(ws, &once(extra)), dir, ws.path());
    let run = run_bounded(cmd, "full tmpfs");
    if run.code == 99 || run.stderr.contains("unshare: ") {
        skip(
            "the full-tmpfs commitments",
            "mounting a tmpfs in a private mount namespace is not permitted here (root is)",
        );
        return None;
    }
    Some(run)
}

fn once<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["once", "--demo"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_report_that_cannot_be_written_leaves_the_task_eligible_and_the_next_run_does_it() {
    let llm = Llm::start(&json!([
        finish_done("f1", &long_answer(1)),
        finish_done("f2", &long_answer(2)),
    ]));
    let ws = sessions(&llm);

    // 16 KiB: the preflight probe and the gzipped session fit, the ~50 KiB REPORT does not.
    let r1 = run_with_file_size_limit(&ws, 16 * 1024, &[]);
    assert_eq!(r1.code, 1, "{r1:?}");
    assert_no_panic(&r1, "unwritten REPORT");
    assert!(
        r1.stderr.contains("the REPORT could not be written"),
        "{}",
        r1.stderr
    );
    assert!(
        r1.stderr.contains("the task stays eligible"),
        "{}",
        r1.stderr
    );
    // The answer is not lost: it is on stderr, and the session does not claim the run.
    assert!(r1.stderr.contains("# Answer 1"), "{}", r1.stderr);
    assert!(ws.report_files().is_empty(), "{:?}", ws.report_files());
    assert!(
        !session_file(&ws).exists(),
        "the session recorded a run whose REPORT is not on disk"
    );
    assert_eq!(temp_files(&ws.reports()), Vec::<PathBuf>::new());

    // The next run works the task again (it used to say "nothing new; no model call").
    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    assert!(!r2.stderr.contains("nothing new"), "{}", r2.stderr);
    assert_eq!(llm.chat_bodies().len(), 2);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert!(report.contains("# Answer 2"), "{report}");
    assert!(session_file(&ws).exists());
    assert_all_reports_complete(&ws, None);
}

#[test]
fn a_session_that_cannot_be_saved_keeps_the_report_and_the_next_run_works_again() {
    let llm = Llm::start(&json!([
        finish_done("f1", "# Answer 1\n\nShort."),
        finish_done("f2", "# Answer 2\n\nShort."),
    ]));
    let ws = sessions(&llm);
    let Some(r1) = run_with_full_dir(&ws, &ws.reports().join("sessions"), &[]) else {
        return;
    };
    // The REPORT is the run's result: written and delivered; the lost session costs the
    // next run its history only.
    assert_eq!(r1.code, 0, "{r1:?}");
    assert!(r1.stderr.contains("not saved"), "{}", r1.stderr);
    assert!(ws.latest().contains("# Answer 1"));
    assert_eq!(ws.report_files().len(), 1);
    assert!(!session_file(&ws).exists());

    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    assert_eq!(llm.chat_bodies().len(), 2);
    assert!(ws.latest().contains("# Answer 2"));
    assert_all_reports_complete(&ws, None);
}

#[test]
fn a_cassette_that_cannot_be_written_keeps_the_report_and_says_where() {
    let llm = Llm::start(&json!([finish_done("f1", "# Answer 1\n\nShort.")]));
    let ws = sessions(&llm);
    let full = ws.path().join("full");
    let Some(r1) = run_with_full_dir(&ws, &full, &["--record", "full/run.cassette.json"]) else {
        return;
    };
    assert_ne!(r1.code, 0, "{r1:?}");
    assert_no_panic(&r1, "unwritten cassette");
    let reports = ws.report_files();
    assert_eq!(reports.len(), 1, "{r1:?}");
    assert!(
        r1.stderr.contains(&format!(
            "the REPORT is on disk at {}",
            reports[0].display()
        )),
        "{}",
        r1.stderr
    );
    assert!(ws.latest().contains("# Answer 1"));
    assert_all_reports_complete(&ws, None);
}
