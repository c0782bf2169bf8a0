//! Intake stage, adapter (Redmine HTTP, the inbox's filesystem, the work root's): a task's
//! attachments fetched within the `[intake]` bounds and placed read-only under the work
//! root's attachments directory (text masked by the run's [`Redactor`], images as they are),
//! the images a vision tier is sent turned into content parts. Redmine bytes come only from
//! the tracker's own download path (through [`crate::redmine::attachments::download_into`],
//! which bounds them too); an inbox task's files are the regular files of the directory
//! `<stem>.files/` beside its task file, opened without following symlinks.

use std::io::Read;
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
    /// An inbox task: the directory `files` (`<stem>.files`) beside its task file in the
    /// inbox `inbox` (absent: none), reached from the inbox without following a symlink.
    Inbox {
        /// The inbox directory.
        inbox: PathBuf,
        /// The files directory's name in it.
        files: String,
    },
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
    match owned(work_root, &cfg.dir) {
        Ok(Some((parent, name, true))) => empty(&parent, &name)?,
        Ok(Some((parent, name, false))) if !offered.is_empty() => anyhow::bail!(
            "[intake].attachments_dir: {} exists and was not made by harness; name another directory",
            parent.show(name).display()
        ),
        Err(e) if !offered.is_empty() => {
            return Err(e).context("[intake].attachments_dir: harness never places files there")
        }
        Ok(_) | Err(_) => {}
    }
    if offered.is_empty() {
        return Ok(Attached::default());
    }
    let on_tracker = |at: &str| match &origin {
        Origin::Redmine { client, .. } => same_origin(at, client.base()),
        Origin::Inbox { .. } => true,
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
            Ok(()) => fetch(&origin, i, &o.name, cap).await,
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
    dir.set_mode(0o555)
        .with_context(|| format!("attachments: cannot set the mode of {}", cfg.dir))?;
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
            if let Some(why) = super::secret_in_image(bytes, redactor) {
                return Err(format!("not placed: {why}"));
            }
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
        Origin::Inbox { inbox, files } => inbox_offered(inbox, files),
    }
}

/// Whether `name` is a file harness attached to an issue itself: a REPORT or a session of
/// this vertical (`report::file_name`, `session::store`).
fn harness_own(vertical: &str, name: &str) -> bool {
    (name.starts_with(&format!("REPORT-{vertical}-")) && name.ends_with(".md"))
        || (name.starts_with(&format!("session-{vertical}-")) && name.ends_with(".jsonl.gz"))
}

/// An inbox task's files directory `files`, reached from the inbox `inbox` without following
/// a symlink (a symlinked `<stem>.files` would lead intake out of the inbox).
fn files_dir(inbox: &Path, files: &str) -> std::io::Result<Dir> {
    Dir::open(inbox)?.sub(files, false)
}

/// The entries of an inbox task's files directory, sorted by name (absent: none); an entry
/// that is not a regular file is offered with size 0 and refused when fetched.
fn inbox_offered(inbox: &Path, files: &str) -> Result<Vec<Offered>> {
    let d = match files_dir(inbox, files) {
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

/// The bytes of offered attachment `i`, named `name` (at most `limit.0` of them, `limit.1`
/// the bound's name), or why they cannot be had.
async fn fetch(
    origin: &Origin<'_>,
    i: usize,
    name: &str,
    limit: (u64, &str),
) -> Result<Vec<u8>, String> {
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
        Origin::Inbox { inbox, files } => {
            // By the name it was offered under, never by its place in a fresh listing: a
            // file added meanwhile must not put one file's bytes under another's name.
            let d = files_dir(inbox, files).map_err(|e| format!("refused: {e}"))?;
            read_regular(&d, name, limit)
        }
    }
}

/// A regular file of `dir`, opened without following a symlink, at most `max` bytes.
fn read_regular(d: &Dir, name: &str, (max, limit): (u64, &str)) -> Result<Vec<u8>, String> {
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

/// The attachments directory `rel` of the work root, if anything is there: the directory
/// that holds it (reached beneath the work root without following a symlink), its name in
/// it, and whether it is harness's (a directory holding the marker as a regular file). An
/// error when the way there goes through a symlink.
fn owned(work_root: &Path, rel: &str) -> std::io::Result<Option<(Dir, String, bool)>> {
    let (parents, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let parent = match Dir::open_beneath(work_root, Path::new(parents)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other?,
    };
    let Some(st) = parent.stat(name)? else {
        return Ok(None);
    };
    let regular = |st: libc::stat| st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let mine = st.st_mode & libc::S_IFMT == libc::S_IFDIR
        && parent.sub(name, false)?.stat(MARKER)?.is_some_and(regular);
    Ok(Some((parent, name.to_string(), mine)))
}

/// Removes the attachments directory `name` of `parent`, which harness made.
fn empty(parent: &Dir, name: &str) -> Result<()> {
    let shown = parent.show(name);
    parent
        .sub(name, false)
        .and_then(|d| d.set_mode(0o755))
        .and_then(|()| parent.remove_tree(name))
        .with_context(|| format!("attachments: cannot remove {}", shown.display()))
}

/// After the turn: the attachments directory removed, so it is never committed nor left
/// in the work root; a failure is only logged, a directory harness did not make (or one
/// reached through a symlink) left alone.
pub(crate) fn remove(work_root: &Path, rel: &str) {
    match owned(work_root, rel) {
        Ok(Some((parent, name, true))) => {
            if let Err(e) = empty(&parent, &name) {
                warn!("{e:#}");
                return;
            }
        }
        Ok(_) => return,
        Err(e) => {
            warn!("attachments: {e}; left alone");
            return;
        }
    }
    // `.harness/` too, when nothing else is in it.
    let path = work_root.join(rel);
    for dir in path.ancestors().skip(1) {
        if dir == work_root || std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{harness_own, remove, same_origin, MARKER};

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

    #[test]
    fn a_directory_reached_through_a_symlink_is_never_removed() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        // An earlier run's directory, it seems, but where `.harness` (planted during the
        // turn) only links to.
        let theirs = elsewhere.path().join("attachments");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join(MARKER), "").unwrap();
        std::fs::write(theirs.join("keep.txt"), "kept").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join(".harness")).unwrap();
        remove(root.path(), ".harness/attachments");
        assert_eq!(
            std::fs::read_to_string(theirs.join("keep.txt")).unwrap(),
            "kept"
        );
        // A marker that is only a symlink does not make a directory harness's either.
        let mine = root.path().join("placed");
        std::fs::create_dir(&mine).unwrap();
        std::os::unix::fs::symlink(theirs.join("keep.txt"), mine.join(MARKER)).unwrap();
        remove(root.path(), "placed");
        assert!(mine.join(MARKER).exists());
        // Harness's own is removed.
        std::fs::remove_file(mine.join(MARKER)).unwrap();
        std::fs::write(mine.join(MARKER), "").unwrap();
        remove(root.path(), "placed");
        assert!(!mine.exists());
    }
}
