//! tools stage (gate), PURE: the vocabulary of verdicts: rules as written, policies, judgements,
//! and how a rule matches a command's words.

use crate::paths::{basename, path_under};
use crate::programs::modules::module_program;
use crate::programs::registry::{family, has_subcommands, same_program, subcommand_spellings};
use crate::shell::lex::Word;
/// Whether a command (or one segment of it) may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RuleKind {
    /// `*`
    Universal,
    /// `pwd`, `git status`: the words exactly.
    Exact(Vec<String>),
    /// `git diff *`: these leading words, then anything (including nothing).
    Words(Vec<String>),
    /// `cargo*`: the command text starts with this, no word boundary.
    Raw(String),
    /// `./scripts/**`: the command word is a path strictly under this directory.
    Path(String),
}

/// One allow/deny rule as written in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(crate) text: String,
    pub(crate) kind: RuleKind,
}

impl Rule {
    /// Parses `cmd *` (word boundary), `pfx*` (raw prefix), `pfx/**` (path prefix), `*` (universal), `pwd` (exact).
    ///
    /// Fails with a human reason for an empty rule, a `*` anywhere but the end, or control
    /// characters.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim_matches(|c| c == ' ' || c == '\t');
        if t.is_empty() {
            return Err("empty rule".to_string());
        }
        if t.chars().any(|c| c.is_control()) {
            return Err(format!(
                "rule `{}` contains a control character",
                t.escape_debug()
            ));
        }
        let kind = if t == "*" {
            RuleKind::Universal
        } else if let Some(prefix) = t.strip_suffix("/**") {
            if prefix.is_empty() || prefix.contains('*') || prefix.contains([' ', '\t']) {
                return Err(format!(
                    "path-prefix rule `{t}` needs one directory path (no spaces or other `*`) before `/**`"
                ));
            }
            RuleKind::Path(prefix.to_string())
        } else if let Some(prefix) = t.strip_suffix(" *").or_else(|| t.strip_suffix("\t*")) {
            let words: Vec<String> = prefix.split_whitespace().map(str::to_string).collect();
            if words.is_empty() || words.iter().any(|w| w.contains('*')) {
                return Err(format!(
                    "rule `{t}`: `*` is only supported at the end of a rule"
                ));
            }
            RuleKind::Words(words)
        } else if let Some(prefix) = t.strip_suffix('*') {
            if prefix.contains('*') {
                return Err(format!(
                    "rule `{t}`: `*` is only supported at the end of a rule"
                ));
            }
            RuleKind::Raw(prefix.to_string())
        } else if t.contains('*') {
            return Err(format!(
                "rule `{t}`: `*` is only supported at the end of a rule"
            ));
        } else {
            RuleKind::Exact(t.split_whitespace().map(str::to_string).collect())
        };
        Ok(Rule {
            text: t.to_string(),
            kind,
        })
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What this rule lets a command run, for the kernel's exec set (`tools::sandbox`).
    pub fn runs(&self) -> Runs {
        let first = |ws: &[String]| Runs::Program(ws.first().cloned().unwrap_or_default());
        match &self.kind {
            RuleKind::Universal => Runs::Anything,
            RuleKind::Exact(ws) | RuleKind::Words(ws) => first(ws),
            RuleKind::Raw(p) => match p.split_once([' ', '\t']) {
                Some((word, _)) => Runs::Program(word.to_string()),
                None => Runs::Prefix(p.clone()),
            },
            RuleKind::Path(p) => Runs::Under(p.clone()),
        }
    }
}

/// What one allow rule lets a command run ([`Rule::runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runs {
    /// Any program (`*`).
    Anything,
    /// This command word: a name looked up on PATH, or a path.
    Program(String),
    /// Any command word that starts with this (`cargo*`).
    Prefix(String),
    /// Any program beneath this directory (`./scripts/**`).
    Under(String),
}

