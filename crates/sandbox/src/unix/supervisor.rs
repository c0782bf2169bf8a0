//! Tools adapter: the seccomp supervisor, one thread per run that answers the `connect` calls
//! of its commands. In: the socket names, each command's listener (over the socketpair of
//! [`super::notify::pair`]). Out: answers to the kernel (0 or an errno), a warning on stderr
//! per refusal. I/O: poll, seccomp ioctls, `process_vm_readv`, /proc, pidfds, `connect`.
//!
//! The supervisor never lets the command's own `connect` go on
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the kernel would read the address again from memory
//! the command can change after the check. It acts on the command's behalf instead: it pins
//! the socket file the address names (opened `O_PATH` in the command's root), checks that
//! file is a named socket (same device and inode as a name in `unix_sockets`, looked up
//! now), takes the command's socket (`pidfd_getfd`) and connects that very socket to the
//! pinned file (`/proc/self/fd/N`). The command then sees the result of that connect.
//! Everything else is refused with `EACCES`; when the harness is gone, the kernel answers
//! `ENOSYS`. A connect that blocks (a full backlog on a blocking socket) holds the
//! supervisor for that time.
//!
//! Under `network = "allowlist"` ([`TcpGuard`]) a TCP `connect` is answered the same way:
//! when the address read is the run's egress proxy, the supervisor connects the command's
//! socket to the proxy's address as it knows it (never as read again from the command's
//! memory); any other address is refused with `EACCES` and reported to the proxy's log.

use std::ffi::CString;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::notify::{self, ChildEnd, Program};
use super::{judge, parse_address, Address, Decision};
use crate::settings::SocketName;

/// The harness's handle on a run's supervisor thread; dropping it stops the thread (and
/// with it every listener: later `connect` calls fail with `ENOSYS`).
#[derive(Debug)]
pub(crate) struct Supervisor {
    queue: Arc<Mutex<Vec<OwnedFd>>>,
    /// The write end of the wake pipe; closing it stops the thread.
    wake: OwnedFd,
    program: Program,
}

/// The answer to an `execve`/`execveat` notification (the loader guard's `decide`).
pub(crate) type ExecJudge = Arc<dyn Fn(&libc::seccomp_notif) -> (i32, u32) + Send + Sync>;

/// Under an exec set: the loader guard's part, which this supervisor takes on (a process can
/// hold one listener only, so the two cannot be separate filters).
#[derive(Clone)]
pub(crate) struct ExecGuard {
    /// The spawner's `execveat` pass (`sandbox::loader::pass`).
    pub pass: u32,
    /// How an `execve` is answered.
    pub judge: ExecJudge,
}

/// Under `network = "allowlist"`: the one TCP address commands may connect to, and who
/// hears of every other one.
#[derive(Clone)]
pub struct TcpGuard {
    /// The run's egress proxy.
    pub proxy: SocketAddrV4,
    /// Told of each refused address (the proxy's log).
    pub refused: Arc<dyn Fn(SocketAddr) + Send + Sync>,
}

impl std::fmt::Debug for TcpGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpGuard")
            .field("proxy", &self.proxy)
            .finish()
    }
}

impl Supervisor {
    /// Starts the thread for commands that may connect to `names` (and, with `exec`, whose
    /// `execve` calls it judges as the loader guard does; with `tcp`, to the egress proxy).
    pub fn start(
        names: Vec<SocketName>,
        exec: Option<ExecGuard>,
        tcp: Option<TcpGuard>,
    ) -> Result<Supervisor> {
        let (wake_r, wake_w) = pipe().context("supervisor: cannot create its wake pipe")?;
        let queue = Arc::new(Mutex::new(Vec::new()));
        let theirs = Arc::clone(&queue);
        let program = Arc::new(notify::program(
            true,
            tcp.is_some(),
            exec.as_ref().map(|e| e.pass),
        ));
        let judge = exec.map(|e| e.judge);
        std::thread::Builder::new()
            .name("unix-sockets".to_string())
            .spawn(move || run(&names, tcp.as_ref(), judge.as_ref(), &theirs, &wake_r))
            .context("supervisor: cannot start its thread")?;
        Ok(Supervisor {
            queue,
            wake: wake_w,
            program,
        })
    }

