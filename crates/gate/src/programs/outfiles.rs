//! tools stage (gate), PURE: one table of the options (and operands) that name a file a
//! program writes, for the programs whose arguments the gate otherwise leaves alone (network
//! fetchers, binary tools, the C preprocessor, image and media converters, file creators).
//! `writes.rs` hands what this finds to the same refusal output redirection gets.

use crate::programs::argv::short_has;
use crate::programs::outputs::{unreadable, Writes};
use crate::shell::lex::Word;

/// Which operands (words that are neither options nor their values) a program writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operands {
    /// None.
    Nothing,
    /// Every operand (`touch`, `strip`, `mogrify`: in place).
    All,
    /// The second (`objcopy IN [OUT]`), or the only one when `in_place`.
    Second { in_place: bool },
    /// The first (`sqlite3 DB`: the database is created there).
    First,
    /// All but the first (`cpp IN OUT`: a `-include FILE` read shifts the operands).
    AllButFirst,
    /// The last (`convert IN… OUT`).
    Last,
    /// The first after the key, when the key writes the archive (`ar rcs ARCHIVE members`).
    ArArchive,
    /// The archive of a 7-Zip command that writes one (`7z a ARCHIVE files`).
    SevenZip,
    /// The basename of each URL (`curl -O`, `wget` without `-O`), inside the directory option.
    UrlNames,
}

/// A program's output grammar: which option values are files (or directories) it writes,
/// which other options take a value (so clusters and operands are read right), and options
/// that are refused because they read settings or commands that can name any file.
struct OutputGrammar {
    names: &'static [&'static str],
    /// Short letters whose value is a file written.
    short_out: &'static str,
    /// Short letters whose value is a directory written into.
    short_dir: &'static str,
    /// Other short letters that take a value.
    short_valued: &'static str,
    /// Long names (GNU-style `--name VALUE`, `--name=VALUE`, unambiguous prefixes) whose
    /// value is a file written; for single-dash programs (`-write`) spelt with one dash.
    long_out: &'static [&'static str],
    long_dir: &'static [&'static str],
    /// Other long (or single-dash) names that take a value.
    long_valued: &'static [&'static str],
    /// Options refused outright, with why (short letters as `-x`, long names as `--name`).
    refused: &'static [(&'static str, &'static str)],
    /// Short option words that are whole names (`-write FILE`, `-o{DIR}` for 7-Zip).
    single_dash: bool,
    operands: Operands,
}

const CONFIG: &str = "reads settings that can name any file to write";

/// A row with nothing set, for struct update (`..NONE`).
const NONE: OutputGrammar = OutputGrammar {
    names: &[],
    short_out: "",
    short_dir: "",
    short_valued: "",
    long_out: &[],
    long_dir: &[],
    long_valued: &[],
    refused: &[],
    single_dash: false,
    operands: Operands::Nothing,
};

