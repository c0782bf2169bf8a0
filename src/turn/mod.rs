//! Turn stage: the bounded chat loop. A task, a route, limits, a backend and the bash tool
//! in; a [`Turn`] out, whose [`TurnOutcome`] is a closed set. Never panics, never exits: every
//! way the loop can end is a value the REPORT writer and the exit mapping match on.
//!
//! [`run`] is the loop as named steps; the decisions are PURE in [`step`]; the model call
//! (with fallback and interrupts) and the tool calls are the adapters of `round`.
//!
//! Before each round the `[budget]` limits are checked; each round's cost is the endpoint's
//! own figure or usage x `[models.prices]`. When a model is unknown to the endpoint or its
//! retries run out, the next model of the tier's chain answers the same round, and stays.

pub mod answer;
pub mod check;
pub mod finish;
mod round;
pub mod rules;
pub mod step;
pub mod toolbox;

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use serde::Serialize;
use tracing::info;

use crate::config::{BudgetConfig, CheckSpec, FinishMode, ModelPrice};
use crate::events::{Event, Events};
use crate::llm::cassette::Recorded;
pub use crate::llm::preflight::SkippedModel;
use crate::llm::wire::{Content, Message, Part, Usage};
use crate::llm::{Backend, LlmError, Reply};
use crate::routing::Route;
use crate::signals::Interrupt;
use crate::tools::{BashTool, ToolEvent};
pub use finish::{Finish, FinishStatus};

/// How the turn ended.
#[derive(Debug, Clone)]
pub enum TurnOutcome {
    /// The model called `finish` with `done`, or (`finish = "message"`, or after the nudge)
    /// answered without calling a tool.
    Completed,
    /// The model called `finish` with `needs_input`: it asks a human a question.
    NeedsInput,
    /// The model called `finish` with `blocked` or `failed`: the task is not accomplished.
    AgentFailed {
        /// `blocked` or `failed`.
        status: FinishStatus,
    },
    /// The round cap was reached; the last round offered no tools.
    MaxRounds,
    /// A budget stopped the turn: a `[budget]` limit before a round, or the proxy's 422.
    Budget {
        /// Which limit.
        stop: BudgetStop,
    },
    /// The model endpoint failed; `partial` is the last text the model produced, if any.
    LlmFailed {
        /// The final error.
        error: LlmError,
    },
    /// A handled signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) stopped the turn.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
    /// The model said it was done but the success check failed, with no attempt or round
    /// left: the task is not accomplished (exit 5).
    CheckFailed,
    /// The last round's `finish` gave no `result` with `done`, or one that does not match
    /// `[finish] result_schema`: a program reading the result gets none (exit 5).
    ResultInvalid {
        /// What is wrong with it, as [`crate::result_schema::ResultSchema::check`] lists it.
        errors: Vec<String>,
    },
    /// A workflow's stage passed (or an `on_fail` edge was taken) and the workflow goes on
    /// at the next run (`per_run = "stage"`): the task stays eligible.
    NextStage,
    /// A workflow's stage failed with no retry and no edge back left (exit 5).
    StageFailed,
}

impl TurnOutcome {
    /// The error of a failed turn ([`TurnOutcome::is_failure`]), for `--output json`'s and
    /// `run.completed`'s `error`; `None` for every other outcome.
    pub fn failure_message(&self) -> Option<String> {
        match self {
            TurnOutcome::LlmFailed { error }
            | TurnOutcome::Budget {
                stop: BudgetStop::Proxy { error },
            } => Some(error.to_string()),
            _ => None,
        }
    }

    /// Whether the turn failed (exit 4): an llm error or the proxy's budget refusal.
    pub fn is_failure(&self) -> bool {
        match self {
            TurnOutcome::LlmFailed { .. }
            | TurnOutcome::Budget {
                stop: BudgetStop::Proxy { .. },
            } => true,
            TurnOutcome::Completed
            | TurnOutcome::NeedsInput
            | TurnOutcome::AgentFailed { .. }
            | TurnOutcome::MaxRounds
            | TurnOutcome::CheckFailed
            | TurnOutcome::ResultInvalid { .. }
            | TurnOutcome::NextStage
            | TurnOutcome::StageFailed
            | TurnOutcome::Interrupted { .. }
            | TurnOutcome::Budget {
                stop: BudgetStop::Tokens { .. } | BudgetStop::Cost { .. },
            } => false,
        }
    }

