//! tools stage (gate), PURE: the argv of a judged command that harness can run itself, without
//! bash reading the text a second time: one pipeline of simple commands whose words need no
//! expansion, with no redirection, no assignment, no reserved word and no builtin other than
//! the few harness runs as bash does (`echo`, `true`, `false`, `:`; see `tools::direct`).

use crate::tools::gate::rule::{Judgement, Verdict};
use crate::tools::gate::shell::lex::{Dialect, Lexer, Word};
use crate::tools::gate::shell::words::{is_assignment, RESERVED};

/// Pipelines longer than this go to bash.
const MAX_STAGES: usize = 32;

/// bash 5's builtins (`compgen -b`): they are not executables (or, like `echo`, behave
/// differently from the executable of the same name), so commands naming them go to bash.
const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

impl Judgement {
    /// The argv of each stage of the allowed command when it is one plain pipeline (see the
    /// module doc), as the gate judged them: decoded words, the command word first. `None`
    /// when bash must run it.
    pub fn plain_argv(&self) -> Option<Vec<Vec<String>>> {
        if self.verdict != Verdict::Allow {
            return None;
        }
        plain_pipeline(&self.command)
    }
}

/// See [`Judgement::plain_argv`]; the command is lexed as the judge lexed it.
pub(crate) fn plain_pipeline(src: &str) -> Option<Vec<Vec<String>>> {
    let segs = Lexer::with_dialect(src, Dialect::Bash).run().ok()?;
    if segs.is_empty() || segs.len() > MAX_STAGES {
        return None;
    }
    let blank = |s: &str| s.chars().all(|c| c == ' ' || c == '\t');
    let mut at = 0;
    let mut out = Vec::with_capacity(segs.len());
    for (i, seg) in segs.iter().enumerate() {
        let start = seg.start?;
        let gap = src.get(at..start)?;
        // The text between stages is a bare `|`: no `;`, `&&`, `&`, newline or comment.
        let joined = if i == 0 {
            blank(gap)
        } else {
            gap.trim_matches([' ', '\t']) == "|"
        };
        let last = i + 1 == segs.len();
        if !joined || !seg.redirs.is_empty() || seg.pipe_amp || seg.pipe_out == last {
            return None;
        }
        let first = seg.words.first()?;
        if is_assignment(first)
            || first.value.is_empty()
            || (BUILTINS.contains(&first.value.as_str())
                && !RUN_BY_HARNESS.contains(&first.value.as_str()))
            || RESERVED.contains(&first.value.as_str())
            || !seg.words.iter().all(plain)
        {
            return None;
        }
        out.push(seg.words.iter().map(|w| w.value.clone()).collect());
        at = seg.end;
    }
    let rest = src.get(at..)?;
    rest.chars()
        .all(|c| c == ' ' || c == '\t' || c == '\n')
        .then_some(out)
}

/// The builtins `tools::direct` runs itself exactly as bash runs them (it sends to bash the
/// forms it does not read, such as `echo -e` with a backslash).
const RUN_BY_HARNESS: &[&str] = &["echo", "true", "false", ":"];

/// A word bash passes on as the gate decoded it: no expansion of any kind, no `$'…'`, no
/// line break.
fn plain(w: &Word) -> bool {
    w.literal()
        && w.vars.is_empty()
        && !w.ansi_c
        && !w.glob
        && !w.bracket
        && !w.brace
        && !w.tilde
        && !w.raw.contains(['$', '`', '\n', '\r'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(src: &str) -> Option<Vec<Vec<&'static str>>> {
        plain_pipeline(src).map(|p| {
            p.into_iter()
                .map(|a| {
                    a.into_iter()
                        .map(|w| &*Box::leak(w.into_boxed_str()))
                        .collect()
                })
                .collect()
        })
    }

    #[test]
    fn plain_commands_and_pipelines_give_their_argv() {
        assert_eq!(argv("ls -la src"), Some(vec![vec!["ls", "-la", "src"]]));
        assert_eq!(
            argv("grep -n 'fn main' \"src/a b.rs\" | head -n 3  "),
            Some(vec![
                vec!["grep", "-n", "fn main", "src/a b.rs"],
                vec!["head", "-n", "3"]
            ])
        );
        assert_eq!(argv("cat a\\ b"), Some(vec![vec!["cat", "a b"]]));
        assert_eq!(argv("wc -l\n"), Some(vec![vec!["wc", "-l"]]));
        assert_eq!(argv("echo round-1"), Some(vec![vec!["echo", "round-1"]]));
        // The builtins harness runs itself come as they are; `tools::direct` reads their options.
        assert_eq!(argv("echo -n hi"), Some(vec![vec!["echo", "-n", "hi"]]));
        assert_eq!(argv("echo 'a\\tb'"), Some(vec![vec!["echo", "a\\tb"]]));
        assert_eq!(
            argv("true x | false | : y"),
            Some(vec![vec!["true", "x"], vec!["false"], vec![":", "y"]])
        );
    }

    #[test]
    fn anything_bash_would_expand_or_sequence_goes_to_bash() {
        for src in [
            "ls *.rs",
            "ls $HOME",
            "ls \"$HOME\"",
            "ls ~",
            "ls {a,b}",
            "ls a[b]",
            "cd src",
            "pwd",
            "ls; ls",
            "ls && ls",
            "ls &",
            "ls > out",
            "ls 2>&1 | cat",
            "ls |& cat",
            "X=1 ls",
            "ls $'a\\tb'",
            "ls `pwd`",
            "ls # comment",
            "ls\nls",
            "! ls",
            "time ls",
            "'' a",
            "cat <<EOF\nx\nEOF",
        ] {
            assert_eq!(argv(src), None, "{src:?}");
        }
    }
}
