//! Tools adapter: whether what the allow rules run can be reached under the sandbox. In:
//! `[tools.bash]` (the allow rules, the read set, the exec set), the work root, PATH. Out: the
//! files each allowed program needs that a confined command could not read or execute (the
//! command would fail with `Permission denied`, exit 126), each with the root that would let
//! it run, for `harness check`. I/O: PATH look-ups, resolving symlinks, reading `#!` lines
//! and a venv's `pyvenv.cfg`. [`judge`] and [`hints`] are PURE.
//!
//! A program is more than its file: a script needs its `#!` interpreter, a venv's programs
//! need the venv (`pyvenv.cfg`, `lib/`) and its base Python (`home =`), and a version
//! manager's shim (pyenv, asdf, rbenv) runs the manager and a toolchain below its root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::exec::{self, ExecSet};
use super::reads::ReadSet;
use crate::settings::{NeverRead, Settings};
use harness_gate::Runs;

/// At most this many `Permission denied` lines of one output are looked at.
const MAX_DENIED_LINES: usize = 20;
/// How deep `#!` interpreters and `env NAME` are followed (the kernel follows four).
const MAX_DEPTH: usize = 4;

/// One file an allowed program needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The allow rule's command word.
    pub program: String,
    /// The file or directory, resolved.
    pub path: PathBuf,
    /// What it is to the program (`the program`, `its #! interpreter`, ...).
    pub what: String,
    /// The directory to name as a root: the venv, the version manager's root, the
    /// program's own directory.
    pub root: PathBuf,
    /// Whether the program executes it (beyond what the exec set adds by itself: the program
    /// and its `#!` interpreters).
    pub exec: bool,
}

/// Why a command cannot reach a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The path is readable and, where needed, executable.
    Open,
    /// The config, a key file, the report dir or a cassette: hidden on purpose.
    OnPurpose(String),
    /// Roots are missing: a read root, an exec root, or both.
    Missing {
        /// Not beneath any read rule.
        read: bool,
        /// Executed, and not in the exec set.
        exec: bool,
    },
}

impl Reach {
    /// What is missing in words (`the read roots`) and the keys that would add it.
    fn missing(read: bool, exec: bool) -> (&'static str, &'static str) {
        match (read, exec) {
            (true, true) => (
                "the read roots and the exec roots",
                "[tools.bash] read_roots and exec_roots",
            ),
            (false, true) => ("the exec roots", "[tools.bash] exec_roots"),
            _ => ("the read roots", "[tools.bash] read_roots"),
        }
    }
}

/// Whether a command may reach `path` (resolved): `exec` when it is executed, `never` the
/// paths hidden on purpose (resolved, with what each is). PURE.
pub(crate) fn judge(
    path: &Path,
    exec: bool,
    read: &ReadSet,
    exec_set: Option<&ExecSet>,
    never: &[(PathBuf, String)],
) -> Reach {
    if let Some((_, what)) = never.iter().find(|(p, _)| path.starts_with(p)) {
        return Reach::OnPurpose(what.clone());
    }
    let read_missing = !read.allows(path, false);
    let exec_missing =
        exec && exec_set.is_some_and(|set| !set.paths.iter().any(|p| path.starts_with(p)));
    if read_missing || exec_missing {
        Reach::Missing {
            read: read_missing,
            exec: exec_missing,
        }
    } else {
        Reach::Open
    }
}

