//! Intake stage, adapter (Redmine HTTP, the inbox's filesystem, the work root's): a task's
//! attachments fetched within the `[intake]` bounds and placed read-only under the work
//! root's attachments directory (text masked by the run's [`Redactor`], images as they are),
//! the images a vision tier is sent turned into content parts. Redmine bytes come only from
//! the tracker's own download path (through [`crate::redmine::attachments::download_into`],
//! which bounds them too); an inbox task's files are the regular files of the directory
//! `<stem>.files/` beside its task file, opened without following symlinks.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracing::{info, warn};

use super::{admit, image_part, kind, safe_names, Attached, Fate, Kind, Listed, Offered};
use crate::beneath::Dir;
use crate::config::AttachmentsConfig;
use crate::llm::wire::Part;
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::Issue;
use crate::secrets::Redactor;

/// The file whose presence says the attachments directory is harness's to empty.
const MARKER: &str = ".placed-by-harness";

/// Where a task's attachments come from.
pub(crate) enum Origin<'a> {
    /// A Redmine issue (read with `include=attachments`); the files harness attached itself
    /// (REPORTs, sessions of this `vertical`) are not the task's.
    Redmine {
        /// The tracker.
        client: &'a RedmineClient,
        /// The issue as intake read it.
        issue: &'a Issue,
        /// `vertical`: names harness's own uploads.
        vertical: &'a str,
    },
    /// An inbox task: the directory `<stem>.files/` beside its task file (absent: none).
    Inbox(PathBuf),
}

/// Fetches, checks and places the attachments of `origin` under `work_root`/`cfg.dir`.
/// `vision` is `Ok` when the tier sees images, else why it does not. A single attachment
/// that cannot be fetched is listed as refused; only a work root where nothing can be
/// placed is an error.
pub(crate) async fn gather(
    origin: Origin<'_>,
    cfg: &AttachmentsConfig,
    work_root: &Path,
    redactor: &Redactor,
    vision: Result<(), String>,
) -> Result<Attached> {
    let offered = offered(&origin)?;
    // An earlier run's (killed before it removed them) go; the operator's own never do.
    let path = work_root.join(&cfg.dir);
    match owned(&path) {
        Some(true) => empty(&path)?,
        Some(false) if !offered.is_empty() => anyhow::bail!(
            "[intake].attachments_dir: {} exists and was not made by harness; name another directory",
            path.display()
        ),
        Some(false) | None => {}
    }
    if offered.is_empty() {
        return Ok(Attached::default());
    }
    let on_tracker = |at: &str| match &origin {
        Origin::Redmine { client, .. } => same_origin(at, client.base()),
        Origin::Inbox(_) => true,
    };
    let verdicts = admit(&offered, cfg, &on_tracker);
    let names: Vec<&str> = offered.iter().map(|o| o.name.as_str()).collect();
    let names = safe_names(&names);
    let dir = open_place(work_root, &cfg.dir)?;
    let mut out = Attached::default();
    // Bytes fetched so far: a source that declared too small a size cannot pass the total.
    let mut used: u64 = 0;
    for (i, (o, verdict)) in offered.iter().zip(verdicts).enumerate() {
        let mut listed = Listed {
            // A name is the uploader's text: a key in it is masked like any other.
            name: redactor.redact(&o.name),
            content_type: o.content_type.clone().unwrap_or_default(),
            size: o.size,
            fate: Fate::Refused(String::new()),
        };
        let left = cfg.max_total_bytes.saturating_sub(used);
        let cap = match left < cfg.max_bytes {
            true => (left, "what is left of [intake].max_attachments_total_bytes"),
            false => (cfg.max_bytes, "[intake].max_attachment_bytes"),
        };
        let fetched = match verdict {
            Ok(()) => fetch(&origin, i, cap).await,
            Err(why) => Err(why),
        };
        listed.fate = match fetched {
            Ok(bytes) => {
                used += bytes.len() as u64;
                listed.size = bytes.len() as u64;
                if listed.content_type.is_empty() {
                    listed.content_type = super::type_of(&bytes).to_string();
                }
                let rel = format!("{}/{}", cfg.dir, names[i]);
                match place(&dir, &names[i], &bytes, redactor, &vision, &mut out.images) {
                    Ok(Placed::Text) => Fate::Text(rel),
                    Ok(Placed::Image(shown)) => Fate::Image(rel, shown),
                    Err(why) => Fate::Refused(why),
                }
            }
            Err(why) => Fate::Refused(why),
        };
        if listed.content_type.is_empty() {
            listed.content_type = "unknown type".to_string();
        }
        out.listed.push(listed);
    }
    // Read-only for every tool: the directory too (the sandbox mounts it read-only).
    set_mode(&path, 0o555)?;
    info!(
        "attachments: {}",
        redactor.redact(&out.listing()).replace('\n', "; ")
    );
    Ok(out)
}

