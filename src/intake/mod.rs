//! Intake stage: where the one task of this run comes from. The choice of source is made
//! here from the CLI and the config; each source lives in its own adapter.

pub(crate) mod demo;
pub(crate) mod inbox;
pub(crate) mod redmine;
pub(crate) mod reply;
pub(crate) mod source;

use crate::config::{Config, SourceName};
use crate::redmine::client::RedmineClient;
use crate::routing::{self, Route};
use inbox::Inbox;
use redmine::RedmineSource;

/// Longest subject kept (Redmine's own limit); a longer one is cut, see
/// [`crate::bounded::one_line`].
pub(crate) const SUBJECT_MAX: usize = 255;
/// Longest class kept; no config names a longer one, and a peer's may be megabytes long.
pub(crate) const CLASS_MAX: usize = 200;

/// One task, whatever its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Task {
    /// The task's id in its source (`demo-1`, a Redmine issue number).
    pub id: String,
    /// Where it came from.
    pub source: Source,
    /// One-line subject.
    pub subject: String,
    /// The task class that routing maps to a tier; `None` means `default_tier`.
    pub class: Option<String>,
    /// The user message given to the model.
    pub prompt: String,
    /// An inbox reply file's link to the task it answers (`None` for every other task).
    pub reply: Option<Reply>,
}

/// What a reply file (`<stem>.reply.md`, [`reply`]) adds to the task it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The id of the session it continues: the original task text's.
    pub session_id: String,
    /// The message that opens the continued run.
    pub news: String,
}

/// A task's source, as shown in narration, the PLAN and the REPORT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The `[demo]` issue of the config.
    Demo,
    /// A Redmine issue.
    Redmine,
    /// A file of the local inbox.
    Inbox,
}

impl Source {
    /// `demo` or `redmine`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Demo => "demo",
            Source::Redmine => "redmine",
            Source::Inbox => "inbox",
        }
    }
}

/// Why intake gave no task: the routing of the chosen task failed (an exit code of its
/// own), or the source or the input did.
#[derive(Debug)]
pub(crate) enum TakeError {
    /// `route` refused the chosen task.
    Routing(anyhow::Error),
    /// The source failed, or `--task-id` is wrong.
    Intake(anyhow::Error),
    /// This signal arrived before a claim was taken; nothing was claimed.
    Interrupted(i32),
}

impl From<anyhow::Error> for TakeError {
    fn from(e: anyhow::Error) -> TakeError {
        TakeError::Intake(e)
    }
}

/// The configured sources in `[intake] order` (Redmine only with a client).
pub(crate) fn sources<'a, R: 'a>(
    cfg: &'a Config,
    redmine: Option<&'a RedmineClient>,
) -> Vec<Box<dyn source::Source<R> + 'a>> {
    let mut out: Vec<Box<dyn source::Source<R> + 'a>> = Vec::new();
    for name in &cfg.intake_order {
        match name {
            SourceName::Inbox => {
                if let Some(cfg) = &cfg.inbox {
                    out.push(Box::new(Inbox { cfg }));
                }
            }
            SourceName::Redmine => {
                if let (Some(client), Some(cfg)) = (redmine, &cfg.redmine) {
                    out.push(Box::new(RedmineSource { client, cfg }));
                }
            }
        }
    }
    out
}

/// Routes a task of a source; the error names the task as its source does.
pub(crate) fn route(cfg: &Config, task: &Task) -> anyhow::Result<Route> {
    let text = format!("{}\n{}", task.subject, task.prompt);
    routing::route_task(
        &cfg.models,
        cfg.workflows.as_ref(),
        task.class.as_deref(),
        &text,
    )
    .map_err(|e| match task.source {
        Source::Redmine => anyhow::anyhow!("routing Redmine issue #{}: {e}", task.id),
        Source::Demo | Source::Inbox => {
            anyhow::anyhow!("routing {} task {}: {e}", task.source.as_str(), task.id)
        }
    })
}
