//! Tools adapter: the command spawner, one small process per run that starts every command
//! (bash, a direct pipeline, the success check) for the harness. In: a [`Job`] (program paths,
//! argv, env, work dir, stdio descriptors, the confinement). Out: a [`Child`] per stage whose
//! ending can be awaited. I/O: fork at start, a Unix socket, SCM_RIGHTS.
//!
//! Why: forking the harness for each command (a large multi-threaded process, twice with a
//! watchdog) cost more CPU per round than everything else the harness does. [`start`] forks
//! the spawner early in `main`, before the async runtime, the config and any key exist, so it
//! is single-threaded, small and holds no key; its own forks are cheap. It is the parent of
//! every command, which keeps the watchdog's guarantees ([`server`]): when the harness dies
//! (SIGKILL, OOM), the spawner sees end-of-file or its parent-death signal and SIGKILLs every
//! group that still holds a process of its; it kills a group itself at the command's timeout
//! plus [`BACKSTOP`]; a command's first process dies with the spawner. The harness keeps its
//! own timeout, interrupt and group killing, output capture and pipes.
//!
//! Each spawn is one request (all stages of a pipeline at once, so the later stages join the
//! first stage's group before anything is reaped) and one reply with the pids; then one reply
//! per ended stage with its wait status ([`wire`]). A dead spawner is a tool error, never a
//! hang: every waiter is woken with it.

mod server;
mod socket;
mod wire;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use crate::Landlock;
pub use wire::StageSpec;
use wire::{Reply, Request, NO_FD};

/// The spawner's own deadline beyond a command's timeout: the harness normally acts first.
pub(crate) const BACKSTOP: Duration = Duration::from_secs(5);

/// Forks the spawner process and returns the harness's end of its socket and the spawner's
/// pid (for [`reap`]). Call it before any thread, config or key exists (first thing in
/// `main`).
pub fn start() -> io::Result<(OwnedFd, libc::pid_t)> {
    let mut pair = [0; 2];
    // SAFETY: socketpair writes two descriptors.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are ours.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    // SAFETY: getpid and fork have no preconditions; the child never returns from serve.
    let harness = unsafe { libc::getpid() };
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        drop(ours);
        // SAFETY: in the new spawner process, which owns `theirs`.
        unsafe { server::serve(theirs, harness) }
    }
    Ok((ours, pid))
}