const GRAMMARS: &[OutputGrammar] = &[
    OutputGrammar {
        names: &["curl"],
        short_out: "oDc",
        short_valued: "AbCdeEFHKmPQrTuUwxXyYzt",
        long_out: &[
            "output",
            "dump-header",
            "cookie-jar",
            "trace",
            "trace-ascii",
            "stderr",
            "libcurl",
            "etag-save",
            "alt-svc",
            "hsts",
        ],
        long_dir: &["output-dir"],
        refused: &[
            ("-K", CONFIG),
            ("--config", CONFIG),
            ("-J", "takes the file name the server sends"),
            (
                "--remote-header-name",
                "takes the file name the server sends",
            ),
        ],
        operands: Operands::UrlNames,
        ..NONE
    },
    OutputGrammar {
        names: &["wget", "wget2"],
        short_out: "oaO",
        short_dir: "P",
        short_valued: "eiBtTwQUDARIXlY",
        long_out: &[
            "output-file",
            "append-output",
            "output-document",
            "save-cookies",
            "warc-file",
            "rejected-log",
            "hsts-file",
        ],
        long_dir: &["directory-prefix"],
        refused: &[
            (
                "-e",
                "runs a wgetrc command, which can name any file to write",
            ),
            (
                "--execute",
                "runs a wgetrc command, which can name any file to write",
            ),
            ("--config", CONFIG),
            (
                "--content-disposition",
                "takes the file name the server sends",
            ),
            (
                "--trust-server-names",
                "takes the file name the server sends",
            ),
        ],
        operands: Operands::UrlNames,
        ..NONE
    },
    OutputGrammar {
        names: &["cpp"],
        short_out: "o",
        short_valued: "IDUx",
        long_out: &["output"],
        operands: Operands::AllButFirst,
        ..NONE
    },
    OutputGrammar {
        names: &["objcopy", "llvm-objcopy"],
        short_valued: "IOBjRKNGLWbiF",
        long_out: &["dump-section"],
        operands: Operands::Second { in_place: true },
        ..NONE
    },
    OutputGrammar {
        names: &["strip", "llvm-strip"],
        short_out: "o",
        short_valued: "FIORKN",
        long_out: &["output-file"],
        operands: Operands::All,
        ..NONE
    },
    OutputGrammar {
        names: &["ar", "llvm-ar", "ranlib"],
        operands: Operands::ArArchive,
        ..NONE
    },
    OutputGrammar {
        names: &["7z", "7za", "7zr", "7zz"],
        single_dash: true,
        operands: Operands::SevenZip,
        ..NONE
    },
    OutputGrammar {
        names: &["convert", "magick", "montage", "composite", "gm"],
        long_out: &["write"],
        single_dash: true,
        operands: Operands::Last,
        ..NONE
    },
    OutputGrammar {
        names: &["mogrify"],
        long_out: &["write"],
        long_dir: &["path"],
        single_dash: true,
        operands: Operands::All,
        ..NONE
    },
    OutputGrammar {
        names: &["sqlite3"],
        long_valued: &[
            "cmd",
            "init",
            "separator",
            "newline",
            "nullvalue",
            "vfs",
            "mmap",
            "pagecache",
            "lookaside",
            "heap",
            "maxsize",
            "escape",
        ],
        single_dash: true,
        operands: Operands::First,
        ..NONE
    },
    // ffmpeg: every word but an input (`-i FILE`) may be an output (option values among
    // them, which is stricter); the tee muxer's `[opts]a|b` and `file:` name files too.
    OutputGrammar {
        names: &["ffmpeg", "avconv"],
        long_valued: &["i"],
        single_dash: true,
        operands: Operands::All,
        ..NONE
    },
    OutputGrammar {
        names: &["touch"],
        short_valued: "rdt",
        operands: Operands::All,
        ..NONE
    },
    OutputGrammar {
        names: &["mkfifo", "mknod"],
        short_valued: "mZ",
        operands: Operands::All,
        ..NONE
    },
    OutputGrammar {
        names: &["mktemp"],
        short_dir: "p",
        long_dir: &["tmpdir"],
        operands: Operands::All,
        ..NONE
    },
    // patch: `-o` the output, `-r` the rejects, `-B`/`-Y` backup prefixes, `-d` the
    // directory it works in, and `patch FILE PATCH` patches FILE.
    OutputGrammar {
        names: &["patch", "gpatch"],
        short_out: "or",
        short_dir: "dBY",
        short_valued: "DFgipVz",
        long_out: &["output", "reject-file"],
        long_dir: &["directory", "prefix", "basename-prefix"],
        long_valued: &[
            "ifdef",
            "fuzz",
            "get",
            "input",
            "strip",
            "version-control",
            "suffix",
            "quoting-style",
            "reject-format",
        ],
        operands: Operands::First,
        ..NONE
    },
    OutputGrammar {
        names: &["unzip"],
        short_dir: "d",
        ..NONE
    },
    OutputGrammar {
        names: &["as", "gas", "nasm", "yasm"],
        short_out: "o",
        short_valued: "I",
        ..NONE
    },
    // rustc: `-o`, `--out-dir`, `--emit KIND=PATH[,…]`.
    OutputGrammar {
        names: &["rustc"],
        short_out: "o",
        short_valued: "CLlW",
        long_out: &["emit"],
        long_dir: &["out-dir"],
        long_valued: &[
            "crate-type",
            "crate-name",
            "edition",
            "target",
            "cfg",
            "cap-lints",
        ],
        ..NONE
    },
    OutputGrammar {
        names: &["javac"],
        short_dir: "dsh",
        long_valued: &[
            "cp",
            "classpath",
            "sourcepath",
            "release",
            "source",
            "target",
        ],
        single_dash: true,
        long_out: &[],
        long_dir: &["d", "s", "h"],
        ..NONE
    },
    OutputGrammar {
        names: &["tsc"],
        long_out: &["outFile", "out", "tsBuildInfoFile"],
        long_dir: &["outDir", "declarationDir"],
        ..NONE
    },
    OutputGrammar {
        names: &["esbuild"],
        long_out: &["outfile", "metafile"],
        long_dir: &["outdir"],
        ..NONE
    },
    OutputGrammar {
        names: &["xsltproc"],
        short_out: "o",
        long_out: &["output"],
        ..NONE
    },
    OutputGrammar {
        names: &["xmllint"],
        long_out: &["output"],
        ..NONE
    },
    OutputGrammar {
        names: &["dot", "neato", "twopi", "circo", "fdp", "sfdp"],
        short_out: "o",
        ..NONE
    },
    OutputGrammar {
        names: &["msgfmt", "msgmerge", "msgcat", "xgettext", "msguniq"],
        short_out: "o",
        short_dir: "p",
        long_out: &["output-file"],
        long_dir: &["output-dir", "directory"],
        ..NONE
    },
    OutputGrammar {
        names: &["flex", "lex", "bison", "yacc", "byacc"],
        short_out: "o",
        short_valued: "bSp",
        long_out: &[
            "outfile",
            "output",
            "defines",
            "header",
            "graph",
            "xml",
            "report-file",
        ],
        ..NONE
    },
    // Ghostscript: `-sOutputFile=FILE`, `-o FILE`.
    OutputGrammar {
        names: &["gs", "ghostscript"],
        long_out: &["sOutputFile", "o"],
        single_dash: true,
        ..NONE
    },
    OutputGrammar {
        names: &[
            "pdftotext",
            "pdftohtml",
            "pdftoppm",
            "pdfseparate",
            "pdfunite",
            "qpdf",
        ],
        operands: Operands::AllButFirst,
        ..NONE
    },
    OutputGrammar {
        names: &["asciidoctor", "asciidoc"],
        short_out: "o",
        short_dir: "D",
        long_out: &["out-file"],
        long_dir: &["destination-dir"],
        ..NONE
    },
    OutputGrammar {
        names: &["sass", "scss", "lessc"],
        operands: Operands::AllButFirst,
        ..NONE
    },
    // Package tools' download, install and log places.
    OutputGrammar {
        names: &["pip", "pip3"],
        short_dir: "dwt",
        short_valued: "rceik",
        long_out: &["log", "log-file", "report"],
        long_dir: &[
            "dest",
            "target",
            "wheel-dir",
            "root",
            "prefix",
            "src",
            "cache-dir",
        ],
        ..NONE
    },
    OutputGrammar {
        names: &["npm"],
        long_dir: &["pack-destination", "prefix", "cache"],
        ..NONE
    },
];

