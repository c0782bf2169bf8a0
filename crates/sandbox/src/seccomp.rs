//! Tools adapter: the seccomp filter that makes `network = false` mean "no sockets" and an
//! exec set mean "no program from memory". In: what the command may do ([`Refuse`]). Out: a
//! BPF program ([`command_filter`]) that each child installs between fork and exec, beside
//! its Landlock ruleset ([`install`]).
//!
//! Landlock (ABI 4-7) confines TCP connect and bind only: UDP, ICMP, raw and packet sockets
//! stay open, and with them DNS-style exfiltration. The filter refuses, with `EACCES`:
//! - `socket()` of every address family but `AF_UNIX` (an allow-list, so families added to
//!   the kernel later are refused too): `AF_INET`/`AF_INET6` (TCP, UDP, ICMP, raw),
//!   `AF_PACKET`, `AF_NETLINK` (no command needs the kernel's routing tables or audit log when
//!   it has no network, and some netlink families reach beyond the process), `AF_VSOCK` (the
//!   hypervisor), Bluetooth, CAN, `AF_XDP` and the rest;
//! - `socket(AF_UNIX)` too, unless `[tools.bash].unix_sockets` names a socket (which ones a
//!   command may then connect to is [`super::unix`]'s to hold);
//! - `io_uring_setup()`: an io_uring can create sockets without the `socket()` call.
//!
//! With `network = "allowlist"`, `socket(AF_INET)` and `socket(AF_INET6)` pass this filter:
//! the notifying filter of [`super::unix::notify`] lets them through as TCP only, and every
//! `connect` goes to the supervisor, which connects to the run's egress proxy and nothing
//! else.
//!
//! `socketpair()` stays allowed: it only makes a connected pair inside the process (shells and
//! language runtimes use it), and the kernel refuses it for internet families anyway.
//!
//! With an exec set (Landlock EXECUTE), `memfd_create()` is refused too: a memfd lives on the
//! kernel's internal tmpfs, which Landlock does not confine, so a program that copies
//! `/usr/bin/id` into one can `execve` it (`fexecve`, `/proc/self/fd/N`) past every rule.
//! Every other file a command can create lies under a path the ruleset covers.
//!
//! A program of another architecture than the harness's (a 32-bit binary on x86_64) is killed
//! at its first system call: its call numbers differ, so the filter could not judge them.
//! The x32 numbers of x86_64 are listed explicitly for the same reason.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// `__X32_SYSCALL_BIT`: x32 programs call the same functions under these numbers.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// What a command's filter refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refuse {
    /// `network = false`: every `socket()` but `AF_UNIX` and `io_uring_setup()`.
    pub sockets: bool,
    /// With `sockets`: `socket(AF_UNIX)` too (no `unix_sockets` named).
    pub unix: bool,
    /// With `sockets`: `AF_INET` and `AF_INET6` pass (`network = "allowlist"`; the
    /// notifying filter holds them to TCP and the supervisor to the proxy).
    pub inet: bool,
    /// An exec set is enforced: `memfd_create()`.
    pub memfd: bool,
}

/// The filter for `refuse`, `None` when it refuses nothing.
pub fn command_filter(refuse: Refuse) -> Result<Option<BpfProgram>> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut refuse_call = |call: i64, call_rules: Vec<SeccompRule>| {
        #[cfg(target_arch = "x86_64")]
        rules.insert(call | X32, call_rules.clone());
        rules.insert(call, call_rules);
    };
    if refuse.sockets {
        refuse_call(libc::SYS_socket, socket_rules(!refuse.unix, refuse.inet)?);
        // No rule: every call matches.
        refuse_call(libc::SYS_io_uring_setup, Vec::new());
    }
    if refuse.memfd {
        refuse_call(libc::SYS_memfd_create, Vec::new());
    }
    if rules.is_empty() {
        return Ok(None);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| anyhow!("seccomp: no filter for this architecture ({e})"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| anyhow!("seccomp: {e}"))?;
    filter
        .try_into()
        .map(Some)
        .map_err(|e: seccompiler::BackendError| anyhow!("seccomp: {e}"))
}