    /// The REPORT's `stop_reason`.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            TurnOutcome::Completed => "completed",
            TurnOutcome::NeedsInput => "needs_input",
            TurnOutcome::AgentFailed { .. } => "agent_failed",
            TurnOutcome::MaxRounds => "max_rounds",
            TurnOutcome::Budget { .. } => "budget",
            TurnOutcome::LlmFailed { .. } => "llm_error",
            TurnOutcome::Interrupted { .. } => "interrupted",
            TurnOutcome::CheckFailed => "check_failed",
            TurnOutcome::ResultInvalid { .. } => "result_invalid",
            TurnOutcome::NextStage => "next_stage",
            TurnOutcome::StageFailed => "stage_failed",
        }
    }
}

/// Which budget stopped a turn.
#[derive(Debug, Clone)]
pub enum BudgetStop {
    /// `[budget] max_total_tokens` was reached before the next round.
    Tokens {
        /// Tokens used so far.
        used: u64,
        /// The limit.
        limit: u64,
    },
    /// `[budget] max_cost_usd` was reached before the next round.
    Cost {
        /// USD spent so far.
        spent: f64,
        /// The limit.
        limit: f64,
    },
    /// The proxy refused the request: its budget for this key is spent (LiteLLM 422
    /// `budget_exceeded`). Unlike the local limits this is a failure: every later run would
    /// be refused too.
    Proxy {
        /// The refusal.
        error: LlmError,
    },
}

impl BudgetStop {
    /// One line for the REPORT's `error` and the narration.
    pub fn describe(&self) -> String {
        match self {
            BudgetStop::Tokens { used, limit } => {
                format!("budget: {used} tokens used, [budget] max_total_tokens is {limit}")
            }
            BudgetStop::Cost { spent, limit } => {
                format!("budget: {spent} USD spent, [budget] max_cost_usd is {limit}")
            }
            BudgetStop::Proxy { error } => error.message.clone(),
        }
    }
}

/// The per-run bounds: rounds, budget, and the prices that turn tokens into cost.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Max LLM round trips.
    pub max_rounds: u32,
    /// Tool calls run per reply (0: no limit, for tests that build limits by hand).
    pub max_tool_calls: u32,
    /// `[budget]`.
    pub budget: BudgetConfig,
    /// Per concrete model, for replies whose cost the endpoint does not report.
    pub prices: BTreeMap<String, ModelPrice>,
    /// The success check of this task's class, run when the model says it is done.
    pub check: Option<CheckSpec>,
    /// How the model ends the turn: the `finish` tool or a reply without a tool call.
    pub finish: FinishMode,
    /// `[finish] result_schema`: what a `finish` call's `result` must match.
    pub result: Option<crate::result_schema::ResultSchema>,
}

/// One LLM round trip and the tool calls it asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundRecord {
    /// 1-based round number.
    pub round: u32,
    /// The concrete model that answered.
    pub model: String,
    /// Tokens of this round (zero when the endpoint sent none).
    pub usage: Usage,
    /// Cost in USD: the endpoint's figure, else usage x price; `null` when neither is known.
    pub cost_usd: Option<f64>,
    /// Round-trip wall time in milliseconds, retries included.
    pub latency_ms: u64,
    /// Retries the round needed.
    pub retries: u32,
    /// What happened to each tool call, in order.
    pub tools: Vec<ToolEvent>,
}

