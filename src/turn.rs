//! Turn stage: the bounded chat loop. A task, a route, limits, a backend and the bash tool
//! in; a [`Turn`] out, whose [`TurnOutcome`] is a closed set. Never panics, never exits: every
//! way the loop can end is a value the REPORT writer and the exit mapping match on.
//!
//! Before each round the `[budget]` limits are checked; each round's cost is the endpoint's
//! own figure or usage x `[models.prices]`. When a model is unknown to the endpoint or its
//! retries run out, the next model of the tier's chain answers the same round, and stays.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use tracing::info;

use crate::config::{BudgetConfig, ModelPrice};
use crate::intake::Task;
use crate::llm::cassette::Recorded;
pub use crate::llm::preflight::SkippedModel;
use crate::llm::wire::{ChatRequest, Message, Usage};
use crate::llm::{Backend, LlmError, LlmErrorKind};
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
    /// SIGINT/SIGTERM stopped the turn.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
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

/// Runs the bounded loop.
pub async fn run(
    task: &Task,
    route: &Route,
    limits: &Limits,
    system: String,
    backend: &mut Backend,
    bash: Option<&BashTool>,
    interrupt: &Interrupt,
) -> Turn {
    let max_rounds = limits.max_rounds;
    let tool_specs = bash.map(BashTool::specs).unwrap_or_default();
    let mut messages = vec![
        Message::System { content: system },
        Message::User {
            content: task.prompt.clone(),
        },
    ];
    let mut turn = Turn {
        outcome: TurnOutcome::Completed,
        reply: None,
        rounds: 0,
        usage: Usage::default(),
        cost_usd: None,
        model: route.model().to_string(),
        skipped: Vec::new(),
        log: Vec::new(),
        recorded: Vec::new(),
    };
    // Index into the tier's chain; a fallback moves it on for the rest of the turn.
    let mut chain = 0;
    for round in 1..=max_rounds {
        if let Some(signal) = interrupt.received() {
            turn.outcome = TurnOutcome::Interrupted { signal };
            return turn;
        }
        if let Some(stop) = budget_reached(&limits.budget, &turn) {
            info!("{}; stopping before round {round}", stop.describe());
            turn.outcome = TurnOutcome::Budget { stop };
            return turn;
        }
        let last = round == max_rounds;
        let offer_tools = bash.is_some() && !last;
        if bash.is_some() && last {
            messages.push(Message::User {
                content: LAST_ROUND_NOTE.to_string(),
            });
        }
        turn.rounds = round;
        let (model, reply) = loop {
            let model = route.models.get(chain).cloned().unwrap_or_default();
            let request = ChatRequest {
                model: &model,
                messages: &messages,
                tools: offer_tools.then_some(&tool_specs[..]),
                stream: false,
                stream_options: None,
            };
            let result = tokio::select! {
                r = backend.chat(&request) => r,
                signal = interrupt.wait() => {
                    turn.outcome = TurnOutcome::Interrupted { signal };
                    return turn;
                }
            };
            let error = match result {
                Ok(reply) => break (model, reply),
                Err(error) => explain(error, &model, &route.tier),
            };
            let next = route.models.get(chain + 1);
            if let (Some(next), true) = (next, falls_back(error.kind)) {
                info!(
                    "round {round}/{max_rounds}: {model} skipped, falling back to {next}: {error}"
                );
                turn.skipped.push(SkippedModel {
                    model,
                    reason: error.message,
                });
                chain += 1;
                continue;
            }
            info!("round {round}/{max_rounds}: {model} failed: {error}");
            turn.outcome = match error.kind {
                LlmErrorKind::Budget => TurnOutcome::Budget {
                    stop: BudgetStop::Proxy { error },
                },
                LlmErrorKind::AuthRejected
                | LlmErrorKind::UnknownModel
                | LlmErrorKind::Rejected
                | LlmErrorKind::Exhausted
                | LlmErrorKind::Replay => TurnOutcome::LlmFailed { error },
            };
            return turn;
        };
        turn.model = model.clone();
        let usage = reply.usage.unwrap_or_default();
        turn.usage.add(&usage);
        let cost = reply
            .cost_usd
            .or_else(|| limits.prices.get(&model).map(|p| p.cost(&usage)))
            .map(round_usd);
        if let Some(c) = cost {
            turn.cost_usd = Some(round_usd(turn.cost_usd.unwrap_or(0.0) + c));
        }
        turn.recorded.push(Recorded {
            model: model.clone(),
            response: reply.raw.clone(),
        });
        info!(
            "round {round}/{max_rounds}: {model} answered ({} tokens{}, {:.1}s{}), {} tool call{}",
            usage.total_tokens,
            cost.map_or_else(String::new, |c| format!(", {c} USD")),
            reply.latency.as_secs_f64(),
            retry_note(reply.retries),
            reply.tool_calls.len(),
            if reply.tool_calls.len() == 1 { "" } else { "s" }
        );
        let mut record = RoundRecord {
            round,
            model: model.clone(),
            usage,
            cost_usd: cost,
            latency_ms: duration_ms(reply.latency),
            retries: reply.retries,
            tools: Vec::new(),
        };
        let text = reply.content.clone().filter(|c| !c.trim().is_empty());
        if text.is_some() {
            turn.reply = text;
        }
        let Some(tool) = bash.filter(|_| offer_tools && !reply.tool_calls.is_empty()) else {
            if !reply.tool_calls.is_empty() && turn.reply.is_none() {
                turn.reply = Some(
                    "(the model asked for a tool when no tool was available and gave no final answer)"
                        .to_string(),
                );
            }
            turn.outcome = if last && bash.is_some() {
                TurnOutcome::MaxRounds
            } else {
                TurnOutcome::Completed
            };
            turn.log.push(record);
            return turn;
        };
        messages.push(Message::Assistant {
            content: reply.content.clone(),
            tool_calls: reply.tool_calls.clone(),
        });
        for call in &reply.tool_calls {
            // Every call gets exactly one result, even after an interrupt, so the transcript
            // stays well-formed for a later resume.
            let run = if interrupt.received().is_some() {
                crate::tools::ToolRun {
                    result: "not run: the harness was interrupted".to_string(),
                    event: ToolEvent::Invalid {
                        reason: "not run: the harness was interrupted".to_string(),
                    },
                }
            } else {
                tool.dispatch(call, interrupt).await
            };
            info!("round {round}: {}", run.event.narrate());
            messages.push(Message::Tool {
                tool_call_id: call.id.clone(),
                content: run.result,
            });
            record.tools.push(run.event);
        }
        turn.log.push(record);
    }
    turn
}

