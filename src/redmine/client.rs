//! Redmine adapter (HTTP): a thin REST client bound to one server and one key, the key only
//! in the `X-Redmine-API-Key` header. Retries follow the one policy of [`crate::http`]
//! (transient statuses and transport faults, `Retry-After` honoured), except that an update
//! carrying a note is sent at most once ([`RedmineClient::put_once`]: read back before it is
//! sent again); refusals are explained in terms of what to fix.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use tracing::{debug, info};

use super::issue::{list_path, parse_issue_list, status_by_name, Issue, Named, User};
use crate::config::RedmineConfig;
use crate::http::{self, excerpt, Fault, Retry};
use crate::secrets::{Redactor, Secret};

/// A Redmine REST client bound to one server and one key.
#[derive(Debug)]
pub struct RedmineClient {
    http: reqwest::Client,
    base: String,
    key: Secret,
    key_source: String,
    max_retries: u32,
    redactor: Redactor,
}

/// One HTTP answer.
pub(super) struct Answer {
    pub(super) status: u16,
    /// The body as text (lossy), for JSON and messages.
    pub(super) body: String,
}

impl Answer {
    fn new(status: u16, bytes: Vec<u8>) -> Answer {
        Answer {
            status,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }
}

/// A failed attempt: what the retry policy sees, and what the user would read.
struct Failed {
    fault: Fault,
    retry_after: Option<String>,
    answer: Option<Answer>,
    reason: String,
}

/// How an update sent with [`RedmineClient::put_once`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Redmine took it (which, for a status or an assignee, a read-back must still prove).
    Applied,
    /// A concurrent update of the same issue came first; nothing of this one was saved.
    Conflict,
}

/// Whether a 422 body is Redmine's answer to a stale object (`{"errors":[]}`): the issue
/// changed between the request's read and its write, and the transaction was rolled back.
fn is_stale(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("errors")?.as_array().map(Vec::is_empty))
        .unwrap_or(false)
}

/// A final answer, or with [`RedmineClient::send_streaming`] a 200 whose body is still
/// unread.
pub(super) enum Reply {
    Answer(Answer),
    Body(reqwest::Response),
}

impl RedmineClient {
    /// A client for `cfg.url`; `key` is the resolved `[redmine].key_ref`.
    pub fn new(cfg: &RedmineConfig, key: Secret, redactor: Redactor) -> Result<RedmineClient> {
        Ok(RedmineClient {
            http: http::client(cfg.timeout)?,
            base: cfg.url.trim_end_matches('/').to_string(),
            key,
            key_source: cfg.key_ref.describe(),
            max_retries: cfg.max_retries,
            redactor,
        })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
    ) -> Result<Answer> {
        match self.exchange(method, path, body, false).await? {
            Reply::Answer(a) => Ok(a),
            Reply::Body(_) => Err(anyhow!("an unread body")),
        }
    }

    /// A GET whose 200 body is left to the caller to read piece by piece (a download that
    /// is never held whole); any other answer is read as [`send`](Self::send) reads it.
    /// Retries stop once the body is handed over.
    pub(super) async fn send_streaming(&self, path: &str) -> Result<Reply> {
        self.exchange(reqwest::Method::GET, path, None, true).await
    }

    async fn exchange(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
        stream: bool,
    ) -> Result<Reply> {
        let mut attempt = 0;
        loop {
            let failed = match self.attempt(&method, path, body.as_ref(), stream).await {
                Ok(reply) => return Ok(reply),
                Err(failed) => failed,
            };
            attempt = self.after_failure(&method, path, failed, attempt).await?;
        }
    }