/// One line per program, key and root for what `needs` lack: `harness check`'s warnings.
/// PURE.
pub fn hints(
    needs: &[Need],
    read: &ReadSet,
    exec_set: Option<&ExecSet>,
    never: &[(PathBuf, String)],
) -> Vec<String> {
    // (program, root, hidden on purpose) -> what is missing and the hidden paths, in order.
    type Group = (String, PathBuf, bool);
    type Found = (Group, Option<(bool, bool)>, Vec<String>);
    let mut groups: Vec<Found> = Vec::new();
    for need in needs {
        let (key, root) = match judge(&need.path, need.exec, read, exec_set, never) {
            Reach::Open => continue,
            Reach::OnPurpose(what) => (None, PathBuf::from(what)),
            Reach::Missing { read, exec } => (Some((read, exec)), need.root.clone()),
        };
        let shown = format!("{} ({})", need.path.display(), need.what);
        let id = (need.program.clone(), root, key.is_none());
        match groups.iter_mut().find(|(g, _, _)| *g == id) {
            Some((_, missing, paths)) => {
                if let (Some((r, e)), Some((r2, e2))) = (missing.as_mut(), key) {
                    (*r, *e) = (*r || r2, *e || e2);
                }
                if !paths.contains(&shown) {
                    paths.push(shown);
                }
            }
            None => groups.push((id, key, vec![shown])),
        }
    }
    groups
        .into_iter()
        .map(|((program, root, _), key, paths)| {
            let hidden = paths.join(", ");
            match key {
                Some((read, exec)) => format!(
                    "allowed program {program}: {hidden} {} outside {}, so it fails under the sandbox (Permission denied, exit 126); add {:?} to {}",
                    if hidden.contains("), ") { "are" } else { "is" },
                    Reach::missing(read, exec).0,
                    root.display().to_string(),
                    Reach::missing(read, exec).1
                ),
                None => format!(
                    "allowed program {program}: it needs {hidden}, which is {} and hidden from commands on purpose; it cannot run under the sandbox",
                    root.display()
                ),
            }
        })
        .collect()
}

/// What one ruleset lets commands reach: the read set, the exec set (`None`: any program
/// may run) and the paths hidden on purpose. A failed command's hint is judged against it.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    /// The read rules.
    pub read: ReadSet,
    /// The exec set, when execution is confined.
    pub exec: Option<ExecSet>,
    /// The paths hidden on purpose, resolved, with what each is ([`never`]).
    pub never: Vec<(PathBuf, String)>,
}

/// The paths a failed command's output names where it says `Permission denied`, in order,
/// each with whether it was executed: bash's `NAME: Permission denied` and `bad
/// interpreter` (with exit status 126, an `execve` that failed), and every absolute or
/// relative path word of such a line (a read that failed). PURE.
pub(crate) fn denied_paths(output: &str, exit: i32) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut push = |word: &str, exec: bool| {
        let word = word.trim();
        if !word.is_empty() && !out.iter().any(|(w, _)| w == word) {
            out.push((word.to_string(), exec));
        }
    };
    // A `find /` prints thousands: the first few lines tell.
    let lines = output.lines().filter(|l| l.contains("Permission denied"));
    for line in lines.take(MAX_DENIED_LINES) {
        let parts: Vec<&str> = line.split(": ").collect();
        // bash: line N: WORD: Permission denied / WORD: INTERP: bad interpreter: ...; a
        // script's own (`SCRIPT: line N: WORD: ...`, dash's `sh: N: WORD: ...`) alike.
        let numbered = |p: &str| {
            let n = p.strip_prefix("line ").unwrap_or(p);
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        };
        let shell = parts.len() >= 4 && (parts[0] == "bash" || numbered(parts[1]));
        if exit == 126 && shell {
            let at = if numbered(parts[1]) { 2 } else { 1 };
            if let Some(i) = parts.iter().position(|p| *p == "bad interpreter") {
                if i > at {
                    push(parts[i - 1], true);
                }
            }
            push(parts[at], true);
        }
        for word in line.split(|c: char| c.is_whitespace() || "'\"`‘’“”,;()[]".contains(c))
        {
            let word = word.trim_end_matches([':', '.']);
            if word.contains('/') && !word.contains("://") {
                push(word, false);
            }
        }
    }
    out
}

/// The root to name for `path` (resolved): its venv, its version manager's root, itself when
/// it is a directory, else its directory; never one that holds a path hidden on purpose
/// (then the path itself).
fn root_for(path: &Path, never: &[(PathBuf, String)]) -> PathBuf {
    let root = venv_of(path)
        .or_else(|| shim_root(path))
        .unwrap_or_else(|| {
            if path.is_dir() {
                path.to_path_buf()
            } else {
                file_root(path)
            }
        });
    if never.iter().any(|(p, _)| p.starts_with(&root)) {
        path.to_path_buf()
    } else {
        root
    }
}

