//! Leaf adapter (HTTP plumbing) shared by every HTTP peer, the LLM endpoint and Redmine:
//! client construction, the ONE retry policy ([`decide`]: which faults are retried, how long
//! to wait, `Retry-After` honoured up to [`MAX_RETRY_AFTER`]), the bounded body reader
//! ([`read_body`], at most [`MAX_BODY`]), transport error messages and body excerpts. [`decide`], [`backoff`], [`parse_retry_after`] and [`excerpt`] are PURE.
//! Imports nothing from the crate.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// Longest wait a `Retry-After` header can impose; a longer ask is cut to this.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// First backoff step; doubles per attempt.
pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Backoff ceiling without `Retry-After`.
pub(crate) const BACKOFF_CAP: Duration = Duration::from_secs(20);
/// How much of a body goes into a message, in characters.
pub(crate) const BODY_EXCERPT: usize = 400;
/// Largest response body (or stream) read from any peer: a longer one is refused without
/// being read further, so a peer cannot fill harness's memory.
pub(crate) const MAX_BODY: usize = 16 * 1024 * 1024;
/// Longest a connection may take to open, whatever the request timeout.
const CONNECT_TIMEOUT_CAP: Duration = Duration::from_secs(10);

/// A client whose every request is bounded by `timeout` (connecting by at most 10 s, and
/// always before the whole request's bound, so a TCP or TLS handshake that never ends is a
/// connect error, told from a request that was sent), with harness's user agent.
pub(crate) fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout((timeout * 3 / 4).min(CONNECT_TIMEOUT_CAP))
        .user_agent(concat!("harness/", env!("CARGO_PKG_VERSION")))
        // No redirect is followed: a peer must not send harness (and its key) anywhere but
        // the configured address, on or off 127.0.0.1; a 3xx is a final answer that
        // [`redirect_target`] explains.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
}

/// For a redirect (3xx), where it points (`Location`, or a note that it names none);
/// `None` for any other status. Harness follows no redirect: the caller says so.
pub(crate) fn redirect_target(status: u16, headers: &HeaderMap) -> Option<String> {
    if !(300..400).contains(&status) {
        return None;
    }
    let to = headers
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    Some(excerpt(
        &to.unwrap_or_else(|| "(no Location header)".into()),
    ))
}

/// What went wrong with one attempt, as far as the retry policy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The peer answered with this (non-success) status.
    Status(u16),
    /// No usable answer: a transport error, a broken, stalled or unreadable body.
    NoAnswer,
    /// The answer was larger than harness reads ([`MAX_BODY`]); another attempt would get
    /// the same.
    TooLarge,
}

/// The retry policy's verdict on a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Try again after this long.
    After(Duration),
    /// The fault is final, or the retries are spent.
    GiveUp,
}

/// The one retry policy for every HTTP peer. Attempt `attempt` (0-based) failed with
/// `fault`; `max_retries` attempts may follow the first. A transport fault or a status of
/// [`is_retryable_status`] is retried while retries remain: after the peer's `Retry-After`
/// (`retry_after`, the header's value, read at `now`; capped at [`MAX_RETRY_AFTER`]) when it
/// gave a readable one, else after [`backoff`] with jitter from `seed`. Anything else is final.
pub(crate) fn decide(
    fault: Fault,
    attempt: u32,
    max_retries: u32,
    retry_after: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
    seed: u64,
) -> Retry {
    let retryable = match fault {
        Fault::Status(status) => is_retryable_status(status),
        Fault::NoAnswer => true,
        Fault::TooLarge => false,
    };
    if !retryable || attempt >= max_retries {
        return Retry::GiveUp;
    }
    let asked = match fault {
        Fault::Status(_) => retry_after.and_then(|v| parse_retry_after(v, now)),
        Fault::NoAnswer | Fault::TooLarge => None,
    };
    Retry::After(backoff(attempt, asked, seed))
}

/// [`decide`] now, with a fresh jitter seed: what an adapter's retry loop asks.
pub(crate) fn decide_now(
    fault: Fault,
    attempt: u32,
    max_retries: u32,
    retry_after: Option<&str>,
) -> Retry {
    decide(
        fault,
        attempt,
        max_retries,
        retry_after,
        chrono::Utc::now(),
        jitter_seed(),
    )
}

/// Says on stderr that `what` (`redmine: PUT URL`) failed for `reason` and is tried again,
/// then waits `wait` (what [`decide`] said).
pub(crate) async fn pause_before_retry(
    what: &str,
    reason: &str,
    attempt: u32,
    max_retries: u32,
    wait: Duration,
) {
    tracing::info!(
        "{what} failed ({reason}); retry {} of {max_retries} in {:.1}s",
        attempt + 1,
        wait.as_secs_f64()
    );
    tokio::time::sleep(wait).await;
}

