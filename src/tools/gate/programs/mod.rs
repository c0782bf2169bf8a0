//! tools stage (gate), PURE: per-program knowledge: takes a program's words and returns findings
//! (an inner command, a reason to deny); never calls the judge.

pub(crate) mod argv;
pub(crate) mod awk;
pub(crate) mod find;
pub(crate) mod git;
pub(crate) mod interpreters;
pub(crate) mod make;
pub(crate) mod registry;
pub(crate) mod sed;
pub(crate) mod shells;
pub(crate) mod tar;
pub(crate) mod wrappers;

use crate::tools::gate::paths::path_option_outside;
use crate::tools::gate::programs::argv::{long_abbrev, options, short_has};
use crate::tools::gate::programs::awk::awk_check;
use crate::tools::gate::programs::git::git_check;
use crate::tools::gate::programs::make::make_check;
use crate::tools::gate::programs::registry::{CHECKED, INTERPRETERS, SHELLS};
use crate::tools::gate::programs::sed::sed_check;
use crate::tools::gate::programs::tar::tar_writes;
use crate::tools::gate::rule::glob_match;
use crate::tools::gate::shell::lex::Word;
/// For commands whose options the gate checks, an unquoted glob that could match a file named
/// like an option (`*` matches `--checkpoint-action=exec=sh`), or a brace expansion, would
/// hand the command options the gate never saw.
pub(crate) fn expansion_into_options(base: &str, args: &[Word]) -> Option<String> {
    let checked = CHECKED.contains(&base)
        || INTERPRETERS.contains(&base)
        || SHELLS.contains(&base)
        || matches!(
            base,
            "xxd" | "go" | "gmake" | "tee" | "cp" | "mv" | "ln" | "chmod" | "chown"
        );
    if !checked {
        return None;
    }
    for w in args.iter().take_while(|w| w.value != "--") {
        let braces = w.brace && (w.value.contains(',') || w.value.contains(".."));
        let leading_glob = w.glob && w.value.starts_with(['*', '?', '[']);
        if braces || leading_glob {
            return Some(format!(
                "`{base}`: `{}` could expand into options the gate cannot check (write `./{}` for files)",
                w.raw,
                w.raw.trim_start_matches("./")
            ));
        }
    }
    None
}

