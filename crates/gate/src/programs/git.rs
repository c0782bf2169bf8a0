//! tools stage (gate), PURE: git: global options, subcommands and options that run programs or
//! write outside the work root; config only as a read.

use crate::paths::basename;
use crate::paths::outside_path;
use crate::programs::argv::{long_abbrev, options, short_has};
use crate::programs::registry::{canonical, family, Kind};
use crate::shell::lex::Word;

/// Could this command run git (git itself, or a shell, interpreter, runner or wrapper that
/// could)? Run in another directory (`find -execdir`, `fd --base-directory`), git would find
/// a repository below the work root whose config the model wrote.
pub(crate) fn may_run_git(words: &[Word]) -> bool {
    let Some(w) = words.first() else {
        return false;
    };
    let name = canonical(basename(&w.value));
    name == "git"
        || name.starts_with("git-")
        || !w.literal()
        || family(&name).is_some_and(|f| {
            matches!(
                f.kind,
                Kind::Shell | Kind::Interpreter | Kind::Runner | Kind::Wrapper
            )
        })
}
/// A `-s`/`--strategy` value that is not a strategy built into git (git runs
/// `git-merge-NAME` found on its exec path or PATH for any other).
fn custom_strategy(rest: &[Word]) -> Option<String> {
    const BUILTIN: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];
    let all: Vec<&str> = options(rest).collect();
    for (k, v) in all.iter().enumerate() {
        let value = if *v == "-s" || *v == "--strategy" {
            all.get(k + 1).copied()
        } else if v.starts_with("--") {
            v.strip_prefix("--strategy=")
        } else {
            v.strip_prefix("-s")
        };
        if let Some(name) = value {
            if !BUILTIN.contains(&name) {
                return Some(name.to_string());
            }
        }
    }
    None
}

/// git's own commands (builtins and the scripts it ships, as of 2.47, plus newer names).
#[rustfmt::skip]
const KNOWN_SUBCOMMANDS: &[&str] = &[
    "add", "am", "annotate", "apply", "archimport", "archive", "bisect", "blame", "branch",
    "bugreport", "bundle", "cat-file", "check-attr", "check-ignore", "check-mailmap",
    "check-ref-format", "checkout", "checkout--worker", "checkout-index", "cherry",
    "cherry-pick", "citool", "clean", "clone", "column", "commit", "commit-graph", "commit-tree",
    "config", "count-objects", "credential", "credential-cache", "credential-cache--daemon",
    "credential-store", "cvsexportcommit", "cvsimport", "cvsserver", "daemon", "describe",
    "diagnose", "diff", "diff-files", "diff-index", "diff-pairs", "diff-tree", "difftool",
    "difftool--helper", "fast-export", "fast-import", "fetch", "fetch-pack", "filter-branch",
    "fmt-merge-msg", "for-each-ref", "for-each-repo", "format-patch", "fsck", "fsck-objects",
    "fsmonitor--daemon", "gc", "get-tar-commit-id", "grep", "gui", "hash-object", "help", "hook",
    "http-backend", "http-fetch", "http-push", "imap-send", "index-pack", "init", "init-db",
    "instaweb", "interpret-trailers", "last-modified", "log", "ls-files", "ls-remote", "ls-tree",
    "mailinfo", "mailsplit", "maintenance", "merge", "merge-base", "merge-file", "merge-index",
    "merge-octopus", "merge-one-file", "merge-ours", "merge-recursive", "merge-recursive-ours",
    "merge-recursive-theirs", "merge-resolve", "merge-subtree", "merge-tree", "mergetool",
    "mktag", "mktree", "multi-pack-index", "mv", "name-rev", "notes", "p4", "pack-objects",
    "pack-redundant", "pack-refs", "patch-id", "pickaxe", "prune", "prune-packed", "pull",
    "push", "quiltimport", "range-diff", "read-tree", "rebase", "receive-pack", "reflog",
    "refs", "remote", "remote-ext", "remote-fd", "remote-ftp", "remote-ftps", "remote-http",
    "remote-https", "repack", "replace", "replay", "repo", "request-pull", "rerere", "reset",
    "restore", "rev-list", "rev-parse", "revert", "rm", "send-email", "send-pack",
    "sh-i18n--envsubst", "shell", "shortlog", "show", "show-branch", "show-index", "show-ref",
    "sparse-checkout", "stage", "stash", "status", "stripspace", "submodule",
    "submodule--helper", "svn", "switch", "symbolic-ref", "tag", "unpack-file",
    "unpack-objects", "update-index", "update-ref", "update-server-info", "upload-archive",
    "upload-archive--writer", "upload-pack", "var", "verify-commit", "verify-pack",
    "verify-tag", "version", "web--browse", "whatchanged", "worktree", "write-tree",
];

