//! Leaf adapter (filesystem): the one rule for every file harness itself touches in a place a
//! command can write (the inbox and its `claimed/`, `done/`, `failed/`; the report dir; the
//! work root and a worktree; the metrics and events files). A directory is held open as an
//! anchor ([`Dir`]), and every name below it is reached from that descriptor, one component at
//! a time, never through a symlink: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, or where
//! the kernel has no `openat2`, `openat(O_NOFOLLOW)` at each step. A symlink planted where
//! harness expects a directory or a file, or a directory swapped for one while harness works,
//! is refused with a message that says so; nothing is ever created, renamed, linked or
//! removed outside the anchor. The file tools' jail (`tools::files::jail`) resolves the
//! model's paths with the same [`openat2`].
//!
//! Writes are atomic ([`Dir::write`]): a temp file created `O_EXCL | O_NOFOLLOW` beneath the
//! directory descriptor, written, fsynced (unless asked not to), renamed over the name with
//! `renameat` within the same descriptor, and the directory fsynced. Moves never replace a
//! file ([`Dir::move_new`]: `linkat`, then `unlinkat`).

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of the temp files [`Dir::write`] creates; a crashed run leaves at most these.
pub(crate) const TEMP_PREFIX: &str = ".harness-tmp-";

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// `struct open_how` of `linux/openat2.h` (libc's is `non_exhaustive`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(2)` with `O_CLOEXEC` added, retried on `EAGAIN`/`EINTR` (the kernel asks for a
/// retry when a rename raced the lookup). `ENOSYS` where the kernel is older than 5.6.
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str())?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve,
    };
    let mut tries = 0;
    loop {
        // SAFETY: every pointer is valid for the call; the size is that of the struct passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if r >= 0 {
            // SAFETY: the kernel returned a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(r as i32) });
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) && tries < 16 {
            continue;
        }
        return Err(e);
    }
}

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `openat(2)` of one name in `dir`, never following a symlink at it.
fn openat_nofollow(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: c is a valid C string; dir is an open descriptor.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by openat and is owned here alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What went wrong reaching `what`, in words that say a symlink was refused.
fn refusal(what: &Path, e: &io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ELOOP) => {
            "is a symlink (or goes through one); harness never follows a symlink here".to_string()
        }
        Some(libc::EXDEV) => "leads outside its directory; refused".to_string(),
        Some(libc::ENOTDIR) => {
            "is not a directory (or goes through something that is not)".to_string()
        }
        _ => e.to_string(),
    };
    io::Error::new(e.kind(), format!("{} {why}", what.display()))
}

/// A name of one component: not empty, no `/`, not `.` or `..`, no NUL.
fn one_component(name: &OsStr) -> io::Result<()> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a plain file name", name),
        ));
    }
    Ok(())
}

/// A directory held open: every name below it is reached from this descriptor.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    /// For messages only; never opened again.
    path: PathBuf,
}

