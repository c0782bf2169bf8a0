//! tools stage (gate), PURE: word rules of the shell itself: reserved words, state-changing
//! builtins, assignments and variables whose expansion is safe.

use crate::shell::lex::Word;
/// Words that are reserved in command position (control flow, groups, tests).
pub(crate) const RESERVED: &[&str] = &[
    "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
    "function", "if", "in", "select", "then", "time", "until", "while",
];

/// Builtins that evaluate text or change the shell's state.
pub(crate) const STATE_BUILTINS: &[&str] = &[
    ".",
    "source",
    "eval",
    "exec",
    "trap",
    "alias",
    "unalias",
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "let",
    "set",
    "unset",
    "shopt",
    "cd",
    "pushd",
    "popd",
    "hash",
    "enable",
    "bind",
    "complete",
    "compgen",
    "compopt",
    "fc",
    "history",
    "read",
    "mapfile",
    "readarray",
    "ulimit",
    "umask",
    "getopts",
    "shift",
    "return",
    "break",
    "continue",
    "exit",
    "logout",
    "suspend",
    "disown",
    "wait",
    "fg",
    "bg",
    "jobs",
    "caller",
    "dirs",
    // zsh precommand modifiers and builtins, reached through `zsh -c`.
    "-",
    "noglob",
    "nocorrect",
    "repeat",
    "foreach",
    "autoload",
    "zmodload",
    "emulate",
    "setopt",
    "unsetopt",
    "sched",
    "vared",
    "zle",
    "ztcp",
    "zsocket",
    "zpty",
    "sysopen",
];

/// Variables whose expansion in an argument is harmless: the runner sets them itself.
pub(crate) const SAFE_VARS: &[&str] = &[
    "HOME", "USER", "LOGNAME", "PATH", "PWD", "TMPDIR", "LANG", "TERM",
];

pub(crate) fn is_assignment(w: &Word) -> bool {
    // bash removes backslash-newline before it recognises `NAME=`.
    let raw = w.raw.replace("\\\n", "");
    let raw = raw.as_str();
    let name_len = raw
        .char_indices()
        .take_while(|&(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
        .count();
    if name_len == 0 {
        return false;
    }
    let rest = &raw[name_len..];
    let rest = if rest.starts_with('[') {
        match rest.find(']') {
            Some(k) => &rest[k + 1..],
            None => return false,
        }
    } else {
        rest
    };
    rest.starts_with('=') || rest.starts_with("+=")
}

pub(crate) fn unsafe_var(w: &Word) -> Option<&str> {
    w.vars
        .iter()
        .map(String::as_str)
        .find(|v| !SAFE_VARS.contains(v))
}