/// How one fetched attachment was placed.
enum Placed {
    /// As masked text.
    Text,
    /// As an image; `Ok` when it goes to the model.
    Image(Result<(), String>),
}

/// Places one fetched attachment as `name` in `dir`: text masked, an image as it is (its
/// part pushed to `images` when the tier sees images), anything else refused.
fn place(
    dir: &Dir,
    name: &str,
    bytes: &[u8],
    redactor: &Redactor,
    vision: &Result<(), String>,
    images: &mut Vec<Part>,
) -> Result<Placed, String> {
    let write = |data: &[u8]| {
        dir.write_mode(name, data, false, 0o444)
            .map_err(|e| format!("not placed: {e}"))
    };
    match kind(bytes) {
        Kind::Text => {
            let masked = redactor.redact(&String::from_utf8_lossy(bytes));
            write(masked.as_bytes())?;
            Ok(Placed::Text)
        }
        Kind::Image(image) => {
            write(bytes)?;
            if vision.is_ok() {
                images.push(image_part(image, bytes));
            }
            Ok(Placed::Image(vision.clone()))
        }
        Kind::Binary => Err(
            "not placed: a binary file, neither text nor an image (png, jpeg, gif, webp)"
                .to_string(),
        ),
    }
}

/// The attachments `origin` offers, in its order.
fn offered(origin: &Origin<'_>) -> Result<Vec<Offered>> {
    match origin {
        Origin::Redmine {
            issue, vertical, ..
        } => Ok(issue
            .attachments
            .iter()
            .filter(|a| !harness_own(vertical, &a.filename))
            .map(|a| Offered {
                name: a.filename.clone(),
                content_type: a.content_type.clone().filter(|t| !t.is_empty()),
                size: a.filesize,
                at: Some(a.content_url.clone()).filter(|u| !u.is_empty()),
            })
            .collect()),
        Origin::Inbox(dir) => inbox_offered(dir),
    }
}

/// Whether `name` is a file harness attached to an issue itself: a REPORT or a session of
/// this vertical (`report::file_name`, `session::store`).
fn harness_own(vertical: &str, name: &str) -> bool {
    (name.starts_with(&format!("REPORT-{vertical}-")) && name.ends_with(".md"))
        || (name.starts_with(&format!("session-{vertical}-")) && name.ends_with(".jsonl.gz"))
}

/// The entries of an inbox task's files directory, sorted by name (absent: none); an entry
/// that is not a regular file is offered with size 0 and refused when fetched.
fn inbox_offered(dir: &Path) -> Result<Vec<Offered>> {
    let d = match Dir::open(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).context("inbox attachments"),
    };
    let mut entries = d.entries().context("inbox attachments")?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries
        .into_iter()
        .map(|(name, _)| {
            let size = d
                .stat(&name)
                .ok()
                .flatten()
                .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
                .map_or(0, |st| st.st_size.max(0) as u64);
            Offered {
                name: name.to_string_lossy().into_owned(),
                content_type: None,
                size,
                at: None,
            }
        })
        .collect())
}

