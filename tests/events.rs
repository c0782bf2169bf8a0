//! `harness once --events PATH`: the JSONL stream through the built binary, every stream
//! checked against docs/events.schema.json, on every exit path (success, an LLM failure,
//! a config error, a usage error, a SIGTERM in the middle of a command).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::stub;

use std::io::Read;
use std::time::{Duration, Instant};

use common::stream::{completed, events, types};
use common::*;
use serde_json::json;

fn read_events(ws: &Workspace) -> Vec<serde_json::Value> {
    events(&std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap())
}

#[test]
fn a_demo_run_streams_every_stage_in_order() {
    let llm = Llm::start(&json!([
        tool_call("c1", "printf 'hi\\n'"),
        tool_call("c2", "rm -rf x"),
        text("# Done"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 0, "{run:?}");
    // stdout still carries the REPORT path when the events go to a file.
    let report = ws.report_files()[0].display().to_string();
    assert_eq!(run.stdout, format!("{report}\n"));
    let ev = read_events(&ws);
    assert_eq!(
        types(&ev),
        [
            "run.started",
            "task.taken",
            "route",
            "round.started",
            "round.completed",
            "tool.started",
            "tool.completed",
            "round.started",
            "round.completed",
            "tool.started",
            "tool.completed",
            "round.started",
            "round.completed",
            "report.written",
            "run.completed",
        ]
    );
    assert_eq!(ev[0]["command"], "once");
    assert_eq!(ev[1]["task_id"], "demo-1");
    assert_eq!(ev[1]["source"], "demo");
    assert_eq!(ev[2]["tier"], "mopac-primary");
    assert_eq!(ev[2]["models"], json!(["glm-5.3"]));
    assert_eq!(ev[3]["round"], 1);
    assert_eq!(ev[4]["model"], "glm-5.3");
    assert_eq!(ev[4]["tool_calls"], 1);
    assert!(ev[4]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(ev[5]["command"], "printf 'hi\\n'");
    assert_eq!(
        (&ev[6]["verdict"], &ev[6]["exit"], &ev[6]["bytes"]),
        (&json!("allowed"), &json!(0), &json!(3))
    );
    assert_eq!(ev[10]["verdict"], "denied");
    assert_eq!(ev[13]["path"], report);
    assert_eq!(ev[13]["stop_reason"], "completed");
    assert_eq!(ev[13]["rounds"], 3);
    let done = completed(&ev);
    assert_eq!(
        (&done["exit_code"], &done["stop_reason"], &done["report"]),
        (&json!(0), &json!("completed"), &json!(report))
    );
    assert_eq!(done["error"], json!(null));
    // The run id is the REPORT's.
    assert_eq!(front(&ws.latest(), "run_id"), ev[0]["run_id"]);
}

#[test]
fn with_events_on_stdout_stdout_carries_only_events() {
    let llm = Llm::start(&json!([text("# Done")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo", "--events", "-"]);
    assert_eq!(run.code, 0, "{run:?}");
    let ev = events(&run.stdout);
    let report = ws.report_files()[0].display().to_string();
    assert_eq!(completed(&ev)["report"], report);
    assert!(run.stderr.contains("REPORT written"), "{}", run.stderr);

    // A dry run's PLAN travels in a `plan` event.
    let run = ws.run(&["once", "--demo", "--dry-run", "--events", "-"]);
    assert_eq!(run.code, 0, "{run:?}");
    let ev = events(&run.stdout);
    assert_eq!(
        types(&ev),
        [
            "run.started",
            "task.taken",
            "route",
            "plan",
            "run.completed"
        ]
    );
    assert!(ev[3]["text"].as_str().unwrap().contains("PLAN"), "{ev:?}");
    assert_eq!(completed(&ev)["stop_reason"], "dry_run");

    // With a file, the PLAN goes to stdout and into the stream.
    let run = ws.run(&["once", "--demo", "--dry-run", "--events", "events.jsonl"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("PLAN"), "{}", run.stdout);
    let ev = read_events(&ws);
    assert_eq!(ev[3]["text"].as_str().unwrap(), run.stdout);
    assert_eq!(completed(&ev)["stop_reason"], "dry_run");
}

#[test]
fn an_llm_failure_ends_the_stream_with_exit_4() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 400, "body": {"error": {"message": "bad tool schema"}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 4, "{run:?}");
    let ev = read_events(&ws);
    assert_eq!(
        types(&ev),
        [
            "run.started",
            "task.taken",
            "route",
            "round.started",
            "report.written",
            "run.completed"
        ]
    );
    let done = completed(&ev);
    assert_eq!(done["exit_code"], 4);
    assert_eq!(done["stop_reason"], "llm_error");
    assert!(done["report"]
        .as_str()
        .unwrap()
        .contains("REPORT-test-demo-1-"));
}

#[test]
fn a_config_error_still_opens_and_closes_the_stream() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("vertical", "vertcal")
    });
    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 1, "{run:?}");
    let ev = read_events(&ws);
    assert_eq!(types(&ev), ["run.started", "run.completed"]);
    let done = completed(&ev);
    assert_eq!(done["stop_reason"], "config_error");
    assert_eq!(done["report"], json!(null));
    assert!(
        done["error"]
            .as_str()
            .unwrap()
            .contains("vertical: is required"),
        "{done}"
    );
}

#[test]
fn usage_errors_end_the_stream_they_asked_for() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    // clap refuses the line, but it named --events.
    let run = ws.run(&["once", "--events", "events.jsonl", "--bogus"]);
    assert_eq!(run.code, 1, "{run:?}");
    let ev = read_events(&ws);
    assert_eq!(types(&ev), ["run.started", "run.completed"]);
    assert_eq!(completed(&ev)["stop_reason"], "usage_error");
    assert!(completed(&ev)["error"]
        .as_str()
        .unwrap()
        .contains("--bogus"));

    // A --record target that cannot be written is found after parsing, before any request.
    std::fs::remove_file(ws.path().join("events.jsonl")).unwrap();
    let run = ws.run(&[
        "once",
        "--demo",
        "--events",
        "events.jsonl",
        "--record",
        "no/such/dir/c.json",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let ev = read_events(&ws);
    assert_eq!(types(&ev), ["run.started", "run.completed"]);
    assert_eq!(completed(&ev)["exit_code"], 1);

    // An events file that cannot be opened is a usage error of its own, said on stderr.
    let run = ws.run(&["once", "--demo", "--events", "no/such/dir/e.jsonl"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("--events: cannot open"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_sigterm_mid_command_is_the_last_line_and_events_arrive_as_they_happen() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": "sleep 30", "content": "Waiting."},
        text("never reached"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replacen("allow = [", "allow = [\"sleep *\", ", 1)
    });
    let path = ws.path().join("events.jsonl");
    let mut child = ws
        .command(&["once", "--demo", "--events", "events.jsonl"])
        .spawn()
        .unwrap();
    // Flushed per event: tool.started is on disk while the command still runs.
    let start = Instant::now();
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains("\"tool.started\"")
    {
        assert!(start.elapsed() < Duration::from_secs(20), "no tool.started");
        assert!(child.try_wait().unwrap().is_none(), "harness exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let ev = read_events(&ws);
    let t = types(&ev);
    assert_eq!(
        t[t.len() - 4..],
        [
            "tool.started",
            "tool.completed",
            "report.written",
            "run.completed"
        ]
    );
    assert_eq!(ev[ev.len() - 3]["ending"], "interrupted");
    let done = completed(&ev);
    assert_eq!(
        (&done["exit_code"], &done["stop_reason"]),
        (&json!(143), &json!("interrupted"))
    );
}

#[test]
fn the_canary_never_reaches_the_stream() {
    let llm = Llm::start(&json!([
        tool_call("c1", &format!("echo {CANARY}")),
        text(&format!("the key is {CANARY}")),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo", "--events", "events.jsonl"]);
    assert_eq!(run.code, 0, "{run:?}");
    let text = std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap();
    events(&text);
    assert!(!text.contains(CANARY), "{text}");
    assert!(text.contains("echo [redacted]"), "{text}");
}

#[test]
fn one_file_holds_many_runs() {
    let llm = Llm::start(&json!([text("one"), text("two")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    for _ in 0..2 {
        assert_eq!(
            ws.run(&["once", "--demo", "--events", "events.jsonl"]).code,
            0
        );
    }
    let text = std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap();
    let all: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts: Vec<usize> = (0..all.len())
        .filter(|&i| all[i]["type"] == "run.started")
        .collect();
    assert_eq!(starts.len(), 2);
    let lines: Vec<&str> = text.lines().collect();
    events(&(lines[..starts[1]].join("\n") + "\n"));
    events(&(lines[starts[1]..].join("\n") + "\n"));
}

#[test]
fn the_schema_is_strict_enough_to_catch_a_wrong_event() {
    use common::stream::is_valid;
    let ok = json!({"type": "plan", "ts": "2026-12-01T10:00:00.000Z", "run_id": "r", "text": "x"});
    assert!(is_valid(&ok));
    let mut no_ts = ok.clone();
    no_ts.as_object_mut().unwrap().remove("ts");
    assert!(!is_valid(&no_ts));
    let mut extra = ok.clone();
    extra["surprise"] = json!(1);
    assert!(!is_valid(&extra));
    assert!(!is_valid(
        &json!({"type": "tool.exploded", "ts": "2026-12-01T10:00:00.000Z", "run_id": "r"})
    ));
}

#[test]
fn a_second_signal_still_ends_the_stream_with_the_exit_code() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": "sleep 30", "content": "Waiting."},
        text("never reached"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replacen("allow = [", "allow = [\"sleep *\", ", 1)
    });
    let path = ws.path().join("events.jsonl");
    let mut child = ws
        .command(&["once", "--demo", "--events", "events.jsonl"])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !std::fs::read_to_string(&path)
        .unwrap_or_default()
        .contains("\"tool.started\"")
    {
        assert!(start.elapsed() < Duration::from_secs(20), "no tool.started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SIGINT, then SIGTERM at once: whether the second one lands before the run ends (an
    // immediate exit, 143) or after (the graceful 130), the stream ends with one
    // run.completed carrying the process's own exit code.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    let code = status.code().unwrap();
    assert!(code == 143 || code == 130, "{status:?}");
    let ev = read_events(&ws);
    assert_eq!(completed(&ev)["exit_code"], code);
    assert_eq!(completed(&ev)["stop_reason"], "interrupted");
}

/// One of every event type, each checked against the schema. The match has no `_` arm, so a
/// new event type does not compile until it is added here (and so to the schema).
#[test]
fn every_event_type_is_in_the_schema() {
    use harness::events::{line, Event, Verdict};
    use harness::llm::wire::Usage;
    let s = || "x".to_string();
    let all = vec![
        Event::RunStarted {
            version: s(),
            command: s(),
            pid: 1,
        },
        Event::TaskTaken {
            task_id: s(),
            source: "inbox".into(),
            subject: s(),
            class: None,
        },
        Event::Route {
            class: Some(s()),
            tier: s(),
            models: vec![s()],
            workflow: None,
        },
        Event::RoundStarted {
            round: 1,
            max_rounds: 2,
            model: s(),
        },
        Event::RoundCompleted {
            round: 1,
            max_rounds: 2,
            model: s(),
            usage: Usage::default(),
            cost_usd: None,
            latency_ms: 3,
            retries: 0,
            tool_calls: 1,
        },
        Event::ToolStarted {
            round: 1,
            call_id: s(),
            tool: s(),
            command: None,
        },
        Event::ToolCompleted {
            round: 1,
            call_id: s(),
            tool: s(),
            command: None,
            path: None,
            verdict: Verdict::Invalid,
            exit: None,
            ending: None,
            bytes: 0,
            reason: Some(s()),
        },
        Event::EgressDenied {
            round: 1,
            call_id: s(),
            host: "example.com".into(),
            port: 443,
            reason: "is not in the allowlist".into(),
            command: s(),
        },
        Event::Plan { text: s() },
        Event::ReportWritten {
            path: s(),
            stop_reason: "budget".into(),
            rounds: 0,
            total_tokens: 0,
            cost_usd: Some(0.5),
        },
        Event::WritebackCompleted {
            target: "redmine".into(),
            task_id: s(),
            ok: false,
            error: Some(s()),
        },
        Event::StageStarted {
            workflow: s(),
            stage: s(),
            index: 1,
            stages: 3,
            attempt: 1,
            tier: s(),
            model: s(),
        },
        Event::StageCompleted {
            workflow: s(),
            stage: s(),
            index: 1,
            attempt: 2,
            outcome: "failed".into(),
            reason: Some(s()),
        },
        Event::RunCompleted {
            exit_code: 2,
            stop_reason: "intake_error".into(),
            report: None,
            error: Some(s()),
            pr_url: Some(s()),
            duration_ms: 5,
        },
    ];
    let mut seen = std::collections::BTreeSet::new();
    for e in &all {
        seen.insert(match e {
            Event::RunStarted { .. } => 0,
            Event::TaskTaken { .. } => 1,
            Event::Route { .. } => 2,
            Event::RoundStarted { .. } => 3,
            Event::RoundCompleted { .. } => 4,
            Event::ToolStarted { .. } => 5,
            Event::ToolCompleted { .. } => 6,
            Event::Plan { .. } => 7,
            Event::ReportWritten { .. } => 8,
            Event::WritebackCompleted { .. } => 9,
            Event::RunCompleted { .. } => 10,
            Event::EgressDenied { .. } => 11,
            Event::StageStarted { .. } => 12,
            Event::StageCompleted { .. } => 13,
        });
        let text = line(e, "run-1", chrono::Utc::now(), &Default::default());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(common::stream::is_valid(&v), "{text}");
    }
    assert_eq!(seen.len(), all.len(), "one of each type");
    // Every turn stop reason (turn::TurnOutcome::stop_reason) is a valid report.written.
    for stop in [
        "completed",
        "max_rounds",
        "budget",
        "llm_error",
        "interrupted",
        "check_failed",
        "next_stage",
        "stage_failed",
    ] {
        let e = Event::ReportWritten {
            path: s(),
            stop_reason: stop.into(),
            rounds: 1,
            total_tokens: 1,
            cost_usd: None,
        };
        let text = line(&e, "run-1", chrono::Utc::now(), &Default::default());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(common::stream::is_valid(&v), "{text}");
    }
}

#[test]
fn a_signal_before_the_turn_ends_the_stream_as_interrupted() {
    use stub::{Reply, Stub};
    // The LLM preflight (GET /models) takes a minute; SIGTERM arrives while it waits.
    let llm = Stub::start(|_, path, _| {
        if path.ends_with("/models") {
            Reply::json(r#"{"data":[{"id":"glm-5.3"}]}"#).after(Duration::from_secs(60))
        } else {
            Reply::json("{}")
        }
    });
    let ws = Workspace::new(&format!("{}/v1", llm.url), |c| {
        c.replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let mut child = ws
        .command(&["once", "--demo", "--events", "events.jsonl"])
        .spawn()
        .unwrap();
    llm.wait_for("/models", Duration::from_secs(20));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(child.wait().unwrap().code(), Some(143));
    let ev = read_events(&ws);
    assert_eq!(
        types(&ev),
        ["run.started", "task.taken", "route", "run.completed"]
    );
    let done = completed(&ev);
    assert_eq!(
        (&done["exit_code"], &done["stop_reason"], &done["report"]),
        (&json!(143), &json!("interrupted"), &json!(null))
    );
}
