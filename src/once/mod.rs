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

use anyhow::anyhow;
use tracing::{error, info, warn};

use crate::cli::OnceArgs;
use crate::config::Config;
use crate::events::{Event, Events};
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::llm::Backend;
use crate::redmine::client::RedmineClient;
use crate::secrets::Redactor;
use crate::session::history::Opening;
use crate::session::Opened;
use crate::signals::Interrupt;
use crate::tools::sandbox;
use crate::tools::spawner::Spawner;
use crate::{config, intake, plan};

mod after;
mod before;
mod stages;
mod talk;

use after::turn_and_report;
pub(crate) use before::redmine_client;
use before::{
    open_session, ready_backend, ready_turn, release_claim, sandbox_status, take_task,
    with_workspace, Taken,
};

/// Runs `harness once`: the run's setup (no token, nothing claimed), intake, then the part
/// that holds the claim, whose end says what becomes of the claim ([`Ended`]).
pub(crate) async fn once(
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
        forge: setup.forge.as_ref(),
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
    forge: Option<crate::forge::client::ForgeClient>,
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
    // A dry run opens no pull request, so it needs no token.
    let forge = match args.dry_run {
        true => None,
        false => crate::preflight::forge_client(&cfg, redactor)
            .transpose()
            .stage(Stage::Config)?,
    };
    events.mask_with(redactor);
    Ok(Setup {
        cfg,
        replay,
        sandbox,
        backend,
        redmine,
        forge,
    })
}

/// What every stage after intake reads and nobody changes.
struct Env<'a> {
    args: &'a OnceArgs,
    interrupt: &'a Interrupt,
    events: &'a Events,
    spawner: &'a Spawner,
    redmine: Option<&'a RedmineClient>,
    /// The forge client, with `[forge]`.
    forge: Option<&'a crate::forge::client::ForgeClient>,
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
    /// A failure before the REPORT: the claim goes back, with the failure as why.
    fn failed(failure: Failure) -> Ended {
        Ended::GiveBack {
            why: format!("{:#}", failure.error),
            result: Err(failure),
        }
    }
}

/// The one place a claim ends: given back, set aside, or left to the write-back that spent
/// it. The note is public on the issue: every `why` is masked here, the one place.
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
    let began = match begin(env, &cfg, taken).await {
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
        Err(failure) => return Ended::failed(failure),
    };
    // the task's attachments, placed before the tools are prepared (their mounts name them)
    let attaching = before::attach(&cfg, taken, env.redmine, redactor);
    let attached = match unless_signalled(env.interrupt, attaching).await {
        Ok(attached) => attached,
        Err(failure) => return Ended::failed(failure),
    };
    let ready = unless_signalled(env.interrupt, async {
        let ready = ready_turn(&cfg, backend, &taken.route, sandbox, redactor, env.spawner).await?;
        checkpoint().await?;
        Ok(ready)
    });
    let ready = match ready.await {
        Ok(ready) => ready,
        Err(failure) => return Ended::failed(failure),
    };
    let held = Held {
        cfg: &cfg,
        taken,
        opened: began.as_ref(),
        sandbox,
        attached: &attached,
    };
    turn_and_report(env, held, ready, workspace, redactor).await
}

/// After the claim: the signal check, the task's narration and events, the session.
async fn begin(env: &Env<'_>, cfg: &Config, taken: &Taken) -> Result<Option<Opened>, Ended> {
    // A signal during the claim: the claim is given up, as after any pre-turn failure.
    if let Err(failure) = unless_signalled(env.interrupt, checkpoint()).await {
        return Err(Ended::failed(failure));
    }
    let task = &taken.task;
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
        workflow: taken.route.workflow.as_ref().map(|w| w.describe()),
    });
    // A signal while a session attachment downloads: honoured at once, the claim released.
    let opening = open_session(cfg, env.args, taken, env.redmine);
    unless_signalled(env.interrupt, opening)
        .await
        .map_err(Ended::failed)
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
        plan.sandbox = sandbox.plan_line_with_reads(&(&cfg.bash).into(), &cfg.work_root);
        // Whether commands can be kept from changing them (a probe: not the pure PLAN's).
        if let (Some(line), sandbox::Status::Landlock { .. }) = (&mut plan.attachments, sandbox) {
            line.push_str("; ");
            line.push_str(&sandbox::attachments_for_commands());
        }
    }
    plan.session = opened.as_ref().map(Opened::plan_line);
    plan.workflow = taken.route.workflow.as_ref().and_then(|c| {
        let flows = cfg.workflows.as_ref()?;
        let last = opened.as_ref().and_then(|o| {
            o.stored
                .runs
                .iter()
                .rev()
                .find_map(|r| r.workflow.as_deref())
        });
        Some(plan::workflow_line(
            flows,
            flows.named.get(&c.workflow)?,
            last,
        ))
    });
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
    /// The task's attachments, placed in the work root.
    attached: &'a crate::attachments::Attached,
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
