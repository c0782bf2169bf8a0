//! `harness once`, from the turn on: the turn, the REPORT (written before the session
//! records the run: the order of commitments), the session saved, the path on stdout, the
//! cassette and the write-back (the inbox file settled, the Redmine note).

use std::path::Path;

use anyhow::{anyhow, Context};
use chrono::Utc;
use tracing::{error, info, warn};

use super::before::Ready;
use super::talk::{Talk, Talked};
use super::{stages, Ended, Env, Held};
use crate::config::Config;
use crate::events::Event;
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::intake::Task;
use crate::llm::Backend;
use crate::redmine::client::RedmineClient;
use crate::routing::Route;
use crate::secrets::Redactor;
use crate::session::Opened;
use crate::{attachments, intake, llm, report, session, tools, turn, workspace, writeback};

/// The turn, the REPORT, the session saved, the write-back.
pub(super) async fn turn_and_report(
    env: &Env<'_>,
    held: Held<'_>,
    ready: Ready,
    workspace: Option<workspace::Workspace>,
    redactor: &Redactor,
) -> Ended {
    let (cfg, taken, task) = (held.cfg, held.taken, &held.taken.task);
    let started = env.events.start_time();
    let Ready {
        mut backend,
        route,
        skipped,
        bash,
        limits,
    } = ready;
    // With [workspace], from the base commit: never what a model wrote in the worktree.
    let inputs = crate::inputs::gather(&cfg.work_root, &cfg.prompt, workspace.as_ref());
    let unborn = crate::inputs::unborn(&cfg.work_root, &cfg.prompt, workspace.is_some());
    let talk = Talk {
        cfg,
        route: &route,
        limits: &limits,
        bash: bash.as_ref(),
        interrupt: env.interrupt,
        events: env.events,
        instructions: &inputs.root,
        world: turn::rules::World::here(started.date_naive()),
        redactor,
        attached: held.attached,
    };
    let Talked {
        mut turn,
        system_hash,
        workflow,
    } = stages::converse(&talk, &mut backend, task, held.opened).await;
    let (workflow, mark) = workflow.unzip();
    if let Some(failure) = unreached(&turn.outcome, &backend, redactor) {
        return Ended::failed(failure);
    }
    let finished = Utc::now();
    turn.skipped.splice(0..0, skipped);
    attachments::place::remove(&cfg.work_root, &cfg.attachments.dir);
    let workspace = workspace.map(|ws| finish_workspace(cfg, task, started, env.run_id, ws));

    // report
    let backend_line = redactor.redact(&backend.describe());
    let run = RunInfo::new(env.run_id, (started, finished), backend_line, held.sandbox);
    let session_info = held.opened.map(|o| o.info.clone());
    let mut report = report_of(cfg, task, &route, &turn, run, session_info, redactor);
    with_branch(cfg, &mut report, workspace);
    report.max_rounds = stages::max_rounds(workflow.as_ref()).unwrap_or(report.max_rounds);
    report.workflow = workflow;
    report.instructions = instructions(inputs.record.clone(), unborn.set_aside(env.run_id));
    report.attachments = attachments::section(&held.attached.listed);
    report.egress = egress_section(cfg, bash.as_ref(), redactor);
    // The order of commitments (DESIGN.md): the patch (above) and the REPORT are durable
    // before the session records this run. A REPORT that cannot be written leaves the
    // session as it was and gives the claim back, so the task stays eligible and the next
    // run does it again, instead of finding "nothing new" and losing the answer.
    let written = match report::write_reports(&cfg.report_dir, &report) {
        Ok(written) => written,
        Err(e) => {
            return Ended::GiveBack {
                why: "the REPORT could not be written; the task stays eligible".to_string(),
                result: Err(unwritten(&report, e)),
            }
        }
    };
    if let Some(ended) = late_signal(&turn, &written) {
        return ended;
    }
    let extra = held.opened.and_then(|o| {
        let record = run_record(o, &report, &turn, &route, taken, system_hash, mark);
        save_session(cfg, o, record, &turn, redactor)
    });
    Ended::Spent(deliver(env, held, &report, &written, &turn, extra, redactor).await)
}

