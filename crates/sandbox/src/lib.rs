//! harness's confinement of commands and the command spawner that starts them, a crate of
//! its own (package `harness-sandbox`): it knows nothing of the run or its config. In: the
//! [`Settings`] the root crate builds from `[tools.bash]`, the work root, the private temp
//! dir. Out: a [`Status`] for the PLAN and the REPORT ([`decide`], pure), a built [`Landlock`]
//! ruleset plus seccomp filter that each child applies to itself between clone and exec, and
//! the [`spawner`] that clones, confines and execs every command. I/O: Landlock syscalls,
//! opening the roots; the spawner's fork, socket and `execve`; [`process`]'s PATH look-ups.
//!
//! Reads are allowed only beneath the read set ([`reads`]: the work root, the private
//! TMPDIR, the write roots and `read_roots`, by default the system's program dirs), never to
//! the config, the key files or the report dir. Writes are allowed only beneath the write
//! roots (the work root, the run's private temp dir, `[tools.bash].write_roots`) and to
//! `/dev/null`, never to the config, the report dir or a cassette inside them ([`protect`]:
//! read-only mounts in the command's own namespaces). With `network = false`, TCP connect and bind are denied (Landlock ABI 4+),
//! connecting to abstract Unix sockets made outside the sandbox too (ABI 6+), and no socket
//! but a Unix one can be created at all ([`seccomp`]); a Unix one connects only to the
//! sockets `unix_sockets` names ([`unix`]: Landlock ABI 9+, else a seccomp supervisor).
//! Signals to processes outside the sandbox are denied (ABI 6+). When the allow list names
//! programs, execution is confined
//! too ([`exec`]: Landlock EXECUTE, ABI 1): only bash, the allowed programs, their helpers,
//! the dynamic loader and `exec_roots` can be executed.

pub mod exec;
pub mod loader;
pub mod process;
pub mod protect;
pub mod reach;
pub mod reads;
pub mod seccomp;
mod settings;
pub mod spawner;
pub mod unix;

pub use settings::{clean_path, NeverRead, ReadRoot, SandboxMode, Settings, SocketName};

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use landlock::{
    Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, ABI,
};

use harness_gate::Runs;

/// The Landlock ABI this code is written and tested against; newer kernels are used at this
/// level, older ones at theirs (the crate's best-effort mode).
const TARGET_ABI: ABI = ABI::V7;

/// How the commands of one run are confined, as the PLAN and the REPORT say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Under Landlock at this kernel ABI, with the socket filter when `network` is false (so
    /// the network is confined on every ABI: TCP by Landlock too from ABI 4).
    Landlock {
        /// The kernel's Landlock ABI.
        abi: i32,
        /// `[tools.bash].network`.
        network: bool,
    },
    /// `sandbox = "off"`, or no bash tool.
    Off,
    /// `sandbox = "auto"` on a kernel without Landlock: commands run unconfined.
    Unavailable,
}

impl Status {
    /// `landlock (ABI 7)`, `off`, `unavailable`: the REPORT's `sandbox` value.
    pub fn describe(&self) -> String {
        match self {
            Status::Landlock { abi, .. } => format!("landlock (ABI {abi})"),
            Status::Off => "off".to_string(),
            Status::Unavailable => "unavailable".to_string(),
        }
    }

    /// One line for the PLAN: the status and what it confines.
    pub fn plan_line(&self, write_roots: usize) -> String {
        match self {
            Status::Landlock { network, .. } => {
                let roots = match write_roots {
                    0 => String::new(),
                    1 => ", 1 write_roots entry".to_string(),
                    n => format!(", {n} write_roots entries"),
                };
                format!(
                    "{}: reads only under work_root, a private TMPDIR and read_roots (never the config, key files or reports); writes only under work_root{roots} and a private TMPDIR; network {}",
                    self.describe(),
                    if *network {
                        "allowed"
                    } else {
                        "denied (no socket but a Unix one)"
                    }
                )
            }
            Status::Off => {
                "off: commands run unconfined ([tools.bash] sandbox = \"off\")".to_string()
            }
            Status::Unavailable => {
                "unavailable: this kernel has no Landlock; commands run unconfined".to_string()
            }
        }
    }
}

