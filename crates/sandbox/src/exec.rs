//! Tools adapter: the kernel's exec set: what a confined command may execute when the allow
//! list names programs. In: `[tools.bash]` (the allow rules, `default`, `exec_roots`), the
//! work root, PATH. Out: an [`ExecSet`] that [`super::Landlock`] turns into Landlock EXECUTE
//! rules. I/O: PATH lookups, resolving symlinks, reading the first line of programs (for a
//! `#!` interpreter) and asking programs for their helper directory (`git --exec-path`).
//!
//! Landlock's EXECUTE right is checked when the kernel opens a file to execute it: `execve`
//! of the program, of a script's `#!` interpreter and of the ELF interpreter (the dynamic
//! loader). Shared libraries are mapped by the loader with `mmap`, which Landlock does not
//! check: they need only the read right (`tests/sandbox.rs` runs a dynamic `cat` with no exec right on the libraries).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::{executables as lookup, is_executable, path_dirs};
pub use crate::process::{resolve, DEFAULT_PATH};
use crate::settings::Settings;
use harness_gate::{exec_helpers, Runs, Verdict, SYSTEM_DIRS};

/// How long a helper-directory query (`git --exec-path`) may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many files of a path rule's directory are read for `#!` lines.
const MAX_SCRIPTS: usize = 2000;

/// What a confined command may execute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSet {
    /// Files and directories (everything beneath) that may be executed, resolved.
    pub paths: BTreeSet<PathBuf>,
    /// The command words the set was built from: bash, the allowed programs, their helpers.
    pub names: BTreeSet<String>,
    /// Allowed names that PATH does not hold and `exec_roots` that do not exist (nothing to
    /// allow; the PLAN says so).
    pub missing: BTreeSet<String>,
    /// The dynamic loaders among `paths` (the `PT_INTERP` of the programs): executable only
    /// as an interpreter ([`super::loader`]).
    pub loaders: BTreeSet<PathBuf>,
}

impl ExecSet {
    /// One line for the PLAN and `harness check`.
    pub fn summary(&self) -> String {
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let mut s = format!(
            "exec only {} (+ their dynamic loader, as an interpreter only; no memfd)",
            names.join(", ")
        );
        if !self.missing.is_empty() {
            let missing: Vec<&str> = self.missing.iter().map(String::as_str).collect();
            s.push_str(&format!("; not found: {}", missing.join(", ")));
        }
        s
    }
}

/// Why a run has no exec set: the policy lets any program run. PURE.
pub fn unrestricted_reason(bash: &Settings) -> Option<&'static str> {
    if bash.policy.default == Verdict::Allow {
        return Some("exec unrestricted ([tools.bash].default = \"allow\")");
    }
    if bash.policy.allow.iter().any(|r| r.runs() == Runs::Anything) {
        return Some("exec unrestricted (the allow list has a bare `*` rule)");
    }
    None
}

/// The exec set for commands run in `work_root` with `path_var` as PATH, or `None` when the
/// policy lets any program run ([`unrestricted_reason`]). `tmp`: the private TMPDIR of the
/// ruleset being built; `None` for a description (PLAN, check), which creates nothing.
pub fn exec_set(
    bash: &Settings,
    work_root: &Path,
    path_var: &str,
    tmp: Option<&Path>,
) -> Option<ExecSet> {
    if unrestricted_reason(bash).is_some() {
        return None;
    }
    let search = Search {
        bash,
        work_root,
        path_var,
        tmp,
        dirs: path_dirs(path_var, work_root),
    };
    let mut set = ExecSet::default();
    let mut programs = allowed_programs(&search, &mut set)?;
    let mut seen = BTreeSet::new();
    while let Some(name) = programs.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        programs.extend(add_program(&search, &mut set, name));
    }
    for root in &bash.exec_roots {
        match root.canonicalize() {
            Ok(real) => set.paths.insert(real),
            Err(_) => set.missing.insert(root.display().to_string()),
        };
    }
    let loaders: BTreeSet<PathBuf> = set.paths.iter().filter_map(|p| elf_interp(p)).collect();
    set.paths.extend(loaders.iter().cloned());
    set.loaders = loaders;
    Some(set)
}

