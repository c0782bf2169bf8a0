//! tools stage (gate), PURE: the named `[tools.bash]` presets a team starts from
//! (`preset = "python-dev"`): one table of rules, merged with the config's own rules.
//!
//! In: a preset name, or a preset and the config's rules. Out: the preset's rows, its
//! [`Policy`], or the merged policy. The merge rule, which docs/gate.md repeats: the config's
//! `allow` and `deny` rules are appended to the preset's (deny still beats allow, so a config
//! can only narrow a preset's allow rules with deny rules, or widen them with allow rules);
//! the config's `default` and `write_redirects`, when set, replace the preset's.

use crate::rule::{Policy, Rule, Verdict};

/// One named preset: rules as harness.toml spells them.
#[derive(Debug)]
pub struct Preset {
    /// The name `preset = "..."` takes.
    pub name: &'static str,
    /// One line: whom it is for and what it lets a command do.
    pub description: &'static str,
    pub default: Verdict,
    /// Allow rules, in groups shared between presets.
    pub allow: &'static [&'static [&'static str]],
    /// Deny rules, in groups shared between presets.
    pub deny: &'static [&'static [&'static str]],
    pub write_redirects: bool,
}

/// Reading and searching: the programs every preset allows. The gate still judges each
/// one's options (`find -delete`, `sed -i`, `awk` system(), `xargs` commands...).
#[rustfmt::skip]
const READ: &[&str] = &[
    "ls", "ls *", "cat *", "head *", "tail *", "grep *", "egrep *", "fgrep *", "rg *",
    "find *", "tree", "tree *", "wc *", "sed *", "awk *", "sort *", "uniq *", "cut *",
    "tr *", "diff *", "cmp *", "comm *", "nl *", "column *", "file *", "stat *", "du *",
    "df *", "basename *", "dirname *", "realpath *", "readlink *", "pwd", "echo", "echo *",
    "printf *", "true", "false", "test *", "[ *", "which *", "type *", "command -v *",
    "date", "date *", "env", "printenv *", "uname", "uname *", "id", "whoami", "xxd *",
    "od *", "hexdump *", "strings *", "jq *", "less *", "more *", "xargs *", "seq *",
    "sleep *", "timeout *", "md5sum *", "sha256sum *",
];

/// Git's reading commands: what a read-only policy lets git do.
#[rustfmt::skip]
const GIT_READ: &[&str] = &[
    "git status", "git status *", "git diff", "git diff *", "git log", "git log *",
    "git show", "git show *", "git blame *", "git grep *", "git ls-files", "git ls-files *",
    "git rev-parse *", "git branch", "git branch --show-current", "git describe *",
    "git shortlog *", "git cat-file *",
];

/// Editing files in the checkout and local git changes: what every dev preset adds.
#[rustfmt::skip]
const EDIT: &[&str] = &[
    "touch *", "mkdir *", "cp *", "mv *", "rm *", "rmdir *", "tee *", "patch *",
    "git add *", "git apply *", "git checkout *", "git restore *", "git stash", "git stash *",
    "git commit *", "git reset *", "git rm *", "git mv *", "git switch *", "git branch *",
    "git --no-pager *",
];

/// Never in a dev preset: the network, privilege, other processes, git's remotes, and `rm`
/// of the checkout's root, its parent, `.git` or home (the gate does not yet hold `rm`'s
/// operands to the rules of a write; a glob such as `*` could be `.git`, so it is denied too).
#[rustfmt::skip]
const DENY_COMMON: &[&str] = &[
    "rm /", "rm .", "rm ./", "rm ..", "rm ../", "rm ~", "rm ~/", "rm .git", "rm ./.git",
    "rm .git/", "rm ./.git/",
    "curl *", "wget *", "ssh *", "scp *", "sftp *", "rsync *", "nc *", "ncat *", "netcat *",
    "socat *", "telnet *", "ftp *", "sudo *", "su *", "doas *", "pkexec *", "kill *",
    "pkill *", "killall *", "chown *", "chgrp *", "mount *", "umount *", "shutdown *",
    "reboot *", "systemctl *", "crontab *", "docker *", "podman *", "apt *", "apt-get *",
    "dpkg *", "yum *", "dnf *", "apk *", "brew *", "snap *", "git push *", "git fetch *",
    "git pull *", "git clone *", "git remote add *", "git remote set-url *",
    "git submodule *", "git ls-remote *", "git send-email *", "git request-pull *",
    "git daemon *", "git credential *", "git config --global *", "git config --system *",
];

#[rustfmt::skip]
const PYTHON_ALLOW: &[&str] = &[
    "python", "python *", "python3", "python3 *", "pytest", "pytest *", "py.test *",
    "pip list", "pip list *", "pip show *", "pip freeze", "pip freeze *", "pip --version",
    "pip3 list", "pip3 list *", "pip3 show *", "pip3 freeze", "pip3 freeze *",
    "pip3 --version", "tox -e *", "flake8 *", "mypy *", "ruff check *", "black --check *",
    "black --diff *", "isort --check *", "isort --diff *", "pylint *", "pyreverse *",
    "pyflakes *", "pycodestyle *", "coverage *", "sphinx-build *", "django-admin *",
    "make *", "ln *", "chmod +x *",
];

/// Package managers: `pip install` (and `python -m pip install`, which the gate judges as
/// pip) would fetch and run code from an index.
#[rustfmt::skip]
const PYTHON_DENY: &[&str] = &[
    "pip install *", "pip download *", "pip uninstall *", "pip3 install *",
    "pip3 download *", "pip3 uninstall *", "uv *", "uvx *", "pipx *", "poetry *",
    "pipenv *", "conda *", "mamba *", "micromamba *", "pdm *", "hatch *", "npm *", "npx *",
    "easy_install *", "python setup.py install *", "python setup.py develop *",
];

#[rustfmt::skip]
const RUST_ALLOW: &[&str] = &[
    "cargo build *", "cargo build", "cargo check *", "cargo check", "cargo test *",
    "cargo test", "cargo run *", "cargo run", "cargo clippy *", "cargo clippy",
    "cargo fmt *", "cargo fmt", "cargo doc *", "cargo tree *", "cargo tree",
    "cargo metadata *", "cargo bench *", "cargo --version", "rustc --version",
    "rustc --print *", "rustup show", "make *",
];

#[rustfmt::skip]
const RUST_DENY: &[&str] = &[
    "cargo install *", "cargo publish *", "cargo login *", "cargo owner *", "cargo yank *",
    "cargo add *", "cargo update *", "cargo fetch *", "cargo search *", "rustup *",
];

#[rustfmt::skip]
const NODE_ALLOW: &[&str] = &[
    "node", "node *", "npm test", "npm test *", "npm run *", "npm ls *", "npm ls",
    "npm --version", "npx tsc *", "npx jest *", "npx vitest *", "npx eslint *",
    "npx prettier *", "yarn test *", "yarn test", "yarn run *", "pnpm test *", "pnpm test",
    "pnpm run *", "tsc *", "jest *", "vitest *", "eslint *", "prettier *", "make *",
];

#[rustfmt::skip]
const NODE_DENY: &[&str] = &[
    "npm install *", "npm i *", "npm ci *", "npm add *", "npm publish *", "npm login *",
    "npm exec *", "npm update *", "npm uninstall *", "npx -y *", "npx --yes *",
    "yarn add *", "yarn install *", "yarn dlx *", "pnpm add *", "pnpm install *",
    "pnpm dlx *", "bun *", "bunx *", "deno *", "pip *", "pip3 *",
];

#[rustfmt::skip]
const READ_ONLY_DENY: &[&str] = &[
    "rm *", "mv *", "cp *", "touch *", "mkdir *", "tee *", "chmod *", "chown *", "ln *",
    "curl *", "wget *", "sudo *", "su *", "kill *", "pkill *", "killall *",
];

/// Every preset, by name; the docs list them in this order.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "python-dev",
        description: "a Python bug-fixing agent in a repository checkout: read and search, run python and pytest, edit files in the work root, local git; no network, installs or privilege",
        default: Verdict::Deny,
        allow: &[READ, GIT_READ, EDIT, PYTHON_ALLOW],
        deny: &[DENY_COMMON, PYTHON_DENY],
        write_redirects: true,
    },
    Preset {
        name: "rust-dev",
        description: "a Rust agent in a cargo workspace: read and search, build, test, lint and format with cargo, edit files in the work root, local git; no network, installs or privilege",
        default: Verdict::Deny,
        allow: &[READ, GIT_READ, EDIT, RUST_ALLOW],
        deny: &[DENY_COMMON, RUST_DENY],
        write_redirects: true,
    },
    Preset {
        name: "node-dev",
        description: "a JavaScript/TypeScript agent in a package checkout: read and search, run node and the package's scripts and tests, edit files in the work root, local git; no network, installs or privilege",
        default: Verdict::Deny,
        allow: &[READ, GIT_READ, EDIT, NODE_ALLOW],
        deny: &[DENY_COMMON, NODE_DENY],
        write_redirects: true,
    },
    Preset {
        name: "read-only",
        description: "an agent that reads, searches and reports: no writes, no interpreters, git's reading commands only",
        default: Verdict::Deny,
        allow: &[READ, GIT_READ],
        deny: &[READ_ONLY_DENY],
        write_redirects: false,
    },
];

