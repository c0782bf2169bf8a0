//! Turn stage, PURE: the rules part of the system prompt. `[tools.bash]` (its policy in
//! config order), whether the file tools are on, the run's date and the host in; at most
//! [`RULES_MAX_BYTES`] of text out, saying what the model may do in this turn, so it does not
//! spend rounds guessing the policy.
//!
//! The text is byte-stable for one config and one date (prompt caches reuse a prefix only
//! when it is the same bytes): no run id, no time finer than the day, rules in config order,
//! nothing from a hash map. It names no machine path (the work root, the roots, the paths
//! never read) and no key ref: commands start in the working directory, and `.` is all the
//! model needs of it.

use chrono::NaiveDate;

use crate::config::BashConfig;
use harness_gate::{self as gate, Runs, Verdict};

/// The most bytes of the rules part: a policy of thousands of rules is summarised (programs
/// by name), then cut, to stay under it.
pub const RULES_MAX_BYTES: usize = 4096;

/// What the rules say beside the config: the run's day and the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct World {
    /// The run's start, as a UTC day.
    pub date: NaiveDate,
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// `std::env::consts::ARCH`.
    pub arch: &'static str,
}

impl World {
    /// This host on `date`.
    pub fn here(date: NaiveDate) -> World {
        World {
            date,
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
        }
    }
}

/// The tools a turn offers, as the rules describe them.
#[derive(Debug, Clone, Copy)]
pub struct Tools<'a> {
    /// `[tools.bash]`.
    pub bash: &'a BashConfig,
    /// `read_file`, `write_file`, `edit_file` are offered.
    pub files: bool,
}

/// The rules part of the system prompt, at most [`RULES_MAX_BYTES`].
pub fn section(tools: Option<Tools<'_>>, world: World) -> String {
    let when = format!(
        "- Date: {} (UTC). System: {} {}.",
        world.date.format("%Y-%m-%d"),
        os_name(world.os),
        world.arch
    );
    let Some(tools) = tools else {
        return format!("Rules of this turn:\n{when}");
    };
    let bash = tools.bash;
    let policy = &bash.policy;
    let allow: Vec<&str> = policy.allow.iter().map(|r| r.as_str()).collect();
    let deny: Vec<&str> = policy.deny.iter().map(|r| r.as_str()).collect();
    let rm = rm_allowed(policy);
    let render =
        |allowed: &str, denied: &str| lines(tools, &when, (allowed, denied, !deny.is_empty()), rm);
    let room = RULES_MAX_BYTES.saturating_sub(render("", "").len());
    if whole(&allow) + whole(&deny) <= room {
        return render(&listed(&allow, usize::MAX), &listed(&deny, usize::MAX));
    }
    // Too long: deny rules keep up to a third of the room (a deny rule cannot be summarised
    // by its program: `git push *` does not deny git), allow rules become program names.
    let denied = listed(&deny, whole(&deny).min(room / 3));
    let names = programs(policy);
    let head = format!(
        "{} allow rules, by program (a program may be allowed with some arguments only): ",
        allow.len()
    );
    let budget = room.saturating_sub(denied.len() + head.len());
    let allowed = format!("{head}{}", listed(&names, budget));
    render(&allowed, &denied)
}