/// The limit the turn has reached, if any: checked before each round.
fn budget_reached(budget: &BudgetConfig, turn: &Turn) -> Option<BudgetStop> {
    if let Some(limit) = budget.max_total_tokens {
        let used = turn.usage.total_tokens;
        if used >= limit {
            return Some(BudgetStop::Tokens { used, limit });
        }
    }
    if let (Some(limit), Some(spent)) = (budget.max_cost_usd, turn.cost_usd) {
        if spent >= limit {
            return Some(BudgetStop::Cost { spent, limit });
        }
    }
    None
}

/// Whether the next model of the chain may succeed where this one failed: the model is
/// unknown there, or its retries ran out. A rejected key, a spent budget or a malformed
/// request fail the same way on every model.
fn falls_back(kind: LlmErrorKind) -> bool {
    match kind {
        LlmErrorKind::UnknownModel | LlmErrorKind::Exhausted => true,
        LlmErrorKind::AuthRejected
        | LlmErrorKind::Budget
        | LlmErrorKind::Rejected
        | LlmErrorKind::Replay => false,
    }
}

/// Names the config entry an unknown model came from, so the user knows what to fix.
fn explain(error: LlmError, model: &str, tier: &str) -> LlmError {
    match error.kind {
        LlmErrorKind::UnknownModel => LlmError {
            message: format!(
                "model {model:?} (from [models].{tier}) is unknown to the endpoint: {}",
                error.message
            ),
            ..error
        },
        LlmErrorKind::AuthRejected
        | LlmErrorKind::Budget
        | LlmErrorKind::Rejected
        | LlmErrorKind::Exhausted
        | LlmErrorKind::Replay => error,
    }
}

/// Rounds to a nano-dollar, so sums of float prices print as the decimals they are.
fn round_usd(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

fn retry_note(retries: u32) -> String {
    match retries {
        0 => String::new(),
        1 => ", 1 retry".to_string(),
        n => format!(", {n} retries"),
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
