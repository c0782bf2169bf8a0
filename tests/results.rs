//! End-to-end tests of results a script can read (issue 25, item 2): `[finish]
//! result_schema`, the `finish` call's `result` (valid, corrected, invalid at the last
//! round, none without a schema), the REPORT's `result:`, `harness once --output json` (read
//! by `jq` in a shell chain of two runs) and `[redmine.writeback] result_fields` against a
//! fake Redmine; through the built binary and the scripted OpenAI-compatible server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::stub;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// The schema of these tests: a category, optional hours and a note.
const SCHEMA: &str = r##"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "category": {"enum": ["bug", "feature", "question"]},
    "hours": {"type": "number", "minimum": 0},
    "note": {"$ref": "#/$defs/text"}
  },
  "required": ["category"],
  "additionalProperties": false,
  "$defs": {"text": {"type": "string", "maxLength": 200}}
}"##;

/// A `finish` call step with these arguments.
fn finish(id: &str, args: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish", "arguments": args}]})
}

/// A workspace whose turns end with `finish`, with `schemas/result.json` as its result
/// schema, then `edit` applied to the config.
fn with_schema(llm: &Llm, edit: impl FnOnce(String) -> String) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), |c| {
        edit(format!(
            "{}\n[finish]\nresult_schema = \"schemas/result.json\"\n",
            c.replace("finish = \"message\"", "finish = \"tool\"")
        ))
    });
    std::fs::create_dir(ws.path().join("schemas")).unwrap();
    std::fs::write(ws.path().join("schemas/result.json"), SCHEMA).unwrap();
    ws
}

/// The `finish` tool of a request body.
fn finish_spec(body: &Value) -> Value {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "finish")
        .cloned()
        .unwrap()
}

/// The one JSON object `--output json` printed.
fn object(run: &Run) -> Value {
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn a_valid_result_is_in_the_report_and_the_model_sees_the_schema() {
    let result = json!({"category": "bug", "hours": 1.5, "note": "off by one"});
    let llm = Llm::start(&json!([finish(
        "f1",
        json!({"status": "done", "summary": "# Fixed", "result": result})
    )]));
    let ws = with_schema(&llm, |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "result"), result);
    assert!(!report.contains("result_errors:"), "{report}");
    assert_eq!(body(&report), "# Fixed\n");
    // The spec carries the schema: `result` beside the other arguments, its $defs at the
    // parameters' root where `#/$defs/text` points.
    let spec = finish_spec(&llm.chat_bodies()[0]);
    let params = &spec["function"]["parameters"];
    assert_eq!(
        params["properties"]["result"]["required"],
        json!(["category"])
    );
    assert!(params["properties"]["result"].get("$schema").is_none());
    assert_eq!(params["$defs"]["text"]["maxLength"], 200);
    assert!(spec["function"]["description"]
        .as_str()
        .unwrap()
        .contains("required with status done"));
    // The PLAN says so too.
    let plan = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    let schema = ws.path().join("schemas/result.json");
    assert!(
        plan.stdout.contains(&format!(
            "\n  result: a `finish` result matching {} (draft 2020-12; required with done)\n",
            schema.display()
        )),
        "{}",
        plan.stdout
    );
}

