//! Writeback stage, Redmine side: a REPORT file's text in, a note (and optionally an
//! attachment), a status change and the result's custom fields on the issue out, each
//! verified by reading the issue back. Idempotent: the run id in the note is the marker, so
//! a retry never posts twice. [`render_note`] and [`custom_fields`] are PURE; [`write_back`]
//! is the adapter.

use std::collections::BTreeMap;

use serde_json::Value;

use anyhow::{anyhow, bail, Context, Result};
use tracing::{info, warn};

use crate::config::RedmineConfig;
use crate::redmine::attachments;
use crate::redmine::claim::{CONFLICT_PAUSE, CONFLICT_RETRIES};
use crate::redmine::client::{Put, RedmineClient};
use crate::redmine::issue::{CustomField, Issue};
use crate::redmine::notes::{status_before_claim, wrote, REPORT_MARKER};
use crate::report::Parsed;

/// Characters of the reply kept in the note when the full REPORT is attached instead.
const SUMMARY_CHARS: usize = 2000;

/// The note for a REPORT; `attached` names the attached file when the reply is too long.
pub(crate) fn render_note(report: &Parsed, max_chars: usize, attached: Option<&str>) -> String {
    let f = &report.fields;
    let num = |k: &str| {
        f.get(k)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "?".into())
    };
    let mut note = format!(
        "{REPORT_MARKER} run={} stop={}{}\n",
        report.str("run_id"),
        report.str("stop_reason"),
        stage_line(report),
    );
    // A question leads the note: it is what the asker must read and answer.
    if let Some(q) = question(report) {
        note.push_str(&format!("**Question:** {q}\n\n"));
    }
    note.push_str(&format!(
        "**harness REPORT**: model `{}` (tier `{}`), {} tokens, {} rounds, stop reason `{}`",
        report.str("model"),
        report.str("tier"),
        num("total_tokens"),
        num("rounds"),
        report.str("stop_reason"),
    ));
    if let Some(cost) = f.get("cost_usd").and_then(|v| v.as_f64()) {
        note.push_str(&format!(", cost ${cost:.4}"));
    }
    note.push('\n');
    if !report.str("error").is_empty() {
        note.push_str(&format!("**Error:** {}\n", report.str("error")));
    }
    if let Some(errors) = f.get("result_errors").and_then(Value::as_array) {
        // `result_invalid`: what a reader of the issue must know the result lacked.
        note.push_str("**Result refused** (it does not match [finish].result_schema):\n");
        for e in errors.iter().filter_map(Value::as_str) {
            note.push_str(&format!("- {e}\n"));
        }
    }
    if let Some(ws) = f.get("workspace").filter(|w| w.is_object()) {
        note.push_str(&workspace_line(ws));
    }
    if let Some(url) = f.get("pr_url").and_then(Value::as_str) {
        note.push_str(&format!("**Pull request:** {url}\n"));
    }
    note.push('\n');
    let body = report.body.trim_end();
    match attached {
        Some(name) => {
            let cut: String = body.chars().take(SUMMARY_CHARS).collect();
            note.push_str(&cut);
            note.push_str(&format!(
                "\n\n_(The reply is {} characters, more than {max_chars}: the full REPORT is attached as `{name}`.)_\n",
                body.chars().count()
            ));
        }
        None => {
            note.push_str(body);
            note.push('\n');
        }
    }
    note
}

/// The note's line about the task's branch: where it is, its commit, the patch, the push.
fn workspace_line(ws: &serde_json::Value) -> String {
    let s = |k: &str| ws.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let commit: String = s("commit").chars().take(12).collect();
    let mut line = format!(
        "**Branch:** `{}` at `{commit}` (from `{}`)",
        s("branch"),
        s("base")
    );
    if ws.get("pushed").and_then(|v| v.as_bool()) == Some(true) {
        line.push_str(&format!(", pushed to `{}`", s("remote")));
    } else if !s("remote").is_empty() {
        line.push_str(", **not pushed**");
    }
    if !s("patch").is_empty() {
        line.push_str(&format!(", patch `{}`", s("patch")));
    }
    line.push('\n');
    if !s("error").is_empty() {
        line.push_str(&format!("**Workspace error:** {}\n", s("error")));
    }
    line
}

