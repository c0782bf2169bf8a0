//! tools stage (gate), PURE: tar (tar, gtar, bsdtar): options that run programs, and paths an
//! archive or extraction writes.

use crate::paths::outside_path;
use crate::programs::argv::{denied, is_stdin_path, long_abbrev, options, short_has};
use crate::shell::lex::Word;

/// What a tar invocation writes. Creating an archive file and extracting are what a `tar` rule
/// authorises, but not where a path could leave the work root or reach a dotfile or .git
/// (absolute or `..` archive and `-C` paths), nor the options that forge such members
/// (`-P`, `--transform`, `-h`) or unlink what exists (`-U`, `--recursive-unlink`).
pub(crate) fn tar_writes(args: &[Word]) -> Option<String> {
    read_tar(args).err()
}

/// The archive files a tar invocation writes (creating, appending, updating, deleting), for
/// the places no program may write (`tar -cf Makefile '$(shell id)'`: a member's name starts
/// the archive, and make expands it); none when it only reads or the line is refused.
pub(crate) fn tar_archives_written(args: &[Word]) -> Vec<String> {
    read_tar(args).unwrap_or_default()
}

/// The long options the gate reads (every other one is let through: none writes elsewhere).
const LONG_OPTIONS: &[&str] = &[
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
    // `--list` is `-t`; listed first, so that it is not read as an abbreviation of
    // `--listed-incremental`.
    "list",
    "listed-incremental",
    "incremental",
    "backup",
    "suffix",
    "to-stdout",
];

/// What a tar invocation does, read from its options: the mode, and the `-f` archive and
/// `-C` directory paths (`("f", path)`, `("C", path)`).
#[derive(Default)]
struct TarRead<'a> {
    extract: bool,
    write: bool,
    files_from: bool,
    to_stdout: bool,
    paths: Vec<(&'static str, &'a str)>,
}

fn read_tar(args: &[Word]) -> Result<Vec<String>, String> {
    // `-C ~/x` or `--file=$HOME/x`: bash expands these, so the path the gate sees is not the
    // path tar gets.
    if args.iter().any(|w| w.tilde || !w.vars.is_empty()) {
        return Err(
            "an argument expands (`~`, `$VAR`): the gate cannot tell where tar writes".into(),
        );
    }
    let all: Vec<&str> = options(args).collect();
    let mut r = TarRead::default();
    let mut k = 0;
    while let Some(&v) = all.get(k) {
        k += 1;
        let rest = all.get(k..).unwrap_or_default();
        if let Some(long) = v.strip_prefix("--") {
            k += long_option(&mut r, v, long, rest.first().copied())?;
        } else if let Some(c) = v.strip_prefix('-') {
            k += cluster(&mut r, c, false, rest)?;
        } else if k == 1 {
            if !v.chars().all(|c| c.is_ascii_alphabetic()) {
                return Err(format!("old-style options `{v}` are not understood"));
            }
            // old style: `tar czf out.tar dir`
            k += cluster(&mut r, v, true, rest)?;
        }
    }
    // Without `-f`, GNU tar reads stdin (`--show-defaults`: `-f-`). An archive on stdin is
    // one the model typed (`echo -ne '…' | tar -x`, `git archive --add-virtual-file=…`):
    // extracting it writes any name with any content, a script under a path rule among them.
    let archive_stdin = !r.paths.iter().any(|(o, _)| *o == "f")
        || r.paths
            .iter()
            .any(|(o, f)| *o == "f" && (is_stdin_path(f) || f.starts_with("/dev/fd/")));
    if r.extract && archive_stdin && !r.to_stdout {
        return Err(
            "extracting an archive from stdin writes the names and contents the model typed (`echo -ne … | tar -x`); extract a file, or list it with `-t`"
                .into(),
        );
    }
    if r.extract && r.files_from {
        return Err(
            "`-T` file lists can carry `-C DIR` lines that move the extraction anywhere".into(),
        );
    }
    written(&r)
}

