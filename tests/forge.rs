//! End-to-end tests of `[forge]`: the task branch's pull request on Gitea, GitLab and GitHub,
//! through the built binary, against scripted forges that check every request against the
//! forges' published API descriptions (tests/data/forge/). Opened once, found again (and
//! commented on) by the next run, a draft for a failure with `on_failure = "draft"`, none
//! for `needs_input`, its URL in the REPORT, `--output json` and `run.completed`; a failed
//! call retried by `harness writeback`; the token in no output. Live forges are used when
//! `HARNESS_TEST_FORGE_*` names one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::forge::{Fault, Forge, REPO};
use common::*;
use serde_json::{json, Value};

/// The forge token: a canary that must appear in no output.
const TOKEN: &str = "fgt-canary-3b8e1d7c9a2f4e60";

const KINDS: [&str; 3] = ["gitea", "gitlab", "github"];

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"name": name, "arguments": arguments, "id": id}]})
}

/// One run's steps: `env` (the token must not be there), a file written, then `finish`.
fn run_steps(n: u32, status: &str) -> Vec<Value> {
    let mut args =
        json!({"status": status, "summary": format!("# Run {n}\n\nWrote notes-{n}.txt.")});
    if status == "needs_input" {
        args["question"] = json!("Which widget?");
    }
    vec![
        call(&format!("b{n}"), "bash", json!({"command": "env"})),
        call(
            &format!("w{n}"),
            "write_file",
            json!({"path": format!("notes-{n}.txt"), "content": format!("run {n}\n")}),
        ),
        call(&format!("f{n}"), "finish", args),
    ]
}

/// A workspace on `llm` whose task branch goes to `forge`, with `extra` in `[forge]`.
fn workspace(llm: &Llm, forge: &Forge, extra: &str) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}
[tools.files]
enabled = true

[workspace]
repo = \"repo\"
base = \"main\"
push = \"origin\"

[forge]
kind = \"{}\"
url = \"{}\"
repo = \"{REPO}\"
token_ref = \"env:HARNESS_TEST_FORGE_TOKEN\"
title = \"harness: {{subject}} ({{task_id}})\"
labels = [\"bug\", \"harness\"]
reviewers = [\"alice\"]
{extra}",
            c.replace("finish = \"message\"", "finish = \"tool\"")
                .replace("max_rounds = 4", "max_rounds = 6"),
            forge.kind,
            forge.url()
        )
    });
    crate::code::repo_with_remote(ws.path());
    ws
}

fn once(ws: &Workspace, args: &[&str]) -> Run {
    ws.run_env(
        args,
        &[
            ("HARNESS_TEST_LLM_KEY", CANARY),
            ("HARNESS_TEST_FORGE_TOKEN", TOKEN),
        ],
    )
}

/// The token and the LLM key are in no output: stdout, stderr, any file of the workspace
/// (REPORTs, events), any request the model got (the `env` tool result).
fn assert_no_token(ws: &Workspace, llm: &Llm, runs: &[&Run]) {
    for run in runs {
        assert!(
            !run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN),
            "{run:?}"
        );
    }
    assert!(!ws.all_files_text().contains(TOKEN));
    let sent = serde_json::to_string(&llm.requests()).unwrap();
    assert!(!sent.contains(TOKEN), "the token reached the model");
    assert!(sent.contains("HOME="), "the env command ran: {sent}");
}

fn events_of(ws: &Workspace) -> Vec<Value> {
    common::stream::events(&std::fs::read_to_string(ws.path().join("events.jsonl")).unwrap())
}

