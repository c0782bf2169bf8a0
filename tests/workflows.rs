//! End-to-end tests of `[workflows]` (issue 24) through the built binary and the scripted
//! model: a task run as plan -> implement -> review over three `harness once` runs, each
//! stage on its own model, the implement check failing once and passing on retry; an
//! `on_fail` loop bounded by `max_loops` with `per_run = "all"`; routing by class, intent,
//! default and a refused tie; config errors by key; `harness check` listing the workflows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::stream::{events, is_valid};
use common::*;
use serde_json::{json, Value};

/// A `finish` call step.
pub(crate) fn finish(id: &str, status: &str, summary: &str) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish", "arguments": {"status": status, "summary": summary}}]})
}

/// The three skills and the workflow `fix` over them; `extra` goes after `[workflows]`.
pub(crate) fn workflow_config(
    c: String,
    per_run: &str,
    review_on_fail: bool,
    max_loops: u32,
) -> String {
    let c = c
        .replace("finish = \"message\"", "finish = \"tool\"")
        .replace("[session]\nenabled = false", "[session]\nenabled = true\nstore = \"local\"")
        .replace(
            "mopac-code = \"glm-5.2\"",
            "mopac-code = \"glm-5.2\"\nmopac-study = \"glm-4.7-flash\"\nmopac-review = \"glm-5-turbo\"",
        )
        .replace("code = \"mopac-code\"", "code = \"mopac-code\"\nfixing = \"workflow:fix\"")
        .replace("class = \"primary\"", "class = \"fixing\"")
        .replace("deny = [\"rm *\"]", "deny = [\"rm *\"]\nwrite_redirects = true");
    let on_fail = if review_on_fail {
        "on_fail = \"implement\"\n"
    } else {
        ""
    };
    format!(
        r#"{c}
[workflows]
per_run = "{per_run}"
max_loops = {max_loops}

[workflows.fix]
intent = "fix bug error failing crash"
stages = ["plan", "implement", "review"]

[workflows.fix.stage.plan]
skill = "skills/plan.md"
tier = "mopac-study"
max_rounds = 3

[workflows.fix.stage.implement]
skill = "skills/implement.md"
tier = "mopac-code"
retries = 1
check = "cat done.txt"

[workflows.fix.stage.review]
skill = "skills/review.md"
tier = "mopac-review"
{on_fail}"#
    )
}

pub(crate) fn skills(ws: &Workspace) {
    let dir = ws.path().join("skills");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plan.md"),
        "---\ntitle: Plan the fix\nsuccess_check: a numbered plan of at most five steps\n---\nPLAN-SKILL: write a short plan.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("implement.md"),
        "IMPLEMENT-SKILL: make the change; write done.txt.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("review.md"),
        "---\nsuccess_check: the change does what the plan says\n---\nREVIEW-SKILL: review the change.\n",
    )
    .unwrap();
}

/// The model of each stage of `fix` as the scripted model was asked, in the three-run test:
/// plan, implement twice (the check fails once), review.
pub(crate) const STAGE_MODELS: [&str; 5] = [
    "glm-4.7-flash",
    "glm-5.2",
    "glm-5.2",
    "glm-5.2",
    "glm-5-turbo",
];

/// The `model` of every chat request the scripted model got, in order.
pub(crate) fn models_asked(llm: &Llm) -> Vec<String> {
    llm.chat_bodies()
        .iter()
        .map(|b| b["model"].as_str().unwrap().to_string())
        .collect()
}

/// examples/workflow (its config, cassette and skills, and `extra` of its files) copied
/// to `dest`, with an empty work root.
fn copy_example(dest: &std::path::Path, extra: &[&str]) {
    let root = env!("CARGO_MANIFEST_DIR");
    for d in ["skills", "tests", "work"] {
        std::fs::create_dir_all(dest.join(d)).unwrap();
    }
    let files = [
        "harness.toml",
        "cassette.json",
        "skills/plan.md",
        "skills/implement.md",
        "skills/review.md",
    ];
    for f in files.iter().chain(extra) {
        std::fs::copy(format!("{root}/examples/workflow/{f}"), dest.join(f)).unwrap();
    }
}