/// `[redmine.writeback] result_fields` applied to a REPORT's `result`: the `custom_fields`
/// of the write-back's PUT, one `{"id", "value"}` per mapped key the result has, left out
/// where the issue's field already holds that value (a retry sets nothing twice). A key the
/// result lacks leaves its field alone.
pub(crate) fn custom_fields(
    map: &BTreeMap<String, u64>,
    result: Option<&Value>,
    current: &[CustomField],
) -> Vec<Value> {
    let Some(result) = result.and_then(Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(key, id)| {
            let value = field_value(result.get(key)?);
            let held = current.iter().any(|f| f.id == *id && f.value == value);
            (!held).then(|| serde_json::json!({"id": id, "value": value}))
        })
        .collect()
}

/// A result value as Redmine keeps a custom field's: text (a number or a boolean as its
/// JSON text, null as empty, an object as compact JSON), a list of texts for a list (a
/// multi-value field).
fn field_value(value: &Value) -> Value {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => v.to_string(),
    };
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|v| Value::String(text(v))).collect()),
        other => Value::String(text(other)),
    }
}

/// Whether a REPORT's reply must go as an attachment.
pub(crate) fn needs_attachment(report: &Parsed, max_chars: usize) -> bool {
    report.body.trim_end().chars().count() > max_chars
}

/// The question of a `needs_input` finish, from the REPORT's `finish:` front matter.
fn question(report: &Parsed) -> Option<&str> {
    report
        .fields
        .get("finish")?
        .get("question")?
        .as_str()
        .filter(|q| !q.trim().is_empty())
}

/// ` stage=2/3 implement attempt=1` for a workflow REPORT (the stage this run ended on and
/// its last attempt), else nothing.
fn stage_line(report: &Parsed) -> String {
    let Some(w) = report.fields.get("workflow") else {
        return String::new();
    };
    let stages = w["stages"].as_array().map_or(0, Vec::len);
    let attempt = w["attempts"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|a| a["attempt"].as_u64())
        .unwrap_or(1);
    format!(
        " stage={}/{stages} {} attempt={attempt}",
        w["index"].as_u64().unwrap_or(0),
        w["stage"].as_str().unwrap_or("?")
    )
}

/// Where the issue's status goes after a REPORT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StatusTarget<'a> {
    /// Leave it.
    Unchanged,
    /// The status of this name.
    Named(&'a str),
    /// Back to the status it had before this run's claim: an interrupted run is not an
    /// outcome, the issue stays in play.
    BeforeClaim,
}

/// The status a stop reason leads to.
pub(crate) fn target_status<'a>(cfg: &'a RedmineConfig, stop_reason: &str) -> StatusTarget<'a> {
    let named = |s: &'a Option<String>| match s.as_deref() {
        Some(name) => StatusTarget::Named(name),
        None => StatusTarget::Unchanged,
    };
    match stop_reason {
        "completed" => named(&cfg.writeback.status_done),
        "needs_input" => named(&cfg.writeback.status_needs_input),
        // A workflow with stages left: the issue stays in play for the next tick.
        "interrupted" | "next_stage" => StatusTarget::BeforeClaim,
        _ => named(&cfg.writeback.status_failed),
    }
}

/// A file attached to the REPORT note in the same update (the run's session).
#[derive(Debug, Clone)]
pub(crate) struct Extra {
    /// The attachment's file name.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its content type.
    pub content_type: &'static str,
}

/// The issue a REPORT goes back to and the run that wrote it, or why it cannot go back.
fn issue_and_run(report: &Parsed) -> Result<(u64, String)> {
    if report.str("source") != "redmine" {
        bail!(
            "this REPORT is from source {:?}, not a Redmine issue",
            report.str("source")
        );
    }
    let issue_id: u64 = report.str("task_id").parse().map_err(|_| {
        anyhow!(
            "the REPORT's task_id {:?} is not an issue number",
            report.str("task_id")
        )
    })?;
    let run_id = report.str("run_id").to_string();
    if run_id.is_empty() {
        bail!("the REPORT has no run_id");
    }
    Ok((issue_id, run_id))
}

