//! LLM adapter: `POST {base_url}/chat/completions` over reqwest, with per-request timeouts,
//! retries under the one policy of [`crate::http`] (backoff with jitter, `Retry-After`); optionally streamed (SSE,
//! assembled by [`super::stream`], with an idle timeout and progress narration). Also the two
//! no-cost reads of a LiteLLM proxy: `GET /models` (preflight, `harness check`) and
//! `GET /model/info` (prices). The pure parts (how to classify a refusal, how to read the
//! listings) sit at the bottom with their tests.

use std::collections::BTreeMap;

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use tracing::{debug, info};

use super::stream::StreamAssembler;
use super::wire::{ChatRequest, ChatResponse};
use super::{reply_from, LlmError, LlmErrorKind, Reply};
use crate::config::{LitellmConfig, ModelPrice};
use crate::http::{self, excerpt, transport_message, Fault, Retry};
use crate::jsontext::lone_surrogates_replaced;
use crate::secrets::{KeyRef, Redactor, Secret};

/// How often a streaming reply's progress is narrated.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The header LiteLLM puts the cost of a non-streamed reply in (USD; always 0 on streams).
const COST_HEADER: &str = "x-litellm-response-cost";

/// How the client talks to the endpoint.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Bounds each attempt, a streamed reply included (`[litellm] timeout_secs`).
    pub timeout: Duration,
    /// Retries after the first attempt (`[litellm] max_retries`).
    pub max_retries: u32,
    /// Ask for SSE (`[litellm] streaming`).
    pub streaming: bool,
    /// Longest silence inside a stream (`[litellm] stream_idle_timeout_secs`).
    pub stream_idle_timeout: Duration,
    /// Where the key came from (`env:NAME`), for "the key was rejected" messages.
    pub key_label: String,
}

impl ClientOptions {
    /// The options `[litellm]` configures, for the key from `key_ref`.
    pub fn new(cfg: &LitellmConfig, key_ref: &KeyRef) -> ClientOptions {
        ClientOptions {
            timeout: cfg.timeout,
            max_retries: cfg.max_retries,
            streaming: cfg.streaming,
            stream_idle_timeout: cfg.stream_idle_timeout,
            key_label: key_ref.describe(),
        }
    }
}

/// A client for one OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct HttpClient {
    http: reqwest::Client,
    base_url: String,
    endpoint: String,
    key: Secret,
    options: ClientOptions,
    redactor: Redactor,
    /// Whether a chat request has reached a model (see [`HttpClient::reached`]).
    reached: std::sync::atomic::AtomicBool,
}

