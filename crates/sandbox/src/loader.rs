//! Tools adapter: the loader guard. Under an exec set the dynamic loader must stay executable
//! (the kernel opens it, with Landlock's EXECUTE check, to start every dynamic program), but
//! run as a program itself it maps any readable file without an `execve`
//! (`/lib64/ld-linux-x86-64.so.2 /usr/bin/id`), past every exec rule: a Makefile recipe or a
//! git hook could run anything through it. Landlock cannot tell the two opens apart. So a
//! seccomp filter ([`filter`]), installed once per run on the command spawner (every command
//! inherits it), sends each `execve`/`execveat` to a thread of the harness ([`Guard`]), which
//! refuses (`EACCES`) those whose file is a loader (same device and inode), named directly or
//! as the `#!` interpreter of a script (up to the kernel's four levels), and lets every other
//! call go on. In: the listener, the loaders. Out: answers to the kernel, a warning per
//! refusal. I/O: seccomp ioctls, `process_vm_readv`, /proc, reading `#!` lines.
//!
//! What it cannot see: the kernel reads the path again after the answer, so a program with a
//! second thread, or a second process flipping a symlink or renaming a hard link inside a
//! write root, could race the check. Such a program already runs code of its own choosing;
//! the programs the guard is for (`sh`, `make`, `find`, `xargs`, git's helpers) make one
//! `execve` at a time from a path they do not change.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::unix::notify;

/// The longest path the kernel takes (`PATH_MAX`, its NUL included).
const PATH_MAX: usize = 4096;
/// The kernel follows at most this many `#!` interpreters (`BINPRM_MAX_RECURSION`).
const MAX_SCRIPT_LEVELS: usize = 4;
/// How much of a `#!` line the kernel reads (`BINPRM_BUF_SIZE`).
const SHEBANG_MAX: usize = 256;

