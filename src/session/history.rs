//! Session stage, PURE: what a stored conversation becomes before it is sent again. Cut at
//! a run ([`upto`], for `--resume`), repaired so every tool call is answered exactly once
//! ([`repair`]), trimmed to the history cap with whole rounds dropped ([`trim`]), and the
//! one user message that opens the new run ([`opening`]).

use crate::llm::wire::Message;

use super::file::{Session, Stored};

/// The result given to a tool call that a previous run left without one.
pub const INTERRUPTED_RESULT: &str = "not run: the previous run was interrupted";

/// Stop reasons after which the task waits for something new before another model call.
pub fn is_final(stop_reason: &str) -> bool {
    matches!(stop_reason, "completed" | "needs_input" | "agent_failed")
}

/// The session up to and including run `run_id`; `None` when no run has that id.
pub fn upto(session: &Session, run_id: &str) -> Option<Session> {
    let at = session.runs.iter().position(|r| r.run_id == run_id)?;
    let runs = session.runs[..=at].to_vec();
    let messages = session
        .messages
        .iter()
        .filter(|m| runs.iter().any(|r| r.run_id == m.run_id))
        .cloned()
        .collect();
    Some(Session {
        key: session.key.clone(),
        runs,
        messages,
    })
}

/// Makes every tool call answered exactly once, right after the assistant message that made
/// it: a missing result gets [`INTERRUPTED_RESULT`], a second result for one call and a
/// result for no call are dropped. Returns the repaired list and how many fixes it made.
pub fn repair(messages: Vec<Stored>) -> (Vec<Stored>, usize) {
    let mut out: Vec<Stored> = Vec::with_capacity(messages.len());
    let mut fixes = 0;
    // The calls of the latest assistant message still waiting for their result.
    let mut open: Vec<(String, String)> = Vec::new();
    let close = |out: &mut Vec<Stored>, open: &mut Vec<(String, String)>, fixes: &mut usize| {
        for (run_id, id) in open.drain(..) {
            *fixes += 1;
            out.push(Stored {
                run_id,
                message: Message::Tool {
                    tool_call_id: id,
                    content: INTERRUPTED_RESULT.to_string(),
                },
            });
        }
    };
    for stored in messages {
        match &stored.message {
            Message::Tool { tool_call_id, .. } => {
                match open.iter().position(|(_, id)| id == tool_call_id) {
                    Some(i) => {
                        open.remove(i);
                        out.push(stored);
                    }
                    None => fixes += 1,
                }
            }
            Message::Assistant { tool_calls, .. } => {
                close(&mut out, &mut open, &mut fixes);
                open = tool_calls
                    .iter()
                    .map(|c| (stored.run_id.clone(), c.id.clone()))
                    .collect();
                out.push(stored);
            }
            Message::System { .. } | Message::User { .. } => {
                close(&mut out, &mut open, &mut fixes);
                out.push(stored);
            }
        }
    }
    close(&mut out, &mut open, &mut fixes);
    (out, fixes)
}

/// Estimated tokens of a message: its JSON bytes / 4 (no tokenizer for every model; the
/// cap is a bound on cost, not an exact count).
pub fn tokens(message: &Message) -> u64 {
    serde_json::to_string(message)
        .map_or(0, |s| s.len() as u64)
        .div_ceil(4)
}

/// A history fitted to the cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Trimmed {
    /// The messages to send, in stored order.
    pub messages: Vec<Message>,
    /// Their estimated tokens.
    pub tokens: u64,
    /// Rounds (an assistant message with its tool results, or a user message) dropped.
    pub rounds_dropped: usize,
}

/// The note put where rounds were dropped.
pub fn dropped_note(n: usize) -> String {
    format!("[harness] {n} earlier rounds of this conversation were dropped here to fit [session].max_history_tokens.")
}

/// Fits `messages` (repaired) into `max_tokens`: the first message (the task) is kept,
/// then the oldest rounds are dropped whole, so no tool call loses its result, and a note
/// marks the place.
pub fn trim(messages: &[Stored], max_tokens: u64) -> Trimmed {
    let all: Vec<Message> = messages.iter().map(|m| m.message.clone()).collect();
    let total: u64 = all.iter().map(tokens).sum();
    if total <= max_tokens || all.len() < 2 {
        return Trimmed {
            messages: all,
            tokens: total,
            rounds_dropped: 0,
        };
    }
    // Rounds after the first message: each starts at an assistant or a user message.
    let mut starts: Vec<usize> = (1..all.len())
        .filter(|&i| !matches!(all[i], Message::Tool { .. }))
        .collect();
    starts.push(all.len());
    let first = tokens(&all[0]);
    let mut kept_from = starts.len() - 1;
    let mut budget = max_tokens.saturating_sub(
        first
            + tokens(&Message::User {
                content: dropped_note(starts.len()),
            }),
    );
    // Walk back from the newest round while whole rounds fit.
    while kept_from > 0 {
        let (a, b) = (starts[kept_from - 1], starts[kept_from]);
        let cost: u64 = all[a..b].iter().map(tokens).sum();
        if cost > budget {
            break;
        }
        budget -= cost;
        kept_from -= 1;
    }
    let dropped = kept_from;
    let mut out = vec![all[0].clone()];
    if dropped > 0 {
        out.push(Message::User {
            content: dropped_note(dropped),
        });
    }
    out.extend_from_slice(&all[starts[kept_from]..]);
    Trimmed {
        tokens: out.iter().map(tokens).sum(),
        messages: out,
        rounds_dropped: dropped,
    }
}