impl Status {
    /// [`Status::plan_line`] and, under Landlock, the read set: the PLAN's `sandbox` value.
    pub fn plan_line_with_reads(&self, bash: &Settings, work_root: &Path) -> String {
        let line = self.plan_line(bash.write_roots.len());
        match (self, reads::read_set(bash, work_root, None)) {
            (Status::Landlock { abi, .. }, Ok(set)) => {
                let protected = match protected_writes(bash, work_root) {
                    Ok(plan) if !plan.names.is_empty() => match probe(&plan) {
                        Ok(()) => format!("; read-only for commands: {}", plan.names.join(", ")),
                        Err(why) => format!(
                            "; NOT protected from commands' writes ({why}): {}",
                            plan.names.join(", ")
                        ),
                    },
                    _ => String::new(),
                };
                format!(
                    "{line}; read set: {}{protected}; {}; {}",
                    reads::summary(bash, &set.hidden),
                    exec_line(bash, work_root),
                    sockets_line(bash, *abi)
                )
            }
            _ => line,
        }
    }
}

/// Which Unix sockets a confined command may connect to and who holds it to them, in one
/// line ([`unix`]), on a kernel of Landlock ABI `abi`. PURE.
pub fn sockets_line(bash: &Settings, abi: i32) -> String {
    let guard = match unix::decide(bash.network, &bash.unix_sockets, abi) {
        // Under the allowlist the supervisor judges every connect.
        unix::Guard::Landlock if bash.egress => unix::Guard::Supervisor,
        guard => guard,
    };
    let names: Vec<String> = bash.unix_sockets.iter().map(|n| n.to_string()).collect();
    match guard {
        unix::Guard::Landlock | unix::Guard::Supervisor => {
            format!("unix sockets: {} ({})", guard.describe(), names.join(", "))
        }
        unix::Guard::Open | unix::Guard::None => format!("unix sockets: {}", guard.describe()),
    }
}

/// What a confined command may execute, in one line ([`exec`]).
pub fn exec_line(bash: &Settings, work_root: &Path) -> String {
    match exec::unrestricted_reason(bash) {
        Some(why) => why.to_string(),
        None => exec::exec_set(bash, work_root, &path_var(), None)
            .map(|set| set.summary())
            .unwrap_or_default(),
    }
}

/// The confinement `mode` gets on a kernel whose Landlock ABI is `kernel` (or why it has none).
/// PURE. `sandbox = "landlock"` fails where Landlock is missing. (`network = false` no longer
/// needs Landlock ABI 4: the seccomp filter refuses every internet socket on any ABI.)
pub fn decide(mode: SandboxMode, kernel: Result<i32, String>, network: bool) -> Result<Status> {
    match (mode, kernel) {
        (SandboxMode::Off, _) => Ok(Status::Off),
        (SandboxMode::Auto, Err(_)) => Ok(Status::Unavailable),
        (SandboxMode::Landlock, Err(why)) => Err(anyhow!(
            "[tools.bash].sandbox = \"landlock\" but {why}; use sandbox = \"auto\" to run unconfined where Landlock is missing"
        )),
        (SandboxMode::Auto | SandboxMode::Landlock, Ok(abi)) => {
            Ok(Status::Landlock { abi, network })
        }
    }
}

