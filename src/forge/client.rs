//! Forge adapter (HTTP): one client bound to one forge and one token, the token only in the
//! auth header its dialect names. Every request follows the one retry policy of
//! [`crate::http`]; a refusal is explained in terms of what to fix, masked.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use tracing::debug;

use super::api::{Dialect, Request};
use crate::config::ForgeConfig;
use crate::http::{self, excerpt, Fault, Retry};
use crate::secrets::{Redactor, Secret};

/// A REST client bound to one forge, one repository and one token.
#[derive(Debug)]
pub(crate) struct ForgeClient {
    http: reqwest::Client,
    root: String,
    token: Secret,
    token_source: String,
    max_retries: u32,
    redactor: Redactor,
    /// The dialect of the configured kind and repository.
    pub dialect: Dialect,
}

/// One final answer: a status no retry changes, and the body.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body, read bounded.
    pub body: String,
}

/// A failed attempt, as the retry policy sees it.
#[derive(Debug)]
pub(crate) struct Failed {
    fault: Fault,
    retry_after: Option<String>,
    /// What the user would read.
    pub reason: String,
}

impl ForgeClient {
    /// A client for `cfg`; `token` is the resolved `[forge].token_ref`.
    pub(crate) fn new(cfg: &ForgeConfig, token: Secret, redactor: Redactor) -> Result<ForgeClient> {
        let dialect = Dialect::new(cfg.kind, &cfg.repo);
        Ok(ForgeClient {
            http: http::client(cfg.timeout)?,
            root: dialect.api_root(&cfg.url),
            token,
            token_source: cfg.token_ref.describe(),
            max_retries: cfg.max_retries,
            redactor,
            dialect,
        })
    }

    /// `text` with every secret the client knows masked.
    pub(crate) fn mask(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    /// One attempt: a final answer, or what failed (a retryable status, no answer).
    pub(crate) async fn attempt(&self, req: &Request) -> Result<Answer, Failed> {
        let method =
            reqwest::Method::from_bytes(req.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let (name, value) = self.dialect.auth_header(self.token.expose());
        let mut builder = self
            .http
            .request(method, format!("{}{}", self.root, req.path))
            .header(name, value)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = &req.body {
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let resp = builder.send().await.map_err(|e| Failed {
            fault: Fault::NoAnswer,
            retry_after: None,
            reason: http::transport_message(&e),
        })?;
        let status = resp.status().as_u16();
        let retry_after = http::retry_after_header(resp.headers());
        let body = http::read_body(resp, http::MAX_BODY)
            .await
            .map_err(|e| Failed {
                fault: e.fault(),
                retry_after: None,
                reason: e.to_string(),
            })?;
        debug!("forge: {} {} -> {status}", req.method, req.path);
        if http::is_retryable_status(status) {
            return Err(Failed {
                fault: Fault::Status(status),
                retry_after,
                reason: format!("HTTP {status}: {}", self.redactor.redact(&excerpt(&body))),
            });
        }
        Ok(Answer { status, body })
    }

    /// After failed attempt number `attempt`: the wait the one policy asks for (then the
    /// next attempt's number), or the error that ends the request.
    pub(crate) async fn after_failure(
        &self,
        req: &Request,
        failed: Failed,
        attempt: u32,
    ) -> Result<u32> {
        let decision = http::decide_now(
            failed.fault,
            attempt,
            self.max_retries,
            failed.retry_after.as_deref(),
        );
        let url = format!("{}{}", self.root, req.path);
        match decision {
            Retry::After(wait) => {
                let what = format!("forge: {} {url}", req.method);
                http::pause_before_retry(&what, &failed.reason, attempt, self.max_retries, wait)
                    .await;
                Ok(attempt + 1)
            }
            Retry::GiveUp => bail!(
                "{} {url}: {} (after {} attempts)",
                req.method,
                self.redactor.redact(&failed.reason),
                attempt + 1
            ),
        }
    }

    /// Sends `req` with retries; a 2xx answer's JSON (`null` for an empty body), or an error
    /// that says what to fix.
    pub(crate) async fn call(&self, req: &Request) -> Result<Value> {
        let mut attempt = 0;
        loop {
            match self.attempt(req).await {
                Ok(answer) => return self.json(req, &answer),
                Err(failed) => attempt = self.after_failure(req, failed, attempt).await?,
            }
        }
    }

    /// A final answer's JSON, or the refusal it is.
    pub(crate) fn json(&self, req: &Request, a: &Answer) -> Result<Value> {
        if !(200..300).contains(&a.status) {
            return Err(self.refusal(req, a));
        }
        if a.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&a.body).with_context(|| {
            format!(
                "{} {}{}: the forge's answer is not JSON: {}",
                req.method,
                self.root,
                req.path,
                self.redactor.redact(&excerpt(&a.body))
            )
        })
    }

    /// Explains a final non-2xx status.
    fn refusal(&self, req: &Request, a: &Answer) -> anyhow::Error {
        let what = match a.status {
            401 => format!(
                "the forge rejected the token from {} (401): check [forge].token_ref",
                self.token_source
            ),
            403 => "the forge refused the request (403): the token lacks the scope or the user the permission (pull requests, issues: write)".to_string(),
            404 => "not found (404): check [forge].url, [forge].repo and [forge].kind".to_string(),
            300..=399 => format!(
                "a redirect ({}), which harness does not follow: set [forge].url to the address the forge answers on",
                a.status
            ),
            s => format!(
                "HTTP {s}: {}",
                self.redactor.redact(&excerpt(&a.body))
            ),
        };
        anyhow!("{} {}{}: {what}", req.method, self.root, req.path)
    }
}
