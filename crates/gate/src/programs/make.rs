//! tools stage (gate), PURE: make (make, gmake, bmake): paths outside the work root, code on the
//! command line, variable overrides that change recipes.

use crate::paths::{basename, is_makefile_name, outside_path};
use crate::programs::argv::{getopt, is_stdin_path, Arity, OptionSpec};
use crate::programs::registry::{exact, family, Kind};
use crate::shell::lex::Word;
/// GNU make's options (make 4.4 `main.c`), read as its getopt_long reads them.
const MAKE_OPTIONS: OptionSpec = OptionSpec {
    short: &[
        ('b', Arity::Flag),
        ('B', Arity::Flag),
        ('C', Arity::Value),
        ('d', Arity::Flag),
        ('e', Arity::Flag),
        ('E', Arity::Value),
        ('f', Arity::Value),
        ('h', Arity::Flag),
        ('i', Arity::Flag),
        ('I', Arity::Value),
        ('j', Arity::Optional),
        ('k', Arity::Flag),
        ('l', Arity::Optional),
        ('L', Arity::Flag),
        ('m', Arity::Flag),
        ('n', Arity::Flag),
        ('o', Arity::Value),
        ('O', Arity::Optional),
        ('p', Arity::Flag),
        ('q', Arity::Flag),
        ('r', Arity::Flag),
        ('R', Arity::Flag),
        ('s', Arity::Flag),
        ('S', Arity::Flag),
        ('t', Arity::Flag),
        ('v', Arity::Flag),
        ('w', Arity::Flag),
        ('W', Arity::Value),
    ],
    long: &[
        ("always-make", Arity::Flag),
        ("directory", Arity::Value),
        ("debug", Arity::Optional),
        ("environment-overrides", Arity::Flag),
        ("eval", Arity::Value),
        ("file", Arity::Value),
        ("makefile", Arity::Value),
        ("help", Arity::Flag),
        ("ignore-errors", Arity::Flag),
        ("include-dir", Arity::Value),
        ("jobs", Arity::Optional),
        ("jobserver-auth", Arity::Value),
        ("jobserver-fds", Arity::Value),
        ("jobserver-style", Arity::Value),
        ("keep-going", Arity::Flag),
        ("load-average", Arity::Optional),
        ("max-load", Arity::Optional),
        ("check-symlink-times", Arity::Flag),
        ("just-print", Arity::Flag),
        ("dry-run", Arity::Flag),
        ("recon", Arity::Flag),
        ("old-file", Arity::Value),
        ("assume-old", Arity::Value),
        ("output-sync", Arity::Optional),
        ("print-data-base", Arity::Flag),
        ("question", Arity::Flag),
        ("no-builtin-rules", Arity::Flag),
        ("no-builtin-variables", Arity::Flag),
        ("shuffle", Arity::Optional),
        ("silent", Arity::Flag),
        ("quiet", Arity::Flag),
        ("no-silent", Arity::Flag),
        ("no-keep-going", Arity::Flag),
        ("stop", Arity::Flag),
        ("touch", Arity::Flag),
        ("trace", Arity::Flag),
        ("version", Arity::Flag),
        ("print-directory", Arity::Flag),
        ("no-print-directory", Arity::Flag),
        ("what-if", Arity::Value),
        ("new-file", Arity::Value),
        ("assume-new", Arity::Value),
        ("warn-undefined-variables", Arity::Flag),
    ],
};

/// Can make hand this name to a recipe's shell unchanged? Goals become `$@`, `$*` and
/// `$(MAKECMDGOALS)` in recipes (`%: ; $(MAKE) -C sub $@`), file names `$?`, `$^` and
/// `$(CURDIR)`: shell syntax in one runs as commands (`make 'x;id'`).
fn shell_safe(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/+,:@%-".contains(c))
}

