//! LLM stage, PURE: Server-Sent Events of a streamed `chat.completion` in, one assembled
//! [`ChatResponse`] out. Bytes arrive in arbitrary pieces ([`StreamAssembler::push`]); events
//! are `data:` lines ended by a blank line. Tool-call deltas are assembled by `index` (the id
//! and name arrive once, the arguments in fragments). Provider reasoning fields are kept as
//! the non-streamed reply keeps them ([`super::provider_extras`]): strings
//! (`reasoning_content`, `reasoning`) concatenated, LiteLLM's `thinking_blocks` fragments
//! joined into whole signed blocks ([`Thinking`]). A stream is complete only when it ended
//! with `data: [DONE]` after a finish reason; an in-band `{"error": ...}` event, an event that
//! is not JSON, or an early end is a failed attempt the client retries whole. An event longer
//! than [`MAX_EVENT`] is a final fault (a retry would get the same), so no stream can fill
//! memory with one endless line.

use serde::Deserialize;
use serde_json::Value;

use super::wire::{ChatResponse, Choice, FunctionCall, ResponseMessage, ToolCall, Usage};

/// Longest SSE event (its `data:` lines together, or one unfinished line) that is read.
pub const MAX_EVENT: usize = crate::http::MAX_BODY;

/// How a stream went wrong; every one of these but [`StreamFault::TooLarge`] is a retryable
/// attempt failure.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamFault {
    /// The endpoint sent `{"error": {...}}` after the stream had started (LiteLLM does this
    /// for every upstream failure after the first byte).
    InBand(String),
    /// An event's data is not JSON.
    BadEvent(String),
    /// The stream ended without `[DONE]` or without a finish reason.
    Incomplete(&'static str),
    /// One event is longer than [`MAX_EVENT`].
    TooLarge,
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::InBand(m) => write!(f, "in-band stream error: {m}"),
            StreamFault::BadEvent(m) => write!(f, "a stream event is not JSON: {m}"),
            StreamFault::Incomplete(what) => write!(f, "the stream ended {what}"),
            StreamFault::TooLarge => write!(
                f,
                "a stream event is larger than {} MiB, more than harness reads",
                MAX_EVENT / (1024 * 1024)
            ),
        }
    }
}

/// One chunk, as far as the harness reads it.
#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<StreamUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
    /// Every other field; the reasoning ones are kept.
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// Anthropic thinking blocks as LiteLLM streams them: each delta holds one fragment,
/// `{"type":"thinking","thinking":<text>,"signature":null}`, and the block ends with a
/// fragment carrying its `signature`; `redacted_thinking` blocks come whole. Joined the way
/// LiteLLM's own `stream_chunk_builder` joins them: a block is kept once signed (an unsigned
/// one could not be sent back).
#[derive(Debug, Default)]
struct Thinking {
    blocks: Vec<Value>,
    text: String,
}

impl Thinking {
    fn add(&mut self, block: &Value) {
        if block["type"] == "redacted_thinking" {
            self.text.clear();
            if block.get("data").is_some_and(|d| !d.is_null()) {
                self.blocks.push(block.clone());
            }
            return;
        }
        if let Some(text) = block["thinking"].as_str() {
            self.text.push_str(text);
        }
        if let Some(signature) = block["signature"].as_str().filter(|s| !s.is_empty()) {
            if !self.text.is_empty() {
                self.blocks.push(serde_json::json!({
                    "type": "thinking",
                    "thinking": std::mem::take(&mut self.text),
                    "signature": signature,
                }));
            }
            self.text.clear();
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// The usage chunk: token counts and, from LiteLLM, the cost it computed.
#[derive(Debug, Default, Deserialize)]
struct StreamUsage {
    #[serde(flatten)]
    tokens: Usage,
    #[serde(default)]
    cost: Option<f64>,
}

/// Assembles one streamed reply.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    /// Bytes of an unfinished line.
    pending: Vec<u8>,
    /// `data:` lines of the current event.
    data: Vec<String>,
    /// Bytes in `data`.
    data_len: usize,
    model: Option<String>,
    content: Option<String>,
    /// By `index`, as sent: a map, not a vector grown to the largest index (one event
    /// naming index 1000000000 made harness allocate gigabytes and abort).
    calls: std::collections::BTreeMap<usize, ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    cost: Option<f64>,
    done: bool,
    generated_chars: usize,
    /// Reasoning fields assembled so far, `thinking_blocks` aside.
    reasoning: serde_json::Map<String, Value>,
    thinking: Thinking,
}

impl StreamAssembler {
    /// Feeds the next bytes; returns the first fault found, after which the stream is dead.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), StreamFault> {
        for &b in bytes {
            if b != b'\n' {
                if self.pending.len() >= MAX_EVENT {
                    return Err(StreamFault::TooLarge);
                }
                self.pending.push(b);
                continue;
            }
            let mut line = std::mem::take(&mut self.pending);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&String::from_utf8_lossy(&line))?;
        }
        Ok(())
    }

