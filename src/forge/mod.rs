//! Forge stage (write-back): a task's pushed branch in, its pull (merge) request out. The
//! REPORT is written first with `forge: {state: "pending", ...}` ([`intent`], PURE); then
//! [`deliver`] finds the open pull request of the branch or opens one (idempotent: a second
//! run finds it and comments, a retry finds the one its own attempt opened), and the REPORT
//! is rewritten with its URL. A failure leaves the REPORT pending, which `harness
//! writeback` retries from the file alone. [`decide`], [`title`] and [`body`] are PURE; the
//! HTTP is in `client.rs`, the dialects in `api.rs`.

pub(crate) mod api;
pub(crate) mod client;

use anyhow::{Context, Result};
use serde_json::Value;
use tracing::{info, warn};

use crate::config::{ForgeConfig, ForgeKind, OnFailure, PrMode};
pub(crate) use crate::report::ForgeRecord as Record;
use crate::report::Parsed;
use api::{NewPr, Pr, Request};
use client::ForgeClient;

/// Whether a run's branch gets a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// One is opened (or the open one updated); `draft` for one harness opens.
    Open {
        /// A draft.
        draft: bool,
    },
    /// None, for this reason.
    Skip(&'static str),
}

/// What `[forge]` asks for a run that stopped with `stop_reason` and whose branch was (or
/// was not) pushed. PURE.
pub(crate) fn decide(cfg: &ForgeConfig, stop_reason: &str, pushed: bool) -> Decision {
    if cfg.pr == PrMode::Off {
        return Decision::Skip("[forge].pr is \"off\"");
    }
    match stop_reason {
        "needs_input" => return Decision::Skip("the run asks a question (needs_input)"),
        "interrupted" => return Decision::Skip("the run was interrupted"),
        // A workflow's stage passed and the next one runs later: not the task's end yet.
        "next_stage" => {
            return Decision::Skip("the workflow goes on with its next stage (next_stage)")
        }
        _ => {}
    }
    if !pushed {
        return Decision::Skip("the branch was not pushed");
    }
    if stop_reason == "completed" {
        return Decision::Open {
            draft: cfg.pr == PrMode::Draft,
        };
    }
    match cfg.on_failure {
        OnFailure::Draft => Decision::Open { draft: true },
        OnFailure::Branch => {
            Decision::Skip("the task was not accomplished ([forge].on_failure is \"branch\")")
        }
    }
}

/// The REPORT's `forge:` before any forge call: `pending` when a pull request is wanted,
/// `skipped` with why otherwise; `None` without `[forge]` or `[workspace]`. PURE.
pub(crate) fn intent(
    cfg: &ForgeConfig,
    stop_reason: &str,
    workspace: Option<&crate::workspace::Record>,
) -> Option<Record> {
    let ws = workspace?;
    let (state, draft, reason) = match decide(cfg, stop_reason, ws.pushed) {
        Decision::Open { draft } => ("pending", draft, None),
        Decision::Skip(why) => ("skipped", false, Some(why.to_string())),
    };
    Some(Record {
        state: state.to_string(),
        kind: cfg.kind.as_str().to_string(),
        repo: cfg.repo.clone(),
        head: ws.branch.clone(),
        base: ws.base.clone(),
        draft,
        url: None,
        number: None,
        reason,
    })
}

/// The title of a new pull request: `[forge].title` filled in, with the forge's draft
/// prefix for a draft where drafts are made by title. PURE.
pub(crate) fn title(template: &str, report: &Parsed, draft_prefix: Option<&str>) -> String {
    let filled = template
        .replace("{subject}", report.str("subject"))
        .replace("{task_id}", report.str("task_id"))
        .replace("{vertical}", report.str("vertical"));
    let one_line: String = filled.lines().collect::<Vec<_>>().join(" ");
    let clipped: String = one_line.chars().take(250).collect();
    match draft_prefix {
        Some(p) => format!("{p}{clipped}"),
        None => clipped,
    }
}

/// The marker of a run in a pull request's description or comment.
pub(crate) fn marker(run_id: &str) -> String {
    format!("<!-- harness run={run_id} -->")
}

/// Characters of the REPORT's body a description or comment quotes (forges cap them near
/// 64 KiB).
const BODY_CHARS: usize = 50_000;

