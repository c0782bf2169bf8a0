//! Script: raw JSON -> validated steps, and Python-style JSON for tool-call arguments. PURE.

use serde::{Deserialize, Serialize as _};
use serde_json::{json, Map, Value};
use std::io;

pub(crate) const DEFAULT_CHUNK_SIZE: usize = 7;
pub(crate) const DEFAULT_AFTER_CHUNKS: usize = 2;
/// Text used by the fault steps that cut or delay a reply when the step names none.
pub(crate) const DEFAULT_FAULT_TEXT: &str = "This reply is cut short by a scripted fault.";

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Script {
    pub(crate) steps: Vec<Step>,
    pub(crate) looped: bool,
    pub(crate) on_exhausted: Step,
    /// Refuse (400) any chat request whose tool calls are not each answered exactly once.
    pub(crate) strict_tool_results: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub(crate) action: Action,
    pub(crate) opts: Opts,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// `text` and `tool_call`.
    Reply(Reply),
    Empty,
    Error {
        status: u16,
        body: ErrorBody,
    },
    Drop {
        reply: Reply,
        after_chunks: usize,
    },
    Malformed(Reply),
    Hang(Reply),
    StreamError {
        reply: Reply,
        after_chunks: usize,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ErrorBody {
    Json(Value),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub(crate) content: Option<String>,
    pub(crate) calls: Vec<ToolCall>,
    /// Provider reasoning fields of the message (`reasoning_content`, `thinking_blocks`,
    /// ...), sent as they are, or streamed as LiteLLM streams them.
    pub(crate) reasoning: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The exact `arguments` string sent to the client.
    pub(crate) arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Opts {
    pub(crate) delay_ms: Option<u64>,
    pub(crate) usage: Option<Usage>,
    pub(crate) finish_reason: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) chunk_size: usize,
    pub(crate) chunk_delay_ms: u64,
    pub(crate) headers: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
}

/// Every field any step may carry; which ones a step type accepts is `fields_for`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) command: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) calls: Option<Vec<RawCall>>,
    #[serde(default, deserialize_with = "null_or_string")]
    pub(crate) content: Option<Option<String>>,
    pub(crate) status: Option<u16>,
    pub(crate) body: Option<Value>,
    pub(crate) after_chunks: Option<usize>,
    pub(crate) message: Option<String>,
    pub(crate) delay_ms: Option<u64>,
    pub(crate) usage: Option<Usage>,
    pub(crate) finish_reason: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) chunk_size: Option<usize>,
    pub(crate) chunk_delay_ms: Option<u64>,
    pub(crate) headers: Option<Map<String, Value>>,
    pub(crate) reasoning: Option<Map<String, Value>>,
}

/// Distinguishes an absent `content` (outer `None`) from `"content": null`.
pub(crate) fn null_or_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCall {
    pub(crate) name: Option<String>,
    pub(crate) arguments: Option<Value>,
    pub(crate) id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScript {
    pub(crate) steps: Vec<Value>,
    #[serde(default, rename = "loop")]
    pub(crate) looped: bool,
    pub(crate) on_exhausted: Option<Value>,
    #[serde(default)]
    pub(crate) strict_tool_results: bool,
}

pub(crate) const COMMON_FIELDS: &[&str] = &[
    "type",
    "delay_ms",
    "usage",
    "finish_reason",
    "model",
    "chunk_size",
    "chunk_delay_ms",
    "headers",
];
pub(crate) const REPLY_FIELDS: &[&str] = &["content", "command", "id", "calls", "reasoning"];

pub(crate) fn fields_for(kind: &str) -> Option<Vec<&'static str>> {
    let extra: Vec<&'static str> = match kind {
        "text" => vec!["content", "reasoning"],
        "tool_call" | "malformed" | "hang" => REPLY_FIELDS.to_vec(),
        "error" => vec!["status", "body"],
        "drop" => [REPLY_FIELDS, &["after_chunks"]].concat(),
        "stream_error" => [REPLY_FIELDS, &["after_chunks", "message"]].concat(),
        "empty" => vec![],
        _ => return None,
    };
    Some([COMMON_FIELDS, &extra].concat())
}

