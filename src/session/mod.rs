//! Session stage: the conversation of one task carried from run to run (and host to host),
//! keyed by `<vertical>/<source>/<task_id>`. [`open`] finds the stored session (a Redmine
//! attachment on the issue and/or the local file under `report_dir`), reads, repairs and
//! trims it and decides the message that opens this run; [`save`] appends this run and
//! writes it back locally, returning the bytes to attach to the REPORT note.
//!
//! A session that cannot be read is never an error: the run starts fresh and says why in
//! the REPORT. The only error is `--resume` naming a run the session does not have.
//! The format is [`file`] (PURE), the decisions [`history`] (PURE), the streaming read
//! [`load`] (PURE), the I/O [`store`]. What is held and what is written is bounded by the
//! cap: the first message, the newest whole rounds that fit, and every run's record.

pub(crate) mod file;
pub(crate) mod history;
pub(crate) mod load;
pub(crate) mod store;

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use tracing::{info, warn};

use crate::config::{Config, SessionStore};
use crate::intake::{Source, Task};
use crate::llm::wire::{Content, Message, Part, ToolCall};
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::Issue;
use crate::secrets::Redactor;
use file::{RunRecord, Session, Stored};
use history::Opening;

/// Where a task's session lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Only the local file.
    Local,
    /// Attached to the issue (and kept locally); with `local_fallback`, the local file is
    /// read when the issue has no session attached.
    Redmine {
        /// `store = "auto"` reads the local file when the issue has none.
        local_fallback: bool,
    },
}

impl Place {
    /// `[session].store` for a task of `source`: only Redmine tasks have an issue to
    /// attach to.
    pub(crate) fn of(store: SessionStore, source: Source) -> Place {
        match (store, source) {
            (SessionStore::Local, _) | (_, Source::Demo | Source::Inbox) => Place::Local,
            (SessionStore::Auto, Source::Redmine) => Place::Redmine {
                local_fallback: true,
            },
            (SessionStore::Redmine, Source::Redmine) => Place::Redmine {
                local_fallback: false,
            },
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Place::Local => "local",
            Place::Redmine { .. } => "redmine",
        }
    }
}

/// The REPORT's `session:` front matter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SessionInfo {
    /// `<vertical>/<source>/<task_id>`.
    pub key: String,
    /// `local` or `redmine`.
    pub store: String,
    /// The run this one continues; `null` for a fresh start.
    pub parent_run: Option<String>,
    /// Stored messages sent again (after trimming).
    pub messages_loaded: usize,
    /// Their estimated tokens.
    pub tokens_loaded: u64,
    /// Rounds dropped to fit `[session].max_history_tokens`.
    pub rounds_dropped: usize,
    /// Tool calls given a synthetic result, or stray results dropped.
    pub repaired: usize,
    /// Why the run started fresh (`no stored session`, `--fresh`, an unreadable file).
    pub fresh_reason: Option<String>,
}

/// A session opened for this run.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// Where it is kept.
    pub place: Place,
    /// The local file.
    pub local: PathBuf,
    /// The stored session, repaired (cut at the run for `--resume`), with the messages
    /// kept under the cap; empty when fresh.
    pub stored: Session,
    /// `[session].max_history_tokens`, which also bounds what is saved.
    pub cap: u64,
    /// The history to send, trimmed to the cap.
    pub history: Vec<Message>,
    /// The message that opens this run, or no model call at all.
    pub opening: Opening,
    /// What the REPORT says about it.
    pub info: SessionInfo,
}

/// The messages of the first request: the system prompt (rebuilt every run), the stored
/// history in stored order, then the opening message; without a session, the task's
/// `prompt` alone.
pub(crate) fn start(opened: Option<&Opened>, system: String, prompt: &str) -> Vec<Message> {
    let history = opened.map_or(&[][..], |o| &o.history[..]);
    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(Message::System { content: system });
    messages.extend(history.iter().cloned());
    let opening = match opened.map(|o| &o.opening) {
        None => Some(prompt),
        Some(Opening::Send(text)) => Some(text.as_str()),
        Some(Opening::NothingNew { .. }) => None,
    };
    if let Some(text) = opening {
        messages.push(Message::user(text));
    }
    messages
}