/// The `[tools.bash]` rules the gate applies.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Verdict for a segment that matches no rule.
    pub default: Verdict,
    /// Rules that allow a segment (matched exactly as written).
    pub allow: Vec<Rule>,
    /// Rules that deny a segment (matched loosely; deny beats allow).
    pub deny: Vec<Rule>,
    /// When true, output redirection (`>`, `>>`) to plain relative paths that stay inside the
    /// work root (no `..` escaping, not dotfiles, not .git/) is allowed; otherwise denied.
    /// It also allows `sed -i` on such files, held to the same places.
    pub write_redirects: bool,
    /// `[tools.bash].env_allow`: variables a command may be given as `NAME=value cmd`
    /// (validated against [`crate::denied_env`] when the config loads).
    pub env_allow: Vec<String>,
    /// `[tools.files].enabled`: the model has `write_file`/`edit_file`, so it can write a
    /// work-root file (denials suggest them; inline code is judged knowing it).
    pub file_tools: bool,
    /// The work root's absolute path, when the caller knows it (the config's `work_root`):
    /// an absolute path beneath it is read as the relative path it names (`cd /repo/src`,
    /// `> /repo/notes.txt`, `sed -i … /repo/a.py`), so a model told the working directory can
    /// name it either way. `None`: every absolute path is outside.
    pub work_root: Option<String>,
}

impl Policy {
    /// A policy of rules only: no writes, no `env_allow`, no file tools.
    pub fn rules(default: Verdict, allow: Vec<Rule>, deny: Vec<Rule>) -> Policy {
        Policy {
            default,
            allow,
            deny,
            write_redirects: false,
            env_allow: Vec::new(),
            file_tools: false,
            work_root: None,
        }
    }
}

/// The verdict on one segment (one simple command between `;`, `&&`, `|`, ...).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SegmentJudgement {
    /// The segment's source text.
    pub text: String,
    /// The command word after quote removal, if determinable.
    pub command_word: Option<String>,
    pub verdict: Verdict,
    /// The rule text that matched (allow or deny), if any.
    pub rule: Option<String>,
    /// Human sentence: why allowed / denied.
    pub reason: String,
    /// For a denial: what would work instead under the same policy, when something does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The verdict rests on the capability-word heuristic for inline interpreter code (deny
    /// rules in force, and the model cannot write a file and run it with that interpreter).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub heuristic: bool,
}

/// The verdict on a whole command string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Judgement {
    pub command: String,
    pub verdict: Verdict,
    /// One sentence summary (first denial's reason, or "all N segments allowed").
    pub reason: String,
    /// The first denial's "try instead" ([`SegmentJudgement::hint`]).
    pub hint: Option<String>,
    pub segments: Vec<SegmentJudgement>,
    /// Path-prefix rules can't judge symlinks from text: each entry is (path as written after
    /// quote removal, the rule's prefix) that the runner must canonicalize at run time and
    /// refuse if it leaves the prefix. Allowed output redirections appear here too, with the
    /// prefix `.` (the work root).
    pub runtime_path_checks: Vec<(String, String)>,
    /// Directories the command runs in, relative to the work root (a leading `cd DIR &&`, the
    /// bash tool's `workdir`): the runner must find each a real directory under the work root
    /// with no symlink on the way, since the gate judged paths relative to it as text.
    pub workdirs: Vec<String>,
}

pub(crate) enum Outcome {
    Allow {
        rule: Option<String>,
        reason: String,
    },
    Deny {
        rule: Option<String>,
        reason: String,
        /// What would work instead, when something does under the same policy.
        hint: Option<String>,
    },
}

pub(crate) fn deny(reason: impl Into<String>) -> Outcome {
    Outcome::Deny {
        rule: None,
        reason: reason.into(),
        hint: None,
    }
}

/// A denial with a "try instead".
pub(crate) fn deny_hint(reason: impl Into<String>, hint: Option<String>) -> Outcome {
    Outcome::Deny {
        rule: None,
        reason: reason.into(),
        hint,
    }
}

/// Could this word, once expanded, equal `target`?
pub(crate) fn could_match(w: &Word, target: &str) -> bool {
    if !w.vars.is_empty() || w.brace || w.tilde {
        return true;
    }
    if w.glob {
        return glob_match(&w.value, target);
    }
    w.value == target
}

pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative wildcard matching with single-star backtracking; `[...]` matches any one char.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => {
                pi += 1;
                ti += 1;
                continue;
            }
            Some('[') => {
                if let Some(close) = p[pi..].iter().skip(1).position(|&c| c == ']') {
                    pi += close + 2;
                    ti += 1;
                    continue;
                }
                if t[ti] == '[' {
                    pi += 1;
                    ti += 1;
                    continue;
                }
            }
            Some(&c) if c == t[ti] => {
                pi += 1;
                ti += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi.min(p.len())..].iter().all(|&c| c == '*')
}

