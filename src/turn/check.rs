//! Turn stage: the success check, the one hook the turn calls when the model says it is done.
//! [`run`] runs `[check] command` as `bash -c` in the work tree with the bash tool's scrubbed
//! environment, private TMPDIR and Landlock ruleset (not through the gate: the operator wrote
//! it, not the model) and books the attempt; [`verdict`] (PURE) decides what follows.

use serde::Serialize;
use tracing::info;

use super::TurnOutcome;
use crate::config::CheckSpec;
use crate::signals::Interrupt;
use crate::tools::{bash, shadows, BashTool};

/// Added to the check's environment: Python never puts the work tree or the script's
/// directory first on `sys.path` (3.11+), nor the user's site directory.
pub const CHECK_ENV: &[(&str, &str)] = &[("PYTHONSAFEPATH", "1"), ("PYTHONNOUSERSITE", "1")];

/// What the REPORT's `check:` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRecord {
    /// The command, as the operator wrote it.
    pub command: String,
    /// Runs of the check in this turn.
    pub attempts: u32,
    /// The most runs the turn allows.
    pub max_attempts: u32,
    /// Whether the last run passed (exit 0).
    pub passed: bool,
    /// The last run's exit status; `None` when it was killed or did not start.
    pub last_exit: Option<i32>,
    /// How the last run ended: `exit 1`, `timeout`, `signal 9`, `interrupted`, `not run`.
    pub last_ending: String,
    /// The last run's output (head and tail, masked): a workflow stage's retry reason.
    #[serde(skip)]
    pub last_output: String,
}

/// What follows a run of the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckVerdict {
    /// The check passed: the turn may end as done.
    Passed,
    /// It failed with attempts left: `feedback` goes to the model and the turn goes on.
    Retry {
        /// The user message: what failed and the head and tail of the output.
        feedback: String,
    },
    /// It failed and no attempt is left: the turn ends with `check_failed`.
    Failed,
    /// A signal to the harness stopped the check.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
}

/// How one run ended, as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The exit status, when it exited.
    pub exit: Option<i32>,
    /// `exit N`, `timeout`, ...
    pub ending: String,
    /// The output (head and tail, secrets masked) or why it did not run.
    pub output: String,
    /// Bytes it printed in all.
    pub total_bytes: u64,
}

/// Runs the check once for a turn whose model says it is done, books it in `record` and
/// says what follows. The finish tool and the plain final answer both end up here.
pub async fn run(
    spec: &CheckSpec,
    tool: &BashTool,
    interrupt: &Interrupt,
    record: &mut Option<CheckRecord>,
) -> CheckVerdict {
    // Python's module-shadowing paths closed: neither the work tree (`python3 -m pytest`
    // from it) nor a script's own directory comes first on `sys.path`, no user site.
    let mut env = tool.env.clone();
    env.extend(
        CHECK_ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let at = bash::Setting {
        work_root: &tool.work_root,
        timeout: spec.timeout,
        max_output: spec.feedback_bytes,
        env: &env,
        landlock: tool.check_landlock.as_ref(),
        interrupt,
        spawner: &tool.spawner,
    };
    let shadowed = tool.shadows.as_ref().and_then(|before| {
        let also: Vec<String> = before
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !shadows::NAMES.contains(&n.as_str()))
            .collect();
        shadows::written(before, &shadows::snapshot(&tool.work_root, &also))
    });
    let finished = match shadowed {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => bash::run(&spec.command, &at).await,
    };
    let attempt = match finished {
        Ok(f) => {
            let exit = f.ending.exit_code();
            let ending = match f.ending {
                bash::Ending::TimedOut => format!("timeout after {}s", spec.timeout.as_secs()),
                other => other.to_string(),
            };
            Attempt {
                exit,
                ending,
                output: f.output.render(&tool.redactor),
                total_bytes: f.output.total(),
            }
        }
        Err(e) => Attempt {
            exit: None,
            ending: "not run".to_string(),
            output: tool.redactor.redact(&format!("{e:#}")),
            total_bytes: 0,
        },
    };
    let attempts = record.as_ref().map_or(0, |r| r.attempts) + 1;
    // The command as narrated, recorded and sent back: masked like everything it printed.
    let spec = &CheckSpec {
        command: tool.redactor.redact(&spec.command),
        ..spec.clone()
    };
    info!(
        "check {attempts}/{}: {:?} -> {}",
        spec.max_attempts, spec.command, attempt.ending
    );
    *record = Some(CheckRecord {
        command: spec.command.clone(),
        attempts,
        max_attempts: spec.max_attempts,
        passed: attempt.exit == Some(0),
        last_exit: attempt.exit,
        last_ending: attempt.ending.clone(),
        last_output: attempt.output.clone(),
    });
    if attempt.ending == "interrupted" {
        return CheckVerdict::Interrupted {
            signal: interrupt.received().unwrap_or(libc::SIGTERM),
        };
    }
    verdict(spec, attempts, &attempt)
}

