//! tools stage (gate), PURE: where the file-writing programs write: the destinations of cp, mv,
//! ln, install, tee, dd, truncate, rsync, split and the (de)compressors, read from their
//! arguments as GNU coreutils reads them. The judge refuses a destination that output
//! redirection may not write either (a dotfile or `.git`, a build file, a path rule's place).

use crate::paths::counter_reaches_build_file;
use crate::programs::argv::long_abbrev;
use crate::programs::git::subcommand_at;
use crate::programs::outfiles::table_outputs;
pub(crate) use crate::programs::outputs::Writes;
use crate::programs::outputs::{
    compiler_outputs, converter_outputs, git_writes, go_outputs, unreadable,
};
use crate::programs::registry::{family, Check};
use crate::programs::tar::tar_archives_written;
use crate::shell::lex::Word;

/// A family's option grammar: short options that take a value, long ones that do.
struct Grammar {
    short_valued: &'static str,
    long: &'static [&'static str],
    long_valued: &'static [&'static str],
}

const CP: Grammar = Grammar {
    short_valued: "St",
    long: &[
        "archive",
        "attributes-only",
        "backup",
        "copy-contents",
        "debug",
        "dereference",
        "force",
        "interactive",
        "link",
        "no-clobber",
        "no-dereference",
        "no-preserve",
        "no-target-directory",
        "one-file-system",
        "parents",
        "preserve",
        "recursive",
        "reflink",
        "remove-destination",
        "sparse",
        "strip-trailing-slashes",
        "suffix",
        "symbolic-link",
        "target-directory",
        "update",
        "verbose",
        "context",
        "keep-directory-symlink",
        "exchange",
    ],
    long_valued: &["no-preserve", "sparse", "suffix", "target-directory"],
};

const GIT_MV: Grammar = Grammar {
    short_valued: "",
    long: &["force", "dry-run", "verbose", "sparse"],
    long_valued: &[],
};

const INSTALL: Grammar = Grammar {
    short_valued: "gmoSt",
    long: &[
        "backup",
        "compare",
        "debug",
        "directory",
        "group",
        "mode",
        "owner",
        "preserve-timestamps",
        "strip",
        "strip-program",
        "suffix",
        "target-directory",
        "no-target-directory",
        "verbose",
        "preserve-context",
        "context",
    ],
    long_valued: &[
        "group",
        "mode",
        "owner",
        "strip-program",
        "suffix",
        "target-directory",
    ],
};

const TEE: Grammar = Grammar {
    short_valued: "",
    long: &["append", "ignore-interrupts", "output-error"],
    long_valued: &[],
};

const SPONGE: Grammar = Grammar {
    short_valued: "",
    long: &[],
    long_valued: &[],
};

const CSPLIT: Grammar = Grammar {
    short_valued: "bfn",
    long: &[
        "suffix-format",
        "prefix",
        "keep-files",
        "suppress-matched",
        "digits",
        "quiet",
        "silent",
        "elide-empty-files",
        "help",
        "version",
    ],
    long_valued: &["suffix-format", "prefix", "digits"],
};

const TRUNCATE: Grammar = Grammar {
    short_valued: "rs",
    long: &["no-create", "io-blocks", "reference", "size"],
    long_valued: &["reference", "size"],
};

const SPLIT: Grammar = Grammar {
    short_valued: "abCeln",
    long: &[
        "suffix-length",
        "additional-suffix",
        "bytes",
        "line-bytes",
        "elide-empty-files",
        "filter",
        "lines",
        "number",
        "numeric-suffixes",
        "hex-suffixes",
        "separator",
        "unbuffered",
        "verbose",
    ],
    long_valued: &[
        "suffix-length",
        "additional-suffix",
        "bytes",
        "line-bytes",
        "filter",
        "lines",
        "number",
        "separator",
    ],
};

/// (De)compressors: each file operand is replaced by a compressed or decompressed file beside
/// it (`Makefile.gz` becomes `Makefile`).
const COMPRESSORS: &[&str] = &[
    "gzip",
    "gunzip",
    "bzip2",
    "bunzip2",
    "xz",
    "unxz",
    "lzma",
    "unlzma",
    "zstd",
    "unzstd",
    "lz4",
    "lzip",
    "compress",
    "uncompress",
    "pigz",
    "unpigz",
    "brotli",
];

