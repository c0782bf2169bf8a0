//! Tools adapter: the seccomp filter that sends a command's `connect` calls to the harness
//! (user notification), and the hand-over of its listener. In: nothing (the filter is
//! fixed). Out: a BPF program ([`filter`]), the child's side ([`install_and_send`]) and the
//! harness's side ([`pair`], [`recv_fd`]). I/O: seccomp, socketpair, SCM_RIGHTS.
//!
//! seccompiler has no `SECCOMP_RET_USER_NOTIF` action, so this small program is written by
//! hand. It stacks on the socket filter of [`crate::seccomp`] (the kernel
//! takes the strictest answer of all filters) and says:
//! - `connect`: ask the harness (`SECCOMP_RET_USER_NOTIF`); with no harness listening the
//!   kernel answers `ENOSYS`, so a missing supervisor fails closed;
//! - `socket`/`socketpair` of `AF_UNIX` with any type but `SOCK_STREAM` and `SOCK_SEQPACKET`:
//!   `EACCES`. A datagram's `sendto`/`sendmsg` names its receiver in memory the filter cannot
//!   read (and `SOCK_RAW` is a datagram socket for `AF_UNIX`); stream and seqpacket sockets
//!   ignore or refuse an address on send, so `connect` is their only way out;
//! - on x86_64, the x32 numbers of those three calls: `EACCES`;
//! - a foreign architecture: the process is killed (its call numbers differ).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// The filter program, shared by the commands of a run.
pub type Program = Arc<Vec<libc::sock_filter>>;

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// `struct seccomp_data` offsets: nr, arch, then args[6] of 8 bytes from 16.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument `i`.
const fn arg_lo(i: u32) -> u32 {
    if cfg!(target_endian = "little") {
        16 + 8 * i
    } else {
        16 + 8 * i + 4
    }
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const SOCK_TYPE_MASK: u32 = 0xf;

/// One instruction with symbolic jump targets, resolved by [`assemble`].
enum Op {
    Load(u32),
    And(u32),
    /// Compare A with k: on equal go to the first label, else to the second (None: next).
    Jeq(u32, &'static str, Option<&'static str>),
    Ret(u32),
    Label(&'static str),
}

/// The program of `ops`, labels resolved (jumps only go forward).
fn assemble(ops: &[Op]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for op in ops {
        match op {
            Op::Label(name) => {
                at.insert(*name, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for op in ops {
        let here = out.len();
        // Jumps only go forward; a label is always defined below its use.
        let off = |label: &str| (at.get(label).copied().unwrap_or(here + 1) - here - 1) as u8;
        let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        match op {
            Op::Label(_) => continue,
            Op::Load(k) => out.push(insn(LD_W_ABS, 0, 0, *k)),
            Op::And(k) => out.push(insn(AND_K, 0, 0, *k)),
            Op::Jeq(k, t, f) => out.push(insn(JEQ_K, off(t), f.map_or(0, off), *k)),
            Op::Ret(k) => out.push(insn(RET_K, 0, 0, *k)),
        }
    }
    out
}

/// A filter's start: a foreign architecture is killed (its call numbers differ), the call
/// number loaded for what follows.
fn prelude() -> Vec<Op> {
    vec![
        Op::Load(ARCH),
        Op::Jeq(AUDIT_ARCH, "native", None),
        Op::Ret(RET_KILL_PROCESS),
        Op::Label("native"),
        Op::Load(NR),
    ]
}

/// Receives one notification from `listener`; `None` when its caller is gone (`ENOENT`) or
/// the wait was interrupted.
pub(crate) fn receive(listener: &OwnedFd) -> Option<libc::seccomp_notif> {
    // SAFETY: a zeroed request the kernel fills in.
    let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the listener is a seccomp notify fd and the buffer is its request type.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut req,
        )
    };
    (r == 0).then_some(req)
}

/// Answers notification `id`: `error` (0 or a negated errno) and `flags`
/// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE` lets the call go on). A caller gone meanwhile is fine.
pub(crate) fn respond(listener: &OwnedFd, id: u64, error: i32, flags: u32) {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error,
        flags,
    };
    // SAFETY: the listener is a seccomp notify fd and the buffer is its response type.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp,
        )
    };
}

/// The filter (see the module doc), as the tests install it.
#[cfg(test)]
fn filter() -> Program {
    Arc::new(program(true, false, None))
}

/// `MSG_FASTOPEN`: a `sendto`/`sendmsg` with it connects a TCP socket without `connect`.
const MSG_FASTOPEN: u32 = 0x2000_0000;

/// One notifying program: with `unix`, the Unix-socket rules of the module doc; with `tcp`
/// (`network = "allowlist"`), `connect` to the listener too, `socket` of `AF_INET` and
/// `AF_INET6` only as TCP (`SOCK_STREAM`, protocol 0 or `IPPROTO_TCP`: no UDP, no raw, no
/// ICMP), no `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (a TCP connect the
/// supervisor would not see) and no `listen` (a socket that listens is bound to a port on
/// every address, whatever Landlock's bind rule says, and takes connections from outside); with `exec_pass`, `execve` and `execveat` to the listener
/// too, but an `execveat` whose descriptor argument is the pass (the spawner's own start
/// of a command: see `sandbox::loader`). They share a program because a process can hold
/// only one listener in its filter tree (the kernel refuses a second with `EBUSY`).
pub(crate) fn program(unix: bool, tcp: bool, exec_pass: Option<u32>) -> Vec<libc::sock_filter> {
    let deny = RET_ERRNO | libc::EACCES as u32;
    let mut ops = prelude();
    ops.extend(by_call(unix, tcp, exec_pass));
    ops.extend(by_argument(/*sockets*/ unix || tcp, tcp, exec_pass));
    ops.extend([
        Op::Label("deny"),
        Op::Ret(deny),
        Op::Label("allow"),
        Op::Ret(RET_ALLOW),
        Op::Label("notify"),
        Op::Ret(libc::SECCOMP_RET_USER_NOTIF),
    ]);
    assemble(&ops)
}

/// The first half of [`program`], on the call number loaded by [`prelude`]: each call it
/// judges goes to its label (`notify`, or a check of its arguments in [`by_argument`]),
/// the x32 numbers of those calls to `deny`, and every other call is allowed.
fn by_call(unix: bool, tcp: bool, exec_pass: Option<u32>) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut x32: Vec<i64> = Vec::new();
    if exec_pass.is_some() {
        ops.push(Op::Jeq(libc::SYS_execve as u32, "notify", None));
        ops.push(Op::Jeq(libc::SYS_execveat as u32, "at", None));
        // x32's own execve and execveat numbers.
        x32.extend([520, 545]);
    }
    if unix || tcp {
        ops.extend([
            Op::Jeq(libc::SYS_connect as u32, "notify", None),
            Op::Jeq(libc::SYS_socket as u32, "family", None),
            Op::Jeq(libc::SYS_socketpair as u32, "family", None),
        ]);
        x32.extend([libc::SYS_connect, libc::SYS_socket, libc::SYS_socketpair]);
    }
    if tcp {
        ops.extend([
            Op::Jeq(libc::SYS_sendto as u32, "flags3", None),
            Op::Jeq(libc::SYS_sendmmsg as u32, "flags3", None),
            Op::Jeq(libc::SYS_sendmsg as u32, "flags2", None),
            // A server of the command's own would take connections from outside the host.
            Op::Jeq(libc::SYS_listen as u32, "deny", None),
        ]);
        // sendto and listen are shared with x32; its sendmsg and sendmmsg have numbers of
        // their own.
        x32.extend([libc::SYS_sendto, libc::SYS_listen, 518, 538]);
    }
    #[cfg(target_arch = "x86_64")]
    {
        const X32: u32 = 0x4000_0000;
        for nr in &x32 {
            ops.push(Op::Jeq(X32 | *nr as u32, "deny", None));
        }
    }
    ops.push(Op::Ret(RET_ALLOW));
    ops
}