impl Opened {
    /// The task id part of the session key.
    pub(crate) fn stored_task_id(&self) -> String {
        self.info
            .key
            .splitn(3, '/')
            .nth(2)
            .unwrap_or_default()
            .to_string()
    }

    /// The PLAN's `session:` line.
    pub(crate) fn plan_line(&self) -> String {
        let i = &self.info;
        match (&i.parent_run, &self.opening) {
            (None, _) => format!(
                "{} ({}): fresh ({})",
                i.key,
                i.store,
                i.fresh_reason.as_deref().unwrap_or("no stored session")
            ),
            (Some(run), Opening::Send(_)) => format!(
                "{} ({}): would continue run {run} ({} messages, ~{} tokens{})",
                i.key,
                i.store,
                i.messages_loaded,
                i.tokens_loaded,
                if i.rounds_dropped > 0 {
                    format!(", {} rounds dropped", i.rounds_dropped)
                } else {
                    String::new()
                }
            ),
            (Some(run), Opening::NothingNew { stop_reason, .. }) => format!(
                "{} ({}): nothing new since run {run} ({stop_reason}): no model call",
                i.key, i.store
            ),
        }
    }
}

/// What [`open`] needs besides the config.
pub(crate) struct Want<'a> {
    /// The task.
    pub task: &'a Task,
    /// The issue as intake read it (Redmine tasks).
    pub issue: Option<&'a Issue>,
    /// `--fresh`.
    pub fresh: bool,
    /// `--resume RUN_ID`.
    pub resume: Option<&'a str>,
    /// What is new on the task after the journal a run saw, leaving out the replies of the
    /// runs named (they are in the history already).
    pub news: &'a NewsFn<'a>,
}

/// What is new on a task after a journal (`None`: from the start), leaving out the replies
/// of the runs named; `None` when nothing is.
pub(crate) type NewsFn<'a> = dyn Fn(Option<u64>, &[String]) -> Option<String> + 'a;

/// Opens the task's session; `None` when `[session] enabled = false`. `Err` only for
/// `--resume` with a run the session does not have (or no session at all).
pub(crate) async fn open(
    cfg: &Config,
    want: Want<'_>,
    redmine: Option<&RedmineClient>,
) -> Result<Option<Opened>> {
    if !cfg.session.enabled {
        if want.resume.is_some() {
            return Err(anyhow!("--resume needs [session] enabled = true"));
        }
        return Ok(None);
    }
    let task = want.task;
    let slot = Slot {
        key: format!("{}/{}/{}", cfg.vertical, task.source.as_str(), task.id),
        place: Place::of(cfg.session.store, task.source),
        local: store::local_path(
            &cfg.report_dir,
            &cfg.vertical,
            task.source.as_str(),
            &task.id,
        ),
        cap: cfg.session.max_history_tokens,
    };
    if want.fresh {
        return Ok(Some(slot.fresh(task, "--fresh".into())));
    }
    let decoder = load::Decoder::new(&slot.key, slot.cap, want.resume, load::LIMITS);
    let read = read(cfg, slot.place, &slot.local, want.issue, redmine, decoder).await;
    let (loaded, from) = match read {
        Ok(Some(found)) => found,
        Ok(None) => {
            let fresh = slot.fresh(task, "no stored session".into());
            return fresh_or_resume(want.resume, fresh);
        }
        Err(unreadable) => {
            let fresh = slot.fresh(task, unreadable.explained(&slot.key));
            return fresh_or_resume(want.resume, fresh);
        }
    };
    if let Some(run) = want.resume {
        if loaded.session.runs.last().map(|r| r.run_id.as_str()) != Some(run) {
            return Err(anyhow!(
                "--resume {run}: the session {} has no run {run}",
                slot.key
            ));
        }
    }
    Ok(Some(slot.continued(loaded, &from, &want)))
}

/// Where one task's session lives, and the history cap it is read and saved under.
struct Slot {
    /// `<vertical>/<source>/<task_id>`.
    key: String,
    place: Place,
    /// The local file.
    local: PathBuf,
    /// `[session].max_history_tokens`.
    cap: u64,
}

