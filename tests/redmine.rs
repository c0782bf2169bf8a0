//! Integration tests against a REAL Redmine (Debian's package), started by
//! `scripts/redmine-up.sh` from `scripts/test.sh`, which exports the `REDMINE_*` variables:
//! intake (scope, saved queries, routing), claims, write-back and the REST faults. The
//! conversations (`finish` outcomes, sessions) are in tests/redmine_sessions.rs; the helpers
//! both use in tests/common/redmine.rs. The tests share one server, so they run one at a
//! time and reset the seeded DB first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::redmine::*;
use common::*;
use serde_json::{json, Value};

/// The seed's expected order of a saved query (priority desc, id asc), checked against what
/// the server answers the bot for `params`, so a wrong expectation fails here, by name.
fn seeded_order(name: &str, params: &str) -> Vec<u64> {
    let seeded: Vec<u64> = var(name).split(',').map(|n| n.parse().unwrap()).collect();
    let (status, body) = http(
        "GET",
        &format!("{}/issues.json?{params}&limit=100", var("REDMINE_URL")),
        &[("X-Redmine-API-Key", &var("REDMINE_BOT_API_KEY"))],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let served: Vec<u64> = serde_json::from_str::<Value>(&body).unwrap()["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seeded, served,
        "{name} disagrees with the server's answer to ?{params}"
    );
    assert!(!seeded.is_empty(), "{name} is empty");
    seeded
}

#[test]
fn without_the_server_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "redmine::full_path_claim_turn_report_note_status",
        "HARNESS_TEST_REDMINE",
    );
}

#[test]
fn full_path_claim_turn_report_note_status() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([
        tool_call("c1", "echo looked"),
        text("# Fixed\n\nThe bug is understood.")
    ]));
    let ws = workspace(&llm.base_url(), &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    let top = id("CODE2"); // Immediate priority: first in scope
    let report = ws.latest();
    assert_eq!(front(&report, "task_id"), top.to_string());
    assert_eq!(front(&report, "source"), "redmine");
    assert_eq!(front(&report, "class"), "code");
    assert_eq!(front(&report, "model"), "glm-5.2");
    // The model saw the issue and its discussion.
    let bodies = llm.chat_bodies();
    let user = bodies[0]["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains(&format!("Redmine issue #{top}")), "{user}");
    assert!(user.contains("=== DISCUSSION (1 notes"), "{user}");
    // Read back through the API.
    let i = issue(top);
    assert_eq!(status_name(&i), "Resolved");
    assert_eq!(
        i["assigned_to"]["id"].to_string(),
        var("REDMINE_BOT_USER_ID")
    );
    let run_id = front(&report, "run_id");
    let n = notes(&i);
    let claims: Vec<&String> = n
        .iter()
        .filter(|x| x.starts_with("[harness-claim]"))
        .collect();
    let reports: Vec<&String> = n
        .iter()
        .filter(|x| x.starts_with("[harness-report]"))
        .collect();
    assert_eq!(claims.len(), 1, "{n:#?}");
    assert_eq!(reports.len(), 1, "{n:#?}");
    assert!(reports[0].contains(&format!("run={}", run_id.as_str().unwrap())));
    assert!(reports[0].contains("The bug is understood."));
    assert!(reports[0].contains("model `glm-5.2`"));
    assert!(!r.stderr.contains(&var("REDMINE_BOT_API_KEY")));
    assert!(!report.contains(&var("REDMINE_BOT_API_KEY")));
}

#[test]
fn an_answered_issue_is_not_worked_again_until_someone_writes() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"steps": [text("answer")], "loop": true}));
    // No claim status and no write-back status: the issue stays New, in scope.
    let ws = workspace(
        &llm.base_url(),
        &format!("{SCOPE_NEW}\n[redmine.claim]\nassign = false\nstatus = \"New\"\n"),
    );
    let first = id("CODE2");
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(front(&ws.latest(), "task_id"), first.to_string());
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("issue #{first} was answered by run")),
        "{}",
        r.stderr
    );
    assert_eq!(
        front(&ws.latest(), "task_id"),
        id("PRIMARY").to_string(),
        "the next issue in scope"
    );
    // A human follow-up puts it back in play.
    admin_put(first, json!({"notes": "Thanks. And the second page?"}));
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(front(&ws.latest(), "task_id"), first.to_string());
    let user = llm.chat_bodies().last().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(user.contains("And the second page?"), "{user}");
}

