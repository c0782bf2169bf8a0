//! Tools adapter: what a confined command may read. In: `[tools.bash]` (read roots, write
//! roots, the paths never to read), the work root and the private temp dir. Out: a
//! [`ReadSet`] (the Landlock read rules and the lines `harness check` prints) or every
//! problem, each naming its key. I/O: resolving paths, listing the work root where a path
//! never to read sits inside it. [`overlaps`] is PURE.
//!
//! Landlock only ever allows: a path is readable when it lies beneath a read rule. So "never
//! readable" means no rule may cover a protected path. A read root that contains one (or lies
//! inside one) is refused, except the work root, which by default is the config's own
//! directory and holds the config and the report dir: there the top of the tree is split,
//! each entry on the way to a protected path gets its own rule and the protected path none.

use std::path::{Component, Path, PathBuf};

use crate::settings::{NeverRead, ReadRoot, Settings};

/// `"@system"`: what programs need to start and run, and nothing that holds a user's data.
/// Directories grant everything beneath them. Missing entries are skipped; an entry ending
/// in `*` stands for every sibling that starts with the text before it.
///
/// Not here, on purpose: `$HOME`, `/root`, `/etc` as a whole (it holds keys: `ssh/`,
/// `ssl/private/`, `shadow`, service configs), `/usr/local/etc`, `/opt` and `/srv` (site
/// software and data: add them to `read_roots` by name), `/var`, `/run` (sockets, tokens),
/// `/tmp` and `/proc/<pid>` (other processes' environments and command lines: the kernel
/// lets a user read those of every process of that user).
pub(crate) const SYSTEM: &[&str] = &[
    // programs and libraries (merged-/usr systems resolve /bin, /lib* to these)
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/libexec",
    "/usr/include",
    "/usr/share",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/local/lib",
    "/usr/local/lib64",
    "/usr/local/libexec",
    "/usr/local/include",
    "/usr/local/share",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    // the dynamic loader
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    // name lookup: users, groups, hosts, services
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    // locales and time zones
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    // TLS trust (certificates only: never /etc/ssl/private)
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/crypto-policies",
    // programs' system-wide settings that hold no secrets
    "/etc/mime.types",
    "/etc/magic",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/terminfo",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/alternatives",
    "/etc/python3*",
    "/etc/perl",
    // devices that hold no data
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    // the kernel's global figures (no /proc/<pid>: see above)
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys/kernel",
    "/proc/sys/vm",
    "/sys/devices/system/cpu",
    "/sys/kernel/mm/transparent_hugepage",
];

/// What one read rule grants beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// Read files and list directories.
    Tree,
    /// List directories, read no file: the top of a work root split around a protected path.
    ListOnly,
}

/// One Landlock read rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadRule {
    /// A resolved path (never a symlink: a rule follows it to its target).
    pub path: PathBuf,
    /// What it grants.
    pub grant: Grant,
}

/// Everything a confined command may read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// The rules, in order, without duplicates.
    pub(crate) rules: Vec<ReadRule>,
    /// One line per read root, as `harness check` shows it.
    pub lines: Vec<String>,
    /// Protected paths that sit inside the work root and are hidden there (for a warning:
    /// files created later at those levels of the tree cannot be read either).
    pub hidden: Vec<String>,
}

/// The read set in one line for the PLAN: the roots by name, `@system` as one word, the
/// paths hidden inside the work root. PURE.
pub fn summary(bash: &Settings, hidden: &[String]) -> String {
    let mut parts = vec![if hidden.is_empty() {
        "work_root".to_string()
    } else {
        format!("work_root except {}", hidden.join(", "))
    }];
    parts.push("a private TMPDIR".to_string());
    parts.extend(bash.write_roots.iter().map(|p| p.display().to_string()));
    parts.extend(bash.read_roots.iter().map(|r| match r {
        ReadRoot::System => "@system".to_string(),
        ReadRoot::Path(p) => p.display().to_string(),
        ReadRoot::GitDir(p) => format!("{} (the repository's git dir)", p.display()),
    }));
    parts.join(", ")
}

