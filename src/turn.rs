//! Turn stage: the bounded chat loop. A task, a route, a backend and the bash tool in; a
//! [`Turn`] out, whose [`TurnOutcome`] is a closed set. Never panics, never exits: every way
//! the loop can end is a value the REPORT writer and the exit mapping match on.

use std::time::Duration;

use serde::Serialize;
use tracing::info;

use crate::intake::Task;
use crate::llm::cassette::Recorded;
use crate::llm::wire::{bash_tool_spec, ChatRequest, Message, Usage};
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
    /// The REPORT's `stop_reason`.
    pub fn stop_reason(&self) -> &'static str {
        match self {
            TurnOutcome::Completed => "completed",
            TurnOutcome::MaxRounds => "max_rounds",
            TurnOutcome::LlmFailed { .. } => "llm_error",
            TurnOutcome::Interrupted { .. } => "interrupted",
        }
    }
}

/// One LLM round trip and the tool calls it asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoundRecord {
    /// 1-based round number.
    pub round: u32,
    /// The concrete model the request was sent to.
    pub model: String,
    /// Tokens of this round (zero when the endpoint sent none).
    pub usage: Usage,
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
    /// Per-round telemetry.
    pub log: Vec<RoundRecord>,
    /// The raw replies, for `--record`.
    pub recorded: Vec<Recorded>,
}

/// The system prompt: what the harness is, the bound, the tool contract, the REPORT.
pub fn system_prompt(vertical: &str, max_rounds: u32, tools: bool) -> String {
    let tool_text = if tools {
        "You have one tool, `bash`, which runs a single command line in the task's working directory and returns its output and exit status. Commands are checked against an allow-list; a denied command is not run and you get the reason instead. Prefer small, read-only commands."
    } else {
        "You have no tools in this turn: answer from the task text alone."
    };
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
    max_rounds: u32,
    system: String,
    backend: &mut Backend,
    bash: Option<&BashTool>,
    interrupt: &Interrupt,
) -> Turn {
    let model = route.model().to_string();
    let tool_specs = [bash_tool_spec()];
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
        log: Vec::new(),
        recorded: Vec::new(),
    };
    for round in 1..=max_rounds {
        if let Some(signal) = interrupt.received() {
            turn.outcome = TurnOutcome::Interrupted { signal };
            return turn;
        }
        let last = round == max_rounds;
        let offer_tools = bash.is_some() && !last;
        if bash.is_some() && last {
            messages.push(Message::User {
                content: LAST_ROUND_NOTE.to_string(),
            });
        }
        let request = ChatRequest {
            model: &model,
            messages: &messages,
            tools: offer_tools.then_some(&tool_specs[..]),
            stream: false,
            stream_options: None,
        };
        turn.rounds = round;
        let result = tokio::select! {
            r = backend.chat(&request) => r,
            signal = interrupt.wait() => {
                turn.outcome = TurnOutcome::Interrupted { signal };
                return turn;
            }
        };
        let reply = match result {
            Ok(r) => r,
            Err(error) => {
                info!("round {round}/{max_rounds}: {model} failed: {error}");
                turn.outcome = TurnOutcome::LlmFailed { error };
                return turn;
            }
        };
        let usage = reply.usage.unwrap_or_default();
        turn.usage.add(&usage);
        turn.recorded.push(Recorded {
            model: model.clone(),
            response: reply.raw.clone(),
        });
        info!(
            "round {round}/{max_rounds}: {model} answered ({} tokens, {:.1}s{}), {} tool call{}",
            usage.total_tokens,
            reply.latency.as_secs_f64(),
            retry_note(reply.retries),
            reply.tool_calls.len(),
            if reply.tool_calls.len() == 1 { "" } else { "s" }
        );
        let mut record = RoundRecord {
            round,
            model: model.clone(),
            usage,
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
