//! Writeback stage: the REPORT. [`render`] is PURE (a [`Report`] in, Markdown out, the clock
//! passed in as values); [`prepare_dir`] and [`write_reports`] are the filesystem adapter, on
//! top of [`crate::atomic`] (temp file in the same directory, fsync, rename, fsync of the
//! directory).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::atomic::{self, TEMP_PREFIX};
use crate::llm::wire::Usage;
use crate::turn::check::CheckRecord;
use crate::turn::{RoundRecord, SkippedModel};
use crate::workspace;

/// Everything a REPORT says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    /// Unique id of this run (also the Redmine write-back marker).
    pub run_id: String,
    /// The vertical.
    pub vertical: String,
    /// The task id.
    pub task_id: String,
    /// `demo` or `redmine`.
    pub source: String,
    /// The task's subject.
    pub subject: String,
    /// The task class, `null` when default_tier applied.
    pub class: Option<String>,
    /// Tier alias.
    pub tier: String,
    /// The concrete model that answered (the chain's first when none did).
    pub model: String,
    /// Models of the tier's chain that were skipped, with the reason.
    pub models_skipped: Vec<SkippedModel>,
    /// Tokens summed over the turn.
    pub usage: Usage,
    /// USD summed over the rounds whose cost is known; `None` when none is.
    pub cost_usd: Option<f64>,
    /// LLM round trips made.
    pub rounds: u32,
    /// The round cap.
    pub max_rounds: u32,
    /// `[budget] max_total_tokens`, if set.
    pub max_total_tokens: Option<u64>,
    /// `[budget] max_cost_usd`, if set.
    pub max_cost_usd: Option<f64>,
    /// `completed`, `needs_input`, `agent_failed`, `max_rounds`, `budget`, `llm_error`,
    /// `interrupted`, `check_failed`.
    pub stop_reason: String,
    /// The error that ended the turn, if any (secrets masked).
    pub error: Option<String>,
    /// The model's `finish` call (status and question); `None` when it made none.
    pub finish: Option<FinishRecord>,
    /// The task's session: what was continued, or why the run started fresh; `None` with
    /// `[session] enabled = false`.
    pub session: Option<crate::session::SessionInfo>,
    /// When the run started.
    pub started: DateTime<Utc>,
    /// When the turn finished.
    pub finished: DateTime<Utc>,
    /// `replay <file>` or the endpoint URL.
    pub backend: String,
    /// How commands were confined: `landlock (ABI 7)`, `off`, `unavailable`.
    pub sandbox: String,
    /// Per-round telemetry.
    pub round_log: Vec<RoundRecord>,
    /// The model's final reply (or the last text of a failed turn).
    pub reply: Option<String>,
    /// The success check's runs, when the task has a check.
    pub check: Option<CheckRecord>,
    /// The task's git worktree after the turn, when `[workspace]` is set.
    pub workspace: Option<workspace::Record>,
    /// Where the project's instructions and skills were read from, and their hashes, when
    /// the run had any.
    pub instructions: Option<crate::inputs::InstructionsRecord>,
    /// The **Attachments** section: each of the task's attachments and what became of it
    /// (names masked), when it had any ([`crate::attachments::section`]).
    pub attachments: Option<String>,
    /// `network = "allowlist"`: the **Egress** section (hosts reached and refused, bytes),
    /// rendered and masked ([`crate::tools::egress::section`]).
    pub egress: Option<String>,
    /// With `[finish] result_schema`: the `finish` call's `result` (masked) or why there is
    /// none; `None` without a schema (then the front matter has no `result:` line).
    pub result: Option<ResultRecord>,
    /// A workflow task: the workflow, why it was chosen, this run's stage attempts and the
    /// stages of earlier runs ([`crate::once`] builds it); `None` for a one-turn task.
    pub workflow: Option<serde_json::Value>,
    /// With `[forge]` and `[workspace]`: the task branch's pull request (`pending` until
    /// the forge step has done it); `None` without them.
    pub forge: Option<ForgeRecord>,
}

/// The `result:` (and `result_errors:`) front matter of a run with a result schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResultRecord {
    /// The accepted result, valid against the schema (its strings masked after the check);
    /// `None` when the run has none (no `finish`, a status other than `done` without one,
    /// or `result_invalid`).
    pub value: Option<serde_json::Value>,
    /// `result_invalid`: what was wrong with the last round's result (bounded).
    pub errors: Vec<String>,
}

