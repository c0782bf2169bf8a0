//! `harness`: runs ONE bounded turn of an LLM agent per invocation.
//!
//! The crate follows the data flow of `harness once` ([`once`]): config -> intake -> routing
//! -> turn -> report -> writeback, each stage a module, with the adapters that several stages
//! share beside them ([`redmine`], [`http`], [`atomic`]). This file holds the command
//! dispatch and the one place that writes to stdout; the commands live in [`once`] and
//! [`commands`].

#![deny(clippy::print_stdout)]
#![warn(unreachable_pub)]

pub(crate) mod atomic;
pub(crate) mod attachments;
pub(crate) mod beneath;
pub(crate) mod bounded;
pub(crate) mod casetest;
pub(crate) mod check;
pub mod cli;
pub(crate) mod commands;
pub mod config;
pub mod events;
pub(crate) mod exit;
pub(crate) mod forge;
pub(crate) mod http;
pub(crate) mod inputs;
pub(crate) mod intake;
pub(crate) mod jsontext;
pub mod llm;
pub(crate) mod once;
pub(crate) mod output;
pub(crate) mod plan;
pub(crate) mod preflight;
pub(crate) mod process;
pub(crate) mod prompt;
pub mod redmine;
pub(crate) mod report;
pub(crate) mod result_schema;
pub mod routing;
pub(crate) mod scope;
pub mod secrets;
pub(crate) mod session;
pub(crate) mod sha256;
pub mod signals;
pub mod tools;
pub mod turn;
pub mod workflow;
pub(crate) mod workspace;
pub(crate) mod writeback;

use std::sync::Arc;

use anyhow::anyhow;

use cli::Command;
use events::{Ending, Events};
use exit::{Failure, Stage, StageExt, Success};
use secrets::Redactor;
use signals::Interrupt;

/// Writes a result to stdout: the one place the crate prints there. A result that cannot be
/// delivered is not a success: any write error is a failure (exit 1), except a closed pipe
/// (a pipe to `head`), which must not turn a finished run into a failure.
#[allow(clippy::print_stdout)]
pub(crate) fn emit(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::new(
            exit::Stage::Writeback,
            anyhow!("cannot write the result to stdout: {e}"),
        )),
        _ => Ok(()),
    }
}

/// Runs one parsed command line. `redactor` learns every secret the run meets (the stderr
/// narration holds a clone of it); `spawner` starts the commands of `harness once`. Errors
/// are already free of secrets.
pub async fn run(
    cli: cli::Cli,
    interrupt: Arc<Interrupt>,
    mut redactor: Redactor,
    spawner: tools::spawner::Spawner,
) -> Result<Success, Failure> {
    type Running<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Success, Failure>> + 'a>>;
    let command: Running<'_> = match cli.command {
        // `once` stops its turn itself, writing a partial REPORT.
        Command::Once(args) => return run_once(args, interrupt, redactor, spawner).await,
        Command::Gate(args) => Box::pin(std::future::ready(commands::gate_command(
            args,
            &mut redactor,
        ))),
        Command::Writeback(args) => Box::pin(commands::writeback_command(args, &mut redactor)),
        Command::Check(args) => Box::pin(commands::check_command(args, &mut redactor)),
        Command::Scope(args) => Box::pin(scope::scope(args, &mut redactor)),
        Command::Test(args) => Box::pin(casetest::test_command(args, &mut redactor)),
        Command::Version => Box::pin(std::future::ready(commands::version())),
    };
    // The other commands have nothing to finish: a signal ends them at once with 128 + N
    // (`harness check` waited out a hanging proxy's whole timeout). The write-back is
    // idempotent, so a cut one is simply retried.
    // A signal that came while the command held the thread (a `cmd:` key ref) counts too.
    let result = match (interrupt.or_signal(command).await, signals::arrived()) {
        (Err(signal), _) | (Ok(_), Some(signal)) => Err(Failure::new(
            Stage::Interrupted(signal),
            anyhow!("interrupted by signal {signal}"),
        )),
        (Ok(result), None) => result,
    };
    masked(result, &redactor)
}

