//! tools stage (gate), PURE: compilers' and package tools' options that run programs or write
//! outside the work root: cargo, apt/dpkg, crontab.

use crate::paths::path_option_outside;
use crate::programs::argv::{denied, long_abbrev, options};
use crate::shell::lex::Word;

/// crontab installs commands that run later, outside the turn; only `crontab -l`.
pub(crate) fn crontab_check(base: &str, args: &[Word]) -> Option<String> {
    let installs = args.is_empty() || args.iter().any(|w| !matches!(w.value.as_str(), "-l"));
    installs.then(|| {
        format!(
            "`{base}` installs commands that run later, outside this turn and its sandbox; only `crontab -l` is allowed"
        )
    })
}

/// apt and dpkg `-o`/`-c` set options that run programs (Pre-Invoke...).
pub(crate) fn apt_check(base: &str, args: &[Word]) -> Option<String> {
    let found = options(args).any(|v| {
        matches!(v, "-o" | "-c")
            || v.starts_with("-o") && !v.starts_with("--")
            || long_abbrev(
                v,
                &[
                    "option",
                    "config-file",
                    "pre-invoke",
                    "post-invoke",
                    "status-logger",
                    "log",
                    "instdir",
                    "root",
                    "admindir",
                ],
            )
            .is_some()
    });
    denied(
        base,
        "`-o`/`-c`/`--pre-invoke`... set options or hooks that run programs",
    )
    .filter(|_| found)
}

/// cargo `--config`/`-Z` can set runners; `--logfile` and paths outside the work root.
pub(crate) fn cargo_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if v == "--config" || v.starts_with("--config=") || v.starts_with("-Z") {
            return hit("`--config`/`-Z` can set a runner or other programs to execute");
        }
    }
    // The test binary's own `--logfile` (after `--`) writes wherever it is told.
    if args
        .iter()
        .any(|w| w.value == "--logfile" || w.value.starts_with("--logfile="))
    {
        return hit("`--logfile` writes a file");
    }
    path_option_outside(
        args,
        &[
            "--target-dir",
            "--manifest-path",
            "--artifact-dir",
            "--out-dir",
            "--lockfile-path",
        ],
    )
    .map(|(o, p)| format!("`{o} {p}` reaches outside the work root; denied whatever the rules say"))
}

/// Compiler and linker options that run programs or load code: `-wrapper`, `-B` (where the
/// driver finds cc1, as, ld), plugins, spec files (which can run programs), a linker by path,
/// `-Xclang`/`-Xlinker`/`-Wl,` passing any of these on, response files (`@file`: options the
/// gate cannot see), `tcc -run`.
pub(crate) fn compiler_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in args.iter().map(|w| w.value.as_str()) {
        let lc = v.to_ascii_lowercase();
        let bad = v.starts_with('@')
            || lc.starts_with("-wrapper")
            || lc.starts_with("--wrapper")
            || v.starts_with("-B")
            || v.starts_with("--prefix")
            || (lc.starts_with('-') && (lc.contains("plugin") || lc.contains("specs")))
            || lc.starts_with("-xclang")
            || lc.starts_with("-xlinker")
            || lc.starts_with("-wl,")
            || (lc.starts_with("-fuse-ld=") && v.contains('/'))
            || lc.starts_with("--ld-path")
            || lc.starts_with("-ccc-")
            || lc == "-run"
            || lc == "-load";
        if bad {
            return hit(&format!(
                "`{v}` runs a program, loads code or reads options the gate cannot see"
            ));
        }
    }
    None
}
