//! Workspace stage, git adapter: each task works in its own `git worktree` of `[workspace]
//! repo`, on its own branch started from `base` (a later run on the same task continues the
//! branch). After the turn, [`Workspace::finish`] commits what changed, writes the branch's
//! patch beside the REPORT and pushes the branch. The real `git` binary runs every step,
//! time-limited (`git.rs`); `base` is only ever read. The names are PURE in [`name`].

mod git;
pub(crate) mod name;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tracing::{info, warn};

use crate::config::WorkspaceConfig;
use git::run;

/// A task's worktree, ready for the turn.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// The worktree: the turn's work root.
    pub path: PathBuf,
    /// The task's branch.
    pub branch: String,
    /// The branch it started from.
    pub base: String,
    /// The remote the branch goes to, if any.
    pub push: Option<String>,
    /// The repository.
    pub repo: PathBuf,
    /// Whether the branch already existed (a later run on the same task).
    pub continued: bool,
    /// The worktree's git directory inside the repository, checked when opened: harness's
    /// own git names it, never reading the worktree's `.git` file again, which commands
    /// can rewrite to point at a git directory (and a config) of their own.
    git_dir: PathBuf,
    /// The repository's common git dir (resolved), which holds `git_dir`: what commands
    /// must be able to read for their git to work in the worktree.
    common_dir: PathBuf,
    /// How long each git command may take (`[workspace].git_timeout_secs`).
    pub git_timeout: std::time::Duration,
    /// `[workspace].max_patch_bytes`: a larger patch is written as its stat summary.
    pub max_patch_bytes: u64,
    /// `[workspace].max_file_bytes`: larger files are left out of the commit.
    pub max_file_bytes: u64,
}

/// What the REPORT's `workspace:` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Record {
    /// The task's branch.
    pub branch: String,
    /// The branch it started from.
    pub base: String,
    /// Whether the branch existed before this run (a later run on the same task).
    pub continued: bool,
    /// The branch's commit after the turn.
    pub commit: Option<String>,
    /// Whether this run made a commit (false when nothing changed).
    pub committed: bool,
    /// The patch of the branch against `base`, beside the REPORT (`None`: no difference).
    pub patch: Option<String>,
    /// Whether `patch` holds a `git diff --stat` summary instead of the patch, which was
    /// over `max_patch_bytes`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub patch_summary: bool,
    /// The patch's size in bytes: written, or (for a summary) estimated from the changed
    /// blobs or counted up to the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_bytes: Option<u64>,
    /// Whether the branch was pushed (to `remote`).
    pub pushed: bool,
    /// The remote, when `[workspace] push` is set.
    pub remote: Option<String>,
    /// What failed, with the command that retries it.
    pub error: Option<String>,
    /// Nested repositories in the worktree (a `.git` below its root: `git init sub`, a
    /// planted `.git` file), left out of the commit; absent when there were none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// Files over `max_file_bytes`, left out of the commit (never added to the object
    /// store), each with its size; absent when there were none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub too_large: Vec<String>,
}

/// Whether `refs/heads/<branch>` exists in `repo`.
fn has_branch(repo: &Path, branch: &str) -> Result<bool> {
    let commit = format!("refs/heads/{branch}^{{commit}}");
    let out = git::output(repo, &["rev-parse", "--verify", "--quiet", &commit])?;
    Ok(out.status.success())
}

/// The preflight of `[workspace]`: `repo` is a git repository, `base` a branch in it, and the
/// push remote (if set) one of its remotes. Returns a line for `harness check`.
pub(crate) fn preflight(cfg: &WorkspaceConfig) -> Result<String> {
    run(&cfg.repo, &["rev-parse", "--git-dir"]).with_context(|| {
        format!(
            "[workspace].repo {} is not a git repository",
            cfg.repo.display()
        )
    })?;
    if !has_branch(&cfg.repo, &cfg.base)? {
        bail!(
            "[workspace].base: {} has no branch {:?}",
            cfg.repo.display(),
            cfg.base
        );
    }
    if let Some(remote) = &cfg.push {
        run(&cfg.repo, &["remote", "get-url", remote]).with_context(|| {
            format!(
                "[workspace].push: {} has no remote {remote:?}",
                cfg.repo.display()
            )
        })?;
    }
    Ok(format!(
        "{} has branch {}{}",
        cfg.repo.display(),
        cfg.base,
        cfg.push
            .as_ref()
            .map_or_else(String::new, |r| format!(", remote {r}"))
    ))
}

