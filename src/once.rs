//! `harness once`, top to bottom: config -> intake -> routing -> session -> turn -> report
//! -> writeback.
//! Each stage returns a plain value that the next one takes; a failure carries the
//! [`Stage`] that decides the exit code. Orchestration only (it calls the stages' adapters);
//! the decisions live in the stages.
//!
//! Everything that can fail without the model fails before an issue is claimed and before
//! the first token ([`setup`]). The part of the run that holds the claim ([`holding`]) ends
//! in an [`Ended`] that says what becomes of the claim, and [`settle_claim`] is the one
//! place that acts on it: given back, set aside, or spent by the REPORT's write-back.

use std::path::Path;

use anyhow::{anyhow, Context};
use chrono::Utc;
use tracing::{error, info, warn};

use crate::cli::OnceArgs;
use crate::config::Config;
use crate::events::{Event, Events};
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::intake::source::{Claim, Want};
use crate::intake::TakeError;
use crate::intake::Task;
use crate::llm::Backend;
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::Issue;
use crate::routing::Route;
use crate::secrets::Redactor;
use crate::session::history::Opening;
use crate::session::Opened;
use crate::signals::Interrupt;
use crate::tools::spawner::Spawner;
use crate::tools::{gate, sandbox, BashTool};
use crate::{
    config, intake, llm, plan, preflight, prompt, redmine, report, routing, session, tools, turn,
    workspace, writeback,
};

/// Runs `harness once`: the run's setup (no token, nothing claimed), intake, then the part
/// that holds the claim, whose end says what becomes of the claim ([`Ended`]).
pub async fn once(
    args: OnceArgs,
    interrupt: &Interrupt,
    redactor: &mut Redactor,
    events: &Events,
    spawner: &Spawner,
) -> Result<Success, Failure> {
    let run_id = events.run_id();
    let setup = setup(&args, interrupt, redactor, events).await?;
    let redmine = setup.redmine.as_ref();
    let Some(taken) = take_task(&setup.cfg, &args, redmine, &run_id, interrupt).await? else {
        info!("intake: no tasks in scope; nothing to do");
        return Ok(Success::Done);
    };
    let env = Env {
        args: &args,
        interrupt,
        events,
        spawner,
        redmine,
        run_id: &run_id,
    };
    let (cfg, sandbox, backend, replay) = (setup.cfg, setup.sandbox, setup.backend, setup.replay);
    let ended = holding(&env, cfg, sandbox, backend, replay, &taken, redactor).await;
    settle_claim(redmine, &taken, &run_id, ended, redactor).await
}

/// What a run decided before intake: the config, how commands are confined, the reply
/// source (`None` for a dry run) and the Redmine client.
struct Setup {
    cfg: Config,
    replay: Option<std::path::PathBuf>,
    sandbox: sandbox::Status,
    backend: Option<Backend>,
    redmine: Option<RedmineClient>,
}

/// The config and everything a turn needs that costs no token, checked before anything is
/// claimed.
async fn setup(
    args: &OnceArgs,
    interrupt: &Interrupt,
    redactor: &mut Redactor,
    events: &Events,
) -> Result<Setup, Failure> {
    let mut cfg = unless_signalled(interrupt, async {
        config::load(args.config.clone(), redactor).stage(Stage::Config)
    })
    .await?;
    if let Some(cassette) = &args.record {
        // Commands must not read the conversation being recorded.
        cfg.bash
            .never_read
            .push(config::NeverRead::cassette(cassette));
    }
    events.metrics_to(cfg.metrics_textfile.as_deref(), &cfg.vertical);
    let replay = args.replay.clone().or_else(|| cfg.litellm.replay.clone());
    let sandbox = sandbox_status(&cfg)?;
    let backend = if args.dry_run {
        None
    } else {
        Some(unless_arrived(ready_backend(
            &cfg,
            args,
            replay.as_deref(),
            redactor,
        ))?)
    };
    let redmine = unless_arrived(redmine_client(&cfg, args, redactor))?;
    events.mask_with(redactor);
    Ok(Setup {
        cfg,
        replay,
        sandbox,
        backend,
        redmine,
    })
}

