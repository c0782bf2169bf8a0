//! tools stage (gate), PURE: document tools that run programs from options: pandoc, TeX engines and
//! latexmk, exiftool, gpg.

use crate::programs::argv::{denied, long_abbrev, options, short_has};
use crate::shell::lex::Word;

/// pandoc filters and PDF engines are programs.
pub(crate) fn pandoc_check(base: &str, args: &[Word]) -> Option<String> {
    let found = options(args).any(|v| {
        long_abbrev(v, &["filter", "lua-filter", "pdf-engine"]).is_some()
            || short_has(v, "FL", "otfrwMVdcHABDT")
    });
    denied(
        base,
        "`--filter`/`--lua-filter`/`--pdf-engine` runs a program",
    )
    .filter(|_| found)
}

/// Shell escape runs programs; latexmk also runs code from `-e`, `-r` and `NAME=`.
pub(crate) fn latex_check(base: &str, args: &[Word], latexmk: bool) -> Option<String> {
    // web2c reads options with getopt_long_only: one or two dashes, and any unambiguous
    // prefix (`-enable-w` is `-enable-write18`). `-cnf-line` sets texmf.cnf variables, among
    // them `shell_escape=t` and `openout_any`.
    const RUNS: &[&str] = &[
        "shell-escape",
        "shell-escape-commands",
        "enable-write18",
        "shell-restricted",
        "cnf-line",
    ];
    let found = args
        .iter()
        .filter(|w| w.value.starts_with('-'))
        .map(|w| w.value.trim_start_matches('-'))
        .any(|v| {
            let name = v.split('=').next().unwrap_or(v);
            (!name.is_empty()
                && RUNS
                    .iter()
                    .any(|r| r.starts_with(name) || name.starts_with(r)))
                || (latexmk && (v == "e" || v == "r" || v.contains('=')))
        });
    denied(
        base,
        "with shell escape (or latexmk code and commands) runs programs",
    )
    .filter(|_| found)
}

/// exiftool `-if`, `${…}` expressions and argument or config files evaluate Perl.
pub(crate) fn exiftool_check(base: &str, args: &[Word]) -> Option<String> {
    let found = args.iter().any(|w| {
        let v = w.value.to_ascii_lowercase();
        v.starts_with("-if") || v.contains("${") || v == "-@" || v.starts_with("-config")
    });
    denied(
        base,
        "`-if`, `${…}` expressions and argument/config files evaluate Perl",
    )
    .filter(|_| found)
}

/// gpg `--photo-viewer`, `--exec-path` and extensions run programs.
pub(crate) fn gpg_check(base: &str, args: &[Word]) -> Option<String> {
    let found = options(args)
        .any(|v| long_abbrev(v, &["photo-viewer", "exec-path", "load-extension"]).is_some());
    denied(base, "`--photo-viewer`/`--exec-path` runs programs").filter(|_| found)
}

/// openssl loads code through engines and providers (`engine dynamic -pre SO_PATH:…`,
/// `-engine`, `-provider-path`); any mention is denied.
pub(crate) fn openssl_check(base: &str, args: &[Word]) -> Option<String> {
    let loads = args.iter().any(|w| {
        let v = w.value.to_ascii_lowercase();
        v == "engine"
            || v.contains("engine")
            || v.contains("provider")
            || matches!(v.as_str(), "-pre" | "-post")
    });
    denied(base, "engines and providers load code").filter(|_| loads)
}
