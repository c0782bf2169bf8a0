//! End-to-end tests of the LLM side of `harness once` against the scripted server directly:
//! streaming (assembly, faults, stalls, progress), cost, budgets, fallback chains and the
//! preflight. The same paths through a real LiteLLM proxy are in `tests/litellm.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;

fn streaming(c: String) -> String {
    c.replace("max_retries = 2\n", "max_retries = 2\nstreaming = true\n")
}

fn with_chain(c: String, chain: &str) -> String {
    c.replace(
        "mopac-primary = \"glm-5.3\"",
        &format!("mopac-primary = {chain}"),
    )
}

#[test]
fn a_streamed_turn_assembles_tool_calls_and_usage() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "chunk_size": 3, "usage": {"prompt_tokens": 100, "completion_tokens": 20},
         "calls": [{"name": "bash", "arguments": {"command": "echo one"}, "id": "c1"},
                   {"name": "bash", "arguments": {"command": "echo two"}, "id": "c2"}]},
        {"type": "text", "content": "# Streamed\n\nBoth ran.", "chunk_size": 2,
         "usage": {"prompt_tokens": 200, "completion_tokens": 10}},
    ]));
    let ws = Workspace::new(&llm.base_url(), streaming);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["stream"], true);
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    let tool_results: Vec<&str> = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        tool_results,
        vec!["one\n[exit status: 0]", "two\n[exit status: 0]"]
    );
    assert_eq!(bodies[1]["messages"][2]["tool_calls"][1]["id"], "c2");
    let report = ws.latest();
    assert_eq!(body(&report), "# Streamed\n\nBoth ran.\n");
    assert_eq!(front(&report, "total_tokens"), 330);
    assert_eq!(front(&report, "cost_usd"), json!(null));
}

#[test]
fn streamed_cost_comes_from_usage_times_prices() {
    let llm = Llm::start(&json!([
        {"type": "text", "content": "priced", "usage": {"prompt_tokens": 1000, "completion_tokens": 500},
         "headers": {"x-litellm-response-cost": "0.0"}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        streaming(c).replace(
            "[models.classes]",
            "[models.prices]\n\"glm-5.3\" = { input_usd_per_mtok = 1.0, output_usd_per_mtok = 2.0 }\n\n[models.classes]",
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "cost_usd"), json!(0.002));
    assert_eq!(front(&report, "round_log")[0]["cost_usd"], json!(0.002));
}

#[test]
fn a_non_streamed_cost_comes_from_the_proxy_header() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": "echo hi", "headers": {"x-litellm-response-cost": "0.0015"}},
        {"type": "text", "content": "done", "headers": {"x-litellm-response-cost": "0.0005"}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "cost_usd"), json!(0.002));
    let log = front(&report, "round_log");
    assert_eq!(log[0]["cost_usd"], json!(0.0015));
    assert_eq!(log[1]["cost_usd"], json!(0.0005));
    assert!(run.stderr.contains("0.0015 USD"), "{}", run.stderr);
}

#[test]
fn broken_streams_are_retried_whole_within_the_same_budget() {
    let llm = Llm::start(&json!([
        {"type": "drop", "after_chunks": 2, "content": "cut"},
        {"type": "stream_error", "after_chunks": 1, "message": "litellm.APIConnectionError: Connection error."},
        {"type": "text", "content": "third time lucky"},
    ]));
    let ws = Workspace::new(&llm.base_url(), streaming);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 3);
    assert!(
        run.stderr
            .contains("in-band stream error: litellm.APIConnectionError"),
        "{}",
        run.stderr
    );
    let report = ws.latest();
    assert_eq!(body(&report), "third time lucky\n");
    assert_eq!(front(&report, "round_log")[0]["retries"], 2);
}