/// The one line a failed command's tool result gets when its `Permission denied` names a
/// path the sandbox hid: which roots would let it through, or that it is hidden on purpose
/// (the config, a key file, the report dir: never a root to add). `None` when the failure
/// was not the sandbox's (file modes, a read-only mount, a path inside the roots).
pub fn denied_hint(
    roots: &Roots,
    output: &str,
    exit: i32,
    work_root: &Path,
    path_var: &str,
) -> Option<String> {
    for (word, exec) in denied_paths(output, exit) {
        let found = if word.contains('/') {
            Some(work_root.join(&word))
        } else if exec {
            exec::resolve(&word, path_var, work_root)
        } else {
            None
        };
        let Some(real) = found.and_then(|p| p.canonicalize().ok()) else {
            continue;
        };
        match judge(&real, exec, &roots.read, roots.exec.as_ref(), &roots.never) {
            Reach::Open => continue,
            Reach::OnPurpose(what) => {
                return Some(format!(
                    "[harness] sandbox: {word} is hidden from commands on purpose ({what}); no root makes it readable"
                ))
            }
            Reach::Missing { read, exec } => {
                let (outside, keys) = Reach::missing(read, exec);
                // An exec root names the file: a directory of programs would open them all.
                let root = if exec {
                    real.clone()
                } else {
                    root_for(&real, &roots.never)
                };
                return Some(format!(
                    "[harness] sandbox: {} is outside {outside}; add {} to {keys}",
                    real.display(),
                    root.display()
                ));
            }
        }
    }
    None
}

/// The paths hidden from commands on purpose (the config, key files, the report dir, a
/// cassette), resolved, with what each is.
pub fn never(bash: &Settings) -> Vec<(PathBuf, String)> {
    resolved(bash.never_read.iter())
}

fn resolved<'a>(never: impl Iterator<Item = &'a NeverRead>) -> Vec<(PathBuf, String)> {
    never
        .map(|n| {
            let path = n.path.canonicalize().unwrap_or_else(|_| n.path.clone());
            (path, n.what.clone())
        })
        .collect()
}

/// The paths hidden on purpose that a failed command's hint names as such: the config, the
/// report dir, a cassette (whose places the work tree's layout shows anyway). Not a key file:
/// a hint that told a key file from any other hidden file would let a command find the keys
/// by printing `Permission denied` lines of its own; it gets the hint any hidden file gets
/// (and a read root over it is refused when the config is loaded).
pub(crate) fn never_for_commands(bash: &Settings) -> Vec<(PathBuf, String)> {
    resolved(bash.never_read.iter().filter(|n| n.may_share_work_root))
}

/// What the allowed programs need: for each allow rule's command word found on `path_var`,
/// the file bash would run, its `#!` interpreters (and `env NAME`), its venv and that venv's
/// base Python, a shim's version manager; for each path rule's scripts, their interpreters.
pub fn needs(bash: &Settings, work_root: &Path, path_var: &str) -> Vec<Need> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for rule in &bash.policy.allow {
        match rule.runs() {
            Runs::Program(name) => {
                if seen.insert(name.clone()) {
                    if let Some(file) = exec::resolve(&name, path_var, work_root) {
                        program(
                            &name,
                            &file,
                            "the program",
                            path_var,
                            work_root,
                            0,
                            &mut out,
                        );
                    }
                }
            }
            Runs::Under(dir) => {
                let Ok(real) = work_root.join(&dir).canonicalize() else {
                    continue;
                };
                for script in exec::scripts_under(&real) {
                    let name = format!("{dir} ({})", script.display());
                    interpreter(&name, &script, path_var, work_root, 0, &mut out);
                }
            }
            Runs::Prefix(_) | Runs::Anything => {}
        }
    }
    out
}

