//! Intake stage, local inbox source: `[inbox] dir` holds `*.md` task files (an optional
//! front matter with `class` and `subject`, the prompt as body; the task id is the file's
//! stem). PURE [`parse`]; the rest is a filesystem adapter.
//!
//! A worker claims a file by renaming it into `claimed/` under a name that holds its run id:
//! rename(2) is atomic, so of several workers (on one host or on a shared filesystem) exactly
//! one wins and the others see the file gone. After the run the file moves to `done/` or
//! `failed/` with its REPORT beside it; a file that cannot be parsed moves to `failed/` with
//! `<stem>.error.txt` saying why. A claim older than `stale_after_mins` (its file's mtime is
//! set when claimed) was left by a killed worker and is put back into the inbox.

use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context, Result};
use tracing::{info, warn};

pub use super::source::Claimed;
use super::source::{BoxFuture, Claim, Picked, RouteFn, Scoped, Source, Want};
use super::{Source as Kind, TakeError, Task};
use crate::atomic;
use crate::config::{is_name, InboxConfig};

/// Where claimed files wait for their run to end.
pub const CLAIMED: &str = "claimed";
/// Files whose run completed.
pub const DONE: &str = "done";
/// Files whose run did not complete, or that could not be parsed or routed.
pub const FAILED: &str = "failed";

/// Parses a task file's text; the error says what is wrong, for `failed/<stem>.error.txt`.
pub fn parse(stem: &str, text: &str) -> Result<Task, String> {
    if !is_name(stem) {
        return Err(format!(
            "the file name {stem:?}.md is not a task id: use 1-64 characters of A-Z a-z 0-9 . _ -"
        ));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (mut class, mut subject) = (None, None);
    let body = match text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    {
        None => text,
        Some(rest) => {
            let mut lines = rest.split_inclusive('\n');
            let mut consumed = 0;
            let mut closed = false;
            for line in lines.by_ref() {
                consumed += line.len();
                let l = line.trim();
                if l == "---" {
                    closed = true;
                    break;
                }
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                let Some((key, value)) = l.split_once(':') else {
                    return Err(format!("front matter line {l:?} is not `key: value`"));
                };
                let value = unquote(value.trim());
                let value = (!value.is_empty()).then(|| value.to_string());
                match key.trim() {
                    "class" => class = value,
                    "subject" => subject = value,
                    other => {
                        return Err(format!(
                            "front matter key {other:?} is unknown (the keys are class and subject)"
                        ))
                    }
                }
            }
            if !closed {
                return Err("the front matter is not closed by a `---` line".to_string());
            }
            &rest[consumed..]
        }
    };
    let prompt = body.trim();
    if prompt.is_empty() {
        return Err("the prompt (the text after the front matter) is empty".to_string());
    }
    let subject = subject.unwrap_or_else(|| {
        let first = prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or(stem);
        first
            .trim()
            .trim_start_matches('#')
            .trim()
            .chars()
            .take(100)
            .collect()
    });
    Ok(Task {
        id: stem.to_string(),
        source: Kind::Inbox,
        subject: crate::bounded::one_line(&subject, super::SUBJECT_MAX),
        class: class.map(|c| crate::bounded::one_line(&c, super::CLASS_MAX)),
        prompt: prompt.to_string(),
    })
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// The task files waiting in the inbox, by name: top-level `*.md` files not starting with `.`.
fn waiting(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read inbox {}", dir.display()))?;
    let mut files: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let stem = name.strip_suffix(".md")?;
            (!stem.is_empty() && !name.starts_with('.')).then(|| (stem.to_string(), e.path()))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Largest task file read: a prompt is text for a model, and the whole file is sent.
pub const TASK_MAX: u64 = 1024 * 1024;

/// A task file's text: a regular UTF-8 file of at most [`TASK_MAX`] bytes, read without
/// ever waiting (a FIFO put in its place is refused); the error is for `<stem>.error.txt`.
fn read_task(path: &Path) -> Result<String, String> {
    crate::bounded::read_text(path, TASK_MAX)
        .map_err(|e| format!("{e:#}").replace(&path.display().to_string(), "the file"))
}

/// Moves `from` to `to` without ever replacing a file: a hard link, then the old name goes.
fn move_new(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// Moves `from` into `dir` as `<name>.md`, or `<name>--<run_id>.md` when that is taken;
/// returns the new path.
fn move_into(from: &Path, dir: &Path, name: &str, run_id: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for candidate in [format!("{name}.md"), format!("{name}--{run_id}.md")] {
        let to = dir.join(candidate);
        match move_new(from, &to) {
            Ok(()) => return Ok(to),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))
            }
        }
    }
    Err(anyhow!(
        "cannot move {} into {}: its names are taken",
        from.display(),
        dir.display()
    ))
}

/// Puts claims older than `stale` back into the inbox; returns the task ids put back.
pub fn reclaim_stale(cfg: &InboxConfig, now: SystemTime) -> Vec<String> {
    let stale = Duration::from_secs(cfg.stale_after_mins * 60);
    let Ok(entries) = std::fs::read_dir(cfg.dir.join(CLAIMED)) else {
        return Vec::new();
    };
    let mut back = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > stale));
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((stem, _run)) = name.strip_suffix(".md").and_then(|n| n.rsplit_once("--")) else {
            continue;
        };
        if !old {
            continue;
        }
        match move_new(&path, &cfg.dir.join(format!("{stem}.md"))) {
            Ok(()) => {
                info!("intake: inbox claim {name} is stale; put {stem}.md back into the inbox");
                back.push(stem.to_string());
            }
            // Another worker put it back first, or a new file took its name.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::AlreadyExists) => {}
            Err(e) => warn!("intake: cannot put stale claim {name} back: {e}"),
        }
    }
    back
}

