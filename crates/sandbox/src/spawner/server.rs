//! Tools adapter: the command spawner's own side ([`super`]): a small single-threaded process
//! that starts (clone), confines and execs every command of the run, reaps them and reports, and kills
//! their groups when the harness is gone or a backstop deadline passes. In: requests on its
//! socket. Out: replies. I/O: clone(CLONE_VM | CLONE_VFORK), exec, waitpid, kill, poll, signalfd.
//!
//! Between clone and exec the child calls only async-signal-safe functions on values prepared
//! before (C strings, pointer arrays, the filter), so it would be sound even in a fork of a
//! multi-threaded process (the unit tests start a spawner from one).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::socket::{recv_frame, send_frame};
use super::wire::{decode_request, encode_reply, Reply, Request, StageSpec, NO_FD};
use crate::process::kill_group;
use crate::{protect, seccomp};

/// `CLOSE_RANGE_CLOEXEC` (Linux 5.11): mark instead of close.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// One spawn whose group may still hold a process of ours (the spawner's side of the
/// harness's `Child`ren: a started stage is its pid here).
struct Job {
    id: u64,
    pgid: libc::pid_t,
    /// The stages started and not yet reaped: pid, index in the spawn. While one is
    /// unreaped, `pgid` cannot name another group: the kernel does not reuse a pid still in
    /// use as a group id.
    live: Vec<(libc::pid_t, u32)>,
    deadline: Duration,
    killed: bool,
}

struct Spawner {
    sock: OwnedFd,
    signals: OwnedFd,
    harness: libc::pid_t,
    jobs: Vec<Job>,
    /// The stack each child runs on until its exec.
    stack: Vec<u8>,
    /// A job ended: its leftovers are to be swept.
    sweep_due: bool,
    /// Under the loader guard: the `execveat` descriptor value its filter lets through.
    exec_pass: Option<libc::c_int>,
}

/// How many times [`Spawner::sweep`] looks again for children (each kill can reparent the
/// killed process's own children here), a millisecond apart at most.
const SWEEP_ROUNDS: usize = 500;

/// The child's stack until its exec: the confinement and exec calls need little.
const CHILD_STACK: usize = 256 * 1024;

/// The spawner's life: set up, then serve until the harness is gone. Never returns.
///
/// # Safety
/// Only in the freshly forked spawner process, which owns `sock`.
pub(super) unsafe fn serve(sock: OwnedFd, harness: libc::pid_t) -> ! {
    libc::prctl(
        libc::PR_SET_NAME,
        c"harness-spawn".as_ptr() as libc::c_ulong,
        0,
        0,
        0,
    );
    // SIGCHLD and the parent-death signal arrive through the signalfd. The harness's stop
    // signals (a terminal's Ctrl-C reaches the whole foreground group) are the harness's to
    // handle: the spawner keeps serving until the harness goes.
    let mut mask: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut mask);
    for s in [
        libc::SIGCHLD,
        libc::SIGUSR1,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
    ] {
        libc::sigaddset(&mut mask, s);
    }
    libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1, 0, 0, 0);
    // What a command leaves behind outside its group (a `setsid` daemon) is reparented here,
    // not to init, so [`Spawner::sweep`] can end it with the command.
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    // A session of its own, without a controlling terminal: no command can open the
    // operator's terminal (`/dev/tty`) to read it or push input into it (TIOCSTI), even
    // unconfined. (The spawner is no group leader, so this cannot fail.)
    libc::setsid();
    if libc::getppid() != harness {
        libc::_exit(0);
    }
    // Nothing of the harness's but the socket: stdio is /dev/null (a command's unset stdio
    // slot stays that), every other inherited descriptor goes.
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if null >= 0 {
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        libc::close(null);
    }
    let keep = sock.as_raw_fd() as libc::c_uint;
    if keep > 3 {
        libc::syscall(libc::SYS_close_range, 3u32, keep - 1, 0u32);
    }
    libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
    let mut watched: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut watched);
    libc::sigaddset(&mut watched, libc::SIGCHLD);
    libc::sigaddset(&mut watched, libc::SIGUSR1);
    let sfd = libc::signalfd(-1, &watched, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
    if sfd < 0 {
        libc::_exit(1);
    }
    let mut spawner = Spawner {
        sock,
        signals: OwnedFd::from_raw_fd(sfd),
        harness,
        jobs: Vec::new(),
        stack: vec![0u8; CHILD_STACK],
        sweep_due: false,
        exec_pass: None,
    };
    spawner.run()
}