/// The needs of `file` (as found, before resolving symlinks) that `program` runs.
fn program(
    program: &str,
    file: &Path,
    what: &str,
    path_var: &str,
    work_root: &Path,
    depth: usize,
    out: &mut Vec<Need>,
) {
    let Ok(real) = file.canonicalize() else {
        return;
    };
    let need = |path: PathBuf, what: String, root: PathBuf, exec: bool| Need {
        program: program.to_string(),
        path,
        what,
        root,
        exec,
    };
    let venv = venv_of(file).or_else(|| venv_of(&real));
    let shim_root = shim_root(file);
    let base = venv.as_deref().and_then(venv_base);
    // The root that holds the program's file: its venv when it is a copy inside it, the
    // base Python's prefix when the venv links to it, a shim's manager, else its directory.
    let root = match (&venv, &base, &shim_root) {
        (Some(v), _, _) if real.starts_with(v) => v.clone(),
        (_, Some((prefix, _)), _) if real.starts_with(prefix) => prefix.clone(),
        (_, _, Some(r)) => r.clone(),
        _ => file_root(&real),
    };
    out.push(need(real.clone(), what.to_string(), root, false));
    if let Some(venv) = venv {
        out.push(need(
            venv.join("pyvenv.cfg"),
            "the venv's pyvenv.cfg".to_string(),
            venv.clone(),
            false,
        ));
    }
    if let Some((prefix, home)) = base {
        out.push(need(
            home,
            "the venv's base Python (pyvenv.cfg home)".to_string(),
            prefix,
            false,
        ));
    }
    if let Some(home) = rustup_home(&real, program) {
        out.push(need(
            home.clone(),
            "rustup's toolchains (RUSTUP_HOME)".to_string(),
            home,
            false,
        ));
    }
    if let Some(root) = shim_root {
        shim_needs(program, &root, path_var, work_root, &need, out);
    }
    interpreter(program, &real, path_var, work_root, depth, out);
}

/// The base Python of the venv `venv` (`home =`, its directory) and its prefix (`bin`'s
/// parent: `lib/` is there), as (prefix, home).
fn venv_base(venv: &Path) -> Option<(PathBuf, PathBuf)> {
    let home = venv_home(&venv.join("pyvenv.cfg"))?;
    let prefix = match home.file_name() {
        Some(n) if n == "bin" => home.parent().map(Path::to_path_buf),
        _ => None,
    };
    Some((prefix.unwrap_or_else(|| home.clone()), home))
}

/// RUSTUP_HOME, resolved, when `real` is rustup run as one of its proxies (`cargo`, `rustc`
/// as links to `rustup`): they run a toolchain below it, which the commands' environment
/// names (`bash::command_env`).
fn rustup_home(real: &Path, program: &str) -> Option<PathBuf> {
    let proxy = real.file_name().is_some_and(|n| n == "rustup") && !program.ends_with("rustup");
    if !proxy {
        return None;
    }
    let home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".rustup")));
    home.and_then(|h| h.canonicalize().ok())
}

/// What the shim of `program` in the version manager at `root` needs: the manager's root,
/// executed, and the system tools its scripts run.
fn shim_needs(
    program: &str,
    root: &Path,
    path_var: &str,
    work_root: &Path,
    need: &dyn Fn(PathBuf, String, PathBuf, bool) -> Need,
    out: &mut Vec<Need>,
) {
    // The shim runs the manager and a toolchain below its root, neither on PATH, and the
    // manager's scripts run system tools (readlink, basename) no rule names.
    let direct = shim_target(root, program)
        .map(|bin| format!("; better, put {} first on PATH", bin.display()))
        .unwrap_or_default();
    out.push(need(
        root.to_path_buf(),
        format!("the version manager the shim runs{direct}"),
        root.to_path_buf(),
        true,
    ));
    // pyenv's and rbenv's scripts start with these (an exec set holds neither).
    for tool in ["readlink", "basename"] {
        if let Some(real) =
            exec::resolve(tool, path_var, work_root).and_then(|t| t.canonicalize().ok())
        {
            out.push(need(
                real.clone(),
                format!("a tool the version manager's scripts run{direct}"),
                real,
                true,
            ));
        }
    }
}

/// The `#!` interpreter of `script` and, for `#!/usr/bin/env NAME`, NAME on PATH.
fn interpreter(
    program_name: &str,
    script: &Path,
    path_var: &str,
    work_root: &Path,
    depth: usize,
    out: &mut Vec<Need>,
) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Some((interp, arg)) = exec::shebang(script) else {
        return;
    };
    let is_env = interp.file_name().is_some_and(|n| n == "env");
    program(
        program_name,
        &interp,
        &format!("the #! interpreter of {}", script.display()),
        path_var,
        work_root,
        depth + 1,
        out,
    );
    if let (true, Some(name)) = (is_env, arg.filter(|a| !a.starts_with('-'))) {
        if let Some(file) = exec::resolve(&name, path_var, work_root) {
            program(
                program_name,
                &file,
                &format!("{name}, which the #! line of {} runs", script.display()),
                path_var,
                work_root,
                depth + 1,
                out,
            );
        }
    }
}

