//! tools stage (gate), PURE: shells (`sh -c`, `bash -c`...): the script they run, or why it cannot
//! be seen.

use crate::programs::argv::Inner;
use crate::rule::Policy;
use crate::shell::lex::{Dialect, Word};
/// `dialect` is the grammar the shell reads `-c` scripts with; `None`: not one the gate reads.
pub(crate) fn shell_inner(
    policy: &Policy,
    words: &[Word],
    base: &str,
    dialect: Option<Dialect>,
) -> Result<Inner, String> {
    let (i, command_mode) = shell_options(words, base)?;
    if command_mode {
        return match words.get(i) {
            Some(w) if w.literal() => {
                let Some(dialect) = dialect else {
                    return Err(format!(
                        "`{base} -c` scripts are not bash; the gate cannot judge them"
                    ));
                };
                Ok(Inner::Script(w.value.clone(), dialect))
            }
            Some(w) => Err(format!(
                "`{base} -c` runs `{}`, which the gate cannot read",
                w.raw
            )),
            None if policy.deny.is_empty() => Ok(Inner::None),
            None => Err(format!(
                "`{base} -c` gets its script from input the gate cannot see"
            )),
        };
    }
    if policy.deny.is_empty() {
        Ok(Inner::None)
    } else {
        Err(format!(
            "`{base}` reads its script from a file or stdin, which the deny rules cannot see into"
        ))
    }
}

/// The shell's options: where its operands start, and whether `-c` was given.
fn shell_options(words: &[Word], base: &str) -> Result<(usize, bool), String> {
    let mut i = 1;
    let mut command_mode = false;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if !w.literal() {
            break;
        }
        if v == "--" || v == "-" {
            i += 1;
            break;
        }
        if matches!(v, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            if let Some(value) = words.get(i + 1) {
                option_changes_reading(base, &v[..2], &value.value)?;
            }
            i += 2;
            continue;
        }
        if matches!(
            v,
            "--login"
                | "--norc"
                | "--noprofile"
                | "--posix"
                | "--restricted"
                | "--verbose"
                | "--noediting"
                | "--no-rcs"
                | "-l"
        ) {
            i += 1;
            continue;
        }
        if v.starts_with("--") {
            return Err(format!(
                "`{base}` option `{v}` is not understood by the gate"
            ));
        }
        if (v.starts_with('-') || v.starts_with('+')) && v.len() > 1 {
            command_mode |= v[1..].contains('c');
            i += 1 + flag_cluster(words, i, base)?;
            continue;
        }
        break;
    }
    Ok((i, command_mode))
}

/// A cluster of one-letter options (`-ec`, `+o`, `-co posix`) at `words[i]`: how many of the
/// following words it takes as values, or why it is refused.
fn flag_cluster(words: &[Word], i: usize, base: &str) -> Result<usize, String> {
    let v = words[i].value.as_str();
    let flags = &v[1..];
    if !flags.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(format!(
            "`{base}` option `{v}` is not understood by the gate"
        ));
    }
    if flags.contains('i') {
        return Err(format!("interactive `{base} -i` is denied"));
    }
    if flags.contains('k') && v.starts_with('-') {
        return Err(format!(
            "`{base} -k` makes every `NAME=value` word of a command an environment assignment (`git diff GIT_EXTERNAL_DIFF=prog`); denied"
        ));
    }
    // Each `o`/`O` in a cluster (`-co posix`) takes the next word as its value.
    let letters: Vec<char> = flags.chars().filter(|c| matches!(c, 'o' | 'O')).collect();
    let values = letters.len();
    if words[i + 1..].iter().take(values).any(|w| !w.literal()) {
        return Err(format!(
            "`{base}` option `{v}` takes a value the gate cannot read"
        ));
    }
    for (letter, value) in letters.iter().zip(&words[i + 1..]) {
        let sign = if v.starts_with('-') { "-" } else { "+" };
        option_changes_reading(base, &format!("{sign}{letter}"), &value.value)?;
    }
    Ok(values)
}

/// Shell options that change how the script's words are read, which the gate reads with the
/// defaults: `-o keyword` (as `-k`: `NAME=value` anywhere is an environment assignment), and
/// any `shopt` set with `-O` but a few that only widen globs (`nullglob` makes a word vanish,
/// so another becomes an option's value; `compat*` change parsing).
fn option_changes_reading(base: &str, option: &str, value: &str) -> Result<(), String> {
    const SHOPT_OK: &[&str] = &[
        "dotglob",
        "globstar",
        "nocaseglob",
        "failglob",
        "extglob",
        "lastpipe",
        "xpg_echo",
        "inherit_errexit",
    ];
    let bad = match option {
        "-o" => value == "keyword",
        "-O" => !SHOPT_OK.contains(&value),
        _ => false,
    };
    if bad {
        return Err(format!(
            "`{base} {option} {value}` changes how the shell reads the script's words; denied"
        ));
    }
    Ok(())
}