/// What every stage after intake reads and nobody changes.
struct Env<'a> {
    args: &'a OnceArgs,
    interrupt: &'a Interrupt,
    events: &'a Events,
    spawner: &'a Spawner,
    redmine: Option<&'a RedmineClient>,
    run_id: &'a str,
}

/// How the part of a run that holds a claim ended, and so what becomes of the claim.
enum Ended {
    /// The claim was spent: the REPORT (and its write-back) carries the task on.
    Spent(Result<Success, Failure>),
    /// The run ended before its REPORT counted (a failure before or right after the turn,
    /// a REPORT that could not be written, a late signal, nothing new): the claim is given
    /// back with `why`, so the task stays eligible.
    GiveBack {
        why: String,
        result: Result<Success, Failure>,
    },
    /// An inbox file whose exact text already ran to its end: put back, it would be claimed
    /// and put back forever, so it goes to `failed/` with `why`.
    SetAside { why: String },
}

impl Ended {
    /// A failure before the REPORT: the claim goes back, with the failure (masked) as why.
    fn failed(failure: Failure, redactor: &Redactor) -> Ended {
        Ended::GiveBack {
            why: redactor.redact(&format!("{:#}", failure.error)),
            result: Err(failure),
        }
    }
}

/// The one place a claim ends: given back, set aside, or left to the write-back that spent
/// it. The note is public on the issue: every `why` is masked before it gets here.
async fn settle_claim(
    redmine: Option<&RedmineClient>,
    taken: &Taken,
    run_id: &str,
    ended: Ended,
    redactor: &Redactor,
) -> Result<Success, Failure> {
    match ended {
        Ended::Spent(result) => result,
        Ended::GiveBack { why, result } => {
            release_claim(redmine, taken, run_id, &redactor.redact(&why)).await;
            result
        }
        Ended::SetAside { why } => {
            if let Some(file) = &taken.inbox {
                if let Err(e) = intake::inbox::set_aside(file, run_id, &why) {
                    error!("could not move the inbox task {:?} aside: {e:#}", file.stem);
                }
            }
            Ok(Success::Done)
        }
    }
}

/// The run while it holds the claim: session, worktree, turn, REPORT, write-back.
async fn holding(
    env: &Env<'_>,
    cfg: Config,
    sandbox: sandbox::Status,
    backend: Option<Backend>,
    replay: Option<std::path::PathBuf>,
    taken: &Taken,
    redactor: &mut Redactor,
) -> Ended {
    let began = match begin(env, &cfg, taken, redactor).await {
        Ok(opened) => opened,
        Err(ended) => return ended,
    };
    let Some(backend) = backend else {
        return Ended::Spent(dry_run(env, &cfg, taken, replay, sandbox, began, redactor));
    };
    if let Some(Opening::NothingNew {
        run_id: last,
        stop_reason,
    }) = began.as_ref().map(|o| &o.opening)
    {
        return nothing_new(env, taken, last, stop_reason);
    }
    // the task's git worktree, which becomes the work root
    let (cfg, workspace) = match unless_arrived(with_workspace(cfg, &taken.task)) {
        Ok(opened) => opened,
        Err(failure) => return Ended::failed(failure, redactor),
    };
    let ready = unless_signalled(env.interrupt, async {
        let ready = ready_turn(&cfg, backend, &taken.route, sandbox, redactor, env.spawner).await?;
        checkpoint().await?;
        Ok(ready)
    });
    let ready = match ready.await {
        Ok(ready) => ready,
        Err(failure) => return Ended::failed(failure, redactor),
    };
    let held = Held {
        cfg: &cfg,
        taken,
        opened: began.as_ref(),
        sandbox,
    };
    turn_and_report(env, held, ready, workspace, redactor).await
}

