//! Differential fuzz test of the gate's tokenizer against the real shells (test only, I/O: runs
//! bash and dash in a temporary directory).
//!
//! Command strings are generated from a grammar of quoting, escape and expansion fragments
//! (seeded, bounded). For every string the gate ALLOWS, the real shell runs it with no program
//! reachable: bash under `env -i` with `PATH` set to an empty directory and a
//! `command_not_found_handle` that prints the argv of every simple command it is asked to run
//! (NUL-separated, to fd 3); dash with `PATH` set to a directory of helpers named like the
//! grammar's command words. Every argv the shell executed must be one of the gate's segments,
//! word for word; a disagreement where the gate allows is a failure. Strings the gate denies
//! are counted, not run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::judge::{judge, judge_program, Ctx};
use crate::rule::{Policy, Rule, Verdict};
use crate::shell::lex::{Dialect, Lexer, Segment, Stdin};
use std::io::Read;
use std::process::{Command, Stdio};

/// Seeded xorshift: the same strings on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }
}

const COMMANDS: &[&str] = &[
    "run", "tool", "prog", "r'u'n", "\"tool\"", "\\prog", "ru\\\nn",
];

const PLAIN: &[&str] = &[
    "a", "b1", "x-y", "-n", "--opt=v", "f.txt", "=", "a=b", "%", "@", ",", ".", "a#b", "+x",
];

const SINGLE: &[&str] = &[
    "'a b'", "'$HOME'", "'\\'", "'\"'", "''", "'a;b'", "'#'", "'\n'",
];

const DOUBLE: &[&str] = &[
    "\"a b\"",
    "\"\\$HOME\"",
    "\"\\\\\"",
    "\"\\\"\"",
    "\"$HOME\"",
    "\"a\\nb\"",
    "\"'\"",
    "\"a\\\nb\"",
    "\"\\c\"",
    "\"$\"",
    "\"$'x'\"",
    "\"#\"",
];

const ANSI_PIECES: &[&str] = &[
    "\\c", "\\\\", "\\'", "\\\"", "\\x41", "\\x4", "\\x", "\\x7e", "\\u41", "\\U41", "\\u",
    "\\101", "\\0101", "\\7", "\\E", "\\e", "\\n", "\\t", "\\?", "\\q", "\\0", "\\c?", "\\ca",
    "\\c[", "\\c\\", "\\c'", "a", " ", ";", "&", "|", "#", "\"", "$", "\\\n", "\n", "\\xff",
    "\\u00e9", "\\200", "\\377", "\\1", "\\12", "\\123",
];

const ESCAPES: &[&str] = &[
    "\\ ", "\\;", "\\'", "\\\"", "\\\\", "\\#", "\\&", "\\|", "\\<", "\\>", "\\$", "\\\n", "\\c",
    "\\x", "\\*",
];

const EXPANSIONS: &[&str] = &[
    "$HOME", "$USER", "${HOME}", "$(run)", "`run`", "$1", "$", "$$", "$((1))", "$\"x\"",
];

const GLOBS: &[&str] = &["*.z", "-*", "[-]x", "?q", "[ab]z", "x[", "*]"];

const BRACES: &[&str] = &["{a,b}", "{1..2}", "{}", "{x}", "{-n,x}"];

const TILDES: &[&str] = &["~", "~/x", "a~", "a=~/x", "x:~", "--o=~"];

const SEPARATORS: &[&str] = &[
    " ; ", ";", " && ", "&&", " || ", " | ", "|", " & ", "&", "\n", " |& ", "\n\n", " ;\n",
];

const REDIRECTS: &[&str] = &[
    ">f1", " 2>f2", " >>f1", " <f1", " &>f3", " 2>&1", " <<<word", " >|f1", " &>>f3", " >&2",
    " 1>f1", " 2> f2",
];

const HEREDOC_BODIES: &[&str] = &[
    "hello",
    "x'y",
    "$HOME",
    "`run`",
    "a\\",
    "E x",
    " E",
    "\tE",
    "E\\\n",
    "E\\\\\n",
    "\tE\\\n\tx",
    "$\\\n(run)",
    "a\\\\\\\nE",
];

