//! Intake stage, Redmine source: which issue this run works on (scope, `--task-id`, answered
//! and claimed issues passed over, routing checked before the claim) and the PURE making of
//! a [`Task`] from an issue. The HTTP client, the claim and the notes are the
//! [`crate::redmine`] adapter's.

use std::time::Duration;

use anyhow::{anyhow, Result};
use chrono::Utc;
use serde_json::Value;
use tracing::info;

use super::{Source, Task};
use crate::config::RedmineConfig;
use crate::redmine::claim::{self, Claimed, LocalLock};
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::{list_path, Issue, Journal};
use crate::redmine::notes::{active_claim, answered_by, is_bookkeeping, own_reply};
use crate::signals::Interrupt;

/// An issue this run may work on, with its task and the route found for it.
#[derive(Debug, Clone)]
pub(crate) struct Taken<R> {
    /// The issue as read last (after claiming, when claiming; journals included).
    pub issue: Issue,
    /// The task built from it.
    pub task: Task,
    /// What `route` returned for the task, asked before the claim.
    pub route: R,
    /// The issue this run holds a claim on (and so must release if it fails before the
    /// turn); `None` when intake did not claim.
    pub claimed: Option<u64>,
}

/// What intake decided.
#[derive(Debug)]
pub(crate) enum Intake<R> {
    /// Work on this issue.
    Task(Box<Taken<R>>),
    /// Nothing in scope (or everything in scope is claimed by other runs).
    NothingInScope,
}

pub(crate) use super::TakeError;

/// Chooses the issue this run works on. With `claim`, claims it ([`claim::claim`]) and keeps
/// it only if this run's claim wins; a lost race moves on to the next issue. `route` is asked
/// once, for the chosen issue and before any claim, so an unroutable issue is never claimed.
/// Every Redmine read and the wait for the local lock give way to a signal (`interrupt`);
/// the claim itself is not cut midway (its note would stay unreleased): a signal during it
/// is seen by the caller, which releases the claim it gets.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn take<R>(
    interrupt: &Interrupt,
    client: &RedmineClient,
    cfg: &RedmineConfig,
    run_id: &str,
    task_id: Option<&str>,
    force: bool,
    claim: bool,
    lock_dir: &std::path::Path,
    route: &dyn Fn(&Task) -> Result<R>,
) -> Result<Intake<R>, TakeError> {
    let bot = stop(interrupt, client.current_user()).await?;
    info!(
        "intake: redmine {} as user {} (id {})",
        client.base(),
        bot.login,
        bot.id
    );
    let listed = stop(interrupt, client.list(cfg)).await?;
    info!("intake: {} issue(s) in scope", listed.len());
    let candidates = candidates(interrupt, client, cfg, listed, task_id, force).await?;
    if candidates.is_empty() {
        return Ok(Intake::NothingInScope);
    }
    let explicit = task_id.is_some();
    if !claim {
        return first_unanswered(interrupt, client, cfg, candidates, explicit, route).await;
    }
    let claim_status = match &cfg.claim.status {
        Some(name) => Some((name.clone(), stop(interrupt, client.status_id(name)).await?)),
        None => None,
    };
    let _lock = stop(
        interrupt,
        LocalLock::acquire(lock_dir, Duration::from_secs(120)),
    )
    .await?;
    let stale = chrono::Duration::minutes(cfg.claim.stale_after_mins as i64);
    let mut visit = Visit::new(candidates.len());
    let mut losses = 0;
    while let Some(at) = visit.following() {
        let listed = &candidates[at];
        let fresh = stop(interrupt, client.issue(listed.id)).await?;
        if !claimable(listed, &fresh, force, explicit, stale) {
            continue;
        }
        let route = route(&task(&fresh, cfg)).map_err(TakeError::Routing)?;
        match claim::claim(client, cfg, &fresh, run_id, &bot, claim_status.as_ref()).await? {
            Claimed::Won(after) => {
                info!("intake: claimed issue #{} (run {run_id})", fresh.id);
                let task = task(&after, cfg);
                return Ok(Intake::Task(Box::new(Taken {
                    claimed: Some(after.id),
                    issue: *after,
                    task,
                    route,
                })));
            }
            Claimed::Lost { winner } => info!(
                "intake: issue #{} was claimed first by run {winner}; trying another one",
                fresh.id
            ),
            Claimed::Contended => info!(
                "intake: issue #{} was updated at the same moment (Redmine refused the claim as stale); trying another one",
                fresh.id
            ),
        }
        losses += 1;
        visit.jump(spread(run_id, losses));
    }
    Ok(Intake::NothingInScope)
}