#[test]
fn a_done_run_opens_the_pull_request_and_the_next_run_comments_on_the_same_one() {
    for kind in KINDS {
        let forge = Forge::start(kind, TOKEN);
        let steps: Vec<Value> = [run_steps(1, "done"), run_steps(2, "done")].concat();
        let llm = Llm::start(&json!(steps));
        let ws = workspace(&llm, &forge, "");
        let events = ws.path().join("events.jsonl");
        let first = once(
            &ws,
            &[
                "once",
                "--demo",
                "--output",
                "json",
                "--events",
                events.to_str().unwrap(),
            ],
        );
        assert_eq!(first.code, 0, "{kind}: {first:?}");
        let prs = forge.prs();
        assert_eq!(prs.len(), 1, "{kind}: {prs:?}");
        let url = format!("{}/{REPO}/pulls/1", forge.url());
        let out: Value = serde_json::from_str(&first.stdout).unwrap();
        assert_eq!(out["pr_url"], json!(url), "{kind}");
        let completed = common::stream::completed(&events_of(&ws)).clone();
        assert_eq!(completed["pr_url"], json!(url), "{kind}");
        let report = ws.latest();
        assert_eq!(front(&report, "pr_url"), json!(url), "{kind}");
        let record = front(&report, "forge");
        assert_eq!(
            (
                &record["state"],
                &record["number"],
                &record["draft"],
                &record["head"]
            ),
            (
                &json!("opened"),
                &json!(1),
                &json!(false),
                &json!("harness/test-demo-1")
            ),
            "{kind}"
        );
        let pr = &prs[0];
        let (title, body) = match kind {
            "gitlab" => (&pr["title"], &pr["description"]),
            _ => (&pr["title"], &pr["body"]),
        };
        assert_eq!(title, "harness: Test demo (demo-1)", "{kind}");
        let body = body.as_str().unwrap();
        assert!(body.contains("Wrote notes-1.txt."), "{kind}: {body}");
        assert!(
            body.contains("**Gate:** 1 commands ran, 0 denied; 1 file tool calls, 0 refused"),
            "{kind}: {body}"
        );
        assert!(
            body.contains("**Check:** none configured"),
            "{kind}: {body}"
        );
        assert_eq!(forge.labels().len(), 1, "{kind}: {:?}", forge.labels());
        assert_eq!(
            forge.reviewers().len(),
            1,
            "{kind}: {:?}",
            forge.reviewers()
        );

        let second = once(&ws, &["once", "--demo", "--fresh"]);
        assert_eq!(second.code, 0, "{kind}: {second:?}");
        assert_eq!(forge.prs().len(), 1, "{kind}: a second pull request");
        let comments = forge.comments();
        assert_eq!(comments.len(), 1, "{kind}: {comments:?}");
        assert_eq!(comments[0].0, 1, "{kind}");
        assert!(
            comments[0].1.contains("Wrote notes-2.txt."),
            "{kind}: {comments:?}"
        );
        let record = front(&ws.latest(), "forge");
        assert_eq!(
            (&record["state"], &record["url"]),
            (&json!("updated"), &json!(url)),
            "{kind}"
        );
        // The branch got both runs' commits.
        let log = git(
            &ws.path().join("remote.git"),
            &["log", "--oneline", "harness/test-demo-1"],
        );
        assert_eq!(log.lines().count(), 3, "{kind}: {log}");
        assert_eq!(forge.violations(), Vec::<String>::new(), "{kind}");
        assert_no_token(&ws, &llm, &[&first, &second]);
    }
}

