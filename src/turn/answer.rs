//! Turn stage, PURE: a text answer is never lost. Under `[loop] finish = "tool"` a reply
//! without a tool call is answered with the reminder to call `finish`; what the model said
//! before the reminder is its answer. When it answers the reminder with text again, the
//! REPORT keeps the first text and adds the second only when it says something more
//! ([`kept`]); when the reminder's round fails after a complete answer, the turn still
//! completes with that answer and the failure as a note ([`rescue`]).

use super::TurnOutcome;

/// What a turn keeps when the round after the reminder failed: the answer, and the failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescued {
    /// The REPORT body: the answer, then one line saying what failed after it.
    pub reply: String,
    /// The failure, for the REPORT's `error` (the turn itself completed).
    pub error: String,
}

/// The REPORT's answer when the model replied to the reminder with `second` after `first`:
/// `first`, then `second` when it adds anything. A second text that is empty, repeats the
/// first (or a part of it) or only acknowledges ("ok", "Done.", "See my answer above.")
/// adds nothing; one that contains the whole first text replaces it.
pub fn kept(first: &str, second: &str) -> String {
    let (a, b) = (words(first), words(second));
    if b.is_empty() || contains(&a, &b) || b.iter().all(|w| ACKNOWLEDGEMENT.contains(&w.as_str())) {
        return first.to_string();
    }
    if contains(&b, &a) {
        return second.to_string();
    }
    format!("{}\n\n{}", first.trim_end(), second.trim_start())
}

/// The turn's end when the round after the reminder ended as `outcome` and the text answer
/// before it was `answer` (`None` when the reminder followed no complete text): a model
/// failure (an llm error, the proxy's budget refusal) after an answer completes the turn
/// with the answer and a note; anything else stands.
pub fn rescue(outcome: &TurnOutcome, answer: Option<&str>) -> Option<Rescued> {
    let answer = answer.filter(|a| !a.trim().is_empty())?;
    if !outcome.is_failure() {
        return None;
    }
    let error = match outcome {
        TurnOutcome::LlmFailed { error } => error.message.clone(),
        TurnOutcome::Budget { stop } => stop.describe(),
        _ => return None,
    };
    let reply = format!(
        "{}\n\n_[harness] The model gave this answer without calling `finish`; the round that reminded it to call `finish` failed ({}), so the answer above is the REPORT._",
        answer.trim_end(),
        one_line(&error)
    );
    Some(Rescued { reply, error })
}

/// Whether a reply's text is a complete answer: not cut by the token limit.
pub fn complete(finish_reason: Option<&str>) -> bool {
    finish_reason != Some("length")
}

/// Words that only acknowledge: a second reply made of these alone adds nothing.
const ACKNOWLEDGEMENT: &[&str] = &[
    "a",
    "above",
    "add",
    "again",
    "all",
    "already",
    "am",
    "an",
    "answer",
    "as",
    "been",
    "complete",
    "completed",
    "done",
    "final",
    "finished",
    "further",
    "given",
    "got",
    "has",
    "have",
    "here",
    "i",
    "im",
    "in",
    "is",
    "it",
    "k",
    "m",
    "more",
    "my",
    "no",
    "nothing",
    "noted",
    "of",
    "ok",
    "okay",
    "please",
    "previous",
    "provided",
    "refer",
    "reply",
    "response",
    "s",
    "see",
    "stated",
    "summary",
    "sure",
    "task",
    "thank",
    "thanks",
    "that",
    "thats",
    "the",
    "this",
    "to",
    "understood",
    "was",
    "yep",
    "yes",
    "you",
];

/// The text as lowercase words of letters and digits, for comparing what two replies say.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `needle` occurs in `hay` as a run of whole words.
fn contains(hay: &[String], needle: &[String]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// `text` on one line, cut to 300 characters: the note quotes an error, not a body.
fn one_line(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 300 {
        format!("{}...", flat.chars().take(300).collect::<String>())
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{LlmError, LlmErrorKind};
    use crate::turn::BudgetStop;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_second_answer_is_added_only_when_it_says_more() {
        let first = "The bug is in `parse`: it drops the last byte.";
        for nothing in [
            "",
            "  ",
            "ok",
            "OK.",
            "Done.",
            "I am done.",
            "See my answer above.",
            "The task is complete; nothing more to add.",
            "The bug is in `parse`",
            "the bug is in PARSE: it drops the last byte",
        ] {
            assert_eq!(kept(first, nothing), first, "{nothing:?}");
        }
        assert_eq!(
            kept(first, "Also, `render` has the same bug."),
            "The bug is in `parse`: it drops the last byte.\n\nAlso, `render` has the same bug."
        );
        // A second text that restates the whole first one and goes on replaces it.
        let longer = "The bug is in `parse`: it drops the last byte. The fix is one line.";
        assert_eq!(kept(first, longer), longer);
        assert_eq!(kept("one", "two"), "one\n\ntwo");
    }

    fn failed(message: &str) -> TurnOutcome {
        TurnOutcome::LlmFailed {
            error: LlmError {
                kind: LlmErrorKind::Exhausted,
                message: message.into(),
            },
        }
    }

    #[test]
    fn a_failed_reminder_round_keeps_the_answer_with_a_note() {
        let r = rescue(&failed("HTTP 500\nafter 3 attempts"), Some("It is 4.\n")).unwrap();
        assert_eq!(r.error, "HTTP 500\nafter 3 attempts");
        assert_eq!(
            r.reply,
            "It is 4.\n\n_[harness] The model gave this answer without calling `finish`; the round that reminded it to call `finish` failed (HTTP 500 after 3 attempts), so the answer above is the REPORT._"
        );
        let proxy = TurnOutcome::Budget {
            stop: BudgetStop::Proxy {
                error: LlmError {
                    kind: LlmErrorKind::Budget,
                    message: "budget exceeded".into(),
                },
            },
        };
        assert_eq!(
            rescue(&proxy, Some("It is 4.")).map(|r| r.error),
            Some("budget exceeded".to_string())
        );
        let long = "x".repeat(1000);
        let note = rescue(&failed(&long), Some("a")).unwrap().reply;
        assert!(note.len() < 500, "{note}");
    }

    #[test]
    fn without_an_answer_or_a_failure_nothing_is_rescued() {
        assert_eq!(rescue(&failed("boom"), None), None);
        assert_eq!(rescue(&failed("boom"), Some(" \n")), None);
        for outcome in [
            TurnOutcome::Interrupted { signal: 15 },
            TurnOutcome::Budget {
                stop: BudgetStop::Tokens { used: 9, limit: 9 },
            },
            TurnOutcome::Completed,
        ] {
            assert_eq!(rescue(&outcome, Some("It is 4.")), None, "{outcome:?}");
        }
    }

    #[test]
    fn a_reply_cut_by_the_token_limit_is_no_complete_answer() {
        assert!(complete(Some("stop")));
        assert!(complete(None));
        assert!(!complete(Some("length")));
    }
}
