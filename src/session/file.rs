//! Session stage, PURE: the session file format. A [`Session`] in, gzipped JSONL bytes out;
//! reading it back, line by line, is [`super::load`]. One JSON object per line: a header,
//! then for each run its record followed by the messages it added and kept, in the order
//! the model saw them.
//!
//! ```text
//! {"type":"header","harness_session":1,"key":"demo/redmine/42","rounds_dropped":3}
//! {"type":"run","run":{"run_id":..,"parent_run_id":..,"model":..,"stop_reason":..,..}}
//! {"type":"message","run_id":..,"message":{"role":"user","content":..}}
//! ```

use std::io::Write;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::llm::wire::Message;

/// The format version written in the header.
pub(crate) const VERSION: u32 = 1;

/// What one run added to a session, beside its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    /// The run.
    pub run_id: String,
    /// The run it continued; `None` for the first run of the session.
    pub parent_run_id: Option<String>,
    /// The model that answered last.
    pub model: String,
    /// The tier routed to.
    pub tier: String,
    /// The REPORT's stop reason.
    pub stop_reason: String,
    /// The `finish` status, when the model called `finish`.
    pub outcome: Option<String>,
    /// FNV-1a 64 of the system prompt the run sent (the prompt itself is rebuilt every run
    /// from the config, so a changed policy applies at once; the hash says when it changed).
    pub system_hash: String,
    /// The newest journal of the issue this run had seen (Redmine tasks), so the next run
    /// sends only what came after it.
    pub seen_journal: Option<u64>,
    /// When the run started.
    pub started: DateTime<Utc>,
    /// Where the run left the task's workflow, when the task runs as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Box<crate::workflow::state::Mark>>,
}

/// A message and the run that added it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored {
    /// The run that added it.
    pub run_id: String,
    /// The OpenAI-format message.
    pub message: Message,
}

/// The conversation of one task across runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Session {
    /// `<vertical>/<source>/<task_id>`.
    pub key: String,
    /// One record per run, oldest first.
    pub runs: Vec<RunRecord>,
    /// The messages kept (the system prompt excepted), in stored order: the first (the
    /// task) and the newest whole rounds that fit `[session].max_history_tokens`.
    pub messages: Vec<Stored>,
    /// Rounds dropped after the first message, by this and earlier runs (the note put in
    /// their place counts them).
    pub rounds_dropped: usize,
}

/// One line of the file. `rounds_dropped` is left out when 0, so a session that never
/// dropped a round reads the same as before it existed (older readers ignore it).
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Line {
    Header {
        harness_session: u32,
        key: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        rounds_dropped: usize,
    },
    Run {
        run: RunRecord,
    },
    Message {
        run_id: String,
        message: Message,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The longest text kept in a field of a [`RunRecord`]: every record of a session is kept,
/// so each is bounded.
pub(crate) const RECORD_FIELD_MAX: usize = 256;

impl RunRecord {
    /// The record with every text field cut to [`RECORD_FIELD_MAX`] bytes.
    pub(crate) fn bounded(self) -> RunRecord {
        let cut = |s: String| crate::bounded::clip(&s, RECORD_FIELD_MAX);
        RunRecord {
            run_id: cut(self.run_id),
            parent_run_id: self.parent_run_id.map(cut),
            model: cut(self.model),
            tier: cut(self.tier),
            stop_reason: cut(self.stop_reason),
            outcome: self.outcome.map(cut),
            system_hash: cut(self.system_hash),
            workflow: self.workflow.map(|mut m| {
                m.workflow = cut(m.workflow);
                m.stage = cut(m.stage);
                m.carried = m.carried.map(|c| crate::workflow::state::carried(&c));
                m
            }),
            ..self
        }
    }
}

/// The session as gzipped JSONL.
pub(crate) fn encode(session: &Session) -> Result<Vec<u8>> {
    let mut text = String::new();
    let mut push = |line: &Line| -> Result<()> {
        text.push_str(&serde_json::to_string(line).context("cannot encode the session")?);
        text.push('\n');
        Ok(())
    };
    push(&Line::Header {
        harness_session: VERSION,
        key: session.key.clone(),
        rounds_dropped: session.rounds_dropped,
    })?;
    for run in &session.runs {
        push(&Line::Run { run: run.clone() })?;
        for m in session.messages.iter().filter(|m| m.run_id == run.run_id) {
            push(&Line::Message {
                run_id: m.run_id.clone(),
                message: m.message.clone(),
            })?;
        }
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes())
        .and_then(|_| gz.finish())
        .context("cannot compress the session")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(run_id: &str, stop_reason: &str) -> RunRecord {
        RunRecord {
            run_id: run_id.into(),
            parent_run_id: None,
            model: "m".into(),
            tier: "t".into(),
            stop_reason: stop_reason.into(),
            outcome: None,
            system_hash: "0".into(),
            seen_journal: Some(7),
            started: DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            workflow: None,
        }
    }

    pub(crate) fn user(run: &str, text: &str) -> Stored {
        Stored {
            run_id: run.into(),
            message: Message::User {
                content: text.into(),
            },
        }
    }
}
