//! The local inbox (`[inbox] dir`) through the built binary: claiming by rename, the moves
//! to `done/` and `failed/`, unparseable files, stale claims, workers racing for one file,
//! and `[intake] order` with Redmine beside it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::stream::events;
use common::*;
use serde_json::json;

fn with_inbox(c: String) -> String {
    format!("{c}\n[inbox]\ndir = \"inbox\"\nstale_after_mins = 30\n")
}

fn inbox_ws(llm: &Llm) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), with_inbox);
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    ws
}

fn put(ws: &Workspace, name: &str, text: &str) -> PathBuf {
    let p = ws.path().join("inbox").join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The file names in `inbox/<sub>`, sorted (empty when it does not exist).
fn names(ws: &Workspace, sub: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(ws.path().join("inbox").join(sub)) else {
        return vec![];
    };
    let mut v: Vec<String> = rd
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

fn read(p: impl AsRef<Path>) -> String {
    std::fs::read_to_string(p).unwrap()
}

const TASK: &str = "---\nclass: code\nsubject: Fix the login\n---\nThe login page fails.\n";

#[test]
fn a_task_file_runs_and_moves_to_done_beside_its_report() {
    let llm = Llm::start(&json!([text("# Fixed")]));
    let ws = inbox_ws(&llm);
    put(&ws, "fix-login.md", TASK);
    let run = ws.run(&["once", "--events", "events.jsonl"]);
    assert_eq!(run.code, 0, "{run:?}");
    let body0 = &llm.chat_bodies()[0];
    assert_eq!(body0["model"], "glm-5.2", "class code routes to mopac-code");
    assert_eq!(body0["messages"][1]["content"], "The login page fails.");
    let report = ws.latest();
    assert_eq!(front(&report, "task_id"), "fix-login");
    assert_eq!(front(&report, "source"), "inbox");
    assert_eq!(front(&report, "subject"), "Fix the login");
    assert_eq!(names(&ws, ""), ["claimed", "done"]);
    assert_eq!(names(&ws, "claimed"), Vec::<String>::new());
    assert_eq!(names(&ws, "done"), ["fix-login.REPORT.md", "fix-login.md"]);
    assert_eq!(read(ws.path().join("inbox/done/fix-login.md")), TASK);
    assert_eq!(
        read(ws.path().join("inbox/done/fix-login.REPORT.md")),
        report
    );
    let ev = events(&read(ws.path().join("events.jsonl")));
    assert_eq!(ev[1]["source"], "inbox");
    let wb = ev
        .iter()
        .find(|e| e["type"] == "writeback.completed")
        .unwrap();
    assert_eq!((&wb["target"], &wb["ok"]), (&json!("inbox"), &json!(true)));

    // The inbox is empty now: the next run has nothing to do.
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("no tasks in scope"), "{}", run.stderr);
}

#[test]
fn an_unparseable_file_moves_to_failed_with_the_reason_and_the_next_one_runs() {
    let llm = Llm::start(&json!([text("ok")]));
    let ws = inbox_ws(&llm);
    put(&ws, "a-broken.md", "---\npriority: high\n---\nbody\n");
    put(&ws, "b-good.md", "Say hi.\n");
    put(&ws, "notes.txt", "not a task");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "b-good");
    assert_eq!(names(&ws, "failed"), ["a-broken.error.txt", "a-broken.md"]);
    assert_eq!(
        read(ws.path().join("inbox/failed/a-broken.error.txt")),
        "front matter key \"priority\" is unknown (the keys are class and subject)\n"
    );
    assert_eq!(names(&ws, "done"), ["b-good.REPORT.md", "b-good.md"]);
    assert_eq!(names(&ws, ""), ["claimed", "done", "failed", "notes.txt"]);
}

