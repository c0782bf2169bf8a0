//! tools stage (gate), PURE: test runners' and language tools' options that load code the
//! project did not name or run programs: pytest's plugins and debugger however spelt, tox's
//! overrides, Perl's json_pp and ptar.

use crate::programs::argv::{denied, long_abbrev, options};
use crate::shell::lex::Word;

/// pytest's short options that take no value (`-q`, `-x`...): a cluster of them may end in
/// one that does (`-qo addopts=…`).
const PYTEST_FLAGS: &str = "hVqvxsl";

/// pytest options as pytest reads them (argparse: `-pNAME`, `-p NAME`, `-oK=V`, `-o K=V`,
/// `--override-ini=K=V`, `--override-ini K=V`; long names also abbreviated, as older pytest
/// accepts): `--pdb`/`--trace`/`--pdbcls` start a debugger that reads its commands (`!import
/// os; …`) from stdin; `-p NAME` imports a plugin module (only `-p no:NAME` disables one); an
/// `addopts` override re-reads options (`-o addopts=-pevil`), a warning filter whose category
/// is `module.Class` imports the module (`-W ignore::evil.X`, also through `filterwarnings`);
/// `--basetemp` removes the directory it names.
pub(crate) fn pytest_check(base: &str, args: &[Word]) -> Option<String> {
    let all: Vec<&str> = options(args).collect();
    // The value of a short option `-x` (alone, attached, the next word, or after flags in a
    // cluster: argparse reads `-qoaddopts=…` as `-q -o addopts=…`) or of a long one.
    let value = |k: usize, short: char, long: &[&str]| -> Option<Option<&str>> {
        let v = all[k];
        if let Some(cluster) = v.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            for (at, c) in cluster.char_indices() {
                if c == short {
                    let rest = &cluster[at + c.len_utf8()..];
                    return Some(if rest.is_empty() {
                        all.get(k + 1).copied()
                    } else {
                        Some(rest)
                    });
                }
                if !PYTEST_FLAGS.contains(c) {
                    return None;
                }
            }
            return None;
        }
        long_abbrev(v, long)?;
        Some(match v.split_once('=') {
            Some((_, rest)) => Some(rest),
            None => all.get(k + 1).copied(),
        })
    };
    for (k, v) in all.iter().enumerate() {
        if long_abbrev(v, &["pdb", "pdbcls", "trace"]).is_some() {
            return denied(
                base,
                "`--pdb`/`--trace` start a debugger that reads commands from stdin",
            );
        }
        if long_abbrev(v, &["basetemp"]).is_some() {
            return denied(base, "`--basetemp` removes the directory it names");
        }
        if let Some(plugin) = value(k, 'p', &[]) {
            if plugin.is_none_or(|p| !p.starts_with("no:")) {
                return denied(base, "`-p NAME` imports a plugin module");
            }
        }
        if let Some(ini) = value(k, 'o', &["override-ini"]) {
            let (key, val) = ini.unwrap_or_default().split_once('=').unwrap_or(("", ""));
            match key.trim() {
                "" | "addopts" => {
                    return denied(
                        base,
                        "`-o addopts=…` reads options (`-p plugin`, `--pdb`) the gate cannot see",
                    )
                }
                "filterwarnings" if imports_category(val) => {
                    return denied(
                        base,
                        "a warning filter for `module.Class` imports the module",
                    )
                }
                _ => {}
            }
        }
        if let Some(filter) = value(k, 'W', &["pythonwarnings"]) {
            if filter.is_none_or(imports_category) {
                return denied(
                    base,
                    "a warning filter for `module.Class` imports the module",
                );
            }
        }
    }
    None
}

/// Does a warning filter (`action:message:category:module:lineno`) name its category by a
/// module (`evil.X`), which Python imports to find it?
fn imports_category(filter: &str) -> bool {
    filter.split(':').nth(2).is_some_and(|c| c.contains('.'))
}

/// tox options that run commands the tox.ini does not hold: `-x`/`--override` set any key
/// (`testenv.commands=…`), `exec` runs a command, `-c`/`--conf` reads another config file,
/// `--discover` runs the Python interpreters in a directory, `--root` reads another
/// project's tox.ini, `--workdir`/`--devenv` create environments where they are told.
pub(crate) fn tox_check(base: &str, args: &[Word]) -> Option<String> {
    let all: Vec<&str> = options(args).collect();
    let sub = all.iter().find(|v| !v.starts_with('-'));
    if sub.is_some_and(|s| matches!(*s, "exec" | "e")) {
        return denied(base, "`exec` runs any command");
    }
    let hit = all.iter().any(|v| {
        v.starts_with("-x")
            || (v.starts_with("-c") && !v.starts_with("--"))
            || long_abbrev(
                v,
                &["override", "conf", "discover", "root", "workdir", "devenv"],
            )
            .is_some()
    });
    hit.then(|| {
        format!("`{base}` `-x`/`-c`/`--discover`/`--root`/`--workdir` set commands or read a config the gate cannot see; denied whatever the rules say")
    })
}

/// Perl's json_pp `-f eval` evaluates its input as Perl (only the `json` reader is
/// allowed); ptar `-x` extracts member names the gate cannot see (into `.git`, over build
/// files), where tar's own check cannot follow.
pub(crate) fn perl_tools_check(base: &str, args: &[Word]) -> Option<String> {
    let all: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
    if base == "ptar" {
        let extract = all
            .iter()
            .any(|v| v.starts_with('-') && !v.starts_with("--") && v.contains('x'));
        return extract
            .then(|| denied(base, "`-x` extracts files the gate cannot see"))
            .flatten();
    }
    for (k, v) in all.iter().enumerate() {
        let from = match *v {
            "-f" | "--f" | "-from" | "--from" => all.get(k + 1).copied(),
            _ => v
                .strip_prefix("-f")
                .or_else(|| v.strip_prefix("--f="))
                .or_else(|| v.strip_prefix("-f="))
                .filter(|r| !r.is_empty()),
        };
        let names_reader = v.starts_with("-f") || *v == "--f" || from.is_some();
        if names_reader && from.is_none_or(|f| f.trim_start_matches('=') != "json") {
            return denied(base, "`-f eval` evaluates its input as Perl");
        }
    }
    None
}
