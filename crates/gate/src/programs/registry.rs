//! tools stage (gate), PURE: the program registry: every program family the gate knows, under
//! every name it is installed as, and what kind of program it is.
//!
//! The program files and the judge ask it; it asks only its types (`kinds.rs`) and its rows.
//! Adding a program is one row in `families.rs` (plus, for a new kind of check, one `Check`
//! variant in `kinds.rs` and its file) and its cases.

use std::collections::HashMap;
use std::sync::LazyLock;

pub(crate) use super::families::FAMILIES;
pub(crate) use super::kinds::{Check, Code, Family, Finder, Kind, StdinCode};

static BY_NAME: LazyLock<HashMap<&'static str, &'static Family>> = LazyLock::new(|| {
    FAMILIES
        .iter()
        .flat_map(|f| f.names.iter().map(move |n| (*n, f)))
        .collect()
});

/// The registry name a program is known under: lowercased (`RM` is `rm` on a case-insensitive
/// file system), the dynamic loader as `ld.so`, and a version or flavour suffix dropped when
/// what is left is a registry name: a cut before a digit or a `.`, or before a `-` that a
/// version follows (`python3.11` -> `python3`, `perl5.36-x86_64-linux-gnu` -> `perl`,
/// `vim.basic` -> `vim`, `gcc-12` -> `gcc`, `bash-` -> `bash`). Unknown names come back
/// lowercased.
pub(crate) fn canonical(base: &str) -> String {
    let lc = base.to_ascii_lowercase();
    match registry_name(&lc) {
        Some(name) => name.to_string(),
        None => lc,
    }
}

/// The registry name a lowercased program name normalises to (see [`canonical`]).
fn registry_name(lc: &str) -> Option<&str> {
    // The dynamic loader runs the program named by its argument (`ld-linux-x86-64.so.2 /bin/rm`).
    if lc.starts_with("ld-linux") || lc.starts_with("ld-musl") || lc.starts_with("ld.so") {
        return Some("ld.so");
    }
    if BY_NAME.contains_key(lc) {
        return Some(lc);
    }
    let bytes = lc.as_bytes();
    let versionish = |b: u8| b.is_ascii_digit() || b == b'.' || b == b'-';
    // The longest registry name the rule reaches.
    (1..bytes.len()).rev().find_map(|k| {
        let cut = match bytes[k] {
            b'0'..=b'9' | b'.' => true,
            b'-' => {
                bytes[k + 1..].iter().all(|&b| versionish(b))
                    || bytes.get(k + 1).is_some_and(u8::is_ascii_digit)
            }
            _ => false,
        };
        (cut && BY_NAME.contains_key(&lc[..k])).then(|| &lc[..k])
    })
}

/// The family declaring exactly this name (no normalising).
pub(crate) fn exact(name: &str) -> Option<&'static Family> {
    BY_NAME.get(name).copied()
}

/// Does a deny rule for the program `rule` deny the program `command`: equal ignoring case,
/// names of one family (`gtar` is `tar`, `python3.11` is `python`), or `command` runs the
/// interpreter `rule` names ([`Family::runs`]: `prove` runs Perl, so `perl *` denies it; a
/// rule for `prove` does not deny `perl`).
pub(crate) fn same_program(rule: &str, command: &str) -> bool {
    if rule.eq_ignore_ascii_case(command) {
        return true;
    }
    let Some(x) = family(rule) else {
        return false;
    };
    family(command).is_some_and(|y| {
        std::ptr::eq(x, y) || y.runs.and_then(family).is_some_and(|r| std::ptr::eq(x, r))
    })
}

/// The family a program name belongs to, by [`canonical`].
pub(crate) fn family(base: &str) -> Option<&'static Family> {
    let found = if base.bytes().any(|b| b.is_ascii_uppercase()) {
        registry_name(&base.to_ascii_lowercase()).and_then(|n| BY_NAME.get(n))
    } else {
        registry_name(base).and_then(|n| BY_NAME.get(n))
    };
    found.copied()
}

/// Programs whose first word after their options names what they do (a subcommand) and
/// whose later words are that subcommand's operands: `git stash push` is `git stash`, not
/// `git push`; `pip download x install` is `pip download`. A deny rule `git push *` matches
/// their subcommand path only. Every other program keeps the loose reading, where any later
/// word counts (`make all install` runs the `install` goal).
// Only programs with no second spelling of a subcommand under another path: `docker run` is
// also `docker container run`, so docker and its kin keep the loose reading.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "git", "pip", "pip3", "npm", "pnpm", "yarn", "cargo", "go", "apt", "apt-get", "uv", "poetry",
];