/// The whole rules text with these allow and deny lists (and whether there are deny rules);
/// `rm` says whether the gate allows `rm` of a plain file.
fn lines(tools: Tools<'_>, when: &str, lists: (&str, &str, bool), rm: bool) -> String {
    let (allowed, denied, has_deny) = lists;
    let bash = tools.bash;
    let policy = &bash.policy;
    let mut out = vec![
        "Rules of this turn (set by the operator; they do not change during the turn):".to_string(),
        when.to_string(),
        "- Working directory: every command starts in the task's working directory; give paths relative to it (`src/lib.rs`, `./run.sh`), not absolute ones. `$TMPDIR` is a private scratch directory.".to_string(),
        if bash.network {
            "- Network: open; commands may connect out.".to_string()
        } else if let Some(egress) = &bash.egress {
            format!(
                "- Network: only through the harness's HTTP proxy (already set in HTTP_PROXY/HTTPS_PROXY; curl, pip, cargo, npm and git use it), and only to: {}. Other hosts, direct connections, UDP and DNS are refused.",
                egress.describe()
            )
        } else {
            "- Network: closed; commands cannot connect anywhere, so nothing can be downloaded or installed.".to_string()
        },
        format!(
            "- Limits: a command is stopped after {} s; its output is cut to {} bytes (head and tail kept).",
            bash.timeout.as_secs(),
            bash.max_output_bytes
        ),
    ];
    let otherwise = match policy.default {
        Verdict::Deny => "Anything else is denied.",
        Verdict::Allow => "Commands no rule names are allowed too, unless a deny rule matches.",
    };
    out.push(if policy.allow.is_empty() {
        format!("- Allowed commands: none by rule. {otherwise}")
    } else {
        format!("- Allowed commands (a trailing ` *` stands for any further words, `/**` for any program under that directory): {allowed}. {otherwise}")
    });
    if has_deny {
        out.push(format!(
            "- Denied even when an allow rule matches: {denied}."
        ));
    }
    let rm = if rm {
        "`rm` of files under the working directory is allowed."
    } else {
        "`rm` is not available."
    };
    let writers = if policy.write_redirects {
        "redirects (`>`, `>>`) and allowed programs that write"
    } else {
        "redirects (`>`, `>>`) are denied; allowed programs that write"
    };
    out.push(format!("- Writing files: {writers} (`cp`, `mv`, `tee`, ...) may write relative paths under the working directory, never a dotfile, `.git`, a build file (Makefile, Cargo.toml, package.json, pyproject.toml, ...) or a place a path rule names. {rm}"));
    if tools.files {
        out.push("- File tools: `read_file`, `write_file` and `edit_file` take paths relative to the working directory; dotfiles, `.git` and the places the operator protects are off limits, build files are read-only. Use them to read and change files.".to_string());
    }
    out.push("- A denied command is not run: its result says why and, where it can, what would work instead. Change the command rather than repeat it.".to_string());
    out.join("\n")
}

/// `items` as `` `a`, `b` `` in order, within `budget` bytes: those that do not fit are
/// counted (`and 12 more`).
fn listed<S: AsRef<str>>(items: &[S], budget: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let item = item.as_ref();
        let sep = if i == 0 { "" } else { ", " };
        let left = items.len() - i - 1;
        // What must still fit after this item when a later one does not.
        let tail = if left == 0 {
            0
        } else {
            MORE_LEN + digits(left)
        };
        if out.len() + sep.len() + item.len() + 2 + tail > budget {
            let rest = more(items.len() - i);
            return if out.is_empty() {
                rest.trim_start_matches([',', ' ']).to_string()
            } else {
                out + &rest
            };
        }
        out.push_str(sep);
        out.push('`');
        out.push_str(item);
        out.push('`');
    }
    out
}

/// The bytes of [`listed`] with no budget, without building it.
fn whole(items: &[&str]) -> usize {
    let quoted: usize = items.iter().map(|i| i.len() + 2).sum();
    quoted + 2 * items.len().saturating_sub(1)
}

/// `, and N more`.
fn more(n: usize) -> String {
    format!(", and {n} more")
}

/// The bytes of [`more`] but for the number.
const MORE_LEN: usize = ", and  more".len();

/// The decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The programs the allow rules name, each once, in config order: `git`, `cargo*` (a
/// prefix), `./scripts/**` (a directory), `*` (anything).
fn programs(policy: &gate::Policy) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for rule in &policy.allow {
        let name = match rule.runs() {
            Runs::Anything => "*".to_string(),
            Runs::Program(p) => p,
            Runs::Prefix(p) => format!("{p}*"),
            Runs::Under(p) => format!("{p}/**"),
        };
        if seen.insert(name.clone()) {
            names.push(name);
        }
    }
    names
}

/// Whether the gate allows `rm` of a plain file under the work root: its own verdict, asked
/// only when some allow rule (or the default) could let `rm` run, since with thousands of
/// deny rules a verdict is the dearest part of the rules.
fn rm_allowed(policy: &gate::Policy) -> bool {
    let could = policy.default == Verdict::Allow
        || policy.allow.iter().any(|rule| match rule.runs() {
            Runs::Anything => true,
            Runs::Program(p) => p == "rm" || p.ends_with("/rm"),
            Runs::Prefix(p) => "rm".starts_with(&p) || p.starts_with("rm"),
            Runs::Under(_) => false,
        });
    could && gate::judge(policy, "rm notes.txt").verdict == Verdict::Allow
}

