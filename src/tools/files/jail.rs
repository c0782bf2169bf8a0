//! Tools stage, filesystem adapter: the file tools' jail. A path relative to the work root in;
//! an open file (read) or an atomically replaced file (write) out, or a refusal the model can
//! read.
//!
//! The kernel resolves every path: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a
//! descriptor of the work root fails with `EXDEV` when `..` or a symlink would leave it. What a
//! path really names is then read back from the open descriptor (`/proc/self/fd`), and the
//! protected places are judged on that resolved path, so a plain-looking symlink cannot lead
//! into `.git/`. Writes open each directory with `RESOLVE_NO_SYMLINKS`, create a temp file with
//! `openat(O_EXCL | O_NOFOLLOW)` in it and `renameat` it over the name: a file swapped for a
//! symlink after it was judged is replaced, never written through. The kernel call is
//! `beneath::openat2`, the one harness uses for its own files in places a command can write.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

use crate::beneath::openat2;
use harness_gate::{self as gate, Policy};

/// The work root, held open, and what is protected inside it.
#[derive(Debug)]
pub struct Jail {
    root: OwnedFd,
    /// The root's real path, to turn a descriptor's path back into a relative one.
    root_real: PathBuf,
    /// `[tools.files] protect`.
    protect: Vec<String>,
    /// The bash tool's rules: a place a path rule runs programs from is not writable.
    policy: Policy,
    /// Paths never to read or write, relative to the root, with what they are: the config,
    /// the report dir, a key file, a cassette being recorded (`[tools.bash]` never_read).
    hidden: Vec<(String, String)>,
    /// Paths never to write, relative to the root, with what they are: the next run's
    /// inputs (`AGENTS.md`, the skills dir, the check's own files).
    read_only: Vec<(String, String)>,
    /// The task's attachments directory (`[intake].attachments_dir`): readable even when it
    /// is a dot directory, never writable.
    attachments: Option<String>,
}

/// A regular file opened for reading, with the path it really has under the root.
pub struct Opened {
    pub file: File,
    /// Relative to the root, symlinks resolved.
    pub rel: String,
}

/// Where a write goes: the directory (opened without following symlinks) and the name in it.
pub struct Target {
    dir: OwnedFd,
    name: CString,
    /// Relative to the root, symlinks resolved.
    pub rel: String,
    /// The permission bits (`0o777`; never setuid/setgid/sticky) of the file it replaces,
    /// if it exists.
    pub existing_mode: Option<u32>,
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl Jail {
    /// Opens the work root. Fails when it is not a directory that can be opened.
    pub fn open(work_root: &Path, protect: Vec<String>, policy: Policy) -> anyhow::Result<Jail> {
        let root = File::open(work_root)
            .with_context(|| format!("cannot open the work root {}", work_root.display()))?;
        let root: OwnedFd = root.into();
        let root_real = real_path(root.as_fd())
            .with_context(|| format!("cannot resolve the work root {}", work_root.display()))?;
        Ok(Jail {
            root,
            root_real,
            protect,
            policy,
            hidden: Vec::new(),
            read_only: Vec::new(),
            attachments: None,
        })
    }

    /// Lets the file tools read the task's attachments at `rel` (a dot directory too), and
    /// refuses every write there.
    pub fn attachments(&mut self, rel: String) {
        self.attachments = Some(rel);
    }

    /// Refuses writes to these paths (relative to the root) from now on.
    pub fn read_only(&mut self, paths: Vec<(String, String)>) {
        self.read_only.extend(paths);
    }

    /// Refuses these paths (relative to the root) for reads and writes from now on.
    pub fn hide(&mut self, hidden: Vec<(String, String)>) {
        self.hidden.extend(hidden);
    }

    /// Opens `path` for reading: a regular file beneath the root, not protected.
    pub fn open_read(&self, path: &str) -> Result<Opened, String> {
        let rel = relative(path, &self.root_real)?;
        let fd = openat2(
            self.root.as_fd(),
            &rel,
            libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK,
            0,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
        )
        .map_err(|e| refusal(path, &e))?;
        let real = self.rel_of(fd.as_fd(), path)?;
        if let Some(why) = self.protected(&real, /*write*/ false) {
            return Err(why);
        }
        let file = File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| format!("{path:?} cannot be read ({e})"))?;
        if !meta.is_file() {
            return Err(format!("{path:?} is not a regular file"));
        }
        Ok(Opened { file, rel: real })
    }

