//! Integration tests against a REAL Redmine (see tests/redmine.rs): issue conversations,
//! `finish` outcomes and task sessions carried through the issue's attachments (issue 11).
//! The tests share one server, so they run one at a time and reset the seeded DB first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::redmine::*;
use common::*;
use serde_json::{json, Value};

/// Turns end with `finish`; `sessions` turns the task sessions on.
fn finishing(c: String, sessions: bool) -> String {
    let c = c.replace("finish = \"message\"", "finish = \"tool\"");
    if sessions {
        c.replace("[session]\nenabled = false", "[session]\nenabled = true")
    } else {
        c
    }
}

fn finish_step(id: &str, args: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish", "arguments": args}]})
}

#[test]
fn without_the_server_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "redmine_sessions::needs_input_leads_with_the_question_and_failed_exits_5",
        "HARNESS_TEST_REDMINE",
    );
}

#[test]
fn needs_input_leads_with_the_question_and_failed_exits_5() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([
        finish_step(
            "f1",
            json!({"status": "needs_input", "summary": "The pager is in src/page.rs.", "question": "Which page size do you want?"})
        ),
        finish_step(
            "f2",
            json!({"status": "failed", "summary": "I cannot reach the logs."})
        ),
    ]));
    let cfg = format!(
        "{SCOPE_NEW}\n[redmine.claim]\nstatus = \"In Progress\"\n[redmine.writeback]\nstatus_done = \"Resolved\"\nstatus_failed = \"Feedback\"\nstatus_needs_input = \"Feedback\"\n"
    );
    let ws = workspace(&llm.base_url(), &cfg);
    let text = finishing(std::fs::read_to_string(ws.config()).unwrap(), false);
    std::fs::write(ws.config(), text).unwrap();

    let asked = id("CODE");
    let r = run(&ws, &["once", "--task-id", &asked.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    let i = issue(asked);
    assert_eq!(status_name(&i), "Feedback");
    let note = notes(&i)
        .into_iter()
        .find(|n| n.starts_with("[harness-report]"))
        .unwrap();
    let first_lines: Vec<&str> = note.lines().take(2).collect();
    assert!(first_lines[0].ends_with(" stop=needs_input"), "{note}");
    assert_eq!(first_lines[1], "**Question:** Which page size do you want?");
    assert_eq!(front(&ws.latest(), "stop_reason"), "needs_input");

    let failed = id("PRIMARY");
    let r = run(&ws, &["once", "--task-id", &failed.to_string()]);
    assert_eq!(r.code, 5, "{r:?}");
    assert!(r.stderr.contains("task not accomplished"), "{}", r.stderr);
    let i = issue(failed);
    assert_eq!(status_name(&i), "Feedback");
    assert_eq!(front(&ws.latest(), "stop_reason"), "agent_failed");
}

#[test]
fn two_hosts_carry_one_issue_conversation_through_its_attachment() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"strict_tool_results": true, "steps": [
        tool_call("c1", "echo looked at the pager"),
        finish_step("f1", json!({"status": "needs_input", "summary": "I looked.", "question": "Which page size?"})),
        finish_step("f2", json!({"status": "done", "summary": "Done with 50 per page."})),
    ]}));
    // No claim and no status changes: the bot's workflow cannot move a New issue straight to
    // Feedback or Resolved; the statuses are the other test's subject.
    let cfg = format!("{SCOPE_NEW}\n[redmine.claim]\nenabled = false\n");
    let host = || {
        let ws = workspace(&llm.base_url(), &cfg);
        let text = finishing(std::fs::read_to_string(ws.config()).unwrap(), true);
        std::fs::write(ws.config(), text).unwrap();
        ws
    };
    let (a, b) = (host(), host());
    let n = id("CODE");
    let task = n.to_string();

    // Run 1 on host A asks a question; its session goes onto the issue with the note.
    let r1 = run(&a, &["once", "--task-id", &task]);
    assert_eq!(r1.code, 0, "{r1:?}");
    let run1 = front(&a.latest(), "run_id");
    let i = issue(n);
    let attached: Vec<String> = i["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["filename"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        attached,
        vec![format!(
            "session-test-{n}-{}.jsonl.gz",
            run1.as_str().unwrap()
        )]
    );

    // The author answers.
    admin_put(n, json!({"notes": "Use 50 per page."}));

    // Run 2 on host B (an empty report dir) continues from the attachment.
    assert!(!b.reports().join("sessions").exists());
    let r2 = run(&b, &["once", "--task-id", &task]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let report = b.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let session = front(&report, "session");
    assert_eq!(session["store"], "redmine");
    assert_eq!(session["parent_run"], run1);
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 3);
    let (before, after) = (
        bodies[1]["messages"].as_array().unwrap(),
        bodies[2]["messages"].as_array().unwrap(),
    );
    // Run 1's messages in stored order (its tool result and its question included) ...
    assert_eq!(after[1..before.len()], before[1..]);
    assert!(
        after[before.len()]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap()
            .contains("Which page size?")
    );
    assert_eq!(
        after[before.len() + 1]["content"],
        "recorded: the turn ends here"
    );
    assert!(tool_results(&bodies[2])[0].contains("looked at the pager"));
    // ... then one message with only what is new: the answer, not harness's own note.
    assert_eq!(after.len(), before.len() + 3);
    let news = after.last().unwrap()["content"].as_str().unwrap();
    assert!(news.contains("Use 50 per page."), "{news}");
    assert!(
        !news.contains("Which page size?") && !news.contains("[harness-"),
        "{news}"
    );

    // Run 3 with nothing new makes no model call.
    let before_conn = llm.state()["connections"].clone();
    let r3 = run(&a, &["once", "--task-id", &task]);
    assert_eq!(r3.code, 0, "{r3:?}");
    assert!(
        r3.stderr.contains("nothing new on the task since run"),
        "{}",
        r3.stderr
    );
    assert_eq!(llm.state()["connections"], before_conn);
    // The stored sessions hold no key.
    for ws in [&a, &b] {
        assert!(!ws.all_files_text().contains(&var("REDMINE_BOT_API_KEY")));
    }
}

