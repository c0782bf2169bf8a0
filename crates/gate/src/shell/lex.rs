//! tools stage (gate), PURE: the gate's own bash tokenizer: words, redirections and segments of the
//! simple commands it understands; everything else is an error.

/// Inputs with more segments than this are denied.
pub(crate) const MAX_SEGMENTS: usize = 20_000;

#[derive(Debug, Clone, Default)]
pub(crate) struct Word {
    pub(crate) raw: String,
    /// The word after quote removal (expansions kept as written).
    pub(crate) value: String,
    /// Parameter expansions (`$NAME`, `$1`, `$_`) the word contains, quoted or not.
    pub(crate) vars: Vec<String>,
    /// Unquoted `*`, `?` or `[…]`.
    pub(crate) glob: bool,
    /// An unquoted `[` was seen (it globs once a `]` follows).
    pub(crate) bracket: bool,
    /// Unquoted `{` or `}`.
    pub(crate) brace: bool,
    /// Unquoted `~` at the start.
    pub(crate) tilde: bool,
    /// `$'…'` quoting.
    pub(crate) ansi_c: bool,
    /// Any quote or escape character.
    pub(crate) quoted: bool,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

impl Word {
    pub(crate) fn synthetic(value: &str) -> Word {
        Word {
            raw: value.to_string(),
            value: value.to_string(),
            ..Word::default()
        }
    }

