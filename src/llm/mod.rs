//! LLM stage: one chat round trip, from a [`wire::ChatRequest`] to a [`Reply`], over HTTP
//! ([`client`]) or from a recorded cassette ([`cassette`]). Retries live below this line;
//! the turn sees one reply or one final [`LlmError`].

pub mod cassette;
pub mod client;
pub mod preflight;
pub mod stream;
pub mod wire;

use std::time::Duration;

use wire::{ChatRequest, ChatResponse, ToolCall, Usage};

/// One usable model reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Reply text (may be empty when the model only calls tools).
    pub content: Option<String>,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, when the endpoint sent them.
    pub usage: Option<Usage>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`).
    pub finish_reason: Option<String>,
    /// The cost the endpoint reported, in USD (`x-litellm-response-cost` on a non-streamed
    /// reply, `usage.cost` in a streamed one); `None` when it said nothing.
    pub cost_usd: Option<f64>,
    /// Attempts beyond the first that this reply took.
    pub retries: u32,
    /// Wall time of the round trip, retries included.
    pub latency: Duration,
    /// Provider fields of the message to keep in the conversation ([`provider_extras`]).
    pub extra: std::collections::BTreeMap<String, serde_json::Value>,
    /// The response as received, for `--record`.
    pub raw: ChatResponse,
}

/// The provider fields of a reply message worth keeping in the conversation: reasoning
/// and thinking fields (`reasoning_content`, `thinking_blocks`, ...), which some providers
/// need back with the tool results; not `role` or the standard fields, not nulls.
pub fn provider_extras(
    other: &serde_json::Map<String, serde_json::Value>,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    other
        .iter()
        .filter(|(k, v)| is_provider_extra(k, v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether a message field (or a streamed delta's) is one of [`provider_extras`].
pub fn is_provider_extra(key: &str, value: &serde_json::Value) -> bool {
    !value.is_null() && (key.contains("reasoning") || key.contains("thinking"))
}

/// What kind of failure ended the round trip; the turn and the exit code branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmErrorKind {
    /// The endpoint refused the key (401/403, or LiteLLM's 400 `no_db_connection`).
    AuthRejected,
    /// The endpoint does not know the model (400/404 naming the model).
    UnknownModel,
    /// The proxy's budget for this key is spent (LiteLLM 422 `budget_exceeded`).
    Budget,
    /// Any other 4xx: the request itself is wrong, retrying cannot help.
    Rejected,
    /// Retryable failures (429, 5xx, transport, malformed or empty replies, broken or stalled
    /// streams) outlasted the retries.
    Exhausted,
    /// A cassette has no more replies, or holds an unusable one.
    Replay,
}

/// The final failure of one round trip, free of secrets.
#[derive(Debug, Clone)]
pub struct LlmError {
    /// The kind, for branching.
    pub kind: LlmErrorKind,
    /// What was tried and what came back (endpoint, status, trimmed body).
    pub message: String,
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LlmError {}

/// Where replies come from.
#[derive(Debug)]
pub enum Backend {
    /// A live OpenAI-compatible endpoint.
    Http(client::HttpClient),
    /// A recorded cassette, replayed in order.
    Replay(cassette::Replayer),
}

impl Backend {
    /// Whether a model was reached during this run (a cassette always is): see
    /// [`client::HttpClient::reached`]. A turn that failed without reaching one writes no
    /// REPORT and no session.
    pub fn reached(&self) -> bool {
        match self {
            Backend::Http(c) => c.reached(),
            Backend::Replay(_) => true,
        }
    }

    /// Sends one request and returns the model's reply.
    pub async fn chat(&mut self, request: &ChatRequest<'_>) -> Result<Reply, LlmError> {
        match self {
            Backend::Http(c) => c.chat(request).await,
            Backend::Replay(r) => r.next_reply(),
        }
    }

    /// Short description for narration and the PLAN: the endpoint or the cassette.
    pub fn describe(&self) -> String {
        match self {
            Backend::Http(c) => c.endpoint().to_string(),
            Backend::Replay(r) => format!("replay {}", r.path().display()),
        }
    }
}

/// Longest tool-call id kept as sent (providers' are a few dozen characters).
pub const MAX_CALL_ID: usize = 256;
/// Longest tool name kept as sent (harness's are a few characters).
pub const MAX_TOOL_NAME: usize = 256;

/// Turns a parsed response into a [`Reply`], or says why it is unusable.
pub fn reply_from(raw: ChatResponse, retries: u32, latency: Duration) -> Result<Reply, String> {
    let Some(choice) = raw.choices.first() else {
        // A proxy that answers 200 with an error object: its message says what went wrong.
        return Err(match &raw.error {
            Some(error) => {
                let message = error["message"]
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_string);
                format!(
                    "the reply has no choices but an error: {}",
                    crate::http::excerpt(&message)
                )
            }
            None => "the reply has no choices".to_string(),
        });
    };
    let content = choice.message.content.clone();
    let mut tool_calls = choice.message.tool_calls.clone().unwrap_or_default();
    for (i, call) in tool_calls.iter_mut().enumerate() {
        // Every call must get exactly one tool result keyed by id; some endpoints omit ids.
        // An id or a name of megabytes (no real one is) would be repeated in every event,
        // narration line and later request: the id is replaced as a missing one is (the
        // conversation keeps the new one on both sides), the name cut (no tool has it).
        if call.id.is_empty()
            || call.id.len() > MAX_CALL_ID
            || call.id.chars().any(char::is_control)
        {
            call.id = format!("call_{i}");
        }
        if call.function.name.len() > MAX_TOOL_NAME {
            call.function.name = crate::bounded::one_line(&call.function.name, MAX_TOOL_NAME / 4);
        }
    }
    let empty_text = content.as_deref().is_none_or(|c| c.trim().is_empty());
    if empty_text && tool_calls.is_empty() {
        return Err("the reply has no content and no tool calls".to_string());
    }
    Ok(Reply {
        extra: provider_extras(&choice.message.other),
        content,
        tool_calls,
        usage: raw.usage,
        finish_reason: choice.finish_reason.clone(),
        cost_usd: None,
        retries,
        latency,
        raw,
    })
}