/// A random directory-descriptor value no real descriptor has (`0x4000_0000` and up): the
/// spawner's child starts its program with `execveat(pass, /absolute/path, ...)` (the kernel
/// ignores the descriptor of an absolute path) and [`filter`] lets exactly that through
/// unasked. That exec is the harness's own (the program it resolved), and the guard could
/// not read it anyway: the child shares the spawner's memory, which is not dumpable. A
/// command would have to guess 2^30 values, one `execveat` each, to use it.
pub fn pass() -> u32 {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom fills the local buffer (or fails, leaving a fixed but still unknown
    // value to the command: it cannot read the filter).
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    0x4000_0000 | (u32::from_ne_bytes(bytes) & 0x3fff_ffff)
}

/// The filter: `execve` and `execveat` to the listener (but the spawner's own `execveat`
/// with [`pass`]), their x32 numbers refused, a foreign architecture killed, everything else
/// allowed. It stacks on the command's own filters (the kernel takes the strictest answer).
pub fn filter(pass: u32) -> Vec<libc::sock_filter> {
    notify::program(false, false, Some(pass))
}

/// The device and inode of each loader: what [`decide`] refuses.
pub(crate) fn ids(loaders: &[PathBuf]) -> Vec<(u64, u64)> {
    loaders
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// The harness's handle on the guard's thread; dropping it stops the thread (and with the
/// listener gone, a later `execve` of a command fails with `ENOSYS`: closed, not open).
#[derive(Debug)]
pub struct Guard {
    /// The write end of the wake pipe; closing it stops the thread.
    _stop: OwnedFd,
}

impl Guard {
    /// Starts answering `listener`'s notifications, refusing `loaders`.
    pub fn start(listener: OwnedFd, loaders: &[PathBuf]) -> Result<Guard> {
        let ids = ids(loaders);
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two fds into the array or fails.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("loader guard: no pipe");
        }
        // SAFETY: both fds are new and ours.
        let (stop_r, stop_w) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        std::thread::Builder::new()
            .name("loader-guard".to_string())
            .spawn(move || run(&listener, &ids, &stop_r))
            .context("loader guard: cannot start its thread")?;
        Ok(Guard { _stop: stop_w })
    }
}

fn run(listener: &OwnedFd, loaders: &[(u64, u64)], stop: &OwnedFd) {
    loop {
        let mut polls = [
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds, as declared.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if polls[0].revents != 0 {
            return; // The harness dropped its handle.
        }
        if polls[1].revents & libc::POLLIN != 0 {
            answer(listener, loaders);
        }
    }
}

/// Receives one notification and answers it.
fn answer(listener: &OwnedFd, loaders: &[(u64, u64)]) {
    let Some(req) = notify::receive(listener) else {
        return;
    };
    let (error, flags) = decide(&req, loaders);
    notify::respond(listener, req.id, error, flags);
}

/// The answer to an `execve`/`execveat` notification: `(0, CONTINUE)` to let it go on, or
/// `(-EACCES, 0)` with a warning.
pub(crate) fn decide(req: &libc::seccomp_notif, loaders: &[(u64, u64)]) -> (i32, u32) {
    match judge(req, loaders) {
        Ok(()) => (0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Err(Refused::Unseen) => {
            tracing::warn!(
                "sandbox: refused an execve whose path harness cannot read (a process it may not inspect)"
            );
            (-libc::EACCES, 0)
        }
        Err(Refused::Loader(path)) => {
            tracing::warn!(
                "sandbox: refused running the dynamic loader as a program ({path}): it would load programs past the exec set"
            );
            (-libc::EACCES, 0)
        }
    }
}

enum Refused {
    /// The path could not be read: `EACCES`, and a warning.
    Unseen,
    /// The file (or a `#!` interpreter on the way) is a loader: `EACCES` and a warning.
    Loader(String),
}

/// Whether the caller of `req` may go on with its `execve`/`execveat`.
fn judge(req: &libc::seccomp_notif, loaders: &[(u64, u64)]) -> Result<(), Refused> {
    let pid = req.pid as libc::pid_t;
    let args = req.data.args;
    let (dirfd, name_at, flags) = if i64::from(req.data.nr) == libc::SYS_execveat {
        (args[0] as i32, args[1], args[4] as i32)
    } else {
        (libc::AT_FDCWD, args[0], 0)
    };
    // Unreadable: a process harness may not inspect (one that ran an execute-only program
    // is not dumpable) or a bad pointer. Closed, not open.
    let name = read_c_string(pid, name_at).ok_or(Refused::Unseen)?;
    let Some(mut file) = seen_from(pid, dirfd, &name, flags) else {
        // The kernel will not find it either (or finds something else only by a race: see
        // the module doc).
        return Ok(());
    };
    for _ in 0..=MAX_SCRIPT_LEVELS {
        let Ok(meta) = std::fs::metadata(&file) else {
            return Ok(());
        };
        if loaders.contains(&(meta.dev(), meta.ino())) {
            return Err(Refused::Loader(String::from_utf8_lossy(&name).into_owned()));
        }
        // Only a regular file is run (the kernel refuses the rest with EACCES), and only one
        // may be opened here: a FIFO would block the guard.
        if !meta.is_file() {
            return Ok(());
        }
        match interpreter(&file) {
            Some(interp) => file = seen_from(pid, libc::AT_FDCWD, &interp, 0).unwrap_or_default(),
            None => return Ok(()),
        }
    }
    Ok(())
}

/// The path, in the harness's view, of `name` as the command resolves it: through its root,
/// its work dir or the directory `dirfd` (all /proc magic links into its mount namespace).
/// `None` for an empty name without `AT_EMPTY_PATH`.
fn seen_from(pid: libc::pid_t, dirfd: i32, name: &[u8], flags: i32) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(name);
    let rel = Path::new(name);
    if rel.as_os_str().is_empty() {
        return (flags & libc::AT_EMPTY_PATH != 0 && dirfd >= 0)
            .then(|| PathBuf::from(format!("/proc/{pid}/fd/{dirfd}")));
    }
    let base = if rel.is_absolute() {
        format!("/proc/{pid}/root")
    } else if dirfd == libc::AT_FDCWD {
        format!("/proc/{pid}/cwd")
    } else {
        format!("/proc/{pid}/fd/{dirfd}")
    };
    let mut path = PathBuf::from(base);
    path.push(rel.strip_prefix("/").unwrap_or(rel));
    Some(path)
}

/// The interpreter a `#!` line names, as the kernel reads it (the first word after `#!`,
/// blanks skipped, within the first 256 bytes).
fn interpreter(file: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut head = [0u8; SHEBANG_MAX];
    // Non-blocking: the file was regular when looked at, but a command could swap in a FIFO.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(file)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    shebang_interpreter(&head[..n])
}

/// See [`interpreter`]. PURE.
fn shebang_interpreter(head: &[u8]) -> Option<Vec<u8>> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let word: Vec<u8> = line
        .iter()
        .copied()
        .skip_while(|b| *b == b' ' || *b == b'\t')
        .take_while(|b| !matches!(b, b' ' | b'\t' | 0))
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The NUL-terminated string at `addr` in `pid`'s memory, read page by page (the string may
/// end just before an unmapped page); `None` when it cannot be read or runs past `PATH_MAX`.
fn read_c_string(pid: libc::pid_t, addr: u64) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < PATH_MAX {
        let chunk = ((PAGE - at % PAGE) as usize).min(PATH_MAX - out.len());
        let mut buf = vec![0u8; chunk];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: chunk,
        };
        let remote = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: chunk,
        };
        // SAFETY: the local iovec covers our buffer; the remote one is only read by the kernel.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return None;
        }
        let got = &buf[..n as usize];
        if let Some(end) = got.iter().position(|b| *b == 0) {
            out.extend_from_slice(&got[..end]);
            return Some(out);
        }
        out.extend_from_slice(got);
        at += n as u64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_is_the_first_word_of_a_shebang_line() {
        assert_eq!(
            shebang_interpreter(b"#!/bin/sh\necho"),
            Some(b"/bin/sh".to_vec())
        );
        assert_eq!(
            shebang_interpreter(b"#! \t/lib64/ld-linux-x86-64.so.2 /usr/bin/id\n"),
            Some(b"/lib64/ld-linux-x86-64.so.2".to_vec())
        );
        assert_eq!(shebang_interpreter(b"#!\n"), None);
        assert_eq!(shebang_interpreter(b"\x7fELF"), None);
    }

    #[test]
    fn paths_are_seen_through_the_caller_s_proc_links() {
        assert_eq!(
            seen_from(7, libc::AT_FDCWD, b"/usr/bin/id", 0),
            Some(PathBuf::from("/proc/7/root/usr/bin/id"))
        );
        assert_eq!(
            seen_from(7, libc::AT_FDCWD, b"./x", 0),
            Some(PathBuf::from("/proc/7/cwd/./x"))
        );
        assert_eq!(
            seen_from(7, 5, b"bin/x", 0),
            Some(PathBuf::from("/proc/7/fd/5/bin/x"))
        );
        assert_eq!(
            seen_from(7, 5, b"", libc::AT_EMPTY_PATH),
            Some(PathBuf::from("/proc/7/fd/5"))
        );
        assert_eq!(seen_from(7, 5, b"", 0), None);
    }

    fn loader() -> Option<PathBuf> {
        ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    }

    const PASS: u32 = 0x4abc_d123;

    /// A forked child under the filter that runs `argv` with `execv` (or `execveat` with the
    /// descriptor value `at`) and exits with 100 + errno when it is refused; the guard
    /// answers for it.
    fn run_guarded(argv: &[&str]) -> i32 {
        run_guarded_at(argv, None)
    }

    fn run_guarded_at(argv: &[&str], at: Option<u32>) -> i32 {
        let loaders = vec![loader().unwrap()];
        let program = std::sync::Arc::new(filter(PASS));
        let (ours, end) = notify::pair(&program).unwrap();
        let c: Vec<std::ffi::CString> = argv
            .iter()
            .map(|a| std::ffi::CString::new(*a).unwrap())
            .collect();
        let mut ptrs: Vec<*const libc::c_char> = c.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: as above.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                libc::dup2(null, 1);
                if notify::install_and_send(end.fd(), end.program()).is_err() {
                    libc::_exit(99);
                }
                match at {
                    Some(fd) => {
                        let no_env: [*const libc::c_char; 1] = [std::ptr::null()];
                        libc::syscall(
                            libc::SYS_execveat,
                            fd as libc::c_int,
                            ptrs[0],
                            ptrs.as_ptr(),
                            no_env.as_ptr(),
                            0,
                        );
                    }
                    None => {
                        libc::execv(ptrs[0], ptrs.as_ptr());
                    }
                }
                libc::_exit(100 + *libc::__errno_location());
            }
        }
        drop(end);
        let listener = notify::recv_fd(&ours).unwrap().unwrap();
        let _guard = Guard::start(listener, &loaders).unwrap();
        notify::tests::exit_code(pid)
    }

    #[test]
    fn the_loader_runs_no_program_but_programs_run() {
        if loader().is_none() {
            return;
        }
        assert_eq!(run_guarded(&["/bin/true"]), 0);
        let l = loader().unwrap();
        let l = l.to_str().unwrap();
        assert_eq!(run_guarded(&[l, "/bin/true"]), 100 + libc::EACCES);
        // A script whose interpreter is the loader is the loader too.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, format!("#!{l} /bin/true\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(run_guarded(&[script.to_str().unwrap()]), 100 + libc::EACCES);
        // A script of another interpreter runs.
        std::fs::write(&script, "#!/bin/sh\nexit 3\n").unwrap();
        assert_eq!(run_guarded(&[script.to_str().unwrap()]), 3);
        // A FIFO is refused by the kernel, and never opened (it would block) by the guard.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o755) }, 0);
        assert_eq!(run_guarded(&[fifo.to_str().unwrap()]), 100 + libc::EACCES);
    }

    #[test]
    fn only_the_pass_lets_an_execveat_through_unasked() {
        if loader().is_none() {
            return;
        }
        let l = loader().unwrap();
        let l = l.to_str().unwrap();
        // The spawner's own start: not judged (it names what harness resolved).
        assert_eq!(run_guarded_at(&[l, "/bin/true"], Some(PASS)), 0);
        // Any other descriptor value is judged like execve.
        assert_eq!(
            run_guarded_at(&[l, "/bin/true"], Some(PASS + 1)),
            100 + libc::EACCES
        );
        assert_eq!(
            run_guarded_at(&["/bin/true"], Some(libc::AT_FDCWD as u32)),
            0
        );
        assert!(pass() >= 0x4000_0000 && pass() <= 0x7fff_ffff);
    }
}
