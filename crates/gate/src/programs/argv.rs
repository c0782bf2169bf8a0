//! tools stage (gate), PURE: argv helpers shared by the program files: option scanning,
//! abbreviations, clusters, and the `Inner` finding.

use crate::paths::basename;
use crate::programs::registry::{canonical, family, Finder, Kind};
use crate::shell::lex::{Dialect, Word};
pub(crate) enum Inner {
    None,
    Deny(String),
    /// Word ranges that are commands to judge; `true` when `xargs` appends unseen arguments.
    Commands(Vec<(std::ops::Range<usize>, bool)>),
    /// A shell script to judge as a whole, in the grammar of the shell that runs it.
    Script(String, Dialect),
}

/// Splits a wrapper's leading options: returns the index of the first operand, or a denial.
/// `with_arg` options take a value (attached or next word); `flags` take none.
pub(crate) fn skip_options(
    words: &[Word],
    from: usize,
    flags: &[&str],
    with_arg: &[&str],
    wrapper: &str,
) -> Result<usize, String> {
    let mut i = from;
    while let Some(w) = words.get(i) {
        let v = w.value.as_str();
        if v == "--" {
            return Ok(i + 1);
        }
        if !v.starts_with('-') || v == "-" {
            return Ok(i);
        }
        if !w.literal() {
            return Err(format!(
                "`{wrapper}` has an option the gate cannot read: `{}`",
                w.raw
            ));
        }
        if flags.contains(&v) {
            i += 1;
            continue;
        }
        if with_arg.contains(&v) {
            if words.get(i + 1).is_some_and(|w| !w.literal()) {
                return Err(format!(
                    "`{wrapper}` option `{v}` has a value the gate cannot read: `{}`",
                    words[i + 1].raw
                ));
            }
            i += 2;
            continue;
        }
        let attached = with_arg.iter().any(|o| {
            if o.starts_with("--") {
                v.starts_with(&format!("{o}="))
            } else {
                v.len() > o.len() && v.starts_with(o) && !v.starts_with("--")
            }
        });
        if attached {
            i += 1;
            continue;
        }
        return Err(format!(
            "`{wrapper}` option `{v}` is not understood by the gate"
        ));
    }
    Ok(i)
}

/// The script text a word list stands for when a program joins it and runs `sh -c`.
pub(crate) fn script_of(words: &[Word], base: &str) -> Result<String, String> {
    if let Some(w) = words.iter().find(|w| !w.literal()) {
        return Err(format!(
            "`{base}` runs a script containing `{}`, which the gate cannot read",
            w.raw
        ));
    }
    Ok(words
        .iter()
        .map(|w| w.value.as_str())
        .collect::<Vec<_>>()
        .join(" "))
}

pub(crate) fn is_stdin_path(v: &str) -> bool {
    matches!(v, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

/// `--name[=…]` where `name` is an abbreviation (GNU getopt_long accepts any unambiguous
/// prefix) of one of `names`.
pub(crate) fn long_abbrev<'n>(arg: &str, names: &[&'n str]) -> Option<&'n str> {
    let body = arg.strip_prefix("--")?;
    let name = body.split('=').next().unwrap_or(body);
    if name.is_empty() {
        return None;
    }
    names.iter().copied().find(|n| n.starts_with(name))
}

/// Does the short-option cluster `-abc` contain one of `flags`? Stops at the first option in
/// `takes_arg` (the rest of the cluster is its value).
pub(crate) fn short_has(arg: &str, flags: &str, takes_arg: &str) -> bool {
    let Some(cluster) = arg.strip_prefix('-') else {
        return false;
    };
    if cluster.starts_with('-') {
        return false;
    }
    for c in cluster.chars() {
        if flags.contains(c) {
            return true;
        }
        if takes_arg.contains(c) {
            return false;
        }
    }
    false
}

/// Arguments up to `--`.
pub(crate) fn options(args: &[Word]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(|w| w.value.as_str())
        .take_while(|v| *v != "--")
}

/// The reason for a denial no rule can lift: `` `base` what; denied whatever the rules say ``.
pub(crate) fn denied(base: &str, what: &str) -> Option<String> {
    Some(format!("`{base}` {what}; denied whatever the rules say"))
}

/// How many values an option takes, as GNU getopt reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arity {
    /// None.
    Flag,
    /// One: the rest of a short cluster, after `=`, or the next word.
    Value,
    /// An optional one: only the rest of a short cluster, or after `=`.
    Optional,
}

/// A program's options, for [`getopt`]: short letters and long names with their arity.
pub(crate) struct OptionSpec<'a> {
    pub(crate) short: &'a [(char, Arity)],
    pub(crate) long: &'a [(&'a str, Arity)],
}

/// A command line as GNU `getopt_long` reads it (options permuted among operands, clusters,
/// attached values, unambiguous abbreviations of long names).
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// Each option by its full spelling (`-f`, `--file`) with its value, in order.
    pub(crate) options: Vec<(String, Option<String>)>,
    pub(crate) operands: Vec<String>,
}

impl Parsed {
    /// The values given to any of `names`.
    pub(crate) fn values<'p>(&'p self, names: &'p [&str]) -> impl Iterator<Item = &'p str> {
        self.options
            .iter()
            .filter(move |(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.as_deref())
    }

    pub(crate) fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }
}

