//! tools stage (gate), PURE: the "try instead" of a denial: what the model could write in place
//! of a command the gate refuses (a reason in, a hint out), kept apart from the judge so that
//! the judge reads as the order of its checks.

use crate::rule::Policy;

/// The "try instead" for a command the gate cannot read as a whole (the lexer's and the
/// parser's reasons).
pub(crate) fn syntax_hint(reason: &str) -> Option<String> {
    let r = reason.to_ascii_lowercase();
    let hint = if r.contains("command substitution") || r.contains("backtick") {
        "run the inner command on its own first, then use its output in the next command"
    } else if r.contains("subshell") || r.contains("group") {
        "run the commands one after another as plain segments (`a && b`), without `( )` or `{ }`"
    } else if r.contains("keyword") || r.contains("control flow") || r.contains("function") {
        "run each command separately (`a && b`) instead of a loop or an `if`; list the files a loop would visit"
    } else if r.contains("process substitution") {
        "write one command's output to a file first (where writes are allowed), or compare with a pipe"
    } else if r.contains("arithmetic") {
        "compute the value yourself and write it as a number"
    } else {
        return None;
    };
    Some(hint.to_string())
}

/// The hint for a write the policy refuses: the file tools when the model has them.
pub(crate) fn write_hint(policy: &Policy, fallback: &str) -> Option<String> {
    if policy.file_tools {
        Some("use the `write_file` or `edit_file` tool to create or change the file".into())
    } else if fallback.is_empty() {
        None
    } else {
        Some(fallback.to_string())
    }
}

/// What to do instead of a refused redirection.
pub(crate) fn redirect_hint(policy: &Policy, reason: &str) -> Option<String> {
    if reason.contains("write_redirects") || reason.contains("not writing files") {
        write_hint(
            policy,
            "leave out the redirection: the command's output is returned to you",
        )
    } else if reason.contains("absolute path") && policy.write_redirects {
        Some("write to a relative path under the working directory, or under `/tmp` (the command's private temp dir)".into())
    } else if reason.contains("absolute path") {
        write_hint(policy, "leave out the redirection (the output is returned to you), or write to a relative path where writes are allowed")
    } else if reason.contains("quote the delimiter") {
        Some("quote the heredoc delimiter (`<<'EOF'`) so bash does not expand the body".into())
    } else {
        None
    }
}

/// What to do instead of a builtin that changes the shell's state.
pub(crate) fn builtin_hint(builtin: &str) -> Option<String> {
    let hint = match builtin {
        "cd" | "pushd" | "popd" => "use the bash tool's `workdir` argument (a relative directory), or start the command with `cd DIR && …` where DIR is a plain relative directory under the working directory",
        "export" | "declare" | "typeset" | "local" | "readonly" | "set" => "give a variable on the command itself (`NAME=value cmd`) when `[tools.bash].env_allow` lists it",
        "source" | "." | "eval" | "exec" => "run the program directly",
        _ => return None,
    };
    Some(hint.to_string())
}