impl Spawner {
    fn run(&mut self) -> ! {
        loop {
            let now = now();
            let wait = self
                .jobs
                .iter()
                .filter(|j| !j.killed)
                .map(|j| j.deadline.saturating_sub(now))
                .min()
                .map_or(-1, |d| d.as_millis().min(60_000) as libc::c_int + 1);
            let mut fds = [
                libc::pollfd {
                    fd: self.sock.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.signals.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two pollfds, as declared.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
            if r < 0 && crate::errno() != libc::EINTR {
                self.bail();
            }
            if self.drain_signals() {
                self.bail();
            }
            // SAFETY: getppid has no preconditions.
            if unsafe { libc::getppid() } != self.harness {
                self.bail();
            }
            self.reap();
            // The harness runs one command at a time, so with no job left every child that is
            // no stage is the last job's leftover. (Were jobs to overlap, the sweep would wait
            // for a moment with none.)
            if self.sweep_due && self.jobs.is_empty() {
                self.sweep_due = false;
                self.sweep();
            }
            self.enforce_deadlines();
            if r > 0 && fds[0].revents != 0 {
                match recv_frame(self.sock.as_fd()) {
                    Ok(Some((body, passed))) => self.handle(&body, passed),
                    Ok(None) | Err(_) => self.bail(),
                }
            }
        }
    }

    /// Empties the signalfd; true when the parent-death signal was among them.
    fn drain_signals(&self) -> bool {
        let mut parent_died = false;
        loop {
            // SAFETY: signalfd_siginfo is plain data.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads one siginfo into `info`.
            let n = unsafe {
                libc::read(
                    self.signals.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n != size as isize {
                return parent_died;
            }
            parent_died |= info.ssi_signo == libc::SIGUSR1 as u32;
        }
    }

    /// Reaps every ended child and reports it.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                if pid < 0 && crate::errno() == libc::EINTR {
                    continue;
                }
                return;
            }
            let Some(j) = self.jobs.iter().position(|j| j.has(pid)) else {
                continue;
            };
            let job = &mut self.jobs[j];
            let Some(i) = job.live.iter().position(|(p, _)| *p == pid) else {
                continue;
            };
            let (id, (_, stage)) = (job.id, job.live.swap_remove(i));
            if job.live.is_empty() {
                self.jobs.swap_remove(j);
                self.sweep_due = true;
            }
            self.reply(&Reply::Exited { id, stage, status });
        }
    }

    /// The backstop: a group still running past its deadline is killed (the harness normally
    /// kills it first, at the command's own timeout).
    fn enforce_deadlines(&mut self) {
        let now = now();
        for job in self.jobs.iter_mut().filter(|j| !j.killed) {
            if now >= job.deadline {
                kill_job(job);
                job.killed = true;
            }
        }
    }

    fn reply(&mut self, reply: &Reply) {
        if send_frame(self.sock.as_fd(), &encode_reply(reply), &[]).is_err() {
            self.bail();
        }
    }

