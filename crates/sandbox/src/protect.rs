//! Tools adapter: the paths commands must not change that lie inside a write root (the config
//! file, the report dir with its REPORTs and session store, a cassette being recorded, the
//! places path rules run programs from), made read-only for commands. In: the write roots and `[tools.bash]` never_read. Out: a [`Plan`] (what
//! needs protecting, [`plan`]: file system look-ups only) and [`Mounts`], prepared in the
//! harness and applied by each command's child to itself between fork and exec
//! ([`Mounts::apply_in_child`]: raw syscalls only). I/O: resolving paths, `statvfs`, a forked
//! probe ([`Mounts::probe`]).
//!
//! Landlock can only allow: its write rule on the work root covers everything beneath it, and
//! rules split like the read rules would forbid creating entries at the top of the work root.
//! So the child enters a user and mount namespace of its own, bind-mounts each protected path
//! onto itself read-only (a file too), pins every directory between the write root and it
//! (a mount point cannot be renamed or removed: EBUSY), and then enters a second user and
//! mount namespace: the kernel locks the mounts copied into a namespace owned by a less
//! privileged user namespace, so they cannot be unmounted or made writable again even by a
//! command that runs as root inside it. Landlock refuses every mount, umount and remount to
//! the confined command on top of that. The harness's own mount namespace is untouched.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::settings::NeverRead;

/// How one path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A protected path: bind-mounted onto itself read-only.
    ReadOnly,
    /// A directory on the way to one: bind-mounted onto itself (writable), so it cannot be
    /// renamed away with the protected path inside it.
    Pin,
}

/// One mount the child makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Resolved.
    pub path: PathBuf,
    /// How.
    pub kind: Kind,
}

/// What the commands of a run must not change, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The mounts, parents before children.
    pub targets: Vec<Target>,
    /// Each protected path inside a write root, relative to it where it can be, with what it
    /// is: `harness.toml (the config file)`.
    pub names: Vec<String>,
    /// Protected paths inside a write root that do not exist yet (a cassette harness writes
    /// at the end of the run, atomically, replacing whatever a command put there).
    pub later: Vec<String>,
}

