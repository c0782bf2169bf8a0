//! Leaf (bounded inputs): [`read_text`] reads a regular file of at most N bytes (filesystem
//! adapter), so no input file can hang a run (a FIFO, a terminal) or fill its memory
//! (`/dev/zero`, a huge file); [`clip`] is PURE and cuts a text to N bytes, keeping its head
//! and tail. Imports nothing from the crate.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Largest config file harness reads.
pub(crate) const CONFIG_MAX: u64 = 1024 * 1024;
/// Largest `file:` key file harness reads (a key is a line; this leaves room for comments).
pub(crate) const KEY_FILE_MAX: u64 = 64 * 1024;
/// Largest cassette harness replays.
pub(crate) const CASSETTE_MAX: u64 = 64 * 1024 * 1024;
/// Largest REPORT `harness writeback` reads.
pub(crate) const REPORT_MAX: u64 = 16 * 1024 * 1024;

/// The text of the regular file at `path` (symlinks followed), refused at once, unread, when
/// it is a directory, a FIFO, a device or a socket, or longer than `limit` bytes. The error
/// says which; callers add what the file is for.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    refuse_unless_regular(path, &meta, limit)?;
    // O_NONBLOCK: if the path became a FIFO since the check, opening it does not wait for a
    // writer; the type is checked again on the open file, which is what is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .with_context(|| format!("{}", path.display()))?;
    read_open_text(file, path, limit)
}

/// The text of a file already open (a directory descriptor's entry, opened without following
/// a symlink), refused like [`read_text`] refuses; `path` only names it in messages.
pub(crate) fn read_open_text(file: std::fs::File, path: &Path, limit: u64) -> Result<String> {
    let meta = file
        .metadata()
        .with_context(|| format!("{}", path.display()))?;
    refuse_unless_regular(path, &meta, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!("{} is larger than {}", path.display(), size(limit));
    }
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))
}

/// What a file that is not a regular one is, in words (`a FIFO`, `a device`, ...); `None`
/// for a regular file. Symlinks are what the caller's metadata made of them.
pub(crate) fn irregular(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

fn refuse_unless_regular(path: &Path, meta: &std::fs::Metadata, limit: u64) -> Result<()> {
    let what = if let Some(what) = irregular(meta.file_type()) {
        what
    } else if meta.len() > limit {
        bail!(
            "{} is {} bytes, larger than {}",
            path.display(),
            meta.len(),
            size(limit)
        );
    } else {
        return Ok(());
    };
    bail!("{} is {what}, not a regular file", path.display())
}

/// `1 MiB`, `64 KiB`, or bytes.
pub(crate) fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// `text` as one line of at most `max` characters: control characters (line breaks, escape
/// sequences) and Unicode's own line and paragraph separators (U+2028, U+2029: not control
/// characters, but a model or a viewer may break a line there) become blanks, the ends are
/// trimmed, and a longer line is cut with `…`. For
/// text a peer or a file supplies that narration, the PLAN and the REPORT show on one line
/// (a task's subject): a Redmine reply may hold megabytes of it.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(
            |c| match c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                true => ' ',
                false => c,
            },
        )
        .collect();
    let line = line.trim();
    match line.char_indices().nth(max.saturating_sub(1)) {
        Some((cut, _)) if line.chars().count() > max => format!("{}…", &line[..cut]),
        _ => line.to_string(),
    }
}

/// `text` when it is at most `max` bytes; else its head and tail (cut on character
/// boundaries) around a note of how many bytes were left out.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let half = max / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}[... {} bytes cut ...]{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_is_one_bounded_line() {
        assert_eq!(
            one_line("  Fix\nthe \u{1b}[2Jlogin\t ", 100),
            "Fix the  [2Jlogin"
        );
        assert_eq!(
            one_line("a.log\u{2028}- b.log\u{2029}c\u{85}d", 100),
            "a.log - b.log c d"
        );
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
        assert_eq!(one_line("ééééé", 3), "éé…");
        assert_eq!(one_line(&"S".repeat(3_000_000), 255).chars().count(), 255);
    }

    #[test]
    fn reads_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        std::fs::write(&p, "hello").unwrap();
        assert_eq!(read_text(&p, 5).unwrap(), "hello");
        let err = read_text(&p, 4).unwrap_err().to_string();
        assert!(err.contains("5 bytes, larger than 4 bytes"), "{err}");
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_text(&fifo, 10).unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
        let err = read_text(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a device"), "{err}");
        let err = read_text(dir.path(), 10).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
    }

    #[test]
    fn a_file_that_says_it_is_empty_is_still_bounded() {
        // procfs files report size 0 and then yield more.
        let err = read_text(Path::new("/proc/self/maps"), 8)
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than 8 bytes"), "{err}");
    }

    #[test]
    fn clip_keeps_head_and_tail_on_char_boundaries() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcdefgh", 4), "ab[... 4 bytes cut ...]gh");
        let s = "é".repeat(10);
        let c = clip(&s, 5);
        assert!(c.starts_with("é[..."), "{c}");
        assert!(c.ends_with("]é"), "{c}");
        assert_eq!(size(1024 * 1024), "1 MiB");
        assert_eq!(size(64 * 1024), "64 KiB");
    }
}