/// Parses a whole script; errors name the step (`step 3: ...`).
pub(crate) fn parse_script(text: &str) -> Result<Script, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let raw = match value {
        Value::Array(steps) => RawScript {
            steps,
            looped: false,
            on_exhausted: None,
            strict_tool_results: false,
        },
        Value::Object(_) => serde_json::from_value(value).map_err(|e| e.to_string())?,
        _ => return Err("a script is a JSON list of steps or an object with \"steps\"".into()),
    };
    let steps = raw
        .steps
        .iter()
        .enumerate()
        .map(|(i, v)| parse_step(v, &i.to_string()).map_err(|e| format!("step {i}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let on_exhausted = match &raw.on_exhausted {
        Some(v) => parse_step(v, "x").map_err(|e| format!("on_exhausted: {e}"))?,
        None => exhausted_step(),
    };
    Ok(Script {
        steps,
        looped: raw.looped,
        on_exhausted,
        strict_tool_results: raw.strict_tool_results,
    })
}

pub(crate) fn exhausted_step() -> Step {
    Step {
        action: Action::Error {
            status: 500,
            body: ErrorBody::Json(json!({"error": {
                "message": "fake upstream: script exhausted",
                "type": "fake_script_exhausted",
                "param": null,
                "code": "script_exhausted",
            }})),
        },
        opts: default_opts(),
    }
}

pub(crate) fn default_opts() -> Opts {
    Opts {
        delay_ms: None,
        usage: None,
        finish_reason: None,
        model: None,
        chunk_size: DEFAULT_CHUNK_SIZE,
        chunk_delay_ms: 0,
        headers: Vec::new(),
    }
}

/// `label` names the step in generated tool-call ids (`call_<label>_<n>`).
pub(crate) fn parse_step(value: &Value, label: &str) -> Result<Step, String> {
    let obj = value.as_object().ok_or("a step is a JSON object")?;
    let kind = obj
        .get("type")
        .and_then(Value::as_str)
        .ok_or("missing \"type\"")?;
    let allowed = fields_for(kind).ok_or_else(|| format!("unknown step type {kind:?}"))?;
    if let Some(bad) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("field {bad:?} does not apply to a {kind:?} step"));
    }
    let raw: RawStep = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let opts = parse_opts(&raw)?;
    let action = match raw.kind.as_str() {
        "text" => match &raw.content {
            Some(Some(text)) => Action::Reply(Reply {
                content: Some(text.clone()),
                calls: Vec::new(),
                reasoning: raw.reasoning.clone().unwrap_or_default(),
            }),
            _ => return Err("a text step needs a string \"content\"".into()),
        },
        "tool_call" => {
            let reply = parse_reply(&raw, label, None)?;
            if reply.calls.is_empty() {
                return Err("a tool_call step needs \"command\" or a non-empty \"calls\"".into());
            }
            Action::Reply(reply)
        }
        "error" => {
            let status = raw.status.ok_or("an error step needs \"status\"")?;
            if !(100..=599).contains(&status) {
                return Err(format!("status {status} is not an HTTP status"));
            }
            let body = match &raw.body {
                None => ErrorBody::Json(json!({"error": {
                    "message": format!("scripted error {status}"),
                    "type": "scripted_error",
                    "param": null,
                    "code": null,
                }})),
                Some(Value::String(text)) => ErrorBody::Text(text.clone()),
                Some(other) => ErrorBody::Json(other.clone()),
            };
            Action::Error { status, body }
        }
        "drop" => Action::Drop {
            reply: parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?,
            after_chunks: raw.after_chunks.unwrap_or(DEFAULT_AFTER_CHUNKS),
        },
        "malformed" => Action::Malformed(parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?),
        "hang" => Action::Hang(parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?),
        "stream_error" => Action::StreamError {
            reply: parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?,
            after_chunks: raw.after_chunks.unwrap_or(1),
            message: raw
                .message
                .clone()
                .unwrap_or_else(|| "scripted in-band stream error".into()),
        },
        // fields_for() admitted only the kinds above.
        _ => Action::Empty,
    };
    Ok(Step { action, opts })
}

