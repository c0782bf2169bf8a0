//! Redmine adapter, PURE part: the marker notes harness writes on an issue (claim, REPORT,
//! release) and what they say about who holds the issue.

use chrono::{DateTime, Utc};

use super::issue::{Issue, Journal};

/// Marker that starts a claim note; followed by `run=<run id>`.
pub const CLAIM_MARKER: &str = "[harness-claim]";
/// Marker that starts a write-back note; followed by `run=<run id>`.
pub const REPORT_MARKER: &str = "[harness-report]";
/// Marker of a note that gives a claim up without a REPORT.
pub const RELEASE_MARKER: &str = "[harness-release]";

/// Whether a journal is bookkeeping only (a claim or a release): never shown to the model.
/// REPORT notes are harness's own replies and are part of the discussion.
pub fn is_bookkeeping(notes: &str) -> bool {
    let n = notes.trim_start();
    n.starts_with(CLAIM_MARKER) || n.starts_with(RELEASE_MARKER)
}

/// A REPORT note as the model sees it again: its run id and the reply, without the marker
/// line and the harness header line (model, tokens, stop reason), which are bookkeeping.
pub fn own_reply(notes: &str) -> Option<(String, String)> {
    let run = marker_run(notes, REPORT_MARKER)?;
    let body: Vec<&str> = notes
        .trim_start()
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("**harness REPORT**"))
        .collect();
    Some((run, body.join("\n").trim().to_string()))
}

/// The run id in a marker note (`[harness-claim] run=ID ...`).
pub fn marker_run(notes: &str, marker: &str) -> Option<String> {
    marker_field(notes, marker, "run")
}

/// A `key=value` field of a marker note's first line (`[harness-report] run=ID stop=..`).
pub fn marker_field(notes: &str, marker: &str, key: &str) -> Option<String> {
    let rest = notes.trim_start().strip_prefix(marker)?;
    let first = rest.lines().next().unwrap_or_default();
    let prefix = format!("{key}=");
    let token = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix(prefix.as_str()))?;
    Some(token.trim_end_matches(['.', ',', ':']).to_string())
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
/// answer (with the default write-back, which leaves the status, it stays in scope). A run
/// cut by a signal answered nothing: its issue stays in play.
/// Claim and release notes are bookkeeping, not news: a run that claimed and gave the
/// issue up (or crashed) after the answer leaves it answered.
pub fn answered_by(issue: &Issue) -> Option<String> {
    let last = issue
        .journals
        .iter()
        .filter(|j| !is_bookkeeping(&j.notes))
        .max_by_key(|j| j.id)?;
    if marker_field(&last.notes, REPORT_MARKER, "stop").as_deref() == Some("interrupted") {
        return None;
    }
    marker_run(&last.notes, REPORT_MARKER)
}

/// The status id issue had before `run_id` claimed it: the claim journal's `status_id`
/// change. `None` when the claim changed no status.
pub fn status_before_claim(journals: &[Journal], run_id: &str) -> Option<u64> {
    journals
        .iter()
        .filter(|j| marker_run(&j.notes, CLAIM_MARKER).as_deref() == Some(run_id))
        .flat_map(|j| &j.details)
        .find(|d| d.property == "attr" && d.name == "status_id")
        .and_then(|d| d.old_value.as_deref()?.parse().ok())
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
    use super::super::issue::fixtures::{issue, journal};
    use super::*;
    use pretty_assertions::assert_eq;

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
    fn own_replies_lose_the_marker_and_header_lines() {
        let note =
            "[harness-report] run=r-1\n**harness REPORT**: model `m`, 1 tokens\n\nThe answer.\n";
        assert_eq!(own_reply(note), Some(("r-1".into(), "The answer.".into())));
        assert_eq!(own_reply("hello"), None);
        assert!(is_bookkeeping("[harness-claim] run=x"));
        assert!(is_bookkeeping("[harness-release] run=x: why"));
        assert!(!is_bookkeeping("[harness-report] run=x"));
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
        i.journals.push(journal(
            6,
            "[harness-report] run=r10 stop=interrupted\n**harness REPORT**: ...",
        ));
        assert_eq!(answered_by(&i), None);
        i.journals.push(journal(
            7,
            "[harness-report] run=r11 stop=needs_input\n**Question:** x",
        ));
        assert_eq!(answered_by(&i).as_deref(), Some("r11"));
        i.journals
            .push(journal(8, "[harness-claim] run=r12 host=h pid=1: working"));
        i.journals.push(journal(
            9,
            "[harness-release] run=r12: giving the claim up: boom",
        ));
        assert_eq!(answered_by(&i).as_deref(), Some("r11"));
    }

    #[test]
    fn the_status_before_a_claim_comes_from_its_journal() {
        let mut claim = journal(3, "[harness-claim] run=r1 host=h pid=1: working");
        claim.details = vec![
            crate::redmine::issue::Detail {
                property: "attr".into(),
                name: "assigned_to_id".into(),
                old_value: None,
                new_value: Some("5".into()),
            },
            crate::redmine::issue::Detail {
                property: "attr".into(),
                name: "status_id".into(),
                old_value: Some("4".into()),
                new_value: Some("2".into()),
            },
        ];
        let js = vec![journal(1, "x"), claim];
        assert_eq!(status_before_claim(&js, "r1"), Some(4));
        assert_eq!(status_before_claim(&js, "r2"), None);
        assert_eq!(
            marker_field(
                "[harness-report] run=a stop=done\nrun=b",
                REPORT_MARKER,
                "stop"
            )
            .as_deref(),
            Some("done")
        );
    }
}
