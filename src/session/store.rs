//! Session stage, storage adapters: the local file under `report_dir` (atomic writes) and
//! the Redmine attachment on the issue (downloaded through [`crate::redmine::attachments`];
//! the upload rides on the REPORT note's update, in `writeback`). Names are PURE.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::redmine::attachments;
use crate::redmine::client::RedmineClient;
use crate::redmine::issue::{Attachment, Issue};

/// A task id or vertical made safe for a file name.
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `report_dir/sessions/<vertical>/<source>/<task_id>.jsonl.gz`.
pub(crate) fn local_path(
    report_dir: &Path,
    vertical: &str,
    source: &str,
    task_id: &str,
) -> PathBuf {
    report_dir
        .join("sessions")
        .join(safe(vertical))
        .join(safe(source))
        .join(format!("{}.jsonl.gz", safe(task_id)))
}

/// The local session file, open for reading; `None` when there is none. Only a regular file:
/// a FIFO or a device put there is refused at once, never waited on (O_NONBLOCK at open,
/// then checked).
pub(crate) fn open_local(path: &Path) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file", path.display());
    }
    Ok(Some(file))
}

/// The local session file's bytes; `None` when there is none.
pub(crate) fn read_local(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes the local session file atomically, creating its directories.
pub(crate) fn write_local(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    crate::atomic::write(path, bytes)
}

/// The attachment name of the session a run leaves on its issue.
pub(crate) fn attachment_name(vertical: &str, task_id: &str, run_id: &str) -> String {
    format!(
        "{}{}.jsonl.gz",
        attachment_prefix(vertical, task_id),
        safe(run_id)
    )
}

fn attachment_prefix(vertical: &str, task_id: &str) -> String {
    format!("session-{}-{}-", safe(vertical), safe(task_id))
}

/// The newest session attachment of this vertical on the issue (highest id).
pub(crate) fn latest_attachment<'a>(issue: &'a Issue, vertical: &str) -> Option<&'a Attachment> {
    let prefix = attachment_prefix(vertical, &issue.id.to_string());
    issue
        .attachments
        .iter()
        .filter(|a| a.filename.starts_with(&prefix) && a.filename.ends_with(".jsonl.gz"))
        .max_by_key(|a| a.id)
}

/// Streams a session attachment (at most `max_bytes`) into `sink`, piece by piece.
pub(crate) async fn download_into(
    client: &RedmineClient,
    attachment: &Attachment,
    max_bytes: u64,
    sink: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
) -> Result<()> {
    attachments::download_into(
        client,
        attachment.id,
        &attachment.filename,
        (max_bytes, "[session].max_attachment_bytes"),
        sink,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_are_safe_and_the_newest_attachment_wins() {
        assert_eq!(
            local_path(Path::new("r"), "v", "redmine", "a/b"),
            PathBuf::from("r/sessions/v/redmine/a_b.jsonl.gz")
        );
        assert_eq!(
            attachment_name("v", "4", "20261201T1-1-ab"),
            "session-v-4-20261201T1-1-ab.jsonl.gz"
        );
        let mut issue = crate::redmine::issue::fixtures::issue();
        let att = |id: u64, name: &str| Attachment {
            id,
            filename: name.into(),
            filesize: 1,
            content_url: String::new(),
            content_type: None,
        };
        issue.attachments = vec![
            att(3, "session-v-4-r2.jsonl.gz"),
            att(9, "REPORT-v-4.md"),
            att(5, "session-v-4-r3.jsonl.gz"),
            att(7, "session-other-4-r9.jsonl.gz"),
        ];
        assert_eq!(latest_attachment(&issue, "v").map(|a| a.id), Some(5));
        assert_eq!(latest_attachment(&issue, "w").map(|a| a.id), None);
    }

    #[test]
    fn a_fifo_or_a_directory_in_place_of_the_session_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("s.jsonl.gz");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = open_local(&fifo).unwrap_err().to_string();
        assert!(err.contains("is not a regular file"), "{err}");
        let err = open_local(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is not a regular file"), "{err}");
        assert!(open_local(&dir.path().join("none")).unwrap().is_none());
    }
}
