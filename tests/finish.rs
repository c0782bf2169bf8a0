//! End-to-end tests of the `finish` tool and the task outcomes (`[loop] finish = "tool"`)
//! against the scripted OpenAI-compatible server, through the built binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{json, Value};

/// A `finish` call step with these arguments.
fn finish(id: &str, args: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish", "arguments": args}]})
}

/// A workspace whose turns end with the `finish` tool.
fn tool_mode(llm: &Llm) -> Workspace {
    Workspace::new(&llm.base_url(), |c| {
        c.replace("finish = \"message\"", "finish = \"tool\"")
    })
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn needs_input_asks_a_question_and_exits_0() {
    let llm = Llm::start(&json!([
        tool_call("c1", "echo looked"),
        finish(
            "f1",
            json!({"status": "needs_input", "summary": "I looked around.", "question": "Which directory?"})
        ),
    ]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "needs_input");
    assert_eq!(
        front(&report, "finish"),
        json!({"status": "needs_input", "question": "Which directory?"})
    );
    assert_eq!(body(&report), "I looked around.\n");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(tool_names(&bodies[0]), vec!["bash", "finish"]);
    assert!(bodies[0].get("tool_choice").is_none());
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("calling `finish`"), "{system}");
}

#[test]
fn failed_and_blocked_exit_5_after_the_report() {
    for status in ["failed", "blocked"] {
        let llm = Llm::start(&json!([finish(
            "f1",
            json!({"status": status, "summary": "No access to the logs."})
        )]));
        let ws = tool_mode(&llm);
        let run = ws.run(&["once", "--demo"]);
        assert_eq!(run.code, 5, "{run:?}");
        assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
        let report = ws.latest();
        assert_eq!(front(&report, "stop_reason"), "agent_failed");
        assert_eq!(front(&report, "finish")["status"], status);
        assert_eq!(body(&report), "No access to the logs.\n");
    }
}

#[test]
fn a_reply_without_a_tool_call_is_nudged_once() {
    let llm = Llm::start(&json!([
        text("I think I am done."),
        finish("f1", json!({"status": "done", "summary": "# Done"})),
    ]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "completed");
    assert_eq!(body(&ws.latest()), "# Done\n");
    let bodies = llm.chat_bodies();
    let messages = bodies[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().contains("call `finish`"),
        "{last}"
    );
    assert_eq!(
        messages[messages.len() - 2]["content"],
        "I think I am done."
    );

    // A second reply without a tool call ends the turn; the REPORT keeps both texts.
    let llm = Llm::start(&json!([text("one"), text("two")]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "completed");
    assert_eq!(front(&ws.latest(), "finish"), Value::Null);
    assert_eq!(body(&ws.latest()), "one\n\ntwo\n");
}

#[test]
fn a_text_answer_to_the_reminder_is_kept_with_the_first_one() {
    let answer = "The config is in `harness.toml`; the key is `[loop] finish`.";
    // The second text adds something: both are in the REPORT, the first first.
    let llm = Llm::start(&json!([
        text(answer),
        text("Also: `finish = \"message\"` turns the reminder off.")
    ]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "error"), Value::Null);
    assert_eq!(
        body(&report),
        format!("{answer}\n\nAlso: `finish = \"message\"` turns the reminder off.\n")
    );
    assert_eq!(llm.chat_bodies().len(), 2);

    // A second text that only acknowledges, or repeats, leaves the first one alone.
    for second in ["ok", "Done. See my answer above.", answer] {
        let llm = Llm::start(&json!([text(answer), text(second)]));
        let ws = tool_mode(&llm);
        let run = ws.run(&["once", "--demo"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(front(&ws.latest(), "stop_reason"), "completed");
        assert_eq!(body(&ws.latest()), format!("{answer}\n"), "{second:?}");
    }
}

#[test]
fn a_failed_reminder_round_after_a_text_answer_completes_with_a_note() {
    let answer = "It is 4: two and two make four.";
    let server_error =
        json!({"type": "error", "status": 500, "body": {"error": {"message": "scripted outage"}}});
    // The server fails every attempt of the reminder round (max_retries = 2), or drops it.
    let drop = json!({"type": "drop", "after_chunks": 1, "content": "never"});
    for fault in [server_error, drop] {
        let llm = Llm::start(&json!({
            "steps": [text(answer)],
            "on_exhausted": fault,
        }));
        let ws = tool_mode(&llm);
        let run = ws.run(&["once", "--demo"]);
        assert_eq!(run.code, 0, "{run:?}");
        let report = ws.latest();
        assert_eq!(front(&report, "stop_reason"), "completed", "{report}");
        assert_eq!(front(&report, "finish"), Value::Null);
        let error = front(&report, "error");
        assert!(error.is_string(), "{report}");
        let body = body(&report);
        assert!(
            body.starts_with(&format!("{answer}\n\n_[harness] ")),
            "{body}"
        );
        assert!(body.contains("failed ("), "{body}");
        assert_eq!(front(&report, "rounds"), 2);
        // The reminder was sent: the failure is the round after it.
        assert_eq!(llm.chat_bodies().len(), 4, "{fault}");
    }

    // A failure before any text answer is still a failure (exit 4).
    let llm = Llm::start(&json!([tool_call("c1", "echo looked")]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "llm_error");
}

#[test]
fn an_invalid_finish_is_a_tool_error_and_later_calls_are_not_run() {
    let llm = Llm::start(&json!([
        finish("f1", json!({"status": "needs_input", "summary": "s"})),
        {"type": "tool_call", "calls": [
            {"id": "f2", "name": "finish", "arguments": {"status": "done", "summary": "ok"}},
            {"id": "b1", "name": "bash", "arguments": {"command": "echo never > ran.txt"}}
        ]},
    ]));
    let ws = tool_mode(&llm);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    let results = tool_results(&bodies[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("finish rejected: `needs_input` needs a `question`"),
        "{results:?}"
    );
    assert!(!ws.path().join("work/ran.txt").exists());
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let log = front(&report, "round_log");
    assert_eq!(
        log[1]["tools"],
        json!([{"outcome": "finished", "status": "done"},
               {"outcome": "invalid", "reason": "not run: `finish` was called earlier in this reply"}])
    );
}

#[test]
fn the_last_round_offers_only_finish_and_forces_it() {
    let llm = Llm::start(&json!([
        tool_call("c1", "echo one"),
        finish(
            "f1",
            json!({"status": "done", "summary": "Done at the cap."})
        ),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("finish = \"message\"", "finish = \"tool\"")
            .replace("max_rounds = 4", "max_rounds = 2")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(tool_names(&bodies[1]), vec!["finish"]);
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "finish"}})
    );
    assert_eq!(front(&ws.latest(), "stop_reason"), "completed");
}

#[test]
fn an_endpoint_that_rejects_tool_choice_gets_a_tool_less_last_round() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 400, "body": {"error": {"message": "tool_choice is not supported"}}},
        text("Final words."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("finish = \"message\"", "finish = \"tool\"")
            .replace("max_rounds = 4", "max_rounds = 1")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].get("tool_choice").is_some());
    assert!(bodies[1].get("tools").is_none(), "{}", bodies[1]);
    assert!(bodies[1].get("tool_choice").is_none());
    let note = |b: &Value| b["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(note(&bodies[0])
        .as_str()
        .unwrap()
        .contains("only `finish` is available"));
    assert!(
        note(&bodies[1])
            .as_str()
            .unwrap()
            .contains("tools are no longer available"),
        "{}",
        note(&bodies[1])
    );
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "max_rounds");
    assert_eq!(body(&report), "Final words.\n");
}

#[test]
fn a_reply_with_more_tool_calls_than_max_tool_calls_runs_only_the_first() {
    let calls: Vec<Value> = (1..=40)
        .map(|i| json!({"id": format!("c{i}"), "name": "bash", "arguments": {"command": format!("echo call-{i}")}}))
        .collect();
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": calls},
        {"type": "text", "content": "done"},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("[loop]\n", "[loop]\nmax_tool_calls = 3\n")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let results = tool_results(&bodies[1]);
    // The calls over the cap are dropped from the conversation (the assistant message keeps
    // the 3 taken, each answered), and the model is told so.
    assert_eq!(results.len(), 3, "only the calls taken are answered");
    for (i, r) in results.iter().enumerate() {
        assert!(r.contains(&format!("call-{}", i + 1)), "{r}");
    }
    let messages = bodies[1]["messages"].as_array().unwrap();
    let asked = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(asked["tool_calls"].as_array().unwrap().len(), 3, "{asked}");
    let note = messages.last().unwrap();
    assert_eq!(note["role"], "user", "{note}");
    let note = note["content"].as_str().unwrap();
    assert!(
        note.contains("made 40 tool calls; only the first 3 were taken")
            && note.contains("the other 37 were dropped"),
        "{note}"
    );
    let report = ws.latest();
    assert_eq!(report.matches("\"outcome\":").count(), 3, "{report}");
}