/// The second half of [`program`]: the labels [`by_call`] jumps to that read an argument
/// (`execveat`'s descriptor, a socket's family, type and protocol, a send's flags), each
/// ending in `allow`, `deny` or `notify`.
fn by_argument(sockets: bool, tcp: bool, exec_pass: Option<u32>) -> Vec<Op> {
    let mut ops = Vec::new();
    if let Some(pass) = exec_pass {
        ops.extend([
            Op::Label("at"),
            Op::Load(arg_lo(0)),
            Op::Jeq(pass, "allow", Some("notify")),
        ]);
    }
    if sockets {
        ops.extend([Op::Label("family"), Op::Load(arg_lo(0))]);
        ops.push(Op::Jeq(libc::AF_UNIX as u32, "type", None));
        if tcp {
            ops.push(Op::Jeq(libc::AF_INET as u32, "inet", None));
            ops.push(Op::Jeq(libc::AF_INET6 as u32, "inet", None));
        }
        ops.extend([
            // Other families are the socket filter's and the kernel's to refuse.
            Op::Ret(RET_ALLOW),
            Op::Label("type"),
            Op::Load(arg_lo(1)),
            Op::And(SOCK_TYPE_MASK),
            Op::Jeq(libc::SOCK_STREAM as u32, "allow", None),
            Op::Jeq(libc::SOCK_SEQPACKET as u32, "allow", Some("deny")),
        ]);
    }
    if tcp {
        ops.extend([
            Op::Label("inet"),
            Op::Load(arg_lo(1)),
            Op::And(SOCK_TYPE_MASK),
            Op::Jeq(libc::SOCK_STREAM as u32, "protocol", Some("deny")),
            Op::Label("protocol"),
            Op::Load(arg_lo(2)),
            Op::Jeq(0, "allow", None),
            Op::Jeq(libc::IPPROTO_TCP as u32, "allow", Some("deny")),
            Op::Label("flags3"),
            Op::Load(arg_lo(3)),
            Op::And(MSG_FASTOPEN),
            Op::Jeq(0, "allow", Some("deny")),
            Op::Label("flags2"),
            Op::Load(arg_lo(2)),
            Op::And(MSG_FASTOPEN),
            Op::Jeq(0, "allow", Some("deny")),
        ]);
    }
    ops
}