    /// One request: a final answer (a success, or a status no retry changes), or what failed.
    async fn attempt(
        &self,
        method: &reqwest::Method,
        path: &str,
        body: Option<&(Vec<u8>, &str)>,
        stream: bool,
    ) -> Result<Reply, Failed> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("X-Redmine-API-Key", self.key.expose())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some((bytes, content_type)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, *content_type)
                .body(bytes.clone());
        }
        match req.send().await {
            Ok(resp) if stream && resp.status().as_u16() == 200 => {
                debug!("redmine: {method} {path} -> 200 (streamed)");
                Ok(Reply::Body(resp))
            }
            Ok(resp) => {
                let status = resp.status().as_u16();
                let retry_after = http::retry_after_header(resp.headers());
                match http::read_body_bytes(resp, http::MAX_BODY).await {
                    Ok(body) if !http::is_retryable_status(status) => {
                        debug!("redmine: {method} {path} -> {status}");
                        Ok(Reply::Answer(Answer::new(status, body)))
                    }
                    Ok(body) => Err(Failed {
                        fault: Fault::Status(status),
                        retry_after,
                        answer: Some(Answer::new(status, body)),
                        reason: format!("HTTP {status}"),
                    }),
                    Err(e) => Err(Failed {
                        fault: e.fault(),
                        retry_after: None,
                        answer: None,
                        reason: e.to_string(),
                    }),
                }
            }
            Err(e) => Err(Failed {
                fault: Fault::NoAnswer,
                retry_after: None,
                answer: None,
                reason: http::transport_message(&e),
            }),
        }
    }

    /// After failed attempt number `attempt`: waits as the one retry policy says and returns
    /// the next attempt's number, or the error that ends the request.
    async fn after_failure(
        &self,
        method: &reqwest::Method,
        path: &str,
        failed: Failed,
        attempt: u32,
    ) -> Result<u32> {
        let url = format!("{}{path}", self.base);
        let decision = http::decide_now(
            failed.fault,
            attempt,
            self.max_retries,
            failed.retry_after.as_deref(),
        );
        match (decision, failed.answer) {
            (Retry::After(wait), _) => {
                let what = format!("redmine: {method} {url}");
                http::pause_before_retry(&what, &failed.reason, attempt, self.max_retries, wait)
                    .await;
                Ok(attempt + 1)
            }
            (Retry::GiveUp, Some(a)) => bail!(
                "{method} {url}: Redmine answered HTTP {} after {} attempts: {}",
                a.status,
                attempt + 1,
                self.redactor.redact(&excerpt(&a.body))
            ),
            (Retry::GiveUp, None) => bail!(
                "{method} {url}: {} (after {} attempts)",
                self.redactor.redact(&failed.reason),
                attempt + 1
            ),
        }
    }

    /// PUTs an update of issue `id` that must take effect at most once (a note: a claim, a
    /// release, a REPORT). An attempt whose answer is lost or is a server error may still
    /// have been applied, so before it is sent again the issue is read back and `landed`
    /// asked whether the update is already there; it is never re-sent blindly. A conflict
    /// (409, or Redmine's 422 with no error, which is how its optimistic lock answers a
    /// concurrent update of the same issue) saved nothing and is [`Put::Conflict`].
    pub async fn put_once(
        &self,
        id: u64,
        body: &Value,
        landed: impl Fn(&Issue) -> bool,
    ) -> Result<Put> {
        let path = format!("/issues/{id}.json");
        let bytes = serde_json::to_vec(body).context("cannot encode the request")?;
        let body = (bytes, "application/json");
        let method = reqwest::Method::PUT;
        let mut attempt = 0;
        loop {
            let failed = match self.attempt(&method, &path, Some(&body), false).await {
                Ok(Reply::Answer(a)) => {
                    return match a.status {
                        200 | 201 | 204 => Ok(Put::Applied),
                        409 => Ok(Put::Conflict),
                        422 if is_stale(&a.body) => Ok(Put::Conflict),
                        _ => Err(self.refusal("PUT", &path, &a)),
                    }
                }
                Ok(Reply::Body(_)) => return Err(anyhow!("an unread body")),
                Err(failed) => failed,
            };
            let reason = failed.reason.clone();
            if landed(&self.issue(id).await?) {
                info!("redmine: PUT {path} failed ({reason}) but the update is there: applied");
                return Ok(Put::Applied);
            }
            attempt = self.after_failure(&method, &path, failed, attempt).await?;
        }
    }

    /// Explains a non-2xx status in terms of what to fix.
    pub(super) fn refusal(&self, method: &str, path: &str, a: &Answer) -> anyhow::Error {
        let url = format!("{}{path}", self.base);
        let what = match a.status {
            401 => format!(
                "Redmine rejected the API key from {} (401): check [redmine].key_ref and that the user is active",
                self.key_source
            ),
            403 => "Redmine refused the request (403): the REST API is disabled (Administration > Settings > API > Enable REST web service) or the bot user's role lacks the permission".to_string(),
            404 => "not found (404): check the issue id, [redmine].scope_query_id and [redmine].project".to_string(),
            412 => "precondition failed (412)".to_string(),
            300..=399 => format!(
                "a redirect ({}), which harness does not follow: set [redmine].url to the address Redmine answers on",
                a.status
            ),
            422 => format!(
                "Redmine refused the change (422): {}",
                self.redactor.redact(&excerpt(&a.body))
            ),
            s => format!(
                "unexpected HTTP {s}: {}",
                self.redactor.redact(&excerpt(&a.body))
            ),
        };
        anyhow!("{method} {url}: {what}")
    }

    /// GET a JSON document; any non-200 is an error that says what to fix.
    pub async fn get_json(&self, path: &str) -> Result<Value> {
        let a = self.send(reqwest::Method::GET, path, None).await?;
        if a.status != 200 {
            return Err(self.refusal("GET", path, &a));
        }
        serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(&a.body)).with_context(
            || {
                format!(
                    "GET {}{path}: the body is not JSON: {}",
                    self.base,
                    self.redactor.redact(&excerpt(&a.body))
                )
            },
        )
    }

    /// The key's user: proves the key works and the REST API is on (an anonymous
    /// `/issues.json` would otherwise answer an empty 200 list).
    pub async fn current_user(&self) -> Result<User> {
        let v = self.get_json("/users/current.json").await?;
        serde_json::from_value(v["user"].clone())
            .context("GET /users/current.json: unexpected body (no user)")
    }

    /// The issues in scope, in the scope's order.
    pub async fn list(&self, cfg: &RedmineConfig) -> Result<Vec<Issue>> {
        let path = list_path(cfg);
        let v = self.get_json(&path).await?;
        parse_issue_list(&v).with_context(|| format!("GET {}{path}: unexpected body", self.base))
    }

    /// One issue with its journals.
    pub async fn issue(&self, id: u64) -> Result<Issue> {
        let path = format!("/issues/{id}.json?include=journals,attachments");
        let v = self.get_json(&path).await?;
        serde_json::from_value(v["issue"].clone())
            .with_context(|| format!("GET {}{path}: unexpected body (no issue)", self.base))
    }

    /// Status id by name (case-insensitive), from `/issue_statuses.json`.
    pub async fn status_id(&self, name: &str) -> Result<u64> {
        let v = self.get_json("/issue_statuses.json").await?;
        let statuses: Vec<Named> = serde_json::from_value(v["issue_statuses"].clone())
            .context("GET /issue_statuses.json: unexpected body")?;
        status_by_name(&statuses, name)
    }
}