impl Plan {
    /// Whether any path needs a mount.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

/// Works out which of `never` lie inside one of `write_roots` and what the child must mount
/// to keep commands from changing them. A write root inside (or equal to) a protected path,
/// or a protected path reached through a symlink that lies inside a write root (a command
/// could point it elsewhere), is a problem: no mount can protect that.
pub fn plan(write_roots: &[PathBuf], never: &[NeverRead]) -> Result<Plan, Vec<String>> {
    let roots: Vec<PathBuf> = write_roots
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .collect();
    let mut out = Plan::default();
    let mut problems = Vec::new();
    let mut protected: Vec<(PathBuf, &Path)> = Vec::new();
    for n in never {
        let lexical = absolute(&n.path);
        if let Some(link) = symlink_inside(&lexical, &roots) {
            problems.push(format!(
                "{} ({}) is reached through the symlink {} inside a write root: a command could point it elsewhere; name the real path",
                n.what,
                n.path.display(),
                link.display()
            ));
            continue;
        }
        let real = super::reads::resolve_maybe_missing(&n.path);
        if let Some(root) = roots.iter().find(|r| r.starts_with(&real)) {
            problems.push(format!(
                "{} ({}) holds the write root {}: commands could rewrite it; move one of them",
                n.what,
                real.display(),
                root.display()
            ));
            continue;
        }
        let Some(root) = roots.iter().find(|r| real.starts_with(r)) else {
            continue;
        };
        let rel = real.strip_prefix(root).unwrap_or(&real);
        let name = format!("{} ({})", rel.display(), n.what);
        if std::fs::symlink_metadata(&real).is_err() {
            out.later.push(name);
            continue;
        }
        // On a read-only file system (a container's `:ro` volume), with its directory too,
        // no command can change, remove or replace it: nothing to mount.
        if read_only_fs(&real) && real.parent().is_none_or(read_only_fs) {
            continue;
        }
        out.names.push(name);
        protected.push((real, root));
    }
    // A path inside another protected path is covered by that one's mount.
    let covered = |p: &Path| protected.iter().any(|(q, _)| p != q && p.starts_with(q));
    for (real, root) in &protected {
        if covered(real) {
            continue;
        }
        for dir in real.ancestors().skip(1) {
            if dir == *root || !dir.starts_with(root) {
                break;
            }
            if !covered(dir) && !protected.iter().any(|(q, _)| q == dir) {
                out.targets.push(Target {
                    path: dir.to_path_buf(),
                    kind: Kind::Pin,
                });
            }
        }
        out.targets.push(Target {
            path: real.clone(),
            kind: Kind::ReadOnly,
        });
    }
    // Parents before children; the same pin from two paths side by side, then once.
    out.targets.sort_by(|a, b| {
        (a.path.components().count(), &a.path).cmp(&(b.path.components().count(), &b.path))
    });
    out.targets.dedup();
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// `path` made absolute against the current directory, `.` and `..` folded.
fn absolute(path: &Path) -> PathBuf {
    let p = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    crate::settings::clean_path(&p)
}

/// The first symlink on the way to `lexical` (an absolute, clean path) that lies inside one
/// of `roots` (resolved), where a command could replace it.
fn symlink_inside(lexical: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let mut cur = PathBuf::from("/");
    for c in lexical.components() {
        let Component::Normal(name) = c else {
            continue;
        };
        let next = cur.join(name);
        let meta = std::fs::symlink_metadata(&next).ok()?;
        if meta.file_type().is_symlink() {
            if roots.iter().any(|r| next.starts_with(r) && next != *r) {
                return Some(next);
            }
            cur = next.canonicalize().ok()?;
        } else {
            cur = next;
        }
    }
    None
}

/// A mount prepared for the child.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    path: CString,
    /// For [`Kind::ReadOnly`]: the flags of the read-only remount (nosuid and nodev added, the
    /// mount's own atime and noexec flags kept: a user namespace may not drop them).
    remount: Option<libc::c_ulong>,
}

/// The mounts of a [`Plan`], ready for a forked child: everything allocated here, in the
/// harness.
#[derive(Debug, PartialEq, Eq)]
pub struct Mounts {
    mounts: Vec<Mount>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// The child's steps, for the probe's message.
const STEPS: &[&str] = &[
    "unshare(CLONE_NEWUSER | CLONE_NEWNS)",
    "writing /proc/self/setgroups",
    "writing /proc/self/uid_map",
    "writing /proc/self/gid_map",
    "making the mount tree private",
    "bind-mounting a protected path",
    "remounting it read-only",
];

/// A failed step: its index in [`STEPS`] and the errno.
type StepError = (u8, i32);

impl Mounts {
    /// Prepares `plan`'s mounts. Fails when a path cannot be passed to the kernel.
    pub fn prepare(plan: &Plan) -> io::Result<Mounts> {
        let mut mounts = Vec::new();
        for t in &plan.targets {
            let path = CString::new(t.path.as_os_str().as_bytes())?;
            let remount = match t.kind {
                Kind::Pin => None,
                Kind::ReadOnly => Some(readonly_flags(&path)?),
            };
            mounts.push(Mount { path, remount });
        }
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ok(Mounts {
            mounts,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        })
    }

    /// The mounts as bytes, for the command spawner ([`Mounts::from_bytes`]): per mount its
    /// path and remount flags (0: a pin), then the uid and gid map lines. Native endian: both
    /// ends are the same binary.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut bytes = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_ne_bytes());
            out.extend_from_slice(b);
        };
        bytes(&(self.mounts.len() as u32).to_ne_bytes());
        for m in &self.mounts {
            bytes(m.path.as_bytes());
            // c_ulong is 32 bits on some targets: the wire always carries 64.
            #[allow(clippy::unnecessary_cast)]
            let flags = m.remount.unwrap_or(0) as u64;
            bytes(&flags.to_ne_bytes());
        }
        bytes(&self.uid_map);
        bytes(&self.gid_map);
        out
    }