#[test]
fn a_huge_or_binary_task_file_moves_to_failed_unread_and_the_next_one_runs() {
    let llm = Llm::start(&json!([text("ok")]));
    let ws = inbox_ws(&llm);
    // Over the 1 MiB cap: refused by its size, never read whole into memory or the prompt.
    put(&ws, "a-huge.md", &"x".repeat(1024 * 1024 + 1));
    let bin = ws.path().join("inbox/b-binary.md");
    std::fs::write(&bin, b"\xff\xfe\0binary").unwrap();
    put(&ws, "c-good.md", "Say hi.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "c-good");
    assert_eq!(
        read(ws.path().join("inbox/failed/a-huge.error.txt")),
        "the file is 1048577 bytes, larger than 1 MiB\n"
    );
    assert_eq!(
        read(ws.path().join("inbox/failed/b-binary.error.txt")),
        "the file is not UTF-8 text\n"
    );
    // The prompt sent is the small file's alone.
    let sent = llm.chat_bodies()[0].to_string();
    assert!(sent.len() < 64 * 1024, "{}", sent.len());
}

#[test]
fn a_failed_turn_moves_the_file_to_failed_and_an_unroutable_one_fails_the_run() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 400, "body": {"error": {"message": "nope"}}},
    ]));
    let ws = inbox_ws(&llm);
    put(&ws, "t1.md", "Do it.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(names(&ws, "failed"), ["t1.REPORT.md", "t1.md"]);

    put(&ws, "t2.md", "---\nclass: astrology\n---\nDo it.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("routing inbox task t2"),
        "{}",
        run.stderr
    );
    let why = read(ws.path().join("inbox/failed/t2.error.txt"));
    assert!(why.contains("astrology"), "{why}");
}

#[test]
fn workers_racing_for_one_file_never_both_take_it() {
    let llm = Llm::start(&json!({"steps": [text("done")], "loop": true}));
    let ws = inbox_ws(&llm);
    for round in 0..3 {
        put(&ws, &format!("race-{round}.md"), "Go.\n");
        let children: Vec<_> = (0..5)
            .map(|_| ws.command(&["once"]).spawn().unwrap())
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        assert!(outs.iter().all(|o| o.status.success()), "{outs:?}");
        let ran = outs.iter().filter(|o| !o.stdout.is_empty()).count();
        assert_eq!(ran, 1, "exactly one worker ran race-{round}: {outs:?}");
    }
    assert_eq!(llm.chat_bodies().len(), 3);
    assert_eq!(ws.report_files().len(), 3);
    assert_eq!(
        names(&ws, "done"),
        [
            "race-0.REPORT.md",
            "race-0.md",
            "race-1.REPORT.md",
            "race-1.md",
            "race-2.REPORT.md",
            "race-2.md"
        ]
    );
}

#[test]
fn a_stale_claim_is_taken_back_and_a_fresh_one_is_left_alone() {
    let llm = Llm::start(&json!([text("recovered")]));
    let ws = inbox_ws(&llm);
    let claimed = ws.path().join("inbox/claimed");
    std::fs::create_dir(&claimed).unwrap();
    let stale = claimed.join("old--20261201T000000Z-1-deadbeef.md");
    std::fs::write(&stale, "Finish the old job.\n").unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let fresh = claimed.join("busy--20261201T000000Z-2-cafef00d.md");
    std::fs::write(&fresh, "Someone is on it.\n").unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "old");
    assert_eq!(names(&ws, "done"), ["old.REPORT.md", "old.md"]);
    assert_eq!(
        names(&ws, "claimed"),
        ["busy--20261201T000000Z-2-cafef00d.md"]
    );
}