/// A run that claims nothing (`--dry-run`): the first candidate not answered yet, routed.
async fn first_unanswered<R>(
    interrupt: &Interrupt,
    client: &RedmineClient,
    cfg: &RedmineConfig,
    candidates: Vec<Issue>,
    explicit: bool,
    route: &dyn Fn(&Task) -> Result<R>,
) -> Result<Intake<R>, TakeError> {
    for listed in candidates {
        let issue = stop(interrupt, client.issue(listed.id)).await?;
        if !explicit && skip_answered(&issue) {
            continue;
        }
        let task = task(&issue, cfg);
        let route = route(&task).map_err(TakeError::Routing)?;
        return Ok(Intake::Task(Box::new(Taken {
            issue,
            task,
            route,
            claimed: None,
        })));
    }
    Ok(Intake::NothingInScope)
}

/// Whether this run may try to claim `fresh` (as read now; `listed` as the scope listed
/// it): unchanged since listed (or `--force`), not answered (unless named), and not held
/// by another run's claim younger than `stale`.
fn claimable(
    listed: &Issue,
    fresh: &Issue,
    force: bool,
    explicit: bool,
    stale: chrono::Duration,
) -> bool {
    if fresh.updated_on != listed.updated_on && !force {
        info!(
            "intake: issue #{} changed since it was listed; skipping it this run",
            fresh.id
        );
        return false;
    }
    if !explicit && skip_answered(fresh) {
        return false;
    }
    if let Some((holder, at)) = active_claim(&fresh.journals, stale) {
        if Utc::now() - at < stale {
            info!(
                "intake: issue #{} is claimed by run {holder} since {at}; skipping",
                fresh.id
            );
            return false;
        }
        info!(
            "intake: issue #{}: claim of run {holder} since {at} is stale; taking it over",
            fresh.id
        );
    }
    true
}

/// The issues this run may take: the scope, or the one `--task-id` names (in scope, or
/// anywhere with `--force`).
async fn candidates(
    interrupt: &Interrupt,
    client: &RedmineClient,
    cfg: &RedmineConfig,
    listed: Vec<Issue>,
    task_id: Option<&str>,
    force: bool,
) -> Result<Vec<Issue>, TakeError> {
    Ok(match task_id {
        None => listed,
        Some(raw) => {
            let id: u64 = raw
                .trim_start_matches('#')
                .parse()
                .map_err(|_| anyhow!("--task-id {raw:?} is not a Redmine issue number"))?;
            match listed.into_iter().find(|i| i.id == id) {
                Some(i) => vec![i],
                None if force => vec![stop(interrupt, client.issue(id)).await?],
                None => {
                    return Err(anyhow!(
                        "issue #{id} is not in scope ({}); pass --force to run it anyway",
                        list_path(cfg)
                    )
                    .into())
                }
            }
        }
    })
}

/// The order in which a run tries the candidates: the scope's, except that after a lost
/// claim it jumps ahead ([`spread`]) and comes back for what it jumped over before it gives
/// up. A run that never loses takes the issues in the scope's order.
struct Visit {
    tried: Vec<bool>,
    at: usize,
}

impl Visit {
    fn new(n: usize) -> Visit {
        Visit {
            tried: vec![false; n],
            at: 0,
        }
    }

    /// The next candidate not yet tried, from where the run stands, else from the top.
    fn following(&mut self) -> Option<usize> {
        let untried = |r: std::ops::Range<usize>| r.into_iter().find(|&i| !self.tried[i]);
        let i = untried(self.at.min(self.tried.len())..self.tried.len())
            .or_else(|| untried(0..self.tried.len()))?;
        self.tried[i] = true;
        self.at = i + 1;
        Some(i)
    }

    fn jump(&mut self, by: usize) {
        self.at = self.at.saturating_add(by);
    }
}