    /// A socketpair for one command: the harness's end goes to the thread, the child's end
    /// is returned for the child's step.
    pub(crate) fn child_end(&self) -> std::io::Result<ChildEnd> {
        let (ours, theirs) = notify::pair(&self.program)?;
        match self.queue.lock() {
            Ok(mut q) => q.push(ours),
            Err(poisoned) => poisoned.into_inner().push(ours),
        }
        // SAFETY: a one-byte write to our own pipe.
        unsafe { libc::write(self.wake.as_raw_fd(), [0u8].as_ptr().cast(), 1) };
        Ok(theirs)
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two fds into the array or fails.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

enum Watched {
    /// The harness's end of a command's socketpair: its listener is still to come.
    Pending(OwnedFd),
    Listener(OwnedFd),
}

impl Watched {
    fn fd(&self) -> RawFd {
        match self {
            Watched::Pending(fd) | Watched::Listener(fd) => fd.as_raw_fd(),
        }
    }
}

/// The thread: polls the wake pipe, the pending socketpairs and the listeners.
fn run(
    names: &[SocketName],
    tcp: Option<&TcpGuard>,
    exec: Option<&ExecJudge>,
    queue: &Mutex<Vec<OwnedFd>>,
    wake: &OwnedFd,
) {
    let mut watched: Vec<Watched> = Vec::new();
    loop {
        if let Ok(mut q) = queue.lock() {
            watched.extend(q.drain(..).map(Watched::Pending));
        }
        let mut polls: Vec<libc::pollfd> = std::iter::once(wake.as_raw_fd())
            .chain(watched.iter().map(Watched::fd))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: the array is valid for its length.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if polls[0].revents != 0 {
            let mut buf = [0u8; 64];
            // SAFETY: reading into a local buffer from our non-blocking pipe.
            let got = unsafe { libc::read(wake.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if got == 0 {
                return; // The harness dropped its handle.
            }
        }
        let mut keep = Vec::with_capacity(watched.len());
        for (entry, poll) in watched.into_iter().zip(&polls[1..]) {
            let events = poll.revents;
            match entry {
                _ if events == 0 => keep.push(entry),
                Watched::Pending(end) => {
                    if let Ok(Some(listener)) = notify::recv_fd(&end) {
                        keep.push(Watched::Listener(listener));
                    }
                }
                Watched::Listener(listener) => {
                    if events & libc::POLLIN != 0 {
                        answer(&listener, names, tcp, exec);
                        keep.push(Watched::Listener(listener));
                    } else if events & (libc::POLLHUP | libc::POLLERR) == 0 {
                        keep.push(Watched::Listener(listener));
                    }
                    // POLLHUP alone: every process under the filter has ended.
                }
            }
        }
        watched = keep;
    }
}

/// Receives one notification and answers it.
fn answer(
    listener: &OwnedFd,
    names: &[SocketName],
    tcp: Option<&TcpGuard>,
    exec: Option<&ExecJudge>,
) {
    let Some(req) = notify::receive(listener) else {
        return;
    };
    let nr = i64::from(req.data.nr);
    if nr == libc::SYS_execve || nr == libc::SYS_execveat {
        // Only notified under an exec set; refused should the filter ever send one without.
        let (error, flags) = match exec {
            Some(judge) => judge(&req),
            None => (-libc::EACCES, 0),
        };
        notify::respond(listener, req.id, error, flags);
        return;
    }
    let error = match act(listener, &req, names, tcp) {
        Ok(()) => 0,
        Err(Refusal::Errno(e)) => -e,
        Err(Refusal::Named(why)) => {
            tracing::warn!("sandbox: refused a command's connect: {why}");
            -libc::EACCES
        }
    };
    notify::respond(listener, req.id, error, 0);
}

enum Refusal {
    /// The errno the call gets, as the kernel would give it.
    Errno(i32),
    /// Not a named socket: `EACCES`, and a warning with this reason.
    Named(String),
}

fn errno() -> Refusal {
    Refusal::Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EACCES),
    )
}

/// Judges and performs one `connect` for the caller of `req`.
fn act(
    listener: &OwnedFd,
    req: &libc::seccomp_notif,
    names: &[SocketName],
    tcp: Option<&TcpGuard>,
) -> Result<(), Refusal> {
    if i64::from(req.data.nr) != libc::SYS_connect {
        return Err(Refusal::Errno(libc::EACCES));
    }
    let pid = req.pid as libc::pid_t;
    let [fd, addr, len, ..] = req.data.args;
    let len = (len as u32) as usize;
    if len > std::mem::size_of::<libc::sockaddr_un>() {
        return Err(Refusal::Errno(libc::EINVAL));
    }
    let bytes = read_memory(pid, addr, len)?;
    if let Some(target) = inet_address(&bytes)? {
        return act_tcp(listener, req, fd as RawFd, target, tcp);
    }
    let address = parse_address(&bytes).map_err(Refusal::Errno)?;
    let cwd = match &address {
        Address::Path(p) if p.is_relative() => std::fs::read_link(format!("/proc/{pid}/cwd")).ok(),
        _ => None,
    };
    let root = open_path(Path::new(&format!("/proc/{pid}/root")), libc::O_DIRECTORY)
        .map_err(|_| Refusal::Errno(libc::EACCES))?;
    let pidfd = pidfd_of(pid)?;
    // Everything read or opened through the pid so far belongs to the caller only if its
    // request is still pending now (the pid was not reused meanwhile).
    still_pending(listener, req.id)?;
    match judge(&address, cwd.as_deref(), names) {
        Decision::Refuse(why) => Err(Refusal::Named(why)),
        Decision::Abstract(name) => {
            let sock = take_socket(&pidfd, fd as RawFd)?;
            let mut to = vec![0u8];
            to.extend_from_slice(&name);
            connect(&sock, &to)
        }
        Decision::Path(path) => {
            // A missing file gets ENOENT, as from the kernel: stat() tells a command as much.
            let pin = open_in_root(&root, &path)
                .map_err(|e| Refusal::Errno(e.raw_os_error().unwrap_or(libc::EACCES)))?;
            let named = named_socket(&pin, names).map_err(|()| {
                Refusal::Named(format!(
                    "{} is not a socket in [tools.bash].unix_sockets",
                    path.display()
                ))
            })?;
            if !named {
                return Err(Refusal::Errno(libc::ECONNREFUSED));
            }
            let sock = take_socket(&pidfd, fd as RawFd)?;
            let via = format!("/proc/self/fd/{}", pin.as_raw_fd());
            connect(&sock, via.as_bytes())
        }
    }
}

/// Ok when notification `id` still waits for its answer (its caller, and so the pid, is
/// the same); `ENOENT` otherwise.
fn still_pending(listener: &OwnedFd, id: u64) -> Result<(), Refusal> {
    // SAFETY: the listener is a seccomp notify fd; the id is a u64 on the stack.
    if unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        )
    } != 0
    {
        return Err(Refusal::Errno(libc::ENOENT));
    }
    Ok(())
}