/// After the claim: the signal check, the task's narration and events, the session.
async fn begin(
    env: &Env<'_>,
    cfg: &Config,
    taken: &Taken,
    redactor: &Redactor,
) -> Result<Option<Opened>, Ended> {
    // A signal during the claim: the claim is given up, as after any pre-turn failure.
    if let Err(failure) = unless_signalled(env.interrupt, checkpoint()).await {
        return Err(Ended::failed(failure, redactor));
    }
    let task = &taken.task;
    info!(
        "task {} ({}): {:?} {}",
        task.id,
        task.source.as_str(),
        task.subject,
        route_line(&taken.route)
    );
    env.events.emit(Event::TaskTaken {
        task_id: task.id.clone(),
        source: task.source.as_str().to_string(),
        subject: task.subject.clone(),
        class: task.class.clone(),
    });
    env.events.emit(Event::Route {
        class: taken.route.class.clone(),
        tier: taken.route.tier.clone(),
        models: taken.route.models.clone(),
    });
    // A signal while a session attachment downloads: honoured at once, the claim released.
    let opening = open_session(cfg, env.args, taken, env.redmine);
    unless_signalled(env.interrupt, opening)
        .await
        .map_err(|failure| Ended::failed(failure, redactor))
}

/// `--dry-run`: the PLAN on stdout, no model call, nothing claimed.
fn dry_run(
    env: &Env<'_>,
    cfg: &Config,
    taken: &Taken,
    replay: Option<std::path::PathBuf>,
    sandbox: sandbox::Status,
    opened: Option<Opened>,
    redactor: &Redactor,
) -> Result<Success, Failure> {
    let mut plan = plan::plan(cfg, &taken.task, &taken.route, replay.as_deref(), sandbox);
    if cfg.bash.enabled {
        plan.sandbox = sandbox.plan_line_with_reads(&cfg.bash, &cfg.work_root);
    }
    plan.session = opened.as_ref().map(Opened::plan_line);
    let text = redactor.redact(&plan::render(&plan));
    env.events
        .result(&text, Some(Event::Plan { text: text.clone() }))?;
    info!("dry-run complete, no LLM call made");
    Ok(Success::Done)
}

/// A finished session with nothing new on its task: no model call; an inbox file is set
/// aside (its exact text already ran), a Redmine claim given back.
fn nothing_new(env: &Env<'_>, taken: &Taken, last: &str, stop_reason: &str) -> Ended {
    let why = format!("nothing new on the task since run {last} ({stop_reason}); no model call");
    info!("session: {why}");
    if let Some(cassette) = &env.args.record {
        warn!(
            "--record: nothing recorded to {}: no model call was made (the task's session is finished; add --fresh to record a new conversation)",
            cassette.display()
        );
    }
    match &taken.inbox {
        Some(_) => Ended::SetAside {
            why: format!(
                "{why}: this exact task text already ran; drop it again with new text (a new task) to run it"
            ),
        },
        None => Ended::GiveBack {
            why,
            result: Ok(Success::Done),
        },
    }
}

/// What the turn and the REPORT read about the claimed task.
#[derive(Clone, Copy)]
struct Held<'a> {
    cfg: &'a Config,
    taken: &'a Taken,
    opened: Option<&'a Opened>,
    sandbox: sandbox::Status,
}