pub(crate) fn dangerous_args(base: &str, args: &[Word]) -> Option<String> {
    let hit = |what: &str| Some(format!("`{base}` {what}; denied whatever the rules say"));
    match base {
        "find" => {
            const BAD: [&str; 9] = [
                "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-exec", "-execdir", "-ok",
                "-okdir",
            ];
            for w in args {
                let v = w.value.as_str();
                if BAD[..5].contains(&v) {
                    return hit(&format!("with `{v}` deletes or writes files"));
                }
                if w.glob && BAD.iter().any(|b| glob_match(v, b)) {
                    return hit(&format!(
                        "has a glob `{v}` that could expand to an action like -exec or -delete"
                    ));
                }
            }
            None
        }
        "test" | "[" => {
            // `test -v 'a[$(id)]'` evaluates the subscript as arithmetic, running the substitution.
            args.iter()
                .any(|w| matches!(w.value.as_str(), "-v" | "-R"))
                .then(|| format!("`{base} -v`/`-R` evaluates array subscripts (arithmetic can run commands); denied"))
        }
        "sort" => {
            for v in options(args) {
                if let Some(n) = long_abbrev(v, &["compress-program", "output"]) {
                    return hit(&format!("`--{n}` runs a program or writes a file"));
                }
                if short_has(v, "o", "ktST") {
                    return hit("`-o` writes a file");
                }
            }
            None
        }
        "split" => options(args)
            .any(|v| long_abbrev(v, &["filter"]).is_some())
            .then(|| format!("`{base}` `--filter` runs a shell command; denied whatever the rules say")),
        "pandoc" => options(args)
            .any(|v| {
                long_abbrev(v, &["filter", "lua-filter", "pdf-engine"]).is_some()
                    || short_has(v, "FL", "otfrwMVdcHABDT")
            })
            .then(|| format!("`{base}` `--filter`/`--lua-filter`/`--pdf-engine` runs a program; denied whatever the rules say")),
        "pdflatex" | "latex" | "xelatex" | "lualatex" | "tex" | "pdftex" | "luatex" | "xetex"
        | "etex" | "latexmk" => args
            .iter()
            .map(|w| w.value.trim_start_matches('-'))
            .any(|v| {
                v.starts_with("shell-escape")
                    || v.starts_with("enable-write18")
                    || v.starts_with("shell-restricted")
                    || (base == "latexmk" && (v == "e" || v == "r" || v.contains('=')))
            })
            .then(|| format!("`{base}` with shell escape (or latexmk code and commands) runs programs; denied whatever the rules say")),
        "exiftool" => args
            .iter()
            .any(|w| {
                let v = w.value.to_ascii_lowercase();
                v.starts_with("-if") || v.contains("${") || v == "-@" || v.starts_with("-config")
            })
            .then(|| format!("`{base}` `-if`, `${{…}}` expressions and argument/config files evaluate Perl; denied whatever the rules say")),
        "gpg" | "gpg2" => options(args)
            .any(|v| long_abbrev(v, &["photo-viewer", "exec-path", "load-extension"]).is_some())
            .then(|| format!("`{base}` `--photo-viewer`/`--exec-path` runs programs; denied whatever the rules say")),
        "nc" | "ncat" | "netcat" | "nc.traditional" | "nc.openbsd" => options(args)
            .any(|v| {
                long_abbrev(v, &["exec", "sh-exec", "lua-exec"]).is_some()
                    || short_has(v, "ec", "pswiqIOTVXbgGmPx")
            })
            .then(|| format!("`{base}` `-e`/`-c`/`--exec` runs a program on the connection; denied whatever the rules say")),
        "crontab" => (args.is_empty() || args.iter().any(|w| !matches!(w.value.as_str(), "-l")))
            .then(|| format!("`{base}` installs commands that run later, outside this turn and its sandbox; only `crontab -l` is allowed")),
        "shuf" | "iconv" | "tree" => {
            for v in options(args) {
                if long_abbrev(v, &["output"]).is_some() || short_has(v, "o", "ntiIPLx") {
                    return hit("`-o`/`--output` writes a file");
                }
            }
            None
        }
        "uniq" | "xxd" => {
            // Options that take a separate value, whose value is not an operand.
            let valued: &[&str] = if base == "uniq" {
                &["-f", "-s", "-w"]
            } else {
                &[
                    "-c",
                    "-g",
                    "-l",
                    "-o",
                    "-s",
                    "-n",
                    "-R",
                    "-cols",
                    "-groupsize",
                    "-len",
                    "-offset",
                    "-seek",
                    "-name",
                ]
            };
            let mut positional = 0;
            let mut i = 0;
            // After `--`, and for xxd after the first operand (it stops reading options
            // there), every word is an operand, even one that starts with `-`.
            let mut operands_only = false;
            while let Some(w) = args.get(i) {
                let v = w.value.as_str();
                i += 1;
                if operands_only || v == "-" || !v.starts_with('-') {
                    positional += 1;
                    operands_only |= base == "xxd";
                } else if v == "--" {
                    operands_only = true;
                } else if valued.contains(&v) {
                    i += 1;
                }
            }
            (positional >= 2)
                .then(|| format!("`{base}` with two file operands writes the second; denied"))
        }
        "apt" | "apt-get" | "apt-cache" | "dpkg" => options(args)
            .any(|v| {
                matches!(v, "-o" | "-c") || v.starts_with("-o") && !v.starts_with("--")
                    || long_abbrev(v, &["option", "config-file"]).is_some()
            })
            .then(|| format!("`{base}` `-o`/`-c` set options that run programs (Pre-Invoke...); denied whatever the rules say")),
        "go" => {
            let all: Vec<&str> = options(args).collect();
            if all.first() == Some(&"env") && all.iter().any(|v| matches!(*v, "-w" | "-u")) {
                return hit("`env -w`/`-u` writes settings (GOFLAGS can name programs to run)");
            }
            // Go's flag package accepts `--o` for `-o`.
            let single: Vec<Word> = args
                .iter()
                .map(|w| {
                    let mut w = w.clone();
                    if w.value.starts_with("--") {
                        w.value.remove(0);
                    }
                    w
                })
                .collect();
            if single.iter().any(|w| {
                ["-gcflags", "-ldflags", "-asmflags"]
                    .iter()
                    .any(|f| w.value.starts_with(f))
                    && w.value.contains("-o")
            }) {
                return hit("build flags with `-o` write where the gate cannot check");
            }
            if let Some((o, p)) = path_option_outside(
                &single,
                &[
                    "-o", "-coverprofile", "-cpuprofile", "-memprofile", "-blockprofile",
                    "-mutexprofile", "-trace", "-outputdir", "-C", "-pkgdir", "-debug-trace",
                    "-modfile", "-overlay", "-test.coverprofile", "-test.cpuprofile",
                    "-test.memprofile", "-test.trace", "-test.outputdir",
                ],
            ) {
                return hit(&format!("`{o} {p}` reaches outside the work root"));
            }
            if all.iter().any(|v| v.contains("extld") || v.contains("toolexec")) {
                return hit("`-extld`/`-toolexec` in build flags runs a program the rules did not name");
            }
            for v in all {
                let name = v.trim_start_matches('-').split('=').next().unwrap_or("");
                if v.starts_with('-') && matches!(name, "exec" | "toolexec" | "vettool" | "overlay")
                {
                    return hit(&format!("`-{name}` runs a program the rules did not name"));
                }
            }
            None
        }
        "make" | "gmake" => make_check(args).map(|e| format!("`{base}`: {e}; denied")),
        "sed" | "gsed" => sed_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        "awk" | "gawk" | "mawk" | "nawk" => awk_check(args)
            .err()
            .map(|e| format!("`{base}`: {e}; denied")),
        "git" => git_check(args).map(|e| format!("`git`: {e}; denied whatever the rules say")),
        "man" => {
            for v in options(args) {
                if !v.starts_with('-') {
                    continue;
                }
                let ok = matches!(
                    v,
                    "-k" | "-f"
                        | "-a"
                        | "-w"
                        | "-W"
                        | "-s"
                        | "-S"
                        | "--apropos"
                        | "--whatis"
                        | "--all"
                        | "--where"
                        | "--location"
                ) || v.starts_with("--sections=")
                    || v.chars().skip(1).all(|c| "kfawWsS0123456789".contains(c));
                if !ok {
                    return hit(&format!(
                        "option `{v}` (man can run pagers, browsers and preprocessors)"
                    ));
                }
            }
            None
        }
        "less" | "more" | "most" => {
            for v in args.iter().map(|w| w.value.as_str()) {
                if v.starts_with('+') {
                    return hit("`+cmd` runs pager commands");
                }
                if short_has(v, "oOk", "bhjpPtTxyz#")
                    || long_abbrev(
                        v,
                        &[
                            "log-file",
                            "LOG-FILE",
                            "lesskey-file",
                            "lesskey-src",
                            "lesskey-content",
                        ],
                    )
                    .is_some()
                {
                    return hit("log or key files are denied");
                }
            }
            None
        }
        "tar" | "bsdtar" | "gtar" => {
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
                let old_style =
                    k == 0 && !v.starts_with('-') && (v.contains('I') || v.contains('F'));
                if old_style || short_has(v, "IF", "bCfgHKLNTVX") {
                    return hit("`-I`/`-F` runs a program");
                }
            }
            None
        }
        "rg" => {
            for v in options(args) {
                if long_abbrev(v, &["pre", "hostname-bin"]).is_some()
                    && !v.starts_with("--pre-glob")
                {
                    return hit("`--pre` runs a program");
                }
            }
            None
        }
        "zip" => {
            for v in options(args) {
                let cluster_tt = v.starts_with('-') && !v.starts_with("--") && v.contains("TT");
                if cluster_tt || long_abbrev(v, &["unzip-command"]).is_some() {
                    return hit("`-TT` runs a program");
                }
            }
            None
        }
        "rsync" => {
            for v in options(args) {
                if short_has(v, "e", "BfMT") || long_abbrev(v, &["rsh", "rsync-path"]).is_some() {
                    return hit("`-e`/`--rsh`/`--rsync-path` runs a program");
                }
            }
            None
        }
        "ssh" | "scp" | "sftp" => {
            let all: Vec<&str> = options(args).collect();
            for (k, v) in all.iter().enumerate() {
                let lc = v.to_ascii_lowercase();
                let next = all
                    .get(k + 1)
                    .map(|s| s.to_ascii_lowercase())
                    .unwrap_or_default();
                let opt = if lc == "-o" {
                    next.as_str()
                } else {
                    lc.strip_prefix("-o").unwrap_or("")
                };
                if [
                    "proxycommand",
                    "localcommand",
                    "permitlocalcommand",
                    "knownhostscommand",
                    "proxyusefdpass",
                ]
                .iter()
                .any(|o| opt.starts_with(o))
                    || *v == "-F"
                    || (base != "ssh" && *v == "-S")
                {
                    return hit("options that run local programs are denied");
                }
            }
            None
        }
        "tcpdump" => {
            for v in options(args) {
                if short_has(v, "zw", "") {
                    return hit("`-z`/`-w` runs a program or writes a file");
                }
            }
            None
        }
        "cargo" => {
            for v in options(args) {
                if v == "--config" || v.starts_with("--config=") || v.starts_with("-Z") {
                    return hit("`--config`/`-Z` can set a runner or other programs to execute");
                }
            }
            // The test binary's own `--logfile` (after `--`) writes wherever it is told.
            if args.iter().any(|w| w.value == "--logfile" || w.value.starts_with("--logfile=")) {
                return hit("`--logfile` writes a file");
            }
            path_option_outside(
                args,
                &["--target-dir", "--manifest-path", "--artifact-dir", "--out-dir", "--lockfile-path"],
            )
            .map(|(o, p)| format!("`{o} {p}` reaches outside the work root; denied whatever the rules say"))
        }
        "printf" => {
            for v in options(args) {
                if v.starts_with("-v") {
                    return Some("`printf -v` assigns a shell variable; always denied".into());
                }
                if !v.starts_with('-') {
                    break;
                }
            }
            None
        }
        _ => None,
    }
}
