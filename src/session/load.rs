//! Session stage, PURE: reading a stored session as it arrives. Gzipped bytes go in piece by
//! piece ([`Decoder::feed`], from a file or an HTTP body); each JSONL line is decoded,
//! repaired ([`history::Repairer`]) and windowed ([`history::Window`]) at once, so what is
//! held is the first message and the newest rounds the cap could keep, never the whole file.
//! Lines are bounded, and so is the uncompressed text (a gzip bomb stops at the bound).

use std::collections::HashSet;
use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};

use super::file::{Line, RunRecord, Session, Stored, VERSION};
use super::history::{Repairer, Trimmed, Window};

/// What a stored session may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest line (one message or record), in bytes.
    pub line: usize,
    /// The most uncompressed text, in bytes.
    pub text: u64,
}

/// The bounds harness reads sessions with: a line of 16 MiB holds any tool result the
/// runner keeps; 1 GiB of text is far past any cap, and stops a gzip bomb.
pub(crate) const LIMITS: Limits = Limits {
    line: 16 * 1024 * 1024,
    text: 1024 * 1024 * 1024,
};

/// A stored session read for this run.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The runs (cut after the run to resume) and the messages kept.
    pub session: Session,
    /// The history to send.
    pub history: Trimmed,
    /// Tool calls given a synthetic result, or stray results dropped.
    pub repaired: usize,
}

/// Reads a gzipped session fed to it in pieces.
pub(crate) struct Decoder {
    gz: flate2::write::GzDecoder<Lines>,
}

impl Decoder {
    /// A decoder for the session `key`, keeping history for `max_tokens`; with `resume`,
    /// runs after that one are left out.
    pub(crate) fn new(key: &str, max_tokens: u64, resume: Option<&str>, limits: Limits) -> Decoder {
        Decoder {
            gz: flate2::write::GzDecoder::new(Lines {
                key: key.to_string(),
                limits,
                max_tokens,
                resume: resume.map(str::to_string),
                buf: Vec::new(),
                line_no: 0,
                text: 0,
                runs: Vec::new(),
                known: HashSet::new(),
                left_out: HashSet::new(),
                resumed: false,
                repairer: Repairer::default(),
                window: None,
                failed: None,
            }),
        }
    }

    /// Takes the next piece of the gzipped file.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        let r = self.gz.write_all(bytes);
        self.check(r)
    }

    fn check(&mut self, r: std::io::Result<()>) -> Result<()> {
        match (r, self.gz.get_mut().failed.take()) {
            (_, Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
            (Err(e), None) => Err(anyhow!(e)).context("not a gzipped UTF-8 text"),
        }
    }

    /// The end of the file: the session read, or why it cannot be.
    pub(crate) fn finish(mut self) -> Result<Loaded> {
        let r = self.gz.try_finish();
        self.check(r)?;
        let mut lines = self
            .gz
            .finish()
            .map_err(|e| anyhow!(e))
            .context("not a gzipped UTF-8 text")?;
        if !lines.buf.is_empty() {
            let last = std::mem::take(&mut lines.buf);
            lines.line(&last)?;
        }
        lines.end()
    }
}

/// Reads a whole gzipped session held in memory (the tests; runs stream with `Decoder`).
#[cfg(test)]
pub(crate) fn decode(bytes: &[u8], key: &str, max_tokens: u64) -> Result<Loaded> {
    let mut d = Decoder::new(key, max_tokens, None, LIMITS);
    d.feed(bytes)?;
    d.finish()
}