fn read_events(ws: &Workspace, name: &str) -> Vec<Value> {
    let ev = events(&std::fs::read_to_string(ws.path().join(name)).unwrap());
    for e in &ev {
        assert!(
            is_valid(e),
            "not valid against docs/events.schema.json: {e}"
        );
    }
    ev
}

fn of_type<'a>(ev: &'a [Value], t: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["type"] == t).collect()
}

/// The system prompt of a chat request.
fn system_of(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn three_runs_take_a_task_through_plan_implement_review_each_on_its_model() {
    let llm = Llm::start(&json!([
        // run 1: plan
        finish("p1", "done", "1. write done.txt"),
        // run 2: implement, attempt 1 says done without the file: the check fails
        finish("i1", "done", "done, I think"),
        // attempt 2 writes it
        tool_call("i2", "printf ok > done.txt"),
        finish("i3", "done", "wrote done.txt"),
        // run 3: review
        finish("r1", "done", "looks right"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| workflow_config(c, "stage", false, 2));
    skills(&ws);

    let run1 = ws.run(&["once", "--demo", "--events", "ev1.jsonl"]);
    assert_eq!(run1.code, 0, "{run1:?}");
    let r1 = std::fs::read_to_string(run1.stdout.trim()).unwrap();
    assert_eq!(front(&r1, "stop_reason"), "next_stage");
    let w1 = front(&r1, "workflow");
    assert_eq!(w1["name"], "fix");
    assert_eq!(w1["route"], json!({"by": "named", "class": "fixing"}));
    assert_eq!(
        (w1["stage"].clone(), w1["index"].clone(), w1["next"].clone()),
        (json!("plan"), json!(1), json!("implement"))
    );
    let ev1 = read_events(&ws, "ev1.jsonl");
    let started = of_type(&ev1, "stage.started");
    assert_eq!(started.len(), 1, "{ev1:?}");
    assert_eq!(started[0]["stage"], "plan");
    assert_eq!(started[0]["model"], "glm-4.7-flash");
    assert_eq!(of_type(&ev1, "stage.completed")[0]["outcome"], "passed");

    // The PLAN says where the task stands.
    let plan = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        plan.stdout.contains("  workflow: fix (plan -> implement -> review), one stage per run, max_loops 2; this run starts at stage 2/3 implement\n"),
        "{plan:?}"
    );
    let run2 = ws.run(&["once", "--demo", "--events", "ev2.jsonl"]);
    assert_eq!(run2.code, 0, "{run2:?}");
    let r2 = std::fs::read_to_string(run2.stdout.trim()).unwrap();
    assert_eq!(front(&r2, "stop_reason"), "next_stage");
    let w2 = front(&r2, "workflow");
    assert_eq!(w2["stage"], "implement");
    let attempts = w2["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{w2}");
    assert_eq!(attempts[0]["outcome"], "failed");
    assert!(
        attempts[0]["reason"]
            .as_str()
            .unwrap()
            .contains("the check `cat done.txt` ended with exit 1"),
        "{w2}"
    );
    assert_eq!(attempts[1]["outcome"], "passed");
    assert_eq!(attempts[1]["check"]["passed"], true);
    assert_eq!(w2["earlier"][0]["stage"], "plan");
    let ev2 = read_events(&ws, "ev2.jsonl");
    let attempts: Vec<Value> = of_type(&ev2, "stage.started")
        .iter()
        .map(|e| e["attempt"].clone())
        .collect();
    assert_eq!(attempts, [json!(1), json!(2)]);

    let run3 = ws.run(&["once", "--demo"]);
    assert_eq!(run3.code, 0, "{run3:?}");
    let r3 = std::fs::read_to_string(run3.stdout.trim()).unwrap();
    assert_eq!(front(&r3, "stop_reason"), "completed");
    let w3 = front(&r3, "workflow");
    assert_eq!(
        (w3["stage"].clone(), w3["next"].clone()),
        (json!("review"), Value::Null)
    );

    // Each stage on its own model, with its own skill and the previous stage's summary.
    let bodies = llm.chat_bodies();
    assert_eq!(models_asked(&llm), STAGE_MODELS);
    assert!(
        system_of(&bodies[0]).contains("PLAN-SKILL")
            && system_of(&bodies[0]).contains("a numbered plan of at most five steps")
    );
    assert!(
        system_of(&bodies[1]).contains("IMPLEMENT-SKILL")
            && !system_of(&bodies[1]).contains("PLAN-SKILL")
    );
    let user1 = bodies[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        user1.contains("previous stage (plan) ended with this summary:\n\n1. write done.txt"),
        "{user1}"
    );
    let retry = bodies[2]["messages"][1]["content"].as_str().unwrap();
    assert!(
        retry.contains("The previous attempt of this stage failed: the check `cat done.txt`"),
        "{retry}"
    );
    let user3 = bodies[4]["messages"][1]["content"].as_str().unwrap();
    assert!(
        user3.contains("previous stage (implement) ended with this summary:\n\nwrote done.txt"),
        "{user3}"
    );

    // The task is finished: a fourth run has nothing new to do.
    let run4 = ws.run(&["once", "--demo"]);
    assert_eq!(run4.code, 0, "{run4:?}");
    assert_eq!(llm.chat_bodies().len(), 5, "{run4:?}");
}

#[test]
fn an_edge_back_is_bounded_by_max_loops_and_all_stages_run_in_one_run() {
    let llm = Llm::start(&json!([
        finish("p1", "done", "the plan"),
        tool_call("i1", "printf ok > done.txt"),
        finish("i2", "done", "implemented"),
        finish("r1", "failed", "the change misses a case"),
        // back to implement (loop 1 of 1)
        finish("i3", "done", "implemented again"),
        finish("r2", "failed", "still missing"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        workflow_config(c, "all", true, 1) + "\n[metrics]\ntextfile = \"harness.prom\"\n"
    });
    skills(&ws);
    let run = ws.run(&["once", "--demo", "--events", "ev.jsonl", "--output", "json"]);
    // Stage attempts by outcome in the textfile, which promtool accepts.
    let prom = ws.path().join("harness.prom");
    let text = std::fs::read_to_string(&prom).unwrap();
    for (stage, outcome, n) in [
        ("implement", "passed", 2),
        ("review", "failed", 2),
        ("plan", "passed", 1),
    ] {
        let line = format!(
            "harness_stage_attempts_total{{vertical=\"test\",workflow=\"fix\",stage=\"{stage}\",outcome=\"{outcome}\"}} {n}"
        );
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    crate::metrics::promtool_check(&prom);
    assert_eq!(run.code, 5, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "stage_failed");
    assert!(
        front(&report, "error").as_str().unwrap().starts_with(
            "stage review failed: the model ended the stage with `finish` failed: still missing"
        ),
        "{report}"
    );
    let w = front(&report, "workflow");
    let stages: Vec<&str> = w["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["plan", "implement", "review", "implement", "review"]
    );
    assert_eq!(
        (w["loops"].clone(), w["next"].clone(), w["per_run"].clone()),
        (json!(1), Value::Null, json!("all"))
    );
    // rounds numbered across the run
    let rounds: Vec<u64> = front(&report, "round_log")
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["round"].as_u64().unwrap())
        .collect();
    assert_eq!(rounds, [1, 2, 3, 4, 5, 6]);
    // its cap: each attempt's own (plan 3, the others [loop].max_rounds = 4), summed
    assert_eq!(front(&report, "max_rounds"), 3 + 4 * 4);
    let ev = read_events(&ws, "ev.jsonl");
    let outcomes: Vec<&str> = of_type(&ev, "stage.completed")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["passed", "passed", "failed", "passed", "failed"]);
    let out: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        (out["exit_code"].clone(), out["stop_reason"].clone()),
        (json!(5), json!("stage_failed"))
    );
}

/// A config of two workflows for the router, and the demo task's subject and class.
fn routing_config(c: String, subject: &str, default: Option<&str>) -> String {
    let c = c
        .replace("subject = \"Test demo\"", &format!("subject = {subject:?}"))
        .replace("class = \"primary\"\n", "");
    let default = default.map_or_else(String::new, |d| format!("default = {d:?}\n"));
    format!(
        r#"{c}
[workflows]
per_run = "all"
{default}
[workflows.fix]
intent = "fix bug error failing crash"
stages = ["work"]
[workflows.fix.stage.work]
skill = "skills/plan.md"

[workflows.triage]
intent = "bug report triage label"
stages = ["work"]
[workflows.triage.stage.work]
skill = "skills/review.md"
"#
    )
}

fn plan_routing(ws: &Workspace) -> Run {
    ws.run(&["once", "--demo", "--dry-run"])
}

#[test]
fn the_router_picks_by_intent_takes_the_default_and_refuses_a_tie() {
    let llm = Llm::start(&json!([]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        routing_config(c, "Crash with an error on save", None)
    });
    skills(&ws);
    let run = plan_routing(&ws);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("-> workflow fix (intent: 2 words shared: crash, error)"),
        "{run:?}"
    );

    let ws = Workspace::new(&llm.base_url(), |c| {
        routing_config(c, "Tidy the logs", Some("triage"))
    });
    skills(&ws);
    let run = plan_routing(&ws);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("-> workflow triage ([workflows].default: no intent matched)"),
        "{run:?}"
    );

    let ws = Workspace::new(&llm.base_url(), |c| {
        routing_config(c, "Tidy the logs", None)
    });
    skills(&ws);
    let run = plan_routing(&ws);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("[workflows].default is not set"),
        "{run:?}"
    );

    // bug+crash (fix) against bug+report (triage): a tie, never a guess
    let ws = Workspace::new(&llm.base_url(), |c| {
        routing_config(c, "Bug report: crash at start", Some("fix"))
    });
    skills(&ws);
    let run = plan_routing(&ws);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("match workflows \"fix\" and \"triage\" equally"),
        "{run:?}"
    );
    assert!(llm.chat_bodies().is_empty());
}

