//! LLM stage, PURE: the OpenAI chat-completions wire types (serde), lenient where real
//! endpoints differ (missing `usage`, missing tool-call `type`, `content: null`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One chat message, tagged by `role` as the API does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the harness.
    System {
        /// The text.
        content: String,
    },
    /// The task, a note of the harness, or an image the model asked to see.
    User {
        /// A text, or content parts (text and images) as OpenAI sends them.
        content: Content,
    },
    /// A model reply, possibly with tool calls.
    Assistant {
        /// The reply's text; `null` when it only calls tools.
        content: Option<String>,
        /// Tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Provider fields of the reply kept as the provider sent them (reasoning, thinking
        /// blocks), so the conversation goes back, and into the session, whole.
        #[serde(flatten, default)]
        extra: BTreeMap<String, serde_json::Value>,
    },
    /// The result of one tool call.
    Tool {
        /// The `id` of the call this answers.
        tool_call_id: String,
        /// What the tool returned (or why it was not run).
        content: String,
    },
}

/// The content of a user message: a plain text (the common case, sent as a JSON string) or
/// content parts (text and `image_url` parts), sent as an array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// A text.
    Text(String),
    /// Text and image parts, in order.
    Parts(Vec<Part>),
}

/// One content part of a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// A text part.
    Text {
        /// The text.
        text: String,
    },
    /// An image, as a `data:` URL (`data:image/png;base64,...`).
    ImageUrl {
        /// The image's URL.
        image_url: ImageUrl,
    },
}

/// The `image_url` object of an image part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// A `data:` URL; harness never sends a URL a model would have to fetch.
    pub url: String,
}

impl Content {
    /// The text of the content: the text itself, or its text parts joined by newlines.
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    Part::ImageUrl { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// Whether the text (or the first text part) starts with `prefix`.
    pub fn starts_with(&self, prefix: &str) -> bool {
        match self {
            Content::Text(t) => t.starts_with(prefix),
            Content::Parts(parts) => {
                matches!(parts.first(), Some(Part::Text { text }) if text.starts_with(prefix))
            }
        }
    }

    /// The content with `map` applied to every text (an image part is left as it is).
    pub fn map_text(&self, map: impl Fn(&str) -> String) -> Content {
        match self {
            Content::Text(t) => Content::Text(map(t)),
            Content::Parts(parts) => Content::Parts(
                parts
                    .iter()
                    .map(|p| match p {
                        Part::Text { text } => Part::Text { text: map(text) },
                        Part::ImageUrl { .. } => p.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

impl From<String> for Content {
    fn from(text: String) -> Content {
        Content::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Content {
        Content::Text(text.to_string())
    }
}

impl Message {
    /// A user message of plain text.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User {
            content: Content::Text(text.into()),
        }
    }
}

/// One function call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id the tool result must echo.
    #[serde(default)]
    pub id: String,
    /// Always `function` today.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function and its JSON-encoded arguments.
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_string()
}

/// A function name and its arguments, as a JSON text the model wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Tool name (`bash`).
    #[serde(default)]
    pub name: String,
    /// JSON text; may be invalid, which the turn reports back to the model. An endpoint
    /// that sends the arguments as an object (or `null`) gets them read as their JSON text,
    /// not the whole reply refused.
    #[serde(default, deserialize_with = "json_text")]
    pub arguments: String,
}

fn json_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// The body of `POST /chat/completions`.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRequest<'a> {
    /// Concrete model name.
    pub model: &'a str,
    /// The conversation so far.
    pub messages: &'a [Message],
    /// Tool specs; omitted when no tool is offered this round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a [serde_json::Value]>,
    /// `{"type":"function","function":{"name":..}}` to force one tool; omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<serde_json::Value>,
    /// Whether to stream (SSE).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// `{"include_usage": true}` when streaming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<serde_json::Value>,
}

/// The parts of a `chat.completion` response the harness reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The model that answered, as the endpoint reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Choices; the harness reads the first.
    #[serde(default)]
    pub choices: Vec<Choice>,
    /// Token counts; some endpoints omit them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// An error object some proxies send with status 200 instead of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
}

/// One choice of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The assistant message.
    #[serde(default)]
    pub message: ResponseMessage,
    /// `stop`, `tool_calls`, `length`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// The assistant message inside a choice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseMessage {
    /// Reply text.
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls; `null` and absent both mean none.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Every other field of the message as received (`role`, provider extras).
    #[serde(flatten, default)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// Token counts of one response, or summed over a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default, deserialize_with = "count")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default, deserialize_with = "count")]
    pub completion_tokens: u64,
    /// Their sum, as the endpoint reports it.
    #[serde(default, deserialize_with = "count")]
    pub total_tokens: u64,
}

/// A token count as an endpoint may send it: a whole number, or `null`, a float, a
/// negative number or a string of digits, none of which may make the whole reply unusable
/// (the counts only inform): each reads as the count it can be, else 0.
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f > 0.0)
                    .map(|f| f as u64)
            })
            .unwrap_or(0),
        serde_json::Value::String(s) => s.trim().parse().unwrap_or(0),
        _ => 0,
    })
}