/// The uncompressed side: splits lines and reads each.
struct Lines {
    key: String,
    limits: Limits,
    max_tokens: u64,
    resume: Option<String>,
    buf: Vec<u8>,
    line_no: usize,
    text: u64,
    runs: Vec<RunRecord>,
    known: HashSet<String>,
    /// Runs after the one to resume, whose messages are skipped.
    left_out: HashSet<String>,
    resumed: bool,
    repairer: Repairer,
    /// The history kept so far; `None` until the header is read.
    window: Option<Window>,
    /// The first problem, kept whole for the reason (the gzip layer only passes io errors).
    failed: Option<anyhow::Error>,
}

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.failed.is_some() {
            return Err(std::io::Error::other("the session cannot be read"));
        }
        match self.take(bytes) {
            Ok(()) => Ok(bytes.len()),
            Err(e) => {
                self.failed = Some(e);
                Err(std::io::Error::other("the session cannot be read"))
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn take(&mut self, bytes: &[u8]) -> Result<()> {
        self.text += bytes.len() as u64;
        if self.text > self.limits.text {
            bail!(
                "more than {} bytes uncompressed (a gzip bomb?)",
                self.limits.text
            );
        }
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.grow(&rest[..at])?;
            let line = std::mem::take(&mut self.buf);
            self.line(&line)?;
            self.buf = line;
            self.buf.clear();
            rest = &rest[at + 1..];
        }
        self.grow(rest)
    }

    fn grow(&mut self, piece: &[u8]) -> Result<()> {
        if self.buf.len() + piece.len() > self.limits.line {
            bail!(
                "line {} is longer than {} bytes",
                self.line_no + 1,
                self.limits.line
            );
        }
        self.buf.extend_from_slice(piece);
        Ok(())
    }

    fn line(&mut self, bytes: &[u8]) -> Result<()> {
        self.line_no += 1;
        let n = self.line_no;
        let text = std::str::from_utf8(bytes).map_err(|_| anyhow!("line {n} is not UTF-8"))?;
        if text.trim().is_empty() {
            return Ok(());
        }
        if self.window.is_none() {
            let before = self.read_header(text)?;
            self.window = Some(Window::new(self.max_tokens, before));
            return Ok(());
        }
        match serde_json::from_str::<Line>(text).with_context(|| format!("line {n}"))? {
            Line::Header { .. } => bail!("line {n}: a second header"),
            Line::Run { run } => {
                if self.resumed {
                    self.left_out.insert(run.run_id.clone());
                } else {
                    self.resumed = self.resume.as_deref() == Some(run.run_id.as_str());
                    self.known.insert(run.run_id.clone());
                    self.runs.push(run);
                }
            }
            Line::Message { run_id, message } => {
                if self.left_out.contains(&run_id) {
                    return Ok(());
                }
                if !self.known.contains(&run_id) {
                    bail!("line {n}: a message of unknown run {run_id:?}");
                }
                if let Some(window) = self.window.as_mut() {
                    self.repairer
                        .push(Stored { run_id, message }, &mut |m| window.push(m));
                }
            }
        }
        Ok(())
    }

    fn read_header(&self, text: &str) -> Result<usize> {
        let key = &self.key;
        match serde_json::from_str::<Line>(text) {
            Ok(Line::Header {
                harness_session: VERSION,
                key: stored,
                rounds_dropped,
            }) if stored == *key => Ok(rounds_dropped),
            Ok(Line::Header {
                harness_session: VERSION,
                key: stored,
                ..
            }) => bail!("it is the session of {stored:?}, not {key:?}"),
            Ok(Line::Header {
                harness_session, ..
            }) => bail!("format version {harness_session} is not {VERSION}"),
            Ok(_) | Err(_) => bail!("line {} is not a session header", self.line_no),
        }
    }

    fn end(mut self) -> Result<Loaded> {
        let Some(mut window) = self.window.take() else {
            bail!("the file is empty");
        };
        if self.runs.is_empty() {
            bail!("it holds no run");
        }
        self.repairer.finish(&mut |m| window.push(m));
        let (history, messages) = window.finish();
        Ok(Loaded {
            session: Session {
                key: self.key,
                runs: self.runs,
                rounds_dropped: history.rounds_dropped,
                messages,
            },
            history,
            repaired: self.repairer.fixes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::file::tests::{record, user};
    use super::super::file::{encode, Session};
    use super::super::history::dropped_note;
    use super::*;
    use crate::llm::wire::Message;
    use pretty_assertions::assert_eq;

    fn gz(t: &str) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(t.as_bytes()).unwrap();
        e.finish().unwrap()
    }

    const HEADER: &str = "{\"type\":\"header\",\"harness_session\":1,\"key\":\"k\"}\n";

    #[test]
    fn a_session_round_trips_through_gzipped_jsonl() {
        let s = Session {
            key: "v/redmine/4".into(),
            runs: vec![record("r1", "needs_input"), record("r2", "completed")],
            messages: vec![user("r1", "task"), user("r2", "news"), user("r2", "more")],
            rounds_dropped: 0,
        };
        let bytes = encode(&s).unwrap();
        assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
        // Fed in pieces of every size, it reads the same.
        for piece in [1, 7, 4096] {
            let mut d = Decoder::new("v/redmine/4", 1_000_000, None, LIMITS);
            for chunk in bytes.chunks(piece) {
                d.feed(chunk).unwrap();
            }
            let loaded = d.finish().unwrap();
            assert_eq!(loaded.session, s);
            assert_eq!(loaded.history.messages.len(), 3);
        }
        let e = decode(&bytes, "v/redmine/5", 1000).unwrap_err().to_string();
        assert!(e.contains("not \"v/redmine/5\""), "{e}");
    }

    #[test]
    fn a_message_of_content_parts_round_trips() {
        use crate::llm::wire::{Content, Part};
        let parts = Stored {
            run_id: "r1".into(),
            message: Message::User {
                content: Content::Parts(vec![
                    Part::Text {
                        text: "the task".into(),
                    },
                    Part::Text {
                        text: "[harness] an image (image/png, 70 bytes) was shown here".into(),
                    },
                ]),
            },
        };
        let s = Session {
            key: "v/inbox/t".into(),
            runs: vec![record("r1", "completed")],
            messages: vec![parts, user("r1", "more")],
            rounds_dropped: 0,
        };
        let loaded = decode(&encode(&s).unwrap(), "v/inbox/t", 1_000_000).unwrap();
        assert_eq!(loaded.session, s);
    }

    #[test]
    fn unreadable_files_say_why() {
        assert!(format!("{:#}", decode(b"not gzip", "k", 1000).unwrap_err()).contains("gzipped"));
        let whole = encode(&Session {
            key: "k".into(),
            runs: vec![record("r1", "completed")],
            messages: vec![user("r1", &"x".repeat(5000))],
            rounds_dropped: 0,
        })
        .unwrap();
        let cut = format!(
            "{:#}",
            decode(&whole[..whole.len() / 2], "k", 1000).unwrap_err()
        );
        assert!(cut.contains("gzipped"), "{cut}");
        for (text, why) in [
            ("", "empty"),
            ("{\"type\":\"run\"}\n", "not a session header"),
            (HEADER, "no run"),
            (
                &format!("{HEADER}{{\"type\":\"message\",\"run_id\":\"x\",\"message\":{{\"role\":\"user\",\"content\":\"a\"}}}}\n"),
                "line 2: a message of unknown run",
            ),
            (&format!("{HEADER}{{broken\n"), "line 2"),
            (&format!("{HEADER}\u{0}\n"), "line 2"),
        ] {
            let e = format!("{:#}", decode(&gz(text), "k", 1000).unwrap_err());
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn long_lines_and_gzip_bombs_are_refused_unread() {
        let limits = Limits {
            line: 1000,
            text: 100_000,
        };
        let read = |text: &str| {
            let mut d = Decoder::new("k", 1000, None, limits);
            d.feed(&gz(text)).and_then(|()| d.finish().map(|_| ()))
        };
        let long = format!("{HEADER}{}\n", "x".repeat(1001));
        let e = format!("{:#}", read(&long).unwrap_err());
        assert!(e.contains("line 2 is longer than 1000 bytes"), "{e}");
        let unended = format!("{HEADER}{}", "y".repeat(5000));
        assert!(format!("{:#}", read(&unended).unwrap_err()).contains("longer than"));
        let bomb = format!("{HEADER}{}", "\n".repeat(200_000));
        let e = format!("{:#}", read(&bomb).unwrap_err());
        assert!(e.contains("more than 100000 bytes uncompressed"), "{e}");
    }

    #[test]
    fn resume_leaves_later_runs_out() {
        let s = Session {
            key: "k".into(),
            runs: vec![
                record("r1", "completed"),
                record("r2", "completed"),
                record("r3", "completed"),
            ],
            messages: vec![user("r1", "a"), user("r2", "b"), user("r3", "c")],
            rounds_dropped: 0,
        };
        let mut d = Decoder::new("k", 100_000, Some("r2"), LIMITS);
        d.feed(&encode(&s).unwrap()).unwrap();
        let loaded = d.finish().unwrap();
        let runs: Vec<&str> = loaded
            .session
            .runs
            .iter()
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(runs, ["r1", "r2"]);
        assert_eq!(
            loaded.session.messages,
            vec![user("r1", "a"), user("r2", "b")]
        );
    }

    #[test]
    fn a_long_session_keeps_the_task_and_the_newest_rounds() {
        // 20,000 notes after the task: only the newest fit 1,000 tokens.
        let mut messages = vec![user("r1", "the task")];
        messages.extend((0..20_000).map(|i| user("r1", &format!("note {i}"))));
        let s = Session {
            key: "k".into(),
            runs: vec![record("r1", "completed")],
            messages: messages.clone(),
            rounds_dropped: 0,
        };
        let loaded = decode(&encode(&s).unwrap(), "k", 1000).unwrap();
        let h = &loaded.history;
        assert!(h.tokens <= 1000, "{}", h.tokens);
        let kept = loaded.session.messages.len() - 1;
        assert_eq!(h.rounds_dropped, 20_000 - kept);
        assert_eq!(loaded.session.messages[0], messages[0]);
        assert_eq!(loaded.session.messages[1..], messages[20_001 - kept..]);
        assert_eq!(
            h.messages[1],
            Message::User {
                content: dropped_note(h.rounds_dropped).into()
            }
        );
        // Saved as kept, read again: the same history, the count carried in the header.
        let again = decode(&encode(&loaded.session).unwrap(), "k", 1000).unwrap();
        assert_eq!(again.history, loaded.history);
        assert_eq!(again.session, loaded.session);
    }
}