/// git's global options that take no value (`-C` and `--namespace` take one).
#[rustfmt::skip]
const GLOBAL_FLAGS: &[&str] = &[
    "-p", "-P", "--paginate", "--no-pager", "--bare", "--no-replace-objects", "--no-lazy-fetch",
    "--no-optional-locks", "--no-advice", "--literal-pathspecs", "--glob-pathspecs",
    "--noglob-pathspecs", "--icase-pathspecs", "--version", "--help", "--html-path",
    "--man-path", "--info-path",
];

/// How many words a global option takes up, its value included.
fn global_width(v: &str) -> usize {
    if matches!(v, "-C" | "--namespace") {
        2
    } else {
        1
    }
}

/// The index of the subcommand in git's arguments, after the global options. It trusts every
/// option to be one `git_check` knows (that check refuses the others first).
pub(crate) fn subcommand_at(args: &[Word]) -> usize {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if !w.value.starts_with('-') {
            break;
        }
        i += global_width(&w.value);
    }
    i
}

/// The index of the subcommand after the global options, or why one of them is refused.
fn global_options(args: &[Word]) -> Result<usize, String> {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let v = w.value.as_str();
        if !v.starts_with('-') {
            break;
        }
        if v == "-c" || v.starts_with("-c") && !v.starts_with("--") {
            return Err("`-c` sets configuration (aliases, pagers, hooks can run programs)".into());
        }
        if let Some(n) = long_abbrev(v, &["config-env", "exec-path", "git-dir", "work-tree"]) {
            return Err(format!(
                "`--{n}` changes where git finds programs or configuration"
            ));
        }
        if v == "-C" {
            if let Some(reason) = args.get(i + 1).and_then(directory_refusal) {
                return Err(reason);
            }
        }
        // Only global options whose arity the gate knows: an unknown one might take a value,
        // and then the gate would judge the wrong word as the subcommand.
        if !matches!(v, "-C" | "--namespace")
            && !GLOBAL_FLAGS.contains(&v)
            && !v.starts_with("--namespace=")
        {
            return Err(format!("global option `{v}` is not understood by the gate"));
        }
        i += global_width(v);
    }
    Ok(i)
}

/// Why `-C DIR` is refused, if it is.
fn directory_refusal(dir: &Word) -> Option<String> {
    if outside_path(&dir.value) || !dir.literal() {
        return Some("`-C` points git outside the work root".into());
    }
    // A directory below the work root may hold a repository (bare or not) whose config
    // the model wrote: its aliases, hooks and fsmonitor would run. Only the work root's
    // own repository is used.
    if !dir.value.split('/').all(|c| c.is_empty() || c == ".") {
        return Some(
            "`-C DIR` could use a repository below the work root whose config (aliases, hooks) the model wrote; only the work root's own repository is used"
                .into(),
        );
    }
    None
}

/// Subcommands that run programs whatever their arguments.
#[rustfmt::skip]
const RUNS_PROGRAMS: &[&str] = &[
    "filter-branch", "mergetool", "instaweb", "web--browse", "hook", "daemon", "upload-pack",
    "receive-pack", "shell", "remote-ext", "credential",
];

/// Front ends to other programs: mail (`--smtp-server=PROGRAM`, `--to-cmd`), IMAP tunnels,
/// foreign version control, GUIs, and patch-queue imports that write what patches name.
#[rustfmt::skip]
const FRONT_ENDS: &[&str] = &[
    "send-email", "imap-send", "svn", "cvsimport", "cvsexportcommit", "cvsserver", "p4",
    "archimport", "quiltimport", "gui", "citool", "request-pull",
];