#[test]
fn a_failed_run_opens_a_draft_with_on_failure_draft_and_only_pushes_with_branch() {
    for kind in KINDS {
        let forge = Forge::start(kind, TOKEN);
        let llm = Llm::start(&json!(run_steps(1, "failed")));
        let ws = workspace(&llm, &forge, "on_failure = \"draft\"\n");
        let run = once(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 5, "{kind}: {run:?}");
        let prs = forge.prs();
        assert_eq!(prs.len(), 1, "{kind}");
        assert_eq!(prs[0]["draft"], json!(true), "{kind}: {prs:?}");
        let title = prs[0]["title"].as_str().unwrap();
        match kind {
            "gitea" => assert!(title.starts_with("WIP: "), "{title}"),
            "gitlab" => assert!(title.starts_with("Draft: "), "{title}"),
            _ => assert!(title.starts_with("harness: "), "{title}"),
        }
        assert_eq!(front(&ws.latest(), "forge")["draft"], json!(true), "{kind}");
        assert_eq!(forge.violations(), Vec::<String>::new(), "{kind}");

        let forge = Forge::start(kind, TOKEN);
        let llm = Llm::start(&json!(run_steps(1, "failed")));
        let ws = workspace(&llm, &forge, "");
        let run = once(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 5, "{kind}: {run:?}");
        assert!(
            forge.requests().is_empty(),
            "{kind}: {:?}",
            forge.requests()
        );
        let report = ws.latest();
        assert_eq!(front(&report, "workspace")["pushed"], json!(true), "{kind}");
        let record = front(&report, "forge");
        assert_eq!(record["state"], json!("skipped"), "{kind}");
        assert_eq!(front(&report, "pr_url"), Value::Null, "{kind}");
    }
}

#[test]
fn a_run_that_asks_a_question_opens_none() {
    for kind in KINDS {
        let forge = Forge::start(kind, TOKEN);
        let llm = Llm::start(&json!(run_steps(1, "needs_input")));
        let ws = workspace(&llm, &forge, "pr = \"draft\"\non_failure = \"draft\"\n");
        let run = once(&ws, &["once", "--demo", "--output", "json"]);
        assert_eq!(run.code, 0, "{kind}: {run:?}");
        assert!(
            forge.requests().is_empty(),
            "{kind}: {:?}",
            forge.requests()
        );
        let out: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(out["pr_url"], Value::Null);
        let record = front(&ws.latest(), "forge");
        assert_eq!(
            (&record["state"], &record["reason"]),
            (
                &json!("skipped"),
                &json!("the run asks a question (needs_input)")
            ),
            "{kind}"
        );
    }
}

/// A forge of `kind` whose first create call fails as `fault` says, a done run's script and
/// a workspace with `[forge] max_retries = retries`.
fn failing_create(kind: &'static str, fault: Fault, retries: u32) -> (Forge, Llm, Workspace) {
    let forge = Forge::start(kind, TOKEN);
    let create = match kind {
        "gitlab" => "POST /projects/{id}/merge_requests",
        _ => "POST /repos/{owner}/{repo}/pulls",
    };
    forge.fail(create, fault, 1);
    let llm = Llm::start(&json!(run_steps(1, "done")));
    let ws = workspace(&llm, &forge, &format!("max_retries = {retries}\n"));
    (forge, llm, ws)
}

/// A `--demo --output json` run whose pull request call fails once as `fault` says (no
/// retries): it fails (exit 1), and its JSON object.
fn failed_run(kind: &'static str, fault: Fault) -> (Forge, Llm, Workspace, Run, Value) {
    let (forge, llm, ws) = failing_create(kind, fault, 0);
    let run = once(&ws, &["once", "--demo", "--output", "json"]);
    assert_eq!(run.code, 1, "{kind}: {run:?}");
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    (forge, llm, ws, run, out)
}

