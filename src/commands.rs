//! The small commands: `harness gate`, `harness check`, `harness writeback` and
//! `harness version`. Each loads the config, calls one stage and prints its result through
//! [`crate::emit`]. (`harness once` has a module of its own, [`crate::once`].)

use anyhow::{anyhow, Context};

use crate::cli::{self, GateArgs};
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::secrets::Redactor;
use crate::{check, config, emit, writeback};
use harness_gate as gate;

/// `harness version`.
pub(crate) fn version() -> Result<Success, Failure> {
    emit(&format!("harness {}\n", env!("CARGO_PKG_VERSION")))?;
    Ok(Success::Done)
}

/// `harness writeback`: does what a REPORT file still owes: its pending pull request
/// (`[forge]`), then its Redmine note; each is safe to repeat.
pub(crate) async fn writeback_command(
    args: cli::WritebackArgs,
    redactor: &mut Redactor,
) -> Result<Success, Failure> {
    let cfg = config::load(args.config, redactor).stage(Stage::Config)?;
    let text = crate::bounded::read_text(&args.report, crate::bounded::REPORT_MAX)
        .with_context(|| format!("cannot read REPORT {}", args.report.display()))
        .stage(Stage::Usage)?;
    let parsed = crate::report::parse(&text)
        .with_context(|| format!("REPORT {}", args.report.display()))
        .stage(Stage::Usage)?;
    let to_redmine = parsed.str("source") == "redmine" || crate::forge::pending(&parsed).is_none();
    let text = match crate::forge::pending(&parsed) {
        Some(_) => {
            let Some(client) = crate::preflight::forge_client(&cfg, redactor) else {
                return Err(anyhow!(
                    "the REPORT {} has a pending pull request, but config {} has no [forge] section",
                    args.report.display(),
                    cfg.path.display()
                ))
                .stage(Stage::Config);
            };
            let client = client.stage(Stage::Config)?;
            crate::forge::write_back(&client, &cfg, &args.report, &text)
                .await
                .with_context(|| format!("write-back of {}", args.report.display()))
                .stage(Stage::Writeback)?
        }
        None => text,
    };
    if to_redmine {
        redmine_writeback(&cfg, &args.report, &text, redactor).await?;
    }
    Ok(Success::Done)
}

/// The Redmine part of `harness writeback`.
async fn redmine_writeback(
    cfg: &config::Config,
    report: &std::path::Path,
    text: &str,
    redactor: &mut Redactor,
) -> Result<(), Failure> {
    let Some(rm) = &cfg.redmine else {
        return Err(anyhow!(
            "config {} has no [redmine] section",
            cfg.path.display()
        ))
        .stage(Stage::Config);
    };
    let client = crate::preflight::redmine_client(cfg, rm, redactor).stage(Stage::Config)?;
    let name = report
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A retried write-back brings the task's session along, as the run would have.
    let extra = crate::report::parse(text)
        .ok()
        .filter(|report| report.str("source") == "redmine")
        .and_then(|r| crate::session::for_retry(cfg, r.str("task_id"), r.str("run_id")))
        .map(|(name, bytes)| writeback::Extra {
            name,
            bytes,
            content_type: "application/gzip",
        });
    writeback::write_back(&client, rm, text, &name, extra)
        .await
        .with_context(|| format!("write-back of {}", report.display()))
        .stage(Stage::Writeback)
}

/// `harness check`: every check that costs no token, as a checklist.
pub(crate) async fn check_command(
    args: cli::CheckArgs,
    redactor: &mut Redactor,
) -> Result<Success, Failure> {
    let cfg = config::load(args.config, redactor).stage(Stage::Config)?;
    let items = check::run(&cfg, redactor).await;
    emit(&redactor.redact(&check::render(&items)))?;
    match check::failures(&items) {
        0 => Ok(Success::Done),
        n => Err(anyhow!("check: {n} of {} checks failed", items.len())).stage(Stage::Config),
    }
}

/// `harness gate`: judges one command under the config's policy, or under a preset alone
/// (`--preset NAME`), or prints a preset's rules (`--preset NAME` without a command).
pub(crate) fn gate_command(args: GateArgs, redactor: &mut Redactor) -> Result<Success, Failure> {
    const USAGE: &str = "usage: harness gate [--config PATH | --preset NAME] [--json] [-- COMMAND]";
    let preset = match &args.preset {
        Some(name) => Some(
            gate::presets::preset(name)
                .ok_or_else(|| {
                    anyhow!(
                        "harness gate --preset: {}; {USAGE}",
                        gate::presets::unknown_preset(name)
                    )
                })
                .stage(Stage::Usage)?,
        ),
        None => None,
    };
    let Some(command) = args.command else {
        // clap requires a command unless --preset is given.
        let Some(p) = preset else {
            return Err(anyhow!("harness gate: no command; {USAGE}")).stage(Stage::Usage);
        };
        if args.json {
            emit(&format!("{}\n", gate::presets::preset_json(p)))?;
        } else {
            emit(&gate::presets::render_preset(p))?;
        }
        return Ok(Success::Done);
    };
    if command.trim().is_empty() {
        return Err(anyhow!("harness gate: the command is empty; {USAGE}")).stage(Stage::Usage);
    }
    let policy = match preset {
        Some(p) => p.policy(),
        None => {
            config::load(args.config, redactor)
                .stage(Stage::Config)?
                .bash
                .policy
        }
    };
    let judgement = gate::judge(&policy, &command);
    let warnings = gate::lint(&policy);
    if args.json {
        let value = serde_json::json!({
            "verdict": judgement.verdict,
            "command": judgement.command,
            "reason": judgement.reason,
            "hint": judgement.hint,
            "segments": judgement.segments,
            "runtime_path_checks": judgement.runtime_path_checks,
            "workdirs": judgement.workdirs,
            "warnings": warnings,
        });
        emit(&format!("{value}\n"))?;
    } else {
        emit(&gate::render_human(&judgement, &warnings))?;
    }
    Ok(match judgement.verdict {
        gate::Verdict::Allow => Success::Done,
        gate::Verdict::Deny => Success::Denied,
    })
}