    /// Resolves where a write to `path` lands, creating missing parent directories beneath
    /// the root. An existing symlink is followed (beneath the root only); a dangling one is
    /// refused, since writing through it would create its target.
    pub fn target(&self, path: &str) -> Result<Target, String> {
        let rel = relative(path, &self.root_real)?;
        if path.ends_with('/') {
            return Err(format!("{path:?} names a directory, not a file"));
        }
        let beneath = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        let (real, existing_mode) = match openat2(self.root.as_fd(), &rel, libc::O_PATH, 0, beneath)
        {
            Ok(fd) => {
                let meta = File::from(fd.try_clone().map_err(|e| e.to_string())?)
                    .metadata()
                    .map_err(|e| format!("{path:?} cannot be read ({e})"))?;
                if !meta.is_file() {
                    return Err(format!("{path:?} exists and is not a regular file"));
                }
                use std::os::unix::fs::PermissionsExt;
                (
                    self.rel_of(fd.as_fd(), path)?,
                    Some(meta.permissions().mode() & 0o777),
                )
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                (self.new_file_rel(path, &rel)?, None)
            }
            Err(e) => return Err(refusal(path, &e)),
        };
        if real.is_empty() {
            return Err(format!("{path:?} is the work root itself, not a file"));
        }
        if let Some(why) = self.protected(&real, /*write*/ true) {
            return Err(why);
        }
        let (parent, name) = match real.rsplit_once('/') {
            Some((p, n)) => (p, n),
            None => ("", real.as_str()),
        };
        let dir = self.make_dirs(parent, path)?;
        let name = CString::new(name).map_err(|_| format!("{path:?} contains a NUL byte"))?;
        Ok(Target {
            dir,
            name,
            rel: real,
            existing_mode,
        })
    }

