//! Sandbox vocabulary, pure: what the crate is told about `[tools.bash]`. In: values the root
//! crate's config builds (it writes `[tools.bash]` in these types, and makes a [`Settings`]
//! from its `Settings`). Out: the [`Settings`] every builder of this crate reads. No I/O.

use std::path::{Path, PathBuf};

use harness_gate::Policy;

/// `[tools.bash]` as the sandbox reads it: the gate's rules (for the exec set), the network,
/// the roots and the paths never to read. Built by the root crate from its `Settings`;
/// this crate never reads a config.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `allow`, `deny`, `default`: the exec set runs what the allow rules name.
    pub policy: Policy,
    /// `network = true`: TCP allowed (false with `"allowlist"`).
    pub network: bool,
    /// `network = "allowlist"`: TCP only to the run's egress proxy, by the supervisor.
    pub egress: bool,
    /// `write_roots`, absolute.
    pub write_roots: Vec<PathBuf>,
    /// `read_roots` (plus the repository's git dir once `once` opened a worktree).
    pub read_roots: Vec<ReadRoot>,
    /// `unix_sockets`, for `network = false`.
    pub unix_sockets: Vec<SocketName>,
    /// `exec_roots`, absolute; used only under an exec set.
    pub exec_roots: Vec<PathBuf>,
    /// Never readable, whatever the roots say (config, key files, report dir, cassette).
    pub never_read: Vec<NeverRead>,
    /// The next run's inputs in the work root (relative path, what it is): kept read-only.
    pub inputs: Vec<(String, String)>,
    /// The task's attachments directory, relative to the work root: kept read-only while
    /// it exists.
    pub attachments: Option<String>,
}

/// A Unix socket `[tools.bash].unix_sockets` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketName {
    /// A socket file: absolute, resolved against the config's directory.
    Path(PathBuf),
    /// An abstract socket, written `@name`: the bytes after the address's leading NUL.
    Abstract(String),
}

impl std::fmt::Display for SocketName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketName::Path(p) => write!(f, "{}", p.display()),
            SocketName::Abstract(name) => write!(f, "@{name}"),
        }
    }
}

/// One `[tools.bash].read_roots` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRoot {
    /// `"@system"`: the system's program, library and data dirs and the few files under
    /// `/etc`, `/dev`, `/proc` and `/sys` that programs need ([`crate::reads::SYSTEM`]).
    System,
    /// A file or directory, resolved against the config's directory.
    Path(PathBuf),
    /// The git dir of the `[workspace]` repository (its common dir, which holds the task
    /// worktree's own dir under `worktrees/`): added by `once` when it opens the worktree, so
    /// the commands' git can read the repository. Never from the config file.
    GitDir(PathBuf),
}

/// A path commands must never read, and what it is (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeverRead {
    /// The path, as configured.
    pub path: PathBuf,
    /// `the config file`, `the key file of [litellm].key_ref`, ...
    pub what: String,
    /// Whether it may sit inside the work root, hidden from reads there (the config file,
    /// the report dir, a cassette) rather than refused (a key file).
    pub may_share_work_root: bool,
}

impl NeverRead {
    /// A place harness keeps from commands (`what` says which, in messages); it may lie in
    /// the work root.
    pub fn place(path: &Path, what: &str) -> NeverRead {
        NeverRead {
            path: path.to_path_buf(),
            what: what.to_string(),
            may_share_work_root: true,
        }
    }

    /// The cassette `once --record` writes: it holds the whole conversation.
    pub fn cassette(path: &Path) -> NeverRead {
        NeverRead {
            path: path.to_path_buf(),
            what: "the cassette being recorded".to_string(),
            may_share_work_root: true,
        }
    }
}

/// `[tools.bash].sandbox`: whether commands run under Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Landlock when the kernel has it, otherwise unconfined (said in the PLAN and REPORT).
    Auto,
    /// Landlock or refuse to run (exit 1 before any LLM call).
    Landlock,
    /// Never confine.
    Off,
}

/// Removes `.` and folds `dir/..` lexically, so messages show `reports`, not `a/../reports`.
pub fn clean_path(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

#[cfg(test)]
impl Settings {
    /// What a `[tools.bash]` with only `default` and `allow` leaves: no deny rules, the
    /// network off, `@system` read, nothing else.
    pub(crate) fn with_rules(default: harness_gate::Verdict, allow: &[&str]) -> Settings {
        let allow = allow
            .iter()
            .map(|r| harness_gate::Rule::parse(r).unwrap())
            .collect();
        Settings {
            policy: Policy::rules(default, allow, Vec::new()),
            network: false,
            egress: false,
            write_roots: Vec::new(),
            read_roots: vec![ReadRoot::System],
            unix_sockets: Vec::new(),
            exec_roots: Vec::new(),
            never_read: Vec::new(),
            inputs: Vec::new(),
            attachments: None,
        }
    }
}