    /// [`Mounts::to_bytes`]'s bytes back; `None` for bytes it did not make (a path with a NUL,
    /// a count or length past the end, bytes left over).
    pub fn from_bytes(mut b: &[u8]) -> Option<Mounts> {
        fn field<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
            let len = u32::from_ne_bytes(b.get(..4)?.try_into().ok()?) as usize;
            let value = b.get(4..4 + len)?;
            *b = &b[4 + len..];
            Some(value)
        }
        let count = u32::from_ne_bytes(field(&mut b)?.try_into().ok()?) as usize;
        // Each mount takes at least 16 bytes: a bound before any allocation.
        if count > b.len() / 16 {
            return None;
        }
        let mut mounts = Vec::with_capacity(count);
        for _ in 0..count {
            let path = CString::new(field(&mut b)?).ok()?;
            let flags = u64::from_ne_bytes(field(&mut b)?.try_into().ok()?);
            mounts.push(Mount {
                path,
                remount: (flags != 0).then_some(flags as libc::c_ulong),
            });
        }
        let uid_map = field(&mut b)?.to_vec();
        let gid_map = field(&mut b)?.to_vec();
        b.is_empty().then_some(Mounts {
            mounts,
            uid_map,
            gid_map,
        })
    }

    /// In the command's child, between fork and exec, before Landlock: the protected paths
    /// become read-only mounts in a mount namespace of the child's own. Raw syscalls only,
    /// no allocation; the child must be single-threaded (unshare of a user namespace).
    pub(crate) fn apply_in_child(&self) -> io::Result<()> {
        self.apply()
            .map_err(|(_, errno)| io::Error::from_raw_os_error(errno))
    }

    fn apply(&self) -> Result<(), StepError> {
        // SAFETY: raw syscalls on NUL-terminated strings and byte slices owned by `self`.
        unsafe {
            self.enter_namespaces()?;
            let root = c"/";
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err((4, errno()));
            }
            for m in &self.mounts {
                if libc::mount(
                    m.path.as_ptr(),
                    m.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
                {
                    return Err((5, errno()));
                }
                if let Some(flags) = m.remount {
                    if libc::mount(
                        std::ptr::null(),
                        m.path.as_ptr(),
                        std::ptr::null(),
                        flags,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err((6, errno()));
                    }
                }
            }
            // Mounts copied into a namespace owned by a less privileged user namespace are
            // locked: never unmounted alone, never made writable again.
            self.enter_namespaces()
        }
    }

    /// # Safety
    /// Only in a single-threaded child.
    unsafe fn enter_namespaces(&self) -> Result<(), StepError> {
        if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
            return Err((0, errno()));
        }
        // The harness is non-dumpable, and so is this fork of it: the kernel then gives its
        // /proc files to root, and a user that is not root cannot write its own maps. So the
        // child is dumpable for the three writes only (exec makes bash dumpable anyway).
        let dumpable = libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0);
        if dumpable != 1 {
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
        let written = write_proc(c"/proc/self/setgroups", b"deny")
            .map_err(|e| (1, e))
            .and_then(|()| write_proc(c"/proc/self/uid_map", &self.uid_map).map_err(|e| (2, e)))
            .and_then(|()| write_proc(c"/proc/self/gid_map", &self.gid_map).map_err(|e| (3, e)));
        if dumpable == 0 {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
        written
    }

    /// Applies the mounts in a forked child that exits at once: whether commands can be
    /// protected on this system, and if not, the step that failed and why.
    pub fn probe(&self) -> Result<(), String> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 into a local array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("cannot probe ({})", io::Error::last_os_error()));
        }
        let [read, write] = fds;
        // SAFETY: the child makes raw syscalls only (see `apply`), writes its outcome to the
        // pipe and leaves with _exit; the parent closes its end and reaps the child.
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                libc::close(read);
                let out: [u8; 5] = match self.apply() {
                    Ok(()) => [u8::MAX, 0, 0, 0, 0],
                    Err((step, e)) => {
                        let b = e.to_ne_bytes();
                        [step, b[0], b[1], b[2], b[3]]
                    }
                };
                libc::write(write, out.as_ptr().cast(), out.len());
                libc::_exit(0);
            }
            libc::close(write);
            if pid < 0 {
                libc::close(read);
                return Err(format!("cannot probe ({})", io::Error::last_os_error()));
            }
            // A signal to the harness (handled) must not read as a failed probe.
            let mut out = [0u8; 5];
            let n = loop {
                let n = libc::read(read, out.as_mut_ptr().cast(), out.len());
                if n >= 0 || errno() != libc::EINTR {
                    break n;
                }
            };
            libc::close(read);
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 && errno() == libc::EINTR {}
            if n != 5 {
                return Err("the probe child gave no answer".to_string());
            }
            if out[0] == u8::MAX {
                return Ok(());
            }
            let e = i32::from_ne_bytes([out[1], out[2], out[3], out[4]]);
            let step = STEPS.get(usize::from(out[0])).unwrap_or(&"a step");
            Err(format!(
                "{step} failed: {}",
                io::Error::from_raw_os_error(e)
            ))
        }
    }
}