/// The note of the update and its uploads (the whole REPORT when the note is cut, the
/// session): they go into `fields`.
async fn note_fields(
    client: &RedmineClient,
    report: &Parsed,
    report_text: &str,
    file_name: &str,
    extra: Option<Extra>,
    max: usize,
    fields: &mut serde_json::Map<String, Value>,
) -> Result<()> {
    let mut uploads = Vec::new();
    let attached = if needs_attachment(report, max) {
        let up = attachments::upload(client, report_text.as_bytes().to_vec(), file_name)
            .await
            .context("attaching the REPORT")?;
        uploads.extend(up.as_array().cloned().unwrap_or_default());
        Some(file_name)
    } else {
        None
    };
    if let Some(extra) = extra {
        let up = attachments::upload_as(client, extra.bytes, &extra.name, extra.content_type)
            .await
            .with_context(|| format!("attaching {}", extra.name))?;
        uploads.extend(up.as_array().cloned().unwrap_or_default());
    }
    if !uploads.is_empty() {
        fields.insert("uploads".into(), uploads.into());
    }
    fields.insert("notes".into(), render_note(report, max, attached).into());
    Ok(())
}

/// Redmine answers 204 and may keep less than it was sent: the note (the bot's role needs
/// "Add notes") and each custom field (enabled for the project and tracker, editable by
/// the role) are read back from `after`, as the status is.
fn note_and_fields_applied(
    cfg: &RedmineConfig,
    report: &Parsed,
    fields: &serde_json::Map<String, Value>,
    after: &Issue,
    issue_id: u64,
    run_id: &str,
) -> Result<()> {
    if fields.contains_key("notes") && !wrote(after, REPORT_MARKER, run_id, 0) {
        bail!("Redmine accepted the note for issue #{issue_id} but did not save it (the bot's role needs \"Add notes\")");
    }
    let unapplied = custom_fields(
        &cfg.writeback.result_fields,
        report.fields.get("result"),
        &after.custom_fields,
    );
    if !unapplied.is_empty() {
        let ids: Vec<String> = unapplied.iter().map(|f| f["id"].to_string()).collect();
        bail!(
            "Redmine did not apply the custom field(s) {} of [redmine.writeback].result_fields on issue #{issue_id}: each must be enabled for the issue's project and tracker and editable by the bot's role",
            ids.join(", ")
        );
    }
    Ok(())
}

/// Posts the REPORT to its issue and moves the issue; safe to repeat. `extra` (the
/// session) is attached in the same update as the note, so a note never lacks it. An
/// update that met a concurrent one (Redmine saved nothing of it) is made again from a
/// fresh read of the issue.
pub(crate) async fn write_back(
    client: &RedmineClient,
    cfg: &RedmineConfig,
    report_text: &str,
    file_name: &str,
    extra: Option<Extra>,
) -> Result<()> {
    for _ in 0..CONFLICT_RETRIES {
        match write_back_once(client, cfg, report_text, file_name, extra.clone()).await? {
            Put::Applied => return Ok(()),
            Put::Conflict => {
                info!("writeback: the issue was updated at the same moment; writing back again");
                tokio::time::sleep(CONFLICT_PAUSE).await;
            }
        }
    }
    bail!("writing back: every attempt met a concurrent update of the issue")
}