/// Spellings of one subcommand, by program: the name, then the aliases and abbreviations the
/// program itself accepts (npm's `i`, `isntall`, `add`; cargo's `r`). A deny rule naming one
/// matches them all.
const SUBCOMMAND_ALIASES: &[(&str, &[&str])] = &[
    (
        "npm",
        &[
            "install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal",
            "isntall", "add",
        ],
    ),
    ("npm", &["uninstall", "unlink", "remove", "rm", "r", "un"]),
    ("npm", &["run", "run-script", "rum", "urn"]),
    ("npm", &["exec", "x"]),
    ("npm", &["test", "tst", "t"]),
    ("npm", &["install-test", "it"]),
    (
        "npm",
        &[
            "ci",
            "clean-install",
            "ic",
            "install-clean",
            "isntall-clean",
        ],
    ),
    (
        "npm",
        &["install-ci-test", "cit", "clean-install-test", "sit"],
    ),
    ("pnpm", &["install", "i"]),
    ("pnpm", &["remove", "rm", "uninstall", "un"]),
    ("pnpm", &["run", "run-script"]),
    ("cargo", &["build", "b"]),
    ("cargo", &["check", "c"]),
    ("cargo", &["doc", "d"]),
    ("cargo", &["run", "r"]),
    ("cargo", &["test", "t"]),
    ("cargo", &["remove", "rm"]),
];

/// Other commands that do what a program's subcommand does, which a deny rule for it does not
/// match (another program, or another subcommand): the deny lint names those no rule denies.
pub(crate) const EQUIVALENT_COMMANDS: &[(&str, &str, &[&str])] = &[
    (
        "pip",
        "install",
        &[
            "uv pip install x",
            "uv add x",
            "pipx install x",
            "uv tool install x",
            "uvx x",
            "pdm add x",
            "poetry add x",
        ],
    ),
    (
        "npm",
        "install",
        &[
            "npm ci",
            "npm install-test",
            "npm install-ci-test",
            "pnpm add x",
            "yarn add x",
            "bun add x",
            "npx x",
        ],
    ),
    ("git", "push", &["git send-pack x", "git subtree push x"]),
    (
        "docker",
        "run",
        &["docker create x", "podman run x", "nerdctl run x"],
    ),
    ("apt", "install", &["dpkg -i x", "aptitude install x"]),
    ("cargo", "install", &["cargo binstall x"]),
];

/// Every spelling of `sub` as a subcommand of `program` (by family: `pip3` is `pip`),
/// `sub` itself first.
pub(crate) fn subcommand_spellings(program: &str, sub: &str) -> Vec<&'static str> {
    let fam = family(program).map(|f| f.names[0]);
    SUBCOMMAND_ALIASES
        .iter()
        .filter(|(p, names)| Some(*p) == fam && names.contains(&sub))
        .flat_map(|(_, names)| names.iter().copied())
        .collect()
}

/// Does a deny rule for `name` match its subcommand path rather than any later word
/// ([`SUBCOMMAND_PROGRAMS`], by family and by versioned name: `pip3.11` is `pip`)?
pub(crate) fn has_subcommands(name: &str) -> bool {
    let lc = name.to_ascii_lowercase();
    if SUBCOMMAND_PROGRAMS.contains(&lc.as_str()) {
        return true;
    }
    let c = canonical(&lc);
    SUBCOMMAND_PROGRAMS.contains(&c.as_str())
        || family(&lc).is_some_and(|f| f.names.iter().any(|n| SUBCOMMAND_PROGRAMS.contains(n)))
        || SUBCOMMAND_PROGRAMS.iter().any(|p| {
            lc.strip_prefix(p).is_some_and(|rest| {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            })
        })
}

