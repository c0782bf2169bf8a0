//! `harness test`, process and filesystem adapter: one case's run. A fresh temp dir gets the
//! work root (the case's files), the cassette and the derived config; the harness binary
//! itself runs `once --demo` on it with `--replay` and `--events` (stdin closed, bounded by
//! the case's timeout); the exit code, the events and the REPORT are read back.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::case::{Case, Replies};
use super::derive::{self, Paths};
use super::verdict::Observed;

/// Largest `--events` file read back (bytes).
const EVENTS_MAX: u64 = 64 * 1024 * 1024;
/// How long a run stopped at its timeout has after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// Most files a case's `files_from` tree may hold.
const FROM_FILES_MAX: usize = 2000;
/// Most bytes a case's `files_from` tree may hold.
const FROM_BYTES_MAX: u64 = 256 * 1024 * 1024;
/// Lines of the run's stderr shown when a case fails.
const STDERR_LINES: usize = 20;

/// What one case's run came to.
#[derive(Debug)]
pub(crate) enum Ran {
    /// It ended; here is what it left.
    Ended(Observed),
    /// It was still running at the case's timeout and was stopped.
    TimedOut,
}

/// A finished run with its narration (the child's stderr, masked by it).
#[derive(Debug)]
pub(crate) struct Run {
    /// How it ended.
    pub ran: Ran,
    /// The last lines of its stderr.
    pub stderr_tail: String,
}

/// Runs `case` (read from `file`) under the operator's config `operator` (from `dir`) with
/// the binary `exe`. An error is a run that could not be set up or read back.
pub(crate) async fn run(
    exe: &Path,
    operator: &toml::Table,
    dir: &Path,
    file: &Path,
    case: &Case,
) -> Result<Run> {
    let tmp = tempfile::Builder::new()
        .prefix("harness-test-")
        .tempdir()
        .context("cannot create the case's temp dir")?;
    let root = std::path::absolute(tmp.path()).context("cannot resolve the temp dir")?;
    let paths = Paths {
        work_root: root.join("work"),
        report_dir: root.join("reports"),
        cassette: cassette(case, file, &root)?,
    };
    for d in [&paths.work_root, &paths.report_dir] {
        std::fs::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    if let Some(from) = &case.files_from {
        copy_tree(&case_dir(file).join(from), &paths.work_root)?;
    }
    write_files(&paths.work_root, case)?;
    let derived = derive::config(operator, dir, &case.config, &case.task, &paths)?;
    let config = root.join("harness.toml");
    let text = toml::to_string(&derived).context("cannot encode the case's config")?;
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    let events = root.join("events.jsonl");
    let stderr = root.join("stderr.txt");
    let code = spawn(exe, &root, &config, &paths.cassette, &events, &stderr, case).await?;
    let stderr_tail = tail(&std::fs::read_to_string(&stderr).unwrap_or_default());
    let Some(exit_code) = code else {
        return Ok(Run {
            ran: Ran::TimedOut,
            stderr_tail,
        });
    };
    let events = read_events(&events)?;
    let report = report_of(&events, &root)?;
    Ok(Run {
        ran: Ran::Ended(Observed {
            exit_code,
            events,
            report,
        }),
        stderr_tail,
    })
}

/// The cassette to replay: the case's file (relative to the case file), or its inline
/// replies written into the temp dir.
fn cassette(case: &Case, file: &Path, root: &Path) -> Result<PathBuf> {
    match &case.replies {
        Replies::File(name) => Ok(case_dir(file).join(name)),
        Replies::Inline(replies) => {
            let path = root.join("cassette.json");
            let cassette = crate::llm::cassette::Cassette {
                harness_cassette: 1,
                replies: replies.clone(),
            };
            let text = serde_json::to_string(&cassette).context("cannot encode the cassette")?;
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        }
    }
}

/// The directory a case file's relative names are resolved against.
pub(crate) fn case_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::path::absolute(p).unwrap_or(p.to_path_buf()),
        _ => PathBuf::from("."),
    }
}