#[test]
fn entries_that_can_never_run_go_to_failed_with_why_and_never_stall_the_queue() {
    use std::os::unix::ffi::OsStrExt;
    let llm = Llm::start(&json!([text("ran")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{}\n[metrics]\ntextfile = \"h.prom\"\n", with_inbox(c))
    });
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    let inbox = ws.path().join("inbox");
    std::os::unix::fs::symlink("/etc/hostname", inbox.join("a-link.md")).unwrap();
    std::fs::create_dir(inbox.join("b-dir.md")).unwrap();
    let c = std::ffi::CString::new(inbox.join("c-fifo.md").as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let forged = std::ffi::OsStr::from_bytes(b"d-bad\xff\nINFO forged.md");
    std::fs::write(inbox.join(forged), "x").unwrap();
    put(
        &ws,
        "e-nl\nINFO forged too.md",
        "A name that is no task id.\n",
    );
    put(&ws, "z-real.md", "Do the real thing.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "z-real");
    assert_eq!(names(&ws, ""), ["claimed", "done", "failed"]);
    assert_eq!(
        names(&ws, "failed"),
        [
            "a-link.error.txt",
            "a-link.md",
            "b-dir.error.txt",
            "b-dir.md",
            "c-fifo.error.txt",
            "c-fifo.md",
            "d-bad__INFO_forged.error.txt",
            "d-bad__INFO_forged.md",
            "e-nl_INFO_forged_too.error.txt",
            "e-nl_INFO_forged_too.md",
        ]
    );
    assert!(read(inbox.join("failed/a-link.error.txt")).contains("symbolic link"));
    assert!(read(inbox.join("failed/b-dir.error.txt")).contains("a directory"));
    assert!(read(inbox.join("failed/d-bad__INFO_forged.error.txt")).contains("not UTF-8"));
    // Visible to an alert even on a run that took nothing else.
    let prom = read(ws.path().join("h.prom"));
    assert!(
        prom.contains("harness_inbox_skipped_total{vertical=\"test\"} 4\n"),
        "{prom}"
    );
    // The name is quoted in narration: its newline cannot forge a line of its own.
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("INFO forged")),
        "{}",
        run.stderr
    );
}

#[test]
fn a_claim_dated_in_the_future_is_reclaimed_by_the_age_its_run_id_records() {
    let llm = Llm::start(&json!([text("recovered")]));
    let ws = inbox_ws(&llm);
    let claimed = ws.path().join("inbox/claimed");
    std::fs::create_dir(&claimed).unwrap();
    let stale = claimed.join("old--20261201T000000Z-1-deadbeef.md");
    std::fs::write(&stale, "Finish the old job.\n").unwrap();
    let in_ten_years = SystemTime::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(in_ten_years)
        .unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "old");
    assert_eq!(names(&ws, "claimed"), Vec::<String>::new());
}

#[test]
fn a_dry_run_moves_nothing_and_task_id_picks_the_file() {
    let llm = Llm::start(&json!([text("b")]));
    let ws = inbox_ws(&llm);
    put(&ws, "a.md", "First.\n");
    put(&ws, "b.md", "Second.\n");
    let run = ws.run(&["once", "--dry-run"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("[a] First."), "{}", run.stdout);
    assert_eq!(names(&ws, ""), ["a.md", "b.md"]);
    let run = ws.run(&["once", "--task-id", "b"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "b");
    assert_eq!(names(&ws, ""), ["a.md", "claimed", "done"]);
}

#[test]
fn a_failure_before_the_turn_puts_the_file_back() {
    // The routed model is not served: the LLM preflight fails after the claim.
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_inbox(c)
            .replace(
                "mopac-primary = \"glm-5.3\"",
                "mopac-primary = \"not-served\"",
            )
            .replace("max_retries = 2", "max_retries = 2\npreflight = true")
    });
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    put(&ws, "t.md", "Go.\n");
    let run = ws.run(&["once"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert_eq!(names(&ws, ""), ["claimed", "t.md"]);
    assert_eq!(names(&ws, "claimed"), Vec::<String>::new());
}

#[test]
fn intake_order_decides_between_inbox_and_redmine() {
    let llm = Llm::start(&json!([text("from the inbox")]));
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let both = |order: &str| {
        let order = order.to_string();
        move |c: String| {
            format!(
                "{}\n[redmine]\nurl = \"http://127.0.0.1:{dead}\"\nkey_ref = \"literal:rm-canary-5e1f\"\nscope_query = \"status_id=open\"\nmax_retries = 0\n\n[intake]\norder = {order}\n",
                with_inbox(c)
            )
        }
    };
    // Redmine first: it is down, so the run is an intake error though the inbox has work.
    let ws = Workspace::new(&llm.base_url(), both("[\"redmine\", \"inbox\"]"));
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    put(&ws, "t.md", "Go.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(names(&ws, ""), ["t.md"]);

    // Inbox first: the file runs and Redmine is never asked.
    let ws = Workspace::new(&llm.base_url(), both("[\"inbox\", \"redmine\"]"));
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    put(&ws, "t.md", "Go.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "source"), "inbox");

    // An order that names a source that is not configured is a config error.
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}\n[intake]\norder = [\"inbox\", \"redmine\"]\n",
            with_inbox(c)
        )
    });
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("[intake].order: names \"redmine\", but [redmine] is not configured"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_missing_inbox_dir_is_a_config_error_before_any_request_and_check_shows_it() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), with_inbox);
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("[inbox].dir") && run.stderr.contains("is not a directory"),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], 0);
    let run = ws.run(&["check"]).unwrapped();
    assert!(run.stdout.contains("inbox dir"), "{run:?}");
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    let run = ws.run(&["check"]).unwrapped();
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("inbox dir") && l.contains("is a directory")),
        "{run:?}"
    );
}