/// How far a run jumps ahead after its `losses`-th lost claim: 0 to `2^(losses+1) - 1`
/// candidates, by a hash of its run id. The runs that lost one race spread over the next
/// issues instead of all racing again for the next one (the herd a shared scope order makes:
/// with 16 workers started together, about 6 losing claims per issue).
fn spread(run_id: &str, losses: u32) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (run_id, losses).hash(&mut h);
    (h.finish() % (2u64 << losses.min(8))) as usize
}

/// Awaits one pre-claim step of intake unless a signal comes first.
async fn stop<T>(
    interrupt: &Interrupt,
    step: impl std::future::Future<Output = Result<T>>,
) -> Result<T, TakeError> {
    match interrupt.or_signal(step).await {
        Ok(out) => Ok(out?),
        Err(signal) => Err(TakeError::Interrupted(signal)),
    }
}

/// Whether to pass over an issue that harness already answered, saying so.
fn skip_answered(issue: &Issue) -> bool {
    match answered_by(issue) {
        Some(run) => {
            info!(
                "intake: issue #{} was answered by run {run} and nothing happened since; skipping",
                issue.id
            );
            true
        }
        None => false,
    }
}

/// The task class: the custom field named `field`, or `default` when missing or empty.
pub(crate) fn class_of(issue: &Issue, field: &str, default: &str) -> String {
    let value = issue
        .custom_fields
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(field))
        .map(|f| match &f.value {
            Value::String(s) => s.trim().to_string(),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            _ => String::new(),
        })
        .unwrap_or_default();
    if value.is_empty() {
        default.to_string()
    } else {
        value
    }
}

/// The user message for the model: the issue and its discussion, clearly delimited.
/// harness's own earlier replies (REPORT notes) are part of the discussion, marked as such,
/// so a run after the author answered sees what it asked; claim and release notes are not.
pub(crate) fn prompt(issue: &Issue) -> String {
    let mut p = format!(
        "Redmine issue #{} in project {}: {}\nTracker: {} | Status: {} | Priority: {} | Author: {}\n\n=== DESCRIPTION ===\n{}\n",
        issue.id,
        issue.project.name,
        issue.subject,
        issue.tracker.name,
        issue.status.name,
        issue.priority.name,
        issue.author.name,
        if issue.description.trim().is_empty() { "(no description)" } else { issue.description.trim_end() },
    );
    let notes: Vec<&Journal> = issue
        .journals
        .iter()
        .filter(|j| !j.notes.trim().is_empty() && !is_bookkeeping(&j.notes))
        .collect();
    if !notes.is_empty() {
        p.push_str(&format!(
            "\n=== DISCUSSION ({} notes, oldest first) ===\n",
            notes.len()
        ));
        for j in notes {
            p.push_str(&discussion_entry(j));
        }
    }
    p.push_str("=== END OF ISSUE ===\n");
    p
}

/// One note of the discussion; harness's own replies say so.
pub(crate) fn discussion_entry(j: &Journal) -> String {
    let when = j.created_on.format("%Y-%m-%d %H:%M UTC");
    match own_reply(&j.notes) {
        Some((run, reply)) => format!(
            "--- {} (harness: YOUR OWN earlier reply, run {run}) wrote on {when} ---\n{reply}\n",
            j.user.name
        ),
        None => format!(
            "--- {} wrote on {when} ---\n{}\n",
            j.user.name,
            j.notes.trim_end()
        ),
    }
}

