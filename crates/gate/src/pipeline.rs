//! tools stage (gate), PURE: the argv of a judged command that harness can run itself, without
//! bash reading the text a second time: one pipeline of simple commands whose words need no
//! expansion, with no redirection, no assignment, no reserved word and no builtin other than
//! the few harness runs as bash does (`echo`, `true`, `false`, `:`; see `tools::direct`).

use crate::paths::basename;
use crate::programs::registry::{canonical, family, Kind};
use crate::redirect::private_tmp;
use crate::rule::{Judgement, Verdict};
use crate::shell::lex::{Dialect, Lexer, Word};
use crate::shell::words::{is_assignment, RESERVED};

/// Pipelines longer than this go to bash. THE stage limit: the spawner's wire accepts exactly
/// this many stages per spawn.
pub const MAX_STAGES: usize = 32;

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
        self.plain_argv_of(&self.command)
    }

    /// [`Judgement::plain_argv`] of the command as it will run ([`Judgement::with_private_tmp`]).
    pub fn plain_argv_of(&self, run: &str) -> Option<Vec<Vec<String>>> {
        if self.verdict != Verdict::Allow {
            return None;
        }
        plain_pipeline(run)
    }

    /// The command as it runs: `/tmp` and `/tmp/…` words (redirection targets, and the
    /// arguments of a program that only reads or writes them, never one that runs them: not a
    /// shell, interpreter, runner or wrapper, nor any command word) rewritten to the
    /// command's private temp dir `tmp`, single-quoted, so that what the gate judged as a
    /// write to `/tmp/x` lands there (`$TMPDIR/x` needs no rewriting: bash expands it).
    ///
    /// `real`: places under `/tmp` the operator named (`unix_sockets`, read, write and exec
    /// roots), which keep their real meaning. An interpreter's file operands are rewritten too
    /// (`python3 /tmp/x.py` runs the file the model wrote there, which the policy lets it run
    /// anyway where it may write one); a shell's, runner's or wrapper's never.
    pub fn with_private_tmp(&self, tmp: &str, real: &[String]) -> String {
        let src = self.command.as_str();
        let Ok(segs) = Lexer::with_dialect(src, Dialect::Bash).run() else {
            return src.to_string();
        };
        let operator_named = |v: &str| {
            real.iter().any(|r| {
                let r = r.trim_end_matches('/');
                !r.is_empty() && (v == r || v.strip_prefix(r).is_some_and(|t| t.starts_with('/')))
            })
        };
        let mut spans: Vec<(usize, usize, String)> = Vec::new();
        let mut push = |w: &Word| {
            if let Some(rest) = private_tmp(w)
                .filter(|_| w.vars.is_empty())
                .filter(|_| !operator_named(&w.value))
            {
                let path = if rest.is_empty() {
                    tmp.to_string()
                } else {
                    format!("{}/{rest}", tmp.trim_end_matches('/'))
                };
                spans.push((w.start, w.end, format!("'{}'", path.replace('\'', "'\\''"))));
            }
        };
        for seg in &segs {
            for r in &seg.redirs {
                if r.heredoc.is_none() && r.op != "<<<" {
                    push(&r.target);
                }
            }
            let mut words = seg.words.iter().skip_while(|w| is_assignment(w));
            let Some(cmd) = words.next() else {
                continue;
            };
            let runs = cmd.raw == "time"
                || family(&canonical(basename(&cmd.value)))
                    .is_some_and(|f| matches!(f.kind, Kind::Shell | Kind::Runner | Kind::Wrapper));
            if !runs {
                words.for_each(&mut push);
            }
        }
        spans.sort_by_key(|s| s.0);
        let mut out = String::with_capacity(src.len());
        let mut at = 0;
        for (start, end, text) in spans {
            if start < at || src.get(at..start).is_none() {
                return src.to_string();
            }
            out.push_str(&src[at..start]);
            out.push_str(&text);
            at = end;
        }
        out.push_str(src.get(at..).unwrap_or_default());
        out
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
    fn tmp_words_are_rewritten_to_the_private_dir_never_a_program() {
        let policy = crate::Policy {
            write_redirects: true,
            ..crate::Policy::rules(crate::Verdict::Allow, Vec::new(), Vec::new())
        };
        let named = ["/tmp/sock".to_string(), "/tmp/ro/".to_string()];
        let run = |cmd: &str| crate::judge(&policy, cmd).with_private_tmp("/p/t", &named);
        assert_eq!(run("echo hi > /tmp/out.txt"), "echo hi > '/p/t/out.txt'");
        assert_eq!(
            run("grep -n x /tmp/a \"/tmp/b c\" && ls /tmp"),
            "grep -n x '/p/t/a' '/p/t/b c' && ls '/p/t'"
        );
        assert_eq!(
            run("cat < /tmp/in 2>/tmp/err"),
            "cat < '/p/t/in' 2>'/p/t/err'"
        );
        // An interpreter runs the file the model wrote in the private dir (the policy lets it
        // run one it wrote anyway); a shell, runner or wrapper keeps the path as written (the
        // real /tmp, which the model cannot write), and so does every command word.
        assert_eq!(run("python3 /tmp/x.py -v"), "python3 '/p/t/x.py' -v");
        // What the operator named under /tmp keeps its real meaning.
        assert_eq!(run("nc -U /tmp/sock"), "nc -U /tmp/sock");
        assert_eq!(run("cat /tmp/ro/a /tmp/roa"), "cat /tmp/ro/a '/p/t/roa'");
        for keep in [
            "bash /tmp/x.sh",
            "timeout 5 /tmp/x.sh",
            "/tmp/x.sh a",
            "echo $TMPDIR/x > $TMPDIR/y",
            "cat /tmp/../etc/passwd",
            "cat /tmpx",
        ] {
            assert_eq!(run(keep), keep, "{keep}");
        }
        assert_eq!(run("X=1 cat /tmp/a"), "X=1 cat '/p/t/a'");
        assert_eq!(run("cat /tmp/it's"), "cat /tmp/it's");
        assert_eq!(run("cat \"/tmp/it's\""), "cat '/p/t/it'\\''s'");
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
