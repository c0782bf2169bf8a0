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

use std::ffi::{OsStr, OsString};
use std::fs::FileType;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context, Result};
use tracing::{info, warn};

pub(crate) use super::source::Claimed;
use super::source::{BoxFuture, Claim, Picked, RouteFn, Scoped, Source, Want};
use super::{reply, Source as Kind, TakeError, Task};
use crate::beneath::Dir;
use crate::config::{is_name, InboxConfig};

/// Where claimed files wait for their run to end.
pub(crate) const CLAIMED: &str = "claimed";
/// Files whose run completed.
pub(crate) const DONE: &str = "done";
/// Files whose run did not complete, or that could not be parsed or routed.
pub(crate) const FAILED: &str = "failed";

/// Parses a task file's text; the error says what is wrong, for `failed/<stem>.error.txt`.
pub(crate) fn parse(stem: &str, text: &str) -> Result<Task, String> {
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
        reply: None,
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

/// Inbox entries that can never be a task, each with why.
type Odd = Vec<(OsString, String)>;

/// What the top level of the inbox holds: the task files waiting, by stem and name, and the
/// `*.md` entries that can never be a task (a symlink, a FIFO, a directory, a name that is
/// not UTF-8), with why. Dotfiles, harness's own `claimed/`, `done/`, `failed/` and names
/// not ending in `.md` (logged) are neither.
fn sort_entries(entries: Vec<(OsString, FileType)>) -> (Vec<(String, String)>, Odd) {
    let mut tasks = Vec::new();
    let mut odd = Vec::new();
    for (name, kind) in entries {
        let bytes = name.as_bytes();
        if bytes.starts_with(b".") {
            continue;
        }
        if kind.is_dir()
            && [CLAIMED, DONE, FAILED]
                .iter()
                .any(|d| bytes == d.as_bytes())
        {
            continue;
        }
        if kind.is_dir() && bytes.ends_with(b".files") {
            // A task's attachments (`<stem>.files/`), read by the run of that task.
            continue;
        }
        if !bytes.ends_with(b".md") {
            // Not meant as a task (`notes.txt`): left where it is, named in every run's log.
            info!("intake: inbox entry {name:?} is not a `*.md` task file; left alone");
            continue;
        }
        let Some(stem) = name.to_str().and_then(|t| t.strip_suffix(".md")) else {
            odd.push((name.clone(), "its name is not UTF-8".to_string()));
            continue;
        };
        let text = format!("{stem}.md");
        if stem.is_empty() {
            continue;
        }
        match crate::bounded::irregular(kind) {
            None => tasks.push((stem.to_string(), text)),
            Some(what) => odd.push((name.clone(), format!("it is {what}, not a regular file"))),
        }
    }
    tasks.sort();
    odd.sort();
    (tasks, odd)
}

/// Opens the inbox directory, the anchor of every file intake touches.
fn open_inbox(dir: &Path) -> Result<Dir> {
    Dir::open(dir).with_context(|| format!("cannot read inbox {}", dir.display()))
}

/// Largest task file read: a prompt is text for a model, and the whole file is sent.
pub(crate) const TASK_MAX: u64 = 1024 * 1024;

/// A task file's text: a regular UTF-8 file of at most [`TASK_MAX`] bytes in `dir`, read
/// without following a symlink and without ever waiting (a FIFO put in its place is
/// refused); the error is for `<stem>.error.txt`.
fn read_task(dir: &Dir, name: &str) -> Result<String, String> {
    dir.read_text(name, TASK_MAX).map_err(|e| {
        e.to_string()
            .replace(&dir.show(name).display().to_string(), "the file")
    })
}

/// A name safe to give an entry moved into `failed/`: bytes outside `A-Z a-z 0-9 . _ -`
/// become `_`. PURE.
fn safe_name(name: &OsStr) -> String {
    let s: String = name
        .as_bytes()
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' => b as char,
            _ => '_',
        })
        .collect();
    s.chars().take(120).collect()
}

