//! Session stage, PURE: what a stored conversation becomes before it is sent again.
//! Repaired so every tool call is answered exactly once ([`Repairer`]), trimmed to the
//! history cap with whole rounds dropped ([`Window`]), both one message at a time as the
//! file is read, and the one user message that opens the new run ([`opening`]).

use crate::llm::wire::Message;

use super::file::{Session, Stored};

/// The result given to a tool call that a previous run left without one.
pub(crate) const INTERRUPTED_RESULT: &str = "not run: the previous run was interrupted";

/// Stop reasons after which the task waits for something new before another model call.
pub(crate) fn is_final(stop_reason: &str) -> bool {
    matches!(
        stop_reason,
        "completed" | "needs_input" | "agent_failed" | "stage_failed"
    )
}

/// Makes every tool call answered exactly once, right after the assistant message that made
/// it: a missing result gets [`INTERRUPTED_RESULT`], a second result for one call and a
/// result for no call are dropped. Returns the repaired list and how many fixes it made.
/// (The runs use [`Repairer`] one message at a time; this whole-list form is the tests'.)
#[cfg(test)]
pub(crate) fn repair(messages: Vec<Stored>) -> (Vec<Stored>, usize) {
    let mut out: Vec<Stored> = Vec::with_capacity(messages.len());
    let mut repairer = Repairer::default();
    for stored in messages {
        repairer.push(stored, &mut |m| out.push(m));
    }
    repairer.finish(&mut |m| out.push(m));
    (out, repairer.fixes)
}

/// [`repair`] one message at a time, so a stored session is repaired as it is read: only
/// the calls of the latest assistant message are held.
#[derive(Debug, Default)]
pub(crate) struct Repairer {
    /// The calls of the latest assistant message still waiting for their result.
    open: Vec<(String, String)>,
    /// Fixes made so far.
    pub fixes: usize,
}

impl Repairer {
    /// Takes the next stored message; hands `out` what follows from it, in order.
    pub(crate) fn push(&mut self, stored: Stored, out: &mut dyn FnMut(Stored)) {
        match &stored.message {
            Message::Tool { tool_call_id, .. } => {
                match self.open.iter().position(|(_, id)| id == tool_call_id) {
                    Some(i) => {
                        self.open.remove(i);
                        out(stored);
                    }
                    None => self.fixes += 1,
                }
            }
            Message::Assistant { tool_calls, .. } => {
                self.close(out);
                self.open = tool_calls
                    .iter()
                    .map(|c| (stored.run_id.clone(), c.id.clone()))
                    .collect();
                out(stored);
            }
            Message::System { .. } | Message::User { .. } => {
                self.close(out);
                out(stored);
            }
        }
    }

    /// The end of the messages: calls still open get their synthetic result.
    pub(crate) fn finish(&mut self, out: &mut dyn FnMut(Stored)) {
        self.close(out);
    }

    fn close(&mut self, out: &mut dyn FnMut(Stored)) {
        for (run_id, id) in self.open.drain(..) {
            self.fixes += 1;
            out(Stored {
                run_id,
                message: Message::Tool {
                    tool_call_id: id,
                    content: INTERRUPTED_RESULT.to_string(),
                },
            });
        }
    }
}

/// Estimated tokens of a message: its JSON bytes / 4 (no tokenizer for every model; the
/// cap is a bound on cost, not an exact count).
pub(crate) fn tokens(message: &Message) -> u64 {
    serde_json::to_string(message)
        .map_or(0, |s| s.len() as u64)
        .div_ceil(4)
}

/// A history fitted to the cap.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Trimmed {
    /// The messages to send, in stored order.
    pub messages: Vec<Message>,
    /// Their estimated tokens.
    pub tokens: u64,
    /// Rounds (an assistant message with its tool results, or a user message) dropped.
    pub rounds_dropped: usize,
}

/// The note put where rounds were dropped.
pub(crate) fn dropped_note(n: usize) -> String {
    format!("[harness] {n} earlier rounds of this conversation were dropped here to fit [session].max_history_tokens.")
}