    fn handle(&mut self, body: &[u8], passed: Vec<OwnedFd>) {
        // A request the harness would never send: the protocol is broken, so stop.
        let Ok(request) = decode_request(body, passed.len()) else {
            self.bail();
        };
        match request {
            Request::Pass { pass } => self.exec_pass = Some(pass as libc::c_int),
            Request::Guard { program, pass, to } => {
                self.guard(&program, pass, passed.get(to as usize));
            }
            Request::Kill { id } => {
                if let Some(job) = self.jobs.iter_mut().find(|j| j.id == id) {
                    kill_job(job);
                    job.killed = true;
                }
            }
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
                let raw = |i: i32| {
                    if i == NO_FD {
                        NO_FD
                    } else {
                        passed[i as usize].as_raw_fd()
                    }
                };
                let filter = seccomp::from_bytes(&filter);
                let notify = seccomp::from_bytes(&notify);
                let cwd = CString::new(cwd).unwrap_or_default();
                // Mounts the spawner cannot read fail every stage (EINVAL) rather than run a
                // command without them.
                let mounts = (!mounts.is_empty()).then(|| protect::Mounts::from_bytes(&mounts));
                let broken = matches!(mounts, Some(None));
                let mounts = mounts.flatten();
                let common = Common {
                    spawner: std::process::id() as libc::pid_t,
                    cwd: &cwd,
                    exec_pass: self.exec_pass,
                    confinement: crate::ChildConfinement {
                        mounts: mounts.as_ref(),
                        ruleset: raw(ruleset),
                        filter: &filter,
                        unix_layer: raw(unix_layer),
                        listener_to: raw(listener_to),
                        notify: &notify,
                    },
                };
                let (pgid, pids) = self.start_stages(&stages, &common, broken, &raw);
                // The passed descriptors close here: only the commands hold them now, so the
                // harness sees end-of-file on their output when they end.
                drop(passed);
                self.started(id, pgid, pids, backstop_ms);
            }
        }
    }

    /// Installs the notifying `program` on the spawner itself and sends its listener over
    /// `sock`; from then on each child starts its program through `pass`.
    fn guard(&mut self, program: &[u8], pass: u32, sock: Option<&OwnedFd>) {
        let program = seccomp::from_bytes(program);
        if let Some(sock) = sock {
            // SAFETY: prctl and the seccomp install act on this single-threaded
            // process; the program outlives the call. A failure closes the socket
            // unanswered (dropped with `passed`): the harness hears why not.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            }
            if crate::unix::notify::install_and_send(sock.as_raw_fd(), &program).is_ok() {
                self.exec_pass = Some(pass as libc::c_int);
            }
        }
    }

    /// Starts each of a spawn's `stages` in order (none when the mounts were `broken`),
    /// the first started one leading the group: the group, and per stage its pid or
    /// `-errno`. `raw`: a passed descriptor's index -> its descriptor.
    fn start_stages(
        &mut self,
        stages: &[StageSpec],
        common: &Common,
        broken: bool,
        raw: &dyn Fn(i32) -> RawFd,
    ) -> (libc::pid_t, Vec<libc::pid_t>) {
        let mut pgid = 0;
        let mut pids = Vec::with_capacity(stages.len());
        for stage in stages {
            let stdio = stage.stdio.map(raw);
            let stack = &mut self.stack;
            let started = if broken {
                Err(libc::EINVAL)
            } else {
                Prepared::new(stage, common.cwd).and_then(|p| p.start(common, pgid, stdio, stack))
            };
            match started {
                Ok(pid) => {
                    if pgid == 0 {
                        pgid = pid;
                    }
                    pids.push(pid);
                }
                Err(errno) => pids.push(-errno.max(1)),
            }
        }
        (pgid, pids)
    }

    /// Spawn `id` has started `pids` in group `pgid`: a job to watch (its backstop
    /// `backstop_ms` from now) while any of them runs, and the reply.
    fn started(&mut self, id: u64, pgid: libc::pid_t, pids: Vec<libc::pid_t>, backstop_ms: u64) {
        let live: Vec<(libc::pid_t, u32)> = (0u32..)
            .zip(&pids)
            .filter(|(_, pid)| **pid > 0)
            .map(|(stage, pid)| (*pid, stage))
            .collect();
        if !live.is_empty() {
            self.jobs.push(Job {
                id,
                pgid,
                live,
                deadline: now().saturating_add(Duration::from_millis(backstop_ms)),
                killed: false,
            });
        }
        self.reply(&Reply::Started { id, pids });
    }

    /// The harness is gone (or the protocol broke): every group that still holds a process of
    /// ours is killed, then the spawner exits.
    fn bail(&self) -> ! {
        for job in &self.jobs {
            kill_job(job);
        }
        self.sweep();
        // SAFETY: _exit ends the process without running anything of the harness's.
        unsafe { libc::_exit(0) }
    }
}

