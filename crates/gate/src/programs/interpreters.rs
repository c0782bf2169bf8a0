//! tools stage (gate), PURE: interpreters and opaque runners under deny rules: code on the command
//! line or stdin that could reach a denied program.

use crate::paths::basename;
use crate::programs::argv::is_stdin_path;
use crate::programs::modules::module_program;
use crate::programs::registry::{canonical, family, same_program, Code, Finder, Kind, StdinCode};
use crate::rule::{glob_match, Policy, RuleKind};
use crate::shell::lex::{Stdin, Word};
/// With deny rules in force, an interpreter or opaque runner whose arguments mention a denied
/// command (or a shell) is denied: the gate cannot follow what it runs.
pub(crate) fn opaque_mentions(policy: &Policy, base: &str, args: &[Word]) -> Option<String> {
    let fam = family(base).filter(|f| f.opaque())?;
    if fam.inner == Finder::Directory {
        return Some(format!(
            "`{base}` runs every program in a directory, which no rule can see"
        ));
    }
    if fam.inner == Finder::FromFile {
        return Some(format!(
            "`{base}` runs commands read from a file, which no rule can see"
        ));
    }
    let runner = fam.kind == Kind::Runner;
    let denied = denied_names(policy);
    // The module a Python runs as a registry program (`python3 -m pip list`): the deny rules
    // were matched against its own words (`rule::deny_matches`), so its name is no mention.
    let module_word = module_program(base, args).map(|(_, k)| k - 1);
    // Each denied name's canonical form once, and each distinct token judged once: a 128 KiB
    // program repeats its words, and a preset denies some eighty programs.
    let denied_canonical: Vec<String> = denied.iter().map(|d| canonical(d)).collect();
    let mut harmless: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, w) in args.iter().enumerate() {
        if Some(i) == module_word {
            continue;
        }
        if runner {
            if let Some(reason) = runner_word_refusal(base, w) {
                return Some(reason);
            }
        }
        // The text is code a shell may read: quotes and backslashes inside a name do not
        // change it (`r''m`, `r\m`), and a glob may match it (`/bin/r?`).
        let text: String = w.value.chars().filter(|c| !"'\"\\".contains(*c)).collect();
        for tok in text
            .split(|c: char| !(c.is_alphanumeric() || "_./+-*?[]".contains(c)))
            .filter(|t| !t.is_empty())
        {
            if harmless.contains(tok) {
                continue;
            }
            if let Some(reason) = mention(base, tok, runner, &denied, &denied_canonical) {
                return Some(reason);
            }
            harmless.insert(tok.to_string());
        }
    }
    None
}

/// The program names the deny rules start with.
fn denied_names(policy: &Policy) -> Vec<&str> {
    policy
        .deny
        .iter()
        .filter_map(|r| match &r.kind {
            RuleKind::Exact(ws) | RuleKind::Words(ws) => ws.first().map(|w| basename(w)),
            RuleKind::Raw(p) => p.split_whitespace().next().map(basename),
            RuleKind::Path(_) | RuleKind::Universal => None,
        })
        .collect()
}

/// A word an opaque runner would run that the gate cannot read, or that builds words.
fn runner_word_refusal(base: &str, w: &Word) -> Option<String> {
    if !w.literal() {
        return Some(format!(
            "`{base}` runs `{}`, which the gate cannot read",
            w.raw
        ));
    }
    let how = splices_words(&w.value)?;
    Some(format!(
        "`{base}` would run code that builds words with {how}, which can spell a program a deny rule forbids; the gate cannot follow it"
    ))
}

/// Why one token of the code is refused: a pattern matching a denied name, a denied name
/// (any spelling of its program), or, for a runner, a program that runs code.
fn mention(
    base: &str,
    tok: &str,
    runner: bool,
    denied: &[&str],
    denied_canonical: &[String],
) -> Option<String> {
    let b = basename(tok);
    // A pattern with no letter (`*`, `**` in arithmetic) names no program.
    if b.contains(['*', '?', '[']) && b.contains(|c: char| c.is_ascii_alphabetic()) {
        let d = denied
            .iter()
            .find(|d| glob_match(&b.to_ascii_lowercase(), d))?;
        return Some(format!(
            "`{base}` would run code with a pattern `{b}` that matches `{d}`, which a deny rule forbids; the gate cannot follow it"
        ));
    }
    let kind = canonical(b);
    let b = kind.as_str();
    if denied
        .iter()
        .zip(denied_canonical)
        .any(|(d, c)| *d == b || c == b || same_program(d, b))
    {
        return Some(format!(
            "`{base}` would run code mentioning `{b}`, which a deny rule forbids; the gate cannot follow it"
        ));
    }
    if runner && family(b).is_some_and(|f| f.runs_code()) {
        return Some(format!(
            "`{base}` would run `{b}`, whose script the deny rules cannot see into"
        ));
    }
    None
}