/// What the commands of a run in `work_root` must not change although it lies inside a write
/// root (the private TMPDIR holds none of it), or why it cannot be protected.
pub fn protected_writes(bash: &Settings, work_root: &Path) -> Result<protect::Plan, Vec<String>> {
    let mut roots = vec![work_root.to_path_buf()];
    roots.extend(bash.write_roots.iter().cloned());
    let mut keep = bash.never_read.clone();
    keep.extend(run_from(bash, work_root, &roots));
    // The next run's inputs, while they exist (one that does not cannot be mounted; the
    // workspace reads them from the base commit instead).
    for (rel, what) in &bash.inputs {
        let path = work_root.join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        // `AGENTS.md -> docs/AGENTS.md`: the file it names is what gets read and protected
        // (a mount cannot hold a symlink itself).
        let path = match meta.file_type().is_symlink() {
            true => match path.canonicalize() {
                Ok(real) => real,
                Err(_) => continue,
            },
            false => path,
        };
        keep.push(NeverRead {
            path,
            what: what.clone(),
            may_share_work_root: true,
        });
    }
    // The task's attachments, placed before the tool is prepared: no command changes them,
    // where read-only mounts can be made. Where they cannot (no user namespaces), they stay
    // writable rather than every command failing: they are the run's own copies of what
    // the tracker holds, removed at its end, and the file tools never write there
    // ([`attachments_line`] says which holds).
    if let Some(dir) = &bash.attachments {
        let path = work_root.join(dir);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) && mounts_possible().is_ok() {
            keep.push(NeverRead {
                path,
                what: "the task's attachments".to_string(),
                may_share_work_root: true,
            });
        }
    }
    protect::plan(&roots, &keep)
}

/// The places allow rules run programs from by path (`./scripts/**`, `./run.sh *`) that
/// exist: the exec set lets them run, so a command that could write there (an allowed
/// program that writes files, a patch) could run anything it wrote. Only under an exec set
/// (without one any program runs anyway), and not a place that holds a write root: such a
/// rule lets the model run what it writes, by the operator's choice.
fn run_from(bash: &Settings, work_root: &Path, roots: &[PathBuf]) -> Vec<NeverRead> {
    if exec::unrestricted_reason(bash).is_some() {
        return Vec::new();
    }
    let roots: Vec<PathBuf> = roots.iter().filter_map(|r| r.canonicalize().ok()).collect();
    let mut out: Vec<NeverRead> = Vec::new();
    for rule in &bash.policy.allow {
        let (place, what) = match rule.runs() {
            Runs::Under(dir) => (dir, "a path rule's directory"),
            Runs::Program(p) if p.contains('/') => (p, "a program a rule names by path"),
            _ => continue,
        };
        let Ok(real) = work_root.join(&place).canonicalize() else {
            continue;
        };
        if roots.iter().any(|r| r.starts_with(&real)) || out.iter().any(|n| n.path == real) {
            continue;
        }
        out.push(NeverRead {
            path: real,
            what: what.to_string(),
            may_share_work_root: true,
        });
    }
    out
}

/// The `writes` entry of the preflight list: the protected paths inside a write root and how
/// they are kept from commands, or why they cannot be (user namespaces unavailable: the
/// mounts are probed in a forked child).
pub fn writes_line(bash: &Settings, work_root: &Path) -> Result<String> {
    let plan = protected_writes(bash, work_root).map_err(|p| anyhow!("{}", p.join("; ")))?;
    let mut line = if plan.names.is_empty() {
        "no protected path (config, report dir, cassette) lies inside a write root".to_string()
    } else {
        match probe(&plan) {
            Ok(()) => format!(
                "{}: inside a write root, read-only mounts for commands",
                plan.names.join(", ")
            ),
            Err(why) => {
                return Err(anyhow!(
                    "commands could rewrite {}: they lie inside a write root and cannot be made read-only here (NOT protected: {why}; user namespaces unavailable?); move them out of work_root (report_dir, the config file, --record) or give commands a work tree of its own",
                    plan.names.join(", ")
                ))
            }
        }
    };
    if !plan.later.is_empty() {
        line.push_str(&format!(
            "; {} not there yet: harness writes it at the end of the run, replacing whatever a command put there",
            plan.later.join(", ")
        ));
    }
    if let Some(attachments) = attachments_line(bash) {
        line.push_str("; ");
        line.push_str(&attachments);
    }
    Ok(line)
}