    /// The resolved relative path of a file that does not exist yet: its deepest existing
    /// ancestor resolved by the kernel, the missing rest appended.
    fn new_file_rel(&self, path: &str, rel: &Path) -> Result<String, String> {
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        for keep in (0..parts.len()).rev() {
            let prefix: PathBuf = parts[..keep].iter().collect();
            let prefix = if keep == 0 {
                PathBuf::from(".")
            } else {
                prefix
            };
            let beneath = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
            match openat2(
                self.root.as_fd(),
                &prefix,
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                beneath,
            ) {
                Ok(fd) => {
                    if keep + 1 == parts.len() && self.leaf_is_symlink(&fd, parts[keep]) {
                        return Err(format!(
                            "{path:?} is a symlink to a path that does not exist; refused"
                        ));
                    }
                    let base = self.rel_of(fd.as_fd(), path)?;
                    let mut out: Vec<String> = Vec::new();
                    if !base.is_empty() {
                        out.push(base);
                    }
                    for p in &parts[keep..] {
                        let p = p.to_string_lossy();
                        if p == ".." || p == "." {
                            return Err(format!(
                                "{path:?} uses `..` or `.` below a directory that does not exist"
                            ));
                        }
                        out.push(p.into_owned());
                    }
                    return Ok(out.join("/"));
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT)) => continue,
                Err(e) => return Err(refusal(path, &e)),
            }
        }
        Err(format!("{path:?} cannot be resolved"))
    }

    fn leaf_is_symlink(&self, dir: &OwnedFd, name: &std::ffi::OsStr) -> bool {
        let Ok(c) = CString::new(name.as_bytes()) else {
            return false;
        };
        // SAFETY: a zeroed stat is a valid out-parameter; the pointers live across the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        r == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFLNK
    }

    /// Opens (creating as needed) each directory of the resolved `parent`, refusing any
    /// symlink: the path was resolved already, so a symlink now is a swap made since.
    fn make_dirs(&self, parent: &str, path: &str) -> Result<OwnedFd, String> {
        let mut dir = self
            .root
            .try_clone()
            .map_err(|e| format!("cannot open the work root ({e})"))?;
        for comp in parent.split('/').filter(|c| !c.is_empty()) {
            let c = CString::new(comp).map_err(|_| format!("{path:?} contains a NUL byte"))?;
            // SAFETY: c is a valid C string; dir is an open directory descriptor.
            let r = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o777) };
            if r != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(format!("cannot create the directory {comp:?} ({e})"));
                }
            }
            dir = openat2(
                dir.as_fd(),
                Path::new(comp),
                libc::O_PATH | libc::O_DIRECTORY,
                0,
                libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS,
            )
            .map_err(|e| refusal(path, &e))?;
        }
        Ok(dir)
    }

    /// Writes `data` to the target atomically: a temp file in the same directory, renamed
    /// over the name, so a reader sees the old content or the new, never a part. Not synced:
    /// an edit of the work tree need not survive a power cut, and an fsync per call cost ten
    /// times the rest of an `edit_file` round (bench/). Nothing is left behind on failure.
    pub fn write(&self, target: &Target, data: &[u8]) -> Result<(), String> {
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = CString::new(format!(".harness-write-{}-{seq}.tmp", std::process::id()))
            .map_err(|e| e.to_string())?;
        let mode = target.existing_mode.unwrap_or(0o666);
        // SAFETY: tmp is a valid C string; the dir descriptor is open.
        let fd = unsafe {
            libc::openat(
                target.dir.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(format!(
                "cannot create a temp file beside {:?} ({})",
                target.rel,
                io::Error::last_os_error()
            ));
        }
        // SAFETY: fd was just returned by openat and is owned here alone.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let unlink = || {
            // SAFETY: as above.
            unsafe { libc::unlinkat(target.dir.as_raw_fd(), tmp.as_ptr(), 0) };
        };
        let written = file.write_all(data).and_then(|()| {
            if let Some(m) = target.existing_mode {
                use std::os::unix::fs::PermissionsExt;
                // The umask applied at creation; an existing file keeps exactly its mode.
                file.set_permissions(std::fs::Permissions::from_mode(m))?;
            }
            Ok(())
        });
        if let Err(e) = written {
            unlink();
            return Err(format!("cannot write {:?} ({e})", target.rel));
        }
        // SAFETY: both names are valid C strings relative to the same open directory.
        let r = unsafe {
            libc::renameat(
                target.dir.as_raw_fd(),
                tmp.as_ptr(),
                target.dir.as_raw_fd(),
                target.name.as_ptr(),
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            unlink();
            return Err(format!("cannot replace {:?} ({e})", target.rel));
        }
        Ok(())
    }

    /// The path of an open descriptor relative to the root.
    fn rel_of(&self, fd: BorrowedFd<'_>, path: &str) -> Result<String, String> {
        let real = real_path(fd).map_err(|e| format!("{path:?} cannot be resolved ({e})"))?;
        match real.strip_prefix(&self.root_real) {
            Ok(rest) => Ok(rest.to_string_lossy().into_owned()),
            Err(_) => Err(format!("{path:?} resolves outside the work root; refused")),
        }
    }

    /// Why `rel` (resolved, relative to the root) is off limits, or `None`.
    pub fn protected(&self, rel: &str, write: bool) -> Option<String> {
        let under = |h: &str| rel == h || rel.strip_prefix(h).is_some_and(|r| r.starts_with('/'));
        if let Some(h) = self.attachments.as_deref().filter(|h| under(h)) {
            if write {
                return Some(format!(
                    "{rel:?} is in the task's attachments ({h}), read-only: copy what you need elsewhere"
                ));
            }
            // Below the attachments directory, only its own dotfiles stay off limits.
            let below = rel.strip_prefix(h).unwrap_or_default();
            if !below.split('/').any(|c| c.starts_with('.')) {
                return None;
            }
        }
        if rel.split('/').any(|c| c.starts_with('.')) {
            return Some(format!(
                "{rel:?} is a dotfile or inside a dot directory such as .git; the file tools never touch those"
            ));
        }
        if let Some((h, what)) = self.hidden.iter().find(|(h, _)| under(h)) {
            return Some(format!(
                "{rel:?} is {what} ({h}); no tool reads or writes it"
            ));
        }
        if let Some(p) = self.protect.iter().find(|p| protect_matches(p, rel)) {
            return Some(format!(
                "{rel:?} is protected by [tools.files] protect {p:?}"
            ));
        }
        if write {
            if let Some((h, what)) = self.read_only.iter().find(|(h, _)| under(h)) {
                return Some(format!(
                    "{rel:?} is {what} ({h}), read-only during the run: the next run reads it as the operator left it ([prompt] writable = true lets a task edit it)"
                ));
            }
            if let Some(why) = gate::write_refusal(&self.policy, rel) {
                return Some(format!("writing {rel:?} is refused: it {why}"));
            }
        }
        None
    }
}