impl ReadSet {
    /// Whether a command may read the file at `path` (`list` false) or list the directory at
    /// `path` (`list` true), `path` resolved, as Landlock judges it. For tools that run inside
    /// the harness (the file tools), which Landlock does not confine: they obey the same set.
    /// PURE.
    pub fn allows(&self, path: &Path, list: bool) -> bool {
        self.rules
            .iter()
            .any(|r| path.starts_with(&r.path) && (list || r.grant == Grant::Tree))
    }
}

/// The paths never to read that lie inside `work_root`, relative to it (resolved), with what
/// each is. For the in-process file tools, which must refuse them whatever the sandbox.
pub fn inside_work_root(work_root: &Path, never_read: &[NeverRead]) -> Vec<(String, String)> {
    let Ok(root) = work_root.canonicalize() else {
        return Vec::new();
    };
    never_read
        .iter()
        .filter_map(|n| {
            let p = resolve_maybe_missing(&n.path);
            let rel = p.strip_prefix(&root).ok()?;
            Some((rel.to_string_lossy().into_owned(), n.what.clone()))
        })
        .filter(|(rel, _)| !rel.is_empty())
        .collect()
}

/// Whether a read root at `root` would expose `protected` (both resolved): it contains it,
/// or lies inside it. PURE.
pub(crate) fn overlaps(root: &Path, protected: &Path) -> bool {
    protected.starts_with(root) || root.starts_with(protected)
}