/// The turn, the REPORT, the session saved, the write-back.
async fn turn_and_report(
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
    let world = turn::rules::World::here(started.date_naive());
    let system = turn::system_prompt(
        &cfg.vertical,
        cfg.max_rounds,
        bash.as_ref(),
        cfg.finish,
        world,
    );
    // With [workspace], from the base commit: never what a model wrote in the worktree.
    let inputs = crate::inputs::gather(&cfg.work_root, &cfg.prompt, workspace.as_ref());
    let unborn = crate::inputs::unborn(&cfg.work_root, &cfg.prompt, workspace.is_some());
    let system = prompt::with_project_instructions(system, &inputs.root, &cfg.prompt, redactor);
    let system = prompt::with_skills(system, &inputs.root, &cfg.prompt, redactor);
    let system = turn::check::with_note(system, limits.check.as_ref());
    let system_hash = session::history::fingerprint(&system);
    let start = session::start(held.opened, system, &task.prompt);
    let mut turn = turn::run(
        start,
        &route,
        &limits,
        &mut backend,
        bash.as_ref(),
        env.interrupt,
        env.events,
    )
    .await;
    if let Some(failure) = unreached(&turn.outcome, &backend, redactor) {
        return Ended::failed(failure, redactor);
    }
    let finished = Utc::now();
    turn.skipped.splice(0..0, skipped);
    let workspace = workspace.map(|ws| {
        let name = report::file_name(&cfg.vertical, &task.id, started);
        let patch = format!("{}.patch", name.trim_end_matches(".md"));
        ws.finish(&task.subject, env.run_id, &cfg.report_dir.join(patch))
    });

    // report
    let run = RunInfo {
        run_id: env.run_id.to_string(),
        started,
        finished,
        backend: redactor.redact(&backend.describe()),
        sandbox: held.sandbox.describe(),
    };
    let session_info = held.opened.map(|o| o.info.clone());
    let mut report = report_of(cfg, task, &route, &turn, run, session_info, redactor);
    report.workspace = workspace;
    report.instructions = inputs.record.clone();
    let set_aside = unborn.set_aside(env.run_id);
    if !set_aside.is_empty() {
        let record = report
            .instructions
            .get_or_insert_with(|| crate::inputs::InstructionsRecord {
                source: "work root".to_string(),
                agents_md: None,
                skills: Vec::new(),
                set_aside: Vec::new(),
            });
        record.set_aside = set_aside;
    }
    report.egress = bash
        .as_ref()
        .zip(cfg.bash.egress.as_ref())
        .and_then(|(b, e)| Some(tools::egress::section(e, &b.egress.as_ref()?.log())))
        .map(|s| redactor.redact(&s));
    // The order of commitments (DESIGN.md): the patch (above) and the REPORT are durable
    // before the session records this run. A REPORT that cannot be written leaves the
    // session as it was and gives the claim back, so the task stays eligible and the next
    // run does it again, instead of finding "nothing new" and losing the answer.
    let path = match report::write_reports(&cfg.report_dir, &report) {
        Ok(path) => path,
        Err(e) => {
            return Ended::GiveBack {
                why: "the REPORT could not be written; the task stays eligible".to_string(),
                result: Err(unwritten(&report, e)),
            }
        }
    };
    // A signal during the git steps after the turn (the turn itself ended on its own): the
    // REPORT is kept, the claim given back, the session left as it was; exit 128 + N.
    let late = crate::signals::arrived()
        .filter(|_| !matches!(turn.outcome, turn::TurnOutcome::Interrupted { .. }));
    if let Some(signal) = late {
        let why = format!("interrupted by signal {signal} after the turn");
        let failure = Failure::new(
            Stage::Interrupted(signal),
            anyhow!(
                "{why}: the REPORT is on disk at {}; the task stays eligible",
                path.display()
            ),
        );
        return Ended::GiveBack {
            why,
            result: Err(failure),
        };
    }
    let extra = held.opened.and_then(|o| {
        let record = session::file::RunRecord {
            run_id: report.run_id.clone(),
            parent_run_id: o.info.parent_run.clone(),
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
        };
        save_session(cfg, o, record, &turn, redactor)
    });
    Ended::Spent(deliver(env, held, &report, &path, &turn, extra, redactor).await)
}

