//! Redmine adapter: claiming an issue for one run, and giving a claim up. A local `flock`
//! keeps runs on one host apart; claim notes arbitrate between hosts (the earliest claim
//! since the snapshot wins, [`super::notes::claim_winner`]). [`release`] is the one place a
//! claim is given up.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::client::RedmineClient;
use super::issue::{Issue, User};
use super::notes::{claim_winner, CLAIM_MARKER, RELEASE_MARKER};
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
}

/// Claims `fresh` (the issue as just read) for `run_id`: writes the claim note (with the
/// claim status and the assignee `bot`, as configured), reads the issue back and keeps it
/// only if this run's claim is the earliest since the last journal of `fresh`. A claim that
/// Redmine did not apply (status, assignee) is given up again and is an error.
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
    client
        .put_json(
            &format!("/issues/{}.json", fresh.id),
            &serde_json::json!({ "issue": fields }),
        )
        .await
        .with_context(|| format!("claiming issue #{}", fresh.id))?;
    let after = client.issue(fresh.id).await?;
    match claim_winner(&after.journals, since) {
        Some(w) if w == run_id => {}
        Some(winner) => return Ok(Claimed::Lost { winner }),
        None => bail!(
            "claiming issue #{}: the claim note was not saved (the bot's role needs the \"Add notes\" permission)",
            fresh.id
        ),
    }
    if let Some(why) = verify_claim(fresh, &after, status, cfg.claim.assign.then_some(bot)) {
        // Best effort: the error below is what the user must see.
        let _ = release(client, fresh.id, run_id, &why).await;
        bail!("claiming issue #{}: {why}", fresh.id);
    }
    Ok(Claimed::Won(Box::new(after)))
}

/// Gives up this run's claim on `issue_id` with a release note saying `why`, so other runs
/// may take the issue. The note is public on the issue: `why` must already be masked.
pub async fn release(client: &RedmineClient, issue_id: u64, run_id: &str, why: &str) -> Result<()> {
    let note = format!("{RELEASE_MARKER} run={run_id}: giving the claim up: {why}");
    client
        .put_json(
            &format!("/issues/{issue_id}.json"),
            &serde_json::json!({"issue": {"notes": note}}),
        )
        .await
}

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