/// Resolves the read set of `bash` for a run in `work_root` with private temp dir `tmp`
/// (`None` for `harness check`, which has none). Every problem is returned, each naming its
/// key.
pub fn read_set(
    bash: &Settings,
    work_root: &Path,
    tmp: Option<&Path>,
) -> Result<ReadSet, Vec<String>> {
    let never: Vec<(PathBuf, &NeverRead)> = bash
        .never_read
        .iter()
        .map(|n| (resolve_maybe_missing(&n.path), n))
        // A device, FIFO or socket holds no key to protect, and the key ref itself is refused
        // with that reason when it is resolved (`file:` refs must name regular files).
        .filter(|(path, _)| !is_special_file(path))
        .collect();
    let mut b = Builder {
        never,
        set: ReadSet::default(),
        problems: Vec::new(),
    };
    b.work_root(work_root);
    match tmp {
        Some(tmp) => {
            b.root("TMPDIR", tmp, Missing::Problem);
        }
        None => b
            .set
            .lines
            .push("TMPDIR: a private temp dir per run".to_string()),
    }
    for (i, root) in bash.write_roots.iter().enumerate() {
        // A missing write root is `once`'s preflight failure, with its own message.
        b.root(
            &format!("[tools.bash].write_roots[{i}]"),
            root,
            Missing::Skip,
        );
    }
    for (i, root) in bash.read_roots.iter().enumerate() {
        match root {
            ReadRoot::System => b.system(&format!("[tools.bash].read_roots[{i}] (@system)")),
            ReadRoot::Path(p) => {
                b.root(
                    &format!("[tools.bash].read_roots[{i}]"),
                    p,
                    Missing::Problem,
                );
            }
            ReadRoot::GitDir(p) => {
                b.root("[workspace].repo (its git dir)", p, Missing::Problem);
            }
        }
    }
    if b.problems.is_empty() {
        Ok(b.set)
    } else {
        Err(b.problems)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    Problem,
    Skip,
    /// Skipped, and not shown when present either (the `@system` entries, shown as one line).
    SkipQuietly,
}

struct Builder<'a> {
    never: Vec<(PathBuf, &'a NeverRead)>,
    set: ReadSet,
    problems: Vec<String>,
}

impl Builder<'_> {
    fn add(&mut self, path: PathBuf, grant: Grant) {
        if !self
            .set
            .rules
            .iter()
            .any(|r| r.path == path && r.grant == grant)
        {
            self.set.rules.push(ReadRule { path, grant });
        }
    }

    /// A read root that must cover no protected path. Returns whether it was added.
    fn root(&mut self, key: &str, path: &Path, missing: Missing) -> bool {
        let resolved = match path.canonicalize() {
            Ok(p) => p,
            Err(_) if missing != Missing::Problem => return false,
            Err(e) => {
                self.problems.push(format!(
                    "{key}: {} cannot be resolved ({e})",
                    path.display()
                ));
                return false;
            }
        };
        let mut clean = true;
        for (p, n) in &self.never {
            if overlaps(&resolved, p) {
                clean = false;
                self.problems.push(format!(
                    "{key}: commands could read {} ({}) through {}; Landlock can only allow, so move one of them",
                    n.what,
                    p.display(),
                    resolved.display()
                ));
            }
        }
        if clean {
            if missing == Missing::Problem {
                self.set
                    .lines
                    .push(format!("{key}: {}", resolved.display()));
            }
            self.add(resolved, Grant::Tree);
        }
        clean
    }

    fn system(&mut self, key: &str) {
        let mut shown = Vec::new();
        for entry in SYSTEM {
            for path in expand(entry) {
                if self.root(key, &path, Missing::SkipQuietly) {
                    shown.push(path.display().to_string());
                }
            }
        }
        self.set.lines.push(format!("{key}: {}", shown.join(" ")));
    }

    /// The work root: readable whole, or split around the config, the report dir or a
    /// cassette inside it. A key file inside it, or a work root inside a protected path, is
    /// refused.
    fn work_root(&mut self, work_root: &Path) {
        let root = match work_root.canonicalize() {
            Ok(p) => p,
            Err(e) => {
                self.problems.push(format!(
                    "work_root: {} cannot be resolved ({e})",
                    work_root.display()
                ));
                return;
            }
        };
        let mut hidden = Vec::new();
        for (p, n) in &self.never {
            if !overlaps(&root, p) {
                continue;
            }
            if p.starts_with(&root) && *p != root && n.may_share_work_root {
                hidden.push((p.clone(), n.what.clone()));
            } else {
                self.problems.push(format!(
                    "work_root: commands could read {} ({}) through {}; keep it out of the work tree",
                    n.what,
                    p.display(),
                    root.display()
                ));
            }
        }
        if hidden.is_empty() {
            self.set
                .lines
                .push(format!("work_root: {}", root.display()));
            self.add(root, Grant::Tree);
            return;
        }
        let paths: Vec<PathBuf> = hidden.iter().map(|(p, _)| p.clone()).collect();
        let mut rules = vec![ReadRule {
            path: root.clone(),
            grant: Grant::ListOnly,
        }];
        if let Err(e) = split(&root, &paths, &mut rules) {
            self.problems
                .push(format!("work_root: cannot list {} ({e})", root.display()));
            return;
        }
        let names: Vec<String> = hidden
            .iter()
            .map(|(p, what)| {
                let rel = p.strip_prefix(&root).unwrap_or(p);
                format!("{} ({what})", rel.display())
            })
            .collect();
        self.set.lines.push(format!(
            "work_root: {} except {}",
            root.display(),
            names.join(", ")
        ));
        self.set.hidden = names;
        for r in rules {
            self.add(r.path, r.grant);
        }
    }
}

/// Grants every entry of `dir` a rule, except the `hidden` paths; directories on the way to
/// a hidden path are split in turn. Symlinks get no rule (it would follow them): what they
/// point to is readable when a rule covers it.
fn split(dir: &Path, hidden: &[PathBuf], rules: &mut Vec<ReadRule>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if hidden.contains(&path) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() && hidden.iter().any(|h| h.starts_with(&path)) {
            split(&path, hidden, rules)?;
        } else {
            rules.push(ReadRule {
                path,
                grant: Grant::Tree,
            });
        }
    }
    Ok(())
}

