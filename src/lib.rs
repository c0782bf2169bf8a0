//! `harness`: runs ONE bounded turn of an LLM agent per invocation.
//!
//! [`run`] reads top to bottom as the data flow: config -> intake -> routing -> turn ->
//! writeback. Each stage returns a plain value the next one takes; failures carry the
//! [`exit::Stage`] that decides the exit code.

#![deny(clippy::print_stdout)]

pub mod check;
pub mod cli;
pub mod config;
pub mod exit;
pub mod intake;
pub mod llm;
pub mod report;
pub mod routing;
pub mod secrets;
pub mod signals;
pub mod tools;
pub mod turn;
pub mod writeback;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context};
use chrono::Utc;
use tracing::{error, info, warn};

use cli::{Command, GateArgs, OnceArgs};
use config::Config;
use exit::{Failure, Stage, StageExt, Success};
use intake::Task;
use llm::Backend;
use secrets::Redactor;
use signals::Interrupt;
use tools::gate;

/// Writes a result to stdout: the one place the crate prints there.
#[allow(clippy::print_stdout)]
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed stdout (a pipe to `head`) must not turn a finished run into a failure.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Runs one parsed command line. Errors are already free of secrets.
pub async fn run(cli: cli::Cli, interrupt: Arc<Interrupt>) -> Result<Success, Failure> {
    let mut redactor = Redactor::default();
    let result = match cli.command {
        Command::Once(args) => once(args, &interrupt, &mut redactor).await,
        Command::Gate(args) => gate_command(args),
        Command::Writeback(args) => writeback_command(args, &mut redactor).await,
        Command::Check(args) => check_command(args, &mut redactor).await,
        Command::Version => {
            emit(&format!("harness {}\n", env!("CARGO_PKG_VERSION")));
            Ok(Success::Done)
        }
    };
    result.map_err(|f| Failure {
        stage: f.stage,
        error: anyhow!(redactor.redact(&format!("{:#}", f.error))),
    })
}

/// `--config`, else `$HARNESS_CONFIG`, else `./harness.toml`.
fn config_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("HARNESS_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("harness.toml"))
}

fn load_config(flag: Option<PathBuf>) -> Result<Config, Failure> {
    let path = config_path(flag);
    let text = std::fs::read_to_string(&path)
        .with_context(|| {
            format!(
                "cannot read config {} (use --config PATH or HARNESS_CONFIG; harness.toml.example documents every key)",
                path.display()
            )
        })
        .stage(Stage::Config)?;
    config::parse(&text, &path).stage(Stage::Config)
}

