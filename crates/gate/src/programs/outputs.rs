//! tools stage (gate), PURE: the files other programs write at a name they are given (git
//! bundle/merge-file/format-patch, go, compilers, converters) and the extractors fed stdin;
//! `writes.rs` holds the coreutils-style writers and hands these to the same refusal.

use crate::programs::argv::long_abbrev;
use crate::programs::registry::{family, Check};
use crate::shell::lex::Word;

/// What a writing program's arguments say it writes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Writes {
    /// Not a program whose destinations the gate reads.
    Unknown,
    /// Paths it writes, links or creates, as written (relative to the work root or absolute).
    Paths(Vec<String>),
}

/// A destination word whose text the gate cannot know: a glob could match a protected file,
/// `{}` is what `find -exec` substitutes.
pub(crate) fn unreadable(base: &str, w: &Word) -> Option<String> {
    if w.glob || w.brace || w.value.contains("{}") {
        return Some(format!(
            "`{base}` writes to `{}`, which the shell or find expands into paths the gate cannot see; denied",
            w.raw
        ));
    }
    None
}

/// The files git subcommands write at a name the command gives: `bundle create FILE` (its
/// refs and prerequisite lines carry commit subjects, and make expands `$(shell …)` in a line
/// before it fails on it), `merge-file CURRENT …` (unless `-p`), and `format-patch`'s numbered
/// files in the work root with a `--suffix` (which may not hold a `/`).
pub(super) fn git_writes(sub: &str, rest: &[Word]) -> Result<Writes, String> {
    let operands = |valued: &[&str]| {
        let mut out = Vec::new();
        let mut k = 0;
        while let Some(w) = rest.get(k) {
            k += 1;
            if w.value == "--" {
                out.extend(rest[k..].iter());
                break;
            }
            if valued.contains(&w.value.as_str()) {
                k += 1;
            } else if !w.value.starts_with('-') || w.value == "-" {
                out.push(w);
            }
        }
        out
    };
    let path = |w: &Word| {
        unreadable(&format!("git {sub}"), w).map_or(Ok(Writes::Paths(vec![w.value.clone()])), Err)
    };
    match sub {
        "bundle" => match operands(&[]).as_slice() {
            [create, file, ..] if create.value == "create" => path(file),
            _ => Ok(Writes::Unknown),
        },
        // The directory a checkout lands in: under a path rule its files become programs
        // the rule runs (`git clone . scripts/x`, `git worktree add scripts/wt`).
        "clone" => match operands(&["-o", "-b", "-u", "--origin", "--branch", "--depth", "-j"])
            .as_slice()
        {
            [_, dir, ..] => path(dir),
            _ => Ok(Writes::Unknown),
        },
        "init" => match operands(&["-b", "--initial-branch", "--object-format", "--ref-format"])
            .as_slice()
        {
            [dir, ..] => path(dir),
            _ => Ok(Writes::Unknown),
        },
        "worktree" => match operands(&["-b", "-B", "--reason"]).as_slice() {
            [add, dir, ..] if add.value == "add" => path(dir),
            _ => Ok(Writes::Unknown),
        },
        "merge-file" if options_of(rest).any(|v| v == "-p" || v == "--stdout") => {
            Ok(Writes::Unknown)
        }
        "merge-file" => match operands(&["-L"]).first() {
            Some(current) => path(current),
            None => Ok(Writes::Unknown),
        },
        _ => {
            let all: Vec<&str> = options_of(rest).collect();
            let suffix = all.iter().enumerate().find_map(|(k, v)| {
                long_abbrev(v, &["suffix"]).map(|_| match v.split_once('=') {
                    Some((_, x)) => x.to_string(),
                    None => all.get(k + 1).map_or(String::new(), |x| x.to_string()),
                })
            });
            match suffix {
                Some(x) if x.contains('/') => Err(format!(
                    "`git format-patch --suffix={x}` puts the patch files in another directory; denied"
                )),
                Some(x) => Ok(Writes::Paths(vec![format!("0001{x}")])),
                None => Ok(Writes::Unknown),
            }
        }
    }
}

fn options_of(args: &[Word]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(|w| w.value.as_str())
        .take_while(|v| *v != "--")
}

/// The files go's build and test flags write (`-o`, profiles, traces), spelled `-f v`,
/// `-f=v`, `--f v` or `--f=v` (Go's flag package); the go check has refused paths outside
/// the work root, these are held to its protected places (`go test -coverprofile=Makefile`
/// writes `mode: set` and `file:line…` lines that make reads as rules).
pub(super) fn go_outputs(args: &[Word]) -> Vec<String> {
    const OUT: &[&str] = &[
        "o",
        "coverprofile",
        "cpuprofile",
        "memprofile",
        "blockprofile",
        "mutexprofile",
        "trace",
        "test.coverprofile",
        "test.cpuprofile",
        "test.memprofile",
        "test.blockprofile",
        "test.mutexprofile",
        "test.trace",
    ];
    let mut out = Vec::new();
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let Some(flag) = w.value.strip_prefix("--").or(w.value.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        if OUT.contains(&name) {
            if let Some(v) = value.or_else(|| args.get(k).map(|w| w.value.clone())) {
                out.push(v);
            }
        }
    }
    out
}