/// What happened on the issue after journal `since` (all of it when `None`), as the
/// message that opens a continued run: notes, and status and assignee changes, oldest first,
/// then where the issue stands now. Claim and release notes are bookkeeping; the replies of
/// the runs in `known_runs` are in the conversation already. `None` when nothing is new.
pub(crate) fn news(issue: &Issue, since: Option<u64>, known_runs: &[String]) -> Option<String> {
    let mut journals: Vec<&Journal> = issue
        .journals
        .iter()
        .filter(|j| since.is_none_or(|s| j.id > s))
        .filter(|j| !is_bookkeeping(&j.notes))
        .filter(|j| !own_reply(&j.notes).is_some_and(|(run, _)| known_runs.contains(&run)))
        .collect();
    journals.sort_by_key(|j| j.id);
    let mut out = String::new();
    for j in journals {
        if !j.notes.trim().is_empty() {
            out.push_str(&discussion_entry(j));
        }
        for d in j.details.iter().filter(|d| d.property == "attr") {
            let what = match d.name.as_str() {
                "status_id" => "the status",
                "assigned_to_id" => "the assignee",
                _ => continue,
            };
            out.push_str(&format!(
                "--- {} changed {what} (id {} -> id {}) on {} ---\n",
                j.user.name,
                d.old_value.as_deref().unwrap_or("none"),
                d.new_value.as_deref().unwrap_or("none"),
                j.created_on.format("%Y-%m-%d %H:%M UTC"),
            ));
        }
    }
    if out.is_empty() {
        return None;
    }
    Some(format!(
        "[harness] New on Redmine issue #{} since your last reply:\n{out}=== NOW: Status: {} | Assignee: {} ===",
        issue.id,
        issue.status.name,
        issue.assigned_to.as_ref().map_or("(none)", |a| a.name.as_str())
    ))
}

/// The task for an issue.
pub(crate) fn task(issue: &Issue, cfg: &RedmineConfig) -> Task {
    Task {
        id: issue.id.to_string(),
        source: Source::Redmine,
        subject: crate::bounded::one_line(&issue.subject, super::SUBJECT_MAX),
        class: Some(crate::bounded::one_line(
            &class_of(issue, &cfg.class_field, &cfg.default_class),
            super::CLASS_MAX,
        )),
        prompt: prompt(issue),
        reply: None,
    }
}

/// Redmine as a task source: [`take`] and the scope listing behind the one trait.
pub(crate) struct RedmineSource<'a> {
    /// The client.
    pub client: &'a RedmineClient,
    /// `[redmine]`.
    pub cfg: &'a RedmineConfig,
}