/// The text of the small regular file at `path` (at most `limit` bytes, UTF-8), or `None`:
/// a FIFO, a device or a directory is never opened for reading.
fn small_text(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The venv a program lies in: `DIR/bin/NAME` with a `DIR/pyvenv.cfg`.
fn venv_of(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?.parent()?;
    dir.join("pyvenv.cfg").is_file().then(|| dir.to_path_buf())
}

/// The `home =` of a `pyvenv.cfg` (the base Python's directory), resolved.
fn venv_home(cfg: &Path) -> Option<PathBuf> {
    let text = small_text(cfg, 64 * 1024)?;
    let home = text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| v.trim().to_string())
    })?;
    Path::new(&home).canonicalize().ok()
}

/// A version manager's root when `file` is one of its shims (`ROOT/shims/NAME`: pyenv,
/// asdf, rbenv, nodenv).
fn shim_root(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    if dir.file_name()? != "shims" {
        return None;
    }
    dir.parent()?.canonicalize().ok()
}

/// The directory of the toolchain a pyenv-style shim of `program` runs: the version the
/// manager's `version` file names, when `ROOT/versions/<version>/bin/<program>` exists.
fn shim_target(root: &Path, program: &str) -> Option<PathBuf> {
    let text = small_text(&root.join("version"), 4096)?;
    let version = text.lines().next()?.trim();
    if version.is_empty() || version.contains('/') {
        return None;
    }
    let bin = root.join("versions").join(version).join("bin");
    bin.join(program).is_file().then_some(bin)
}