impl Dir {
    /// Opens the anchor itself: a directory the operator configured (the inbox, the report
    /// dir, the directory of the metrics file), its path resolved as the operator wrote it.
    /// What lies below it is reached through this descriptor only.
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let dir = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)
            .map_err(|e| refusal(dir, &e))?;
        Ok(Dir {
            fd: fd.into(),
            path: path.to_path_buf(),
        })
    }

    /// Opens `rel` (relative, no `..`) beneath `anchor`, refusing any symlink on the way.
    pub(crate) fn open_beneath(anchor: &Path, rel: &Path) -> io::Result<Dir> {
        let mut dir = Dir::open(anchor)?;
        for c in rel.components() {
            match c {
                Component::CurDir => {}
                Component::Normal(name) => dir = dir.sub(name, false)?,
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "{} is not a path beneath {}",
                            rel.display(),
                            anchor.display()
                        ),
                    ))
                }
            }
        }
        Ok(dir)
    }

    /// The path this directory was opened as (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `name` joined to this directory's path, for messages.
    pub(crate) fn show(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.path.join(name.as_ref())
    }

    /// The directory `name` in this one, created first when `create`; a symlink there (or
    /// a directory swapped for one) is refused.
    pub(crate) fn sub(&self, name: impl AsRef<OsStr>, create: bool) -> io::Result<Dir> {
        let name = name.as_ref();
        one_component(name)?;
        let shown = self.show(name);
        if create {
            let c = cstr(name)?;
            // SAFETY: c is a valid C string; the descriptor is an open directory.
            if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot create {} ({e})", shown.display()),
                    ));
                }
            }
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        let fd = match openat2(
            self.fd.as_fd(),
            Path::new(name),
            flags,
            0,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS,
        ) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                openat_nofollow(self.fd.as_fd(), name, flags, 0)
            }
            other => other,
        }
        .map_err(|e| refusal(&shown, &e))?;
        Ok(Dir { fd, path: shown })
    }

    /// The entries of this directory (not `.`, `..`), each with its own type, symlinks not
    /// followed. Read from the descriptor, so a swap of the directory's path changes nothing.
    pub(crate) fn entries(&self) -> io::Result<Vec<(OsString, std::fs::FileType)>> {
        let dup = self.fd.try_clone()?;
        // The /proc link names this very directory, wherever its path now leads.
        let iter =
            std::fs::read_dir(format!("/proc/self/fd/{}", dup.as_raw_fd())).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot read {} ({e})", self.path.display()),
                )
            })?;
        let mut out = Vec::new();
        for entry in iter.flatten() {
            if let Ok(kind) = entry.file_type() {
                out.push((entry.file_name(), kind));
            }
        }
        Ok(out)
    }

    /// `name`'s metadata, a symlink not followed; `None` when it does not exist.
    pub(crate) fn stat(&self, name: impl AsRef<OsStr>) -> io::Result<Option<libc::stat>> {
        let c = cstr(name.as_ref())?;
        // SAFETY: a zeroed stat is a valid out-parameter; the pointers live across the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            return Ok(Some(st));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(e),
        }
    }

    /// Opens the regular file `name` for reading, without following a symlink and without
    /// waiting (a FIFO is refused, never blocked on).
    pub(crate) fn open_file(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_regular(name.as_ref(), libc::O_RDONLY)
    }

    fn open_regular(&self, name: &OsStr, flags: i32) -> io::Result<File> {
        one_component(name)?;
        let shown = self.show(name);
        let fd = openat_nofollow(
            self.fd.as_fd(),
            name,
            flags | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )
        .map_err(|e| refusal(&shown, &e))?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if let Some(what) = crate::bounded::irregular(meta.file_type()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is {what}, not a regular file", shown.display()),
            ));
        }
        Ok(file)
    }

    /// Reads the regular file `name` as UTF-8 text of at most `limit` bytes (the messages
    /// of `bounded::read_text`).
    pub(crate) fn read_text(&self, name: impl AsRef<OsStr>, limit: u64) -> io::Result<String> {
        let name = name.as_ref();
        let file = self.open_file(name)?;
        crate::bounded::read_open_text(file, &self.show(name), limit)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:#}")))
    }

    /// Sets the modification time of the regular file `name` to now.
    pub(crate) fn touch(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let f = self.open_regular(name.as_ref(), libc::O_WRONLY)?;
        f.set_modified(std::time::SystemTime::now())
    }

    /// Renames `name` to `to_name` in `to` (atomic; replaces nothing that is a directory).
    pub(crate) fn rename(
        &self,
        name: impl AsRef<OsStr>,
        to: &Dir,
        to_name: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        // SAFETY: valid C strings relative to open directory descriptors.
        self.between(name.as_ref(), to, to_name.as_ref(), |a, fa, b, fb| unsafe {
            libc::renameat(fa, a, fb, b)
        })
    }

    /// Runs a two-name syscall (`renameat`, `linkat`) from `name` here to `to_name` in `to`.
    fn between(
        &self,
        a: &OsStr,
        to: &Dir,
        b: &OsStr,
        call: impl FnOnce(*const libc::c_char, i32, *const libc::c_char, i32) -> i32,
    ) -> io::Result<()> {
        one_component(a)?;
        one_component(b)?;
        let (ca, cb) = (cstr(a)?, cstr(b)?);
        if call(
            ca.as_ptr(),
            self.fd.as_raw_fd(),
            cb.as_ptr(),
            to.fd.as_raw_fd(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Moves `name` to `to_name` in `to` without ever replacing a file there: a hard link
    /// (of the entry itself, a symlink not followed), then the old name goes; a directory
    /// (which cannot be hard-linked) is renamed with `RENAME_NOREPLACE`. `AlreadyExists`
    /// when `to_name` is taken.
    pub(crate) fn move_new(
        &self,
        name: impl AsRef<OsStr>,
        to: &Dir,
        to_name: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        let (a, b) = (name.as_ref(), to_name.as_ref());
        // SAFETY: valid C strings relative to open directory descriptors; flags 0: the
        // entry itself is linked, never what a symlink names.
        let linked = self.between(a, to, b, |a, fa, b, fb| unsafe {
            libc::linkat(fa, a, fb, b, 0)
        });
        let Err(e) = linked else {
            return self.remove(a);
        };
        let dir = self
            .stat(a)
            .ok()
            .flatten()
            .is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        if e.raw_os_error() != Some(libc::EPERM) || !dir {
            return Err(e);
        }
        // A directory cannot be hard-linked: renamed instead, never over an existing name.
        // SAFETY: as above.
        self.between(a, to, b, |a, fa, b, fb| unsafe {
            libc::syscall(libc::SYS_renameat2, fa, a, fb, b, libc::RENAME_NOREPLACE) as i32
        })
    }

    /// Removes the file (or symlink) `name`; a missing one is not an error.
    pub(crate) fn remove(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        one_component(name)?;
        let c = cstr(name)?;
        // SAFETY: as above; flags 0 never removes a directory.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// A new temp file beneath this directory, written with `bytes` (and synced when
    /// `durable`); its name.
    fn temp(&self, bytes: &[u8], durable: bool, mode: u32) -> io::Result<CString> {
        loop {
            let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
            let name = format!("{TEMP_PREFIX}{}-{seq}", std::process::id());
            let fd = match openat_nofollow(
                self.fd.as_fd(),
                OsStr::new(&name),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                mode,
            ) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot create a temp file in {} ({e})", self.path.display()),
                    ))
                }
            };
            let c = cstr(OsStr::new(&name))?;
            let mut file = File::from(fd);
            // Exactly `mode`, whatever the umask: private files stay 0600, a metrics textfile
            // node_exporter reads as its own user is 0644.
            let written = file
                .set_permissions(std::fs::Permissions::from_mode(mode))
                .and_then(|()| file.write_all(bytes))
                .and_then(|()| match durable {
                    true => file.sync_all(),
                    false => Ok(()),
                });
            if let Err(e) = written {
                // SAFETY: as above.
                unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot write in {} ({e})", self.path.display()),
                ));
            }
            return Ok(c);
        }
    }

    /// Writes `bytes` to `name` atomically: a reader sees the old file or the new one, whole.
    /// Only a regular file, a symlink (the link itself is replaced) or nothing is replaced;
    /// a directory, FIFO, device or socket at `name` is refused. `durable`: fsync the file
    /// and the directory, so the rename survives a crash.
    /// The file is private to its owner (mode 0600), whatever it was before.
    pub(crate) fn write(
        &self,
        name: impl AsRef<OsStr>,
        bytes: &[u8],
        durable: bool,
    ) -> io::Result<()> {
        self.write_mode(name, bytes, durable, 0o600)
    }

    /// Like [`Dir::write`], the file getting exactly `mode` (the umask does not apply).
    pub(crate) fn write_mode(
        &self,
        name: impl AsRef<OsStr>,
        bytes: &[u8],
        durable: bool,
        mode: u32,
    ) -> io::Result<()> {
        let name = name.as_ref();
        one_component(name)?;
        if let Some(st) = self.stat(name)? {
            let kind = st.st_mode & libc::S_IFMT;
            if kind != libc::S_IFREG && kind != libc::S_IFLNK {
                let what = match kind {
                    libc::S_IFDIR => "a directory",
                    libc::S_IFIFO => "a FIFO",
                    libc::S_IFCHR | libc::S_IFBLK => "a device",
                    libc::S_IFSOCK => "a socket",
                    _ => "not a regular file",
                };
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is {what}, not a regular file; harness replaces only regular files",
                        self.show(name).display()
                    ),
                ));
            }
        }
        let tmp = self.temp(bytes, durable, mode)?;
        let to = cstr(name)?;
        // SAFETY: both names are valid C strings relative to the same open directory.
        let r = unsafe {
            libc::renameat(
                self.fd.as_raw_fd(),
                tmp.as_ptr(),
                self.fd.as_raw_fd(),
                to.as_ptr(),
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), tmp.as_ptr(), 0) };
            return Err(io::Error::new(
                e.kind(),
                format!("cannot rename into {} ({e})", self.show(name).display()),
            ));
        }
        if durable {
            self.sync();
        }
        Ok(())
    }

    /// Like [`Dir::write`] but never replaces an existing entry: `-2`, `-3`... go before
    /// the extension (`R-x-2.md`). Returns the name used.
    pub(crate) fn write_new(&self, name: &str, bytes: &[u8]) -> io::Result<String> {
        one_component(OsStr::new(name))?;
        let tmp = self.temp(bytes, true, 0o600)?;
        let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
        let mut n = 1;
        let result = loop {
            let candidate = match (n, ext) {
                (1, _) => name.to_string(),
                (_, "") => format!("{stem}-{n}"),
                _ => format!("{stem}-{n}.{ext}"),
            };
            let c = cstr(OsStr::new(&candidate))?;
            // SAFETY: valid C strings relative to the same open directory.
            let r = unsafe {
                libc::linkat(
                    self.fd.as_raw_fd(),
                    tmp.as_ptr(),
                    self.fd.as_raw_fd(),
                    c.as_ptr(),
                    0,
                )
            };
            if r == 0 {
                break Ok(candidate);
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 {
                n += 1;
                continue;
            }
            break Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot rename into {} ({e})",
                    self.show(&candidate).display()
                ),
            ));
        };
        // SAFETY: as above.
        unsafe { libc::unlinkat(self.fd.as_raw_fd(), tmp.as_ptr(), 0) };
        self.sync();
        result
    }

    /// Sets this directory's own mode, on its descriptor (whatever its path now leads to).
    pub(crate) fn set_mode(&self, mode: u32) -> io::Result<()> {
        // SAFETY: fchmod on an open descriptor.
        if unsafe { libc::fchmod(self.fd.as_raw_fd(), mode as libc::mode_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the directory `name` in this one and everything in it, reached through this
    /// descriptor (its `/proc/self/fd` link), so a symlink swapped in above it leads nowhere
    /// else; a symlink at `name` itself is removed, never followed (std's `remove_dir_all`).
    pub(crate) fn remove_tree(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        one_component(name)?;
        let at = Path::new(&format!("/proc/self/fd/{}", self.fd.as_raw_fd())).join(name);
        std::fs::remove_dir_all(at).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot remove {} ({e})", self.show(name).display()),
            )
        })
    }

    /// Makes the directory's entries durable; where a filesystem refuses, there is nothing
    /// better to do (the data itself is synced).
    pub(crate) fn sync(&self) {
        // SAFETY: fsync on an open descriptor.
        unsafe { libc::fsync(self.fd.as_raw_fd()) };
    }

    /// Removes temp files a crashed run left here more than ten minutes ago.
    pub(crate) fn remove_stale_temps(&self) {
        let Ok(entries) = self.entries() else {
            return;
        };
        let cutoff = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
            - 600;
        for (name, kind) in entries {
            if !kind.is_file() || !name.as_bytes().starts_with(TEMP_PREFIX.as_bytes()) {
                continue;
            }
            if let Ok(Some(st)) = self.stat(&name) {
                if st.st_mtime < cutoff {
                    let _ = self.remove(&name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_symlink_is_refused_and_nothing_lands_outside() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("done")).unwrap();
        let dir = Dir::open(d.path()).unwrap();
        let e = dir.sub("done", true).unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");
        // A symlinked file is never read or written through.
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.path().join("t.md")).unwrap();
        assert!(dir
            .read_text("t.md", 100)
            .unwrap_err()
            .to_string()
            .contains("symlink"));
        dir.write("t.md", b"new", true).unwrap();
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
        assert!(dir.sub("..", false).is_err());
        assert!(dir.sub("a/b", false).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn moves_never_replace_and_new_writes_number_before_the_extension() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        let sub = dir.sub("claimed", true).unwrap();
        dir.write("a.md", b"1", true).unwrap();
        dir.write("b.md", b"2", true).unwrap();
        dir.move_new("a.md", &sub, "x.md").unwrap();
        let e = dir.move_new("b.md", &sub, "x.md").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(sub.read_text("x.md", 10).unwrap(), "1");
        assert_eq!(dir.write_new("R.md", b"a").unwrap(), "R.md");
        assert_eq!(dir.write_new("R.md", b"b").unwrap(), "R-2.md");
        let left: Vec<_> = dir.entries().unwrap().into_iter().map(|(n, _)| n).collect();
        assert!(
            !left
                .iter()
                .any(|n| n.as_bytes().starts_with(TEMP_PREFIX.as_bytes())),
            "{left:?}"
        );
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_during_the_run_is_never_followed() {
        // The attacker's goal: a file harness writes "into done/" lands in `outside`.
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::create_dir(root.join("done")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (root, out, stop) = (root.clone(), outside.path().to_path_buf(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(root.join("done"), root.join("done.real"));
                    let _ = std::os::unix::fs::symlink(&out, root.join("done"));
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(root.join("done"));
                    let _ = std::fs::rename(root.join("done.real"), root.join("done"));
                    n += 1;
                }
                n
            })
        };
        let anchor = Dir::open(&root).unwrap();
        let (mut ok, mut refused) = (0, 0);
        for i in 0..2000 {
            match anchor.sub("done", true) {
                Ok(done) => {
                    let _ = done.write(format!("t{i}.REPORT.md"), b"r", false);
                    ok += 1;
                }
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 0);
        assert!(ok + refused == 2000);
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "a write followed the swapped-in symlink"
        );
    }
}