async fn write_back_once(
    client: &RedmineClient,
    cfg: &RedmineConfig,
    report_text: &str,
    file_name: &str,
    extra: Option<Extra>,
) -> Result<Put> {
    let report = crate::report::parse(report_text)?;
    let (issue_id, run_id) = issue_and_run(&report)?;
    let before = client.issue(issue_id).await?;
    // Journal ids start at 1: since 0 is every note.
    let posted = wrote(&before, REPORT_MARKER, &run_id, 0);
    let restoring = target_status(cfg, report.str("stop_reason")) == StatusTarget::BeforeClaim;
    let target = status_to_set(client, cfg, &report, &before, &run_id).await?;
    let assignee = (report.str("stop_reason") == "needs_input"
        && cfg.writeback.assign_needs_input_to_author)
        .then_some(before.author.id);
    let mut fields = serde_json::Map::new();
    if cfg.writeback.enabled && !posted {
        let max = cfg.writeback.max_note_chars;
        note_fields(
            client,
            &report,
            report_text,
            file_name,
            extra,
            max,
            &mut fields,
        )
        .await?;
    } else if posted {
        info!("writeback: issue #{issue_id} already has the note of run {run_id}; not posting it again");
    }
    if let Some((_, id)) = &target {
        if before.status.id != *id {
            fields.insert("status_id".into(), (*id).into());
        }
    }
    let custom = custom_fields(
        &cfg.writeback.result_fields,
        report.fields.get("result"),
        &before.custom_fields,
    );
    if !custom.is_empty() {
        fields.insert("custom_fields".into(), Value::Array(custom));
    }
    // The assignee goes in an update of its own, after the note: Redmine refuses a whole
    // update (422) over an assignee it will not take, and the note must not be lost to it.
    let assign = async {
        match assignee {
            Some(author) => assign_author(client, &before, author).await,
            None => Ok(Put::Applied),
        }
    };
    if fields.is_empty() {
        info!("writeback: issue #{issue_id} is already up to date");
        return assign.await;
    }
    // Landed: the note when it is sent (a status the workflow refuses must not make it sent
    // twice), else the status, else the custom fields.
    let status_only = target
        .as_ref()
        .map(|(_, id)| *id)
        .filter(|_| !fields.contains_key("notes"));
    let sends_note = fields.contains_key("notes");
    let result = report.fields.get("result");
    let landed = |i: &Issue| match status_only {
        _ if sends_note => wrote(i, REPORT_MARKER, &run_id, 0),
        Some(id) => i.status.id == id,
        None => custom_fields(&cfg.writeback.result_fields, result, &i.custom_fields).is_empty(),
    };
    let put = client
        .put_once(issue_id, &serde_json::json!({ "issue": fields }), landed)
        .await
        .with_context(|| format!("writing back to issue #{issue_id}"))?;
    if put == Put::Conflict {
        return Ok(Put::Conflict);
    }
    let after = client.issue(issue_id).await?;
    note_and_fields_applied(cfg, &report, &fields, &after, issue_id, &run_id)?;
    status_applied(target.as_ref(), restoring, &before, &after, issue_id)?;
    narrate(issue_id, &fields, target.as_ref());
    assign.await
}

/// The status the REPORT moves the issue to (its name for messages, its id), if any.
async fn status_to_set(
    client: &RedmineClient,
    cfg: &RedmineConfig,
    report: &Parsed,
    before: &Issue,
    run_id: &str,
) -> Result<Option<(String, u64)>> {
    Ok(match target_status(cfg, report.str("stop_reason")) {
        StatusTarget::Named(name) => Some((name.to_string(), client.status_id(name).await?)),
        StatusTarget::BeforeClaim => status_before_claim(&before.journals, run_id)
            .map(|id| (format!("the status before the claim (id {id})"), id)),
        StatusTarget::Unchanged => None,
    })
}

/// The status Redmine kept against the one asked for: a refused transition is an error, a
/// restore the workflow refuses only a warning (the REPORT is posted).
fn status_applied(
    target: Option<&(String, u64)>,
    restoring: bool,
    before: &Issue,
    after: &Issue,
    issue_id: u64,
) -> Result<()> {
    if let Some((name, id)) = target {
        let id = *id;
        if after.status.id != id && restoring {
            // Best effort: the REPORT is posted; a workflow without the way back only
            // leaves the claim status, which a human or the next run moves on.
            warn!(
                "writeback: issue #{issue_id}: Redmine did not restore {name}: the workflow does not allow {:?} -> it for the bot's role",
                after.status.name
            );
        } else if after.status.id != id {
            bail!(
                "Redmine did not apply the status change {:?} -> {name:?} on issue #{issue_id}: the workflow does not allow this transition for the bot's role (Administration > Workflow)",
                before.status.name
            );
        }
    }
    Ok(())
}

/// The write-back's line on stderr.
fn narrate(issue_id: u64, fields: &serde_json::Map<String, Value>, target: Option<&(String, u64)>) {
    info!(
        "writeback: issue #{issue_id}: {}{}",
        if fields.contains_key("notes") {
            "REPORT posted as a note"
        } else {
            "note already there"
        },
        match target {
            Some((name, _)) => format!(", status {name:?}"),
            None => String::new(),
        }
    );
}