#[test]
fn saved_query_scope_and_dry_run_change_nothing() {
    let _g = real_redmine!();
    let ws = workspace(
        "http://127.0.0.1:9/v1",
        &format!("scope_query_id = {}", var("REDMINE_QUERY_ID")),
    );
    let order = seeded_order(
        "REDMINE_QUERY_ORDER",
        &format!("query_id={}", var("REDMINE_QUERY_ID")),
    );
    let mut by_id = order.clone();
    by_id.sort_unstable();
    assert_ne!(order, by_id, "the seed must make the query's sort visible");
    let first = order[0];
    let before = notes(&issue(first)).len();
    let r = run(&ws, &["once", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!("task: [{first}] ")),
        "{}",
        r.stdout
    );
    let i = issue(first);
    assert_eq!(status_name(&i), "New", "a dry run claims nothing");
    assert_eq!(notes(&i).len(), before);
}

#[test]
fn project_scoped_saved_query_needs_the_project() {
    let _g = real_redmine!();
    let q = var("REDMINE_PROJECT_QUERY_ID");
    let ws = workspace(
        "http://127.0.0.1:9/v1",
        &format!("scope_query_id = {q}\nproject = \"mopac\""),
    );
    let r = run(&ws, &["once", "--dry-run"]);
    assert_eq!(r.code, 0, "{r:?}");
    let first = seeded_order(
        "REDMINE_PROJECT_QUERY_ORDER",
        &format!("project_id={}&query_id={q}", var("REDMINE_PROJECT")),
    )[0];
    assert!(
        r.stdout.contains(&format!("task: [{first}] ")),
        "{}",
        r.stdout
    );
    // Without the project Redmine answers 404: an intake error that says what to check.
    let ws = workspace("http://127.0.0.1:9/v1", &format!("scope_query_id = {q}"));
    let r = run(&ws, &["once", "--dry-run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("404"), "{}", r.stderr);
    assert!(r.stderr.contains("[redmine].project"), "{}", r.stderr);
}

#[test]
fn class_from_the_field_and_the_default() {
    let _g = real_redmine!();
    let ws = workspace("http://127.0.0.1:9/v1", SCOPE_NEW);
    let r = run(
        &ws,
        &["once", "--dry-run", "--task-id", &id("NOCLASS").to_string()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("routing: class \"primary\" -> tier mopac-primary"),
        "{}",
        r.stdout
    );
    let r = run(
        &ws,
        &["once", "--dry-run", "--task-id", &id("CODE").to_string()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("routing: class \"code\" -> tier mopac-code -> model glm-5.2"),
        "{}",
        r.stdout
    );
}

#[test]
fn task_id_must_be_in_scope_unless_forced() {
    let _g = real_redmine!();
    let ws = workspace("http://127.0.0.1:9/v1", SCOPE_NEW);
    let n = id("INPROGRESS").to_string();
    let r = run(&ws, &["once", "--dry-run", "--task-id", &n]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is not in scope"), "{}", r.stderr);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let r = run(&ws, &["once", "--dry-run", "--task-id", &n, "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(&format!("task: [{n}] ")), "{}", r.stdout);
}

#[test]
fn no_task_in_scope_is_exit_0() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(
        &llm.base_url(),
        "scope_query = \"project_id=mopac&status_id=1&cf_1=nothing-has-this\"",
    );
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("no tasks in scope"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert_eq!(llm.state()["connections"], 0);
}

#[test]
fn an_unroutable_issue_is_a_routing_error_and_is_not_claimed() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(&llm.base_url(), &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    let n = id("BOGUS");
    let before = notes(&issue(n)).len();
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("unknown class \"bogus\""), "{}", r.stderr);
    let i = issue(n);
    assert_eq!(status_name(&i), "New");
    assert_eq!(notes(&i).len(), before);
    assert_eq!(llm.state()["connections"], 0);
}

#[test]
fn a_refused_transition_is_an_error_and_writeback_can_be_retried_once() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!([text("Done here.")]));
    // In Progress -> Closed is not in the bot's workflow: Redmine answers 204 and changes nothing.
    let cfg = format!("{SCOPE_NEW}\n[redmine.claim]\nstatus = \"In Progress\"\n[redmine.writeback]\nstatus_done = \"Closed\"\n");
    let ws = workspace(&llm.base_url(), &cfg);
    let n = id("CODE");
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("did not apply the status change \"In Progress\" -> \"Closed\""),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("harness writeback"), "{}", r.stderr);
    let files = ws.report_files();
    assert_eq!(files.len(), 1, "the REPORT stays on disk");
    assert_eq!(status_name(&issue(n)), "In Progress");
    // Fix the config and retry: the note is not posted twice, the status moves.
    let text = std::fs::read_to_string(ws.config())
        .unwrap()
        .replace("status_done = \"Closed\"", "status_done = \"Resolved\"");
    std::fs::write(ws.config(), text).unwrap();
    let report = files[0].to_str().unwrap();
    for _ in 0..2 {
        let r = run(&ws, &["writeback", report]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let i = issue(n);
    assert_eq!(status_name(&i), "Resolved");
    let reports = notes(&i)
        .into_iter()
        .filter(|x| x.starts_with("[harness-report]"))
        .count();
    assert_eq!(reports, 1);
}

#[test]
fn a_long_reply_is_attached_with_a_summary() {
    let _g = real_redmine!();
    let long = format!("# Long\n\n{}", "All work and no play. ".repeat(200));
    let llm = Llm::start(&json!([text(&long)]));
    let ws = workspace(
        &llm.base_url(),
        &format!(
            "{SCOPE_NEW}\n[redmine.writeback]\nmax_note_chars = 1000\nstatus_done = \"Resolved\"\n"
        ),
    );
    let n = id("STUDY");
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    let i = issue(n);
    let attachments = i["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 1, "{i}");
    assert!(attachments[0]["filename"]
        .as_str()
        .unwrap()
        .starts_with("REPORT-test-"));
    let note = notes(&i)
        .into_iter()
        .find(|x| x.starts_with("[harness-report]"))
        .unwrap();
    assert!(note.contains("the full REPORT is attached"), "{note}");
}

#[test]
fn a_bad_key_is_an_intake_error_that_never_shows_the_key() {
    let _g = real_redmine!();
    let ws = workspace("http://127.0.0.1:9/v1", SCOPE_NEW);
    let bad = "0123456789abcdef0123456789abcdef01234567";
    let r = ws.run_env(&["once", "--dry-run"], &[("HARNESS_TEST_REDMINE_KEY", bad)]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("rejected the API key"), "{}", r.stderr);
    assert!(
        r.stderr.contains("env:HARNESS_TEST_REDMINE_KEY"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains(bad));
}

#[test]
fn rest_disabled_is_an_intake_error_not_an_empty_scope() {
    let _g = real_redmine!();
    rest("off");
    let ws = workspace(
        "http://127.0.0.1:9/v1",
        &format!("scope_query_id = {}", var("REDMINE_QUERY_ID")),
    );
    let r = run(&ws, &["once", "--dry-run"]);
    rest("on");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("REST API is disabled"), "{}", r.stderr);
}

#[test]
fn a_live_claim_is_respected_and_a_stale_one_taken_over() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"steps": [text("taken over")], "loop": true}));
    let ws = workspace(
        &llm.base_url(),
        &format!("{SCOPE_NEW}\n{WRITEBACK}\n[redmine.claim]\nstale_after_mins = 60\n")
            .replace("[redmine.claim]\nstatus = \"In Progress\"\n", ""),
    );
    let n = id("CODE3");
    // Another worker (here: the admin, by hand) claimed it and died.
    admin_put(
        n,
        json!({"notes": "[harness-claim] run=dead-run host=elsewhere pid=1: harness is working on this issue."}),
    );
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("is claimed by run dead-run"),
        "{}",
        r.stderr
    );
    assert!(ws.report_files().is_empty());
    // Two hours later the claim is stale (the journal's time is moved back in the DB).
    db_sql(
        "UPDATE journals SET created_on = datetime(created_on, '-2 hours') WHERE notes LIKE '[harness-claim] run=dead-run%';",
        "UPDATE journals SET created_on = created_on - interval '2 hours' WHERE notes LIKE '[harness-claim] run=dead-run%';",
    );
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("is stale; taking it over"),
        "{}",
        r.stderr
    );
    assert_eq!(ws.report_files().len(), 1);
    assert_eq!(status_name(&issue(n)), "Resolved");
}