/// The admin attaches `body` to issue `n` under a session's name; returns the name.
fn attach_as_session(n: u64, body: &str) -> String {
    let (status, answer) = http(
        "POST",
        &format!("{}/uploads.json?filename=x.jsonl.gz", var("REDMINE_URL")),
        &[
            ("X-Redmine-API-Key", &var("REDMINE_ADMIN_API_KEY")),
            ("Content-Type", "application/octet-stream"),
        ],
        Some(body),
    );
    assert_eq!(status, 201, "{answer}");
    let token = serde_json::from_str::<Value>(&answer).unwrap()["upload"]["token"].clone();
    let name = format!("session-test-{n}-20200101T000000Z-1-deadbeef.jsonl.gz");
    admin_put(
        n,
        json!({"notes": "here", "uploads": [{"token": token, "filename": name, "content_type": "application/gzip"}]}),
    );
    name
}

/// Runs issue `n` with sessions on (`extra` appended to `[session]`); returns the REPORT's
/// `session` front matter.
fn run_with_session(n: u64, extra: &str) -> Value {
    let llm = Llm::start(&json!([finish_step(
        "f1",
        json!({"status": "done", "summary": "Fresh."})
    )]));
    let ws = workspace(
        &llm.base_url(),
        &format!("{SCOPE_NEW}\n[redmine.claim]\nenabled = false\n"),
    );
    let text = finishing(std::fs::read_to_string(ws.config()).unwrap(), true).replace(
        "[session]\nenabled = true",
        &format!("[session]\nenabled = true\n{extra}"),
    );
    std::fs::write(ws.config(), text).unwrap();
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    front(&ws.latest(), "session")
}