/// How the task's attachments (`[intake].attachments_dir`, placed when a task has some) are
/// kept from commands' writes on this system: the preflight's and the PLAN's words.
pub fn attachments_line(bash: &Settings) -> Option<String> {
    let dir = bash.attachments.as_deref()?;
    Some(format!(
        "the task's attachments ({dir}): {}",
        attachments_for_commands()
    ))
}

/// [`attachments_line`] without the directory: `a read-only mount for commands`, or why not.
pub fn attachments_for_commands() -> String {
    match mounts_possible() {
        Ok(()) => "a read-only mount for commands".to_string(),
        Err(why) => format!(
            "NOT read-only for commands here ({why}; user namespaces unavailable?): a command can change its copies, which harness removes at the end of the run"
        ),
    }
}

/// Whether read-only mounts can be made on this system at all, or why not: a forked child
/// tries one on a stand-in directory, once per process (the answer does not change while
/// it runs). For paths that exist only once the run is under way (the attachments), which
/// the preflight cannot probe themselves.
pub fn mounts_possible() -> Result<(), String> {
    static ANSWER: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ANSWER.get_or_init(probe_stand_in).clone()
}

/// The stand-in is the temp dir itself, made read-only in the probing child's own mount
/// namespace: nothing is created, so a harness killed mid-probe leaves nothing behind.
fn probe_stand_in() -> Result<(), String> {
    let tmp = std::env::temp_dir()
        .canonicalize()
        .map_err(|e| format!("the temp dir, the mount probe's stand-in: {e}"))?;
    let root = tmp.parent().unwrap_or(Path::new("/")).to_path_buf();
    let stand_in = NeverRead {
        path: tmp,
        what: "a stand-in".to_string(),
        may_share_work_root: true,
    };
    protect::plan(&[root], &[stand_in])
        .map_err(|p| p.join("; "))
        .and_then(|plan| probe(&plan))
}

/// Whether `plan`'s mounts can be made here (a forked child tries), or why not.
fn probe(plan: &protect::Plan) -> Result<(), String> {
    protect::Mounts::prepare(plan)
        .map_err(|e| e.to_string())
        .and_then(|m| m.probe())
}

/// The PATH commands run with: the harness's own, or the default the scrubbed env gets.
pub fn path_var() -> String {
    crate::process::own_path()
}

/// The running kernel's Landlock ABI version, or why there is none.
pub fn kernel_abi() -> Result<i32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag, the call only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        return Ok(v as i32);
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled at boot".to_string()
        }
        Some(libc::ENOSYS) => {
            "this kernel has no Landlock (Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)".to_string()
        }
        _ => format!("the Landlock version query failed ({err})"),
    })
}

/// A built Landlock ruleset and seccomp filter, shared by every command of the run. The
/// spawner receives both with each command and the child applies them ([`apply_in_child`]).
#[derive(Debug, Clone)]
pub struct Landlock {
    ruleset: Arc<OwnedFd>,
    /// The seccomp filter (sockets with `network = false`, memfds with an exec set) as bytes;
    /// empty when it refuses nothing.
    filter: Arc<Vec<u8>>,
    /// When the config, the report dir or a cassette lies inside a write root: the
    /// read-only mounts that keep commands from changing them ([`protect`]), as the spawner
    /// receives them ([`protect::Mounts::to_bytes`]).
    protect: Option<Arc<Vec<u8>>>,
    /// With `network = false` and `unix_sockets`: how the names are held ([`unix`]).
    unix: Option<UnixSockets>,
    /// Under an exec set: its dynamic loaders, for the [`loader`] guard.
    loaders: Arc<Vec<PathBuf>>,
    /// See [`Landlock::supervised_exec_pass`].
    exec_pass: Option<u32>,
    /// What the ruleset lets commands reach, for a failed command's hint ([`reach`]).
    reach: Arc<reach::Roots>,
}

/// The run-wide half of [`unix::Guard::Landlock`] or [`unix::Guard::Supervisor`].
#[derive(Debug, Clone)]
enum UnixSockets {
    Landlock(Arc<OwnedFd>),
    Supervisor(Arc<unix::supervisor::Supervisor>),
}

