//! tools stage (gate), PURE: the human rendering of a judgement for `harness gate`.

use crate::rule::{Judgement, SegmentJudgement, Verdict};
use std::fmt::Write as _;
/// Control characters (a CR hidden in a command word) shown as escapes, so a person sees them.
pub(crate) fn visible(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Human-readable rendering for `harness gate`: the verdict with its reason, one line per
/// segment (verdict, the segment as written, the rule or the reason), run-time checks, then
/// lint warnings.
pub fn render_human(judgement: &Judgement, warnings: &[String]) -> String {
    let mut out = headline(judgement);
    let shown: Vec<String> = judgement.segments.iter().map(shown_text).collect();
    let width = shown.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    for (s, text) in judgement.segments.iter().zip(&shown) {
        segment_lines(&mut out, s, text, width);
    }
    for dir in &judgement.workdirs {
        let _ = writeln!(
            out,
            "  run-time check: `{dir}` must be a directory under the work root, no symlink on the way"
        );
    }
    for (path, prefix) in &judgement.runtime_path_checks {
        let _ = writeln!(
            out,
            "  run-time check: `{path}` must resolve under `{prefix}`"
        );
    }
    for w in warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The first line: the verdict, with the reason and how many segments were denied.
fn headline(judgement: &Judgement) -> String {
    let mut out = String::new();
    let total = judgement.segments.len();
    let denied = judgement
        .segments
        .iter()
        .filter(|s| s.verdict == Verdict::Deny)
        .count();
    let _ = match judgement.verdict {
        Verdict::Allow if total == 1 => writeln!(out, "ALLOW: the command is allowed"),
        Verdict::Allow => writeln!(out, "ALLOW: all {total} segments are allowed"),
        Verdict::Deny if total > 1 && denied > 0 => writeln!(
            out,
            "DENY: {} ({denied} of {total} segments denied)",
            visible(&judgement.reason)
        ),
        Verdict::Deny => writeln!(out, "DENY: {}", visible(&judgement.reason)),
    };
    out
}

/// A segment's text as shown: its first 60 characters, control characters escaped.
fn shown_text(s: &SegmentJudgement) -> String {
    let text: String = s
        .text
        .chars()
        .take(60)
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if s.text.chars().count() > 60 {
        format!("{text}...")
    } else {
        text
    }
}

/// A segment's line (its text padded to `width`), then its hint and heuristic note.
fn segment_lines(out: &mut String, s: &SegmentJudgement, text: &str, width: usize) {
    let mark = match s.verdict {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny ",
    };
    let why = match (&s.rule, s.verdict) {
        (Some(r), Verdict::Allow) if s.reason == format!("allowed by rule `{r}`") => {
            format!("rule `{r}`")
        }
        _ => s.reason.clone(),
    };
    // The command word after quote removal, when it differs from what is written.
    let word = match &s.command_word {
        Some(w) if !s.text.trim_start().starts_with(w.as_str()) => {
            format!(" (command word `{w}`)")
        }
        _ => String::new(),
    };
    let pad = width - text.chars().count();
    let (why, word) = (visible(&why), visible(&word));
    let _ = writeln!(out, "  {mark}  {text}{:pad$}  {why}{word}", "");
    if let Some(h) = &s.hint {
        let _ = writeln!(out, "         try instead: {}", visible(h));
    }
    if s.heuristic {
        let _ = writeln!(
            out,
            "         (judged by the inline-code heuristic: deny rules are in force and no file can be written and run with this interpreter)"
        );
    }
}
