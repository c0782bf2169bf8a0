//! Tools adapter helper: the messages between the harness and its command spawner
//! ([`super`]), as bytes. PURE: encoding and decoding with bounds; the descriptors travel
//! beside the bytes (SCM_RIGHTS) and are named here by their index in that list.
//!
//! A frame is a 4-byte length (native endian: both ends are the same binary) and that many
//! bytes. Every count and length is checked against what is left of the frame, and a frame
//! over [`MAX_MESSAGE`] is refused before it is read, so a broken peer cannot make either side
//! allocate without bound.

use std::fmt;

/// The largest frame either side accepts (4 MiB: far beyond any command the gate reads).
pub(crate) const MAX_MESSAGE: usize = 4 << 20;
/// The most stages one spawn may hold: the longest pipeline the gate hands to the direct
/// path (`plain_argv`); a longer one runs under bash, which needs one stage.
pub const MAX_STAGES: usize = harness_gate::MAX_STAGES;
/// The most descriptors one spawn may pass: each stage's three stdio ends, the ruleset, the
/// Unix-socket layer and the supervisor's socketpair end.
pub(crate) const MAX_FDS: usize = 3 * MAX_STAGES + 3;
/// A stdio slot or ruleset index that names no descriptor (stdio: `/dev/null`).
pub(crate) const NO_FD: i32 = -1;

/// THE spec of one process of a pipeline (a stage), from the harness's [`super::Job`] to the
/// spawner's start: the one type of it. `Io` is how its stdio is named: on the harness's side
/// a descriptor (`Option<BorrowedFd>`, `None`: `/dev/null`), on the wire an index into the
/// passed descriptors (`i32`, [`NO_FD`]: `/dev/null`). A started stage is a
/// [`super::Child`] on the harness's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSpec<Io = i32> {
    /// The program's path, executed as it is (no PATH search).
    pub program: Vec<u8>,
    /// Its argv, `argv[0]` included.
    pub argv: Vec<Vec<u8>>,
    /// Its whole environment, `KEY=value` each.
    pub env: Vec<Vec<u8>>,
    /// stdin, stdout, stderr.
    pub stdio: [Io; 3],
}

impl<Io> StageSpec<Io> {
    /// `program` (resolved already) with `argv` and the whole environment `env`.
    pub fn new<'a>(
        program: &std::path::Path,
        argv: impl IntoIterator<Item = &'a [u8]>,
        env: &[(String, String)],
        stdio: [Io; 3],
    ) -> StageSpec<Io> {
        use std::os::unix::ffi::OsStrExt;
        StageSpec {
            program: program.as_os_str().as_bytes().to_vec(),
            argv: argv.into_iter().map(<[u8]>::to_vec).collect(),
            env: env
                .iter()
                .map(|(k, v)| format!("{k}={v}").into_bytes())
                .collect(),
            stdio,
        }
    }

    /// The same stage with its stdio named another way (descriptors -> wire indexes).
    pub(crate) fn map_stdio<To>(self, f: impl FnMut(Io) -> To) -> StageSpec<To> {
        StageSpec {
            program: self.program,
            argv: self.argv,
            env: self.env,
            stdio: self.stdio.map(f),
        }
    }
}

