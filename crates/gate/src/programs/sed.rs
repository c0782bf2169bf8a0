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

/// Reads sed's options as GNU sed's getopt_long does (options may follow operands until
/// `--`; `-i`'s suffix is the rest of its cluster: `-ie` is suffix `e`, `-Ei` none).
pub(crate) fn sed_args(args: &[Word]) -> Result<SedArgs<'_>, String> {
    let mut scripts: Vec<&Word> = Vec::new();
    let mut sandbox = false;
    let mut in_place = None;
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
                Some("in-place") => in_place = Some(val.unwrap_or_default().to_string()),
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
                'i' => {
                    // An optional argument: the rest of the cluster, never the next word.
                    in_place = Some(cluster[k + 1..].iter().collect());
                    break;
                }
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
    let files = if explicit {
        positional
    } else {
        let mut rest = positional.into_iter();
        scripts.extend(rest.next());
        rest.collect()
    };
    Ok(SedArgs {
        scripts,
        in_place,
        files,
        sandbox,
        script_operand: !explicit,
    })
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
                // GNU sed (4.9) ends a label, and `v`'s version, at whitespace or `;`: what
                // follows is the next command (`:a e id` runs `id`).
                while i < c.len() && (c[i] == ' ' || c[i] == '\t') {
                    i += 1;
                }
                while i < c.len() && !c[i].is_whitespace() && c[i] != ';' {
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