#[test]
fn the_example_documents_inbox_intake_and_metrics_keys_that_load() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/harness.toml.example")).unwrap();
    // The example keeps these sections commented out (a plain `--demo` run must not need an
    // inbox or write a textfile); uncommented, they must load as documented.
    let keys = [
        "[inbox]",
        "dir =",
        "stale_after_mins =",
        "[intake]",
        "order =",
        "textfile =",
        "max_attachments =",
        "max_attachment_bytes =",
        "max_attachments_total_bytes =",
        "attachments_dir =",
    ];
    // `[intake] order` names Redmine, whose sections the example keeps commented too.
    let mut in_redmine = false;
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("# [redmine") {
                in_redmine = true;
            } else if l.starts_with('[') || l.starts_with("# [") {
                in_redmine = false;
            }
            match l.strip_prefix("# ") {
                Some(rest) if in_redmine && !l.starts_with("##") => format!("{rest}\n"),
                Some(rest) if keys.iter().any(|k| rest.starts_with(k)) => format!("{rest}\n"),
                _ => format!("{l}\n"),
            }
        })
        .collect();
    let cfg = harness::config::parse(&text, Path::new("/etc/harness/harness.toml")).unwrap();
    assert_eq!(cfg.inbox.unwrap().dir, PathBuf::from("/etc/harness/inbox"));
    assert_eq!(cfg.intake_order.len(), 2);
    assert_eq!(
        cfg.attachments,
        harness::config::AttachmentsConfig::default(),
        "the example's values are the defaults"
    );
    assert!(cfg
        .metrics_textfile
        .unwrap()
        .ends_with("node-exporter/harness.prom"));
}