#[test]
fn a_corrupt_session_attachment_starts_fresh_with_the_reason() {
    let _g = real_redmine!();
    let n = id("CODE");
    // The admin attaches garbage under a session's name.
    let name = attach_as_session(n, "this is not gzip");
    let session = run_with_session(n, "");
    let reason = session["fresh_reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("attachment {name} of issue #{n}"))
            && reason.contains("cannot be read"),
        "{reason}"
    );
    assert_eq!(session["parent_run"], Value::Null);
}

#[test]
fn a_session_attachment_over_the_limit_is_not_read() {
    let _g = real_redmine!();
    let n = id("CODE");
    let name = attach_as_session(n, &"x".repeat(5000));
    let session = run_with_session(n, "max_attachment_bytes = 1024");
    let reason = session["fresh_reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("attachment {name} of issue #{n}"))
            && reason.contains("5000 bytes, more than [session].max_attachment_bytes (1024)"),
        "{reason}"
    );
    assert_eq!(session["parent_run"], Value::Null);
}

#[test]
fn needs_input_assigns_the_issue_to_its_author() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([finish_step(
        "f1",
        json!({"status": "needs_input", "summary": "Looked.", "question": "Which one?"})
    )]));
    let cfg = format!(
        "{SCOPE_NEW}\n[redmine.claim]\nstatus = \"In Progress\"\n[redmine.writeback]\nstatus_needs_input = \"Feedback\"\nassign_needs_input = \"author\"\n"
    );
    let ws = workspace(&llm.base_url(), &cfg);
    let text = finishing(std::fs::read_to_string(ws.config()).unwrap(), false);
    std::fs::write(ws.config(), text).unwrap();
    let n = id("STUDY2");
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    let i = issue(n);
    assert_eq!(status_name(&i), "Feedback");
    assert_eq!(
        i["assigned_to"]["id"].to_string(),
        var("REDMINE_ADMIN_USER_ID"),
        "the author (the seed's admin) is the assignee now"
    );
    assert!(
        notes(&i)
            .iter()
            .any(|x| x.contains("**Question:** Which one?")),
        "{:#?}",
        notes(&i)
    );
}

#[test]
fn a_run_cut_by_a_signal_stays_in_play_and_is_continued() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"strict_tool_results": true, "steps": [
        {"type": "tool_call", "id": "c1", "command": "sleep 7.75", "content": "Waiting."},
        finish_step("f1", json!({"status": "done", "summary": "Done after the restart."})),
    ]}));
    let scope = "scope_query = \"project_id=mopac&status_id=open&sort=priority:desc,id\"";
    let ws = workspace(&llm.base_url(), &format!("{scope}\n{WRITEBACK}"));
    let text = finishing(std::fs::read_to_string(ws.config()).unwrap(), true)
        .replace("allow = [", "allow = [\"sleep *\", ");
    std::fs::write(ws.config(), text).unwrap();
    let top = id("CODE2"); // Immediate priority: first in scope
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--config"])
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .env("HARNESS_TEST_REDMINE_KEY", var("REDMINE_BOT_API_KEY"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_process("sleep 7.75");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let first = ws.latest();
    assert_eq!(front(&first, "task_id"), top.to_string());
    assert_eq!(front(&first, "stop_reason"), "interrupted");
    let i = issue(top);
    // Not an outcome: no status_failed. The way back to New is not in the bot's workflow,
    // so the claim status stays (restoring it is best effort).
    assert_eq!(status_name(&i), "In Progress");
    assert!(notes(&i)
        .iter()
        .any(|n| n.starts_with("[harness-report]") && n.contains(" stop=interrupted")));

    // The next run, without waiting for a note, takes the same issue and continues.
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "task_id"), top.to_string());
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(
        front(&report, "session")["parent_run"],
        front(&first, "run_id")
    );
    assert_eq!(status_name(&issue(top)), "Resolved");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert!(tool_results(&bodies[1])[0].contains("interrupted"));
}