impl Preset {
    /// The allow rules, in order.
    pub fn allow_rules(&self) -> impl Iterator<Item = &'static str> {
        self.allow.iter().flat_map(|g| g.iter().copied())
    }

    /// The deny rules, in order.
    pub fn deny_rules(&self) -> impl Iterator<Item = &'static str> {
        self.deny.iter().flat_map(|g| g.iter().copied())
    }

    /// The preset alone as a policy. Every row parses (a unit test holds it to that), so a
    /// row that did not would be dropped here rather than fail a config at load time.
    pub fn policy(&self) -> Policy {
        Policy {
            default: self.default,
            allow: parse_all(self.allow_rules()),
            deny: parse_all(self.deny_rules()),
            write_redirects: self.write_redirects,
            env_allow: Vec::new(),
            file_tools: false,
            work_root: None,
        }
    }
}

fn parse_all<'a>(texts: impl Iterator<Item = &'a str>) -> Vec<Rule> {
    texts.filter_map(|t| Rule::parse(t).ok()).collect()
}

/// The preset of this name.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The known names, comma-separated, for messages.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `name` is no preset: the names there are, and the closest one when a typo is likely.
pub fn unknown_preset(name: &str) -> String {
    let near = PRESETS
        .iter()
        .map(|p| (distance(&name.to_ascii_lowercase(), p.name), p.name))
        .min()
        .filter(|(d, n)| *d <= 2.max(n.len() / 3));
    let hint = near.map_or(String::new(), |(_, n)| format!(" (did you mean {n:?}?)"));
    format!(
        "unknown preset {name:?}{hint}; the presets are: {}",
        preset_names()
    )
}