/// The parsed arguments: flags (short letters and long names seen), option values by name,
/// operands in order.
struct Parsed<'a> {
    flags: Vec<String>,
    values: Vec<(String, &'a Word)>,
    operands: Vec<&'a Word>,
}

impl Parsed<'_> {
    fn has(&self, short: char, long: &str) -> bool {
        self.flags
            .iter()
            .any(|f| f.len() == 1 && f.starts_with(short) || f == long)
    }
    fn value(&self, short: char, long: &str) -> Option<&Word> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| n.len() == 1 && n.starts_with(short) || n == long)
            .map(|(_, w)| *w)
    }
}

/// Reads `args` by `g`: an option the grammar does not know is an error (it might take a value
/// and shift what the destination is).
fn parse<'a>(base: &str, args: &'a [Word], g: &Grammar) -> Result<Parsed<'a>, String> {
    let mut p = Parsed {
        flags: Vec::new(),
        values: Vec::new(),
        operands: Vec::new(),
    };
    let mut k = 0;
    let mut after_dashes = false;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        if after_dashes || !v.starts_with('-') || v == "-" {
            p.operands.push(w);
            continue;
        }
        if v == "--" {
            after_dashes = true;
            continue;
        }
        if v.starts_with("--") {
            let Some(name) = long_abbrev(v, g.long) else {
                return Err(format!(
                    "`{base}` option `{v}` is not understood by the gate, which must know where `{base}` writes"
                ));
            };
            if g.long_valued.contains(&name) {
                if v.contains('=') {
                    // The value as a word of its own: the part after `=`.
                    p.flags.push(name.to_string());
                    p.values.push((name.to_string(), w));
                } else {
                    let Some(value) = args.get(k) else {
                        return Err(format!("`{base}` option `{v}` lacks its value"));
                    };
                    k += 1;
                    p.values.push((name.to_string(), value));
                }
            }
            p.flags.push(name.to_string());
            continue;
        }
        let cluster = &v[1..];
        for (i, c) in cluster.char_indices() {
            p.flags.push(c.to_string());
            if g.short_valued.contains(c) {
                if i + c.len_utf8() == cluster.len() {
                    let Some(value) = args.get(k) else {
                        return Err(format!("`{base}` option `-{c}` lacks its value"));
                    };
                    k += 1;
                    p.values.push((c.to_string(), value));
                } else {
                    p.values.push((c.to_string(), w));
                }
                break;
            }
        }
    }
    Ok(p)
}

/// The value of an option word `w` as `parse` stored it: the word itself when it was the
/// option's own word (`--target-directory=X`, `-tX`), so the value is after `=` or the letter.
fn value_text(w: &Word, name: &str) -> String {
    let v = w.value.as_str();
    if let Some(rest) = v.strip_prefix("--") {
        if let Some((_, val)) = rest.split_once('=') {
            return val.to_string();
        }
        return v.to_string();
    }
    if v.starts_with('-') && name.len() == 1 {
        if let Some(i) = v.find(name) {
            return v[i + name.len()..].to_string();
        }
    }
    v.to_string()
}

fn opt_value(p: &Parsed, short: char, long: &str) -> Option<String> {
    let w = p.value(short, long)?;
    let name = p
        .values
        .iter()
        .rev()
        .find(|(n, _)| n.len() == 1 && n.starts_with(short) || n == long)
        .map(|(n, _)| n.clone())
        .unwrap_or_default();
    Some(value_text(w, &name))
}

