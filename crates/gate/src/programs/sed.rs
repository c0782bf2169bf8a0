//! tools stage (gate), PURE: sed (sed, gsed): scripts without `e`, `w`, `W`, no script files;
//! `-i` (in-place editing) read as GNU sed 4.9 reads it, so the judge can hold each file it
//! rewrites to the rules of output redirection.

use crate::shell::lex::Word;

/// sed's arguments as GNU sed reads them.
pub(crate) struct SedArgs<'a> {
    /// The scripts (`-e`, or the first operand).
    pub(crate) scripts: Vec<&'a Word>,
    /// `-i[SUFFIX]`/`--in-place[=SUFFIX]`: the backup suffix ("" for none).
    pub(crate) in_place: Option<String>,
    /// The input files (rewritten in place under `-i`).
    pub(crate) files: Vec<&'a Word>,
    /// `--sandbox`: sed itself refuses `e`, `w` and `r`.
    pub(crate) sandbox: bool,
    /// The script is the first operand (no `-e`/`--expression`).
    pub(crate) script_operand: bool,
}

/// What sed's options say, gathered while they are read.
#[derive(Default)]
struct Options<'a> {
    scripts: Vec<&'a Word>,
    sandbox: bool,
    in_place: Option<String>,
    /// A script was given with `-e`/`--expression`.
    explicit: bool,
}

/// The long options of GNU sed 4.9, in the order an abbreviation is resolved.
const LONG_OPTIONS: &[&str] = &[
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

/// Reads sed's options as GNU sed's getopt_long does (options may follow operands until
/// `--`; `-i`'s suffix is the rest of its cluster: `-ie` is suffix `e`, `-Ei` none).
pub(crate) fn sed_args(args: &[Word]) -> Result<SedArgs<'_>, String> {
    let mut o = Options::default();
    let mut i = 0;
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
        i += match v.strip_prefix("--") {
            Some(long) => long_option(&mut o, v, long, args.get(i))?,
            None => short_cluster(&mut o, v, args.get(i))?,
        };
    }
    let mut scripts = o.scripts;
    let files = if o.explicit {
        positional
    } else {
        let mut rest = positional.into_iter();
        scripts.extend(rest.next());
        rest.collect()
    };
    Ok(SedArgs {
        scripts,
        in_place: o.in_place,
        files,
        sandbox: o.sandbox,
        script_operand: !o.explicit,
    })
}

/// One long option (`long` without its dashes; `next` the word after it): the number of
/// following words it takes, or why it is refused.
fn long_option<'a>(
    o: &mut Options<'a>,
    v: &str,
    long: &str,
    next: Option<&'a Word>,
) -> Result<usize, String> {
    let (name, val) = long
        .split_once('=')
        .map_or((long, None), |(n, x)| (n, Some(x)));
    let full = LONG_OPTIONS.iter().copied().find(|k| k.starts_with(name));
    match full {
        Some("in-place") => o.in_place = Some(val.unwrap_or_default().to_string()),
        Some("file") => return Err("a script file cannot be checked".into()),
        Some("sandbox") => o.sandbox = true,
        Some("expression") => {
            o.explicit = true;
            match val {
                Some(_) => return Err("`--expression=` scripts are not understood".into()),
                None => {
                    o.scripts.extend(next);
                    return Ok(1);
                }
            }
        }
        Some("line-length") if val.is_none() => return Ok(1),
        Some(_) => {}
        None => return Err(format!("option `{v}` is not understood")),
    }
    Ok(0)
}

/// A cluster of short options (`-nE`, `-i.bak`, `-e`; `next` the word after it): the number
/// of following words it takes, or why it is refused.
fn short_cluster<'a>(
    o: &mut Options<'a>,
    v: &str,
    next: Option<&'a Word>,
) -> Result<usize, String> {
    let cluster: Vec<char> = v[1..].chars().collect();
    for (k, c) in cluster.iter().enumerate() {
        match c {
            'n' | 'E' | 'r' | 's' | 'u' | 'z' => {}
            'i' => {
                // An optional argument: the rest of the cluster, never the next word.
                o.in_place = Some(cluster[k + 1..].iter().collect());
                return Ok(0);
            }
            'f' => return Err("a script file cannot be checked".into()),
            'l' => return Ok(usize::from(k + 1 == cluster.len())),
            'e' => {
                o.explicit = true;
                if k + 1 < cluster.len() {
                    return Err("attached `-e` scripts are not understood".into());
                }
                o.scripts.extend(next);
                return Ok(1);
            }
            _ => return Err(format!("option `-{c}` is not understood")),
        }
    }
    Ok(0)
}