/// Fits `messages` (repaired) into `max_tokens`: the first message (the task) is kept,
/// then the oldest rounds are dropped whole, so no tool call loses its result, and a note
/// marks the place. (The runs use [`Window`] one message at a time; this is the tests'.)
#[cfg(test)]
pub(crate) fn trim(messages: &[Stored], max_tokens: u64) -> Trimmed {
    let mut window = Window::new(max_tokens, 0);
    for m in messages {
        window.push(m.clone());
    }
    window.finish().0
}

/// [`trim`] one message at a time: the first message and a window of the newest whole
/// rounds that could still be kept, so what is held depends on the cap, not on how long
/// the stored conversation is. `before` rounds were dropped by earlier runs (the file's
/// header says how many); the note counts them too.
#[derive(Debug)]
pub(crate) struct Window {
    max: u64,
    before: usize,
    first: Option<(Stored, u64)>,
    /// Whole rounds that may still be kept, oldest first, and their tokens.
    rounds: std::collections::VecDeque<Round>,
    held: u64,
    /// The round being read: its messages (emptied once it cannot fit) and tokens.
    current: Option<Round>,
    /// Every round seen and every token seen (the first message included).
    seen_rounds: usize,
    seen_tokens: u64,
}

#[derive(Debug, Default)]
struct Round {
    messages: Vec<Stored>,
    tokens: u64,
    over: bool,
}

impl Window {
    /// An empty window for a cap of `max_tokens`, after `before` rounds dropped earlier.
    pub(crate) fn new(max_tokens: u64, before: usize) -> Window {
        Window {
            max: max_tokens,
            before,
            first: None,
            rounds: Default::default(),
            held: 0,
            current: None,
            seen_rounds: 0,
            seen_tokens: 0,
        }
    }

    /// What the rounds may hold at most: the cap less the first message.
    fn room(&self) -> u64 {
        self.max
            .saturating_sub(self.first.as_ref().map_or(0, |(_, t)| *t))
    }

    /// Takes the next (repaired) message. A round starts at each message that is not a tool
    /// result.
    pub(crate) fn push(&mut self, stored: Stored) {
        let t = tokens(&stored.message);
        self.seen_tokens += t;
        if self.first.is_none() {
            self.first = Some((stored, t));
            return;
        }
        if self.current.is_none() || !matches!(stored.message, Message::Tool { .. }) {
            self.close();
            self.seen_rounds += 1;
            self.current = Some(Round::default());
        }
        let room = self.room();
        if let Some(round) = self.current.as_mut() {
            round.tokens += t;
            if round.tokens > room {
                // It can never be kept whole: count it, hold none of it.
                round.over = true;
                round.messages = Vec::new();
            } else {
                round.messages.push(stored);
            }
        }
    }

    fn close(&mut self) {
        let Some(round) = self.current.take() else {
            return;
        };
        if round.over {
            self.rounds.clear();
            self.held = 0;
            return;
        }
        self.held += round.tokens;
        self.rounds.push_back(round);
        let room = self.room();
        while self.held > room {
            let Some(old) = self.rounds.pop_front() else {
                break;
            };
            self.held -= old.tokens;
        }
    }

    /// The history to send, and the messages to keep (the first and the kept rounds,
    /// without the note, which is rebuilt from the count).
    pub(crate) fn finish(mut self) -> (Trimmed, Vec<Stored>) {
        self.close();
        let Some((first, first_tokens)) = self.first else {
            return (
                Trimmed {
                    messages: Vec::new(),
                    tokens: 0,
                    rounds_dropped: self.before,
                },
                Vec::new(),
            );
        };
        let note_tokens = |n: usize| {
            tokens(&Message::User {
                content: dropped_note(n).into(),
            })
        };
        let held_rounds = self.rounds.len();
        let all_fit = held_rounds == self.seen_rounds
            && self.seen_tokens
                + if self.before > 0 {
                    note_tokens(self.before)
                } else {
                    0
                }
                <= self.max;
        let keep = if all_fit {
            held_rounds
        } else {
            // Walk back from the newest round while whole rounds fit.
            let mut budget = self
                .max
                .saturating_sub(first_tokens + note_tokens(self.before + self.seen_rounds + 1));
            let mut keep = 0;
            for round in self.rounds.iter().rev() {
                if round.tokens > budget {
                    break;
                }
                budget -= round.tokens;
                keep += 1;
            }
            keep
        };
        let dropped = self.before + self.seen_rounds - keep;
        let mut kept = vec![first];
        kept.extend(
            self.rounds
                .into_iter()
                .skip(held_rounds - keep)
                .flat_map(|r| r.messages),
        );
        let mut messages: Vec<Message> = Vec::with_capacity(kept.len() + 1);
        messages.push(kept[0].message.clone());
        if dropped > 0 {
            messages.push(Message::User {
                content: dropped_note(dropped).into(),
            });
        }
        messages.extend(kept[1..].iter().map(|m| m.message.clone()));
        (
            Trimmed {
                tokens: messages.iter().map(tokens).sum(),
                messages,
                rounds_dropped: dropped,
            },
            kept,
        )
    }
}