/// The worktree after the turn: committed, its patch saved beside the REPORT, pushed.
fn finish_workspace(
    cfg: &Config,
    task: &Task,
    started: chrono::DateTime<Utc>,
    run_id: &str,
    ws: workspace::Workspace,
) -> workspace::Record {
    let name = report::file_name(&cfg.vertical, &task.id, started);
    let patch = format!("{}.patch", name.trim_end_matches(".md"));
    ws.finish(&task.subject, run_id, &cfg.report_dir.join(patch))
}

/// The REPORT's `instructions:`: what the run read, and the next run's inputs the work
/// root did not have before it, set aside.
fn instructions(
    record: Option<crate::inputs::InstructionsRecord>,
    set_aside: Vec<String>,
) -> Option<crate::inputs::InstructionsRecord> {
    if set_aside.is_empty() {
        return record;
    }
    let mut record = record.unwrap_or_else(|| crate::inputs::InstructionsRecord {
        source: "work root".to_string(),
        agents_md: None,
        skills: Vec::new(),
        set_aside: Vec::new(),
    });
    record.set_aside = set_aside;
    Some(record)
}

/// The REPORT's **Egress** section with `network = "allowlist"`, masked.
fn egress_section(
    cfg: &Config,
    bash: Option<&tools::BashTool>,
    redactor: &Redactor,
) -> Option<String> {
    bash.zip(cfg.bash.egress.as_ref())
        .and_then(|(b, e)| Some(tools::egress::section(e, &b.egress.as_ref()?.log())))
        .map(|s| redactor.redact(&s))
}

/// A signal during the git steps after the turn (the turn itself ended on its own): the
/// REPORT is kept, the claim given back, the session left as it was; exit 128 + N.
fn late_signal(turn: &turn::Turn, written: &report::Written) -> Option<Ended> {
    let signal = crate::signals::arrived()
        .filter(|_| !matches!(turn.outcome, turn::TurnOutcome::Interrupted { .. }))?;
    let why = format!("interrupted by signal {signal} after the turn");
    let failure = Failure::new(
        Stage::Interrupted(signal),
        anyhow!(
            "{why}: the REPORT is on disk at {}; the task stays eligible",
            written.path.display()
        ),
    );
    Some(Ended::GiveBack {
        why,
        result: Err(failure),
    })
}

/// What the session records of this run.
fn run_record(
    opened: &Opened,
    report: &report::Report,
    turn: &turn::Turn,
    route: &Route,
    taken: &super::before::Taken,
    system_hash: String,
    mark: Option<crate::workflow::state::Mark>,
) -> session::file::RunRecord {
    session::file::RunRecord {
        run_id: report.run_id.clone(),
        parent_run_id: opened.info.parent_run.clone(),
        model: turn.model.clone(),
        tier: route.tier.clone(),
        stop_reason: turn.outcome.stop_reason().to_string(),
        outcome: turn.finish.as_ref().map(|f| f.status.as_str().to_string()),
        system_hash,
        seen_journal: taken
            .issue
            .as_ref()
            .and_then(|i| i.journals.iter().map(|j| j.id).max()),
        started: report.started,
        workflow: mark.map(Box::new),
    }
}