/// Where an exec set's programs are looked for, and what it is built for.
struct Search<'a> {
    bash: &'a Settings,
    work_root: &'a Path,
    path_var: &'a str,
    /// The private TMPDIR of the ruleset being built; `None` for a description.
    tmp: Option<&'a Path>,
    /// PATH's directories ([`path_dirs`]).
    dirs: Vec<PathBuf>,
}

/// The command words the allow rules run (bash first), to look up on PATH; a path rule's
/// directory and the interpreters of its scripts go into `set` at once. `None` when a rule
/// runs anything.
fn allowed_programs(s: &Search<'_>, set: &mut ExecSet) -> Option<Vec<String>> {
    let mut programs: Vec<String> = vec!["bash".to_string()];
    for rule in &s.bash.policy.allow {
        match rule.runs() {
            Runs::Program(name) => {
                // The gate lets `/usr/local/bin/NAME` (and `/usr/bin/`, `/bin/`) run under a
                // rule for NAME, also when PATH does not list that directory: its file too.
                if !name.contains('/') {
                    programs.extend(
                        SYSTEM_DIRS
                            .iter()
                            .map(|d| format!("{d}{name}"))
                            .filter(|p| is_executable(Path::new(p))),
                    );
                }
                programs.push(name);
            }
            Runs::Prefix(prefix) => {
                for dir in &s.dirs {
                    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                        let name = entry.file_name().to_string_lossy().into_owned();
                        if name.starts_with(&prefix) {
                            programs.push(name);
                        }
                    }
                }
            }
            Runs::Under(dir) => {
                let dir = s.work_root.join(dir);
                if let Ok(real) = dir.canonicalize() {
                    for script in scripts_under(&real) {
                        add_interpreter(set, &script, &s.dirs);
                    }
                    set.paths.insert(real);
                }
            }
            Runs::Anything => return None,
        }
    }
    Some(programs)
}

/// Adds what running `name` takes to `set`: its files on PATH (or it to `missing`), its
/// helper directories, the work root's directories and the TMPDIR it runs built programs
/// from, and the name itself. Returns the programs it runs by name, to add next.
fn add_program(s: &Search<'_>, set: &mut ExecSet, name: String) -> Vec<String> {
    let found = lookup(&name, &s.dirs, s.work_root);
    if found.is_empty() {
        set.missing.insert(name.clone());
    }
    for file in &found {
        add_file(set, file, &s.dirs);
    }
    let helpers = exec_helpers(base(&name));
    // harness runs the query itself, unconfined: never a program the commands could
    // have written (a relative PATH entry finds files in the work root).
    let trusted = found.first().filter(|f| {
        let real = f.canonicalize().unwrap_or_else(|_| f.to_path_buf());
        let root = s
            .work_root
            .canonicalize()
            .unwrap_or_else(|_| s.work_root.to_path_buf());
        !real.starts_with(root) && !s.bash.write_roots.iter().any(|w| real.starts_with(w))
    });
    if let (Some(args), Some(file)) = (helpers.dir_query, trusted) {
        if let Some(dir) = query_dir(file, args, s.path_var) {
            for d in helper_dirs(&dir, helpers.dir_suffixes) {
                // A helper that lives on PATH (clang's `ld` in /usr/bin) must not open
                // every program beside it.
                if !s
                    .dirs
                    .iter()
                    .any(|p| p.canonicalize().is_ok_and(|p| p == d))
                {
                    set.paths.insert(d);
                }
            }
        }
    }
    for rel in helpers.work_dirs {
        let dir = s.work_root.join(rel);
        // The rule needs the directory to exist now; the program would create it anyway.
        if s.tmp.is_some() {
            let _ = std::fs::create_dir_all(&dir);
        }
        if let Ok(real) = dir.canonicalize() {
            set.paths.insert(real);
        }
    }
    if let (true, Some(t)) = (helpers.tmp, s.tmp) {
        if let Ok(real) = t.canonicalize() {
            set.paths.insert(real);
        }
    }
    // A system directory's file of a rule's program is that program, not another name.
    if !SYSTEM_DIRS.iter().any(|d| name.starts_with(d)) {
        set.names.insert(name);
    }
    helpers.programs.iter().map(|p| p.to_string()).collect()
}