/// `/etc/python3*` -> every `/etc/python3...` that exists; other entries as they are.
fn expand(entry: &str) -> Vec<PathBuf> {
    let Some(prefix) = entry.strip_suffix('*') else {
        return vec![PathBuf::from(entry)];
    };
    let prefix = Path::new(prefix);
    let (Some(dir), Some(start)) = (prefix.parent(), prefix.file_name()) else {
        return Vec::new();
    };
    let start = start.to_string_lossy();
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(start.as_ref()))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The resolved form of a path that may not exist yet (a report dir before its first run, a
/// cassette not yet recorded): its nearest existing ancestor resolved, the rest appended.
pub(super) fn resolve_maybe_missing(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let absolute = crate::settings::clean_path(&absolute);
    let mut rest = Vec::new();
    let mut cur = absolute.as_path();
    loop {
        if let Ok(resolved) = cur.canonicalize() {
            return rest.iter().rev().fold(resolved, |acc, c| acc.join(c));
        }
        match (cur.parent(), cur.components().next_back()) {
            (Some(parent), Some(Component::Normal(name))) => {
                rest.push(name.to_os_string());
                cur = parent;
            }
            _ => return absolute,
        }
    }
}

/// Whether `path` is a device, FIFO or socket (not a regular file, a directory or missing).
fn is_special_file(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn bash(never: Vec<NeverRead>, read_roots: Vec<ReadRoot>) -> Settings {
        let mut b = Settings::with_rules(harness_gate::Verdict::Deny, &[]);
        b.never_read = never;
        b.read_roots = read_roots;
        b
    }

    fn never(path: &Path, what: &str, share: bool) -> NeverRead {
        NeverRead {
            path: path.to_path_buf(),
            what: what.to_string(),
            may_share_work_root: share,
        }
    }

    #[test]
    fn the_summary_names_every_root() {
        let mut b = bash(
            vec![],
            vec![ReadRoot::System, ReadRoot::Path("/opt/t".into())],
        );
        b.write_roots = vec![PathBuf::from("/srv/cache")];
        assert_eq!(
            summary(&b, &["harness.toml (the config file)".to_string()]),
            "work_root except harness.toml (the config file), a private TMPDIR, /srv/cache, @system, /opt/t"
        );
    }

    #[test]
    fn overlap_is_containment_either_way() {
        assert!(overlaps(Path::new("/a"), Path::new("/a/b/key")));
        assert!(overlaps(Path::new("/a/b"), Path::new("/a")));
        assert!(overlaps(Path::new("/a"), Path::new("/a")));
        assert!(!overlaps(Path::new("/a/b"), Path::new("/a/bc")));
        assert!(!overlaps(Path::new("/usr"), Path::new("/etc/key")));
    }

    #[test]
    fn the_system_set_never_covers_home_etc_or_tmp() {
        for entry in SYSTEM {
            for bad in [
                "/root",
                "/home",
                "/etc",
                "/etc/ssh",
                "/etc/ssl/private",
                "/tmp",
                "/var",
                "/run",
                "/proc",
                "/opt",
            ] {
                assert!(
                    !Path::new(bad).starts_with(entry.trim_end_matches('*')),
                    "{entry} covers {bad}"
                );
            }
            assert!(
                !entry.starts_with("/home") && !entry.starts_with("/root"),
                "{entry}"
            );
        }
    }

    #[test]
    fn a_work_root_holding_the_config_and_reports_is_split_around_them() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::write(r.join("harness.toml"), "").unwrap();
        std::fs::create_dir_all(r.join("reports")).unwrap();
        std::fs::create_dir_all(r.join("src/deep")).unwrap();
        std::fs::create_dir_all(r.join("out")).unwrap();
        std::fs::write(r.join("README"), "").unwrap();
        std::os::unix::fs::symlink("/etc", r.join("etc-link")).unwrap();
        let b = bash(
            vec![
                never(&r.join("harness.toml"), "the config file", true),
                never(&r.join("reports"), "the report dir", true),
                never(
                    &r.join("out/cassette.json"),
                    "the cassette being recorded",
                    true,
                ),
            ],
            vec![],
        );
        let set = read_set(&b, &r, None).unwrap();
        let mut tree: Vec<String> = set
            .rules
            .iter()
            .filter(|x| x.grant == Grant::Tree)
            .map(|x| x.path.strip_prefix(&r).unwrap().display().to_string())
            .collect();
        tree.sort();
        assert_eq!(tree, vec!["README", "src"]);
        assert_eq!(
            set.rules[0],
            ReadRule {
                path: r.clone(),
                grant: Grant::ListOnly
            }
        );
        assert_eq!(set.hidden.len(), 3, "{:?}", set.hidden);
        // What the file tools ask: the same answers Landlock gives.
        assert!(set.allows(&r.join("src/deep/x.rs"), false));
        assert!(set.allows(&r.join("reports"), true), "names stay listable");
        assert!(!set.allows(&r.join("reports/REPORT-1.md"), false));
        assert!(!set.allows(&r.join("harness.toml"), false));
        assert!(!set.allows(&r.join("created-later.txt"), false));
        assert!(
            !set.allows(Path::new("/etc/passwd"), false),
            "no @system here"
        );
    }

    #[test]
    fn a_key_file_in_any_read_root_is_refused_by_key() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("work")).unwrap();
        std::fs::create_dir_all(r.join("home/.ssh")).unwrap();
        std::fs::write(r.join("work/key"), "k").unwrap();
        std::fs::write(r.join("home/.ssh/llm"), "k").unwrap();
        let b = bash(
            vec![
                never(
                    &r.join("work/key"),
                    "the key file of [litellm].key_ref",
                    false,
                ),
                never(
                    &r.join("home/.ssh/llm"),
                    "the key file of [redmine].key_ref",
                    false,
                ),
            ],
            vec![ReadRoot::System, ReadRoot::Path(r.join("home"))],
        );
        let problems = read_set(&b, &r.join("work"), None).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("work_root: commands could read the key file of [litellm].key_ref"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].starts_with(
                "[tools.bash].read_roots[1]: commands could read the key file of [redmine].key_ref"
            ),
            "{}",
            problems[1]
        );
    }

    #[test]
    fn a_workspace_git_dir_is_read_and_refused_like_any_root_when_it_exposes_a_key() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("work")).unwrap();
        std::fs::create_dir_all(r.join("repo/.git")).unwrap();
        let b = bash(
            vec![],
            vec![ReadRoot::System, ReadRoot::GitDir(r.join("repo/.git"))],
        );
        let set = read_set(&b, &r.join("work"), None).unwrap();
        assert!(set.allows(&r.join("repo/.git/config"), false));
        assert!(!set.allows(&r.join("repo/a.txt"), false));
        std::fs::write(r.join("repo/.git/key"), "k").unwrap();
        let b = bash(
            vec![never(
                &r.join("repo/.git/key"),
                "the key file of [litellm].key_ref",
                false,
            )],
            vec![ReadRoot::GitDir(r.join("repo/.git"))],
        );
        let problems = read_set(&b, &r.join("work"), None).unwrap_err();
        assert!(
            problems[0].starts_with("[workspace].repo (its git dir): commands could read"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_default_set_reads_the_work_root_tmp_and_system_dirs() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let b = bash(
            vec![never(
                &elsewhere.path().join("harness.toml"),
                "the config file",
                true,
            )],
            vec![ReadRoot::System],
        );
        let set = read_set(&b, &r, Some(tmp.path())).unwrap();
        let usr_bin = Path::new("/usr/bin").canonicalize().unwrap();
        assert!(set.rules.iter().any(|x| x.path == usr_bin));
        assert!(set
            .rules
            .iter()
            .any(|x| x.path == r && x.grant == Grant::Tree));
        assert!(!set.rules.iter().any(|x| x.path == Path::new("/etc")));
        assert!(set.hidden.is_empty());
    }

    #[test]
    fn the_paths_inside_the_work_root_are_named_relative_to_it() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("work")).unwrap();
        let got = inside_work_root(
            &r.join("work"),
            &[
                never(&r.join("work/harness.toml"), "the config file", true),
                never(
                    &r.join("work/out/cassette.json"),
                    "the cassette being recorded",
                    true,
                ),
                never(&r.join("key"), "the key file of [litellm].key_ref", false),
            ],
        );
        assert_eq!(
            got,
            vec![
                ("harness.toml".to_string(), "the config file".to_string()),
                (
                    "out/cassette.json".to_string(),
                    "the cassette being recorded".to_string()
                ),
            ]
        );
    }

    #[test]
    fn missing_paths_resolve_through_their_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        assert_eq!(resolve_maybe_missing(&r.join("a/b/../c")), r.join("a/c"));
    }
}