/// What one command's child needs beyond the run's ruleset and filter: the Unix-socket
/// step's descriptor (the `RESOLVE_UNIX` layer, or this command's end of the supervisor's
/// socketpair) and the notifying program. Made in the harness per command; the descriptors
/// travel to the spawner with the request.
#[derive(Debug, Default)]
pub(crate) struct CommandStep {
    /// The `RESOLVE_UNIX` layer ([`unix::Guard::Landlock`]).
    pub unix_layer: Option<Arc<OwnedFd>>,
    /// This command's end of the supervisor's socketpair ([`unix::Guard::Supervisor`]).
    pub listener_to: Option<unix::notify::ChildEnd>,
}

impl CommandStep {
    /// The notifying program's bytes; empty without a supervisor.
    pub fn notify(&self) -> Vec<u8> {
        self.listener_to
            .as_ref()
            .map(|end| seccomp::filter_bytes(end.program()))
            .unwrap_or_default()
    }
}

impl Landlock {
    /// Builds the ruleset for commands run in `work_root` with private temp dir `tmp`: reads
    /// beneath the read set, writes beneath the work root, `tmp`, the write roots and to
    /// `/dev/null`, TCP and sockets only with `network`. Fails, naming the key, when a read
    /// root would expose a path never to read, when a root cannot be opened, or when the
    /// kernel refuses the ruleset.
    /// With `tcp` (`network = "allowlist"`), TCP connects go to the run's egress proxy only.
    pub fn build(
        bash: &Settings,
        work_root: &Path,
        tmp: &Path,
        tcp: Option<unix::supervisor::TcpGuard>,
    ) -> Result<Landlock> {
        Landlock::build_with(bash, work_root, tmp, /*confine_exec*/ true, tcp)
    }

    /// The same ruleset without the exec set: for the operator's own success check, whose
    /// programs (a test runner, a compiler) the model's allow list does not name. Reads,
    /// writes, the network and signals are confined alike.
    pub fn build_for_check(
        bash: &Settings,
        work_root: &Path,
        tmp: &Path,
        tcp: Option<unix::supervisor::TcpGuard>,
    ) -> Result<Landlock> {
        Landlock::build_with(bash, work_root, tmp, /*confine_exec*/ false, tcp)
    }

    fn build_with(
        bash: &Settings,
        work_root: &Path,
        tmp: &Path,
        confine_exec: bool,
        tcp: Option<unix::supervisor::TcpGuard>,
    ) -> Result<Landlock> {
        if bash.egress != tcp.is_some() {
            return Err(anyhow!(
                "network = \"allowlist\" needs the run's egress proxy (and only it)"
            ));
        }
        let read_set = reads::read_set(bash, work_root, Some(tmp))
            .map_err(|problems| anyhow!("{}", problems.join("\n")))?;
        let protect = prepared_mounts(bash, work_root)?;
        let mut write_roots = vec![work_root.to_path_buf(), tmp.to_path_buf()];
        write_roots.extend(bash.write_roots.iter().cloned());
        let exec_set = if confine_exec {
            exec::exec_set(bash, work_root, &path_var(), Some(tmp))
        } else {
            None
        };
        let ruleset = ruleset(bash, &write_roots, &read_set, exec_set.as_ref())?;
        let reach = Arc::new(reach::Roots {
            read: read_set,
            exec: exec_set.clone(),
            never: reach::never_for_commands(bash),
        });
        let filter = seccomp::command_filter(seccomp::Refuse {
            sockets: !bash.network,
            unix: bash.unix_sockets.is_empty(),
            inet: tcp.is_some(),
            memfd: exec_set.is_some(),
        })?
        .map(|f| seccomp::to_bytes(&f))
        .unwrap_or_default();
        let loaders: Vec<PathBuf> = exec_set
            .map(|set| set.loaders.into_iter().collect())
            .unwrap_or_default();
        let (unix, exec_pass) = unix_sockets(bash, tcp, &loaders)?;
        Ok(Landlock {
            ruleset: Arc::new(ruleset),
            filter: Arc::new(filter),
            protect,
            unix,
            loaders: Arc::new(loaders),
            exec_pass,
            reach,
        })
    }