#[test]
fn an_invalid_or_missing_result_goes_back_and_the_next_round_corrects_it() {
    let llm = Llm::start(&json!([
        finish(
            "f1",
            json!({"status": "done", "summary": "s", "result": {"category": "chore", "hours": -1}})
        ),
        finish("f2", json!({"status": "done", "summary": "s"})),
        finish(
            "f3",
            json!({"status": "done", "summary": "Done.", "result": {"category": "feature"}})
        ),
    ]));
    let ws = with_schema(&llm, |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 3);
    let first = tool_results(&bodies[1]).pop().unwrap();
    assert!(
        first.starts_with("finish rejected: `result` does not match the result schema"),
        "{first}"
    );
    assert!(
        first.contains("at /category: ") && first.contains("at /hours: "),
        "{first}"
    );
    assert!(first.contains("The turn goes on."), "{first}");
    let second = tool_results(&bodies[2]).pop().unwrap();
    assert!(second.contains("`result` is missing"), "{second}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "result"), json!({"category": "feature"}));
    assert_eq!(front(&report, "rounds"), 3);
    let log = front(&report, "round_log");
    assert_eq!(log[0]["tools"][0]["outcome"], "invalid");
    assert_eq!(
        log[2]["tools"][0],
        json!({"outcome": "finished", "status": "done"})
    );
}

#[test]
fn an_invalid_result_at_the_last_round_ends_result_invalid_with_exit_5() {
    let llm = Llm::start(&json!([
        tool_call("c1", "echo looked"),
        finish(
            "f1",
            json!({"status": "done", "summary": "I looked.", "result": {"category": 5}})
        ),
    ]));
    let ws = with_schema(&llm, |c| c.replace("max_rounds = 4", "max_rounds = 2"));
    let run = ws.run(&["once", "--demo", "--output", "json"]);
    assert_eq!(run.code, 5, "{run:?}");
    let bodies = llm.chat_bodies();
    // The last round forces `finish`, and its note says what the result must be.
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "function", "function": {"name": "finish"}})
    );
    let note = bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(note.as_str().unwrap().contains("give `result`"), "{note}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "result_invalid");
    assert_eq!(front(&report, "result"), Value::Null);
    let errors = front(&report, "result_errors");
    assert!(
        errors[0].as_str().unwrap().starts_with("at /category: "),
        "{errors}"
    );
    assert_eq!(front(&report, "finish")["status"], "done");
    assert!(front(&report, "error")
        .as_str()
        .unwrap()
        .contains("[finish].result_schema"));
    assert_eq!(body(&report), "I looked.\n");
    let out = object(&run);
    assert_eq!(
        (&out["outcome"], &out["exit_code"], &out["result"]),
        (&json!("result_invalid"), &json!(5), &Value::Null)
    );
    assert_eq!(out["stop_reason"], "result_invalid");
}