/// Levenshtein distance by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The policy a config gets: the preset's, with the config's rules appended and its
/// `default` / `write_redirects` replacing the preset's where the config sets them.
pub fn merge(
    preset: &Preset,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    default: Option<Verdict>,
    write_redirects: Option<bool>,
) -> Policy {
    let mut policy = preset.policy();
    policy.allow.extend(allow);
    policy.deny.extend(deny);
    if let Some(d) = default {
        policy.default = d;
    }
    if let Some(w) = write_redirects {
        policy.write_redirects = w;
    }
    policy
}

/// The preset as `harness gate --preset NAME` prints it.
pub fn render_preset(p: &Preset) -> String {
    let verdict = |v: Verdict| match v {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
    };
    let list = |rules: Vec<&str>| rules.iter().map(|r| format!("  {r}\n")).collect::<String>();
    format!(
        "preset {}: {}\ndefault = {}\nwrite_redirects = {}\nallow ({}):\n{}deny ({}):\n{}",
        p.name,
        p.description,
        verdict(p.default),
        p.write_redirects,
        p.allow_rules().count(),
        list(p.allow_rules().collect()),
        p.deny_rules().count(),
        list(p.deny_rules().collect()),
    )
}

/// The preset as `harness gate --preset NAME --json` prints it.
pub fn preset_json(p: &Preset) -> serde_json::Value {
    serde_json::json!({
        "preset": p.name,
        "description": p.description,
        "default": p.default,
        "write_redirects": p.write_redirects,
        "allow": p.allow_rules().collect::<Vec<_>>(),
        "deny": p.deny_rules().collect::<Vec<_>>(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::judge;

    #[test]
    fn every_row_parses_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for p in PRESETS {
            assert!(names.insert(p.name), "duplicate preset {}", p.name);
            for r in p.allow_rules().chain(p.deny_rules()) {
                Rule::parse(r).unwrap_or_else(|e| panic!("{}: {r:?}: {e}", p.name));
            }
            let policy = p.policy();
            assert_eq!(policy.allow.len(), p.allow_rules().count());
            assert_eq!(policy.deny.len(), p.deny_rules().count());
        }
    }

    #[test]
    fn unknown_names_get_the_list_and_the_nearest() {
        let m = unknown_preset("pyton-dev");
        assert!(m.contains("did you mean \"python-dev\"?"), "{m}");
        assert!(
            m.contains("python-dev, rust-dev, node-dev, read-only"),
            "{m}"
        );
        let m = unknown_preset("go");
        assert!(!m.contains("did you mean"), "{m}");
        assert!(preset("python-dev").is_some());
        assert!(preset("Python-Dev").is_none());
    }

    #[test]
    fn config_rules_append_and_settings_override() {
        let p = preset("python-dev").unwrap();
        let merged = merge(
            p,
            vec![Rule::parse("cargo test *").unwrap()],
            vec![Rule::parse("git commit *").unwrap()],
            None,
            Some(false),
        );
        assert_eq!(merged.allow.len(), p.allow_rules().count() + 1);
        assert_eq!(merged.allow.last().unwrap().as_str(), "cargo test *");
        assert_eq!(merged.deny.last().unwrap().as_str(), "git commit *");
        assert_eq!(merged.default, Verdict::Deny);
        assert!(!merged.write_redirects);
        assert_eq!(judge(&merged, "cargo test -q").verdict, Verdict::Allow);
        assert_eq!(judge(&merged, "git commit -m x").verdict, Verdict::Deny);
        let open = merge(p, vec![], vec![], Some(Verdict::Allow), None);
        assert_eq!(open.default, Verdict::Allow);
        assert!(open.write_redirects);
    }

    /// What each preset is for, and what none of them lets through.
    #[test]
    fn presets_allow_their_work_and_deny_the_rest() {
        let cases: &[(&str, &str, Verdict)] = &[
            (
                "python-dev",
                "grep -rn separability_matrix astropy/modeling",
                Verdict::Allow,
            ),
            ("python-dev", "python3 reproduce.py", Verdict::Allow),
            (
                "python-dev",
                "python -m pytest tests/test_x.py -q",
                Verdict::Allow,
            ),
            ("python-dev", "git diff", Verdict::Allow),
            ("python-dev", "pip show numpy", Verdict::Allow),
            ("python-dev", "echo hi > notes.txt", Verdict::Allow),
            ("python-dev", "pip install requests", Verdict::Deny),
            (
                "python-dev",
                "python3 -m pip install requests",
                Verdict::Deny,
            ),
            ("python-dev", "curl https://example.com", Verdict::Deny),
            ("python-dev", "python setup.py develop", Verdict::Deny),
            (
                "python-dev",
                "python3 setup.py install --user",
                Verdict::Deny,
            ),
            (
                "python-dev",
                "python3 setup.py build_ext --inplace",
                Verdict::Allow,
            ),
            ("python-dev", "git push origin main", Verdict::Deny),
            ("python-dev", "sudo ls", Verdict::Deny),
            ("python-dev", "cargo build", Verdict::Deny),
            ("rust-dev", "cargo test --workspace", Verdict::Allow),
            ("rust-dev", "cargo install ripgrep", Verdict::Deny),
            ("rust-dev", "python3 x.py", Verdict::Deny),
            ("node-dev", "npm test", Verdict::Allow),
            ("node-dev", "npm install left-pad", Verdict::Deny),
            ("read-only", "grep -rn foo src", Verdict::Allow),
            ("read-only", "git log --oneline -5", Verdict::Allow),
            ("read-only", "echo hi > notes.txt", Verdict::Deny),
            ("read-only", "rm notes.txt", Verdict::Deny),
            ("read-only", "python3 x.py", Verdict::Deny),
        ];
        for (name, cmd, want) in cases {
            let got = judge(&preset(name).unwrap().policy(), cmd);
            assert_eq!(got.verdict, *want, "{name}: {cmd}: {}", got.reason);
        }
    }

    #[test]
    fn the_rendering_lists_every_rule() {
        let p = preset("read-only").unwrap();
        let text = render_preset(p);
        assert!(text.starts_with("preset read-only: "), "{text}");
        for r in p.allow_rules().chain(p.deny_rules()) {
            assert!(text.contains(&format!("  {r}\n")), "{r}");
        }
        let v = preset_json(p);
        assert_eq!(v["default"], "deny");
        assert_eq!(
            v["allow"].as_array().unwrap().len(),
            p.allow_rules().count()
        );
    }
}