#[test]
fn a_failed_pull_request_call_is_retried_by_harness_writeback() {
    for kind in KINDS {
        let (forge, llm, ws, run, out) = failed_run(kind, Fault::Before);
        assert!(
            run.stderr
                .contains("retry the write-back with: harness writeback"),
            "{kind}: {}",
            run.stderr
        );
        assert_eq!(
            (&out["outcome"], &out["pr_url"]),
            (&json!("writeback_error"), &Value::Null)
        );
        assert!(forge.prs().is_empty(), "{kind}");
        let report = ws
            .report_files()
            .into_iter()
            .rfind(|p| p.extension().is_some_and(|e| e == "md"))
            .unwrap();
        let record = front(&std::fs::read_to_string(&report).unwrap(), "forge");
        assert_eq!(record["state"], json!("pending"), "{kind}");
        assert!(
            record["reason"].as_str().unwrap().contains("HTTP 500"),
            "{kind}: {record}"
        );

        if kind == "gitlab" {
            // Saved again by an editor with CRLF line ends: the same REPORT.
            let text = std::fs::read_to_string(&report).unwrap();
            std::fs::write(&report, text.replace('\n', "\r\n")).unwrap();
        }
        let retry = once(&ws, &["writeback", report.to_str().unwrap()]);
        assert_eq!(retry.code, 0, "{kind}: {retry:?}");
        assert_eq!(forge.prs().len(), 1, "{kind}");
        let text = std::fs::read_to_string(&report).unwrap();
        assert_eq!(
            front(&text, "pr_url"),
            json!(format!("{}/{REPO}/pulls/1", forge.url()))
        );
        assert_eq!(
            ws.latest(),
            text,
            "{kind}: REPORT-latest.md is the same run's"
        );
        // Once done, a retry does nothing more.
        let again = once(&ws, &["writeback", report.to_str().unwrap()]);
        assert_eq!(
            again.code, 1,
            "{kind}: no [redmine], and nothing pending: {again:?}"
        );
        assert_eq!(
            (forge.prs().len(), forge.comments().len()),
            (1, 0),
            "{kind}"
        );
        assert_eq!(forge.violations(), Vec::<String>::new(), "{kind}");
        assert_no_token(&ws, &llm, &[&run, &retry, &again]);
    }
}

#[test]
fn an_opened_pull_request_whose_answer_was_lost_is_found_not_opened_twice() {
    for kind in KINDS {
        let (forge, llm, ws) = failing_create(kind, Fault::After, 1);
        let run = once(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 0, "{kind}: {run:?}");
        assert_eq!(forge.prs().len(), 1, "{kind}");
        assert!(
            forge.comments().is_empty(),
            "{kind}: its own pull request is not commented on"
        );
        assert_eq!(
            front(&ws.latest(), "forge")["state"],
            json!("opened"),
            "{kind}"
        );
        assert_eq!(forge.violations(), Vec::<String>::new(), "{kind}");
        assert_no_token(&ws, &llm, &[&run]);
    }
}

#[test]
fn check_shows_the_forge_and_its_token() {
    let forge = Forge::start("gitea", TOKEN);
    let llm = Llm::start(&json!([]));
    let ws = workspace(&llm, &forge, "pr = \"draft\"\n");
    let run = once(&ws, &["check"]);
    let text = unwrap_check(&run.stdout);
    assert!(
        text.contains(&format!(
            "forge: gitea {} repo {REPO}: pr draft, on failure branch",
            forge.url()
        )),
        "{text}"
    );
    assert!(
        text.contains("forge token: env:HARNESS_TEST_FORGE_TOKEN resolves"),
        "{text}"
    );
    assert!(!run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN));
    let unset = ws.run(&["check"]);
    assert_eq!(unset.code, 1, "{unset:?}");
    assert!(
        unwrap_check(&unset.stdout).contains("FAIL  forge token"),
        "{}",
        unset.stdout
    );
}