/// Opens the worktree of a task under `work_root`: the existing one of its branch, or a new
/// one, on the existing branch or on a new branch started from `base`.
pub(crate) fn open(
    cfg: &WorkspaceConfig,
    work_root: &Path,
    vertical: &str,
    task_id: &str,
) -> Result<Workspace> {
    let branch = name::branch(&cfg.branch, vertical, task_id);
    name::check_branch(&branch).map_err(|e| anyhow::anyhow!("[workspace].branch: {e}"))?;
    std::fs::create_dir_all(work_root)
        .with_context(|| format!("cannot create work_root {}", work_root.display()))?;
    let path = work_root.join(name::worktree_dir(&branch));
    let continued = has_branch(&cfg.repo, &branch)?;
    let mut ws = Workspace {
        path: path.clone(),
        branch: branch.clone(),
        base: cfg.base.clone(),
        push: cfg.push.clone(),
        repo: cfg.repo.clone(),
        continued,
        git_dir: PathBuf::new(),
        common_dir: PathBuf::new(),
        git_timeout: cfg.git_timeout,
        max_patch_bytes: cfg.max_patch_bytes,
        max_file_bytes: cfg.max_file_bytes,
    };
    if path.exists() {
        (ws.git_dir, ws.common_dir) = match worktree_git_dir(&cfg.repo, &path) {
            Ok(dirs) => dirs,
            Err(e) => {
                restore_git_file(&cfg.repo, &path)
                    .with_context(|| format!("{e:#}; and it cannot be restored"))?;
                // What restore wrote is checked like any `.git` file.
                worktree_git_dir(&cfg.repo, &path)?
            }
        };
        let head = ws
            .run(&["rev-parse", "--abbrev-ref", "HEAD"])
            .with_context(|| format!("{} exists but is not a git worktree", path.display()))?;
        if head.trim() != branch {
            bail!(
                "{} is a worktree of {:?}, not of the task's branch {branch:?}",
                path.display(),
                head.trim()
            );
        }
        info!("workspace: {} on {branch} (reused)", path.display());
        return Ok(ws);
    }
    let p = path.to_string_lossy();
    // A worktree directory deleted by hand stays registered until pruned.
    run(&cfg.repo, &["worktree", "prune"])?;
    if continued {
        run(&cfg.repo, &["worktree", "add", "--", &p, &branch])?;
    } else {
        let base = format!("refs/heads/{}", cfg.base);
        run(
            &cfg.repo,
            &[
                "worktree",
                "add",
                "--no-track",
                "-b",
                &branch,
                "--",
                &p,
                &base,
            ],
        )?;
    }
    (ws.git_dir, ws.common_dir) = worktree_git_dir(&cfg.repo, &path)?;
    info!(
        "workspace: {} on {branch} ({})",
        path.display(),
        if continued {
            "continued"
        } else {
            "new from base"
        }
    );
    Ok(ws)
}