#[test]
fn a_failure_after_the_claim_releases_it() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"steps": [text("worked after all")], "loop": true}));
    // The code tier's model is not served: the preflight fails after the claim.
    let ws = workspace(&llm.base_url(), &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    let good = std::fs::read_to_string(ws.config()).unwrap();
    let bad = good
        .replace("mopac-code = \"glm-5.2\"", "mopac-code = \"glm-9\"")
        .replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n");
    std::fs::write(ws.config(), &bad).unwrap();
    let n = id("CODE");
    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(ws.report_files().is_empty());
    let released: Vec<String> = notes(&issue(n))
        .into_iter()
        .filter(|x| x.starts_with("[harness-release]"))
        .collect();
    assert_eq!(released.len(), 1, "{released:?}");
    assert!(released[0].contains("glm-9"), "{released:?}");
    assert!(!released[0].contains(CANARY));
    // Released, so a run may take the issue at once instead of waiting for staleness (it is
    // In Progress now, out of the New scope, hence --force).
    std::fs::write(ws.config(), good).unwrap();
    let r = run(&ws, &["once", "--task-id", &n.to_string(), "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.report_files().len(), 1);
}

#[test]
fn many_workers_work_every_issue_exactly_once() {
    let _g = real_redmine!();
    let llm = Llm::start(&json!({"steps": [text("worked")], "loop": true}));
    // Ten routable New issues (the empty and the bogus class are left out of scope).
    let scope = "scope_query = \"project_id=mopac&status_id=1&cf_1=code|study|read|review|primary&sort=priority:desc,id\"";
    let workers: Vec<Workspace> = (0..4)
        .map(|_| workspace(&llm.base_url(), &format!("{scope}\n{WRITEBACK}")))
        .collect();
    let expected: Vec<u64> = [
        "STUDY", "READ", "CODE", "REVIEW", "PRIMARY", "CODE2", "STUDY2", "READ2", "REVIEW2",
        "CODE3",
    ]
    .iter()
    .map(|k| id(k))
    .collect();
    // Waves of 4 simultaneous runs; each worker has its own report dir, as on separate hosts,
    // so only the Redmine claim protocol keeps them apart.
    for _wave in 0..4 {
        // Two extra processes share workers 0 and 1's report dirs: the local lock's case.
        let handles: Vec<_> = workers
            .iter()
            .chain(workers.iter().take(2))
            .map(|ws| {
                let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_harness"));
                cmd.args(["once", "--config", ws.config().to_str().unwrap()])
                    .env("HARNESS_TEST_LLM_KEY", CANARY)
                    .env("HARNESS_TEST_REDMINE_KEY", var("REDMINE_BOT_API_KEY"))
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        for h in handles {
            let out = h.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let mut worked: Vec<u64> = workers
        .iter()
        .flat_map(|ws| ws.report_files())
        .map(|p| {
            front(&std::fs::read_to_string(p).unwrap(), "task_id")
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    worked.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(
        worked, want,
        "every issue worked exactly once (REPORT files)"
    );
    for n in expected {
        let i = issue(n);
        let reports = notes(&i)
            .into_iter()
            .filter(|x| x.starts_with("[harness-report]"))
            .count();
        assert_eq!(reports, 1, "issue #{n}: one report note");
        assert_eq!(status_name(&i), "Resolved", "issue #{n}");
    }
}

#[test]
fn the_redmine_key_is_masked_in_tool_output() {
    let _g = real_redmine!();
    let key = var("REDMINE_BOT_API_KEY");
    // The model echoes both keys of the run: each comes back masked, and neither reaches
    // the REPORT, the note or stderr.
    let llm = Llm::start(&json!([
        tool_call("c1", &format!("echo rm={key} llm={CANARY}")),
        text("# Done\n\nNothing to report.")
    ]));
    let ws = workspace(&llm.base_url(), &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    let r = run(&ws, &["once"]);
    assert_eq!(r.code, 0, "{r:?}");
    let results = tool_results(&llm.chat_bodies()[1]);
    assert_eq!(
        results,
        vec!["rm=[redacted] llm=[redacted]\n[exit status: 0]".to_string()]
    );
    let report = ws.latest();
    let notes = notes(&issue(id("CODE2"))).join("\n");
    for (what, text) in [
        ("stderr", &r.stderr),
        ("REPORT", &report),
        ("notes", &notes),
    ] {
        assert!(!text.contains(&key), "the Redmine key leaked into {what}");
        assert!(!text.contains(CANARY), "the LLM key leaked into {what}");
    }
}

#[test]
fn scope_lists_the_saved_query_routed_and_claims_nothing() {
    let _g = real_redmine!();
    let ws = workspace(
        "http://127.0.0.1:9/v1",
        &format!("scope_query_id = {}", var("REDMINE_QUERY_ID")),
    );
    let order = seeded_order(
        "REDMINE_QUERY_ORDER",
        &format!("query_id={}", var("REDMINE_QUERY_ID")),
    );
    let before: Vec<usize> = order.iter().map(|&n| notes(&issue(n)).len()).collect();
    let r = run(&ws, &["scope", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let listed: Vec<u64> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(listed, order, "scope keeps the query's order: {v}");
    assert!(v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["source"] == "redmine"));
    let after: Vec<usize> = order.iter().map(|&n| notes(&issue(n)).len()).collect();
    assert_eq!(before, after, "scope writes nothing");
    assert_eq!(status_name(&issue(order[0])), "New", "scope claims nothing");
}

#[test]
fn result_fields_are_read_back_from_the_issue() {
    // Needs the seed's "Result category" field (scripts/redmine-seed.rb, REDMINE_RESULT_CF_ID).
    let _g = real_redmine!();
    let cf: u64 = var("REDMINE_RESULT_CF_ID").parse().unwrap();
    let llm = Llm::start(
        &json!([{"type": "tool_call", "calls": [{"id": "f1", "name": "finish",
        "arguments": {"status": "done", "summary": "Triaged.", "result": {"category": "bug"}}}]}]),
    );
    let redmine = format!("{SCOPE_NEW}\n{WRITEBACK}result_fields = {{ category = {cf} }}\n");
    let ws = Workspace::new(&llm.base_url(), |c| {
        let c = c.replace("finish = \"message\"", "finish = \"tool\"");
        format!(
            "{}\n[finish]\nresult_schema = \"result.json\"\n",
            config(c, &redmine)
        )
    });
    std::fs::write(
        ws.path().join("result.json"),
        r#"{"type": "object", "properties": {"category": {"type": "string"}}, "required": ["category"]}"#,
    )
    .unwrap();
    let r = run(&ws, &["once", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["result"], json!({"category": "bug"}));
    let top = id("CODE2");
    let field = |i: &Value| {
        i["custom_fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"].as_u64() == Some(cf))
            .map(|f| f["value"].clone())
    };
    let i = issue(top);
    assert_eq!(field(&i), Some(json!("bug")), "{i}");
    assert_eq!(status_name(&i), "Resolved");
    // The retry is idempotent: the note is not posted again, the field stays.
    let again = run(&ws, &["writeback", out["report"].as_str().unwrap()]);
    assert_eq!(again.code, 0, "{again:?}");
    let i = issue(top);
    assert_eq!(field(&i), Some(json!("bug")));
    let reports = notes(&i)
        .into_iter()
        .filter(|n| n.starts_with("[harness-report]"))
        .count();
    assert_eq!(reports, 1);
}
