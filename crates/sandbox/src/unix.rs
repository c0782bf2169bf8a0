//! Tools adapter: Unix sockets under `network = false`, held to the names in
//! `[tools.bash].unix_sockets`. In: the socket names, the network switch, the kernel's
//! Landlock ABI. Out: a [`Guard`] ([`decide`], PURE), and the one step each command's child
//! takes between fork and exec ([`apply_raw`]). I/O: Landlock syscalls, the
//! seccomp supervisor's thread ([`supervisor`]).
//!
//! The seccomp filter of [`super::seccomp`] allows `socket(AF_UNIX)` once a name is listed;
//! what it cannot do is read the address a `connect` names (BPF sees only a pointer). Two
//! ways hold commands to the names:
//! - **Landlock ABI 9+** has `LANDLOCK_ACCESS_FS_RESOLVE_UNIX`: a layer that handles it with a
//!   rule per named socket file makes the kernel refuse `connect` and `sendmsg` to every
//!   other socket made outside the sandbox ([`resolve_unix_layer`]).
//! - **Elsewhere** (and whenever an abstract `@name` is listed, which Landlock cannot name),
//!   `connect` returns to the harness through seccomp user notification ([`notify`]) and the
//!   harness's [`supervisor`] connects the command's socket itself, to a named socket only.
//!   Datagram Unix sockets are refused: `sendto`/`sendmsg` carry an address the supervisor
//!   never sees.

pub(crate) mod notify;
pub mod supervisor;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::settings::SocketName;

/// The first Landlock ABI with `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` (Linux 7.1).
pub(crate) const RESOLVE_UNIX_ABI: i32 = 9;
/// `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` (include/uapi/linux/landlock.h).
const ACCESS_FS_RESOLVE_UNIX: u64 = 1 << 16;
/// `LANDLOCK_ACCESS_FS_REFER`: every layer denies it unless handled and granted, so the
/// extra layer grants it everywhere and leaves it to the main ruleset.
const ACCESS_FS_REFER: u64 = 1 << 13;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// How the Unix sockets of a run's commands are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// `network = true`: not confined.
    Open,
    /// No name listed: no Unix socket can be created (seccomp).
    None,
    /// Only the named ones, refused by the kernel (Landlock `RESOLVE_UNIX`).
    Landlock,
    /// Only the named ones, connected by the harness's seccomp supervisor.
    Supervisor,
}

impl Guard {
    /// What `harness check` and the PLAN say.
    pub fn describe(&self) -> &'static str {
        match self {
            Guard::Open => "any (network = true)",
            Guard::None => "none",
            Guard::Landlock => "named only, by the kernel (Landlock)",
            Guard::Supervisor => "named only, by a seccomp supervisor",
        }
    }
}

/// The guard for `names` with `network` on a kernel whose Landlock ABI is `abi`. PURE.
/// Landlock rules name files, so an abstract `@name` needs the supervisor on any ABI.
pub fn decide(network: bool, names: &[SocketName], abi: i32) -> Guard {
    if network {
        Guard::Open
    } else if names.is_empty() {
        Guard::None
    } else if abi >= RESOLVE_UNIX_ABI && names.iter().all(|n| matches!(n, SocketName::Path(_))) {
        Guard::Landlock
    } else {
        Guard::Supervisor
    }
}

/// The address a `connect` names, as the kernel reads a `sockaddr_un`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Address {
    /// A socket file, as written (maybe relative).
    Path(PathBuf),
    /// An abstract name (the bytes after the leading NUL).
    Abstract(Vec<u8>),
}

/// Reads a `sockaddr_un` of `bytes` (the length the caller passed). PURE. Err: the errno
/// the kernel would give (`EINVAL` for a short or foreign address).
pub(crate) fn parse_address(bytes: &[u8]) -> Result<Address, i32> {
    const PATH_AT: usize = 2;
    if bytes.len() <= PATH_AT || bytes.len() > std::mem::size_of::<libc::sockaddr_un>() {
        return Err(libc::EINVAL);
    }
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    if family != libc::AF_UNIX as u16 {
        return Err(libc::EINVAL);
    }
    let path = &bytes[PATH_AT..];
    if path[0] == 0 {
        return Ok(Address::Abstract(path[1..].to_vec()));
    }
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    use std::os::unix::ffi::OsStrExt;
    Ok(Address::Path(PathBuf::from(std::ffi::OsStr::from_bytes(
        &path[..end],
    ))))
}

