//! Turn stage, PURE: the `finish` tool. Its spec (with `[finish] result_schema`, the
//! `result` argument and its schema), the reading of its arguments (a bad call, or a
//! `result` that fails the schema, is a tool error for the model, never a failure of the
//! turn), and the texts the turn sends around it (the nudge, the results of calls that
//! `finish` made moot).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result_schema::ResultSchema;

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
    /// The `result` object, valid against `[finish] result_schema`; `None` without a
    /// schema, and when the model gave none with a status other than `done`.
    pub result: Option<Value>,
}

/// Why a `finish` call was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// The call itself is wrong (not JSON, an unknown status or field, an empty summary,
    /// `needs_input` without a question): this text goes back to the model.
    Call(String),
    /// The call is sound but its `result` is missing (`done` must give one) or does not
    /// match the schema: the errors, as [`ResultSchema::check`] lists them. On the last
    /// round this ends the turn `result_invalid`.
    Result {
        /// The call as made, without its result.
        finish: Finish,
        /// What is wrong with the result.
        errors: Vec<String>,
    },
}

impl Rejected {
    /// The tool result the model reads: the turn goes on.
    pub fn message(&self) -> String {
        match self {
            Rejected::Call(message) => message.clone(),
            Rejected::Result { errors, .. } => format!(
                "finish rejected: `result` does not match the result schema in this tool's description:\n- {}\nThe turn goes on. Call `finish` again with a `result` object that matches the schema.",
                errors.join("\n- ")
            ),
        }
    }
}

/// The error of a `done` call without a `result` when a schema is set.
pub const RESULT_MISSING: &str = "`result` is missing: with status `done` it is required";

/// Bytes of JSON a `result` may take: it goes into the REPORT's front matter, `--output
/// json` and Redmine fields whole, so a larger one is refused like an invalid one.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The tool's name.
pub const NAME: &str = "finish";

/// The result sent back for an accepted `finish` call, so the stored conversation answers
/// every call exactly once.
pub const ACCEPTED: &str = "recorded: the turn ends here";

/// The result sent back for the last round's `finish` whose `result` failed the schema.
pub const RESULT_INVALID: &str =
    "recorded: the turn ends here, with the result refused (it does not match the schema)";

/// The result of a call the model made after `finish` in the same reply.
pub const AFTER_FINISH: &str = "not run: `finish` was called earlier in this reply";

/// The result of a call to a tool the round did not offer (the last round offers `finish`
/// only).
pub const NOT_OFFERED: &str = "not run: only `finish` is available in the last round of this turn";

/// The one reminder after a reply without a tool call.
pub const NUDGE: &str = "[harness] Your reply called no tool. If you are done, or need an answer from a human, or cannot go on, call `finish` with the status and a summary (the summary is the REPORT). Otherwise continue with a tool call.";

/// The note before the last round when the turn ends with `finish`.
pub const LAST_ROUND_NOTE: &str = "[harness] This is the last round of this turn: only `finish` is available. Call `finish` now with your status and a summary (what you did, what you found, what is left).";

/// The note before the last round, [`LAST_ROUND_NOTE`] and, with a result schema, what
/// the result must be.
pub fn last_round_note(with_result: bool) -> String {
    if with_result {
        format!("{LAST_ROUND_NOTE} With status `done`, give `result`: an object matching the schema in the tool's description; an invalid one ends the turn as `result_invalid`.")
    } else {
        LAST_ROUND_NOTE.to_string()
    }
}