/// Moves `from_name` in `from` into `to` as `<name>.md`, or `<name>--<run_id>.md` when that
/// is taken, never replacing a file; returns the name it got.
fn move_into(from: &Dir, from_name: &OsStr, to: &Dir, name: &str, run_id: &str) -> Result<String> {
    for candidate in [format!("{name}.md"), format!("{name}--{run_id}.md")] {
        match from.move_new(from_name, to, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot move {} to {}",
                        from.show(from_name).display(),
                        to.show(&candidate).display()
                    )
                })
            }
        }
    }
    Err(anyhow!(
        "cannot move {} into {}: its names are taken",
        from.show(from_name).display(),
        to.path().display()
    ))
}

/// How old a claim is, from its own record: its file's mtime (set when claimed), or, when
/// that lies in the future (a clock set back, or a planted date), the time its run id
/// starts with (`20261202T135200Z-...`). `None` when neither is in the past: a claim from
/// the future is not one a live worker holds. PURE.
fn claim_age(mtime: Option<SystemTime>, run_id: &str, now: SystemTime) -> Option<Duration> {
    const SKEW: Duration = Duration::from_secs(60);
    if let Some(age) = mtime.and_then(|t| now.duration_since(t).ok()) {
        return Some(age);
    }
    if mtime.is_some_and(|t| t.duration_since(now).is_ok_and(|ahead| ahead <= SKEW)) {
        return Some(Duration::ZERO);
    }
    let started = chrono::NaiveDateTime::parse_from_str(run_id.get(..15)?, "%Y%m%dT%H%M%S").ok()?;
    let started = SystemTime::UNIX_EPOCH
        + Duration::from_secs(u64::try_from(started.and_utc().timestamp()).ok()?);
    now.duration_since(started).ok()
}

/// Puts claims older than `stale` back into the inbox; returns the task ids put back.
pub(crate) fn reclaim_stale(cfg: &InboxConfig, now: SystemTime) -> Vec<String> {
    let stale = Duration::from_secs(cfg.stale_after_mins * 60);
    let Ok(inbox) = Dir::open(&cfg.dir) else {
        return Vec::new();
    };
    let claimed = match inbox.sub(CLAIMED, false) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warn!("intake: inbox claims not read: {e}");
            return Vec::new();
        }
    };
    let Ok(entries) = claimed.entries() else {
        return Vec::new();
    };
    let mut back = Vec::new();
    for (name, kind) in entries {
        let Some(name) = name.to_str().map(str::to_string) else {
            continue;
        };
        let Some((stem, run)) = name.strip_suffix(".md").and_then(|n| n.rsplit_once("--")) else {
            continue;
        };
        if !kind.is_file() {
            continue;
        }
        let mtime = claimed.stat(&name).ok().flatten().map(|st| {
            SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(st.st_mtime).unwrap_or(0))
        });
        let old = claim_age(mtime, run, now).is_none_or(|age| age > stale);
        if !old {
            continue;
        }
        match claimed.move_new(&name, &inbox, format!("{stem}.md")) {
            Ok(()) => {
                info!("intake: inbox claim {name:?} is stale; put {stem:?}.md back into the inbox");
                back.push(stem.to_string());
            }
            // Another worker put it back first, or a new file took its name.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::AlreadyExists) => {}
            Err(e) => warn!("intake: cannot put stale claim {name:?} back: {e}"),
        }
    }
    back
}

