//! tools stage (gate), PURE: which redirections may run: heredocs, here-strings, descriptor
//! duplication and writes into the work root.

use crate::paths::{is_build_file, path_under};
use crate::programs::writes::{writes, Writes};
use crate::rule::{files_a_rule_runs, Policy, RuleKind};
use crate::shell::lex::{Redir, Word};
use crate::shell::words::unsafe_var;
/// `top`: the redirection is in the command itself, not in a script a shell it runs reads
/// (only there is `/tmp` rewritten, and `$TMPDIR` surely the private dir: `env -i sh -c`
/// would clear it).
pub(crate) fn check_redirect(
    policy: &Policy,
    cwd: &str,
    r: &Redir,
    top: bool,
) -> Result<Option<(String, String)>, String> {
    let t = &r.target;
    if r.heredoc.is_some() || r.op == "<<<" {
        return inline_input(r).map(|()| None);
    }
    // `/tmp/x` and `$TMPDIR/x` name the command's private temp dir (the runner rewrites
    // `/tmp/…` words to it; bash expands `$TMPDIR` to it).
    if let Some(rest) = private_tmp(t).filter(|_| top && r.op != "<&") {
        return private_tmp_redirect(policy, r, &rest);
    }
    if !t.literal() || t.ansi_c {
        return Err(format!(
            "the redirection target `{}` contains an expansion; only plain paths are allowed",
            t.raw
        ));
    }
    let v = t.value.as_str();
    if v.starts_with("/dev/tcp/") || v.starts_with("/dev/udp/") {
        return Err(
            "redirection to /dev/tcp or /dev/udp opens a network connection; always denied".into(),
        );
    }
    let fd_target = !v.is_empty()
        && (v == "-"
            || v.trim_end_matches('-').chars().all(|c| c.is_ascii_digit())
                && !v.trim_end_matches('-').is_empty());
    match r.op {
        "<" => return Ok(None),
        "<&" if fd_target => return Ok(None),
        "<&" => return Err(format!("`<&{v}` is not a file descriptor duplication")),
        ">&" if fd_target => return Ok(None),
        _ => {}
    }
    // Everything left writes to a file: `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, `>&file`.
    if matches!(v, "/dev/null" | "/dev/stdout" | "/dev/stderr") {
        return Ok(None);
    }
    if v.starts_with("/dev/") || v.starts_with("/proc/") || v.starts_with("/sys/") {
        return Err(format!(
            "output redirection to the device `{v}` is always denied"
        ));
    }
    write_target(policy, cwd, v, "output redirection to").map(|p| Some((p, ".".to_string())))
}

/// A heredoc or here-string: allowed when bash would not expand what the gate cannot judge.
fn inline_input(r: &Redir) -> Result<(), String> {
    if let Some((quoted, body)) = &r.heredoc {
        if !quoted && (body.contains('$') || body.contains('`') || body.contains("\\\n")) {
            return Err(
                "the heredoc delimiter is unquoted and the body contains `$`, backticks or a line continuation, so bash would expand it; quote the delimiter (<<'EOF')"
                    .into(),
            );
        }
        return Ok(());
    }
    match unsafe_var(&r.target) {
        Some(v) => Err(format!(
            "expansion of `${v}` in a here-string cannot be judged"
        )),
        None => Ok(()),
    }
}

/// A redirection into the command's private temp dir (`rest`: the path inside it): reading is
/// allowed, writing a file when `write_redirects` allows it, checked at run time.
fn private_tmp_redirect(
    policy: &Policy,
    r: &Redir,
    rest: &str,
) -> Result<Option<(String, String)>, String> {
    if r.op == "<" {
        return Ok(None);
    }
    if !policy.write_redirects {
        return Err(format!(
            "output redirection to the file `{}` is denied (a rule authorises running a command, not writing files)",
            r.target.raw
        ));
    }
    if rest.is_empty() {
        return Err(format!(
            "output redirection to `{}` is not a file path",
            r.target.raw
        ));
    }
    Ok(Some((
        format!("{PRIVATE_TMP}/{rest}"),
        PRIVATE_TMP.to_string(),
    )))
}

