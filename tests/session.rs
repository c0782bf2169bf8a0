//! End-to-end tests of task sessions (`[session]`) through the built binary, against the
//! scripted OpenAI-compatible server in strict mode: it refuses any request whose tool
//! calls are not each answered exactly once, so every continued history is proven
//! well-formed by the server itself. The Redmine side (two hosts, attachments) is in
//! tests/redmine_sessions.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read;

use common::*;
use serde_json::{json, Value};

/// A strict script: every request must answer every tool call exactly once.
fn strict(steps: Value) -> Llm {
    Llm::start(&json!({"steps": steps, "strict_tool_results": true}))
}

/// A workspace with sessions on and turns that end with `finish`; `edit` goes after.
fn sessions(llm: &Llm, edit: impl FnOnce(String) -> String) -> Workspace {
    Workspace::new(&llm.base_url(), |c| {
        edit(
            c.replace("finish = \"message\"", "finish = \"tool\"")
                .replace("[session]\nenabled = false", "[session]\nenabled = true"),
        )
    })
}

fn finish(id: &str, args: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish", "arguments": args}]})
}

/// The stored session of the demo task, as JSON lines.
fn stored(ws: &Workspace) -> Vec<Value> {
    let path = ws.reports().join("sessions/test/demo/demo-1.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

#[test]
fn a_cut_run_is_continued_and_a_finished_one_is_not_called_again() {
    let llm = strict(json!([
        tool_call("c1", "echo one"),
        text("I ran out of rounds."),
        finish(
            "f1",
            json!({"status": "done", "summary": "# Done\n\nAll of it."})
        ),
    ]));
    let ws = sessions(&llm, |c| c.replace("max_rounds = 4", "max_rounds = 2"));

    // Run 1: the cap ends it (the forced finish is answered in text).
    let r1 = ws.run(&["once", "--demo"]);
    assert_eq!(r1.code, 0, "{r1:?}");
    let report1 = ws.latest();
    assert_eq!(front(&report1, "stop_reason"), "max_rounds");
    let run1 = front(&report1, "run_id");
    let session1 = front(&report1, "session");
    assert_eq!(session1["key"], "test/demo/demo-1");
    assert_eq!(session1["store"], "local");
    assert_eq!(session1["parent_run"], Value::Null);
    assert_eq!(session1["fresh_reason"], "no stored session");

    // The PLAN says what would be continued.
    let plan = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(
        plan.stdout.contains(&format!(
            "  session: test/demo/demo-1 (local): would continue run {} (",
            run1.as_str().unwrap()
        )),
        "{}",
        plan.stdout
    );

    // Run 2 sends run 1's messages in stored order, then only a note to go on.
    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 3);
    let (first, last) = (messages(&bodies[1]), messages(&bodies[2]));
    // Run 1's last request, its reply, then the opening of run 2; the system prompt is
    // rebuilt (same text here).
    assert_eq!(last[..first.len()], first[..]);
    assert_eq!(
        last[first.len()],
        json!({"role": "assistant", "content": "I ran out of rounds."})
    );
    let opening = last[first.len() + 1]["content"].as_str().unwrap();
    assert!(
        opening.contains(&format!(
            "The previous run ({}) ended before the task was finished (stop reason max_rounds)",
            run1.as_str().unwrap()
        )),
        "{opening}"
    );
    assert_eq!(last.len(), first.len() + 2);
    let report2 = ws.latest();
    assert_eq!(front(&report2, "stop_reason"), "completed");
    let session2 = front(&report2, "session");
    assert_eq!(session2["parent_run"], run1);
    assert_eq!(session2["messages_loaded"], first.len() as u64 - 1 + 1);
    assert_eq!(session2["fresh_reason"], Value::Null);

    // The file: a header, then each run's record and messages.
    let lines = stored(&ws);
    assert_eq!(
        lines[0],
        json!({"type": "header", "harness_session": 1, "key": "test/demo/demo-1"})
    );
    let runs: Vec<&Value> = lines.iter().filter(|l| l["type"] == "run").collect();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["run"]["parent_run_id"], run1);
    assert_eq!(runs[1]["run"]["outcome"], "done");
    assert_eq!(runs[0]["run"]["system_hash"].as_str().unwrap().len(), 16);

    // Run 3: nothing new since a finished run: no model call, no REPORT, exit 0.
    let before = llm.state()["connections"].clone();
    let reports = ws.report_files().len();
    let r3 = ws.run(&["once", "--demo"]);
    assert_eq!(r3.code, 0, "{r3:?}");
    assert_eq!(r3.stdout, "");
    assert!(
        r3.stderr.contains("nothing new on the task since run"),
        "{}",
        r3.stderr
    );
    assert_eq!(llm.state()["connections"], before);
    assert_eq!(ws.report_files().len(), reports);
}