/// Claims the task file `name` for `run_id`; `None` when another worker took it first.
fn claim(
    cfg: &InboxConfig,
    inbox: &Dir,
    stem: &str,
    name: &str,
    run_id: &str,
) -> Result<Option<Claimed>> {
    let dir = inbox.sub(CLAIMED, true)?;
    let to = format!("{stem}--{run_id}.md");
    match inbox.rename(name, &dir, &to) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot claim {}", inbox.show(name).display()));
        }
    }
    // The claim's age is its file's mtime: a rename keeps the old one. A FIFO swapped in
    // after the listing fails here (and in `read_task`) instead of blocking.
    if let Err(e) = dir.touch(&to) {
        warn!(
            "intake: cannot stamp the claim {}: {e}",
            dir.show(&to).display()
        );
    }
    Ok(Some(Claimed {
        dir: cfg.dir.clone(),
        stem: stem.to_string(),
        path: dir.show(&to),
    }))
}

/// Moves `from_name` in `from` (a file that cannot run) to `failed/`, with
/// `<name>.error.txt` saying why.
fn reject(
    inbox: &Dir,
    from: &Dir,
    from_name: &OsStr,
    stem: &str,
    run_id: &str,
    why: &str,
) -> Result<()> {
    let failed = inbox.sub(FAILED, true)?;
    // A name that is no task id (`a\nINFO x`) is made safe here, in a name and a log line.
    let safe = safe_name(OsStr::new(stem));
    let moved = move_into(from, from_name, &failed, &safe, run_id)?;
    let name = moved.strip_suffix(".md").unwrap_or(&moved);
    failed.write(
        format!("{name}.error.txt"),
        format!("{why}\n").as_bytes(),
        true,
    )?;
    warn!(
        "intake: inbox task {stem:?}: {why}; moved to {:?}",
        failed.show(&moved)
    );
    Ok(())
}

/// Moves each entry of the inbox that can never be a task to `failed/` with an
/// `.error.txt`, so it is seen once and never again skipped in silence; returns how many.
fn reject_odd(inbox: &Dir, odd: &[(OsString, String)], run_id: &str) -> usize {
    let mut n = 0;
    for (name, why) in odd {
        let stem = safe_name(name);
        let stem = stem.strip_suffix(".md").unwrap_or(&stem).to_string();
        let stem = if stem.is_empty() {
            "entry".to_string()
        } else {
            stem
        };
        let why = format!("{name:?} was skipped: {why}");
        match reject(inbox, inbox, name, &stem, run_id, &why) {
            Ok(()) => n += 1,
            Err(e) => warn!(
                "intake: inbox entry {name:?} skipped: {why}; cannot move it to failed/: {e:#}"
            ),
        }
    }
    n
}

/// Whether a reply to task `base` must wait: the task's own file still waits in the inbox,
/// or a run holds its claim or an earlier reply's (the reply would race that run for the
/// session). It runs after.
fn reply_waits(inbox: &Dir, waiting: &[(String, String)], base: &str) -> bool {
    if waiting.iter().any(|(stem, _)| stem == base) {
        return true;
    }
    let Ok(claimed) = inbox.sub(CLAIMED, false) else {
        return false;
    };
    let replies = format!("{base}{}", reply::SUFFIX);
    claimed.entries().is_ok_and(|entries| {
        entries.iter().any(|(name, _)| {
            name.to_str()
                .is_some_and(|n| reply::is_original(n, base) || reply::is_original(n, &replies))
        })
    })
}