/// How long [`reap`] waits for the spawner to exit.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// At the harness's exit, once every handle on the socket is closed: waits (bounded) for the
/// spawner, which kills any group left and exits on end-of-file, so that no process of the
/// run survives `harness once` and the commands' CPU time is accounted to the harness (its
/// children's usage, as `wait4` on the harness reports it). A spawner that does not exit in
/// time is SIGKILLed.
pub fn reap(pid: libc::pid_t) {
    let start = std::time::Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r != 0 {
            if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if start.elapsed() >= REAP_WAIT {
            // SAFETY: kill and waitpid on our own, unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The harness's handle on its spawner (cheap to clone).
#[derive(Clone)]
pub struct Spawner {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner").finish_non_exhaustive()
    }
}

struct Inner {
    /// The socket for requests (a duplicate of the reader's); `None`: no spawner.
    tx: Option<Mutex<OwnedFd>>,
    state: Mutex<State>,
    next: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Why the spawner cannot be used, once it cannot.
    gone: Option<String>,
    started: HashMap<u64, oneshot::Sender<Vec<i32>>>,
    exits: HashMap<(u64, u32), oneshot::Sender<i32>>,
}

/// One command to start: its stages run as a pipeline in one new process group.
pub struct Job<'a> {
    /// The work dir.
    pub cwd: &'a Path,
    /// The command's timeout (the spawner's backstop is this plus [`BACKSTOP`]).
    pub timeout: Duration,
    /// The sandbox each process applies to itself, if any.
    pub confine: Option<&'a Landlock>,
    /// The processes, in pipeline order, each with its stdio descriptors (`None`:
    /// `/dev/null`).
    pub stages: Vec<StageSpec<Option<BorrowedFd<'a>>>>,
}

impl Spawner {
    /// The handle on a spawner [`start`] forked; starts reading its replies (so it must be
    /// called inside the async runtime).
    pub fn connect(fd: OwnedFd) -> Spawner {
        let setup = || -> io::Result<(OwnedFd, tokio::net::UnixStream)> {
            let tx = fd.try_clone()?;
            let std = std::os::unix::net::UnixStream::from(fd);
            std.set_nonblocking(true)?;
            Ok((tx, tokio::net::UnixStream::from_std(std)?))
        };
        match setup() {
            Ok((tx, rx)) => {
                let inner = Arc::new(Inner {
                    tx: Some(Mutex::new(tx)),
                    state: Mutex::new(State::default()),
                    next: AtomicU64::new(1),
                });
                tokio::spawn(read_replies(rx, Arc::downgrade(&inner)));
                Spawner { inner }
            }
            Err(e) => Spawner::unavailable(format!("cannot talk to the command spawner: {e}")),
        }
    }

    /// A handle without a spawner: every spawn fails with `why`.
    pub fn unavailable(why: impl Into<String>) -> Spawner {
        Spawner {
            inner: Arc::new(Inner {
                tx: None,
                state: Mutex::new(State {
                    gone: Some(why.into()),
                    ..State::default()
                }),
                next: AtomicU64::new(1),
            }),
        }
    }

    /// [`start`] and [`Spawner::connect`] in one, for tests and benchmarks (inside a runtime).
    pub fn start_here() -> Spawner {
        match start() {
            Ok((fd, _)) => Spawner::connect(fd),
            Err(e) => Spawner::unavailable(format!("cannot start the command spawner: {e}")),
        }
    }

    /// Starts `job`'s stages: per stage a [`Child`], or why it could not start (an exec error,
    /// as a spawn's). Fails as a whole when the spawner cannot be reached or does not answer.
    pub async fn spawn(&self, job: Job<'_>) -> Result<Vec<io::Result<Child>>> {
        // This command's Unix-socket step (its end of the supervisor's socketpair): made here,
        // kept until the request (which passes its descriptor) is sent.
        let step = match job.confine {
            Some(l) => l
                .command_step()
                .context("cannot prepare the command's Unix-socket step")?,
            None => crate::CommandStep::default(),
        };
        let (n, timeout) = (job.stages.len() as u32, job.timeout);
        let (request, fds) = request(job, &step, self.inner.next.fetch_add(1, Ordering::Relaxed));
        let Request::Spawn { id, .. } = request else {
            return Err(anyhow!("internal: not a spawn"));
        };
        let frame = wire::encode_request(&request)
            .map_err(|e| anyhow!("cannot pass the command to the spawner: {e}"))?;
        let (started_tx, started_rx) = oneshot::channel();
        let mut exits = Vec::with_capacity(n as usize);
        {
            let mut state = self.inner.lock();
            if let Some(why) = &state.gone {
                return Err(anyhow!("{why}"));
            }
            state.started.insert(id, started_tx);
            for stage in 0..n {
                let (tx, rx) = oneshot::channel();
                state.exits.insert((id, stage), tx);
                exits.push(rx);
            }
        }
        if let Err(e) = self.send(&frame, &fds) {
            self.forget(id, n);
            return Err(anyhow!("cannot reach the command spawner: {e}"));
        }
        let answer = tokio::time::timeout(timeout.saturating_add(BACKSTOP), started_rx).await;
        let pids = match answer {
            Ok(Ok(pids)) if pids.len() == n as usize => pids,
            Ok(_) => {
                self.forget(id, n);
                return Err(anyhow!("{}", self.gone_reason()));
            }
            Err(_) => {
                self.kill(id);
                self.forget(id, n);
                return Err(anyhow!("the command spawner did not answer"));
            }
        };
        Ok(pids
            .into_iter()
            .zip(exits)
            .enumerate()
            .map(|(stage, (pid, exit))| {
                if pid > 0 {
                    Ok(Child {
                        pid,
                        id,
                        exit: Some(exit),
                        status: None,
                        spawner: self.clone(),
                    })
                } else {
                    self.inner.lock().exits.remove(&(id, stage as u32));
                    Err(io::Error::from_raw_os_error(-pid))
                }
            })
            .collect())
    }

    fn send(&self, frame: &[u8], fds: &[RawFd]) -> io::Result<()> {
        let Some(tx) = &self.inner.tx else {
            return Err(io::Error::other(self.gone_reason()));
        };
        let tx = tx.lock().map_err(|_| io::Error::other("poisoned"))?;
        socket::send_frame(tx.as_fd(), frame, fds)
    }

    /// Has the spawner install the seccomp `program` on itself, so on every command it starts
    /// from now on (a filter cannot be taken off), and start each program with
    /// `execveat(pass, ...)` ([`sandbox::loader::pass`]); returns the listener of the filter's
    /// notifications. Fails when the spawner is gone, refuses, or says nothing within 5 s.
    pub fn guard(&self, program: &[libc::sock_filter], pass: u32) -> io::Result<OwnedFd> {
        let program = Arc::new(program.to_vec());
        let (ours, theirs) = crate::unix::notify::pair(&program)?;
        let frame = wire::encode_request(&Request::Guard {
            program: crate::seccomp::filter_bytes(&program),
            pass,
            to: 0,
        })
        .map_err(io::Error::other)?;
        self.send(&frame, &[theirs.fd()])?;
        drop(theirs);
        let mut poll = libc::pollfd {
            fd: ours.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, as declared.
        if unsafe { libc::poll(&mut poll, 1, 5_000) } <= 0 {
            return Err(io::Error::other("the command spawner did not answer"));
        }
        crate::unix::notify::recv_fd(&ours)?.ok_or_else(|| {
            io::Error::other(
                "the command spawner could not install the filter (seccomp user notification)",
            )
        })
    }

    /// Has the spawner start each program with `execveat(pass, ...)` from now on (see
    /// [`Request::Pass`]).
    pub fn set_pass(&self, pass: u32) -> io::Result<()> {
        let frame = wire::encode_request(&Request::Pass { pass }).map_err(io::Error::other)?;
        self.send(&frame, &[])
    }

    /// Asks the spawner to kill spawn `id` (its group, each stage) if a process of it still
    /// runs. Best effort.
    fn kill(&self, id: u64) {
        if let Ok(frame) = wire::encode_request(&Request::Kill { id }) {
            let _ = self.send(&frame, &[]);
        }
    }

    fn forget(&self, id: u64, stages: u32) {
        let mut state = self.inner.lock();
        state.started.remove(&id);
        for stage in 0..stages {
            state.exits.remove(&(id, stage));
        }
    }

    fn gone_reason(&self) -> String {
        self.inner
            .lock()
            .gone
            .clone()
            .unwrap_or_else(|| "the command spawner is gone".to_string())
    }
}

impl Inner {
    /// The state, even after a panic elsewhere poisoned the lock (it holds only maps).
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The wire request for `job` and the descriptors it names (each passed once).
fn request(job: Job<'_>, step: &crate::CommandStep, id: u64) -> (Request, Vec<RawFd>) {
    let mut fds: Vec<RawFd> = Vec::new();
    let mut index = |fd: Option<BorrowedFd<'_>>| match fd {
        None => NO_FD,
        Some(fd) => {
            let raw = fd.as_raw_fd();
            let i = fds.iter().position(|f| *f == raw).unwrap_or_else(|| {
                fds.push(raw);
                fds.len() - 1
            });
            i as i32
        }
    };
    let stages = job
        .stages
        .into_iter()
        .map(|s| s.map_stdio(&mut index))
        .collect();
    let ruleset = index(job.confine.map(|l| l.ruleset()));
    let unix_layer = index(step.unix_layer.as_ref().map(|fd| fd.as_fd()));
    let listener_to = index(step.listener_to.as_ref().map(|end| end.borrowed()));
    let request = Request::Spawn {
        id,
        backstop_ms: job
            .timeout
            .saturating_add(BACKSTOP)
            .as_millis()
            .min(u64::MAX as u128) as u64,
        cwd: job.cwd.as_os_str().as_bytes().to_vec(),
        ruleset,
        filter: job.confine.map(|l| l.filter().to_vec()).unwrap_or_default(),
        mounts: job.confine.map(|l| l.mounts().to_vec()).unwrap_or_default(),
        unix_layer,
        listener_to,
        notify: step.notify(),
        stages,
    };
    (request, fds)
}

/// Reads the spawner's replies and hands each to its waiter; when the spawner is gone, every
/// waiter is woken with that.
async fn read_replies(mut rx: tokio::net::UnixStream, inner: Weak<Inner>) {
    let why = loop {
        let mut header = [0u8; 4];
        if rx.read_exact(&mut header).await.is_err() {
            break "the command spawner exited".to_string();
        }
        let body = match wire::frame_len(header) {
            Ok(len) => {
                let mut body = vec![0u8; len];
                if rx.read_exact(&mut body).await.is_err() {
                    break "the command spawner exited".to_string();
                }
                body
            }
            Err(e) => break format!("the command spawner sent a bad reply ({e})"),
        };
        let reply = match wire::decode_reply(&body) {
            Ok(r) => r,
            Err(e) => break format!("the command spawner sent a bad reply ({e})"),
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut state = inner.lock();
        match reply {
            Reply::Started { id, pids } => {
                if let Some(tx) = state.started.remove(&id) {
                    let _ = tx.send(pids);
                }
            }
            Reply::Exited { id, stage, status } => {
                if let Some(tx) = state.exits.remove(&(id, stage)) {
                    let _ = tx.send(status);
                }
            }
        }
    };
    if let Some(inner) = inner.upgrade() {
        let mut state = inner.lock();
        state.gone = Some(why);
        // Dropping the senders wakes every waiter with an error.
        state.started.clear();
        state.exits.clear();
    }
}

/// A started process of a [`Job`].
pub struct Child {
    pid: i32,
    id: u64,
    exit: Option<oneshot::Receiver<i32>>,
    status: Option<ExitStatus>,
    spawner: Spawner,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child").field("pid", &self.pid).finish()
    }
}

impl Child {
    /// The process id (the first stage's is the group's id).
    pub fn id(&self) -> i32 {
        self.pid
    }

    /// Has the spawner kill this spawn: its group and every stage by pid (a later stage of a
    /// pipeline can leave the group). Best effort, as a signal is.
    pub fn kill(&self) {
        if self.status.is_none() {
            self.spawner.kill(self.id);
        }
    }

    /// Waits for the process to end. Cancel-safe: an ending that arrived is kept.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let Some(rx) = self.exit.as_mut() else {
            return Err(io::Error::other(self.spawner.gone_reason()));
        };
        match rx.await {
            Ok(raw) => {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                self.exit = None;
                Ok(status)
            }
            Err(_) => {
                self.exit = None;
                Err(io::Error::other(self.spawner.gone_reason()))
            }
        }
    }
}

