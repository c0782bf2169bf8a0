//! Turn stage, PURE core: the decisions of the bounded loop, each from plain values. What a
//! round looks like ([`shape`]), whether to stop before a model call ([`before_round`]), the
//! next request ([`request`]), what a failed call leads to ([`after_error`]: the next model
//! of the chain, or the end), what a reply leads to ([`after_reply`]: tools, or the end), and
//! what a round cost ([`round_cost`]).

use std::time::Duration;

use crate::config::{BudgetConfig, FinishMode, ModelPrice};
use crate::llm::wire::{ChatRequest, Message, Usage};
use crate::llm::{LlmError, LlmErrorKind};

use super::{BudgetStop, SkippedModel, TurnOutcome};

/// What one round offers the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The round, 1-based.
    pub round: u32,
    /// The round cap.
    pub max_rounds: u32,
    /// The round cap is reached with this round.
    pub last: bool,
    /// The turn has the bash tool at all.
    pub has_bash: bool,
    /// The turn ends with the `finish` tool (`[loop] finish = "tool"`).
    pub finish_tool: bool,
    /// `bash` is offered this round (never in the last one).
    pub offer_bash: bool,
    /// `finish` is offered this round (every round of a `finish = "tool"` turn).
    pub offer_finish: bool,
    /// `tool_choice` forces `finish` (the last round of a `finish = "tool"` turn).
    pub force_finish: bool,
    /// The "last round" note goes before this round's request.
    pub last_round_note: bool,
}

impl Shape {
    /// Whether any tool is offered this round.
    pub fn offer_tools(&self) -> bool {
        self.offer_bash || self.offer_finish
    }

    /// The same round with no tools at all: where an endpoint rejects `tool_choice`, the
    /// last round is asked again this way (the behaviour of `finish = "message"`).
    pub fn without_tools(self) -> Shape {
        Shape {
            offer_bash: false,
            offer_finish: false,
            force_finish: false,
            ..self
        }
    }
}

/// The shape of round `round` (1-based) of `max_rounds`.
pub fn shape(round: u32, max_rounds: u32, has_bash: bool, finish: FinishMode) -> Shape {
    let last = round == max_rounds;
    let finish_tool = finish == FinishMode::Tool;
    Shape {
        round,
        max_rounds,
        last,
        has_bash,
        finish_tool,
        offer_bash: has_bash && !last,
        offer_finish: finish_tool,
        force_finish: finish_tool && last,
        last_round_note: (has_bash || finish_tool) && last,
    }
}

/// Why the turn must stop before its next model call, if it must: a signal came, or a
/// `[budget]` limit is reached by the `used` tokens or the `spent` USD so far.
pub fn before_round(
    signal: Option<i32>,
    budget: &BudgetConfig,
    used: u64,
    spent: Option<f64>,
) -> Option<TurnOutcome> {
    if let Some(signal) = signal {
        return Some(TurnOutcome::Interrupted { signal });
    }
    if let Some(limit) = budget.max_total_tokens.filter(|limit| used >= *limit) {
        let stop = BudgetStop::Tokens { used, limit };
        return Some(TurnOutcome::Budget { stop });
    }
    if let (Some(limit), Some(spent)) = (budget.max_cost_usd, spent) {
        if spent >= limit {
            let stop = BudgetStop::Cost { spent, limit };
            return Some(TurnOutcome::Budget { stop });
        }
    }
    None
}

/// The tool specs a round offers, in order (`bash` first, `finish` last).
pub fn tools(
    shape: Shape,
    tool_set: &[serde_json::Value],
    finish: &serde_json::Value,
) -> Vec<serde_json::Value> {
    let mut tools = Vec::new();
    if shape.offer_bash {
        tools.extend_from_slice(tool_set);
    }
    if shape.offer_finish {
        tools.push(finish.clone());
    }
    tools
}