/// Subcommands that run a program or write files wherever they are told, whatever their
/// arguments.
#[rustfmt::skip]
const WRITES_ANYWHERE: &[&str] = &[
    "merge-index", "merge-one-file", "checkout-index", "mailsplit", "fast-import",
    "maintenance", "update-index", "mktree", "mktag", "commit-tree", "unpack-objects",
    "index-pack", "read-tree", "diagnose", "bugreport", "mailinfo", "difftool",
    "fsmonitor--daemon", "commit-graph", "multi-pack-index",
];

/// Long options that run a program or write a file, for every subcommand (`--run` only for
/// `rebase`).
#[rustfmt::skip]
const RUNNING_OPTIONS: &[&str] = &[
    "upload-pack", "receive-pack", "exec", "output", "open-files-in-pager", "extcmd",
    "sendmail-cmd", "smtp-server", "to-cmd", "cc-cmd", "header-cmd", "config-env", "run",
    "output-directory",
];

pub(crate) fn git_check(args: &[Word]) -> Option<String> {
    let i = match global_options(args) {
        Ok(i) => i,
        Err(reason) => return Some(reason),
    };
    let sub = args.get(i).map(|w| w.value.as_str()).unwrap_or("");
    let rest = args.get(i + 1..).unwrap_or_default();
    if !args.get(i).is_none_or(Word::literal) {
        return Some("the subcommand is not a plain word".into());
    }
    if let Some(reason) = subcommand_refusal(sub).or_else(|| argument_refusal(sub, rest)) {
        return Some(reason);
    }
    if sub == "config" {
        return git_config_check(rest);
    }
    front_end_refusal(sub, rest)
        .or_else(|| writes_anywhere(sub, rest))
        .or_else(|| path_refusal(sub, rest))
        .or_else(|| option_refusal(sub, rest))
}

/// Why the subcommand itself is refused: not git's own, or one that runs programs.
fn subcommand_refusal(sub: &str) -> Option<String> {
    // Any other name runs a `git-NAME` program from git's exec path or PATH (one a package
    // installed, `git-lfs`, `git-annex`), or an alias from a config file: the gate judges
    // only git's own commands.
    if !sub.is_empty() && !KNOWN_SUBCOMMANDS.contains(&sub) {
        return Some(format!(
            "`git {sub}` is not one of git's own commands: git would run a `git-{sub}` program from its exec path or PATH, or an alias"
        ));
    }
    if RUNS_PROGRAMS.contains(&sub) {
        return Some(format!("`git {sub}` runs programs"));
    }
    // Internal helpers (`submodule--helper`, `difftool--helper`...) run configured commands
    // and take options the gate does not know.
    // Remote helpers (`remote-https`, `remote-fd`...) take transport commands on stdin,
    // `push` among them, which no deny rule on `git push` would see.
    if sub.starts_with("remote-") {
        return Some(format!(
            "`git {sub}` is a remote helper that takes transport commands (`push`) on stdin"
        ));
    }
    if sub.contains("--") && !sub.starts_with('-') {
        return Some(format!(
            "`git {sub}` is an internal helper that runs programs"
        ));
    }
    None
}

/// Arguments that run programs or change what git reads, checked before `git config`'s own
/// rules: transports, external diffs, browsers, configuration and hooks, replacement refs.
fn argument_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    if rest
        .iter()
        .any(|w| w.value.contains("ext::") || w.value.contains("fd::"))
    {
        return Some("the `ext::`/`fd::` transports run programs".into());
    }
    if options(rest).any(|v| v.starts_with("--ext-d")) {
        return Some(
            "`--ext-diff` runs the external diff program the repository configures".into(),
        );
    }
    if sub == "help"
        && options(rest).any(|v| short_has(v, "w", "") || long_abbrev(v, &["web"]).is_some())
    {
        return Some("`git help --web` starts a browser".into());
    }
    if matches!(sub, "clone" | "init" | "submodule") {
        if let Some(reason) = configuration_refusal(sub, rest) {
            return Some(reason);
        }
    }
    if sub == "submodule" && rest.iter().any(|w| w.value == "foreach") {
        return Some("`git submodule foreach` runs shell commands".into());
    }
    if sub == "bisect" && rest.first().is_some_and(|w| w.value == "run") {
        return Some("`git bisect run` runs a program".into());
    }
    replacement_refusal(sub, rest)
}