/// The REPORT is on disk: `report.written`, the `--output json` object's facts, and the path
/// on stdout (with `--output path`). A print that failed is returned, not raised: the
/// write-back still runs.
fn announce(
    env: &Env<'_>,
    report: &report::Report,
    path: &Path,
    turn: &turn::Turn,
) -> Result<(), Failure> {
    env.events.emit(Event::ReportWritten {
        path: path.display().to_string(),
        stop_reason: report.stop_reason.clone(),
        rounds: turn.rounds,
        total_tokens: turn.usage.total_tokens,
        cost_usd: turn.cost_usd,
    });
    env.events.delivered(crate::output::Delivered {
        stop_reason: report.stop_reason.clone(),
        report: path.display().to_string(),
        usage: turn.usage,
        cost_usd: turn.cost_usd,
        result: report.result.as_ref().and_then(|r| r.value.clone()),
        error: turn.outcome.failure_message(),
    });
    // Not printed is not delivered; the write-back still runs, the failure comes at the end.
    // With `--output json` the object goes out when the run's exit is known (lib).
    let printed = match env.args.output {
        crate::cli::Output::Json => Ok(()),
        crate::cli::Output::Path => env.events.result(&format!("{}\n", path.display()), None),
    };
    printed.map_err(|f| {
        Failure::new(
            f.stage,
            f.error
                .context(format!("the REPORT is on disk at {}", path.display())),
        )
    })
}

/// After the REPORT is on disk: its path on stdout, the cassette, the inbox file settled,
/// the Redmine write-back; the exit of the run.
pub(super) async fn deliver(
    env: &Env<'_>,
    held: Held<'_>,
    report: &report::Report,
    written: &report::Written,
    turn: &turn::Turn,
    extra: Option<writeback::Extra>,
    redactor: &Redactor,
) -> Result<Success, Failure> {
    let (cfg, task) = (held.cfg, &held.taken.task);
    let path = written.path.as_path();
    let printed = announce(env, report, path, turn);
    // The cassette comes after the REPORT, so a bad --record path cannot cost the REPORT.
    if let Some(cassette) = &env.args.record {
        llm::cassette::save(cassette, turn.recorded.clone(), redactor)
            .with_context(|| format!("the REPORT is on disk at {}", path.display()))
            .stage(Stage::Writeback)?;
        info!(
            "recorded {} replies to {}",
            turn.recorded.len(),
            cassette.display()
        );
    }

    // writeback
    if let Some(file) = &held.taken.inbox {
        let completed = matches!(turn.outcome, turn::TurnOutcome::Completed);
        let settled = if matches!(turn.outcome, turn::TurnOutcome::NextStage) {
            // A workflow with stages left: the file goes back for the next tick.
            intake::inbox::release(file).map(|()| file.dir.join(format!("{}.md", file.stem)))
        } else {
            intake::inbox::settle(file, completed, &written.text, env.run_id)
        };
        env.events.emit(Event::WritebackCompleted {
            target: "inbox".to_string(),
            task_id: task.id.clone(),
            ok: settled.is_ok(),
            error: settled.as_ref().err().map(|e| format!("{e:#}")),
        });
        let moved = settled
            .with_context(|| format!("the REPORT is on disk at {}", path.display()))
            .stage(Stage::Writeback)?;
        info!("inbox: task file moved to {}", moved.display());
    }
    // The pull request before the Redmine note, which links it; a pending one fails the
    // write-back here, and `harness writeback` does both.
    let written = &forge_step(env, cfg, written, &task.id).await?;
    // With both sources configured, only a Redmine task goes back to Redmine.
    let tracker = env
        .redmine
        .filter(|_| task.source == intake::Source::Redmine);
    let delivered = write_back(cfg, tracker, written, extra).await;
    if tracker.is_some() {
        env.events.emit(Event::WritebackCompleted {
            target: "redmine".to_string(),
            task_id: task.id.clone(),
            ok: delivered.is_ok(),
            error: delivered.as_ref().err().map(|f| format!("{:#}", f.error)),
        });
    }
    if let Some(err) = report.error.as_ref().filter(|_| turn.outcome.is_failure()) {
        error!("llm: {err}");
    }
    let ws_error = report.workspace.as_ref().and_then(|w| w.error.as_ref());
    if let (Err(_), Some(e)) = (&delivered, ws_error) {
        error!("workspace: {e}");
    }
    delivered?;
    if let Some(error) = ws_error {
        return Err(anyhow!(
            "workspace: {error}\nthe REPORT is on disk at {}",
            path.display()
        ))
        .stage(Stage::Writeback);
    }
    if let turn::TurnOutcome::AgentFailed { status } = &turn.outcome {
        warn!(
            "task not accomplished (finish: {}); REPORT and write-back done",
            status.as_str()
        );
    }
    match success_of(&turn.outcome) {
        Success::Done => printed.map(|()| Success::Done),
        other => Ok(other),
    }
}