/// The bytes of offered attachment `i` (at most `limit.0` of them, `limit.1` the bound's
/// name), or why they cannot be had.
async fn fetch(origin: &Origin<'_>, i: usize, limit: (u64, &str)) -> Result<Vec<u8>, String> {
    match origin {
        Origin::Redmine {
            client,
            issue,
            vertical,
        } => {
            let Some(a) = issue
                .attachments
                .iter()
                .filter(|a| !harness_own(vertical, &a.filename))
                .nth(i)
            else {
                return Err("refused: no longer on the issue".to_string());
            };
            let mut bytes = Vec::new();
            let mut sink = |chunk: &[u8]| {
                bytes.extend_from_slice(chunk);
                Ok(())
            };
            crate::redmine::attachments::download_into(client, a.id, &a.filename, limit, &mut sink)
                .await
                .map_err(|e| format!("refused: the download failed ({e:#})"))?;
            Ok(bytes)
        }
        Origin::Inbox(dir) => {
            let entries = inbox_offered(dir).map_err(|e| format!("refused: {e:#}"))?;
            let name = entries.get(i).map(|o| o.name.clone()).unwrap_or_default();
            read_regular(dir, &name, limit)
        }
    }
}

/// A regular file of `dir`, opened without following a symlink, at most `max` bytes.
fn read_regular(dir: &Path, name: &str, (max, limit): (u64, &str)) -> Result<Vec<u8>, String> {
    let d = Dir::open(dir).map_err(|e| format!("refused: {e}"))?;
    let regular = d
        .stat(name)
        .ok()
        .flatten()
        .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
    if !regular {
        return Err("refused: not a regular file".to_string());
    }
    let file = d.open_file(name).map_err(|e| format!("refused: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("refused: cannot be read ({e})"))?;
    if bytes.len() as u64 > max {
        return Err(format!("refused: larger than {limit} ({max} bytes)"));
    }
    Ok(bytes)
}

/// Whether `url` has the scheme, host and port of `base`.
fn same_origin(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(u), Ok(b)) => u.origin() == b.origin(),
        _ => false,
    }
}

/// Creates the attachments directory beneath the work root (and the marker that makes it
/// harness's), opened beneath it.
fn open_place(work_root: &Path, rel: &str) -> Result<Dir> {
    let mut dir = Dir::open(work_root).context("attachments: the work root")?;
    for part in rel.split('/') {
        dir = dir
            .sub(part, true)
            .with_context(|| format!("attachments: cannot create {rel} in the work root"))?;
    }
    dir.write_mode(MARKER, b"", false, 0o444)
        .with_context(|| format!("attachments: cannot write in {rel}"))?;
    Ok(dir)
}

/// Whether the attachments directory at `path` is harness's (a directory holding the
/// marker); `None` when there is nothing there.
fn owned(path: &Path) -> Option<bool> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(meta.is_dir() && path.join(MARKER).is_file())
}

/// Removes an attachments directory harness made.
fn empty(path: &Path) -> Result<()> {
    set_mode(path, 0o755)?;
    std::fs::remove_dir_all(path)
        .with_context(|| format!("attachments: cannot remove {}", path.display()))
}

/// After the turn: the attachments directory removed, so it is never committed nor left
/// in the work root; a failure is only logged, a directory harness did not make left alone.
pub(crate) fn remove(work_root: &Path, rel: &str) {
    let path = work_root.join(rel);
    if owned(&path) == Some(true) {
        if let Err(e) = empty(&path) {
            warn!("{e:#}");
            return;
        }
        // `.harness/` too, when nothing else is in it.
        for dir in path.ancestors().skip(1) {
            if dir == work_root || std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("attachments: cannot set the mode of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{harness_own, same_origin};

    #[test]
    fn only_the_tracker_s_own_origin_is_the_tracker() {
        let base = "http://127.0.0.1:3000";
        assert!(same_origin(
            "http://127.0.0.1:3000/attachments/download/1/a.png",
            base
        ));
        assert!(!same_origin(
            "http://127.0.0.1:3001/attachments/download/1/a.png",
            base
        ));
        assert!(!same_origin("https://127.0.0.1:3000/a", base));
        assert!(!same_origin("http://example.com/a", base));
        assert!(!same_origin("not a url", base));
    }

    #[test]
    fn harness_s_own_uploads_are_not_the_task_s() {
        assert!(harness_own("v", "REPORT-v-4-20260101T000000Z.md"));
        assert!(harness_own("v", "session-v-4-r1.jsonl.gz"));
        assert!(!harness_own("v", "REPORT-other-4.md"));
        assert!(!harness_own("v", "screenshot.png"));
    }
}
