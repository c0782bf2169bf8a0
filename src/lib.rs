//! `harness`: runs ONE bounded turn of an LLM agent per invocation.
//!
//! [`run`] reads top to bottom as the data flow: config -> intake -> routing -> turn ->
//! writeback. Each stage returns a plain value the next one takes; failures carry the
//! [`exit::Stage`] that decides the exit code.

#![deny(clippy::print_stdout)]

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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context};
use chrono::Utc;
use tracing::{error, info};

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
    let cfg = load_config(args.config.clone())?;

    // intake
    let task = take_task(&cfg, &args)?;

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
    let replay = args.replay.clone().or_else(|| cfg.litellm.replay.clone());

    if args.dry_run {
        emit(&report::render_plan(&plan(
            &cfg,
            &task,
            &route,
            replay.as_deref(),
        )));
        info!("dry-run complete, no LLM call made");
        return Ok(Success::Done);
    }

    // Everything that can fail without the model is checked before the first token.
    report::prepare_dir(&cfg.report_dir).stage(Stage::Writeback)?;
    if cfg.bash.enabled && !cfg.work_root.is_dir() {
        return Err(anyhow!(
            "work_root {} is not a directory (config {})",
            cfg.work_root.display(),
            cfg.path.display()
        ))
        .stage(Stage::Config);
    }
    let mut backend = backend(&cfg, replay.as_deref(), redactor).stage(Stage::Config)?;
    let bash = cfg.bash.enabled.then(|| tools::BashTool {
        config: cfg.bash.clone(),
        work_root: cfg.work_root.clone(),
        env: tools::bash::scrubbed_env(std::env::vars()),
        redactor: redactor.clone(),
    });
    info!(
        "turn: {} (max {} rounds)",
        backend.describe(),
        cfg.max_rounds
    );

    // turn
    let system = turn::system_prompt(&cfg.vertical, cfg.max_rounds, bash.is_some());
    let turn = turn::run(
        &task,
        &route,
        cfg.max_rounds,
        system,
        &mut backend,
        bash.as_ref(),
        interrupt,
    )
    .await;
    let finished = Utc::now();

    // writeback
    if let Some(path) = &args.record {
        llm::cassette::save(path, turn.recorded.clone()).stage(Stage::Writeback)?;
        info!(
            "recorded {} replies to {}",
            turn.recorded.len(),
            path.display()
        );
    }
    let error = match &turn.outcome {
        turn::TurnOutcome::LlmFailed { error } => Some(redactor.redact(&error.message)),
        turn::TurnOutcome::Interrupted { signal } => {
            Some(format!("interrupted by signal {signal}"))
        }
        turn::TurnOutcome::Completed | turn::TurnOutcome::MaxRounds => None,
    };
    let report = report::Report {
        run_id: run_id(started),
        vertical: cfg.vertical.clone(),
        task_id: task.id.clone(),
        source: task.source.as_str().to_string(),
        subject: task.subject.clone(),
        class: route.class.clone(),
        tier: route.tier.clone(),
        model: route.model().to_string(),
        usage: turn.usage,
        rounds: turn.rounds,
        max_rounds: cfg.max_rounds,
        stop_reason: turn.outcome.stop_reason().to_string(),
        error: error.clone(),
        started,
        finished,
        backend: backend.describe(),
        round_log: turn.log.clone(),
        reply: turn.reply.as_deref().map(|r| redactor.redact(r)),
    };
    let path = report::write_reports(&cfg.report_dir, &report).stage(Stage::Writeback)?;
    info!(
        "REPORT written: {} (stop reason {}, {} rounds, {} tokens)",
        path.display(),
        report.stop_reason,
        turn.rounds,
        turn.usage.total_tokens
    );
    emit(&format!("{}\n", path.display()));
    Ok(match turn.outcome {
        turn::TurnOutcome::Completed | turn::TurnOutcome::MaxRounds => Success::Done,
        turn::TurnOutcome::LlmFailed { .. } => {
            error!("llm: {}", error.unwrap_or_default());
            Success::LlmFailedAfterReport
        }
        turn::TurnOutcome::Interrupted { signal } => Success::Interrupted { signal },
    })
}

fn take_task(cfg: &Config, args: &OnceArgs) -> Result<Task, Failure> {
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
        return Ok(task);
    }
    match &cfg.redmine {
        None => Err(anyhow!(
            "config {} has no [redmine] section: configure Redmine intake, or pass --demo to run the [demo] issue",
            cfg.path.display()
        ))
        .stage(Stage::Config),
        Some(_) => Err(anyhow!(
            "Redmine intake is not available in this build yet; pass --demo to run the [demo] issue"
        ))
        .stage(Stage::Intake),
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

fn plan(cfg: &Config, task: &Task, route: &routing::Route, replay: Option<&Path>) -> report::Plan {
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
            "{url}/chat/completions (key {})",
            cfg.litellm
                .key_ref
                .as_ref()
                .map_or_else(|| "none".to_string(), |k| k.describe())
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
        max_rounds: cfg.max_rounds,
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
    Ok(Backend::Http(llm::client::HttpClient::new(
        url,
        key,
        cfg.litellm.timeout,
        cfg.litellm.max_retries,
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