/// The git directory of the worktree at `wt`, read from its `.git` file and required to lie
/// in the repository's `worktrees/` directory (a reused worktree's `.git` was writable by the
/// commands of earlier runs), and the repository's common dir that holds it.
fn worktree_git_dir(repo: &Path, wt: &Path) -> Result<(PathBuf, PathBuf)> {
    let common = run(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    let worktrees = std::fs::canonicalize(Path::new(common.trim()).join("worktrees"))
        .with_context(|| format!("cannot resolve the worktrees of {}", repo.display()))?;
    let dot_git = wt.join(".git");
    let text = crate::bounded::read_text(&dot_git, 4096)
        .with_context(|| format!("cannot read {}", dot_git.display()))?;
    let pointer = text
        .trim_end()
        .strip_prefix("gitdir: ")
        .ok_or_else(|| anyhow::anyhow!("{} is not a worktree's .git file", dot_git.display()))?;
    let dir = std::fs::canonicalize(wt.join(pointer)).with_context(|| {
        format!(
            "{} points to {pointer}, which is missing",
            dot_git.display()
        )
    })?;
    if dir.parent() != Some(worktrees.as_path()) {
        bail!(
            "{} points to {}, not into {}: refusing to run git there",
            dot_git.display(),
            dir.display(),
            worktrees.display()
        );
    }
    let common = worktrees.parent().unwrap_or(&worktrees).to_path_buf();
    Ok((dir, common))
}

impl Workspace {
    /// The repository's common git dir (resolved): commands read it, never write it.
    pub(crate) fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Runs harness's own git in the worktree with its checked git directory.
    fn run(&self, args: &[&str]) -> Result<String> {
        let all = self.pinned(args);
        git::run_within(
            &self.path,
            &all.iter().map(String::as_str).collect::<Vec<_>>(),
            self.git_timeout,
        )
    }

    fn output(&self, args: &[&str]) -> Result<git::Output> {
        let all = self.pinned(args);
        git::output_within(
            &self.path,
            &all.iter().map(String::as_str).collect::<Vec<_>>(),
            self.git_timeout,
        )
    }

    fn pinned(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec![
            format!("--git-dir={}", self.git_dir.display()),
            format!("--work-tree={}", self.path.display()),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    }

    /// After the turn: commits what changed, writes the branch's patch against `base` to
    /// `patch_path`, pushes when configured. Never fails: a step that fails stops the rest and
    /// is in the record's `error` with the command that retries it.
    pub(crate) fn finish(&self, subject: &str, run_id: &str, patch_path: &Path) -> Record {
        let mut record = Record {
            branch: self.branch.clone(),
            base: self.base.clone(),
            continued: self.continued,
            commit: None,
            committed: false,
            patch: None,
            patch_summary: false,
            patch_bytes: None,
            pushed: false,
            remote: self.push.clone(),
            error: None,
            left_out: Vec::new(),
            too_large: Vec::new(),
        };
        match self.steps(subject, run_id, patch_path, &mut record) {
            Ok(()) => info!(
                "workspace: {} at {}{}{}",
                self.branch,
                record.commit.as_deref().unwrap_or("?"),
                if record.committed {
                    " (committed)"
                } else {
                    " (nothing changed)"
                },
                if record.pushed { ", pushed" } else { "" }
            ),
            Err(e) => record.error = Some(format!("{e:#}")),
        }
        record
    }

    fn steps(
        &self,
        subject: &str,
        run_id: &str,
        patch_path: &Path,
        record: &mut Record,
    ) -> Result<()> {
        let wt = self.path.as_path();
        let retry_commit = format!(
            "git -C {} add -A && git -C {} commit",
            wt.display(),
            wt.display()
        );
        // A nested repository would make `git add -A` fail ("does not have a commit checked
        // out") or commit a bare gitlink: each is left out, and the REPORT says so.
        record.left_out = nested_repos(wt);
        for dir in &record.left_out {
            warn!("workspace: {dir:?} holds a nested git repository; left out of the commit");
        }
        // Sizes are checked before `git add`, so a big file never enters the object store.
        let large = self.too_large()?;
        for (path, size) in &large {
            warn!(
                "workspace: {path:?} is {size} bytes, over max_file_bytes ({}); left out of the commit",
                self.max_file_bytes
            );
        }
        let excludes: Vec<String> = record
            .left_out
            .iter()
            .chain(large.iter().map(|(p, _)| p))
            .map(|d| format!(":(top,exclude,literal){d}"))
            .collect();
        record.too_large = large
            .iter()
            .map(|(p, n)| {
                format!(
                    "{p} ({n} bytes, over max_file_bytes {})",
                    self.max_file_bytes
                )
            })
            .collect();
        let mut add = vec!["add", "-A", "--", "."];
        add.extend(excludes.iter().map(String::as_str));
        retry(self.run(&add), &retry_commit)?;
        let changed = !self
            .output(&["diff", "--cached", "--quiet"])?
            .status
            .success();
        if changed {
            let message = commit_message(subject, run_id);
            let committed = self.run(&["commit", "--no-verify", "--quiet", "-m", &message]);
            retry(committed, &retry_commit)?;
            record.committed = true;
        }
        record.commit = Some(self.run(&["rev-parse", "HEAD"])?.trim().to_string());
        let range = format!("refs/heads/{}...HEAD", self.base);
        let retry_patch = format!(
            "git -C {} diff --binary {range} > {}",
            wt.display(),
            patch_path.display()
        );
        let patch = retry(self.patch(&range, record), &retry_patch)?;
        if !patch.is_empty() {
            let dir = patch_path.parent().unwrap_or(Path::new("."));
            let name = patch_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let written = crate::atomic::write_new(dir, &name, &patch);
            record.patch = Some(retry(written, &retry_patch)?.display().to_string());
        }
        if let Some(remote) = &self.push {
            let refspec = format!("refs/heads/{b}:refs/heads/{b}", b = self.branch);
            let pushed = self.run(&["push", "--quiet", "--", remote, &refspec]);
            let again = format!("git -C {} push {remote} {refspec}", wt.display());
            retry(pushed, &again)?;
            record.pushed = true;
        }
        Ok(())
    }
}

impl Workspace {
    /// The files `git add -A` would take (untracked and not ignored, or modified) that are
    /// regular files over `max_file_bytes`, with their sizes; relative to the worktree.
    fn too_large(&self) -> Result<Vec<(String, u64)>> {
        let listing = self.run(&[
            "ls-files",
            "-z",
            "--others",
            "--modified",
            "--exclude-standard",
        ])?;
        let mut out: Vec<(String, u64)> = listing
            .split('\0')
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                let meta = std::fs::symlink_metadata(self.path.join(p)).ok()?;
                (meta.is_file() && meta.len() > self.max_file_bytes)
                    .then(|| (p.to_string(), meta.len()))
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The patch of `range` as bytes, or, when it is over `max_patch_bytes` (estimated from
    /// the changed blobs first, so a big patch is never made, then counted while read), a
    /// summary: a header line, then `git diff --stat`. The record says which and the size.
    fn patch(&self, range: &str, record: &mut Record) -> Result<Vec<u8>> {
        let limit = self.max_patch_bytes;
        let cap = usize::try_from(limit).unwrap_or(usize::MAX);
        let raw = self.bounded(
            &["diff", "--raw", "-z", "--no-abbrev", range],
            None,
            usize::MAX,
        )?;
        let blobs = changed_blobs(&raw);
        let estimate = if blobs.is_empty() {
            0
        } else {
            let mut input = blobs.join("\n");
            input.push('\n');
            let sizes = self.bounded(
                &["cat-file", "--batch-check=%(objectsize)"],
                Some(input.into_bytes()),
                usize::MAX,
            )?;
            blob_sizes_total(&sizes)
        };
        if estimate <= limit {
            let out = self.bounded_raw(&["diff", "--binary", range], None, cap)?;
            if !out.cut {
                record.patch_bytes = (!out.stdout.is_empty()).then_some(out.stdout.len() as u64);
                return Ok(out.stdout);
            }
        }
        let size = estimate.max(limit.saturating_add(1));
        warn!("workspace: the patch is over max_patch_bytes ({limit}, about {size} bytes); a stat summary is written instead");
        record.patch_summary = true;
        record.patch_bytes = Some(size);
        let stat = self.bounded_raw(&["diff", "--stat", range], None, cap)?;
        let mut text = summary_header(limit, size, &self.base, &self.branch).into_bytes();
        text.extend_from_slice(&stat.stdout);
        if stat.cut {
            text.extend_from_slice(b"\n(the summary too was cut at max_patch_bytes)\n");
        }
        Ok(text)
    }

    /// A bounded git command's stdout as text, or its failure.
    fn bounded(&self, args: &[&str], input: Option<Vec<u8>>, cap: usize) -> Result<String> {
        let out = self.bounded_raw(args, input, cap)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A bounded git command's output, or its failure (one cut at `cap` is no failure: its
    /// SIGPIPE was harness's doing).
    fn bounded_raw(
        &self,
        args: &[&str],
        input: Option<Vec<u8>>,
        cap: usize,
    ) -> Result<git::Bounded> {
        let all = self.pinned(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = git::bounded_within(&self.path, &all, self.git_timeout, input, cap)?;
        if !out.cut && !out.status.success() {
            bail!(
                "git {} failed ({}): {}",
                args.join(" "),
                out.status,
                out.stderr.trim()
            );
        }
        Ok(out)
    }
}

/// The object names of the blobs `git diff --raw -z --no-abbrev` names (both sides of each
/// change, the all-zero name of an absent side left out).
fn changed_blobs(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fields = raw.split('\0').filter(|f| !f.is_empty());
    // Each entry is its metadata, then one path (two for a rename or copy): read by
    // position, so a path that starts with ':' is never taken for metadata.
    while let Some(meta) = fields.next() {
        let Some(meta) = meta.strip_prefix(':') else {
            continue;
        };
        let parts: Vec<&str> = meta.split(' ').collect();
        out.extend(
            parts
                .iter()
                .skip(2)
                .take(2)
                .filter(|sha| !sha.is_empty() && sha.bytes().any(|b| b != b'0'))
                .map(|sha| sha.to_string()),
        );
        let paths = match parts.get(4) {
            Some(s) if s.starts_with('R') || s.starts_with('C') => 2,
            _ => 1,
        };
        for _ in 0..paths {
            fields.next();
        }
    }
    out
}

/// The sum of the sizes `git cat-file --batch-check=%(objectsize)` printed, one a line (a
/// `missing` line counts nothing).
fn blob_sizes_total(lines: &str) -> u64 {
    lines
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .fold(0, u64::saturating_add)
}

/// The first line of a patch kept as a summary: why, and how to get the patch.
fn summary_header(limit: u64, size: u64, base: &str, branch: &str) -> String {
    format!(
        "# harness: the patch is over max_patch_bytes ({limit} bytes; about {size}), so this is its `git diff --stat`; the patch itself: git diff --binary {base}...{branch} (in the repository)\n"
    )
}

/// Most entries [`nested_repos`] looks at: a tree of millions of files is not walked whole.
const WALK_MAX: usize = 200_000;

/// The directories below the worktree's root that hold a `.git` entry of any kind (a
/// repository, a `.git` file, a symlink), relative and sorted; symlinks are never followed
/// and a nested repository is not walked into.
fn nested_repos(wt: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(rel) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(wt.join(&rel)) else {
            continue;
        };
        let mut dirs = Vec::new();
        let mut nested = false;
        for e in entries.flatten() {
            seen += 1;
            if seen > WALK_MAX {
                warn!("workspace: more than {WALK_MAX} entries; nested repositories searched no further");
                out.sort();
                return out;
            }
            let name = e.file_name();
            if name == ".git" {
                nested = !rel.as_os_str().is_empty();
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(rel.join(name));
            }
        }
        if nested {
            out.push(rel.to_string_lossy().into_owned());
        } else {
            todo.extend(dirs);
        }
    }
    out.sort();
    out
}

/// Points the worktree's `.git` back at its own git directory when a command replaced it (a
/// `.git` file aimed elsewhere, a directory from `git init .`, a symlink): the repository's
/// `worktrees/*/gitdir` names the worktree each belongs to. Returns the git directory.
fn restore_git_file(repo: &Path, wt: &Path) -> Result<PathBuf> {
    let common = run(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    let worktrees = Path::new(common.trim()).join("worktrees");
    let want = std::fs::canonicalize(wt)?.join(".git");
    let mine = std::fs::read_dir(&worktrees)?
        .flatten()
        .map(|e| e.path())
        .find(|d| {
            std::fs::read_to_string(d.join("gitdir")).is_ok_and(|g| Path::new(g.trim()) == want)
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no git directory in {} names {}",
                worktrees.display(),
                want.display()
            )
        })?;
    let dot_git = wt.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot_git)?,
        Ok(_) => std::fs::remove_file(&dot_git)?,
        Err(_) => {}
    }
    std::fs::write(&dot_git, format!("gitdir: {}\n", mine.display()))?;
    warn!(
        "workspace: {} did not point at the worktree's git directory (a command changed it); restored",
        dot_git.display()
    );
    Ok(mine)
}

/// Most files [`Workspace::base_files`] copies out of the base commit.
const BASE_FILES_MAX: usize = 200;

impl Workspace {
    /// The files under `paths` (files or directories, relative to the repository's root) as
    /// the base branch has them, written into a fresh directory, and the base commit: the
    /// next run's instructions come from where the operator put them, never from a worktree
    /// a model wrote (and committed). Paths the base does not have are simply absent.
    pub(crate) fn base_files(&self, paths: &[&str]) -> Result<(tempfile::TempDir, String)> {
        let base = format!("refs/heads/{}", self.base);
        let commit = run(
            &self.repo,
            &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
        )?
        .trim()
        .to_string();
        let dir = tempfile::Builder::new()
            .prefix("harness-base-")
            .tempdir()
            .context("cannot create a directory for the base commit's instructions")?;
        let mut args = vec!["ls-tree", "-r", "-z", "--full-tree", commit.as_str(), "--"];
        args.extend(paths.iter().copied());
        let listing = run(&self.repo, &args)?;
        for entry in listing
            .split('\0')
            .filter(|e| !e.is_empty())
            .take(BASE_FILES_MAX)
        {
            let Some((meta, path)) = entry.split_once('\t') else {
                continue;
            };
            let mut meta = meta.split(' ');
            let (mode, kind, sha) = (meta.next(), meta.next(), meta.next());
            let regular = matches!(mode, Some("100644" | "100755")) && kind == Some("blob");
            if !regular || path.split('/').any(|c| c == ".." || c.is_empty()) {
                continue;
            }
            let Some(sha) = sha else { continue };
            let text = run(&self.repo, &["cat-file", "blob", sha])?;
            let to = dir.path().join(path);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&to, text)?;
        }
        Ok((dir, commit))
    }
}

/// A failed step's error, then the command that retries it.
fn retry<T>(result: Result<T>, command: &str) -> Result<T> {
    result.map_err(|e| anyhow::anyhow!("{e:#}\nretry with: {command}"))
}

/// The commit message: the task's subject, then the run it came from.
pub(crate) fn commit_message(subject: &str, run_id: &str) -> String {
    let line: String = subject
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(72)
        .collect();
    let line = if line.trim().is_empty() {
        "harness task"
    } else {
        line.trim()
    };
    format!("{line}\n\nharness run {run_id}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_message_is_the_subject_and_the_run() {
        assert_eq!(
            commit_message("Fix it\nmore", "r1"),
            "Fix it\n\nharness run r1\n"
        );
        assert_eq!(
            commit_message("  ", "r1"),
            "harness task\n\nharness run r1\n"
        );
    }

    #[test]
    fn nested_repositories_are_found_without_following_links_or_walking_into_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::create_dir_all(p.join("a/b/.git/c/.git")).unwrap();
        std::fs::create_dir_all(p.join("plain/deep")).unwrap();
        std::fs::create_dir_all(p.join("f")).unwrap();
        std::fs::write(p.join("f/.git"), "gitdir: /x\n").unwrap();
        std::os::unix::fs::symlink(p.join("a"), p.join("link")).unwrap();
        assert_eq!(nested_repos(p), ["a/b", "f"]);
    }

    #[test]
    fn the_changed_blobs_are_both_sides_without_the_absent_one() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let zero = "0".repeat(40);
        let raw = format!(
            ":100644 100644 {a} {b} M\0f.txt\0:000000 100644 {zero} {b} A\0new\0:100644 100644 {a} {b} R087\0old\0:renamed\0:100644 100644 {a} {a} M\0:odd\0"
        );
        assert_eq!(
            changed_blobs(&raw),
            [&a, &b, &b, &a, &b, &a, &a].map(String::as_str)
        );
        assert!(changed_blobs("").is_empty());
        assert_eq!(blob_sizes_total("10\n5\nxyz missing\n"), 15);
    }

    #[test]
    fn the_summary_header_says_why_and_how_to_get_the_patch() {
        let h = summary_header(4096, 9000, "main", "harness/x-1");
        assert!(
            h.starts_with("# harness: the patch is over max_patch_bytes (4096 bytes; about 9000)"),
            "{h}"
        );
        assert!(
            h.ends_with("git diff --binary main...harness/x-1 (in the repository)\n"),
            "{h}"
        );
        assert_eq!(h.lines().count(), 1);
    }
}