/// Environment variables no `NAME=value cmd` may set, whatever `[tools.bash].env_allow`
/// says: they change which program runs or which code it loads (`LD_PRELOAD`, `PATH`,
/// `BASH_ENV`, `PYTHONPATH` with a planted module, `NODE_OPTIONS=--require`), how a shell or a
/// program reads its words (`IFS`, `SHELLOPTS`, `POSIXLY_CORRECT`, which changes option
/// permutation), which program another one starts (`PAGER`, `EDITOR`, `GIT_*`,
/// `RUSTC_WRAPPER`, `CC`), or where config or files are read and written (`HOME`,
/// `XDG_CONFIG_HOME`, `TMPDIR`). Compared uppercased: exact names, then prefixes (with the few
/// names under them that only set data), then words anywhere in the name.
pub(crate) const DENIED_ENV: &[&str] = &[
    "PATH",
    "ENV",
    "BASH_ENV",
    "IFS",
    "SHELLOPTS",
    "BASHOPTS",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "CDPATH",
    "GLOBIGNORE",
    "POSIXLY_CORRECT",
    "TMPDIR",
    "TMP",
    "TEMP",
    "SHELL",
    "TERMINAL",
    "BROWSER",
    "GZIP",
    "BZIP",
    "BZIP2",
    "XZ_DEFAULTS",
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "AS",
    "NM",
    "RANLIB",
    "STRIP",
    "OBJCOPY",
    "FC",
    "MAKE",
    "MAKEFILES",
    "CLASSPATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "NLSPATH",
    "GCONV_PATH",
    "MALLOC_CHECK_",
    "PYTHONWARNINGS",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
];

/// Prefixes of [`DENIED_ENV`], each with the names under it that only set data.
pub(crate) const DENIED_ENV_PREFIXES: &[(&str, &[&str])] = &[
    ("LD_", &[]),
    ("DYLD_", &[]),
    ("BASH", &[]),
    ("GIT", &[]),
    ("XDG_", &[]),
    ("LESS", &[]),
    (
        "PYTHON",
        &[
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONUNBUFFERED",
            "PYTHONHASHSEED",
            "PYTHONIOENCODING",
            "PYTHONUTF8",
            "PYTHONFAULTHANDLER",
            "PYTHONNOUSERSITE",
            "PYTHONSAFEPATH",
            "PYTHONDEVMODE",
        ],
    ),
    ("PYTEST", &[]),
    ("PERL", &[]),
    ("RUBY", &[]),
    ("GEM_", &[]),
    ("BUNDLE", &[]),
    ("NODE_", &["NODE_ENV", "NODE_NO_WARNINGS"]),
    ("NPM_", &[]),
    ("YARN_", &[]),
    ("PNPM_", &[]),
    ("PIP_", &[]),
    ("UV_", &[]),
    ("POETRY_", &[]),
    ("VIRTUAL_ENV", &[]),
    ("CONDA", &[]),
    ("PYENV", &[]),
    ("RBENV", &[]),
    ("NVM_", &[]),
    ("CARGO", &["CARGO_TERM_COLOR", "CARGO_INCREMENTAL"]),
    (
        "RUST",
        &[
            "RUST_BACKTRACE",
            "RUST_LIB_BACKTRACE",
            "RUST_LOG",
            "RUST_TEST_THREADS",
            "RUST_MIN_STACK",
            "RUST_TEST_NOCAPTURE",
        ],
    ),
    ("GO", &["GOMAXPROCS", "GOTRACEBACK"]),
    ("CGO_", &[]),
    ("JAVA", &[]),
    ("_JAVA", &[]),
    ("JDK_", &[]),
    ("MAVEN", &[]),
    ("GRADLE", &[]),
    ("SSH", &[]),
    ("GPG", &[]),
    ("GNUPG", &[]),
    ("DOCKER", &[]),
    ("KUBE", &[]),
    ("AWS_", &[]),
    ("PKG_CONFIG", &[]),
    ("CMAKE", &[]),
    ("GNUMAKE", &[]),
    ("MAKE", &[]),
    ("MFLAGS", &[]),
    ("GLIBC_", &[]),
    ("MALLOC_", &[]),
    ("SUDO_", &[]),
    ("LC_", &[]),
    ("LANG", &[]),
    ("TERMINFO", &[]),
    ("HIST", &[]),
    ("HARNESS", &[]),
    ("COVERAGE", &[]),
    ("OPENSSL", &[]),
];

/// Words that deny a name wherever they appear in it (`*_OPTS`, `*FLAGS`, `*PATH`, `*HOME`,
/// `*_DIR`, `*CONFIG*`, `*PAGER`...): they name options, search paths, programs and places.
pub(crate) const DENIED_ENV_WORDS: &[&str] = &[
    "OPT", "FLAGS", "PATH", "LIB", "HOME", "DIR", "CONF", "FILE", "SCRIPT", "ENGINE", "APP",
    "PAGER", "EDITOR", "VISUAL", "SHELL", "CMD", "COMMAND", "HOOK", "STARTUP", "ASKPASS",
    "WRAPPER", "RUNNER", "EXEC", "PLUGIN", "LOADER", "INCLUDE", "PRELOAD", "PROXY", "PROG",
    "BROWSER", "INIT", "PROFILE", "MODULE", "REQUIRE", "IMPORT", "DEBUGGER", "TOOL", "CACHE",
    "PREFIX",
];