/// 408, 429 and the 5xx gateway family are worth another attempt; other statuses are final.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// How long to wait before retry number `attempt + 1`: the server's `Retry-After` (capped)
/// when given, else `BACKOFF_BASE * 2^attempt` (capped) with up to 50% jitter from `seed`.
pub(crate) fn backoff(attempt: u32, retry_after: Option<Duration>, seed: u64) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(MAX_RETRY_AFTER);
    }
    let exp = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_CAP);
    let jitter = exp.mul_f64((seed % 1000) as f64 / 2000.0);
    exp + jitter
}

/// The `Retry-After` value of a response: the standard header, or LiteLLM's
/// `llm_provider-retry-after`, which is how the proxy passes the upstream's header on.
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<String> {
    ["retry-after", "llm_provider-retry-after"]
        .iter()
        .filter_map(|name| headers.get(*name)?.to_str().ok())
        // Readable at any time: the epoch stands in for "now", which only moves the result.
        .find(|v| parse_retry_after(v, chrono::DateTime::UNIX_EPOCH).is_some())
        .map(str::to_string)
}

/// Parses a `Retry-After` value: delta seconds (integer or decimal) or an HTTP date.
pub(crate) fn parse_retry_after(
    value: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(86400.0)));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// A jitter seed that differs between calls and processes.
pub(crate) fn jitter_seed() -> u64 {
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

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// The body is (or announced itself as) longer than the limit.
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The connection failed while reading.
    Transport(reqwest::Error),
}

impl BodyError {
    /// The retry policy's view of it.
    pub(crate) fn fault(&self) -> Fault {
        match self {
            BodyError::TooLarge { .. } => Fault::TooLarge,
            BodyError::Transport(_) => Fault::NoAnswer,
        }
    }
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge { limit } => write!(
                f,
                "the reply is larger than {} MiB, more than harness reads",
                limit / (1024 * 1024)
            ),
            BodyError::Transport(e) => f.write_str(&transport_message(e)),
        }
    }
}