impl HttpClient {
    /// Builds a client for `{base_url}/chat/completions`.
    pub fn new(
        base_url: &str,
        key: Secret,
        options: ClientOptions,
        redactor: Redactor,
    ) -> anyhow::Result<HttpClient> {
        let http = http::client(options.timeout)?;
        let base_url = base_url.trim_end_matches('/').to_string();
        Ok(HttpClient {
            http,
            endpoint: format!("{base_url}/chat/completions"),
            base_url,
            key,
            options,
            redactor,
            reached: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether any chat request so far reached a model: harness connected (TCP and TLS),
    /// sent the request, and did not get a 404 that names no model (a wrong `base_url`,
    /// where no chat endpoint lives). A reply, any other status (401, 422, 429, 5xx), a
    /// stream or body that broke off, and a server that took the request and never
    /// answered all count as reached; a refused connection, a failed or timed-out TCP or
    /// TLS handshake, or that 404 on every attempt does not.
    pub fn reached(&self) -> bool {
        self.reached.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether replies are streamed.
    pub fn streaming(&self) -> bool {
        self.options.streaming
    }

    /// The full URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends the request, retrying what is worth retrying, and returns a usable reply. With
    /// streaming, a broken, stalled or in-band-failed stream is one failed attempt: the
    /// request is sent again whole, within the same `max_retries`.
    pub async fn chat(&self, request: &ChatRequest<'_>) -> Result<Reply, LlmError> {
        let streaming = self.options.streaming;
        let request = ChatRequest {
            stream: streaming,
            stream_options: streaming.then(|| serde_json::json!({"include_usage": true})),
            ..request.clone()
        };
        let body = serde_json::to_vec(&request).map_err(|e| LlmError {
            kind: LlmErrorKind::Rejected,
            message: format!("cannot encode the request: {e}"),
        })?;
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            let failure = match self.attempt(&body, request.model).await {
                Ok((raw, cost)) => match reply_from(raw, attempt, started.elapsed()) {
                    Ok(reply) => {
                        return Ok(Reply {
                            cost_usd: cost,
                            ..reply
                        })
                    }
                    Err(why) => Attempt::no_answer(format!("unusable reply: {why}")),
                },
                Err(f) => f,
            };
            let message = self.redactor.redact(&failure.message);
            let tried = attempt + 1;
            let decision = http::decide_now(
                failure.fault,
                attempt,
                self.options.max_retries,
                failure.retry_after.as_deref(),
            );
            let Retry::After(wait) = decision else {
                let kind = match failure.kind {
                    Some(k) => k,
                    None => LlmErrorKind::Exhausted,
                };
                let plural = if tried == 1 { "" } else { "s" };
                let what = match kind {
                    LlmErrorKind::AuthRejected => format!(
                        "the endpoint rejected the key from [litellm].key_ref ({}): ",
                        self.options.key_label
                    ),
                    LlmErrorKind::Budget => {
                        "the proxy's budget for this key is exhausted: ".to_string()
                    }
                    LlmErrorKind::UnknownModel
                    | LlmErrorKind::Rejected
                    | LlmErrorKind::Exhausted
                    | LlmErrorKind::Replay => String::new(),
                };
                return Err(LlmError {
                    kind,
                    message: format!(
                        "{what}POST {} failed after {tried} attempt{plural}: {message}",
                        self.endpoint
                    ),
                });
            };
            info!(
                "llm: attempt {tried} failed ({message}); retrying in {:.1}s",
                wait.as_secs_f64()
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        body: &[u8],
        model: &str,
    ) -> Result<(ChatResponse, Option<f64>), Attempt> {
        let response = self
            .http
            .post(&self.endpoint)
            .bearer_auth(self.key.expose())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| {
                // A connect error (reqwest's connector does TCP and TLS, its timeout
                // included) means the request never left: no model was reached.
                self.note_reached(!e.is_connect());
                Attempt::no_answer(transport_message(&e))
            })?;
        let status = response.status().as_u16();
        self.note_reached(status != 404);
        let retry_after = http::retry_after_header(response.headers());
        let redirect = http::redirect_target(status, response.headers());
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            // Media types are case-insensitive (`Text/Event-Stream; charset=utf-8`).
            .is_some_and(|v| {
                v.trim()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        if status == 200 && is_sse {
            return self.read_stream(response, model).await;
        }
        // Streams cost 0 in this header (it is sent before the cost is known): only a
        // non-streamed body's header is a real figure.
        let cost = response_cost(response.headers());
        let text = http::read_body(response, http::MAX_BODY)
            .await
            .map_err(Attempt::unread)?;
        debug!("llm: HTTP {status}, {} bytes", text.len());
        if status == 200 {
            return serde_json::from_str::<ChatResponse>(&lone_surrogates_replaced(&text))
                .map(|r| (r, cost))
                .map_err(|e| {
                    Attempt::no_answer(format!(
                        "HTTP 200 with a body that is not a chat completion ({e}): {}",
                        excerpt(&text)
                    ))
                });
        }
        // A status the policy retries ends, when retries run out, as Exhausted; any other is
        // final at once and classified.
        let message = match redirect {
            Some(to) => format!(
                "HTTP {status}: a redirect to {to}, which harness does not follow; set [litellm].base_url to the final address"
            ),
            None => format!("HTTP {status}: {}", excerpt(&text)),
        };
        let kind = (!http::is_retryable_status(status)).then(|| classify_refusal(status, &text));
        // A 404 that names the model came from a chat endpoint (the model is unknown).
        self.note_reached(kind == Some(LlmErrorKind::UnknownModel));
        Err(Attempt {
            message,
            fault: Fault::Status(status),
            retry_after,
            kind,
        })
    }

    fn note_reached(&self, reached: bool) {
        if reached {
            self.reached
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl HttpClient {
    /// Reads an SSE body into one response, narrating progress; every fault is retryable.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        model: &str,
    ) -> Result<(ChatResponse, Option<f64>), Attempt> {
        let idle = self.options.stream_idle_timeout;
        let started = Instant::now();
        let mut narrated = Instant::now();
        let mut sse = StreamAssembler::default();
        let mut body = http::BodyLimit::new(http::MAX_BODY);
        loop {
            let chunk = match tokio::time::timeout(idle, response.chunk()).await {
                Err(_) => {
                    return Err(Attempt::no_answer(format!(
                        "the stream stalled: no data for {}s (stream_idle_timeout_secs)",
                        idle.as_secs()
                    )))
                }
                Ok(Err(e)) => return Err(Attempt::no_answer(transport_message(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => bytes,
            };
            body.count(chunk.len()).map_err(Attempt::unread)?;
            sse.push(&chunk).map_err(Attempt::stream)?;
            if narrated.elapsed() >= PROGRESS_EVERY {
                narrated = Instant::now();
                info!(
                    "llm: {model} streaming, ~{} tokens so far ({:.0}s)",
                    sse.generated_chars().div_ceil(4),
                    started.elapsed().as_secs_f64()
                );
            }
            if sse.is_done() {
                break;
            }
        }
        sse.finish().map_err(Attempt::stream)
    }

    /// `GET {base_url}/models`: the model ids the endpoint serves for this key. One attempt.
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        let text = self.get("models").await?;
        parse_model_list(&text).map_err(|why| LlmError {
            kind: LlmErrorKind::Rejected,
            message: format!("GET {}/models: {why}: {}", self.base_url, excerpt(&text)),
        })
    }

    /// `GET {base_url}/model/info` (LiteLLM): per-model prices the proxy is configured with.
    pub async fn model_prices(&self) -> Result<BTreeMap<String, ModelPrice>, LlmError> {
        let text = self.get("model/info").await?;
        parse_model_info(&text).map_err(|why| LlmError {
            kind: LlmErrorKind::Rejected,
            message: format!(
                "GET {}/model/info: {why}: {}",
                self.base_url,
                excerpt(&text)
            ),
        })
    }

    async fn get(&self, path: &str) -> Result<String, LlmError> {
        let url = format!("{}/{path}", self.base_url);
        let fail = |kind, what: String| LlmError {
            kind,
            message: self.redactor.redact(&format!("GET {url} failed: {what}")),
        };
        let response = self
            .http
            .get(&url)
            .bearer_auth(self.key.expose())
            .send()
            .await
            .map_err(|e| fail(LlmErrorKind::Exhausted, transport_message(&e)))?;
        let status = response.status().as_u16();
        let redirect = http::redirect_target(status, response.headers());
        let text = http::read_body(response, http::MAX_BODY)
            .await
            .map_err(|e| {
                let a = Attempt::unread(e);
                fail(a.kind.unwrap_or(LlmErrorKind::Exhausted), a.message)
            })?;
        if status == 200 {
            return Ok(text);
        }
        let kind = if http::is_retryable_status(status) {
            LlmErrorKind::Exhausted
        } else {
            classify_refusal(status, &text)
        };
        let key_note = if kind == LlmErrorKind::AuthRejected {
            format!(
                "the key from [litellm].key_ref ({}) was rejected: ",
                self.options.key_label
            )
        } else {
            String::new()
        };
        let what = match redirect {
            Some(to) => format!("a redirect to {to}, which harness does not follow; set [litellm].base_url to the final address"),
            None => excerpt(&text),
        };
        Err(fail(kind, format!("{key_note}HTTP {status}: {what}")))
    }
}

/// One failed attempt.
struct Attempt {
    message: String,
    fault: Fault,
    /// The response's `Retry-After` value, for the retry policy.
    retry_after: Option<String>,
    /// Set for a final refusal; `None` ends as [`LlmErrorKind::Exhausted`].
    kind: Option<LlmErrorKind>,
}

impl Attempt {
    /// A body that could not be read: a broken connection is retried, a body over the cap
    /// is final.
    fn unread(e: http::BodyError) -> Attempt {
        Attempt {
            message: e.to_string(),
            fault: e.fault(),
            retry_after: None,
            kind: (e.fault() == Fault::TooLarge).then_some(LlmErrorKind::Rejected),
        }
    }

    /// A stream that went wrong: retried, unless an event is over the cap.
    fn stream(f: super::stream::StreamFault) -> Attempt {
        match f {
            super::stream::StreamFault::TooLarge => Attempt {
                message: f.to_string(),
                fault: Fault::TooLarge,
                retry_after: None,
                kind: Some(LlmErrorKind::Rejected),
            },
            other => Attempt::no_answer(other.to_string()),
        }
    }

    /// No usable answer (transport, a broken stream, an unreadable reply): always retryable.
    fn no_answer(message: String) -> Attempt {
        Attempt {
            message,
            fault: Fault::NoAnswer,
            retry_after: None,
            kind: None,
        }
    }
}

// ---------- pure decisions ----------

/// Classifies a final (non-retryable) refusal from its status and body.
pub fn classify_refusal(status: u16, body: &str) -> LlmErrorKind {
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let err = &json["error"];
    let kind = err["type"].as_str().unwrap_or_default();
    let code = match &err["code"] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let message = err["message"].as_str().unwrap_or(body).to_ascii_lowercase();
    if status == 401 || status == 403 || kind == "no_db_connection" || kind == "auth_error" {
        return LlmErrorKind::AuthRejected;
    }
    if kind == "budget_exceeded" || code == "budget_exceeded" {
        return LlmErrorKind::Budget;
    }
    let model_words = [
        "invalid model",
        "model not found",
        "does not exist",
        "no such model",
        "unknown model",
        "model_not_found",
    ];
    if (status == 400 || status == 404)
        && (code == "model_not_found" || model_words.iter().any(|w| message.contains(w)))
    {
        return LlmErrorKind::UnknownModel;
    }
    LlmErrorKind::Rejected
}

/// The cost header of a non-streamed reply, when present and a finite non-negative number.
pub fn response_cost(headers: &HeaderMap) -> Option<f64> {
    headers
        .get(COST_HEADER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|c| c.is_finite() && *c >= 0.0)
}

/// Reads an OpenAI `GET /models` listing: `{"data": [{"id": "..."}]}`.
pub fn parse_model_list(body: &str) -> Result<Vec<String>, String> {
    let json: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("not JSON ({e})"))?;
    let data = json["data"]
        .as_array()
        .ok_or("no \"data\" list in the reply")?;
    Ok(data
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect())
}

/// Reads LiteLLM's `GET /model/info`: `model_info.{input,output}_cost_per_token` (USD per
/// token) of each `model_name`, as USD per million tokens. Models without prices are left out.
pub fn parse_model_info(body: &str) -> Result<BTreeMap<String, ModelPrice>, String> {
    let json: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("not JSON ({e})"))?;
    let data = json["data"]
        .as_array()
        .ok_or("no \"data\" list in the reply")?;
    let mut prices = BTreeMap::new();
    for entry in data {
        let Some(name) = entry["model_name"].as_str() else {
            continue;
        };
        // A price is a sum of money: a negative one would hold a cost budget off.
        let per_token = |k: &str| {
            entry["model_info"][k]
                .as_f64()
                .or_else(|| entry["litellm_params"][k].as_f64())
                .filter(|p| p.is_finite() && *p >= 0.0)
        };
        if let (Some(input), Some(output)) = (
            per_token("input_cost_per_token"),
            per_token("output_cost_per_token"),
        ) {
            prices.insert(
                name.to_string(),
                ModelPrice {
                    input_usd_per_mtok: input * 1_000_000.0,
                    output_usd_per_mtok: output * 1_000_000.0,
                },
            );
        }
    }
    Ok(prices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn refusals_are_classified() {
        assert_eq!(classify_refusal(401, "{}"), LlmErrorKind::AuthRejected);
        assert_eq!(
            classify_refusal(
                400,
                r#"{"error":{"message":"No connected db.","type":"no_db_connection","param":null,"code":"400"}}"#
            ),
            LlmErrorKind::AuthRejected
        );
        assert_eq!(
            classify_refusal(
                422,
                r#"{"error":{"message":"Budget has been exceeded!","type":"budget_exceeded","param":null,"code":"422"}}"#
            ),
            LlmErrorKind::Budget
        );
        assert_eq!(
            classify_refusal(
                400,
                r#"{"error":{"message":"litellm.BadRequestError: Invalid model name passed in model=glm-9","type":"invalid_request_error","code":"400"}}"#
            ),
            LlmErrorKind::UnknownModel
        );
        assert_eq!(
            classify_refusal(
                404,
                r#"{"error":{"message":"The model `x` does not exist","code":"model_not_found"}}"#
            ),
            LlmErrorKind::UnknownModel
        );
        assert_eq!(
            classify_refusal(400, "bad tool schema"),
            LlmErrorKind::Rejected
        );
    }

    #[test]
    fn the_cost_header_is_read_when_sane() {
        let mut h = HeaderMap::new();
        assert_eq!(response_cost(&h), None);
        h.insert(COST_HEADER, "0.002".parse().unwrap());
        assert_eq!(response_cost(&h), Some(0.002));
        h.insert(COST_HEADER, "NaN".parse().unwrap());
        assert_eq!(response_cost(&h), None);
    }

    #[test]
    fn model_listings_are_read() {
        assert_eq!(
            parse_model_list(
                r#"{"data":[{"id":"glm-5.3","object":"model"},{"id":"glm-5.2"}],"object":"list"}"#
            ),
            Ok(vec!["glm-5.3".to_string(), "glm-5.2".to_string()])
        );
        assert!(parse_model_list("{}").is_err());
        let info = r#"{"data":[
            {"model_name":"glm-5.3","litellm_params":{"model":"openai/glm-5.3"},"model_info":{"input_cost_per_token":1e-6,"output_cost_per_token":2e-6}},
            {"model_name":"free","model_info":{"input_cost_per_token":null}}]}"#;
        let prices = parse_model_info(info).unwrap();
        assert_eq!(prices.len(), 1);
        assert_eq!(prices["glm-5.3"].input_usd_per_mtok, 1.0);
        assert_eq!(prices["glm-5.3"].output_usd_per_mtok, 2.0);
    }
}