/// After the REPORT is on disk: its path on stdout, the cassette, the inbox file settled,
/// the Redmine write-back; the exit of the run.
async fn deliver(
    env: &Env<'_>,
    held: Held<'_>,
    report: &report::Report,
    path: &Path,
    turn: &turn::Turn,
    extra: Option<writeback::Extra>,
    redactor: &Redactor,
) -> Result<Success, Failure> {
    let (cfg, task) = (held.cfg, &held.taken.task);
    info!(
        "REPORT written: {} (stop reason {}, {} rounds, {} tokens)",
        path.display(),
        report.stop_reason,
        turn.rounds,
        turn.usage.total_tokens
    );
    env.events.emit(Event::ReportWritten {
        path: path.display().to_string(),
        stop_reason: report.stop_reason.clone(),
        rounds: turn.rounds,
        total_tokens: turn.usage.total_tokens,
        cost_usd: turn.cost_usd,
    });
    // Not printed is not delivered; the write-back still runs, the failure comes at the end.
    let printed = env
        .events
        .result(&format!("{}\n", path.display()), None)
        .map_err(|f| {
            Failure::new(
                f.stage,
                f.error
                    .context(format!("the REPORT is on disk at {}", path.display())),
            )
        });
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
        let settled = intake::inbox::settle(file, completed, &report::render(report), env.run_id);
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
    // With both sources configured, only a Redmine task goes back to Redmine.
    let tracker = env
        .redmine
        .filter(|_| task.source == intake::Source::Redmine);
    let delivered = write_back(cfg, tracker, report, path, extra).await;
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

/// Runs a stage before the turn unless a signal comes first (received before it or while it
/// runs): then the run stops with 128 + the signal, before any token and any REPORT.
async fn unless_signalled<T>(
    interrupt: &Interrupt,
    stage: impl std::future::Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    interrupt
        .or_signal(stage)
        .await
        .unwrap_or_else(|signal| Err(interrupted(signal)))
}

/// The result of a synchronous stage before the turn, unless a signal arrived while it ran:
/// such a stage (resolving a `cmd:` key ref runs a program) holds the runtime's one thread,
/// so [`unless_signalled`] could not see the signal; the low-level flag can, and the key
/// program was stopped at once.
fn unless_arrived<T>(out: Result<T, Failure>) -> Result<T, Failure> {
    match crate::signals::arrived() {
        Some(signal) => Err(interrupted(signal)),
        None => out,
    }
}

/// Lets a signal that reached the process be seen (the handler is a task on this thread)
/// before the next stage starts; a stage for [`unless_signalled`].
async fn checkpoint() -> Result<(), Failure> {
    tokio::task::yield_now().await;
    Ok(())
}

/// The failure of a run stopped by `signal` before its turn.
fn interrupted(signal: i32) -> Failure {
    Failure::new(
        Stage::Interrupted(signal),
        anyhow!("interrupted by signal {signal} before the turn: no token spent, no REPORT written, no claim kept"),
    )
}

/// How this run's commands are confined; warns about escape-hatch allow rules. Fails (exit 1)
/// where `sandbox = "landlock"` cannot be had.
fn sandbox_status(cfg: &Config) -> Result<sandbox::Status, Failure> {
    if !cfg.bash.enabled {
        return Ok(sandbox::Status::Off);
    }
    for w in gate::lint(&cfg.bash.policy) {
        warn!("[tools.bash]: {w}");
    }
    sandbox::decide(cfg.bash.sandbox, sandbox::kernel_abi(), cfg.bash.network)
        .with_context(|| format!("config {}", cfg.path.display()))
        .stage(Stage::Config)
}

/// Checks everything a turn needs that costs no token (the [`preflight`] list that
/// `harness check` shows too), then builds the reply source.
fn ready_backend(
    cfg: &Config,
    args: &OnceArgs,
    replay: Option<&Path>,
    redactor: &mut Redactor,
) -> Result<Backend, Failure> {
    preflight::first_failure(preflight::local(cfg, args.record.as_deref()))?;
    backend(cfg, replay, redactor).stage(Stage::Config)
}

/// Builds the reply source; resolves the key only for a live endpoint.
fn backend(
    cfg: &Config,
    replay: Option<&Path>,
    redactor: &mut Redactor,
) -> anyhow::Result<Backend> {
    if let Some(path) = replay {
        return Ok(Backend::Replay(llm::cassette::Replayer::load(path)?));
    }
    let (Some(url), Some(key_ref)) = (&cfg.litellm.base_url, &cfg.litellm.key_ref) else {
        return Err(anyhow!(
            "[litellm] needs base_url and key_ref (or replay) in {}",
            cfg.path.display()
        ));
    };
    let key = preflight::key(key_ref, "litellm key", "[litellm].key_ref", redactor)?;
    let options = llm::client::ClientOptions::new(&cfg.litellm, key_ref);
    Ok(Backend::Http(llm::client::HttpClient::new(
        url,
        key,
        options,
        redactor.clone(),
    )?))
}

/// The Redmine client for a run that takes its task from Redmine (not `--demo`).
pub(crate) fn redmine_client(
    cfg: &Config,
    args: &OnceArgs,
    redactor: &mut Redactor,
) -> Result<Option<RedmineClient>, Failure> {
    if args.demo {
        return Ok(None);
    }
    let Some(rm) = &cfg.redmine else {
        if cfg.inbox.is_some() {
            return Ok(None);
        }
        return Err(anyhow!(
            "config {} has no [redmine] section and no [inbox]: configure a task source, or pass --demo to run the [demo] issue",
            cfg.path.display()
        ))
        .stage(Stage::Config);
    };
    let key = preflight::key(&rm.key_ref, "redmine key", "[redmine].key_ref", redactor)
        .stage(Stage::Config)?;
    RedmineClient::new(rm, key, redactor.clone())
        .map(Some)
        .stage(Stage::Config)
}

/// The task this run works on, routed, and the Redmine issue this run holds a claim on.
struct Taken {
    task: Task,
    route: Route,
    claimed: Option<u64>,
    /// The inbox file this run holds, when the task came from the inbox.
    inbox: Option<intake::inbox::Claimed>,
    /// The issue as intake read it last (Redmine tasks): its journals say what is new.
    issue: Option<Issue>,
}

/// Intake and routing: the one task of this run and its route, or `None` when nothing is in
/// scope. A Redmine issue is routed once, before it is claimed, so an unroutable issue is
/// never claimed.
async fn take_task(
    cfg: &Config,
    args: &OnceArgs,
    redmine: Option<&RedmineClient>,
    run_id: &str,
    interrupt: &Interrupt,
) -> Result<Option<Taken>, Failure> {
    if args.demo {
        info!("intake: demo issue from {} [demo]", cfg.path.display());
        let task = intake::demo::task(&cfg.demo);
        if let Some(id) = &args.task_id {
            if *id != task.id {
                return Err(anyhow!(
                    "--task-id {id} does not match the demo issue, whose id is {}",
                    task.id
                ))
                .stage(Stage::Intake);
            }
        }
        let route = routing::route(&cfg.models, task.class.as_deref())
            .map_err(|e| anyhow!("routing task {}: {e}", task.id))
            .stage(Stage::Routing)?;
        return Ok(Some(Taken {
            task,
            route,
            claimed: None,
            inbox: None,
            issue: None,
        }));
    }
    let route = |task: &Task| intake::route(cfg, task);
    let want = Want {
        interrupt,
        run_id,
        task_id: args.task_id.as_deref(),
        force: args.force,
        claim: !args.dry_run,
        lock_dir: &cfg.report_dir,
    };
    for source in intake::sources(cfg, redmine) {
        match source.take(&want, &route).await {
            Ok(Some(picked)) => {
                let (claimed, inbox) = match picked.claim {
                    Some(Claim::Redmine(id)) => (Some(id), None),
                    Some(Claim::Inbox(file)) => (None, Some(file)),
                    None => (None, None),
                };
                return Ok(Some(Taken {
                    task: picked.task,
                    route: picked.route,
                    claimed,
                    inbox,
                    issue: picked.issue,
                }));
            }
            Ok(None) => continue,
            Err(TakeError::Routing(e)) => return Err(e).stage(Stage::Routing),
            Err(TakeError::Intake(e)) => return Err(e).stage(Stage::Intake),
            Err(TakeError::Interrupted(signal)) => return Err(interrupted(signal)),
        }
    }
    Ok(None)
}

/// What the turn runs with, once every no-cost check passed.
struct Ready {
    backend: Backend,
    /// The route, less the models the preflight found unserved.
    route: Route,
    /// The models the preflight dropped, with why.
    skipped: Vec<turn::SkippedModel>,
    bash: Option<BashTool>,
    limits: turn::Limits,
}

/// The checks between the claim and the turn: no-cost reads of the proxy (is the routed
/// model served, what does a token cost) and the bash tool's preparation.
async fn ready_turn(
    cfg: &Config,
    backend: Backend,
    route: &Route,
    sandbox: sandbox::Status,
    redactor: &Redactor,
    spawner: &Spawner,
) -> Result<Ready, Failure> {
    let (route, skipped) = match &backend {
        Backend::Http(client) if cfg.litellm.preflight => {
            llm::preflight::route(client, route).await?
        }
        Backend::Http(_) | Backend::Replay(_) => (route.clone(), Vec::new()),
    };
    let prices = llm::preflight::prices(&cfg.prices, &backend).await;
    let bash = cfg
        .bash
        .enabled
        .then(|| {
            BashTool::prepare(
                cfg.bash.clone(),
                cfg.work_root.clone(),
                tools::bash::scrubbed_env(std::env::vars()),
                sandbox,
                redactor.clone(),
                spawner.clone(),
            )
            .and_then(|b| b.with_files(&cfg.files))
        })
        .transpose()
        .stage(Stage::Config)?;
    if bash.is_some() {
        info!("sandbox: {}", sandbox.plan_line(cfg.bash.write_roots.len()));
    }
    info!(
        "turn: {} (max {} rounds)",
        backend.describe(),
        cfg.max_rounds
    );
    let check = cfg.check.for_class(route.class.as_deref()).cloned();
    Ok(Ready {
        backend,
        route,
        skipped,
        bash,
        limits: turn::Limits {
            max_rounds: cfg.max_rounds,
            max_tool_calls: cfg.max_tool_calls,
            budget: cfg.budget,
            prices,
            check,
            finish: cfg.finish,
        },
    })
}

/// Opens the task's git worktree when `[workspace]` is set; the config comes back with the
/// worktree as its work root.
fn with_workspace(
    mut cfg: Config,
    task: &Task,
) -> Result<(Config, Option<workspace::Workspace>), Failure> {
    let Some(ws_cfg) = &cfg.workspace else {
        return Ok((cfg, None));
    };
    let ws = workspace::open(ws_cfg, &cfg.work_root, &cfg.vertical, &task.id)
        .with_context(|| format!("[workspace] in {}", cfg.path.display()))
        .stage(Stage::Config)?;
    cfg.work_root = ws.path.clone();
    // The commands' git reads the repository through the worktree's `.git` file; the git
    // dir lies outside every write root (unless the operator named one), so it stays
    // read-only for them.
    cfg.bash.read_roots.push(crate::config::ReadRoot::GitDir(
        ws.common_dir().to_path_buf(),
    ));
    Ok((cfg, Some(ws)))
}

/// Gives up this run's claim when it ends between the claim and the turn (a failure, or
/// nothing new to work on), so other workers may take the issue. The one place `once`
/// releases a claim. The note is public on the issue: `why` must already be masked.
async fn release_claim(redmine: Option<&RedmineClient>, taken: &Taken, run_id: &str, why: &str) {
    if let Some(file) = &taken.inbox {
        if let Err(e) = intake::inbox::release(file) {
            error!("could not give the inbox task {:?} back: {e:#}", file.stem);
        }
    }
    let (Some(client), Some(issue)) = (redmine, taken.claimed) else {
        return;
    };
    if let Err(e) = redmine::claim::release(client, issue, run_id, why).await {
        error!("could not release the claim on issue #{issue}: {e:#}");
    }
}

/// What the REPORT says about the run itself, beside the task and the turn.
struct RunInfo {
    run_id: String,
    started: chrono::DateTime<Utc>,
    finished: chrono::DateTime<Utc>,
    backend: String,
    sandbox: String,
}

/// How much of each command (and each reason) the REPORT's round log quotes, in bytes.
const REPORT_QUOTE_MAX: usize = 2048;

/// The REPORT of a finished turn, with every text that may hold a secret masked.
fn report_of(
    cfg: &Config,
    task: &Task,
    route: &Route,
    turn: &turn::Turn,
    run: RunInfo,
    session: Option<session::SessionInfo>,
    redactor: &Redactor,
) -> report::Report {
    let error = match &turn.outcome {
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
        turn::TurnOutcome::Completed
        | turn::TurnOutcome::NeedsInput
        | turn::TurnOutcome::AgentFailed { .. }
        | turn::TurnOutcome::MaxRounds => turn.noted_error.as_deref().map(|e| redactor.redact(e)),
    };
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
        egress: None,
    }
}