/// The REPORT's `forge:`: what became of the task branch's pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForgeRecord {
    /// `pending` (still to do: `harness writeback` does it), `opened` (this run opened it),
    /// `updated` (an open one was found and commented on) or `skipped` (none wanted).
    pub state: String,
    /// `gitea`, `gitlab` or `github`.
    pub kind: String,
    /// `[forge].repo`.
    pub repo: String,
    /// The task branch.
    pub head: String,
    /// The branch it goes into.
    pub base: String,
    /// Whether a pull request harness opens is a draft.
    pub draft: bool,
    /// The pull request's page, once there is one.
    pub url: Option<String>,
    /// Its number (GitLab: `iid`).
    pub number: Option<u64>,
    /// `skipped`: why; `pending`: the last attempt's error, if any.
    pub reason: Option<String>,
}

/// The `finish:` front matter: what the model said about the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FinishRecord {
    /// `done`, `needs_input`, `blocked` or `failed`.
    pub status: String,
    /// The question for a human (`needs_input` only).
    pub question: Option<String>,
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

/// Renders the REPORT: YAML front matter whose values are JSON scalars (a script can parse
/// each line with a JSON parser), then the reply verbatim but for control characters.
pub(crate) fn render(r: &Report) -> String {
    let ts = |t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let duration_ms = (r.finished - r.started).num_milliseconds().max(0);
    let fields: Vec<(&str, String)> = vec![
        ("harness_report", VERSION.to_string()),
        ("run_id", json(&r.run_id)),
        ("vertical", json(&r.vertical)),
        ("task_id", json(&r.task_id)),
        ("source", json(&r.source)),
        ("subject", json(&r.subject)),
        ("class", json(&r.class)),
        ("tier", json(&r.tier)),
        ("model", json(&r.model)),
        ("models_skipped", json(&r.models_skipped)),
        ("prompt_tokens", r.usage.prompt_tokens.to_string()),
        ("completion_tokens", r.usage.completion_tokens.to_string()),
        ("total_tokens", r.usage.total_tokens.to_string()),
        ("cost_usd", json(&r.cost_usd)),
        ("rounds", r.rounds.to_string()),
        ("max_rounds", r.max_rounds.to_string()),
        ("max_total_tokens", json(&r.max_total_tokens)),
        ("max_cost_usd", json(&r.max_cost_usd)),
        ("stop_reason", json(&r.stop_reason)),
        ("error", json(&r.error)),
        ("finish", json(&r.finish)),
        ("session", json(&r.session)),
        ("started", json(&ts(&r.started))),
        ("finished", json(&ts(&r.finished))),
        ("duration_ms", duration_ms.to_string()),
        ("backend", json(&r.backend)),
        ("sandbox", json(&r.sandbox)),
        ("harness_version", json(&env!("CARGO_PKG_VERSION"))),
        ("round_log", json(&r.round_log)),
    ];
    let fields = fields.into_iter().chain(optional_fields(r));
    let mut out = String::from("---\n");
    for (k, v) in fields {
        out.push_str(k);
        out.push_str(": ");
        out.push_str(&v);
        out.push('\n');
    }
    out.push_str("---\n\n");
    match &r.reply {
        Some(reply) => {
            let reply = displayable(reply);
            out.push_str(&reply);
            if !reply.ends_with('\n') {
                out.push('\n');
            }
        }
        None => out.push_str(&format!(
            "_No reply: the turn ended ({}) before the model produced any text._\n",
            r.stop_reason
        )),
    }
    for section in [&r.attachments, &r.egress].into_iter().flatten() {
        out.push('\n');
        out.push_str(&displayable(section));
    }
    if let Some(check) = &r.check {
        out.push('\n');
        out.push_str(&displayable(&crate::turn::check::section(check)));
    }
    out
}

