//! tools stage (gate), PURE: wrappers that run another command (env, nice, timeout, xargs, sudo,
//! watch...): where their inner command starts.

use crate::paths::basename;
use crate::programs::argv::{script_of, skip_options, substituted_into_code, Inner};
use crate::programs::find::{fd_inner, find_inner};
use crate::programs::registry::{canonical, family, Finder};
use crate::programs::shells::shell_inner;
use crate::rule::Policy;
use crate::shell::lex::{Dialect, Word};
/// Options of `time` that take no value.
const TIME_FLAGS: &[&str] = &[
    "-p",
    "-v",
    "-q",
    "-a",
    "--portability",
    "--verbose",
    "--quiet",
    "--append",
];

/// Options of `watch` that take no value.
#[rustfmt::skip]
const WATCH_FLAGS: &[&str] = &[
    "-x", "--exec", "-d", "--differences", "-t", "--no-title", "-b", "--beep", "-e",
    "--errexit", "-g", "--chgexit", "-c", "--color", "-p", "--precise", "-w", "--no-wrap", "-C",
    "--no-color", "-r", "--no-rerun",
];

/// Options of `sudo` that take no value. `-D`/`--chdir` are left out: another directory
/// could hold a repository whose config the model wrote.
#[rustfmt::skip]
const SUDO_FLAGS: &[&str] = &[
    "-E", "-H", "-n", "-S", "-k", "-b", "-P", "--preserve-env", "--non-interactive", "--stdin",
    "--background",
];

/// Options of `sudo` that take a value.
#[rustfmt::skip]
const SUDO_VALUED: &[&str] = &[
    "-u", "-g", "-C", "-p", "-T", "-h", "-r", "-t", "-U", "--user", "--group", "--close-from",
    "--prompt", "--command-timeout", "--host", "--role", "--type", "--other-user",
];

pub(crate) fn inner_command(policy: &Policy, base: &str, words: &[Word], open_tail: bool) -> Inner {
    let n = words.len();
    let to_end = |start: usize| Inner::Commands(vec![(start..n, open_tail)]);
    let finder = family(base).map_or(Finder::None, |f| f.inner);
    let result = match finder {
        Finder::Command => command_inner(words, base).map(|i| i.map_or(Inner::None, to_end)),
        Finder::Builtin => skip_options(words, 1, &[], &[], base).map(to_end),
        Finder::Nice => nice_inner(words, base).map(to_end),
        Finder::Timeout => skip_options(
            words,
            1,
            &["-v", "--verbose", "--preserve-status", "--foreground"],
            &["-s", "--signal", "-k", "--kill-after"],
            base,
        )
        .map(|i| to_end(i + 1)),
        Finder::Stdbuf => skip_options(
            words,
            1,
            &[],
            &["-i", "-o", "-e", "--input", "--output", "--error"],
            base,
        )
        .map(to_end),
        Finder::Setsid => skip_options(
            words,
            1,
            &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
            &[],
            base,
        )
        .map(to_end),
        Finder::Time => time_inner(words, base).map(to_end),
        Finder::Busybox => Ok(if n > 1 && !words[1].value.starts_with('-') {
            to_end(1)
        } else {
            Inner::None
        }),
        Finder::Env => env_inner(words, open_tail),
        Finder::Xargs => xargs_inner(words),
        Finder::Find => find_inner(words),
        Finder::Fd => fd_inner(words),
        Finder::Watch => watch_inner(words, base, open_tail),
        Finder::Sudo => skip_options(words, 1, SUDO_FLAGS, SUDO_VALUED, base).map(to_end),
        Finder::Doas => skip_options(words, 1, &["-n"], &["-u"], base).map(to_end),
        Finder::Shell => shell_inner(policy, words, base, Some(Dialect::Bash)),
        Finder::PosixShell => shell_inner(policy, words, base, Some(Dialect::Posix)),
        Finder::ForeignShell => shell_inner(policy, words, base, None),
        Finder::None | Finder::Directory | Finder::FromFile => Ok(Inner::None),
    };
    match result {
        Ok(Inner::Commands(list)) if !open_tail && list.iter().all(|(r, _)| r.start >= n) => {
            // A wrapper with nothing to run (`nohup`, `env`) runs nothing.
            Inner::None
        }
        Ok(inner) => inner,
        Err(reason) => Inner::Deny(reason),
    }
}

/// Where `command` starts its command; `None` for `command -v`/`-V`, which only looks it up.
fn command_inner(words: &[Word], base: &str) -> Result<Option<usize>, String> {
    if words[1..]
        .iter()
        .take_while(|w| w.value.starts_with('-'))
        .any(|w| w.value.contains('v') || w.value.contains('V'))
    {
        return Ok(None);
    }
    skip_options(words, 1, &["-p"], &[], base).map(Some)
}

/// Where `nice` starts its command (`nice -5 cmd` included).
fn nice_inner(words: &[Word], base: &str) -> Result<usize, String> {
    let start = match words.get(1) {
        Some(w)
            if w.value.len() > 1
                && w.value.starts_with('-')
                && w.value[1..].chars().all(|c| c.is_ascii_digit()) =>
        {
            2
        }
        _ => 1,
    };
    skip_options(words, start, &[], &["-n", "--adjustment"], base)
}