impl Slot {
    /// A fresh start for `task` (its prompt opens the run), and why.
    fn fresh(&self, task: &Task, reason: String) -> Opened {
        Opened {
            place: self.place,
            local: self.local.clone(),
            stored: Session {
                key: self.key.clone(),
                ..Session::default()
            },
            cap: self.cap,
            history: Vec::new(),
            opening: Opening::Send(task.prompt.clone()),
            info: SessionInfo {
                key: self.key.clone(),
                store: self.place.as_str().to_string(),
                parent_run: None,
                messages_loaded: 0,
                tokens_loaded: 0,
                rounds_dropped: 0,
                repaired: 0,
                fresh_reason: Some(reason),
            },
        }
    }

    /// The stored session read `from`, continued: its trimmed history, and the opening
    /// decided from what is new on the task since its last run.
    fn continued(self, loaded: load::Loaded, from: &str, want: &Want<'_>) -> Opened {
        let key = self.key;
        let repaired = loaded.repaired;
        if repaired > 0 {
            info!("session {key}: {repaired} tool call(s) of an interrupted run given a result");
        }
        let (stored, trimmed) = (loaded.session, loaded.history);
        let known: Vec<String> = stored.runs.iter().map(|r| r.run_id.clone()).collect();
        let seen = stored.runs.last().and_then(|r| r.seen_journal);
        let opening = history::opening(&stored, (want.news)(seen, &known), want.resume.is_some());
        let parent = stored.runs.last().map(|r| r.run_id.clone());
        info!(
            "session {key}: continuing run {} from {from} ({} messages, ~{} tokens, {} rounds dropped)",
            parent.as_deref().unwrap_or("?"),
            trimmed.messages.len(),
            trimmed.tokens,
            trimmed.rounds_dropped
        );
        Opened {
            place: self.place,
            local: self.local,
            info: SessionInfo {
                key,
                store: self.place.as_str().to_string(),
                parent_run: parent,
                messages_loaded: trimmed.messages.len(),
                tokens_loaded: trimmed.tokens,
                rounds_dropped: trimmed.rounds_dropped,
                repaired,
                fresh_reason: None,
            },
            stored,
            cap: self.cap,
            history: trimmed.messages,
            opening,
        }
    }
}

/// A fresh start, unless `--resume` asked for a run: then there is none to resume.
fn fresh_or_resume(resume: Option<&str>, opened: Opened) -> Result<Option<Opened>> {
    match resume {
        Some(run) => Err(anyhow!(
            "--resume {run}: no readable session for {} ({})",
            opened.info.key,
            opened.info.fresh_reason.as_deref().unwrap_or("")
        )),
        None => Ok(Some(opened)),
    }
}

/// Why a stored session was not read, and from where (`None`: it was not reached).
struct Unreadable {
    from: Option<String>,
    error: anyhow::Error,
}

impl Unreadable {
    /// The fresh start's reason; a session found but not read is also a warning for `key`.
    fn explained(self, key: &str) -> String {
        let error = self.error;
        match self.from {
            None => format!("the stored session cannot be read: {error:#}"),
            Some(from) => {
                let reason = format!("the stored session ({from}) cannot be read: {error:#}");
                warn!("session {key}: {reason}; starting fresh");
                reason
            }
        }
    }
}