#[test]
fn the_scripted_forges_refuse_what_their_descriptions_do_not_allow() {
    let gitea = Forge::start("gitea", TOKEN);
    let base = format!("{}/api/v1/repos/{REPO}", gitea.url());
    let auth = format!("token {TOKEN}");
    // Labels by name where Gitea takes ids; a query parameter it does not have; no token.
    let bad_body = r#"{"title": "t", "head": "h", "base": "main", "labels": ["bug"]}"#;
    http(
        "POST",
        &format!("{base}/pulls"),
        &[("Authorization", &auth)],
        Some(bad_body),
    );
    http(
        "GET",
        &format!("{base}/pulls?state=open&head=h"),
        &[("Authorization", &auth)],
        None,
    );
    http("GET", &format!("{base}/pulls?state=opened"), &[], None);
    let v = gitea.violations();
    assert!(
        v.iter()
            .any(|e| e.contains("body") && e.contains("\"bug\"")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|e| e.contains("query head is not a parameter")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|e| e.contains("query state=\"opened\" does not fit")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|e| e.contains("no authorization header")),
        "{v:?}"
    );

    let gitlab = Forge::start("gitlab", TOKEN);
    let mr = format!(
        "{}/api/v4/projects/acme%2Fwidgets/merge_requests",
        gitlab.url()
    );
    http(
        "POST",
        &mr,
        &[("PRIVATE-TOKEN", TOKEN)],
        Some(r#"{"title": "t"}"#),
    );
    http(
        "POST",
        &format!(
            "{}/api/v4/projects/acme%2Fwidgets/merge_requests/x/notes",
            gitlab.url()
        ),
        &[("PRIVATE-TOKEN", TOKEN)],
        Some(r#"{"body": "b"}"#),
    );
    let v = gitlab.violations();
    assert!(v.iter().any(|e| e.contains("source_branch")), "{v:?}");
    assert!(
        v.iter().any(|e| e.contains("path parameter noteable_id")),
        "{v:?}"
    );

    let github = Forge::start("github", TOKEN);
    let pulls = format!("{}/repos/{REPO}/pulls", github.url());
    http(
        "POST",
        &pulls,
        &[("Authorization", &format!("token {TOKEN}"))],
        Some(r#"{"title": "t", "head": "h", "base": "main", "draft": "yes"}"#),
    );
    http(
        "DELETE",
        &pulls,
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        None,
    );
    let v = github.violations();
    assert!(
        v.iter().any(|e| e.contains("no authorization header")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|e| e.contains("draft") || e.contains("\"yes\"")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|e| e.contains("DELETE") && e.contains("no such operation")),
        "{v:?}"
    );
}

/// The example keeps `[workspace]` and `[forge]` commented (a plain `--demo` run needs no
/// repository); uncommented, they load as written.
#[test]
fn the_examples_commented_forge_section_loads_when_uncommented() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/harness.toml.example");
    let mut inside = false;
    let mut out = String::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        if line.starts_with("# [workspace]") || line.starts_with("# [forge]") {
            inside = true;
        } else if line.starts_with('[') || line.starts_with("# [") || line.is_empty() {
            inside = false;
        }
        let rest = line.strip_prefix("# ").filter(|_| inside);
        out.push_str(rest.unwrap_or(line));
        out.push('\n');
    }
    assert!(out.contains("\n[forge] "), "{out}");
    let cfg = harness::config::parse(&out, std::path::Path::new("/nonexistent/harness.toml"));
    let forge = cfg.unwrap().forge.unwrap();
    assert_eq!(
        (forge.kind.as_str(), forge.repo.as_str()),
        ("gitea", "acme/widgets")
    );
}

/// A Redmine task: the pull request links the issue, the note links the pull request, and
/// a pending pull request holds the note back until `harness writeback` has opened it.
#[test]
fn the_redmine_note_links_the_pull_request_once_it_is_open() {
    let redmine = crate::stub::MiniRedmine::start(std::time::Duration::ZERO);
    let forge = Forge::start("github", TOKEN);
    forge.fail("POST /repos/{owner}/{repo}/pulls", Fault::Before, 1);
    let llm = Llm::start(&json!(run_steps(1, "done")));
    let ws = workspace(&llm, &forge, "max_retries = 0\n");
    let url = redmine.stub.url.clone();
    let mut config = std::fs::read_to_string(ws.config()).unwrap();
    config.push_str(&format!("\n[redmine]\nurl = \"{url}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n"));
    std::fs::write(ws.config(), config).unwrap();
    let keys = [
        ("HARNESS_TEST_LLM_KEY", CANARY),
        ("HARNESS_TEST_FORGE_TOKEN", TOKEN),
        ("HARNESS_TEST_REDMINE_KEY", "rm-forge-canary-4c5d6e7f"),
    ];
    let run = ws.run_env(&["once", "--output", "json"], &keys);
    assert_eq!(run.code, 1, "{run:?}");
    let report = serde_json::from_str::<Value>(&run.stdout).unwrap()["report"]
        .as_str()
        .unwrap()
        .to_string();
    let reported = |r: &crate::stub::MiniRedmine| {
        r.notes()
            .into_iter()
            .filter(|n| n.starts_with("[harness-report]"))
            .collect::<Vec<_>>()
    };
    assert!(reported(&redmine).is_empty(), "{:?}", redmine.notes());
    let retry = ws.run_env(&["writeback", &report], &keys);
    assert_eq!(retry.code, 0, "{retry:?}");
    let pr_url = format!("{}/{REPO}/pulls/1", forge.url());
    let notes = reported(&redmine);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains(&format!("**Pull request:** {pr_url}")),
        "{}",
        notes[0]
    );
    let body = forge.prs()[0]["body"].as_str().unwrap().to_string();
    assert!(body.contains(&format!("on [7]({url}/issues/7)")), "{body}");
    assert_eq!(forge.violations(), Vec::<String>::new());
    assert_no_token(&ws, &llm, &[&run, &retry]);
}