/// How the new run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opening {
    /// Send this user message after the history.
    Send(String),
    /// The last run ended the task and nothing is new: no model call.
    NothingNew {
        /// The last run.
        run_id: String,
        /// Its stop reason.
        stop_reason: String,
    },
}

/// The user message that opens a continued run: only what is new on the task since the
/// last run (`news`); after a run that did not end the task (interrupted, out of rounds,
/// budget, endpoint failure) a note to go on, even with nothing new. `resumed` (an explicit
/// `--resume`) always sends.
pub fn opening(session: &Session, news: Option<String>, resumed: bool) -> Opening {
    let Some(last) = session.runs.last() else {
        return Opening::Send(news.unwrap_or_default());
    };
    let unfinished = !is_final(&last.stop_reason);
    let mut text = String::new();
    if unfinished {
        text.push_str(&format!(
            "[harness] The previous run ({}) ended before the task was finished (stop reason {}). Continue where it stopped.\n",
            last.run_id, last.stop_reason
        ));
    }
    match news {
        Some(n) => text.push_str(&n),
        None if unfinished => {}
        None if resumed => text.push_str(&format!(
            "[harness] Continue from run {} (nothing new on the task since).",
            last.run_id
        )),
        None => {
            return Opening::NothingNew {
                run_id: last.run_id.clone(),
                stop_reason: last.stop_reason.clone(),
            }
        }
    }
    Opening::Send(text.trim_end().to_string())
}

/// FNV-1a 64 of `text`, as 16 hex digits: a stable fingerprint of the system prompt.
pub fn fingerprint(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::super::file::tests::{record, user};
    use super::*;
    use crate::llm::wire::{FunctionCall, ToolCall};
    use pretty_assertions::assert_eq;

    fn call(run: &str, ids: &[&str]) -> Stored {
        Stored {
            run_id: run.into(),
            message: Message::Assistant {
                extra: Default::default(),
                content: None,
                tool_calls: ids
                    .iter()
                    .map(|id| ToolCall {
                        id: (*id).into(),
                        kind: "function".into(),
                        function: FunctionCall {
                            name: "bash".into(),
                            arguments: "{\"command\":\"ls\"}".into(),
                        },
                    })
                    .collect(),
            },
        }
    }

    fn result(run: &str, id: &str, text: &str) -> Stored {
        Stored {
            run_id: run.into(),
            message: Message::Tool {
                tool_call_id: id.into(),
                content: text.into(),
            },
        }
    }

    #[test]
    fn dangling_calls_get_a_result_and_strays_go() {
        let (fixed, n) = repair(vec![
            user("r", "task"),
            call("r", &["a", "b"]),
            result("r", "a", "ok"),
            result("r", "a", "twice"),
            result("r", "zz", "stray"),
            user("r", "note"),
            call("r", &["c"]),
        ]);
        assert_eq!(n, 4);
        assert_eq!(
            fixed,
            vec![
                user("r", "task"),
                call("r", &["a", "b"]),
                result("r", "a", "ok"),
                result("r", "b", INTERRUPTED_RESULT),
                user("r", "note"),
                call("r", &["c"]),
                result("r", "c", INTERRUPTED_RESULT),
            ]
        );
        let (same, n) = repair(fixed.clone());
        assert_eq!((same, n), (fixed, 0));
    }

    #[test]
    fn trimming_drops_whole_old_rounds_and_keeps_the_task() {
        let big = "x".repeat(400);
        let messages = vec![
            user("r", "the task"),
            call("r", &["a"]),
            result("r", "a", &big),
            call("r", &["b"]),
            result("r", "b", &big),
            user("r", "new note"),
        ];
        let all = trim(&messages, 1_000_000);
        assert_eq!((all.messages.len(), all.rounds_dropped), (6, 0));
        let t = trim(&messages, 250);
        assert_eq!(t.rounds_dropped, 1);
        assert_eq!(
            t.messages,
            vec![
                messages[0].message.clone(),
                Message::User {
                    content: dropped_note(1)
                },
                messages[3].message.clone(),
                messages[4].message.clone(),
                messages[5].message.clone(),
            ]
        );
        assert!(t.tokens <= 250, "{}", t.tokens);
    }

    #[test]
    fn a_run_opens_with_the_news_or_not_at_all() {
        let mut s = Session {
            key: "k".into(),
            runs: vec![record("r1", "needs_input")],
            messages: vec![],
        };
        assert_eq!(
            opening(&s, None, false),
            Opening::NothingNew {
                run_id: "r1".into(),
                stop_reason: "needs_input".into()
            }
        );
        assert_eq!(
            opening(&s, Some("Use 50.".into()), false),
            Opening::Send("Use 50.".into())
        );
        assert!(
            matches!(opening(&s, None, true), Opening::Send(t) if t.contains("Continue from run r1"))
        );
        s.runs.push(record("r2", "interrupted"));
        let Opening::Send(text) = opening(&s, None, false) else {
            panic!("an interrupted run is continued")
        };
        assert!(text.contains("(r2) ended before the task was finished (stop reason interrupted)"));
    }

    #[test]
    fn resume_cuts_after_the_run() {
        let s = Session {
            key: "k".into(),
            runs: vec![record("r1", "completed"), record("r2", "completed")],
            messages: vec![user("r1", "a"), user("r2", "b")],
        };
        let cut = upto(&s, "r1").unwrap();
        assert_eq!((cut.runs.len(), cut.messages.len()), (1, 1));
        assert!(upto(&s, "nope").is_none());
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_ne!(fingerprint("a"), fingerprint("b"));
    }
}