/// Whether `path` lies on a file system mounted read-only.
fn read_only_fs(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs into a zeroed local struct.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_flag & libc::ST_RDONLY != 0
    }
}

/// The flags that remount the bind mount at `path` read-only, keeping the flags its mount
/// has (a user namespace may not clear locked ones, nor change the atime mode).
fn readonly_flags(path: &CString) -> io::Result<libc::c_ulong> {
    // SAFETY: statvfs into a zeroed local struct.
    let f = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        st.f_flag
    };
    // Not noexec unless the mount is: a path rule's directory stays executable (what it may
    // run is the exec set's to say).
    let mut flags =
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (st, ms) in [
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st != 0 {
            flags |= ms;
        }
    }
    if f & (libc::ST_NOATIME | libc::ST_RELATIME) == 0 {
        flags |= libc::MS_STRICTATIME;
    }
    Ok(flags)
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Writes `data` to a /proc file with raw syscalls; the errno on failure.
///
/// # Safety
/// Async-signal-safe; for the forked child.
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> Result<(), i32> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(errno());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let e = errno();
    libc::close(fd);
    if n == data.len() as isize {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn never(path: &Path, what: &str) -> NeverRead {
        NeverRead {
            path: path.to_path_buf(),
            what: what.to_string(),
            may_share_work_root: true,
        }
    }

    #[test]
    fn mounts_travel_to_the_spawner_as_bytes_and_nothing_else_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("out/reports")).unwrap();
        std::fs::write(root.join("harness.toml"), "").unwrap();
        let plan = plan(
            std::slice::from_ref(&root),
            &[
                never(&root.join("harness.toml"), "the config file"),
                never(&root.join("out/reports"), "the report dir"),
            ],
        )
        .unwrap();
        let mounts = Mounts::prepare(&plan).unwrap();
        let bytes = mounts.to_bytes();
        assert_eq!(Mounts::from_bytes(&bytes), Some(mounts));
        for cut in 0..bytes.len() {
            assert_eq!(Mounts::from_bytes(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Mounts::from_bytes(&longer), None);
        // A count no byte string could hold is refused before anything is allocated.
        let mut huge = 4u32.to_ne_bytes().to_vec();
        huge.extend_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Mounts::from_bytes(&huge), None);
    }

    #[test]
    fn only_paths_inside_a_write_root_are_protected() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("work/reports")).unwrap();
        std::fs::create_dir_all(r.join("elsewhere")).unwrap();
        std::fs::write(r.join("work/harness.toml"), "").unwrap();
        std::fs::write(r.join("elsewhere/key"), "").unwrap();
        let got = plan(
            &[r.join("work")],
            &[
                never(&r.join("work/harness.toml"), "the config file"),
                never(&r.join("work/reports"), "the report dir"),
                never(&r.join("elsewhere/key"), "a key file"),
                never(&r.join("work/c.json"), "the cassette being recorded"),
            ],
        )
        .unwrap();
        assert_eq!(
            got.targets,
            vec![
                Target {
                    path: r.join("work/harness.toml"),
                    kind: Kind::ReadOnly
                },
                Target {
                    path: r.join("work/reports"),
                    kind: Kind::ReadOnly
                },
            ]
        );
        assert_eq!(
            got.names,
            vec!["harness.toml (the config file)", "reports (the report dir)"]
        );
        assert_eq!(got.later, vec!["c.json (the cassette being recorded)"]);
        // Nothing inside a write root: nothing to do.
        let none = plan(
            &[r.join("elsewhere/x")],
            &[never(&r.join("work/harness.toml"), "the config file")],
        )
        .unwrap();
        assert!(none.is_empty() && none.names.is_empty(), "{none:?}");
    }

    #[test]
    fn directories_on_the_way_are_pinned_and_nested_paths_covered() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("out/reports")).unwrap();
        std::fs::create_dir_all(r.join("src")).unwrap();
        std::fs::write(r.join("out/reports/c.json"), "").unwrap();
        std::fs::write(r.join("out/harness.toml"), "").unwrap();
        let got = plan(
            &[r.join("src"), r.clone()],
            &[
                never(&r.join("out/reports/c.json"), "the cassette being recorded"),
                never(&r.join("out/reports"), "the report dir"),
                never(&r.join("out/harness.toml"), "the config file"),
            ],
        )
        .unwrap();
        assert_eq!(
            got.targets,
            vec![
                Target {
                    path: r.join("out"),
                    kind: Kind::Pin
                },
                Target {
                    path: r.join("out/harness.toml"),
                    kind: Kind::ReadOnly
                },
                Target {
                    path: r.join("out/reports"),
                    kind: Kind::ReadOnly
                },
            ]
        );
    }

    #[test]
    fn symlinks_resolve_but_one_inside_a_write_root_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("real/work/conf")).unwrap();
        std::fs::write(r.join("real/work/conf/harness.toml"), "").unwrap();
        std::os::unix::fs::symlink(r.join("real/work"), r.join("work-link")).unwrap();
        std::os::unix::fs::symlink("conf", r.join("real/work/cfg")).unwrap();
        // Through a symlink outside the write root: resolved and protected.
        let got = plan(
            &[r.join("work-link")],
            &[never(
                &r.join("work-link/conf/harness.toml"),
                "the config file",
            )],
        )
        .unwrap();
        assert_eq!(
            got.targets.last().unwrap().path,
            r.join("real/work/conf/harness.toml")
        );
        assert_eq!(got.targets[0].kind, Kind::Pin);
        // Through a symlink a command could replace: refused.
        let problems = plan(
            &[r.join("real/work")],
            &[never(
                &r.join("real/work/cfg/harness.toml"),
                "the config file",
            )],
        )
        .unwrap_err();
        assert!(
            problems[0].contains("is reached through the symlink"),
            "{problems:?}"
        );
        // A write root inside a protected path.
        let problems = plan(
            &[r.join("real/work/conf")],
            &[never(&r.join("real/work"), "the report dir")],
        )
        .unwrap_err();
        assert!(problems[0].contains("holds the write root"), "{problems:?}");
    }
}