/// `harness once` inside its event stream: `run.started` before the config is read, the
/// metrics and `run.completed` after every way the run can end (a second signal's hard
/// exit included).
async fn run_once(
    args: cli::OnceArgs,
    interrupt: Arc<Interrupt>,
    mut redactor: Redactor,
    spawner: tools::spawner::Spawner,
) -> Result<Success, Failure> {
    if let Some(path) = args.events.as_deref().filter(|p| p.as_os_str() != "-") {
        // Appending events to the config file breaks it for every later run.
        let config = config::config_path(args.config.clone());
        if atomic::lies_in(path, &config) {
            return Err(anyhow!(
                "--events {}: is the config file, which harness reads; write the stream elsewhere",
                path.display()
            ))
            .stage(Stage::Usage);
        }
    }
    let json = args.output == cli::Output::Json;
    if json && args.events.as_deref().is_some_and(|p| p.as_os_str() == "-") {
        return Err(anyhow!(
            "--output json and --events -: both would write stdout; send the events to a file"
        ))
        .stage(Stage::Usage);
    }
    let events = Events::open(args.events.as_deref(), "once").stage(Stage::Usage)?;
    let last_words = events.clone();
    // One object, whichever end prints it first: a second signal can come while (or after)
    // the run's own end prints.
    let printed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first = |printed: &std::sync::atomic::AtomicBool| {
        !printed.swap(true, std::sync::atomic::Ordering::SeqCst)
    };
    let hard_printed = printed.clone();
    interrupt.on_hard_exit(Box::new(move |signal| {
        let ending = Ending {
            exit_code: Success::Interrupted { signal }.code(),
            failed_stage: None,
            interrupted: true,
            error: Some(format!("exited at once on a second signal {signal}")),
        };
        if json && first(&hard_printed) {
            // The exit is the signal's whatever stdout does.
            let _ = emit(&last_words.summary(&ending));
        }
        last_words.finish(&ending)
    }));
    let result = once::once(args, &interrupt, &mut redactor, &events, &spawner).await;
    let mut result = masked(result, &redactor);
    events.mask_with(&redactor);
    if json && first(&printed) {
        // The one object of `--output json`, on every way the run ends; a result that
        // cannot be delivered fails a run that would have succeeded (as the path does).
        if let (Err(failure), Ok(Success::Done)) =
            (emit(&events.summary(&ending(&result))), &result)
        {
            result = Err(failure);
        }
    }
    events.finish(&ending(&result));
    result
}

/// How `harness once` ended, for `run.completed`, the metrics and `--output json`.
fn ending(result: &Result<Success, Failure>) -> Ending {
    match result {
        Ok(success) => Ending {
            exit_code: success.code(),
            failed_stage: None,
            interrupted: matches!(success, Success::Interrupted { .. }),
            error: None,
        },
        Err(failure) => Ending {
            exit_code: failure.stage.code(),
            failed_stage: match failure.stage {
                Stage::Interrupted(_) => None,
                stage => Some(stage.to_string()),
            },
            interrupted: matches!(failure.stage, Stage::Interrupted(_)),
            error: Some(format!("{:#}", failure.error)),
        },
    }
}

/// A command line clap refused: exit 1, and when it named `--events`, a stream that says so
/// (`run.started`, `run.completed` with `usage_error`).
pub fn usage_error(args: &[String], message: &str) {
    let Some(path) = events::events_flag(args) else {
        return;
    };
    if let Ok(events) = Events::open(Some(&path), "once") {
        events.finish(&Ending {
            exit_code: Stage::Usage.code(),
            failed_stage: Some(Stage::Usage.to_string()),
            interrupted: false,
            error: Some(message.trim_end().to_string()),
        });
    }
}

fn masked(result: Result<Success, Failure>, redactor: &Redactor) -> Result<Success, Failure> {
    result.map_err(|f| Failure {
        stage: f.stage,
        error: anyhow!(redactor.redact(&format!("{:#}", f.error))),
    })
}