/// The reply of a `tool_call` or of a fault step; `default_text` applies when the step
/// names neither content nor calls.
pub(crate) fn parse_reply(
    raw: &RawStep,
    label: &str,
    default_text: Option<&str>,
) -> Result<Reply, String> {
    let mut calls = Vec::new();
    match (&raw.command, &raw.calls) {
        (Some(_), Some(_)) => return Err("give either \"command\" or \"calls\", not both".into()),
        (Some(command), None) => calls.push(ToolCall {
            id: raw.id.clone().unwrap_or_else(|| format!("call_{label}_0")),
            name: "bash".into(),
            arguments: python_json(&json!({ "command": command })),
        }),
        (None, Some(list)) => {
            if raw.id.is_some() {
                return Err("\"id\" goes inside each entry of \"calls\"".into());
            }
            for (n, call) in list.iter().enumerate() {
                calls.push(ToolCall {
                    id: call
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{label}_{n}")),
                    name: call.name.clone().unwrap_or_else(|| "bash".into()),
                    arguments: match &call.arguments {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => python_json(v),
                        None => "{}".into(),
                    },
                });
            }
        }
        (None, None) if raw.id.is_some() => return Err("\"id\" needs \"command\"".into()),
        (None, None) => {}
    }
    let content = match &raw.content {
        Some(c) => c.clone(),
        None if calls.is_empty() => default_text.map(String::from),
        None => None,
    };
    Ok(Reply {
        content,
        calls,
        reasoning: raw.reasoning.clone().unwrap_or_default(),
    })
}

pub(crate) fn parse_opts(raw: &RawStep) -> Result<Opts, String> {
    let chunk_size = raw.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE);
    if chunk_size == 0 {
        return Err("chunk_size must be at least 1".into());
    }
    let mut headers = Vec::new();
    for (name, value) in raw.headers.iter().flatten() {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let is_token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !is_token || value.contains(['\r', '\n']) {
            return Err(format!("header {name:?} is not a valid HTTP header"));
        }
        headers.push((name.clone(), value));
    }
    Ok(Opts {
        delay_ms: raw.delay_ms,
        usage: raw.usage,
        finish_reason: raw.finish_reason.clone(),
        model: raw.model.clone(),
        chunk_size,
        chunk_delay_ms: raw.chunk_delay_ms.unwrap_or(0),
        headers,
    })
}