/// The last path component (`a/b/` -> `b`, `a/.` -> `.`).
fn last_component(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// What `base` (a canonical registry name) writes, given its arguments; `tail` when `xargs` or
/// `find -exec … +` appends arguments the gate cannot see. Errors are denial reasons.
pub(crate) fn writes(base: &str, args: &[Word], tail: bool) -> Result<Writes, String> {
    if base == "git" {
        return git_subcommand_writes(args);
    }
    if let Some(found) = family_outputs(base, args, tail) {
        return found;
    }
    let copy_like = matches!(base, "cp" | "mv" | "ln" | "install");
    let known = copy_like
        || COMPRESSORS.contains(&base)
        || matches!(
            base,
            "tee" | "sponge" | "dd" | "truncate" | "split" | "csplit" | "rsync"
        );
    if !known {
        return Ok(Writes::Unknown);
    }
    if tail {
        return Err(format!(
            "`xargs` or `find -exec … +` would append arguments to `{base}`, which names the files it writes; denied"
        ));
    }
    match base {
        "cp" | "mv" | "ln" | "install" => {
            let g = if base == "install" { &INSTALL } else { &CP };
            copies(base, args, g, base == "install")
        }
        "tee" | "sponge" => operands_written(
            base,
            &parse(base, args, if base == "tee" { &TEE } else { &SPONGE })?,
        ),
        "truncate" => operands_written(base, &parse(base, args, &TRUNCATE)?),
        "dd" => dd_writes(base, args),
        "csplit" => csplit_writes(base, args),
        "split" => split_writes(base, args),
        "rsync" => rsync_writes(base, args),
        _ => compressor_writes(base, args),
    }
}

/// What a git subcommand writes: `git mv` like `mv`, and the paths of the subcommands that
/// create files.
fn git_subcommand_writes(args: &[Word]) -> Result<Writes, String> {
    // The git check has already refused global options it does not know.
    let i = subcommand_at(args);
    let rest = args.get(i + 1..).unwrap_or_default();
    match args.get(i).map(|w| w.value.as_str()) {
        Some("mv") => copies("git mv", rest, &GIT_MV, false),
        Some(sub @ ("bundle" | "merge-file" | "format-patch" | "clone" | "worktree" | "init")) => {
            git_writes(sub, rest)
        }
        _ => Ok(Writes::Unknown),
    }
}

/// The files of the families whose outputs other files read: archivers, go, compilers,
/// converters and the programs of the output table. `None` for every other program.
fn family_outputs(base: &str, args: &[Word], tail: bool) -> Option<Result<Writes, String>> {
    let check = family(base).map(|f| f.check);
    if check == Some(Check::Tar) {
        return Some(Ok(Writes::Paths(tar_archives_written(args))));
    }
    if check == Some(Check::Go) {
        return Some(Ok(Writes::Paths(go_outputs(args))));
    }
    if check == Some(Check::Compiler) {
        return Some(Ok(Writes::Paths(compiler_outputs(args))));
    }
    if let Some(out) = converter_outputs(base, args) {
        return Some(Ok(Writes::Paths(out)));
    }
    let found = table_outputs(base, args)?;
    if tail {
        return Some(Err(format!(
            "`xargs` or `find -exec … +` would append arguments to `{base}`, which names the files it writes; denied"
        )));
    }
    let mut out = match found {
        Ok(Writes::Paths(p)) => p,
        Ok(Writes::Unknown) => Vec::new(),
        Err(e) => return Some(Err(e)),
    };
    if base == "cpp" {
        // The compiler driver's own output options (`-o`, `-MF`, `-dumpdir`).
        out.extend(compiler_outputs(args));
    }
    Some(Ok(Writes::Paths(out)))
}

/// tee, sponge and truncate write every operand.
fn operands_written(base: &str, p: &Parsed) -> Result<Writes, String> {
    let mut out = Vec::new();
    for w in &p.operands {
        if let Some(e) = unreadable(base, w) {
            return Err(e);
        }
        out.push(w.value.clone());
    }
    Ok(Writes::Paths(out))
}

/// dd writes its `of=` file.
fn dd_writes(base: &str, args: &[Word]) -> Result<Writes, String> {
    let mut out = Vec::new();
    for w in args {
        if let Some(path) = w.value.strip_prefix("of=") {
            if w.glob || w.brace {
                return unreadable(base, w).map_or(Ok(Writes::Unknown), Err);
            }
            out.push(path.to_string());
        }
    }
    Ok(Writes::Paths(out))
}

/// csplit writes numbered files after its prefix (`xx00`, `xx01`...).
fn csplit_writes(base: &str, args: &[Word]) -> Result<Writes, String> {
    let p = parse(base, args, &CSPLIT)?;
    let prefix = opt_value(&p, 'f', "prefix").unwrap_or_else(|| "xx".into());
    if let Some(w) = p.value('f', "prefix") {
        if let Some(e) = unreadable(base, w) {
            return Err(e);
        }
    }
    // The suffix format numbers the files (`%02d`); a `/` would move them, and its
    // text can end the name (`%.0d` prints nothing for 0: `-f Makefile -b '%.0d'`).
    let suffix = opt_value(&p, 'b', "suffix-format");
    if suffix.as_deref().is_some_and(|b| b.contains('/')) {
        return Err(format!(
            "`{base}` with a `/` in its suffix format writes elsewhere; denied"
        ));
    }
    let text: String = suffix
        .unwrap_or_default()
        .split('%')
        .enumerate()
        .map(|(k, part)| {
            if k == 0 {
                part
            } else {
                part.trim_start_matches(|c: char| !"diouxX".contains(c))
                    .get(1..)
                    .unwrap_or("")
            }
        })
        .collect();
    if let Some(b) = counter_reaches_build_file(&prefix, &text) {
        return Err(format!(
            "`{base}` with the prefix `{prefix}` names a later file `{b}`, which build and test tools run; denied"
        ));
    }
    Ok(Writes::Paths(vec![
        format!("{prefix}00"),
        format!("{prefix}{text}"),
    ]))
}

/// `split [FILE [PREFIX]]`: the prefix starts every output name, and `--additional-suffix`
/// ends it (`xaa.mk`).
fn split_writes(base: &str, args: &[Word]) -> Result<Writes, String> {
    let p = parse(base, args, &SPLIT)?;
    let extra = opt_value(&p, '\0', "additional-suffix").unwrap_or_default();
    let mut out = Vec::new();
    match p.operands.get(1) {
        Some(prefix) => {
            if let Some(e) = unreadable(base, prefix) {
                return Err(e);
            }
            if let Some(b) = counter_reaches_build_file(&prefix.value, &extra) {
                return Err(format!(
                    "`{base}` with the prefix `{}` names a later file `{b}`, which build and test tools run; denied",
                    prefix.value
                ));
            }
            out.push(format!("{}aa{extra}", prefix.value));
        }
        None if !extra.is_empty() => out.push(format!("xaa{extra}")),
        None => {}
    }
    Ok(Writes::Paths(out))
}

/// rsync writes its side files and the destination (the last operand), with each source's
/// name inside it.
fn rsync_writes(base: &str, args: &[Word]) -> Result<Writes, String> {
    // Side files rsync writes wherever told: a log, a batch and its replay script
    // (`FILE.sh`, executable), backups, partial and temporary files.
    let side = [
        "log-file",
        "write-batch",
        "only-write-batch",
        "backup-dir",
        "partial-dir",
        "temp-dir",
    ];
    let mut out = Vec::new();
    for (k, w) in args.iter().enumerate() {
        let v = w.value.as_str();
        let Some(name) = long_abbrev(v, &side) else {
            continue;
        };
        let value = match v.split_once('=') {
            Some((_, x)) => x.to_string(),
            None => args.get(k + 1).map_or(String::new(), |x| x.value.clone()),
        };
        if name.ends_with("batch") {
            out.push(format!("{value}.sh"));
        }
        out.push(value);
    }
    // Options are checked by the rsync check; the destination is the last operand.
    let ops: Vec<&Word> = args
        .iter()
        .filter(|w| !w.value.starts_with('-') || w.value == "-")
        .collect();
    if let Some((last, srcs)) = ops.split_last() {
        if let Some(e) = unreadable(base, last) {
            return Err(e);
        }
        out.push(last.value.clone());
        for src in srcs {
            let name = last_component(&src.value);
            if src.value.ends_with('/') || matches!(name, "." | "") {
                if is_root(&last.value) {
                    return Err(format!(
                        "`{base}` copies the contents of `{}` into the work root itself, where they could replace .git or a build file; denied",
                        src.raw
                    ));
                }
            } else {
                out.push(join(&last.value, name));
            }
        }
    }
    Ok(Writes::Paths(out))
}

/// (De)compressors write their `-o` file, or beside each operand (`x.gz` and `x`) unless
/// they write to stdout.
fn compressor_writes(base: &str, args: &[Word]) -> Result<Writes, String> {
    let to_stdout = args.iter().any(|w| {
        let v = w.value.as_str();
        v == "--stdout"
            || v == "--to-stdout"
            || (v.starts_with('-') && !v.starts_with("--") && v.contains('c'))
    });
    let mut out = Vec::new();
    for (k, w) in args.iter().enumerate() {
        let v = w.value.as_str();
        if v == "-S" || v.starts_with("--suffix") || v == "-N" || v == "--name" {
            return Err(format!(
                "`{base}` `{v}` chooses the name it writes from a suffix or the archive; denied"
            ));
        }
        if let Some(o) = compressor_output(v, args.get(k + 1)) {
            out.push(o);
        }
    }
    if to_stdout {
        return Ok(Writes::Paths(out));
    }
    let valued = |k: usize| {
        k > 0
            && args.get(k - 1).is_some_and(|p| {
                compressor_output(&p.value, None).is_none()
                    && compressor_output(&p.value, Some(&Word::synthetic("x"))).is_some()
            })
    };
    for (_, w) in args
        .iter()
        .enumerate()
        .filter(|(k, w)| !w.value.starts_with('-') && !valued(*k))
    {
        if let Some(e) = unreadable(base, w) {
            return Err(e);
        }
        out.push(w.value.clone());
        if let Some((stem, _)) = w.value.rsplit_once('.') {
            if !stem.ends_with('/') && !stem.is_empty() {
                out.push(stem.to_string());
            }
        }
    }
    Ok(Writes::Paths(out))
}

/// The file or directory a (de)compressor option word `v` names (`next` is the word after
/// it): `-o FILE`, `-oFILE`, `--output[=]FILE` and zstd's `--output-dir-flat`/`-mirror`, by
/// any prefix (`--out=Makefile`).
fn compressor_output(v: &str, next: Option<&Word>) -> Option<String> {
    let next = || next.map(|w| w.value.clone());
    if v.starts_with("--") {
        long_abbrev(v, &["output", "output-dir-flat", "output-dir-mirror"])?;
        return match v.split_once('=') {
            Some((_, x)) => Some(x.to_string()),
            None => next(),
        };
    }
    let cluster = v.strip_prefix('-')?;
    let (_, rest) = cluster.split_once('o')?;
    if rest.is_empty() {
        next()
    } else {
        Some(rest.to_string())
    }
}

/// cp, mv, ln, install and `git mv`: the destination, each source's name inside it when it is
/// a directory, link targets, and directory contents copied into the work root itself.
fn copies(base: &str, args: &[Word], g: &Grammar, install: bool) -> Result<Writes, String> {
    let mut out = Vec::new();
    let p = parse(base, args, g)?;
    if install && p.value('\0', "strip-program").is_some() {
        return Err(format!(
            "`{base}` `--strip-program` runs a program; denied whatever the rules say"
        ));
    }
    if install && p.has('d', "directory") {
        return operands_written(base, &p);
    }
    // ln's and `cp -s`/`cp -l` sources become link targets: a link to `.git` turns a
    // harmless-looking path into a protected one, so they are checked like destinations.
    let links = base == "ln" || p.has('s', "symbolic-link") || p.has('l', "link");
    let target = opt_value(&p, 't', "target-directory");
    let no_target = p.has('T', "no-target-directory");
    let parents = p.has('\0', "parents");
    let recursive = base.ends_with("mv")
        || p.has('r', "recursive")
        || p.has('R', "recursive")
        || p.has('a', "archive");
    let mut ops: Vec<&Word> = p.operands.clone();
    let Some(dest) = destination(base, target.as_deref(), &mut ops)? else {
        return Ok(Writes::Paths(out));
    };
    out.push(dest.clone());
    // With one source and a destination that does not say it is a directory (no
    // `-t`, no trailing `/`, not the work root), DEST is most often the new name
    // (`cp Makefile Makefile.bak`); the gate cannot know it is not a directory.
    let into_dir = target.is_some()
        || ops.len() > 1
        || dest.ends_with('/')
        || is_root(&dest)
        || parents
        || (base == "ln" && p.operands.len() == 1);
    // A symbolic link's target is read from the link's own directory (`ln -r`: from here).
    let symbolic = base != "git mv" && p.has('s', "symbolic-link");
    let relative_to_here = base == "ln" && p.has('r', "relative");
    let link_dir = if into_dir {
        dest.as_str()
    } else {
        parent_of(&dest)
    };
    let link_from = if symbolic && !relative_to_here {
        link_dir
    } else {
        "."
    };
    for src in ops {
        if links {
            link_target_check(base, src, link_from)?;
            out.push(src.value.clone());
        }
        let name = last_component(&src.value);
        let whole = matches!(name, "" | "." | "..");
        if no_target && target.is_none() {
            // `-T`: DEST is the copy itself; a directory's contents land in it.
            if recursive && is_root(&dest) {
                return Err(format!(
                    "`{base}` copies a directory's contents into the work root itself, where they could replace .git or a build file; denied"
                ));
            }
            continue;
        }
        if whole && recursive && is_root(&dest) {
            return Err(format!(
                "`{base}` copies the contents of `{}` into the work root itself, where they could replace .git or a build file; denied",
                src.raw
            ));
        }
        if into_dir {
            out.extend(name_in_dir(&dest, src, parents));
        }
    }
    Ok(Writes::Paths(with_backups(&p, out)))
}

/// A backup keeps the old file beside each one written, under its name and the suffix
/// (`cp -b -S .mk a x` writes `x.mk`).
fn with_backups(p: &Parsed, mut out: Vec<String>) -> Vec<String> {
    if let Some(suffix) = opt_value(p, 'S', "suffix") {
        let backups: Vec<String> = out.iter().map(|w| format!("{w}{suffix}")).collect();
        out.extend(backups);
    }
    out
}

/// The path a source is copied, moved or linked to inside the directory `dest` (`--parents`:
/// under its whole path); none for `.` or `..`, whose contents land in `dest`.
fn name_in_dir(dest: &str, src: &Word, parents: bool) -> Option<String> {
    let name = last_component(&src.value);
    if src.glob || src.brace {
        // A glob source lands under its own names: the names a glob can match
        // in the work root are never dotfiles, but a build file could be one.
        return Some(join(dest, name));
    }
    if parents {
        Some(join(dest, src.value.trim_start_matches('/')))
    } else if !matches!(name, "" | "." | "..") {
        Some(join(dest, name))
    } else {
        None
    }
}

/// Where cp, mv, ln, install and `git mv` write: `-t DIR`, the current directory for
/// `ln TARGET`, else the last operand (taken from `ops`); `None` with no operands.
fn destination(
    base: &str,
    target: Option<&str>,
    ops: &mut Vec<&Word>,
) -> Result<Option<String>, String> {
    if let Some(t) = target {
        return Ok(Some(t.to_string()));
    }
    if base == "ln" && ops.len() == 1 {
        // `ln TARGET` links TARGET's name into the current directory.
        return Ok(Some(".".to_string()));
    }
    let Some(last) = ops.pop() else {
        return Ok(None);
    };
    if let Some(e) = unreadable(base, last) {
        return Err(e);
    }
    Ok(Some(last.value.clone()))
}

/// A link target is checked like a destination, and must not lead out of the work root
/// when read from `from`.
fn link_target_check(base: &str, src: &Word, from: &str) -> Result<(), String> {
    if let Some(e) = unreadable(base, src) {
        return Err(e);
    }
    if let Some(why) = link_leaves_root(src, from) {
        return Err(format!(
            "`{base}` makes a link to `{}`, which {why}: harness and later commands would follow it out of the work root; denied",
            src.raw
        ));
    }
    Ok(())
}

/// The directory a path names its last component in (`a/b` -> `a`, `b` -> `.`).
fn parent_of(p: &str) -> &str {
    match p.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => ".",
    }
}