/// Where the REPORT is and the command that finishes its write-back.
fn retry_hint(cfg: &Config, path: &Path) -> String {
    format!(
        "the REPORT is on disk at {}; retry the write-back with: harness writeback --config {} {}",
        path.display(),
        cfg.path.display(),
        path.display()
    )
}

/// The REPORT's `workspace:` and, with `[forge]`, its `forge:` before any forge call
/// (`pending` when a pull request is wanted: [`crate::forge::intent`]).
fn with_branch(cfg: &Config, report: &mut report::Report, ws: Option<workspace::Record>) {
    report.workspace = ws;
    report.forge = cfg
        .forge
        .as_ref()
        .and_then(|f| crate::forge::intent(f, &report.stop_reason, report.workspace.as_ref()));
}

/// The forge step of the written REPORT ([`crate::forge::write_back`]): the REPORT after it,
/// whose `pr_url` goes to `--output json` and `run.completed`; a failure says how to retry.
async fn forge_step(
    env: &Env<'_>,
    cfg: &Config,
    written: &report::Written,
    task_id: &str,
) -> Result<report::Written, Failure> {
    let path = written.path.clone();
    let Some(client) = env.forge else {
        return Ok(report::Written {
            path,
            text: written.text.clone(),
        });
    };
    let done = crate::forge::write_back(client, cfg, &path, &written.text).await;
    let pr_url = done
        .as_ref()
        .ok()
        .and_then(|t| report::parse(t).ok())
        .and_then(|p| p.fields.get("pr_url")?.as_str().map(str::to_string));
    if let Some(url) = &pr_url {
        env.events.pull_request(url);
    }
    if done.is_err() || pr_url.is_some() {
        env.events.emit(Event::WritebackCompleted {
            target: "forge".to_string(),
            task_id: task_id.to_string(),
            ok: done.is_ok(),
            error: done.as_ref().err().map(|e| format!("{e:#}")),
        });
    }
    let text = done
        .map_err(|e| anyhow!("{e:#}\n{}", retry_hint(cfg, &path)))
        .stage(Stage::Writeback)?;
    Ok(report::Written { path, text })
}

/// What the REPORT says about the run itself, beside the task and the turn.
pub(super) struct RunInfo {
    pub(super) run_id: String,
    pub(super) started: chrono::DateTime<Utc>,
    pub(super) finished: chrono::DateTime<Utc>,
    pub(super) backend: String,
    pub(super) sandbox: String,
}

impl RunInfo {
    /// The run `run_id`, its start and end, the reply source (masked) and the sandbox.
    fn new(
        run_id: &str,
        (started, finished): (chrono::DateTime<Utc>, chrono::DateTime<Utc>),
        backend: String,
        sandbox: crate::tools::sandbox::Status,
    ) -> RunInfo {
        RunInfo {
            run_id: run_id.to_string(),
            started,
            finished,
            backend,
            sandbox: sandbox.describe(),
        }
    }
}