/// `make` runs its Makefile's recipes (what a `make *` rule authorises), but not code given on
/// the command line or on stdin.
pub(crate) fn make_check(args: &[Word]) -> Option<String> {
    // Read as make reads them: clustered (`-kf-`), attached (`-C/dir`), abbreviated
    // (`--fi -`), options among the goals. An option the gate does not know might take a
    // value, and then the gate would read the wrong word as a goal.
    let parsed = match getopt(args, &MAKE_OPTIONS) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    if parsed.has(&["-E", "--eval"]) {
        return Some("`--eval` runs code given on the command line".into());
    }
    if parsed
        .values(&["-f", "--file", "--makefile"])
        .any(|m| is_stdin_path(m) || m.starts_with("/dev/") || m.starts_with("/proc/"))
    {
        return Some("a Makefile read from stdin cannot be checked".into());
    }
    // Any other file could hold lines the model shaped with an allowed command (`git bundle
    // create x.bundle` writes commit subjects, and make expands `$(shell …)` in a line
    // before it fails on it): only names no program may write.
    if let Some(m) = parsed
        .values(&["-f", "--file", "--makefile"])
        .find(|m| !is_makefile_name(&basename(m).to_ascii_lowercase()))
    {
        return Some(format!(
            "`-f {m}` is not a makefile name (Makefile, GNUmakefile, *.mk, *.make, *.mak); make would read any file's lines as code"
        ));
    }
    // Paths make reads or writes.
    const PATHS: &[&str] = &[
        "-C",
        "--directory",
        "-f",
        "--file",
        "--makefile",
        "-I",
        "--include-dir",
        "-o",
        "--old-file",
        "--assume-old",
        "-W",
        "--what-if",
        "--new-file",
        "--assume-new",
    ];
    for (name, value) in &parsed.options {
        let Some(p) = value.as_deref().filter(|_| PATHS.contains(&name.as_str())) else {
            continue;
        };
        if outside_path(p) {
            return Some(format!("`{name} {p}` reaches outside the work root"));
        }
        if !shell_safe(p) {
            return Some(format!(
                "`{name} {p}`: a name with shell syntax reaches recipes (`$(CURDIR)`, `$?`) as commands"
            ));
        }
    }
    for v in &parsed.operands {
        if v.contains('=') {
            if let Some(reason) = make_override(v) {
                return Some(reason);
            }
        } else if !shell_safe(v) {
            return Some(format!(
                "the goal `{v}` has characters a recipe's shell would read as syntax (`$@` in a recipe is the goal as written)"
            ));
        }
    }
    None
}

/// Variables that configure make itself: an override of one is never harmless.
const MAKE_VARS: &[&str] = &[
    "SHELL",
    "MAKESHELL",
    ".SHELLFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKEFILES",
    "GNUMAKEFLAGS",
];

/// Variables that name the programs recipes run (digits at the end dropped: `CC2`).
#[rustfmt::skip]
const PROGRAM_VARS: &[&str] = &[
    "BASH", "PKG_CONFIG", "CHECK", "SPARSE", "CLANG", "CMAKE", "NINJA", "MESON", "PROTOC",
    "FLEX", "BISON", "LUA", "TCL", "GIT", "OBJDUMP", "READELF", "DOXYGEN", "GZIP", "BZIP2",
    "XZ", "ZSTD", "LN_S", "INSTALL_DATA", "INSTALL_PROGRAM", "MKDIR_P", "EDITOR", "PAGER",
    "VALGRIND", "GDB", "TOUCH", "CAT", "CHMOD", "FIND", "XARGS", "ENV", "TEST", "PYTEST", "CC",
    "CXX", "CPP", "LD", "AR", "AS", "RM", "MAKE", "FC", "PC", "LEX", "YACC", "M4", "TAR",
    "INSTALL", "RANLIB", "STRIP", "NM", "OBJCOPY", "PYTHON", "PERL", "RUBY", "NODE", "NPM",
    "DOCKER", "GO", "CARGO", "RUSTC", "JAVA", "JAVAC", "CO", "GET", "LINT", "MAKEINFO", "TEX",
    "SED", "AWK", "GREP", "MKDIR", "CP", "MV", "LN", "ECHO", "SH",
];

/// Endings of variable names that name programs (`LINT_CMD`, `TEST_RUNNER`).
const PROGRAM_VAR_ENDINGS: &[&str] = &[
    "CMD", "COMMAND", "EXEC", "PROG", "TOOL", "WRAPPER", "RUNNER", "LAUNCHER",
];

/// Variables whose values are data (a version, a mode, a target), not programs.
#[rustfmt::skip]
const DATA_VARS: &[&str] = &[
    "VERSION", "BUILD", "BUILDTYPE", "BUILD_TYPE", "MODE", "CONFIG", "CONFIGURATION", "TARGET",
    "ARCH", "OS", "GOOS", "GOARCH", "PROFILE", "ENV", "LEVEL", "LANG", "O", "V", "VERBOSE", "Q",
    "DEBUG", "NDEBUG", "RELEASE", "FEATURES", "TAGS", "ARGS", "TESTS", "TEST", "T", "PKG",
    "PACKAGE", "NAME", "OUT", "PREFIX", "DESTDIR", "J", "JOBS", "COLOR", "STD", "EXTRA",
    "COVERAGE", "SANITIZE",
];

