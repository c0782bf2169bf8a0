//! LLM adapter: `POST {base_url}/chat/completions` over reqwest, with per-request timeouts,
//! retries with exponential backoff and jitter, and `Retry-After`. The pure parts (what to
//! retry, how long to wait, how to classify a refusal) sit at the bottom with their tests.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use tracing::{debug, info};

use super::wire::{ChatRequest, ChatResponse};
use super::{reply_from, LlmError, LlmErrorKind, Reply};
use crate::secrets::{Redactor, Secret};

/// Longest wait a `Retry-After` header can impose; a longer ask is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// First backoff step; doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Backoff ceiling without `Retry-After`.
const BACKOFF_CAP: Duration = Duration::from_secs(20);
/// How much of an error body goes into a message.
const BODY_EXCERPT: usize = 400;

/// A client for one OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct HttpClient {
    http: reqwest::Client,
    endpoint: String,
    key: Secret,
    max_retries: u32,
    redactor: Redactor,
}

impl HttpClient {
    /// Builds a client for `{base_url}/chat/completions`; `timeout` bounds each attempt.
    pub fn new(
        base_url: &str,
        key: Secret,
        timeout: Duration,
        max_retries: u32,
        redactor: Redactor,
    ) -> anyhow::Result<HttpClient> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("harness/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
        Ok(HttpClient {
            http,
            endpoint: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            key,
            max_retries,
            redactor,
        })
    }

    /// The full URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends the request, retrying what is worth retrying, and returns a usable reply.
    pub async fn chat(&self, request: &ChatRequest<'_>) -> Result<Reply, LlmError> {
        let body = serde_json::to_vec(request).map_err(|e| LlmError {
            kind: LlmErrorKind::Rejected,
            message: format!("cannot encode the request: {e}"),
        })?;
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            let failure = match self.attempt(&body).await {
                Ok(raw) => match reply_from(raw, attempt, started.elapsed()) {
                    Ok(reply) => return Ok(reply),
                    Err(why) => Attempt::retryable(format!("unusable reply: {why}"), None),
                },
                Err(f) => f,
            };
            let message = self.redactor.redact(&failure.message);
            let tried = attempt + 1;
            if !failure.retryable || attempt >= self.max_retries {
                let kind = match failure.kind {
                    Some(k) => k,
                    None => LlmErrorKind::Exhausted,
                };
                let plural = if tried == 1 { "" } else { "s" };
                return Err(LlmError {
                    kind,
                    message: format!(
                        "POST {} failed after {tried} attempt{plural}: {message}",
                        self.endpoint
                    ),
                });
            }
            let wait = backoff(attempt, failure.retry_after, jitter_seed());
            info!(
                "llm: attempt {tried} failed ({message}); retrying in {:.1}s",
                wait.as_secs_f64()
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, body: &[u8]) -> Result<ChatResponse, Attempt> {
        let response = self
            .http
            .post(&self.endpoint)
            .bearer_auth(self.key.expose())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| Attempt::retryable(transport_message(&e), None))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers(), chrono::Utc::now());
        let text = response
            .text()
            .await
            .map_err(|e| Attempt::retryable(transport_message(&e), None))?;
        debug!("llm: HTTP {status}, {} bytes", text.len());
        if status == 200 {
            return serde_json::from_str::<ChatResponse>(&text).map_err(|e| {
                Attempt::retryable(
                    format!(
                        "HTTP 200 with a body that is not a chat completion ({e}): {}",
                        excerpt(&text)
                    ),
                    None,
                )
            });
        }
        let message = format!("HTTP {status}: {}", excerpt(&text));
        if is_retryable_status(status) {
            Err(Attempt::retryable(message, retry_after))
        } else {
            Err(Attempt {
                message,
                retryable: false,
                retry_after: None,
                kind: Some(classify_refusal(status, &text)),
            })
        }
    }
}

/// One failed attempt.
struct Attempt {
    message: String,
    retryable: bool,
    retry_after: Option<Duration>,
    kind: Option<LlmErrorKind>,
}

impl Attempt {
    fn retryable(message: String, retry_after: Option<Duration>) -> Attempt {
        Attempt {
            message,
            retryable: true,
            retry_after,
            kind: None,
        }
    }
}

fn transport_message(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the connection broke while reading the reply"
    } else {
        "transport error"
    };
    let mut chain = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    if chain.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {}", chain.join(": "))
    }
}

fn jitter_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

// ---------- pure decisions ----------

/// 408, 429 and the 5xx gateway family are worth another attempt; other statuses are final.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// How long to wait before retry number `attempt + 1`: the server's `Retry-After` (capped)
/// when given, else `BACKOFF_BASE * 2^attempt` (capped) with up to 50% jitter from `seed`.
pub fn backoff(attempt: u32, retry_after: Option<Duration>, seed: u64) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(MAX_RETRY_AFTER);
    }
    let exp = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_CAP);
    let jitter = exp.mul_f64((seed % 1000) as f64 / 2000.0);
    exp + jitter
}

/// Reads `Retry-After` (seconds or an HTTP date), or LiteLLM's `llm_provider-retry-after`
/// which is how the proxy passes the upstream's header on.
pub fn retry_after(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    ["retry-after", "llm_provider-retry-after"]
        .iter()
        .filter_map(|name| headers.get(*name)?.to_str().ok())
        .find_map(|v| parse_retry_after(v, now))
}

/// Parses a `Retry-After` value: delta seconds (integer or decimal) or an HTTP date.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(86400.0)));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

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

/// The first `BODY_EXCERPT` characters of a body, on one line.
pub fn excerpt(body: &str) -> String {
    let one_line: String = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let trimmed = one_line.trim();
    if trimmed.is_empty() {
        return "(empty body)".to_string();
    }
    match trimmed.char_indices().nth(BODY_EXCERPT) {
        Some((i, _)) => format!("{}...", &trimmed[..i]),
        None => trimmed.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422, 501] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after("2", now()), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now()),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after("Mon, 30 Nov 2026 12:00:07 GMT", now()),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after("Mon, 30 Nov 2026 11:00:00 GMT", now()),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now()), None);
        assert_eq!(parse_retry_after("-1", now()), None);
    }

    #[test]
    fn retry_after_reads_the_litellm_header_too() {
        let mut h = HeaderMap::new();
        h.insert("llm_provider-retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h, now()), Some(Duration::from_secs(3)));
        h.insert("retry-after", "1".parse().unwrap());
        assert_eq!(retry_after(&h, now()), Some(Duration::from_secs(1)));
    }

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after_capped() {
        assert_eq!(backoff(0, None, 0), Duration::from_millis(500));
        assert_eq!(backoff(1, None, 0), Duration::from_millis(1000));
        assert_eq!(
            backoff(1, None, 999),
            Duration::from_millis(1000).mul_f64(1.4995)
        );
        assert_eq!(backoff(30, None, 0), BACKOFF_CAP);
        assert_eq!(
            backoff(0, Some(Duration::from_secs(2)), 5),
            Duration::from_secs(2)
        );
        assert_eq!(
            backoff(0, Some(Duration::from_secs(900)), 5),
            MAX_RETRY_AFTER
        );
    }

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
    fn excerpts_are_one_line_and_bounded() {
        assert_eq!(excerpt(" a\nb "), "a b");
        assert_eq!(excerpt(""), "(empty body)");
        let long = "x".repeat(1000);
        assert_eq!(excerpt(&long).len(), BODY_EXCERPT + 3);
    }
}