/// The REPORT's `error:` for how the turn ended (masked), or none.
fn turn_error(turn: &turn::Turn, redactor: &Redactor) -> Option<String> {
    match &turn.outcome {
        turn::TurnOutcome::LlmFailed { error } => Some(redactor.redact(&error.message)),
        turn::TurnOutcome::Budget { stop } => Some(redactor.redact(&stop.describe())),
        turn::TurnOutcome::Interrupted { signal } => {
            Some(format!("interrupted by signal {signal}"))
        }
        turn::TurnOutcome::CheckFailed => turn.check.as_ref().map(|c| {
            format!(
                "the success check failed: {} of {} attempts, the last ended with {}",
                c.attempts, c.max_attempts, c.last_ending
            )
        }),
        turn::TurnOutcome::ResultInvalid { errors } => Some(format!(
            "the last round's `finish` result does not match [finish].result_schema ({} {}; see result_errors)",
            errors.len(),
            if errors.len() == 1 { "error" } else { "errors" }
        )),
        turn::TurnOutcome::Completed
        | turn::TurnOutcome::NeedsInput
        | turn::TurnOutcome::AgentFailed { .. }
        | turn::TurnOutcome::MaxRounds
        | turn::TurnOutcome::NextStage
        | turn::TurnOutcome::StageFailed => turn.noted_error.as_deref().map(|e| redactor.redact(e)),
    }
}

/// How much of each command (and each reason) the REPORT's round log quotes, in bytes.
pub(super) const REPORT_QUOTE_MAX: usize = 2048;

/// The REPORT of a finished turn, with every text that may hold a secret masked.
pub(super) fn report_of(
    cfg: &Config,
    task: &Task,
    route: &Route,
    turn: &turn::Turn,
    run: RunInfo,
    session: Option<session::SessionInfo>,
    redactor: &Redactor,
) -> report::Report {
    let error = turn_error(turn, redactor);
    report::Report {
        run_id: run.run_id,
        vertical: cfg.vertical.clone(),
        task_id: task.id.clone(),
        source: task.source.as_str().to_string(),
        subject: task.subject.clone(),
        class: route.class.clone(),
        tier: route.tier.clone(),
        model: turn.model.clone(),
        models_skipped: turn
            .skipped
            .iter()
            .map(|s| turn::SkippedModel {
                model: s.model.clone(),
                reason: redactor.redact(&s.reason),
            })
            .collect(),
        usage: turn.usage,
        cost_usd: turn.cost_usd,
        rounds: turn.rounds,
        max_rounds: cfg.max_rounds,
        max_total_tokens: cfg.budget.max_total_tokens,
        max_cost_usd: cfg.budget.max_cost_usd,
        stop_reason: turn.outcome.stop_reason().to_string(),
        error,
        finish: turn.finish.as_ref().map(|f| report::FinishRecord {
            status: f.status.as_str().to_string(),
            question: f.question.as_deref().map(|q| redactor.redact(q)),
        }),
        session,
        started: run.started,
        finished: run.finished,
        backend: run.backend,
        sandbox: run.sandbox,
        round_log: turn
            .log
            .iter()
            .map(|r| turn::RoundRecord {
                tools: r
                    .tools
                    .iter()
                    .map(|t| t.clipped(REPORT_QUOTE_MAX))
                    .collect(),
                ..r.clone()
            })
            .collect(),
        reply: turn.reply.as_deref().map(|r| redactor.redact(r)),
        check: turn.check.clone(),
        workspace: None,
        instructions: None,
        attachments: None,
        egress: None,
        result: cfg
            .result_schema
            .as_ref()
            .map(|_| result_record(turn, redactor)),
        forge: None,
        workflow: None,
    }
}

/// The REPORT's `result:`: the accepted result with every string masked (keys too: a key
/// is model text like any other), or the errors of a `result_invalid` turn, masked.
fn result_record(turn: &turn::Turn, redactor: &Redactor) -> report::ResultRecord {
    let errors = if let turn::TurnOutcome::ResultInvalid { errors } = &turn.outcome {
        errors.iter().map(|e| redactor.redact(e)).collect()
    } else {
        Vec::new()
    };
    let value = turn
        .finish
        .as_ref()
        .filter(|_| errors.is_empty())
        .and_then(|f| f.result.clone())
        .map(|mut v| {
            redactor.redact_json(&mut v);
            v
        });
    report::ResultRecord { value, errors }
}

