//! Exit stage, PURE: the closed set of ways a run ends and the exit code each one maps to.
//!
//! The code a script sees comes from these values, never from error text.

use std::fmt;

/// The stage a failure belongs to; it alone decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Bad command line.
    Usage,
    /// The config file is missing, malformed or invalid, or a key ref cannot be resolved.
    Config,
    /// A task's class does not route to a model.
    Routing,
    /// The task source (Redmine, demo) failed.
    Intake,
    /// The model endpoint failed or the turn could not finish.
    Llm,
    /// The REPORT or the Redmine write-back failed.
    Writeback,
    /// A signal stopped the run before the turn: nothing claimed, nothing posted.
    Interrupted(i32),
}

impl Stage {
    /// The exit code of the spec's table: 1 usage/config/routing/writeback, 2 intake, 4 llm,
    /// 128 + N for signal N.
    pub fn code(self) -> u8 {
        match self {
            Stage::Usage | Stage::Config | Stage::Routing | Stage::Writeback => 1,
            Stage::Intake => 2,
            Stage::Llm => 4,
            Stage::Interrupted(signal) => Success::Interrupted { signal }.code(),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Stage::Usage => "usage",
            Stage::Config => "config",
            Stage::Routing => "routing",
            Stage::Intake => "intake",
            Stage::Llm => "llm",
            Stage::Writeback => "writeback",
            Stage::Interrupted(_) => "interrupted",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A failed run: the stage that failed and the error chain to show the user.
#[derive(Debug)]
pub struct Failure {
    /// Which stage failed; decides the exit code.
    pub stage: Stage,
    /// What happened, with context; already free of secrets when it leaves `lib::run`.
    pub error: anyhow::Error,
}

impl Failure {
    /// Wraps an error as a failure of `stage`.
    pub fn new(stage: Stage, error: anyhow::Error) -> Self {
        Failure { stage, error }
    }
}

/// Tags a `Result`'s error with the stage it belongs to.
pub(crate) trait StageExt<T> {
    /// Turns the error into a [`Failure`] of `stage`.
    fn stage(self, stage: Stage) -> Result<T, Failure>;
}

impl<T, E: Into<anyhow::Error>> StageExt<T> for Result<T, E> {
    fn stage(self, stage: Stage) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(stage, e.into()))
    }
}

/// How a run that did not fail at a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Success {
    /// The work was done (or there was nothing to do).
    Done,
    /// `harness gate` judged the command and denied it.
    Denied,
    /// A turn ended with an LLM failure after writing its partial REPORT.
    LlmFailedAfterReport,
    /// The task was not accomplished: the model finished with `blocked` or `failed`, or the
    /// success check failed to the end; the REPORT and the write-back are done.
    NotAccomplished,
    /// A signal stopped the turn after its partial REPORT was written.
    Interrupted {
        /// The signal number (1 SIGHUP, 2 SIGINT, 3 SIGQUIT, 15 SIGTERM).
        signal: i32,
    },
}

impl Success {
    /// The exit code: 0 done, 3 denied, 4 llm failure, 5 task not accomplished, 128+N for
    /// signal N.
    pub fn code(self) -> u8 {
        match self {
            Success::Done => 0,
            Success::Denied => 3,
            Success::LlmFailedAfterReport => 4,
            Success::NotAccomplished => 5,
            Success::Interrupted { signal } => 128u8.saturating_add(signal.clamp(0, 127) as u8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_spec_table() {
        assert_eq!(Stage::Usage.code(), 1);
        assert_eq!(Stage::Config.code(), 1);
        assert_eq!(Stage::Routing.code(), 1);
        assert_eq!(Stage::Writeback.code(), 1);
        assert_eq!(Stage::Intake.code(), 2);
        assert_eq!(Stage::Llm.code(), 4);
        assert_eq!(Stage::Interrupted(15).code(), 143);
        assert_eq!(Stage::Interrupted(1).code(), 129);
        assert_eq!(Success::Done.code(), 0);
        assert_eq!(Success::Denied.code(), 3);
        assert_eq!(Success::LlmFailedAfterReport.code(), 4);
        assert_eq!(Success::NotAccomplished.code(), 5);
        assert_eq!(Success::Interrupted { signal: 2 }.code(), 130);
        assert_eq!(Success::Interrupted { signal: 15 }.code(), 143);
    }
}