/// One word of fragments.
fn word(rng: &mut Rng) -> String {
    let mut w = String::new();
    for _ in 0..1 + rng.below(3) {
        let piece = match rng.below(20) {
            0..=5 => rng.pick(PLAIN).to_string(),
            6 | 7 => rng.pick(SINGLE).to_string(),
            8 | 9 => rng.pick(DOUBLE).to_string(),
            10..=12 => {
                let mut s = "$'".to_string();
                for _ in 0..1 + rng.below(4) {
                    s.push_str(rng.pick(ANSI_PIECES));
                }
                s.push('\'');
                s
            }
            13 | 14 => rng.pick(ESCAPES).to_string(),
            15 => rng.pick(EXPANSIONS).to_string(),
            16 => rng.pick(GLOBS).to_string(),
            17 => rng.pick(BRACES).to_string(),
            18 => rng.pick(TILDES).to_string(),
            _ => rng.pick(PLAIN).to_string(),
        };
        w.push_str(&piece);
    }
    w
}

/// A command string: simple commands joined by separators, with redirections, heredocs and
/// comments.
fn command(rng: &mut Rng) -> String {
    let mut s = String::new();
    let mut heredocs: Vec<(&str, bool)> = Vec::new();
    let n = 1 + rng.below(3);
    for k in 0..n {
        s.push_str(rng.pick(COMMANDS));
        for _ in 0..rng.below(4) {
            s.push(' ');
            s.push_str(&word(rng));
        }
        match rng.below(8) {
            0 => s.push_str(rng.pick(REDIRECTS)),
            1 => {
                let (op, delim) = [
                    ("<<", "E"),
                    ("<<-", "E"),
                    ("<<", "'E'"),
                    ("<<", "\\E"),
                    ("<<", "$'E'"),
                    ("<<", "\"E\""),
                    ("<<", "E''"),
                    ("<<-", "$'\\x45'"),
                ][rng.below(8)];
                s.push_str(&format!(" {op}{delim}"));
                heredocs.push((rng.pick(HEREDOC_BODIES), op == "<<-"));
            }
            2 => s.push_str(&format!(" #{}", word(rng))),
            _ => {}
        }
        let sep = if k + 1 == n {
            if rng.below(3) == 0 {
                "\n"
            } else {
                ""
            }
        } else {
            rng.pick(SEPARATORS)
        };
        if !heredocs.is_empty() && (sep.contains('\n') || k + 1 == n) {
            s.push_str(sep.trim_end_matches('\n'));
            s.push('\n');
            for (body, tab) in heredocs.drain(..) {
                s.push_str(body);
                s.push('\n');
                s.push_str(if tab { "\tE\n" } else { "E\n" });
            }
        } else {
            s.push_str(sep);
        }
    }
    s
}

/// What the gate expects one argument to be.
#[derive(Debug)]
enum Arg {
    Exact(String),
    /// One argument the gate left unexpanded (a tilde).
    One,
    /// One or more (a brace expansion).
    Many,
}

fn expected(seg: &Segment) -> Vec<Arg> {
    seg.words
        .iter()
        .map(|w| {
            let braces = w.brace && (w.value.contains(',') || w.value.contains(".."));
            if braces {
                Arg::Many
            } else if w.tilde {
                Arg::One
            } else {
                Arg::Exact(w.value.clone())
            }
        })
        .collect()
}

fn matches(pattern: &[Arg], argv: &[String]) -> bool {
    match pattern.split_first() {
        None => argv.is_empty(),
        Some((Arg::Exact(v), rest)) => argv
            .split_first()
            .is_some_and(|(a, tail)| a == v && matches(rest, tail)),
        Some((Arg::One, rest)) => argv.split_first().is_some_and(|(_, t)| matches(rest, t)),
        Some((Arg::Many, rest)) => (1..=argv.len()).any(|k| matches(rest, &argv[k..])),
    }
}

/// Parses the helper's records: a count, then that many arguments, each NUL-terminated.
fn records(out: &[u8]) -> Vec<Vec<String>> {
    let mut fields = out.split(|&b| b == 0);
    let mut recs = Vec::new();
    while let Some(count) = fields.next() {
        let Ok(n) = String::from_utf8_lossy(count).parse::<usize>() else {
            break;
        };
        let argv: Vec<String> = (0..n)
            .filter_map(|_| fields.next())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        recs.push(argv);
    }
    recs
}

struct Sandbox {
    dir: std::path::PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let dir =
            std::env::temp_dir().join(format!("harness-gate-diff-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("work")).unwrap();
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("rec")).unwrap();
        Sandbox { dir }
    }