async fn once(
    args: OnceArgs,
    interrupt: &Interrupt,
    redactor: &mut Redactor,
) -> Result<Success, Failure> {
    let started = Utc::now();
    let run_id = run_id(started);
    let mut cfg = load_config(args.config.clone())?;
    if let Some(cassette) = &args.record {
        cfg.bash
            .never_read
            .push(config::NeverRead::cassette(cassette));
    }
    let replay = args.replay.clone().or_else(|| cfg.litellm.replay.clone());
    let sandbox = sandbox_status(&cfg)?;

    // Everything that can fail without the model is checked before an issue is claimed and
    // before the first token: report dir, work root, write roots, the LLM key.
    let mut backend = if args.dry_run {
        None
    } else {
        Some(ready_backend(&cfg, replay.as_deref(), redactor)?)
    };

    // intake
    let redmine = redmine_client(&cfg, &args, redactor)?;
    let Some(task) = take_task(&cfg, &args, redmine.as_ref(), &run_id).await? else {
        info!("intake: no tasks in scope; nothing to do");
        return Ok(Success::Done);
    };

    // The client only when this run holds a claim on the task, so only then is one released.
    let claimed = redmine
        .as_ref()
        .filter(|_| cfg.redmine.as_ref().is_some_and(|r| r.claim.enabled));

    // routing
    let route = routing::route(&cfg.models, task.class.as_deref())
        .map_err(|e| anyhow!("routing task {}: {e}", task.id))
        .stage(Stage::Routing)?;
    info!(
        "task {} ({}): {:?} {}",
        task.id,
        task.source.as_str(),
        task.subject,
        route_line(&route)
    );

    let Some(mut backend) = backend.take() else {
        emit(&report::render_plan(&plan(
            &cfg,
            &task,
            &route,
            replay.as_deref(),
            sandbox,
        )));
        info!("dry-run complete, no LLM call made");
        return Ok(Success::Done);
    };

    // No-cost reads of the proxy: is the routed model served, what does a token cost.
    let (route, preflight_skips) = match &backend {
        Backend::Http(client) if cfg.litellm.preflight => {
            match llm::preflight::route(client, &route).await {
                Ok(v) => v,
                Err(f) => {
                    release_claim(claimed, &task, &run_id, &f, redactor).await;
                    return Err(f);
                }
            }
        }
        Backend::Http(_) | Backend::Replay(_) => (route, Vec::new()),
    };
    let prices = llm::preflight::prices(&cfg.prices, &backend).await;
    let bash = cfg.bash.enabled.then(|| {
        tools::BashTool::prepare(
            cfg.bash.clone(),
            cfg.work_root.clone(),
            tools::bash::scrubbed_env(std::env::vars()),
            sandbox,
            redactor.clone(),
        )
    });
    let bash = match bash.transpose().stage(Stage::Config) {
        Ok(b) => b,
        Err(f) => {
            release_claim(claimed, &task, &run_id, &f, redactor).await;
            return Err(f);
        }
    };
    if bash.is_some() {
        info!("sandbox: {}", sandbox.plan_line(cfg.bash.write_roots.len()));
    }
    info!(
        "turn: {} (max {} rounds)",
        backend.describe(),
        cfg.max_rounds
    );

    // turn
    let system = turn::system_prompt(&cfg.vertical, cfg.max_rounds, bash.is_some());
    let limits = turn::Limits {
        max_rounds: cfg.max_rounds,
        budget: cfg.budget,
        prices,
    };
    let mut turn = turn::run(
        &task,
        &route,
        &limits,
        system,
        &mut backend,
        bash.as_ref(),
        interrupt,
    )
    .await;
    let finished = Utc::now();
    turn.skipped.splice(0..0, preflight_skips);

    // writeback
    let run = RunInfo {
        run_id: run_id.clone(),
        started,
        finished,
        backend: backend.describe(),
        sandbox: sandbox.describe(),
    };
    let report = report_of(&cfg, &task, &route, &turn, run, redactor);
    let path = report::write_reports(&cfg.report_dir, &report).stage(Stage::Writeback)?;
    info!(
        "REPORT written: {} (stop reason {}, {} rounds, {} tokens)",
        path.display(),
        report.stop_reason,
        turn.rounds,
        turn.usage.total_tokens
    );
    emit(&format!("{}\n", path.display()));
    // The cassette comes after the REPORT, so a bad --record path cannot cost the REPORT.
    if let Some(cassette) = &args.record {
        llm::cassette::save(cassette, turn.recorded.clone(), redactor)
            .with_context(|| format!("the REPORT is on disk at {}", path.display()))
            .stage(Stage::Writeback)?;
        info!(
            "recorded {} replies to {}",
            turn.recorded.len(),
            cassette.display()
        );
    }
    if let (Some(client), Some(rm)) = (redmine.as_ref(), cfg.redmine.as_ref()) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Err(e) = writeback::write_back(client, rm, &report::render(&report), &name).await {
            if let Some(err) = report.error.as_ref().filter(|_| turn.outcome.is_failure()) {
                error!("llm: {err}");
            }
            return Err(anyhow!(
                "{e:#}\nthe REPORT is on disk at {}; retry the write-back with: harness writeback --config {} {}",
                path.display(),
                cfg.path.display(),
                path.display()
            ))
            .stage(Stage::Writeback);
        }
    }
    if let Some(err) = report.error.as_ref().filter(|_| turn.outcome.is_failure()) {
        error!("llm: {err}");
    }
    Ok(success_of(&turn.outcome))
}