/// Against a real forge: `HARNESS_TEST_FORGE_KIND` (`gitea`, `gitlab`, `github`), `_URL`,
/// `_REPO`, `_TOKEN` and `_PUSH` (a git URL of that repository harness's `git push` can
/// write to with the operator's own credentials). Two runs of one task on a branch of its
/// own: one pull request, opened then commented on. It is left open for a person to look at.
#[test]
fn live_forge() {
    let var = |k: &str| std::env::var(format!("HARNESS_TEST_FORGE_{k}")).ok();
    let (Some(kind), Some(url), Some(repo), Some(token), Some(push)) = (
        var("KIND"),
        var("URL"),
        var("REPO"),
        var("TOKEN"),
        var("PUSH"),
    ) else {
        skip_unprovided(
            "live forge tests",
            "HARNESS_TEST_FORGE_KIND, _URL, _REPO, _TOKEN and _PUSH are not all set",
        );
        return;
    };
    let steps: Vec<Value> = [run_steps(1, "done"), run_steps(2, "done")].concat();
    let llm = Llm::start(&json!(steps));
    let ws = Workspace::new(&llm.base_url(), |c| {
        let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
        format!(
            "{}\n[tools.files]\nenabled = true\n\n[workspace]\nrepo = \"repo\"\nbase = \"main\"\npush = \"origin\"\nbranch = \"harness/live-{{task_id}}-{stamp}\"\n\n[forge]\nkind = \"{kind}\"\nurl = \"{url}\"\nrepo = \"{repo}\"\ntoken_ref = \"env:HARNESS_TEST_FORGE_TOKEN\"\npr = \"draft\"\n",
            c.replace("finish = \"message\"", "finish = \"tool\"")
                .replace("max_rounds = 4", "max_rounds = 6")
        )
    });
    crate::code::repo_with_remote(ws.path());
    let repo_dir = ws.path().join("repo");
    git(&repo_dir, &["remote", "set-url", "origin", &push]);
    git(&repo_dir, &["push", "-q", "origin", "main:refs/heads/main"]);
    let env = [
        ("HARNESS_TEST_LLM_KEY", CANARY),
        ("HARNESS_TEST_FORGE_TOKEN", token.as_str()),
    ];
    let first = ws.run_env(&["once", "--demo", "--output", "json"], &env);
    assert_eq!(first.code, 0, "{first:?}");
    let pr_url = serde_json::from_str::<Value>(&first.stdout).unwrap()["pr_url"].clone();
    assert!(
        pr_url.as_str().is_some_and(|u| u.starts_with("http")),
        "{first:?}"
    );
    let second = ws.run_env(&["once", "--demo", "--fresh", "--output", "json"], &env);
    assert_eq!(second.code, 0, "{second:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&second.stdout).unwrap()["pr_url"],
        pr_url
    );
    assert_eq!(front(&ws.latest(), "forge")["state"], json!("updated"));
    for run in [&first, &second] {
        assert!(!run.stdout.contains(&token) && !run.stderr.contains(&token));
    }
    assert!(!ws.all_files_text().contains(&token));
}