/// What sqlite3's command line does beyond queries: the shell's functions `writefile()` and
/// `edit()` (which runs the editor it names: `edit('x', 'r'||'m')`), dot-commands that write
/// files (`.output`, `.once`, `.save`...), `ATTACH`/`VACUUM INTO` (create a database file at
/// any name), and the options that extract an archive (`-A`) or read commands from a file
/// (`-init`).
fn sqlite_writes(family: &str, word: &str) -> Option<String> {
    if family != "sqlite3" {
        return None;
    }
    const OPTIONS: &[&str] = &["-a", "-archive", "--archive", "-init", "--init"];
    const CODE: &[&str] = &[
        "writefile",
        ".output",
        ".once",
        ".save",
        ".backup",
        ".log",
        ".trace",
        ".excel",
        ".clone",
        ".archive",
        ".ar ",
        ".open",
        ".read",
        ".import",
        "attach",
        "vacuum",
    ];
    let lc = word.to_ascii_lowercase();
    if OPTIONS.contains(&lc.as_str()) || (word.starts_with("-A") && !word.starts_with("--")) {
        return Some(format!("option `{word}`"));
    }
    // `edit(…)`, also spelt `edit (…)`; a column named `edited` is fine.
    let edit = lc
        .match_indices("edit")
        .any(|(k, _)| lc[k + 4..].trim_start().starts_with('('));
    if edit {
        return Some("code uses `edit()`".into());
    }
    CODE.iter()
        .find(|c| lc.contains(*c))
        .map(|c| format!("code uses `{}`", c.trim()))
}

/// Code that spells a string the capability list cannot see whole: string literals joined
/// by an operator (`"ex"+"ec"`, `"exe".."cute"`, `"sys"."tem"`, `'a' || 'b'`, `"a" ~ "b"`)
/// or a character given by its code (`"\x70rocess"`, `"\u0070"`, Lua's `"\101"`).
pub(crate) fn builds_names(code: &str) -> Option<&'static str> {
    let b = code.as_bytes();
    for (k, &c) in b.iter().enumerate() {
        if c == b'\\' {
            let next = b.get(k + 1).copied().unwrap_or(0);
            if next == b'x' || next == b'u' || next == b'U' || next.is_ascii_digit() {
                return Some("a character given by its code");
            }
        }
        if c != b'"' && c != b'\'' {
            continue;
        }
        // A closing quote, then an operator, then an opening quote.
        let rest = code[k + 1..].trim_start();
        let after = ["..", "+", ".", "~", "||"]
            .iter()
            .find_map(|op| rest.strip_prefix(op))
            .map(str::trim_start);
        if after.is_some_and(|a| a.starts_with(['"', '\''])) {
            return Some("string literals joined by an operator");
        }
    }
    None
}

/// Shell text that builds a word from parts the gate cannot see whole: a parameter
/// expansion or command substitution (`a=cu; ${a}rl`, `"$1$2"`, `cu$(:)rl`), a brace
/// expansion (`{cu,}rl`), a backslash-newline (`cu\<newline>rl`). A runner's command is
/// shell text the gate does not parse, so under deny rules any of these is refused.
pub(crate) fn splices_words(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
    for (k, &c) in b.iter().enumerate() {
        let next = b.get(k + 1).copied();
        match c {
            b'$' if next
                .is_some_and(|n| n.is_ascii_alphanumeric() || b"_{(@*#?!$-".contains(&n)) =>
            {
                return Some("a `$` expansion");
            }
            b'`' => return Some("a command substitution"),
            b'\\' if next == Some(b'\n') => return Some("a backslash-newline"),
            b'{' if text[k..].find('}').is_some_and(|e| {
                let inner = &text[k..k + e];
                (inner.contains(',') || inner.contains(".."))
                    && !inner.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            }) =>
            {
                return Some("a brace expansion");
            }
            _ => {}
        }
    }
    None
}