/// The child's end of the socketpair the listener travels over, and the filter to install.
#[derive(Debug)]
pub(crate) struct ChildEnd {
    fd: OwnedFd,
    program: Program,
}

impl ChildEnd {
    /// The descriptor the child sends its listener over.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The same, borrowed (to pass it to the command spawner).
    pub fn borrowed(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// The filter the child installs.
    pub fn program(&self) -> &[libc::sock_filter] {
        &self.program
    }
}

/// A socketpair for one command: the harness's end and the child's. Both are close-on-exec:
/// the command never holds either.
pub(crate) fn pair(program: &Program) -> std::io::Result<(OwnedFd, ChildEnd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two fds into the array or fails.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just made and belong to no one else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((
        ours,
        ChildEnd {
            fd: theirs,
            program: Arc::clone(program),
        },
    ))
}

/// In the child between fork and exec (after `PR_SET_NO_NEW_PRIVS`): installs `program`
/// with a new listener and sends the listener over `sock`, then closes it. Raw system calls
/// only, no allocation.
pub(crate) fn install_and_send(sock: RawFd, program: &[libc::sock_filter]) -> std::io::Result<()> {
    let listener = install(program)?;
    let sent = send_fd(sock, listener);
    // SAFETY: the listener is ours; the harness holds its own copy now.
    unsafe { libc::close(listener) };
    sent
}

/// Installs `program` with `SECCOMP_FILTER_FLAG_NEW_LISTENER`; returns the listener fd.
pub fn install(program: &[libc::sock_filter]) -> std::io::Result<RawFd> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: the program outlives the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd as RawFd)
}