/// A turn that failed without reaching any model (a refused connection, a failed TCP or TLS
/// handshake, a 404 that names no model: see [`llm::client::HttpClient::reached`]) is no
/// answer: no REPORT, no session, the claim given back, exit 4 with the error on stderr.
fn unreached(
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
fn unwritten(report: &report::Report, e: anyhow::Error) -> Failure {
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
async fn write_back(
    cfg: &Config,
    redmine: Option<&RedmineClient>,
    report: &report::Report,
    path: &Path,
    extra: Option<writeback::Extra>,
) -> Result<(), Failure> {
    let (Some(client), Some(rm)) = (redmine, cfg.redmine.as_ref()) else {
        return Ok(());
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    writeback::write_back(client, rm, &report::render(report), &name, extra)
        .await
        .map_err(|e| {
            anyhow!(
                "{e:#}\nthe REPORT is on disk at {}; retry the write-back with: harness writeback --config {} {}",
                path.display(),
                cfg.path.display(),
                path.display()
            )
        })
        .stage(Stage::Writeback)
}

/// Opens the task's session (`None` when sessions are off). Only `--resume` with a run
/// the session does not have fails (an intake error, exit 2).
async fn open_session(
    cfg: &Config,
    args: &OnceArgs,
    taken: &Taken,
    redmine: Option<&RedmineClient>,
) -> Result<Option<Opened>, Failure> {
    let issue = taken.issue.as_ref();
    let task = session_task(&taken.task);
    let reply = taken.task.reply.as_ref().map(|r| r.news.clone());
    let news = |since: Option<u64>, known: &[String]| {
        reply
            .clone()
            .or_else(|| issue.and_then(|i| intake::redmine::news(i, since, known)))
    };
    let want = session::Want {
        task: &task,
        issue,
        fresh: args.fresh,
        resume: args.resume.as_deref(),
        news: &news,
    };
    session::open(cfg, want, redmine).await.stage(Stage::Intake)
}

/// The task as its session knows it: an inbox task's identity holds its text's hash, so a
/// file dropped again under an old name with new text is a new task (a fresh session), not
/// "nothing new" on the old one; a reply file continues the session of the text it answers.
/// PURE.
fn session_task(task: &Task) -> Task {
    let mut task = task.clone();
    if let Some(reply) = &task.reply {
        task.id = reply.session_id.clone();
    } else if task.source == intake::Source::Inbox {
        task.id = intake::reply::session_id(&task.id, &task.prompt);
    }
    task
}

/// Saves the session with this run appended; returns the file to attach to the REPORT
/// note when the session lives on the issue and fits `[session].max_attachment_bytes`.
/// A session that cannot be saved costs the next run its history, not this run its REPORT.
fn save_session(
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
fn success_of(outcome: &turn::TurnOutcome) -> Success {
    if let turn::TurnOutcome::Interrupted { signal } = outcome {
        Success::Interrupted { signal: *signal }
    } else if let turn::TurnOutcome::AgentFailed { .. } = outcome {
        Success::NotAccomplished
    } else if outcome.is_failure() {
        Success::LlmFailedAfterReport
    } else if let turn::TurnOutcome::CheckFailed = outcome {
        Success::NotAccomplished
    } else {
        Success::Done
    }
}

fn route_line(route: &Route) -> String {
    let class = route.class.as_deref().unwrap_or("(none)");
    format!(
        "class={class} -> {} -> {}",
        route.tier,
        route.models.join(" | ")
    )
}