    /// Characters of text and tool arguments received so far (for progress narration).
    pub fn generated_chars(&self) -> usize {
        self.generated_chars
    }

    /// Whether `[DONE]` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Ends the stream: the assembled response and the cost the endpoint reported in the
    /// usage chunk (LiteLLM's `usage.cost`), or why the stream is unusable.
    pub fn finish(mut self) -> Result<(ChatResponse, Option<f64>), StreamFault> {
        if !self.pending.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.line(&line)?;
        }
        self.line("")?;
        if !self.done {
            return Err(StreamFault::Incomplete("without data: [DONE]"));
        }
        if self.finish_reason.is_none() {
            return Err(StreamFault::Incomplete("without a finish reason"));
        }
        let calls: Vec<ToolCall> = self.calls.into_values().collect();
        let tool_calls = (!calls.is_empty()).then_some(calls);
        let mut other = self.reasoning;
        if !self.thinking.blocks.is_empty() {
            other.insert("thinking_blocks".into(), Value::Array(self.thinking.blocks));
        }
        let response = ChatResponse {
            model: self.model,
            choices: vec![Choice {
                message: ResponseMessage {
                    content: self.content,
                    tool_calls,
                    other,
                },
                finish_reason: self.finish_reason,
            }],
            usage: self.usage,
            error: None,
        };
        Ok((response, self.cost))
    }

    fn line(&mut self, line: &str) -> Result<(), StreamFault> {
        if line.is_empty() {
            if self.data.is_empty() {
                return Ok(());
            }
            let data = std::mem::take(&mut self.data).join("\n");
            self.data_len = 0;
            return self.event(&data);
        }
        // Comments (`: keep-alive`) and the other SSE fields (`event:`, `id:`) carry nothing.
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            self.data_len += rest.len() + 1;
            if self.data_len > MAX_EVENT {
                return Err(StreamFault::TooLarge);
            }
            self.data.push(rest.to_string());
        }
        Ok(())
    }

    fn event(&mut self, data: &str) -> Result<(), StreamFault> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(data))
            .map_err(|e| {
            StreamFault::BadEvent(format!("{e}: {}", crate::http::excerpt(data)))
        })?;
        if let Some(error) = chunk.error {
            let message = error["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            let code = match &error["code"] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => format!(" (code {s})"),
                other => format!(" (code {other})"),
            };
            return Err(StreamFault::InBand(format!(
                "{}{code}",
                crate::http::excerpt(&message)
            )));
        }
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.tokens);
            self.cost = u.cost.or(self.cost);
        }
        // The harness asks for one choice; LiteLLM's usage chunk carries an empty one.
        let Some(choice) = chunk.choices.into_iter().next() else {
            return Ok(());
        };
        if let Some(text) = choice.delta.content {
            self.generated_chars += text.chars().count();
            self.content.get_or_insert_with(String::new).push_str(&text);
        }
        for (key, value) in choice.delta.other {
            if super::is_provider_extra(&key, &value) {
                self.reason(key, value);
            }
        }
        for delta in choice.delta.tool_calls {
            let call = self.calls.entry(delta.index).or_insert_with(|| ToolCall {
                id: String::new(),
                kind: "function".to_string(),
                function: FunctionCall {
                    name: String::new(),
                    arguments: String::new(),
                },
            });
            if let Some(id) = delta.id.filter(|i| !i.is_empty()) {
                call.id = id;
            }
            if let Some(f) = delta.function {
                if let Some(name) = f.name.filter(|n| !n.is_empty()) {
                    call.function.name = name;
                }
                if let Some(args) = f.arguments {
                    self.generated_chars += args.chars().count();
                    call.function.arguments.push_str(&args);
                }
            }
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        Ok(())
    }

    /// One reasoning field of a delta: text is appended, `thinking_blocks` fragments are
    /// joined, other lists extended, anything else replaced.
    fn reason(&mut self, key: String, value: Value) {
        match (key.as_str(), value) {
            ("thinking_blocks", Value::Array(blocks)) => {
                // Their text is counted once, with `reasoning_content`, sent beside them.
                for block in &blocks {
                    self.thinking.add(block);
                }
            }
            (_, Value::String(text)) => {
                self.generated_chars += text.chars().count();
                match self.reasoning.get_mut(&key) {
                    Some(Value::String(so_far)) => so_far.push_str(&text),
                    _ => {
                        self.reasoning.insert(key, Value::String(text));
                    }
                }
            }
            (_, Value::Array(items)) => match self.reasoning.get_mut(&key) {
                Some(Value::Array(so_far)) => so_far.extend(items),
                _ => {
                    self.reasoning.insert(key, Value::Array(items));
                }
            },
            (_, other) => {
                self.reasoning.insert(key, other);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn feed(events: &[&str], piece: usize) -> StreamAssembler {
        let text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        let mut a = StreamAssembler::default();
        for bytes in text.as_bytes().chunks(piece) {
            a.push(bytes).unwrap();
        }
        a
    }

    const LITELLM_TOOL_STREAM: &[&str] = &[
        r#"{"id":"x","model":"glm-5.3","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"arguments":"{\"comm"}}]}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"bash","arguments":"{\"command\": \"pwd\"}"}}]}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"arguments":"and\": \"ls\"}"}}]}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}]}"#,
        r#"{"model":"glm-5.3","choices":[{"index":0,"delta":{}}],"usage":{"completion_tokens":9,"prompt_tokens":70,"total_tokens":79,"cost":0.000088}}"#,
        "[DONE]",
    ];

    /// LiteLLM streaming an Anthropic reply with extended thinking: each delta carries the
    /// fragment as `reasoning_content` and as a one-block `thinking_blocks` (also nested in
    /// `provider_specific_fields`, which is not kept); the signature ends the block.
    const LITELLM_THINKING_STREAM: &[&str] = &[
        r#"{"model":"claude","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"reasoning_content":"Let me ","thinking_blocks":[{"type":"thinking","thinking":"Let me ","signature":null}],"provider_specific_fields":{"thinking_blocks":[{"type":"thinking","thinking":"Let me ","signature":null}]}}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"reasoning_content":"list.","thinking_blocks":[{"type":"thinking","thinking":"list.","signature":null}]}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"reasoning_content":"","thinking_blocks":[{"type":"thinking","thinking":"","signature":"EqoB=="}]}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"redacted_thinking","data":"RED"}]}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"reasoning":"a","reasoning_details":[{"i":1}],"refusal":null}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"reasoning":"b","reasoning_details":[{"i":2}],"thinking_blocks":[{"type":"thinking","thinking":"unsigned","signature":null}]}}]}"#,
        r#"{"model":"claude","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]}}]}"#,
        r#"{"model":"claude","choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}]}"#,
        "[DONE]",
    ];

    #[test]
    fn reasoning_deltas_are_kept_as_the_full_reply_keeps_them() {
        for piece in [1, 5, 4096] {
            let (r, _) = feed(LITELLM_THINKING_STREAM, piece).finish().unwrap();
            let reply = crate::llm::reply_from(r, 0, std::time::Duration::ZERO).unwrap();
            assert_eq!(
                serde_json::to_value(&reply.extra).unwrap(),
                serde_json::json!({
                    "reasoning_content": "Let me list.",
                    "thinking_blocks": [
                        {"type": "thinking", "thinking": "Let me list.", "signature": "EqoB=="},
                        {"type": "redacted_thinking", "data": "RED"},
                    ],
                    "reasoning": "ab",
                    "reasoning_details": [{"i": 1}, {"i": 2}],
                })
            );
            assert_eq!(reply.tool_calls.len(), 1);
        }
        // A stream without reasoning adds no field.
        let (r, _) = feed(LITELLM_TOOL_STREAM, 7).finish().unwrap();
        assert!(r.choices[0].message.other.is_empty());
    }

    #[test]
    fn tool_call_deltas_are_assembled_by_index_whatever_the_byte_split() {
        for piece in [1, 3, 17, 4096] {
            let (r, cost) = feed(LITELLM_TOOL_STREAM, piece).finish().unwrap();
            let calls = r.choices[0].message.tool_calls.clone().unwrap();
            assert_eq!(calls.len(), 2);
            assert_eq!(calls[0].id, "call_1");
            assert_eq!(calls[0].function.name, "bash");
            assert_eq!(calls[0].function.arguments, "{\"command\": \"ls\"}");
            assert_eq!(calls[1].id, "call_2");
            assert_eq!(calls[1].function.arguments, "{\"command\": \"pwd\"}");
            assert_eq!(r.choices[0].finish_reason.as_deref(), Some("tool_calls"));
            assert_eq!(r.choices[0].message.content, None);
            assert_eq!(r.usage.unwrap().total_tokens, 79);
            assert_eq!(r.model.as_deref(), Some("glm-5.3"));
            assert_eq!(cost, Some(0.000088));
        }
    }

    #[test]
    fn a_huge_tool_call_index_costs_one_call() {
        let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1000000000,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}}]}\n\n\