    /// A dash helper named `name` that records its argv (one file per process, so concurrent
    /// commands of a pipeline cannot interleave their records).
    fn helper(&self, name: &str) {
        let p = self.dir.join("bin").join(name);
        if p.exists() {
            return;
        }
        let helper = format!(
            "#!/bin/sh\nprintf '%s\\0' $(($# + 1)) \"${{0##*/}}\" \"$@\" >'{}/rec/'$$\n",
            self.dir.display()
        );
        std::fs::write(&p, helper).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn clean(&self, sub: &str) {
        for e in std::fs::read_dir(self.dir.join(sub)).unwrap() {
            let _ = std::fs::remove_file(e.unwrap().path());
        }
    }

    /// Runs `src` under `shell` and returns the argv of every command it executed, and stderr.
    fn run(&self, shell: &str, src: &str) -> (Vec<Vec<String>>, String) {
        self.clean("work");
        self.clean("rec");
        let (path, func) = if shell == "bash" {
            (
                self.dir.join("empty"),
                Some(format!(
                    "() {{ printf '%s\\0' \"$#\" \"$@\" >'{}/rec/'$BASHPID.$SRANDOM; return 0; }}",
                    self.dir.display()
                )),
            )
        } else {
            (self.dir.join("bin"), None)
        };
        // The outer bash points fd 3 at the pipe and hands the string to the shell under test,
        // whose PATH reaches no real program.
        let mut cmd = Command::new("/bin/bash");
        cmd.arg("-c")
            .arg(format!(
                "exec 3>&1 1>/dev/null; export PATH=\"$P\"; exec /bin/{shell} -c \"$1\""
            ))
            .arg("_")
            .arg(src)
            .env_clear()
            .env("P", &path)
            .env("HOME", "$HOME")
            .env("USER", "$USER")
            .current_dir(self.dir.join("work"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(f) = func {
            cmd.env("BASH_FUNC_command_not_found_handle%%", f);
        }
        let mut child = cmd.spawn().unwrap();
        // Reading fd 3 to its end waits for background commands too.
        let mut out = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        child.wait().unwrap();
        let mut recs = Vec::new();
        for e in std::fs::read_dir(self.dir.join("rec")).unwrap() {
            recs.extend(records(&std::fs::read(e.unwrap().path()).unwrap()));
        }
        recs.sort();
        (recs, err)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn star() -> Policy {
    Policy {
        default: Verdict::Deny,
        allow: vec![Rule::parse("*").unwrap()],
        deny: Vec::new(),
        write_redirects: true,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    }
}

/// The gate's verdict and segments for `src` read in `dialect`.
fn gate_view(policy: &Policy, src: &str, dialect: Dialect) -> Option<Vec<Segment>> {
    let allowed = match dialect {
        Dialect::Bash => judge(policy, src).verdict == Verdict::Allow,
        Dialect::Posix => judge_program(&mut Ctx::new(policy), src, dialect, 0, &Stdin::default())
            .is_ok_and(|segs| segs.iter().all(|s| s.verdict == Verdict::Allow)),
    };
    if !allowed {
        return None;
    }
    Lexer::with_dialect(src, dialect).run().ok()
}

/// Every argv the shell ran must be one of the gate's segments, each segment used once (a
/// bipartite matching: wildcards can make a greedy choice fail).
fn disagreement(segs: &[Segment], ran: &[Vec<String>]) -> Option<String> {
    let patterns: Vec<Vec<Arg>> = segs.iter().map(expected).collect();
    let fits: Vec<Vec<usize>> = ran
        .iter()
        .map(|argv| {
            (0..patterns.len())
                .filter(|&k| matches(&patterns[k], argv))
                .collect()
        })
        .collect();
    fn augment(
        r: usize,
        fits: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &k in &fits[r] {
            if !seen[k] {
                seen[k] = true;
                if owner[k].is_none_or(|o| augment(o, fits, seen, owner)) {
                    owner[k] = Some(r);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; patterns.len()];
    for (r, argv) in ran.iter().enumerate() {
        if !augment(r, &fits, &mut vec![false; patterns.len()], &mut owner) {
            return Some(format!("the shell ran {argv:?}, the gate saw {patterns:?}"));
        }
    }
    None
}

fn fuzz(shell: &str, dialect: Dialect, seed: u64, count: usize) {
    if Command::new(shell).arg("-c").arg(":").output().is_err() {
        eprintln!("{shell} is not installed; the differential test against it is skipped");
        return;
    }
    let sandbox = Sandbox::new(shell);
    let policy = star();
    let mut rng = Rng(seed);
    let (mut allowed, mut failures) = (0, Vec::new());
    for _ in 0..count {
        let src = command(&mut rng);
        let Some(segs) = gate_view(&policy, &src, dialect) else {
            continue;
        };
        allowed += 1;
        // Every command word the gate sees gets a dash helper, so "not found" means dash ran
        // a command the gate did not see (a word with a `/` cannot be a helper's name).
        let mut named = true;
        if dialect == Dialect::Posix {
            for w in segs.iter().filter_map(|s| s.words.first()) {
                if w.value.contains('/') || w.value.is_empty() {
                    named = false;
                } else {
                    sandbox.helper(&w.value);
                }
            }
        }
        let (ran, err) = sandbox.run(shell, &src);
        if let Some(d) = disagreement(&segs, &ran) {
            failures.push(format!("{src:?}: {d}"));
        } else if dialect == Dialect::Posix && named && err.contains("not found") {
            failures.push(format!(
                "{src:?}: dash ran a command the gate did not see: {err}"
            ));
        }
    }
    eprintln!(
        "differential against {shell}: {count} strings, {allowed} allowed and run, {} disagreements",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "the gate allowed commands {shell} reads differently:\n{}",
        failures.join("\n")
    );
    assert!(
        allowed * 5 > count,
        "too few strings were allowed to test anything"
    );
}

#[test]
fn gate_agrees_with_bash_on_every_allowed_command() {
    fuzz("bash", Dialect::Bash, 0x9e37_79b9_7f4a_7c15, 3000);
    // The seed that found `$USER{1..2}` (braces expanded before the variable is read).
    fuzz("bash", Dialect::Bash, 777, 3000);
}

#[test]
fn gate_agrees_with_dash_on_every_allowed_script() {
    fuzz("dash", Dialect::Posix, 0x2545_f491_4f6c_dd1d, 1500);
}

#[test]
fn gate_agrees_with_mksh_yash_and_posh_on_every_allowed_script() {
    // Their scripts get the same reading as dash's; the real shells check it.
    for shell in ["mksh", "yash", "posh"] {
        fuzz(shell, Dialect::Posix, 0x2545_f491_4f6c_dd1d, 1500);
    }
}

/// The harness itself sees what the shells run (a differential that sees nothing passes).
#[test]
fn the_sandbox_records_every_argv() {
    for shell in ["bash", "dash"] {
        if Command::new(shell).arg("-c").arg(":").output().is_err() {
            continue;
        }
        let sandbox = Sandbox::new(&format!("self-{shell}"));
        for name in ["run", "tool", "prog"] {
            sandbox.helper(name);
        }
        let (ran, _) = sandbox.run(shell, "run a 'b c' | tool \"\\\\\" ; prog <<E\nx\nE\n");
        let want: Vec<Vec<String>> = vec![
            vec!["prog".into()],
            vec!["run".into(), "a".into(), "b c".into()],
            vec!["tool".into(), "\\".into()],
        ];
        assert_eq!(ran, want, "{shell}");
    }
    let sandbox = Sandbox::new("self-ansi");
    let (ran, _) = sandbox.run("bash", "run $'\\c\\'x' $'\\cA' ; ls");
    assert_eq!(
        ran,
        vec![
            vec!["ls".to_string()],
            vec!["run".to_string(), "\u{1c}'x".into(), "\u{1}".into()],
        ]
    );
}

const SED_PIECES: &[&str] = &[
    ":a",
    ":a ",
    ":a\t",
    "b a",
    "ba",
    "t a",
    "T a",
    "b",
    "v",
    "v 4.2",
    "; ",
    ";",
    "\n",
    " ",
    "{",
    "}",
    "p",
    "s/a/b/",
    "s/a/b/g",
    "y/a/b/",
    "a foo",
    "i\\\nbar",
    "e :>PE",
    "e :>PE",
    "w PW",
    "W PW",
    "s/x/:>PS/e",
    "s/a/b/w PW",
    "#c",
    "1",
    "$",
    "/x/",
    "1,2",
    "!",
    "1~2",
    "0,/a/",
    "\\%x%",
    "s|a|b|",
    "s/[/]/x/",
    "l",
    "l 5",
    "q",
    "=",
    "n",
    "N",
    "x",
    "G",
    "h",
    "z",
    "F",
    "e",
    "r /dev/null",
    "s/a/b/I",
    "s/a/b/2",
    "s/a/b/M",
    "s/a/\\n/",
];

/// GNU sed by path, or `None` (said on stderr) when it is not installed.
fn gnu_sed() -> Option<&'static str> {
    let sed = "/bin/sed";
    let ok = Command::new(sed)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU"));
    if !ok {
        eprintln!("GNU sed is not installed; the sed differential is skipped");
    }
    ok.then_some(sed)
}

/// sed scripts the gate allows run under real GNU sed (PATH empty, in a temporary directory):
/// none may run a command or write a file (the payloads create files; appended text that only
/// spells them is harmless).
#[test]
fn gate_agrees_with_gnu_sed_on_every_allowed_script() {
    // By path: the child's PATH is empty (`e` commands run /bin/sh, which needs no program to
    // create a file with `:>`).
    let Some(sed) = gnu_sed() else {
        return;
    };
    let sandbox = Sandbox::new("sed");
    let work = sandbox.dir.join("work");
    let mut rng = Rng(0x5ed5_ed5e_d5ed_5ed5);
    let (count, mut allowed, mut failures) = (1500, 0, Vec::new());
    for _ in 0..count {
        let mut script = String::new();
        for _ in 0..1 + rng.below(5) {
            script.push_str(rng.pick(SED_PIECES));
        }
        if crate::programs::sed::sed_script_ok(&script).is_err() {
            continue;
        }
        allowed += 1;
        sandbox.clean("work");
        std::fs::write(work.join("in"), "x\na\n").unwrap();
        let out = Command::new(sed)
            .args(["-n", "--", &script, "in"])
            .env_clear()
            .env("PATH", sandbox.dir.join("empty"))
            .current_dir(&work)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let files = std::fs::read_dir(&work).unwrap().count();
        if files != 1 {
            failures.push(format!(
                "{script:?}: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    eprintln!(
        "differential against GNU sed: {count} scripts, {allowed} allowed and run, {} ran a command or wrote a file",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        allowed * 5 > count,
        "too few scripts were allowed to test anything"
    );
}

/// `sed -i` option forms the gate allows, run under real GNU sed: every file sed rewrites
/// (a new inode) or creates (a backup) must be one the gate named as written (its run-time
/// checks), so no reading of `-i[SUFFIX]`, `--in-place[=SUFFIX]`, clusters or options after
/// the files lets a write past the rules of `> FILE`.
#[test]
fn gate_names_every_file_gnu_sed_rewrites_in_place() {
    use std::os::unix::fs::MetadataExt;
    let Some(sed) = gnu_sed() else {
        return;
    };
    const PIECES: &[&str] = &[
        "-i",
        "-i.bak",
        "-ie",
        "-Ei",
        "-ni",
        "-in",
        "-is",
        "-i~",
        "--in-place",
        "--in-place=.o",
        "--in-pl",
        "--in-place=",
        "-s",
        "-E",
        "-n",
        "-e s/x/y/",
        "--",
        "-i -e s/x/y/",
        "s/x/y/",
        "a.txt",
        "b.txt",
        "-u",
        "--follow-symlinks",
        "-z",
    ];
    let policy = Policy {
        default: Verdict::Deny,
        allow: vec![Rule::parse("sed *").unwrap()],
        deny: Vec::new(),
        write_redirects: true,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    };
    let sandbox = Sandbox::new("sed-i");
    let work = sandbox.dir.join("work");
    let mut rng = Rng(0x1a91_ace5_ed00_0019);
    let (count, mut allowed, mut wrote, mut failures) = (1000, 0, 0, Vec::new());
    for _ in 0..count {
        let words: Vec<&str> = (0..1 + rng.below(5))
            .flat_map(|_| rng.pick(PIECES).split(' '))
            .collect();
        let j = crate::judge(&policy, &format!("sed {}", words.join(" ")));
        if j.verdict != Verdict::Allow {
            continue;
        }
        allowed += 1;
        sandbox.clean("work");
        for f in ["a.txt", "b.txt"] {
            std::fs::write(work.join(f), "x\na\n").unwrap();
        }
        let inode = |f: &str| std::fs::metadata(work.join(f)).map(|m| m.ino()).ok();
        let before: Vec<_> = ["a.txt", "b.txt"].iter().map(|f| inode(f)).collect();
        let _ = Command::new(sed)
            .args(&words)
            .env_clear()
            .current_dir(&work)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let named: Vec<&str> = j
            .runtime_path_checks
            .iter()
            .map(|(p, _)| p.as_str())
            .collect();
        let mut written: Vec<String> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "a.txt" && n != "b.txt")
            .collect();
        for (f, ino) in ["a.txt", "b.txt"].iter().zip(before) {
            if inode(f) != ino {
                written.push(f.to_string());
            }
        }
        wrote += usize::from(!written.is_empty());
        if let Some(missed) = written.iter().find(|w| !named.contains(&w.as_str())) {
            failures.push(format!(
                "sed {}: wrote {missed:?}, gate named {named:?}",
                words.join(" ")
            ));
        }
    }
    eprintln!(
        "differential of sed -i against GNU sed: {count} commands, {allowed} allowed and run, {wrote} wrote files, {} wrote a file the gate did not name",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(wrote >= 30, "too few commands wrote anything to test");
}