/// The prefix of a run-time check of a path in the command's private temp dir: `/tmp/REST`
/// with this prefix must resolve inside that directory.
pub(crate) const PRIVATE_TMP: &str = "/tmp";

/// The path below the command's private temp dir a word names, or `None`: `/tmp`, `/tmp/REST`
/// (as written: the runner rewrites such words to the private dir) or `$TMPDIR/REST`
/// (`${TMPDIR}`, quoted or not: bash expands it there), REST a plain relative path (no `..`,
/// no glob, brace or other expansion). "" for the directory itself.
pub(crate) fn private_tmp(w: &Word) -> Option<String> {
    if w.ansi_c || w.glob || w.brace || w.tilde {
        return None;
    }
    let v = w.value.as_str();
    let rest = if w.vars.is_empty() {
        v.strip_prefix("/tmp")?
    } else if w.vars.iter().all(|x| x == "TMPDIR") && w.vars.len() == 1 {
        v.strip_prefix("${TMPDIR}")
            .or_else(|| v.strip_prefix("$TMPDIR"))?
    } else {
        return None;
    };
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    let comps: Vec<&str> = rest
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps
        .iter()
        .any(|c| *c == ".." || c.contains(['$', '`', '\\']))
    {
        return None;
    }
    Some(comps.join("/"))
}

/// Where a write to the file `v`, named in a command run in `cwd` (relative to the work root,
/// "" for the root), lands: its path relative to the work root, or why it is refused. The
/// rules of `> FILE`, shared with `sed -i`: only with `write_redirects = true`, a relative
/// path that stays inside the work root, never a place [`write_refusal`] protects. `what`
/// starts the reason ("output redirection to").
pub(crate) fn write_target(
    policy: &Policy,
    cwd: &str,
    v: &str,
    what: &str,
) -> Result<String, String> {
    if let Some(rel) = root_relative(policy, v) {
        // `/repo/notes.txt` with the work root `/repo`: the relative path it names, from
        // the root (not from a `cd` directory).
        return write_target(policy, "", &rel, what);
    }
    if v.starts_with('/') {
        return Err(format!(
            "{what} the absolute path `{v}` is always denied (outside the work root)"
        ));
    }
    if !policy.write_redirects {
        return Err(format!(
            "{what} the file `{v}` is denied (a rule authorises running a command, not writing files)"
        ));
    }
    let comps: Vec<&str> = v
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.is_empty() {
        return Err(format!("{what} `{v}` is not a file path"));
    }
    let joined = join(cwd, v);
    let Some(rel) = lexical(&joined).filter(|r| !r.is_empty()) else {
        return Err(format!("{what} `{v}` may leave the work root (`..`)"));
    };
    if cwd.is_empty() && comps.contains(&"..") {
        return Err(format!("{what} `{v}` may leave the work root (`..`)"));
    }
    if let Some(why) = write_refusal(policy, &rel) {
        return Err(format!("{what} `{v}` {why}; always denied"));
    }
    Ok(rel)
}

/// `p` as named from `cwd` (relative to the work root; "" for the root): `cwd/p` unless `p`
/// is absolute.
pub(crate) fn join(cwd: &str, p: &str) -> String {
    if cwd.is_empty() || p.starts_with('/') {
        p.to_string()
    } else {
        format!("{cwd}/{p}")
    }
}