/// The lines only some runs carry: those with a result schema, a check, a workspace,
/// instructions, a workflow or a forge.
fn optional_fields(r: &Report) -> impl Iterator<Item = (&'static str, String)> {
    let result = r.result.as_ref();
    [
        result.map(|x| ("result", json(&x.value))),
        result
            .filter(|x| !x.errors.is_empty())
            .map(|x| ("result_errors", json(&x.errors))),
        r.check.as_ref().map(|c| ("check", json(c))),
        r.workspace.as_ref().map(|w| ("workspace", json(w))),
        r.instructions.as_ref().map(|i| ("instructions", json(i))),
        r.workflow.as_ref().map(|w| ("workflow", json(w))),
        r.forge.as_ref().map(|f| ("forge", json(f))),
        r.forge.as_ref().map(|f| ("pr_url", json(&f.url))),
    ]
    .into_iter()
    .flatten()
}

/// `text` fit for a file people `cat`, a terminal (the REPORT goes to stderr when it cannot
/// be written) and a Redmine note: control characters other than line feed and tab (an
/// escape sequence that rewrites the terminal, a NUL that PostgreSQL refuses in a note, a
/// carriage return that hides a line) become U+FFFD; a CRLF line end becomes LF.
fn displayable(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let text = text.replace("\r\n", "\n");
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if bad(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

/// `REPORT-<vertical>-<task>-<UTC timestamp>.md`, with the task id made file-name safe.
pub(crate) fn file_name(vertical: &str, task_id: &str, at: DateTime<Utc>) -> String {
    let safe: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "REPORT-{vertical}-{safe}-{}.md",
        at.format("%Y%m%dT%H%M%SZ")
    )
}

/// Creates the report directory if needed and proves it is writable (a synced temp file is
/// created and removed), so a run fails before any token is spent. Also removes temp files
/// that a crashed run left behind more than ten minutes ago.
pub(crate) fn prepare_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create report dir {} (report_dir)", dir.display()))?;
    let mut probe = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .with_context(|| format!("report dir {} (report_dir) is not writable", dir.display()))?;
    probe
        .write_all(b"probe")
        .and_then(|_| probe.as_file().sync_all())
        .with_context(|| {
            format!(
                "report dir {} (report_dir) is not writable (write failed)",
                dir.display()
            )
        })?;
    drop(probe);
    atomic::remove_stale_temps(dir);
    Ok(())
}