/// The description of a new pull request, or the comment on an open one: the run marker,
/// the run's line with a link to the issue, the gate's summary, then the REPORT's body (the
/// `finish` summary, the Egress and Check sections). PURE.
pub(crate) fn body(report: &Parsed, issue: Option<&str>) -> String {
    let mut out = marker(report.str("run_id"));
    out.push('\n');
    let task = match issue {
        Some(link) => format!("[{}]({link})", report.str("task_id")),
        None => format!("`{}` ({})", report.str("task_id"), report.str("source")),
    };
    out.push_str(&format!(
        "**harness** run `{}` on {task}: stop reason `{}`, model `{}`, {} rounds.\n\n",
        report.str("run_id"),
        report.str("stop_reason"),
        report.str("model"),
        report
            .fields
            .get("rounds")
            .map(Value::to_string)
            .unwrap_or_default(),
    ));
    out.push_str(&format!("**Check:** {}\n\n", check_line(report)));
    out.push_str(&format!("**Gate:** {}\n\n", gate_line(report)));
    let text: String = report.body.trim_end().chars().take(BODY_CHARS).collect();
    out.push_str(&text);
    if report.body.trim_end().chars().count() > BODY_CHARS {
        out.push_str("\n\n_(cut: the whole REPORT is in the run's report dir)_");
    }
    out.push('\n');
    out
}