#[test]
fn without_a_schema_finish_takes_no_result_as_before() {
    let llm = Llm::start(&json!([
        finish(
            "f1",
            json!({"status": "done", "summary": "s", "result": {"category": "bug"}})
        ),
        finish("f2", json!({"status": "done", "summary": "Plain."})),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("finish = \"message\"", "finish = \"tool\"")
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let spec = finish_spec(&bodies[0]);
    assert!(spec["function"]["parameters"]["properties"]
        .get("result")
        .is_none());
    assert!(tool_results(&bodies[1])[0].contains("unknown field `result`"));
    let report = ws.latest();
    assert!(!report.contains("\nresult:"), "{report}");
    assert_eq!(body(&report), "Plain.\n");
    // The default output is the REPORT path, as before.
    assert_eq!(
        run.stdout.trim(),
        ws.report_files()[0].display().to_string()
    );
}

#[test]
fn a_missing_bad_or_invalid_schema_is_a_config_error_naming_the_key_and_file() {
    for (text, why) in [
        (None, "cannot read"),
        (Some("{\"type\": "), "is not JSON"),
        (
            Some(r#"{"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}}"#),
            "is not a valid draft 2020-12 schema",
        ),
        (
            Some(
                r#"{"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}}"#,
            ),
            // Refused without a connection (nothing listens on port 9 either).
            "fetch",
        ),
    ] {
        let llm = Llm::start(&json!([]));
        let ws = with_schema(&llm, |c| c);
        match text {
            Some(t) => std::fs::write(ws.path().join("schemas/result.json"), t).unwrap(),
            None => std::fs::remove_file(ws.path().join("schemas/result.json")).unwrap(),
        }
        let run = ws.run(&["once", "--demo", "--output", "json"]);
        assert_eq!(run.code, 1, "{run:?}");
        let file = ws.path().join("schemas/result.json");
        assert!(
            run.stderr.contains("[finish].result_schema: ")
                && run.stderr.contains(&file.display().to_string())
                && run.stderr.contains(why),
            "{why}: {}",
            run.stderr
        );
        assert_eq!(llm.requests(), Vec::<Value>::new(), "{why}");
        // Before any REPORT: the object says how the run ended, with nulls.
        let out = object(&run);
        assert_eq!(out["outcome"], "config_error");
        assert_eq!(out["exit_code"], 1);
        for key in [
            "report",
            "result",
            "pr_url",
            "tokens",
            "cost_usd",
            "stop_reason",
        ] {
            assert_eq!(out[key], Value::Null, "{key}: {out}");
        }
        assert!(out["error"]
            .as_str()
            .unwrap()
            .contains("[finish].result_schema"));
    }
    // --check sees the same problem.
    let llm = Llm::start(&json!([]));
    let ws = with_schema(&llm, |c| c);
    std::fs::write(ws.path().join("schemas/result.json"), "[]").unwrap();
    let run = ws.run(&["check"]);
    assert_eq!(run.code, 1, "{run:?}");
}

#[test]
fn output_json_is_one_object_with_secrets_masked() {
    // The model leaks the key into its result and summary (it cannot know it: a test
    // stands in for a command that printed it).
    let llm = Llm::start(&json!([finish(
        "f1",
        json!({"status": "done", "summary": format!("key {CANARY}"),
            "result": {"category": "bug", "note": format!("saw {CANARY}")}})
    )]));
    let ws = with_schema(&llm, |c| c);
    let run = ws.run(&["once", "--demo", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains(CANARY), "{}", run.stdout);
    assert!(!run.stderr.contains(CANARY));
    let out = object(&run);
    let report = ws.report_files()[0].display().to_string();
    assert_eq!(out["report"], json!(report));
    assert_eq!(out["outcome"], "completed");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["pr_url"], Value::Null);
    assert_eq!(
        out["result"],
        json!({"category": "bug", "note": "saw [redacted]"})
    );
    assert!(out["tokens"]["total"].as_u64().unwrap() > 0, "{out}");
    assert_eq!(out["run_id"], front(&ws.latest(), "run_id"));
    assert_eq!(front(&ws.latest(), "result"), out["result"]);
    assert!(!ws.all_files_text().contains(CANARY));
    // Not with --dry-run (a PLAN is its result), nor with the events on stdout.
    let dry = ws.run(&["once", "--demo", "--dry-run", "--output", "json"]);
    assert_eq!(dry.code, 1, "{dry:?}");
    let both = ws.run(&["once", "--demo", "--events", "-", "--output", "json"]);
    assert_eq!(both.code, 1, "{both:?}");
    assert!(both.stderr.contains("both would write stdout"), "{both:?}");
}

#[test]
fn output_json_with_no_task_and_after_a_failed_turn() {
    // An LLM failure after the model was reached: a REPORT, exit 4.
    let llm = Llm::start(&json!({"steps": [], "on_exhausted":
        {"type": "error", "status": 400, "body": {"error": {"message": "bad request"}}}}));
    let ws = with_schema(&llm, |c| c);
    let run = ws.run(&["once", "--demo", "--output", "json"]);
    assert_eq!(run.code, 4, "{run:?}");
    let out = object(&run);
    assert_eq!(
        (&out["outcome"], &out["exit_code"]),
        (&json!("llm_error"), &json!(4))
    );
    assert!(out["report"].is_string(), "{out}");
    assert_eq!(out["result"], Value::Null);
    // The turn's error is the run's: a script need not open the REPORT to learn it.
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("400") && error.contains("bad request"),
        "{out}"
    );
    // An empty inbox: no task, exit 0, nulls.
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}\n[inbox]\ndir = \"inbox\"\n")
    });
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    let run = ws.run(&["once", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = object(&run);
    assert_eq!(
        (&out["outcome"], &out["report"]),
        (&json!("no_task"), &Value::Null)
    );
}

#[test]
fn a_shell_chain_reads_two_runs_with_jq() {
    if std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_err()
    {
        skip(
            "the jq shell-chain test",
            "jq is not installed (.ci/run installs it)",
        );
        return;
    }
    let first = Llm::start(&json!([finish(
        "f1",
        json!({"status": "done", "summary": "Triaged.", "result": {"category": "feature", "hours": 3}})
    )]));
    let second = Llm::start(&json!([finish(
        "f2",
        json!({"status": "done", "summary": "Planned.", "result": {"category": "question"}})
    )]));
    let a = with_schema(&first, |c| c);
    let b = with_schema(&second, |c| c);
    // Run one; jq reads its category and hours; run two gets them in its task text; jq
    // reads run two's outcome and REPORT; the script prints what it read.
    let script = r#"
set -euo pipefail
one=$("$HARNESS" once --demo --output json --config "$A")
category=$(jq -er '.result.category' <<<"$one")
hours=$(jq -er '.result.hours' <<<"$one")
test "$(jq -er '.exit_code' <<<"$one")" = 0
sed -i "s/^prompt = .*/prompt = \"Plan the $category ($hours h).\"/" "$B"
two=$("$HARNESS" once --demo --output json --config "$B")
jq -er '[.outcome, .result.category, (.report | test("REPORT-test-demo-1-"))] | @tsv' <<<"$two"
"#;
    let out = std::process::Command::new("bash")
        .args(["-c", script])
        .env("HARNESS", env!("CARGO_BIN_EXE_harness"))
        .env("A", a.config())
        .env("B", b.config())
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .env_remove("HARNESS_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "completed\tquestion\ttrue\n");
    let asked = &second.chat_bodies()[0]["messages"];
    assert!(
        asked.to_string().contains("Plan the feature (3 h)."),
        "{asked}"
    );
    assert!(!stdout.contains(CANARY));
}

#[test]
fn result_fields_set_the_issues_custom_fields_once() {
    let redmine = stub::MiniRedmine::start(Duration::ZERO);
    let llm = Llm::start(&json!([finish(
        "f1",
        json!({"status": "done", "summary": "Fixed.", "result": {"category": "bug", "hours": 1.5}})
    )]));
    let url = redmine.stub.url.clone();
    let ws = with_schema(&llm, |c| {
        format!("{c}\n[redmine]\nurl = \"{url}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n[redmine.writeback]\nresult_fields = {{ category = 11, hours = 12 }}\n")
    });
    let keys = [
        ("HARNESS_TEST_LLM_KEY", CANARY),
        ("HARNESS_TEST_REDMINE_KEY", "rm-results-canary-0a1b2c3d"),
    ];
    let run = ws.run_env(&["once", "--output", "json"], &keys);
    assert_eq!(run.code, 0, "{run:?}");
    let report = object(&run)["report"].as_str().unwrap().to_string();
    let puts = redmine.puts();
    let with_fields: Vec<&Value> = puts
        .iter()
        .filter(|p| p["issue"].get("custom_fields").is_some())
        .collect();
    assert_eq!(with_fields.len(), 1, "{puts:?}");
    let body = &with_fields[0]["issue"];
    assert_eq!(
        body["custom_fields"],
        json!([{"id": 11, "value": "bug"}, {"id": 12, "value": "1.5"}])
    );
    // In the same update as the report note.
    assert!(body["notes"]
        .as_str()
        .unwrap()
        .starts_with("[harness-report] run="));
    // A retry finds the note and the fields in place: nothing is sent again.
    let again = ws.run_env(&["writeback", &report], &keys);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(redmine.puts().len(), puts.len(), "{:?}", redmine.puts());
    assert!(!run.stdout.contains("rm-results-canary"));
}

#[test]
fn output_json_after_a_signal_and_a_second_signals_hard_exit() {
    for (signals, sleep) in [
        (&[libc::SIGTERM][..], "31.25"),
        (&[libc::SIGINT, libc::SIGTERM][..], "31.5"),
    ] {
        let llm = Llm::start(&json!([
            {"type": "tool_call", "id": "c1", "command": format!("sleep {sleep}")},
            text("never reached"),
        ]));
        let ws = Workspace::new(&llm.base_url(), |c| {
            c.replacen("allow = [", "allow = [\"sleep *\", ", 1)
        });
        let child = ws
            .command(&["once", "--demo", "--output", "json"])
            .spawn()
            .unwrap();
        wait_for_process(&format!("sleep {sleep}"));
        for signal in signals {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(child.id() as i32, *signal);
            }
        }
        let run = Run::from(child.wait_with_output().unwrap());
        // One signal: the partial REPORT, 143. Two at once: 143 at once, or the graceful 130
        // when the second came after the run ended; one object either way, with that code.
        assert!(run.code == 143 || run.code == 130, "{run:?}");
        let out = object(&run);
        assert_eq!(out["exit_code"], run.code, "{out}");
        assert_eq!(out["outcome"], "interrupted", "{out}");
        if signals.len() == 1 {
            assert_eq!(out["stop_reason"], "interrupted", "{out}");
            assert!(out["report"].is_string(), "{out}");
        }
    }
}
