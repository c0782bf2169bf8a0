//! tools stage (gate), PURE: text and file tools whose options run programs or write files: sort,
//! split, shuf/iconv/tree, uniq/xxd, printf, test, man, pagers, rg, zip.

use crate::programs::argv::{denied, long_abbrev, options, short_has};
use crate::shell::lex::Word;

/// `test -v`/`-R` evaluate array subscripts, whose arithmetic can run commands.
pub(crate) fn test_check(base: &str, args: &[Word]) -> Option<String> {
    // `test -v 'a[$(id)]'` evaluates the subscript as arithmetic, running the substitution.
    args.iter()
        .any(|w| matches!(w.value.as_str(), "-v" | "-R"))
        .then(|| {
            format!(
                "`{base} -v`/`-R` evaluates array subscripts (arithmetic can run commands); denied"
            )
        })
}

/// `sort --compress-program` runs a program; `-o`/`--output` writes a file.
pub(crate) fn sort_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if let Some(n) = long_abbrev(v, &["compress-program", "output"]) {
            return hit(&format!("`--{n}` runs a program or writes a file"));
        }
        if short_has(v, "o", "ktST") {
            return hit("`-o` writes a file");
        }
    }
    None
}

/// `split --filter` runs a shell command.
pub(crate) fn split_check(base: &str, args: &[Word]) -> Option<String> {
    let found = options(args).any(|v| long_abbrev(v, &["filter"]).is_some());
    denied(base, "`--filter` runs a shell command").filter(|_| found)
}

/// `-o`/`--output` writes a file (shuf, iconv, tree).
pub(crate) fn output_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if long_abbrev(v, &["output"]).is_some() || short_has(v, "o", "ntiIPLx") {
            return hit("`-o`/`--output` writes a file");
        }
        // tree reads each letter of a cluster in turn, and a letter that takes a value takes
        // the next word (`tree -Lo 1 FILE` is `-L 1 -o FILE`); `-R` writes `00Tree.html`
        // into every directory.
        let cluster = v.strip_prefix('-').filter(|c| !c.starts_with('-'));
        if base == "tree" && cluster.is_some_and(|c| c.contains(['o', 'R'])) {
            return hit("`-o` or `-R` (anywhere in a cluster) writes files");
        }
    }
    None
}

/// `xxd` stops reading options at its first operand.
pub(crate) fn two_operands_check(base: &str, args: &[Word], xxd: bool) -> Option<String> {
    // Options that take a separate value, whose value is not an operand.
    let valued: &[&str] = if !xxd {
        &["-f", "-s", "-w"]
    } else {
        &[
            "-c",
            "-g",
            "-l",
            "-o",
            "-s",
            "-n",
            "-R",
            "-cols",
            "-groupsize",
            "-len",
            "-offset",
            "-seek",
            "-name",
        ]
    };
    let mut positional = 0;
    let mut i = 0;
    // After `--`, and for xxd after the first operand (it stops reading options
    // there), every word is an operand, even one that starts with `-`.
    let mut operands_only = false;
    while let Some(w) = args.get(i) {
        let v = w.value.as_str();
        i += 1;
        if operands_only || v == "-" || !v.starts_with('-') {
            positional += 1;
            operands_only |= xxd;
        } else if v == "--" {
            operands_only = true;
        } else if valued.contains(&v) {
            i += 1;
        }
    }
    (positional >= 2).then(|| format!("`{base}` with two file operands writes the second; denied"))
}

/// Only the options of man that neither run pagers, browsers nor preprocessors.
pub(crate) fn man_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if !v.starts_with('-') {
            continue;
        }
        let ok = matches!(
            v,
            "-k" | "-f"
                | "-a"
                | "-w"
                | "-W"
                | "-s"
                | "-S"
                | "--apropos"
                | "--whatis"
                | "--all"
                | "--where"
                | "--location"
        ) || v.starts_with("--sections=")
            || v.chars().skip(1).all(|c| "kfawWsS0123456789".contains(c));
        if !ok {
            return hit(&format!(
                "option `{v}` (man can run pagers, browsers and preprocessors)"
            ));
        }
    }
    None
}

/// Pager `+cmd`, log files and key files (less, more, most).
/// A pager's initial command that only moves or searches: `+N`, `+G`, `+10g`, `+F`, `+p`,
/// `+50%` (`++` repeats it for every file), or a search `+/pattern`, `+?pattern` with no
/// control character (a newline would end the search and type further commands, `!` among
/// them).
fn safe_pager_start(v: &str) -> bool {
    let cmd = v.trim_start_matches('+');
    if v.len() - cmd.len() > 2 {
        return false;
    }
    if let Some(pattern) = cmd.strip_prefix(['/', '?']) {
        return !pattern.chars().any(char::is_control);
    }
    let motion = cmd.trim_start_matches(|c: char| c.is_ascii_digit());
    matches!(motion, "" | "G" | "g" | "F" | "p" | "%")
}

pub(crate) fn pager_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in args.iter().map(|w| w.value.as_str()) {
        if v.starts_with('+') && !safe_pager_start(v) {
            return hit("`+cmd` runs pager commands (only `+N`, `+G`, `+g`, `+F`, `+p`, `+%`, `+/pattern` and `+?pattern` are allowed)");
        }
        if short_has(v, "oOk", "bhjpPtTxyz#")
            || long_abbrev(
                v,
                &[
                    "log-file",
                    "LOG-FILE",
                    "lesskey-file",
                    "lesskey-src",
                    "lesskey-content",
                ],
            )
            .is_some()
        {
            return hit("log or key files are denied");
        }
    }
    None
}

/// `rg --pre` runs a program.
pub(crate) fn rg_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        if long_abbrev(v, &["pre", "hostname-bin"]).is_some() && !v.starts_with("--pre-glob") {
            return hit("`--pre` runs a program");
        }
    }
    None
}

/// `zip -TT`/`--unzip-command` runs a program.
pub(crate) fn zip_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    for v in options(args) {
        let cluster_tt = v.starts_with('-') && !v.starts_with("--") && v.contains("TT");
        if cluster_tt || long_abbrev(v, &["unzip-command"]).is_some() {
            return hit("`-TT` runs a program");
        }
    }
    None
}

/// `printf -v` assigns a shell variable.
pub(crate) fn printf_check(args: &[Word]) -> Option<String> {
    for v in options(args) {
        if v.starts_with("-v") {
            return Some("`printf -v` assigns a shell variable; always denied".into());
        }
        if !v.starts_with('-') {
            break;
        }
    }
    None
}