/// The task a reply to `base` answers: the newest copy of its file in `done/` or `failed/`
/// (by mtime: the time its last run claimed it), read and parsed; the error is for
/// `<stem>.error.txt`.
fn original(inbox: &Dir, base: &str) -> Result<Task, String> {
    let mut newest: Option<(i64, &str, String)> = None;
    for sub in [DONE, FAILED] {
        let dir = match inbox.sub(sub, false) {
            Ok(d) => d,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {sub}/: {e}")),
        };
        let entries = dir
            .entries()
            .map_err(|e| format!("cannot read {sub}/: {e}"))?;
        for (name, kind) in entries {
            let Some(name) = name
                .to_str()
                .filter(|n| kind.is_file() && reply::is_original(n, base))
            else {
                continue;
            };
            let mtime = dir.stat(name).ok().flatten().map_or(0, |st| st.st_mtime);
            if newest
                .as_ref()
                .is_none_or(|(t, _, n)| (mtime, name) > (*t, n.as_str()))
            {
                newest = Some((mtime, sub, name.to_string()));
            }
        }
    }
    let Some((_, sub, name)) = newest else {
        return Err(format!(
            "it is a reply to task {base:?}, and neither done/ nor failed/ holds that task's file ({base}.md) to continue; drop the task itself, or name the reply after a task that ran"
        ));
    };
    let dir = inbox
        .sub(sub, false)
        .map_err(|e| format!("cannot read {sub}/: {e}"))?;
    read_task(&dir, &name)
        .and_then(|text| parse(base, &text))
        .map_err(|why| format!("the task it replies to, {sub}/{name}, cannot be read: {why}"))
}

/// A parsed task file made whole: a reply file (`<base>.reply.md`, named `file` in the
/// inbox) becomes the task it answers, continued ([`reply::task`]); any other is itself.
fn complete(inbox: &Dir, stem: &str, file: &str, task: Task) -> Result<Task, String> {
    match reply::base(stem) {
        None => Ok(task),
        Some(base) => Ok(reply::task(&original(inbox, base)?, &task, file)),
    }
}

/// The inbox as a task source.
pub(crate) struct Inbox<'a> {
    /// `[inbox]`.
    pub cfg: &'a InboxConfig,
}

impl Inbox<'_> {
    /// The first waiting task `want` may take, read and routed: claimed (stale claims put
    /// back first), or for a dry run only read; a reply waits until its task has run.
    async fn take_one<R>(
        &self,
        want: &Want<'_>,
        route: RouteFn<'_, R>,
    ) -> Result<Option<Picked<R>>, TakeError> {
        let cfg = self.cfg;
        if want.claim {
            reclaim_stale(cfg, SystemTime::now());
        }
        let inbox = open_inbox(&cfg.dir)?;
        let (waiting, odd) = sort_entries(inbox.entries().map_err(anyhow::Error::from)?);
        info!(
            "intake: inbox {}: {} task file(s) waiting",
            cfg.dir.display(),
            waiting.len()
        );
        set_odd_aside(&inbox, &odd, want);
        for (stem, name) in &waiting {
            if want.task_id.is_some_and(|id| id != stem.as_str()) {
                continue;
            }
            if let Some(base) = reply::base(stem).filter(|b| reply_waits(&inbox, &waiting, b)) {
                info!("intake: inbox reply {name:?} waits until task {base:?} has run");
                continue;
            }
            let picked = if want.claim {
                claim_and_route(cfg, &inbox, stem, name, want.run_id, route)?
            } else {
                read_and_route(&inbox, stem, name, route)?
            };
            if picked.is_some() {
                return Ok(picked);
            }
        }
        Ok(None)
    }
}

/// The inbox entries that can never be a task: moved to `failed/` (and counted) by a run
/// that claims; a dry run, which never moves anything, only warns of them.
fn set_odd_aside(inbox: &Dir, odd: &Odd, want: &Want<'_>) {
    if odd.is_empty() {
        return;
    }
    if want.claim {
        let moved = reject_odd(inbox, odd, want.run_id);
        SKIPPED.fetch_add(moved as u64, Ordering::Relaxed);
    } else {
        for (name, why) in odd {
            warn!("intake: inbox entry {name:?} is not a task: {why}");
        }
    }
}

/// A dry run's pick: the task file `name` read and routed, never moved; `None` when it
/// cannot be read.
fn read_and_route<R>(
    inbox: &Dir,
    stem: &str,
    name: &str,
    route: RouteFn<'_, R>,
) -> Result<Option<Picked<R>>, TakeError> {
    let Ok(task) = read_task(inbox, name)
        .and_then(|t| parse(stem, &t))
        .and_then(|t| complete(inbox, stem, name, t))
    else {
        return Ok(None);
    };
    let route = route(&task).map_err(TakeError::Routing)?;
    Ok(Some(Picked {
        task,
        route,
        claim: None,
        issue: None,
    }))
}

