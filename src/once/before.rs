//! `harness once`, before the turn: the checks that cost no token (the sandbox, the reply
//! source, the Redmine client), intake and routing, the session, the worktree and the tools
//! made ready; and giving a claim back, which only [`super::settle_claim`] asks for.

use std::path::Path;

use anyhow::{anyhow, Context};
use tracing::{error, info, warn};

use super::{interrupted, Opened};
use crate::attachments::place::{self, Origin};
use crate::attachments::Attached;
use crate::cli::OnceArgs;
use crate::config::Config;
use crate::exit::{Failure, Stage, StageExt};
use crate::intake::source::{Claim, Want};
use crate::intake::{TakeError, Task};
use crate::llm::Backend;
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::Issue;
use crate::routing::Route;
use crate::secrets::Redactor;
use crate::signals::Interrupt;
use crate::tools::spawner::Spawner;
use crate::tools::{gate, sandbox, BashTool};
use crate::{intake, llm, preflight, redmine, session, tools, turn, workspace};

/// How this run's commands are confined; warns about escape-hatch allow rules. Fails (exit 1)
/// where `sandbox = "landlock"` cannot be had.
pub(super) fn sandbox_status(cfg: &Config) -> Result<sandbox::Status, Failure> {
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
pub(super) fn ready_backend(
    cfg: &Config,
    args: &OnceArgs,
    replay: Option<&Path>,
    redactor: &mut Redactor,
) -> Result<Backend, Failure> {
    preflight::first_failure(preflight::local(cfg, args.record.as_deref()))?;
    backend(cfg, replay, redactor).stage(Stage::Config)
}

/// Builds the reply source; resolves the key only for a live endpoint.
pub(super) fn backend(
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
    let key = preflight::key(
        key_ref,
        "litellm key",
        "[litellm].key_ref",
        &cfg.path,
        redactor,
    )?;
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
    preflight::redmine_client(cfg, rm, redactor)
        .map(Some)
        .stage(Stage::Config)
}

/// The task this run works on, routed, and the Redmine issue this run holds a claim on.
pub(super) struct Taken {
    pub(super) task: Task,
    pub(super) route: Route,
    pub(super) claimed: Option<u64>,
    /// The inbox file this run holds, when the task came from the inbox.
    pub(super) inbox: Option<intake::inbox::Claimed>,
    /// The issue as intake read it last (Redmine tasks): its journals say what is new.
    pub(super) issue: Option<Issue>,
}

/// Intake and routing: the one task of this run and its route, or `None` when nothing is in
/// scope. A Redmine issue is routed once, before it is claimed, so an unroutable issue is
/// never claimed.
pub(super) async fn take_task(
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
        let route = intake::route(cfg, &task).stage(Stage::Routing)?;
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
pub(super) struct Ready {
    pub(super) backend: Backend,
    /// The route, less the models the preflight found unserved.
    pub(super) route: Route,
    /// The models the preflight dropped, with why.
    pub(super) skipped: Vec<turn::SkippedModel>,
    pub(super) bash: Option<BashTool>,
    pub(super) limits: turn::Limits,
}

/// The checks between the claim and the turn: no-cost reads of the proxy (is the routed
/// model served, what does a token cost) and the bash tool's preparation.
pub(super) async fn ready_turn(
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
            .map(|b| match route.vision {
                true => b.with_images(cfg.attachments.max_bytes),
                false => b,
            })
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
            result: cfg.result_schema.clone(),
        },
    })
}

/// Fetches and places the task's attachments in the work root (an inbox task's
/// `<stem>.files/`, a Redmine issue's files); the images go to a vision tier only.
pub(super) async fn attach(
    cfg: &Config,
    taken: &Taken,
    redmine: Option<&RedmineClient>,
    redactor: &Redactor,
) -> Result<Attached, Failure> {
    let origin = match (&taken.inbox, &taken.issue, redmine) {
        (Some(file), _, _) => Origin::Inbox {
            inbox: file.dir.clone(),
            files: format!("{}.files", file.stem),
        },
        (None, Some(issue), Some(client)) => Origin::Redmine {
            client,
            issue,
            vertical: &cfg.vertical,
        },
        (None, _, _) => return Ok(Attached::default()),
    };
    let vision = match taken.route.vision {
        true => Ok(()),
        false => Err(format!(
            "tier {} is not a vision tier ([models.vision] tiers)",
            taken.route.tier
        )),
    };
    place::gather(origin, &cfg.attachments, &cfg.work_root, redactor, vision)
        .await
        .stage(Stage::Intake)
}

/// Opens the task's git worktree when `[workspace]` is set; the config comes back with the
/// worktree as its work root.
pub(super) fn with_workspace(
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
pub(super) async fn release_claim(
    redmine: Option<&RedmineClient>,
    taken: &Taken,
    run_id: &str,
    why: &str,
) {
    if let Some(file) = &taken.inbox {
        if let Err(e) = intake::inbox::release(file) {
            error!("could not give the inbox task {:?} back: {e:#}", file.stem);
        }
    }
    let (Some(client), Some(issue)) = (redmine, taken.claimed) else {
        return;
    };
    if let Err(e) = redmine::claim::release(client, issue, run_id, why, None).await {
        error!("could not release the claim on issue #{issue}: {e:#}");
    }
}

/// Opens the task's session (`None` when sessions are off). Only `--resume` with a run
/// the session does not have fails (an intake error, exit 2).
pub(super) async fn open_session(
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
pub(super) fn session_task(task: &Task) -> Task {
    let mut task = task.clone();
    if let Some(reply) = &task.reply {
        task.id = reply.session_id.clone();
    } else if task.source == intake::Source::Inbox {
        task.id = intake::reply::session_id(&task.id, &task.prompt);
    }
    task
}