data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"a\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
data: [DONE]\n\n";
        let mut a = StreamAssembler::default();
        a.push(text.as_bytes()).unwrap();
        let (r, _) = a.finish().unwrap();
        let calls = r.choices[0].message.tool_calls.clone().unwrap();
        // In index order, without placeholders for the gaps.
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
    }

    #[test]
    fn a_delta_with_a_lone_surrogate_is_read() {
        // A provider cutting an emoji between two deltas sends each half alone.
        let text = "data: {\"choices\":[{\"delta\":{\"content\":\"a\\ud83d\"}}]}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"\\ude00b\"},\"finish_reason\":\"stop\"}]}\n\n\
data: [DONE]\n\n";
        let mut a = StreamAssembler::default();
        a.push(text.as_bytes()).unwrap();
        let (r, _) = a.finish().unwrap();
        assert_eq!(
            r.choices[0].message.content.as_deref(),
            Some("a\u{fffd}\u{fffd}b")
        );
    }

    #[test]
    fn text_with_crlf_comments_and_an_empty_usage_choice_list() {
        let text = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n\
data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n\
data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\r\n\r\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\r\n\r\n\
data: [DONE]\r\n\r\n";
        let mut a = StreamAssembler::default();
        a.push(text.as_bytes()).unwrap();
        assert_eq!(a.generated_chars(), 5);
        let (r, cost) = a.finish().unwrap();
        assert_eq!(r.choices[0].message.content.as_deref(), Some("Hello"));
        assert_eq!(r.usage.unwrap().completion_tokens, 2);
        assert_eq!(cost, None);
    }

    #[test]
    fn an_event_over_the_cap_is_refused_as_it_grows() {
        let big = vec![b'x'; MAX_EVENT];
        let mut a = StreamAssembler::default();
        a.push(b"data: ").unwrap();
        assert_eq!(a.push(&big), Err(StreamFault::TooLarge));
        // The same through many short data lines of one event.
        let mut a = StreamAssembler::default();
        let line = format!("data: {}\n", "y".repeat(1 << 20));
        let mut fault = None;
        for _ in 0..17 {
            if let Err(f) = a.push(line.as_bytes()) {
                fault = Some(f);
                break;
            }
        }
        assert_eq!(fault, Some(StreamFault::TooLarge));
        assert!(StreamFault::TooLarge
            .to_string()
            .contains("larger than 16 MiB"));
    }

    #[test]
    fn an_in_band_error_is_a_fault() {
        let mut a = StreamAssembler::default();
        a.push(b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
            .unwrap();
        let e = a
            .push(b"data: {\"error\": {\"message\": \"litellm.APIConnectionError: Connection error.\", \"type\": null, \"param\": null, \"code\": \"500\"}}\n\n")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "in-band stream error: litellm.APIConnectionError: Connection error. (code 500)"
        );
    }

    #[test]
    fn early_ends_and_bad_events_are_faults() {
        let no_done = feed(&LITELLM_TOOL_STREAM[..7], 64);
        assert_eq!(
            no_done.finish().unwrap_err(),
            StreamFault::Incomplete("without data: [DONE]")
        );
        let no_finish = feed(&[LITELLM_TOOL_STREAM[1], "[DONE]"], 64);
        assert_eq!(
            no_finish.finish().unwrap_err(),
            StreamFault::Incomplete("without a finish reason")
        );
        let mut bad = StreamAssembler::default();
        let e = bad
            .push(b"data: {\"id\": \"broken\", \"choices\": [{\n\n")
            .unwrap_err();
        assert!(matches!(e, StreamFault::BadEvent(_)), "{e:?}");
    }

    #[test]
    fn a_final_event_without_a_blank_line_still_counts() {
        let mut a = StreamAssembler::default();
        a.push(b"data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]")
            .unwrap();
        assert!(!a.is_done());
        let (r, _) = a.finish().unwrap();
        assert_eq!(r.choices[0].message.content.as_deref(), Some("ok"));
    }
}