/// Where the `time` program starts its command; `-o` writes a file.
fn time_inner(words: &[Word], base: &str) -> Result<usize, String> {
    if words[1..]
        .iter()
        .any(|w| w.value.starts_with("-o") || w.value.starts_with("--o"))
    {
        return Err("`time -o` writes a file; denied".into());
    }
    skip_options(words, 1, TIME_FLAGS, &["-f", "--format"], base)
}

/// What `watch` runs: the words as a command with `-x`, else the joined words as a script
/// for `sh -c`.
fn watch_inner(words: &[Word], base: &str, open_tail: bool) -> Result<Inner, String> {
    let n = words.len();
    let exec = words[1..]
        .iter()
        .any(|w| matches!(w.value.as_str(), "-x" | "--exec"));
    let i = skip_options(
        words,
        1,
        WATCH_FLAGS,
        &["-n", "--interval", "-q", "--equexit"],
        base,
    )?;
    if exec {
        Ok(Inner::Commands(vec![(i..n, open_tail)]))
    } else {
        // watch hands the joined words to `sh -c`.
        script_of(&words[i.min(n)..], base).map(|s| Inner::Script(s, Dialect::Posix))
    }
}

pub(crate) fn env_inner(words: &[Word], _open_tail: bool) -> Result<Inner, String> {
    let mut i = skip_options(
        words,
        1,
        &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
        ],
        &["-u", "--unset", "-C", "--chdir"],
        "env",
    )?;
    if words[1..i].iter().any(|w| {
        let v = w.value.as_str();
        v.starts_with("-C")
            || v.starts_with("--ch")
            || (v.starts_with('-') && !v.starts_with("--") && v.contains('C'))
    }) {
        return Err(
            "`env -C` runs the command in another directory, where git would use a repository the model could have written; denied"
                .into(),
        );
    }
    if words.get(i).is_some_and(|w| w.value == "-") {
        i += 1;
    }
    if let Some(w) = words.get(i).filter(|w| w.value.contains('=')) {
        return Err(format!(
            "`env` sets the variable `{}`; environment assignments are always denied",
            w.raw
        ));
    }
    Ok(Inner::Commands(vec![(i..words.len(), false)]))
}

pub(crate) fn xargs_inner(words: &[Word]) -> Result<Inner, String> {
    let (i, replace) = xargs_options(words)?;
    if let Some(r) = replace.filter(|r| !r.is_empty()) {
        if let Some(cmd) = words.get(i) {
            if cmd.value.contains(&r) {
                return Err("`xargs -I` substitutes input into the command word; denied".into());
            }
            if substituted_into_code(&words[i..], &r) {
                let b = canonical(basename(&cmd.value));
                return Err(format!(
                    "`xargs -I` substitutes input into code that `{b}` runs; denied"
                ));
            }
        }
    }
    Ok(Inner::Commands(vec![(i..words.len(), true)]))
}

/// xargs's options: where its command starts, and the replace string of `-I`/`-i`.
fn xargs_options(words: &[Word]) -> Result<(usize, Option<String>), String> {
    let mut i = 1;
    let mut replace: Option<String> = None;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            i += 1;
            break;
        }
        if !v.starts_with('-') || v == "-" {
            break;
        }
        if !w.literal() {
            return Err(format!(
                "`xargs` has an option the gate cannot read: `{}`",
                w.raw
            ));
        }
        match v {
            "-0" | "--null" | "-r" | "--no-run-if-empty" | "-t" | "--verbose" | "-x" | "--exit"
            | "-p" | "--interactive" | "-o" | "--open-tty" => i += 1,
            "-I" => {
                replace = words.get(i + 1).map(|w| w.value.clone());
                i += 2;
            }
            "-i" | "--replace" => {
                replace = Some("{}".into());
                i += 1;
            }
            "-a" | "-d" | "-E" | "-L" | "-n" | "-P" | "-s" => i += 2,
            _ if v.starts_with("--process-slot-var") => {
                return Err(
                    "`xargs --process-slot-var` sets an environment variable; denied".into(),
                )
            }
            _ if v.starts_with("-I") => {
                replace = Some(v[2..].to_string());
                i += 1;
            }
            _ if v.starts_with("-i") || v.starts_with("--replace=") => {
                replace = Some(v.split_once('=').map_or(&v[2..], |(_, r)| r).to_string());
                i += 1;
            }
            _ if attached_value(v) => i += 1,
            _ => {
                return Err(format!(
                    "`xargs` option `{v}` is not understood by the gate"
                ))
            }
        }
    }
    Ok((i, replace))
}

/// An xargs option word that carries its value (`-n1`, `--max-args=1`).
fn attached_value(v: &str) -> bool {
    ["-a", "-d", "-E", "-e", "-L", "-l", "-n", "-P", "-s"]
        .iter()
        .any(|o| v.starts_with(o))
        || [
            "--arg-file=",
            "--delimiter=",
            "--eof",
            "--max-lines",
            "--max-args=",
            "--max-procs=",
            "--max-chars=",
        ]
        .iter()
        .any(|o| v.starts_with(o))
}