#[test]
fn workflow_mistakes_are_named_by_key_and_check_lists_the_workflows() {
    let llm = Llm::start(&json!([]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        workflow_config(c, "stage", true, 2)
            .replace(
                "skill = \"skills/review.md\"",
                "skill = \"skills/missing.md\"",
            )
            .replace("tier = \"mopac-study\"", "tier = \"mopac-nope\"")
            .replace(
                "on_fail = \"implement\"",
                "on_fail = \"deploy\"\nretires = 2",
            )
            + "[workflows.fix.stage.extra]\nskill = \"skills/plan.md\"\n"
    });
    skills(&ws);
    let run = ws.run(&["check"]);
    assert_eq!(run.code, 1, "{run:?}");
    for want in [
        "[workflows.fix.stage.review].skill: cannot read",
        "[workflows.fix.stage.plan].tier: names tier \"mopac-nope\"",
        "[workflows.fix.stage.extra]: is not in the workflow's stages list",
        "retires",
        "did you mean `retries`?",
    ] {
        assert!(run.stderr.contains(want), "{want:?} missing: {run:?}");
    }
    // an edge forward is refused
    let ws = Workspace::new(&llm.base_url(), |c| {
        workflow_config(c, "stage", false, 2)
            .replace("retries = 1", "retries = 1\non_fail = \"review\"")
    });
    skills(&ws);
    let run = ws.run(&["check"]);
    assert!(
        run.stderr.contains(
            "[workflows.fix.stage.implement].on_fail: \"review\" comes after \"implement\""
        ),
        "{run:?}"
    );

    let ws = Workspace::new(&llm.base_url(), |c| workflow_config(c, "stage", true, 2));
    skills(&ws);
    let run = ws.run(&["check"]);
    let listed = unwrap_check(&run.stdout);
    assert!(
        listed.contains("workflows: 1 workflow, default none"),
        "{listed}"
    );
    assert!(listed.contains("workflow fix: plan ("), "{listed}");
    assert!(
        listed.contains("review (") && listed.contains("on_fail -> implement"),
        "{listed}"
    );
}