/// Streams the stored session through `decoder`; `None` when there is no session.
async fn read(
    cfg: &Config,
    place: Place,
    local: &std::path::Path,
    issue: Option<&Issue>,
    redmine: Option<&RedmineClient>,
    mut decoder: load::Decoder,
) -> Result<Option<(load::Loaded, String)>, Unreadable> {
    if let (Place::Redmine { local_fallback }, Some(issue), Some(client)) = (place, issue, redmine)
    {
        if let Some(att) = store::latest_attachment(issue, &cfg.vertical) {
            let from = format!("attachment {} of issue #{}", att.filename, issue.id);
            let max = cfg.session.max_attachment_bytes;
            let mut feed = |bytes: &[u8]| decoder.feed(bytes);
            let got = store::download_into(client, att, max, &mut feed).await;
            let unreadable = |error: anyhow::Error| Unreadable {
                from: Some(from.clone()),
                error,
            };
            return match got {
                Ok(()) => decoder
                    .finish()
                    .map(|l| Some((l, from.clone())))
                    .map_err(unreadable),
                Err(e) => Err(unreadable(e)),
            };
        }
        if !local_fallback {
            return Ok(None);
        }
    }
    let from = local.display().to_string();
    let unreadable = |from: Option<&String>, error| Unreadable {
        from: from.cloned(),
        error,
    };
    let Some(mut file) = store::open_local(local).map_err(|e| unreadable(None, e))? else {
        return Ok(None);
    };
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        use std::io::Read;
        let n = file
            .read(&mut chunk)
            .with_context(|| format!("cannot read {from}"))
            .map_err(|e| unreadable(None, e))?;
        if n == 0 {
            break;
        }
        decoder
            .feed(&chunk[..n])
            .map_err(|e| unreadable(Some(&from), e))?;
    }
    match decoder.finish() {
        Ok(l) => Ok(Some((l, from))),
        Err(e) => Err(unreadable(Some(&from), e)),
    }
}

/// The session file to attach to the REPORT note of run `run_id`, as (name, bytes): only
/// where the session lives on the issue, and only when it fits
/// `[session].max_attachment_bytes` (a bigger one is kept locally only, with a warning).
pub(crate) fn attachment(
    cfg: &Config,
    place: Place,
    task_id: &str,
    run_id: &str,
    bytes: Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    match place {
        Place::Local => None,
        Place::Redmine { .. } if bytes.len() as u64 > cfg.session.max_attachment_bytes => {
            warn!(
                "session of task {task_id}: {} bytes, more than [session].max_attachment_bytes ({}): kept locally only",
                bytes.len(),
                cfg.session.max_attachment_bytes
            );
            None
        }
        Place::Redmine { .. } => Some((
            store::attachment_name(&cfg.vertical, task_id, run_id),
            bytes,
        )),
    }
}

/// The local session of a Redmine task, to attach when the write-back of its REPORT (of
/// run `run_id`) is retried (`harness writeback`); `None` when sessions are off or local,
/// or there is none.
pub(crate) fn for_retry(cfg: &Config, task_id: &str, run_id: &str) -> Option<(String, Vec<u8>)> {
    if !cfg.session.enabled {
        return None;
    }
    let source = Source::Redmine;
    let path = store::local_path(&cfg.report_dir, &cfg.vertical, source.as_str(), task_id);
    let bytes = store::read_local(&path).ok()??;
    let place = Place::of(cfg.session.store, source);
    attachment(cfg, place, task_id, run_id, bytes)
}

/// Appends this run (its record and the messages it added, secrets masked) to the opened
/// session, writes the local file and returns the file's bytes. What is written is what the
/// next run can use: the first message and the newest whole rounds within the cap (the
/// count of rounds dropped in the header), and every run's record, each bounded.
pub(crate) fn save(
    opened: &Opened,
    record: RunRecord,
    added: &[Message],
    redactor: &Redactor,
) -> Result<Vec<u8>> {
    let stored = &opened.stored;
    let run_id = record.run_id.clone();
    let mut runs = stored.runs.clone();
    runs.push(record.bounded());
    let mut window = history::Window::new(opened.cap, stored.rounds_dropped);
    for m in &stored.messages {
        window.push(m.clone());
    }
    for m in added {
        window.push(Stored {
            run_id: run_id.clone(),
            message: redact(m, redactor),
        });
    }
    let (trimmed, messages) = window.finish();
    let session = Session {
        key: stored.key.clone(),
        runs,
        messages,
        rounds_dropped: trimmed.rounds_dropped,
    };
    let bytes = file::encode(&session)?;
    store::write_local(&opened.local, &bytes)?;
    Ok(bytes)
}

/// A user message's content as the session keeps it: every text masked, and each image part
/// replaced by a short note (an image is sent again by the run that needs it: its opening
/// message carries the task's attachments, `read_image` shows a file again), so a session
/// never grows by the megabytes of an image.
fn stored(content: &Content, r: &Redactor) -> Content {
    match content {
        Content::Text(t) => Content::Text(r.redact(t)),
        Content::Parts(parts) => Content::Parts(
            parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } => Part::Text {
                        text: r.redact(text),
                    },
                    Part::ImageUrl { image_url } => Part::Text {
                        text: image_placeholder(&image_url.url),
                    },
                })
                .collect(),
        ),
    }
}