/// Reads at most `cap` bytes of the regular file `rel` beneath `root`, resolved by the kernel
/// as the file tools' paths are (a symlink out is refused). Returns the bytes and the file's
/// full size, or `None` when it does not exist. For files harness reads on its own account,
/// such as the project's `AGENTS.md`.
pub fn read_beneath(root: &Path, rel: &str, cap: usize) -> Result<Option<(Vec<u8>, u64)>, String> {
    let dir = File::open(root).map_err(|e| format!("cannot open {} ({e})", root.display()))?;
    let fd = match openat2(
        dir.as_fd(),
        Path::new(rel),
        libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK,
        0,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(refusal(rel, &e)),
    };
    let file = File::from(fd);
    let size = match file.metadata() {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return Err(format!("{rel:?} is not a regular file")),
        Err(e) => return Err(format!("{rel:?} cannot be read ({e})")),
    };
    let mut data = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(&file, cap as u64), &mut data)
        .map_err(|e| format!("{rel:?} cannot be read ({e})"))?;
    Ok(Some((data, size)))
}

/// Lexical first line: a relative, non-empty path. `..` is left to the kernel, which refuses
/// it only when it leaves the root.
fn relative(path: &str, root_real: &Path) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.contains('\0') {
        return Err(format!("{path:?} contains a NUL byte"));
    }
    let p = Path::new(path);
    if p.is_absolute() {
        let hint = match p.strip_prefix(root_real) {
            Ok(rest) if !rest.as_os_str().is_empty() => {
                format!("; inside the work root it is {:?}", rest.to_string_lossy())
            }
            _ => String::new(),
        };
        return Err(format!(
            "{path:?} is absolute; the file tools take paths relative to the work root{hint}"
        ));
    }
    if p.components().all(|c| matches!(c, Component::CurDir)) {
        return Err(format!("{path:?} is the work root itself, not a file"));
    }
    Ok(p.to_path_buf())
}

/// The model-readable reason a kernel lookup failed.
fn refusal(path: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EXDEV) => format!(
            "{path:?} leads outside the work root (through `..`, or a symlink that is absolute or points out); refused by the kernel"
        ),
        Some(libc::ELOOP) => format!(
            "{path:?} goes through a symlink that is not allowed here (a /proc magic link, or a directory swapped for a symlink); refused"
        ),
        Some(libc::ENOENT) => format!("{path:?} does not exist"),
        Some(libc::ENOTDIR) => format!("a part of {path:?} is not a directory"),
        Some(libc::EISDIR) => format!("{path:?} is a directory, not a file"),
        Some(libc::EACCES) | Some(libc::EPERM) => format!("{path:?}: permission denied"),
        Some(libc::ENOSYS) => {
            "the kernel has no openat2 (Linux 5.6 or later is needed for the file tools)".into()
        }
        _ => format!("{path:?} cannot be opened ({e})"),
    }
}

/// What an open descriptor names, from `/proc/self/fd`.
fn real_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Whether a `[tools.files] protect` pattern covers `rel`. A pattern without `/` matches any
/// one component (`*.pem`, `secrets`); one with `/` is anchored at the root. Either way a
/// matched directory covers everything under it. `*` and `?` stay within a component, `**`
/// spans any number of them.
pub fn protect_matches(pattern: &str, rel: &str) -> bool {
    let path: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    let pat: Vec<&str> = pattern
        .trim_end_matches('/')
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if pat.len() == 1 {
        return path.iter().any(|c| component_matches(pat[0], c));
    }
    (1..=path.len()).any(|n| components_match(&pat, &path[..n]))
}

fn components_match(pat: &[&str], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| components_match(rest, &path[skip..])),
        Some((p, rest)) => match path.split_first() {
            Some((c, tail)) => component_matches(p, c) && components_match(rest, tail),
            None => false,
        },
    }
}

fn component_matches(pat: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}
