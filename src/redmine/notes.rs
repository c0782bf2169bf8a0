//! Redmine adapter, PURE part: the marker notes harness writes on an issue (claim, REPORT,
//! release) and what they say about who holds the issue.

use chrono::{DateTime, Duration, Utc};

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

/// Who holds the issue now, with the time of its claim; `None` when nobody does. The journals
/// are replayed in id order (the order Redmine committed them in): a claim note takes an
/// unheld issue, or one whose holder's claim is older than `stale` at that note (a takeover);
/// any other claim note lost. Only the holder's own REPORT or release note ends its hold: a
/// late note of a run that lost, or whose claim was taken over, does not.
pub fn active_claim(journals: &[Journal], stale: Duration) -> Option<(String, DateTime<Utc>)> {
    let mut sorted: Vec<&Journal> = journals.iter().collect();
    sorted.sort_by_key(|j| j.id);
    let mut holder: Option<(String, DateTime<Utc>)> = None;
    for j in sorted {
        let ends = [REPORT_MARKER, RELEASE_MARKER]
            .iter()
            .find_map(|m| marker_run(&j.notes, m));
        if let Some(run) = ends {
            if holder.as_ref().is_some_and(|(h, _)| *h == run) {
                holder = None;
            }
        } else if let Some(run) = marker_run(&j.notes, CLAIM_MARKER) {
            if holder
                .as_ref()
                .is_none_or(|(_, at)| j.created_on - *at >= stale)
            {
                holder = Some((run, j.created_on));
            }
        }
    }
    holder
}

/// Whether `run_id` wrote a note with `marker` after journal `since` (an update sent with
/// [`super::client::RedmineClient::put_once`] landed).
pub fn wrote(issue: &Issue, marker: &str, run_id: &str, since: u64) -> bool {
    issue
        .journals
        .iter()
        .any(|j| j.id > since && marker_run(&j.notes, marker).as_deref() == Some(run_id))
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
    // A workflow with stages left is not answered yet: the next tick runs the next stage.
    if matches!(
        marker_field(&last.notes, REPORT_MARKER, "stop").as_deref(),
        Some("interrupted" | "next_stage")
    ) {
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
        let hour = Duration::hours(1);
        let holder = |js: &[Journal]| active_claim(js, hour).map(|c| c.0);
        assert_eq!(holder(&[journal(1, "hello")]), None);
        let x = journal(1, "[harness-claim] run=x");
        let y = journal(2, "[harness-claim] run=y");
        assert_eq!(holder(&[x.clone(), y.clone()]), Some("x".into()));
        for end in ["[harness-report] run=x\n...", "[harness-release] run=x"] {
            assert_eq!(holder(&[x.clone(), journal(2, end)]), None, "{end}");
        }
        // A loser's release, or a late REPORT of a run that no longer holds it, ends nothing.
        assert_eq!(
            holder(&[x.clone(), y.clone(), journal(3, "[harness-release] run=y")]),
            Some("x".into())
        );
        // A claim after the holder's REPORT (a loser's late claim) holds until released.
        let late = journal(3, "[harness-claim] run=y");
        let report = journal(2, "[harness-report] run=x");
        assert_eq!(
            holder(&[x.clone(), report.clone(), late.clone()]),
            Some("y".into())
        );
        let freed = journal(4, "[harness-release] run=y");
        assert_eq!(holder(&[x.clone(), report, late, freed]), None);
    }

    #[test]
    fn a_stale_claim_is_taken_over_once() {
        let hour = Duration::hours(1);
        let at = |mut j: Journal, mins: i64| {
            j.created_on += Duration::minutes(mins);
            j
        };
        let dead = journal(1, "[harness-claim] run=dead");
        let taker = at(journal(2, "[harness-claim] run=c"), 90);
        let late = at(journal(3, "[harness-claim] run=e"), 100);
        let js = vec![dead.clone(), taker.clone(), late];
        // c took the stale claim over; e came while c held it (fresh) and lost.
        let (run, when) = active_claim(&js, hour).unwrap();
        assert_eq!((run.as_str(), when), ("c", taker.created_on));
        // The dead run's REPORT, written late, does not end c's hold.
        let mut js = js;
        js.push(at(journal(4, "[harness-report] run=dead"), 110));
        assert_eq!(active_claim(&js, hour).unwrap().0, "c");
        let i = Issue {
            journals: js,
            ..crate::redmine::issue::fixtures::issue()
        };
        assert!(wrote(&i, CLAIM_MARKER, "e", 2));
        assert!(!wrote(&i, CLAIM_MARKER, "c", 2));
        assert!(!wrote(&i, RELEASE_MARKER, "c", 0));
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
