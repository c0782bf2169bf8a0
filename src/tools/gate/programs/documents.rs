//! tools stage (gate), PURE: document tools that run programs from options: pandoc, TeX engines and
//! latexmk, exiftool, gpg.

use crate::tools::gate::programs::argv::{long_abbrev, options, short_has};
use crate::tools::gate::shell::lex::Word;

pub(crate) fn pandoc_check(base: &str, args: &[Word]) -> Option<String> {
    options(args)
    .any(|v| {
        long_abbrev(v, &["filter", "lua-filter", "pdf-engine"]).is_some()
            || short_has(v, "FL", "otfrwMVdcHABDT")
    })
    .then(|| format!("`{base}` `--filter`/`--lua-filter`/`--pdf-engine` runs a program; denied whatever the rules say"))
}

pub(crate) fn latex_check(base: &str, args: &[Word], latexmk: bool) -> Option<String> {
    args
    .iter()
    .map(|w| w.value.trim_start_matches('-'))
    .any(|v| {
        v.starts_with("shell-escape")
            || v.starts_with("enable-write18")
            || v.starts_with("shell-restricted")
            || (latexmk && (v == "e" || v == "r" || v.contains('=')))
    })
    .then(|| format!("`{base}` with shell escape (or latexmk code and commands) runs programs; denied whatever the rules say"))
}

pub(crate) fn exiftool_check(base: &str, args: &[Word]) -> Option<String> {
    args
    .iter()
    .any(|w| {
        let v = w.value.to_ascii_lowercase();
        v.starts_with("-if") || v.contains("${") || v == "-@" || v.starts_with("-config")
    })
    .then(|| format!("`{base}` `-if`, `${{…}}` expressions and argument/config files evaluate Perl; denied whatever the rules say"))
}

pub(crate) fn gpg_check(base: &str, args: &[Word]) -> Option<String> {
    options(args)
    .any(|v| long_abbrev(v, &["photo-viewer", "exec-path", "load-extension"]).is_some())
    .then(|| format!("`{base}` `--photo-viewer`/`--exec-path` runs programs; denied whatever the rules say"))
}