    /// The line a failed command's result gets when its `Permission denied` names a path
    /// this ruleset hides ([`reach::denied_hint`]); `None` otherwise.
    pub fn denied_hint(
        &self,
        output: &str,
        exit: i32,
        work_root: &Path,
        path_var: &str,
    ) -> Option<String> {
        if exit == 0 || !output.contains("Permission denied") {
            return None;
        }
        reach::denied_hint(&self.reach, output, exit, work_root, path_var)
    }

    /// When the Unix-socket supervisor guards the loader for this ruleset's commands (see
    /// [`loader`]): the spawner's `execveat` pass it lets through.
    pub fn supervised_exec_pass(&self) -> Option<u32> {
        self.exec_pass
    }

    /// Under an exec set: the dynamic loaders it holds, executable only as an interpreter
    /// ([`loader`]); empty otherwise.
    pub fn loaders(&self) -> &[PathBuf] {
        &self.loaders
    }

    /// The ruleset's descriptor, passed to the spawner with each command.
    pub fn ruleset(&self) -> BorrowedFd<'_> {
        self.ruleset.as_fd()
    }

    /// The seccomp program's bytes ([`seccomp::to_bytes`]); empty when there is none.
    pub fn filter(&self) -> &[u8] {
        &self.filter
    }

    /// The read-only mounts as bytes ([`protect::Mounts::to_bytes`]); empty when none.
    pub fn mounts(&self) -> &[u8] {
        self.protect.as_ref().map_or(&[], |m| m.as_slice())
    }

    /// The per-command part of the confinement ([`CommandStep`]).
    pub(crate) fn command_step(&self) -> std::io::Result<CommandStep> {
        Ok(match &self.unix {
            None => CommandStep::default(),
            Some(UnixSockets::Landlock(fd)) => CommandStep {
                unix_layer: Some(Arc::clone(fd)),
                listener_to: None,
            },
            Some(UnixSockets::Supervisor(s)) => CommandStep {
                unix_layer: None,
                listener_to: Some(s.child_end()?),
            },
        })
    }
}

/// The read-only mounts that keep the protected paths inside a write root from commands, as
/// the spawner receives them; `None` when no protected path lies inside one.
fn prepared_mounts(bash: &Settings, work_root: &Path) -> Result<Option<Arc<Vec<u8>>>> {
    let protect =
        protected_writes(bash, work_root).map_err(|problems| anyhow!("{}", problems.join("\n")))?;
    if protect.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(
        protect::Mounts::prepare(&protect)
            .context("cannot prepare the read-only mounts of the protected paths")?
            .to_bytes(),
    )))
}

/// The run's Landlock ruleset as a descriptor: writes beneath `write_roots` and to
/// `/dev/null`, reads by `read_set`, execution by `exec_set` when there is one, TCP and
/// abstract Unix sockets scoped without `network`, signals always.
fn ruleset(
    bash: &Settings,
    write_roots: &[PathBuf],
    read_set: &reads::ReadSet,
    exec_set: Option<&exec::ExecSet>,
) -> Result<OwnedFd> {
    let write = AccessFs::from_write(TARGET_ABI);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let execute = if exec_set.is_some() {
        AccessFs::Execute.into()
    } else {
        landlock::BitFlags::<AccessFs>::empty()
    };
    let mut ruleset = Ruleset::default()
        .handle_access(write | read | execute)
        .context("landlock: cannot handle file access")?
        .scope(Scope::Signal)
        .context("landlock: cannot scope signals")?;
    if !bash.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .context("landlock: cannot handle network access")?
            .scope(Scope::AbstractUnixSocket)
            .context("landlock: cannot scope abstract unix sockets")?;
    }
    let mut created = ruleset
        .create()
        .context("landlock: cannot create a ruleset")?;
    for root in write_roots {
        created = beneath(created, root, write, "write root")?;
    }
    let null = PathFd::new(Path::new("/dev/null")).context("landlock: cannot open /dev/null")?;
    created = created
        .add_rule(PathBeneath::new(
            null,
            write & AccessFs::from_file(TARGET_ABI),
        ))
        .context("landlock: cannot add /dev/null")?;
    for rule in &read_set.rules {
        let wanted = match rule.grant {
            reads::Grant::Tree => read,
            reads::Grant::ListOnly => AccessFs::ReadDir.into(),
        };
        // A file takes only file rights: the kernel refuses directory rights on it.
        let access = if rule.path.is_dir() {
            wanted
        } else {
            wanted & AccessFs::from_file(TARGET_ABI)
        };
        if access.is_empty() {
            continue;
        }
        created = beneath(created, &rule.path, access, "read root")?;
    }
    for path in exec_set.iter().flat_map(|set| &set.paths) {
        // EXECUTE is a file right: it fits a file rule and a directory rule alike.
        created = beneath(created, path, AccessFs::Execute.into(), "exec path")?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| anyhow!("landlock: this kernel does not enforce rulesets"))
}