/// `Linux`, `macOS`, ... for `std::env::consts::OS`.
fn os_name(os: &str) -> &str {
    match os {
        "linux" => "Linux",
        "macos" => "macOS",
        "freebsd" => "FreeBSD",
        "openbsd" => "OpenBSD",
        "netbsd" => "NetBSD",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::Path;

    fn config(extra: &str) -> crate::config::Config {
        crate::config::parse(
            &format!(
                "vertical = \"t\"\n[litellm]\nbase_url = \"http://127.0.0.1:4000\"\nkey_ref = \"env:HARNESS_CANARY_KEY_7F3A\"\n[models]\nt = \"m\"\ndefault_tier = \"t\"\n{extra}"
            ),
            Path::new("/nonexistent/harness.toml"),
        )
        .unwrap()
    }

    fn day() -> World {
        World {
            date: NaiveDate::from_ymd_opt(2026, 12, 2).unwrap(),
            os: "linux",
            arch: "x86_64",
        }
    }

    const PYTHON: &str = r#"
[tools.bash]
timeout_secs = 120
max_output_bytes = 30000
default = "deny"
write_redirects = true
allow = ["ls *", "cat *", "grep *", "git status", "git diff *", "python3 *", "pytest *", "rm *"]
deny = ["git push *", "pip install *"]
"#;

    #[test]
    fn the_rules_of_a_representative_config() {
        let cfg = config(PYTHON);
        let tools = Tools {
            bash: &cfg.bash,
            files: true,
        };
        assert_eq!(
            section(Some(tools), day()),
            "Rules of this turn (set by the operator; they do not change during the turn):
- Date: 2026-12-02 (UTC). System: Linux x86_64.
- Working directory: every command starts in the task's working directory; give paths relative to it (`src/lib.rs`, `./run.sh`), not absolute ones. `$TMPDIR` is a private scratch directory.
- Network: closed; commands cannot connect anywhere, so nothing can be downloaded or installed.
- Limits: a command is stopped after 120 s; its output is cut to 30000 bytes (head and tail kept).
- Allowed commands (a trailing ` *` stands for any further words, `/**` for any program under that directory): `ls *`, `cat *`, `grep *`, `git status`, `git diff *`, `python3 *`, `pytest *`, `rm *`. Anything else is denied.
- Denied even when an allow rule matches: `git push *`, `pip install *`.
- Writing files: redirects (`>`, `>>`) and allowed programs that write (`cp`, `mv`, `tee`, ...) may write relative paths under the working directory, never a dotfile, `.git`, a build file (Makefile, Cargo.toml, package.json, pyproject.toml, ...) or a place a path rule names. `rm` of files under the working directory is allowed.
- File tools: `read_file`, `write_file` and `edit_file` take paths relative to the working directory; dotfiles, `.git` and the places the operator protects are off limits, build files are read-only. Use them to read and change files.
- A denied command is not run: its result says why and, where it can, what would work instead. Change the command rather than repeat it."
        );
    }

    #[test]
    fn the_allowlist_names_the_hosts_the_model_may_reach() {
        let cfg = config(
            "[tools.bash]\nnetwork = \"allowlist\"\n[tools.bash.egress]\npresets = [\"@node\"]\n",
        );
        let tools = Tools {
            bash: &cfg.bash,
            files: false,
        };
        let text = section(Some(tools), day());
        assert!(
            text.contains("- Network: only through the harness's HTTP proxy (already set in HTTP_PROXY/HTTPS_PROXY; curl, pip, cargo, npm and git use it), and only to: registry.npmjs.org. Other hosts, direct connections, UDP and DNS are refused."),
            "{text}"
        );
    }

    #[test]
    fn the_defaults_say_what_is_closed() {
        let cfg = config("[tools.bash]\nnetwork = true\ndefault = \"allow\"\nallow = []\n");
        let tools = Tools {
            bash: &cfg.bash,
            files: false,
        };
        let text = section(Some(tools), day());
        for line in [
            "- Network: open; commands may connect out.",
            "- Allowed commands: none by rule. Commands no rule names are allowed too, unless a deny rule matches.",
            "- Writing files: redirects (`>`, `>>`) are denied; allowed programs that write (`cp`, `mv`, `tee`, ...) may write",
            "- Limits: a command is stopped after 60 s;",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        assert!(!text.contains("File tools"), "{text}");
        // Without bash only the day and the host are rules.
        assert_eq!(
            section(None, day()),
            "Rules of this turn:\n- Date: 2026-12-02 (UTC). System: Linux x86_64."
        );
    }

    #[test]
    fn the_text_is_stable_and_names_no_key_ref_or_machine_path() {
        let cfg = config(&format!(
            "{PYTHON}write_roots = [\"/srv/secret-root\"]\nread_roots = [\"@system\", \"/opt/private-venv\"]\n"
        ));
        let tools = || Tools {
            bash: &cfg.bash,
            files: true,
        };
        let one = section(Some(tools()), day());
        assert_eq!(one, section(Some(tools()), day()));
        for secret in [
            "HARNESS_CANARY_KEY_7F3A",
            "key_ref",
            "/nonexistent",
            "/srv/secret-root",
            "/opt/private-venv",
        ] {
            assert!(!one.contains(secret), "{secret} in\n{one}");
        }
        // The next day is another text; the same day at another hour is not.
        let tomorrow = World {
            date: NaiveDate::from_ymd_opt(2026, 12, 3).unwrap(),
            ..day()
        };
        assert_ne!(one, section(Some(tools()), tomorrow));
    }

    #[test]
    fn five_thousand_rules_are_summarised_under_the_cap() {
        let allow: Vec<String> = (0..5000)
            .map(|i| format!("\"tool{} sub{i} *\"", i % 700))
            .collect();
        let deny: Vec<String> = (0..5000).map(|i| format!("\"tool{i} push *\"")).collect();
        let cfg = config(&format!(
            "[tools.bash]\nallow = [{}]\ndeny = [{}]\n",
            allow.join(", "),
            deny.join(", ")
        ));
        let tools = Tools {
            bash: &cfg.bash,
            files: false,
        };
        let text = section(Some(tools), day());
        assert!(text.len() <= RULES_MAX_BYTES, "{}", text.len());
        assert!(
            text.contains("5000 allow rules, by program (a program may be allowed with some arguments only): `tool0`, `tool1`, "),
            "{text}"
        );
        assert!(text.contains(" more. Anything else is denied."), "{text}");
        assert!(
            text.contains("- Denied even when an allow rule matches: `tool0 push *`, "),
            "{text}"
        );
        // Every fixed line survives the cut.
        assert!(
            text.ends_with("Change the command rather than repeat it."),
            "{text}"
        );
        assert_eq!(text, section(Some(tools), day()));
        // A policy that fits is listed whole, in config order.
        let few = config("[tools.bash]\nallow = [\"pwd\", \"cargo*\", \"./scripts/**\", \"*\"]\n");
        let text = section(
            Some(Tools {
                bash: &few.bash,
                files: false,
            }),
            day(),
        );
        assert!(
            text.contains(": `pwd`, `cargo*`, `./scripts/**`, `*`. "),
            "{text}"
        );
        assert_eq!(
            programs(&few.bash.policy),
            vec!["pwd", "cargo*", "./scripts/**", "*"]
        );
    }

    #[test]
    fn a_list_is_cut_where_it_fits_and_counts_the_rest() {
        let items: Vec<String> = ["a", "bb", "ccc"].iter().map(|s| s.to_string()).collect();
        assert_eq!(listed(&items, usize::MAX), "`a`, `bb`, `ccc`");
        assert_eq!(whole(&["a", "bb", "ccc"]), "`a`, `bb`, `ccc`".len());
        assert_eq!(whole(&[]), 0);
        assert_eq!(listed(&items, 20), "`a`, and 2 more");
        assert_eq!(listed(&items, 3), "and 3 more");
        assert_eq!(listed::<&str>(&[], 3), "");
        assert_eq!(more(1234).len(), MORE_LEN + digits(1234));
        let policy = |toml: &str| config(&format!("[tools.bash]\n{toml}\n")).bash.policy;
        for (rules, allowed) in [
            ("allow = [\"rm *\"]", true),
            ("allow = [\"r*\"]", true),
            ("allow = [\"*\"]", true),
            ("allow = [\"rm *\"]\ndeny = [\"rm *\"]", false),
            ("allow = [\"ls *\"]", false),
            ("allow = [\"ls *\"]\ndefault = \"allow\"", true),
        ] {
            assert_eq!(rm_allowed(&policy(rules)), allowed, "{rules}");
        }
        assert_eq!((digits(0), digits(9), digits(10)), (1, 1, 2));
        assert_eq!(os_name("linux"), "Linux");
        assert_eq!(os_name("plan9"), "plan9");
    }
}