/// The `finish` tool as an OpenAI function tool; with a result schema, the `result`
/// argument carries it (its `$defs` at the parameters' root, where its references point).
pub fn spec(schema: Option<&ResultSchema>) -> Value {
    let mut description = "End this turn. `status`: done (the task is complete), needs_input (you need an answer from a human: put it in `question`), blocked (something outside your reach stops you), failed (you tried and could not). `summary` is Markdown and becomes the task's REPORT: make it complete and self-contained.".to_string();
    let mut properties = serde_json::json!({
        "status": {"type": "string", "enum": ["done", "needs_input", "blocked", "failed"]},
        "summary": {"type": "string", "description": "Markdown: what you did, what you found, what is left."},
        "question": {"type": "string", "description": "The question for a human; required when status is needs_input."}
    });
    let mut parameters = serde_json::json!({
        "type": "object",
        "required": ["status", "summary"],
        "additionalProperties": false
    });
    if let Some(schema) = schema {
        description.push_str(" `result` is an object a program reads, matching the schema given for it: required with status done, optional otherwise (but valid when given).");
        let (property, defs) = schema.for_spec();
        properties["result"] = property;
        if let Some(defs) = defs {
            parameters["$defs"] = defs;
        }
    }
    parameters["properties"] = properties;
    serde_json::json!({
        "type": "function",
        "function": {
            "name": NAME,
            "description": description,
            "parameters": parameters
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
    #[serde(default)]
    result: Option<Value>,
}

/// Reads a `finish` call's arguments against the turn's result schema (`None`: the tool
/// takes no `result`); `Err` is what goes back to the model.
pub fn parse(arguments: &str, schema: Option<&ResultSchema>) -> Result<Finish, Rejected> {
    let bad = |why: String| {
        let result = if schema.is_some() {
            ", \"result\": {...}"
        } else {
            ""
        };
        Rejected::Call(format!("finish rejected: {why}; the turn goes on. Call `finish` again with {{\"status\": \"done\"|\"needs_input\"|\"blocked\"|\"failed\", \"summary\": \"...\", \"question\": \"...\" (for needs_input){result}}}"))
    };
    let args: Args = serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(arguments))
        .map_err(|e| bad(e.to_string()))?;
    if args.result.is_some() && schema.is_none() {
        // As before results existed: the spec offers no `result`.
        return Err(bad(
            "unknown field `result`, expected one of `status`, `summary`, `question`".into(),
        ));
    }
    if args.summary.trim().is_empty() {
        return Err(bad("`summary` is empty".into()));
    }
    let question = args.question.filter(|q| !q.trim().is_empty());
    let question = match (args.status, question) {
        (FinishStatus::NeedsInput, None) => {
            return Err(bad("`needs_input` needs a `question`".into()))
        }
        (FinishStatus::NeedsInput, Some(q)) => Some(q),
        // A question only means something with needs_input; elsewhere it is dropped.
        (FinishStatus::Done | FinishStatus::Blocked | FinishStatus::Failed, _) => None,
    };
    let finish = Finish {
        status: args.status,
        summary: args.summary,
        question,
        result: None,
    };
    let Some(schema) = schema else {
        return Ok(finish);
    };
    let errors = match (&args.result, finish.status) {
        (None, FinishStatus::Done) => vec![RESULT_MISSING.to_string()],
        (None, FinishStatus::NeedsInput | FinishStatus::Blocked | FinishStatus::Failed) => {
            Vec::new()
        }
        (Some(result), _) => match result.to_string().len() {
            n if n > MAX_RESULT_BYTES => vec![format!(
                "`result` is {n} bytes of JSON, more than {MAX_RESULT_BYTES}: keep it to what a program needs"
            )],
            _ => schema.check(result),
        },
    };
    if errors.is_empty() {
        Ok(Finish {
            result: args.result,
            ..finish
        })
    } else {
        Err(Rejected::Result { finish, errors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn valid_calls_parse() {
        assert_eq!(
            parse(r#"{"status":"done","summary":"All good."}"#, None),
            Ok(Finish {
                status: FinishStatus::Done,
                summary: "All good.".into(),
                question: None,
                result: None,
            })
        );
        assert_eq!(
            parse(
                r#"{"status":"needs_input","summary":"s","question":"Which page size?"}"#,
                None
            )
            .map(|f| f.question),
            Ok(Some("Which page size?".into()))
        );
        assert_eq!(
            parse(
                r#"{"status":"failed","summary":"s","question":"ignored"}"#,
                None
            )
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
            (
                r#"{"status":"done","summary":"s","result":{}}"#,
                "unknown field `result`",
            ),
        ] {
            let Rejected::Call(e) = parse(args, None).unwrap_err() else {
                panic!("{args}: not a call error")
            };
            assert!(e.starts_with("finish rejected: "), "{e}");
            assert!(e.contains(why), "{args}: {e}");
        }
    }

    fn schema() -> ResultSchema {
        let text = r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}"#;
        ResultSchema::compile(text, std::path::Path::new("/s.json")).unwrap()
    }

    #[test]
    fn with_a_schema_done_needs_a_valid_result_the_others_a_valid_one_or_none() {
        let s = schema();
        let read = |args: &str| parse(args, Some(&s));
        assert_eq!(
            read(r#"{"status":"done","summary":"s","result":{"n":3}}"#).map(|f| f.result),
            Ok(Some(serde_json::json!({"n": 3})))
        );
        assert_eq!(
            read(r#"{"status":"failed","summary":"s"}"#).map(|f| f.result),
            Ok(None)
        );
        let missing = read(r#"{"status":"done","summary":"s"}"#).unwrap_err();
        assert!(
            matches!(&missing, Rejected::Result { errors, finish } if errors == &vec![RESULT_MISSING.to_string()] && finish.summary == "s"),
            "{missing:?}"
        );
        for args in [
            r#"{"status":"done","summary":"s","result":{"n":"three"}}"#,
            r#"{"status":"blocked","summary":"s","result":{"n":1,"extra":true}}"#,
            r#"{"status":"done","summary":"s","result":[1]}"#,
        ] {
            let e = read(args).unwrap_err();
            let Rejected::Result { errors, .. } = &e else {
                panic!("{args}: {e:?}")
            };
            assert!(!errors.is_empty());
            let message = e.message();
            assert!(
                message.starts_with("finish rejected: `result` does not match the result schema")
                    && message.contains("The turn goes on."),
                "{message}"
            );
        }
        let big = serde_json::json!({"status": "done", "summary": "s",
            "result": {"n": 1, "pad": "x".repeat(MAX_RESULT_BYTES)}});
        let e = read(&big.to_string()).unwrap_err();
        assert!(
            matches!(&e, Rejected::Result { errors, .. } if errors[0].contains("bytes of JSON, more than 65536")),
            "{e:?}"
        );
        // A bad call is a call error first, whatever its result.
        assert!(matches!(
            read(r#"{"status":"done","summary":"","result":{"n":"x"}}"#),
            Err(Rejected::Call(_))
        ));
    }

    #[test]
    fn the_spec_carries_the_schema_only_when_there_is_one() {
        let plain = spec(None);
        assert!(plain["function"]["parameters"]["properties"]
            .get("result")
            .is_none());
        let with = spec(Some(&schema()));
        assert_eq!(
            with["function"]["parameters"]["properties"]["result"]["required"],
            serde_json::json!(["n"])
        );
        assert_eq!(
            with["function"]["parameters"]["required"],
            serde_json::json!(["status", "summary"])
        );
    }
}