/// `clone`, `init` and `submodule` options that set configuration or hooks.
fn configuration_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    for v in options(rest) {
        if v == "-c" || (v.starts_with("-c") && !v.starts_with("--")) {
            return Some(format!(
                "`git {sub} -c` sets configuration (programs git runs)"
            ));
        }
        if let Some(n) = long_abbrev(v, &["config", "template", "separate-git-dir"]) {
            return Some(format!(
                "`git {sub} --{n}` sets configuration or hooks (programs git runs)"
            ));
        }
    }
    None
}

/// Replacement refs change what every later git command reads for an object:
/// `git replace HEAD:Makefile HEAD:x.txt` then a checkout writes x.txt's text into the
/// Makefile. Only listing them is fine; refs under refs/replace/ are made no other way.
fn replacement_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    if sub == "replace"
        && !rest
            .iter()
            .all(|w| matches!(w.value.as_str(), "-l" | "--list") || w.value.starts_with("--format"))
    {
        return Some("`git replace` makes git read one object as another".into());
    }
    let replace_ref = |v: &str| {
        // A pattern refspec's destination could expand into refs/replace/ (`refs/re*`).
        let dst = v.rsplit(':').next().unwrap_or(v);
        v.contains("refs/replace")
            || (v.contains(':')
                && dst.contains('*')
                && !["refs/heads/", "refs/tags/", "refs/remotes/"]
                    .iter()
                    .any(|p| dst.trim_start_matches('+').starts_with(p)))
    };
    if rest.iter().any(|w| replace_ref(&w.value)) {
        return Some("a ref under `refs/replace/` makes git read one object as another".into());
    }
    None
}

/// Subcommands that push or hand the work to another program; merge strategies git would
/// run as programs.
fn front_end_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    if matches!(sub, "send-pack" | "http-push") {
        return Some(format!("`git {sub}` pushes to a remote"));
    }
    if FRONT_ENDS.contains(&sub) {
        return Some(format!(
            "`git {sub}` runs other programs (mail, foreign version control, a GUI) or writes what patches name"
        ));
    }
    if matches!(sub, "merge" | "pull" | "rebase" | "cherry-pick" | "revert") {
        if let Some(s) = custom_strategy(rest) {
            return Some(format!(
                "merge strategy `{s}` is not one of git's own: git would run the program `git-merge-{s}`"
            ));
        }
    }
    None
}

/// Subcommands (or subcommand options) that run a program or write files wherever they are
/// told.
fn writes_anywhere(sub: &str, rest: &[Word]) -> Option<String> {
    let refused = WRITES_ANYWHERE.contains(&sub)
        || sub.starts_with("credential")
        || (sub == "interpret-trailers" && options(rest).any(|v| v.starts_with("--in")))
        || (sub == "fast-export"
            && options(rest)
                .any(|v| v.starts_with("--export-marks") || v.starts_with("--import-marks")))
        || (sub == "help" && options(rest).any(|v| matches!(v, "-i" | "--info" | "-m" | "--man")))
        || (sub == "pack-objects" && !options(rest).any(|v| v == "--stdout"))
        || (sub == "notes"
            && rest.iter().any(|w| {
                matches!(
                    w.value.as_str(),
                    "add" | "append" | "edit" | "copy" | "merge" | "remove" | "prune"
                )
            }))
        || (sub == "hash-object" && options(rest).any(|v| v == "-w" || v == "--stdin-paths"));
    refused.then(|| format!("`git {sub}` runs a program or writes files wherever it is told"))
}