/// Why a link target leaves the work root, read from `from` (relative to the work root):
/// absolute, under `~`, named by a variable, or climbing above the root with `..`. PURE.
fn link_leaves_root(target: &Word, from: &str) -> Option<&'static str> {
    if target.tilde || !target.vars.is_empty() {
        return Some("the shell expands into a path the gate cannot see");
    }
    if target.value.starts_with('/') || from.starts_with('/') {
        return Some("is absolute");
    }
    let mut depth: i64 = 0;
    for c in from.split('/').chain(target.value.split('/')) {
        match c {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return Some("climbs above the work root");
                }
            }
            _ => depth += 1,
        }
    }
    None
}

/// The work root itself: `.`, `./`, `.//.`.
fn is_root(p: &str) -> bool {
    p.split('/').all(|c| c.is_empty() || c == ".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::lex::{Dialect, Lexer};

    fn words(cmd: &str) -> Vec<Word> {
        let segs = Lexer::with_dialect(cmd, Dialect::Bash).run().unwrap();
        segs[0].words[1..].to_vec()
    }

    fn paths(cmd: &str) -> Vec<String> {
        let base = cmd.split(' ').next().unwrap();
        match writes(base, &words(cmd), false) {
            Ok(Writes::Paths(p)) => p,
            other => panic!("{cmd}: {other:?}"),
        }
    }

    #[test]
    fn copies_write_the_destination_and_the_sources_names_inside_it() {
        assert_eq!(paths("cp a b"), vec!["b"]);
        assert_eq!(paths("cp a b c"), vec!["c", "c/a", "c/b"]);
        assert_eq!(paths("cp -r x/Makefile sub/"), vec!["sub/", "sub/Makefile"]);
        assert_eq!(paths("cp -r x/.git ."), vec![".", "./.git"]);
        assert_eq!(paths("mv -t .git a"), vec![".git", ".git/a"]);
        assert_eq!(paths("cp --target-directory=d a"), vec!["d", "d/a"]);
        assert_eq!(paths("cp -vt d a"), vec!["d", "d/a"]);
        assert_eq!(paths("cp -- -a b"), vec!["b"]);
        assert_eq!(paths("cp --parents a/b.txt d"), vec!["d", "d/a/b.txt"]);
        assert_eq!(paths("install -m 755 a bin/"), vec!["bin/", "bin/a"]);
        assert_eq!(paths("install -d .git/x"), vec![".git/x"]);
    }

    #[test]
    fn links_check_their_targets_too() {
        assert_eq!(paths("ln -s .git g"), vec!["g", ".git"]);
        assert_eq!(
            paths("ln .git/config"),
            vec![".", ".git/config", "./config"]
        );
        assert_eq!(paths("cp -s Makefile m"), vec!["m", "Makefile"]);
        assert_eq!(paths("ln -s ../a sub/l"), vec!["sub/l", "../a"]);
        assert_eq!(paths("ln -sr sub/a l"), vec!["l", "sub/a"]);
    }

    #[test]
    fn link_targets_that_leave_the_work_root_are_errors() {
        for cmd in [
            "ln -s /outside/dir inbox/done",
            "ln -sf /etc x",
            "ln -s ../.. x",
            "ln -s ../x l",
            "ln -s sub/../../x l",
            "ln -s ../../x sub/",
            "ln -sr ../x sub/l",
            "ln /etc/passwd p",
            "ln -s ~ home",
            "ln -s $HOME h",
            "cp -s /etc/passwd p",
            "cp -rs /usr d",
            "cp -l ../x y",
        ] {
            let base = cmd.split(' ').next().unwrap();
            let e = writes(base, &words(cmd), false).unwrap_err();
            assert!(e.contains("out of the work root"), "{cmd}: {e}");
        }
    }

    #[test]
    fn other_writers() {
        assert_eq!(paths("tee -a x .git/config"), vec!["x", ".git/config"]);
        assert_eq!(paths("dd if=a of=Makefile"), vec!["Makefile"]);
        assert_eq!(paths("truncate -s 0 .git/config"), vec![".git/config"]);
        assert_eq!(paths("split -l 1 x .git/"), vec![".git/aa"]);
        assert_eq!(paths("gunzip Makefile.gz"), vec!["Makefile.gz", "Makefile"]);
        assert_eq!(paths("gzip -c x"), Vec::<String>::new());
        assert_eq!(
            paths("zstd -d a.zst -o .git/config"),
            vec![".git/config", "a.zst", "a"]
        );
        assert_eq!(paths("rsync -a src sub"), vec!["sub", "sub/src"]);
        assert_eq!(paths("zstd -oMakefile x"), vec!["Makefile", "x"]);
        assert_eq!(paths("brotli --out=Makefile x"), vec!["Makefile", "x"]);
        assert_eq!(
            paths("zstd -d x.zst --output-dir-flat=.git"),
            vec![".git", "x.zst", "x"]
        );
        assert_eq!(paths("cp --parents a/b.txt d"), vec!["d", "d/a/b.txt"]);
    }

    #[test]
    fn unknowable_destinations_are_errors() {
        for cmd in [
            "cp x .gi*",
            "cp x {a,b}",
            "cp x {}",
            "tee {}",
            "cp --bogus x y",
            "cp -rT evil .",
            "cp -r evil/. .",
            "rsync -a evil/ .",
            "install -s --strip-program=id a b",
            "gunzip -N x.gz",
            "gzip -S g x",
        ] {
            let base = cmd.split(' ').next().unwrap();
            assert!(writes(base, &words(cmd), false).is_err(), "{cmd}");
        }
        assert!(writes("cp", &words("cp x"), true).is_err());
        assert_eq!(writes("cat", &words("cat x"), true), Ok(Writes::Unknown));
    }
}