/// What the harness asks of the spawner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Start `stages` in one new process group (the first started stage leads it), in `cwd`,
    /// confined by the ruleset at index `ruleset` (or none) and the seccomp program `filter`
    /// (raw `sock_filter`s; empty: none). The spawner kills the group itself `backstop_ms`
    /// after the start if it is still running.
    Spawn {
        /// The harness's number for this spawn; replies carry it.
        id: u64,
        /// The spawner's own deadline.
        backstop_ms: u64,
        /// The work dir.
        cwd: Vec<u8>,
        /// Index of the Landlock ruleset descriptor, or [`NO_FD`].
        ruleset: i32,
        /// The seccomp program's bytes.
        filter: Vec<u8>,
        /// The read-only mounts' bytes (`sandbox::protect::Mounts::to_bytes`; empty: none).
        mounts: Vec<u8>,
        /// Index of the `RESOLVE_UNIX` Landlock layer, or [`NO_FD`].
        unix_layer: i32,
        /// Index of the socketpair end the notifying filter's listener goes to, or [`NO_FD`].
        listener_to: i32,
        /// The notifying filter's bytes (empty: none).
        notify: Vec<u8>,
        /// The processes, in pipeline order.
        stages: Vec<StageSpec>,
    },
    /// Kill the group of spawn `id` if any of its processes still runs.
    Kill {
        /// The spawn.
        id: u64,
    },
    /// Install the seccomp `program` (raw `sock_filter`s) on the spawner itself, so on every
    /// command it starts from now on, with a new listener, and send the listener over the
    /// socket at index `to` (closed without one when that fails).
    Guard {
        /// The filter's bytes.
        program: Vec<u8>,
        /// The directory-descriptor value the filter lets through: each child starts its
        /// program with `execveat(pass, /absolute/path, ...)` from now on.
        pass: u32,
        /// Index of the socket the listener goes to.
        to: i32,
    },
    /// Start each program with `execveat(pass, ...)` from now on: a notifying filter each
    /// command installs itself lets that through (the Unix-socket supervisor's, when it
    /// guards the loader).
    Pass {
        /// The descriptor value.
        pass: u32,
    },
}

/// What the spawner tells the harness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Spawn `id` is done: per stage its pid (> 0), or `-errno` when it could not start.
    Started {
        /// The spawn.
        id: u64,
        /// One entry per stage.
        pids: Vec<i32>,
    },
    /// A stage of spawn `id` ended with this wait status.
    Exited {
        /// The spawn.
        id: u64,
        /// The stage's index.
        stage: u32,
        /// The raw status from `waitpid`.
        status: i32,
    },
}

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    /// The frame or a field runs past what is there.
    Truncated,
    /// The frame is over [`MAX_MESSAGE`].
    TooLarge(usize),
    /// Too many stages or descriptors.
    TooMany(&'static str),
    /// A descriptor index beyond those passed.
    BadFd(i32),
    /// A NUL byte inside a path, argument or variable (exec could not pass it).
    Nul(&'static str),
    /// An unknown message kind, or bytes left over.
    Malformed(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "truncated message"),
            WireError::TooLarge(n) => {
                write!(
                    f,
                    "message of {n} bytes is over the {MAX_MESSAGE}-byte bound"
                )
            }
            WireError::TooMany(what) => write!(f, "too many {what}"),
            WireError::BadFd(i) => write!(f, "descriptor index {i} was not passed"),
            WireError::Nul(what) => write!(f, "a NUL byte in the {what}"),
            WireError::Malformed(why) => write!(f, "malformed message: {why}"),
        }
    }
}

impl std::error::Error for WireError {}

const SPAWN: u32 = 1;
const KILL: u32 = 2;
const GUARD: u32 = 5;
const PASS: u32 = 6;
const STARTED: u32 = 3;
const EXITED: u32 = 4;

/// The length a frame's 4-byte header announces, refused over [`MAX_MESSAGE`].
pub(crate) fn frame_len(header: [u8; 4]) -> Result<usize, WireError> {
    let n = u32::from_ne_bytes(header) as usize;
    if n > MAX_MESSAGE {
        return Err(WireError::TooLarge(n));
    }
    Ok(n)
}

