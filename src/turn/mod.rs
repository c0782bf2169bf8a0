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

pub mod check;
mod round;
pub mod step;

use std::collections::BTreeMap;

use serde::Serialize;
use tracing::info;

use crate::config::{BudgetConfig, CheckSpec, ModelPrice};
use crate::events::{Event, Events};
use crate::intake::Task;
use crate::llm::cassette::Recorded;
pub use crate::llm::preflight::SkippedModel;
use crate::llm::wire::{Message, Usage};
use crate::llm::{Backend, LlmError};
use crate::routing::Route;
use crate::signals::Interrupt;
use crate::tools::{BashTool, ToolEvent};

/// How the turn ended.
#[derive(Debug, Clone)]
pub enum TurnOutcome {
    /// The model answered without calling a tool.
    Completed,
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
}

impl TurnOutcome {
    /// Whether the turn failed (exit 4): an llm error or the proxy's budget refusal.
    pub fn is_failure(&self) -> bool {
        match self {
            TurnOutcome::LlmFailed { .. }
            | TurnOutcome::Budget {
                stop: BudgetStop::Proxy { .. },
            } => true,
            TurnOutcome::Completed
            | TurnOutcome::MaxRounds
            | TurnOutcome::CheckFailed
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
            TurnOutcome::MaxRounds => "max_rounds",
            TurnOutcome::Budget { .. } => "budget",
            TurnOutcome::LlmFailed { .. } => "llm_error",
            TurnOutcome::Interrupted { .. } => "interrupted",
            TurnOutcome::CheckFailed => "check_failed",
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
    /// `[budget]`.
    pub budget: BudgetConfig,
    /// Per concrete model, for replies whose cost the endpoint does not report.
    pub prices: BTreeMap<String, ModelPrice>,
    /// The success check of this task's class, run when the model says it is done.
    pub check: Option<CheckSpec>,
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
    /// The success check's runs, when the task has a check and it ran.
    pub check: Option<check::CheckRecord>,
}

/// The system prompt: what the harness is, the bound, the tool contract, the REPORT.
pub fn system_prompt(vertical: &str, max_rounds: u32, tools: Option<&BashTool>) -> String {
    let tool_text = tools.map_or(
        "You have no tools in this turn: answer from the task text alone.",
        BashTool::contract,
    );
    format!(
        "You are an agent run by `harness` for the \"{vertical}\" vertical. You get ONE bounded turn of at most {max_rounds} model rounds to work on the task below. {tool_text} When you are done, reply with your final answer in Markdown and no tool call: that reply is saved verbatim as the task's REPORT, so make it complete and self-contained."
    )
}

/// Text added before the last round so the model answers instead of asking for a tool.
pub const LAST_ROUND_NOTE: &str = "[harness] This is the last round of this turn: tools are no longer available. Reply now with your final answer (what you did, what you found, what is left).";

/// Runs the bounded loop: before each model call the limits are checked; a reply either
/// ends the turn or has its tool calls run, whose results start the next round.
// The stage's inputs, each a plain value from `once`; a bundle struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    task: &Task,
    route: &Route,
    limits: &Limits,
    system: String,
    backend: &mut Backend,
    bash: Option<&BashTool>,
    interrupt: &Interrupt,
    events: &Events,
) -> Turn {
    let max_rounds = limits.max_rounds;
    let tool_specs = bash.map(BashTool::specs).unwrap_or_default();
    let mut messages = vec![
        Message::System { content: system },
        Message::User {
            content: task.prompt.clone(),
        },
    ];
    let mut turn = Turn::start(route);
    // Index into the tier's chain; a fallback moves it on for the rest of the turn.
    let mut chain = 0;
    for round in 1..=max_rounds {
        let (used, spent) = (turn.usage.total_tokens, turn.cost_usd);
        if let Some(stop) = step::before_round(interrupt.received(), &limits.budget, used, spent) {
            if let TurnOutcome::Budget { stop } = &stop {
                info!("{}; stopping before round {round}", stop.describe());
            }
            turn.outcome = stop;
            return turn;
        }
        let shape = step::shape(round, max_rounds, bash.is_some());
        if shape.last_round_note {
            messages.push(Message::User {
                content: LAST_ROUND_NOTE.to_string(),
            });
        }
        turn.rounds = round;
        events.emit(Event::RoundStarted {
            round,
            max_rounds,
            model: route.models.get(chain).cloned().unwrap_or_default(),
        });
        let asked = round::ask(
            backend,
            route,
            &mut chain,
            round::Prompt {
                messages: &messages,
                tools: &tool_specs,
            },
            shape,
            interrupt,
            &mut turn,
        );
        let round::Answer { model, reply } = match asked.await {
            Ok(answer) => answer,
            Err(outcome) => {
                turn.outcome = outcome;
                return turn;
            }
        };
        let mut record = round::account(&mut turn, limits, &model, &reply, shape);
        events.emit(Event::RoundCompleted {
            round,
            model: model.clone(),
            usage: record.usage,
            cost_usd: record.cost_usd,
            latency_ms: record.latency_ms,
            retries: record.retries,
            tool_calls: reply.tool_calls.len(),
        });
        let text = reply.content.clone().filter(|c| !c.trim().is_empty());
        if text.is_some() {
            turn.reply = text;
        }
        match (
            step::after_reply(shape, reply.tool_calls.len(), turn.reply.is_some()),
            bash,
        ) {
            (step::Next::RunTools, Some(tool)) => {
                messages.push(Message::Assistant {
                    content: reply.content.clone(),
                    tool_calls: reply.tool_calls.clone(),
                });
                let runs =
                    round::run_tools(tool, &reply.tool_calls, interrupt, round, events).await;
                for (call, run) in reply.tool_calls.iter().zip(runs) {
                    messages.push(Message::Tool {
                        tool_call_id: call.id.clone(),
                        content: run.result,
                    });
                    record.tools.push(run.event);
                }
                turn.log.push(record);
            }
            (step::Next::Finish { outcome, stand_in }, _) => {
                if let Some(text) = stand_in {
                    turn.reply = Some(text.to_string());
                }
                turn.log.push(record);
                let checked = match (&outcome, limits.check.as_ref(), bash) {
                    (TurnOutcome::Completed | TurnOutcome::MaxRounds, Some(spec), Some(tool)) => {
                        check::run(spec, tool, interrupt, &mut turn.check).await
                    }
                    _ => check::CheckVerdict::Passed,
                };
                match check::after(checked, outcome, round < max_rounds) {
                    check::After::End(outcome) => {
                        turn.outcome = outcome;
                        return turn;
                    }
                    check::After::Retry { feedback } => {
                        messages.push(Message::Assistant {
                            content: Some(reply.content.clone().unwrap_or_default()),
                            tool_calls: Vec::new(),
                        });
                        messages.push(Message::User { content: feedback });
                    }
                }
            }
            // after_reply runs tools only in a round that offers them, which needs bash.
            (step::Next::RunTools, None) => {
                turn.log.push(record);
                return turn;
            }
        }
    }
    turn
}

impl Turn {
    /// A turn before its first round: no reply, nothing spent, the chain's first model.
    fn start(route: &Route) -> Turn {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::Source;
    use crate::llm::cassette::Replayer;
    use pretty_assertions::assert_eq;

    fn task() -> Task {
        Task {
            id: "demo-1".into(),
            source: Source::Demo,
            subject: "s".into(),
            class: None,
            prompt: "What is 2+2?".into(),
        }
    }

    fn route() -> Route {
        Route {
            class: None,
            tier: "primary".into(),
            models: vec!["m1".into(), "m2".into()],
        }
    }

    fn limits(max_rounds: u32, budget: BudgetConfig) -> Limits {
        Limits {
            max_rounds,
            budget,
            prices: BTreeMap::new(),
            check: None,
        }
    }

    /// Runs a turn without tools against a cassette of these `choices[0].message` values.
    async fn turn_of(messages: &[serde_json::Value], limits: &Limits, signal: Option<i32>) -> Turn {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let replies: Vec<serde_json::Value> = messages
            .iter()
            .map(|m| {
                serde_json::json!({"model": "m1", "response": {"choices": [{"message": m}],
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
        let system = system_prompt("demo", limits.max_rounds, None);
        run(
            &task(),
            &route(),
            limits,
            system,
            &mut backend,
            None,
            &interrupt,
            &Events::off(),
        )
        .await
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
}