/// `text` (a rendered REPORT) with its `forge:` and `pr_url:` lines saying `record`: the
/// forge step's outcome, written into the REPORT it started from. PURE.
pub(crate) fn with_forge(text: &str, record: &ForgeRecord) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut in_front = false;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line == "---\n" {
            in_front = i == 0;
        }
        if in_front && line.starts_with("forge: ") {
            out.push_str(&format!("forge: {}\n", json(record)));
        } else if in_front && line.starts_with("pr_url: ") {
            out.push_str(&format!("pr_url: {}\n", json(&record.url)));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Replaces a REPORT this run (or a retried write-back) wrote with `text`, atomically, and
/// `REPORT-latest.md` beside it when that still holds the same run.
pub(crate) fn rewrite(path: &Path, text: &str) -> Result<()> {
    atomic::write(path, text.as_bytes())?;
    let latest = path.with_file_name("REPORT-latest.md");
    let same_run = |t: &str| parse(t).ok().map(|p| p.str("run_id").to_string());
    let old = crate::bounded::read_text(&latest, crate::bounded::REPORT_MAX).ok();
    if old
        .as_deref()
        .and_then(same_run)
        .is_some_and(|r| Some(r) == same_run(text))
    {
        atomic::write(&latest, text.as_bytes())?;
    }
    Ok(())
}

/// A REPORT on disk: where, and the text written, which the write-back sends as it is (the
/// REPORT is rendered once per run).
#[derive(Debug)]
pub(crate) struct Written {
    /// The timestamped REPORT file.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// Writes the timestamped REPORT and then `REPORT-latest.md`.
pub(crate) fn write_reports(dir: &Path, report: &Report) -> Result<Written> {
    let text = render(report);
    let name = file_name(&report.vertical, &report.task_id, report.started);
    let path = atomic::write_new(dir, &name, text.as_bytes())?;
    atomic::write(&dir.join("REPORT-latest.md"), text.as_bytes())?;
    Ok(Written { path, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolEvent;
    use pretty_assertions::assert_eq;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn sample() -> Report {
        Report {
            run_id: "20261130T120000Z-42-abcd".into(),
            vertical: "demo".into(),
            task_id: "demo-1".into(),
            source: "demo".into(),
            subject: "MVP \"demo\"".into(),
            class: Some("primary".into()),
            tier: "mopac-primary".into(),
            model: "glm-5.2".into(),
            models_skipped: vec![SkippedModel {
                model: "glm-5.3".into(),
                reason: "model \"glm-5.3\" (from [models].mopac-primary) is unknown".into(),
            }],
            usage: Usage {
                prompt_tokens: 100,
                completion_tokens: 20,
                total_tokens: 120,
            },
            cost_usd: Some(0.00014),
            rounds: 2,
            max_rounds: 8,
            max_total_tokens: Some(5000),
            max_cost_usd: None,
            stop_reason: "completed".into(),
            error: None,
            finish: Some(FinishRecord {
                status: "done".into(),
                question: None,
            }),
            session: Some(crate::session::SessionInfo {
                key: "demo/demo/demo-1".into(),
                store: "local".into(),
                parent_run: Some("20261130T110000Z-41-abcd".into()),
                messages_loaded: 4,
                tokens_loaded: 120,
                rounds_dropped: 0,
                repaired: 0,
                fresh_reason: None,
            }),
            started: at("2026-11-30T12:00:00Z"),
            finished: at("2026-11-30T12:00:03.5Z"),
            backend: "replay cassette.json".into(),
            sandbox: "landlock (ABI 7)".into(),
            round_log: vec![RoundRecord {
                round: 1,
                model: "glm-5.2".into(),
                usage: Usage {
                    prompt_tokens: 50,
                    completion_tokens: 10,
                    total_tokens: 60,
                },
                cost_usd: Some(7e-5),
                latency_ms: 12,
                retries: 0,
                tools: vec![ToolEvent::Ran {
                    command: "ls".into(),
                    ending: crate::tools::bash::Ending::Exited(0),
                    output_bytes: 3,
                }],
            }],
            check: None,
            workspace: None,
            instructions: None,
            attachments: None,
            egress: None,
            result: None,
            workflow: None,
            forge: None,
            reply: Some("# Done\n\nAll good.".into()),
        }
    }

    #[test]
    fn the_egress_section_follows_the_reply_and_reaches_the_note() {
        let mut r = sample();
        r.egress =
            Some("## Egress\n\nRefused:\n- example.com:443: is not in the allowlist\n".into());
        let text = render(&r);
        let egress = text.find("## Egress").unwrap();
        assert!(text.find("All good.").unwrap() < egress, "{text}");
        let note = crate::writeback::render_note(&parse(&text).unwrap(), 100_000, None);
        assert!(
            note.contains("- example.com:443: is not in the allowlist"),
            "{note}"
        );
    }

    #[test]
    fn golden_report() {
        let version = env!("CARGO_PKG_VERSION");
        let expected = format!(
            r#"---
harness_report: 1
run_id: "20261130T120000Z-42-abcd"
vertical: "demo"
task_id: "demo-1"
source: "demo"
subject: "MVP \"demo\""
class: "primary"
tier: "mopac-primary"
model: "glm-5.2"
models_skipped: [{{"model":"glm-5.3","reason":"model \"glm-5.3\" (from [models].mopac-primary) is unknown"}}]
prompt_tokens: 100
completion_tokens: 20
total_tokens: 120
cost_usd: 0.00014
rounds: 2
max_rounds: 8
max_total_tokens: 5000
max_cost_usd: null
stop_reason: "completed"
error: null
finish: {{"status":"done","question":null}}
session: {{"key":"demo/demo/demo-1","store":"local","parent_run":"20261130T110000Z-41-abcd","messages_loaded":4,"tokens_loaded":120,"rounds_dropped":0,"repaired":0,"fresh_reason":null}}
started: "2026-11-30T12:00:00Z"
finished: "2026-11-30T12:00:03Z"
duration_ms: 3500
backend: "replay cassette.json"
sandbox: "landlock (ABI 7)"
harness_version: "{version}"
round_log: [{{"round":1,"model":"glm-5.2","usage":{{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}},"cost_usd":0.00007,"latency_ms":12,"retries":0,"tools":[{{"outcome":"ran","command":"ls","ending":"exit 0","output_bytes":3}}]}}]
---

# Done

All good.
"#
        );
        assert_eq!(render(&sample()), expected);
    }

    #[test]
    fn control_characters_of_the_reply_never_reach_the_report() {
        let mut r = sample();
        r.reply = Some("a\u{1b}]0;pwned\u{7}\u{1b}[2Jb\0c\r\nd\re\u{9b}f\tg\n".into());
        let text = render(&r);
        let body = parse(&text).unwrap().body;
        assert_eq!(
            body,
            "a\u{fffd}]0;pwned\u{fffd}\u{fffd}[2Jb\u{fffd}c\nd\u{fffd}e\u{fffd}f\tg\n"
        );
        assert_eq!(displayable("plain\ttext\n"), "plain\ttext\n");
    }

    #[test]
    fn failed_turn_without_text_says_so() {
        let mut r = sample();
        r.reply = None;
        r.stop_reason = "llm_error".into();
        r.error = Some("POST x failed".into());
        let out = render(&r);
        assert!(out.contains("error: \"POST x failed\"\n"), "{out}");
        assert!(out.ends_with(
            "_No reply: the turn ended (llm_error) before the model produced any text._\n"
        ));
    }

    #[test]
    fn file_names_are_safe() {
        assert_eq!(
            file_name("demo", "a/b c", at("2026-11-30T12:00:00Z")),
            "REPORT-demo-a_b_c-20261130T120000Z.md"
        );
    }

    #[test]
    fn writes_both_files_and_never_clobbers() {
        let dir = tempfile::tempdir().unwrap();
        prepare_dir(dir.path()).unwrap();
        let p1 = write_reports(dir.path(), &sample()).unwrap().path;
        let p2 = write_reports(dir.path(), &sample()).unwrap().path;
        assert_ne!(p1, p2);
        assert!(p2.to_string_lossy().ends_with("-2.md"));
        let latest = std::fs::read_to_string(dir.path().join("REPORT-latest.md")).unwrap();
        assert_eq!(latest, render(&sample()));
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with(TEMP_PREFIX)),
            "{names:?}"
        );
    }

    #[test]
    fn unwritable_dir_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = prepare_dir(&file.join("sub")).unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot create report dir"),
            "{e:#}"
        );
        // The message names the config key to fix.
        assert!(format!("{e:#}").contains("(report_dir)"), "{e:#}");
    }
}