#[test]
fn the_workflow_example_runs_offline_on_its_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("examples/workflow");
    copy_example(&ex, &[]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args([
            "once",
            "--demo",
            "--config",
            "examples/workflow/harness.toml",
        ])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{run:?}");
    let report = std::fs::read_to_string(run.stdout.trim()).unwrap();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let w = front(&report, "workflow");
    let outcomes: Vec<(&str, &str)> = w["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["stage"].as_str().unwrap(), a["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("plan", "passed"),
            ("implement", "failed"),
            ("implement", "passed"),
            ("review", "passed")
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ex.join("work/NOTES.txt")).unwrap(),
        "the demo ran\n"
    );
}

#[test]
fn harness_test_runs_the_workflow_cases_offline_and_a_wrong_one_fails() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["test", "--config", "examples/workflow/harness.toml"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "ok   review-sends-back\nok   through-review\n2 cases: 2 passed, 0 failed\n"
    );

    // A copy with a case whose stage is never reached: that case fails, exit 1.
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path();
    copy_example(ex, &["tests/through-review.case.toml"]);
    let wrong = std::fs::read_to_string(ex.join("tests/through-review.case.toml"))
        .unwrap()
        .replace("stage_reached = \"review\"", "stage_reached = \"deploy\"");
    std::fs::write(ex.join("tests/never-deploys.case.toml"), wrong).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["test", "--config"])
        .arg(ex.join("harness.toml"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .starts_with("FAIL never-deploys: stage_reached = \"deploy\""),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("ok   through-review\n")
            && run.stdout.ends_with("2 cases: 1 passed, 1 failed\n"),
        "{run:?}"
    );
}

