//! LLM adapter: replay and record. A cassette is a JSON file of recorded `chat.completion`
//! responses; replay serves them in order instead of HTTP, record saves a live run's.
//!
//! Format: `{"harness_cassette": 1, "replies": [{"model": "...", "response": {...}}]}`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::wire::ChatResponse;
use super::{reply_from, LlmError, LlmErrorKind, Reply};
use crate::secrets::Redactor;

/// The cassette file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cassette {
    /// Format version; 1.
    pub harness_cassette: u32,
    /// The replies, in the order they are served.
    pub replies: Vec<Recorded>,
}

/// One recorded reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// The model the request was sent to.
    pub model: String,
    /// The response body.
    pub response: ChatResponse,
}

/// Serves a cassette's replies in order.
#[derive(Debug)]
pub struct Replayer {
    path: PathBuf,
    replies: std::vec::IntoIter<Recorded>,
    served: usize,
}

impl Replayer {
    /// Loads a cassette file.
    pub fn load(path: &Path) -> Result<Replayer> {
        let text = crate::bounded::read_text(path, crate::bounded::CASSETTE_MAX)
            .with_context(|| format!("cannot read cassette {}", path.display()))?;
        // A cassette written by hand or by another tool may hold what a live reply may.
        let cassette: Cassette =
            serde_json::from_str(&crate::jsontext::lone_surrogates_replaced(&text))
                .with_context(|| format!("cassette {} is not a valid cassette", path.display()))?;
        if cassette.harness_cassette != 1 {
            bail!(
                "cassette {}: harness_cassette = {} is not a version this harness reads (1)",
                path.display(),
                cassette.harness_cassette
            );
        }
        Ok(Replayer {
            path: path.to_path_buf(),
            replies: cassette.replies.into_iter(),
            served: 0,
        })
    }

    /// The cassette's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next recorded reply.
    pub fn next_reply(&mut self) -> Result<Reply, LlmError> {
        let Some(rec) = self.replies.next() else {
            return Err(LlmError {
                kind: LlmErrorKind::Replay,
                message: format!(
                    "cassette {} is exhausted after {} replies",
                    self.path.display(),
                    self.served
                ),
            });
        };
        self.served += 1;
        reply_from(rec.response, 0, Duration::ZERO).map_err(|e| LlmError {
            kind: LlmErrorKind::Replay,
            message: format!(
                "cassette {} reply {}: {e}",
                self.path.display(),
                self.served
            ),
        })
    }
}

/// Writes the replies of a live run as a cassette.
pub fn save(path: &Path, replies: Vec<Recorded>, redactor: &Redactor) -> Result<()> {
    let cassette = Cassette {
        harness_cassette: 1,
        replies,
    };
    let text = serde_json::to_string_pretty(&cassette).context("cannot encode cassette")?;
    // A cassette is meant to be shared: a key the model echoed must not be in it.
    let text = redactor.redact(&text);
    crate::atomic::write(path, text.as_bytes())
        .with_context(|| format!("cannot write cassette {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_in_order_then_reports_exhaustion() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(
            &p,
            r#"{"harness_cassette":1,"replies":[{"model":"m","response":{"choices":[{"message":{"content":"hi"}}]}}]}"#,
        )
        .unwrap();
        let mut r = Replayer::load(&p).unwrap();
        assert_eq!(r.next_reply().unwrap().content.as_deref(), Some("hi"));
        let e = r.next_reply().unwrap_err();
        assert_eq!(e.kind, LlmErrorKind::Replay);
        assert!(
            e.message.contains("exhausted after 1 replies"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_lone_surrogate_in_a_cassette_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(
            &p,
            r#"{"harness_cassette":1,"replies":[{"model":"m","response":{"choices":[{"message":{"content":"x \ud800"}}]}}]}"#,
        )
        .unwrap();
        let mut r = Replayer::load(&p).unwrap();
        assert_eq!(
            r.next_reply().unwrap().content.as_deref(),
            Some("x \u{fffd}")
        );
    }

    #[test]
    fn save_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        let resp: ChatResponse =
            serde_json::from_str(r#"{"choices":[{"message":{"content":"x"}}]}"#).unwrap();
        save(
            &p,
            vec![Recorded {
                model: "m".into(),
                response: resp,
            }],
            &Redactor::default(),
        )
        .unwrap();
        let mut r = Replayer::load(&p).unwrap();
        assert_eq!(r.next_reply().unwrap().content.as_deref(), Some("x"));
    }
}
