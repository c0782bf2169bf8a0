//! Config stage, PURE: `[forge]`, the pull request opened for a task's pushed branch. The raw
//! section in, the validated [`ForgeConfig`] out, every problem by key.

use super::raw::RawForge;
use super::validate::Validator;
use super::{secs, WorkspaceConfig};
use crate::secrets::KeyRef;

/// Which forge's API `[forge]` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeKind {
    /// Gitea and Forgejo (`/api/v1`).
    Gitea,
    /// GitLab (`/api/v4`, merge requests).
    Gitlab,
    /// GitHub and GitHub Enterprise (the REST API root).
    Github,
}

impl ForgeKind {
    /// `gitea`, `gitlab` or `github`, as in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Gitea => "gitea",
            ForgeKind::Gitlab => "gitlab",
            ForgeKind::Github => "github",
        }
    }
}

/// `[forge].pr`: whether, and how, a successful run opens a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrMode {
    /// No pull request (the branch is still pushed).
    Off,
    /// A draft pull request.
    Draft,
    /// A pull request ready for review.
    Ready,
}

/// `[forge].on_failure`: what a run that did not accomplish its task leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// The pushed branch only.
    Branch,
    /// A draft pull request.
    Draft,
}

/// `[forge]`: the forge the task branches are pushed to, and the pull request per task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeConfig {
    /// The API dialect.
    pub kind: ForgeKind,
    /// The forge's base URL (Gitea, GitLab) or REST API root (GitHub), no trailing slash.
    pub url: String,
    /// `owner/name` (GitLab: `group/subgroup/project`).
    pub repo: String,
    /// The API token's key ref (`env:`, `file:`, `cmd:`, `bw:`).
    pub token_ref: KeyRef,
    /// `pr` (default `ready`).
    pub pr: PrMode,
    /// `on_failure` (default `branch`).
    pub on_failure: OnFailure,
    /// The title template: `{subject}`, `{task_id}`, `{vertical}` (default `{subject}`).
    pub title: String,
    /// Labels put on a pull request harness opens (names).
    pub labels: Vec<String>,
    /// Users asked to review a pull request harness opens (user names).
    pub reviewers: Vec<String>,
    /// Each request's time limit (`timeout_secs`, seconds, default 30).
    pub timeout: std::time::Duration,
    /// Retries of a failed request (`max_retries`, 0-10, default 2), by the one policy.
    pub max_retries: u32,
}

/// The placeholders a `[forge].title` may use.
const TITLE_FIELDS: &[&str] = &["subject", "task_id", "vertical"];

/// Most labels and reviewers, each.
const MAX_NAMES: usize = 20;

impl Validator {
    pub(super) fn forge(
        &mut self,
        raw: RawForge,
        workspace: Option<&WorkspaceConfig>,
    ) -> Option<ForgeConfig> {
        let kind = self.forge_kind(raw.kind.as_deref());
        if raw.url.is_none() {
            self.problem("[forge].url", "is required when [forge] is present");
        }
        let url = self.url("[forge].url", raw.url);
        let repo = self.forge_repo(raw.repo);
        if raw.token_ref.is_none() {
            self.problem(
                "[forge].token_ref",
                "is required, e.g. token_ref = \"env:HARNESS_FORGE_TOKEN\"",
            );
        }
        let token_ref = self.key_ref("[forge].token_ref", raw.token_ref);
        let (pr, on_failure) = self.forge_modes(raw.pr.as_deref(), raw.on_failure.as_deref());
        let title = self.non_empty("[forge].title", raw.title, "{subject}");
        if let Err(e) = check_template(&title) {
            self.problem("[forge].title", e);
        }
        let labels = self.names("[forge].labels", raw.labels.unwrap_or_default());
        let reviewers = self.names("[forge].reviewers", raw.reviewers.unwrap_or_default());
        let timeout = secs(self.int_in("[forge].timeout_secs", raw.timeout_secs, 30, 1, 3600));
        let max_retries = self.int_in("[forge].max_retries", raw.max_retries, 2, 0, 10) as u32;
        if workspace.and_then(|w| w.push.as_ref()).is_none() {
            self.problem(
                "[forge]",
                "opens a pull request for the task's pushed branch: it needs [workspace] with push = \"<remote>\"",
            );
        }
        Some(ForgeConfig {
            kind: kind?,
            url: url?,
            repo: repo?,
            token_ref: token_ref?,
            pr,
            on_failure,
            title,
            labels,
            reviewers,
            timeout,
            max_retries,
        })
    }

    /// `[forge].kind`: `gitea` (or `forgejo`, the same API), `gitlab` or `github`.
    fn forge_kind(&mut self, kind: Option<&str>) -> Option<ForgeKind> {
        match kind {
            Some("gitea") | Some("forgejo") => Some(ForgeKind::Gitea),
            Some("gitlab") => Some(ForgeKind::Gitlab),
            Some("github") => Some(ForgeKind::Github),
            Some(other) => {
                self.problem(
                    "[forge].kind",
                    format!(
                        "must be \"gitea\" (Forgejo too), \"gitlab\" or \"github\", got {other:?}"
                    ),
                );
                None
            }
            None => {
                self.problem("[forge].kind", "is required when [forge] is present");
                None
            }
        }
    }

