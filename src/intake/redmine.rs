//! Intake adapter for Redmine: a thin REST client ([`RedmineClient`], HTTP with retries,
//! the key only in the `X-Redmine-API-Key` header) plus PURE parsing of issues and journals
//! into a [`Task`], and the PURE claim arbitration ([`claim_winner`]).

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use tracing::{debug, info};

use super::{Source, Task};
use crate::config::{RedmineConfig, Scope};
use crate::secrets::{Redactor, Secret};

/// Marker that starts a claim note; followed by `run=<run id>`.
pub const CLAIM_MARKER: &str = "[harness-claim]";
/// Marker that starts a write-back note; followed by `run=<run id>`.
pub const REPORT_MARKER: &str = "[harness-report]";
/// Marker of a note that gives a claim up without a REPORT.
pub const RELEASE_MARKER: &str = "[harness-release]";

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
struct Answer {
    status: u16,
    body: String,
}

impl RedmineClient {
    /// A client for `cfg.url`; `key` is the resolved `[redmine].key_ref`.
    pub fn new(cfg: &RedmineConfig, key: Secret, redactor: Redactor) -> Result<RedmineClient> {
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("harness/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| anyhow!("cannot build the HTTP client: {e}"))?;
        Ok(RedmineClient {
            http,
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

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
    ) -> Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut attempt = 0;
        loop {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .header("X-Redmine-API-Key", self.key.expose())
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some((bytes, content_type)) = &body {
                req = req
                    .header(reqwest::header::CONTENT_TYPE, *content_type)
                    .body(bytes.clone());
            }
            let result = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    match resp.text().await {
                        Ok(body) => Ok(Answer { status, body }),
                        Err(e) => Err(format!("the connection broke while reading the reply: {e}")),
                    }
                }
                Err(e) => Err(crate::llm::client::transport_message(&e)),
            };
            let retry_reason = match &result {
                Ok(a) if a.status >= 500 => Some(format!("HTTP {}", a.status)),
                Ok(_) => None,
                Err(e) => Some(e.clone()),
            };
            match (result, retry_reason) {
                (Ok(a), None) => {
                    debug!("redmine: {method} {path} -> {}", a.status);
                    return Ok(a);
                }
                (_, Some(reason)) if attempt < self.max_retries => {
                    let wait = crate::llm::client::backoff(attempt, None, attempt as u64 * 397);
                    info!(
                        "redmine: {method} {url} failed ({reason}); retry {} of {} in {:.1}s",
                        attempt + 1,
                        self.max_retries,
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                (Ok(a), Some(_)) => {
                    bail!(
                        "{method} {url}: Redmine answered HTTP {} after {} attempts: {}",
                        a.status,
                        attempt + 1,
                        self.redactor.redact(&crate::llm::client::excerpt(&a.body))
                    )
                }
                (Err(e), _) => bail!(
                    "{method} {url}: {} (after {} attempts)",
                    self.redactor.redact(&e),
                    attempt + 1
                ),
            }
        }
    }

    /// Explains a non-2xx status in terms of what to fix.
    fn refusal(&self, method: &str, path: &str, a: &Answer) -> anyhow::Error {
        let url = format!("{}{path}", self.base);
        let what = match a.status {
            401 => format!(
                "Redmine rejected the API key from {} (401): check [redmine].key_ref and that the user is active",
                self.key_source
            ),
            403 => "Redmine refused the request (403): the REST API is disabled (Administration > Settings > API > Enable REST web service) or the bot user's role lacks the permission".to_string(),
            404 => "not found (404): check the issue id, [redmine].scope_query_id and [redmine].project".to_string(),
            412 => "precondition failed (412)".to_string(),
            422 => format!(
                "Redmine refused the change (422): {}",
                self.redactor.redact(&crate::llm::client::excerpt(&a.body))
            ),
            s => format!(
                "unexpected HTTP {s}: {}",
                self.redactor.redact(&crate::llm::client::excerpt(&a.body))
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
        serde_json::from_str(&a.body).with_context(|| {
            format!(
                "GET {}{path}: the body is not JSON: {}",
                self.base,
                self.redactor.redact(&crate::llm::client::excerpt(&a.body))
            )
        })
    }

    /// PUT a JSON document; Redmine answers 204 (which does not prove anything was applied).
    pub async fn put_json(&self, path: &str, body: &Value) -> Result<()> {
        let bytes = serde_json::to_vec(body).context("cannot encode the request")?;
        let a = self
            .send(
                reqwest::Method::PUT,
                path,
                Some((bytes, "application/json")),
            )
            .await?;
        match a.status {
            200 | 201 | 204 => Ok(()),
            _ => Err(self.refusal("PUT", path, &a)),
        }
    }

    /// POST raw bytes to `/uploads.json`; returns the upload token.
    pub async fn upload(&self, bytes: Vec<u8>, filename: &str) -> Result<String> {
        let path = format!("/uploads.json?filename={}", url_encode(filename));
        let a = self
            .send(
                reqwest::Method::POST,
                &path,
                Some((bytes, "application/octet-stream")),
            )
            .await?;
        if a.status != 201 && a.status != 200 {
            return Err(self.refusal("POST", &path, &a));
        }
        let v: Value =
            serde_json::from_str(&a.body).context("POST /uploads.json: the body is not JSON")?;
        v["upload"]["token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST /uploads.json: no upload token in the reply"))
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
        let path = format!("/issues/{id}.json?include=journals");
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

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An issue this run may work on, with its task.
#[derive(Debug, Clone)]
pub struct Taken {
    /// The issue as read after claiming (journals included).
    pub issue: Issue,
    /// The task built from it.
    pub task: Task,
}

/// What intake decided.
#[derive(Debug)]
pub enum Intake {
    /// Work on this issue.
    Task(Box<Taken>),
    /// Nothing in scope (or everything in scope is claimed by other runs).
    NothingInScope,
}

/// The local lock: a `flock` on a file in the report dir, held while claiming, so runs on one
/// host never race each other at all (runs on other hosts are arbitrated by the claim notes).
#[derive(Debug)]
pub struct LocalLock {
    _file: std::fs::File,
}

impl LocalLock {
    /// Waits up to `wait` for the lock.
    pub async fn acquire(dir: &std::path::Path, wait: Duration) -> Result<LocalLock> {
        use std::os::fd::AsRawFd;
        let path = dir.join(".harness-redmine.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // SAFETY: flock on a file descriptor we own; it is released when the file closes.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(LocalLock { _file: file });
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "another harness run on this host held {} for {}s",
                    path.display(),
                    wait.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Chooses the issue this run works on. With `claim`, writes a claim note (and the claim
/// status and assignee), reads the issue back and keeps it only if this run's claim is the
/// earliest since the last journal it saw; a lost race moves on to the next issue. `route`
/// is checked before claiming, so an unroutable issue is never claimed.
#[allow(clippy::too_many_arguments)]
pub async fn take(
    client: &RedmineClient,
    cfg: &RedmineConfig,
    run_id: &str,
    task_id: Option<&str>,
    force: bool,
    claim: bool,
    lock_dir: &std::path::Path,
    route: &dyn Fn(&Task) -> Result<()>,
) -> Result<Intake> {
    let bot = client.current_user().await?;
    info!(
        "intake: redmine {} as user {} (id {})",
        client.base(),
        bot.login,
        bot.id
    );
    let listed = client.list(cfg).await?;
    info!("intake: {} issue(s) in scope", listed.len());
    let candidates: Vec<Issue> = match task_id {
        None => listed,
        Some(raw) => {
            let id: u64 = raw
                .trim_start_matches('#')
                .parse()
                .map_err(|_| anyhow!("--task-id {raw:?} is not a Redmine issue number"))?;
            match listed.into_iter().find(|i| i.id == id) {
                Some(i) => vec![i],
                None if force => vec![client.issue(id).await?],
                None => bail!(
                    "issue #{id} is not in scope ({}); pass --force to run it anyway",
                    list_path(cfg)
                ),
            }
        }
    };
    if candidates.is_empty() {
        return Ok(Intake::NothingInScope);
    }
    let explicit = task_id.is_some();
    if !claim {
        for listed in candidates {
            let issue = client.issue(listed.id).await?;
            if !explicit && skip_answered(&issue) {
                continue;
            }
            let task = task(&issue, cfg);
            route(&task)?;
            return Ok(Intake::Task(Box::new(Taken { issue, task })));
        }
        return Ok(Intake::NothingInScope);
    }
    let claim_status = match &cfg.claim.status {
        Some(name) => Some((name.clone(), client.status_id(name).await?)),
        None => None,
    };
    let _lock = LocalLock::acquire(lock_dir, Duration::from_secs(120)).await?;
    let stale = chrono::Duration::minutes(cfg.claim.stale_after_mins as i64);
    for listed in candidates {
        let fresh = client.issue(listed.id).await?;
        if fresh.updated_on != listed.updated_on && !force {
            info!(
                "intake: issue #{} changed since it was listed; skipping it this run",
                fresh.id
            );
            continue;
        }
        if !explicit && skip_answered(&fresh) {
            continue;
        }
        if let Some((holder, at)) = active_claim(&fresh.journals) {
            if Utc::now() - at < stale {
                info!(
                    "intake: issue #{} is claimed by run {holder} since {at}; skipping",
                    fresh.id
                );
                continue;
            }
            info!(
                "intake: issue #{}: claim of run {holder} since {at} is stale; taking it over",
                fresh.id
            );
        }
        route(&task(&fresh, cfg))?;
        let since = fresh.journals.iter().map(|j| j.id).max().unwrap_or(0);
        let mut fields = serde_json::json!({
            "notes": format!(
                "{CLAIM_MARKER} run={run_id} host={} pid={}: harness is working on this issue.",
                hostname(),
                std::process::id()
            ),
        });
        if let Some((_, id)) = &claim_status {
            fields["status_id"] = serde_json::json!(id);
        }
        if cfg.claim.assign {
            fields["assigned_to_id"] = serde_json::json!(bot.id);
        }
        client
            .put_json(
                &format!("/issues/{}.json", fresh.id),
                &serde_json::json!({ "issue": fields }),
            )
            .await
            .with_context(|| format!("claiming issue #{}", fresh.id))?;
        let after = client.issue(fresh.id).await?;
        match claim_winner(&after.journals, since) {
            Some(w) if w == run_id => {}
            Some(other) => {
                info!("intake: issue #{} was claimed first by run {other}; trying the next one", fresh.id);
                continue;
            }
            None => bail!(
                "claiming issue #{}: the claim note was not saved (the bot's role needs the \"Add notes\" permission)",
                fresh.id
            ),
        }
        let refused = verify_claim(
            &fresh,
            &after,
            claim_status.as_ref(),
            cfg.claim.assign.then_some(&bot),
        );
        if let Some(why) = refused {
            let release = serde_json::json!({"issue": {"notes": format!("{RELEASE_MARKER} run={run_id}: giving the claim up: {why}")}});
            let _ = client
                .put_json(&format!("/issues/{}.json", fresh.id), &release)
                .await;
            bail!("claiming issue #{}: {why}", fresh.id);
        }
        info!("intake: claimed issue #{} (run {run_id})", fresh.id);
        let task = task(&after, cfg);
        return Ok(Intake::Task(Box::new(Taken { issue: after, task })));
    }
    Ok(Intake::NothingInScope)
}

/// Whether to pass over an issue that harness already answered, saying so.
fn skip_answered(issue: &Issue) -> bool {
    match answered_by(issue) {
        Some(run) => {
            info!(
                "intake: issue #{} was answered by run {run} and nothing happened since; skipping",
                issue.id
            );
            true
        }
        None => false,
    }
}

/// Checks that Redmine applied the claim (it answers 204 to changes it silently refuses).
fn verify_claim(
    before: &Issue,
    after: &Issue,
    status: Option<&(String, u64)>,
    assignee: Option<&User>,
) -> Option<String> {
    if let Some((name, id)) = status {
        if after.status.id != *id {
            return Some(format!(
                "Redmine did not apply the status change {:?} -> {name:?}: the workflow does not allow this transition for the bot's role (Administration > Workflow), or the role lacks \"Edit issues\"",
                before.status.name
            ));
        }
    }
    if let Some(bot) = assignee {
        if after.assigned_to.as_ref().map(|a| a.id) != Some(bot.id) {
            return Some(format!(
                "Redmine did not assign the issue to {} (id {}): the bot must be a project member with an assignable role",
                bot.login, bot.id
            ));
        }
    }
    None
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

// ---------- pure: wire types and parsing ----------

/// A named Redmine object reference (`{"id": 1, "name": "New"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Named {
    /// Its id.
    #[serde(default)]
    pub id: u64,
    /// Its display name.
    #[serde(default)]
    pub name: String,
}

/// The user a key belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    /// User id.
    pub id: u64,
    /// Login name.
    #[serde(default)]
    pub login: String,
}

/// A custom field value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CustomField {
    /// Field id.
    #[serde(default)]
    pub id: u64,
    /// Field name.
    #[serde(default)]
    pub name: String,
    /// Value: a string, a list (multi-value fields) or null.
    #[serde(default)]
    pub value: Value,
}

/// One journal entry (a note and/or attribute changes).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Journal {
    /// Journal id; grows with time.
    pub id: u64,
    /// Who wrote it.
    #[serde(default)]
    pub user: Named,
    /// The note text (empty for pure attribute changes).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub notes: String,
    /// When.
    pub created_on: DateTime<Utc>,
}

/// An issue as the REST API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Issue {
    /// Issue number.
    pub id: u64,
    /// Project.
    #[serde(default)]
    pub project: Named,
    /// Tracker (Bug, Feature...).
    #[serde(default)]
    pub tracker: Named,
    /// Current status.
    #[serde(default)]
    pub status: Named,
    /// Priority.
    #[serde(default)]
    pub priority: Named,
    /// Author.
    #[serde(default)]
    pub author: Named,
    /// Assignee.
    #[serde(default)]
    pub assigned_to: Option<Named>,
    /// Subject.
    #[serde(default)]
    pub subject: String,
    /// Description.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub description: String,
    /// Custom field values.
    #[serde(default)]
    pub custom_fields: Vec<CustomField>,
    /// Last change.
    pub updated_on: DateTime<Utc>,
    /// Journals (only with `include=journals` on a single issue).
    #[serde(default)]
    pub journals: Vec<Journal>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// The list path for the configured scope, with `limit`.
pub fn list_path(cfg: &RedmineConfig) -> String {
    let limit = cfg.limit;
    match &cfg.scope {
        Scope::Query(q) => format!("/issues.json?{q}&limit={limit}"),
        Scope::SavedQuery(id) => match &cfg.project {
            Some(p) => format!(
                "/projects/{}/issues.json?query_id={id}&limit={limit}",
                url_encode(p)
            ),
            None => format!("/issues.json?query_id={id}&limit={limit}"),
        },
    }
}

/// Parses `{"issues": [...]}`.
pub fn parse_issue_list(v: &Value) -> Result<Vec<Issue>> {
    let Some(list) = v.get("issues") else {
        bail!("no \"issues\" array");
    };
    serde_json::from_value(list.clone()).context("the issues are not in the expected shape")
}

/// Finds a status by name, case-insensitively; the error lists the known names.
pub fn status_by_name(statuses: &[Named], name: &str) -> Result<u64> {
    statuses
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
        .map(|s| s.id)
        .ok_or_else(|| {
            let known: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
            anyhow!(
                "Redmine has no issue status named {name:?} (known: {})",
                known.join(", ")
            )
        })
}

/// The task class: the custom field named `field`, or `default` when missing or empty.
pub fn class_of(issue: &Issue, field: &str, default: &str) -> String {
    let value = issue
        .custom_fields
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(field))
        .map(|f| match &f.value {
            Value::String(s) => s.trim().to_string(),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            _ => String::new(),
        })
        .unwrap_or_default();
    if value.is_empty() {
        default.to_string()
    } else {
        value
    }
}

/// Whether a journal is a harness marker note (claim, report, release), not discussion.
pub fn is_marker(notes: &str) -> bool {
    let n = notes.trim_start();
    n.starts_with(CLAIM_MARKER) || n.starts_with(REPORT_MARKER) || n.starts_with(RELEASE_MARKER)
}

/// The user message for the model: the issue and its discussion, clearly delimited.
pub fn prompt(issue: &Issue) -> String {
    let mut p = format!(
        "Redmine issue #{} in project {}: {}\nTracker: {} | Status: {} | Priority: {} | Author: {}\n\n=== DESCRIPTION ===\n{}\n",
        issue.id,
        issue.project.name,
        issue.subject,
        issue.tracker.name,
        issue.status.name,
        issue.priority.name,
        issue.author.name,
        if issue.description.trim().is_empty() { "(no description)" } else { issue.description.trim_end() },
    );
    let notes: Vec<&Journal> = issue
        .journals
        .iter()
        .filter(|j| !j.notes.trim().is_empty() && !is_marker(&j.notes))
        .collect();
    if !notes.is_empty() {
        p.push_str(&format!(
            "\n=== DISCUSSION ({} notes, oldest first) ===\n",
            notes.len()
        ));
        for j in notes {
            p.push_str(&format!(
                "--- {} wrote on {} ---\n{}\n",
                j.user.name,
                j.created_on.format("%Y-%m-%d %H:%M UTC"),
                j.notes.trim_end()
            ));
        }
    }
    p.push_str("=== END OF ISSUE ===\n");
    p
}

/// The task for an issue.
pub fn task(issue: &Issue, cfg: &RedmineConfig) -> Task {
    Task {
        id: issue.id.to_string(),
        source: Source::Redmine,
        subject: issue.subject.clone(),
        class: Some(class_of(issue, &cfg.class_field, &cfg.default_class)),
        prompt: prompt(issue),
    }
}

/// The run id in a marker note (`[harness-claim] run=ID ...`).
pub fn marker_run(notes: &str, marker: &str) -> Option<String> {
    let rest = notes.trim_start().strip_prefix(marker)?;
    let token = rest
        .split_whitespace()
        .find_map(|w| w.strip_prefix("run="))?;
    Some(token.trim_end_matches(['.', ',']).to_string())
}

/// Who holds the issue now: the earliest claim after the last report/release note, with its
/// time. `None` when the issue is unclaimed.
pub fn active_claim(journals: &[Journal]) -> Option<(String, DateTime<Utc>)> {
    let mut sorted: Vec<&Journal> = journals.iter().collect();
    sorted.sort_by_key(|j| j.id);
    let mut holder = None;
    for j in sorted {
        if marker_run(&j.notes, REPORT_MARKER).is_some()
            || marker_run(&j.notes, RELEASE_MARKER).is_some()
        {
            holder = None;
        } else if let Some(run) = marker_run(&j.notes, CLAIM_MARKER) {
            if holder.is_none() {
                holder = Some((run, j.created_on));
            }
        }
    }
    holder
}

/// The run whose REPORT note is the issue's latest journal: the issue was answered and
/// nobody has written or changed anything since, so working it again would only repeat the
/// answer (with the default write-back, which leaves the status, it stays in scope).
pub fn answered_by(issue: &Issue) -> Option<String> {
    let last = issue.journals.iter().max_by_key(|j| j.id)?;
    marker_run(&last.notes, REPORT_MARKER)
}

/// Claim arbitration: among the claim notes written after journal `since` (the last journal
/// seen before claiming), the earliest wins. Returns the winning run id.
pub fn claim_winner(journals: &[Journal], since: u64) -> Option<String> {
    journals
        .iter()
        .filter(|j| j.id > since)
        .filter_map(|j| marker_run(&j.notes, CLAIM_MARKER).map(|r| (j.id, r)))
        .min_by_key(|(id, _)| *id)
        .map(|(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn journal(id: u64, notes: &str) -> Journal {
        Journal {
            id,
            user: Named {
                id: 5,
                name: "CI Bot".into(),
            },
            notes: notes.into(),
            created_on: at("2026-11-30T10:00:00Z"),
        }
    }

    const ISSUE: &str = r#"{"id": 4, "project": {"id": 1, "name": "mopac"}, "tracker": {"id": 1, "name": "Bug"},
      "status": {"id": 2, "name": "In Progress", "is_closed": false}, "priority": {"id": 4, "name": "Urgent"},
      "author": {"id": 1, "name": "Redmine Admin"}, "subject": "Fix pagination off-by-one",
      "description": "Page 2 repeats the last row.", "custom_fields": [{"id": 1, "name": "Class", "value": "code"}],
      "created_on": "2026-11-30T09:49:06Z", "updated_on": "2026-11-30T09:49:37Z",
      "journals": [{"id": 1, "user": {"id": 1, "name": "Redmine Admin"}, "notes": "Seen on prod too.", "created_on": "2026-11-30T09:49:37Z", "private_notes": false, "details": []},
                   {"id": 2, "user": {"id": 5, "name": "CI Bot"}, "notes": "", "created_on": "2026-11-30T09:50:00Z", "details": [{"property":"attr"}]},
                   {"id": 3, "user": {"id": 5, "name": "CI Bot"}, "notes": "[harness-claim] run=abc", "created_on": "2026-11-30T09:51:00Z"}]}"#;

    fn issue() -> Issue {
        serde_json::from_str(ISSUE).unwrap()
    }

    fn cfg(scope: Scope, project: Option<&str>) -> RedmineConfig {
        RedmineConfig {
            url: "http://127.0.0.1:3000".into(),
            key_ref: crate::secrets::KeyRef::Env("K".into()),
            scope,
            project: project.map(String::from),
            class_field: "Class".into(),
            default_class: "primary".into(),
            limit: 50,
            timeout: Duration::from_secs(5),
            max_retries: 2,
            claim: Default::default(),
            writeback: Default::default(),
        }
    }

    #[test]
    fn list_paths_follow_the_scope() {
        assert_eq!(
            list_path(&cfg(
                Scope::Query("project_id=mopac&status_id=1".into()),
                None
            )),
            "/issues.json?project_id=mopac&status_id=1&limit=50"
        );
        assert_eq!(
            list_path(&cfg(Scope::SavedQuery(8), None)),
            "/issues.json?query_id=8&limit=50"
        );
        assert_eq!(
            list_path(&cfg(Scope::SavedQuery(9), Some("mopac"))),
            "/projects/mopac/issues.json?query_id=9&limit=50"
        );
    }

    #[test]
    fn class_comes_from_the_field_or_the_default() {
        let mut i = issue();
        assert_eq!(class_of(&i, "Class", "primary"), "code");
        assert_eq!(class_of(&i, "class", "primary"), "code");
        i.custom_fields[0].value = Value::Null;
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
        i.custom_fields[0].value = Value::String("  ".into());
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
        i.custom_fields.clear();
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
    }

    #[test]
    fn prompt_holds_the_issue_and_discussion_but_not_markers() {
        let p = prompt(&issue());
        assert_eq!(
            p,
            "Redmine issue #4 in project mopac: Fix pagination off-by-one
Tracker: Bug | Status: In Progress | Priority: Urgent | Author: Redmine Admin

=== DESCRIPTION ===
Page 2 repeats the last row.

=== DISCUSSION (1 notes, oldest first) ===
--- Redmine Admin wrote on 2026-11-30 09:49 UTC ---
Seen on prod too.
=== END OF ISSUE ===
"
        );
    }

    #[test]
    fn the_earliest_claim_after_the_snapshot_wins() {
        let js = vec![
            journal(10, "[harness-claim] run=old"),
            journal(11, "[harness-report] run=old"),
            journal(12, "[harness-claim] run=b"),
            journal(13, "[harness-claim] run=a"),
        ];
        assert_eq!(claim_winner(&js, 11), Some("b".into()));
        assert_eq!(claim_winner(&js, 12), Some("a".into()));
        assert_eq!(claim_winner(&js, 13), None);
        // A slow worker whose snapshot predates another's whole run loses to that run.
        assert_eq!(claim_winner(&js, 9), Some("old".into()));
    }

    #[test]
    fn active_claim_is_released_by_report_or_release() {
        assert_eq!(active_claim(&[journal(1, "hello")]), None);
        assert_eq!(
            active_claim(&[
                journal(1, "[harness-claim] run=x"),
                journal(2, "[harness-claim] run=y")
            ])
            .map(|c| c.0),
            Some("x".into())
        );
        assert_eq!(
            active_claim(&[
                journal(1, "[harness-claim] run=x"),
                journal(2, "[harness-report] run=x\n...")
            ]),
            None
        );
        assert_eq!(
            active_claim(&[
                journal(1, "[harness-claim] run=x"),
                journal(2, "[harness-release] run=x")
            ]),
            None
        );
    }

    #[test]
    fn an_issue_is_answered_until_someone_adds_to_it() {
        let mut i = issue();
        assert_eq!(answered_by(&i), None);
        i.journals
            .push(journal(4, "[harness-report] run=r9\nThe answer."));
        assert_eq!(answered_by(&i).as_deref(), Some("r9"));
        i.journals
            .push(journal(5, "Thanks, but what about page 3?"));
        assert_eq!(answered_by(&i), None);
    }

    #[test]
    fn status_lookup_is_case_insensitive_and_lists_known_names() {
        let s = vec![
            Named {
                id: 1,
                name: "New".into(),
            },
            Named {
                id: 2,
                name: "In Progress".into(),
            },
        ];
        assert_eq!(status_by_name(&s, "in progress").unwrap(), 2);
        let e = status_by_name(&s, "Done").unwrap_err().to_string();
        assert!(
            e.contains("\"Done\"") && e.contains("New, In Progress"),
            "{e}"
        );
    }

    #[test]
    fn list_parsing_rejects_other_shapes() {
        assert!(parse_issue_list(&serde_json::json!({"error": "x"})).is_err());
        let v = serde_json::json!({"issues": [serde_json::from_str::<Value>(ISSUE).unwrap()], "total_count": 1});
        assert_eq!(parse_issue_list(&v).unwrap()[0].id, 4);
    }
}