/// `request` as a frame (header included). Fails on what [`decode_request`] would refuse.
pub(crate) fn encode_request(request: &Request) -> Result<Vec<u8>, WireError> {
    let mut w = Writer::default();
    match request {
        Request::Spawn {
            id,
            backstop_ms,
            cwd,
            ruleset,
            filter,
            mounts,
            unix_layer,
            listener_to,
            notify,
            stages,
        } => {
            if stages.len() > MAX_STAGES {
                return Err(WireError::TooMany("stages"));
            }
            w.u32(SPAWN);
            w.u64(*id);
            w.u64(*backstop_ms);
            w.text(cwd, "work dir")?;
            w.i32(*ruleset);
            w.bytes(filter);
            w.bytes(mounts);
            w.i32(*unix_layer);
            w.i32(*listener_to);
            w.bytes(notify);
            w.u32(stages.len() as u32);
            for s in stages {
                w.text(&s.program, "program path")?;
                for fd in s.stdio {
                    w.i32(fd);
                }
                w.u32(s.argv.len() as u32);
                for a in &s.argv {
                    w.text(a, "arguments")?;
                }
                w.u32(s.env.len() as u32);
                for e in &s.env {
                    w.text(e, "environment")?;
                }
            }
        }
        Request::Kill { id } => {
            w.u32(KILL);
            w.u64(*id);
        }
        Request::Pass { pass } => {
            w.u32(PASS);
            w.u32(*pass);
        }
        Request::Guard { program, pass, to } => {
            w.u32(GUARD);
            w.bytes(program);
            w.u32(*pass);
            w.i32(*to);
        }
    }
    w.frame()
}

/// A request's frame body (without the header), sent with `fds` descriptors.
pub(crate) fn decode_request(body: &[u8], fds: usize) -> Result<Request, WireError> {
    if fds > MAX_FDS {
        return Err(WireError::TooMany("descriptors"));
    }
    let mut r = Reader { buf: body };
    let fd = |i: i32| {
        if i == NO_FD || (i >= 0 && (i as usize) < fds) {
            Ok(i)
        } else {
            Err(WireError::BadFd(i))
        }
    };
    let request = match r.u32()? {
        SPAWN => decode_spawn(&mut r, &fd)?,
        KILL => Request::Kill { id: r.u64()? },
        PASS => Request::Pass { pass: r.u32()? },
        GUARD => {
            let program = r.bytes()?.to_vec();
            if program.is_empty() || program.len() % 8 != 0 {
                return Err(WireError::Malformed("guard filter length"));
            }
            let pass = r.u32()?;
            let to = fd(r.i32()?)?;
            if to == NO_FD {
                return Err(WireError::Malformed("guard without a socket"));
            }
            Request::Guard { program, pass, to }
        }
        _ => return Err(WireError::Malformed("unknown request")),
    };
    r.end()?;
    Ok(request)
}

/// A descriptor index read from a request -> itself when it was passed (or is [`NO_FD`]).
type FdCheck<'a> = dyn Fn(i32) -> Result<i32, WireError> + 'a;

/// The fields of a [`Request::Spawn`], after its kind; `fd` checks each descriptor index.
fn decode_spawn(r: &mut Reader<'_>, fd: &FdCheck<'_>) -> Result<Request, WireError> {
    let id = r.u64()?;
    let backstop_ms = r.u64()?;
    let cwd = r.text("work dir")?;
    let ruleset = fd(r.i32()?)?;
    let filter = r.bytes()?.to_vec();
    if filter.len() % 8 != 0 {
        return Err(WireError::Malformed("filter length"));
    }
    let mounts = r.bytes()?.to_vec();
    let unix_layer = fd(r.i32()?)?;
    let listener_to = fd(r.i32()?)?;
    let notify = r.bytes()?.to_vec();
    if notify.len() % 8 != 0 {
        return Err(WireError::Malformed("notify filter length"));
    }
    let n = r.u32()? as usize;
    if n > MAX_STAGES {
        return Err(WireError::TooMany("stages"));
    }
    let mut stages = Vec::with_capacity(n);
    for _ in 0..n {
        stages.push(decode_stage(r, fd)?);
    }
    Ok(Request::Spawn {
        id,
        backstop_ms,
        cwd,
        ruleset,
        filter,
        mounts,
        unix_layer,
        listener_to,
        notify,
        stages,
    })
}

/// One stage of a spawn: its program, stdio (each index checked by `fd`), argv (never empty)
/// and environment.
fn decode_stage(r: &mut Reader<'_>, fd: &FdCheck<'_>) -> Result<StageSpec, WireError> {
    let program = r.text("program path")?;
    let stdio = [fd(r.i32()?)?, fd(r.i32()?)?, fd(r.i32()?)?];
    let argv = r.list("arguments")?;
    if argv.is_empty() {
        return Err(WireError::Malformed("empty argv"));
    }
    let env = r.list("environment")?;
    Ok(StageSpec {
        program,
        argv,
        env,
        stdio,
    })
}