/// A turn that failed without reaching any model (a refused connection, a failed TCP or TLS
/// handshake, a 404 that names no model: see [`llm::client::HttpClient::reached`]) is no
/// answer: no REPORT, no session, the claim given back, exit 4 with the error on stderr.
pub(super) fn unreached(
    outcome: &turn::TurnOutcome,
    backend: &Backend,
    redactor: &Redactor,
) -> Option<Failure> {
    let turn::TurnOutcome::LlmFailed { error } = outcome else {
        return None;
    };
    if backend.reached() {
        return None;
    }
    Some(Failure::new(
        Stage::Llm,
        anyhow!(
            "no model was reached: {}; no REPORT and no session written, the task stays eligible",
            redactor.redact(&error.message)
        ),
    ))
}

/// A REPORT that could not be written (a full disk): the tokens are spent, so its text, the
/// model's reply included, goes to stderr rather than being lost; the run fails (exit 1).
/// The session was not saved, so the next run works the task again.
pub(super) fn unwritten(report: &report::Report, e: anyhow::Error) -> Failure {
    error!(
        "the REPORT could not be written ({e:#}); here it is, the model's reply included:\n{}",
        report::render(report)
    );
    Failure::new(
        Stage::Writeback,
        e.context(
            "the REPORT could not be written; its text is on stderr above. The session does not record this run, so the task stays eligible: the next run works it again",
        ),
    )
}

/// Posts the written REPORT to its Redmine issue, when the task came from Redmine. A failure
/// says how to retry the write-back alone.
pub(super) async fn write_back(
    cfg: &Config,
    redmine: Option<&RedmineClient>,
    written: &report::Written,
    extra: Option<writeback::Extra>,
) -> Result<(), Failure> {
    let path = written.path.as_path();
    let (Some(client), Some(rm)) = (redmine, cfg.redmine.as_ref()) else {
        return Ok(());
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    writeback::write_back(client, rm, &written.text, &name, extra)
        .await
        .map_err(|e| anyhow!("{e:#}\n{}", retry_hint(cfg, path)))
        .stage(Stage::Writeback)
}

/// Saves the session with this run appended; returns the file to attach to the REPORT
/// note when the session lives on the issue and fits `[session].max_attachment_bytes`.
/// A session that cannot be saved costs the next run its history, not this run its REPORT.
pub(super) fn save_session(
    cfg: &Config,
    opened: &Opened,
    record: session::file::RunRecord,
    turn: &turn::Turn,
    redactor: &Redactor,
) -> Option<writeback::Extra> {
    let (task_id, run_id) = (opened.stored_task_id(), record.run_id.clone());
    let added = turn
        .messages
        .get(1 + opened.history.len()..)
        .unwrap_or_default();
    let bytes = match session::save(opened, record, added, redactor) {
        Ok(bytes) => bytes,
        Err(e) => {
            warn!("session {}: not saved: {e:#}", opened.info.key);
            return None;
        }
    };
    info!(
        "session {}: saved to {}",
        opened.info.key,
        opened.local.display()
    );
    let (name, bytes) = session::attachment(cfg, opened.place, &task_id, &run_id, bytes)?;
    Some(writeback::Extra {
        name,
        bytes,
        content_type: "application/gzip",
    })
}

/// The exit of a turn whose REPORT is written. A configured limit is a bounded, expected
/// stop like max_rounds; the proxy refusing for budget is a failure, since every later run
/// would be refused too.
pub(super) fn success_of(outcome: &turn::TurnOutcome) -> Success {
    if let turn::TurnOutcome::Interrupted { signal } = outcome {
        Success::Interrupted { signal: *signal }
    } else if let turn::TurnOutcome::AgentFailed { .. } = outcome {
        Success::NotAccomplished
    } else if outcome.is_failure() {
        Success::LlmFailedAfterReport
    } else if let turn::TurnOutcome::CheckFailed
    | turn::TurnOutcome::ResultInvalid { .. }
    | turn::TurnOutcome::StageFailed = outcome
    {
        Success::NotAccomplished
    } else {
        Success::Done
    }
}