/// Reads a response's body as text (invalid UTF-8 replaced), at most `limit` bytes; see
/// [`read_body_bytes`].
pub(crate) async fn read_body(
    response: reqwest::Response,
    limit: usize,
) -> Result<String, BodyError> {
    let bytes = read_body_bytes(response, limit).await?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads a response's body, at most `limit` bytes: a body that announces more
/// (`Content-Length`) is refused unread, one that sends more is cut off at the limit. The one
/// body reader of every peer (attachments keep their bytes as sent).
pub(crate) async fn read_body_bytes(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = BodyLimit::new(limit);
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        body.count(chunk.len())?;
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Counts the bytes of a body read piece by piece (a stream), refusing past a limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit {
    limit: usize,
    read: usize,
}

impl BodyLimit {
    /// A count of nothing yet, against `limit`.
    pub(crate) fn new(limit: usize) -> BodyLimit {
        BodyLimit { limit, read: 0 }
    }

    /// Adds `n` bytes; an error once the total is over the limit.
    pub(crate) fn count(&mut self, n: usize) -> Result<(), BodyError> {
        self.read = self.read.saturating_add(n);
        if self.read > self.limit {
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        Ok(())
    }
}

/// What a transport failure was (timeout, connect, broken body), with its cause chain.
pub(crate) fn transport_message(e: &reqwest::Error) -> String {
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
    let https = e.url().is_some_and(|u| u.scheme() == "https");
    let text = if chain.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {}", chain.join(": "))
    };
    format!("{text}{}", plain_http_hint(https, e.is_connect(), &text))
}

/// The likely cause when an `https://` URL meets a server that speaks plain HTTP (PURE): it
/// answers the TLS hello in plain text (rustls: `InvalidContentType`), or waits for an HTTP
/// request that never comes, and the handshake times out.
fn plain_http_hint(https: bool, connect: bool, text: &str) -> &'static str {
    if !(https && connect) {
        return "";
    }
    if text.contains("InvalidContentType") || text.contains("corrupt message") {
        "; the server answered in plain HTTP, not TLS: use http:// in the URL"
    } else if text.contains("timed out") {
        "; the TLS handshake never finished: if the server speaks plain HTTP, use http:// in the URL"
    } else {
        ""
    }
}

/// The first [`BODY_EXCERPT`] characters of a body, on one line.
pub(crate) fn excerpt(body: &str) -> String {
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
mod plain_http_tests {
    use super::plain_http_hint;

    #[test]
    fn https_against_plain_http_is_named() {
        let tls = "could not connect: client error (Connect): received corrupt message of type InvalidContentType";
        assert!(plain_http_hint(true, true, tls).contains("answered in plain HTTP"));
        let slow = "timed out: client error (Connect): operation timed out";
        assert!(plain_http_hint(true, true, slow).contains("use http://"));
        assert_eq!(plain_http_hint(false, true, slow), "");
        assert_eq!(plain_http_hint(true, false, slow), "");
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

    fn secs(s: u64) -> Retry {
        Retry::After(Duration::from_secs(s))
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 412, 422, 501, 505] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn the_policy_retries_transient_faults_while_retries_remain() {
        let d = |fault, attempt, ra| decide(fault, attempt, 2, ra, now(), 0);
        assert_eq!(d(Fault::NoAnswer, 0, None), Retry::After(BACKOFF_BASE));
        assert_eq!(d(Fault::NoAnswer, 1, None), Retry::After(BACKOFF_BASE * 2));
        assert_eq!(d(Fault::NoAnswer, 2, None), Retry::GiveUp);
        assert_eq!(d(Fault::Status(503), 0, None), Retry::After(BACKOFF_BASE));
        assert_eq!(d(Fault::Status(503), 2, Some("1")), Retry::GiveUp);
        assert_eq!(
            decide(Fault::Status(503), 0, 0, None, now(), 0),
            Retry::GiveUp
        );
    }

    #[test]
    fn a_body_over_the_cap_is_final() {
        assert_eq!(
            decide(Fault::TooLarge, 0, 5, Some("1"), now(), 0),
            Retry::GiveUp
        );
        let mut b = BodyLimit::new(10);
        assert!(b.count(10).is_ok());
        assert!(matches!(b.count(1), Err(BodyError::TooLarge { limit: 10 })));
        assert_eq!(
            BodyError::TooLarge { limit: MAX_BODY }.to_string(),
            "the reply is larger than 16 MiB, more than harness reads"
        );
    }

    #[test]
    fn final_statuses_are_never_retried_whatever_retry_after_says() {
        for s in [400, 401, 403, 404, 422, 501] {
            assert_eq!(
                decide(Fault::Status(s), 0, 5, Some("1"), now(), 0),
                Retry::GiveUp
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let d = |ra| decide(Fault::Status(429), 0, 3, Some(ra), now(), 999);
        assert_eq!(d("2"), secs(2));
        assert_eq!(d("0"), secs(0));
        assert_eq!(d("Mon, 30 Nov 2026 12:00:07 GMT"), secs(7));
        // A date in the past means now.
        assert_eq!(d("Mon, 30 Nov 2026 11:00:00 GMT"), secs(0));
        assert_eq!(d("3600"), Retry::After(MAX_RETRY_AFTER));
        assert_eq!(
            d("Tue, 01 Dec 2026 12:00:00 GMT"),
            Retry::After(MAX_RETRY_AFTER)
        );
        // Unreadable: the usual backoff, with its jitter.
        assert_eq!(d("soon"), Retry::After(BACKOFF_BASE.mul_f64(1.4995)));
        assert_eq!(d("-1"), Retry::After(BACKOFF_BASE.mul_f64(1.4995)));
    }

    #[test]
    fn retry_after_values_are_parsed() {
        assert_eq!(parse_retry_after("2", now()), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now()),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_retry_after("soon", now()), None);
        assert_eq!(parse_retry_after("-1", now()), None);
        assert_eq!(parse_retry_after("NaN", now()), None);
    }

    #[test]
    fn retry_after_reads_the_litellm_header_too() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after_header(&h), None);
        h.insert("llm_provider-retry-after", "3".parse().unwrap());
        assert_eq!(retry_after_header(&h).as_deref(), Some("3"));
        h.insert("retry-after", "1".parse().unwrap());
        assert_eq!(retry_after_header(&h).as_deref(), Some("1"));
        // An unreadable standard header does not hide a readable LiteLLM one.
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after_header(&h).as_deref(), Some("3"));
    }

    #[test]
    fn backoff_grows_with_jitter_up_to_its_cap() {
        assert_eq!(backoff(0, None, 0), Duration::from_millis(500));
        assert_eq!(backoff(1, None, 0), Duration::from_millis(1000));
        assert_eq!(
            backoff(1, None, 999),
            Duration::from_millis(1000).mul_f64(1.4995)
        );
        assert_eq!(backoff(30, None, 0), BACKOFF_CAP);
        assert_eq!(
            backoff(0, Some(Duration::from_secs(900)), 5),
            MAX_RETRY_AFTER
        );
    }

    #[test]
    fn a_redirect_is_named_with_its_target() {
        let mut h = HeaderMap::new();
        assert_eq!(redirect_target(200, &h), None);
        assert_eq!(redirect_target(404, &h), None);
        assert_eq!(
            redirect_target(302, &h).as_deref(),
            Some("(no Location header)")
        );
        h.insert("location", "http://10.0.0.1/v1".parse().unwrap());
        assert_eq!(
            redirect_target(307, &h).as_deref(),
            Some("http://10.0.0.1/v1")
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