/// Reads `len` bytes at `addr` in `pid`'s memory.
fn read_memory(pid: libc::pid_t, addr: u64, len: usize) -> Result<Vec<u8>, Refusal> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the local iovec covers our buffer; the remote one is only read by the kernel.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 || n as usize != len {
        return Err(Refusal::Errno(libc::EFAULT));
    }
    Ok(buf)
}

fn open_path(path: &Path, extra: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path; open returns an fd or -1.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | extra) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fd is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `path` (absolute) `O_PATH` as the caller sees it: symlinks and `..` resolved
/// within the caller's root, so its mounts count, not the harness's.
fn open_in_root(root: &OwnedFd, path: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: open_how is plain data; zeroed is its "no option" value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid pointers and the struct's size; returns an fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fd is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the pinned file is one of the named socket files (by device and inode, each name
/// looked up now, so a service's recreated socket still counts). Ok(false): not a socket at
/// all (the kernel's answer to that is ECONNREFUSED). Err: a socket, but not a named one.
fn named_socket(pin: &OwnedFd, names: &[SocketName]) -> Result<bool, ()> {
    // SAFETY: fstat fills a zeroed stat for an open fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(pin.as_raw_fd(), &mut st) } != 0 {
        return Err(());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Ok(false);
    }
    let named = names.iter().any(|n| match n {
        SocketName::Path(p) => {
            std::fs::metadata(p).is_ok_and(|m| m.dev() == st.st_dev && m.ino() == st.st_ino)
        }
        SocketName::Abstract(_) => false,
    });
    if named {
        Ok(true)
    } else {
        Err(())
    }
}

/// A pidfd for the process `tid` (a thread id, as notifications carry) belongs to.
fn pidfd_of(tid: libc::pid_t) -> Result<OwnedFd, Refusal> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map_err(|_| Refusal::Errno(libc::EACCES))?;
    let tgid: libc::pid_t = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Refusal::Errno(libc::EACCES))?;
    // SAFETY: pidfd_open returns an fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) };
    if fd < 0 {
        return Err(Refusal::Errno(libc::EACCES));
    }
    // SAFETY: the fd is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The caller's Unix socket `fd`, duplicated into the harness (same open file: connecting
