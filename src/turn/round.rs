//! Turn stage, one round's adapters: the model call ([`ask`]: the chain's current model,
//! falling back along the chain as [`super::step::after_error`] decides, cut short by a
//! signal; a forced `finish` the endpoint rejects is asked again without tools), the
//! bookkeeping of a reply ([`account`]) and the tool calls ([`run_tools`]: each read once
//! by the [`Toolbox`], then run; after `finish` nothing in the reply runs).

use tracing::info;

use super::finish::{self, Finish};
use super::step::{self, OnError, Shape};
use super::toolbox::{Call, Toolbox};
use super::{RoundRecord, Turn, TurnOutcome};
use crate::events::{Event, Events};
use crate::llm::cassette::Recorded;
use crate::llm::wire::{Message, ToolCall};
use crate::llm::{Backend, Reply};
use crate::routing::Route;
use crate::signals::Interrupt;
use crate::tools::{ToolEvent, ToolRun};

/// What this round sends besides the model: the conversation so far (its last note may be
/// reworded when a round loses its tools) and the specs of the turn's tools (`finish` is
/// added by the round's shape).
pub(super) struct Prompt<'a> {
    /// Every message of the turn, in order.
    pub messages: &'a mut [Message],
    /// The specs of the bash tool set (bash, and the file tools when on).
    pub tools: &'a [serde_json::Value],
    /// The `finish` spec (with the result schema, when there is one).
    pub finish: &'a serde_json::Value,
}

/// A model's reply to this round's request, with the model that gave it.
pub(super) struct Answer {
    /// The concrete model.
    pub model: String,
    /// Its reply.
    pub reply: Reply,
    /// The round as it was asked in the end (without tools after a rejected `tool_choice`).
    pub shape: Shape,
}

/// Sends the round's request to the chain's model at `chain`, moving `chain` on along the
/// tier's chain where [`step::after_error`] says to; the skipped models go to `turn`. `Err`
/// is how the turn ends: a final error or a signal.
pub(super) async fn ask(
    backend: &mut Backend,
    route: &Route,
    chain: &mut usize,
    prompt: Prompt<'_>,
    shape: Shape,
    interrupt: &Interrupt,
    turn: &mut Turn,
) -> Result<Answer, TurnOutcome> {
    let (round, max_rounds) = (shape.round, shape.max_rounds);
    let mut shape = shape;
    loop {
        let tools = step::tools(shape, prompt.tools, prompt.finish);
        let model = route.models.get(*chain).cloned().unwrap_or_default();
        let request = step::request(&model, prompt.messages, shape, &tools);
        let result = tokio::select! {
            r = backend.chat(&request) => r,
            signal = interrupt.wait() => return Err(TurnOutcome::Interrupted { signal }),
        };
        let error = match result {
            Ok(reply) => {
                return Ok(Answer {
                    model,
                    reply,
                    shape,
                })
            }
            Err(error) => error,
        };
        if step::drop_tool_choice(&error, shape) {
            info!(
                "round {round}/{max_rounds}: {model} refused the forced `finish` ({error}); asking again without tools"
            );
            shape = shape.without_tools();
            // The note before this round promised `finish`; the round has no tools now.
            if let Some(Message::User { content }) = prompt.messages.last_mut() {
                if content.starts_with(finish::LAST_ROUND_NOTE) {
                    *content = super::LAST_ROUND_NOTE.into();
                }
            }
            continue;
        }
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

/// Books a reply on the turn (model, tokens, cost, the raw reply for `--record`) and returns the round's record, to which the tool events are added.
pub(super) fn account(
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

/// The tool calls of one reply, handled.
pub(super) struct Handled {
    /// One run per call, in order.
    pub runs: Vec<ToolRun>,
    /// The accepted `finish` call, if the reply made one.
    pub finish: Option<Finish>,
    /// What is wrong with the result of the last round's `finish`, which ended the turn
    /// all the same (empty: nothing, or no such call).
    pub result_errors: Vec<String>,
}

impl Handled {
    /// Takes the `finish` that ends the turn (`errors`: what is wrong with the last round's
    /// result, which ends it all the same); its run says so to the model.
    fn accept(&mut self, finish: Finish, errors: Vec<String>) -> ToolRun {
        let result = if errors.is_empty() {
            finish::ACCEPTED
        } else {
            finish::RESULT_INVALID
        };
        let run = ToolRun {
            result: result.to_string(),
            event: ToolEvent::Finished {
                status: finish.status.as_str().to_string(),
            },
            egress_denied: Vec::new(),
            image: None,
        };
        self.finish = Some(finish);
        self.result_errors = errors;
        run
    }
}

/// Handles the tool calls in order, one result each: `bash` runs through the tool, a valid
/// `finish` is accepted and every later call of the reply is not run. Every call gets
/// exactly one result, even after an interrupt, so the conversation stays well-formed for
/// the next run.
pub(super) async fn run_tools(
    toolbox: &Toolbox<'_>,
    calls: &[ToolCall],
    shape: Shape,
    interrupt: &Interrupt,
    round: u32,
    events: &Events,
) -> Handled {
    let mut handled = Handled {
        runs: Vec::with_capacity(calls.len()),
        finish: None,
        result_errors: Vec::new(),
    };
    for call in calls {
        let read = toolbox.read(call, shape);
        events.emit(Event::ToolStarted {
            round,
            call_id: call.id.clone(),
            tool: call.function.name.clone(),
            command: read.command().map(String::from),
        });
        let run = if handled.finish.is_some() {
            not_run(finish::AFTER_FINISH)
        } else if interrupt.received().is_some() {
            not_run("not run: the harness was interrupted")
        } else {
            match read {
                Call::Finish(done) => handled.accept(done, Vec::new()),
                Call::ResultInvalid { finish, errors } => handled.accept(finish, errors),
                Call::Tool(request) => toolbox.run(request, interrupt).await,
                Call::Invalid(reason) => crate::tools::invalid(reason),
                Call::NotRun(reason) => not_run(&reason),
            }
        };
        events.emit(Event::tool_completed(
            round,
            &call.id,
            &call.function.name,
            &run.event,
        ));
        for refusal in &run.egress_denied {
            events.emit(Event::EgressDenied {
                round,
                call_id: call.id.clone(),
                host: refusal.host.clone(),
                port: refusal.port,
                reason: refusal.reason.clone(),
                command: match &run.event {
                    ToolEvent::Ran { command, .. } => command.clone(),
                    _ => String::new(),
                },
            });
        }
        handled.runs.push(run);
    }
    handled
}

/// A call that was not run, with the reason as its result.
fn not_run(reason: &str) -> ToolRun {
    ToolRun {
        result: reason.to_string(),
        event: ToolEvent::Invalid {
            reason: reason.to_string(),
        },
        egress_denied: Vec::new(),
        image: None,
    }
}