#[test]
fn a_dry_run_needs_no_forge_token_and_a_run_without_one_stops_before_any_claim() {
    let forge = Forge::start("gitlab", TOKEN);
    let llm = Llm::start(&json!(run_steps(1, "done")));
    let ws = workspace(&llm, &forge, "");
    let plan = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(
        plan.stdout.contains(&format!(", pushed to origin, a pull request on gitlab {REPO} (done: ready, failed: branch only, needs_input: none)\n")),
        "{}",
        plan.stdout
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("[forge].token_ref") || run.stderr.contains("forge token"),
        "{}",
        run.stderr
    );
    assert!(llm.chat_bodies().is_empty(), "no token spent");
    assert!(forge.requests().is_empty());
}

/// On the real Redmine: the REPORT note of the issue links the pull request, and the pull
/// request links the issue.
#[test]
fn on_a_real_redmine_the_note_and_the_pull_request_link_each_other() {
    let _g = real_redmine!();
    use common::redmine::{id, issue, notes, var, SCOPE_NEW, WRITEBACK};
    let forge = Forge::start("gitea", TOKEN);
    let llm = Llm::start(&json!(run_steps(1, "done")));
    let ws = workspace(&llm, &forge, "");
    let text = std::fs::read_to_string(ws.config()).unwrap();
    let text = common::redmine::config(text, &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    std::fs::write(ws.config(), text).unwrap();
    let bot = var("REDMINE_BOT_API_KEY");
    let keys = [
        ("HARNESS_TEST_LLM_KEY", CANARY),
        ("HARNESS_TEST_FORGE_TOKEN", TOKEN),
        ("HARNESS_TEST_REDMINE_KEY", bot.as_str()),
    ];
    let run = ws.run_env(&["once"], &keys);
    assert_eq!(run.code, 0, "{run:?}");
    let top = id("CODE2");
    let pr_url = format!("{}/{REPO}/pulls/1", forge.url());
    assert_eq!(front(&ws.latest(), "pr_url"), json!(pr_url));
    let reports: Vec<String> = notes(&issue(top))
        .into_iter()
        .filter(|n| n.starts_with("[harness-report]"))
        .collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains(&format!("**Pull request:** {pr_url}")),
        "{}",
        reports[0]
    );
    let pr = &forge.prs()[0];
    assert_eq!(pr["head"]["ref"], json!(format!("harness/test-{top}")));
    let link = format!("({}/issues/{top})", var("REDMINE_URL"));
    assert!(pr["body"].as_str().unwrap().contains(&link), "{pr}");
    assert_eq!(forge.violations(), Vec::<String>::new());
    assert!(!run.stderr.contains(&bot) && !ws.all_files_text().contains(&bot));
    assert_no_token(&ws, &llm, &[&run]);
}

#[test]
fn a_forge_that_echoes_the_token_in_its_error_never_shows_it() {
    for kind in KINDS {
        let (_forge, llm, ws, run, out) = failed_run(kind, Fault::Echo);
        assert_eq!(out["outcome"], "writeback_error", "{kind}: {out}");
        assert!(
            out["error"].as_str().unwrap().contains("HTTP 422")
                && out["error"].as_str().unwrap().contains("[redacted]"),
            "{kind}: {out}"
        );
        let retry = once(&ws, &["writeback"]);
        assert_no_token(&ws, &llm, &[&run, &retry]);
    }
}