/// Why a writing program's destinations ([`writes`]) are refused, if they are: the places
/// output redirection may not write either ([`write_refusal`]), or destinations the gate
/// cannot read. `tail`: `xargs` or `find -exec … +` appends unseen arguments.
pub(crate) fn program_write_refusal(
    policy: &Policy,
    cwd: &str,
    base: &str,
    args: &[Word],
    tail: bool,
) -> Option<String> {
    if let Some(why) = removal_refusal(policy, cwd, base, args) {
        return Some(why);
    }
    let paths = match writes(base, args, tail) {
        Err(e) => return Some(e),
        Ok(Writes::Unknown) => return None,
        Ok(Writes::Paths(p)) => p,
    };
    for p in paths {
        let named = match root_relative(policy, &p) {
            Some(rel) => rel,
            None => join(cwd, &p),
        };
        let Some(rel) = lexical(&named) else {
            continue;
        };
        if rel.starts_with('/') && !writable_outside(&rel) {
            return Some(format!(
                "`{base}` writing `{p}` writes outside the work root; denied whatever the rules say"
            ));
        }
        if let Some(why) = write_refusal(policy, &rel) {
            return Some(format!(
                "`{base}` writing `{p}` {why}; denied whatever the rules say"
            ));
        }
    }
    None
}

/// The path relative to the work root that the absolute `p` names, when the policy knows the
/// work root and `p` lies beneath it ("." for the root itself); `None` otherwise. Compared as
/// text after `.`/`..` resolution, so `/repo/../etc` is not beneath `/repo`. PURE.
pub(crate) fn root_relative(policy: &Policy, p: &str) -> Option<String> {
    let root = policy.work_root.as_deref()?.trim_end_matches('/');
    if root.is_empty() || !p.starts_with('/') {
        return None;
    }
    let clean = lexical(p)?;
    let rest = clean.strip_prefix(root)?;
    match rest {
        "" => Some(".".to_string()),
        r => r.strip_prefix('/').map(str::to_string),
    }
}

/// Why `rm`, `rmdir`, `unlink`, `shred`, `mkdir` or `chmod` may not touch one of its literal
/// operands: one outside the work root (but the private temp dir), one that climbs above it,
/// the root itself, or anything in `.git`. Other dotfiles and build files stay removable
/// (`rm -rf .pytest_cache`): the write rules keep them from being written again. Operands
/// with expansions are left to the kernel's write rules, as today. PURE.
fn removal_refusal(policy: &Policy, cwd: &str, base: &str, args: &[Word]) -> Option<String> {
    // Options that take the next word as their value.
    let valued: &[&str] = match base {
        "rm" | "rmdir" | "unlink" => &[],
        "shred" => &["-n", "-s", "--iterations", "--size", "--random-source"],
        "mkdir" => &["-m", "--mode", "--context"],
        "chmod" => &[],
        _ => return None,
    };
    let mut operands: Vec<&Word> = Vec::new();
    let mut options_done = false;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let v = w.value.as_str();
        if !options_done && v == "--" {
            options_done = true;
        } else if !options_done && v.starts_with('-') && v.len() > 1 && !chmod_mode(base, v) {
            if valued.contains(&v) {
                i += 1;
            }
        } else {
            operands.push(w);
        }
    }
    // chmod's first operand is the mode, unless `--reference` names a file for it.
    let reference = args.iter().any(|w| w.value.starts_with("--reference"));
    if base == "chmod" && !reference && !operands.is_empty() {
        operands.remove(0);
    }
    for w in operands {
        if !w.literal() || w.ansi_c || w.glob || w.brace || w.tilde {
            continue;
        }
        let p = w.value.as_str();
        let named = match root_relative(policy, p) {
            Some(rel) => rel,
            None => join(cwd, p),
        };
        let refusal = match lexical(&named) {
            None => Some("climbs above the work root"),
            Some(rel) if rel.starts_with('/') && !writable_outside(&rel) => {
                Some("lies outside the work root")
            }
            Some(rel) if rel.starts_with('/') => None,
            Some(rel) if rel.is_empty() => Some("is the work root itself"),
            Some(rel) if rel.split('/').any(|c| c == ".git") => Some("is in .git"),
            Some(_) => None,
        };
        if let Some(why) = refusal {
            return Some(format!(
                "`{base}` on `{p}`: the path {why}; denied whatever the rules say"
            ));
        }
    }
    None
}

/// Is `v`, given to chmod where an option could stand, its mode (`-x`, `-w`, `-rwx`)?
fn chmod_mode(base: &str, v: &str) -> bool {
    base == "chmod" && v[1..].chars().all(|c| "rwxXst".contains(c))
}