/// it connects theirs).
fn take_socket(pidfd: &OwnedFd, fd: RawFd) -> Result<OwnedFd, Refusal> {
    let sock = take_fd(pidfd, fd)?;
    if domain_of(&sock)? != libc::AF_UNIX {
        return Err(Refusal::Errno(libc::EACCES));
    }
    Ok(sock)
}

/// The caller's descriptor `fd`, duplicated into the harness.
fn take_fd(pidfd: &OwnedFd, fd: RawFd) -> Result<OwnedFd, Refusal> {
    // SAFETY: pidfd_getfd returns a new fd or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EBADF) => Refusal::Errno(libc::EBADF),
            _ => Refusal::Errno(libc::EACCES),
        });
    }
    // SAFETY: the fd is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// The address family of `sock` (`SO_DOMAIN`).
fn domain_of(sock: &OwnedFd) -> Result<libc::c_int, Refusal> {
    int_option(sock, libc::SO_DOMAIN)
}

/// An integer socket option of `SOL_SOCKET`.
fn int_option(sock: &OwnedFd, option: libc::c_int) -> Result<libc::c_int, Refusal> {
    let mut domain: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes an int.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&mut domain as *mut libc::c_int).cast(),
            &mut size,
        )
    };
    if r != 0 {
        return Err(Refusal::Errno(libc::ENOTSOCK));
    }
    Ok(domain)
}

/// The internet address a `connect` names (`sockaddr_in`, `sockaddr_in6`); `None` for
/// another family. PURE. Err: `EINVAL` for a short one, as the kernel answers.
fn inet_address(bytes: &[u8]) -> Result<Option<SocketAddr>, Refusal> {
    let Some(family) = bytes.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]])) else {
        return Ok(None);
    };
    let port = |b: &[u8]| u16::from_be_bytes([b[2], b[3]]);
    if family == libc::AF_INET as u16 {
        if bytes.len() < std::mem::size_of::<libc::sockaddr_in>() {
            return Err(Refusal::Errno(libc::EINVAL));
        }
        let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
        return Ok(Some(SocketAddr::V4(SocketAddrV4::new(ip, port(bytes)))));
    }
    if family == libc::AF_INET6 as u16 {
        // SIN6_LEN_RFC2133: the kernel takes an address without its scope id.
        if bytes.len() < 24 {
            return Err(Refusal::Errno(libc::EINVAL));
        }
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&bytes[8..24]);
        let v6 = SocketAddrV6::new(ip.into(), port(bytes), 0, 0);
        return Ok(Some(SocketAddr::V6(v6)));
    }
    Ok(None)
}

/// Whether `target` is `proxy`, as IPv4 or as its IPv4-mapped IPv6 form. PURE.
fn is_proxy(target: SocketAddr, proxy: SocketAddrV4) -> bool {
    match target {
        SocketAddr::V4(a) => a == proxy,
        SocketAddr::V6(a) => {
            a.ip().to_ipv4_mapped() == Some(*proxy.ip()) && a.port() == proxy.port()
        }
    }
}

/// Judges and performs one TCP `connect` under `network = "allowlist"`: to the proxy only,
/// connected by the harness to the address it knows.
fn act_tcp(
    listener: &OwnedFd,
    req: &libc::seccomp_notif,
    fd: RawFd,
    target: SocketAddr,
    tcp: Option<&TcpGuard>,
) -> Result<(), Refusal> {
    let Some(tcp) = tcp else {
        return Err(Refusal::Errno(libc::EACCES));
    };
    if !is_proxy(target, tcp.proxy) {
        (tcp.refused)(target);
        return Err(Refusal::Named(format!(
            "{target} is not the run's egress proxy (network = \"allowlist\")"
        )));
    }
    let pidfd = pidfd_of(req.pid as libc::pid_t)?;
    still_pending(listener, req.id)?;
    let sock = take_fd(&pidfd, fd)?;
    let domain = domain_of(&sock)?;
    if int_option(&sock, libc::SO_TYPE)? != libc::SOCK_STREAM
        || int_option(&sock, libc::SO_PROTOCOL)? != libc::IPPROTO_TCP
    {
        return Err(Refusal::Errno(libc::EACCES));
    }
    connect_inet(&sock, domain, tcp.proxy)
}