/// The root to name for a plain program: its directory.
fn file_root(real: &Path) -> PathBuf {
    real.parent()
        .map_or_else(|| real.to_path_buf(), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reads::{Grant, ReadRule};

    fn set(paths: &[&str]) -> ReadSet {
        ReadSet {
            rules: paths
                .iter()
                .map(|p| ReadRule {
                    path: PathBuf::from(p),
                    grant: Grant::Tree,
                })
                .collect(),
            ..ReadSet::default()
        }
    }

    fn need(path: &str, root: &str, exec: bool) -> Need {
        Need {
            program: "pytest".to_string(),
            path: PathBuf::from(path),
            what: "the program".to_string(),
            root: PathBuf::from(root),
            exec,
        }
    }

    #[test]
    fn a_path_outside_the_roots_names_the_key_and_a_hidden_one_is_on_purpose() {
        let read = set(&["/usr", "/w"]);
        let never = vec![(PathBuf::from("/w/harness.toml"), "the config file".into())];
        assert_eq!(
            judge(Path::new("/usr/bin/python3"), false, &read, None, &never),
            Reach::Open
        );
        assert_eq!(
            judge(
                Path::new("/opt/venv/bin/pytest"),
                false,
                &read,
                None,
                &never
            ),
            Reach::Missing {
                read: true,
                exec: false
            }
        );
        assert_eq!(
            judge(Path::new("/w/harness.toml"), false, &read, None, &never),
            Reach::OnPurpose("the config file".into())
        );
        let exec_set = ExecSet {
            paths: [PathBuf::from("/usr/bin/python3")].into(),
            ..ExecSet::default()
        };
        assert_eq!(
            judge(
                Path::new("/usr/lib/x"),
                true,
                &read,
                Some(&exec_set),
                &never
            ),
            Reach::Missing {
                read: false,
                exec: true
            }
        );
        assert_eq!(
            judge(Path::new("/usr/lib/x"), true, &read, None, &never),
            Reach::Open
        );
    }

    #[test]
    fn hints_group_the_hidden_paths_of_a_program_by_root() {
        let read = set(&["/usr"]);
        let needs = [
            need("/opt/venv/bin/pytest", "/opt/venv", false),
            need("/opt/venv/pyvenv.cfg", "/opt/venv", false),
            need("/usr/bin/python3", "/usr/bin", false),
        ];
        assert_eq!(
            hints(&needs, &read, None, &[]),
            vec![
                "allowed program pytest: /opt/venv/bin/pytest (the program), /opt/venv/pyvenv.cfg (the program) are outside the read roots, so it fails under the sandbox (Permission denied, exit 126); add \"/opt/venv\" to [tools.bash] read_roots"
            ]
        );
    }

    #[test]
    fn a_venv_script_needs_the_venv_its_interpreter_and_the_base_python() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let base = dir.path().join("base/bin");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\nversion = 3.12\n", base.display()),
        )
        .unwrap();
        let python = venv.join("bin/python3");
        std::fs::write(&python, "#!/bin/sh\necho py\n").unwrap();
        let pytest = venv.join("bin/pytest");
        std::fs::write(&pytest, format!("#!{}\nimport x\n", python.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for f in [&python, &pytest] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path_var = format!("{}:/usr/bin:/bin", venv.join("bin").display());
        let bash = Settings::with_rules(harness_gate::Verdict::Deny, &["pytest *"]);
        let got = needs(&bash, dir.path(), &path_var);
        let real = |p: &Path| p.canonicalize().unwrap();
        let whats: Vec<(PathBuf, &str, PathBuf)> = got
            .iter()
            .map(|n| (n.path.clone(), n.what.as_str(), n.root.clone()))
            .collect();
        let venv_r = real(&venv);
        assert!(
            whats.contains(&(real(&pytest), "the program", venv_r.clone())),
            "{whats:#?}"
        );
        assert!(
            whats.contains(&(
                venv_r.join("pyvenv.cfg"),
                "the venv's pyvenv.cfg",
                venv_r.clone()
            )),
            "{whats:#?}"
        );
        assert!(
            whats.iter().any(|(p, w, r)| *p == real(&base)
                && w.starts_with("the venv's base Python")
                && *r == real(&base).parent().unwrap()),
            "{whats:#?}"
        );
        assert!(
            whats
                .iter()
                .any(|(p, w, _)| *p == real(&python) && w.starts_with("the #! interpreter")),
            "{whats:#?}"
        );
        // /bin/sh, python's own interpreter, is found too and is readable under @system.
        assert!(whats
            .iter()
            .any(|(p, _, _)| p.ends_with("sh") || p.ends_with("dash") || p.ends_with("bash")));
    }

    #[test]
    fn the_paths_of_a_permission_denied_are_found_with_whether_they_ran() {
        assert_eq!(
            denied_paths("bash: line 1: pytest: Permission denied\n", 126),
            vec![("pytest".to_string(), true)]
        );
        assert_eq!(
            denied_paths(
                "bash: line 1: ./t.sh: /opt/py/bin/python: bad interpreter: Permission denied\n",
                126
            ),
            vec![
                ("/opt/py/bin/python".to_string(), true),
                ("./t.sh".to_string(), true),
            ]
        );
        // A redirect bash could not open exits 1: a read or write, not an execute.
        assert_eq!(
            denied_paths("bash: line 1: /opt/f: Permission denied\n", 1),
            vec![("/opt/f".to_string(), false)]
        );
        assert_eq!(
            denied_paths(
                "python3: can't open file '/opt/x.py': [Errno 13] Permission denied\nok /a/b\n",
                2
            ),
            vec![("/opt/x.py".to_string(), false)]
        );
        assert_eq!(
            denied_paths("cat: /opt/d/f.txt: Permission denied\n", 1),
            vec![("/opt/d/f.txt".to_string(), false)]
        );
        assert!(denied_paths("cat: a.txt: No such file or directory\n", 1).is_empty());
        // A script's own shell error names the program it could not run.
        assert_eq!(
            denied_paths(
                "/r/.pyenv/libexec/pyenv: line 36: /usr/bin/readlink: Permission denied\n",
                126
            ),
            vec![
                ("/usr/bin/readlink".to_string(), true),
                ("/r/.pyenv/libexec/pyenv".to_string(), false),
            ]
        );
    }

    #[test]
    fn the_hint_names_the_root_to_add_or_says_hidden_on_purpose() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("opt/data")).unwrap();
        std::fs::write(d.join("opt/data/f.txt"), "x").unwrap();
        std::fs::write(d.join("harness.toml"), "x").unwrap();
        let roots = Roots {
            read: set(&["/usr", "/bin", "/lib"]),
            exec: None,
            never: vec![(d.join("harness.toml"), "the config file".to_string())],
        };
        let out = format!("cat: {}/opt/data/f.txt: Permission denied\n", d.display());
        assert_eq!(
            denied_hint(&roots, &out, 1, &d, "/usr/bin").unwrap(),
            format!(
                "[harness] sandbox: {}/opt/data/f.txt is outside the read roots; add {}/opt/data to [tools.bash] read_roots",
                d.display(),
                d.display()
            )
        );
        let out = "cat: ../harness.toml: Permission denied\n";
        assert_eq!(
            denied_hint(&roots, out, 1, &d.join("opt"), "/usr/bin").unwrap(),
            "[harness] sandbox: ../harness.toml is hidden from commands on purpose (the config file); no root makes it readable"
        );
        // Inside the roots, or missing: not the sandbox's doing.
        assert_eq!(
            denied_hint(
                &roots,
                "cat: /usr/x/none: Permission denied\n",
                1,
                &d,
                "/usr/bin"
            ),
            None
        );
        let roots = Roots {
            read: set(&["/usr", "/bin", "/lib", d.to_str().unwrap()]),
            ..roots
        };
        assert_eq!(denied_hint(&roots, &out_of(&d), 1, &d, "/usr/bin"), None);
    }

    #[test]
    fn a_key_file_gets_the_hint_of_any_hidden_file_so_no_hint_finds_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("keys")).unwrap();
        std::fs::write(d.join("keys/llm"), "k").unwrap();
        std::fs::write(d.join("keys/other"), "k").unwrap();
        // What the config makes of a `file:` key beside it: the config file, the report dir
        // and the key file, never to read.
        let mut bash = Settings::with_rules(harness_gate::Verdict::Deny, &[]);
        bash.never_read = vec![
            NeverRead {
                path: d.join("harness.toml"),
                what: "the config file".to_string(),
                may_share_work_root: true,
            },
            NeverRead {
                path: d.join("reports"),
                what: "the report dir".to_string(),
                may_share_work_root: true,
            },
            NeverRead {
                path: d.join("keys/llm"),
                what: "the key file of [litellm].key_ref".to_string(),
                may_share_work_root: false,
            },
        ];
        // check, for the operator, says what it is; a command's hint does not.
        assert!(never(&bash).iter().any(|(_, w)| w.contains("key file")));
        let shown = never_for_commands(&bash);
        assert!(
            !shown.iter().any(|(_, w)| w.contains("key file")),
            "{shown:?}"
        );
        assert!(
            shown.iter().any(|(_, w)| w == "the config file"),
            "{shown:?}"
        );
        let roots = Roots {
            read: set(&["/usr"]),
            exec: None,
            never: shown,
        };
        let hint = |f: &str| {
            let out = format!("cat: {}: Permission denied\n", d.join(f).display());
            denied_hint(&roots, &out, 1, &d, "/usr/bin")
                .unwrap()
                .replace(f, "F")
        };
        assert_eq!(hint("keys/llm"), hint("keys/other"));
    }

    fn out_of(d: &Path) -> String {
        format!("cat: {}/opt/data/f.txt: Permission denied\n", d.display())
    }

    #[test]
    fn a_shim_needs_its_version_manager_read_and_executed() {
        let dir = tempfile::tempdir().unwrap();
        let shims = dir.path().join(".pyenv/shims");
        std::fs::create_dir_all(&shims).unwrap();
        let shim = shims.join("python3");
        std::fs::write(&shim, "#!/bin/sh\nexec pyenv exec python3 \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut out = Vec::new();
        program(
            "python3",
            &shim,
            "the program",
            "/usr/bin:/bin",
            dir.path(),
            0,
            &mut out,
        );
        let root = dir.path().join(".pyenv").canonicalize().unwrap();
        assert_eq!(out[0].root, root);
        assert!(out.iter().any(|n| n.path == root && n.exec), "{out:#?}");
    }
}