/// Claims the file at `path` for `run_id`; `None` when another worker took it first.
fn claim(cfg: &InboxConfig, stem: &str, path: &Path, run_id: &str) -> Result<Option<Claimed>> {
    let dir = cfg.dir.join(CLAIMED);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let to = dir.join(format!("{stem}--{run_id}.md"));
    match std::fs::rename(path, &to) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot claim {}", path.display()));
        }
    }
    // The claim's age is its file's mtime: a rename keeps the old one. O_NONBLOCK: a FIFO
    // swapped in after the listing fails here (and in `read_task`) instead of blocking.
    if let Err(e) = std::fs::File::options()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&to)
        .and_then(|f| f.set_modified(SystemTime::now()))
    {
        warn!("intake: cannot stamp the claim {}: {e}", to.display());
    }
    Ok(Some(Claimed {
        dir: cfg.dir.clone(),
        stem: stem.to_string(),
        path: to,
    }))
}

/// Moves a file that cannot run to `failed/`, with `<name>.error.txt` saying why.
fn reject(cfg: &InboxConfig, from: &Path, stem: &str, run_id: &str, why: &str) -> Result<()> {
    let failed = cfg.dir.join(FAILED);
    let moved = move_into(from, &failed, stem, run_id)?;
    let name = moved
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| stem.to_string());
    atomic::write(
        &failed.join(format!("{name}.error.txt")),
        format!("{why}\n").as_bytes(),
    )?;
    warn!(
        "intake: inbox task {stem}: {why}; moved to {}",
        moved.display()
    );
    Ok(())
}

/// The inbox as a task source.
pub struct Inbox<'a> {
    /// `[inbox]`.
    pub cfg: &'a InboxConfig,
}

impl Inbox<'_> {
    async fn take_one<R>(
        &self,
        want: &Want<'_>,
        route: RouteFn<'_, R>,
    ) -> Result<Option<Picked<R>>, TakeError> {
        let cfg = self.cfg;
        if want.claim {
            reclaim_stale(cfg, SystemTime::now());
        }
        let waiting = waiting(&cfg.dir)?;
        info!(
            "intake: inbox {}: {} task file(s) waiting",
            cfg.dir.display(),
            waiting.len()
        );
        for (stem, path) in waiting {
            if want.task_id.is_some_and(|id| id != stem) {
                continue;
            }
            if !want.claim {
                // A dry run: read, never move.
                let Ok(task) = read_task(&path).and_then(|t| parse(&stem, &t)) else {
                    continue;
                };
                let route = route(&task).map_err(TakeError::Routing)?;
                return Ok(Some(Picked {
                    task,
                    route,
                    claim: None,
                    issue: None,
                }));
            }
            let Some(claimed) = claim(cfg, &stem, &path, want.run_id)? else {
                info!("intake: inbox task {stem} was claimed by another worker first");
                continue;
            };
            let parsed = read_task(&claimed.path).and_then(|t| parse(&stem, &t));
            let task = match parsed {
                Ok(task) => task,
                Err(why) => {
                    reject(cfg, &claimed.path, &stem, want.run_id, &why)?;
                    continue;
                }
            };
            let route = match route(&task) {
                Ok(r) => r,
                Err(e) => {
                    reject(cfg, &claimed.path, &stem, want.run_id, &format!("{e:#}"))?;
                    return Err(TakeError::Routing(e));
                }
            };
            info!("intake: claimed inbox task {stem} (run {})", want.run_id);
            return Ok(Some(Picked {
                task,
                route,
                claim: Some(Claim::Inbox(claimed)),
                issue: None,
            }));
        }
        Ok(None)
    }
}