/// `reply` as a frame (header included).
pub(crate) fn encode_reply(reply: &Reply) -> Vec<u8> {
    let mut w = Writer::default();
    match reply {
        Reply::Started { id, pids } => {
            w.u32(STARTED);
            w.u64(*id);
            w.u32(pids.len() as u32);
            for p in pids {
                w.i32(*p);
            }
        }
        Reply::Exited { id, stage, status } => {
            w.u32(EXITED);
            w.u64(*id);
            w.u32(*stage);
            w.i32(*status);
        }
    }
    // A reply holds at most MAX_STAGES pids: far below the bound.
    w.frame().unwrap_or_default()
}

/// A reply's frame body (without the header).
pub(crate) fn decode_reply(body: &[u8]) -> Result<Reply, WireError> {
    let mut r = Reader { buf: body };
    let reply = match r.u32()? {
        STARTED => {
            let id = r.u64()?;
            let n = r.u32()? as usize;
            if n > MAX_STAGES {
                return Err(WireError::TooMany("stages"));
            }
            let pids = (0..n).map(|_| r.i32()).collect::<Result<_, _>>()?;
            Reply::Started { id, pids }
        }
        EXITED => Reply::Exited {
            id: r.u64()?,
            stage: r.u32()?,
            status: r.i32()?,
        },
        _ => return Err(WireError::Malformed("unknown reply")),
    };
    r.end()?;
    Ok(reply)
}