#[test]
fn a_dangling_tool_call_gets_a_synthetic_result() {
    // Message style, one round: the last round offers no tool, so a tool call there is
    // stored unanswered, as a crash would leave it.
    let llm = strict(json!([tool_call("c1", "echo never"), text("Answered.")]));
    let ws = sessions(&llm, |c| {
        c.replace("finish = \"tool\"", "finish = \"message\"")
            .replace("max_rounds = 4", "max_rounds = 1")
    });
    let r1 = ws.run(&["once", "--demo"]);
    assert_eq!(r1.code, 0, "{r1:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "max_rounds");
    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "session")["repaired"], 1);
    assert_eq!(body(&report), "Answered.\n");
    let results = tool_results(&llm.chat_bodies()[1]);
    assert_eq!(
        results,
        vec!["not run: the previous run was interrupted".to_string()]
    );
}

#[test]
fn a_run_sigtermed_mid_command_is_continued_with_a_well_formed_history() {
    let llm = strict(json!([
        {"type": "tool_call", "id": "c1", "command": "sleep 7.25", "content": "Waiting."},
        finish("f1", json!({"status": "done", "summary": "Continued."})),
    ]));
    let ws = sessions(&llm, |c| c.replace("allow = [", "allow = [\"sleep *\", "));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--demo", "--config"])
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_process("sleep 7.25");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert_eq!(front(&ws.latest(), "stop_reason"), "interrupted");

    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(body(&report), "Continued.\n");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    let results = tool_results(&bodies[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("interrupted"), "{results:?}");
    let opening = messages(&bodies[1]).last().unwrap()["content"].clone();
    assert!(
        opening
            .as_str()
            .unwrap()
            .contains("stop reason interrupted"),
        "{opening}"
    );
}

#[test]
fn history_over_the_cap_drops_old_rounds_whole() {
    let big = "x".repeat(3000);
    let llm = strict(json!([
        tool_call("c1", "cat big.txt"),
        tool_call("c2", "cat big.txt"),
        tool_call("c3", "cat big.txt"),
        text("Out of rounds."),
        finish("f1", json!({"status": "done", "summary": "Trimmed."})),
    ]));
    let ws = sessions(&llm, |c| {
        c.replace(
            "[session]\nenabled = true",
            "[session]\nenabled = true\nmax_history_tokens = 1800",
        )
    });
    std::fs::write(ws.path().join("work/big.txt"), &big).unwrap();
    assert_eq!(ws.run(&["once", "--demo"]).code, 0);
    let r2 = ws.run(&["once", "--demo"]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let session = front(&ws.latest(), "session");
    assert!(
        session["rounds_dropped"].as_u64().unwrap() >= 1,
        "{session}"
    );
    assert!(
        session["tokens_loaded"].as_u64().unwrap() <= 1800,
        "{session}"
    );
    let sent = messages(&llm.chat_bodies()[4]);
    assert_eq!(sent[1], json!({"role": "user", "content": "Say hello."}));
    assert!(
        sent[2]["content"]
            .as_str()
            .unwrap()
            .contains("were dropped here"),
        "{}",
        sent[2]
    );
}

#[test]
fn canary_keys_never_reach_the_stored_session() {
    let llm = strict(json!([finish(
        "f1",
        json!({"status": "needs_input", "summary": format!("The key is {CANARY}."), "question": format!("Is {CANARY} right?")})
    )]));
    let ws = sessions(&llm, |c| c);
    let r = ws.run(&["once", "--demo"]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines = stored(&ws);
    let text = serde_json::to_string(&lines).unwrap();
    assert!(!text.contains(CANARY), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(!ws.all_files_text().contains(CANARY));
}

#[test]
fn fresh_resume_and_unreadable_sessions() {
    let llm = Llm::start(&json!({"steps": [text("a")], "loop": true, "strict_tool_results": true}));
    let ws = sessions(&llm, |c| {
        c.replace("finish = \"tool\"", "finish = \"message\"")
    });
    assert_eq!(ws.run(&["once", "--demo"]).code, 0);
    let run1 = front(&ws.latest(), "run_id");

    // --resume with an id the session does not have: an intake error, nothing sent.
    let before = llm.chat_bodies().len();
    let r = ws.run(&["once", "--demo", "--resume", "20200101T000000Z-1-deadbeef"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("has no run 20200101T000000Z-1-deadbeef"),
        "{}",
        r.stderr
    );
    assert_eq!(llm.chat_bodies().len(), before);

    // --resume with a known id continues even with nothing new.
    let r = ws.run(&["once", "--demo", "--resume", run1.as_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(front(&ws.latest(), "session")["parent_run"], run1);

    // --fresh sends the task alone.
    let r = ws.run(&["once", "--demo", "--fresh"]);
    assert_eq!(r.code, 0, "{r:?}");
    let last = llm.chat_bodies().pop().unwrap();
    assert_eq!(messages(&last).len(), 2);
    assert_eq!(front(&ws.latest(), "session")["fresh_reason"], "--fresh");

    // A corrupt file: fresh, with the reason in the REPORT, never a crash.
    std::fs::write(
        ws.reports().join("sessions/test/demo/demo-1.jsonl.gz"),
        "garbage",
    )
    .unwrap();
    let r = ws.run(&["once", "--demo"]);
    assert_eq!(r.code, 0, "{r:?}");
    let reason = front(&ws.latest(), "session")["fresh_reason"].clone();
    assert!(
        reason.as_str().unwrap().starts_with("the stored session (")
            && reason
                .as_str()
                .unwrap()
                .contains("cannot be read: not a gzipped UTF-8 text"),
        "{reason}"
    );
}

#[test]
fn a_huge_session_is_read_as_a_window_and_saved_bounded() {
    // 200,001 stored messages: the task, then 100,000 rounds of a tool call and its result.
    let rounds = 100_000;
    let llm = strict(json!([finish(
        "f1",
        json!({"status": "done", "summary": "Read the window."})
    )]));
    let ws = sessions(&llm, |c| {
        c.replace(
            "[session]\nenabled = true",
            "[session]\nenabled = true\nmax_history_tokens = 2000",
        )
    });
    let path = ws.reports().join("sessions/test/demo/demo-1.jsonl.gz");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut line = |v: Value| {
        use std::io::Write;
        writeln!(gz, "{v}").unwrap();
    };
    line(json!({"type": "header", "harness_session": 1, "key": "test/demo/demo-1"}));
    line(json!({"type": "run", "run": {
        "run_id": "r1", "parent_run_id": null, "model": "m", "tier": "t",
        "stop_reason": "max_rounds", "outcome": null, "system_hash": "0",
        "seen_journal": null, "started": "2026-12-01T10:00:00Z"}}));
    let message = |m: Value| json!({"type": "message", "run_id": "r1", "message": m});
    line(message(json!({"role": "user", "content": "Say hello."})));
    // Plain text for the 200,000 lines (the same JSON as above, much faster to write).
    let mut text = String::new();
    for i in 0..rounds {
        text.push_str(&format!(
            concat!(
                r#"{{"type":"message","run_id":"r1","message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"c{i}","type":"function","function":{{"name":"bash","arguments":"{{\"command\":\"echo hi\"}}"}}}}]}}}}"#,
                "\n",
                r#"{{"type":"message","run_id":"r1","message":{{"role":"tool","tool_call_id":"c{i}","content":"hi {i}"}}}}"#,
                "\n"
            ),
            i = i
        ));
    }
    {
        use std::io::Write;
        gz.write_all(text.as_bytes()).unwrap();
    }
    gz.finish().unwrap();

    let r = ws.run(&["once", "--demo"]);
    assert_eq!(r.code, 0, "{r:?}");
    let session = front(&ws.latest(), "session");
    let loaded = session["messages_loaded"].as_u64().unwrap();
    let kept = (loaded - 2) / 2;
    assert!(kept > 5 && kept < 100, "{session}");
    assert_eq!(
        session["rounds_dropped"].as_u64().unwrap(),
        rounds - kept,
        "{session}"
    );
    assert!(
        session["tokens_loaded"].as_u64().unwrap() <= 2000,
        "{session}"
    );
    let sent = messages(&llm.chat_bodies()[0]);
    assert_eq!(sent[1], json!({"role": "user", "content": "Say hello."}));
    let note = sent[2]["content"].as_str().unwrap();
    assert!(
        note.contains(&format!("{} earlier rounds", rounds - kept)),
        "{note}"
    );
    assert_eq!(
        sent[3]["tool_calls"][0]["id"],
        format!("c{}", rounds - kept)
    );

    // Saved: the task, the window and this run, with the count in the header; small.
    let lines = stored(&ws);
    assert!(lines.len() < 200, "{}", lines.len());
    let dropped = lines[0]["rounds_dropped"].as_u64().unwrap();
    assert!(dropped >= rounds - kept, "{}", lines[0]);
    assert_eq!(lines.iter().filter(|l| l["type"] == "run").count(), 2);
}

#[test]
fn streamed_reasoning_is_sent_back_stored_masked_and_replayed() {
    let thinking = format!("I will list. The key is {CANARY}.");
    let reasoning = json!({
        "reasoning_content": thinking,
        "thinking_blocks": [{"type": "thinking", "thinking": thinking, "signature": "SIG=="}],
    });
    let steps = json!([
        {"type": "tool_call", "command": "echo one", "id": "c1", "reasoning": reasoning, "chunk_size": 4},
        finish("f1", json!({"status": "done", "summary": "Listed."})),
    ]);
    let llm = strict(steps.clone());
    let ws = sessions(&llm, |c| {
        c.replace("[litellm]\n", "[litellm]\nstreaming = true\n")
    });
    let cassette = ws.path().join("cassette.json");
    let r = ws.run(&["once", "--demo", "--record", cassette.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies[0]["stream"], true);
    // The next request carries the assembled fields on the assistant message, as sent.
    let sent = messages(&bodies[1]);
    let assistant = sent.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["reasoning_content"], thinking.as_str());
    assert_eq!(
        assistant["thinking_blocks"],
        json!([{"type": "thinking", "thinking": thinking, "signature": "SIG=="}])
    );
    // The session keeps them, masked.
    let lines = stored(&ws);
    let kept = lines
        .iter()
        .find(|l| {
            l["message"]["role"] == "assistant" && l["message"]["tool_calls"][0]["id"] == "c1"
        })
        .unwrap();
    let masked = "I will list. The key is [redacted].";
    assert_eq!(kept["message"]["reasoning_content"], masked);
    assert_eq!(kept["message"]["thinking_blocks"][0]["thinking"], masked);
    assert_eq!(kept["message"]["thinking_blocks"][0]["signature"], "SIG==");
    assert!(!serde_json::to_string(&lines).unwrap().contains(CANARY));

    let recorded = std::fs::read_to_string(&cassette).unwrap();
    assert!(
        recorded.contains("SIG==") && !recorded.contains(CANARY),
        "{recorded}"
    );

    // Replayed from the cassette (fresh), twice: the same requests' reasoning, the same REPORT.
    drop(llm);
    let mut reports = Vec::new();
    for _ in 0..2 {
        let r = ws.run_env(
            &[
                "once",
                "--demo",
                "--fresh",
                "--replay",
                cassette.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(r.code, 0, "{r:?}");
        reports.push(body(&ws.latest()));
        let lines = stored(&ws);
        let kept = lines
            .iter()
            .find(|l| l["message"]["tool_calls"][0]["id"] == "c1")
            .unwrap();
        assert_eq!(kept["message"]["reasoning_content"], masked);
        assert_eq!(kept["message"]["thinking_blocks"][0]["signature"], "SIG==");
    }
    assert_eq!(reports[0], reports[1]);
}

#[test]
fn a_session_line_over_the_bound_starts_fresh_unread() {
    let llm = strict(json!([finish(
        "f1",
        json!({"status": "done", "summary": "Fresh."})
    )]));
    let ws = sessions(&llm, |c| c);
    let path = ws.reports().join("sessions/test/demo/demo-1.jsonl.gz");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // 17 MiB of one line gzip to ~17 KiB: the reader stops at 16 MiB, holding no more.
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    {
        use std::io::Write;
        writeln!(
            gz,
            "{}",
            json!({"type": "header", "harness_session": 1, "key": "test/demo/demo-1"})
        )
        .unwrap();
        let block = vec![b'x'; 1024 * 1024];
        for _ in 0..17 {
            gz.write_all(&block).unwrap();
        }
    }
    gz.finish().unwrap();
    let r = ws.run(&["once", "--demo"]);
    assert_eq!(r.code, 0, "{r:?}");
    let reason = front(&ws.latest(), "session")["fresh_reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .contains("cannot be read: line 2 is longer than 16777216 bytes"),
        "{reason}"
    );
}