/// `created` with `access` granted beneath `path` (a `what`: write root, read root, exec
/// path), or why the path cannot be opened or the rule added.
fn beneath(
    created: RulesetCreated,
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
    what: &str,
) -> Result<RulesetCreated> {
    let fd = PathFd::new(path)
        .with_context(|| format!("landlock: cannot open {what} {}", path.display()))?;
    created
        .add_rule(PathBeneath::new(fd, access))
        .with_context(|| format!("landlock: cannot add {what} {}", path.display()))
}

/// The run-wide Unix-socket guard ([`unix::decide`]; under the allowlist the supervisor, which
/// judges every connect, TCP and Unix alike) and, when the supervisor also guards the
/// `loaders`, the spawner's exec pass.
fn unix_sockets(
    bash: &Settings,
    tcp: Option<unix::supervisor::TcpGuard>,
    loaders: &[PathBuf],
) -> Result<(Option<UnixSockets>, Option<u32>)> {
    let guard = match unix::decide(bash.network, &bash.unix_sockets, kernel_abi().unwrap_or(0)) {
        _ if tcp.is_some() => unix::Guard::Supervisor,
        guard => guard,
    };
    Ok(match guard {
        unix::Guard::Open | unix::Guard::None => (None, None),
        unix::Guard::Landlock => (
            Some(UnixSockets::Landlock(Arc::new(unix::resolve_unix_layer(
                &bash.unix_sockets,
            )?))),
            None,
        ),
        unix::Guard::Supervisor => {
            // Where the Unix-socket supervisor runs, it is the loader guard too: a process
            // can hold one seccomp listener only.
            let exec = (!loaders.is_empty()).then(|| {
                let pass = loader::pass();
                let ids = loader::ids(loaders);
                let judge: unix::supervisor::ExecJudge =
                    Arc::new(move |req| loader::decide(req, &ids));
                unix::supervisor::ExecGuard { pass, judge }
            });
            let exec_pass = exec.as_ref().map(|e| e.pass);
            let supervisor =
                unix::supervisor::Supervisor::start(bash.unix_sockets.clone(), exec, tcp)?;
            (
                Some(UnixSockets::Supervisor(Arc::new(supervisor))),
                exec_pass,
            )
        }
    })
}

/// A command's confinement as its child applies it, in raw values (descriptors, programs,
/// prepared mounts): what [`apply_in_child`] does, in this order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildConfinement<'a> {
    /// The read-only mounts, first: Landlock forbids mounting afterwards.
    pub mounts: Option<&'a protect::Mounts>,
    /// The Landlock ruleset, or negative for none.
    pub ruleset: i32,
    /// The seccomp filter (sockets, memfds); empty for none.
    pub filter: &'a [libc::sock_filter],
    /// The `RESOLVE_UNIX` layer, or negative.
    pub unix_layer: i32,
    /// Where the notifying filter's listener goes, or negative.
    pub listener_to: i32,
    /// The notifying filter.
    pub notify: &'a [libc::sock_filter],
}