impl Spawner {
    /// Kills and reaps every child that is no stage of a job: processes a command left
    /// outside its group (`setsid`, a shell's job control) and reparented here when their
    /// parent ended. Their own children come here in turn as they are killed, so it looks
    /// again until none is left. Never reaps a stage (its ending is the harness's to hear).
    fn sweep(&self) {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let list = format!("/proc/self/task/{me}/children");
        for _ in 0..SWEEP_ROUNDS {
            let Ok(text) = std::fs::read_to_string(&list) else {
                return;
            };
            let stray: Vec<libc::pid_t> = text
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .filter(|pid| !self.jobs.iter().any(|j| j.has(*pid)))
                .collect();
            if stray.is_empty() {
                return;
            }
            for pid in stray {
                // SAFETY: signals and a non-blocking wait for a child of ours; a process that
                // is gone gives ESRCH/ECHILD.
                unsafe {
                    if libc::getpgid(pid) == pid {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                    libc::kill(pid, libc::SIGKILL);
                    let mut status = 0;
                    libc::waitpid(pid, &mut status, libc::WNOHANG);
                }
            }
            // SAFETY: sleeps a millisecond (poll on no descriptor).
            unsafe { libc::poll(std::ptr::null_mut(), 0, 1) };
        }
    }
}

/// Kills `job`'s group and each of its stages by pid: a later stage of a pipeline is no group
/// leader, so it can leave the group (`setsid`), and the harness waits for every stage.
fn kill_job(job: &Job) {
    kill_group(job.pgid);
    for (pid, _) in &job.live {
        // SAFETY: kill only sends a signal; the stage is our unreaped child, so its pid is
        // still its own.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
}

impl Job {
    /// Whether `pid` is one of this spawn's unreaped stages.
    fn has(&self, pid: libc::pid_t) -> bool {
        self.live.iter().any(|(p, _)| *p == pid)
    }
}

/// What every stage of one spawn shares.
struct Common<'a> {
    spawner: libc::pid_t,
    cwd: &'a CString,
    /// See `Spawner::exec_pass`.
    exec_pass: Option<libc::c_int>,
    confinement: crate::ChildConfinement<'a>,
}

/// One stage with its C strings and pointer arrays built before the clone.
struct Prepared {
    program: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl Prepared {
    /// `stage` with its program made absolute against `cwd` (the loader guard's pass needs an
    /// absolute path, and it names the same file: the child execs after its `chdir`).
    fn new(stage: &StageSpec, cwd: &CString) -> Result<Prepared, i32> {
        let c = |b: &Vec<u8>| CString::new(b.clone()).map_err(|_| libc::EINVAL);
        let program = if stage.program.starts_with(b"/") {
            c(&stage.program)?
        } else {
            let mut abs = cwd.as_bytes().to_vec();
            abs.push(b'/');
            abs.extend_from_slice(&stage.program);
            c(&abs)?
        };
        let argv_s = stage.argv.iter().map(c).collect::<Result<Vec<_>, _>>()?;
        let env_s = stage.env.iter().map(c).collect::<Result<Vec<_>, _>>()?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain([std::ptr::null()])
                .collect::<Vec<_>>()
        };
        let argv = ptrs(&argv_s);
        let envp = ptrs(&env_s);
        let mut strings = argv_s;
        strings.extend(env_s);
        Ok(Prepared {
            program,
            _strings: strings,
            argv,
            envp,
        })
    }

