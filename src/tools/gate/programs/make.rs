//! tools stage (gate), PURE: make (make, gmake, bmake): paths outside the work root, code on the
//! command line, variable overrides that change recipes.

use crate::tools::gate::paths::{basename, outside_path};
use crate::tools::gate::programs::argv::{is_stdin_path, long_abbrev, options, short_has};
use crate::tools::gate::programs::registry::{exact, family, Kind};
use crate::tools::gate::shell::lex::Word;
/// `make` runs its Makefile's recipes (what a `make *` rule authorises), but not code given on
/// the command line or on stdin.
pub(crate) fn make_check(args: &[Word]) -> Option<String> {
    // Paths make reads or writes (`-C`, `-f`, `-I`, `-o`, `-W`), in every spelling: clustered
    // (`-sC dir`), attached (`-C/dir`), abbreviated (`--dir=`).
    let all: Vec<&str> = options(args).collect();
    let mut k = 0;
    while let Some(&v) = all.get(k) {
        k += 1;
        let value = if v.starts_with("--") {
            long_abbrev(
                v,
                &[
                    "directory",
                    "file",
                    "makefile",
                    "include-dir",
                    "old-file",
                    "new-file",
                    "assume-new",
                    "assume-old",
                    "what-if",
                ],
            )
            .and_then(|_| match v.split_once('=') {
                Some((_, x)) => Some(x),
                None => {
                    k += 1;
                    all.get(k - 1).copied()
                }
            })
        } else if let Some(cluster) = v.strip_prefix('-') {
            cluster
                .char_indices()
                .find(|(_, c)| "CfIoWjl".contains(*c))
                .and_then(|(n, c)| {
                    let rest = &cluster[n + 1..];
                    if "jl".contains(c) {
                        None // numeric, optional
                    } else if rest.is_empty() {
                        k += 1;
                        all.get(k - 1).copied()
                    } else {
                        Some(rest)
                    }
                })
        } else {
            None
        };
        if let Some(p) = value.filter(|p| outside_path(p)) {
            return Some(format!("`{v} {p}` reaches outside the work root"));
        }
    }
    let all: Vec<&str> = options(args).collect();
    for (k, v) in all.iter().enumerate() {
        if long_abbrev(v, &["eval"]).is_some() || short_has(v, "E", "CfIjlWo") {
            return Some("`--eval` runs code given on the command line".into());
        }
        let makefile = if matches!(*v, "-f" | "--file" | "--makefile") {
            all.get(k + 1).copied()
        } else if let Some(rest) = v.strip_prefix("-f").filter(|_| !v.starts_with("--")) {
            Some(rest)
        } else if long_abbrev(v, &["file", "makefile"]).is_some() {
            v.split_once('=').map(|(_, x)| x)
        } else {
            None
        };
        if makefile
            .is_some_and(|m| is_stdin_path(m) || m.starts_with("/dev/") || m.starts_with("/proc/"))
        {
            return Some("a Makefile read from stdin cannot be checked".into());
        }
        if let Some(reason) = make_override(v) {
            return Some(reason);
        }
    }
    // Overrides may also follow `--`.
    for w in args.iter().skip_while(|w| w.value != "--") {
        if let Some(reason) = make_override(&w.value) {
            return Some(reason);
        }
    }
    None
}