/// What the turn does after the model said it was done and the check gave its verdict.
#[derive(Debug, Clone)]
pub enum After {
    /// The turn ends with this outcome.
    End(TurnOutcome),
    /// The model's answer stays in the conversation, `feedback` follows as a user message,
    /// and the next round starts.
    Retry {
        /// The check's failure, for the model.
        feedback: String,
    },
}

/// Decides after `verdict` on a turn that would end as `outcome`; `rounds_left` says whether
/// another round may follow. A failure with no round left is as final as one with no attempt
/// left.
pub fn after(verdict: CheckVerdict, outcome: TurnOutcome, rounds_left: bool) -> After {
    match verdict {
        CheckVerdict::Passed => After::End(outcome),
        CheckVerdict::Retry { feedback } if rounds_left => After::Retry { feedback },
        CheckVerdict::Retry { .. } | CheckVerdict::Failed => After::End(TurnOutcome::CheckFailed),
        CheckVerdict::Interrupted { signal } => After::End(TurnOutcome::Interrupted { signal }),
    }
}

/// What follows attempt number `attempts` (1-based) of `spec` that ended as `attempt`.
pub fn verdict(spec: &CheckSpec, attempts: u32, attempt: &Attempt) -> CheckVerdict {
    if attempt.exit == Some(0) {
        return CheckVerdict::Passed;
    }
    if attempts >= spec.max_attempts {
        return CheckVerdict::Failed;
    }
    let cut = if attempt.total_bytes > spec.feedback_bytes as u64 {
        format!(" (head and tail of {} bytes)", attempt.total_bytes)
    } else {
        String::new()
    };
    let output = if attempt.output.trim().is_empty() {
        "(no output)"
    } else {
        attempt.output.trim_end()
    };
    CheckVerdict::Retry {
        feedback: format!(
            "[harness] The success check failed (attempt {attempts} of {}): `{}` ended with {}. The task is not done yet. Its output{cut}:\n```\n{output}\n```\nFix what it shows, then give your final answer again.",
            spec.max_attempts, spec.command, attempt.ending
        ),
    }
}

/// The system prompt with a sentence about the check, when the task has one: the model
/// learns that "done" is verified and what happens when it is not.
pub fn with_note(system: String, spec: Option<&CheckSpec>) -> String {
    match spec {
        Some(spec) => format!(
            "{system}\n\nWhen you give your final answer, the operator's success check runs in the working directory (up to {} times in this turn). If it fails, its output comes back to you and the turn goes on: fix the problem and answer again.",
            spec.max_attempts
        ),
        None => system,
    }
}