/// Checks everything a turn needs that costs no token, then builds the reply source.
fn ready_backend(
    cfg: &Config,
    replay: Option<&Path>,
    redactor: &mut Redactor,
) -> Result<Backend, Failure> {
    report::prepare_dir(&cfg.report_dir).stage(Stage::Writeback)?;
    if cfg.bash.enabled && !cfg.work_root.is_dir() {
        return Err(anyhow!(
            "work_root {} is not a directory (config {})",
            cfg.work_root.display(),
            cfg.path.display()
        ))
        .stage(Stage::Config);
    }
    for root in cfg.bash.write_roots.iter().filter(|_| cfg.bash.enabled) {
        if !root.is_dir() {
            return Err(anyhow!(
                "[tools.bash].write_roots: {} is not a directory (config {})",
                root.display(),
                cfg.path.display()
            ))
            .stage(Stage::Config);
        }
    }
    backend(cfg, replay, redactor).stage(Stage::Config)
}

/// What the REPORT says about the run itself, beside the task and the turn.
struct RunInfo {
    run_id: String,
    started: chrono::DateTime<Utc>,
    finished: chrono::DateTime<Utc>,
    backend: String,
    sandbox: String,
}

/// The REPORT of a finished turn, with every text that may hold a secret masked.
fn report_of(
    cfg: &Config,
    task: &Task,
    route: &routing::Route,
    turn: &turn::Turn,
    run: RunInfo,
    redactor: &Redactor,
) -> report::Report {
    let error = match &turn.outcome {
        turn::TurnOutcome::LlmFailed { error } => Some(redactor.redact(&error.message)),
        turn::TurnOutcome::Budget { stop } => Some(redactor.redact(&stop.describe())),
        turn::TurnOutcome::Interrupted { signal } => {
            Some(format!("interrupted by signal {signal}"))
        }
        turn::TurnOutcome::Completed | turn::TurnOutcome::MaxRounds => None,
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
        started: run.started,
        finished: run.finished,
        backend: run.backend,
        sandbox: run.sandbox,
        round_log: turn.log.clone(),
        reply: turn.reply.as_deref().map(|r| redactor.redact(r)),
    }
}

/// The exit of a turn whose REPORT is written. A configured limit is a bounded, expected
/// stop like max_rounds; the proxy refusing for budget is a failure, since every later run
/// would be refused too.
fn success_of(outcome: &turn::TurnOutcome) -> Success {
    if let turn::TurnOutcome::Interrupted { signal } = outcome {
        Success::Interrupted { signal: *signal }
    } else if outcome.is_failure() {
        Success::LlmFailedAfterReport
    } else {
        Success::Done
    }
}

/// The Redmine client for a run that takes its task from Redmine (not `--demo`).
fn redmine_client(
    cfg: &Config,
    args: &OnceArgs,
    redactor: &mut Redactor,
) -> Result<Option<intake::redmine::RedmineClient>, Failure> {
    if args.demo {
        return Ok(None);
    }
    let Some(rm) = &cfg.redmine else {
        return Err(anyhow!(
            "config {} has no [redmine] section: configure Redmine intake, or pass --demo to run the [demo] issue",
            cfg.path.display()
        ))
        .stage(Stage::Config);
    };
    let key = rm.key_ref.resolve("redmine key").stage(Stage::Config)?;
    redactor.add(&key);
    intake::redmine::RedmineClient::new(rm, key, redactor.clone())
        .map(Some)
        .stage(Stage::Config)
}

