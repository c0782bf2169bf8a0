//! Redmine adapter: claiming an issue for one run, and giving a claim up. A local `flock`
//! keeps runs on one host apart; claim notes arbitrate between hosts (the earliest claim
//! since the snapshot wins, [`super::notes::claim_winner`]). Every note is sent at most once
//! ([`RedmineClient::put_once`]). [`release`] is the one place a claim is given up.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use tracing::warn;

use super::client::{Put, RedmineClient};
use super::issue::{Issue, User};
use super::notes::{
    active_claim, claim_winner, status_before_claim, wrote, CLAIM_MARKER, RELEASE_MARKER,
};
use crate::config::RedmineConfig;

/// The local lock: a `flock` on a file in the report dir, held while claiming, so runs on one
/// host never race each other at all (runs on other hosts are arbitrated by the claim notes).
#[derive(Debug)]
pub struct LocalLock {
    _file: std::fs::File,
}

impl LocalLock {
    /// Waits up to `wait` for the lock.
    pub async fn acquire(dir: &std::path::Path, wait: Duration) -> Result<LocalLock> {
        use std::os::fd::AsRawFd;
        let path = dir.join(".harness-redmine.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // SAFETY: flock on a file descriptor we own; it is released when the file closes.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(LocalLock { _file: file });
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "another harness run on this host held {} for {}s",
                    path.display(),
                    wait.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// How a claim ended.
#[derive(Debug)]
pub enum Claimed {
    /// This run holds the issue; the issue as read back after claiming.
    Won(Box<Issue>),
    /// Another run's claim came first.
    Lost {
        /// The winning run.
        winner: String,
    },
    /// Another update of the issue was saved at the same moment and Redmine refused this
    /// claim as stale (its optimistic lock): nothing of it was saved.
    Contended,
}

/// Claims `fresh` (the issue as just read) for `run_id`: writes the claim note (with the
/// claim status and the assignee `bot`, as configured), reads the issue back and keeps it
/// only if this run's claim is the earliest since the last journal of `fresh`. A claim that
/// Redmine did not apply (status, assignee) is given up again and is an error; so is one
/// that could not be confirmed (Redmine failing after the claim may have been saved), which
/// is given up too, best effort: a claim left behind goes stale.
pub async fn claim(
    client: &RedmineClient,
    cfg: &RedmineConfig,
    fresh: &Issue,
    run_id: &str,
    bot: &User,
    status: Option<&(String, u64)>,
) -> Result<Claimed> {
    let since = fresh.journals.iter().map(|j| j.id).max().unwrap_or(0);
    let mut fields = serde_json::json!({
        "notes": format!(
            "{CLAIM_MARKER} run={run_id} host={} pid={}: harness is working on this issue.",
            hostname(),
            std::process::id()
        ),
    });
    if let Some((_, id)) = status {
        fields["status_id"] = serde_json::json!(id);
    }
    if cfg.claim.assign {
        fields["assigned_to_id"] = serde_json::json!(bot.id);
    }
    let put = client
        .put_once(fresh.id, &serde_json::json!({ "issue": fields }), |i| {
            wrote(i, CLAIM_MARKER, run_id, since)
        })
        .await;
    let after = match put {
        Ok(Put::Applied) => client.issue(fresh.id).await,
        Ok(Put::Conflict) => return Ok(Claimed::Contended),
        Err(e) => Err(e),
    };
    let after = match after {
        Ok(after) => after,
        Err(e) => {
            let why = "Redmine failed while the claim was made; it may or may not have been saved";
            // Best effort: the error below is what the user must see.
            let _ = release(client, fresh.id, run_id, why, None).await;
            return Err(e.context(format!("claiming issue #{}", fresh.id)));
        }
    };
    let stale = chrono::Duration::minutes(cfg.claim.stale_after_mins as i64);
    match claim_winner(&after.journals, since) {
        Some(w) if w == run_id => {}
        Some(winner) => {
            // A claim that lost but came after the winner's REPORT (this run was slow between
            // its snapshot and its claim) holds the answered issue: give it back, with the
            // status the claim changed.
            if active_claim(&after.journals, stale).is_some_and(|(h, _)| h == run_id) {
                let why = format!("run {winner} claimed this issue first");
                let back = status_before_claim(&after.journals, run_id);
                if let Err(e) = release(client, fresh.id, run_id, &why, back).await {
                    warn!("could not give back the losing claim on issue #{}: {e:#}", fresh.id);
                }
            }
            return Ok(Claimed::Lost { winner });
        }
        None => bail!(
            "claiming issue #{}: the claim note was not saved (the bot's role needs the \"Add notes\" permission)",
            fresh.id
        ),
    }
    if let Some(why) = verify_claim(fresh, &after, status, cfg.claim.assign.then_some(bot)) {
        // Best effort: the error below is what the user must see.
        let _ = release(client, fresh.id, run_id, &why, None).await;
        bail!("claiming issue #{}: {why}", fresh.id);
    }
    Ok(Claimed::Won(Box::new(after)))
}

/// Gives up this run's claim on `issue_id` with a release note saying `why` (and, with
/// `status`, moves the issue back to it), so other runs may take the issue. The note is
/// public on the issue: `why` must already be masked. Sent at most once ([`RedmineClient::put_once`]);
/// a concurrent update is waited out and the release sent again. A release of a run that does
/// not hold the issue ends nothing ([`super::notes::active_claim`]).
pub async fn release(
    client: &RedmineClient,
    issue_id: u64,
    run_id: &str,
    why: &str,
    status: Option<u64>,
) -> Result<()> {
    let note = format!("{RELEASE_MARKER} run={run_id}: giving the claim up: {why}");
    let mut fields = serde_json::json!({ "notes": note });
    if let Some(id) = status {
        fields["status_id"] = serde_json::json!(id);
    }
    let body = serde_json::json!({ "issue": fields });
    for _ in 0..CONFLICT_RETRIES {
        let landed = |i: &Issue| wrote(i, RELEASE_MARKER, run_id, 0);
        match client.put_once(issue_id, &body, landed).await? {
            Put::Applied => return Ok(()),
            Put::Conflict => tokio::time::sleep(CONFLICT_PAUSE).await,
        }
    }
    bail!("releasing issue #{issue_id}: every attempt met a concurrent update")
}

/// How often an update refused for a concurrent one is sent again, and the pause before.
pub const CONFLICT_RETRIES: u32 = 8;
/// See [`CONFLICT_RETRIES`].
pub const CONFLICT_PAUSE: Duration = Duration::from_millis(200);

/// Checks that Redmine applied the claim (it answers 204 to changes it silently refuses).
fn verify_claim(
    before: &Issue,
    after: &Issue,
    status: Option<&(String, u64)>,
    assignee: Option<&User>,
) -> Option<String> {
    if let Some((name, id)) = status {
        if after.status.id != *id {
            return Some(format!(
                "Redmine did not apply the status change {:?} -> {name:?}: the workflow does not allow this transition for the bot's role (Administration > Workflow), or the role lacks \"Edit issues\"",
                before.status.name
            ));
        }
    }
    if let Some(bot) = assignee {
        if after.assigned_to.as_ref().map(|a| a.id) != Some(bot.id) {
            return Some(format!(
                "Redmine did not assign the issue to {} (id {}): the bot must be a project member with an assignable role",
                bot.login, bot.id
            ));
        }
    }
    None
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}