/// Paths that subcommands create repositories, worktrees or bundles at (only plain paths
/// inside the work root), and patches applied to files.
fn path_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    if matches!(
        sub,
        "init" | "clone" | "worktree" | "bundle" | "submodule" | "mv" | "merge-file"
    ) {
        for v in rest.iter().map(|w| w.value.as_str()) {
            let path = v.split_once('=').map_or(v, |(_, p)| p);
            if outside_path(path) {
                return Some(format!(
                    "`git {sub}` with `{v}` writes outside the work root or into a dot directory"
                ));
            }
        }
    }
    let applies = || {
        !options(rest).any(|v| matches!(v, "--check" | "--stat" | "--numstat" | "--summary"))
            || options(rest).any(|v| {
                matches!(v, "-3" | "-N")
                    || long_abbrev(
                        v,
                        &[
                            "apply",
                            "index",
                            "cached",
                            "3way",
                            "reject",
                            "intent-to-add",
                        ],
                    )
                    .is_some()
            })
    };
    if matches!(sub, "apply" | "am") && applies() {
        return Some(format!(
            "`git {sub}` writes the files a patch names (only --check/--stat/--numstat/--summary)"
        ));
    }
    None
}

/// Options that run a program or write a file: long ones for every subcommand, short ones
/// per subcommand.
fn option_refusal(sub: &str, rest: &[Word]) -> Option<String> {
    for v in options(rest) {
        // Exact names of harmless options that are also prefixes of dangerous ones.
        if matches!(v, "--cc" | "--to" | "--header" | "--exec-path")
            || v.starts_with("--to=")
            || v.starts_with("--cc=")
        {
            continue;
        }
        if let Some(n) = long_abbrev(v, RUNNING_OPTIONS) {
            if !(n == "run" && sub != "rebase") {
                return Some(format!("`--{n}` runs a program or writes a file"));
            }
        }
        let short_bad = match sub {
            "grep" => short_has(v, "O", "efABCm"),
            "fetch" | "clone" | "ls-remote" | "pull" => short_has(v, "u", "objc"),
            "archive" => short_has(v, "uo", ""),
            "rebase" => short_has(v, "x", "sXC"),
            "difftool" => short_has(v, "xt", ""),
            "log" | "diff" | "show" | "format-patch" | "whatchanged" => {
                v == "-o" || v.starts_with("-o") && sub == "format-patch"
            }
            _ => false,
        };
        if short_bad {
            return Some(format!(
                "option `{v}` for `git {sub}` runs a program or writes files"
            ));
        }
    }
    None
}

/// `git config` is allowed only as a read: `get`/`list` (new style) or `--get*`/`--list`, with
/// options whose arity the gate knows.
pub(crate) fn git_config_check(rest: &[Word]) -> Option<String> {
    const FLAGS: &[&str] = &[
        "--global",
        "--system",
        "--local",
        "--worktree",
        "--show-origin",
        "--show-scope",
        "--null",
        "-z",
        "--name-only",
        "--includes",
        "--no-includes",
        "--bool",
        "--int",
        "--path",
        "--bool-or-int",
        "--expiry-date",
        "--all",
        "--regexp",
        "--fixed-value",
        "--list",
        "-l",
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
    ];
    const VALUED: &[&str] = &["--file", "-f", "--blob", "--type", "--default", "--url"];
    let mut positional = Vec::new();
    let mut old_style_read = false;
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        let v = w.value.as_str();
        i += 1;
        if !v.starts_with('-') {
            positional.push(v);
            continue;
        }
        if FLAGS.contains(&v) {
            old_style_read |= v.starts_with("--get") || matches!(v, "--list" | "-l");
            continue;
        }
        if VALUED.contains(&v) {
            i += 1;
            continue;
        }
        if VALUED
            .iter()
            .any(|o| o.starts_with("--") && v.starts_with(&format!("{o}=")))
        {
            continue;
        }
        return Some(format!(
            "`git config` option `{v}` is not understood by the gate (only reads are allowed)"
        ));
    }
    let reads = if old_style_read {
        true
    } else {
        matches!(positional.first(), Some(&"get") | Some(&"list"))
            || (positional.len() == 1 && positional[0] != "edit")
    };
    (!reads).then(|| "`git config` writing configuration; only reads are allowed".into())
}