/// Reads `args` as GNU `getopt_long` would with `spec`. An option the spec does not know, an
/// ambiguous abbreviation or a missing value is an error: the gate would not know which
/// words are values and which are operands.
pub(crate) fn getopt(args: &[Word], spec: &OptionSpec) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut k = 0;
    while let Some(w) = args.get(k) {
        k += 1;
        let v = w.value.as_str();
        if v == "--" {
            out.operands
                .extend(args[k..].iter().map(|w| w.value.clone()));
            break;
        }
        if v == "-" || !v.starts_with('-') {
            out.operands.push(v.to_string());
            continue;
        }
        if let Some(body) = v.strip_prefix("--") {
            let (name, attached) = match body.split_once('=') {
                Some((n, a)) => (n, Some(a)),
                None => (body, None),
            };
            let exact = spec.long.iter().find(|(n, _)| *n == name);
            let found = match exact {
                Some(e) => *e,
                None => {
                    let hits: Vec<&(&str, Arity)> = spec
                        .long
                        .iter()
                        .filter(|(n, _)| !name.is_empty() && n.starts_with(name))
                        .collect();
                    match hits.as_slice() {
                        [one] => **one,
                        [] => return Err(format!("option `--{name}` is not understood")),
                        _ => return Err(format!("option `--{name}` is ambiguous")),
                    }
                }
            };
            let value = match (found.1, attached) {
                (Arity::Flag, Some(_)) => {
                    return Err(format!("option `--{}` takes no value", found.0))
                }
                (Arity::Flag, None) | (Arity::Optional, None) => None,
                (_, Some(a)) => Some(a.to_string()),
                (Arity::Value, None) => {
                    k += 1;
                    match args.get(k - 1) {
                        Some(w) => Some(w.value.clone()),
                        None => return Err(format!("option `--{}` needs a value", found.0)),
                    }
                }
            };
            out.options.push((format!("--{}", found.0), value));
            continue;
        }
        let cluster = &v[1..];
        for (n, c) in cluster.char_indices() {
            let Some(&(_, arity)) = spec.short.iter().find(|(s, _)| *s == c) else {
                return Err(format!("option `-{c}` is not understood"));
            };
            let rest = &cluster[n + c.len_utf8()..];
            let value = match arity {
                Arity::Flag => {
                    out.options.push((format!("-{c}"), None));
                    continue;
                }
                Arity::Optional => (!rest.is_empty()).then(|| rest.to_string()),
                Arity::Value if !rest.is_empty() => Some(rest.to_string()),
                Arity::Value => {
                    k += 1;
                    match args.get(k - 1) {
                        Some(w) => Some(w.value.clone()),
                        None => return Err(format!("option `-{c}` needs a value")),
                    }
                }
            };
            out.options.push((format!("-{c}"), value));
            break;
        }
    }
    Ok(out)
}

/// Would `placeholder` (xargs `-I`'s string, find's `{}`), replaced by input the gate cannot
/// see, land where it can be code? When any word names a shell, an interpreter, a runner or
/// `watch` (the command itself, or one a wrapper before it runs: `env sh -c 'echo {}'`), a
/// file named `a;rm x` would be run.
pub(crate) fn substituted_into_code(command: &[Word], placeholder: &str) -> bool {
    command.iter().any(|w| w.value.contains(placeholder))
        && command.iter().any(|w| {
            family(&canonical(basename(&w.value))).is_some_and(|f| {
                f.runs_code() || f.kind == Kind::Runner || f.inner == Finder::Watch
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: OptionSpec = OptionSpec {
        short: &[
            ('k', Arity::Flag),
            ('f', Arity::Value),
            ('j', Arity::Optional),
        ],
        long: &[
            ("file", Arity::Value),
            ("jobs", Arity::Optional),
            ("keep-going", Arity::Flag),
            ("keep-quiet", Arity::Flag),
        ],
    };

    fn parse(line: &str) -> Result<Parsed, String> {
        let words: Vec<Word> = line.split(' ').map(Word::synthetic).collect();
        getopt(&words, &SPEC)
    }

    fn values(line: &str) -> Vec<String> {
        parse(line)
            .unwrap()
            .values(&["-f", "--file"])
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn values_are_found_in_every_spelling() {
        for line in [
            "-f -",
            "-f-",
            "-kf -",
            "-kf-",
            "--file -",
            "--file=-",
            "--fi -",
            "--f=-",
            "all -kf -",
        ] {
            assert_eq!(values(line), ["-"], "{line}");
        }
    }

    #[test]
    fn optional_values_are_only_attached() {
        let p = parse("-j 4 all").unwrap();
        assert_eq!(p.options, [("-j".to_string(), None)]);
        assert_eq!(p.operands, ["4", "all"]);
        let p = parse("-jf x").unwrap();
        assert_eq!(p.options, [("-j".to_string(), Some("f".to_string()))]);
        assert_eq!(p.operands, ["x"]);
    }

    #[test]
    fn operands_after_dashdash_and_unknowns() {
        let p = parse("-- -f x").unwrap();
        assert!(p.options.is_empty());
        assert_eq!(p.operands, ["-f", "x"]);
        assert!(parse("-x").is_err());
        assert!(parse("--keep").is_err(), "ambiguous");
        assert!(parse("--keep-g").is_ok());
        assert!(parse("--keep-going=1").is_err(), "a flag takes no value");
        assert!(parse("-f").is_err(), "missing value");
    }
}
