//! Turn stage, one round's adapters: the model call ([`ask`]: the chain's current model,
//! falling back along the chain as [`super::step::after_error`] decides, cut short by a
//! signal), the bookkeeping of a reply ([`account`]) and the tool calls ([`run_tools`]).

use tracing::info;

use super::step::{self, OnError, Shape};
use super::{RoundRecord, Turn, TurnOutcome};
use crate::events::{Event, Events};
use crate::llm::cassette::Recorded;
use crate::llm::wire::{Message, ToolCall};
use crate::llm::{Backend, Reply};
use crate::routing::Route;
use crate::signals::Interrupt;
use crate::tools::{BashTool, ToolEvent, ToolRun};

/// What this round sends besides the model: the conversation so far and the tools offered.
#[derive(Clone, Copy)]
pub struct Prompt<'a> {
    /// Every message of the turn, in order.
    pub messages: &'a [Message],
    /// The tool specs offered (empty on a tool-less round is decided by the shape).
    pub tools: &'a [serde_json::Value],
}

/// A model's reply to this round's request, with the model that gave it.
pub struct Answer {
    /// The concrete model.
    pub model: String,
    /// Its reply.
    pub reply: Reply,
}

/// Sends the round's request to the chain's model at `chain`, moving `chain` on along the
/// tier's chain where [`step::after_error`] says to; the skipped models go to `turn`. `Err`
/// is how the turn ends: a final error or a signal.
pub async fn ask(
    backend: &mut Backend,
    route: &Route,
    chain: &mut usize,
    prompt: Prompt<'_>,
    shape: Shape,
    interrupt: &Interrupt,
    turn: &mut Turn,
) -> Result<Answer, TurnOutcome> {
    let (round, max_rounds) = (shape.round, shape.max_rounds);
    loop {
        let model = route.models.get(*chain).cloned().unwrap_or_default();
        let request = step::request(&model, prompt.messages, shape, prompt.tools);
        let result = tokio::select! {
            r = backend.chat(&request) => r,
            signal = interrupt.wait() => return Err(TurnOutcome::Interrupted { signal }),
        };
        let error = match result {
            Ok(reply) => return Ok(Answer { model, reply }),
            Err(error) => error,
        };
        let has_next = *chain + 1 < route.models.len();
        match step::after_error(error, &model, &route.tier, has_next) {
            OnError::FallBack { skipped } => {
                let next = route.models.get(*chain + 1).map_or("", String::as_str);
                info!(
                    "round {round}/{max_rounds}: {model} skipped, falling back to {next}: {}",
                    skipped.reason
                );
                turn.skipped.push(skipped);
                *chain += 1;
            }
            OnError::Stop(outcome) => {
                if let TurnOutcome::LlmFailed { error }
                | TurnOutcome::Budget {
                    stop: super::BudgetStop::Proxy { error },
                } = &outcome
                {
                    info!("round {round}/{max_rounds}: {model} failed: {error}");
                }
                return Err(outcome);
            }
        }
    }
}

/// Books a reply on the turn (model, tokens, cost, the raw reply for `--record`), narrates
/// it, and returns the round's record, to which the tool events are added.
pub fn account(
    turn: &mut Turn,
    limits: &super::Limits,
    model: &str,
    reply: &Reply,
    shape: Shape,
) -> RoundRecord {
    let usage = reply.usage.unwrap_or_default();
    let cost = step::round_cost(reply.cost_usd, limits.prices.get(model), &usage);
    turn.model = model.to_string();
    turn.usage.add(&usage);
    turn.cost_usd = step::add_cost(turn.cost_usd, cost);
    turn.recorded.push(Recorded {
        model: model.to_string(),
        response: reply.raw.clone(),
    });
    let calls = reply.tool_calls.len();
    info!(
        "round {}/{}: {model} answered ({} tokens{}, {:.1}s{}), {calls} tool call{}",
        shape.round,
        shape.max_rounds,
        usage.total_tokens,
        cost.map_or_else(String::new, |c| format!(", {c} USD")),
        reply.latency.as_secs_f64(),
        step::retry_note(reply.retries),
        if calls == 1 { "" } else { "s" }
    );
    RoundRecord {
        round: shape.round,
        model: model.to_string(),
        usage,
        cost_usd: cost,
        latency_ms: step::duration_ms(reply.latency),
        retries: reply.retries,
        tools: Vec::new(),
    }
}

/// Runs the tool calls in order, one result each. Every call gets exactly one result, even
/// after an interrupt, so the transcript stays well-formed for a later resume.
pub async fn run_tools(
    tool: &BashTool,
    calls: &[ToolCall],
    interrupt: &Interrupt,
    round: u32,
    events: &Events,
) -> Vec<ToolRun> {
    let mut runs = Vec::with_capacity(calls.len());
    for call in calls {
        events.emit(Event::ToolStarted {
            round,
            call_id: call.id.clone(),
            tool: call.function.name.clone(),
            command: serde_json::from_str::<serde_json::Value>(&call.function.arguments)
                .ok()
                .and_then(|a| a.get("command")?.as_str().map(String::from)),
        });
        let run = if interrupt.received().is_some() {
            let reason = "not run: the harness was interrupted".to_string();
            ToolRun {
                result: reason.clone(),
                event: ToolEvent::Invalid { reason },
            }
        } else {
            tool.dispatch(call, interrupt).await
        };
        info!("round {round}: {}", run.event.narrate());
        events.emit(Event::tool_completed(round, &call.id, &run.event));
        runs.push(run);
    }
    runs
}