/// Why `NAME=value` may never be given to a command ([`DENIED_ENV`]), or `None`.
pub fn denied_env(name: &str) -> Option<&'static str> {
    let up = name.to_ascii_uppercase();
    if DENIED_ENV.contains(&up.as_str()) {
        return Some("it changes which program runs, which code it loads or how words are read");
    }
    for (prefix, data) in DENIED_ENV_PREFIXES {
        if data.contains(&up.as_str()) {
            return None;
        }
        if up.starts_with(prefix) {
            return Some("its family of variables configures programs, the code they load or where they read and write");
        }
    }
    // `INPUTRC`, `*RC`: a file of commands read at start.
    if DENIED_ENV_WORDS.iter().any(|w| up.contains(w)) || up.ends_with("RC") {
        return Some(
            "its name says it sets options, a search path, a program or a place to read or write",
        );
    }
    None
}

/// Variables that change only which code or settings an interpreter family loads, with that
/// family: `PYTHONPATH=.`, `DJANGO_SETTINGS_MODULE`, `PYTHONWARNINGS`. [`denied_env`] names
/// them, and they stay refused, unless the policy already lets the model write a file and run
/// it with that interpreter: then they protect nothing (that file could set `sys.path` or
/// import any settings module itself), and the judge lets them through without `env_allow`.
/// Never here: what the issue of record names as never (`PYTHONSTARTUP`, `PYTEST_ADDOPTS`,
/// `NODE_OPTIONS`), what runs a program or a callable (`PYTHONBREAKPOINT`, `PERL5OPT`,
/// `RUBYOPT`), or what moves the interpreter's own library (`PYTHONHOME`).
const INTERPRETER_ENV: &[(&str, &str)] = &[
    ("PYTHONPATH", "python"),
    ("PYTHONWARNINGS", "python"),
    ("PYTHONTRACEMALLOC", "python"),
    ("PYTHONOPTIMIZE", "python"),
    ("PYTHONASYNCIODEBUG", "python"),
    ("DJANGO_SETTINGS_MODULE", "python"),
    ("NODE_PATH", "node"),
    ("PERL5LIB", "perl"),
    ("RUBYLIB", "ruby"),
];

/// The interpreter family whose code-loading variable `name` is ([`INTERPRETER_ENV`]).
pub(crate) fn interpreter_env(name: &str) -> Option<&'static Family> {
    let up = name.to_ascii_uppercase();
    INTERPRETER_ENV
        .iter()
        .find(|(n, _)| *n == up)
        .and_then(|(_, fam)| exact(fam))
}

/// Python modules that are programs of the registry (`python3 -m pip` is `pip`), with the
/// program each one is.
const PYTHON_MODULES: &[(&str, &str)] = &[
    ("pip", "pip"),
    ("pip3", "pip"),
    ("pytest", "pytest"),
    ("py.test", "pytest"),
    ("coverage", "coverage"),
    ("tox", "tox"),
    ("nox", "nox"),
    ("pdm", "pdm"),
    ("poetry", "poetry"),
    ("pipx", "pipx"),
    ("uv", "uv"),
];

/// The registry program a Python module is ([`PYTHON_MODULES`]).
pub(crate) fn python_module(module: &str) -> Option<&'static str> {
    PYTHON_MODULES
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, p)| *p)
}

/// What a program executes besides what the gate judged, so the kernel's exec set
/// (`tools::sandbox`) must allow it too: programs found on PATH, and the directory the program
/// prints when asked with `dir_query` (`git --exec-path`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecHelpers {
    /// Programs it runs by name (make runs recipes with `sh`).
    pub programs: &'static [&'static str],
    /// Arguments that make it print its helper directory (or a helper program in it).
    pub dir_query: Option<&'static [&'static str]>,
    /// Directories below the printed one that hold the helpers, instead of it (a `*`
    /// component matches any entry): rustc's sysroot holds `bin` and `lib/rustlib/*/bin`.
    pub dir_suffixes: &'static [&'static str],
    /// Directories of the work root where the program puts the programs it builds and then
    /// runs itself (cargo's build scripts and test binaries in `target`): a rule for it
    /// already runs the project's code.
    pub work_dirs: &'static [&'static str],
    /// It builds programs in the private TMPDIR and runs them (`go test`, `go run`).
    pub tmp: bool,
}