impl Drop for Child {
    /// A child dropped before it ended (its caller gave up): its group is killed, as
    /// `kill_on_drop` did.
    fn drop(&mut self) {
        if self.status.is_none() {
            self.spawner.kill(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn stage<'a>(
        program: &'a Path,
        argv: &[&'a str],
        env: &'a [(String, String)],
        stdio: [Option<BorrowedFd<'a>>; 3],
    ) -> StageSpec<Option<BorrowedFd<'a>>> {
        StageSpec::new(program, argv.iter().map(|a| a.as_bytes()), env, stdio)
    }

    #[tokio::test]
    async fn a_pipeline_shares_one_group_and_reports_each_ending() {
        let spawner = Spawner::start_here();
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let (r, w) = std::io::pipe().unwrap();
        let sh = Path::new("/bin/sh");
        let missing = Path::new("/no/such/program");
        let job = Job {
            cwd: Path::new("/"),
            timeout: Duration::from_secs(10),
            confine: None,
            stages: vec![
                stage(
                    sh,
                    &["sh", "-c", "cut -d' ' -f5 /proc/$$/stat; exit 3"],
                    &env,
                    [None, Some(w.as_fd()), None],
                ),
                stage(missing, &["x"], &env, [None, None, None]),
                stage(sh, &["sh", "-c", "kill -9 $$"], &env, [None, None, None]),
            ],
        };
        let mut started = spawner.spawn(job).await.unwrap();
        drop(w);
        let mut last = started.pop().unwrap().unwrap();
        let failed = started.pop().unwrap().unwrap_err();
        let mut first = started.pop().unwrap().unwrap();
        assert_eq!(failed.raw_os_error(), Some(libc::ENOENT));
        assert_eq!(first.wait().await.unwrap().code(), Some(3));
        assert_eq!(last.wait().await.unwrap().signal(), Some(libc::SIGKILL));
        // A second wait returns the same ending.
        assert_eq!(first.wait().await.unwrap().code(), Some(3));
        let mut out = String::new();
        use std::io::Read;
        (&r).read_to_string(&mut out).unwrap();
        assert_eq!(
            out.trim(),
            first.id().to_string(),
            "the first stage leads the group"
        );
    }

    #[tokio::test]
    async fn a_dead_spawner_is_an_error_not_a_hang() {
        let spawner = Spawner::unavailable("no spawner here");
        let job = Job {
            cwd: Path::new("/"),
            timeout: Duration::from_secs(10),
            confine: None,
            stages: vec![],
        };
        let err = spawner.spawn(job).await.unwrap_err();
        assert_eq!(err.to_string(), "no spawner here");
    }

    fn sleeper<'a>(env: &'a [(String, String)], timeout: Duration) -> Job<'a> {
        Job {
            cwd: Path::new("/"),
            timeout,
            confine: None,
            stages: vec![stage(
                Path::new("/bin/sh"),
                &["sh", "-c", "sleep 30"],
                env,
                [None, None, None],
            )],
        }
    }

    #[tokio::test]
    async fn a_killed_spawner_wakes_every_waiter_and_takes_its_commands() {
        let (fd, pid) = start().unwrap();
        let spawner = Spawner::connect(fd);
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let mut started = spawner
            .spawn(sleeper(&env, Duration::from_secs(60)))
            .await
            .unwrap();
        let mut child = started.pop().unwrap().unwrap();
        let leader = child.id();
        // SAFETY: kill and waitpid on the spawner this test forked.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        let waited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        let err = waited
            .expect("a dead spawner must not hang a wait")
            .unwrap_err();
        assert_eq!(err.to_string(), "the command spawner exited");
        // The command's first process dies with its parent (its parent-death signal).
        let start = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{leader}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the command outlived the spawner"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // And a later spawn is a clear error.
        let err = spawner
            .spawn(sleeper(&env, Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "the command spawner exited");
    }

    #[tokio::test]
    async fn the_spawner_kills_a_group_at_its_backstop() {
        let spawner = Spawner::start_here();
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        // A zero timeout: the backstop alone (5 s) ends the command, as when the harness
        // misses its own timeout.
        let mut started = spawner.spawn(sleeper(&env, Duration::ZERO)).await.unwrap();
        let mut child = started.pop().unwrap().unwrap();
        let status = tokio::time::timeout(BACKSTOP * 3, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn no_descriptor_of_the_harness_reaches_a_command() {
        let spawner = Spawner::start_here();
        let env = vec![];
        let (r, w) = std::io::pipe().unwrap();
        let job = Job {
            cwd: Path::new("/"),
            timeout: Duration::from_secs(10),
            confine: None,
            stages: vec![stage(
                Path::new("/bin/ls"),
                &["ls", "/proc/self/fd"],
                &env,
                [None, Some(w.as_fd()), Some(w.as_fd())],
            )],
        };
        let mut started = spawner.spawn(job).await.unwrap();
        drop(w);
        let mut child = started.pop().unwrap().unwrap();
        assert!(child.wait().await.unwrap().success());
        let mut out = String::new();
        use std::io::Read;
        (&r).read_to_string(&mut out).unwrap();
        // 0, 1, 2 and the directory ls itself opened.
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            ["0", "1", "2", "3"]
        );
    }
}