#[test]
fn persistent_stream_faults_exhaust_max_retries_once_not_per_layer() {
    let llm = Llm::start(&json!({"steps": [{"type": "malformed", "content": "x"}], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), streaming);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 3, "1 attempt + max_retries 2");
    let error = front(&ws.latest(), "error");
    assert!(
        error
            .as_str()
            .unwrap()
            .contains("a stream event is not JSON"),
        "{error}"
    );
    assert!(
        error.as_str().unwrap().contains("after 3 attempts"),
        "{error}"
    );
}

#[test]
fn an_empty_stream_is_a_failure_not_an_empty_report() {
    let llm = Llm::start(&json!({"steps": [{"type": "empty"}], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), |c| {
        streaming(c).replace("max_retries = 2", "max_retries = 0")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    let report = ws.latest();
    assert!(front(&report, "error")
        .as_str()
        .unwrap()
        .contains("no content and no tool calls"));
    assert!(body(&report).contains("No reply"), "{report}");
}

#[test]
fn a_stalled_stream_is_abandoned_and_retried() {
    let llm = Llm::start(&json!([
        {"type": "text", "content": "slow slow slow", "chunk_size": 4, "chunk_delay_ms": 2500},
        {"type": "text", "content": "fast"},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        streaming(c).replace(
            "streaming = true\n",
            "streaming = true\nstream_idle_timeout_secs = 1\n",
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("the stream stalled: no data for 1s (stream_idle_timeout_secs)"),
        "{}",
        run.stderr
    );
    assert_eq!(body(&ws.latest()), "fast\n");
}

#[test]
fn a_long_stream_narrates_its_progress_on_stderr() {
    let llm = Llm::start(&json!([
        {"type": "text", "content": "0123456789".repeat(8), "chunk_size": 8, "chunk_delay_ms": 350},
    ]));
    let ws = Workspace::new(&llm.base_url(), streaming);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("harness: llm: glm-5.3 streaming, ~"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.ends_with(".md\n"), "stdout is for results only");
}

#[test]
fn the_token_budget_stops_the_turn_before_the_next_round() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "id": "c1", "command": "echo hi", "content": "Looking around.",
         "usage": {"prompt_tokens": 80, "completion_tokens": 30}},
        text("never sent"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c + "\n[budget]\nmax_total_tokens = 100\nmax_cost_usd = 5.0\n"
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "a configured limit is a bounded stop: {run:?}");
    assert_eq!(llm.chat_bodies().len(), 1);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "budget");
    assert_eq!(front(&report, "max_total_tokens"), 100);
    assert_eq!(front(&report, "max_cost_usd"), json!(5.0));
    assert_eq!(
        front(&report, "error"),
        "budget: 110 tokens used, [budget] max_total_tokens is 100"
    );
    assert_eq!(body(&report), "Looking around.\n");
    assert!(
        run.stderr.contains("stopping before round 2"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_cost_budget_uses_the_reported_cost() {
    let llm = Llm::start(&json!({"steps": [
        {"type": "tool_call", "id": "c1", "command": "echo hi", "headers": {"x-litellm-response-cost": "0.006"}},
    ], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), |c| c + "\n[budget]\nmax_cost_usd = 0.01\n");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 2);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "budget");
    assert_eq!(front(&report, "cost_usd"), json!(0.012));
    assert_eq!(
        front(&report, "error"),
        "budget: 0.012 USD spent, [budget] max_cost_usd is 0.01"
    );
}

#[test]
fn the_proxy_budget_refusal_is_not_retried_and_exits_4() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 422, "body": {"error": {"message": "Budget has been exceeded! Current cost: 0.004, Max budget: 0.003", "type": "budget_exceeded", "param": null, "code": "422"}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 1);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "budget");
    let error = front(&report, "error");
    assert!(
        error
            .as_str()
            .unwrap()
            .starts_with("the proxy's budget for this key is exhausted: POST"),
        "{error}"
    );
}

#[test]
fn an_unknown_model_falls_back_to_the_next_in_the_chain() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 400, "body": {"error": {"message": "/chat/completions: Invalid model name passed in model=glm-9. Call `/v1/models` to view available models for your key.", "type": "invalid_request_error", "param": null, "code": "400"}}},
        tool_call("c1", "echo hi"),
        text("answered by the fallback"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_chain(c, "[\"glm-9\", \"glm-5.3\"]")
    });
    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout.contains(
            "routing: class \"primary\" -> tier mopac-primary -> models glm-9 -> glm-5.3\n"
        ),
        "{}",
        dry.stdout
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let models: Vec<String> = llm
        .chat_bodies()
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        models,
        vec!["glm-9", "glm-5.3", "glm-5.3"],
        "the fallback stays"
    );
    let report = ws.latest();
    assert_eq!(front(&report, "model"), "glm-5.3");
    assert_eq!(front(&report, "rounds"), 2);
    let skipped = front(&report, "models_skipped");
    assert_eq!(skipped[0]["model"], "glm-9");
    let reason = skipped[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "model \"glm-9\" (from [models].mopac-primary) is unknown to the endpoint: POST"
        ),
        "{reason}"
    );
    assert!(
        run.stderr
            .contains("glm-9 skipped, falling back to glm-5.3"),
        "{}",
        run.stderr
    );
}