/// The command's own confinement, applied by the child between fork and exec, after its
/// process group, stdio and work dir are set: the read-only mounts ([`protect`]),
/// `PR_SET_NO_NEW_PRIVS`, the Landlock ruleset, the seccomp filter, then the Unix
/// socket step ([`unix::apply_raw`]). This is the one place of the child-side sequence:
/// every confinement step a command gets is added here. Returns the errno of the step that
/// failed.
///
/// # Safety
/// Only in a freshly forked or cloned child: it makes raw system calls and nothing else (no
/// allocation, no lock), so it is async-signal-safe.
pub(crate) unsafe fn apply_in_child(c: &ChildConfinement<'_>) -> Result<(), i32> {
    if let Some(mounts) = c.mounts {
        mounts
            .apply_in_child()
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EPERM))?;
    }
    if c.ruleset < 0 && c.filter.is_empty() {
        return Ok(());
    }
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(errno());
    }
    if c.ruleset >= 0 {
        let flags: libc::c_uint = 0;
        if libc::syscall(libc::SYS_landlock_restrict_self, c.ruleset, flags) != 0 {
            return Err(errno());
        }
    }
    if !c.filter.is_empty() {
        seccomp::install(c.filter)?;
    }
    unix::apply_raw(c.unix_layer, c.listener_to, c.notify)
}

/// The calling thread's errno (async-signal-safe).
pub(crate) fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn decide_follows_the_mode() {
        let none = || Err("no landlock".to_string());
        assert_eq!(decide(SandboxMode::Off, Ok(7), false).unwrap(), Status::Off);
        assert_eq!(
            decide(SandboxMode::Auto, none(), false).unwrap(),
            Status::Unavailable
        );
        assert_eq!(
            decide(SandboxMode::Auto, Ok(7), false).unwrap(),
            Status::Landlock {
                abi: 7,
                network: false
            }
        );
        // Before the socket filter, ABI 3 left the network open; now seccomp closes it.
        assert_eq!(
            decide(SandboxMode::Auto, Ok(3), false).unwrap().describe(),
            "landlock (ABI 3)"
        );
        assert_eq!(
            decide(SandboxMode::Landlock, none(), true).unwrap_err().to_string(),
            "[tools.bash].sandbox = \"landlock\" but no landlock; use sandbox = \"auto\" to run unconfined where Landlock is missing"
        );
        assert!(decide(SandboxMode::Landlock, Ok(3), false).is_ok());
        assert!(decide(SandboxMode::Landlock, Ok(3), true).is_ok());
    }

    #[test]
    fn status_strings() {
        assert_eq!(
            Status::Landlock {
                abi: 7,
                network: true
            }
            .describe(),
            "landlock (ABI 7)"
        );
        assert_eq!(Status::Off.describe(), "off");
        assert_eq!(Status::Unavailable.describe(), "unavailable");
        let mut bash = Settings::with_rules(harness_gate::Verdict::Deny, &[]);
        assert_eq!(sockets_line(&bash, 7), "unix sockets: none");
        bash.unix_sockets = vec![
            crate::SocketName::Path("/run/a.sock".into()),
            crate::SocketName::Abstract("r".into()),
        ];
        assert_eq!(
            sockets_line(&bash, 7),
            "unix sockets: named only, by a seccomp supervisor (/run/a.sock, @r)"
        );
        bash.unix_sockets.pop();
        assert_eq!(
            sockets_line(&bash, 9),
            "unix sockets: named only, by the kernel (Landlock) (/run/a.sock)"
        );
        bash.network = true;
        assert_eq!(sockets_line(&bash, 9), "unix sockets: any (network = true)");
        assert_eq!(
            Status::Landlock { abi: 7, network: false }.plan_line(1),
            "landlock (ABI 7): reads only under work_root, a private TMPDIR and read_roots (never the config, key files or reports); writes only under work_root, 1 write_roots entry and a private TMPDIR; network denied (no socket but a Unix one)"
        );
    }
}