/// A finished turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// How it ended.
    pub outcome: TurnOutcome,
    /// The final reply; for a failed or interrupted turn, the last text the model produced.
    pub reply: Option<String>,
    /// LLM round trips made (successful or not).
    pub rounds: u32,
    /// Tokens summed over all rounds.
    pub usage: Usage,
    /// Cost in USD summed over the rounds whose cost is known; `None` when none is.
    pub cost_usd: Option<f64>,
    /// The model that answered last (the chain's first when none answered).
    pub model: String,
    /// Models of the chain that were skipped, in order, with the reason.
    pub skipped: Vec<SkippedModel>,
    /// Per-round telemetry.
    pub log: Vec<RoundRecord>,
    /// The raw replies, for `--record`.
    pub recorded: Vec<Recorded>,
    /// The accepted `finish` call, when the model made one.
    pub finish: Option<Finish>,
    /// The whole conversation at the end: the first request's messages, then every reply,
    /// tool result and note this run added.
    pub messages: Vec<Message>,
    /// The success check's runs, when the task has a check and it ran.
    pub check: Option<check::CheckRecord>,
    /// A failure that did not fail the turn, for the REPORT's `error`: the round after the
    /// reminder to call `finish` failed, and the text answer before it stands.
    pub noted_error: Option<String>,
}

/// The system prompt: what the harness is, the bound, the tool contract, the REPORT, then
/// the rules of the turn ([`rules::section`]: the day, the host, the policy). PURE, and the
/// same bytes for the same config on the same day.
pub fn system_prompt(
    vertical: &str,
    max_rounds: u32,
    tools: Option<&BashTool>,
    finish: FinishMode,
    world: rules::World,
) -> String {
    let finishing = finish == FinishMode::Tool;
    let tool_text = match tools {
        Some(bash) => bash.contract(finishing),
        None if finishing => {
            "You have one tool, `finish`, which ends the turn: answer from the task text alone."
                .to_string()
        }
        None => "You have no tools in this turn: answer from the task text alone.".to_string(),
    };
    let ending = match finish {
        FinishMode::Message => "When you are done, reply with your final answer in Markdown and no tool call: that reply is saved verbatim as the task's REPORT, so make it complete and self-contained.",
        FinishMode::Tool => "End the turn by calling `finish` with a `status` (done, needs_input with a `question` for a human, blocked, or failed) and a `summary` in Markdown: the summary is saved verbatim as the task's REPORT, so make it complete and self-contained. Earlier replies of yours on this task, if any, are part of the conversation.",
    };
    let rules = rules::section(
        tools.map(|bash| rules::Tools {
            bash: &bash.config,
            files: bash.files.is_some(),
        }),
        world,
    );
    format!(
        "You are an agent run by `harness` for the \"{vertical}\" vertical. You get ONE bounded turn of at most {max_rounds} model rounds to work on the task below. {tool_text} {ending}\n\n{rules}"
    )
}

/// The text before the images `read_image` returned, in the user message after the results.
pub const IMAGES_NOTE: &str =
    "[harness] The images read_image returned, in the order of the calls:";

/// Text added before the last round so the model answers instead of asking for a tool.
pub const LAST_ROUND_NOTE: &str = "[harness] This is the last round of this turn: tools are no longer available. Reply now with your final answer (what you did, what you found, what is left).";

/// Runs the bounded loop: before each model call the limits are checked; a reply either
/// ends the turn or has its tool calls run, whose results start the next round.
///
/// `start` is the first request's conversation: the system prompt, the stored history of
/// the task's session, and the message that opens this run. The turn's `messages` end as
/// the whole conversation, so the session can keep what this run added.
pub async fn run(
    start: Vec<Message>,
    route: &Route,
    limits: &Limits,
    backend: &mut Backend,
    bash: Option<&BashTool>,
    interrupt: &Interrupt,
    events: &Events,
) -> Turn {
    let mut rounds = Rounds {
        messages: start,
        route,
        limits,
        backend,
        bash,
        interrupt,
        events,
        toolbox: toolbox::Toolbox::new(bash, limits.result.as_ref()),
        turn: Turn::start(route),
        chain: 0,
        nudged: false,
        answered: None,
    };
    for round in 1..=limits.max_rounds {
        if rounds.round(round).await.is_break() {
            break;
        }
    }
    Turn {
        messages: rounds.messages,
        ..rounds.turn
    }
}

/// The note before the last round: call `finish` now, or answer in text.
fn last_round_note(mode: FinishMode, with_result: bool) -> Message {
    let content = match mode {
        FinishMode::Tool => finish::last_round_note(with_result),
        FinishMode::Message => LAST_ROUND_NOTE.to_string(),
    };
    Message::user(content)
}