impl<R> super::source::Source<R> for RedmineSource<'_> {
    fn take<'a>(
        &'a self,
        want: &'a super::source::Want<'a>,
        route: super::source::RouteFn<'a, R>,
    ) -> super::source::BoxFuture<'a, Result<Option<super::source::Picked<R>>, TakeError>> {
        Box::pin(async move {
            let claim = self.cfg.claim.enabled && want.claim;
            let taken = take(
                want.interrupt,
                self.client,
                self.cfg,
                want.run_id,
                want.task_id,
                want.force,
                claim,
                want.lock_dir,
                route,
            )
            .await?;
            Ok(match taken {
                Intake::Task(t) => Some(super::source::Picked {
                    task: t.task,
                    route: t.route,
                    claim: t.claimed.map(super::source::Claim::Redmine),
                    issue: Some(t.issue),
                }),
                Intake::NothingInScope => None,
            })
        })
    }

    fn scope<'a>(
        &'a self,
        route: super::source::RouteFn<'a, R>,
    ) -> super::source::BoxFuture<'a, Result<Vec<super::source::Scoped<R>>>> {
        Box::pin(async move {
            let stale = chrono::Duration::minutes(self.cfg.claim.stale_after_mins as i64);
            let mut out = Vec::new();
            for listed in self.client.list(self.cfg).await? {
                let issue = self.client.issue(listed.id).await?;
                if skip_answered(&issue) {
                    continue;
                }
                if let Some((holder, at)) = active_claim(&issue.journals, stale) {
                    if Utc::now() - at < stale {
                        info!(
                            "scope: issue #{} is claimed by run {holder}; not in scope",
                            issue.id
                        );
                        continue;
                    }
                }
                let task = task(&issue, self.cfg);
                let route = route(&task).map_err(|e| format!("{e:#}"));
                out.push(super::source::Scoped { task, route });
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redmine::issue::fixtures::issue;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_run_that_loses_jumps_ahead_and_comes_back() {
        let mut v = Visit::new(6);
        assert_eq!((v.following(), v.following()), (Some(0), Some(1)));
        v.jump(3);
        assert_eq!(v.following(), Some(5));
        assert_eq!(
            (v.following(), v.following(), v.following()),
            (Some(2), Some(3), Some(4))
        );
        assert_eq!(v.following(), None);
        let mut v = Visit::new(2);
        v.jump(usize::MAX);
        assert_eq!(
            (v.following(), v.following(), v.following()),
            (Some(0), Some(1), None)
        );
        for losses in 1..12 {
            let by = spread("20261203T064316Z-22840-1617873d", losses);
            assert!(by < 2 << losses.min(8), "{losses}: {by}");
        }
        let spreads: std::collections::BTreeSet<usize> =
            (0..64).map(|r| spread(&format!("run-{r}"), 1)).collect();
        assert_eq!(
            spreads,
            (0..4).collect(),
            "runs that lost once spread over 4 places"
        );
    }

    #[test]
    fn class_comes_from_the_field_or_the_default() {
        let mut i = issue();
        assert_eq!(class_of(&i, "Class", "primary"), "code");
        assert_eq!(class_of(&i, "class", "primary"), "code");
        i.custom_fields[0].value = Value::Null;
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
        i.custom_fields[0].value = Value::String("  ".into());
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
        i.custom_fields.clear();
        assert_eq!(class_of(&i, "Class", "primary"), "primary");
    }

    #[test]
    fn prompt_holds_the_issue_and_discussion_but_not_markers() {
        let p = prompt(&issue());
        assert_eq!(
            p,
            "Redmine issue #4 in project mopac: Fix pagination off-by-one
Tracker: Bug | Status: In Progress | Priority: Urgent | Author: Redmine Admin

=== DESCRIPTION ===
Page 2 repeats the last row.

=== DISCUSSION (1 notes, oldest first) ===
--- Redmine Admin wrote on 2026-11-30 09:49 UTC ---
Seen on prod too.
=== END OF ISSUE ===
"
        );
    }

    #[test]
    fn news_holds_only_what_came_after_the_last_reply() {
        use crate::redmine::issue::{fixtures::journal, Detail};
        let mut i = issue();
        assert_eq!(news(&i, Some(3), &[]), None);
        i.journals.push(journal(
            4,
            "[harness-report] run=r1 stop=needs_input\n**Question:** Which page size?\n\n**harness REPORT**: x\n\nLooked.",
        ));
        i.journals.push(journal(5, "[harness-claim] run=r2 host=h"));
        // Only the run's own reply, known to the session: nothing new.
        assert_eq!(news(&i, Some(3), &["r1".to_string()]), None);
        let mut answer = journal(6, "Use 50 per page.");
        answer.details.push(Detail {
            property: "attr".into(),
            name: "status_id".into(),
            old_value: Some("4".into()),
            new_value: Some("1".into()),
        });
        i.journals.push(answer);
        assert_eq!(
            news(&i, Some(3), &["r1".to_string()]).unwrap(),
            "[harness] New on Redmine issue #4 since your last reply:
--- CI Bot wrote on 2026-11-30 10:00 UTC ---
Use 50 per page.
--- CI Bot changed the status (id 4 -> id 1) on 2026-11-30 10:00 UTC ---
=== NOW: Status: In Progress | Assignee: (none) ==="
        );
        // A reply of a run the session does not know is news, marked as harness's own.
        let unknown = news(&i, Some(3), &[]).unwrap();
        assert!(
            unknown.contains("YOUR OWN earlier reply, run r1"),
            "{unknown}"
        );
    }

    #[test]
    fn own_replies_are_in_the_discussion_marked_as_such() {
        let mut i = issue();
        i.journals.push(crate::redmine::issue::fixtures::journal(
            4,
            "[harness-report] run=r-1\n**harness REPORT**: model `m`, stop reason `completed`\n\nWhich page size?\n",
        ));
        i.journals.push(crate::redmine::issue::fixtures::journal(
            5,
            "[harness-release] run=r-2: giving the claim up: boom",
        ));
        let p = prompt(&i);
        assert!(
            p.contains("=== DISCUSSION (2 notes, oldest first) ==="),
            "{p}"
        );
        assert!(
            p.contains("--- CI Bot (harness: YOUR OWN earlier reply, run r-1) wrote on 2026-11-30 10:00 UTC ---\nWhich page size?\n"),
            "{p}"
        );
        assert!(!p.contains("[harness-"), "{p}");
    }
}
