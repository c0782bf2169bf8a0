//! tools stage, PURE: judges a bash command string against [tools.bash] rules; no I/O.
//!
//! In: a [`Policy`] and the exact string the model wants `bash -c` to run. Out: a
//! [`Judgement`] with one verdict per segment and the reason for each. The gate fails closed:
//! its own tokenizer follows bash's lexical rules for the subset it understands (plain simple
//! commands, quoting, redirections, heredocs) and denies everything else; `brush-parser` then
//! has to agree on the shape of every command before anything is allowed.

use std::fmt::Write as _;

/// Inputs longer than this are denied unread (bytes).
const MAX_INPUT_BYTES: usize = 128 * 1024;
/// Inputs with more segments than this are denied.
const MAX_SEGMENTS: usize = 20_000;
/// How deep `sh -c`, wrappers and `find -exec` may nest before the gate gives up.
const MAX_DEPTH: usize = 8;

/// Whether a command (or one segment of it) may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RuleKind {
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
    text: String,
    kind: RuleKind,
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
    pub write_redirects: bool,
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
}

/// The verdict on a whole command string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Judgement {
    pub command: String,
    pub verdict: Verdict,
    /// One sentence summary (first denial's reason, or "all N segments allowed").
    pub reason: String,
    pub segments: Vec<SegmentJudgement>,
    /// Path-prefix rules can't judge symlinks from text: each entry is (path as written after
    /// quote removal, the rule's prefix) that the runner must canonicalize at run time and
    /// refuse if it leaves the prefix. Allowed output redirections appear here too, with the
    /// prefix `.` (the work root).
    pub runtime_path_checks: Vec<(String, String)>,
}

/// Judges `command` under `policy`; never panics, on any input.
pub fn judge(policy: &Policy, command: &str) -> Judgement {
    let mut checks = Vec::new();
    let result = if command.len() > MAX_INPUT_BYTES {
        Err(format!(
            "the command is {} bytes, over the gate's limit of {MAX_INPUT_BYTES} bytes",
            command.len()
        ))
    } else {
        judge_program(policy, command, 0, &mut checks)
    };
    let segments = match result {
        Ok(segments) => segments,
        Err(reason) => vec![SegmentJudgement {
            text: command.to_string(),
            command_word: None,
            verdict: Verdict::Deny,
            rule: None,
            reason,
        }],
    };
    let denied = segments.iter().find(|s| s.verdict == Verdict::Deny);
    let (verdict, reason) = match denied {
        Some(s) => (Verdict::Deny, s.reason.clone()),
        None if segments.is_empty() => (Verdict::Allow, "empty command".to_string()),
        None => (
            Verdict::Allow,
            format!(
                "all {} segment{} allowed",
                segments.len(),
                if segments.len() == 1 { "" } else { "s" }
            ),
        ),
    };
    if verdict == Verdict::Deny {
        checks.clear();
    }
    Judgement {
        command: command.to_string(),
        verdict,
        reason,
        segments,
        runtime_path_checks: checks,
    }
}

// ---------------------------------------------------------------------------------------------
// Lexing: bash's rules for simple commands, denying everything else.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default)]
struct Word {
    raw: String,
    /// The word after quote removal (expansions kept as written).
    value: String,
    /// Parameter expansions (`$NAME`, `$1`, `$_`) the word contains, quoted or not.
    vars: Vec<String>,
    /// Unquoted `*`, `?` or `[…]`.
    glob: bool,
    /// An unquoted `[` was seen (it globs once a `]` follows).
    bracket: bool,
    /// Unquoted `{` or `}`.
    brace: bool,
    /// Unquoted `~` at the start.
    tilde: bool,
    /// `$'…'` quoting.
    ansi_c: bool,
    /// Any quote or escape character.
    quoted: bool,
    start: usize,
    end: usize,
}

impl Word {
    fn synthetic(value: &str) -> Word {
        Word {
            raw: value.to_string(),
            value: value.to_string(),
            ..Word::default()
        }
    }

    /// True when the word's value is known from the text alone. Braces expand only around an
    /// unquoted `,` or `..` (`{a,b}`, `{1..3}`); `{}` as in `xargs -I{}` is literal.
    fn literal(&self) -> bool {
        let brace_expands = self.brace && (self.value.contains(',') || self.value.contains(".."));
        self.vars.is_empty() && !self.glob && !brace_expands && !self.tilde
    }
}

#[derive(Debug, Clone)]
struct Redir {
    op: &'static str,
    target: Word,
    /// For `<<` and `<<-`: (delimiter was quoted, body).
    heredoc: Option<(bool, String)>,
}

#[derive(Debug, Clone, Default)]
struct Segment {
    start: Option<usize>,
    end: usize,
    words: Vec<Word>,
    redirs: Vec<Redir>,
    /// Ended with `|&`, which bash (and brush) treat as an added `2>&1`.
    pipe_amp: bool,
    /// Ended with `|` or `|&`: the next segment reads this one's output on stdin.
    pipe_out: bool,
}

impl Segment {
    fn is_empty(&self) -> bool {
        self.words.is_empty() && self.redirs.is_empty()
    }
    fn touch(&mut self, start: usize, end: usize) {
        if self.start.is_none() {
            self.start = Some(start);
        }
        self.end = end;
    }
}