/// Claims the task file `name` for `run_id`, then reads and routes it; `None` when another
/// worker claimed it first or it cannot be read (it moves to `failed/`). A task that cannot
/// be routed moves to `failed/` too, and the routing error ends the intake.
fn claim_and_route<R>(
    cfg: &InboxConfig,
    inbox: &Dir,
    stem: &str,
    name: &str,
    run_id: &str,
    route: RouteFn<'_, R>,
) -> Result<Option<Picked<R>>, TakeError> {
    let Some(claimed) = claim(cfg, inbox, stem, name, run_id)? else {
        info!("intake: inbox task {stem:?} was claimed by another worker first");
        return Ok(None);
    };
    let dir = inbox.sub(CLAIMED, false).map_err(anyhow::Error::from)?;
    let file = claimed.file_name();
    let parsed = read_task(&dir, &file)
        .and_then(|t| parse(stem, &t))
        .and_then(|t| complete(inbox, stem, name, t));
    let task = match parsed {
        Ok(task) => task,
        Err(why) => {
            reject(inbox, &dir, OsStr::new(&file), stem, run_id, &why)?;
            return Ok(None);
        }
    };
    let route = match route(&task) {
        Ok(r) => r,
        Err(e) => {
            let why = format!("{e:#}");
            reject(inbox, &dir, OsStr::new(&file), stem, run_id, &why)?;
            return Err(TakeError::Routing(e));
        }
    };
    info!("intake: claimed inbox task {stem:?} (run {run_id})");
    Ok(Some(Picked {
        task,
        route,
        claim: Some(Claim::Inbox(claimed)),
        issue: None,
    }))
}

/// Entries this process moved to `failed/` because they could never be a task (for the
/// metrics' `harness_inbox_skipped_total`).
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// How many inbox entries this process moved aside as never a task.
pub(crate) fn skipped() -> u64 {
    SKIPPED.load(Ordering::Relaxed)
}

impl<R> Source<R> for Inbox<'_> {
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
            let inbox = open_inbox(&self.cfg.dir)?;
            let (waiting, odd) = sort_entries(inbox.entries()?);
            for (name, why) in &odd {
                warn!("scope: inbox entry {name:?} is not a task ({why}); the next run moves it to failed/");
            }
            for (stem, name) in waiting {
                let parsed = read_task(&inbox, &name)
                    .and_then(|t| parse(&stem, &t))
                    .and_then(|t| complete(&inbox, &stem, &name, t));
                match parsed {
                    Ok(task) => {
                        let route = route(&task).map_err(|e| format!("{e:#}"));
                        out.push(Scoped { task, route });
                    }
                    Err(why) => warn!("scope: inbox task {stem:?} cannot be parsed: {why}"),
                }
            }
            Ok(out)
        })
    }
}