/// A `NAME=value` (`:=`, `::=`, `?=`, `+=`) argument to make, or None when it is harmless.
pub(crate) fn make_override(v: &str) -> Option<String> {
    let (name, value) = v.split_once('=').filter(|_| !v.starts_with('-'))?;
    if name.ends_with('!') {
        return Some(format!("`{name}=` runs a shell command to set a variable"));
    }
    let name = name.trim_end_matches([':', '?', '+']).trim();
    let value = value.trim();
    // Recipes may run any variable as a program (`CC=rm`, `PYTHON=sh`): a value may
    // not name a shell, an interpreter, a runner or a program that deletes or
    // rewrites files, nor carry shell syntax or compiler plugin/wrapper options.
    let safe_name = !matches!(
        name,
        "SHELL"
            | "MAKESHELL"
            | ".SHELLFLAGS"
            | "MAKEFLAGS"
            | "MFLAGS"
            | "MAKEFILES"
            | "GNUMAKEFLAGS"
    );
    let bad_value = value.contains(|c: char| ";|&$`()<>\n\\'\"*?[]{}~#!@".contains(c))
        || value
            .split_whitespace()
            .any(|t| t.starts_with("-o") || t.contains("fuse-ld") || outside_path(t))
        || ["plugin", "wrapper", "specs", "-B", "load", "exec"]
            .iter()
            .any(|b| value.contains(b))
        || value
            .split_whitespace()
            .any(|t| family(basename(t)).is_some_and(|f| f.writes || f.appended_args_dangerous()));
    // Variables that name the programs recipes run take only known toolchain programs.
    let pname = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let program_var = matches!(
        pname,
        "BASH"
            | "PKG_CONFIG"
            | "CHECK"
            | "SPARSE"
            | "CLANG"
            | "CMAKE"
            | "NINJA"
            | "MESON"
            | "PROTOC"
            | "FLEX"
            | "BISON"
            | "LUA"
            | "TCL"
            | "GIT"
            | "OBJDUMP"
            | "READELF"
            | "DOXYGEN"
            | "GZIP"
            | "BZIP2"
            | "XZ"
            | "ZSTD"
            | "LN_S"
            | "INSTALL_DATA"
            | "INSTALL_PROGRAM"
            | "MKDIR_P"
            | "EDITOR"
            | "PAGER"
            | "VALGRIND"
            | "GDB"
            | "TOUCH"
            | "CAT"
            | "CHMOD"
            | "FIND"
            | "XARGS"
            | "ENV"
            | "TEST"
            | "PYTEST"
            | "CC"
            | "CXX"
            | "CPP"
            | "LD"
            | "AR"
            | "AS"
            | "RM"
            | "MAKE"
            | "FC"
            | "PC"
            | "LEX"
            | "YACC"
            | "M4"
            | "TAR"
            | "INSTALL"
            | "RANLIB"
            | "STRIP"
            | "NM"
            | "OBJCOPY"
            | "PYTHON"
            | "PERL"
            | "RUBY"
            | "NODE"
            | "NPM"
            | "DOCKER"
            | "GO"
            | "CARGO"
            | "RUSTC"
            | "JAVA"
            | "JAVAC"
            | "CO"
            | "GET"
            | "LINT"
            | "MAKEINFO"
            | "TEX"
            | "SED"
            | "AWK"
            | "GREP"
            | "MKDIR"
            | "CP"
            | "MV"
            | "LN"
            | "ECHO"
            | "SH"
    ) || [
        "CMD", "COMMAND", "EXEC", "PROG", "TOOL", "WRAPPER", "RUNNER", "LAUNCHER",
    ]
    .iter()
    .any(|s| pname.ends_with(s));
    let toolchain = |t: &str| {
        let t = t.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.');
        exact(t).is_some_and(|f| f.kind == Kind::Toolchain)
    };
    // Any variable may be run as a program by some recipe (`$(LINTER) src`): a value that
    // reads as a program name is allowed only for data-like names or known toolchains.
    let first = value.split_whitespace().next().unwrap_or("");
    let wordlike =
        first.starts_with(|c: char| c.is_ascii_alphabetic()) && !first.contains(['=', ',', ':']);
    let data_name = matches!(
        pname,
        "VERSION"
            | "BUILD"
            | "BUILDTYPE"
            | "BUILD_TYPE"
            | "MODE"
            | "CONFIG"
            | "CONFIGURATION"
            | "TARGET"
            | "ARCH"
            | "OS"
            | "GOOS"
            | "GOARCH"
            | "PROFILE"
            | "ENV"
            | "LEVEL"
            | "LANG"
            | "O"
            | "V"
            | "VERBOSE"
            | "Q"
            | "DEBUG"
            | "NDEBUG"
            | "RELEASE"
            | "FEATURES"
            | "TAGS"
            | "ARGS"
            | "TESTS"
            | "TEST"
            | "T"
            | "PKG"
            | "PACKAGE"
            | "NAME"
            | "OUT"
            | "PREFIX"
            | "DESTDIR"
            | "J"
            | "JOBS"
            | "COLOR"
            | "STD"
            | "EXTRA"
            | "COVERAGE"
            | "SANITIZE"
    ) || ["FLAGS", "DIR", "PATH", "VERSION"]
        .iter()
        .any(|s| pname.ends_with(s));
    let program_ok = if program_var {
        value.split_whitespace().next().is_some_and(toolchain) && !value.contains('/')
    } else {
        !wordlike || data_name || toolchain(first)
    };
    if !safe_name || bad_value || !program_ok || outside_path(value) {
        return Some(format!(
            "the variable override `{name}=…` can change the commands recipes run"
        ));
    }
    None
}