/// The success check's result in words.
fn check_line(report: &Parsed) -> String {
    let Some(c) = report.fields.get("check").filter(|c| c.is_object()) else {
        return "none configured".to_string();
    };
    let passed = c.get("passed").and_then(Value::as_bool) == Some(true);
    format!(
        "`{}` {} ({} of {} attempts, the last ended with {})",
        c.get("command").and_then(Value::as_str).unwrap_or_default(),
        if passed { "passed" } else { "did not pass" },
        c.get("attempts").map(Value::to_string).unwrap_or_default(),
        c.get("max_attempts")
            .map(Value::to_string)
            .unwrap_or_default(),
        c.get("last_ending")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// What the gate did over the turn: commands run and denied, file tool calls and refusals.
fn gate_line(report: &Parsed) -> String {
    let mut counts = [0usize; 4];
    let rounds = report.fields.get("round_log").and_then(Value::as_array);
    for tool in rounds
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("tools")?.as_array())
        .flatten()
    {
        match tool.get("outcome").and_then(Value::as_str) {
            Some("ran") => counts[0] += 1,
            Some("denied") => counts[1] += 1,
            Some("file") => counts[2] += 1,
            Some("file_refused") => counts[3] += 1,
            _ => {}
        }
    }
    format!(
        "{} commands ran, {} denied; {} file tool calls, {} refused",
        counts[0], counts[1], counts[2], counts[3]
    )
}

/// The REPORT's pending `forge:`, or `None` when it has nothing left to do.
pub(crate) fn pending(report: &Parsed) -> Option<Record> {
    let record: Record = serde_json::from_value(report.fields.get("forge")?.clone()).ok()?;
    (record.state == "pending").then_some(record)
}

/// Does the pending forge step of `report`: finds the open pull request of its branch (and
/// comments on it, unless this run opened it) or opens one; returns the record to write
/// into the REPORT. Safe to repeat.
pub(crate) async fn deliver(
    client: &ForgeClient,
    cfg: &ForgeConfig,
    report: &Parsed,
    record: Record,
    issue: Option<&str>,
) -> Result<Record> {
    let text = body(report, issue);
    let own = marker(report.str("run_id"));
    if let Some(pr) = find(client, &record.head).await? {
        if pr.body.contains(&own) {
            info!("forge: pull request {} of this run is open", pr.url);
            return Ok(done(record, "opened", &pr));
        }
        client
            .call(&client.dialect.comment(pr.number, &text))
            .await
            .context("commenting on the open pull request")?;
        info!("forge: commented on the open pull request {}", pr.url);
        return Ok(done(record, "updated", &pr));
    }
    let prefix = client.dialect.draft_prefix().filter(|_| record.draft);
    let title = title(&cfg.title, report, prefix);
    let new = NewPr {
        title: &title,
        body: &text,
        head: &record.head,
        base: &record.base,
        draft: record.draft,
    };
    let labels = create_labels(client, cfg).await?;
    let reviewer_ids = gitlab_reviewers(client, cfg).await?;
    let pr = create(
        client,
        &client.dialect.create(&new, &labels, &reviewer_ids),
        &record.head,
    )
    .await?;
    info!("forge: opened pull request {}", pr.url);
    after_create(client, cfg, pr.number).await?;
    Ok(done(record, "opened", &pr))
}

fn done(record: Record, state: &str, pr: &Pr) -> Record {
    Record {
        state: state.to_string(),
        url: Some(pr.url.clone()),
        number: Some(pr.number),
        reason: None,
        ..record
    }
}

/// The open pull request of `head`, reading at most [`api::MAX_PAGES`] pages.
async fn find(client: &ForgeClient, head: &str) -> Result<Option<Pr>> {
    for page in 1..=api::MAX_PAGES {
        let answer = client
            .call(&client.dialect.find(head, page))
            .await
            .context("looking for the branch's open pull request")?;
        let (found, full) = client.dialect.matching(&answer, head);
        if found.is_some() || !full {
            return Ok(found);
        }
    }
    Ok(None)
}

/// Opens the pull request at most once: an attempt whose answer is lost or is a server
/// error may have opened it, so before it is sent again the branch's open pull request is
/// looked for, and taken when it is there.
async fn create(client: &ForgeClient, req: &Request, head: &str) -> Result<Pr> {
    let mut attempt = 0;
    loop {
        let failed = match client.attempt(req).await {
            Ok(answer) => {
                let value = client
                    .json(req, &answer)
                    .context("opening the pull request")?;
                return client.dialect.pr(&value).context(
                    "the forge's answer to opening the pull request names no number or URL",
                );
            }
            Err(failed) => failed,
        };
        if let Some(pr) = find(client, head).await? {
            info!(
                "forge: opening failed ({}) but the pull request is there",
                failed.reason
            );
            return Ok(pr);
        }
        attempt = client
            .after_failure(req, failed, attempt)
            .await
            .context("opening the pull request")?;
    }
}

/// The labels the create call carries: Gitea label ids (looked up by name), GitLab names;
/// none for GitHub, whose labels come after.
async fn create_labels(client: &ForgeClient, cfg: &ForgeConfig) -> Result<Vec<Value>> {
    if cfg.labels.is_empty() {
        return Ok(Vec::new());
    }
    match client.dialect.kind() {
        ForgeKind::Github => Ok(Vec::new()),
        ForgeKind::Gitlab => Ok(cfg.labels.iter().map(|l| Value::from(l.as_str())).collect()),
        ForgeKind::Gitea => {
            let mut found = Vec::new();
            for page in 1..=api::MAX_PAGES {
                let answer = client
                    .call(&client.dialect.label_list(page))
                    .await
                    .context("reading the repository's labels")?;
                found.extend(api::label_ids(&answer, &cfg.labels));
                if answer.as_array().map_or(0, Vec::len) < api::PAGE_SIZE as usize {
                    break;
                }
            }
            for missing in cfg
                .labels
                .iter()
                .filter(|l| !found.iter().any(|(n, _)| n == *l))
            {
                warn!("forge: the repository has no label {missing:?} ([forge].labels); left out");
            }
            Ok(found.into_iter().map(|(_, id)| Value::from(id)).collect())
        }
    }
}

/// GitLab: the ids of `[forge].reviewers`, which its create call takes.
async fn gitlab_reviewers(client: &ForgeClient, cfg: &ForgeConfig) -> Result<Vec<u64>> {
    if client.dialect.kind() != ForgeKind::Gitlab {
        return Ok(Vec::new());
    }
    let mut ids = Vec::new();
    for name in &cfg.reviewers {
        let answer = client
            .call(&client.dialect.user(name))
            .await
            .with_context(|| format!("looking up the reviewer {name:?}"))?;
        match answer
            .get(0)
            .and_then(|u| u.get("id"))
            .and_then(Value::as_u64)
        {
            Some(id) => ids.push(id),
            None => warn!("forge: no GitLab user {name:?} ([forge].reviewers); left out"),
        }
    }
    Ok(ids)
}

/// Gitea and GitHub: reviewers asked after the pull request exists; GitHub labels too.
async fn after_create(client: &ForgeClient, cfg: &ForgeConfig, number: u64) -> Result<()> {
    let kind = client.dialect.kind();
    if kind == ForgeKind::Github && !cfg.labels.is_empty() {
        client
            .call(&client.dialect.labels(number, &cfg.labels))
            .await
            .context("labelling the pull request")?;
    }
    if kind != ForgeKind::Gitlab && !cfg.reviewers.is_empty() {
        client
            .call(&client.dialect.reviewers(number, &cfg.reviewers))
            .await
            .context("asking for reviews")?;
    }
    Ok(())
}

/// The link to the task's issue a pull request carries: the Redmine issue's page (any
/// password in `[redmine].url` masked), `None` for a task from elsewhere.
pub(crate) fn issue_link(cfg: &crate::config::Config, report: &Parsed) -> Option<String> {
    let rm = cfg
        .redmine
        .as_ref()
        .filter(|_| report.str("source") == "redmine")?;
    Some(format!(
        "{}/issues/{}",
        crate::secrets::masked_url(&rm.url),
        report.str("task_id")
    ))
}

/// The forge step of a written REPORT (`path`, whose text is `text`): when its `forge:` is
/// pending, [`deliver`], then the REPORT rewritten with the outcome; the REPORT's text
/// after it (unchanged when nothing was pending). A failure rewrites the REPORT with the
/// error as the pending record's `reason` and is returned: `harness writeback` retries it.
pub(crate) async fn write_back(
    client: &ForgeClient,
    cfg: &crate::config::Config,
    path: &std::path::Path,
    text: &str,
) -> Result<String> {
    let Some(forge) = cfg.forge.as_ref() else {
        return Ok(text.to_string());
    };
    let report = crate::report::parse(text)?;
    let Some(record) = pending(&report) else {
        return Ok(text.to_string());
    };
    // As `report::parse` reads it: an editor may have saved it with CRLF or a BOM.
    let text = &text.trim_start_matches('\u{feff}').replace("\r\n", "\n");
    let issue = issue_link(cfg, &report);
    match deliver(client, forge, &report, record.clone(), issue.as_deref()).await {
        Ok(done) => {
            let new = crate::report::with_forge(text, &done);
            crate::report::rewrite(path, &new).with_context(|| {
                format!(
                    "the pull request {} is open, but the REPORT {} could not be updated",
                    done.url.as_deref().unwrap_or_default(),
                    path.display()
                )
            })?;
            Ok(new)
        }
        Err(e) => {
            let failed = Record {
                reason: Some(client.mask(&format!("{e:#}"))),
                ..record
            };
            let new = crate::report::with_forge(text, &failed);
            if let Err(w) = crate::report::rewrite(path, &new) {
                warn!(
                    "forge: the REPORT {} could not record the failure: {w:#}",
                    path.display()
                );
            }
            Err(e.context("the pull request is pending"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ForgeKind;
    use crate::secrets::KeyRef;
    use pretty_assertions::assert_eq;

    fn cfg(pr: PrMode, on_failure: OnFailure) -> ForgeConfig {
        ForgeConfig {
            kind: ForgeKind::Gitea,
            url: "http://127.0.0.1:1".into(),
            repo: "o/r".into(),
            token_ref: KeyRef::parse("env:T", std::path::Path::new("/")).unwrap(),
            pr,
            on_failure,
            title: "{subject} ({task_id})".into(),
            labels: Vec::new(),
            reviewers: Vec::new(),
            timeout: std::time::Duration::from_secs(1),
            max_retries: 0,
        }
    }

    #[test]
    fn a_pull_request_follows_the_outcome_and_the_push() {
        let ready = cfg(PrMode::Ready, OnFailure::Branch);
        assert_eq!(
            decide(&ready, "completed", true),
            Decision::Open { draft: false }
        );
        assert!(matches!(
            decide(&ready, "completed", false),
            Decision::Skip(_)
        ));
        assert!(matches!(
            decide(&ready, "needs_input", true),
            Decision::Skip(_)
        ));
        assert!(matches!(
            decide(&ready, "check_failed", true),
            Decision::Skip(_)
        ));
        let draft = cfg(PrMode::Draft, OnFailure::Draft);
        assert_eq!(
            decide(&draft, "completed", true),
            Decision::Open { draft: true }
        );
        assert_eq!(
            decide(&draft, "agent_failed", true),
            Decision::Open { draft: true }
        );
        assert!(matches!(
            decide(&draft, "interrupted", true),
            Decision::Skip(_)
        ));
        assert!(matches!(
            decide(&draft, "next_stage", true),
            Decision::Skip(_)
        ));
        assert_eq!(
            decide(&draft, "stage_failed", true),
            Decision::Open { draft: true }
        );
        let off = cfg(PrMode::Off, OnFailure::Draft);
        assert!(matches!(decide(&off, "completed", true), Decision::Skip(_)));
    }

    fn parsed() -> Parsed {
        let text = "---\nharness_report: 1\nrun_id: \"r1\"\ntask_id: \"42\"\nsource: \"redmine\"\nsubject: \"Fix\\nit\"\nvertical: \"v\"\nstop_reason: \"completed\"\nmodel: \"m\"\nrounds: 2\nround_log: [{\"tools\": [{\"outcome\": \"ran\"}, {\"outcome\": \"denied\"}]}]\ncheck: {\"command\": \"make test\", \"attempts\": 1, \"max_attempts\": 3, \"passed\": true, \"last_ending\": \"exit 0\"}\n---\n\nDone.\n";
        crate::report::parse(text).unwrap()
    }

    #[test]
    fn the_title_is_one_line_with_the_draft_prefix() {
        assert_eq!(
            title("{subject} ({task_id})", &parsed(), Some("WIP: ")),
            "WIP: Fix it (42)"
        );
    }

    #[test]
    fn the_body_carries_the_marker_the_link_the_check_and_the_gate() {
        let b = body(&parsed(), Some("http://rm/issues/42"));
        assert_eq!(
            b,
            "<!-- harness run=r1 -->\n**harness** run `r1` on [42](http://rm/issues/42): stop reason `completed`, model `m`, 2 rounds.\n\n**Check:** `make test` passed (1 of 3 attempts, the last ended with exit 0)\n\n**Gate:** 1 commands ran, 1 denied; 0 file tool calls, 0 refused\n\nDone.\n"
        );
    }
}
