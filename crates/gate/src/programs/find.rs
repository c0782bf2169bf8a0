//! tools stage (gate), PURE: find and fd: the commands `-exec`/`-x` run and the actions that delete
//! or write files.

use crate::programs::argv::{denied, long_abbrev, substituted_into_code, Inner};
use crate::programs::git::may_run_git;
use crate::rule::glob_match;
use crate::shell::lex::Word;

pub(crate) fn find_inner(words: &[Word]) -> Result<Inner, String> {
    let mut list = Vec::new();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        if matches!(w.value.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            // GNU find ends the command at `;`, or at a `+` only right after `{}`; any other
            // `+` is an argument of the command.
            let end = (start..words.len())
                .find(|&k| {
                    words[k].value == ";"
                        || (words[k].value == "+" && k > start && words[k - 1].value == "{}")
                })
                .ok_or_else(|| format!("`find {}` has no terminating `;` or `{{}} +`", w.value))?;
            if end == start {
                return Err(format!("`find {}` has no command", w.value));
            }
            if words[start].value.contains("{}") {
                return Err(format!(
                    "`find {}` runs a command named by the file it finds (`{}`); denied",
                    w.value, words[start].raw
                ));
            }
            // find puts the path it found wherever `{}` appears, also inside a word: in a
            // shell's or interpreter's code a file named `a;rm x` becomes code (`sh -c 'echo
            // {}'`), and as a whole word it can be the script itself (`sh {}`).
            if substituted_into_code(&words[start..end], "{}") {
                return Err(format!(
                    "`find {}` puts the names it finds into code that `{}` runs; denied",
                    w.value, words[start].raw
                ));
            }
            if matches!(w.value.as_str(), "-execdir" | "-okdir") && may_run_git(&words[start..end])
            {
                return Err(format!(
                    "`find {}` runs `{}` in the directories it finds, where git would use a repository the model could have written; denied",
                    w.value, words[start].raw
                ));
            }
            // `{} +` appends found paths the gate cannot see.
            list.push((start..end, words[end].value == "+"));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(Inner::Commands(list))
}

/// `fd -x CMD…` / `-X CMD…` runs CMD on every match, up to a `;` or the end, with the paths
/// appended (an open tail: file names the gate cannot see become arguments).
pub(crate) fn fd_inner(words: &[Word]) -> Result<Inner, String> {
    // fd's short options that take a value: the rest of their cluster is that value.
    const VALUED: &str = "edtEcjSoC";
    let mut list = Vec::new();
    let mut i = 1;
    // `--base-directory`/`-C` makes fd (and the commands it runs) change directory.
    let elsewhere = words[1..].iter().any(|w| {
        let v = w.value.as_str();
        long_abbrev(v, &["base-directory"]).is_some()
            || v.strip_prefix('-').is_some_and(|c| {
                !c.starts_with('-')
                    && c.chars()
                        .take_while(|&x| !"edtEcjSo".contains(x))
                        .any(|x| x == 'C')
            })
    });
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            break;
        }
        let exec = if matches!(v, "--exec" | "--exec-batch") {
            true
        } else if long_abbrev(v, &["exec", "exec-batch"]).is_some() {
            return Err(format!(
                "`fd` option `{v}` is abbreviated or carries its command in the same word; denied"
            ));
        } else if let Some(cluster) = v.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            let mut found = false;
            for (k, c) in cluster.char_indices() {
                if c == 'x' || c == 'X' {
                    if k + 1 != cluster.len() {
                        return Err(format!(
                            "`fd` option `{v}` carries its command in the same word; denied"
                        ));
                    }
                    found = true;
                }
                if VALUED.contains(c) {
                    break;
                }
            }
            found
        } else {
            false
        };
        if exec {
            let start = i + 1;
            let end = words[start.min(words.len())..]
                .iter()
                .position(|w| w.value == ";")
                .map_or(words.len(), |p| start + p);
            if end <= start {
                return Err(format!("`fd {v}` has no command"));
            }
            if words[start].value.contains('{') {
                return Err(format!(
                    "`fd {v}` runs a command named by the file it finds (`{}`); denied",
                    words[start].raw
                ));
            }
            if elsewhere && may_run_git(&words[start..end]) {
                return Err(format!(
                    "`fd --base-directory` runs `{}` in another directory, where git would use a repository the model could have written; denied",
                    words[start].raw
                ));
            }
            list.push((start..end, true));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(Inner::Commands(list))
}

/// find actions that delete or write files, and globs that could expand to them.
pub(crate) fn find_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
    const BAD: [&str; 9] = [
        "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-exec", "-execdir", "-ok", "-okdir",
    ];
    for w in args {
        let v = w.value.as_str();
        if BAD[..5].contains(&v) {
            return hit(&format!("with `{v}` deletes or writes files"));
        }
        if w.glob && BAD.iter().any(|b| glob_match(v, b)) {
            return hit(&format!(
                "has a glob `{v}` that could expand to an action like -exec or -delete"
            ));
        }
    }
    None
}