/// Does an interpreter read its program from stdin? True unless a program is given inline
/// (`-c`, `-e`, `-ne`, `-m`, `-r`, `--eval`, `deno eval`) or as a file operand.
pub(crate) fn program_from_stdin(args: &[Word]) -> bool {
    // Options that read commands from stdin after (or instead of) the program given: an
    // interactive session (`python3 -i -c 1`, `lua -i`, `node -i`, `php -a`) or a debugger
    // (`perl -d -e 1`), whose commands run code (`!cmd`, `system …`).
    let interactive = args.iter().take_while(|w| w.value != "--").any(|w| {
        let v = w.value.as_str();
        match v.strip_prefix("--") {
            Some(long) => ["interactive", "inspect", "debug"]
                .iter()
                .any(|n| long.starts_with(n)),
            None => v.strip_prefix('-').is_some_and(|c| {
                c.chars()
                    .take_while(|&x| !"ceErm".contains(x))
                    .any(|x| "ida".contains(x))
            }),
        }
    });
    // Modules that are a debugger or a REPL (`python3 -m pdb`, `-m asyncio`, `-m code`).
    const REPLS: &[&str] = &[
        "pdb", "code", "asyncio", "idlelib", "ipdb", "IPython", "pudb", "bpdb", "ptpython",
        "bpython", "pdbpp", "wdb", "trepan3k",
    ];
    let repl_module = args.iter().enumerate().any(|(k, w)| {
        let module = match w.value.as_str() {
            "-m" => args.get(k + 1).map(|m| m.value.as_str()),
            v => v.strip_prefix("-m").filter(|m| !m.is_empty()),
        };
        module.is_some_and(|m| REPLS.contains(&m.split('.').next().unwrap_or(m)))
    }) || args
        .iter()
        .any(|w| w.value.starts_with("--pdb") || w.value.starts_with("--trace"))
        || args
            .iter()
            .find(|w| !w.value.starts_with('-'))
            .is_some_and(|w| w.value == "inspect");
    if interactive || repl_module {
        return true;
    }
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
pub(crate) fn stdin_code(
    policy: &Policy,
    base: &str,
    args: &[Word],
    stdin: &Stdin,
) -> Option<String> {
    let fam = family(base).filter(|f| f.opaque())?;
    let texts: Vec<Word> = stdin.texts.iter().map(|t| Word::synthetic(t)).collect();
    if let Some(reason) =
        opaque_mentions(policy, base, &texts).or_else(|| inline_code_can_run_programs(base, &texts))
    {
        return Some(format!("on stdin: {reason}"));
    }
    if !stdin.piped && stdin.texts.is_empty() {
        return None;
    }
    let reads_code = fam.kind == Kind::Runner
        || match fam.stdin {
            StdinCode::Always => true,
            StdinCode::UnlessGiven => program_from_stdin(args),
            StdinCode::Never => false,
        };
    reads_code.then(|| {
        format!("`{base}` would run commands from its stdin, which the deny rules cannot see into")
    })
}

/// Names of interpreter features that run programs or build code at run time; inline code
/// containing one could reach a denied command without naming it (`'r'+'m'`).
pub(crate) const CODE_CAPABILITIES: &[&str] = &[
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
    // Debuggers and REPLs started from code read their commands from stdin.
    "breakpoint",
    "pdb",
    "debug",
    "irb",
    "pry",
    "interact",
    "repl",
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
pub(crate) fn perl_eval_flag(code: &str) -> bool {
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

pub(crate) fn inline_code_can_run_programs(base: &str, args: &[Word]) -> Option<String> {
    let fam = family(base).filter(|f| f.kind == Kind::Interpreter && f.code != Code::Own)?;
    for w in args {
        if fam.code == Code::Perl && perl_eval_flag(&w.value) {
            return Some(format!(
                "`{base}` code has a substitution with the `e` flag, which evaluates code"
            ));
        }
        if let Some(why) = sqlite_writes(fam.names[0], &w.value) {
            return Some(format!(
                "`{base}` {why}, which can write any file or run a program the deny rules cannot see"
            ));
        }
        if fam.code == Code::Escape && w.value.contains('!') {
            return Some(format!(
                "`{base}` code has `!`, which runs a shell command the deny rules cannot see"
            ));
        }
        let code = w
            .value
            .contains(|c: char| " ()'\";{}$@`[]=&|<>\n!\\".contains(c));
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
        if let Some(how) = builds_names(&w.value) {
            return Some(format!(
                "`{base}` code builds a string from {how}, which can spell a name the gate looks for (`\"ex\"+\"ec\"`)"
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

/// Where an interpreter's inline code is no less judged than a file it could write and run
/// (the capability-word heuristic off): the program a deny rule forbids outright (`curl *`,
/// `sudo *`: a rule of one word) that the code names as a whole word, quoted or not
/// (`os.system("curl x")`, `subprocess.run(["sudo", …])`), in `texts` (the arguments and
/// the code on stdin). A word is a run of letters, digits and `_.-`, so `proc.kill()` or
/// `shutil.rmtree` name no program. PURE.
pub(crate) fn names_denied_program<'a>(
    policy: &Policy,
    base: &str,
    texts: impl Iterator<Item = &'a str>,
) -> Option<String> {
    let outright: Vec<&str> = policy
        .deny
        .iter()
        .filter_map(|r| match &r.kind {
            RuleKind::Words(ws) if ws.len() == 1 => Some(basename(&ws[0])),
            _ => None,
        })
        .collect();
    if outright.is_empty() {
        return None;
    }
    texts.into_iter().find_map(|text| {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
            .find(|w| outright.contains(w))
            .map(|word| format!("`{base}` code names `{word}`, which a deny rule forbids"))
    })
}

#[cfg(test)]
mod tests {
    use super::splices_words;

    #[test]
    fn spliced_words_are_found() {
        for text in [
            "a=cu; ${a}rl x",
            "a=cu; $a\"rl\"",
            "set cu rl; \"$1$2\"",
            "cu$(:)rl",
            "cu``rl",
            "{cu,}rl x",
            "c{u..u}rl",
            "cu\\\nrl",
        ] {
            assert!(splices_words(text).is_some(), "{text}");
        }
        for text in [
            "ls -la",
            "cargo test",
            "echo {} x",
            "echo '{\"a\": 1, \"b\": 2}'",
            "cost 5$",
        ] {
            assert!(splices_words(text).is_none(), "{text}");
        }
    }
}