impl Claimed {
    /// The claimed file's name in `claimed/`.
    fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// After the run: the claimed file moves to `done/` (a completed turn) or `failed/`, with
/// the REPORT beside it as `<name>.REPORT.md`. Returns the file's new path. Every step is
/// beneath the inbox's descriptor: a `done/` a command replaced with a symlink is refused.
pub(crate) fn settle(
    claimed: &Claimed,
    completed: bool,
    report: &str,
    run_id: &str,
) -> Result<PathBuf> {
    let inbox = open_inbox(&claimed.dir)?;
    let from = inbox.sub(CLAIMED, false)?;
    let dir = inbox.sub(if completed { DONE } else { FAILED }, true)?;
    let file = claimed.file_name();
    let moved = move_into(&from, OsStr::new(&file), &dir, &claimed.stem, run_id)?;
    let name = moved.strip_suffix(".md").unwrap_or(&moved);
    dir.write(format!("{name}.REPORT.md"), report.as_bytes(), true)
        .with_context(|| format!("cannot write {name}.REPORT.md in {}", dir.path().display()))?;
    Ok(dir.show(&moved))
}

/// Moves a claimed file that must not run again to `failed/` with `<name>.error.txt`.
pub(crate) fn set_aside(claimed: &Claimed, run_id: &str, why: &str) -> Result<()> {
    let inbox = open_inbox(&claimed.dir)?;
    let from = inbox.sub(CLAIMED, false)?;
    let file = claimed.file_name();
    reject(&inbox, &from, OsStr::new(&file), &claimed.stem, run_id, why)
}

/// Gives a claim up (a failure before the turn): the file goes back into the inbox.
pub(crate) fn release(claimed: &Claimed) -> Result<()> {
    let back = format!("{}.md", claimed.stem);
    let put_back = || -> std::io::Result<()> {
        let inbox = Dir::open(&claimed.dir)?;
        let from = inbox.sub(CLAIMED, false)?;
        from.move_new(claimed.file_name(), &inbox, &back)
    };
    put_back().with_context(|| {
        format!(
            "cannot put {} back as {}",
            claimed.path.display(),
            claimed.dir.join(&back).display()
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
            reply: None,
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
    fn entries_that_can_never_be_a_task_are_named_with_why() {
        use std::os::unix::ffi::OsStringExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("b.md"), "x").unwrap();
        std::fs::write(p.join("a.md"), "x").unwrap();
        std::fs::write(p.join("notes.txt"), "x").unwrap();
        std::fs::write(p.join(".hidden.md"), "x").unwrap();
        std::fs::create_dir(p.join("dir.md")).unwrap();
        std::fs::create_dir(p.join(DONE)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", p.join("link.md")).unwrap();
        std::fs::write(p.join(OsString::from_vec(b"bad\xff.md".to_vec())), "x").unwrap();
        let dir = Dir::open(p).unwrap();
        let (tasks, odd) = sort_entries(dir.entries().unwrap());
        assert_eq!(
            tasks,
            [
                ("a".to_string(), "a.md".to_string()),
                ("b".into(), "b.md".into())
            ]
        );
        let odd: Vec<(String, String)> = odd
            .into_iter()
            .map(|(n, w)| (n.to_string_lossy().into_owned(), w))
            .collect();
        assert_eq!(
            odd,
            [
                (
                    "bad\u{fffd}.md".to_string(),
                    "its name is not UTF-8".to_string()
                ),
                (
                    "dir.md".into(),
                    "it is a directory, not a regular file".into()
                ),
                (
                    "link.md".into(),
                    "it is a symbolic link, not a regular file".into()
                ),
            ]
        );
        assert_eq!(safe_name(OsStr::from_bytes(b"bad\xff\nx.md")), "bad__x.md");
    }

    #[test]
    fn a_claim_s_age_comes_from_its_own_record_when_its_date_lies_in_the_future() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let hour = Duration::from_secs(3600);
        let run = "20270115T080000Z-1-00000000"; // 1_800_000_000 is 2027-01-15T08:00:00Z
        assert_eq!(claim_age(Some(now - hour), run, now), Some(hour));
        assert_eq!(
            claim_age(Some(now + Duration::from_secs(5)), run, now),
            Some(Duration::ZERO)
        );
        // Dated a year ahead: the run id says when the claim was taken.
        let year = Duration::from_secs(365 * 24 * 3600);
        assert_eq!(
            claim_age(Some(now + year), "20270115T070000Z-1-0", now),
            Some(hour)
        );
        // Both in the future, or no record: no live worker holds it.
        assert_eq!(
            claim_age(Some(now + year), "20300101T000000Z-1-0", now),
            None
        );
        assert_eq!(claim_age(Some(now + year), "forged", now), None);
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