/// A long option word (`--name`, `--name=v`; `-name` for single-dash programs) naming one
/// of `names`, by an unambiguous-or-not prefix (stricter than the program: any prefix counts).
fn long_name<'n>(v: &str, names: &[&'n str], single: bool) -> Option<&'n str> {
    let body = v
        .strip_prefix("--")
        .or_else(|| v.strip_prefix('-').filter(|_| single))?;
    let name = body.split('=').next().unwrap_or(body);
    if name.len() < 2 && !single {
        return None;
    }
    if single {
        return names.iter().copied().find(|n| *n == name);
    }
    names.iter().copied().find(|n| n.starts_with(name))
}

/// The basename a URL is saved under (`http://h/a/Makefile?x` -> `Makefile`).
fn url_name(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let path = path.split_once("://").map_or(path, |(_, rest)| rest);
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.is_empty() || !path.contains('/') {
        "index.html"
    } else {
        name
    }
}

/// What `base` writes by its output table, or `None` when it has none.
pub(super) fn table_outputs(base: &str, args: &[Word]) -> Option<Result<Writes, String>> {
    let g = GRAMMARS.iter().find(|g| g.names.contains(&base))?;
    Some(read(base, g, args))
}

/// What an output grammar finds in the arguments: the files and directories its options
/// name, the operands, and the option values to check like destinations.
#[derive(Default)]
struct Found<'a> {
    files: Vec<&'a str>,
    dirs: Vec<String>,
    operands: Vec<&'a Word>,
    checked: Vec<&'a Word>,
}

