//! tools stage (gate), PURE: the registry program a command runs as a Python module
//! (`python3 -m pip` is `pip`, `coverage run -m pytest` is `pytest`, `python3 -m cProfile -m
//! pip` is `pip`): read from the command's words with the module table the registry holds.

use crate::programs::registry::{family, python_module};
use crate::shell::lex::Word;

/// Python's options that take a value (the next word when not attached).
const PYTHON_VALUE_OPTIONS: &str = "WXQ";

/// The registry program a command runs as a Python module, and where that program's
/// arguments start in `args`: `python3 -m pip list` is `pip list`, `python3 -mpytest -x` is
/// `pytest -x`, and a runner that runs a module runs it too (`coverage run -m pip …`).
/// `None` when the module is no registry program or the gate cannot tell which word it is.
pub(crate) fn module_program(base: &str, args: &[Word]) -> Option<(&'static str, usize)> {
    let fam = family(base)?;
    let start = match fam.names[0] {
        "python" => 0,
        // `coverage run [options] -m MODULE`.
        "coverage" if args.first().is_some_and(|w| w.value == "run") => 1,
        _ => return None,
    };
    let mut k = start;
    while let Some(w) = args.get(k) {
        let v = w.value.as_str();
        if !w.literal() || !v.starts_with('-') || v == "-" || v == "--" {
            return None;
        }
        let (module, next) = if v == "-m" {
            (args.get(k + 1)?.value.as_str(), k + 2)
        } else if let Some(m) = v.strip_prefix("-m").filter(|m| !m.is_empty()) {
            (m, k + 1)
        } else if fam.names[0] == "python" && !v.starts_with("--") {
            // A cluster of flags (`-Bu`), one that takes a value (`-W x`, `-Xdev`), or one
            // that ends the options (`-c`).
            let cluster = &v[1..];
            if cluster.contains(['c', 'm']) {
                return None;
            }
            match cluster.find(|c| PYTHON_VALUE_OPTIONS.contains(c)) {
                Some(at) if at + 1 == cluster.len() => k += 2,
                _ => k += 1,
            }
            continue;
        } else if v.contains('=') || fam.names[0] == "python" {
            k += 1;
            continue;
        } else {
            // coverage's `--source x` or `--branch`: the gate cannot tell.
            return None;
        };
        if matches!(module, "cProfile" | "profile") {
            // The profilers run the module they are given: `-m cProfile -o out -m pip …`.
            return profiled_module(args, next);
        }
        if module == "trace" {
            return traced_module(args, next);
        }
        let program = python_module(module)?;
        return Some((program, next));
    }
    None
}

/// The registry program cProfile or profile runs (`-o FILE`, `-s SORT`, then `-m MODULE`),
/// as [`module_program`] gives it.
fn profiled_module(args: &[Word], mut k: usize) -> Option<(&'static str, usize)> {
    while let Some(w) = args.get(k) {
        let v = w.value.as_str();
        if !w.literal() {
            return None;
        }
        match v {
            "-o" | "-s" | "--outfile" | "--sort" => k += 2,
            _ if v.starts_with("--outfile=") || v.starts_with("--sort=") => k += 1,
            "-m" => {
                let module = args.get(k + 1)?.value.as_str();
                let program = python_module(module)?;
                return Some((program, k + 2));
            }
            _ => return None,
        }
    }
    None
}

/// The registry program `python -m trace --module NAME` runs. trace's own `-m` is
/// `--missing` (a flag) and its `progname` a file unless `--module` came first; `-f`, `-C`,
/// `--ignore-module` and `--ignore-dir` take a value.
fn traced_module(args: &[Word], mut k: usize) -> Option<(&'static str, usize)> {
    let mut module = false;
    while let Some(w) = args.get(k) {
        let v = w.value.as_str();
        if !w.literal() {
            return None;
        }
        match v {
            "--module" => k += 1,
            "-f" | "--file" | "-C" | "--coverdir" | "--ignore-module" | "--ignore-dir" => k += 2,
            _ if v.starts_with('-') => k += 1,
            name => {
                return module
                    .then(|| python_module(name))
                    .flatten()
                    .map(|program| (program, k + 1))
            }
        }
        module |= v == "--module";
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_modules_are_their_programs() {
        let words = |s: &str| -> Vec<Word> { s.split_whitespace().map(Word::synthetic).collect() };
        for (base, args, want) in [
            ("python3", "-m pip list", Some(("pip", 2))),
            ("python3.11", "-mpip install x", Some(("pip", 1))),
            ("python", "-Bu -W ignore -m pytest -x", Some(("pytest", 5))),
            ("python3", "-Xdev -m py.test", Some(("pytest", 3))),
            (
                "python3",
                "-m cProfile -o out -m pip list",
                Some(("pip", 6)),
            ),
            ("coverage", "run -m pip install x", Some(("pip", 3))),
            ("python3-coverage", "run -m pytest", Some(("pytest", 3))),
            ("python3", "-c 'import pip'", None),
            ("python3", "x.py -m pip", None),
            ("python3", "-m json.tool", None),
            ("coverage", "run --branch -m pip", None),
            ("coverage", "report -m", None),
            ("ruby", "-m pip", None),
        ] {
            assert_eq!(module_program(base, &words(args)), want, "{base} {args}");
        }
    }
}