#[test]
fn a_name_dropped_again_is_a_new_task_and_an_exact_repeat_never_stalls_the_queue() {
    let llm = Llm::start(&json!([text("first"), text("second"), text("third")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_inbox(c.replace("[session]\nenabled = false", "[session]\nenabled = true"))
    });
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    put(&ws, "t.md", "Do one thing.\n");
    assert_eq!(ws.run(&["once"]).code, 0);
    // The same name, new text: a new task with a model call of its own.
    put(&ws, "t.md", "Now do another.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2, "{run:?}");
    assert_eq!(
        bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        "Now do another."
    );
    // The same name and the same text again: no call, set aside with why, and the next
    // file runs in the run after.
    put(&ws, "t.md", "Now do another.\n");
    put(&ws, "u.md", "Then this.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 2);
    assert_eq!(names(&ws, ""), ["claimed", "done", "failed", "u.md"]);
    let why = read(ws.path().join("inbox/failed/t.error.txt"));
    assert!(why.contains("already ran"), "{why}");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "task_id"), "u");
    assert_eq!(llm.chat_bodies().len(), 3);
}

fn with_sessions(c: String) -> String {
    with_inbox(c.replace("[session]\nenabled = false", "[session]\nenabled = true"))
}

#[test]
fn a_reply_file_continues_its_task_s_session_after_the_task_has_run() {
    let llm = Llm::start(&json!([text("Which file?"), text("Done with a.txt.")]));
    let ws = Workspace::new(&llm.base_url(), with_sessions);
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    put(
        &ws,
        "t.md",
        "---\nclass: code\nsubject: Fix it\n---\nFix the file.\n",
    );
    put(&ws, "t.reply.md", "Use a.txt.\n");
    // The task runs first; its reply waits in the inbox for the run after.
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(names(&ws, ""), ["claimed", "done", "t.reply.md"]);
    let first = front(&ws.latest(), "session");
    let first_run = front(&ws.latest(), "run_id");

    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2, "{run:?}");
    assert_eq!(bodies[1]["model"], "glm-5.2", "the task's class, code");
    let msgs = bodies[1]["messages"].as_array().unwrap();
    let contents: Vec<&str> = msgs[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "Fix the file.",
            "Which file?",
            "[harness] A reply to your last run on this task, dropped in the inbox as t.reply.md:\n\nUse a.txt."
        ]
    );
    let report = ws.latest();
    assert_eq!(front(&report, "task_id"), "t");
    assert_eq!(front(&report, "subject"), "Fix it");
    let session = front(&report, "session");
    assert_eq!(session["key"], first["key"], "the same session");
    assert_eq!(session["parent_run"], first_run);
    assert_eq!(
        names(&ws, "done"),
        ["t.REPORT.md", "t.md", "t.reply.REPORT.md", "t.reply.md"]
    );
}

#[test]
fn a_reply_with_no_task_to_answer_is_set_aside_and_one_to_a_claimed_task_waits() {
    let llm = Llm::start(&json!([text("unused")]));
    let ws = Workspace::new(&llm.base_url(), with_sessions);
    std::fs::create_dir_all(ws.path().join("inbox/claimed")).unwrap();
    put(&ws, "nobody.reply.md", "An answer to nothing.\n");
    // A live run holds task w: its reply waits instead of racing it for the session.
    std::fs::write(
        ws.path()
            .join("inbox/claimed/w--20261202T120000Z-1-abcd.md"),
        "Work.\n",
    )
    .unwrap();
    put(&ws, "w.reply.md", "More on w.\n");
    // A run holds an earlier reply to v: a later one waits too.
    std::fs::write(
        ws.path()
            .join("inbox/claimed/v.reply--20261202T120000Z-1-abcd.md"),
        "First answer.\n",
    )
    .unwrap();
    put(&ws, "v.reply.md", "Second answer.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("no tasks in scope"), "{}", run.stderr);
    assert!(llm.chat_bodies().is_empty());
    let why = read(ws.path().join("inbox/failed/nobody.reply.error.txt"));
    assert!(why.contains("is a reply to task \"nobody\""), "{why}");
    assert_eq!(
        names(&ws, ""),
        ["claimed", "failed", "v.reply.md", "w.reply.md"]
    );
    assert!(
        run.stderr.contains("waits until task \"w\" has run"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("waits until task \"v\" has run"),
        "{}",
        run.stderr
    );
}

#[test]
fn without_sessions_a_reply_sends_the_task_and_the_reply_together() {
    let llm = Llm::start(&json!([text("Which file?"), text("Done.")]));
    let ws = inbox_ws(&llm);
    put(&ws, "t.md", "Fix the file.\n");
    assert_eq!(ws.run(&["once"]).code, 0);
    put(&ws, "t.reply.md", "Use a.txt.\n");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let msgs = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "system and the one user message");
    assert_eq!(
        msgs[1]["content"],
        "Fix the file.\n\n[harness] A reply to your last run on this task, dropped in the inbox as t.reply.md:\n\nUse a.txt."
    );
    assert_eq!(front(&ws.latest(), "task_id"), "t");
}