/// Room for one fd's control message, aligned for `cmsghdr`.
type ControlBuf = [u64; 4];

/// Calls `f` with a one-byte message whose control buffer (aligned, room for one fd) is
/// `control_len` bytes long. Everything lives on this stack frame: no allocation.
fn with_message<R>(control_len: usize, f: impl FnOnce(&mut libc::msghdr) -> R) -> R {
    let mut byte = [0u8; 1];
    let mut control: ControlBuf = [0; 4];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: msghdr is plain data; zeroed is "no name, no flags".
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control_len.min(std::mem::size_of::<ControlBuf>()) as _;
    f(&mut msg)
}

/// Sends `fd` over the Unix socket `sock` (one byte of data, the fd as SCM_RIGHTS).
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> std::io::Result<()> {
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    with_message(space, |msg| {
        // SAFETY: the message's buffers live in with_message's frame; the control buffer
        // holds CMSG_SPACE(4) bytes, so the first header and its data fit.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
            if libc::sendmsg(sock, msg, libc::MSG_NOSIGNAL) != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    })
}

/// Receives one fd sent by [`send_fd`] (close-on-exec). `None`: the other end closed without
/// sending (the child failed before its filter, or exec'd without one).
pub(crate) fn recv_fd(sock: &OwnedFd) -> std::io::Result<Option<OwnedFd>> {
    with_message(std::mem::size_of::<ControlBuf>(), |msg| {
        // SAFETY: as in send_fd; the fd read from the control message is new and ours.
        unsafe {
            let n = libc::recvmsg(sock.as_raw_fd(), msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            if n == 0 || cmsg.is_null() {
                return Ok(None);
            }
            if (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
                return Ok(None);
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
            Ok(Some(OwnedFd::from_raw_fd(fd)))
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn errno_or_zero(r: i32) -> i32 {
        if r >= 0 {
            0
        } else {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        }
    }

    /// Forks a child that installs the filter, sends its listener over a socketpair and runs
    /// `f`, exiting with its result. Returns the child's pid and the listener (None: the
    /// child failed before sending it).
    pub(crate) fn child_under_filter(f: fn() -> i32) -> (libc::pid_t, Option<OwnedFd>) {
        child_under(&filter(), f)
    }

    /// [`child_under_filter`] with another notifying program.
    fn child_under(program: &Program, f: fn() -> i32) -> (libc::pid_t, Option<OwnedFd>) {
        let (ours, end) = pair(program).unwrap();
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: in the forked child.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                let code = if install_and_send(end.fd(), end.program()).is_ok() {
                    f()
                } else {
                    99
                };
                libc::_exit(code);
            }
        }
        drop(end);
        (pid, recv_fd(&ours).unwrap())
    }

    pub(crate) fn exit_code(pid: libc::pid_t) -> i32 {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        libc::WEXITSTATUS(status)
    }

    fn socket_of(ty: i32) -> i32 {
        // SAFETY: socket() returns an fd or -1.
        errno_or_zero(unsafe { libc::socket(libc::AF_UNIX, ty, 0) })
    }
    fn pair_of(ty: i32) -> i32 {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes into the array.
        errno_or_zero(unsafe { libc::socketpair(libc::AF_UNIX, ty, 0, fds.as_mut_ptr()) })
    }

    fn sockets() -> i32 {
        let results = [
            socket_of(libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            socket_of(libc::SOCK_SEQPACKET),
            socket_of(libc::SOCK_DGRAM),
            socket_of(libc::SOCK_DGRAM | libc::SOCK_NONBLOCK),
            socket_of(libc::SOCK_RAW),
            pair_of(libc::SOCK_STREAM),
            pair_of(libc::SOCK_DGRAM),
        ];
        let want = [
            0,
            0,
            libc::EACCES,
            libc::EACCES,
            libc::EACCES,
            0,
            libc::EACCES,
        ];
        if results == want {
            0
        } else {
            1
        }
    }

    fn connect_somewhere() -> i32 {
        // SAFETY: a stream socket and a connect to an address on the stack.
        unsafe {
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as u16;
            addr.sun_path[0] = b'/' as libc::c_char;
            let r = libc::connect(
                s,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            );
            errno_or_zero(r)
        }
    }

    fn inet_of(family: i32, ty: i32, protocol: i32) -> i32 {
        // SAFETY: socket() returns an fd or -1.
        errno_or_zero(unsafe { libc::socket(family, ty, protocol) })
    }

    /// Under the allowlist's program: TCP sockets only, and no Fast Open send.
    fn tcp_only() -> i32 {
        let results = [
            inet_of(libc::AF_INET, libc::SOCK_STREAM, 0),
            inet_of(
                libc::AF_INET6,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
                libc::IPPROTO_TCP,
            ),
            inet_of(libc::AF_INET, libc::SOCK_DGRAM, 0),
            inet_of(libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_UDP),
            inet_of(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
            inet_of(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        ];
        let want = [0, 0, libc::EACCES, libc::EACCES, libc::EACCES, libc::EACCES];
        // SAFETY: a TCP socket and sends of one byte from the stack, to an address on it.
        let (fast, plain) = unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as u16;
            addr.sin_port = 9u16.to_be();
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let send = |flags: i32| {
                errno_or_zero(libc::sendto(
                    s,
                    [0u8].as_ptr().cast(),
                    1,
                    flags,
                    (&addr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                ) as i32)
            };
            (send(libc::MSG_FASTOPEN), send(libc::MSG_NOSIGNAL))
        };
        // SAFETY: a new TCP socket, listened on.
        let listen = unsafe {
            errno_or_zero(libc::listen(
                libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0),
                1,
            ))
        };
        if results == want
            && fast == libc::EACCES
            && plain != libc::EACCES
            && listen == libc::EACCES
        {
            0
        } else {
            1
        }
    }

    #[test]
    fn the_allowlist_program_lets_tcp_sockets_only_no_fast_open_no_listen() {
        let (pid, listener) = child_under(&Arc::new(program(true, true, None)), tcp_only);
        assert!(listener.is_some());
        assert_eq!(exit_code(pid), 0);
    }

    #[test]
    fn datagram_unix_sockets_are_refused_stream_ones_pass() {
        let (pid, listener) = child_under_filter(sockets);
        assert!(listener.is_some());
        assert_eq!(exit_code(pid), 0);
    }

    #[test]
    fn connect_waits_for_the_harness_and_fails_closed_without_it() {
        let (pid, listener) = child_under_filter(connect_somewhere);
        let listener = listener.unwrap();
        // SAFETY: a zeroed request buffer and a response for the id it carries.
        unsafe {
            let mut req: libc::seccomp_notif = std::mem::zeroed();
            assert_eq!(
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    &mut req
                ),
                0
            );
            assert_eq!(i64::from(req.data.nr), libc::SYS_connect);
            let mut resp = libc::seccomp_notif_resp {
                id: req.id,
                val: 0,
                error: -libc::ECONNABORTED,
                flags: 0,
            };
            assert_eq!(
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_SEND,
                    &mut resp
                ),
                0
            );
        }
        assert_eq!(exit_code(pid), libc::ECONNABORTED);
        // No one listening: the kernel answers ENOSYS.
        let (pid, listener) = child_under_filter(connect_somewhere);
        drop(listener);
        assert_eq!(exit_code(pid), libc::ENOSYS);
    }
}