fn base(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Adds a program (resolved) and the interpreter its `#!` line names.
fn add_file(set: &mut ExecSet, file: &Path, dirs: &[PathBuf]) {
    if let Ok(real) = file.canonicalize() {
        add_interpreter(set, &real, dirs);
        set.paths.insert(real);
    }
}

/// A script's `#!` interpreter and, for `#!/usr/bin/env NAME`, NAME on PATH (one level).
fn add_interpreter(set: &mut ExecSet, file: &Path, dirs: &[PathBuf]) {
    let Some((interp, arg)) = shebang(file) else {
        return;
    };
    let Ok(real) = interp.canonicalize() else {
        return;
    };
    if base(&interp.to_string_lossy()) == "env" {
        if let Some(name) = arg.filter(|a| !a.starts_with('-')) {
            for p in dirs
                .iter()
                .map(|d| d.join(&name))
                .filter(|p| is_executable(p))
            {
                if let Ok(r) = p.canonicalize() {
                    set.paths.insert(r);
                }
            }
        }
    }
    set.paths.insert(real);
}

/// The interpreter path and first argument of a `#!` line, if `file` starts with one.
pub(super) fn shebang(file: &Path) -> Option<(PathBuf, Option<String>)> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interp = PathBuf::from(words.next()?);
    Some((interp, words.next().map(str::to_string)))
}

/// The regular files beneath `dir` (bounded), for their `#!` lines.
pub(super) fn scripts_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if out.len() >= MAX_SCRIPTS {
                return out;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => todo.push(entry.path()),
                Ok(t) if t.is_file() => out.push(entry.path()),
                _ => {}
            }
        }
    }
    out
}

/// The helper directories below `dir` that `suffixes` name (`*` matches any entry); `dir`
/// itself when there are none, or its parent when the program printed a file.
fn helper_dirs(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    if dir.is_file() {
        return dir.parent().map(Path::to_path_buf).into_iter().collect();
    }
    if suffixes.is_empty() {
        return vec![dir.to_path_buf()];
    }
    let mut out = Vec::new();
    for suffix in suffixes {
        let mut found = vec![dir.to_path_buf()];
        for comp in suffix.split('/') {
            found = found
                .into_iter()
                .flat_map(|d| {
                    if comp == "*" {
                        std::fs::read_dir(&d)
                            .into_iter()
                            .flatten()
                            .flatten()
                            .map(|e| e.path())
                            .collect::<Vec<_>>()
                    } else {
                        vec![d.join(comp)]
                    }
                })
                .filter(|p| p.is_dir())
                .collect();
        }
        out.extend(found.into_iter().filter_map(|p| p.canonicalize().ok()));
    }
    out
}