fn read(base: &str, g: &OutputGrammar, args: &[Word]) -> Result<Writes, String> {
    let valued = format!("{}{}{}", g.short_out, g.short_dir, g.short_valued);
    let found = scan(base, g, args, &valued)?;
    for w in &found.checked {
        if let Some(e) = unreadable(base, w) {
            return Err(e);
        }
    }
    let mut out: Vec<String> = found.files.iter().map(|f| f.to_string()).collect();
    out.extend(found.dirs.iter().cloned());
    for w in written_operands(base, g, &found.operands) {
        if let Some(e) = unreadable(base, w) {
            return Err(e);
        }
        operand_paths(g, w, &mut out);
    }
    if g.operands == Operands::UrlNames {
        url_names(base, args, &valued, &found, &mut out)?;
    }
    if base == "curl" && args.iter().any(|w| w.value.contains("%output{")) {
        return Err(format!(
            "`{base}` `--write-out %output{{FILE}}` writes a file; denied whatever the rules say"
        ));
    }
    if out.iter().any(|p| p.contains('#') && base == "curl") {
        return Err(format!(
            "`{base}` output names with `#N` take their text from the URL's pattern; denied"
        ));
    }
    Ok(Writes::Paths(out))
}

/// Reads the arguments by the grammar (`valued`: every short option that takes a value).
fn scan<'a>(
    base: &str,
    g: &OutputGrammar,
    args: &'a [Word],
    valued: &str,
) -> Result<Found<'a>, String> {
    let mut found = Found::default();
    let mut k = 0;
    let mut dashes = false;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        if dashes || !v.starts_with('-') || v == "-" {
            found.operands.push(w);
            continue;
        }
        if v == "--" && !g.single_dash {
            dashes = true;
            continue;
        }
        if let Some(reason) = refused_option(base, g, v, valued) {
            return Err(reason);
        }
        k += if v.starts_with("--") || g.single_dash {
            long_option(base, g, v, args.get(k), &mut found)
        } else {
            short_cluster(g, v, args.get(k), &mut found)
        };
    }
    Ok(found)
}

/// Why an option the grammar refuses outright is refused.
fn refused_option(base: &str, g: &OutputGrammar, v: &str, valued: &str) -> Option<String> {
    for (name, why) in g.refused {
        let hit = if let Some(long) = name.strip_prefix("--") {
            long_name(v, &[long], g.single_dash).is_some()
        } else {
            let letter = name.trim_start_matches('-');
            short_has(v, letter, valued)
        };
        if hit {
            return Some(format!(
                "`{base}` `{name}` {why}; denied whatever the rules say"
            ));
        }
    }
    None
}