/// What the rounds of one turn share: its inputs, the turn as it grows, and what one round
/// leaves for the next.
struct Rounds<'a> {
    /// The conversation: the first request's, then what this turn adds.
    messages: Vec<Message>,
    route: &'a Route,
    limits: &'a Limits,
    backend: &'a mut Backend,
    bash: Option<&'a BashTool>,
    interrupt: &'a Interrupt,
    events: &'a Events,
    toolbox: toolbox::Toolbox<'a>,
    turn: Turn,
    /// Index into the tier's chain; a fallback moves it on for the rest of the turn.
    chain: usize,
    /// Whether the model was reminded to call `finish` already.
    nudged: bool,
    /// The complete text answer the reminder to call `finish` followed, until the model
    /// replies to it: that round failing, or another text, must not lose it.
    answered: Option<String>,
}

impl Rounds<'_> {
    /// One round: the limits checked, the model asked, its reply booked and answered (tools
    /// run, a reminder, the success check). `Break` ends the turn, whose outcome is set.
    async fn round(&mut self, round: u32) -> ControlFlow<()> {
        let answer = self.answered.take();
        let shape = self.begin(round)?;
        let asked = round::ask(
            self.backend,
            self.route,
            &mut self.chain,
            round::Prompt {
                messages: &mut self.messages,
                tools: self.toolbox.specs(),
                finish: self.toolbox.finish_spec(),
            },
            shape,
            self.interrupt,
            &mut self.turn,
        );
        let round::Answer {
            model,
            mut reply,
            shape,
        } = match asked.await {
            Ok(answer) => answer,
            Err(outcome) => return self.rescue(outcome, answer.as_deref(), round).await,
        };
        let record = self.book(&model, &reply, shape, round);
        let text = self.take_reply(&mut reply, answer.as_deref(), round);
        let calls = reply.tool_calls.len();
        match step::after_reply(shape, calls, self.turn.reply.is_some(), self.nudged) {
            step::Next::RunTools => {
                self.run_tools(&reply, shape, round, record, text.dropped)
                    .await
            }
            step::Next::Nudge => self.nudge(text.text, &reply, round, record),
            step::Next::Finish { outcome, stand_in } => {
                if let Some(text) = stand_in {
                    self.turn.reply = Some(text.to_string());
                }
                self.turn.log.push(record);
                match self.verify(outcome, round).await {
                    check::After::End(outcome) => self.end(outcome),
                    // The reply is in the conversation already; the failure follows it.
                    check::After::Retry { feedback } => {
                        self.messages.push(Message::user(feedback));
                        ControlFlow::Continue(())
                    }
                }
            }
        }
    }

    /// Before the model call: the limits checked (`Break` when they stop the turn), then the
    /// round's shape, with the note before the last round, and `round.started`.
    fn begin(&mut self, round: u32) -> ControlFlow<(), step::Shape> {
        let max_rounds = self.limits.max_rounds;
        let (used, spent) = (self.turn.usage.total_tokens, self.turn.cost_usd);
        let budget = &self.limits.budget;
        if let Some(stop) = step::before_round(self.interrupt.received(), budget, used, spent) {
            if let TurnOutcome::Budget { stop } = &stop {
                info!("{}; stopping before round {round}", stop.describe());
            }
            return self.end(stop);
        }
        let mode = self.limits.finish;
        let shape = step::shape(round, max_rounds, self.bash.is_some(), mode);
        if shape.last_round_note {
            self.messages
                .push(last_round_note(mode, self.limits.result.is_some()));
        }
        self.turn.rounds = round;
        self.events.emit(Event::RoundStarted {
            round,
            max_rounds,
            model: self
                .route
                .models
                .get(self.chain)
                .cloned()
                .unwrap_or_default(),
        });
        ControlFlow::Continue(shape)
    }

    /// Books the reply of `model` on the turn and emits `round.completed`; the round's
    /// record, to which the tool events are added.
    fn book(&mut self, model: &str, reply: &Reply, shape: step::Shape, round: u32) -> RoundRecord {
        let record = round::account(&mut self.turn, self.limits, model, reply, shape);
        self.events.emit(Event::RoundCompleted {
            round,
            max_rounds: self.limits.max_rounds,
            model: model.to_string(),
            usage: record.usage,
            cost_usd: record.cost_usd,
            latency_ms: record.latency_ms,
            retries: record.retries,
            tool_calls: reply.tool_calls.len(),
        });
        record
    }

    /// A reply without a tool call where `finish` ends the turn: the model is reminded once;
    /// a complete `text` answer is kept in case the next round fails.
    fn nudge(
        &mut self,
        text: Option<String>,
        reply: &Reply,
        round: u32,
        record: RoundRecord,
    ) -> ControlFlow<()> {
        let max_rounds = self.limits.max_rounds;
        info!("round {round}/{max_rounds}: no tool call; reminding the model of `finish`");
        self.nudged = true;
        self.answered = text.filter(|_| answer::complete(reply.finish_reason.as_deref()));
        self.messages.push(Message::user(finish::NUDGE));
        self.turn.log.push(record);
        ControlFlow::Continue(())
    }

    /// The turn when the model call failed: it fails, unless the failed round is the reply
    /// to the reminder to call `finish` and the text answer before it stands.
    async fn rescue(
        &mut self,
        outcome: TurnOutcome,
        answer: Option<&str>,
        round: u32,
    ) -> ControlFlow<()> {
        let max_rounds = self.limits.max_rounds;
        let Some(rescued) = answer::rescue(&outcome, answer) else {
            return self.end(outcome);
        };
        info!(
            "round {round}/{max_rounds}: the text answer before the reminder stands: {}",
            rescued.error
        );
        self.turn.reply = Some(rescued.reply);
        self.turn.noted_error = Some(rescued.error);
        // The answer is final: a failed check cannot be retried without the model.
        let outcome = match self.verify(TurnOutcome::Completed, max_rounds).await {
            check::After::End(outcome) => outcome,
            check::After::Retry { .. } => TurnOutcome::CheckFailed,
        };
        self.end(outcome)
    }

    /// Takes the reply into the turn: its text as the turn's reply (kept with the answer
    /// before the reminder), its tool calls capped, the reply added to the conversation.
    fn take_reply(&mut self, reply: &mut Reply, answer: Option<&str>, round: u32) -> TakenReply {
        let text = reply.content.clone().filter(|c| !c.trim().is_empty());
        if let Some(text) = &text {
            self.turn.reply = Some(match (answer, reply.tool_calls.is_empty()) {
                (Some(first), true) => answer::kept(first, text),
                _ => text.clone(),
            });
        }
        let dropped = step::cap_calls(&mut reply.tool_calls, self.limits.max_tool_calls);
        if let Some(note) = &dropped {
            info!("round {round}: {note}");
        }
        self.messages.push(Message::Assistant {
            content: reply.content.clone(),
            tool_calls: reply.tool_calls.clone(),
            extra: reply.extra.clone(),
        });
        TakenReply { text, dropped }
    }

    /// Runs the reply's tool calls, their results (and the note on dropped calls) added to
    /// the conversation; an accepted `finish` is checked, and the last round ends the turn.
    async fn run_tools(
        &mut self,
        reply: &Reply,
        shape: step::Shape,
        round: u32,
        mut record: RoundRecord,
        dropped: Option<String>,
    ) -> ControlFlow<()> {
        let calls = &reply.tool_calls;
        let handled = round::run_tools(
            &self.toolbox,
            calls,
            shape,
            self.interrupt,
            round,
            self.events,
        )
        .await;
        let mut images = Vec::new();
        for (call, run) in calls.iter().zip(handled.runs) {
            self.messages.push(Message::Tool {
                tool_call_id: call.id.clone(),
                content: run.result,
            });
            record.tools.push(run.event);
            images.extend(run.image);
        }
        // A tool message carries text only through every proxy: the images `read_image`
        // read come in one user message after the results.
        if !images.is_empty() {
            let mut parts = vec![Part::Text {
                text: IMAGES_NOTE.to_string(),
            }];
            parts.extend(images);
            self.messages.push(Message::User {
                content: Content::Parts(parts),
            });
        }
        if let Some(note) = dropped {
            self.messages.push(Message::user(note));
        }
        self.turn.log.push(record);
        if let Some(done) = handled.finish {
            let outcome = match handled.result_errors {
                errors if errors.is_empty() => step::finished(done.status),
                errors => TurnOutcome::ResultInvalid { errors },
            };
            self.turn.reply = Some(done.summary.clone());
            self.turn.finish = Some(done);
            match self.verify(outcome, round).await {
                check::After::End(outcome) => return self.end(outcome),
                check::After::Retry { feedback } => {
                    // The task is not done after all: the turn goes on.
                    self.turn.finish = None;
                    self.messages.push(Message::user(feedback));
                    return ControlFlow::Continue(());
                }
            }
        }
        if shape.last {
            return self.end(TurnOutcome::MaxRounds);
        }
        ControlFlow::Continue(())
    }

    /// Runs the success check when the model says the task is done (a `finish` with `done`,
    /// or a message-style answer, the forced last one included) and says what the turn does
    /// next.
    async fn verify(&mut self, outcome: TurnOutcome, round: u32) -> check::After {
        let checked = match (&outcome, self.limits.check.as_ref(), self.bash) {
            (TurnOutcome::Completed | TurnOutcome::MaxRounds, Some(spec), Some(tool)) => {
                check::run(spec, tool, self.interrupt, &mut self.turn.check).await
            }
            _ => check::CheckVerdict::Passed,
        };
        check::after(checked, outcome, round < self.limits.max_rounds)
    }

    /// Ends the turn with `outcome`.
    fn end<C>(&mut self, outcome: TurnOutcome) -> ControlFlow<(), C> {
        self.turn.outcome = outcome;
        ControlFlow::Break(())
    }
}