struct Lexer<'a> {
    src: &'a str,
    chars: Vec<(usize, char)>,
    i: usize,
    segs: Vec<Segment>,
    cur: Segment,
    word: Option<Word>,
    /// A redirection operator waiting for its target word: (operator, start offset).
    pending: Option<(&'static str, usize)>,
    /// Heredocs whose bodies start after the next newline: (segment index, redirection index).
    heredocs: Vec<(usize, usize)>,
    /// After `&&`, `||`, `|`, `|&` another command must follow.
    need_cmd: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    Newline,
    Semi,
    Amp,
    AndOr,
    Pipe,
    PipeAmp,
    Eof,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Lexer {
            src,
            chars: src.char_indices().collect(),
            i: 0,
            segs: Vec::new(),
            cur: Segment::default(),
            word: None,
            pending: None,
            heredocs: Vec::new(),
            need_cmd: false,
        }
    }

    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).map(|&(_, c)| c)
    }

    fn off(&self, i: usize) -> usize {
        self.chars.get(i).map_or(self.src.len(), |&(o, _)| o)
    }

    /// Skips backslash-newline pairs, which bash removes before tokenizing (outside single
    /// quotes, comments and quoted heredoc bodies).
    fn skip_cont(&self, mut i: usize) -> usize {
        while self.at(i) == Some('\\') && self.at(i + 1) == Some('\n') {
            i += 2;
        }
        i
    }

    fn word_mut(&mut self) -> &mut Word {
        let start = self.off(self.i);
        self.word.get_or_insert_with(|| Word {
            start,
            ..Word::default()
        })
    }

    fn finish_word(&mut self) {
        let Some(mut w) = self.word.take() else {
            return;
        };
        w.end = self.off(self.i);
        w.raw = self.src.get(w.start..w.end).unwrap_or_default().to_string();
        match self.pending.take() {
            Some((op, start)) => {
                self.cur.touch(start, w.end);
                let heredoc = matches!(op, "<<" | "<<-").then(|| (w.quoted, String::new()));
                if heredoc.is_some() {
                    self.heredocs.push((self.segs.len(), self.cur.redirs.len()));
                }
                self.cur.redirs.push(Redir {
                    op,
                    target: w,
                    heredoc,
                });
            }
            None => {
                self.cur.touch(w.start, w.end);
                self.cur.words.push(w);
            }
        }
    }

    fn end_segment(&mut self, sep: Sep) -> Result<(), String> {
        self.finish_word();
        if self.pending.is_some() {
            return Err("syntax error: a redirection operator has no target".to_string());
        }
        if self.cur.is_empty() {
            return match sep {
                Sep::Newline => Ok(()),
                Sep::Eof if self.need_cmd => {
                    Err("syntax error: the command ends after `&&`, `||` or `|`".to_string())
                }
                Sep::Eof => Ok(()),
                _ => Err("syntax error: an operator has no command before it".to_string()),
            };
        }
        self.cur.pipe_amp = sep == Sep::PipeAmp;
        self.cur.pipe_out = matches!(sep, Sep::Pipe | Sep::PipeAmp);
        self.segs.push(std::mem::take(&mut self.cur));
        if self.segs.len() > MAX_SEGMENTS {
            return Err(format!("the command has more than {MAX_SEGMENTS} segments"));
        }
        self.need_cmd = matches!(sep, Sep::AndOr | Sep::Pipe | Sep::PipeAmp);
        Ok(())
    }

    fn run(mut self) -> Result<Vec<Segment>, String> {
        loop {
            self.i = self.skip_cont(self.i);
            let Some(c) = self.at(self.i) else {
                break;
            };
            let next = self.at(self.skip_cont(self.i + 1));
            match c {
                ' ' | '\t' => {
                    self.finish_word();
                    self.i += 1;
                }
                '\n' => {
                    self.end_segment(Sep::Newline)?;
                    self.i += 1;
                    self.read_heredocs()?;
                }
                ';' => {
                    if matches!(next, Some(';' | '&')) {
                        return Err("`;;`/`;&` belong to `case`, which the gate does not allow".into());
                    }
                    self.end_segment(Sep::Semi)?;
                    self.i += 1;
                }
                '&' if next == Some('>') => self.lex_redirect()?,
                '&' => {
                    if next == Some('&') {
                        self.end_segment(Sep::AndOr)?;
                        self.i = self.skip_cont(self.i + 1) + 1;
                    } else {
                        self.end_segment(Sep::Amp)?;
                        self.i += 1;
                    }
                }
                '|' => {
                    if next == Some('|') {
                        self.end_segment(Sep::AndOr)?;
                    } else if next == Some('&') {
                        self.end_segment(Sep::PipeAmp)?;
                    } else {
                        self.end_segment(Sep::Pipe)?;
                    }
                    self.i = if matches!(next, Some('|' | '&')) {
                        self.skip_cont(self.i + 1) + 1
                    } else {
                        self.i + 1
                    };
                }
                '<' | '>' => self.lex_redirect()?,
                '(' | ')' => {
                    return Err(format!(
                        "`{c}` at byte {}: subshells, function definitions, arrays and extended globs are always denied",
                        self.off(self.i)
                    ))
                }
                '`' => return Err("command substitution with backticks is always denied".into()),
                '#' if self.word.is_none() => {
                    while let Some(c) = self.at(self.i) {
                        if c == '\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                '$' => self.lex_dollar(false)?,
                '\'' => {
                    self.word_mut().quoted = true;
                    let mut j = self.i + 1;
                    let mut text = String::new();
                    loop {
                        match self.at(j) {
                            None => return Err("syntax error: unterminated single quote".into()),
                            Some('\'') => break,
                            Some(c) => text.push(c),
                        }
                        j += 1;
                    }
                    self.word_mut().value.push_str(&text);
                    self.i = j + 1;
                }
                '"' => self.lex_double_quote()?,
                '\\' => {
                    let Some(c) = self.at(self.i + 1) else {
                        return Err("a trailing backslash is not understood by the gate".into());
                    };
                    let w = self.word_mut();
                    w.quoted = true;
                    w.value.push(c);
                    self.i += 2;
                }
                _ => {
                    let at_start = self.word.is_none();
                    let w = self.word_mut();
                    match c {
                        '*' | '?' => w.glob = true,
                        // `[` only globs when a `]` closes it in the same word.
                        '[' => w.bracket = true,
                        ']' if w.bracket => w.glob = true,
                        '{' | '}' => w.brace = true,
                        '~' if at_start => w.tilde = true,
                        _ => {}
                    }
                    w.value.push(c);
                    self.i += 1;
                }
            }
        }
        self.end_segment(Sep::Eof)?;
        if !self.heredocs.is_empty() {
            return Err("a heredoc has no body (input ends before its delimiter)".into());
        }
        Ok(self.segs)
    }

    fn lex_double_quote(&mut self) -> Result<(), String> {
        self.word_mut().quoted = true;
        self.i += 1;
        loop {
            self.i = self.skip_cont(self.i);
            match self.at(self.i) {
                None => return Err("syntax error: unterminated double quote".into()),
                Some('"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('`') => {
                    return Err("command substitution with backticks is always denied".into())
                }
                Some('$') => self.lex_dollar(true)?,
                Some('\\') => {
                    let n = self.at(self.i + 1);
                    let w = self.word_mut();
                    match n {
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            w.value.push(c);
                            self.i += 2;
                        }
                        _ => {
                            w.value.push('\\');
                            self.i += 1;
                        }
                    }
                }
                Some(c) => {
                    self.word_mut().value.push(c);
                    self.i += 1;
                }
            }
        }
    }

    fn lex_dollar(&mut self, in_dq: bool) -> Result<(), String> {
        let j = self.skip_cont(self.i + 1);
        match self.at(j) {
            Some('(') => {
                if self.at(self.skip_cont(j + 1)) == Some('(') {
                    Err("arithmetic expansion `$((…))` is always denied".into())
                } else {
                    Err("command substitution `$(…)` is always denied".into())
                }
            }
            Some('{') => Err("parameter expansion `${…}` is always denied".into()),
            Some('[') => Err("arithmetic expansion `$[…]` is always denied".into()),
            Some('\'') if !in_dq => self.lex_ansi_c(j + 1),
            Some('"') if !in_dq => {
                Err("locale quoting `$\"…\"` is not understood by the gate".into())
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::new();
                let mut k = j;
                while let Some(c) = self.at(k) {
                    if !(c.is_ascii_alphanumeric() || c == '_') {
                        break;
                    }
                    name.push(c);
                    k = self.skip_cont(k + 1);
                }
                let w = self.word_mut();
                w.value.push('$');
                w.value.push_str(&name);
                w.vars.push(name);
                self.i = k;
                Ok(())
            }
            Some(c) if c.is_ascii_digit() || "@*#?-$!".contains(c) => {
                let w = self.word_mut();
                w.value.push('$');
                w.value.push(c);
                w.vars.push(c.to_string());
                self.i = j + 1;
                Ok(())
            }
            // zsh expands `$=x`, `$~x`, `$^x` and `$+x` (reached through `zsh -c`).
            Some('=' | '~' | '^' | '+')
                if self
                    .at(self.skip_cont(j + 1))
                    .is_some_and(|c| c.is_ascii_alphanumeric() || "_{@*#?-$!".contains(c)) =>
            {
                Err(
                    "zsh expansions (`$=x`, `$~x`, `$^x`, `$+x`) are not understood by the gate"
                        .into(),
                )
            }
            _ => {
                self.word_mut().value.push('$');
                self.i += 1;
                Ok(())
            }
        }
    }

    /// Decodes `$'…'` starting after the opening quote, as bash does.
    fn lex_ansi_c(&mut self, mut j: usize) -> Result<(), String> {
        let mut out = String::new();
        loop {
            let Some(c) = self.at(j) else {
                return Err("syntax error: unterminated `$'…'`".into());
            };
            j += 1;
            if c == '\'' {
                break;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(e) = self.at(j) else {
                return Err("syntax error: unterminated `$'…'`".into());
            };
            j += 1;
            let simple = match e {
                'n' => Some('\n'),
                't' => Some('\t'),
                'r' => Some('\r'),
                'a' => Some('\x07'),
                'b' => Some('\x08'),
                'e' | 'E' => Some('\x1b'),
                'f' => Some('\x0c'),
                'v' => Some('\x0b'),
                '\\' | '\'' | '"' | '?' => Some(e),
                _ => None,
            };
            if let Some(s) = simple {
                out.push(s);
                continue;
            }
            let (radix, max) = match e {
                '0'..='7' => {
                    j -= 1;
                    (8, 3)
                }
                'x' => (16, 2),
                'u' => (16, 4),
                'U' => (16, 8),
                'c' => {
                    let Some(x) = self.at(j) else {
                        return Err("syntax error: unterminated `$'…'`".into());
                    };
                    j += 1;
                    let code = (x as u32) & 0x1f;
                    if code == 0 {
                        return Err("`$'…'` decodes to a NUL byte, which bash truncates at".into());
                    }
                    out.extend(char::from_u32(code));
                    continue;
                }
                _ => {
                    out.push('\\');
                    out.push(e);
                    continue;
                }
            };
            let mut n: u32 = 0;
            let mut digits = 0;
            while digits < max {
                match self.at(j).and_then(|d| d.to_digit(radix)) {
                    Some(d) => {
                        n = n.saturating_mul(radix).saturating_add(d);
                        digits += 1;
                        j += 1;
                    }
                    None => break,
                }
            }
            if digits == 0 {
                out.push('\\');
                out.push(e);
                continue;
            }
            if n == 0 {
                return Err("`$'…'` decodes to a NUL byte, which bash truncates at".into());
            }
            if (radix == 8 || e == 'x') && n > 0x7f {
                return Err("`$'…'` decodes to a raw non-ASCII byte the gate cannot judge".into());
            }
            match char::from_u32(n) {
                Some(ch) => out.push(ch),
                None => return Err("`$'…'` decodes to an invalid character".into()),
            }
        }
        let w = self.word_mut();
        w.ansi_c = true;
        w.quoted = true;
        w.value.push_str(&out);
        self.i = j;
        Ok(())
    }

    fn lex_redirect(&mut self) -> Result<(), String> {
        let start = self.off(self.i);
        if let Some(w) = &self.word {
            let digits = !w.quoted
                && !w.value.is_empty()
                && w.value.chars().all(|c| c.is_ascii_digit())
                && w.vars.is_empty();
            if digits {
                // `2>x`: the digits are the fd number, not a word.
                let w_start = w.start;
                self.word = None;
                self.cur.touch(w_start, w_start);
            } else if w.brace && w.value.starts_with('{') && w.value.ends_with('}') {
                return Err(
                    "named file descriptors (`{fd}>…`) change shell state and are always denied"
                        .into(),
                );
            } else {
                self.finish_word();
            }
        }
        if self.pending.is_some() {
            return Err("syntax error: two redirection operators in a row".into());
        }
        let c0 = self.at(self.i);
        let j1 = self.skip_cont(self.i + 1);
        let c1 = self.at(j1);
        let j2 = self.skip_cont(j1 + 1);
        let c2 = self.at(j2);
        let (op, end): (&'static str, usize) = match (c0, c1, c2) {
            (Some('<'), Some('<'), Some('<')) => ("<<<", j2 + 1),
            (Some('<'), Some('<'), Some('-')) => ("<<-", j2 + 1),
            (Some('<'), Some('<'), _) => ("<<", j1 + 1),
            (Some('<'), Some('>'), _) => ("<>", j1 + 1),
            (Some('<'), Some('&'), _) => ("<&", j1 + 1),
            (Some('<' | '>'), Some('('), _) => {
                return Err("process substitution is always denied".into())
            }
            (Some('<'), _, _) => ("<", j1),
            (Some('>'), Some('>'), _) => (">>", j1 + 1),
            (Some('>'), Some('&'), _) => (">&", j1 + 1),
            (Some('>'), Some('|'), _) => (">|", j1 + 1),
            (Some('>'), _, _) => (">", j1),
            (Some('&'), Some('>'), Some('>')) => ("&>>", j2 + 1),
            (Some('&'), Some('>'), _) => ("&>", j1 + 1),
            _ => return Err("unrecognised redirection operator".into()),
        };
        self.pending = Some((op, start));
        self.i = end;
        Ok(())
    }

    /// Reads the bodies of pending heredocs; `self.i` is at the start of the line after the
    /// newline that ended the command line.
    fn read_heredocs(&mut self) -> Result<(), String> {
        for (si, ri) in std::mem::take(&mut self.heredocs) {
            let Some(redir) = self.segs.get(si).and_then(|s| s.redirs.get(ri)) else {
                return Err("internal error: heredoc bookkeeping".into());
            };
            let delim = redir.target.value.clone();
            let strip = redir.op == "<<-";
            if !redir.target.literal() || delim.is_empty() {
                return Err("a heredoc delimiter must be a plain word".into());
            }
            let mut body = String::new();
            loop {
                if self.i >= self.chars.len() {
                    return Err(format!(
                        "the heredoc has no closing `{delim}` line (bash would run it anyway; the gate does not)"
                    ));
                }
                let mut line = String::new();
                while let Some(c) = self.at(self.i) {
                    self.i += 1;
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let cmp = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if cmp == delim {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if let Some(r) = self.segs.get_mut(si).and_then(|s| s.redirs.get_mut(ri)) {
                if let Some((_, b)) = &mut r.heredoc {
                    *b = body;
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Cross-check with brush-parser: the real grammar must see the same simple commands.
// ---------------------------------------------------------------------------------------------

fn brush_shape(src: &str) -> Result<Vec<(usize, usize)>, String> {
    use brush_parser::ast;
    let parsed = std::panic::catch_unwind(|| {
        let options = brush_parser::ParserOptions::default();
        let mut parser =
            brush_parser::Parser::new(std::io::BufReader::new(src.as_bytes()), &options);
        parser.parse_program()
    });
    let program = match parsed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(format!("the bash parser rejects the command: {e}")),
        Err(_) => return Err("the bash parser failed on the command".into()),
    };
    let mut shape = Vec::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            let rest = and_or.additional.iter().map(|x| match x {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            });
            for pipeline in std::iter::once(&and_or.first).chain(rest) {
                if pipeline.bang {
                    return Err("`!` pipelines are not understood by the gate".into());
                }
                // `time [-p]` belongs to the pipeline here; the tokenizer keeps its words in
                // the first command, where the judge strips them.
                let mut timed_words = match &pipeline.timed {
                    None => 0,
                    Some(t) if t.is_posix_output() => 2,
                    Some(_) => 1,
                };
                if timed_words > 0 && pipeline.seq.is_empty() {
                    return Err("`time` with no command to run".into());
                }
                for cmd in &pipeline.seq {
                    let ast::Command::Simple(sc) = cmd else {
                        return Err("the bash parser sees a compound command here".into());
                    };
                    let (mut words, mut redirs) = (0, 0);
                    let items = sc
                        .prefix
                        .iter()
                        .flat_map(|p| p.0.iter())
                        .chain(sc.suffix.iter().flat_map(|s| s.0.iter()));
                    for item in items {
                        match item {
                            ast::CommandPrefixOrSuffixItem::IoRedirect(_) => redirs += 1,
                            ast::CommandPrefixOrSuffixItem::Word(_)
                            | ast::CommandPrefixOrSuffixItem::AssignmentWord(..) => words += 1,
                            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                                return Err("process substitution is always denied".into())
                            }
                        }
                    }
                    words += usize::from(sc.word_or_name.is_some()) + timed_words;
                    timed_words = 0;
                    shape.push((words, redirs));
                }
            }
        }
    }
    Ok(shape)
}

// ---------------------------------------------------------------------------------------------
// Judging
// ---------------------------------------------------------------------------------------------

/// Words that are reserved in command position (control flow, groups, tests).
const RESERVED: &[&str] = &[
    "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
    "function", "if", "in", "select", "then", "time", "until", "while",
];

/// Builtins that evaluate text or change the shell's state.
const STATE_BUILTINS: &[&str] = &[
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
const SAFE_VARS: &[&str] = &[
    "HOME", "USER", "LOGNAME", "PATH", "PWD", "TMPDIR", "LANG", "TERM",
];

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ash", "rbash", "zsh", "ksh", "mksh", "yash", "fish", "csh", "tcsh",
    "pwsh", "elvish", "nu", "xonsh",
];

/// Programs that run code given in their arguments or input, which the gate cannot read.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "rscript",
    "tclsh",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "osascript",
    "powershell",
    "ed",
    "ex",
    "vi",
    "vim",
    "nvim",
    "emacs",
    "sqlite3",
    "psql",
    "mysql",
    "gdb",
    "expect",
    "make",
    "jshell",
    "irb",
    "julia",
    "guile",
    "racket",
    "sbcl",
    "ghci",
    "swift",
    "dc",
    "gnuplot",
    "octave",
    "r",
    "pypy",
    "pypy3",
    "ipython",
    "ts-node",
    "tsx",
    "groovy",
    "kotlin",
    "scala",
    "elixir",
    "erl",
    "escript",
    "ocaml",
    "runghc",
    "runhaskell",
    "m4",
    "cmake",
    "lldb",
    "duckdb",
    "mongosh",
];

/// Programs that run another command in a way the gate does not parse.
const OPAQUE_RUNNERS: &[&str] = &[
    "strace",
    "ltrace",
    "ionice",
    "chrt",
    "taskset",
    "flock",
    "unbuffer",
    "script",
    "su",
    "runuser",
    "chroot",
    "unshare",
    "nsenter",
    "firejail",
    "systemd-run",
    "parallel",
    "entr",
    "valgrind",
    "perf",
    "fakeroot",
    "proot",
    "numactl",
    "cgexec",
    "torsocks",
    "proxychains",
    "proxychains4",
    "faketime",
    "sg",
    "pkexec",
    "dbus-launch",
    "xvfb-run",
    "catchsegv",
    "tmux",
    "screen",
    "at",
    "batch",
    "docker",
    "podman",
    "kubectl",
    "npx",
    "uvx",
    "pipx",
    "nix-shell",
    "direnv",
    "ssh",
    "chronic",
    "ifne",
    "sem",
    "rlwrap",
    "caffeinate",
    "bwrap",
    "minijail0",
    "ip",
    "nix",
    "pnpx",
    "bunx",
    "git-lfs",
    "ssh-agent",
    "toybox",
    "setpriv",
    "capsh",
    "prlimit",
    "cpulimit",
    "trickle",
    "nocache",
    "eatmydata",
    "gosu",
    "su-exec",
    "chpst",
    "envdir",
    "setuidgid",
    "daemonize",
    "start-stop-daemon",
    "logsave",
    "tsp",
    "nq",
    "dbus-run-session",
    "setarch",
    "linux32",
    "linux64",
    "sshpass",
    "hyperfine",
    "watchexec",
    "nodemon",
    "concurrently",
    "xterm",
    "systemd-nspawn",
    "machinectl",
    "nerdctl",
    "distrobox",
    "flatpak",
    "uv",
    "poetry",
    "pipenv",
    "pdm",
    "hatch",
    "conda",
    "mamba",
    "micromamba",
    "pixi",
    "bundle",
    "npm",
    "yarn",
    "pnpm",
    "mise",
    "asdf",
    "devbox",
    "aws-vault",
    "doppler",
    "dotenv",
    "foreman",
    "honcho",
    "stack",
    "opam",
    "rbenv",
    "pyenv",
    "volta",
    "fnm",
    "scl",
    "abduco",
    "dtach",
    "softlimit",
    "fakechroot",
    "retry",
    "lckdo",
    "pee",
    "xe",
    "mispipe",
    "run-one",
    "x-terminal-emulator",
    "gnome-terminal",
    "konsole",
    "kitty",
    "alacritty",
    "wezterm",
    "foot",
    "byobu",
    "zellij",
    "bpftrace",
    "uftrace",
    "rr",
    "systemd-inhibit",
    "flatpak-spawn",
    "toolbox",
    "distrobox-enter",
    "lxc-attach",
    "lxc-execute",
    "schroot",
    "apptainer",
    "singularity",
    "socat",
    "heaptrack",
    "dumb-init",
    "tini",
    "mpirun",
    "srun",
    "pdsh",
    "pssh",
    "env-cmd",
    "cross-env",
    "dotenvx",
    "vipe",
    "ld.so",
    "run-parts",
];

/// Commands whose options the gate checks (and which therefore may not take unseen
/// arguments from `xargs`).
const CHECKED: &[&str] = &[
    "find", "sort", "sed", "gsed", "git", "man", "less", "more", "most", "tar", "rg", "zip",
    "rsync", "scp", "sftp", "tcpdump", "cargo", "printf", "uniq", "shuf", "iconv", "tree", "env",
    "xargs", "command", "builtin", "nice", "nohup", "timeout", "stdbuf", "setsid", "busybox",
    "watch", "sudo", "doas", "fd", "fdfind", "split", "pandoc", "exiftool", "gpg", "gpg2", "nc",
    "ncat", "netcat", "crontab", "pdflatex", "latex", "xelatex", "lualatex", "latexmk", "time",
];

/// The lowercased program name, without a version suffix when that names a known shell,
/// interpreter or checked command (`python3.11` -> `python`, `bash5` -> `bash`).
fn canonical(base: &str) -> String {
    let lc = base.to_ascii_lowercase();
    // The dynamic loader runs the program named by its argument (`ld-linux-x86-64.so.2 /bin/rm`).
    if lc.starts_with("ld-linux") || lc.starts_with("ld-musl") || lc.starts_with("ld.so") {
        return "ld.so".into();
    }
    let known = |b: &str| {
        SHELLS.contains(&b)
            || INTERPRETERS.contains(&b)
            || OPAQUE_RUNNERS.contains(&b)
            || CHECKED.contains(&b)
    };
    if known(&lc) {
        return lc;
    }
    let stripped = lc.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if !stripped.is_empty() && known(stripped) {
        return stripped.to_string();
    }
    lc
}

/// Is this command path inside /proc or /dev (`/proc/self/exe` is the calling shell)?
fn through_proc_or_dev(path: &str) -> bool {
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let climbs = comps.contains(&"..");
    comps.iter().enumerate().any(|(k, c)| match *c {
        "proc" => true,
        "dev" => (k == 0 && path.starts_with('/')) || climbs,
        _ => false,
    }) || (path.starts_with('/') && comps.first().is_some_and(|c| *c == ".."))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

enum Outcome {
    Allow {
        rule: Option<String>,
        reason: String,
    },
    Deny {
        rule: Option<String>,
        reason: String,
    },
}

fn deny(reason: impl Into<String>) -> Outcome {
    Outcome::Deny {
        rule: None,
        reason: reason.into(),
    }
}

fn judge_program(
    policy: &Policy,
    src: &str,
    depth: usize,
    checks: &mut Vec<(String, String)>,
) -> Result<Vec<SegmentJudgement>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("commands nest more than {MAX_DEPTH} levels deep"));
    }
    if src.contains('\0') {
        return Err("the command contains a NUL byte".into());
    }
    let segs = Lexer::new(src).run()?;
    let mut out = Vec::with_capacity(segs.len());
    let mut piped_in = false;
    for seg in &segs {
        out.push(judge_segment(policy, src, seg, piped_in, depth, checks));
        piped_in = seg.pipe_out;
    }
    if out.iter().all(|s| s.verdict == Verdict::Allow) {
        let shape = brush_shape(src)?;
        let mine: Vec<(usize, usize)> = segs
            .iter()
            .map(|s| (s.words.len(), s.redirs.len() + usize::from(s.pipe_amp)))
            .collect();
        if shape != mine {
            return Err(
                "the bash parser and the gate's tokenizer disagree on this command, so it is denied"
                    .into(),
            );
        }
    }
    Ok(out)
}

fn is_assignment(w: &Word) -> bool {
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

fn judge_segment(
    policy: &Policy,
    src: &str,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    checks: &mut Vec<(String, String)>,
) -> SegmentJudgement {
    let text = seg
        .start
        .and_then(|s| src.get(s..seg.end))
        .unwrap_or_default()
        .to_string();
    let command_word = seg
        .words
        .first()
        .filter(|w| w.literal() && !is_assignment(w))
        .map(|w| w.value.clone());
    let outcome = judge_segment_outcome(policy, seg, piped_in, depth, checks);
    let (verdict, rule, reason) = match outcome {
        Outcome::Allow { rule, reason } => (Verdict::Allow, rule, reason),
        Outcome::Deny { rule, reason } => (Verdict::Deny, rule, reason),
    };
    SegmentJudgement {
        text,
        command_word,
        verdict,
        rule,
        reason,
    }
}

fn judge_segment_outcome(
    policy: &Policy,
    seg: &Segment,
    piped_in: bool,
    depth: usize,
    checks: &mut Vec<(String, String)>,
) -> Outcome {
    let mut redirect_checks = Vec::new();
    for r in &seg.redirs {
        match check_redirect(policy, r) {
            Err(reason) => return deny(reason),
            Ok(Some(check)) => redirect_checks.push(check),
            Ok(None) => {}
        }
    }
    // The reserved word `time` (unquoted, at the start of a pipeline; after `|` it is the
    // external /usr/bin/time) only measures what follows: judge the rest as the command.
    let mut words: &[Word] = &seg.words;
    if !piped_in && words.first().is_some_and(|w| w.raw == "time") {
        words = &words[1..];
        if words.first().is_some_and(|w| w.raw == "-p") {
            words = &words[1..];
        }
        match words.first() {
            None => return deny("`time` with no command to run"),
            Some(w) if w.value.starts_with('-') => {
                return deny(format!(
                    "`time` option `{}` is not understood by the gate (only `time -p`)",
                    w.raw
                ))
            }
            Some(_) => {}
        }
    }
    let Some(first) = words.first() else {
        return deny("a redirection without a command creates or truncates a file; denied");
    };
    if is_assignment(first) {
        return deny(format!(
            "variable assignment `{}` is always denied: the gate cannot tell a harmless variable from LD_PRELOAD, PATH or BASH_ENV",
            first.raw
        ));
    }
    let stdin = Stdin {
        piped: piped_in,
        texts: seg
            .redirs
            .iter()
            .filter_map(|r| match (&r.heredoc, r.op) {
                (Some((_, body)), _) => Some(body.clone()),
                (None, "<<<") => Some(r.target.value.clone()),
                _ => None,
            })
            .collect(),
    };
    let outcome = judge_invocation(policy, words, &stdin, depth, false, checks);
    if matches!(outcome, Outcome::Allow { .. }) {
        checks.extend(redirect_checks);
    }
    outcome
}

fn check_redirect(policy: &Policy, r: &Redir) -> Result<Option<(String, String)>, String> {
    let t = &r.target;
    if let Some((quoted, body)) = &r.heredoc {
        if !quoted && (body.contains('$') || body.contains('`') || body.contains("\\\n")) {
            return Err(
                "the heredoc delimiter is unquoted and the body contains `$`, backticks or a line continuation, so bash would expand it; quote the delimiter (<<'EOF')"
                    .into(),
            );
        }
        return Ok(None);
    }
    if r.op == "<<<" {
        return match unsafe_var(t) {
            Some(v) => Err(format!(
                "expansion of `${v}` in a here-string cannot be judged"
            )),
            None => Ok(None),
        };
    }
    if !t.literal() || t.ansi_c {
        return Err(format!(
            "the redirection target `{}` contains an expansion; only plain paths are allowed",
            t.raw
        ));
    }
    let v = t.value.as_str();
    if v.starts_with("/dev/tcp/") || v.starts_with("/dev/udp/") {
        return Err(
            "redirection to /dev/tcp or /dev/udp opens a network connection; always denied".into(),
        );
    }
    let fd_target = !v.is_empty()
        && (v == "-"
            || v.trim_end_matches('-').chars().all(|c| c.is_ascii_digit())
                && !v.trim_end_matches('-').is_empty());
    match r.op {
        "<" => return Ok(None),
        "<&" if fd_target => return Ok(None),
        "<&" => return Err(format!("`<&{v}` is not a file descriptor duplication")),
        ">&" if fd_target => return Ok(None),
        _ => {}
    }
    // Everything left writes to a file: `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`.
    if matches!(v, "/dev/null" | "/dev/stdout" | "/dev/stderr") {
        return Ok(None);
    }
    if v.starts_with("/dev/") || v.starts_with("/proc/") || v.starts_with("/sys/") {
        return Err(format!(
            "output redirection to the device `{v}` is always denied"
        ));
    }
    if v.starts_with('/') {
        return Err(format!(
            "output redirection to the absolute path `{v}` is always denied (outside the work root)"
        ));
    }
    if !policy.write_redirects {
        return Err(format!(
            "output redirection to the file `{v}` is denied (a rule authorises running a command, not writing files)"
        ));
    }
    let comps: Vec<&str> = v
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.is_empty() {
        return Err(format!("output redirection to `{v}` is not a file path"));
    }
    if comps.contains(&"..") {
        return Err(format!(
            "output redirection to `{v}` may leave the work root (`..`)"
        ));
    }
    if let Some(why) = write_refusal(policy, v) {
        return Err(format!("output redirection to `{v}` {why}; always denied"));
    }
    Ok(Some((v.to_string(), ".".to_string())))
}

/// Files that build and test tools run or load: writing one turns an allowed `make` or
/// `cargo test` into running what was written. Compared lowercased, by file name.
const BUILD_FILES: &[&str] = &[
    "makefile",
    "gnumakefile",
    "build.rs",
    "cargo.toml",
    "package.json",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "conftest.py",
    "tox.ini",
    "noxfile.py",
    "cmakelists.txt",
    "justfile",
    "rakefile",
    "gemfile",
    "build.gradle",
    "build.gradle.kts",
    "pom.xml",
    "meson.build",
    "build.ninja",
    "go.mod",
    "deno.json",
    "webpack.config.js",
    "vite.config.js",
    "jest.config.js",
];

/// Why writing the work-root-relative path `rel` (no `..`, not absolute) is refused whatever
/// the rules say, or `None`: a dotfile or `.git/`, a build file, or a place a path rule lets
/// programs run from. Shared by output redirection and the file tools, so both protect the
/// same places. The reason reads after "writing `rel`": "writes a dotfile or inside .git".
pub fn write_refusal(policy: &Policy, rel: &str) -> Option<String> {
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.iter().any(|c| c.starts_with('.')) {
        return Some("writes a dotfile or inside .git".into());
    }
    if let Some(last) = comps.last() {
        let lc = last.to_ascii_lowercase();
        if BUILD_FILES.contains(&lc.as_str()) || lc.ends_with(".mk") {
            return Some("writes a file that build and test tools run".into());
        }
    }
    // Writing a script that a path rule lets run would turn the write into running anything.
    for rule in &policy.allow {
        if let RuleKind::Path(prefix) = &rule.kind {
            if path_under(rel, prefix, false) || path_under(&format!("./{rel}"), prefix, false) {
                return Some(format!(
                    "writes where rule `{}` lets programs run",
                    rule.text
                ));
            }
        }
    }
    None
}

fn unsafe_var(w: &Word) -> Option<&str> {
    w.vars
        .iter()
        .map(String::as_str)
        .find(|v| !SAFE_VARS.contains(v))
}

/// What a command reads on stdin: another segment's output, and/or heredoc and here-string text.
struct Stdin {
    piped: bool,
    texts: Vec<String>,
}

/// Judges one command (a segment, or the command a wrapper runs). `open_tail` means more
/// arguments the gate cannot see will be appended (`xargs`).
fn judge_invocation(
    policy: &Policy,
    words: &[Word],
    stdin: &Stdin,
    depth: usize,
    open_tail: bool,
    checks: &mut Vec<(String, String)>,
) -> Outcome {
    if depth > MAX_DEPTH {
        return deny(format!("commands nest more than {MAX_DEPTH} levels deep"));
    }
    let Some(cmd) = words.first() else {
        return deny("no command to run");
    };
    let args = &words[1..];
    if RESERVED.contains(&cmd.value.as_str()) {
        return deny(format!(
            "`{}` is a shell keyword (control flow, groups, tests, `time`); always denied",
            cmd.value
        ));
    }
    if !cmd.literal() || cmd.ansi_c {
        return deny(format!(
            "the command word `{}` contains an expansion (variable, glob, brace, tilde or $'…'); always denied",
            cmd.raw
        ));
    }
    if cmd.value.is_empty() {
        return deny("the command word is empty");
    }
    if through_proc_or_dev(&cmd.value) {
        return deny(format!(
            "the command word `{}` runs a program through /proc or /dev, which hides what runs; denied",
            cmd.raw
        ));
    }
    if cmd.value.starts_with('=') {
        return deny(format!(
            "the command word `{}` starts with `=`, which zsh expands to a program's path; denied",
            cmd.raw
        ));
    }
    if STATE_BUILTINS.contains(&cmd.value.as_str()) {
        return deny(format!(
            "`{}` evaluates text or changes the shell's state; always denied",
            cmd.value
        ));
    }
    if let Some(w) = args.iter().find(|w| unsafe_var(w).is_some()) {
        return deny(format!(
            "the argument `{}` expands a variable whose value the gate cannot judge",
            w.raw
        ));
    }
    let base = basename(&cmd.value);
    let base_lc = canonical(base);
    for rule in &policy.deny {
        if deny_matches(rule, words) {
            return Outcome::Deny {
                rule: Some(rule.text.clone()),
                reason: format!("denied by rule `{}`", rule.text),
            };
        }
    }
    if open_tail && is_tail_sensitive(&base_lc) {
        return deny(format!(
            "`xargs` would append unseen arguments to `{base}`, whose arguments the gate must see"
        ));
    }
    if let Some(reason) = expansion_into_options(&base_lc, args) {
        return deny(reason);
    }
    if let Some(reason) = dangerous_args(&base_lc, args) {
        return deny(reason);
    }
    if !policy.deny.is_empty() {
        let found = opaque_mentions(policy, &base_lc, args)
            .or_else(|| stdin_code(policy, &base_lc, args, stdin))
            .or_else(|| inline_code_can_run_programs(&base_lc, args));
        if let Some(reason) = found {
            return deny(reason);
        }
    }
    match inner_command(policy, &base_lc, words, open_tail) {
        Inner::None => {}
        Inner::Deny(reason) => return deny(reason),
        Inner::Commands(list) => {
            for (range, tail) in list {
                let inner: Vec<Word> = match words.get(range) {
                    Some(ws) if !ws.is_empty() => ws.to_vec(),
                    _ if tail => vec![Word::synthetic("echo")],
                    _ => continue,
                };
                if let Outcome::Deny { rule, reason } =
                    judge_invocation(policy, &inner, stdin, depth + 1, tail, checks)
                {
                    return Outcome::Deny {
                        rule,
                        reason: format!("`{base}` runs `{}`: {reason}", inner[0].value),
                    };
                }
            }
        }
        Inner::Script(script) => match judge_program(policy, &script, depth + 1, checks) {
            Err(reason) => return deny(format!("inside the script `{base}` runs: {reason}")),
            Ok(segs) => {
                if let Some(s) = segs.into_iter().find(|s| s.verdict == Verdict::Deny) {
                    return Outcome::Deny {
                        rule: s.rule,
                        reason: format!("inside the script `{base}` runs: {}", s.reason),
                    };
                }
            }
        },
    }
    // A program named by a path outside the system directories could be a copy of a denied
    // one (`cp /usr/bin/rm ./del`): with deny rules in force only a path rule allows it.
    let system_path = [
        "/usr/bin/",
        "/bin/",
        "/usr/sbin/",
        "/sbin/",
        "/usr/local/bin/",
    ]
    .iter()
    .any(|d| cmd.value.starts_with(d) && !cmd.value[d.len()..].contains('/'));
    if !policy.deny.is_empty()
        && cmd.value.contains('/')
        && !system_path
        && !policy
            .allow
            .iter()
            .any(|r| matches!(r.kind, RuleKind::Path(_)) && allow_matches(r, words))
    {
        return deny(format!(
            "with deny rules in force, the program `{}` cannot be identified (a copy of a denied one would pass); allow its directory with a path rule such as `./scripts/**`",
            cmd.raw
        ));
    }
    for rule in &policy.allow {
        if allow_matches(rule, words) {
            if let RuleKind::Path(prefix) = &rule.kind {
                checks.push((cmd.value.clone(), prefix.clone()));
            }
            return Outcome::Allow {
                rule: Some(rule.text.clone()),
                reason: format!("allowed by rule `{}`", rule.text),
            };
        }
    }
    match policy.default {
        Verdict::Allow => Outcome::Allow {
            rule: None,
            reason: format!("no rule matches `{base}`; the default is allow"),
        },
        Verdict::Deny => deny(format!("no allow rule matches `{}`", cmd.value)),
    }
}

fn is_tail_sensitive(base: &str) -> bool {
    SHELLS.contains(&base)
        || INTERPRETERS.contains(&base)
        || OPAQUE_RUNNERS.contains(&base)
        || CHECKED.contains(&base)
}

/// Could this word, once expanded, equal `target`?
fn could_match(w: &Word, target: &str) -> bool {
    if !w.vars.is_empty() || w.brace || w.tilde {
        return true;
    }
    if w.glob {
        return glob_match(&w.value, target);
    }
    w.value == target
}

fn glob_match(pattern: &str, text: &str) -> bool {
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

fn deny_matches(rule: &Rule, words: &[Word]) -> bool {
    let Some(cmd) = words.first() else {
        return false;
    };
    // Loose: `RM` is `rm` on a case-insensitive file system.
    let base_lc = basename(&cmd.value).to_ascii_lowercase();
    let base = base_lc.as_str();
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
    match &rule.kind {
        RuleKind::Universal => true,
        RuleKind::Exact(ws) | RuleKind::Words(ws) => match ws.split_first() {
            Some((head, rest)) => basename(head).eq_ignore_ascii_case(base) && subsequence(rest),
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
        RuleKind::Path(prefix) => path_under(&cmd.value, prefix, true),
    }
}

fn allow_matches(rule: &Rule, words: &[Word]) -> bool {
    let eq = |w: &Word, r: &String| w.literal() && !w.ansi_c && w.value == *r;
    match &rule.kind {
        RuleKind::Universal => true,
        RuleKind::Exact(ws) => {
            words.len() == ws.len() && words.iter().zip(ws).all(|(w, r)| eq(w, r))
        }
        RuleKind::Words(ws) => {
            words.len() >= ws.len() && words.iter().zip(ws).all(|(w, r)| eq(w, r))
        }
        RuleKind::Raw(prefix) => {
            let joined: Vec<&str> = words.iter().map(|w| w.value.as_str()).collect();
            joined.join(" ").starts_with(prefix.as_str())
        }
        RuleKind::Path(prefix) => words
            .first()
            .is_some_and(|w| w.value.contains('/') && path_under(&w.value, prefix, false)),
    }
}

/// Is `path` strictly under `prefix`, lexically? With `resolve_dotdot` false any `..` fails.
fn path_under(path: &str, prefix: &str, resolve_dotdot: bool) -> bool {
    fn norm(p: &str, resolve: bool) -> Option<(bool, Vec<&str>)> {
        let mut out: Vec<&str> = Vec::new();
        for c in p.split('/') {
            match c {
                "" | "." => {}
                ".." if resolve => {
                    out.pop();
                }
                ".." => return None,
                c => out.push(c),
            }
        }
        Some((p.starts_with('/'), out))
    }
    match (norm(path, resolve_dotdot), norm(prefix, resolve_dotdot)) {
        (Some((pa, pc)), Some((xa, xc))) => pa == xa && pc.len() > xc.len() && pc.starts_with(&xc),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Wrappers: commands that run another command.
// ---------------------------------------------------------------------------------------------

enum Inner {
    None,
    Deny(String),
    /// Word ranges that are commands to judge; `true` when `xargs` appends unseen arguments.
    Commands(Vec<(std::ops::Range<usize>, bool)>),
    /// A shell script to judge as a whole.
    Script(String),
}

/// Splits a wrapper's leading options: returns the index of the first operand, or a denial.
/// `with_arg` options take a value (attached or next word); `flags` take none.
fn skip_options(
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

fn inner_command(policy: &Policy, base: &str, words: &[Word], open_tail: bool) -> Inner {
    let n = words.len();
    let to_end = |start: usize| Inner::Commands(vec![(start..n, open_tail)]);
    let result = match base {
        "command" => {
            if words[1..]
                .iter()
                .take_while(|w| w.value.starts_with('-'))
                .any(|w| w.value.contains('v') || w.value.contains('V'))
            {
                return Inner::None;
            }
            skip_options(words, 1, &["-p"], &[], base).map(to_end)
        }
        "builtin" | "nohup" => skip_options(words, 1, &[], &[], base).map(to_end),
        "nice" => {
            // `nice -5 cmd`
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
            skip_options(words, start, &[], &["-n", "--adjustment"], base).map(to_end)
        }
        "timeout" => skip_options(
            words,
            1,
            &["-v", "--verbose", "--preserve-status", "--foreground"],
            &["-s", "--signal", "-k", "--kill-after"],
            base,
        )
        .map(|i| to_end(i + 1)),
        "stdbuf" => skip_options(
            words,
            1,
            &[],
            &["-i", "-o", "-e", "--input", "--output", "--error"],
            base,
        )
        .map(to_end),
        "setsid" => skip_options(
            words,
            1,
            &["-c", "-f", "-w", "--ctty", "--fork", "--wait"],
            &[],
            base,
        )
        .map(to_end),
        "time" => {
            if words[1..]
                .iter()
                .any(|w| w.value.starts_with("-o") || w.value.starts_with("--o"))
            {
                return Inner::Deny("`time -o` writes a file; denied".into());
            }
            skip_options(
                words,
                1,
                &[
                    "-p",
                    "-v",
                    "-q",
                    "-a",
                    "--portability",
                    "--verbose",
                    "--quiet",
                    "--append",
                ],
                &["-f", "--format"],
                base,
            )
            .map(to_end)
        }
        "busybox" | "toybox" => Ok(if n > 1 && !words[1].value.starts_with('-') {
            to_end(1)
        } else {
            Inner::None
        }),
        "env" => env_inner(words, open_tail),
        "xargs" => xargs_inner(words),
        "find" => find_inner(words),
        "fd" | "fdfind" => fd_inner(words),
        "watch" => {
            let exec = words[1..]
                .iter()
                .any(|w| matches!(w.value.as_str(), "-x" | "--exec"));
            skip_options(
                words,
                1,
                &[
                    "-x",
                    "--exec",
                    "-d",
                    "--differences",
                    "-t",
                    "--no-title",
                    "-b",
                    "--beep",
                    "-e",
                    "--errexit",
                    "-g",
                    "--chgexit",
                    "-c",
                    "--color",
                    "-p",
                    "--precise",
                    "-w",
                    "--no-wrap",
                    "-C",
                    "--no-color",
                    "-r",
                    "--no-rerun",
                ],
                &["-n", "--interval", "-q", "--equexit"],
                base,
            )
            .and_then(|i| {
                if exec {
                    Ok(to_end(i))
                } else {
                    script_of(&words[i.min(n)..], base).map(Inner::Script)
                }
            })
        }
        "sudo" => skip_options(
            words,
            1,
            &[
                "-E",
                "-H",
                "-n",
                "-S",
                "-k",
                "-b",
                "-P",
                "--preserve-env",
                "--non-interactive",
                "--stdin",
                "--background",
            ],
            &[
                "-u",
                "-g",
                "-C",
                "-D",
                "-p",
                "-T",
                "-h",
                "-r",
                "-t",
                "-U",
                "--user",
                "--group",
                "--close-from",
                "--chdir",
                "--prompt",
                "--command-timeout",
                "--host",
                "--role",
                "--type",
                "--other-user",
            ],
            base,
        )
        .map(to_end),
        "doas" => skip_options(words, 1, &["-n"], &["-u"], base).map(to_end),
        b if SHELLS.contains(&b) => shell_inner(policy, words, base),
        _ => Ok(Inner::None),
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

/// The script text a word list stands for when a program joins it and runs `sh -c`.
fn script_of(words: &[Word], base: &str) -> Result<String, String> {
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

fn env_inner(words: &[Word], _open_tail: bool) -> Result<Inner, String> {
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

fn xargs_inner(words: &[Word]) -> Result<Inner, String> {
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
            _ if ["-a", "-d", "-E", "-e", "-L", "-l", "-n", "-P", "-s"]
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
                .any(|o| v.starts_with(o)) =>
            {
                i += 1
            }
            _ => {
                return Err(format!(
                    "`xargs` option `{v}` is not understood by the gate"
                ))
            }
        }
    }
    if let Some(r) = replace.filter(|r| !r.is_empty()) {
        if let Some(cmd) = words.get(i) {
            if cmd.value.contains(&r) {
                return Err("`xargs -I` substitutes input into the command word; denied".into());
            }
            let b = canonical(basename(&cmd.value));
            if (SHELLS.contains(&b.as_str()) || INTERPRETERS.contains(&b.as_str()))
                && words[i..].iter().any(|w| w.value.contains(&r))
            {
                return Err(format!(
                    "`xargs -I` substitutes input into code that `{b}` runs; denied"
                ));
            }
        }
    }
    Ok(Inner::Commands(vec![(i..words.len(), true)]))
}

fn find_inner(words: &[Word]) -> Result<Inner, String> {
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
            list.push((start..end, false));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(Inner::Commands(list))
}

/// `fd -x CMD…` / `-X CMD…` runs CMD on every match, up to a `;` or the end, with the paths
/// appended (an open tail: file names the gate cannot see become arguments).
fn fd_inner(words: &[Word]) -> Result<Inner, String> {
    // fd's short options that take a value: the rest of their cluster is that value.
    const VALUED: &str = "edtEcjSoC";
    let mut list = Vec::new();
    let mut i = 1;
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
            list.push((start..end, true));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(Inner::Commands(list))
}

fn shell_inner(policy: &Policy, words: &[Word], base: &str) -> Result<Inner, String> {
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
            let flags = &v[1..];
            if !flags.chars().all(|c| c.is_ascii_alphabetic()) {
                return Err(format!(
                    "`{base}` option `{v}` is not understood by the gate"
                ));
            }
            if flags.contains('c') {
                command_mode = true;
            }
            if flags.contains('i') {
                return Err(format!("interactive `{base} -i` is denied"));
            }
            // Each `o`/`O` in a cluster (`-co posix`) takes the next word as its value.
            let values = flags.chars().filter(|c| matches!(c, 'o' | 'O')).count();
            if words[i + 1..].iter().take(values).any(|w| !w.literal()) {
                return Err(format!(
                    "`{base}` option `{v}` takes a value the gate cannot read"
                ));
            }
            i += 1 + values;
            continue;
        }
        break;
    }
    if command_mode {
        return match words.get(i) {
            Some(w) if w.literal() => {
                if matches!(
                    base,
                    "csh" | "tcsh" | "fish" | "pwsh" | "elvish" | "nu" | "xonsh"
                ) {
                    return Err(format!(
                        "`{base} -c` scripts are not bash; the gate cannot judge them"
                    ));
                }
                Ok(Inner::Script(w.value.clone()))
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

/// With deny rules in force, an interpreter or opaque runner whose arguments mention a denied
/// command (or a shell) is denied: the gate cannot follow what it runs.
fn opaque_mentions(policy: &Policy, base: &str, args: &[Word]) -> Option<String> {
    if base == "run-parts" {
        return Some("`run-parts` runs every program in a directory, which no rule can see".into());
    }
    if !(INTERPRETERS.contains(&base) || OPAQUE_RUNNERS.contains(&base)) {
        return None;
    }
    let denied: Vec<&str> = policy
        .deny
        .iter()
        .filter_map(|r| match &r.kind {
            RuleKind::Exact(ws) | RuleKind::Words(ws) => ws.first().map(|w| basename(w)),
            RuleKind::Raw(p) => p.split_whitespace().next().map(basename),
            RuleKind::Path(_) | RuleKind::Universal => None,
        })
        .collect();
    for w in args {
        if !w.literal() && OPAQUE_RUNNERS.contains(&base) {
            return Some(format!(
                "`{base}` runs `{}`, which the gate cannot read",
                w.raw
            ));
        }
        for tok in w
            .value
            .split(|c: char| !(c.is_alphanumeric() || "_./+-".contains(c)))
            .filter(|t| !t.is_empty())
        {
            let b = basename(tok);
            let kind = canonical(b);
            let b = kind.as_str();
            if denied.contains(&b) || denied.iter().any(|d| canonical(d) == b) {
                return Some(format!(
                    "`{base}` would run code mentioning `{b}`, which a deny rule forbids; the gate cannot follow it"
                ));
            }
            if OPAQUE_RUNNERS.contains(&base) && (SHELLS.contains(&b) || INTERPRETERS.contains(&b))
            {
                return Some(format!(
                    "`{base}` would run `{b}`, whose script the deny rules cannot see into"
                ));
            }
        }
    }
    None
}

/// Interpreters whose stdin is always commands (editors, REPLs, `at`), even with a file operand.
const STDIN_COMMANDS: &[&str] = &[
    "ed", "ex", "vi", "vim", "nvim", "emacs", "sqlite3", "psql", "mysql", "gdb", "expect",
    "jshell", "irb", "tclsh", "wish", "ghci", "guile", "racket", "sbcl", "dc", "gnuplot", "octave",
    "r", "lldb", "duckdb", "m4", "mongosh",
];

fn is_stdin_path(v: &str) -> bool {
    matches!(v, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// Does an interpreter read its program from stdin? True unless a program is given inline
/// (`-c`, `-e`, `-ne`, `-m`, `-r`, `--eval`, `deno eval`) or as a file operand.
fn program_from_stdin(args: &[Word]) -> bool {
    for w in args {
        let v = w.value.as_str();
        if is_stdin_path(v) {
            return true;
        }
        if v == "--" {
            continue;
        }
        if let Some(long) = v.strip_prefix("--") {
            if matches!(
                long.split('=').next(),
                Some("eval" | "command" | "print" | "execute")
            ) {
                return false;
            }
            continue;
        }
        if let Some(cluster) = v.strip_prefix('-') {
            if cluster.chars().any(|c| "ceErmp".contains(c)) {
                return false;
            }
            continue;
        }
        return false;
    }
    true
}

/// With deny rules in force: an interpreter or runner fed code on stdin (a pipe, heredoc or
/// here-string) runs text the rules cannot follow; heredoc and here-string text is checked
/// like an argument.
fn stdin_code(policy: &Policy, base: &str, args: &[Word], stdin: &Stdin) -> Option<String> {
    let opaque = OPAQUE_RUNNERS.contains(&base);
    if !(opaque || INTERPRETERS.contains(&base)) {
        return None;
    }
    let texts: Vec<Word> = stdin.texts.iter().map(|t| Word::synthetic(t)).collect();
    if let Some(reason) =
        opaque_mentions(policy, base, &texts).or_else(|| inline_code_can_run_programs(base, &texts))
    {
        return Some(format!("on stdin: {reason}"));
    }
    if !stdin.piped && stdin.texts.is_empty() {
        return None;
    }
    let reads_code = opaque
        || STDIN_COMMANDS.contains(&base)
        || (!matches!(base, "awk" | "gawk" | "mawk" | "nawk" | "make") && program_from_stdin(args));
    reads_code.then(|| {
        format!("`{base}` would run commands from its stdin, which the deny rules cannot see into")
    })
}

/// Names of interpreter features that run programs or build code at run time; inline code
/// containing one could reach a denied command without naming it (`'r'+'m'`).
const CODE_CAPABILITIES: &[&str] = &[
    "system",
    "exec",
    "spawn",
    "popen",
    "fork",
    "process",
    "import",
    "require",
    "open",
    "eval",
    "`",
    "qx",
    "pty",
    "shell",
    "syscall",
    "ctypes",
    "ffi",
    "dlopen",
    "load",
    "pipe",
    "kernel",
    "send",
    "__",
    "getattr",
    "globals",
    "vars(",
    "compile",
    "function",
    "constructor",
    "deno.",
    "bun.",
    "passthru",
    "proc_",
    "os.",
    "io.",
    "%x",
    "&$",
    "&{",
    "$(",
    "run(",
    "readpipe",
    "command",
    "invoke",
    "call(",
    "apply(",
    "new ",
    "do ",
    "dofile",
    "sh ",
    "::",
];

/// With deny rules in force, inline interpreter code (an argument that looks like code) that
/// uses a feature able to run programs is denied: the rules cannot follow what it runs.
/// Does the code end a substitution with flags that include `e` (`s/x/y/ee` in Perl evaluates
/// the replacement)? Looks for a closing delimiter followed by flag letters with an `e`.
fn perl_eval_flag(code: &str) -> bool {
    let c: Vec<char> = code.chars().collect();
    (0..c.len()).any(|k| {
        if !"/}#|!,)]>'\"".contains(c[k]) {
            return false;
        }
        let run: String = c[k + 1..]
            .iter()
            .take_while(|ch| ch.is_ascii_alphabetic())
            .collect();
        let end = c.get(k + 1 + run.len());
        !run.is_empty()
            && run.contains('e')
            && run.chars().all(|ch| "msixpodualngcer".contains(ch))
            && end.is_none_or(|ch| !ch.is_alphanumeric() && *ch != '_')
    })
}

fn inline_code_can_run_programs(base: &str, args: &[Word]) -> Option<String> {
    if !INTERPRETERS.contains(&base) || matches!(base, "awk" | "gawk" | "mawk" | "nawk") {
        return None;
    }
    for w in args {
        if base == "perl" && perl_eval_flag(&w.value) {
            return Some(format!(
                "`{base}` code has a substitution with the `e` flag, which evaluates code"
            ));
        }
        let code = w
            .value
            .contains(|c: char| " ()'\";{}$@`[]=&|<>\n".contains(c));
        if !code {
            continue;
        }
        if !w.value.is_ascii() {
            // Python reads full-width `ｅｘｅｃ` as `exec` (NFKC identifiers): words the
            // capability list cannot see.
            return Some(format!(
                "`{base}` code has non-ASCII characters, which can spell names the gate cannot read"
            ));
        }
        let lc = w.value.to_ascii_lowercase();
        // `$f(...)`: PHP and Perl call a function named by a string.
        let variable_call = lc.match_indices('$').any(|(k, _)| {
            let rest =
                lc[k + 1..].trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
            rest.len() < lc.len() - k - 1 && rest.trim_start().starts_with('(')
        });
        if variable_call {
            return Some(format!(
                "`{base}` code calls a function through a variable, which can run programs the deny rules cannot see"
            ));
        }
        if let Some(cap) = CODE_CAPABILITIES.iter().find(|c| lc.contains(*c)) {
            return Some(format!(
                "`{base}` code uses `{}`, which can run programs the deny rules cannot see",
                cap.trim()
            ));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Options that turn a reading command into one that runs code or writes files.
// ---------------------------------------------------------------------------------------------

/// For commands whose options the gate checks, an unquoted glob that could match a file named
/// like an option (`*` matches `--checkpoint-action=exec=sh`), or a brace expansion, would
/// hand the command options the gate never saw.
fn expansion_into_options(base: &str, args: &[Word]) -> Option<String> {
    let checked = CHECKED.contains(&base)
        || INTERPRETERS.contains(&base)
        || SHELLS.contains(&base)
        || matches!(
            base,
            "xxd" | "go" | "gmake" | "tee" | "cp" | "mv" | "ln" | "chmod" | "chown"
        );
    if !checked {
        return None;
    }
    for w in args.iter().take_while(|w| w.value != "--") {
        let braces = w.brace && (w.value.contains(',') || w.value.contains(".."));
        let leading_glob = w.glob && w.value.starts_with(['*', '?', '[']);
        if braces || leading_glob {
            return Some(format!(
                "`{base}`: `{}` could expand into options the gate cannot check (write `./{}` for files)",
                w.raw,
                w.raw.trim_start_matches("./")
            ));
        }
    }
    None
}

/// `--name[=…]` where `name` is an abbreviation (GNU getopt_long accepts any unambiguous
/// prefix) of one of `names`.
fn long_abbrev<'n>(arg: &str, names: &[&'n str]) -> Option<&'n str> {
    let body = arg.strip_prefix("--")?;
    let name = body.split('=').next().unwrap_or(body);
    if name.is_empty() {
        return None;
    }
    names.iter().copied().find(|n| n.starts_with(name))
}

/// Does the short-option cluster `-abc` contain one of `flags`? Stops at the first option in
/// `takes_arg` (the rest of the cluster is its value).
fn short_has(arg: &str, flags: &str, takes_arg: &str) -> bool {
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
fn options(args: &[Word]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(|w| w.value.as_str())
        .take_while(|v| *v != "--")
}

fn dangerous_args(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| Some(format!("`{base}` {what}; denied whatever the rules say"));
    match base {
        "find" => {
            const BAD: [&str; 9] = [
                "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-exec", "-execdir", "-ok",
                "-okdir",
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
        "test" | "[" => {
            // `test -v 'a[$(id)]'` evaluates the subscript as arithmetic, running the substitution.
            args.iter()
                .any(|w| matches!(w.value.as_str(), "-v" | "-R"))
                .then(|| format!("`{base} -v`/`-R` evaluates array subscripts (arithmetic can run commands); denied"))
        }
        "sort" => {
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
        "split" => options(args)
            .any(|v| long_abbrev(v, &["filter"]).is_some())
            .then(|| format!("`{base}` `--filter` runs a shell command; denied whatever the rules say")),
        "pandoc" => options(args)
            .any(|v| {
                long_abbrev(v, &["filter", "lua-filter", "pdf-engine"]).is_some()
                    || short_has(v, "FL", "otfrwMVdcHABDT")
            })
            .then(|| format!("`{base}` `--filter`/`--lua-filter`/`--pdf-engine` runs a program; denied whatever the rules say")),
        "pdflatex" | "latex" | "xelatex" | "lualatex" | "tex" | "pdftex" | "luatex" | "xetex"
        | "etex" | "latexmk" => args
            .iter()
            .map(|w| w.value.trim_start_matches('-'))
            .any(|v| {
                v.starts_with("shell-escape")
                    || v.starts_with("enable-write18")
                    || v.starts_with("shell-restricted")
                    || (base == "latexmk" && (v == "e" || v == "r" || v.contains('=')))
            })
            .then(|| format!("`{base}` with shell escape (or latexmk code and commands) runs programs; denied whatever the rules say")),
        "exiftool" => args
            .iter()
            .any(|w| {
                let v = w.value.to_ascii_lowercase();
                v.starts_with("-if") || v.contains("${") || v == "-@" || v.starts_with("-config")
            })
            .then(|| format!("`{base}` `-if`, `${{…}}` expressions and argument/config files evaluate Perl; denied whatever the rules say")),
        "gpg" | "gpg2" => options(args)
            .any(|v| long_abbrev(v, &["photo-viewer", "exec-path", "load-extension"]).is_some())
            .then(|| format!("`{base}` `--photo-viewer`/`--exec-path` runs programs; denied whatever the rules say")),
        "nc" | "ncat" | "netcat" | "nc.traditional" | "nc.openbsd" => options(args)
            .any(|v| {
                long_abbrev(v, &["exec", "sh-exec", "lua-exec"]).is_some()
                    || short_has(v, "ec", "pswiqIOTVXbgGmPx")
            })
            .then(|| format!("`{base}` `-e`/`-c`/`--exec` runs a program on the connection; denied whatever the rules say")),
        "crontab" => (args.is_empty() || args.iter().any(|w| !matches!(w.value.as_str(), "-l")))
            .then(|| format!("`{base}` installs commands that run later, outside this turn and its sandbox; only `crontab -l` is allowed")),
        "shuf" | "iconv" | "tree" => {
            for v in options(args) {
                if long_abbrev(v, &["output"]).is_some() || short_has(v, "o", "ntiIPLx") {
                    return hit("`-o`/`--output` writes a file");
                }
            }
            None
        }
        "uniq" | "xxd" => {
            // Options that take a separate value, whose value is not an operand.
            let valued: &[&str] = if base == "uniq" {
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
                    operands_only |= base == "xxd";
                } else if v == "--" {
                    operands_only = true;
                } else if valued.contains(&v) {
                    i += 1;
                }
            }
            (positional >= 2)
                .then(|| format!("`{base}` with two file operands writes the second; denied"))
        }
        "apt" | "apt-get" | "apt-cache" | "dpkg" => options(args)
            .any(|v| {
                matches!(v, "-o" | "-c") || v.starts_with("-o") && !v.starts_with("--")
                    || long_abbrev(v, &["option", "config-file"]).is_some()
            })
            .then(|| format!("`{base}` `-o`/`-c` set options that run programs (Pre-Invoke...); denied whatever the rules say")),
        "go" => {
            let all: Vec<&str> = options(args).collect();
            if all.first() == Some(&"env") && all.iter().any(|v| matches!(*v, "-w" | "-u")) {
                return hit("`env -w`/`-u` writes settings (GOFLAGS can name programs to run)");
            }
            // Go's flag package accepts `--o` for `-o`.
            let single: Vec<Word> = args
                .iter()
                .map(|w| {
                    let mut w = w.clone();
                    if w.value.starts_with("--") {
                        w.value.remove(0);
                    }
                    w
                })
                .collect();
            if single.iter().any(|w| {
                ["-gcflags", "-ldflags", "-asmflags"]
                    .iter()
                    .any(|f| w.value.starts_with(f))
                    && w.value.contains("-o")
            }) {
                return hit("build flags with `-o` write where the gate cannot check");
            }
            if let Some((o, p)) = path_option_outside(
                &single,
                &[
                    "-o", "-coverprofile", "-cpuprofile", "-memprofile", "-blockprofile",
                    "-mutexprofile", "-trace", "-outputdir", "-C", "-pkgdir", "-debug-trace",
                    "-modfile", "-overlay", "-test.coverprofile", "-test.cpuprofile",
                    "-test.memprofile", "-test.trace", "-test.outputdir",
                ],
            ) {
                return hit(&format!("`{o} {p}` reaches outside the work root"));
            }
            if all.iter().any(|v| v.contains("extld") || v.contains("toolexec")) {
                return hit("`-extld`/`-toolexec` in build flags runs a program the rules did not name");
            }
            for v in all {
                let name = v.trim_start_matches('-').split('=').next().unwrap_or("");
                if v.starts_with('-') && matches!(name, "exec" | "toolexec" | "vettool" | "overlay")
                {
                    return hit(&format!("`-{name}` runs a program the rules did not name"));
                }
            }
            None
        }
        "make" | "gmake" => make_check(args).map(|e| format!("`{base}`: {e}; denied")),
        "sed" | "gsed" => sed_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        "awk" | "gawk" | "mawk" | "nawk" => awk_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        "git" => git_check(args).map(|e| format!("`git`: {e}; denied whatever the rules say")),
        "man" => {
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
        "less" | "more" | "most" => {
            for v in args.iter().map(|w| w.value.as_str()) {
                if v.starts_with('+') {
                    return hit("`+cmd` runs pager commands");
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
        "tar" | "bsdtar" | "gtar" => {
            if let Some(e) = tar_writes(args) {
                return hit(&e);
            }
            for (k, v) in options(args).enumerate() {
                if v == "--checkpoint" || v.starts_with("--checkpoint=") {
                    continue;
                }
                if let Some(n) = long_abbrev(
                    v,
                    &[
                        "to-command",
                        "use-compress-program",
                        "checkpoint-action",
                        "info-script",
                        "new-volume-script",
                        "rsh-command",
                        "rmt-command",
                        "index-file",
                        "volno-file",
                        "remove-files",
                    ],
                ) {
                    return hit(&format!(
                        "`--{n}` runs a program or writes or deletes files the gate cannot check"
                    ));
                }
                let remote = v
                    .strip_prefix("--file=")
                    .or_else(|| (!v.starts_with('-')).then_some(v))
                    .and_then(|f| f.split_once(':'))
                    .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
                if remote && !args.iter().any(|w| w.value == "--force-local") {
                    return hit("a `host:file` archive runs a remote shell command");
                }
                let old_style =
                    k == 0 && !v.starts_with('-') && (v.contains('I') || v.contains('F'));
                if old_style || short_has(v, "IF", "bCfgHKLNTVX") {
                    return hit("`-I`/`-F` runs a program");
                }
            }
            None
        }
        "rg" => {
            for v in options(args) {
                if long_abbrev(v, &["pre", "hostname-bin"]).is_some()
                    && !v.starts_with("--pre-glob")
                {
                    return hit("`--pre` runs a program");
                }
            }
            None
        }
        "zip" => {
            for v in options(args) {
                let cluster_tt = v.starts_with('-') && !v.starts_with("--") && v.contains("TT");
                if cluster_tt || long_abbrev(v, &["unzip-command"]).is_some() {
                    return hit("`-TT` runs a program");
                }
            }
            None
        }
        "rsync" => {
            for v in options(args) {
                if short_has(v, "e", "BfMT") || long_abbrev(v, &["rsh", "rsync-path"]).is_some() {
                    return hit("`-e`/`--rsh`/`--rsync-path` runs a program");
                }
            }
            None
        }
        "ssh" | "scp" | "sftp" => {
            let all: Vec<&str> = options(args).collect();
            for (k, v) in all.iter().enumerate() {
                let lc = v.to_ascii_lowercase();
                let next = all
                    .get(k + 1)
                    .map(|s| s.to_ascii_lowercase())
                    .unwrap_or_default();
                let opt = if lc == "-o" {
                    next.as_str()
                } else {
                    lc.strip_prefix("-o").unwrap_or("")
                };
                if [
                    "proxycommand",
                    "localcommand",
                    "permitlocalcommand",
                    "knownhostscommand",
                    "proxyusefdpass",
                ]
                .iter()
                .any(|o| opt.starts_with(o))
                    || *v == "-F"
                    || (base != "ssh" && *v == "-S")
                {
                    return hit("options that run local programs are denied");
                }
            }
            None
        }
        "tcpdump" => {
            for v in options(args) {
                if short_has(v, "zw", "") {
                    return hit("`-z`/`-w` runs a program or writes a file");
                }
            }
            None
        }
        "cargo" => {
            for v in options(args) {
                if v == "--config" || v.starts_with("--config=") || v.starts_with("-Z") {
                    return hit("`--config`/`-Z` can set a runner or other programs to execute");
                }
            }
            // The test binary's own `--logfile` (after `--`) writes wherever it is told.
            if args.iter().any(|w| w.value == "--logfile" || w.value.starts_with("--logfile=")) {
                return hit("`--logfile` writes a file");
            }
            path_option_outside(
                args,
                &["--target-dir", "--manifest-path", "--artifact-dir", "--out-dir", "--lockfile-path"],
            )
            .map(|(o, p)| format!("`{o} {p}` reaches outside the work root; denied whatever the rules say"))
        }
        "printf" => {
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
        _ => None,
    }
}

/// Is this path outside the work root or inside a dot directory (absolute, `~`, `..`, `.git`)?
fn outside_path(p: &str) -> bool {
    p.starts_with('/')
        || p.starts_with('~')
        || p.split('/')
            .any(|c| c == ".." || (c.starts_with('.') && c != "."))
}

/// The first of `names` (spelled `--x v`, `--x=v`, `-x v` or `-x=v`) whose path value is
/// outside the work root.
fn path_option_outside<'a>(args: &'a [Word], names: &[&'a str]) -> Option<(&'a str, &'a str)> {
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        for &n in names {
            let value = if v == n {
                args.get(k).map(|w| w.value.as_str())
            } else {
                v.strip_prefix(n).and_then(|r| r.strip_prefix('='))
            };
            if let Some(p) = value.filter(|p| outside_path(p)) {
                return Some((n, p));
            }
        }
    }
    None
}

/// `make` runs its Makefile's recipes (what a `make *` rule authorises), but not code given on
/// the command line or on stdin.
fn make_check(args: &[Word]) -> Option<String> {
    // Paths make reads or writes (`-C`, `-f`, `-I`, `-o`, `-W`), in every spelling: clustered
    // (`-sC dir`), attached (`-C/dir`), abbreviated (`--dir=`).
    let all: Vec<&str> = options(args).collect();
    let mut k = 0;
    while let Some(&v) = all.get(k) {
        k += 1;
        let value = if v.starts_with("--") {
            long_abbrev(
                v,
                &[
                    "directory",
                    "file",
                    "makefile",
                    "include-dir",
                    "old-file",
                    "new-file",
                    "assume-new",
                    "assume-old",
                    "what-if",
                ],
            )
            .and_then(|_| match v.split_once('=') {
                Some((_, x)) => Some(x),
                None => {
                    k += 1;
                    all.get(k - 1).copied()
                }
            })
        } else if let Some(cluster) = v.strip_prefix('-') {
            cluster
                .char_indices()
                .find(|(_, c)| "CfIoWjl".contains(*c))
                .and_then(|(n, c)| {
                    let rest = &cluster[n + 1..];
                    if "jl".contains(c) {
                        None // numeric, optional
                    } else if rest.is_empty() {
                        k += 1;
                        all.get(k - 1).copied()
                    } else {
                        Some(rest)
                    }
                })
        } else {
            None
        };
        if let Some(p) = value.filter(|p| outside_path(p)) {
            return Some(format!("`{v} {p}` reaches outside the work root"));
        }
    }
    let all: Vec<&str> = options(args).collect();
    for (k, v) in all.iter().enumerate() {
        if long_abbrev(v, &["eval"]).is_some() || short_has(v, "E", "CfIjlWo") {
            return Some("`--eval` runs code given on the command line".into());
        }
        let makefile = if matches!(*v, "-f" | "--file" | "--makefile") {
            all.get(k + 1).copied()
        } else if let Some(rest) = v.strip_prefix("-f").filter(|_| !v.starts_with("--")) {
            Some(rest)
        } else if long_abbrev(v, &["file", "makefile"]).is_some() {
            v.split_once('=').map(|(_, x)| x)
        } else {
            None
        };
        if makefile
            .is_some_and(|m| is_stdin_path(m) || m.starts_with("/dev/") || m.starts_with("/proc/"))
        {
            return Some("a Makefile read from stdin cannot be checked".into());
        }
        if let Some(reason) = make_override(v) {
            return Some(reason);
        }
    }
    // Overrides may also follow `--`.
    for w in args.iter().skip_while(|w| w.value != "--") {
        if let Some(reason) = make_override(&w.value) {
            return Some(reason);
        }
    }
    None
}

/// A `NAME=value` (`:=`, `::=`, `?=`, `+=`) argument to make, or None when it is harmless.
fn make_override(v: &str) -> Option<String> {
    let (name, value) = v.split_once('=').filter(|_| !v.starts_with('-'))?;
    if name.ends_with('!') {
        return Some(format!("`{name}=` runs a shell command to set a variable"));
    }
    let name = name.trim_end_matches([':', '?', '+']).trim();
    let value = value.trim();
    // Recipes may run any variable as a program (`CC=rm`, `PYTHON=sh`): a value may
    // not name a shell, an interpreter, a runner or a program that deletes or
    // rewrites files, nor carry shell syntax or compiler plugin/wrapper options.
    let safe_name = !matches!(
        name,
        "SHELL"
            | "MAKESHELL"
            | ".SHELLFLAGS"
            | "MAKEFLAGS"
            | "MFLAGS"
            | "MAKEFILES"
            | "GNUMAKEFLAGS"
    );
    const RISKY: &[&str] = &[
        "rm", "rmdir", "unlink", "shred", "dd", "mv", "cp", "ln", "chmod", "chown", "truncate",
        "tee", "install", "curl", "wget", "nc", "ncat", "socat", "ssh", "scp", "sudo", "doas",
        "kill", "pkill",
    ];
    let bad_value = value.contains(|c: char| ";|&$`()<>\n\\'\"*?[]{}~#!@".contains(c))
        || value
            .split_whitespace()
            .any(|t| t.starts_with("-o") || t.contains("fuse-ld") || outside_path(t))
        || ["plugin", "wrapper", "specs", "-B", "load", "exec"]
            .iter()
            .any(|b| value.contains(b))
        || value.split_whitespace().any(|t| {
            let b = canonical(basename(t));
            let b = b.as_str();
            RISKY.contains(&b) || is_tail_sensitive(b)
        });
    // Variables that name the programs recipes run take only known toolchain programs.
    let pname = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let program_var = matches!(
        pname,
        "BASH"
            | "PKG_CONFIG"
            | "CHECK"
            | "SPARSE"
            | "CLANG"
            | "CMAKE"
            | "NINJA"
            | "MESON"
            | "PROTOC"
            | "FLEX"
            | "BISON"
            | "LUA"
            | "TCL"
            | "GIT"
            | "OBJDUMP"
            | "READELF"
            | "DOXYGEN"
            | "GZIP"
            | "BZIP2"
            | "XZ"
            | "ZSTD"
            | "LN_S"
            | "INSTALL_DATA"
            | "INSTALL_PROGRAM"
            | "MKDIR_P"
            | "EDITOR"
            | "PAGER"
            | "VALGRIND"
            | "GDB"
            | "TOUCH"
            | "CAT"
            | "CHMOD"
            | "FIND"
            | "XARGS"
            | "ENV"
            | "TEST"
            | "PYTEST"
            | "CC"
            | "CXX"
            | "CPP"
            | "LD"
            | "AR"
            | "AS"
            | "RM"
            | "MAKE"
            | "FC"
            | "PC"
            | "LEX"
            | "YACC"
            | "M4"
            | "TAR"
            | "INSTALL"
            | "RANLIB"
            | "STRIP"
            | "NM"
            | "OBJCOPY"
            | "PYTHON"
            | "PERL"
            | "RUBY"
            | "NODE"
            | "NPM"
            | "DOCKER"
            | "GO"
            | "CARGO"
            | "RUSTC"
            | "JAVA"
            | "JAVAC"
            | "CO"
            | "GET"
            | "LINT"
            | "MAKEINFO"
            | "TEX"
            | "SED"
            | "AWK"
            | "GREP"
            | "MKDIR"
            | "CP"
            | "MV"
            | "LN"
            | "ECHO"
            | "SH"
    ) || [
        "CMD", "COMMAND", "EXEC", "PROG", "TOOL", "WRAPPER", "RUNNER", "LAUNCHER",
    ]
    .iter()
    .any(|s| pname.ends_with(s));
    let toolchain = |t: &str| {
        let t = t.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.');
        matches!(
            t,
            "gcc"
                | "g++"
                | "cc"
                | "c++"
                | "clang"
                | "clang++"
                | "gfortran"
                | "ld"
                | "ld.lld"
                | "ld.gold"
                | "lld"
                | "ar"
                | "llvm-ar"
                | "ranlib"
                | "as"
                | "nm"
                | "strip"
                | "objcopy"
                | "tcc"
                | "musl-gcc"
        )
    };
    // Any variable may be run as a program by some recipe (`$(LINTER) src`): a value that
    // reads as a program name is allowed only for data-like names or known toolchains.
    let first = value.split_whitespace().next().unwrap_or("");
    let wordlike =
        first.starts_with(|c: char| c.is_ascii_alphabetic()) && !first.contains(['=', ',', ':']);
    let data_name = matches!(
        pname,
        "VERSION"
            | "BUILD"
            | "BUILDTYPE"
            | "BUILD_TYPE"
            | "MODE"
            | "CONFIG"
            | "CONFIGURATION"
            | "TARGET"
            | "ARCH"
            | "OS"
            | "GOOS"
            | "GOARCH"
            | "PROFILE"
            | "ENV"
            | "LEVEL"
            | "LANG"
            | "O"
            | "V"
            | "VERBOSE"
            | "Q"
            | "DEBUG"
            | "NDEBUG"
            | "RELEASE"
            | "FEATURES"
            | "TAGS"
            | "ARGS"
            | "TESTS"
            | "TEST"
            | "T"
            | "PKG"
            | "PACKAGE"
            | "NAME"
            | "OUT"
            | "PREFIX"
            | "DESTDIR"
            | "J"
            | "JOBS"
            | "COLOR"
            | "STD"
            | "EXTRA"
            | "COVERAGE"
            | "SANITIZE"
    ) || ["FLAGS", "DIR", "PATH", "VERSION"]
        .iter()
        .any(|s| pname.ends_with(s));
    let program_ok = if program_var {
        value.split_whitespace().next().is_some_and(toolchain) && !value.contains('/')
    } else {
        !wordlike || data_name || toolchain(first)
    };
    if !safe_name || bad_value || !program_ok || outside_path(value) {
        return Some(format!(
            "the variable override `{name}=…` can change the commands recipes run"
        ));
    }
    None
}

fn git_check(args: &[Word]) -> Option<String> {
    let mut i = 0;
    // Global options before the subcommand.
    while let Some(w) = args.get(i) {
        let v = w.value.as_str();
        if !v.starts_with('-') {
            break;
        }
        if v == "-c" || v.starts_with("-c") && !v.starts_with("--") {
            return Some(
                "`-c` sets configuration (aliases, pagers, hooks can run programs)".into(),
            );
        }
        if let Some(n) = long_abbrev(v, &["config-env", "exec-path", "git-dir", "work-tree"]) {
            return Some(format!(
                "`--{n}` changes where git finds programs or configuration"
            ));
        }
        // Only global options whose arity the gate knows: an unknown one might take a value,
        // and then the gate would judge the wrong word as the subcommand.
        if v == "-C"
            && args
                .get(i + 1)
                .is_some_and(|w| outside_path(&w.value) || !w.literal())
        {
            return Some("`-C` points git outside the work root".into());
        }
        i += if matches!(v, "-C" | "--namespace") {
            2
        } else if matches!(
            v,
            "-p" | "-P"
                | "--paginate"
                | "--no-pager"
                | "--bare"
                | "--no-replace-objects"
                | "--no-lazy-fetch"
                | "--no-optional-locks"
                | "--no-advice"
                | "--literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--version"
                | "--help"
                | "--html-path"
                | "--man-path"
                | "--info-path"
        ) || v.starts_with("--namespace=")
        {
            1
        } else {
            return Some(format!("global option `{v}` is not understood by the gate"));
        };
    }
    let sub = args.get(i).map(|w| w.value.as_str()).unwrap_or("");
    let rest = args.get(i + 1..).unwrap_or_default();
    if !args.get(i).is_none_or(Word::literal) {
        return Some("the subcommand is not a plain word".into());
    }
    if matches!(
        sub,
        "filter-branch"
            | "mergetool"
            | "instaweb"
            | "web--browse"
            | "hook"
            | "daemon"
            | "upload-pack"
            | "receive-pack"
            | "shell"
            | "remote-ext"
            | "credential"
    ) {
        return Some(format!("`git {sub}` runs programs"));
    }
    if rest
        .iter()
        .any(|w| w.value.contains("ext::") || w.value.contains("fd::"))
    {
        return Some("the `ext::`/`fd::` transports run programs".into());
    }
    if options(rest).any(|v| v.starts_with("--ext-d")) {
        return Some(
            "`--ext-diff` runs the external diff program the repository configures".into(),
        );
    }
    if sub == "help"
        && options(rest).any(|v| short_has(v, "w", "") || long_abbrev(v, &["web"]).is_some())
    {
        return Some("`git help --web` starts a browser".into());
    }
    if matches!(sub, "clone" | "init" | "submodule") {
        for v in options(rest) {
            if v == "-c" || (v.starts_with("-c") && !v.starts_with("--")) {
                return Some(format!(
                    "`git {sub} -c` sets configuration (programs git runs)"
                ));
            }
            if let Some(n) = long_abbrev(v, &["config", "template", "separate-git-dir"]) {
                return Some(format!(
                    "`git {sub} --{n}` sets configuration or hooks (programs git runs)"
                ));
            }
        }
    }
    if sub == "submodule" && rest.iter().any(|w| w.value == "foreach") {
        return Some("`git submodule foreach` runs shell commands".into());
    }
    if sub == "bisect" && rest.first().is_some_and(|w| w.value == "run") {
        return Some("`git bisect run` runs a program".into());
    }
    if sub == "config" {
        return git_config_check(rest);
    }
    if matches!(sub, "send-pack" | "http-push") {
        return Some(format!("`git {sub}` pushes to a remote"));
    }
    if matches!(
        sub,
        "merge-index"
            | "merge-one-file"
            | "checkout-index"
            | "mailsplit"
            | "fast-import"
            | "maintenance"
            | "update-index"
            | "mktree"
            | "mktag"
            | "commit-tree"
            | "unpack-objects"
            | "index-pack"
            | "read-tree"
            | "diagnose"
            | "bugreport"
            | "mailinfo"
            | "difftool"
            | "fsmonitor--daemon"
            | "commit-graph"
            | "multi-pack-index"
    ) || sub.starts_with("credential")
        || (sub == "interpret-trailers" && options(rest).any(|v| v.starts_with("--in")))
        || (sub == "fast-export"
            && options(rest)
                .any(|v| v.starts_with("--export-marks") || v.starts_with("--import-marks")))
        || (sub == "help" && options(rest).any(|v| matches!(v, "-i" | "--info" | "-m" | "--man")))
        || (sub == "pack-objects" && !options(rest).any(|v| v == "--stdout"))
        || (sub == "notes"
            && rest.iter().any(|w| {
                matches!(
                    w.value.as_str(),
                    "add" | "append" | "edit" | "copy" | "merge" | "remove" | "prune"
                )
            }))
        || (sub == "hash-object" && options(rest).any(|v| v == "-w" || v == "--stdin-paths"))
    {
        return Some(format!(
            "`git {sub}` runs a program or writes files wherever it is told"
        ));
    }
    // Subcommands that create repositories, worktrees or bundles at a path: only plain paths
    // inside the work root.
    if matches!(
        sub,
        "init" | "clone" | "worktree" | "bundle" | "submodule" | "mv" | "merge-file"
    ) {
        for v in rest.iter().map(|w| w.value.as_str()) {
            let path = v.split_once('=').map_or(v, |(_, p)| p);
            if outside_path(path) {
                return Some(format!(
                    "`git {sub}` with `{v}` writes outside the work root or into a dot directory"
                ));
            }
        }
    }
    if matches!(sub, "apply" | "am")
        && (!options(rest).any(|v| matches!(v, "--check" | "--stat" | "--numstat" | "--summary"))
            || options(rest).any(|v| {
                matches!(v, "-3" | "-N")
                    || long_abbrev(
                        v,
                        &[
                            "apply",
                            "index",
                            "cached",
                            "3way",
                            "reject",
                            "intent-to-add",
                        ],
                    )
                    .is_some()
            }))
    {
        return Some(format!(
            "`git {sub}` writes the files a patch names (only --check/--stat/--numstat/--summary)"
        ));
    }
    for v in options(rest) {
        // Exact names of harmless options that are also prefixes of dangerous ones.
        if matches!(v, "--cc" | "--to" | "--header" | "--exec-path")
            || v.starts_with("--to=")
            || v.starts_with("--cc=")
        {
            continue;
        }
        if let Some(n) = long_abbrev(
            v,
            &[
                "upload-pack",
                "receive-pack",
                "exec",
                "output",
                "open-files-in-pager",
                "extcmd",
                "sendmail-cmd",
                "smtp-server",
                "to-cmd",
                "cc-cmd",
                "header-cmd",
                "config-env",
                "run",
                "output-directory",
            ],
        ) {
            if !(n == "run" && sub != "rebase") {
                return Some(format!("`--{n}` runs a program or writes a file"));
            }
        }
        let short_bad = match sub {
            "grep" => short_has(v, "O", "efABCm"),
            "fetch" | "clone" | "ls-remote" | "pull" => short_has(v, "u", "objc"),
            "archive" => short_has(v, "uo", ""),
            "rebase" => short_has(v, "x", "sXC"),
            "difftool" => short_has(v, "xt", ""),
            "log" | "diff" | "show" | "format-patch" | "whatchanged" => {
                v == "-o" || v.starts_with("-o") && sub == "format-patch"
            }
            _ => false,
        };
        if short_bad {
            return Some(format!(
                "option `{v}` for `git {sub}` runs a program or writes files"
            ));
        }
    }
    None
}

/// What a tar invocation writes. Creating an archive file and extracting are what a `tar` rule
/// authorises, but not where a path could leave the work root or reach a dotfile or .git
/// (absolute or `..` archive and `-C` paths), nor the options that forge such members
/// (`-P`, `--transform`, `-h`) or unlink what exists (`-U`, `--recursive-unlink`).
fn tar_writes(args: &[Word]) -> Option<String> {
    // Old-style and short options that take a value (consumed in order).
    const VALUED: &str = "bfgCFHIKLNTVX";
    let (mut extract, mut write, mut files_from) = (false, false, false);
    let mut paths: Vec<(&str, &str)> = Vec::new();
    // `-C ~/x` or `--file=$HOME/x`: bash expands these, so the path the gate sees is not the
    // path tar gets.
    if args.iter().any(|w| w.tilde || !w.vars.is_empty()) {
        return Some(
            "an argument expands (`~`, `$VAR`): the gate cannot tell where tar writes".into(),
        );
    }
    let all: Vec<&str> = options(args).collect();
    let mut k = 0;
    while let Some(&v) = all.get(k) {
        k += 1;
        let cluster = if let Some(long) = v.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or("");
            if name.is_empty() {
                continue;
            }
            let found = long_abbrev(
                v,
                &[
                    "extract",
                    "get",
                    "create",
                    "append",
                    "update",
                    "catenate",
                    "concatenate",
                    "delete",
                    "file",
                    "directory",
                    "absolute-names",
                    "transform",
                    "xform",
                    "dereference",
                    "hard-dereference",
                    "unlink-first",
                    "recursive-unlink",
                    "one-top-level",
                    "files-from",
                    "listed-incremental",
                    "incremental",
                    "backup",
                    "suffix",
                ],
            );
            match found {
                Some("extract" | "get") => extract = true,
                Some("create" | "append" | "update" | "catenate" | "concatenate" | "delete") => {
                    write = true
                }
                Some("files-from") => {
                    files_from = true;
                    if !long.contains('=') {
                        k += 1;
                    }
                }
                Some(n @ ("file" | "directory" | "one-top-level")) => {
                    let value = match long.split_once('=') {
                        Some((_, f)) => Some(f),
                        // `--one-top-level` takes its optional value attached only.
                        None if n == "one-top-level" => None,
                        None => {
                            k += 1;
                            all.get(k - 1).copied()
                        }
                    };
                    if let Some(f) = value {
                        paths.push((if n == "file" { "f" } else { "C" }, f));
                    }
                }
                Some(n) => {
                    return Some(format!(
                        "`--{n}` can write outside the work root or through links"
                    ))
                }
                None => {}
            }
            continue;
        } else if let Some(c) = v.strip_prefix('-') {
            c
        } else if k == 1 {
            if !v.chars().all(|c| c.is_ascii_alphabetic()) {
                return Some(format!("old-style options `{v}` are not understood"));
            }
            v // old style: `tar czf out.tar dir`
        } else {
            continue;
        };
        let old_style = !v.starts_with('-');
        for (n, ch) in cluster.char_indices() {
            match ch {
                'x' => extract = true,
                'c' | 'r' | 'u' | 'A' => write = true,
                'T' => files_from = true,
                'g' | 'G' => {
                    return Some(format!(
                        "`-{ch}` keeps an incremental snapshot file (written, and on extraction it deletes files)"
                    ))
                }
                'P' | 'h' | 'U' => {
                    return Some(format!(
                        "`-{ch}` can write outside the work root or through links"
                    ))
                }
                _ => {}
            }
            if VALUED.contains(ch) {
                let value = if old_style || n + 1 == cluster.len() {
                    k += 1;
                    all.get(k - 1).copied()
                } else {
                    Some(&cluster[n + 1..])
                };
                if let (Some(f), 'f' | 'C') = (value, ch) {
                    paths.push((if ch == 'f' { "f" } else { "C" }, f));
                }
                if !old_style {
                    break;
                }
            }
        }
    }
    if extract && files_from {
        return Some(
            "`-T` file lists can carry `-C DIR` lines that move the extraction anywhere".into(),
        );
    }
    for (opt, p) in paths {
        let archive = opt == "f";
        // The archive is written when creating; the directory when extracting.
        if (archive && !write) || (!archive && !extract) || p == "-" {
            continue;
        }
        if outside_path(p) {
            return Some(format!(
                "`-{opt} {p}` writes outside the work root or into a dotfile or .git"
            ));
        }
    }
    None
}

/// `git config` is allowed only as a read: `get`/`list` (new style) or `--get*`/`--list`, with
/// options whose arity the gate knows.
fn git_config_check(rest: &[Word]) -> Option<String> {
    const FLAGS: &[&str] = &[
        "--global",
        "--system",
        "--local",
        "--worktree",
        "--show-origin",
        "--show-scope",
        "--null",
        "-z",
        "--name-only",
        "--includes",
        "--no-includes",
        "--bool",
        "--int",
        "--path",
        "--bool-or-int",
        "--expiry-date",
        "--all",
        "--regexp",
        "--fixed-value",
        "--list",
        "-l",
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
    ];
    const VALUED: &[&str] = &["--file", "-f", "--blob", "--type", "--default", "--url"];
    let mut positional = Vec::new();
    let mut old_style_read = false;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let v = w.value.as_str();
        i += 1;
        if !v.starts_with('-') {
            positional.push(v);
            continue;
        }
        if FLAGS.contains(&v) {
            old_style_read |= v.starts_with("--get") || matches!(v, "--list" | "-l");
            continue;
        }
        if VALUED.contains(&v) {
            i += 1;
            continue;
        }
        if VALUED
            .iter()
            .any(|o| o.starts_with("--") && v.starts_with(&format!("{o}=")))
        {
            continue;
        }
        return Some(format!(
            "`git config` option `{v}` is not understood by the gate (only reads are allowed)"
        ));
    }
    let reads = if old_style_read {
        true
    } else {
        matches!(positional.first(), Some(&"get") | Some(&"list"))
            || (positional.len() == 1 && positional[0] != "edit")
    };
    (!reads).then(|| "`git config` writing configuration; only reads are allowed".into())
}

/// Allows only sed scripts without `e`, `w`, `W` (commands or `s///` flags), no `-i`, no `-f`.
fn sed_check(args: &[Word]) -> Result<(), String> {
    let mut scripts: Vec<&Word> = Vec::new();
    let mut sandbox = false;
    let mut i = 0;
    let mut explicit = false;
    let mut positional: Vec<&Word> = Vec::new();
    let mut opts_done = false;
    while let Some(w) = args.get(i) {
        let v = w.value.as_str();
        i += 1;
        if opts_done || !v.starts_with('-') || v == "-" {
            positional.push(w);
            continue;
        }
        if v == "--" {
            opts_done = true;
            continue;
        }
        if let Some(long) = v.strip_prefix("--") {
            let (name, val) = long
                .split_once('=')
                .map_or((long, None), |(n, x)| (n, Some(x)));
            let known = [
                "quiet",
                "silent",
                "regexp-extended",
                "separate",
                "unbuffered",
                "null-data",
                "posix",
                "debug",
                "sandbox",
                "expression",
                "line-length",
                "follow-symlinks",
                "in-place",
                "file",
                "binary",
                "zero-terminated",
            ];
            let full = known.iter().copied().find(|k| k.starts_with(name));
            match full {
                Some("in-place") => return Err("in-place editing writes files".into()),
                Some("file") => return Err("a script file cannot be checked".into()),
                Some("sandbox") => sandbox = true,
                Some("expression") => {
                    explicit = true;
                    match val {
                        Some(_) => return Err("`--expression=` scripts are not understood".into()),
                        None => {
                            scripts.extend(args.get(i));
                            i += 1;
                        }
                    }
                }
                Some("line-length") if val.is_none() => i += 1,
                Some(_) => {}
                None => return Err(format!("option `{v}` is not understood")),
            }
            continue;
        }
        let cluster: Vec<char> = v[1..].chars().collect();
        for (k, c) in cluster.iter().enumerate() {
            match c {
                'n' | 'E' | 'r' | 's' | 'u' | 'z' => {}
                'i' => return Err("`-i` in-place editing writes files".into()),
                'f' => return Err("a script file cannot be checked".into()),
                'l' => {
                    if k + 1 == cluster.len() {
                        i += 1;
                    }
                    break;
                }
                'e' => {
                    explicit = true;
                    if k + 1 < cluster.len() {
                        return Err("attached `-e` scripts are not understood".into());
                    }
                    scripts.extend(args.get(i));
                    i += 1;
                    break;
                }
                _ => return Err(format!("option `-{c}` is not understood")),
            }
        }
    }
    if !explicit {
        scripts.extend(positional.first());
    }
    if sandbox {
        return Ok(());
    }
    for s in scripts {
        if !s.literal() {
            return Err(format!("the script `{}` contains an expansion", s.raw));
        }
        sed_script_ok(&s.value)?;
    }
    Ok(())
}

fn sed_script_ok(script: &str) -> Result<(), String> {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    let eol = |i: &mut usize| {
        while *i < c.len() && c[*i] != '\n' {
            *i += 1;
        }
    };
    // Reads a delimited field (regex or replacement), honouring backslash escapes. In a
    // regex, GNU sed reads a bracket expression whole: the delimiter inside `[/]` is literal.
    let field = |i: &mut usize, d: char, regex: bool| -> Result<(), String> {
        while *i < c.len() {
            if c[*i] == '\\' {
                *i += 2;
                continue;
            }
            if regex && c[*i] == '[' {
                let mut j = *i + 1;
                if c.get(j) == Some(&'^') {
                    j += 1;
                }
                if c.get(j) == Some(&']') {
                    j += 1;
                }
                loop {
                    match c.get(j) {
                        None => return Err("unterminated bracket expression in a sed regex".into()),
                        Some('[') if matches!(c.get(j + 1), Some(':' | '.' | '=')) => {
                            let kind = c[j + 1];
                            j += 2;
                            while j + 1 < c.len() && !(c[j] == kind && c[j + 1] == ']') {
                                j += 1;
                            }
                            j += 2;
                        }
                        Some(']') => {
                            j += 1;
                            break;
                        }
                        Some(_) => j += 1,
                    }
                }
                *i = j;
                continue;
            }
            if c[*i] == d {
                *i += 1;
                return Ok(());
            }
            *i += 1;
        }
        Err("unterminated sed expression".into())
    };
    let address = |i: &mut usize| -> Result<(), String> {
        if *i < c.len() && (c[*i] == '/' || c[*i] == '\\') {
            let d = if c[*i] == '\\' {
                *i += 1;
                c.get(*i).copied().unwrap_or('/')
            } else {
                '/'
            };
            *i += 1;
            field(i, d, true)?;
            while *i < c.len() && (c[*i] == 'I' || c[*i] == 'M') {
                *i += 1;
            }
        } else {
            while *i < c.len()
                && (c[*i].is_ascii_digit() || c[*i] == '$' || c[*i] == '~' || c[*i] == '+')
            {
                *i += 1;
            }
        }
        Ok(())
    };
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() || ch == ';' || ch == '}' {
            i += 1;
            continue;
        }
        if ch == '#' {
            eol(&mut i);
            continue;
        }
        address(&mut i)?;
        if i < c.len() && c[i] == ',' {
            i += 1;
            address(&mut i)?;
        }
        while i < c.len() && (c[i] == ' ' || c[i] == '!') {
            i += 1;
        }
        let Some(&cmd) = c.get(i) else {
            return Err("missing sed command".into());
        };
        i += 1;
        match cmd {
            '{' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' | '}' => {}
            'l' | 'q' | 'Q' | 'L' => {
                while i < c.len() && (c[i].is_ascii_digit() || c[i] == ' ') {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                while i < c.len() && c[i] != '\n' && c[i] != ';' {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' | 'r' | 'R' => {
                // Text or a file name to read, up to the end of the line.
                while i < c.len() && c[i] != '\n' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            'w' | 'W' => return Err("the `w` command writes a file".into()),
            'e' => return Err("the `e` command runs a shell command".into()),
            's' | 'y' => {
                let Some(&d) = c.get(i) else {
                    return Err("unterminated sed expression".into());
                };
                if d == '\n' || d == '\\' {
                    return Err("unusual sed delimiter".into());
                }
                i += 1;
                field(&mut i, d, cmd == 's')?;
                field(&mut i, d, false)?;
                if cmd == 's' {
                    while i < c.len() && !matches!(c[i], ';' | '\n' | '}' | ' ') {
                        match c[i] {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            'e' => return Err("the `s///e` flag runs a shell command".into()),
                            'w' => return Err("the `s///w` flag writes a file".into()),
                            f => return Err(format!("unknown `s` flag `{f}`")),
                        }
                    }
                }
            }
            other => return Err(format!("sed command `{other}` is not understood")),
        }
    }
    Ok(())
}

/// The awk program with the contents of string and regex literals and comments removed (`""`,
/// `//` remain). A `/` starts a regex only where no operand precedes it (else it divides),
/// which is where every awk reads one too.
fn awk_skeleton(src: &str, brackets: bool) -> Result<String, String> {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut operand = false;
    let mut i = 0;
    while let Some(&ch) = c.get(i) {
        match ch {
            '"' => {
                i += 1;
                loop {
                    match c.get(i) {
                        None | Some('\n') => return Err("an awk string is not closed".into()),
                        Some('\\') => i += 2,
                        Some('"') => break,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
                out.push_str("\"\"");
                operand = true;
            }
            '/' if !operand => {
                i += 1;
                loop {
                    match c.get(i) {
                        None | Some('\n') => return Err("an awk regex is not closed".into()),
                        Some('\\') => i += 2,
                        Some('/') => break,
                        Some('[') if brackets => {
                            i += 1;
                            if c.get(i) == Some(&'^') {
                                i += 1;
                            }
                            if c.get(i) == Some(&']') {
                                i += 1;
                            }
                            while let Some(&b) = c.get(i) {
                                i += 1;
                                if b == ']' {
                                    break;
                                }
                                if b == '\n' {
                                    return Err("an awk regex is not closed".into());
                                }
                            }
                        }
                        Some(_) => i += 1,
                    }
                }
                i += 1;
                out.push_str("//");
                operand = true;
            }
            '#' => {
                while c.get(i).is_some_and(|&x| x != '\n') {
                    i += 1;
                }
            }
            '\\' if c.get(i + 1) == Some(&'\n') => i += 2,
            '/' => {
                // Read as division. Some awk might read a regex here instead (after `)` or a
                // keyword); that is harmless unless the rest of the line, which would then be
                // regex text, holds a `"` or `#` that changes how this skeleton reads it.
                let mut j = i + 1;
                let mut line = String::new();
                while let Some(&x) = c.get(j) {
                    if x == '\\' {
                        j += 2; // an escaped newline continues the line (and the regex)
                        line.push('\\');
                        continue;
                    }
                    if x == '\n' {
                        break;
                    }
                    line.push(x);
                    j += 1;
                }
                if line.contains('/') && line.contains(['"', '#']) {
                    return Err("a `/` could start a regex or divide; not understood".into());
                }
                out.push('/');
                operand = false;
                i += 1;
            }
            _ => {
                // `a++ / 2` divides: a postfix `++`/`--` ends an operand.
                let postfix = matches!(ch, '+' | '-') && i > 0 && c[i - 1] == ch;
                operand = postfix
                    || ch.is_alphanumeric()
                    || matches!(ch, '_' | ')' | ']' | '.' | '$')
                    || (ch.is_whitespace() && ch != '\n' && operand);
                out.push(ch);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn awk_check(args: &[Word]) -> Result<(), String> {
    let mut i = 0;
    let mut programs: Vec<&Word> = Vec::new();
    while let Some(w) = args.get(i) {
        let v = w.value.as_str();
        i += 1;
        if v == "--" {
            break;
        }
        if !v.starts_with('-') || v == "-" {
            i -= 1;
            break;
        }
        match v {
            "-F" | "-v" => i += 1,
            "-S" | "--sandbox" => return Ok(()),
            "-e" | "--source" => {
                programs.extend(args.get(i));
                i += 1;
            }
            _ if v.starts_with("-F") || v.starts_with("-v") => {}
            _ if v.starts_with("-f")
                || v.starts_with("--file")
                || v.starts_with("-E")
                || v.starts_with("--exec") =>
            {
                return Err("a program file cannot be checked".into())
            }
            _ if v.starts_with("-i")
                || v.starts_with("--include")
                || v.starts_with("-l")
                || v.starts_with("--load") =>
            {
                return Err("loading extensions or include files is denied".into())
            }
            "-b"
            | "-c"
            | "-P"
            | "-M"
            | "-N"
            | "-O"
            | "-r"
            | "-s"
            | "--posix"
            | "--traditional"
            | "--characters-as-bytes"
            | "--re-interval"
            | "--optimize" => {}
            _ => return Err(format!("option `{v}` is not understood")),
        }
    }
    if programs.is_empty() {
        programs.extend(args.get(i));
    }
    programs.into_iter().try_for_each(awk_program_ok)
}

/// One awk program text, judged on its skeleton.
fn awk_program_ok(p: &Word) -> Result<(), String> {
    if !p.literal() {
        return Err(format!("the program `{}` contains an expansion", p.raw));
    }
    // String and regex literals are data: judge the program's skeleton without them. Whether
    // a `/` inside `[...]` ends a regex differs between awks, so both readings must agree.
    let code = awk_skeleton(&p.value, false)?;
    if awk_skeleton(&p.value, true)? != code {
        return Err("a regex's bracket expression holds a `/`, which awks read differently".into());
    }
    // A newline after `,`, `&&`, `||` or `(` continues the statement (`print 1,\n2 > "f"`).
    let mut joined = String::with_capacity(code.len());
    for ch in code.chars() {
        let continues = joined
            .trim_end_matches([' ', '\t'])
            .ends_with([',', '&', '|', '(', '\\']);
        joined.push(if ch == '\n' && continues { ' ' } else { ch });
    }
    // `||` is logical or; `>` is a comparison unless it follows `print`/`printf` in the same
    // statement, where it redirects output to a file.
    let code = joined.replace("||", " ");
    let redirects = code.match_indices("print").any(|(k, _)| {
        code[k..]
            .split([';', '}', '\n'])
            .next()
            .is_some_and(|stmt| stmt.contains('>'))
    });
    if redirects {
        return Err("the program redirects `print` output to a file".into());
    }
    for bad in ["system", "|", "getline", "@", "ENVIRON"] {
        if code.contains(bad) {
            return Err(format!(
                "the program contains `{bad}` (running commands, pipes or writing files)"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lint and rendering
// ---------------------------------------------------------------------------------------------

/// Escape-hatch warnings for allow rules (interpreters, shells, find, xargs, env, timeout, awk, sed, bare git, cargo*/npm* raw prefixes, `*`...)
pub fn lint(policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for rule in &policy.allow {
        let t = &rule.text;
        match &rule.kind {
            RuleKind::Universal => out.push(format!(
                "allow rule `{t}` allows every command; only deny rules and the always-denied constructs still apply"
            )),
            RuleKind::Raw(p) => {
                let head = p.split_whitespace().next().unwrap_or("");
                let pm = ["cargo", "npm", "npx", "yarn", "pnpm", "pip", "pip3", "uv", "go", "gem", "bundle", "make", "poetry"];
                if pm.iter().any(|m| head.starts_with(m)) || p.is_empty() {
                    out.push(format!(
                        "allow rule `{t}` is a raw prefix with no word boundary: it also allows `{p}run`, `{p} install`, `{p} run …` and `{p}-anything`, which run arbitrary code"
                    ));
                } else {
                    out.push(format!(
                        "allow rule `{t}` is a raw prefix with no word boundary: it also allows `{p}-anything`; prefer `{} *`",
                        p.trim_end()
                    ));
                }
            }
            RuleKind::Exact(ws) | RuleKind::Words(ws) => {
                let first = ws.first().map(String::as_str).unwrap_or("");
                let b = basename(first).to_ascii_lowercase();
                let b = b.as_str();
                let msg = if SHELLS.contains(&b) {
                    Some("is a shell: it runs any script it is given (the gate still checks `-c` strings)")
                } else if INTERPRETERS.contains(&b) && !matches!(b, "awk" | "gawk" | "mawk" | "nawk") {
                    Some("is an interpreter: its code can run any program, which no rule can see")
                } else if matches!(b, "awk" | "gawk" | "mawk" | "nawk" | "sed") {
                    Some("can run commands or write files from its script (the gate denies the forms it knows: system, |, >, e, w, -i)")
                } else if matches!(b, "find") {
                    Some("can run commands (-exec) and delete files; the gate judges -exec commands against the rules and denies -delete/-fprint")
                } else if matches!(
                    b,
                    "xargs" | "env" | "timeout" | "nice" | "nohup" | "command" | "builtin" | "stdbuf"
                        | "setsid" | "sudo" | "doas" | "busybox" | "watch" | "time"
                ) {
                    Some("runs other commands; the gate judges the command it runs against the rules too")
                } else if b == "git" && ws.len() == 1 {
                    Some("allows every git subcommand (push, config, hooks run by commit...); list subcommands instead, e.g. `git status`, `git diff *`")
                } else if OPAQUE_RUNNERS.contains(&b) {
                    Some("runs other commands in a way the gate cannot follow")
                } else if matches!(b, "cargo" | "npm" | "yarn" | "pnpm" | "make" | "go") && ws.len() == 1 {
                    Some("allows `run`/`install`/scripts, which execute arbitrary code")
                } else {
                    None
                };
                if let Some(m) = msg {
                    out.push(format!("allow rule `{t}`: `{first}` {m}"));
                }
            }
            RuleKind::Path(p) => {
                if p == "." || p == "./" || p == "/" {
                    out.push(format!("allow rule `{t}` allows every script in `{p}`"));
                }
            }
        }
    }
    out
}

/// Control characters (a CR hidden in a command word) shown as escapes, so a person sees them.
fn visible(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Human-readable rendering for `harness gate`: the verdict with its reason, one line per
/// segment (verdict, the segment as written, the rule or the reason), run-time checks, then
/// lint warnings.
pub fn render_human(judgement: &Judgement, warnings: &[String]) -> String {
    let mut out = String::new();
    let total = judgement.segments.len();
    let denied = judgement
        .segments
        .iter()
        .filter(|s| s.verdict == Verdict::Deny)
        .count();
    let _ = match judgement.verdict {
        Verdict::Allow if total == 1 => writeln!(out, "ALLOW: the command is allowed"),
        Verdict::Allow => writeln!(out, "ALLOW: all {total} segments are allowed"),
        Verdict::Deny if total > 1 && denied > 0 => writeln!(
            out,
            "DENY: {} ({denied} of {total} segments denied)",
            visible(&judgement.reason)
        ),
        Verdict::Deny => writeln!(out, "DENY: {}", visible(&judgement.reason)),
    };
    let shown: Vec<String> = judgement
        .segments
        .iter()
        .map(|s| {
            let text: String = s
                .text
                .chars()
                .take(60)
                .map(|c| {
                    if c.is_control() {
                        c.escape_debug().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            if s.text.chars().count() > 60 {
                format!("{text}...")
            } else {
                text
            }
        })
        .collect();
    let width = shown.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    for (s, text) in judgement.segments.iter().zip(&shown) {
        let mark = match s.verdict {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny ",
        };
        let why = match (&s.rule, s.verdict) {
            (Some(r), Verdict::Allow) if s.reason == format!("allowed by rule `{r}`") => {
                format!("rule `{r}`")
            }
            _ => s.reason.clone(),
        };
        // The command word after quote removal, when it differs from what is written.
        let word = match &s.command_word {
            Some(w) if !s.text.trim_start().starts_with(w.as_str()) => {
                format!(" (command word `{w}`)")
            }
            _ => String::new(),
        };
        let pad = width - text.chars().count();
        let (why, word) = (visible(&why), visible(&word));
        let _ = writeln!(out, "  {mark}  {text}{:pad$}  {why}{word}", "");
    }
    for (path, prefix) in &judgement.runtime_path_checks {
        let _ = writeln!(
            out,
            "  run-time check: `{path}` must resolve under `{prefix}`"
        );
    }
    for w in warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The policies of the case table, as `[tools.bash]` tables.
    const POLICIES: &str = include_str!("../../tests/data/gate_policies.toml");
    /// The case table, also run end to end through `harness gate` by tests/gate.rs.
    const CASES: &str = include_str!("../../tests/data/gate_cases.txt");

    fn rules(list: &[&str]) -> Vec<Rule> {
        list.iter().map(|r| Rule::parse(r).unwrap()).collect()
    }

    /// A policy of gate_policies.toml by name.
    fn named(name: &str) -> Policy {
        let all: toml::Table = POLICIES.parse().unwrap();
        let t = &all[name];
        let list = |key: &str| -> Vec<Rule> {
            let texts: Vec<&str> = t[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            rules(&texts)
        };
        Policy {
            default: match t["default"].as_str().unwrap() {
                "allow" => Verdict::Allow,
                _ => Verdict::Deny,
            },
            allow: list("allow"),
            deny: list("deny"),
            write_redirects: t["write_redirects"].as_bool().unwrap(),
        }
    }

    /// The representative policy most cases run under.
    fn policy() -> Policy {
        named("policy")
    }

    /// Everything allowed, nothing denied: only the always-denied constructs apply.
    fn star() -> Policy {
        named("star")
    }

    /// Everything allowed except what the deny rules name.
    fn star_deny() -> Policy {
        named("star_deny")
    }

    fn writes() -> Policy {
        named("writes")
    }

    /// Every case of the table: `POLICY VERDICT NAME COMMAND` (COMMAND a JSON string).
    #[test]
    fn case_table() {
        let mut failures = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for line in CASES.lines() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.splitn(4, ' ');
            let (policy, verdict, name, command) = (
                fields.next().unwrap(),
                fields.next().unwrap(),
                fields.next().unwrap(),
                fields.next().unwrap(),
            );
            assert!(names.insert(name), "duplicate case name {name}");
            let command: String = serde_json::from_str(command).unwrap();
            let want = match verdict {
                "allow" => Verdict::Allow,
                "deny" => Verdict::Deny,
                other => panic!("{name}: bad verdict {other}"),
            };
            let j = judge(&named(policy), &command);
            if j.verdict != want {
                failures.push(format!(
                    "{name} ({policy}): want {verdict}\n{}",
                    render_human(&j, &[])
                ));
            }
        }
        assert!(names.len() >= 400, "only {} cases", names.len());
        assert!(
            failures.is_empty(),
            "{} of {} cases failed:\n{}",
            failures.len(),
            names.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn rule_parse_kinds() {
        assert_eq!(Rule::parse("*").unwrap().kind, RuleKind::Universal);
        assert_eq!(
            Rule::parse("pwd").unwrap().kind,
            RuleKind::Exact(vec!["pwd".into()])
        );
        assert_eq!(
            Rule::parse("git diff *").unwrap().kind,
            RuleKind::Words(vec!["git".into(), "diff".into()])
        );
        assert_eq!(
            Rule::parse("cargo*").unwrap().kind,
            RuleKind::Raw("cargo".into())
        );
        assert_eq!(
            Rule::parse("./scripts/**").unwrap().kind,
            RuleKind::Path("./scripts".into())
        );
        assert_eq!(Rule::parse("  ls *  ").unwrap().as_str(), "ls *");
    }

    #[test]
    fn rule_parse_errors() {
        assert!(Rule::parse("").is_err());
        assert!(Rule::parse("   ").is_err());
        assert!(Rule::parse("git * diff").is_err());
        assert!(Rule::parse("/**").is_err());
        assert!(Rule::parse("ls\n*").is_err());
    }

    #[test]
    fn raw_prefix_has_no_boundary() {
        let p = Policy {
            allow: rules(&["cargo*"]),
            ..policy()
        };
        assert_eq!(judge(&p, "cargo-evil").verdict, Verdict::Allow);
        assert_eq!(judge(&p, "cargo build").verdict, Verdict::Allow);
        assert_eq!(judge(&p, "cargo build; id").verdict, Verdict::Deny);
        assert_eq!(judge(&p, "cargo $(id)").verdict, Verdict::Deny);
    }

    #[test]
    fn default_allow_applies_to_unmatched() {
        let p = Policy {
            default: Verdict::Allow,
            ..policy()
        };
        assert_eq!(judge(&p, "touch x").verdict, Verdict::Allow);
        assert_eq!(judge(&p, "rm x").verdict, Verdict::Deny);
        assert_eq!(judge(&p, "touch $(id)").verdict, Verdict::Deny);
    }

    #[test]
    fn deny_beats_allow() {
        let p = Policy {
            allow: rules(&["rm *"]),
            deny: rules(&["rm -rf *"]),
            ..policy()
        };
        assert_eq!(judge(&p, "rm x").verdict, Verdict::Allow);
        assert_eq!(judge(&p, "rm -rf x").verdict, Verdict::Deny);
    }

    #[test]
    fn judgement_names_rule_and_segments() {
        let j = judge(&policy(), "ls -la && rm -rf /");
        assert_eq!(
            j,
            Judgement {
                command: "ls -la && rm -rf /".into(),
                verdict: Verdict::Deny,
                reason: "denied by rule `rm *`".into(),
                segments: vec![
                    SegmentJudgement {
                        text: "ls -la".into(),
                        command_word: Some("ls".into()),
                        verdict: Verdict::Allow,
                        rule: Some("ls *".into()),
                        reason: "allowed by rule `ls *`".into(),
                    },
                    SegmentJudgement {
                        text: "rm -rf /".into(),
                        command_word: Some("rm".into()),
                        verdict: Verdict::Deny,
                        rule: Some("rm *".into()),
                        reason: "denied by rule `rm *`".into(),
                    },
                ],
                runtime_path_checks: vec![],
            }
        );
    }

    #[test]
    fn path_rule_requests_runtime_check() {
        let j = judge(&policy(), "./scripts/build.sh --release");
        assert_eq!(j.verdict, Verdict::Allow);
        assert_eq!(
            j.runtime_path_checks,
            vec![("./scripts/build.sh".to_string(), "./scripts".to_string())]
        );
        let j = judge(&writes(), "echo hi > out.txt");
        assert_eq!(
            j.runtime_path_checks,
            vec![("out.txt".to_string(), ".".to_string())]
        );
    }

    #[test]
    fn json_shape() {
        let j = judge(&policy(), "pwd");
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["verdict"], "allow");
        assert_eq!(v["segments"][0]["command_word"], "pwd");
    }

    #[test]
    fn lint_flags_escape_hatches() {
        let p = Policy {
            allow: rules(&[
                "*",
                "python3 *",
                "bash *",
                "find *",
                "xargs *",
                "env *",
                "timeout *",
                "awk *",
                "sed *",
                "git *",
                "cargo*",
                "npm*",
                "ls *",
            ]),
            ..policy()
        };
        let w = lint(&p);
        assert_eq!(w.len(), 12, "{w:#?}");
        assert!(w.iter().all(|m| !m.contains("`ls *`")));
        assert!(lint(&policy()).iter().any(|m| m.contains("`find *`")));
    }

    #[test]
    fn render_human_lists_segments_and_warnings() {
        let j = judge(&policy(), "ls; rm x");
        let out = render_human(&j, &["allow rule `*` ...".to_string()]);
        assert_eq!(
            out,
            "DENY: denied by rule `rm *` (1 of 2 segments denied)\n  allow  ls    rule `ls *`\n  deny   rm x  denied by rule `rm *`\nwarning: allow rule `*` ...\n"
        );
    }

    #[test]
    fn oversized_input_is_denied() {
        let cmd = "ls ".repeat(MAX_INPUT_BYTES / 3 + 10);
        let j = judge(&star(), &cmd);
        assert_eq!(j.verdict, Verdict::Deny);
        assert!(j.reason.contains("limit"), "{}", j.reason);
    }

    #[test]
    fn long_compound_command_finishes() {
        // About 100 KB of allowed segments; no timing assertion (see the bench note in DESIGN).
        let cmd = "ls -la && git status; ".repeat(100 * 1024 / 22);
        let j = judge(&policy(), &cmd);
        assert_eq!(j.verdict, Verdict::Allow, "{}", j.reason);
        assert!(j.segments.len() > 9000);
    }

    #[test]
    fn deep_nesting_is_denied_without_panicking() {
        let deep = format!("{}ls{}", "$(".repeat(5000), ")".repeat(5000));
        assert_eq!(judge(&star(), &deep).verdict, Verdict::Deny);
        let mut nested = "ls".to_string();
        for _ in 0..4 {
            nested = format!("bash -c {}", shell_quote(&nested));
        }
        assert_eq!(judge(&star(), &nested).verdict, Verdict::Allow);
        let nested = format!("{}{nested}", "nice ".repeat(MAX_DEPTH));
        let j = judge(&star(), &nested);
        assert_eq!(j.verdict, Verdict::Deny, "{}", j.reason);
        assert!(j.reason.contains("nest"), "{}", j.reason);
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', "'\\''"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn never_panics_on_arbitrary_strings(s in "\\PC*") {
            let _ = judge(&policy(), &s);
            let _ = judge(&star_deny(), &s);
        }

        #[test]
        fn never_panics_on_shell_alphabet(s in "[ \\t\\n\\r;&|<>()${}`'\"\\\\#*?~=a-z0-9!@/.\\-]{0,200}") {
            let _ = judge(&policy(), &s);
            let _ = judge(&writes(), &s);
        }

        #[test]
        fn never_panics_on_deep_nesting(depth in 0usize..400, open in "[({\\[`'\"]|\\$\\(|<\\(|bash -c '") {
            let s = format!("{}ls{}", open.repeat(depth), ")".repeat(depth));
            let _ = judge(&star(), &s);
        }
    }
}