/// The program a command word in a system directory names: `/usr/bin/python3` is `python3`
/// (the fixed, root-owned `/usr/bin`, `/bin`, `/usr/local/bin`); `None` for anything else.
pub(crate) fn system_program(word: &str) -> Option<&str> {
    SYSTEM_DIRS.iter().find_map(|d| {
        word.strip_prefix(d)
            .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
    })
}

/// The system directories whose programs allow rules name by basename ([`system_program`]).
pub const SYSTEM_DIRS: &[&str] = &["/usr/bin/", "/bin/", "/usr/local/bin/"];

/// `path` named from `cwd` (relative to the work root, "" for the root), for path rules.
fn from_cwd(cwd: &str, path: &str) -> String {
    if cwd.is_empty() || path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    }
}

pub(crate) fn deny_matches(rule: &Rule, words: &[Word], cwd: &str) -> bool {
    first_denying(std::slice::from_ref(rule), words, cwd).is_some()
}

/// The first of `rules` that denies these words (see [`deny_matches`]). What depends on the
/// words alone (the program's name, its module form, whether it has subcommands) is worked
/// out once, not once per rule: a preset has some eighty deny rules, and `find -exec` or a
/// long compound asks for every command it holds.
pub(crate) fn first_denying<'r>(rules: &'r [Rule], words: &[Word], cwd: &str) -> Option<&'r Rule> {
    let cmd = words.first()?;
    // `python3 -m pip install x` is `pip install x`: a rule for the module's program matches
    // its words (and `python3 -m pip list` is not `pip install`).
    let module: Option<Vec<Word>> =
        module_program(basename(&cmd.value), &words[1..]).map(|(program, k)| {
            std::iter::once(Word::synthetic(program))
                .chain(words[1 + k..].iter().cloned())
                .collect()
        });
    // Loose: `RM` is `rm` on a case-insensitive file system.
    let base_lc = basename(&cmd.value).to_ascii_lowercase();
    let base = base_lc.as_str();
    let subcommands = has_subcommands(base);
    // [`same_program`] with the command's family looked up once: a program no family knows
    // (`ls`) matches a rule's head only by name, and no rule's head needs looking up.
    let command_family = family(base);
    let same = |head: &str| {
        head.eq_ignore_ascii_case(base) || command_family.is_some_and(|_| same_program(head, base))
    };
    let subsequence = |rule_words: &[String]| {
        let mut want = rule_words.iter().peekable();
        for w in &words[1..] {
            match want.peek() {
                Some(r) if could_match(w, r) => {
                    want.next();
                }
                Some(_) => {}
                None => break,
            }
        }
        want.peek().is_none()
    };
    let matches = |rule: &Rule| match &rule.kind {
        RuleKind::Universal => true,
        RuleKind::Exact(ws) | RuleKind::Words(ws) => match ws.split_first() {
            Some((head, rest)) if subcommands => {
                same(basename(head))
                    && (subcommand_path(&words[1..], rest)
                        || rest.split_first().is_some_and(|(sub, more)| {
                            // `npm i` is `npm install`: each spelling the program accepts.
                            subcommand_spellings(base, sub).iter().any(|alias| {
                                let mut path = vec![(*alias).to_string()];
                                path.extend(more.iter().cloned());
                                subcommand_path(&words[1..], &path)
                            })
                        }))
            }
            Some((head, rest)) => same(basename(head)) && subsequence(rest),
            None => false,
        },
        RuleKind::Raw(prefix) => {
            let tail: Vec<&str> = words[1..].iter().map(|w| w.value.as_str()).collect();
            let by_base = std::iter::once(base)
                .chain(tail.iter().copied())
                .collect::<Vec<_>>();
            let full = std::iter::once(cmd.value.as_str())
                .chain(tail.iter().copied())
                .collect::<Vec<_>>();
            by_base
                .join(" ")
                .starts_with(prefix.to_ascii_lowercase().as_str())
                || full.join(" ").starts_with(prefix.as_str())
        }
        RuleKind::Path(prefix) => path_under(&from_cwd(cwd, &cmd.value), prefix, true),
    };
    let by_module = module.as_ref().and_then(|m| first_denying(rules, m, cwd));
    // The first rule in the list's order, by either reading.
    rules
        .iter()
        .find(|r| by_module.is_some_and(|m| std::ptr::eq(m, *r)) || matches(r))
}