    /// True when the word's value is known from the text alone. Braces expand only around an
    /// unquoted `,` or `..` (`{a,b}`, `{1..3}`); `{}` as in `xargs -I{}` is literal.
    pub(crate) fn literal(&self) -> bool {
        let brace_expands = self.brace && (self.value.contains(',') || self.value.contains(".."));
        self.vars.is_empty() && !self.glob && !brace_expands && !self.tilde
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Redir {
    pub(crate) op: &'static str,
    pub(crate) target: Word,
    /// For `<<` and `<<-`: (delimiter was quoted, body).
    pub(crate) heredoc: Option<(bool, String)>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Segment {
    pub(crate) start: Option<usize>,
    pub(crate) end: usize,
    pub(crate) words: Vec<Word>,
    pub(crate) redirs: Vec<Redir>,
    /// Ended with `|&`, which bash (and brush) treat as an added `2>&1`.
    pub(crate) pipe_amp: bool,
    /// Ended with `|` or `|&`: the next segment reads this one's output on stdin.
    pub(crate) pipe_out: bool,
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

/// Whose grammar a script is read with: the shell that runs it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// bash.
    Bash,
    /// Any other shell the gate reads (sh/dash, ash, ksh, yash, zsh): the forms where those
    /// shells and bash part ways are denied: `&>` (dash backgrounds and runs the next word),
    /// `|&`, `<<<`, `$'…'` (older dash reads `$` and a quoted string; zsh decodes escapes
    /// its own way), rather than guess a shell and its version.
    Posix,
}

pub(crate) struct Lexer<'a> {
    pub(crate) src: &'a str,
    pub(crate) dialect: Dialect,
    pub(crate) chars: Vec<(usize, char)>,
    pub(crate) i: usize,
    pub(crate) segs: Vec<Segment>,
    pub(crate) cur: Segment,
    pub(crate) word: Option<Word>,
    /// A redirection operator waiting for its target word: (operator, start offset).
    pub(crate) pending: Option<(&'static str, usize)>,
    /// Heredocs whose bodies start after the next newline: (segment index, redirection index).
    pub(crate) heredocs: Vec<(usize, usize)>,
    /// After `&&`, `||`, `|`, `|&` another command must follow.
    pub(crate) need_cmd: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sep {
    Newline,
    Semi,
    Amp,
    AndOr,
    Pipe,
    PipeAmp,
    Eof,
}

impl<'a> Lexer<'a> {
    pub(crate) fn with_dialect(src: &'a str, dialect: Dialect) -> Self {
        Lexer {
            src,
            dialect,
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

    pub(crate) fn run(mut self) -> Result<Vec<Segment>, String> {
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
                '&' if next == Some('>') => self.lex_redirect()?,
                ';' | '&' | '|' => self.lex_separator(c, next)?,
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
                '\'' => self.lex_single_quote()?,
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
                _ => self.lex_plain(c),
            }
        }
        self.end_segment(Sep::Eof)?;
        if !self.heredocs.is_empty() {
            return Err("a heredoc has no body (input ends before its delimiter)".into());
        }
        Ok(self.segs)
    }

    /// `;`, `&`, `&&`, `|`, `||`, `|&` (`c` and the character after it, past line
    /// continuations): ends the segment.
    fn lex_separator(&mut self, c: char, next: Option<char>) -> Result<(), String> {
        match c {
            ';' => {
                if matches!(next, Some(';' | '&')) {
                    return Err("`;;`/`;&` belong to `case`, which the gate does not allow".into());
                }
                self.end_segment(Sep::Semi)?;
                self.i += 1;
            }
            '&' => {
                if next == Some('&') {
                    self.end_segment(Sep::AndOr)?;
                    self.i = self.skip_cont(self.i + 1) + 1;
                } else {
                    self.end_segment(Sep::Amp)?;
                    self.i += 1;
                }
            }
            _ => {
                if next == Some('|') {
                    self.end_segment(Sep::AndOr)?;
                } else if next == Some('&') {
                    self.posix_refuses("|&")?;
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
        }
        Ok(())
    }

    /// `'…'`: the text up to the next `'`, as it is.
    fn lex_single_quote(&mut self) -> Result<(), String> {
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
        Ok(())
    }

    /// An unquoted character of a word: globs, braces and tildes are marked on the word.
    fn lex_plain(&mut self, c: char) {
        let at_start = self.word.is_none();
        let w = self.word_mut();
        match c {
            '*' | '?' => w.glob = true,
            // `[` only globs when a `]` closes it in the same word.
            '[' => w.bracket = true,
            ']' if w.bracket => w.glob = true,
            '{' | '}' => w.brace = true,
            '~' if at_start => w.tilde = true,
            // bash also expands a tilde after `=` or `:` in a word that looks
            // like an assignment (`a=~/x`, `--o=~` is not, `p=a:~`): mark all.
            '~' if w.value.ends_with(['=', ':']) => w.tilde = true,
            _ => {}
        }
        w.value.push(c);
        self.i += 1;
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
            Some('\'') if !in_dq => {
                self.posix_refuses("$'…'")?;
                self.lex_ansi_c(j + 1)
            }
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

    /// Reads `$'…'` starting after the opening quote, in bash's two steps: the tokenizer finds
    /// the closing quote (a backslash skips the next character, whatever it is), then the text
    /// between is decoded ([`ansi_c_decode`]).
    fn lex_ansi_c(&mut self, start: usize) -> Result<(), String> {
        let mut j = start;
        loop {
            match self.at(j) {
                None => return Err("syntax error: unterminated `$'…'`".into()),
                Some('\\') if self.at(j + 1).is_some() => j += 2,
                Some('\\') => return Err("syntax error: unterminated `$'…'`".into()),
                Some('\'') => break,
                Some(_) => j += 1,
            }
        }
        let body: Vec<char> = self.chars[start..j].iter().map(|&(_, c)| c).collect();
        let out = ansi_c_decode(&body)?;
        let w = self.word_mut();
        w.ansi_c = true;
        w.quoted = true;
        w.value.push_str(&out);
        self.i = j + 1;
        Ok(())
    }

    /// A bash-only form in a script a POSIX shell runs.
    fn posix_refuses(&self, form: &str) -> Result<(), String> {
        if self.dialect == Dialect::Posix {
            return Err(format!(
                "`{form}` is bash syntax, but this script is run by a POSIX shell (dash reads it differently); denied"
            ));
        }
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
            (Some('<'), Some('<'), Some('<')) => {
                self.posix_refuses("<<<")?;
                ("<<<", j2 + 1)
            }
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
            (Some('&'), Some('>'), Some('>')) => {
                self.posix_refuses("&>>")?;
                ("&>>", j2 + 1)
            }
            (Some('&'), Some('>'), _) => {
                self.posix_refuses("&>")?;
                ("&>", j1 + 1)
            }
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
            let quoted = redir.target.quoted;
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
                // In an unquoted heredoc bash joins backslash-newline before it compares a line
                // with the delimiter (`E\` + an empty line ends the body), and a backslash
                // pair is no continuation (`\\` + newline).
                let mut line = String::new();
                while let Some(c) = self.at(self.i) {
                    self.i += 1;
                    if c == '\n' {
                        break;
                    }
                    if c == '\\' && !quoted {
                        match self.at(self.i) {
                            Some('\n') => {
                                self.i += 1;
                                continue;
                            }
                            Some(n) => {
                                line.push(c);
                                line.push(n);
                                self.i += 1;
                                continue;
                            }
                            None => {}
                        }
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

const NUL: &str = "`$'…'` decodes to a NUL byte, which bash truncates at";
const HIGH: &str = "`$'…'` decodes to a non-ASCII byte whose value depends on the locale";

/// Decodes the text of `$'…'` (without its quotes) exactly as bash 5's `ansicstr` does in the
/// C locale. What would differ by locale or truncate the word (a NUL, a byte above 0x7f, a
/// `\\u` escape above 0x7f) is an error: the gate cannot know the value bash passes.
pub(crate) fn ansi_c_decode(body: &[char]) -> Result<String, String> {
    let mut out = String::new();
    let mut j = 0;
    while let Some(&c) = body.get(j) {
        j += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = body.get(j) else {
            out.push('\\');
            break;
        };
        j += 1;
        if let Some(s) = simple_escape(e) {
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
                // `\c` takes the next character, whatever it is (a backslash too, and a second
                // backslash after it is skipped); `\c` at the very end stays as written.
                let Some(&x) = body.get(j) else {
                    out.push_str("\\c");
                    break;
                };
                j += 1;
                if x == '\\' && body.get(j) == Some(&'\\') {
                    j += 1;
                }
                out.extend(char::from_u32(control_code(x)?));
                continue;
            }
            _ => {
                out.push('\\');
                out.push(e);
                continue;
            }
        };
        let Some(mut n) = number(body, &mut j, radix, max) else {
            out.push('\\');
            out.push(e);
            continue;
        };
        if radix == 8 {
            n &= 0xff;
        }
        if n == 0 {
            return Err(NUL.into());
        }
        if n > 0x7f {
            return Err(HIGH.into());
        }
        out.extend(char::from_u32(n));
    }
    Ok(out)
}

/// The one-letter escapes of `$'…'`.
fn simple_escape(e: char) -> Option<char> {
    match e {
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
    }
}

/// The code `\cX` stands for (`\c?` is DEL), or why bash's value cannot be known.
fn control_code(x: char) -> Result<u32, String> {
    if !x.is_ascii() {
        return Err(HIGH.into());
    }
    let code = if x == '?' {
        0x7f
    } else {
        (x.to_ascii_uppercase() as u32) & 0x1f
    };
    if code == 0 {
        return Err(NUL.into());
    }
    Ok(code)
}

/// Up to `max` digits in `radix` from `j` on (advanced past them); `None` with no digit.
fn number(body: &[char], j: &mut usize, radix: u32, max: usize) -> Option<u32> {
    let mut n: u32 = 0;
    let mut digits = 0;
    while digits < max {
        match body.get(*j).and_then(|d| d.to_digit(radix)) {
            Some(d) => {
                n = n.saturating_mul(radix).saturating_add(d);
                digits += 1;
                *j += 1;
            }
            None => break,
        }
    }
    (digits > 0).then_some(n)
}

/// What a command reads on stdin: another segment's output, heredoc and here-string text, a
/// file, or what the shell running its script was given.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stdin {
    pub(crate) piped: bool,
    pub(crate) texts: Vec<String>,
    /// Input redirected from a file or descriptor (`< keys`, `<&3`, `<>`), not `/dev/null`.
    pub(crate) redirected: bool,
}

impl Stdin {
    /// Does the command get input the model chose (anything but the harness's /dev/null)?
    pub(crate) fn given(&self) -> bool {
        self.piped || self.redirected || !self.texts.is_empty()
    }

    /// A segment's own stdin joined with what the script around it was given: a command in
    /// `sh -c 'python3'` reads the stdin of `sh`.
    pub(crate) fn with(mut self, outer: &Stdin) -> Stdin {
        self.piped |= outer.piped;
        self.redirected |= outer.redirected;
        self.texts.extend(outer.texts.iter().cloned());
        self
    }
}
