//! Intake stage: where the one task of this run comes from. The choice of source is made
//! here from the CLI and the config; each source lives in its own adapter.

pub mod demo;
pub mod inbox;
pub mod redmine;
pub mod source;

/// One task, whatever its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
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
}

/// A task's source, as shown in narration, the PLAN and the REPORT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The `[demo]` issue of the config.
    Demo,
    /// A Redmine issue.
    Redmine,
    /// A file of the local inbox.
    Inbox,
}

impl Source {
    /// `demo` or `redmine`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Demo => "demo",
            Source::Redmine => "redmine",
            Source::Inbox => "inbox",
        }
    }
}