/// git subcommands that may start an editor (`vi` when nothing is configured) or an
/// interactive prompt whose answers open one (`add -p`, then `e`).
const EDITOR_SUBCOMMANDS: &[&str] = &[
    "commit",
    "tag",
    "merge",
    "pull",
    "rebase",
    "revert",
    "cherry-pick",
    "am",
    "add",
    "checkout",
    "reset",
    "restore",
    "stash",
    "replace",
    "branch",
    "notes",
    "config",
    "clean",
    "switch",
];

/// An editor git starts reads its keystrokes from the command's stdin when that is not a
/// terminal: `git commit <<< ':!id'` runs `id` in vi. With input the model chose (a pipe,
/// heredoc, here-string or file), the subcommands that may start one are denied, except a
/// message read from stdin (`commit -F -`, `tag -F -`), which git reads to its end first.
pub(crate) fn git_editor_check(args: &[Word]) -> Option<String> {
    let i = subcommand_at(args);
    let sub = args.get(i)?.value.as_str();
    if !EDITOR_SUBCOMMANDS.contains(&sub) {
        return None;
    }
    let rest = args.get(i + 1..).unwrap_or_default();
    // Pathspecs read from stdin take all of it (to its end) before anything else runs, and
    // git refuses them with `--patch`/`--interactive`.
    let all: Vec<&str> = options(rest).collect();
    let pathspecs_from_stdin = all.iter().enumerate().any(|(k, v)| {
        *v == "--pathspec-from-file=-"
            || (*v == "--pathspec-from-file" && all.get(k + 1) == Some(&"-"))
    });
    if pathspecs_from_stdin {
        return None;
    }
    if matches!(sub, "commit" | "tag") {
        let all: Vec<&str> = options(rest).collect();
        let takes_value = if sub == "commit" { "mFCctSu" } else { "mFu" };
        let message_from_stdin = all.iter().enumerate().any(|(k, v)| {
            let value = if let Some(long) = v.strip_prefix("--") {
                long_abbrev(v, &["file"]).and_then(|_| match long.split_once('=') {
                    Some((_, x)) => Some(x),
                    None => all.get(k + 1).copied(),
                })
            } else {
                v.strip_prefix('-').and_then(|cluster| {
                    let at = cluster.find(|c: char| takes_value.contains(c))?;
                    if !cluster[at..].starts_with('F') {
                        return None;
                    }
                    let attached = &cluster[at + 1..];
                    if attached.is_empty() {
                        all.get(k + 1).copied()
                    } else {
                        Some(attached)
                    }
                })
            };
            value == Some("-")
        });
        let patch = all.iter().any(|v| {
            short_has(v, "p", takes_value) || long_abbrev(v, &["patch", "interactive"]).is_some()
        });
        if message_from_stdin && !patch {
            return None;
        }
    }
    Some(format!(
        "`git {sub}` may start an editor, which would read the command's input as keystrokes (`:!cmd` runs a program); give the message with `-m` or `-F FILE`, without piped or redirected input"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split(' ').map(Word::synthetic).collect()
    }

    #[test]
    fn subcommands_that_may_start_an_editor() {
        for line in [
            "commit",
            "commit -m x -e",
            "-C . commit --amend",
            "tag -a v1",
            "rebase -i HEAD~2",
            "add -p",
            "commit -p -F -",
            "commit --interactive -F -",
            "revert HEAD",
            "add -p --pathspec-from-file",
        ] {
            assert!(git_editor_check(&words(line)).is_some(), "{line}");
        }
        for line in [
            "commit -F -",
            "commit -aF-",
            "commit --file=-",
            "commit --fil -",
            "tag -a v1 -F -",
            "log -p",
            "status",
            "apply --check",
            "add --pathspec-from-file=-",
            "checkout --pathspec-from-file -",
        ] {
            assert_eq!(git_editor_check(&words(line)), None, "{line}");
        }
    }
}
