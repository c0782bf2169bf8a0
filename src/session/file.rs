//! Session stage, PURE: the session file format. A [`Session`] in, gzipped JSONL bytes out,
//! and back. One JSON object per line: a header, then for each run its record followed by
//! the messages it added, in the order the model saw them.
//!
//! ```text
//! {"type":"header","harness_session":1,"key":"demo/redmine/42"}
//! {"type":"run","run":{"run_id":..,"parent_run_id":..,"model":..,"stop_reason":..,..}}
//! {"type":"message","run_id":..,"message":{"role":"user","content":..}}
//! ```

use std::io::{Read, Write};

use anyhow::{anyhow, bail, Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::llm::wire::Message;

/// The format version written in the header.
pub const VERSION: u32 = 1;

/// What one run added to a session, beside its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
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
}

/// A message and the run that added it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The run that added it.
    pub run_id: String,
    /// The OpenAI-format message.
    pub message: Message,
}

/// The conversation of one task across runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Session {
    /// `<vertical>/<source>/<task_id>`.
    pub key: String,
    /// One record per run, oldest first.
    pub runs: Vec<RunRecord>,
    /// Every message of every run (the system prompt excepted), in stored order.
    pub messages: Vec<Stored>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Header { harness_session: u32, key: String },
    Run { run: RunRecord },
    Message { run_id: String, message: Message },
}

/// The session as gzipped JSONL.
pub fn encode(session: &Session) -> Result<Vec<u8>> {
    let mut text = String::new();
    let mut push = |line: &Line| -> Result<()> {
        text.push_str(&serde_json::to_string(line).context("cannot encode the session")?);
        text.push('\n');
        Ok(())
    };
    push(&Line::Header {
        harness_session: VERSION,
        key: session.key.clone(),
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

/// Reads gzipped JSONL back; every problem names the line. `key` must match the header.
pub fn decode(bytes: &[u8], key: &str) -> Result<Session> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .context("not a gzipped UTF-8 text")?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or_else(|| anyhow!("the file is empty"))?;
    match serde_json::from_str::<Line>(first) {
        Ok(Line::Header {
            harness_session: VERSION,
            key: stored,
        }) if stored == key => {}
        Ok(Line::Header {
            harness_session: VERSION,
            key: stored,
        }) => bail!("it is the session of {stored:?}, not {key:?}"),
        Ok(Line::Header {
            harness_session, ..
        }) => bail!("format version {harness_session} is not {VERSION}"),
        Ok(_) | Err(_) => bail!("line 1 is not a session header"),
    }
    let mut session = Session {
        key: key.to_string(),
        ..Session::default()
    };
    for (n, line) in lines {
        match serde_json::from_str::<Line>(line).with_context(|| format!("line {}", n + 1))? {
            Line::Header { .. } => bail!("line {}: a second header", n + 1),
            Line::Run { run } => session.runs.push(run),
            Line::Message { run_id, message } => {
                if !session.runs.iter().any(|r| r.run_id == run_id) {
                    bail!("line {}: a message of unknown run {run_id:?}", n + 1);
                }
                session.messages.push(Stored { run_id, message });
            }
        }
    }
    if session.runs.is_empty() {
        bail!("it holds no run");
    }
    Ok(session)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

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

    #[test]
    fn a_session_round_trips_through_gzipped_jsonl() {
        let s = Session {
            key: "v/redmine/4".into(),
            runs: vec![record("r1", "needs_input"), record("r2", "completed")],
            messages: vec![user("r1", "task"), user("r2", "news"), user("r2", "more")],
        };
        let bytes = encode(&s).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        assert_eq!(decode(&bytes, "v/redmine/4").unwrap(), s);
        let e = decode(&bytes, "v/redmine/5").unwrap_err().to_string();
        assert!(e.contains("not \"v/redmine/5\""), "{e}");
    }

    #[test]
    fn unreadable_files_say_why() {
        assert!(format!("{:#}", decode(b"not gzip", "k").unwrap_err()).contains("gzipped"));
        let gz = |t: &str| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(t.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        let header = "{\"type\":\"header\",\"harness_session\":1,\"key\":\"k\"}\n";
        for (text, why) in [
            ("", "empty"),
            ("{\"type\":\"run\"}\n", "not a session header"),
            (header, "no run"),
            (
                &format!("{header}{{\"type\":\"message\",\"run_id\":\"x\",\"message\":{{\"role\":\"user\",\"content\":\"a\"}}}}\n"),
                "line 2: a message of unknown run",
            ),
            (&format!("{header}{{broken\n"), "line 2"),
        ] {
            let e = format!("{:#}", decode(&gz(text), "k").unwrap_err());
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