/// Allows only sed scripts without `e`, `w`, `W` (commands or `s///` flags), no `-f`. Where
/// `-i` writes is the judge's part ([`sed_args`] gives the files).
pub(crate) fn sed_check(args: &[Word]) -> Result<(), String> {
    let parsed = sed_args(args)?;
    if parsed.sandbox {
        return Ok(());
    }
    for s in parsed.scripts {
        if !s.literal() {
            return Err(format!("the script `{}` contains an expansion", s.raw));
        }
        sed_script_ok(&s.value)?;
    }
    Ok(())
}

pub(crate) fn sed_script_ok(script: &str) -> Result<(), String> {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() || ch == ';' || ch == '}' {
            i += 1;
            continue;
        }
        if ch == '#' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        }
        address(&c, &mut i)?;
        if i < c.len() && c[i] == ',' {
            i += 1;
            address(&c, &mut i)?;
        }
        while i < c.len() && (c[i] == ' ' || c[i] == '!') {
            i += 1;
        }
        let Some(&cmd) = c.get(i) else {
            return Err("missing sed command".into());
        };
        i += 1;
        command(&c, &mut i, cmd)?;
    }
    Ok(())
}

/// Reads what follows the command letter `cmd` (its label, text, file name or fields), or
/// why the command is refused.
fn command(c: &[char], i: &mut usize, cmd: char) -> Result<(), String> {
    match cmd {
        '{' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F'
        | '}' => {}
        'l' | 'q' | 'Q' | 'L' => {
            while *i < c.len() && (c[*i].is_ascii_digit() || c[*i] == ' ') {
                *i += 1;
            }
        }
        ':' | 'b' | 't' | 'T' | 'v' => {
            // GNU sed (4.9) ends a label, and `v`'s version, at whitespace or `;`: what
            // follows is the next command (`:a e id` runs `id`).
            while *i < c.len() && (c[*i] == ' ' || c[*i] == '\t') {
                *i += 1;
            }
            while *i < c.len() && !c[*i].is_whitespace() && c[*i] != ';' {
                *i += 1;
            }
        }
        'a' | 'i' | 'c' | 'r' | 'R' => {
            // Text or a file name to read, up to the end of the line.
            while *i < c.len() && c[*i] != '\n' {
                if c[*i] == '\\' {
                    *i += 1;
                }
                *i += 1;
            }
        }
        'w' | 'W' => return Err("the `w` command writes a file".into()),
        'e' => return Err("the `e` command runs a shell command".into()),
        's' | 'y' => {
            let Some(&d) = c.get(*i) else {
                return Err("unterminated sed expression".into());
            };
            if d == '\n' || d == '\\' {
                return Err("unusual sed delimiter".into());
            }
            *i += 1;
            field(c, i, d, cmd == 's')?;
            field(c, i, d, false)?;
            if cmd == 's' {
                s_flags(c, i)?;
            }
        }
        other => return Err(format!("sed command `{other}` is not understood")),
    }
    Ok(())
}

/// The flags after `s///`: `e` runs a shell command, `w` writes a file.
fn s_flags(c: &[char], i: &mut usize) -> Result<(), String> {
    while *i < c.len() && !matches!(c[*i], ';' | '\n' | '}' | ' ') {
        match c[*i] {
            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => *i += 1,
            'e' => return Err("the `s///e` flag runs a shell command".into()),
            'w' => return Err("the `s///w` flag writes a file".into()),
            f => return Err(format!("unknown `s` flag `{f}`")),
        }
    }
    Ok(())
}

/// Reads an address: a `/regex/` or `\cregexc` with its `I`/`M` flags, or a line number,
/// `$`, `first~step`, `+N`.
fn address(c: &[char], i: &mut usize) -> Result<(), String> {
    if *i < c.len() && (c[*i] == '/' || c[*i] == '\\') {
        let d = if c[*i] == '\\' {
            *i += 1;
            c.get(*i).copied().unwrap_or('/')
        } else {
            '/'
        };
        *i += 1;
        field(c, i, d, true)?;
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
}

/// Reads a delimited field (regex or replacement), honouring backslash escapes. In a regex,
/// GNU sed reads a bracket expression whole: the delimiter inside `[/]` is literal.
fn field(c: &[char], i: &mut usize, d: char, regex: bool) -> Result<(), String> {
    while *i < c.len() {
        if c[*i] == '\\' {
            *i += 2;
            continue;
        }
        if regex && c[*i] == '[' {
            *i = bracket_end(c, *i)?;
            continue;
        }
        if c[*i] == d {
            *i += 1;
            return Ok(());
        }
        *i += 1;
    }
    Err("unterminated sed expression".into())
}

/// Where the bracket expression opening at `start` ends (just after its `]`), with `[:...:]`,
/// `[. .]` and `[= =]` inside it read whole.
fn bracket_end(c: &[char], start: usize) -> Result<usize, String> {
    let mut j = start + 1;
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
            Some(']') => return Ok(j + 1),
            Some(_) => j += 1,
        }
    }
}