/// The rules under which `socket()` is refused: for every family but those allowed
/// (`AF_UNIX` with `allow_unix`, `AF_INET` and `AF_INET6` with `allow_inet`), always when
/// none is.
fn socket_rules(allow_unix: bool, allow_inet: bool) -> Result<Vec<SeccompRule>> {
    let mut allowed = Vec::new();
    if allow_unix {
        allowed.push(libc::AF_UNIX);
    }
    if allow_inet {
        allowed.extend([libc::AF_INET, libc::AF_INET6]);
    }
    if allowed.is_empty() {
        // No rule: every call matches.
        return Ok(Vec::new());
    }
    // One rule, its conditions all true: a family that is none of them.
    let conditions = allowed
        .into_iter()
        .map(|family| {
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
                .map_err(|e| anyhow!("seccomp: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![
        SeccompRule::new(conditions).map_err(|e| anyhow!("seccomp: {e}"))?
    ])
}

/// The program's instructions as bytes (native endian), as the spawner receives them.
pub(crate) fn to_bytes(filter: &BpfProgram) -> Vec<u8> {
    let program: Vec<libc::sock_filter> = filter
        .iter()
        .map(|ins| libc::sock_filter {
            code: ins.code,
            jt: ins.jt,
            jf: ins.jf,
            k: ins.k,
        })
        .collect();
    filter_bytes(&program)
}

/// A program already in the kernel's form (a hand-written one), as [`to_bytes`] gives.
pub(crate) fn filter_bytes(program: &[libc::sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for ins in program {
        out.extend_from_slice(&ins.code.to_ne_bytes());
        out.push(ins.jt);
        out.push(ins.jf);
        out.extend_from_slice(&ins.k.to_ne_bytes());
    }
    out
}

/// [`to_bytes`]'s bytes back as instructions (a trailing partial instruction is dropped).
pub fn from_bytes(bytes: &[u8]) -> Vec<libc::sock_filter> {
    bytes
        .chunks_exact(8)
        .map(|c| libc::sock_filter {
            code: u16::from_ne_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect()
}

/// Installs `filter` on the calling thread (`SECCOMP_SET_MODE_FILTER`). For the child between
/// fork and exec: one system call, no allocation; the error is the errno. Needs
/// `PR_SET_NO_NEW_PRIVS`, which the caller has set.
///
/// # Safety
/// `filter` must be a valid program (one [`socket_filter`] built).
pub unsafe fn install(filter: &[libc::sock_filter]) -> Result<(), i32> {
    let Ok(len) = libc::c_ushort::try_from(filter.len()) else {
        return Err(libc::EINVAL);
    };
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_ptr().cast_mut(),
    };
    let flags: libc::c_ulong = 0;
    if libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        flags,
        &prog as *const libc::sock_fprog,
    ) != 0
    {
        return Err(super::errno());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in a forked child with `filter` installed (through its bytes, as the spawner
    /// gets it); returns the child's exit code.
    fn in_child(filter: &BpfProgram, f: fn() -> i32) -> i32 {
        let filter = from_bytes(&to_bytes(filter));
        // SAFETY: the child only makes system calls and exits; it never returns into the test
        // harness's threads.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let code = if install(&filter).is_ok() { f() } else { 99 };
                libc::_exit(code);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::WEXITSTATUS(status)
        }
    }

    fn errno_of(fd: i32) -> i32 {
        if fd >= 0 {
            // SAFETY: closing the fd this test just opened.
            unsafe { libc::close(fd) };
            0
        } else {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        }
    }

    fn inet_udp() -> i32 {
        // SAFETY: socket() only returns an fd or -1.
        errno_of(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) })
    }
    fn inet6_tcp() -> i32 {
        // SAFETY: as above.
        errno_of(unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0) })
    }
    fn netlink() -> i32 {
        // SAFETY: as above.
        errno_of(unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) })
    }
    fn unix() -> i32 {
        // SAFETY: as above.
        errno_of(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) })
    }
    fn pair() -> i32 {
        let mut fds = [0i32; 2];
        // SAFETY: socketpair writes two fds into the array.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        if r == 0 {
            // SAFETY: closing the pair just made.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            0
        } else {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        }
    }

    fn socket_filter(allow_unix: bool) -> BpfProgram {
        command_filter(Refuse {
            sockets: true,
            unix: !allow_unix,
            inet: false,
            memfd: false,
        })
        .unwrap()
        .unwrap()
    }

    fn memfd() -> i32 {
        // SAFETY: memfd_create only returns an fd or -1.
        errno_of(unsafe { libc::memfd_create(c"x".as_ptr(), 0) })
    }

    #[test]
    fn only_unix_sockets_and_pairs_survive() {
        let strict = socket_filter(false);
        assert_eq!(in_child(&strict, inet_udp), libc::EACCES);
        assert_eq!(in_child(&strict, inet6_tcp), libc::EACCES);
        assert_eq!(in_child(&strict, netlink), libc::EACCES);
        assert_eq!(in_child(&strict, unix), libc::EACCES);
        assert_eq!(in_child(&strict, pair), 0);
        let with_unix = socket_filter(true);
        assert_eq!(in_child(&with_unix, inet_udp), libc::EACCES);
        assert_eq!(in_child(&with_unix, unix), 0);
        assert_eq!(in_child(&with_unix, pair), 0);
        assert_eq!(in_child(&with_unix, memfd), 0);
    }

    #[test]
    fn the_allowlist_lets_internet_sockets_on_to_the_notifying_filter() {
        let inet = command_filter(Refuse {
            sockets: true,
            unix: true,
            inet: true,
            memfd: false,
        })
        .unwrap()
        .unwrap();
        assert_eq!(in_child(&inet, inet6_tcp), 0);
        assert_eq!(in_child(&inet, netlink), libc::EACCES);
        assert_eq!(in_child(&inet, unix), libc::EACCES);
        assert_eq!(in_child(&inet, pair), 0);
    }

    #[test]
    fn an_exec_set_refuses_memfds_and_nothing_else() {
        let exec_only = command_filter(Refuse {
            sockets: false,
            unix: false,
            inet: false,
            memfd: true,
        })
        .unwrap()
        .unwrap();
        assert_eq!(in_child(&exec_only, memfd), libc::EACCES);
        assert_eq!(in_child(&exec_only, inet_udp), 0);
        assert_eq!(in_child(&exec_only, unix), 0);
        let both = command_filter(Refuse {
            sockets: true,
            unix: true,
            inet: false,
            memfd: true,
        })
        .unwrap()
        .unwrap();
        assert_eq!(in_child(&both, memfd), libc::EACCES);
        assert_eq!(in_child(&both, inet_udp), libc::EACCES);
        let none = Refuse {
            sockets: false,
            unix: false,
            inet: false,
            memfd: false,
        };
        assert!(command_filter(none).unwrap().is_none());
    }
}