    /// Starts the stage's process and returns once it has exec'd (or failed to): its pid, or
    /// the errno of the step that failed.
    ///
    /// The child shares the spawner's memory until its exec, and the spawner is suspended
    /// meanwhile (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does it): no page table is
    /// copied and none torn down at the exec, which made up most of a fork's cost. The child
    /// runs on `stack`, writes nothing of the spawner's but its `errno` slot, and gets its own
    /// copy of the signal dispositions (no `CLONE_SIGHAND`).
    fn start(
        &self,
        common: &Common,
        pgid: libc::pid_t,
        stdio: [RawFd; 3],
        stack: &mut [u8],
    ) -> Result<i32, i32> {
        let mut args = ChildArgs {
            stage: self,
            common,
            pgid,
            stdio,
            errno: 0,
        };
        // The stack grows down from its 16-byte aligned top.
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        // SAFETY: `child_main` only runs `exec_child` (raw system calls on values built before
        // the clone) and exits; `stack` and `args` outlive it, as the spawner is suspended
        // until the child's exec or exit.
        let pid = unsafe {
            libc::clone(
                child_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&mut args as *mut ChildArgs).cast(),
            )
        };
        if pid < 0 {
            return Err(crate::errno());
        }
        // SAFETY: the child wrote the slot, if at all, before the spawner resumed.
        let errno = unsafe { std::ptr::read_volatile(&args.errno) };
        if errno == 0 {
            return Ok(pid);
        }
        let mut status = 0;
        // SAFETY: reaps the child that failed before its exec.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && crate::errno() == libc::EINTR {}
        Err(errno)
    }

    /// The child's side: its group, signals, stdio, work dir, confinement, exec. Returns only
    /// on failure, with the errno.
    ///
    /// # Safety
    /// Only in the cloned child: raw system calls on values built before the clone.
    unsafe fn exec_child(&self, common: &Common, pgid: libc::pid_t, stdio: [RawFd; 3]) -> i32 {
        // Gone with the spawner, so that no command outlives it (its group is killed by the
        // spawner; a spawner SIGKILLed itself still takes every command's first process).
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != common.spawner {
            libc::_exit(137);
        }
        if libc::setpgid(0, pgid) != 0 {
            return crate::errno();
        }
        // The mask and SIGPIPE as a fresh process has them (the Rust runtime ignores SIGPIPE;
        // `yes | head` needs it back). Other dispositions are inherited, as with any spawn.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for (slot, fd) in stdio.iter().enumerate() {
            if *fd != NO_FD && libc::dup2(*fd, slot as i32) < 0 {
                return crate::errno();
            }
        }
        if libc::chdir(common.cwd.as_ptr()) != 0 {
            return crate::errno();
        }
        if let Err(e) = crate::apply_in_child(&common.confinement) {
            return e;
        }
        // Every descriptor of the spawner's is close-on-exec already; this keeps it so for
        // any that is not (the status pipe must stay open until the exec).
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
        match common.exec_pass {
            Some(pass) => {
                libc::syscall(
                    libc::SYS_execveat,
                    pass,
                    self.program.as_ptr(),
                    self.argv.as_ptr(),
                    self.envp.as_ptr(),
                    0,
                );
            }
            None => {
                libc::execve(
                    self.program.as_ptr(),
                    self.argv.as_ptr(),
                    self.envp.as_ptr(),
                );
            }
        }
        crate::errno()
    }
}

/// What the cloned child gets: its stage, the spawn's common values, and where to leave the
/// errno of a failed start.
struct ChildArgs<'a> {
    stage: &'a Prepared,
    common: &'a Common<'a>,
    pgid: libc::pid_t,
    stdio: [RawFd; 3],
    errno: i32,
}

/// The cloned child's entry: exec, or leave the errno and exit.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the spawner's `ChildArgs`, alive while the spawner is suspended.
    unsafe {
        let args = &mut *arg.cast::<ChildArgs>();
        let errno = args.stage.exec_child(args.common, args.pgid, args.stdio);
        std::ptr::write_volatile(&mut args.errno, errno.max(1));
        libc::_exit(127)
    }
}

/// CLOCK_MONOTONIC.
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