#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_ne_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_ne_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_ne_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len().min(u32::MAX as usize) as u32);
        self.buf.extend_from_slice(b);
    }
    /// Bytes that exec takes as a C string: no NUL inside.
    fn text(&mut self, b: &[u8], what: &'static str) -> Result<(), WireError> {
        if b.contains(&0) {
            return Err(WireError::Nul(what));
        }
        self.bytes(b);
        Ok(())
    }
    fn frame(self) -> Result<Vec<u8>, WireError> {
        if self.buf.len() > MAX_MESSAGE {
            return Err(WireError::TooLarge(self.buf.len()));
        }
        let mut out = Vec::with_capacity(4 + self.buf.len());
        out.extend_from_slice(&(self.buf.len() as u32).to_ne_bytes());
        out.extend_from_slice(&self.buf);
        Ok(out)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_ne_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_ne_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_ne_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn text(&mut self, what: &'static str) -> Result<Vec<u8>, WireError> {
        let b = self.bytes()?;
        if b.contains(&0) {
            return Err(WireError::Nul(what));
        }
        Ok(b.to_vec())
    }
    /// A counted list of texts; the count cannot outrun the bytes (each entry takes 4 or more).
    fn list(&mut self, what: &'static str) -> Result<Vec<Vec<u8>>, WireError> {
        let n = self.u32()? as usize;
        if n > self.buf.len() / 4 {
            return Err(WireError::Truncated);
        }
        (0..n).map(|_| self.text(what)).collect()
    }
    fn end(&self) -> Result<(), WireError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(WireError::Malformed("bytes after the message"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn spawn() -> Request {
        Request::Spawn {
            id: 7,
            backstop_ms: 125_000,
            cwd: b"/w".to_vec(),
            ruleset: 2,
            filter: vec![1; 16],
            mounts: vec![9; 5],
            unix_layer: NO_FD,
            listener_to: 0,
            notify: vec![3; 8],
            stages: vec![
                StageSpec {
                    program: b"/usr/bin/cat".to_vec(),
                    argv: vec![b"cat".to_vec(), b"a b.txt".to_vec()],
                    env: vec![b"PATH=/bin".to_vec(), b"EMPTY=".to_vec()],
                    stdio: [NO_FD, 0, 1],
                },
                StageSpec {
                    program: b"/usr/bin/wc".to_vec(),
                    argv: vec![b"wc".to_vec(), Vec::new()],
                    env: Vec::new(),
                    stdio: [1, 1, 1],
                },
            ],
        }
    }

    fn body(frame: &[u8]) -> &[u8] {
        let n = frame_len(frame[..4].try_into().unwrap()).unwrap();
        assert_eq!(n, frame.len() - 4);
        &frame[4..]
    }

    #[test]
    fn requests_and_replies_round_trip() {
        for request in [spawn(), Request::Kill { id: u64::MAX }] {
            let frame = encode_request(&request).unwrap();
            assert_eq!(decode_request(body(&frame), 3).unwrap(), request);
        }
        for reply in [
            Reply::Started {
                id: 1,
                pids: vec![4242, -libc::ENOENT],
            },
            Reply::Exited {
                id: 2,
                stage: 1,
                status: 9,
            },
        ] {
            assert_eq!(decode_reply(body(&encode_reply(&reply))).unwrap(), reply);
        }
    }

    #[test]
    fn descriptor_indexes_must_have_been_passed() {
        let frame = encode_request(&spawn()).unwrap();
        assert_eq!(decode_request(body(&frame), 2), Err(WireError::BadFd(2)));
        assert_eq!(
            decode_request(body(&frame), MAX_FDS + 1),
            Err(WireError::TooMany("descriptors"))
        );
    }

    #[test]
    fn oversize_and_broken_messages_are_refused() {
        assert_eq!(
            frame_len(((MAX_MESSAGE + 1) as u32).to_ne_bytes()),
            Err(WireError::TooLarge(MAX_MESSAGE + 1))
        );
        assert_eq!(
            frame_len((MAX_MESSAGE as u32).to_ne_bytes()),
            Ok(MAX_MESSAGE)
        );
        let Request::Spawn { mut stages, .. } = spawn() else {
            unreachable!()
        };
        stages[0].argv.push(vec![b'x'; MAX_MESSAGE]);
        let huge = Request::Spawn {
            id: 1,
            backstop_ms: 1,
            cwd: b"/".to_vec(),
            ruleset: NO_FD,
            filter: Vec::new(),
            mounts: Vec::new(),
            unix_layer: NO_FD,
            listener_to: NO_FD,
            notify: Vec::new(),
            stages: stages.clone(),
        };
        assert!(matches!(encode_request(&huge), Err(WireError::TooLarge(_))));
        let many = Request::Spawn {
            id: 1,
            backstop_ms: 1,
            cwd: b"/".to_vec(),
            ruleset: NO_FD,
            filter: Vec::new(),
            mounts: Vec::new(),
            unix_layer: NO_FD,
            listener_to: NO_FD,
            notify: Vec::new(),
            stages: vec![stages[1].clone(); MAX_STAGES + 1],
        };
        assert_eq!(encode_request(&many), Err(WireError::TooMany("stages")));
        let nul = Request::Spawn {
            id: 1,
            backstop_ms: 1,
            cwd: b"/".to_vec(),
            ruleset: NO_FD,
            filter: Vec::new(),
            mounts: Vec::new(),
            unix_layer: NO_FD,
            listener_to: NO_FD,
            notify: Vec::new(),
            stages: vec![StageSpec {
                argv: vec![b"a\0b".to_vec()],
                ..stages[1].clone()
            }],
        };
        assert_eq!(encode_request(&nul), Err(WireError::Nul("arguments")));
        // Every cut of a valid message is refused, never misread.
        let frame = encode_request(&spawn()).unwrap();
        let whole = body(&frame);
        for cut in 0..whole.len() {
            assert!(decode_request(&whole[..cut], 3).is_err(), "cut at {cut}");
        }
        let mut longer = whole.to_vec();
        longer.push(0);
        assert_eq!(
            decode_request(&longer, 3),
            Err(WireError::Malformed("bytes after the message"))
        );
        // A count that claims more entries than bytes is refused before anything is reserved.
        let mut w = Writer::default();
        w.u32(STARTED);
        w.u64(1);
        w.u32(u32::MAX);
        assert_eq!(
            decode_reply(body(&w.frame().unwrap())),
            Err(WireError::TooMany("stages"))
        );
    }
}
