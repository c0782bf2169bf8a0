//! tools stage (gate), PURE: argv helpers shared by the program files: option scanning,
//! abbreviations, clusters, and the `Inner` finding.

use crate::tools::gate::shell::lex::{Dialect, Word};
pub(crate) enum Inner {
    None,
    Deny(String),
    /// Word ranges that are commands to judge; `true` when `xargs` appends unseen arguments.
    Commands(Vec<(std::ops::Range<usize>, bool)>),
    /// A shell script to judge as a whole, in the grammar of the shell that runs it.
    Script(String, Dialect),
}

/// Splits a wrapper's leading options: returns the index of the first operand, or a denial.
/// `with_arg` options take a value (attached or next word); `flags` take none.
pub(crate) fn skip_options(
    words: &[Word],
    from: usize,
    flags: &[&str],
    with_arg: &[&str],
    wrapper: &str,
) -> Result<usize, String> {
    let mut i = from;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            return Ok(i + 1);
        }
        if !v.starts_with('-') || v == "-" {
            return Ok(i);
        }
        if !w.literal() {
            return Err(format!(
                "`{wrapper}` has an option the gate cannot read: `{}`",
                w.raw
            ));
        }
        if flags.contains(&v) {
            i += 1;
            continue;
        }
        if with_arg.contains(&v) {
            if words.get(i + 1).is_some_and(|w| !w.literal()) {
                return Err(format!(
                    "`{wrapper}` option `{v}` has a value the gate cannot read: `{}`",
                    words[i + 1].raw
                ));
            }
            i += 2;
            continue;
        }
        let attached = with_arg.iter().any(|o| {
            if o.starts_with("--") {
                v.starts_with(&format!("{o}="))
            } else {
                v.len() > o.len() && v.starts_with(o) && !v.starts_with("--")
            }
        });
        if attached {
            i += 1;
            continue;
        }
        return Err(format!(
            "`{wrapper}` option `{v}` is not understood by the gate"
        ));
    }
    Ok(i)
}

/// The script text a word list stands for when a program joins it and runs `sh -c`.
pub(crate) fn script_of(words: &[Word], base: &str) -> Result<String, String> {
    if let Some(w) = words.iter().find(|w| !w.literal()) {
        return Err(format!(
            "`{base}` runs a script containing `{}`, which the gate cannot read",
            w.raw
        ));
    }
    Ok(words
        .iter()
        .map(|w| w.value.as_str())
        .collect::<Vec<_>>()
        .join(" "))
}

pub(crate) fn is_stdin_path(v: &str) -> bool {
    matches!(v, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// `--name[=…]` where `name` is an abbreviation (GNU getopt_long accepts any unambiguous
/// prefix) of one of `names`.
pub(crate) fn long_abbrev<'n>(arg: &str, names: &[&'n str]) -> Option<&'n str> {
    let body = arg.strip_prefix("--")?;
    let name = body.split('=').next().unwrap_or(body);
    if name.is_empty() {
        return None;
    }
    names.iter().copied().find(|n| n.starts_with(name))
}

/// Does the short-option cluster `-abc` contain one of `flags`? Stops at the first option in
/// `takes_arg` (the rest of the cluster is its value).
pub(crate) fn short_has(arg: &str, flags: &str, takes_arg: &str) -> bool {
    let Some(cluster) = arg.strip_prefix('-') else {
        return false;
    };
    if cluster.starts_with('-') {
        return false;
    }
    for c in cluster.chars() {
        if flags.contains(c) {
            return true;
        }
        if takes_arg.contains(c) {
            return false;
        }
    }
    false
}

/// Arguments up to `--`.
pub(crate) fn options(args: &[Word]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(|w| w.value.as_str())
        .take_while(|v| *v != "--")
}

/// The reason for a denial no rule can lift: `` `base` what; denied whatever the rules say ``.
pub(crate) fn denied(base: &str, what: &str) -> Option<String> {
    Some(format!("`{base}` {what}; denied whatever the rules say"))
}