/// Assigns the issue to its author (`assign_needs_input = "author"`), so the asker is
/// notified; verified by reading the issue back.
async fn assign_author(client: &RedmineClient, issue: &Issue, author: u64) -> Result<Put> {
    let id = issue.id;
    let fix = format!(
        "assigning issue #{id} to its author {:?} (id {author}) for [redmine.writeback].assign_needs_input: the author must be a member of the project with a role that issues can be assigned to",
        issue.author.name
    );
    if issue.assigned_to.as_ref().map(|a| a.id) == Some(author) {
        return Ok(Put::Applied);
    }
    let put = client
        .put_once(
            id,
            &serde_json::json!({"issue": {"assigned_to_id": author}}),
            |i| i.assigned_to.as_ref().map(|a| a.id) == Some(author),
        )
        .await
        .with_context(|| fix.clone())?;
    if put == Put::Conflict {
        return Ok(Put::Conflict);
    }
    let after = client.issue(id).await?;
    if after.assigned_to.as_ref().map(|a| a.id) != Some(author) {
        bail!("{fix} (Redmine did not apply it)");
    }
    info!(
        "writeback: issue #{id} assigned to its author {:?}",
        issue.author.name
    );
    Ok(Put::Applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redmine::notes::marker_run;
    use pretty_assertions::assert_eq;

    fn parsed(body: &str) -> Parsed {
        let text = format!(
            "---\nharness_report: 1\nrun_id: \"r-1\"\nsource: \"redmine\"\ntask_id: \"7\"\nmodel: \"glm-5.3\"\ntier: \"mopac-primary\"\ntotal_tokens: 120\nrounds: 2\nstop_reason: \"completed\"\nerror: null\n---\n\n{body}"
        );
        crate::report::parse(&text).unwrap()
    }

    #[test]
    fn note_has_marker_header_and_reply() {
        assert_eq!(
            render_note(&parsed("All done.\n"), 100, None),
            "[harness-report] run=r-1 stop=completed\n**harness REPORT**: model `glm-5.3` (tier `mopac-primary`), 120 tokens, 2 rounds, stop reason `completed`\n\nAll done.\n"
        );
    }

    #[test]
    fn the_note_links_the_pull_request() {
        let text = "---\nharness_report: 1\nrun_id: \"r-3\"\nsource: \"redmine\"\ntask_id: \"9\"\nmodel: \"m\"\ntier: \"t\"\ntotal_tokens: 1\nrounds: 1\nstop_reason: \"completed\"\npr_url: \"http://127.0.0.1:3000/o/r/pulls/4\"\n---\n\nDone.\n";
        let p = crate::report::parse(text).unwrap();
        assert_eq!(
            render_note(&p, 100, None),
            "[harness-report] run=r-3 stop=completed\n**harness REPORT**: model `m` (tier `t`), 1 tokens, 1 rounds, stop reason `completed`\n**Pull request:** http://127.0.0.1:3000/o/r/pulls/4\n\nDone.\n"
        );
        let none = text.replace(
            "pr_url: \"http://127.0.0.1:3000/o/r/pulls/4\"",
            "pr_url: null",
        );
        let p = crate::report::parse(&none).unwrap();
        assert!(!render_note(&p, 100, None).contains("Pull request"));
    }

    #[test]
    fn a_question_leads_the_note() {
        let text = "---\nharness_report: 1\nrun_id: \"r-2\"\nsource: \"redmine\"\ntask_id: \"9\"\nmodel: \"m\"\ntier: \"t\"\ntotal_tokens: 1\nrounds: 1\nstop_reason: \"needs_input\"\nfinish: {\"status\":\"needs_input\",\"question\":\"Which page size?\"}\n---\n\nI looked at the pager.\n";
        let p = crate::report::parse(text).unwrap();
        assert_eq!(
            render_note(&p, 100, None),
            "[harness-report] run=r-2 stop=needs_input\n**Question:** Which page size?\n\n**harness REPORT**: model `m` (tier `t`), 1 tokens, 1 rounds, stop reason `needs_input`\n\nI looked at the pager.\n"
        );
    }

    #[test]
    fn result_fields_become_custom_fields_not_set_twice() {
        let map: BTreeMap<String, u64> = [
            ("category".to_string(), 5),
            ("hours".to_string(), 6),
            ("labels".to_string(), 7),
            ("absent".to_string(), 8),
            ("meta".to_string(), 9),
        ]
        .into();
        let result = serde_json::json!({"category": "bug", "hours": 2.5, "labels": ["a", 1],
            "meta": {"k": null}, "unmapped": "x"});
        assert_eq!(
            custom_fields(&map, Some(&result), &[]),
            vec![
                serde_json::json!({"id": 5, "value": "bug"}),
                serde_json::json!({"id": 6, "value": "2.5"}),
                serde_json::json!({"id": 7, "value": ["a", "1"]}),
                serde_json::json!({"id": 9, "value": "{\"k\":null}"}),
            ]
        );
        let held = |id, value: Value| CustomField {
            id,
            name: String::new(),
            value,
        };
        let current = [
            held(5, "bug".into()),
            held(6, "1".into()),
            held(7, serde_json::json!(["a", "1"])),
        ];
        assert_eq!(
            custom_fields(&map, Some(&result), &current),
            vec![
                serde_json::json!({"id": 6, "value": "2.5"}),
                serde_json::json!({"id": 9, "value": "{\"k\":null}"}),
            ]
        );
        assert!(custom_fields(&map, None, &[]).is_empty());
        assert!(custom_fields(&map, Some(&Value::Null), &[]).is_empty());
        assert!(custom_fields(&BTreeMap::new(), Some(&result), &[]).is_empty());
    }

    #[test]
    fn statuses_follow_the_outcome() {
        let mut cfg =
            crate::redmine::issue::fixtures::cfg(crate::config::Scope::SavedQuery(1), None);
        cfg.writeback.status_done = Some("Resolved".into());
        cfg.writeback.status_failed = Some("Feedback".into());
        assert_eq!(
            target_status(&cfg, "completed"),
            StatusTarget::Named("Resolved")
        );
        assert_eq!(target_status(&cfg, "needs_input"), StatusTarget::Unchanged);
        assert_eq!(
            target_status(&cfg, "agent_failed"),
            StatusTarget::Named("Feedback")
        );
        assert_eq!(
            target_status(&cfg, "max_rounds"),
            StatusTarget::Named("Feedback")
        );
        assert_eq!(
            target_status(&cfg, "interrupted"),
            StatusTarget::BeforeClaim
        );
        cfg.writeback.status_needs_input = Some("Feedback".into());
        assert_eq!(
            target_status(&cfg, "needs_input"),
            StatusTarget::Named("Feedback")
        );
    }

    #[test]
    fn long_replies_are_summarised_and_attached() {
        let long = "x".repeat(3000);
        let p = parsed(&long);
        assert!(needs_attachment(&p, 500));
        let note = render_note(&p, 500, Some("REPORT-a.md"));
        assert!(
            note.contains("full REPORT is attached as `REPORT-a.md`"),
            "{note}"
        );
        assert!(note.len() < 2500);
        assert_eq!(marker_run(&note, REPORT_MARKER).as_deref(), Some("r-1"));
    }

    #[test]
    fn the_note_names_the_branch_commit_push_and_patch() {
        let text = "---\nharness_report: 1\nrun_id: \"r-1\"\nsource: \"redmine\"\ntask_id: \"7\"\nstop_reason: \"completed\"\nworkspace: {\"branch\":\"harness/v-7\",\"base\":\"main\",\"commit\":\"0123456789abcdef\",\"committed\":true,\"patch\":\"/r/REPORT-v-7.patch\",\"pushed\":true,\"remote\":\"origin\",\"error\":null}\n---\n\nok\n";
        let note = render_note(&crate::report::parse(text).unwrap(), 100, None);
        assert!(
            note.contains("**Branch:** `harness/v-7` at `0123456789ab` (from `main`), pushed to `origin`, patch `/r/REPORT-v-7.patch`\n"),
            "{note}"
        );
        let failed = text
            .replace("\"pushed\":true", "\"pushed\":false")
            .replace("\"error\":null", "\"error\":\"push refused\"");
        let note = render_note(&crate::report::parse(&failed).unwrap(), 100, None);
        assert!(note.contains(", **not pushed**, patch"), "{note}");
        assert!(
            note.contains("**Workspace error:** push refused\n"),
            "{note}"
        );
    }

    #[test]
    fn only_a_completed_turn_is_done_a_failed_check_is_failed() {
        let text = "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\ndefault_tier = \"t\"\nt = \"m\"\n[redmine]\nurl = \"http://127.0.0.1:3000\"\nkey_ref = \"env:K\"\nscope_query = \"x=1\"\n[redmine.writeback]\nstatus_done = \"Resolved\"\nstatus_failed = \"Feedback\"\n";
        let cfg = crate::config::parse(text, std::path::Path::new("/h/harness.toml")).unwrap();
        let rm = cfg.redmine.unwrap();
        assert_eq!(
            target_status(&rm, "completed"),
            StatusTarget::Named("Resolved")
        );
        assert_eq!(
            target_status(&rm, "check_failed"),
            StatusTarget::Named("Feedback")
        );
    }
}