impl Usage {
    /// Adds another response's counts; a missing total is computed.
    pub fn add(&mut self, other: &Usage) {
        // Saturating: the counts are the endpoint's word, and u64::MAX from it overflowed
        // (a panic, exit 101, no REPORT).
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self
            .total_tokens
            .saturating_add(if other.total_tokens == 0 {
                other.prompt_tokens.saturating_add(other.completion_tokens)
            } else {
                other.total_tokens
            });
    }
}

/// The `bash` tool as an OpenAI function tool taking `{"command": string}`.
pub fn bash_tool_spec() -> serde_json::Value {
    serde_json::json!({
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in the task's working directory and return its combined stdout and stderr with the exit status. Commands are checked against an allow-list first; a denied command is not run and the reason (with what to try instead) is returned. To run a command in a subdirectory, prefer the `workdir` argument over `cd`.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command line to run."},
                    "workdir": {"type": "string", "description": "Optional: the directory to run the command in, relative to the working directory (no `..`, no dot directories). Prefer it over `cd DIR && ...`."}
                },
                "required": ["command"],
                "additionalProperties": false
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_token_counts_never_make_a_reply_unusable() {
        let r: ChatResponse = serde_json::from_str(
            r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":null,"completion_tokens":-3,"total_tokens":"12"}}"#,
        )
        .unwrap();
        let u = r.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (0, 0, 12)
        );
        let r: ChatResponse = serde_json::from_str(
            r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":7.9,"completion_tokens":{}}}"#,
        )
        .unwrap();
        let u = r.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (7, 0));
    }

    #[test]
    fn arguments_sent_as_an_object_are_read_as_their_json() {
        let r: ChatResponse = serde_json::from_str(
            r#"{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"bash","arguments":{"command":"ls"}}},{"id":"b","function":{"name":"bash","arguments":null}}]}}]}"#,
        )
        .unwrap();
        let calls = r.choices[0].message.tool_calls.clone().unwrap();
        assert_eq!(calls[0].function.arguments, r#"{"command":"ls"}"#);
        assert_eq!(calls[1].function.arguments, "");
    }

    #[test]
    fn usage_from_the_endpoint_saturates() {
        let max = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            total_tokens: 0,
        };
        let mut total = Usage::default();
        total.add(&max);
        total.add(&max);
        assert_eq!(total.total_tokens, u64::MAX);
        assert_eq!(total.prompt_tokens, u64::MAX);
    }

    #[test]
    fn huge_tool_call_ids_and_names_are_cut() {
        let body = format!(
            r#"{{"choices":[{{"message":{{"tool_calls":[{{"id":"{}","type":"function","function":{{"name":"{}","arguments":"{{}}"}}}},{{"id":"ok_1","type":"function","function":{{"name":"bash","arguments":"{{}}"}}}}]}}}}]}}"#,
            "i".repeat(100_000),
            "n".repeat(100_000)
        );
        let r: ChatResponse = serde_json::from_str(&body).unwrap();
        let reply = crate::llm::reply_from(r, 0, std::time::Duration::ZERO).unwrap();
        assert_eq!(reply.tool_calls[0].id, "call_0");
        assert_eq!(reply.tool_calls[0].function.name.chars().count(), 64);
        assert_eq!(reply.tool_calls[1].id, "ok_1");
        assert_eq!(reply.tool_calls[1].function.name, "bash");
    }

    #[test]
    fn a_200_with_an_error_object_says_its_message() {
        let r: ChatResponse =
            serde_json::from_str(r#"{"error":{"message":"upstream\nrefused","code":429}}"#)
                .unwrap();
        let e = crate::llm::reply_from(r, 0, std::time::Duration::ZERO).unwrap_err();
        assert_eq!(e, "the reply has no choices but an error: upstream refused");
        let r: ChatResponse = serde_json::from_str(r#"{"choices":[]}"#).unwrap();
        let e = crate::llm::reply_from(r, 0, std::time::Duration::ZERO).unwrap_err();
        assert_eq!(e, "the reply has no choices");
    }
    use pretty_assertions::assert_eq;

    #[test]
    fn parses_a_litellm_tool_call_response() {
        let body = r#"{"id":"chatcmpl-fake-1","model":"glm-5.3","object":"chat.completion",
 "choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"command\": \"ls -la /tmp\"}","name":"bash"},"id":"call_abc123","type":"function"}],"content":null},"provider_specific_fields":{},"logprobs":null}],
 "usage":{"completion_tokens":30,"prompt_tokens":73,"total_tokens":103}}"#;
        let r: ChatResponse = serde_json::from_str(body).unwrap();
        let calls = r.choices[0].message.tool_calls.clone().unwrap();
        assert_eq!(
            calls[0].function.arguments,
            "{\"command\": \"ls -la /tmp\"}"
        );
        assert_eq!(r.usage.unwrap().total_tokens, 103);
    }

    #[test]
    fn tolerates_missing_usage_and_type() {
        let body = r#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"a","function":{"name":"bash","arguments":"{}"}}]}}]}"#;
        let r: ChatResponse = serde_json::from_str(body).unwrap();
        assert_eq!(r.usage, None);
        assert_eq!(
            r.choices[0].message.tool_calls.as_ref().unwrap()[0].kind,
            "function"
        );
    }

    #[test]
    fn serializes_messages_as_the_api_expects() {
        let m = vec![
            Message::Assistant {
                extra: BTreeMap::new(),
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: "bash".into(),
                        arguments: "{\"command\":\"ls\"}".into(),
                    },
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "ok".into(),
            },
        ];
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            serde_json::json!([
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"ok"}
            ])
        );
    }

    #[test]
    fn reasoning_fields_are_kept_and_sent_back() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"think","provider_specific_fields":null,"refusal":null}}]}"#;
        let r: ChatResponse = serde_json::from_str(body).unwrap();
        let reply = crate::llm::reply_from(r, 0, std::time::Duration::ZERO).unwrap();
        assert_eq!(
            serde_json::to_value(&reply.extra).unwrap(),
            serde_json::json!({"reasoning_content": "think"})
        );
        let m = Message::Assistant {
            content: reply.content,
            tool_calls: vec![],
            extra: reply.extra,
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role": "assistant", "content": "hi", "reasoning_content": "think"})
        );
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
    }

    #[test]
    fn usage_sums_and_fills_missing_totals() {
        let mut u = Usage::default();
        u.add(&Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
        });
        u.add(&Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            total_tokens: 0,
        });
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 11,
                completion_tokens: 7,
                total_tokens: 18
            }
        );
    }
}