/// A long option (or any option of a single-dash program): what it names goes into
/// `found`; the number of following words it takes as its value (0 or 1).
fn long_option<'a>(
    base: &str,
    g: &OutputGrammar,
    v: &'a str,
    next: Option<&'a Word>,
    found: &mut Found<'a>,
) -> usize {
    let long_hit = |names: &[&str]| long_name(v, names, g.single_dash).is_some();
    let out = long_hit(g.long_out);
    let dir = long_hit(g.long_dir);
    if !out && !dir && long_hit(g.long_valued) && !v.contains('=') {
        return 1;
    }
    let mut taken = 0;
    let value = match v.split_once('=') {
        Some((_, x)) => Some(x),
        None if out || dir => {
            taken = 1;
            next.map(|w| {
                found.checked.push(w);
                w.value.as_str()
            })
        }
        None => None,
    };
    if g.single_dash && base.starts_with("7z") {
        // `-oDIR`: the directory extraction writes into.
        if let Some(d) = v.strip_prefix("-o") {
            found.dirs.push(d.to_string());
        }
    }
    match value {
        Some(x) if out => {
            // `--emit link=PATH,asm=PATH`: every part, and what follows its `=`.
            found.files.push(x);
            for part in x.split(',') {
                found
                    .files
                    .push(part.rsplit_once('=').map_or(part, |(_, f)| f));
            }
        }
        Some(x) if dir => found.dirs.push(x.to_string()),
        _ => {}
    }
    taken
}

/// A cluster of short options: what its first valued letter names goes into `found`; the
/// number of following words it takes as that letter's value (0 or 1).
fn short_cluster<'a>(
    g: &OutputGrammar,
    v: &'a str,
    next: Option<&'a Word>,
    found: &mut Found<'a>,
) -> usize {
    let cluster = &v[1..];
    for (i, c) in cluster.char_indices() {
        let is_out = g.short_out.contains(c);
        let is_dir = g.short_dir.contains(c);
        if !is_out && !is_dir && !g.short_valued.contains(c) {
            continue;
        }
        let rest = &cluster[i + c.len_utf8()..];
        let (value, taken) = if rest.is_empty() {
            let value = next.map(|w| {
                if is_out || is_dir {
                    found.checked.push(w);
                }
                w.value.as_str()
            });
            (value, 1)
        } else {
            (Some(rest), 0)
        };
        match value {
            Some(x) if is_out => found.files.push(x),
            Some(x) if is_dir => found.dirs.push(x.to_string()),
            _ => {}
        }
        return taken;
    }
    0
}

/// The operands the program writes, by the grammar's `operands`.
fn written_operands<'a>(base: &str, g: &OutputGrammar, operands: &[&'a Word]) -> Vec<&'a Word> {
    match g.operands {
        Operands::UrlNames | Operands::Nothing => Vec::new(),
        Operands::All => operands.to_vec(),
        Operands::Second { in_place } => match operands {
            [one] if in_place => vec![*one],
            [_, second, ..] => vec![*second],
            _ => Vec::new(),
        },
        Operands::First => operands.first().copied().into_iter().collect(),
        Operands::AllButFirst => operands.iter().skip(1).copied().collect(),
        Operands::Last => operands.last().copied().into_iter().collect(),
        Operands::ArArchive => {
            let key_writes = |key: &str| {
                key.trim_start_matches('-')
                    .contains(|c| "rqdmsS".contains(c))
            };
            match operands {
                // ranlib ARCHIVE…: every operand, in place.
                all if base == "ranlib" => all.to_vec(),
                [key, rest @ ..] if key_writes(&key.value) => rest.to_vec(),
                _ => Vec::new(),
            }
        }
        Operands::SevenZip => match operands {
            [cmd, archive, ..] if matches!(cmd.value.as_str(), "a" | "u" | "d" | "rn") => {
                vec![*archive]
            }
            _ => Vec::new(),
        },
    }
}