#[test]
fn exhausted_retries_fall_back_too() {
    let boom = json!({"type": "error", "status": 503, "body": "Service Unavailable"});
    let llm = Llm::start(&json!([boom.clone(), boom, text("glm-5.2 here")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_chain(c, "[\"glm-5.3\", \"glm-5.2\"]").replace("max_retries = 2", "max_retries = 1")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "model"), "glm-5.2");
    let reason = front(&report, "models_skipped")[0]["reason"].clone();
    assert!(
        reason
            .as_str()
            .unwrap()
            .contains("after 2 attempts: HTTP 503"),
        "{reason}"
    );
}

#[test]
fn an_unknown_model_without_fallback_names_the_config_entry() {
    let llm = Llm::start(&json!([
        {"type": "error", "status": 404, "body": {"error": {"message": "The model `glm-9` does not exist", "code": "model_not_found"}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| with_chain(c, "\"glm-9\""));
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(llm.chat_bodies().len(), 1, "never retried");
    let error = front(&ws.latest(), "error");
    assert!(
        error.as_str().unwrap().starts_with(
            "model \"glm-9\" (from [models].mopac-primary) is unknown to the endpoint"
        ),
        "{error}"
    );
}

#[test]
fn a_rejected_key_is_named_by_its_ref_never_shown() {
    for body in [
        json!({"error": {"message": "Invalid API key (custom_auth)", "type": "auth_error", "param": "None", "code": "401"}}),
        json!({"error": {"message": "No connected db.", "type": "no_db_connection", "param": null, "code": "400"}}),
    ] {
        let status = if body["error"]["code"] == "401" {
            401
        } else {
            400
        };
        let llm = Llm::start(&json!([{"type": "error", "status": status, "body": body}]));
        let ws = Workspace::new(&llm.base_url(), |c| {
            with_chain(c, "[\"glm-5.3\", \"glm-5.2\"]")
        });
        let run = ws.run(&["once", "--demo"]);
        assert_eq!(run.code, 4, "{run:?}");
        assert_eq!(llm.chat_bodies().len(), 1, "no retry, no fallback");
        let error = front(&ws.latest(), "error");
        assert!(
            error.as_str().unwrap().starts_with(
                "the endpoint rejected the key from [litellm].key_ref (env:HARNESS_TEST_LLM_KEY)"
            ),
            "{error}"
        );
        assert!(!run.stderr.contains(CANARY) && !ws.all_files_text().contains(CANARY));
    }
}

#[test]
fn preflight_skips_unlisted_models_before_any_token() {
    let llm = Llm::start(&json!([text("hello from glm-5.2")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_chain(c, "[\"glm-9\", \"glm-5.2\"]")
            .replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let paths: Vec<String> = llm
        .requests()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["method"].as_str().unwrap(),
                r["path"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(paths, vec!["GET /v1/models", "POST /v1/chat/completions"]);
    assert_eq!(llm.chat_bodies()[0]["model"], "glm-5.2");
    let report = ws.latest();
    assert_eq!(front(&report, "model"), "glm-5.2");
    assert_eq!(
        front(&report, "models_skipped"),
        json!([{"model": "glm-9", "reason": "preflight: GET /models does not list \"glm-9\" (from [models].mopac-primary)"}])
    );
}

#[test]
fn preflight_with_no_served_model_fails_with_exit_1_and_spends_nothing() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_chain(c, "\"glm-9\"")
            .replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(
            "preflight: the endpoint serves none of [models].mopac-primary = [\"glm-9\"]"
        ),
        "{}",
        run.stderr
    );
    assert!(llm.chat_bodies().is_empty());
    assert!(ws.report_files().is_empty());
}

#[test]
fn the_plan_shows_the_budget_and_the_llm_options() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        streaming(c) + "\n[budget]\nmax_total_tokens = 5000\nmax_cost_usd = 0.25\n"
    });
    let run = ws.run_env(&["once", "--demo", "--dry-run"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("  bound: max 4 rounds, max 5000 tokens, max 0.25 USD\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "  llm: http://127.0.0.1:9/v1/chat/completions (key env:HARNESS_TEST_LLM_KEY, streaming)\n"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn check_prints_a_checklist_and_sends_no_completion() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["check"]).unwrapped();
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.iter().all(|l| !l.starts_with("FAIL")),
        "{}",
        run.stdout
    );
    assert_eq!(lines.last(), Some(&"all 15 checks passed"));
    assert!(
        lines.iter().any(|l| l.starts_with("ok    sandbox: ")),
        "{}",
        run.stdout
    );
    for expected in [
        "ok    litellm key: env:HARNESS_TEST_LLM_KEY resolves",
        "ok    [models].mopac-primary: glm-5.3 listed",
        "skip  redmine: no [redmine] section",
        "warn  gate: allow rule `env`: `env` runs other commands; the gate judges the command it runs against the rules too",
    ] {
        assert!(lines.contains(&expected), "{expected}\n{}", run.stdout);
    }
    assert!(llm.chat_bodies().is_empty());
    assert!(!run.stdout.contains(CANARY) && !run.stderr.contains(CANARY));
}

#[test]
fn check_fails_on_every_broken_piece_and_exits_1() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_chain(c, "[\"glm-5.3\", \"glm-9\"]")
            + "\n[redmine]\nurl = \"http://127.0.0.1:9\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n"
    });
    std::fs::write(ws.path().join("reports"), "not a dir").unwrap();
    let run = ws
        .run_env(
            &["check"],
            &[
                ("HARNESS_TEST_LLM_KEY", CANARY),
                ("HARNESS_TEST_REDMINE_KEY", "rm-key"),
            ],
        )
        .unwrapped();
    assert_eq!(run.code, 1, "{run:?}");
    for expected in [
        "FAIL  report dir: cannot create report dir",
        "FAIL  [models].mopac-primary: not listed by GET /models: \"glm-9\"",
        "ok    redmine key: env:HARNESS_TEST_REDMINE_KEY resolves",
        "FAIL  redmine: ",
    ] {
        assert!(run.stdout.contains(expected), "{expected}\n{}", run.stdout);
    }
    assert!(
        run.stdout.ends_with("3 of 16 checks failed\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("check: 3 of 16 checks failed"),
        "{}",
        run.stderr
    );
    let missing = ws.run_env(&["check"], &[]).unwrapped();
    assert!(
        missing
            .stdout
            .contains("FAIL  litellm key: environment variable HARNESS_TEST_LLM_KEY is not set"),
        "{}",
        missing.stdout
    );
}