async fn take_task(
    cfg: &Config,
    args: &OnceArgs,
    redmine: Option<&intake::redmine::RedmineClient>,
    run_id: &str,
) -> Result<Option<Task>, Failure> {
    let (Some(client), Some(rm)) = (redmine, &cfg.redmine) else {
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
        return Ok(Some(task));
    };
    // An unroutable issue must not be claimed: routing is checked before the claim.
    let routing_error = std::cell::RefCell::new(None);
    let check = |task: &Task| -> anyhow::Result<()> {
        routing::route(&cfg.models, task.class.as_deref())
            .map(|_| ())
            .map_err(|e| {
                let e = anyhow!("routing Redmine issue #{}: {e}", task.id);
                *routing_error.borrow_mut() = Some(anyhow!("{e}"));
                e
            })
    };
    let claim = rm.claim.enabled && !args.dry_run;
    let taken = intake::redmine::take(
        client,
        rm,
        run_id,
        args.task_id.as_deref(),
        args.force,
        claim,
        &cfg.report_dir,
        &check,
    )
    .await;
    match taken {
        Ok(intake::redmine::Intake::Task(t)) => Ok(Some(t.task)),
        Ok(intake::redmine::Intake::NothingInScope) => Ok(None),
        Err(e) => match routing_error.borrow_mut().take() {
            Some(r) => Err(r).stage(Stage::Routing),
            None => Err(e).stage(Stage::Intake),
        },
    }
}

/// Gives up a claim after a failure before the turn, so other workers may take the issue.
async fn release_claim(
    redmine: Option<&intake::redmine::RedmineClient>,
    task: &Task,
    run_id: &str,
    failure: &Failure,
    redactor: &Redactor,
) {
    let Some(client) = redmine else { return };
    // The note is public on the issue: the error is masked like every other output.
    let note = format!(
        "{} run={run_id}: giving the claim up: {}",
        intake::redmine::RELEASE_MARKER,
        redactor.redact(&format!("{:#}", failure.error))
    );
    let body = serde_json::json!({"issue": {"notes": note}});
    if let Err(e) = client
        .put_json(&format!("/issues/{}.json", task.id), &body)
        .await
    {
        error!("could not release the claim on issue #{}: {e:#}", task.id);
    }
}

fn route_line(route: &routing::Route) -> String {
    let class = route.class.as_deref().unwrap_or("(none)");
    format!(
        "class={class} -> {} -> {}",
        route.tier,
        route.models.join(" | ")
    )
}

/// How this run's commands are confined; warns about escape-hatch allow rules. Fails (exit 1)
/// where `sandbox = "landlock"` cannot be had.
fn sandbox_status(cfg: &Config) -> Result<tools::sandbox::Status, Failure> {
    if !cfg.bash.enabled {
        return Ok(tools::sandbox::Status::Off);
    }
    for w in gate::lint(&cfg.bash.policy) {
        warn!("[tools.bash]: {w}");
    }
    let status = tools::sandbox::decide(
        cfg.bash.sandbox,
        tools::sandbox::kernel_abi(),
        cfg.bash.network,
    )
    .with_context(|| format!("config {}", cfg.path.display()))
    .stage(Stage::Config)?;
    // A read root that exposes a key, the config or the reports stops the run before any claim.
    if let tools::sandbox::Status::Landlock { .. } = status {
        tools::sandbox::reads::read_set(&cfg.bash, &cfg.work_root, None)
            .map_err(|p| anyhow!("config {}: {}", cfg.path.display(), p.join("; ")))
            .stage(Stage::Config)?;
    }
    Ok(status)
}