impl<R> Source<R> for Inbox<'_> {
    fn name(&self) -> &'static str {
        "inbox"
    }

    fn take<'a>(
        &'a self,
        want: &'a Want<'a>,
        route: RouteFn<'a, R>,
    ) -> BoxFuture<'a, Result<Option<Picked<R>>, TakeError>> {
        Box::pin(self.take_one(want, route))
    }

    fn scope<'a>(&'a self, route: RouteFn<'a, R>) -> BoxFuture<'a, Result<Vec<Scoped<R>>>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for (stem, path) in waiting(&self.cfg.dir)? {
                match read_task(&path).and_then(|t| parse(&stem, &t)) {
                    Ok(task) => {
                        let route = route(&task).map_err(|e| format!("{e:#}"));
                        out.push(Scoped { task, route });
                    }
                    Err(why) => warn!("scope: inbox task {stem} cannot be parsed: {why}"),
                }
            }
            Ok(out)
        })
    }
}

/// After the run: the claimed file moves to `done/` (a completed turn) or `failed/`, with
/// the REPORT beside it as `<name>.REPORT.md`. Returns the file's new path.
pub fn settle(claimed: &Claimed, completed: bool, report: &str, run_id: &str) -> Result<PathBuf> {
    let dir = claimed.dir.join(if completed { DONE } else { FAILED });
    let moved = move_into(&claimed.path, &dir, &claimed.stem, run_id)?;
    let name = moved
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| claimed.stem.clone());
    atomic::write(&dir.join(format!("{name}.REPORT.md")), report.as_bytes())?;
    Ok(moved)
}

/// Gives a claim up (a failure before the turn): the file goes back into the inbox.
pub fn release(claimed: &Claimed) -> Result<()> {
    let back = claimed.dir.join(format!("{}.md", claimed.stem));
    move_new(&claimed.path, &back).with_context(|| {
        format!(
            "cannot put {} back as {}",
            claimed.path.display(),
            back.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn task(id: &str, subject: &str, class: Option<&str>, prompt: &str) -> Task {
        Task {
            id: id.into(),
            source: Kind::Inbox,
            subject: subject.into(),
            class: class.map(String::from),
            prompt: prompt.into(),
        }
    }

    #[test]
    fn front_matter_is_optional() {
        assert_eq!(
            parse("t1", "# Fix the login\n\nIt fails.\n"),
            Ok(task(
                "t1",
                "Fix the login",
                None,
                "# Fix the login\n\nIt fails."
            ))
        );
        assert_eq!(
            parse(
                "t2",
                "---\nclass: code\nsubject: \"Login: broken\"\n# a comment\n---\nIt fails.\n"
            ),
            Ok(task("t2", "Login: broken", Some("code"), "It fails."))
        );
        assert_eq!(
            parse("t3", "---\r\nclass: ''\r\n---\r\nbody"),
            Ok(task("t3", "body", None, "body"))
        );
    }

    #[test]
    fn what_cannot_be_parsed_says_why() {
        let err = |stem: &str, text: &str| parse(stem, text).unwrap_err();
        assert_eq!(
            err("t", "---\nclass: code\n"),
            "the front matter is not closed by a `---` line"
        );
        assert_eq!(
            err("t", "---\npriority: 1\n---\nbody"),
            "front matter key \"priority\" is unknown (the keys are class and subject)"
        );
        assert_eq!(
            err("t", "---\njust text\n---\nbody"),
            "front matter line \"just text\" is not `key: value`"
        );
        assert_eq!(
            err("t", "---\nclass: code\n---\n  \n"),
            "the prompt (the text after the front matter) is empty"
        );
        assert!(err("a b", "body").contains("is not a task id"));
    }
}