/// The note a stored session keeps where an image part was.
fn image_placeholder(url: &str) -> String {
    let kind = url
        .strip_prefix("data:")
        .and_then(|r| r.split(';').next())
        .unwrap_or("an image");
    let b64 = url.rsplit(',').next().unwrap_or_default();
    let padding = b64.bytes().rev().take_while(|&c| c == b'=').count();
    let bytes = (b64.len() / 4 * 3).saturating_sub(padding);
    format!(
        "[harness] an image ({kind}, {bytes} bytes) was shown here; sessions do not keep images"
    )
}

/// A message with every text a secret could hide in masked.
fn redact(m: &Message, r: &Redactor) -> Message {
    match m {
        Message::System { content } => Message::System {
            content: r.redact(content),
        },
        Message::User { content } => Message::User {
            content: stored(content, r),
        },
        Message::Assistant {
            content,
            tool_calls,
            extra,
        } => Message::Assistant {
            extra: extra
                .iter()
                .map(|(k, v)| {
                    let masked = r.redact(&v.to_string());
                    (
                        k.clone(),
                        serde_json::from_str(&masked).unwrap_or(serde_json::Value::String(masked)),
                    )
                })
                .collect(),
            content: content.as_deref().map(|c| r.redact(c)),
            tool_calls: tool_calls
                .iter()
                .map(|c| ToolCall {
                    function: crate::llm::wire::FunctionCall {
                        name: c.function.name.clone(),
                        arguments: r.redact(&c.function.arguments),
                    },
                    ..c.clone()
                })
                .collect(),
        },
        Message::Tool {
            tool_call_id,
            content,
        } => Message::Tool {
            tool_call_id: tool_call_id.clone(),
            content: r.redact(content),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::Secret;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_redmine_tasks_live_on_the_issue() {
        use SessionStore::{Auto, Local, Redmine};
        assert_eq!(
            Place::of(Auto, Source::Redmine),
            Place::Redmine {
                local_fallback: true
            }
        );
        assert_eq!(
            Place::of(Redmine, Source::Redmine),
            Place::Redmine {
                local_fallback: false
            }
        );
        assert_eq!(Place::of(Local, Source::Redmine), Place::Local);
        assert_eq!(Place::of(Redmine, Source::Demo), Place::Local);
    }

    #[test]
    fn every_text_of_a_message_is_masked() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-canary-123456789"));
        let m = Message::Assistant {
            content: Some("key sk-canary-123456789".into()),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                kind: "function".into(),
                function: crate::llm::wire::FunctionCall {
                    name: "bash".into(),
                    arguments: "{\"command\":\"echo sk-canary-123456789\"}".into(),
                },
            }],
            extra: [(
                "reasoning_content".to_string(),
                serde_json::json!("the key is sk-canary-123456789"),
            )]
            .into(),
        };
        let text = serde_json::to_string(&redact(&m, &r)).unwrap();
        assert!(!text.contains("sk-canary-123456789"), "{text}");
        assert_eq!(text.matches("[redacted]").count(), 3, "{text}");
    }

    #[test]
    fn a_stored_session_keeps_a_short_note_where_an_image_was() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-canary-123456789"));
        let image = crate::attachments::image_part(
            crate::attachments::Image::Png,
            &[0x89, b'P', b'N', b'G', 0, 0, 0, 0, 0],
        );
        let m = Message::User {
            content: Content::Parts(vec![
                Part::Text {
                    text: "look, sk-canary-123456789".into(),
                },
                image,
            ]),
        };
        assert_eq!(
            redact(&m, &r),
            Message::User {
                content: Content::Parts(vec![
                    Part::Text {
                        text: "look, [redacted]".into()
                    },
                    Part::Text {
                        text: "[harness] an image (image/png, 9 bytes) was shown here; sessions do not keep images".into()
                    },
                ])
            }
        );
    }
}