/// Absolute places outside the work root a program may be told to write: the command's
/// private temp dir (the runner rewrites `/tmp/…` words to it) and the data devices.
fn writable_outside(p: &str) -> bool {
    matches!(p, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/tmp") || p.starts_with("/tmp/")
}

/// `p` with `.` and `..` resolved as text; `None` when it climbs above its start (outside the
/// work root: the kernel's write rules decide there). Absolute paths keep their leading `/`.
pub(crate) fn lexical(p: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            c => out.push(c),
        }
    }
    let body = out.join("/");
    Some(if p.starts_with('/') {
        format!("/{body}")
    } else {
        body
    })
}

/// Why writing the work-root-relative path `rel` (no `..`, not absolute) is refused whatever
/// the rules say, or `None`: a dotfile or `.git/`, a build file, or a place a path rule lets
/// programs run from. Shared by output redirection and the file tools, so both protect the
/// same places. The reason reads after "writing `rel`": "writes a dotfile or inside .git".
pub fn write_refusal(policy: &Policy, rel: &str) -> Option<String> {
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if comps.iter().any(|c| c.starts_with('.')) {
        return Some("writes a dotfile or inside .git".into());
    }
    if let Some(last) = comps.last() {
        let lc = last.to_ascii_lowercase();
        if is_build_file(&lc) {
            return Some("writes a file that build and test tools run".into());
        }
    }
    // Writing a script that a path rule lets run would turn the write into running anything;
    // so would replacing the directory itself or one above it (`mv evil scripts`, `mv evil/x
    // scripts` into the existing directory).
    for rule in &policy.allow {
        if let RuleKind::Path(prefix) = &rule.kind {
            let rel_dot = format!("./{rel}");
            let same = |a: &str, b: &str| {
                let comps = |p: &str| -> Vec<String> {
                    p.split('/')
                        .filter(|c| !c.is_empty() && *c != ".")
                        .map(str::to_string)
                        .collect()
                };
                !a.starts_with('/') && !b.starts_with('/') && comps(a) == comps(b)
            };
            if path_under(rel, prefix, false)
                || path_under(&rel_dot, prefix, false)
                || same(rel, prefix)
                || (!rel.split('/').all(|c| c.is_empty() || c == ".")
                    && path_under(prefix, &rel_dot, false))
            {
                return Some(format!(
                    "writes where rule `{}` lets programs run",
                    rule.text
                ));
            }
        }
    }
    // A file an allow rule runs by name (`bash ci.sh`, `python3 tools/gen.py *`,
    // `./run-tests.sh`): written, it runs whatever the model put in it; so does replacing a
    // directory above it.
    let comps_of = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect()
    };
    let target = comps_of(rel);
    if !target.is_empty() && !rel.starts_with('/') {
        for rule in &policy.allow {
            for file in files_a_rule_runs(&rule.kind) {
                let f = comps_of(&file);
                if !file.starts_with('/')
                    && f.len() >= target.len()
                    && f[..target.len()] == target[..]
                {
                    return Some(format!("writes `{file}`, which rule `{}` runs", rule.text));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::rule::files_a_rule_runs;
    use crate::rule::Rule;

    fn files(rule: &str) -> Vec<String> {
        files_a_rule_runs(&Rule::parse(rule).unwrap().kind)
    }

    #[test]
    fn the_files_a_rule_runs() {
        assert_eq!(files("bash ci.sh"), ["ci.sh"]);
        assert_eq!(files("python3 tools/gen.py *"), ["tools/gen.py"]);
        assert_eq!(files("./run-tests.sh"), ["./run-tests.sh"]);
        assert_eq!(files("scripts/build.sh *"), ["scripts/build.sh"]);
        assert_eq!(files("make -f build/x.mk *"), ["build/x.mk"]);
        assert!(files("bash -c *").is_empty());
        assert!(files("cargo test *").is_empty());
        assert!(files("awk *").is_empty());
        assert!(
            files("python3 tools/ge*").is_empty(),
            "a raw prefix's last word"
        );
    }
}
