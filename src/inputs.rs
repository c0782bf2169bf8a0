//! Prompt stage, filesystem and git adapter: where a run reads the project's instructions
//! (`AGENTS.md`) and skills from, and what they were. With `[workspace]` they come from the
//! base commit (copied out by `Workspace::base_files`), never from the task's worktree, which
//! holds what a model wrote and committed in earlier runs; else from the work root, where
//! they are read-only for commands during the run. Out: a directory to read them from and the
//! REPORT's `instructions:` record (source and SHA-256 of each file).

use std::path::{Path, PathBuf};

use serde::Serialize;
use tracing::warn;

use crate::config::PromptConfig;
use crate::tools::files::jail;
use crate::workspace::Workspace;

/// The instructions file, at the root (`prompt::AGENTS_FILE`).
const AGENTS: &str = "AGENTS.md";
/// Bytes of a file hashed; the prompt reads less.
const HASH_MAX: usize = 1024 * 1024;

/// What the REPORT's `instructions:` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionsRecord {
    /// `work root`, or `base commit <sha> (<branch>)`.
    pub source: String,
    /// `sha256:<hex>` of `AGENTS.md` as read, when there is one.
    pub agents_md: Option<String>,
    /// `<path> sha256:<hex>` of each skill file, sorted.
    pub skills: Vec<String>,
}

/// Where this run's instructions are read from.
pub struct Inputs {
    /// The directory to read `AGENTS.md` and the skills dir from.
    pub root: PathBuf,
    /// The copy of the base commit's files, removed when dropped.
    _copy: Option<tempfile::TempDir>,
    /// For the REPORT; `None` when there is neither an `AGENTS.md` nor a skill.
    pub record: Option<InstructionsRecord>,
}

/// The instructions' source for a run in `work_root` (the worktree with `[workspace]`).
pub fn gather(work_root: &Path, prompt: &PromptConfig, workspace: Option<&Workspace>) -> Inputs {
    let (root, copy, source) = match workspace {
        None => (work_root.to_path_buf(), None, "work root".to_string()),
        Some(ws) => {
            let mut paths = vec![AGENTS];
            paths.extend(prompt.skills_dir.as_deref());
            match ws.base_files(&paths) {
                Ok((dir, commit)) => (
                    dir.path().to_path_buf(),
                    Some(dir),
                    format!("base commit {commit} ({})", ws.base),
                ),
                Err(e) => {
                    // Never the worktree instead: what a model wrote there is no instruction.
                    warn!(
                        "prompt: the base commit's instructions cannot be read, none used: {e:#}"
                    );
                    let empty = tempfile::tempdir().ok();
                    let root = empty
                        .as_ref()
                        .map_or_else(PathBuf::new, |d| d.path().to_path_buf());
                    (
                        root,
                        empty,
                        format!("none (the base commit could not be read: {e:#})"),
                    )
                }
            }
        }
    };
    let hash = |rel: &str| -> Option<String> {
        match jail::read_beneath(&root, rel, HASH_MAX) {
            Ok(Some((data, _))) => Some(format!("sha256:{}", crate::sha256::hex(&data))),
            _ => None,
        }
    };
    let agents_md = hash(AGENTS);
    let mut skills = Vec::new();
    if let Some(dir) = prompt.skills_dir.as_deref() {
        if let Ok(d) = crate::beneath::Dir::open_beneath(&root, Path::new(dir)) {
            let mut names: Vec<String> = d
                .entries()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(n, _)| n.into_string().ok())
                .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
                .collect();
            names.sort();
            for n in names {
                let rel = format!("{dir}/{n}");
                if let Some(h) = hash(&rel) {
                    skills.push(format!("{rel} {h}"));
                }
            }
        }
    }
    let record = (agents_md.is_some() || !skills.is_empty()).then_some(InstructionsRecord {
        source,
        agents_md,
        skills,
    });
    Inputs {
        root,
        _copy: copy,
        record,
    }
}
