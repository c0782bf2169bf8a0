//! End-to-end tests of `harness once` against the scripted OpenAI-compatible server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{json, Value};

#[test]
fn two_round_demo_runs_a_real_bash_call() {
    let llm = Llm::start(&json!([
        tool_call("call_1", "printf 'hello from the tool\\n'; ls"),
        text("# Report\n\nThe tool said hello."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::write(ws.path().join("work/marker.txt"), "x").unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");

    // stdout carries exactly the REPORT path.
    let files = ws.report_files();
    assert_eq!(files.len(), 1);
    assert_eq!(run.stdout, format!("{}\n", files[0].display()));
    assert!(files[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("REPORT-test-demo-1-"));

    // What the server received.
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "glm-5.3");
    assert_eq!(bodies[0]["messages"][0]["role"], "system");
    assert_eq!(
        bodies[0]["messages"][1],
        json!({"role": "user", "content": "Say hello."})
    );
    assert_eq!(bodies[0]["tools"][0]["function"]["name"], "bash");
    assert_eq!(
        bodies[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["command"])
    );
    assert_eq!(
        tool_results(&bodies[1]),
        vec!["hello from the tool\nmarker.txt\n[exit status: 0]".to_string()]
    );
    assert_eq!(bodies[1]["messages"][2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(bodies[1]["messages"][3]["tool_call_id"], "call_1");
    let auth = &llm.requests()[0]["headers"]["authorization"];
    assert_eq!(auth, &json!(format!("Bearer {CANARY}")));

    // The REPORT.
    let report = ws.latest();
    assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), report);
    assert_eq!(body(&report), "# Report\n\nThe tool said hello.\n");
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "rounds"), 2);
    assert_eq!(front(&report, "model"), "glm-5.3");
    assert_eq!(front(&report, "tier"), "mopac-primary");
    assert_eq!(front(&report, "class"), "primary");
    assert_eq!(front(&report, "task_id"), "demo-1");
    assert!(front(&report, "total_tokens").as_u64().unwrap() > 0);

    // Narration on stderr.
    assert!(
        run.stderr.contains("harness: intake: demo issue from"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "harness: task demo-1 (demo): \"Test demo\" class=primary -> mopac-primary -> glm-5.3"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("round 1: bash \"printf"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("REPORT written:"), "{}", run.stderr);
}

#[test]
fn a_denied_command_is_fed_back_and_not_run() {
    let llm = Llm::start(&json!([
        tool_call("c1", "rm -rf victim"),
        text("I was not allowed to delete it."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::create_dir(ws.path().join("work/victim")).unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(ws.path().join("work/victim").exists());
    let results = tool_results(&llm.chat_bodies()[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("denied by the command gate, not run: "),
        "{}",
        results[0]
    );
    assert!(run.stderr.contains("-> denied"), "{}", run.stderr);
}

#[test]
fn the_round_cap_withholds_tools_on_the_last_round() {
    let llm = Llm::start(&json!([
        tool_call("c1", "echo one"),
        text("Out of rounds: here is what I have."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("max_rounds = 4", "max_rounds = 2")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].get("tools").is_some());
    assert!(bodies[1].get("tools").is_none(), "{}", bodies[1]);
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"].as_str().unwrap().contains("last round"),
        "{last}"
    );
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "max_rounds");
    assert_eq!(front(&report, "rounds"), 2);
    assert_eq!(body(&report), "Out of rounds: here is what I have.\n");
}

#[test]
fn a_model_that_keeps_calling_tools_is_stopped_at_the_cap() {
    let llm = Llm::start(&json!({"steps": [tool_call("c1", "echo again")], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("max_rounds = 4", "max_rounds = 3")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 3);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "max_rounds");
    assert_eq!(front(&report, "rounds"), 3);
}

#[test]
fn a_429_with_retry_after_is_retried() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 429, "headers": {"Retry-After": "1"},
         "body": {"error": {"message": "Rate limit reached", "type": "rate_limit", "code": "429"}}},
        text("fine now"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let started = std::time::Instant::now();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    // Retry-After: 1 was honoured (a lower bound, not a timing assertion on speed).
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
    assert_eq!(llm.chat_bodies().len(), 2);
    assert!(run.stderr.contains("HTTP 429"), "{}", run.stderr);
    assert!(run.stderr.contains("retrying in 1.0s"), "{}", run.stderr);
    let report = ws.latest();
    assert_eq!(body(&report), "fine now\n");
    assert_eq!(front(&report, "round_log")[0]["retries"], 1);
}

#[test]
fn persistent_500_after_content_writes_a_partial_report_and_exits_4() {
    let boom =
        json!({"type": "error", "status": 500, "body": {"error": {"message": "upstream boom"}}});
    let llm = Llm::start(&json!([
        {"type": "tool_call", "content": "Partial findings: the tree looks fine.",
         "calls": [{"name": "bash", "arguments": {"command": "ls"}, "id": "c1"}]},
        boom.clone(), boom.clone(), boom,
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 4, "1 + 1 attempt + 2 retries");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "llm_error");
    let error = front(&report, "error");
    let error = error.as_str().unwrap();
    assert!(error.contains("/v1/chat/completions"), "{error}");
    assert!(error.contains("HTTP 500"), "{error}");
    // run.completed carries the same error, not null.
    let events = std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap();
    let last: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run.completed");
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|e| e.contains("HTTP 500")),
        "{last}"
    );
    assert!(error.contains("upstream boom"), "{error}");
    assert!(error.contains("after 3 attempts"), "{error}");
    assert_eq!(body(&report), "Partial findings: the tree looks fine.\n");
    assert_eq!(
        run.stdout.trim(),
        ws.report_files()[0].display().to_string()
    );
    assert!(
        run.stderr.contains("harness: error: llm: POST"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_llm_failure_before_any_text_still_leaves_a_report() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 400, "body": {"error": {"message": "bad tool schema", "param": "tools"}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 1, "400 is never retried");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "llm_error");
    assert!(body(&report).contains("No reply"), "{report}");
}

#[test]
fn a_missing_key_fails_before_any_request() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run_env(&["once", "--demo"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    // The error names the key and the config file it is set in, not just the variable.
    assert_eq!(
        run.stderr.lines().last().unwrap(),
        format!(
            "harness: litellm key: environment variable HARNESS_TEST_LLM_KEY is not set ([litellm].key_ref in {})",
            ws.config().display()
        )
    );
    assert_eq!(llm.state()["connections"], 0);
    assert!(ws.report_files().is_empty());
}

#[test]
fn a_missing_key_file_names_the_file_the_key_and_the_config_before_any_request() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "key_ref = \"env:HARNESS_TEST_LLM_KEY\"",
            "key_ref = \"file:keys/llm.key\"",
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    let last = run.stderr.lines().last().unwrap();
    let file = ws.path().join("keys/llm.key");
    assert!(
        last.starts_with(&format!(
            "harness: litellm key: cannot read key file {}",
            file.display()
        )),
        "{last}"
    );
    assert!(
        last.ends_with(&format!("([litellm].key_ref in {})", ws.config().display())),
        "{last}"
    );
    assert_eq!(llm.state()["connections"], 0);
    assert!(ws.report_files().is_empty());
}

#[test]
fn an_unwritable_report_dir_fails_before_any_request() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::write(ws.path().join("reports"), "a file, not a dir").unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("report dir"), "{}", run.stderr);
    assert_eq!(llm.state()["connections"], 0);
}

#[test]
fn dry_run_prints_the_plan_and_makes_no_connection() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run_env(&["once", "-dry-run", "-demo"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!(
            "PLAN (dry-run)
  vertical: test
  task: [demo-1] Test demo (source demo)
  routing: class \"primary\" -> tier mopac-primary -> model glm-5.3
  tools: bash (allow=8 deny=1 default=deny timeout=10s)
  sandbox: {}
  bound: max 4 rounds
  llm: {}/chat/completions (key env:HARNESS_TEST_LLM_KEY)
  report: {}
",
            sandbox_plan_line(),
            llm.base_url(),
            ws.reports().display()
        )
    );
    assert!(
        run.stderr
            .ends_with("harness: dry-run complete, no LLM call made\n"),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], 0);
    assert!(!ws.reports().exists(), "a dry run writes no file");
}

#[test]
fn unparseable_tool_arguments_go_back_to_the_model() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [{"name": "bash", "arguments": "{\"command\": \"ls", "id": "c1"},
                                         {"name": "python", "arguments": {"code": "1"}, "id": "c2"}]},
        text("ok"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(&llm.chat_bodies()[1]);
    assert_eq!(results.len(), 2, "every call gets exactly one result");
    assert!(
        results[0].starts_with("error: the arguments are not valid JSON"),
        "{}",
        results[0]
    );
    assert!(
        results[1].starts_with("error: unknown tool \"python\""),
        "{}",
        results[1]
    );
}

#[test]
fn a_malformed_reply_is_retried_then_fails_with_exit_4() {
    let llm = Llm::start(&json!({"steps": [{"type": "malformed"}], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("max_retries = 2", "max_retries = 1")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 2);
    assert!(front(&ws.latest(), "error")
        .as_str()
        .unwrap()
        .contains("not a chat completion"));
}

#[test]
fn an_empty_reply_is_an_error_not_an_empty_report() {
    let llm = Llm::start(&json!({"steps": [{"type": "empty"}], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("max_retries = 2", "max_retries = 0")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(front(&ws.latest(), "error")
        .as_str()
        .unwrap()
        .contains("no content and no tool calls"));
}

#[test]
fn connection_refused_says_what_was_tried() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ws = Workspace::new(&format!("http://127.0.0.1:{port}/v1"), |c| {
        c.replace("max_retries = 2", "max_retries = 1")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    // No model was reached: the error is on stderr, and there is no REPORT to read it in.
    let error = &run.stderr;
    assert!(
        error.contains(&format!("POST http://127.0.0.1:{port}/v1/chat/completions")),
        "{error}"
    );
    assert!(error.contains("could not connect"), "{error}");
    assert!(error.contains("after 2 attempts"), "{error}");
    assert!(error.contains("no model was reached"), "{error}");
    assert!(ws.report_files().is_empty(), "{:?}", ws.report_files());
}

/// A config with sessions on, so an unreached model can be seen to leave no session.
fn with_sessions(c: String) -> String {
    c.replace("[session]\nenabled = false", "[session]\nenabled = true")
}

#[test]
fn no_model_reached_means_no_report_no_session_exit_4_and_the_event() {
    // A wrong base_url (a 404 that names no model) and a refused connection reach no
    // model: exit 4, the error on stderr and in run.completed, no REPORT, no session.
    let llm = Llm::start(&json!({"loop": true, "steps": [text("# Done")]}));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cases = [
        (format!("{}/nowhere", llm.base_url()), "HTTP 404"),
        (format!("http://127.0.0.1:{port}/v1"), "could not connect"),
        // https:// against the plain-HTTP server: named as such, never a bare timeout.
        (
            llm.base_url().replace("http://", "https://"),
            "use http:// in the URL",
        ),
    ];
    for (base_url, says) in cases {
        let ws = Workspace::new(&base_url, |c| {
            with_sessions(c.replace("max_retries = 2", "max_retries = 0"))
        });
        let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
        assert_eq!(run.code, 4, "{base_url}: {run:?}");
        assert!(
            run.stderr.contains("no model was reached"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert_eq!(run.stdout, "");
        assert!(ws.report_files().is_empty(), "{:?}", ws.report_files());
        assert!(!ws.reports().join("REPORT-latest.md").exists());
        assert!(!ws.reports().join("sessions").exists(), "{base_url}");
        let events = std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap();
        let last: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "run.completed");
        assert_eq!(last["exit_code"], 4);
        assert_eq!(last["stop_reason"], "llm_error");
        assert_eq!(last["report"], Value::Null);
        assert!(
            last["error"]
                .as_str()
                .unwrap()
                .contains("no model was reached"),
            "{last}"
        );
    }
    // The wrong base_url was tried, and nothing else reached the server as a request.
    let paths: Vec<Value> = llm.requests().iter().map(|r| r["path"].clone()).collect();
    assert!(
        paths.contains(&json!("/v1/nowhere/chat/completions")),
        "{paths:?}"
    );
    assert_eq!(llm.chat_bodies().len(), 1, "{paths:?}");

    // A model that answered, even with a 500 every time, was reached: its REPORT is written.
    let llm = Llm::start(&json!([
        {"type": "error", "status": 500, "body": {"error": {"message": "upstream boom"}}}
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_sessions(c.replace("max_retries = 2", "max_retries = 0"))
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "llm_error");
    assert!(ws.reports().join("sessions").exists());
}

#[test]
fn the_canary_key_never_appears_in_any_output() {
    // The key is echoed by the server in an error body, and sits in a file the model cats.
    let llm = Llm::start(&json!([
        tool_call("c1", "cat key.txt; env"),
        {"type": "error", "status": 401, "body": {"error": {"message": format!("Incorrect API key provided: {CANARY}")}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::write(
        ws.path().join("work/key.txt"),
        format!("the key is {CANARY}\n"),
    )
    .unwrap();
    let run = ws.run_env(
        &["once", "--demo", "-v"],
        &[("HARNESS_TEST_LLM_KEY", CANARY), ("HARNESS_OTHER", "x")],
    );
    assert_eq!(run.code, 4, "{run:?}");
    let bodies = llm.chat_bodies();
    let results = tool_results(&bodies[1]).join("\n");
    assert!(results.contains("the key is [redacted]"), "{results}");
    assert!(
        !results.contains("HARNESS_"),
        "the child env is scrubbed: {results}"
    );
    // The planted file itself is the only place the canary may be.
    std::fs::remove_file(ws.path().join("work/key.txt")).unwrap();
    for (what, text) in [
        ("stdout", run.stdout.clone()),
        ("stderr", run.stderr.clone()),
        ("files", ws.all_files_text()),
        ("tool results", results),
        ("request bodies", serde_json::to_string(&bodies).unwrap()),
    ] {
        assert!(!text.contains(CANARY), "canary leaked in {what}: {text}");
        assert!(
            !text.contains(&CANARY[3..15]),
            "part of the canary leaked in {what}"
        );
    }
    assert!(run.stderr.contains("[redacted]"), "{}", run.stderr);
}

#[test]
fn record_then_replay_reproduces_the_run_offline() {
    let llm = Llm::start(&json!([
        tool_call("c1", "echo recorded"),
        text("recorded reply")
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let cassette = ws.path().join("cassette.json");
    let run = ws.run(&["once", "--demo", "--record", cassette.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains(CANARY));
    drop(llm);
    // No key, no server: the cassette answers.
    let run = ws.run_env(
        &["once", "--demo", "--replay", cassette.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(body(&ws.latest()), "recorded reply\n");
    assert!(
        run.stderr
            .contains("bash \"echo recorded\" -> allowed, exit 0"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_demo_example_runs_offline_on_its_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("examples/demo");
    std::fs::create_dir_all(&demo).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    for f in ["harness.toml", "cassette.json"] {
        std::fs::copy(format!("{root}/examples/demo/{f}"), demo.join(f)).unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--demo", "--config", "examples/demo/harness.toml"])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{run:?}");
    // Paths relative to the config are made absolute when it is read, so the REPORT path
    // printed is absolute too (a script may cd elsewhere before it reads it).
    let printed = std::path::Path::new(run.stdout.trim());
    assert!(
        printed.is_absolute()
            && printed.starts_with(dir.path().canonicalize().unwrap().join("reports"))
            && run.stdout.contains("/reports/REPORT-demo-demo-1-"),
        "{}",
        run.stdout
    );
    let report = std::fs::read_to_string(dir.path().join("reports/REPORT-latest.md")).unwrap();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert!(body(&report).starts_with("# Demo report"));
    assert!(
        run.stderr.contains("bash \"ls -1\" -> allowed, exit 0"),
        "{}",
        run.stderr
    );
}

/// Issue 10 §5: a `--record` target that cannot be written is found before any request
/// (it used to be found after the turn, with the REPORT on disk and the tokens spent).
#[test]
fn a_record_path_that_cannot_be_written_fails_before_any_request() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::write(ws.path().join("blocker"), "a file").unwrap();
    let bad = ws.path().join("blocker/cassette.json");
    let run = ws.run(&["once", "--demo", "--record", bad.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(&format!("--record {}", bad.display())),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("cannot write in"), "{}", run.stderr);
    assert!(ws.report_files().is_empty(), "a REPORT was written");
    assert_eq!(llm.requests(), Vec::<serde_json::Value>::new());
}

#[test]
fn a_path_rule_refuses_a_script_that_a_symlink_leads_out_of_the_directory() {
    use std::os::unix::fs::PermissionsExt;
    let llm = Llm::start(&json!([
        tool_call("c1", "./scripts/ok.sh"),
        tool_call("c2", "./scripts/evil.sh"),
        text("done"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("allow = [\"ls *\"", "allow = [\"./scripts/**\", \"ls *\"")
    });
    let scripts = ws.path().join("work/scripts");
    std::fs::create_dir(&scripts).unwrap();
    for (path, body) in [
        (scripts.join("ok.sh"), "#!/bin/sh\necho inside\n"),
        (ws.path().join("evil.sh"), "#!/bin/sh\necho escaped\n"),
    ] {
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::symlink(ws.path().join("evil.sh"), scripts.join("evil.sh")).unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let first = tool_results(&bodies[1]);
    assert_eq!(first, vec!["inside\n[exit status: 0]".to_string()]);
    let second = tool_results(&bodies[2]);
    assert!(
        second[1].starts_with("denied by the command gate, not run: "),
        "{second:?}"
    );
    assert!(second[1].contains("resolves outside"), "{second:?}");
}

/// The system prompt of the first request of a `once --demo` run in `ws`.
fn first_system_prompt(ws: &Workspace) -> String {
    let llm = Llm::start(&json!([text("hello")]));
    let config = std::fs::read_to_string(ws.config()).unwrap();
    let base = config
        .lines()
        .find_map(|l| l.strip_prefix("base_url = "))
        .unwrap()
        .to_string();
    std::fs::write(
        ws.config(),
        config.replace(&base, &format!("{:?}", llm.base_url())),
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    llm.chat_bodies()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_system_prompt_states_the_rules_and_is_the_same_bytes_each_run() {
    let ws = Workspace::new("http://127.0.0.1:9", |c| c);
    let one = first_system_prompt(&ws);
    let two = first_system_prompt(&ws);
    // Two runs of one config send the same bytes (but for the day, should midnight pass).
    let undated = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("- Date: "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(undated(&one), undated(&two));
    let date = one
        .lines()
        .find_map(|l| l.strip_prefix("- Date: "))
        .unwrap();
    assert!(
        chrono::NaiveDate::parse_from_str(&date[..10], "%Y-%m-%d").is_ok(),
        "{date}"
    );
    assert!(
        date.ends_with(&format!(
            " (UTC). System: {} {}.",
            if cfg!(target_os = "linux") {
                "Linux"
            } else {
                std::env::consts::OS
            },
            std::env::consts::ARCH
        )),
        "{date}"
    );
    for line in [
        "- Network: closed;",
        "- Limits: a command is stopped after 10 s; its output is cut to 4000 bytes (head and tail kept).",
        "- Allowed commands (a trailing ` *` stands for any further words, `/**` for any program under that directory): `ls *`, `ls`, `echo *`, `cat *`, `pwd`, `printf *`, `env`, `wc *`. Anything else is denied.",
        "- Denied even when an allow rule matches: `rm *`.",
        "- Writing files: redirects (`>`, `>>`) are denied; allowed programs that write (`cp`, `mv`, `tee`, ...) may write relative paths under the working directory,",
        "or a place a path rule names. `rm` is not available.",
    ] {
        assert!(one.contains(line), "{line}\n{one}");
    }
    // No key, no key ref, no machine path.
    for secret in [CANARY, "HARNESS_TEST_LLM_KEY", ws.path().to_str().unwrap()] {
        assert!(!one.contains(secret), "{secret} in\n{one}");
    }
}
