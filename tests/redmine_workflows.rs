//! Integration test against a REAL Redmine (see tests/redmine.rs) of `[workflows]` (issue
//! 24): one issue taken through plan -> implement -> review over three `harness once` runs
//! on two hosts (two report dirs, the workflow's place carried by the session attachment),
//! the implement check failing once and passing on retry, each stage on its own model, one
//! note per stage, the issue in play until its last stage and resolved after it (the
//! sessions of both hosts hold no key).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::workflows::{finish, models_asked, skills, workflow_config, STAGE_MODELS};

use common::redmine::*;
use common::*;
use serde_json::json;

#[test]
fn without_the_server_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "redmine_workflows::one_issue_goes_through_three_stages_on_two_hosts",
        "HARNESS_TEST_REDMINE",
    );
}

#[test]
fn one_issue_goes_through_three_stages_on_two_hosts() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([
        finish("p1", "done", "1. write done.txt"),
        finish("i1", "done", "done, I think"),
        tool_call("i2", "printf ok > done.txt"),
        finish("i3", "done", "wrote done.txt"),
        finish("r1", "done", "looks right"),
    ]));
    let scope = "scope_query = \"project_id=mopac&status_id=open&sort=priority:desc,id\"";
    let host = || {
        let ws = workspace(&llm.base_url(), &format!("{scope}\n{WRITEBACK}"));
        let text = workflow_config(
            std::fs::read_to_string(ws.config()).unwrap(),
            "stage",
            false,
            2,
        )
        .replace("store = \"local\"", "store = \"redmine\"")
        .replace("\ncode = \"mopac-code\"\n", "\ncode = \"workflow:fix\"\n");
        std::fs::write(ws.config(), text).unwrap();
        skills(&ws);
        ws
    };
    let (a, b) = (host(), host());
    let n = id("CODE");
    let task = n.to_string();

    let r1 = run(&a, &["once", "--task-id", &task]);
    assert_eq!(r1.code, 0, "{r1:?}");
    assert_eq!(front(&a.latest(), "stop_reason"), "next_stage");
    // Host B has never seen the task: the place comes from the issue's session attachment.
    assert!(!b.reports().join("sessions").exists());
    let r2 = run(&b, &["once", "--task-id", &task]);
    assert_eq!(r2.code, 0, "{r2:?}");
    let w2 = front(&b.latest(), "workflow");
    assert_eq!(w2["stage"], "implement", "{w2}");
    assert_eq!(w2["attempts"].as_array().unwrap().len(), 2, "{w2}");
    assert_eq!(w2["earlier"][0]["stage"], "plan", "{w2}");
    assert_ne!(status_name(&issue(n)), "Resolved");

    let r3 = run(&a, &["once", "--task-id", &task]);
    assert_eq!(r3.code, 0, "{r3:?}");
    let report = a.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "workflow")["stage"], "review");
    let i = issue(n);
    assert_eq!(status_name(&i), "Resolved");
    let heads: Vec<String> = notes(&i)
        .iter()
        .filter(|n| n.starts_with("[harness-report]"))
        .map(|n| {
            let first = n.lines().next().unwrap();
            first[first.find(" stop=").unwrap()..].to_string()
        })
        .collect();
    assert_eq!(
        heads,
        [
            " stop=next_stage stage=1/3 plan attempt=1",
            " stop=next_stage stage=2/3 implement attempt=2",
            " stop=completed stage=3/3 review attempt=1",
        ]
    );
    assert_eq!(models_asked(&llm), STAGE_MODELS);
    for ws in [&a, &b] {
        assert!(!ws.all_files_text().contains(&var("REDMINE_BOT_API_KEY")));
    }
}
