//! Turn stage: the toolbox, the one owner of every tool a turn offers (`bash` and the file
//! tools of the prepared [`BashTool`], and `finish`): their specs, each call read from its
//! JSON once into a [`Call`] before anything is narrated or run, and the run of a call.
//! Reading is PURE; running goes through the tools' own adapters.

use super::finish::{self, Finish, Rejected};
use super::step::Shape;
use crate::llm::wire::ToolCall;
use crate::result_schema::ResultSchema;
use crate::signals::Interrupt;
use crate::tools::{self, BashTool, Request, ToolRun};

/// The tools of one turn.
pub struct Toolbox<'a> {
    bash: Option<&'a BashTool>,
    specs: Vec<serde_json::Value>,
    result: Option<&'a ResultSchema>,
    finish: serde_json::Value,
}

/// A tool call as read, once, against what the round offers.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// A call to `bash` or a file tool, ready to run.
    Tool(Request),
    /// A valid `finish`.
    Finish(Finish),
    /// The last round's `finish`, sound but for its `result` (missing or not matching the
    /// schema): it ends the turn `result_invalid`, since no round is left to correct it.
    ResultInvalid {
        /// The call, without its result.
        finish: Finish,
        /// What is wrong with the result.
        errors: Vec<String>,
    },
    /// A call the bash tool set cannot run (an unknown tool, arguments of the wrong form):
    /// its result is `error: <reason>`.
    Invalid(String),
    /// A call this round does not run (`finish` with bad arguments, no such tool this
    /// round): the reason is its result.
    NotRun(String),
}

impl Call {
    /// The command of a `bash` call, for the `tool.started` event.
    pub fn command(&self) -> Option<&str> {
        match self {
            Call::Tool(request) => request.command(),
            Call::Finish(_) | Call::ResultInvalid { .. } | Call::Invalid(_) | Call::NotRun(_) => {
                None
            }
        }
    }
}

impl<'a> Toolbox<'a> {
    /// The toolbox of a turn with `bash` (and its file tools) or without; `result` is the
    /// schema a `finish` call's `result` must match.
    pub fn new(bash: Option<&'a BashTool>, result: Option<&'a ResultSchema>) -> Toolbox<'a> {
        Toolbox {
            bash,
            specs: bash.map(BashTool::specs).unwrap_or_default(),
            result,
            finish: finish::spec(result),
        }
    }

    /// The `finish` spec, offered by the rounds whose shape says so.
    pub fn finish_spec(&self) -> &serde_json::Value {
        &self.finish
    }

    /// The specs of the bash tool set (`bash`, and the file tools when on); `finish` is
    /// added by the round's shape.
    pub fn specs(&self) -> &[serde_json::Value] {
        &self.specs
    }

    /// Reads `call` against what the round `shape` offers.
    pub fn read(&self, call: &ToolCall, shape: Shape) -> Call {
        if shape.offer_finish && call.function.name == finish::NAME {
            return match finish::parse(&call.function.arguments, self.result) {
                Ok(done) => Call::Finish(done),
                Err(Rejected::Result { finish, errors }) if shape.last => {
                    Call::ResultInvalid { finish, errors }
                }
                Err(rejected) => Call::NotRun(rejected.message()),
            };
        }
        match self.bash.filter(|_| shape.offer_bash) {
            Some(tool) => match tool.read(call) {
                Ok(request) => Call::Tool(request),
                Err(reason) => Call::Invalid(reason),
            },
            None if shape.offer_finish && shape.last => Call::NotRun(finish::NOT_OFFERED.into()),
            None => Call::NotRun(format!(
                "not run: there is no tool {:?} in this turn; call `finish` to end it",
                call.function.name
            )),
        }
    }

    /// Runs a call [`read`](Self::read) made a [`Call::Tool`].
    pub async fn run(&self, request: Request, interrupt: &Interrupt) -> ToolRun {
        match self.bash {
            Some(tool) => tool.run(request, interrupt).await,
            None => tools::invalid("there is no bash tool in this turn".to_string()),
        }
    }
}