/// The REPORT's "Success check" section.
pub fn section(record: &CheckRecord) -> String {
    let result = if record.passed {
        format!(
            "passed on attempt {} of {}",
            record.attempts, record.max_attempts
        )
    } else {
        format!(
            "**failed**: {} of {} attempts, the last ended with {}",
            record.attempts, record.max_attempts, record.last_ending
        )
    };
    format!("## Success check\n\n`{}`: {result}.\n", record.command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    fn spec() -> CheckSpec {
        CheckSpec {
            command: "make test".into(),
            timeout: Duration::from_secs(5),
            max_attempts: 2,
            feedback_bytes: 100,
        }
    }

    fn attempt(exit: i32, output: &str, total: u64) -> Attempt {
        Attempt {
            exit: Some(exit),
            ending: format!("exit {exit}"),
            output: output.into(),
            total_bytes: total,
        }
    }

    #[test]
    fn a_pass_ends_a_failure_retries_until_the_attempts_run_out() {
        assert_eq!(
            verdict(&spec(), 1, &attempt(0, "", 0)),
            CheckVerdict::Passed
        );
        assert_eq!(
            verdict(&spec(), 2, &attempt(1, "x", 1)),
            CheckVerdict::Failed
        );
        let CheckVerdict::Retry { feedback } = verdict(&spec(), 1, &attempt(1, "FAILED t1\n", 10))
        else {
            panic!("a retry");
        };
        assert!(feedback.contains("attempt 1 of 2"), "{feedback}");
        assert!(
            feedback.contains("`make test` ended with exit 1"),
            "{feedback}"
        );
        assert!(
            feedback.contains("Its output:\n```\nFAILED t1\n```"),
            "{feedback}"
        );
        let CheckVerdict::Retry { feedback } = verdict(&spec(), 1, &attempt(2, "", 5000)) else {
            panic!("a retry");
        };
        assert!(
            feedback.contains("(head and tail of 5000 bytes)"),
            "{feedback}"
        );
        assert!(feedback.contains("(no output)"), "{feedback}");
    }

    #[test]
    fn the_prompt_mentions_the_check_only_when_there_is_one() {
        assert_eq!(with_note("S".into(), None), "S");
        let s = with_note("S".into(), Some(&spec()));
        assert!(
            s.starts_with(
                "S\n\nWhen you give your final answer, the operator's success check runs"
            ),
            "{s}"
        );
        assert!(s.contains("up to 2 times"), "{s}");
    }

    #[test]
    fn a_failure_goes_back_while_rounds_are_left() {
        let stop = |a: After| match a {
            After::End(o) => o.stop_reason(),
            After::Retry { .. } => "retry",
        };
        let retry = || CheckVerdict::Retry {
            feedback: "f".into(),
        };
        assert_eq!(
            stop(after(CheckVerdict::Passed, TurnOutcome::MaxRounds, false)),
            "max_rounds"
        );
        assert_eq!(stop(after(retry(), TurnOutcome::Completed, true)), "retry");
        assert_eq!(
            stop(after(retry(), TurnOutcome::Completed, false)),
            "check_failed"
        );
        assert_eq!(
            stop(after(CheckVerdict::Failed, TurnOutcome::Completed, true)),
            "check_failed"
        );
        let interrupted = after(
            CheckVerdict::Interrupted { signal: 2 },
            TurnOutcome::Completed,
            true,
        );
        assert_eq!(stop(interrupted), "interrupted");
    }

    #[test]
    fn the_section_says_how_the_check_ended() {
        let mut r = CheckRecord {
            command: "make test".into(),
            attempts: 2,
            max_attempts: 3,
            passed: true,
            last_exit: Some(0),
            last_ending: "exit 0".into(),
            last_output: String::new(),
        };
        assert_eq!(
            section(&r),
            "## Success check\n\n`make test`: passed on attempt 2 of 3.\n"
        );
        r.passed = false;
        r.last_ending = "timeout after 5s".into();
        assert!(section(&r)
            .contains("**failed**: 2 of 3 attempts, the last ended with timeout after 5s"));
    }
}