/// Copies the tree at `from` into `to`: directories and regular files only (a symlink or a
/// device is refused, naming it), at most [`FROM_FILES_MAX`] files and [`FROM_BYTES_MAX`]
/// bytes.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        let entries = std::fs::read_dir(&src)
            .with_context(|| format!("files_from: cannot list {}", src.display()))?;
        for entry in entries {
            let entry =
                entry.with_context(|| format!("files_from: cannot list {}", src.display()))?;
            let (path, target) = (entry.path(), dst.join(entry.file_name()));
            let meta = std::fs::symlink_metadata(&path)
                .with_context(|| format!("files_from: {}", path.display()))?;
            if meta.is_dir() {
                std::fs::create_dir(&target)
                    .with_context(|| format!("cannot create {}", target.display()))?;
                stack.push((path, target));
                continue;
            }
            if let Some(kind) = crate::bounded::irregular(meta.file_type()) {
                bail!(
                    "files_from: {} is {kind}; only files and directories are copied",
                    path.display()
                );
            }
            files += 1;
            bytes += meta.len();
            if files > FROM_FILES_MAX || bytes > FROM_BYTES_MAX {
                bail!(
                    "files_from {}: more than {FROM_FILES_MAX} files or {}",
                    from.display(),
                    crate::bounded::size(FROM_BYTES_MAX)
                );
            }
            std::fs::copy(&path, &target).with_context(|| {
                format!("cannot copy {} to {}", path.display(), target.display())
            })?;
        }
    }
    Ok(())
}

fn write_files(work_root: &Path, case: &Case) -> Result<()> {
    for (rel, text) in &case.files {
        let path = work_root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Runs `exe once --demo ...`; `Ok(None)` when it was stopped at the timeout, else its exit
/// code (`None` inside: it ended by a signal).
async fn spawn(
    exe: &Path,
    root: &Path,
    config: &Path,
    cassette: &Path,
    events: &Path,
    stderr: &Path,
    case: &Case,
) -> Result<Option<Option<i32>>> {
    let err = std::fs::File::create(stderr)
        .with_context(|| format!("cannot create {}", stderr.display()))?;
    let mut child = tokio::process::Command::new(exe)
        .arg("once")
        .arg("--demo")
        .arg("--config")
        .arg(config)
        .arg("--replay")
        .arg(cassette)
        .arg("--events")
        .arg(events)
        .current_dir(root)
        .env_remove("HARNESS_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let limit = Duration::from_secs(case.timeout_secs);
    if let Ok(status) = tokio::time::timeout(limit, child.wait()).await {
        return Ok(Some(status.context("cannot wait for the run")?.code()));
    }
    // SIGTERM first: the run writes its partial REPORT and ends its commands.
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on the pid of a child we have not reaped.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
    }
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
    Ok(None)
}

fn read_events(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = crate::bounded::read_text(path, EVENTS_MAX)
        .with_context(|| format!("cannot read the run's events {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .with_context(|| format!("an event of {} is not JSON", path.display()))
        })
        .collect()
}

/// The REPORT `run.completed` names (relative to the run's directory `root`), read (none:
/// the run wrote none).
fn report_of(events: &[serde_json::Value], root: &Path) -> Result<Option<String>> {
    let path = events
        .iter()
        .rev()
        .find(|e| e.get("type").and_then(|t| t.as_str()) == Some("run.completed"))
        .and_then(|e| e.get("report"))
        .and_then(|r| r.as_str());
    path.map(|p| {
        crate::bounded::read_text(&root.join(p), crate::bounded::REPORT_MAX)
            .with_context(|| format!("cannot read the run's REPORT {p}"))
    })
    .transpose()
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(STDERR_LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_keeps_the_last_lines() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let kept = tail(&text);
        assert_eq!(kept.lines().count(), STDERR_LINES);
        assert!(
            kept.starts_with("line 11\n") && kept.ends_with("line 30"),
            "{kept}"
        );
        assert_eq!(tail("one\n"), "one");
    }
}