/// The [`ExecHelpers`] of a program name (by family, so `gmake` is `make`).
pub fn exec_helpers(name: &str) -> ExecHelpers {
    match family(name).and_then(|f| f.names.first().copied()) {
        Some("make") => ExecHelpers {
            programs: &["sh"],
            ..ExecHelpers::default()
        },
        Some("git") => ExecHelpers {
            programs: &["sh"],
            dir_query: Some(&["--exec-path"]),
            ..ExecHelpers::default()
        },
        // cargo runs rustc (through rustup's proxy, the toolchain's own binaries), the C
        // compiler as linker, and what it builds: build scripts and test binaries.
        Some("cargo") => ExecHelpers {
            programs: &["rustc", "cc"],
            work_dirs: &["target"],
            ..ExecHelpers::default()
        },
        Some("rustc") => ExecHelpers {
            programs: &["cc"],
            dir_query: Some(&["--print", "sysroot"]),
            dir_suffixes: &["bin", "lib/rustlib/*/bin"],
            ..ExecHelpers::default()
        },
        // gcc's driver runs cc1/collect2/lto-wrapper from its own directory, then as and ld.
        Some("gcc" | "g++" | "cc" | "c++" | "gfortran") => ExecHelpers {
            programs: &["as", "ld"],
            dir_query: Some(&["-print-prog-name=collect2"]),
            ..ExecHelpers::default()
        },
        Some("clang" | "clang++") => ExecHelpers {
            programs: &["as", "ld"],
            ..ExecHelpers::default()
        },
        // go runs its tools (compile, link, vet, cgo) from GOTOOLDIR, and the C compiler.
        Some("go") => ExecHelpers {
            programs: &["cc"],
            dir_query: Some(&["env", "GOTOOLDIR"]),
            tmp: true,
            ..ExecHelpers::default()
        },
        // Package scripts run with `sh`, under node, and the tools installed in node_modules
        // (`jest`, `tsc`: node_modules/.bin links into the packages).
        Some("npm" | "yarn" | "pnpm" | "npx") => ExecHelpers {
            programs: &["sh", "node"],
            work_dirs: &["node_modules"],
            ..ExecHelpers::default()
        },
        _ => ExecHelpers::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for f in FAMILIES {
            for n in f.names {
                assert!(seen.insert(*n), "`{n}` is declared twice");
                assert_eq!(canonical(n), *n, "`{n}` is not its own canonical name");
            }
        }
    }

    #[test]
    fn subcommand_aliases_are_spelt_by_family() {
        assert!(subcommand_spellings("npm", "install").contains(&"isntall"));
        assert!(subcommand_spellings("npm", "add").contains(&"install"));
        assert_eq!(subcommand_spellings("cargo", "run"), ["run", "r"]);
        assert!(subcommand_spellings("git", "push").is_empty());
    }

    #[test]
    fn a_rule_for_an_interpreter_denies_what_runs_its_code() {
        assert!(same_program("perl", "prove"));
        assert!(same_program("perl5.36", "json_pp"));
        assert!(same_program("ruby", "irb3.1"));
        assert!(same_program("python3", "pytest-3"));
        // Not the other way round, and not between programs of other interpreters.
        assert!(!same_program("prove", "perl"));
        assert!(!same_program("ruby", "prove"));
        assert!(!same_program("perl", "shasum"));
    }

    #[test]
    fn versioned_names_find_their_family() {
        for (name, want) in [
            ("python3.11", "python"),
            ("Python3", "python"),
            ("perl5.36-x86_64-linux-gnu", "perl"),
            ("vim.basic", "vim"),
            ("vim.tiny", "vim"),
            ("nc.openbsd", "nc"),
            ("nc.traditional", "nc"),
            ("bash5", "bash"),
            ("bash-", "bash"),
            ("gcc-12", "gcc"),
            ("go1.22", "go"),
            ("gmake", "make"),
            ("bsdtar", "tar"),
            ("ld-linux-x86-64.so.2", "ld.so"),
        ] {
            assert_eq!(family(name).map(Family::name), Some(want), "{name}");
        }
        // (ssh-keygen is a family since issue 10: `-D` loads a PKCS#11 library.)
        for name in ["ls", "ssh-copy-id", "git-upload-pack", "cargo-fmt", "2to3"] {
            assert!(family(name).is_none(), "{name}");
            assert!(family(name).is_none_or(|f| f.name() != "ssh"), "{name}");
        }
    }
}