/// Serializes like Python's `json.dumps` defaults (`", "` and `": "` separators, non-ASCII
/// as `\uXXXX`), which is what real upstreams and LiteLLM put in arguments and error events.
pub(crate) fn python_json(value: &Value) -> String {
    struct PyFormatter;
    impl serde_json::ser::Formatter for PyFormatter {
        fn begin_array_value<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            w.write_all(b": ")
        }
        fn write_string_fragment<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            fragment: &str,
        ) -> io::Result<()> {
            for c in fragment.chars() {
                if c.is_ascii() {
                    w.write_all(&[c as u8])?;
                } else {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        write!(w, "\\u{unit:04x}")?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    match value.serialize(&mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_else(|_| value.to_string()),
        Err(_) => value.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::chat::stream_error_event;
    fn step(v: Value) -> Step {
        parse_step(&v, "0").unwrap()
    }

    #[test]
    fn command_step_is_one_bash_call_in_python_json() {
        let s = step(json!({"type": "tool_call", "command": "ls -la", "id": "call_1"}));
        assert_eq!(
            s.action,
            Action::Reply(Reply {
                content: None,
                calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\": \"ls -la\"}".into()
                }],
                reasoning: Map::new(),
            })
        );
        assert_eq!(s.opts, default_opts());
    }

    #[test]
    fn calls_keep_raw_string_arguments_and_default_ids() {
        let s = step(json!({"type": "tool_call", "content": "two", "calls": [
            {"name": "bash", "arguments": {"command": "é", "timeout": 5}},
            {"arguments": "{\"command\": \"ls"},
        ]}));
        let Action::Reply(reply) = s.action else {
            panic!("not a reply")
        };
        assert_eq!(reply.content.as_deref(), Some("two"));
        assert_eq!(
            reply.calls[0].arguments,
            "{\"command\": \"\\u00e9\", \"timeout\": 5}"
        );
        assert_eq!(
            reply.calls[1],
            ToolCall {
                id: "call_0_1".into(),
                name: "bash".into(),
                arguments: "{\"command\": \"ls".into()
            }
        );
    }

    #[test]
    fn list_and_object_scripts() {
        let list = parse_script(r#"[{"type":"text","content":"hi"}]"#).unwrap();
        assert!(!list.looped);
        assert_eq!(list.on_exhausted, exhausted_step());
        let obj = parse_script(r#"{"steps":[{"type":"empty"}],"loop":true,"on_exhausted":{"type":"error","status":503,"body":"down"}}"#).unwrap();
        assert!(obj.looped);
        assert_eq!(obj.steps[0].action, Action::Empty);
        assert_eq!(
            obj.on_exhausted.action,
            Action::Error {
                status: 503,
                body: ErrorBody::Text("down".into())
            }
        );
    }

    #[test]
    fn every_step_type_and_option_parses() {
        let s = step(
            json!({"type": "error", "status": 429, "headers": {"Retry-After": "2", "x-n": 3}, "body": {"error": {"message": "slow down"}}, "delay_ms": 5}),
        );
        assert_eq!(
            s.opts.headers,
            vec![
                ("Retry-After".into(), "2".into()),
                ("x-n".into(), "3".into())
            ]
        );
        assert_eq!(s.opts.delay_ms, Some(5));
        let s = step(
            json!({"type": "text", "content": "x", "usage": {"prompt_tokens": 1, "completion_tokens": 2}, "finish_reason": "length", "model": "m", "chunk_size": 3, "chunk_delay_ms": 4, "headers": {"x-litellm-response-cost": "0.5"}}),
        );
        assert_eq!(
            s.opts,
            Opts {
                delay_ms: None,
                usage: Some(Usage {
                    prompt_tokens: 1,
                    completion_tokens: 2
                }),
                finish_reason: Some("length".into()),
                model: Some("m".into()),
                chunk_size: 3,
                chunk_delay_ms: 4,
                headers: vec![("x-litellm-response-cost".into(), "0.5".into())],
            }
        );
        assert!(matches!(
            step(json!({"type": "drop"})).action,
            Action::Drop {
                after_chunks: 2,
                ..
            }
        ));
        assert!(matches!(
            step(json!({"type": "drop", "command": "ls", "after_chunks": 4})).action,
            Action::Drop {
                after_chunks: 4,
                ..
            }
        ));
        assert!(matches!(
            step(json!({"type": "malformed"})).action,
            Action::Malformed(_)
        ));
        assert!(matches!(
            step(json!({"type": "hang", "delay_ms": 10})).action,
            Action::Hang(_)
        ));
        assert_eq!(
            step(json!({"type": "stream_error", "after_chunks": 3, "message": "boom"})).action,
            Action::StreamError {
                reply: Reply {
                    content: Some(DEFAULT_FAULT_TEXT.into()),
                    calls: vec![],
                    reasoning: Map::new(),
                },
                after_chunks: 3,
                message: "boom".into()
            }
        );
    }

    #[test]
    fn script_errors_name_the_step_and_the_problem() {
        let cases = [
            (
                r#"[{"type":"text"}]"#,
                "step 0: a text step needs a string \"content\"",
            ),
            (
                r#"[{"type":"text","content":"a"},{"type":"txt"}]"#,
                "step 1: unknown step type \"txt\"",
            ),
            (
                r#"[{"type":"text","content":"a","status":500}]"#,
                "step 0: field \"status\" does not apply to a \"text\" step",
            ),
            (
                r#"[{"type":"tool_call"}]"#,
                "step 0: a tool_call step needs \"command\" or a non-empty \"calls\"",
            ),
            (
                r#"[{"type":"tool_call","command":"ls","calls":[]}]"#,
                "step 0: give either \"command\" or \"calls\", not both",
            ),
            (
                r#"[{"type":"error"}]"#,
                "step 0: an error step needs \"status\"",
            ),
            (
                r#"[{"type":"error","status":42}]"#,
                "step 0: status 42 is not an HTTP status",
            ),
            (
                r#"[{"type":"text","content":"a","chunk_size":0}]"#,
                "step 0: chunk_size must be at least 1",
            ),
            (
                r#"[{"type":"text","content":"a","headers":{"a b":"c"}}]"#,
                "step 0: header \"a b\" is not a valid HTTP header",
            ),
            (
                r#"{"steps":[],"lop":true}"#,
                "unknown field `lop`, expected one of `steps`, `loop`, `on_exhausted`, `strict_tool_results`",
            ),
            (
                r#"{"steps":[],"on_exhausted":{"type":"nope"}}"#,
                "on_exhausted: unknown step type \"nope\"",
            ),
            (
                "42",
                "a script is a JSON list of steps or an object with \"steps\"",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_script(text).unwrap_err(), want, "{text}");
        }
        assert!(
            parse_script(r#"[{"type":"tool_call","calls":[{"name":"x","args":{}}]}]"#)
                .unwrap_err()
                .contains("unknown field `args`")
        );
    }

    #[test]
    fn python_json_matches_json_dumps() {
        assert_eq!(
            python_json(&json!({"b": [1, 2], "a": {"x": "ü😀"}})),
            r#"{"a": {"x": "\u00fc\ud83d\ude00"}, "b": [1, 2]}"#
        );
        assert_eq!(
            python_json(&stream_error_event("boom")),
            r#"{"error": {"code": "500", "message": "boom", "param": null, "type": null}}"#
        );
    }
}