/// The directory a program prints when asked (`git --exec-path`), resolved.
fn query_dir(program: &Path, args: &[&str], path_var: &str) -> Option<PathBuf> {
    let mut child = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", path_var)
        // rustup's proxies find their toolchains under HOME.
        .envs(std::env::var_os("HOME").map(|h| ("HOME", h)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < QUERY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let dir = PathBuf::from(out.trim());
    dir.is_absolute().then(|| dir.canonicalize().ok()).flatten()
}

/// The ELF interpreter (the dynamic loader) `file` names in its `PT_INTERP` header, if it is
/// a dynamically linked ELF program: the kernel opens it for execution too.
fn elf_interp(file: &Path) -> Option<PathBuf> {
    let mut f = std::fs::File::open(file).ok()?;
    let mut ident = [0u8; 64];
    f.read_exact(&mut ident).ok()?;
    if ident[..4] != *b"\x7fELF" {
        return None;
    }
    let wide = ident[4] == 2;
    let little = ident[5] == 1;
    let num = |b: &[u8]| -> u64 {
        let mut v = 0u64;
        for (k, byte) in b.iter().enumerate() {
            let shift = if little { k } else { b.len() - 1 - k };
            v |= u64::from(*byte) << (8 * shift);
        }
        v
    };
    // e_phoff, e_phentsize, e_phnum.
    let (phoff, phentsize, phnum) = if wide {
        (
            num(&ident[32..40]),
            num(&ident[54..56]),
            num(&ident[56..58]),
        )
    } else {
        (
            num(&ident[28..32]),
            num(&ident[42..44]),
            num(&ident[44..46]),
        )
    };
    if phentsize == 0 || phnum > 512 {
        return None;
    }
    let mut table = vec![0u8; usize::try_from(phentsize * phnum).ok()?];
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut table).ok()?;
    const PT_INTERP: u64 = 3;
    let entry = table
        .chunks(usize::try_from(phentsize).ok()?)
        .find(|h| h.len() >= 4 && num(&h[..4]) == PT_INTERP)?;
    let (offset, size) = if wide {
        (num(entry.get(8..16)?), num(entry.get(32..40)?))
    } else {
        (num(entry.get(4..8)?), num(entry.get(16..20)?))
    };
    if size == 0 || size > 4096 {
        return None;
    }
    let mut name = vec![0u8; usize::try_from(size).ok()?];
    f.seek(SeekFrom::Start(offset)).ok()?;
    f.read_exact(&mut name).ok()?;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    let path = PathBuf::from(String::from_utf8(name[..end].to_vec()).ok()?);
    path.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bash(allow: &[&str], default: &str) -> Settings {
        let default = match default {
            "allow" => harness_gate::Verdict::Allow,
            _ => harness_gate::Verdict::Deny,
        };
        Settings::with_rules(default, allow)
    }

    #[test]
    fn a_bare_star_or_default_allow_leaves_exec_open() {
        let root = tempfile::tempdir().unwrap();
        assert!(exec_set(&bash(&["*"], "deny"), root.path(), "/usr/bin:/bin", None).is_none());
        assert!(exec_set(
            &bash(&["cat *"], "allow"),
            root.path(),
            "/usr/bin:/bin",
            None
        )
        .is_none());
        assert!(exec_set(
            &bash(&["cat *"], "deny"),
            root.path(),
            "/usr/bin:/bin",
            None
        )
        .is_some());
    }

    #[test]
    fn the_set_holds_bash_the_programs_their_helpers_and_the_loader() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("scripts")).unwrap();
        let set = exec_set(
            &bash(
                &["make *", "cat *", "no-such-program-xyz", "./scripts/**"],
                "deny",
            ),
            root.path(),
            "/usr/bin:/bin",
            None,
        )
        .unwrap();
        for name in ["bash", "make", "cat", "sh"] {
            assert!(set.names.contains(name), "{name}: {set:?}");
        }
        assert!(set.missing.contains("no-such-program-xyz"), "{set:?}");
        let cat = resolve("cat", "/usr/bin:/bin", root.path()).unwrap();
        assert!(set.paths.contains(&cat.canonicalize().unwrap()), "{set:?}");
        let scripts = root.path().join("scripts").canonicalize().unwrap();
        assert!(set.paths.contains(&scripts), "{set:?}");
        assert!(
            set.paths
                .iter()
                .any(|p| p.to_string_lossy().contains("ld-")),
            "{set:?}"
        );
        assert!(!set.paths.contains(&PathBuf::from("/usr/bin")), "{set:?}");
        assert!(
            set.summary().starts_with("exec only bash, cat, make"),
            "{}",
            set.summary()
        );
    }

    #[test]
    fn a_rules_program_in_a_system_dir_is_in_the_set_without_path_listing_it() {
        // `/usr/bin/cat` is allowed by `cat *` (the gate matches system directories by
        // basename), also when PATH does not list /usr/bin.
        let root = tempfile::tempdir().unwrap();
        let set = exec_set(&bash(&["cat *"], "deny"), root.path(), "/nonexistent", None).unwrap();
        let cat = std::path::Path::new("/usr/bin/cat").canonicalize().unwrap();
        assert!(set.paths.contains(&cat), "{set:?}");
        assert!(!set.names.iter().any(|n| n.contains('/')), "{set:?}");
    }

    #[test]
    fn the_loader_comes_from_the_elf_header() {
        let root = tempfile::tempdir().unwrap();
        let bash = resolve("bash", "/usr/bin:/bin", root.path()).unwrap();
        let loader = elf_interp(&bash).expect("bash is dynamically linked");
        assert!(loader.is_absolute() && loader.is_file(), "{loader:?}");
        assert_eq!(elf_interp(root.path()), None);
        let script = root.path().join("s");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(elf_interp(&script), None);
    }

    #[test]
    fn git_brings_its_exec_path_but_a_work_root_git_is_never_asked() {
        let root = tempfile::tempdir().unwrap();
        if let Some(git) = resolve("git", "/usr/bin:/bin", root.path()) {
            let out = std::process::Command::new(git)
                .arg("--exec-path")
                .output()
                .unwrap();
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
                .canonicalize()
                .unwrap();
            let set = exec_set(
                &bash(&["git status"], "deny"),
                root.path(),
                "/usr/bin:/bin",
                None,
            )
            .unwrap();
            assert!(set.paths.contains(&dir), "{set:?}");
            assert!(set.names.contains("sh"), "{set:?}");
        }
        // A `git` the commands could have written, found through a relative PATH entry.
        let fake = root.path().join("git");
        std::fs::write(
            &fake,
            "#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\necho /tmp\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let set = exec_set(&bash(&["git status"], "deny"), root.path(), ".", None).unwrap();
        assert!(!root.path().join("ran").exists());
        assert!(!set.paths.contains(Path::new("/tmp")), "{set:?}");
    }

    #[test]
    fn helper_dirs_follow_the_suffixes_and_a_printed_file_gives_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path().join("sysroot");
        std::fs::create_dir_all(sys.join("bin")).unwrap();
        std::fs::create_dir_all(sys.join("lib/rustlib/x86_64-unknown-linux-gnu/bin")).unwrap();
        std::fs::create_dir_all(sys.join("lib/rustlib/etc")).unwrap();
        let real = |p: PathBuf| p.canonicalize().unwrap();
        let mut got = helper_dirs(&sys, &["bin", "lib/rustlib/*/bin"]);
        got.sort();
        assert_eq!(
            got,
            vec![
                real(sys.join("bin")),
                real(sys.join("lib/rustlib/x86_64-unknown-linux-gnu/bin"))
            ]
        );
        assert_eq!(helper_dirs(&sys, &[]), vec![sys.clone()]);
        let collect2 = sys.join("bin/collect2");
        std::fs::write(&collect2, "").unwrap();
        assert_eq!(helper_dirs(&collect2, &["bin"]), vec![sys.join("bin")]);
    }

    #[test]
    fn cargo_brings_rustc_the_linker_and_its_target_dir_never_a_path_dir() {
        let root = tempfile::tempdir().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        let Some(set) = exec_set(
            &bash(&["cargo test *"], "deny"),
            root.path(),
            &path,
            Some(root.path()),
        ) else {
            panic!("a cargo rule restricts execution");
        };
        assert!(
            set.names.contains("rustc") && set.names.contains("cc"),
            "{set:?}"
        );
        let target = root.path().join("target").canonicalize().unwrap();
        assert!(set.paths.contains(&target), "{set:?}");
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            if let Ok(d) = Path::new(dir).canonicalize() {
                assert!(!set.paths.contains(&d), "PATH dir {dir} opened: {set:?}");
            }
        }
    }

    #[test]
    fn a_description_creates_nothing_and_go_runs_what_it_builds_in_tmp() {
        let root = tempfile::tempdir().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        exec_set(&bash(&["cargo test *"], "deny"), root.path(), &path, None).unwrap();
        assert!(!root.path().join("target").exists());
        let tmp = tempfile::tempdir().unwrap();
        let set = exec_set(
            &bash(&["go test *"], "deny"),
            root.path(),
            &path,
            Some(tmp.path()),
        )
        .unwrap();
        assert!(
            set.paths.contains(&tmp.path().canonicalize().unwrap()),
            "{set:?}"
        );
        let set = exec_set(
            &bash(&["cat *"], "deny"),
            root.path(),
            &path,
            Some(tmp.path()),
        )
        .unwrap();
        assert!(
            !set.paths.contains(&tmp.path().canonicalize().unwrap()),
            "{set:?}"
        );
    }

    #[test]
    fn shebang_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        std::fs::write(&f, "#!/usr/bin/env  python3 -u\nprint(1)\n").unwrap();
        assert_eq!(
            shebang(&f),
            Some((PathBuf::from("/usr/bin/env"), Some("python3".to_string())))
        );
        std::fs::write(&f, "echo hi\n").unwrap();
        assert_eq!(shebang(&f), None);
    }
}