/// What the supervisor does with a `connect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Connect to this socket file (absolute, in the caller's root) if it is a named one.
    Path(PathBuf),
    /// Connect to this named abstract socket.
    Abstract(Vec<u8>),
    /// Refuse with `EACCES`, for this reason (narration).
    Refuse(String),
}

/// Judges `address` for a caller whose working directory is `cwd` (None: unknown). PURE.
/// A path is made absolute here and checked by identity once pinned ([`supervisor`]);
/// an abstract name passes only when listed as `@name`.
pub(crate) fn judge(address: &Address, cwd: Option<&Path>, names: &[SocketName]) -> Decision {
    match address {
        Address::Abstract(name) => {
            let listed = names
                .iter()
                .any(|n| matches!(n, SocketName::Abstract(a) if a.as_bytes() == name.as_slice()));
            if listed {
                Decision::Abstract(name.clone())
            } else {
                Decision::Refuse(format!(
                    "abstract socket @{} is not in [tools.bash].unix_sockets",
                    String::from_utf8_lossy(name)
                ))
            }
        }
        Address::Path(path) if path.is_absolute() => Decision::Path(path.clone()),
        Address::Path(path) => match cwd {
            Some(cwd) if cwd.is_absolute() => Decision::Path(cwd.join(path)),
            _ => Decision::Refuse(format!(
                "{}: relative, and the command's working directory is unknown",
                path.display()
            )),
        },
    }
}

/// What a command's child does for its Unix sockets between clone and exec, on raw values
/// (it holds only descriptors, the spawner's): restrict to the `RESOLVE_UNIX` layer `layer` (negative: none); install the
/// notifying filter `program` ([`notify`]) and send its listener over `listener_to`
/// (negative: none). Raw system calls only, no allocation. Err: the errno.
pub(crate) fn apply_raw(
    layer: RawFd,
    listener_to: RawFd,
    program: &[libc::sock_filter],
) -> Result<(), i32> {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    };
    if layer >= 0 {
        let flags: libc::c_uint = 0;
        // SAFETY: restrict_self takes a ruleset fd this process holds open.
        if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, layer, flags) } != 0 {
            return Err(errno());
        }
    }
    if listener_to >= 0 {
        notify::install_and_send(listener_to, program)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EPERM))?;
    }
    Ok(())
}