/// A REPORT read back from disk: its front matter values and its body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    /// Front-matter values by key.
    pub fields: std::collections::BTreeMap<String, serde_json::Value>,
    /// Everything after the front matter.
    pub body: String,
}

impl Parsed {
    /// A string field, or `""`.
    pub(crate) fn str(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    }
}

/// The REPORT format version this harness writes and reads (`harness_report`).
pub(crate) const VERSION: u64 = 1;

/// Every `stop_reason` a REPORT may carry: one per way a turn ends.
pub(crate) const STOP_REASONS: &[&str] = &[
    "completed",
    "needs_input",
    "agent_failed",
    "max_rounds",
    "budget",
    "llm_error",
    "interrupted",
    "check_failed",
    "result_invalid",
    "next_stage",
    "stage_failed",
];

/// Parses a REPORT rendered by [`render`] (CRLF line ends and a leading byte-order mark
/// accepted, as an editor may save it) and checks its front matter: the version, the fields a write-back needs, each field's
/// type, a known stop reason; every problem at once. PURE.
pub(crate) fn parse(text: &str) -> Result<Parsed> {
    let text = text.trim_start_matches('\u{feff}').replace("\r\n", "\n");
    let rest = text
        .strip_prefix("---\n")
        .context("not a harness REPORT: no front matter")?;
    let (front, body) = rest
        .split_once("\n---\n")
        .context("not a harness REPORT: the front matter does not end")?;
    let mut fields = std::collections::BTreeMap::new();
    for line in front.lines() {
        let (k, v) = line
            .split_once(": ")
            .with_context(|| format!("not a harness REPORT: bad front-matter line {line:?}"))?;
        let value = serde_json::from_str(v)
            .with_context(|| format!("not a harness REPORT: {k} is not a JSON value"))?;
        fields.insert(k.to_string(), value);
    }
    if !fields.contains_key("harness_report") {
        anyhow::bail!("not a harness REPORT: no harness_report field");
    }
    let problems = front_matter_problems(&fields);
    if !problems.is_empty() {
        anyhow::bail!(
            "the REPORT's front matter is not valid:\n  {}",
            problems.join("\n  ")
        );
    }
    Ok(Parsed {
        fields,
        body: body.strip_prefix('\n').unwrap_or(body).to_string(),
    })
}