fn plan(
    cfg: &Config,
    task: &Task,
    route: &routing::Route,
    replay: Option<&Path>,
    sandbox: tools::sandbox::Status,
) -> report::Plan {
    let tools = if cfg.bash.enabled {
        let default = match cfg.bash.policy.default {
            gate::Verdict::Allow => "allow",
            gate::Verdict::Deny => "deny",
        };
        format!(
            "bash (allow={} deny={} default={default} timeout={}s)",
            cfg.bash.policy.allow.len(),
            cfg.bash.policy.deny.len(),
            cfg.bash.timeout.as_secs()
        )
    } else {
        "none ([tools.bash] enabled = false)".to_string()
    };
    let llm = match (replay, &cfg.litellm.base_url) {
        (Some(p), _) => format!("replay {}", p.display()),
        (None, Some(url)) => format!(
            "{url}/chat/completions (key {}{}{})",
            cfg.litellm
                .key_ref
                .as_ref()
                .map_or_else(|| "none".to_string(), |k| k.describe()),
            if cfg.litellm.streaming {
                ", streaming"
            } else {
                ""
            },
            if cfg.litellm.preflight {
                ", preflight"
            } else {
                ""
            }
        ),
        (None, None) => "none".to_string(),
    };
    report::Plan {
        vertical: cfg.vertical.clone(),
        task: format!(
            "[{}] {} (source {})",
            task.id,
            task.subject,
            task.source.as_str()
        ),
        routing: route.describe(),
        tools,
        sandbox: if cfg.bash.enabled {
            sandbox.plan_line_with_reads(&cfg.bash, &cfg.work_root)
        } else {
            "none (no bash tool)".to_string()
        },
        max_rounds: cfg.max_rounds,
        max_total_tokens: cfg.budget.max_total_tokens,
        max_cost_usd: cfg.budget.max_cost_usd,
        llm,
        report_dir: cfg.report_dir.display().to_string(),
    }
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
    let key = key_ref.resolve("litellm key")?;
    redactor.add(&key);
    let options = llm::client::ClientOptions::new(&cfg.litellm, key_ref);
    Ok(Backend::Http(llm::client::HttpClient::new(
        url,
        key,
        options,
        redactor.clone(),
    )?))
}

/// A run id unique across hosts and processes: time, pid and random bits.
fn run_id(started: chrono::DateTime<Utc>) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_i64(started.timestamp_nanos_opt().unwrap_or_default());
    format!(
        "{}-{}-{:08x}",
        started.format("%Y%m%dT%H%M%SZ"),
        std::process::id(),
        h.finish() as u32
    )
}

async fn writeback_command(
    args: cli::WritebackArgs,
    redactor: &mut Redactor,
) -> Result<Success, Failure> {
    let cfg = load_config(args.config)?;
    let Some(rm) = &cfg.redmine else {
        return Err(anyhow!(
            "config {} has no [redmine] section",
            cfg.path.display()
        ))
        .stage(Stage::Config);
    };
    let text = std::fs::read_to_string(&args.report)
        .with_context(|| format!("cannot read REPORT {}", args.report.display()))
        .stage(Stage::Usage)?;
    let key = rm.key_ref.resolve("redmine key").stage(Stage::Config)?;
    redactor.add(&key);
    let client =
        intake::redmine::RedmineClient::new(rm, key, redactor.clone()).stage(Stage::Config)?;
    let name = args
        .report
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    writeback::write_back(&client, rm, &text, &name)
        .await
        .with_context(|| format!("write-back of {}", args.report.display()))
        .stage(Stage::Writeback)?;
    Ok(Success::Done)
}

async fn check_command(args: cli::CheckArgs, redactor: &mut Redactor) -> Result<Success, Failure> {
    let cfg = load_config(args.config)?;
    let items = check::run(&cfg, redactor).await;
    emit(&check::render(&items));
    match check::failures(&items) {
        0 => Ok(Success::Done),
        n => Err(anyhow!("check: {n} of {} checks failed", items.len())).stage(Stage::Config),
    }
}

fn gate_command(args: GateArgs) -> Result<Success, Failure> {
    let cfg = load_config(args.config)?;
    let judgement = gate::judge(&cfg.bash.policy, &args.command);
    let warnings = gate::lint(&cfg.bash.policy);
    if args.json {
        let value = serde_json::json!({
            "verdict": judgement.verdict,
            "command": judgement.command,
            "reason": judgement.reason,
            "segments": judgement.segments,
            "runtime_path_checks": judgement.runtime_path_checks,
            "warnings": warnings,
        });
        emit(&format!("{value}\n"));
    } else {
        emit(&gate::render_human(&judgement, &warnings));
    }
    Ok(match judgement.verdict {
        gate::Verdict::Allow => Success::Done,
        gate::Verdict::Deny => Success::Denied,
    })
}