/// What [`Rounds::take_reply`] leaves for the rest of the round.
struct TakenReply {
    /// The reply's text, when it has any besides white space.
    text: Option<String>,
    /// The note on the tool calls over `max_tool_calls`, which were dropped.
    dropped: Option<String>,
}

impl Turn {
    /// A turn before its first round: no reply, nothing spent, the chain's first model.
    pub(crate) fn start(route: &Route) -> Turn {
        Turn {
            outcome: TurnOutcome::Completed,
            reply: None,
            rounds: 0,
            usage: Usage::default(),
            cost_usd: None,
            model: route.model().to_string(),
            skipped: Vec::new(),
            log: Vec::new(),
            recorded: Vec::new(),
            check: None,
            finish: None,
            messages: Vec::new(),
            noted_error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::{Source, Task};
    use crate::llm::cassette::Replayer;
    use pretty_assertions::assert_eq;

    fn task() -> Task {
        Task {
            id: "demo-1".into(),
            source: Source::Demo,
            subject: "s".into(),
            class: None,
            prompt: "What is 2+2?".into(),
            reply: None,
        }
    }

    fn route() -> Route {
        Route {
            class: None,
            tier: "primary".into(),
            models: vec!["m1".into(), "m2".into()],
            workflow: None,
            vision: false,
        }
    }

    fn limits(max_rounds: u32, budget: BudgetConfig) -> Limits {
        Limits {
            max_rounds,
            max_tool_calls: 0,
            budget,
            prices: BTreeMap::new(),
            check: None,
            finish: FinishMode::Message,
            result: None,
        }
    }

    /// Runs a turn without tools against a cassette of these `choices[0].message` values.
    async fn turn_of(messages: &[serde_json::Value], limits: &Limits, signal: Option<i32>) -> Turn {
        let choices: Vec<_> = messages
            .iter()
            .map(|m| serde_json::json!({"message": m}))
            .collect();
        turn_of_choices(&choices, limits, signal).await
    }

    /// [`turn_of`] with whole `choices[0]` values (`finish_reason` beside the message).
    async fn turn_of_choices(
        choices: &[serde_json::Value],
        limits: &Limits,
        signal: Option<i32>,
    ) -> Turn {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let replies: Vec<serde_json::Value> = choices
            .iter()
            .map(|c| {
                serde_json::json!({"model": "m1", "response": {"choices": [c],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}})
            })
            .collect();
        let cassette = serde_json::json!({"harness_cassette": 1, "replies": replies});
        std::fs::write(&path, cassette.to_string()).unwrap();
        let mut backend = Backend::Replay(Replayer::load(&path).unwrap());
        let interrupt = Interrupt::new();
        if let Some(s) = signal {
            interrupt.trigger(s);
        }
        let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 2).unwrap();
        let system = system_prompt(
            "demo",
            limits.max_rounds,
            None,
            limits.finish,
            rules::World::here(day),
        );
        let start = vec![
            Message::System { content: system },
            Message::User {
                content: task().prompt.into(),
            },
        ];
        run(
            start,
            &route(),
            limits,
            &mut backend,
            None,
            &interrupt,
            &Events::off(),
        )
        .await
    }

    #[test]
    fn the_system_prompt_without_tools_is_the_same_bytes_each_time() {
        let world = rules::World {
            date: chrono::NaiveDate::from_ymd_opt(2026, 12, 2).unwrap(),
            os: "linux",
            arch: "aarch64",
        };
        let prompt = || system_prompt("demo", 8, None, FinishMode::Message, world);
        assert_eq!(
            prompt(),
            "You are an agent run by `harness` for the \"demo\" vertical. You get ONE bounded turn of at most 8 model rounds to work on the task below. You have no tools in this turn: answer from the task text alone. When you are done, reply with your final answer in Markdown and no tool call: that reply is saved verbatim as the task's REPORT, so make it complete and self-contained.\n\nRules of this turn:\n- Date: 2026-12-02 (UTC). System: Linux aarch64."
        );
        assert_eq!(prompt(), prompt());
    }

    #[tokio::test]
    async fn a_text_reply_completes_the_turn() {
        let t = turn_of(
            &[serde_json::json!({"content": "4"})],
            &limits(3, Default::default()),
            None,
        )
        .await;
        assert_eq!(t.outcome.stop_reason(), "completed");
        assert_eq!(
            (t.rounds, t.reply.as_deref(), t.model.as_str()),
            (1, Some("4"), "m1")
        );
        assert_eq!(t.usage.total_tokens, 10);
        assert_eq!((t.log.len(), t.recorded.len()), (1, 1));
        assert_eq!(t.log[0].tools, Vec::new());
    }

    #[tokio::test]
    async fn a_tool_call_without_tools_completes_with_a_stand_in() {
        let call = serde_json::json!({"tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]});
        let t = turn_of(&[call], &limits(3, Default::default()), None).await;
        assert_eq!(t.outcome.stop_reason(), "completed");
        assert_eq!(t.reply.as_deref(), Some(step::NO_ANSWER));
    }

    #[tokio::test]
    async fn an_exhausted_cassette_fails_the_turn_without_fallback() {
        let t = turn_of(&[], &limits(3, Default::default()), None).await;
        assert_eq!(t.outcome.stop_reason(), "llm_error");
        assert!(t.outcome.is_failure());
        assert_eq!((t.rounds, t.skipped.len()), (1, 0));
    }

    #[tokio::test]
    async fn limits_stop_the_turn_before_the_model_is_called() {
        let spent = BudgetConfig {
            max_total_tokens: Some(0),
            max_cost_usd: None,
        };
        let t = turn_of(
            &[serde_json::json!({"content": "4"})],
            &limits(3, spent),
            None,
        )
        .await;
        assert_eq!((t.outcome.stop_reason(), t.rounds), ("budget", 0));
        assert!(!t.outcome.is_failure());
        let t = turn_of(
            &[serde_json::json!({"content": "4"})],
            &limits(3, Default::default()),
            Some(15),
        )
        .await;
        assert!(matches!(t.outcome, TurnOutcome::Interrupted { signal: 15 }));
        assert_eq!((t.rounds, t.recorded.len()), (0, 0));
    }

    fn finish_call(id: &str, args: &str) -> serde_json::Value {
        serde_json::json!({"tool_calls": [{"id": id, "type": "function",
            "function": {"name": "finish", "arguments": args}}]})
    }

    fn tool_limits(max_rounds: u32) -> Limits {
        Limits {
            finish: FinishMode::Tool,
            ..limits(max_rounds, Default::default())
        }
    }

    #[tokio::test]
    async fn a_text_reply_is_nudged_once_then_finish_ends_the_turn() {
        let t = turn_of(
            &[
                serde_json::json!({"content": "I think it is 4."}),
                finish_call(
                    "f1",
                    r#"{"status":"needs_input","summary":"Asked.","question":"Base 10?"}"#,
                ),
            ],
            &tool_limits(4),
            None,
        )
        .await;
        assert_eq!(t.outcome.stop_reason(), "needs_input");
        assert_eq!(t.rounds, 2);
        assert_eq!(t.reply.as_deref(), Some("Asked."));
        let f = t.finish.unwrap();
        assert_eq!(
            (f.status, f.question.as_deref()),
            (FinishStatus::NeedsInput, Some("Base 10?"))
        );
    }

    #[tokio::test]
    async fn an_invalid_finish_goes_back_and_calls_after_finish_are_not_run() {
        let both = serde_json::json!({"tool_calls": [
            {"id": "f2", "type": "function", "function": {"name": "finish", "arguments": r#"{"status":"failed","summary":"No access."}"#}},
            {"id": "b1", "type": "function", "function": {"name": "bash", "arguments": r#"{"command":"ls"}"#}}]});
        let t = turn_of(
            &[
                finish_call("f1", r#"{"status":"needs_input","summary":"s"}"#),
                both,
            ],
            &tool_limits(4),
            None,
        )
        .await;
        assert!(matches!(
            t.outcome,
            TurnOutcome::AgentFailed {
                status: FinishStatus::Failed
            }
        ));
        assert_eq!(t.outcome.stop_reason(), "agent_failed");
        assert!(!t.outcome.is_failure());
        assert!(
            matches!(&t.log[0].tools[0], ToolEvent::Invalid { reason } if reason.contains("needs a `question`"))
        );
        assert_eq!(
            t.log[1].tools,
            vec![
                ToolEvent::Finished {
                    status: "failed".into()
                },
                ToolEvent::Invalid {
                    reason: finish::AFTER_FINISH.into()
                }
            ]
        );
    }

    #[tokio::test]
    async fn a_text_answer_survives_the_reminder_round() {
        // Text again: both texts are the reply.
        let t = turn_of(
            &[
                serde_json::json!({"content": "It is 4."}),
                serde_json::json!({"content": "In base 3 it is 11."}),
            ],
            &tool_limits(4),
            None,
        )
        .await;
        assert_eq!((t.outcome.stop_reason(), t.rounds), ("completed", 2));
        assert_eq!(t.reply.as_deref(), Some("It is 4.\n\nIn base 3 it is 11."));
        assert_eq!(t.noted_error, None);
        // The reminder round fails (the cassette runs out): the answer stands, noted.
        let t = turn_of(
            &[serde_json::json!({"content": "It is 4."})],
            &tool_limits(4),
            None,
        )
        .await;
        assert_eq!((t.outcome.stop_reason(), t.rounds), ("completed", 2));
        assert!(!t.outcome.is_failure());
        let reply = t.reply.unwrap();
        assert!(reply.starts_with("It is 4.\n\n_[harness] "), "{reply}");
        assert!(t.noted_error.is_some());
        // An answer cut by the token limit is no complete answer: the failure stands.
        let cut = serde_json::json!({"message": {"content": "It is"}, "finish_reason": "length"});
        let t = turn_of_choices(&[cut], &tool_limits(4), None).await;
        assert_eq!(t.outcome.stop_reason(), "llm_error");
        assert_eq!(t.reply.as_deref(), Some("It is"));
    }

    #[tokio::test]
    async fn without_finish_the_last_round_is_the_cap() {
        let t = turn_of(
            &[
                serde_json::json!({"content": "a"}),
                serde_json::json!({"content": "b"}),
            ],
            &tool_limits(2),
            None,
        )
        .await;
        assert_eq!((t.outcome.stop_reason(), t.rounds), ("max_rounds", 2));
        // The reminder's text answer is kept with the one before it.
        assert_eq!(t.reply.as_deref(), Some("a\n\nb"));
        assert!(t.finish.is_none());
    }
}