#[cfg(test)]
mod child_tests {
    //! The mounts applied to a real child (no Landlock here: the mounts alone must hold,
    //! even for a child that runs as root inside its namespace).
    use super::*;
    use std::os::unix::process::CommandExt;

    /// Runs `script` with `sh` in `dir` under the mounts of `never`; its stdout, or `None`
    /// where this system has no user namespaces.
    fn run_under(dir: &Path, never: &[NeverRead], script: &str) -> Option<String> {
        let mounts = Mounts::prepare(&plan(&[dir.to_path_buf()], never).unwrap()).unwrap();
        if let Err(why) = mounts.probe() {
            eprintln!("skipped: user namespaces unavailable here ({why})");
            return None;
        }
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg(script).current_dir(dir);
        let m = std::sync::Arc::new(mounts);
        // SAFETY: the closure only makes raw syscalls (see `apply_in_child`).
        unsafe {
            cmd.pre_exec(move || m.apply_in_child());
        }
        let out = cmd.output().unwrap();
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn never(path: PathBuf, what: &str) -> NeverRead {
        NeverRead {
            path,
            what: what.to_string(),
            may_share_work_root: true,
        }
    }

    #[test]
    fn a_directory_on_the_way_stays_put_and_writable() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("out/reports")).unwrap();
        let script = r#"
            mv out out2 2>/dev/null && echo "CHANGED: mv"
            rm -rf out 2>/dev/null; [ -d out/reports ] || echo "CHANGED: rm"
            touch out/new && rm out/new && echo ok-inside
        "#;
        let Some(stdout) = run_under(
            &r,
            &[never(r.join("out/reports"), "the report dir")],
            script,
        ) else {
            return;
        };
        assert_eq!(stdout.trim(), "ok-inside");
        assert!(r.join("out/reports").is_dir());
    }

    #[test]
    fn a_child_cannot_change_protected_paths_but_can_change_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("reports/sessions")).unwrap();
        std::fs::write(r.join("harness.toml"), "allow = []\n").unwrap();
        std::fs::write(r.join("reports/REPORT-1.md"), "report\n").unwrap();
        let never = [
            never(r.join("harness.toml"), "the config file"),
            never(r.join("reports"), "the report dir"),
        ];
        let script = r#"
            fail() { echo "CHANGED: $*"; }
            echo x >> harness.toml 2>/dev/null && fail append
            rm -f harness.toml 2>/dev/null && fail rm
            mv harness.toml h2 2>/dev/null && fail mv
            echo evil > other && mv -f other harness.toml 2>/dev/null && fail rename-over
            ln -sf /etc/passwd harness.toml 2>/dev/null && fail ln
            ln harness.toml hard 2>/dev/null && fail hardlink
            echo x > reports/REPORT-2.md 2>/dev/null && fail report
            echo x >> reports/REPORT-1.md 2>/dev/null && fail report-append
            touch reports/sessions/s.jsonl.gz 2>/dev/null && fail session
            rm -rf reports 2>/dev/null; [ -f reports/REPORT-1.md ] || fail rm-reports
            mv reports r2 2>/dev/null && fail mv-reports
            umount -l reports 2>/dev/null && fail umount
            umount -l harness.toml 2>/dev/null && fail umount-config
            mount -o remount,bind,rw reports 2>/dev/null && fail remount
            mkdir newdir && touch newdir/f newfile && rm -r newdir newfile && echo ok-top-level
        "#;
        let Some(stdout) = run_under(&r, &never, script) else {
            return;
        };
        assert_eq!(stdout.trim(), "ok-top-level");
        assert_eq!(
            std::fs::read_to_string(r.join("harness.toml")).unwrap(),
            "allow = []\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("reports/REPORT-1.md")).unwrap(),
            "report\n"
        );
        assert!(!r.join("reports/REPORT-2.md").exists());
        // The harness's own view is untouched: it can still write there.
        std::fs::write(r.join("reports/REPORT-2.md"), "x").unwrap();
    }
}