/// Endings of variable names whose values are data (`CFLAGS`, `SRCDIR`).
const DATA_VAR_ENDINGS: &[&str] = &["FLAGS", "DIR", "PATH", "VERSION"];

/// A `NAME=value` (`:=`, `::=`, `?=`, `+=`) argument to make, or None when it is harmless.
pub(crate) fn make_override(v: &str) -> Option<String> {
    let (name, value) = v.split_once('=').filter(|_| !v.starts_with('-'))?;
    if name.ends_with('!') {
        return Some(format!("`{name}=` runs a shell command to set a variable"));
    }
    let name = name.trim_end_matches([':', '?', '+']).trim();
    // make expands the name of a command-line assignment (`x$(shell id)=1` runs `id`, even
    // with `-n`).
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Some(format!(
            "`{name}=`: make expands a variable name, and this one is not a plain name"
        ));
    }
    let value = value.trim();
    let pname = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if MAKE_VARS.contains(&name)
        || value_may_run(value)
        || !program_ok(pname, value)
        || outside_path(value)
    {
        return Some(format!(
            "the variable override `{name}=…` can change the commands recipes run"
        ));
    }
    None
}

/// Recipes may run any variable as a program (`CC=rm`, `PYTHON=sh`): a value may not name a
/// shell, an interpreter, a runner or a program that deletes or rewrites files, nor carry
/// shell syntax or compiler plugin/wrapper options.
fn value_may_run(value: &str) -> bool {
    value.contains(|c: char| ";|&$`()<>\n\\'\"*?[]{}~#!@".contains(c))
        || value
            .split_whitespace()
            .any(|t| t.starts_with("-o") || t.contains("fuse-ld") || outside_path(t))
        || ["plugin", "wrapper", "specs", "-B", "load", "exec"]
            .iter()
            .any(|b| value.contains(b))
        || value
            .split_whitespace()
            .any(|t| family(basename(t)).is_some_and(|f| f.writes || f.appended_args_dangerous()))
}

/// Is this value fine for the variable `pname` (its name without trailing digits)?
/// Variables that name the programs recipes run take only known toolchain programs; any
/// other may be run as a program by some recipe (`$(LINTER) src`), so a value that reads as
/// a program name is allowed only for data-like names or known toolchains.
fn program_ok(pname: &str, value: &str) -> bool {
    let program_var =
        PROGRAM_VARS.contains(&pname) || PROGRAM_VAR_ENDINGS.iter().any(|s| pname.ends_with(s));
    let toolchain = |t: &str| {
        let t = t.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.');
        exact(t).is_some_and(|f| f.kind == Kind::Toolchain)
    };
    if program_var {
        return value.split_whitespace().next().is_some_and(toolchain) && !value.contains('/');
    }
    let first = value.split_whitespace().next().unwrap_or("");
    let wordlike =
        first.starts_with(|c: char| c.is_ascii_alphabetic()) && !first.contains(['=', ',', ':']);
    let data_name =
        DATA_VARS.contains(&pname) || DATA_VAR_ENDINGS.iter().any(|s| pname.ends_with(s));
    !wordlike || data_name || toolchain(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Option<String> {
        let words: Vec<Word> = line.split(' ').map(Word::synthetic).collect();
        make_check(&words)
    }

    #[test]
    fn stdin_makefiles_in_every_spelling() {
        for line in [
            "-kf-",
            "-kf -",
            "--fi -",
            "--makef -",
            "-ef-",
            "-f /dev/stdin",
        ] {
            assert!(check(line).is_some(), "{line}");
        }
    }

    #[test]
    fn goals_and_names_reach_recipes_as_written() {
        for line in [
            "x;id",
            "x$(id)",
            "a|b",
            "-- x&y",
            "-o x;y all",
            "x$(shell_id)=1",
        ] {
            assert!(check(line).is_some(), "{line}");
        }
        for line in [
            "all",
            "build/out.o",
            "-j 4 all",
            "V=1",
            "-C sub test",
            "CC=gcc",
        ] {
            assert_eq!(check(line), None, "{line}");
        }
    }
}