#[test]
fn an_inbox_task_parks_on_a_question_resumes_its_stage_with_the_reply_and_goes_back_for_the_next() {
    let llm = Llm::start(&json!([
        json!({"type": "tool_call", "calls": [{"id": "p1", "name": "finish", "arguments": {"status": "needs_input", "summary": "I need to know the file.", "question": "Which file?"}}]}),
        finish("p2", "done", "1. edit a.txt"),
        finish("i1", "failed", "cannot"),
        finish("i2", "failed", "still cannot"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}\n[inbox]\ndir = \"inbox\"\n",
            workflow_config(c, "stage", false, 2)
        )
    });
    skills(&ws);
    let inbox = ws.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    std::fs::write(
        inbox.join("t.md"),
        "---\nclass: fixing\nsubject: Fix it\n---\nFix the file.\n",
    )
    .unwrap();

    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(front(&ws.latest(), "stop_reason"), "needs_input");
    assert_eq!(front(&ws.latest(), "workflow")["next"], "plan");

    std::fs::write(inbox.join("t.reply.md"), "Use a.txt.\n").unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "next_stage");
    let bodies = llm.chat_bodies();
    let user = bodies[1]["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("stage 1/3: plan (attempt 1)") && user.contains("Use a.txt."),
        "{user}"
    );
    // stages left: the task file goes back into the inbox for the next tick
    assert!(inbox.join("t.reply.md").is_file(), "{run:?}");

    let run = ws.run(&["once"]);
    assert_eq!(run.code, 5, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "stage_failed");
    assert_eq!(front(&report, "workflow")["stage"], "implement");
    assert_eq!(llm.chat_bodies()[2]["model"], "glm-5.2");
}