/// The extra Landlock layer of [`Guard::Landlock`]: handles `RESOLVE_UNIX` (and `REFER`,
/// granted everywhere: layers intersect, the main ruleset decides it), with a rule per named
/// socket file that exists now. A socket recreated later (a restarted service) is a new file
/// the rule does not cover.
pub(crate) fn resolve_unix_layer(names: &[SocketName]) -> Result<OwnedFd> {
    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
    }
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let attr = RulesetAttr {
        handled_access_fs: ACCESS_FS_RESOLVE_UNIX | ACCESS_FS_REFER,
    };
    // SAFETY: the attribute struct is valid for its size; the call returns an fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("landlock: cannot create the unix_sockets layer");
    }
    // SAFETY: the kernel just returned this fd to us alone.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let add = |path: &Path, access: u64| -> Result<()> {
        let file = std::fs::File::options()
            .read(false)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(path)
            .with_context(|| format!("landlock: cannot open {}", path.display()))?;
        let rule = PathBeneath {
            allowed_access: access,
            parent_fd: file.as_raw_fd(),
        };
        // SAFETY: the rule struct is valid and the fds are open.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule as *const PathBeneath,
                0u32,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("landlock: cannot add {}", path.display()));
        }
        Ok(())
    };
    use std::os::unix::fs::OpenOptionsExt;
    add(Path::new("/"), ACCESS_FS_REFER)?;
    for name in names {
        if let SocketName::Path(path) = name {
            if path.exists() {
                add(path, ACCESS_FS_RESOLVE_UNIX)?;
            }
        }
    }
    Ok(ruleset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn path(p: &str) -> SocketName {
        SocketName::Path(PathBuf::from(p))
    }

    #[test]
    fn the_guard_follows_network_names_and_abi() {
        let docker = [path("/run/docker.sock")];
        let with_abstract = [path("/run/docker.sock"), SocketName::Abstract("r".into())];
        assert_eq!(decide(true, &docker, 9), Guard::Open);
        assert_eq!(decide(false, &[], 9), Guard::None);
        assert_eq!(decide(false, &docker, 7), Guard::Supervisor);
        assert_eq!(decide(false, &docker, 8), Guard::Supervisor);
        // Not testable on this machine's kernel (ABI 7): the decision is.
        assert_eq!(decide(false, &docker, 9), Guard::Landlock);
        assert_eq!(decide(false, &docker, 10), Guard::Landlock);
        assert_eq!(decide(false, &with_abstract, 9), Guard::Supervisor);
        assert_eq!(
            Guard::Landlock.describe(),
            "named only, by the kernel (Landlock)"
        );
        assert_eq!(
            Guard::Supervisor.describe(),
            "named only, by a seccomp supervisor"
        );
        assert_eq!(Guard::None.describe(), "none");
    }

    #[test]
    fn the_landlock_layer_is_refused_below_abi_9() {
        // The layer itself needs a Linux 7.1 kernel; below it, the kernel must refuse the
        // unknown right (EINVAL) rather than build a layer that ignores it.
        let names = [path("/nonexistent/a.sock")];
        match crate::kernel_abi() {
            Ok(abi) if abi < RESOLVE_UNIX_ABI => {
                let err = resolve_unix_layer(&names).unwrap_err();
                assert!(format!("{err:#}").contains("Invalid argument"), "{err:#}");
            }
            Ok(_) => assert!(resolve_unix_layer(&names).is_ok()),
            Err(_) => {}
        }
    }

    fn sockaddr(path: &[u8]) -> Vec<u8> {
        let mut v = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(path);
        v
    }

    #[test]
    fn addresses_are_read_as_the_kernel_reads_them() {
        assert_eq!(
            parse_address(&sockaddr(b"/run/a.sock\0junk")),
            Ok(Address::Path(PathBuf::from("/run/a.sock")))
        );
        // No NUL: the length ends the path.
        assert_eq!(
            parse_address(&sockaddr(b"rel/b")),
            Ok(Address::Path(PathBuf::from("rel/b")))
        );
        assert_eq!(
            parse_address(&sockaddr(b"\0name\0x")),
            Ok(Address::Abstract(b"name\0x".to_vec()))
        );
        assert_eq!(parse_address(&sockaddr(b"")), Err(libc::EINVAL));
        assert_eq!(parse_address(&[1]), Err(libc::EINVAL));
        let mut inet = sockaddr(b"/x");
        inet[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        assert_eq!(parse_address(&inet), Err(libc::EINVAL));
        assert_eq!(parse_address(&sockaddr(&[b'a'; 108])).map(|_| ()), Ok(()));
        assert_eq!(parse_address(&sockaddr(&[b'a'; 200])), Err(libc::EINVAL));
    }

    #[test]
    fn paths_are_made_absolute_and_abstract_names_must_be_listed() {
        let names = [path("/run/a.sock"), SocketName::Abstract("ok".into())];
        let cwd = Path::new("/work/tree");
        assert_eq!(
            judge(&Address::Path("/run/a.sock".into()), Some(cwd), &names),
            Decision::Path("/run/a.sock".into())
        );
        // The supervisor checks identity later: an unnamed absolute path is pinned first.
        assert_eq!(
            judge(&Address::Path("../x.sock".into()), Some(cwd), &names),
            Decision::Path("/work/tree/../x.sock".into())
        );
        assert!(matches!(
            judge(&Address::Path("x.sock".into()), None, &names),
            Decision::Refuse(_)
        ));
        assert_eq!(
            judge(&Address::Abstract(b"ok".to_vec()), Some(cwd), &names),
            Decision::Abstract(b"ok".to_vec())
        );
        assert_eq!(
            judge(&Address::Abstract(b"other".to_vec()), Some(cwd), &names),
            Decision::Refuse(
                "abstract socket @other is not in [tools.bash].unix_sockets".to_string()
            )
        );
        // A path name never admits the abstract socket of the same spelling.
        assert!(matches!(
            judge(
                &Address::Abstract(b"/run/a.sock".to_vec()),
                Some(cwd),
                &names
            ),
            Decision::Refuse(_)
        ));
    }
}
