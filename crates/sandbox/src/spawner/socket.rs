//! Tools adapter helper: one frame ([`super::wire`]) over the spawner's Unix stream socket,
//! with descriptors beside it (SCM_RIGHTS). I/O: sendmsg, recvmsg, poll. Both ends use it; it
//! retries on EINTR and waits (bounded) when a non-blocking socket is full.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::wire::{frame_len, MAX_FDS};

/// How long a send waits for room in a full socket before it gives up.
const SEND_WAIT: Duration = Duration::from_secs(10);

/// Room for [`MAX_FDS`] descriptors in one control message (u64s: aligned for cmsghdr).
const CMSG_WORDS: usize = (MAX_FDS * 4 + 64) / 8;

/// Sends `frame` whole on `sock`, `fds` attached to its first byte.
pub(crate) fn send_frame(sock: BorrowedFd<'_>, frame: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors for one message",
        ));
    }
    let mut sent = 0;
    let mut attach = !fds.is_empty();
    while sent < frame.len() {
        let rest = &frame[sent..];
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        let mut control = [0u64; CMSG_WORDS];
        // SAFETY: msghdr is plain data; every pointer set below outlives the sendmsg call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if attach {
            let bytes = std::mem::size_of_val(fds) as u32;
            // SAFETY: CMSG_SPACE/CMSG_LEN are arithmetic; the header is written inside
            // `control`, which holds room for MAX_FDS descriptors.
            unsafe {
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen = libc::CMSG_SPACE(bytes) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
                std::ptr::copy_nonoverlapping(
                    fds.as_ptr(),
                    libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                    fds.len(),
                );
            }
        }
        // SAFETY: msg points at live buffers; MSG_NOSIGNAL: a gone peer is EPIPE, no signal.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    wait_writable(sock)?;
                    continue;
                }
                _ => return Err(e),
            }
        }
        attach = false;
        sent += n as usize;
    }
    Ok(())
}

fn wait_writable(sock: BorrowedFd<'_>) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, as declared.
        let r = unsafe { libc::poll(&mut pfd, 1, SEND_WAIT.as_millis() as libc::c_int) };
        match r {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the command spawner does not read its socket",
                ))
            }
            r if r > 0 => return Ok(()),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

/// Receives one frame's body and the descriptors sent with it from a blocking `sock`;
/// `None` at end of stream. Received descriptors are close-on-exec.
pub(crate) fn recv_frame(sock: BorrowedFd<'_>) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let mut control = [0u64; CMSG_WORDS];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    // SAFETY: msghdr is plain data; its pointers outlive the recvmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = loop {
        // SAFETY: as above.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let fds = taken_fds(&msg);
    if n == 0 {
        return Ok(None);
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "too many descriptors in one message",
        ));
    }
    read_exact(sock, &mut header[n..])?;
    let len = frame_len(header).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut body = vec![0u8; len];
    read_exact(sock, &mut body)?;
    Ok(Some((body, fds)))
}

/// The descriptors of an SCM_RIGHTS control message, owned (so closed when dropped).
fn taken_fds(msg: &libc::msghdr) -> Vec<OwnedFd> {
    let mut out = Vec::new();
    // SAFETY: the CMSG_* walk stays inside the control buffer the kernel filled in.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let n = ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..n {
                    out.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    out
}

fn read_exact(sock: BorrowedFd<'_>, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: reads into the given buffer only.
        let n = unsafe { libc::read(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n > 0 => buf = &mut buf[n as usize..],
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Ok(())
}