/// The files a compiler or linker writes at a name it is given: `-o`, `--output`, a
/// dependency file (`-MF`), an aux-file directory (`-dumpdir`). `gcc -E -P -x c - -o
/// Makefile <<< 'all:;id'` writes a Makefile from stdin; `-o scripts/x` an executable where a
/// path rule runs programs.
pub(super) fn compiler_outputs(args: &[Word]) -> Vec<String> {
    let mut out = Vec::new();
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        let next = |k: usize| args.get(k).map(|w| w.value.clone());
        let value = match v {
            "-o" | "--output" | "-MF" | "-dumpdir" => {
                k += 1;
                next(k - 1)
            }
            _ => v
                .strip_prefix("--output=")
                .or_else(|| v.strip_prefix("-MF"))
                .or_else(|| v.strip_prefix("-dumpdir"))
                .or_else(|| v.strip_prefix("-o").filter(|_| !v.starts_with("--")))
                .filter(|x| !x.is_empty())
                .map(str::to_string),
        };
        out.extend(value);
    }
    out
}

/// The files converters write what they read to.
pub(super) fn converter_outputs(base: &str, args: &[Word]) -> Option<Vec<String>> {
    // Converters that write what they read (stdin among it) to a file they are given:
    // `pandoc -t plain -o Makefile <<< 'all:;id'`, `gpg --dearmor -o …`, `openssl base64 -d
    // -out …`.
    let outputs: &[&str] = match family(base).map(|f| f.check) {
        Some(Check::Pandoc) => &["-o", "--output", "--extract-media"],
        Some(Check::Gpg) => &["-o", "--output"],
        Some(Check::Openssl) => &["-out", "-keyout", "-certout", "-outdir", "-sigout"],
        _ => &[],
    };
    if outputs.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (k, w) in args.iter().enumerate() {
        let v = w.value.as_str();
        for o in outputs {
            // pandoc (GetOpt) and gpg take unambiguous prefixes of long names too.
            let long = o.starts_with("--") && v.len() > 4 && long_abbrev(v, &[&o[2..]]).is_some();
            if long && !v.contains('=') {
                out.extend(args.get(k + 1).map(|x| x.value.clone()));
            } else if long {
                out.extend(v.split_once('=').map(|(_, x)| x.to_string()));
            } else if v == *o {
                out.extend(args.get(k + 1).map(|x| x.value.clone()));
            } else if let Some(x) = v.strip_prefix(o).and_then(|r| {
                r.strip_prefix('=')
                    .or(Some(r).filter(|r| !r.is_empty() && o.len() == 2))
            }) {
                out.push(x.to_string());
            }
        }
    }
    Some(out)
}

/// patch, cpio and pax write the names (and contents) their input holds. Input on stdin that
/// the model chose (a pipe, heredoc, here-string or file) is a diff or archive it typed:
/// `printf '+++ scripts/x…' | patch -p0` writes any file. patch reads a file instead with
/// `-i FILE` or a second operand; pax with `-f FILE`; `cpio -i`/`pax -r` extract, `-t` lists.
pub(crate) fn extract_from_stdin(base: &str, args: &[Word]) -> Option<String> {
    let opts: Vec<&str> = args
        .iter()
        .map(|w| w.value.as_str())
        .take_while(|v| *v != "--")
        .collect();
    let short = |letters: &str| {
        opts.iter().any(|v| {
            v.strip_prefix('-')
                .is_some_and(|c| !c.starts_with('-') && c.contains(|x| letters.contains(x)))
        })
    };
    let writes = match base {
        "cpio" => {
            short("ip")
                || opts
                    .iter()
                    .any(|v| long_abbrev(v, &["extract", "pass-through"]).is_some())
        }
        "pax" => short("r") && !short("f"),
        _ => {
            let operands = args.iter().filter(|w| !w.value.starts_with('-')).count();
            !short("i") && long_abbrev_any(&opts, "input").is_none() && operands < 2
        }
    };
    writes.then(|| {
        format!(
            "`{base}` would write the files its input names, and that input is what the command gives it on stdin; give it a file"
        )
    })
}

fn long_abbrev_any<'a>(opts: &[&'a str], name: &str) -> Option<&'a str> {
    opts.iter()
        .copied()
        .find(|v| long_abbrev(v, &[name]).is_some())
}