/// One long option (`long` without its dashes; `next` the word after it): the number of
/// following words it takes as its value, or why it is refused.
fn long_option<'a>(
    r: &mut TarRead<'a>,
    v: &'a str,
    long: &'a str,
    next: Option<&'a str>,
) -> Result<usize, String> {
    let name = long.split('=').next().unwrap_or("");
    if name.is_empty() {
        return Ok(0);
    }
    let mut taken = 0;
    match long_abbrev(v, LONG_OPTIONS) {
        Some("extract" | "get") => r.extract = true,
        Some("to-stdout") => r.to_stdout = true,
        Some("list") => {}
        Some("create" | "append" | "update" | "catenate" | "concatenate" | "delete") => {
            r.write = true
        }
        Some("files-from") => {
            r.files_from = true;
            if !long.contains('=') {
                taken = 1;
            }
        }
        Some(n @ ("file" | "directory" | "one-top-level")) => {
            let value = match long.split_once('=') {
                Some((_, f)) => Some(f),
                // `--one-top-level` takes its optional value attached only.
                None if n == "one-top-level" => None,
                None => {
                    taken = 1;
                    next
                }
            };
            if let Some(f) = value {
                r.paths.push((if n == "file" { "f" } else { "C" }, f));
            }
        }
        Some(n) => {
            return Err(format!(
                "`--{n}` can write outside the work root or through links"
            ))
        }
        None => {}
    }
    Ok(taken)
}

/// A cluster of short options (`-xzf`), or old-style ones (`czf`, each valued letter taking
/// the next word from `rest`): the number of words of `rest` it takes, or why it is refused.
fn cluster<'a>(
    r: &mut TarRead<'a>,
    cluster: &'a str,
    old_style: bool,
    rest: &[&'a str],
) -> Result<usize, String> {
    // Old-style and short options that take a value (consumed in order).
    const VALUED: &str = "bfgCFHIKLNTVX";
    let mut taken = 0;
    for (n, ch) in cluster.char_indices() {
        match ch {
            'x' => r.extract = true,
            'O' => r.to_stdout = true,
            'c' | 'r' | 'u' | 'A' => r.write = true,
            'T' => r.files_from = true,
            'g' | 'G' => {
                return Err(format!(
                    "`-{ch}` keeps an incremental snapshot file (written, and on extraction it deletes files)"
                ))
            }
            'P' | 'h' | 'U' => {
                return Err(format!(
                    "`-{ch}` can write outside the work root or through links"
                ))
            }
            _ => {}
        }
        if VALUED.contains(ch) {
            let value = if old_style || n + 1 == cluster.len() {
                taken += 1;
                rest.get(taken - 1).copied()
            } else {
                Some(&cluster[n + 1..])
            };
            if let (Some(f), 'f' | 'C') = (value, ch) {
                r.paths.push((if ch == 'f' { "f" } else { "C" }, f));
            }
            if !old_style {
                break;
            }
        }
    }
    Ok(taken)
}

/// The archive files written, once every `-f` and `-C` path that is written is checked: the
/// archive when creating, the directory when extracting.
fn written(r: &TarRead) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for &(opt, p) in &r.paths {
        let archive = opt == "f";
        if (archive && !r.write) || (!archive && !r.extract) || p == "-" {
            continue;
        }
        if outside_path(p) {
            return Err(format!(
                "`-{opt} {p}` writes outside the work root or into a dotfile or .git"
            ));
        }
        if archive {
            written.push(p.to_string());
        }
    }
    Ok(written)
}

/// tar options that run programs, remote archives, and what tar writes ([`tar_writes`]).
pub(crate) fn tar_check(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| denied(base, what);
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
        let old_style = k == 0 && !v.starts_with('-') && (v.contains('I') || v.contains('F'));
        if old_style || short_has(v, "IF", "bCfgHKLNTVX") {
            return hit("`-I`/`-F` runs a program");
        }
    }
    None
}
