//! Leaf adapter (filesystem): atomic, durable file writes. A reader sees the old file or the
//! new one, whole, never a torn one: the bytes go to a temp file in the same directory, are
//! fsynced, renamed over the target, and the directory is fsynced. Used by the REPORT writer,
//! the session store, the metrics file and the cassette recorder. The directory is opened
//! once and every step happens beneath its descriptor (`beneath::Dir`: the temp created
//! `O_EXCL | O_NOFOLLOW`, `renameat` within the same descriptor), so a directory swapped
//! for a symlink after it was opened is never written through. Only a regular file (or a
//! symlink, or nothing) is ever replaced: a device, FIFO, socket or directory at the target
//! is refused, so `--record /dev/full` run as root cannot swap a device node for a file.
//! Imports only the leaves `bounded` and `beneath`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::beneath::Dir;

/// Prefix of the temp files this module creates; a crashed run leaves at most these.
pub(crate) const TEMP_PREFIX: &str = crate::beneath::TEMP_PREFIX;

/// Removes temp files that a crashed run left in `dir` more than ten minutes ago.
pub(crate) fn remove_stale_temps(dir: &Path) {
    if let Ok(d) = Dir::open(dir) {
        d.remove_stale_temps();
    }
}

/// Writes `bytes` to `path` atomically: a reader sees the old file or the new one, whole.
/// The file is private to its owner (mode 0600), whatever it was before.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    put(path, bytes, /*durable*/ true, /*mode*/ None)
}

/// Like [`write`] without the fsyncs: a reader still sees the old file or the new one,
/// whole, but a crash may leave the old one (or, on some filesystems, an empty one). For
/// files that are rewritten often and whose loss is harmless, such as metrics, where the
/// fsyncs would cost far more CPU than the write itself. The file gets `mode` exactly (the
/// umask does not apply), whatever it was before.
pub(crate) fn replace(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    put(path, bytes, /*durable*/ false, Some(mode))
}

/// Refuses a target that [`write`] must not replace: an existing directory, FIFO, device or
/// socket (rename(2) would put a file in its place). A missing path, a regular file or a
/// symlink (the link itself is replaced) is fine.
pub(crate) fn check_target(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(()),
        Ok(meta) => match crate::bounded::irregular(meta.file_type()) {
            None => Ok(()),
            Some(what) => anyhow::bail!(
                "{} is {what}, not a regular file; harness replaces only regular files",
                path.display()
            ),
        },
        // Missing, or unreachable: the temp file beside it fails with the better message.
        Err(_) => Ok(()),
    }
}

/// The directory a file is written in, opened, and the file's name in it.
fn anchored(path: &Path) -> Result<(Dir, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let dir = parent_dir(path);
    let d = Dir::open(&dir)
        .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
    Ok((d, name))
}

/// `mode`: None keeps the private 0600.
fn put(path: &Path, bytes: &[u8], durable: bool, mode: Option<u32>) -> Result<()> {
    check_target(path)?;
    let (dir, name) = anchored(path)?;
    dir.write_mode(name, bytes, durable, mode.unwrap_or(0o600))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Like [`write`] but never replaces an existing file: `-2`, `-3`... are tried.
pub(crate) fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    let d = Dir::open(dir)
        .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
    let used = d
        .write_new(name, bytes)
        .with_context(|| format!("cannot write a REPORT in {}", dir.display()))?;
    Ok(dir.join(used))
}

/// Whether `target` is the file `place`, or lies inside the directory `place`, once both are
/// resolved (symlinks, `..`, relative to the current directory); a path that does not exist
/// yet is resolved through its parent. Used to refuse an output that would overwrite one
/// of harness's own inputs.
pub(crate) fn lies_in(target: &Path, place: &Path) -> bool {
    let (Some(target), Some(place)) = (resolved(target), resolved(place)) else {
        return false;
    };
    target.starts_with(place)
}

/// `path` made absolute with its symlinks resolved, as far as it exists.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Some(real);
    }
    let name = path.file_name()?;
    Some(std::fs::canonicalize(parent_dir(path)).ok()?.join(name))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_lies_in_itself_and_beneath_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("harness.toml");
        std::fs::write(&f, "x").unwrap();
        std::os::unix::fs::symlink(&f, d.path().join("link")).unwrap();
        assert!(lies_in(&f, &f));
        assert!(lies_in(&d.path().join("link"), &f));
        assert!(lies_in(&d.path().join("new.md"), d.path()));
        assert!(!lies_in(&d.path().join("other.toml"), &f));
        assert!(!lies_in(Path::new("/nonexistent/x"), &f));
    }

    #[test]
    fn only_a_regular_file_is_ever_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = write(&fifo, b"x").unwrap_err().to_string();
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        let e = replace(d.path(), b"x", 0o644).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        assert!(check_target(Path::new("/dev/null")).is_err());
        // A regular file, a missing one and a symlink are replaced.
        write(&d.path().join("f"), b"1").unwrap();
        write(&d.path().join("f"), b"2").unwrap();
        std::os::unix::fs::symlink("/dev/null", d.path().join("l")).unwrap();
        write(&d.path().join("l"), b"3").unwrap();
        assert_eq!(std::fs::read(d.path().join("l")).unwrap(), b"3");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 3);
    }

    #[test]
    fn a_new_file_never_replaces_one_the_number_goes_before_the_extension() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (name, second) in [
            ("R-1.md", "R-1-2.md"),
            ("R-1.patch", "R-1-2.patch"),
            ("R", "R-2"),
        ] {
            assert_eq!(write_new(d, name, b"a").unwrap(), d.join(name));
            assert_eq!(write_new(d, name, b"b").unwrap(), d.join(second));
            assert_eq!(std::fs::read(d.join(name)).unwrap(), b"a");
        }
    }
}