/// Connects the TCP socket `sock` (of `domain`) to `to`, mapped into IPv6 for an
/// `AF_INET6` socket. The command sees this connect's result (`EINPROGRESS` on a
/// non-blocking socket, as its own connect would give).
fn connect_inet(sock: &OwnedFd, domain: libc::c_int, to: SocketAddrV4) -> Result<(), Refusal> {
    let r = if domain == libc::AF_INET {
        // SAFETY: sockaddr_in is plain data.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = to.port().to_be();
        addr.sin_addr.s_addr = u32::from(*to.ip()).to_be();
        // SAFETY: the address is valid for its size.
        unsafe {
            libc::connect(
                sock.as_raw_fd(),
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
    } else if domain == libc::AF_INET6 {
        // SAFETY: sockaddr_in6 is plain data.
        let mut addr: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
        addr.sin6_port = to.port().to_be();
        addr.sin6_addr.s6_addr = to.ip().to_ipv6_mapped().octets();
        // SAFETY: the address is valid for its size.
        unsafe {
            libc::connect(
                sock.as_raw_fd(),
                (&addr as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    } else {
        return Err(Refusal::Errno(libc::EACCES));
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Connects `sock` to the Unix address `path` (sun_path bytes; a leading NUL: abstract).
fn connect(sock: &OwnedFd, path: &[u8]) -> Result<(), Refusal> {
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= addr.sun_path.len() {
        return Err(Refusal::Errno(libc::EINVAL));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(path) {
        *dst = *src as libc::c_char;
    }
    // Abstract names are exactly their bytes; a path ends at its NUL.
    let extra = usize::from(path.first() != Some(&0));
    let len = std::mem::size_of::<libc::sa_family_t>() + path.len() + extra;
    // SAFETY: the address is valid for `len` bytes.
    let r = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    #[test]
    fn only_the_named_socket_file_passes_the_identity_check() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("named.sock");
        let other = dir.path().join("other.sock");
        let _a = UnixListener::bind(&named).unwrap();
        let _b = UnixListener::bind(&other).unwrap();
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        std::os::unix::fs::symlink(&other, dir.path().join("link")).unwrap();
        let names = [SocketName::Path(named.clone())];
        let root = open_path(Path::new("/"), libc::O_DIRECTORY).unwrap();
        let check = |p: PathBuf| named_socket(&open_in_root(&root, &p).unwrap(), &names);
        assert_eq!(check(named.clone()), Ok(true));
        assert_eq!(check(other), Err(()));
        assert_eq!(check(dir.path().join("link")), Err(()));
        assert_eq!(check(dir.path().join("plain")), Ok(false));
    }

    #[test]
    fn only_the_proxy_address_passes_in_either_family() {
        let proxy: SocketAddrV4 = "127.0.0.1:4242".parse().unwrap();
        let v4 = |s: &str| SocketAddr::V4(s.parse().unwrap());
        assert!(is_proxy(v4("127.0.0.1:4242"), proxy));
        assert!(!is_proxy(v4("127.0.0.1:4243"), proxy));
        assert!(!is_proxy(v4("127.0.0.2:4242"), proxy));
        assert!(is_proxy("[::ffff:127.0.0.1]:4242".parse().unwrap(), proxy));
        assert!(!is_proxy("[::1]:4242".parse().unwrap(), proxy));
        let mut sin = vec![0u8; 16];
        sin[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        sin[2..4].copy_from_slice(&4242u16.to_be_bytes());
        sin[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert!(matches!(inet_address(&sin), Ok(Some(a)) if a == v4("127.0.0.1:4242")));
        assert!(matches!(
            inet_address(&sin[..8]),
            Err(Refusal::Errno(libc::EINVAL))
        ));
        let mut unix = vec![0u8; 8];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert!(matches!(inet_address(&unix), Ok(None)));
    }

    #[test]
    fn connect_through_the_pin_reaches_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let pin = open_path(&path, 0).unwrap();
        // SAFETY: a new stream socket.
        let sock =
            unsafe { OwnedFd::from_raw_fd(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)) };
        let via = format!("/proc/self/fd/{}", pin.as_raw_fd());
        assert!(connect(&sock, via.as_bytes()).is_ok());
        let mut stream = std::os::unix::net::UnixStream::from(sock);
        stream.write_all(b"hi").unwrap();
        drop(stream);
        let mut got = String::new();
        listener
            .accept()
            .unwrap()
            .0
            .read_to_string(&mut got)
            .unwrap();
        assert_eq!(got, "hi");
    }
}