    /// `[forge].pr` (default `ready`) and `[forge].on_failure` (default `branch`).
    fn forge_modes(&mut self, pr: Option<&str>, on_failure: Option<&str>) -> (PrMode, OnFailure) {
        let pr = match pr {
            None | Some("ready") => PrMode::Ready,
            Some("draft") => PrMode::Draft,
            Some("off") => PrMode::Off,
            Some(other) => {
                self.problem(
                    "[forge].pr",
                    format!("must be \"off\", \"draft\" or \"ready\", got {other:?}"),
                );
                PrMode::Ready
            }
        };
        let on_failure = match on_failure {
            None | Some("branch") => OnFailure::Branch,
            Some("draft") => OnFailure::Draft,
            Some(other) => {
                self.problem(
                    "[forge].on_failure",
                    format!("must be \"branch\" or \"draft\", got {other:?}"),
                );
                OnFailure::Branch
            }
        };
        (pr, on_failure)
    }

    /// `[forge].repo`: `owner/name` (GitLab: groups too), each part a plain name.
    fn forge_repo(&mut self, raw: Option<String>) -> Option<String> {
        let Some(repo) = raw else {
            self.problem("[forge].repo", "is required, e.g. repo = \"owner/name\"");
            return None;
        };
        let parts: Vec<&str> = repo.split('/').collect();
        let plain = |p: &&str| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        if parts.len() < 2 || !parts.iter().all(plain) {
            self.problem(
                "[forge].repo",
                format!("must be \"owner/name\" (A-Z a-z 0-9 . _ - in each part), got {repo:?}"),
            );
            return None;
        }
        Some(repo)
    }

    /// A list of label or user names: each non-empty, one line, at most [`MAX_NAMES`].
    fn names(&mut self, key: &str, names: Vec<String>) -> Vec<String> {
        if names.len() > MAX_NAMES {
            self.problem(
                key,
                format!("at most {MAX_NAMES} names, got {}", names.len()),
            );
        }
        for n in &names {
            if n.trim().is_empty() || n.contains(|c: char| c.is_control() || c == ',') {
                self.problem(
                    key,
                    format!("{n:?} is not a name (empty, or holds a comma or a control character)"),
                );
            }
        }
        names
    }
}

/// Checks that a title template uses only the placeholders harness fills.
fn check_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("an unclosed `{{` in {template:?}"));
        };
        let name = &after[..close];
        if !TITLE_FIELDS.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{name}}} (known: {{subject}}, {{task_id}}, {{vertical}})"
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::parse;
    use std::path::Path;

    const BASE: &str = "vertical = \"v\"\nwork_root = \"/tmp/w\"\n[litellm]\nreplay = \"c.json\"\n[models]\ndefault_tier = \"t\"\nt = \"m\"\n[workspace]\nrepo = \"/srv/r\"\nbase = \"main\"\npush = \"origin\"\n";

    fn problems(extra: &str, base: &str) -> String {
        match parse(&format!("{base}{extra}"), Path::new("/etc/h/harness.toml")) {
            Ok(_) => String::new(),
            Err(e) => e.problems.join("\n"),
        }
    }

    #[test]
    fn a_forge_section_is_read_with_its_defaults() {
        let cfg = parse(
            &format!("{BASE}[forge]\nkind = \"forgejo\"\nurl = \"http://127.0.0.1:3000/\"\nrepo = \"o/r\"\ntoken_ref = \"env:T\"\n"),
            Path::new("/etc/h/harness.toml"),
        )
        .unwrap();
        let f = cfg.forge.unwrap();
        assert_eq!(f.kind, super::ForgeKind::Gitea);
        assert_eq!(f.url, "http://127.0.0.1:3000");
        assert_eq!(f.pr, super::PrMode::Ready);
        assert_eq!(f.on_failure, super::OnFailure::Branch);
        assert_eq!(f.title, "{subject}");
        assert_eq!(f.max_retries, 2);
    }

    #[test]
    fn every_forge_mistake_names_its_key() {
        let p = problems(
            "[forge]\nkind = \"gitbucket\"\nurl = \"ftp://x\"\nrepo = \"justone\"\npr = \"maybe\"\non_failure = \"pr\"\ntitle = \"{issue}\"\nlabels = [\"\"]\n",
            BASE,
        );
        for key in [
            "[forge].kind: must be",
            "[forge].url: must be an http:// or https:// URL",
            "[forge].repo: must be \"owner/name\"",
            "[forge].token_ref: is required",
            "[forge].pr: must be",
            "[forge].on_failure: must be",
            "[forge].title: unknown placeholder {issue}",
            "[forge].labels: \"\" is not a name",
        ] {
            assert!(p.contains(key), "{key} missing in:\n{p}");
        }
    }

    #[test]
    fn a_forge_needs_a_pushed_workspace() {
        let base = BASE.replace("push = \"origin\"\n", "");
        let p = problems(
            "[forge]\nkind = \"github\"\nurl = \"https://api.github.com\"\nrepo = \"o/r\"\ntoken_ref = \"env:T\"\n",
            &base,
        );
        assert!(p.contains("[forge]: opens a pull request"), "{p}");
    }
}