/// The request of a round: the conversation so far, with the tools when the round offers
/// them, and `tool_choice` when the round forces `finish`.
pub fn request<'a>(
    model: &'a str,
    messages: &'a [Message],
    shape: Shape,
    tools: &'a [serde_json::Value],
) -> ChatRequest<'a> {
    ChatRequest {
        model,
        messages,
        tools: (shape.offer_tools() && !tools.is_empty()).then_some(tools),
        tool_choice: shape.force_finish.then(super::finish::forced_choice),
        stream: false,
        stream_options: None,
    }
}

/// What a failed model call leads to.
#[derive(Debug, Clone)]
pub enum OnError {
    /// Ask the next model of the chain the same round; this one is skipped for the turn.
    FallBack {
        /// The model given up, with the error as the reason.
        skipped: SkippedModel,
    },
    /// The turn ends.
    Stop(TurnOutcome),
}

/// Decides after `model` (from `[models].tier`) failed with `error`; `has_next` says whether
/// the chain has another model. Only a model unknown to the endpoint, or retries run out,
/// fall back: a rejected key, a spent budget or a malformed request fail the same way on
/// every model.
pub fn after_error(error: LlmError, model: &str, tier: &str, has_next: bool) -> OnError {
    let error = explain(error, model, tier);
    let falls_back = match error.kind {
        LlmErrorKind::UnknownModel | LlmErrorKind::Exhausted => true,
        LlmErrorKind::AuthRejected
        | LlmErrorKind::Budget
        | LlmErrorKind::Rejected
        | LlmErrorKind::Replay => false,
    };
    if has_next && falls_back {
        return OnError::FallBack {
            skipped: SkippedModel {
                model: model.to_string(),
                reason: error.message,
            },
        };
    }
    OnError::Stop(match error.kind {
        LlmErrorKind::Budget => TurnOutcome::Budget {
            stop: BudgetStop::Proxy { error },
        },
        LlmErrorKind::AuthRejected
        | LlmErrorKind::UnknownModel
        | LlmErrorKind::Rejected
        | LlmErrorKind::Exhausted
        | LlmErrorKind::Replay => TurnOutcome::LlmFailed { error },
    })
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

/// What a reply leads to.
#[derive(Debug, Clone)]
pub enum Next {
    /// Handle the tool calls, then the next round (or the end, when `finish` was accepted
    /// or the round was the last).
    RunTools,
    /// A reply without a tool call in a `finish = "tool"` turn: remind the model once.
    Nudge,
    /// The turn ends with this outcome.
    Finish {
        /// `Completed`, or `MaxRounds` when the cap ended a turn that had tools.
        outcome: TurnOutcome,
        /// The reply to keep when the model gave no text at all, only tool calls that no
        /// round could run.
        stand_in: Option<&'static str>,
    },
}

/// Keeps the first `max` tool calls of a reply (`0`: all) and drops the rest before they
/// enter the conversation; returns the note the model then reads, `None` when nothing was
/// dropped. A reply of thousands of calls so costs what `max` calls cost, in the next
/// request, the session, the REPORT's `round_log`, the events and the narration (answering
/// each dropped call, as before, made a 16 MiB reply a REPORT of tens of MB). The calls kept
/// are each answered, so the conversation stays well-formed.
pub fn cap_calls<T>(calls: &mut Vec<T>, max: u32) -> Option<String> {
    let total = calls.len();
    let max = max as usize;
    if max == 0 || total <= max {
        return None;
    }
    calls.truncate(max);
    Some(format!(
        "Your last reply made {total} tool calls; only the first {max} were taken ([loop].max_tool_calls) and the other {} were dropped without running. Ask again for what you still need.",
        total - max
    ))
}

/// The REPORT's reply when the model asked for a tool it could not have and said nothing.
pub const NO_ANSWER: &str =
    "(the model asked for a tool when no tool was available and gave no final answer)";

/// Decides after a reply with `tool_calls` calls, in a round of `shape`; `has_text` says
/// whether the turn has reply text so far (this reply's included), `nudged` whether the
/// turn already reminded the model to call `finish`.
pub fn after_reply(shape: Shape, tool_calls: usize, has_text: bool, nudged: bool) -> Next {
    if shape.offer_tools() && tool_calls > 0 {
        return Next::RunTools;
    }
    if shape.offer_finish && tool_calls == 0 && !shape.last && !nudged {
        return Next::Nudge;
    }
    Next::Finish {
        outcome: if shape.last && (shape.has_bash || shape.finish_tool) {
            TurnOutcome::MaxRounds
        } else {
            TurnOutcome::Completed
        },
        stand_in: (tool_calls > 0 && !has_text).then_some(NO_ANSWER),
    }
}

/// The outcome of a turn the model ended with an accepted `finish` call.
pub fn finished(status: super::FinishStatus) -> TurnOutcome {
    match status {
        super::FinishStatus::Done => TurnOutcome::Completed,
        super::FinishStatus::NeedsInput => TurnOutcome::NeedsInput,
        super::FinishStatus::Blocked | super::FinishStatus::Failed => {
            TurnOutcome::AgentFailed { status }
        }
    }
}

/// Whether a refusal of the request is the endpoint rejecting `tool_choice`, so the round
/// is asked again without tools: only a forced `finish` round, only a plain 4xx refusal.
pub fn drop_tool_choice(error: &LlmError, shape: Shape) -> bool {
    shape.force_finish && error.kind == LlmErrorKind::Rejected
}

/// The cost of a round: the endpoint's own figure, else `usage` x `price`; `None` when
/// neither is known. Rounded to a nano-dollar.
pub fn round_cost(reported: Option<f64>, price: Option<&ModelPrice>, usage: &Usage) -> Option<f64> {
    // A cost the endpoint reports must be a sum of money: a negative one (a stream's
    // `usage.cost` is not checked on the way in) would hold a `max_cost_usd` budget off.
    reported
        .filter(|c| c.is_finite() && *c >= 0.0)
        .or_else(|| price.map(|p| p.cost(usage)))
        .map(round_usd)
}

/// The turn's cost after adding a round's `cost` to `total`.
pub fn add_cost(total: Option<f64>, cost: Option<f64>) -> Option<f64> {
    match cost {
        Some(c) => Some(round_usd(total.unwrap_or(0.0) + c)),
        None => total,
    }
}

/// Rounds to a nano-dollar, so sums of float prices print as the decimals they are.
fn round_usd(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

/// Milliseconds, saturating.
pub fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_of_a_reply_are_capped_with_a_note() {
        let mut calls: Vec<u32> = (0..5000).collect();
        let note = cap_calls(&mut calls, 32).unwrap();
        assert_eq!(calls, (0..32).collect::<Vec<_>>());
        assert!(note.contains("made 5000 tool calls"), "{note}");
        assert!(note.contains("the other 4968 were dropped"), "{note}");
        let mut few = vec![1, 2];
        assert_eq!(cap_calls(&mut few, 2), None);
        assert_eq!(few, vec![1, 2]);
        let mut all: Vec<u32> = (0..50).collect();
        assert_eq!(cap_calls(&mut all, 0), None);
        assert_eq!(all.len(), 50);
    }
    use pretty_assertions::assert_eq;

    fn error(kind: LlmErrorKind) -> LlmError {
        LlmError {
            kind,
            message: "boom".into(),
        }
    }

    fn stop_reason(o: &OnError) -> &'static str {
        match o {
            OnError::FallBack { .. } => "fallback",
            OnError::Stop(outcome) => outcome.stop_reason(),
        }
    }

    /// (offer_bash, offer_finish, force_finish, last_round_note)
    fn offers(s: Shape) -> (bool, bool, bool, bool) {
        (
            s.offer_bash,
            s.offer_finish,
            s.force_finish,
            s.last_round_note,
        )
    }

    #[test]
    fn the_last_round_offers_no_tools_and_warns_the_model() {
        let m = FinishMode::Message;
        assert_eq!(offers(shape(1, 3, true, m)), (true, false, false, false));
        assert_eq!(offers(shape(3, 3, true, m)), (false, false, false, true));
        assert!(shape(3, 3, true, m).last);
        // Without bash no round offers tools, and none needs the note.
        assert_eq!(offers(shape(1, 1, false, m)), (false, false, false, false));
    }

    #[test]
    fn with_the_finish_tool_the_last_round_forces_finish() {
        let t = FinishMode::Tool;
        assert_eq!(offers(shape(1, 3, true, t)), (true, true, false, false));
        assert_eq!(offers(shape(3, 3, true, t)), (false, true, true, true));
        assert_eq!(offers(shape(1, 2, false, t)), (false, true, false, false));
        assert_eq!(offers(shape(2, 2, false, t)), (false, true, true, true));
        let fallback = shape(3, 3, true, t).without_tools();
        assert_eq!(offers(fallback), (false, false, false, true));
        assert!(!fallback.offer_tools());
    }

    #[test]
    fn limits_are_checked_before_each_call_signal_first() {
        let budget = BudgetConfig {
            max_total_tokens: Some(100),
            max_cost_usd: Some(0.5),
        };
        assert!(before_round(None, &budget, 99, Some(0.49)).is_none());
        let tokens = before_round(None, &budget, 100, None).unwrap();
        assert_eq!(
            super::super::BudgetStop::describe(match &tokens {
                TurnOutcome::Budget { stop } => stop,
                other => panic!("{other:?}"),
            }),
            "budget: 100 tokens used, [budget] max_total_tokens is 100"
        );
        let cost = before_round(None, &budget, 0, Some(0.5)).unwrap();
        assert!(
            matches!(cost, TurnOutcome::Budget { stop: BudgetStop::Cost { spent, limit } } if spent == 0.5 && limit == 0.5)
        );
        let signal = before_round(Some(15), &budget, 1000, Some(9.0)).unwrap();
        assert!(matches!(signal, TurnOutcome::Interrupted { signal: 15 }));
        assert!(before_round(None, &BudgetConfig::default(), u64::MAX, Some(1e9)).is_none());
    }

    #[test]
    fn the_request_carries_tools_only_when_offered() {
        let messages = vec![Message::User {
            content: "hi".into(),
        }];
        let m = FinishMode::Message;
        let tools = [serde_json::json!({"type": "function"})];
        let with = request("m", &messages, shape(1, 2, true, m), &tools);
        assert_eq!(with.tools.map(<[_]>::len), Some(1));
        assert_eq!(with.model, "m");
        assert!(with.tool_choice.is_none());
        let without = request("m", &messages, shape(2, 2, true, m), &tools);
        assert!(without.tools.is_none());
        assert!(!without.stream);
        let last = shape(2, 2, true, FinishMode::Tool);
        let finish = super::super::finish::spec(None);
        let names: Vec<_> = super::tools(last, &tools, &finish)
            .iter()
            .map(|t| t["function"]["name"].clone())
            .collect();
        assert_eq!(names, vec![serde_json::json!("finish")]);
        let forced = request("m", &messages, last, &tools);
        assert_eq!(
            forced.tool_choice,
            Some(serde_json::json!({"type": "function", "function": {"name": "finish"}}))
        );
        assert_eq!(
            super::tools(shape(1, 2, true, FinishMode::Tool), &tools, &finish).len(),
            tools.len() + 1
        );
    }

    #[test]
    fn only_unknown_models_and_exhausted_retries_fall_back() {
        for kind in [LlmErrorKind::UnknownModel, LlmErrorKind::Exhausted] {
            assert_eq!(
                stop_reason(&after_error(error(kind), "a", "t", true)),
                "fallback"
            );
            assert_eq!(
                stop_reason(&after_error(error(kind), "a", "t", false)),
                "llm_error"
            );
        }
        for kind in [
            LlmErrorKind::AuthRejected,
            LlmErrorKind::Rejected,
            LlmErrorKind::Replay,
        ] {
            assert_eq!(
                stop_reason(&after_error(error(kind), "a", "t", true)),
                "llm_error"
            );
        }
        let budget = after_error(error(LlmErrorKind::Budget), "a", "t", true);
        assert!(matches!(
            budget,
            OnError::Stop(TurnOutcome::Budget {
                stop: BudgetStop::Proxy { .. }
            })
        ));
    }

    #[test]
    fn an_unknown_model_is_named_with_its_tier() {
        let OnError::FallBack { skipped } =
            after_error(error(LlmErrorKind::UnknownModel), "glm-9", "primary", true)
        else {
            panic!("no fallback");
        };
        assert_eq!(skipped.model, "glm-9");
        assert_eq!(
            skipped.reason,
            "model \"glm-9\" (from [models].primary) is unknown to the endpoint: boom"
        );
    }

    /// `None` for RunTools, else the stop reason and the stand-in reply.
    fn ends(next: Next) -> Option<(&'static str, Option<&'static str>)> {
        match next {
            Next::RunTools => None,
            Next::Nudge => Some(("nudge", None)),
            Next::Finish { outcome, stand_in } => Some((outcome.stop_reason(), stand_in)),
        }
    }

    #[test]
    fn a_reply_runs_tools_or_ends_the_turn() {
        let m = FinishMode::Message;
        let middle = shape(1, 3, true, m);
        let last = shape(3, 3, true, m);
        assert_eq!(ends(after_reply(middle, 2, false, false)), None);
        assert_eq!(
            ends(after_reply(middle, 0, true, false)),
            Some(("completed", None))
        );
        assert_eq!(
            ends(after_reply(last, 0, true, false)),
            Some(("max_rounds", None))
        );
        assert_eq!(
            ends(after_reply(last, 1, false, false)),
            Some(("max_rounds", Some(NO_ANSWER)))
        );
        assert_eq!(
            ends(after_reply(last, 1, true, false)),
            Some(("max_rounds", None))
        );
        // Without bash a tool call cannot run: the turn completes.
        assert_eq!(
            ends(after_reply(shape(1, 5, false, m), 1, false, false)),
            Some(("completed", Some(NO_ANSWER)))
        );
    }

    #[test]
    fn with_the_finish_tool_a_text_reply_is_nudged_once() {
        let t = FinishMode::Tool;
        let middle = shape(1, 3, true, t);
        assert_eq!(
            ends(after_reply(middle, 0, true, false)),
            Some(("nudge", None))
        );
        assert_eq!(
            ends(after_reply(middle, 0, true, true)),
            Some(("completed", None))
        );
        assert_eq!(ends(after_reply(middle, 1, false, true)), None);
        // The last round runs its (finish) call; a text reply there is the cap.
        let last = shape(3, 3, false, t);
        assert_eq!(ends(after_reply(last, 1, false, false)), None);
        assert_eq!(
            ends(after_reply(last, 0, true, false)),
            Some(("max_rounds", None))
        );
        assert_eq!(
            ends(after_reply(last.without_tools(), 0, true, false)),
            Some(("max_rounds", None))
        );
    }

    #[test]
    fn costs_come_from_the_endpoint_else_the_price_table() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 500,
            total_tokens: 1500,
        };
        let price = ModelPrice {
            input_usd_per_mtok: 1.0,
            output_usd_per_mtok: 2.0,
        };
        assert_eq!(round_cost(Some(0.25), Some(&price), &usage), Some(0.25));
        assert_eq!(round_cost(None, Some(&price), &usage), Some(0.002));
        assert_eq!(round_cost(None, None, &usage), None);
        // A reported cost that is no sum of money falls back to the price.
        assert_eq!(round_cost(Some(-1e300), Some(&price), &usage), Some(0.002));
        assert_eq!(round_cost(Some(f64::NAN), None, &usage), None);
        assert_eq!(add_cost(None, None), None);
        assert_eq!(add_cost(Some(0.1), None), Some(0.1));
        assert_eq!(add_cost(Some(0.1), Some(0.2)), Some(0.3));
    }

    #[test]
    fn narration_helpers() {
        assert_eq!(duration_ms(Duration::from_millis(1500)), 1500);
    }
}
