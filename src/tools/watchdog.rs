//! Tools adapter: a watchdog process between harness and each command, so that no command
//! outlives the harness. In: the spawn of `bash -c` and its timeout. Out: nothing; I/O:
//! fork, waitpid, signals, between fork and exec of the command's child.
//!
//! The harness kills a command's process group on timeout, on a signal and on every exit
//! path it controls. It cannot do that when it is SIGKILLed or OOM-killed, and
//! `PR_SET_PDEATHSIG` on bash alone would leave bash's own children running. So the child that
//! the harness spawns (the leader of the command's group) forks once more: the grandchild
//! execs bash, the child stays as a watchdog that relays bash's exit status and, when the
//! harness dies (its parent-death signal) or the deadline passes, SIGKILLs the whole group,
//! itself included. It only calls async-signal-safe functions: it runs in a fork of a
//! multi-threaded process.

use std::io;
use std::time::Duration;

/// The watchdog's own deadline beyond the command's timeout: the harness normally acts first.
const BACKSTOP: Duration = Duration::from_secs(5);

/// Makes `cmd`'s child a watchdog over the command (see the module doc). Call it before any
/// other `pre_exec` (such as the sandbox's), so only the command itself is confined.
pub fn install(cmd: &mut tokio::process::Command, timeout: Duration) {
    // SAFETY: getpid is always safe.
    let harness = unsafe { libc::getpid() };
    let limit = timeout.saturating_add(BACKSTOP);
    // SAFETY: the closure runs in the forked child and calls only async-signal-safe functions
    // (sigprocmask, prctl, fork, sigtimedwait, waitpid, kill, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || split(harness, limit));
    }
}

/// In the spawned child: fork; the grandchild returns (and goes on to exec bash), the child
/// becomes the watchdog and never returns.
fn split(harness: libc::pid_t, limit: Duration) -> io::Result<()> {
    // SAFETY: plain libc calls on stack values; see `install`.
    unsafe {
        let mut watched: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut watched);
        libc::sigaddset(&mut watched, libc::SIGCHLD);
        libc::sigaddset(&mut watched, libc::SIGUSR1);
        // Blocked before the fork so that no SIGCHLD can be lost between fork and wait.
        if libc::sigprocmask(libc::SIG_BLOCK, &watched, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        let watchdog = libc::getpid();
        let pid = libc::fork();
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // The command: back to the mask it would have had, and gone with its watchdog
            // (`kill_on_drop` and a stray SIGKILL reach only the watchdog).
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != watchdog {
                libc::_exit(137);
            }
            return Ok(());
        }
        watch(harness, pid, &watched, limit)
    }
}

/// The watchdog's loop: relay `pid`'s ending, or kill the group when the harness is gone or
/// `limit` has passed.
///
/// # Safety
/// Only in a forked child, with `watched` (SIGCHLD, SIGUSR1) blocked.
unsafe fn watch(
    harness: libc::pid_t,
    pid: libc::pid_t,
    watched: &libc::sigset_t,
    limit: Duration,
) -> ! {
    // Every descriptor goes: the spawning harness waits for its exec-status pipe to close,
    // and the command's output pipe must reach EOF when the command's own processes end.
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
        for fd in 0..4096 {
            libc::close(fd);
        }
    }
    libc::prctl(
        libc::PR_SET_NAME,
        c"harness-watch".as_ptr() as libc::c_ulong,
        0,
        0,
        0,
    );
    // No core file of a fork of the harness, whatever signal is relayed.
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1, 0, 0, 0);
    // The harness may have died before the parent-death signal was armed.
    if libc::getppid() != harness {
        kill_group();
    }
    let start = now();
    loop {
        let mut status = 0;
        let r = libc::waitpid(pid, &mut status, libc::WNOHANG);
        if r == pid {
            relay(status);
        }
        if r < 0 {
            libc::_exit(127);
        }
        let left = limit.saturating_sub(now().saturating_sub(start));
        if left.is_zero() {
            kill_group();
        }
        let wait = libc::timespec {
            tv_sec: left.as_secs().min(3600) as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        let sig = libc::sigtimedwait(watched, std::ptr::null_mut(), &wait);
        if sig == libc::SIGUSR1 || libc::getppid() != harness {
            kill_group();
        }
    }
}

/// Ends the watchdog as the command ended: the same exit code, or the same signal.
unsafe fn relay(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
    libc::_exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128
    })
}

/// SIGKILLs the command's whole process group, the watchdog (its leader) included.
unsafe fn kill_group() -> ! {
    libc::kill(0, libc::SIGKILL);
    libc::_exit(137)
}

/// CLOCK_MONOTONIC, which is async-signal-safe to read.
fn now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the given timespec.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}