/// What is wrong with a REPORT's front matter, field by field (PURE).
fn front_matter_problems(
    fields: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Vec<String> {
    use serde_json::Value;
    #[derive(Clone, Copy)]
    enum Ty {
        Str,
        NonEmpty,
        OptStr,
        Count,
        OptCount,
        OptNum,
        List,
    }
    const REQUIRED: &[&str] = &["run_id", "task_id", "source", "stop_reason"];
    const FIELDS: &[(&str, Ty)] = &[
        ("run_id", Ty::NonEmpty),
        ("vertical", Ty::Str),
        ("task_id", Ty::NonEmpty),
        ("source", Ty::NonEmpty),
        ("subject", Ty::Str),
        ("class", Ty::OptStr),
        ("tier", Ty::Str),
        ("model", Ty::Str),
        ("models_skipped", Ty::List),
        ("prompt_tokens", Ty::Count),
        ("completion_tokens", Ty::Count),
        ("total_tokens", Ty::Count),
        ("cost_usd", Ty::OptNum),
        ("rounds", Ty::Count),
        ("max_rounds", Ty::Count),
        ("max_total_tokens", Ty::OptCount),
        ("max_cost_usd", Ty::OptNum),
        ("stop_reason", Ty::Str),
        ("error", Ty::OptStr),
        ("started", Ty::Str),
        ("finished", Ty::Str),
        ("duration_ms", Ty::Count),
        ("backend", Ty::Str),
        ("sandbox", Ty::Str),
        ("harness_version", Ty::Str),
        ("round_log", Ty::List),
    ];
    let mut problems = Vec::new();
    match fields.get("harness_report").and_then(Value::as_u64) {
        Some(VERSION) => {}
        _ => problems.push(format!(
            "harness_report: {} is not a REPORT version this harness reads ({VERSION})",
            fields["harness_report"]
        )),
    }
    for key in REQUIRED {
        if !fields.contains_key(*key) {
            problems.push(format!("{key}: missing"));
        }
    }
    for (key, ty) in FIELDS {
        let Some(v) = fields.get(*key) else { continue };
        let (ok, what) = match ty {
            Ty::Str => (v.is_string(), "a string"),
            Ty::NonEmpty => (
                v.as_str().is_some_and(|s| !s.is_empty()),
                "a non-empty string",
            ),
            Ty::OptStr => (v.is_string() || v.is_null(), "a string or null"),
            Ty::Count => (v.is_u64(), "a whole number, 0 or more"),
            Ty::OptCount => (v.is_u64() || v.is_null(), "a whole number or null"),
            Ty::OptNum => (v.is_number() || v.is_null(), "a number or null"),
            Ty::List => (v.is_array(), "a list"),
        };
        if !ok {
            problems.push(format!("{key}: must be {what}, not {v}"));
        }
    }
    if let Some(reason) = fields.get("stop_reason").and_then(Value::as_str) {
        if !STOP_REASONS.contains(&reason) {
            problems.push(format!(
                "stop_reason: {reason:?} is not one of {}",
                STOP_REASONS.join(", ")
            ));
        }
    }
    problems
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn a_rendered_report_parses_back() {
        let r = Report {
            run_id: "r1".into(),
            vertical: "v".into(),
            task_id: "12".into(),
            source: "redmine".into(),
            subject: "s: with colon".into(),
            class: None,
            tier: "t".into(),
            model: "m".into(),
            models_skipped: vec![],
            usage: Usage::default(),
            cost_usd: None,
            rounds: 1,
            max_rounds: 2,
            max_total_tokens: None,
            max_cost_usd: None,
            stop_reason: "completed".into(),
            error: None,
            finish: None,
            session: None,
            started: Utc::now(),
            finished: Utc::now(),
            backend: "b".into(),
            sandbox: "off".into(),
            round_log: vec![],
            check: None,
            workspace: None,
            instructions: None,
            attachments: None,
            egress: None,
            result: None,
            workflow: None,
            forge: None,
            reply: Some("hello\n---\nworld".into()),
        };
        let p = parse(&render(&r)).unwrap();
        assert_eq!(p.str("run_id"), "r1");
        assert_eq!(p.str("subject"), "s: with colon");
        assert_eq!(p.fields["class"], serde_json::Value::Null);
        assert_eq!(p.body, "hello\n---\nworld\n");
        assert!(parse("hello").is_err());
        // Saved by an editor with CRLF line ends: the same REPORT.
        let crlf = parse(&render(&r).replace('\n', "\r\n")).unwrap();
        assert_eq!(crlf, p);
        let bom = parse(&format!("\u{feff}{}", render(&r).replace('\n', "\r\n"))).unwrap();
        assert_eq!(bom, p);
    }

    #[test]
    fn the_forge_lines_are_rewritten_in_place_and_nothing_else() {
        let pending = ForgeRecord {
            state: "pending".into(),
            kind: "gitea".into(),
            repo: "o/r".into(),
            head: "harness/v-1".into(),
            base: "main".into(),
            draft: false,
            url: None,
            number: None,
            reason: None,
        };
        let text = "---\nharness_report: 1\nrun_id: \"r1\"\nforge: {}\npr_url: null\n---\n\nforge: body text\npr_url: too\n";
        let opened = ForgeRecord {
            state: "opened".into(),
            url: Some("http://127.0.0.1:1/o/r/pulls/2".into()),
            number: Some(2),
            ..pending
        };
        assert_eq!(
            with_forge(text, &opened),
            format!(
                "---\nharness_report: 1\nrun_id: \"r1\"\nforge: {}\npr_url: \"http://127.0.0.1:1/o/r/pulls/2\"\n---\n\nforge: body text\npr_url: too\n",
                json(&opened)
            )
        );
    }

    #[test]
    fn a_bad_front_matter_is_refused_with_every_problem() {
        let text = "---\nharness_report: 2\nrun_id: \"\"\nsource: \"redmine\"\nrounds: -1\ncost_usd: \"free\"\nstop_reason: \"done\"\n---\n\nbody\n";
        let e = parse(text).unwrap_err().to_string();
        assert_eq!(
            e,
            "the REPORT's front matter is not valid:
  harness_report: 2 is not a REPORT version this harness reads (1)
  task_id: missing
  run_id: must be a non-empty string, not \"\"
  cost_usd: must be a number or null, not \"free\"
  rounds: must be a whole number, 0 or more, not -1
  stop_reason: \"done\" is not one of completed, needs_input, agent_failed, max_rounds, budget, llm_error, interrupted, check_failed, result_invalid, next_stage, stage_failed"
        );
    }

    #[test]
    fn every_stop_reason_of_a_turn_is_known() {
        use crate::llm::{LlmError, LlmErrorKind};
        use crate::turn::{BudgetStop, TurnOutcome as T};
        let outcomes = [
            T::Completed,
            T::MaxRounds,
            T::Budget {
                stop: BudgetStop::Tokens { used: 1, limit: 1 },
            },
            T::LlmFailed {
                error: LlmError {
                    kind: LlmErrorKind::Rejected,
                    message: String::new(),
                },
            },
            T::Interrupted { signal: 15 },
            T::CheckFailed,
            T::NeedsInput,
            T::AgentFailed {
                status: crate::turn::finish::FinishStatus::Failed,
            },
            T::ResultInvalid { errors: Vec::new() },
            T::NextStage,
            T::StageFailed,
        ];
        for o in &outcomes {
            // Naming every variant: a new way to end a turn does not compile until it is
            // listed above, and then fails here until STOP_REASONS knows it.
            let reason = match o {
                T::Completed
                | T::MaxRounds
                | T::Budget { .. }
                | T::LlmFailed { .. }
                | T::Interrupted { .. }
                | T::CheckFailed
                | T::NeedsInput
                | T::AgentFailed { .. }
                | T::ResultInvalid { .. }
                | T::NextStage
                | T::StageFailed => o.stop_reason(),
            };
            assert!(STOP_REASONS.contains(&reason), "{reason}");
        }
        assert_eq!(outcomes.len(), STOP_REASONS.len());
    }
}
