//! Turn stage, PURE: the `finish` tool. Its spec, the reading of its arguments (a bad call
//! is a tool error for the model, never a failure of the turn), and the texts the turn
//! sends around it (the nudge, the results of calls that `finish` made moot).

use serde::{Deserialize, Serialize};

/// What the model says about the task when it ends the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    /// The task is done.
    Done,
    /// The model needs an answer from a human (the `question`) to go on.
    NeedsInput,
    /// Something outside the model's reach stops it (access, a missing tool, a decision).
    Blocked,
    /// The model tried and could not do the task.
    Failed,
}

impl FinishStatus {
    /// `done`, `needs_input`, `blocked`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishStatus::Done => "done",
            FinishStatus::NeedsInput => "needs_input",
            FinishStatus::Blocked => "blocked",
            FinishStatus::Failed => "failed",
        }
    }
}

/// A valid `finish` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// How the task stands.
    pub status: FinishStatus,
    /// Markdown: the REPORT body.
    pub summary: String,
    /// The question for the human; present exactly when `status` is `needs_input`.
    pub question: Option<String>,
}

/// The tool's name.
pub const NAME: &str = "finish";

/// The result sent back for an accepted `finish` call, so the stored conversation answers
/// every call exactly once.
pub const ACCEPTED: &str = "recorded: the turn ends here";

/// The result of a call the model made after `finish` in the same reply.
pub const AFTER_FINISH: &str = "not run: `finish` was called earlier in this reply";

/// The result of a call to a tool the round did not offer (the last round offers `finish`
/// only).
pub const NOT_OFFERED: &str = "not run: only `finish` is available in the last round of this turn";

/// The one reminder after a reply without a tool call.
pub const NUDGE: &str = "[harness] Your reply called no tool. If you are done, or need an answer from a human, or cannot go on, call `finish` with the status and a summary (the summary is the REPORT). Otherwise continue with a tool call.";

/// The note before the last round when the turn ends with `finish`.
pub const LAST_ROUND_NOTE: &str = "[harness] This is the last round of this turn: only `finish` is available. Call `finish` now with your status and a summary (what you did, what you found, what is left).";

/// The `finish` tool as an OpenAI function tool.
pub fn spec() -> serde_json::Value {
    serde_json::json!({
        "type": "function",
        "function": {
            "name": NAME,
            "description": "End this turn. `status`: done (the task is complete), needs_input (you need an answer from a human: put it in `question`), blocked (something outside your reach stops you), failed (you tried and could not). `summary` is Markdown and becomes the task's REPORT: make it complete and self-contained.",
            "parameters": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["done", "needs_input", "blocked", "failed"]},
                    "summary": {"type": "string", "description": "Markdown: what you did, what you found, what is left."},
                    "question": {"type": "string", "description": "The question for a human; required when status is needs_input."}
                },
                "required": ["status", "summary"],
                "additionalProperties": false
            }
        }
    })
}

/// The `tool_choice` that forces a `finish` call.
pub fn forced_choice() -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {"name": NAME}})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    status: FinishStatus,
    summary: String,
    #[serde(default)]
    question: Option<String>,
}

/// Reads a `finish` call's arguments; `Err` is the tool error sent back to the model.
pub fn parse(arguments: &str) -> Result<Finish, String> {
    let bad = |why: String| {
        format!("finish rejected: {why}; the turn goes on. Call `finish` again with {{\"status\": \"done\"|\"needs_input\"|\"blocked\"|\"failed\", \"summary\": \"...\", \"question\": \"...\" (for needs_input)}}")
    };
    let args: Args = serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(arguments))
        .map_err(|e| bad(e.to_string()))?;
    if args.summary.trim().is_empty() {
        return Err(bad("`summary` is empty".into()));
    }
    let question = args.question.filter(|q| !q.trim().is_empty());
    match (args.status, &question) {
        (FinishStatus::NeedsInput, None) => Err(bad("`needs_input` needs a `question`".into())),
        (FinishStatus::NeedsInput, Some(_)) => Ok(Finish {
            status: args.status,
            summary: args.summary,
            question,
        }),
        // A question only means something with needs_input; elsewhere it is dropped.
        (FinishStatus::Done | FinishStatus::Blocked | FinishStatus::Failed, _) => Ok(Finish {
            status: args.status,
            summary: args.summary,
            question: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn valid_calls_parse() {
        assert_eq!(
            parse(r#"{"status":"done","summary":"All good."}"#),
            Ok(Finish {
                status: FinishStatus::Done,
                summary: "All good.".into(),
                question: None
            })
        );
        assert_eq!(
            parse(r#"{"status":"needs_input","summary":"s","question":"Which page size?"}"#)
                .map(|f| f.question),
            Ok(Some("Which page size?".into()))
        );
        assert_eq!(
            parse(r#"{"status":"failed","summary":"s","question":"ignored"}"#)
                .map(|f| (f.status, f.question)),
            Ok((FinishStatus::Failed, None))
        );
    }

    #[test]
    fn invalid_calls_are_tool_errors() {
        for (args, why) in [
            (
                r#"{"status":"needs_input","summary":"s"}"#,
                "needs a `question`",
            ),
            (
                r#"{"status":"needs_input","summary":"s","question":" "}"#,
                "needs a `question`",
            ),
            (r#"{"status":"maybe","summary":"s"}"#, "unknown variant"),
            (r#"{"status":"done","summary":""}"#, "`summary` is empty"),
            (r#"{"status":"done"}"#, "missing field `summary`"),
            (r#"{"status":"done","summary":"s","x":1}"#, "unknown field"),
            ("{not json", "key must be a string"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.starts_with("finish rejected: "), "{e}");
            assert!(e.contains(why), "{args}: {e}");
        }
    }
}