/// Could `rule` (the words after the program) be the subcommand path of `args`, in some
/// reading of the options the gate does not know? Each word that looks like an option
/// (`-C`, `--git-dir`, cargo's `+nightly`), or could expand to one, may take the next word as
/// its value, so `git -C push push` and `git $o push` still match `git push *`; the first word
/// that must be positional has to be the rule's next word. PURE.
fn subcommand_path(args: &[Word], rule: &[String]) -> bool {
    // (word index, rule words matched); a small DFS: each option doubles at most once.
    let mut todo = vec![(0usize, 0usize)];
    let mut seen = std::collections::HashSet::new();
    while let Some((i, j)) = todo.pop() {
        if j == rule.len() {
            return true;
        }
        let Some(w) = args.get(i) else { continue };
        if !seen.insert((i, j)) {
            continue;
        }
        let unknown = !w.vars.is_empty() || w.brace || w.tilde || w.glob;
        let optionish = unknown || w.value.starts_with('-') || w.value.starts_with('+');
        if optionish {
            todo.push((i + 1, j));
            todo.push((i + 2, j));
        }
        if (unknown || !optionish) && could_match(w, &rule[j]) {
            todo.push((i + 1, j + 1));
        }
    }
    false
}

/// Does an allow rule match these words, run in `cwd`? The command word matches as written,
/// or as the basename of a program in a system directory (`/usr/bin/python3` for `python3
/// *`); a path rule matches the command's path from `cwd`. Under a `cwd` other than the work
/// root, a rule that runs a file by name (`bash ci.sh`, `./run-tests.sh`) does not match: the
/// file it would run there is another one, which the model may have written.
pub(crate) fn allow_matches(rule: &Rule, words: &[Word], cwd: &str) -> bool {
    let eq = |w: &Word, r: &String| w.literal() && !w.ansi_c && w.value == *r;
    let head = |w: &Word, r: &String| {
        eq(w, r)
            || (!r.contains('/')
                && w.literal()
                && !w.ansi_c
                && system_program(&w.value) == Some(r.as_str()))
    };
    let words_match = |ws: &[String]| {
        words.len() >= ws.len()
            && words
                .iter()
                .zip(ws)
                .enumerate()
                .all(|(k, (w, r))| if k == 0 { head(w, r) } else { eq(w, r) })
    };
    if !cwd.is_empty() && !files_a_rule_runs(&rule.kind).is_empty() {
        return false;
    }
    match &rule.kind {
        RuleKind::Universal => true,
        RuleKind::Exact(ws) => words.len() == ws.len() && words_match(ws),
        RuleKind::Words(ws) => words_match(ws),
        RuleKind::Raw(prefix) => {
            let mut joined: Vec<&str> = words.iter().map(|w| w.value.as_str()).collect();
            let as_written = joined.join(" ").starts_with(prefix.as_str());
            if let Some(name) = words.first().and_then(|w| system_program(&w.value)) {
                joined[0] = name;
            }
            as_written || joined.join(" ").starts_with(prefix.as_str())
        }
        RuleKind::Path(prefix) => words.first().is_some_and(|w| {
            w.value.contains('/') && path_under(&from_cwd(cwd, &w.value), prefix, false)
        }),
    }
}

/// The files an allow rule runs by name: a command word that is a path (`./ci.sh`,
/// `scripts/build.sh *`), and the operands of a shell or interpreter (`bash ci.sh`, `python3
/// tools/gen.py *`, `make -f build/x.mk`). A raw prefix's last word may be cut short, so it
/// is left out.
pub(crate) fn files_a_rule_runs(kind: &RuleKind) -> Vec<String> {
    let words: Vec<&str> = match kind {
        RuleKind::Exact(ws) | RuleKind::Words(ws) => ws.iter().map(String::as_str).collect(),
        RuleKind::Raw(p) => {
            let mut ws: Vec<&str> = p.split_whitespace().collect();
            ws.pop();
            ws
        }
        RuleKind::Path(_) | RuleKind::Universal => Vec::new(),
    };
    let Some((cmd, rest)) = words.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if cmd.contains('/') {
        out.push(cmd.to_string());
    }
    let name = cmd.rsplit('/').next().unwrap_or(cmd);
    if family(name).is_some_and(|f| f.runs_code()) {
        out.extend(
            rest.iter()
                .filter(|w| !w.starts_with('-') && !w.contains(['*', '?', '[', '=']))
                .map(|w| w.to_string()),
        );
    }
    out
}