/// The paths a written operand names: each output of an ffmpeg tee (`a.mkv|[f=mp4]b.mp4`),
/// ImageMagick's `FORMAT:FILE`, else the word itself.
fn operand_paths(g: &OutputGrammar, w: &Word, out: &mut Vec<String>) {
    if g.names[0] == "ffmpeg" {
        for part in w.value.split('|') {
            let part = part.rsplit(']').next().unwrap_or(part);
            out.push(part.strip_prefix("file:").unwrap_or(part).to_string());
        }
        return;
    }
    // ImageMagick's `FORMAT:FILE` writes FILE.
    let v = w.value.as_str();
    let path = match v.split_once(':') {
        Some((fmt, f)) if g.single_dash && !fmt.contains('/') => f,
        _ => v,
    };
    out.push(path.to_string());
}

/// curl saves under the URL's name with `-O`; wget unless `-O FILE` names the file.
fn url_names(
    base: &str,
    args: &[Word],
    valued: &str,
    found: &Found,
    out: &mut Vec<String>,
) -> Result<(), String> {
    let remote_name = if base == "curl" {
        args.iter().any(|w| {
            let v = w.value.as_str();
            short_has(v, "O", valued)
                || long_name(v, &["remote-name", "remote-name-all"], false).is_some()
        })
    } else {
        !args.iter().any(|w| {
            let v = w.value.as_str();
            short_has(v, "O", valued) || long_name(v, &["output-document"], false).is_some()
        })
    };
    if !remote_name {
        return Ok(());
    }
    let dir = found.dirs.last().cloned().unwrap_or_default();
    for w in &found.operands {
        if w.glob || w.brace || w.value.contains(['{', '[']) {
            return Err(format!(
                "`{base}` saves `{}` under a name the URL's pattern expands to; denied",
                w.raw
            ));
        }
        let name = url_name(&w.value);
        out.push(if dir.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", dir.trim_end_matches('/'))
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::lex::{Dialect, Lexer};

    fn run(cmd: &str) -> Result<Vec<String>, String> {
        let segs = Lexer::with_dialect(cmd, Dialect::Bash).run().unwrap();
        let words = &segs[0].words;
        match table_outputs(&words[0].value, &words[1..]) {
            Some(Ok(Writes::Paths(p))) => Ok(p),
            Some(Ok(Writes::Unknown)) | None => panic!("{cmd}: no table"),
            Some(Err(e)) => Err(e),
        }
    }

    #[test]
    fn output_options_in_every_spelling() {
        for cmd in [
            "curl -o Makefile http://h/x",
            "curl -sSo Makefile http://h/x",
            "curl -oMakefile http://h/x",
            "curl --output Makefile http://h/x",
            "curl --output=Makefile http://h/x",
            "curl --outp Makefile http://h/x",
            "curl -D Makefile http://h/x",
            "curl --trace-ascii=Makefile http://h/x",
            "curl -O http://h/a/Makefile",
            "curl -sO 'http://h/a/Makefile?x=1'",
            "wget -O Makefile http://h/x",
            "wget -qOMakefile http://h/x",
            "wget --output-document=Makefile http://h/x",
            "wget -a Makefile http://h/x",
            "wget http://h/a/Makefile",
            "wget -o log http://h/a/Makefile",
            "cpp -include x.h in.c Makefile",
            "cpp in.c Makefile",
            "cpp -I inc in.c Makefile",
            "cpp -o Makefile in.c",
            "objcopy Makefile",
            "objcopy a.o Makefile",
            "objcopy --dump-section .text=Makefile a.o b.o",
            "strip -o Makefile a.o",
            "strip Makefile",
            "ar rcs Makefile a.o",
            "ranlib Makefile",
            "7z a Makefile x",
            "convert a.png Makefile",
            "convert a.png txt:Makefile",
            "convert a.png -write Makefile b.png",
            "touch Makefile",
            "mkfifo Makefile",
            "sqlite3 -cmd x -bail Makefile 'create table t(x)'",
            "ffmpeg -i in.wav -f data Makefile",
            "ffmpeg -i in.wav -y -f tee '[f=mp4]a.mp4|Makefile'",
            "ffmpeg -i in.wav file:Makefile",
            "patch -i p.diff -o Makefile",
            "patch -r Makefile -i p.diff",
            "patch Makefile p.diff",
            "as -o Makefile x.s",
            "rustc -o Makefile x.rs",
            "rustc --emit=asm=x.s,link=Makefile x.rs",
            "tsc --outFile Makefile x.ts",
            "esbuild x.js --outfile=Makefile",
            "xsltproc -o Makefile a.xsl b.xml",
            "xmllint --output Makefile x.xml",
            "dot -Tplain -o Makefile x.dot",
            "msgfmt -o Makefile x.po",
            "flex -oMakefile x.l",
            "bison --defines=Makefile x.y",
            "gs -sOutputFile=Makefile x.ps",
            "pdftotext x.pdf Makefile",
            "asciidoctor -o Makefile x.adoc",
            "sass x.scss Makefile",
        ] {
            assert!(
                run(cmd).unwrap().iter().any(|p| p.ends_with("Makefile")),
                "{cmd}: {:?}",
                run(cmd)
            );
        }
        assert_eq!(
            run("curl --output-dir .git/hooks -O http://h/pre-commit").unwrap(),
            [".git/hooks", ".git/hooks/pre-commit"]
        );
        assert_eq!(run("wget -P .git http://h/x").unwrap(), [".git", ".git/x"]);
        assert_eq!(run("7z x a.7z -o.git").unwrap(), [".git"]);
        assert_eq!(run("mktemp -p .git/hooks").unwrap(), [".git/hooks"]);
        assert_eq!(run("unzip -d .git x.zip").unwrap(), [".git"]);
        assert_eq!(run("pip download -d .git x").unwrap(), [".git"]);
        assert_eq!(run("pip install --target=.git x").unwrap(), [".git"]);
        assert_eq!(run("npm pack --pack-destination .git").unwrap(), [".git"]);
        assert_eq!(run("javac -d .git X.java").unwrap(), [".git"]);
        assert_eq!(run("rustc --out-dir .git x.rs").unwrap(), [".git"]);
        assert_eq!(run("patch -B .git/ -i p.diff").unwrap(), [".git/"]);
    }

    #[test]
    fn harmless_reads_write_nothing_protected() {
        assert_eq!(
            run("curl -s http://h/Makefile").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            run("curl -H 'X: y' -o out.txt http://h/").unwrap(),
            ["out.txt"]
        );
        assert_eq!(run("cpp in.c").unwrap(), Vec::<String>::new());
        assert_eq!(run("ar t lib.a").unwrap(), Vec::<String>::new());
        assert_eq!(run("ffmpeg -i Makefile out.mp4").unwrap(), ["out.mp4"]);
        assert_eq!(run("wget -O out http://h/Makefile").unwrap(), ["out"]);
    }

    #[test]
    fn settings_files_and_server_names_are_refused() {
        for cmd in [
            "curl -K cfg http://h/",
            "curl --config=cfg http://h/",
            "curl -sK cfg http://h/",
            "curl -OJ http://h/x",
            "curl -o '#1' 'http://h/{a,b}'",
            "curl -O 'http://h/{Makefile,b}'",
            "wget -e output_document=Makefile http://h/",
            "wget --content-disposition http://h/",
            "curl -w '%output{Makefile}x' http://h/",
            "touch .gi*",
        ] {
            assert!(run(cmd).is_err(), "{cmd}");
        }
    }
}
