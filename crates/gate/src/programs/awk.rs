//! tools stage (gate), PURE: awk (awk, gawk, mawk, nawk): programs without system(), pipes or
//! output redirection.

use crate::shell::lex::Word;
/// The awk program with the contents of string and regex literals and comments removed (`""`,
/// `//` remain). A `/` starts a regex only where no operand precedes it (else it divides),
/// which is where every awk reads one too.
pub(crate) fn awk_skeleton(src: &str, brackets: bool) -> Result<String, String> {
    let c: Vec<char> = src.chars().collect();
    let rest = rest_of_line(&c);
    let mut out = String::with_capacity(src.len());
    let mut operand = false;
    let mut i = 0;
    while let Some(&ch) = c.get(i) {
        match ch {
            '"' => {
                i = string_end(&c, i + 1)?;
                out.push_str("\"\"");
                operand = true;
            }
            '/' if !operand => {
                i = regex_end(&c, i + 1, brackets)?;
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
                // regex text, holds a `/` and a `"` or `#` that change how this skeleton reads
                // it. (Read from a table built once: one scan per `/` was quadratic.)
                let (slash, quote) = rest.get(i + 1).copied().unwrap_or_default();
                if slash && quote {
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

/// Where a string literal whose text starts at `i` ends (just after its closing `"`).
fn string_end(c: &[char], mut i: usize) -> Result<usize, String> {
    loop {
        match c.get(i) {
            None | Some('\n') => return Err("an awk string is not closed".into()),
            Some('\\') => i += 2,
            Some('"') => return Ok(i + 1),
            Some(_) => i += 1,
        }
    }
}

/// Where a regex literal whose text starts at `i` ends (just after its closing `/`);
/// `brackets`: a `/` inside a bracket expression is literal, as gawk reads it.
fn regex_end(c: &[char], mut i: usize, brackets: bool) -> Result<usize, String> {
    loop {
        match c.get(i) {
            None | Some('\n') => return Err("an awk regex is not closed".into()),
            Some('\\') => i += 2,
            Some('/') => return Ok(i + 1),
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
}

/// For each position: does the rest of its line (an escaped newline continues it) hold a `/`,
/// and a `"` or `#`? Escaped characters count too, which only denies more.
fn rest_of_line(c: &[char]) -> Vec<(bool, bool)> {
    let mut out = vec![(false, false); c.len() + 1];
    for k in (0..c.len()).rev() {
        out[k] = if c[k] == '\n' && (k == 0 || c[k - 1] != '\\') {
            (false, false)
        } else {
            let (slash, quote) = out[k + 1];
            (slash || c[k] == '/', quote || matches!(c[k], '"' | '#'))
        };
    }
    out
}

pub(crate) fn awk_check(args: &[Word]) -> Result<(), String> {
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
pub(crate) fn awk_program_ok(p: &Word) -> Result<(), String> {
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