/// How the new run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Opening {
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
pub(crate) fn opening(session: &Session, news: Option<String>, resumed: bool) -> Opening {
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
pub(crate) fn fingerprint(text: &str) -> String {
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
                    content: dropped_note(1).into()
                },
                messages[3].message.clone(),
                messages[4].message.clone(),
                messages[5].message.clone(),
            ]
        );
        assert!(t.tokens <= 250, "{}", t.tokens);
    }

    /// The rule as it was before trimming was streamed: everything in memory, then walk
    /// back from the newest round while whole rounds fit.
    fn whole_trim(messages: &[Stored], max_tokens: u64) -> Trimmed {
        let all: Vec<Message> = messages.iter().map(|m| m.message.clone()).collect();
        let total: u64 = all.iter().map(tokens).sum();
        if total <= max_tokens || all.len() < 2 {
            return Trimmed {
                messages: all,
                tokens: total,
                rounds_dropped: 0,
            };
        }
        let mut starts: Vec<usize> = (1..all.len())
            .filter(|&i| !matches!(all[i], Message::Tool { .. }))
            .collect();
        starts.push(all.len());
        let note = |n| {
            tokens(&Message::User {
                content: dropped_note(n).into(),
            })
        };
        let mut budget = max_tokens.saturating_sub(tokens(&all[0]) + note(starts.len()));
        let mut kept_from = starts.len() - 1;
        while kept_from > 0 {
            let cost: u64 = all[starts[kept_from - 1]..starts[kept_from]]
                .iter()
                .map(tokens)
                .sum();
            if cost > budget {
                break;
            }
            budget -= cost;
            kept_from -= 1;
        }
        let mut out = vec![all[0].clone()];
        if kept_from > 0 {
            out.push(Message::User {
                content: dropped_note(kept_from).into(),
            });
        }
        out.extend_from_slice(&all[starts[kept_from]..]);
        Trimmed {
            tokens: out.iter().map(tokens).sum(),
            messages: out,
            rounds_dropped: kept_from,
        }
    }

    #[test]
    fn the_streamed_window_keeps_what_the_whole_list_would() {
        // A small deterministic generator: rounds of notes and of calls with 0-3 results
        // of varied sizes, some far over the cap.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for case in 0..80 {
            let mut messages = vec![user("r", &"t".repeat(next(300) as usize))];
            for i in 0..next(60) {
                if next(3) == 0 {
                    messages.push(user("r", &"n".repeat(next(900) as usize)));
                    continue;
                }
                let ids: Vec<String> = (0..next(4)).map(|j| format!("c{i}-{j}")).collect();
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                messages.push(call("r", &refs));
                for id in &ids {
                    let size = if next(10) == 0 { 6000 } else { next(700) };
                    messages.push(result("r", id, &"x".repeat(size as usize)));
                }
            }
            for max in [1000, 1500, 4000, 100_000] {
                assert_eq!(
                    trim(&messages, max),
                    whole_trim(&messages, max),
                    "case {case}, cap {max}"
                );
            }
        }
    }

    #[test]
    fn a_run_opens_with_the_news_or_not_at_all() {
        let mut s = Session {
            key: "k".into(),
            runs: vec![record("r1", "needs_input")],
            messages: vec![],
            rounds_dropped: 0,
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
    fn fingerprints_are_stable() {
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_ne!(fingerprint("a"), fingerprint("b"));
    }
}
