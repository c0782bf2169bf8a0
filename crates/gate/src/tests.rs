//! Unit tests of the gate: the shared case table and the public API.

#![allow(clippy::unwrap_used)]

use crate::judge::{judge, MAX_DEPTH, MAX_INPUT_BYTES};
use crate::lint::lint;
use crate::render::render_human;
use crate::rule::{Judgement, Policy, Rule, RuleKind, SegmentJudgement, Verdict};

/// The policies of the case table, as `[tools.bash]` tables.
const POLICIES: &str = include_str!("../../../tests/data/gate_policies.toml");
/// The case tables, one file per subject, also run end to end through `harness gate` by
/// tests/gate.rs: every `*.txt` file of the folder, in name order.
fn case_files() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gate_cases");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn rules(list: &[&str]) -> Vec<Rule> {
    list.iter().map(|r| Rule::parse(r).unwrap()).collect()
}

/// A policy of gate_policies.toml by name.
fn named(name: &str) -> Policy {
    let all: toml::Table = POLICIES.parse().unwrap();
    let t = &all[name];
    let list = |key: &str| -> Vec<Rule> {
        let texts: Vec<&str> = t[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        rules(&texts)
    };
    Policy {
        default: match t["default"].as_str().unwrap() {
            "allow" => Verdict::Allow,
            _ => Verdict::Deny,
        },
        allow: list("allow"),
        deny: list("deny"),
        write_redirects: t["write_redirects"].as_bool().unwrap(),
        env_allow: t
            .get("env_allow")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
        file_tools: t
            .get("file_tools")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        work_root: t
            .get("work_root")
            .and_then(|v| v.as_str())
            .map(str::to_string),
    }
}

/// The representative policy most cases run under.
fn policy() -> Policy {
    named("policy")
}

/// Everything allowed, nothing denied: only the always-denied constructs apply.
fn star() -> Policy {
    named("star")
}

/// Everything allowed except what the deny rules name.
fn star_deny() -> Policy {
    named("star_deny")
}

fn writes() -> Policy {
    named("writes")
}

/// Every case of the table: `POLICY VERDICT NAME COMMAND` (COMMAND a JSON string).
#[test]
fn case_table() {
    let mut failures = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    let files = case_files();
    assert!(files.len() >= 15, "only {} case files", files.len());
    let lines = files.iter().flat_map(|(_, text)| text.lines());
    for line in lines {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.splitn(4, ' ');
        let (policy, verdict, name, command) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        assert!(names.insert(name), "duplicate case name {name}");
        let command: String = serde_json::from_str(command).unwrap();
        let want = match verdict {
            "allow" => Verdict::Allow,
            "deny" => Verdict::Deny,
            other => panic!("{name}: bad verdict {other}"),
        };
        let j = judge(&named(policy), &command);
        if j.verdict != want {
            failures.push(format!(
                "{name} ({policy}): want {verdict}\n{}",
                render_human(&j, &[])
            ));
        }
    }
    assert!(names.len() >= 400, "only {} cases", names.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

#[test]
fn rule_parse_kinds() {
    assert_eq!(Rule::parse("*").unwrap().kind, RuleKind::Universal);
    assert_eq!(
        Rule::parse("pwd").unwrap().kind,
        RuleKind::Exact(vec!["pwd".into()])
    );
    assert_eq!(
        Rule::parse("git diff *").unwrap().kind,
        RuleKind::Words(vec!["git".into(), "diff".into()])
    );
    assert_eq!(
        Rule::parse("cargo*").unwrap().kind,
        RuleKind::Raw("cargo".into())
    );
    assert_eq!(
        Rule::parse("./scripts/**").unwrap().kind,
        RuleKind::Path("./scripts".into())
    );
    assert_eq!(Rule::parse("  ls *  ").unwrap().as_str(), "ls *");
}

#[test]
fn rule_parse_errors() {
    assert!(Rule::parse("").is_err());
    assert!(Rule::parse("   ").is_err());
    assert!(Rule::parse("git * diff").is_err());
    assert!(Rule::parse("/**").is_err());
    assert!(Rule::parse("ls\n*").is_err());
}

#[test]
fn raw_prefix_has_no_boundary() {
    let p = Policy {
        allow: rules(&["cargo*"]),
        ..policy()
    };
    assert_eq!(judge(&p, "cargo-evil").verdict, Verdict::Allow);
    assert_eq!(judge(&p, "cargo build").verdict, Verdict::Allow);
    assert_eq!(judge(&p, "cargo build; id").verdict, Verdict::Deny);
    assert_eq!(judge(&p, "cargo $(id)").verdict, Verdict::Deny);
}

#[test]
fn default_allow_applies_to_unmatched() {
    let p = Policy {
        default: Verdict::Allow,
        ..policy()
    };
    assert_eq!(judge(&p, "touch x").verdict, Verdict::Allow);
    assert_eq!(judge(&p, "rm x").verdict, Verdict::Deny);
    assert_eq!(judge(&p, "touch $(id)").verdict, Verdict::Deny);
}

#[test]
fn deny_beats_allow() {
    let p = Policy {
        allow: rules(&["rm *"]),
        deny: rules(&["rm -rf *"]),
        ..policy()
    };
    assert_eq!(judge(&p, "rm x").verdict, Verdict::Allow);
    assert_eq!(judge(&p, "rm -rf x").verdict, Verdict::Deny);
}

#[test]
fn judgement_names_rule_and_segments() {
    let j = judge(&policy(), "ls -la && rm -rf /");
    assert_eq!(
        j,
        Judgement {
            command: "ls -la && rm -rf /".into(),
            verdict: Verdict::Deny,
            reason: "denied by rule `rm *`".into(),
            segments: vec![
                SegmentJudgement {
                    text: "ls -la".into(),
                    command_word: Some("ls".into()),
                    verdict: Verdict::Allow,
                    rule: Some("ls *".into()),
                    reason: "allowed by rule `ls *`".into(),
                    hint: None,
                    heuristic: false,
                },
                SegmentJudgement {
                    text: "rm -rf /".into(),
                    command_word: Some("rm".into()),
                    verdict: Verdict::Deny,
                    rule: Some("rm *".into()),
                    reason: "denied by rule `rm *`".into(),
                    hint: None,
                    heuristic: false,
                },
            ],
            hint: None,
            runtime_path_checks: vec![],
            workdirs: vec![],
        }
    );
}

#[test]
fn path_rule_requests_runtime_check() {
    let j = judge(&policy(), "./scripts/build.sh --release");
    assert_eq!(j.verdict, Verdict::Allow);
    assert_eq!(
        j.runtime_path_checks,
        vec![("./scripts/build.sh".to_string(), "./scripts".to_string())]
    );
    let j = judge(&writes(), "echo hi > out.txt");
    assert_eq!(
        j.runtime_path_checks,
        vec![("out.txt".to_string(), ".".to_string())]
    );
}

#[test]
fn json_shape() {
    let j = judge(&policy(), "pwd");
    let v = serde_json::to_value(&j).unwrap();
    assert_eq!(v["verdict"], "allow");
    assert_eq!(v["segments"][0]["command_word"], "pwd");
}

#[test]
fn lint_flags_escape_hatches() {
    let p = Policy {
        allow: rules(&[
            "*",
            "python3 *",
            "bash *",
            "find *",
            "xargs *",
            "env *",
            "timeout *",
            "awk *",
            "sed *",
            "git *",
            "cargo*",
            "npm*",
            "ls *",
        ]),
        ..policy()
    };
    let w = lint(&p);
    assert_eq!(w.len(), 12, "{w:#?}");
    assert!(w.iter().all(|m| !m.contains("`ls *`")));
    assert!(lint(&policy()).iter().any(|m| m.contains("`find *`")));
}

#[test]
fn render_human_lists_segments_and_warnings() {
    let j = judge(&policy(), "ls; rm x");
    let out = render_human(&j, &["allow rule `*` ...".to_string()]);
    assert_eq!(
        out,
        "DENY: denied by rule `rm *` (1 of 2 segments denied)\n  allow  ls    rule `ls *`\n  deny   rm x  denied by rule `rm *`\nwarning: allow rule `*` ...\n"
    );
}

#[test]
fn oversized_input_is_denied() {
    let cmd = "ls ".repeat(MAX_INPUT_BYTES / 3 + 10);
    let j = judge(&star(), &cmd);
    assert_eq!(j.verdict, Verdict::Deny);
    assert!(j.reason.contains("limit"), "{}", j.reason);
}

#[test]
fn long_compound_command_finishes() {
    // About 100 KB of allowed segments; no timing assertion (see the bench note in DESIGN).
    let cmd = "ls -la && git status; ".repeat(100 * 1024 / 22);
    let j = judge(&policy(), &cmd);
    assert_eq!(j.verdict, Verdict::Allow, "{}", j.reason);
    assert!(j.segments.len() > 9000);
}

#[test]
fn deep_nesting_is_denied_without_panicking() {
    let deep = format!("{}ls{}", "$(".repeat(5000), ")".repeat(5000));
    assert_eq!(judge(&star(), &deep).verdict, Verdict::Deny);
    let mut nested = "ls".to_string();
    for _ in 0..4 {
        nested = format!("bash -c {}", shell_quote(&nested));
    }
    assert_eq!(judge(&star(), &nested).verdict, Verdict::Allow);
    let nested = format!("{}{nested}", "nice ".repeat(MAX_DEPTH));
    let j = judge(&star(), &nested);
    assert_eq!(j.verdict, Verdict::Deny, "{}", j.reason);
    assert!(j.reason.contains("nest"), "{}", j.reason);
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    #[test]
    fn never_panics_on_arbitrary_strings(s in "\\PC*") {
        let _ = judge(&policy(), &s);
        let _ = judge(&star_deny(), &s);
    }

    #[test]
    fn never_panics_on_shell_alphabet(s in "[ \\t\\n\\r;&|<>()${}`'\"\\\\#*?~=a-z0-9!@/.\\-]{0,200}") {
        let _ = judge(&policy(), &s);
        let _ = judge(&writes(), &s);
    }

    #[test]
    fn never_panics_on_deep_nesting(depth in 0usize..400, open in "[({\\[`'\"]|\\$\\(|<\\(|bash -c '") {
        let s = format!("{}ls{}", open.repeat(depth), ")".repeat(depth));
        let _ = judge(&star(), &s);
    }
}

use crate::programs::registry::{Check, Kind, FAMILIES};
use crate::shell::words::RESERVED;

/// Probe arguments for every family: harmless words, code, a write.
const PROBES: &[&str] = &["", "a b", "-c 'rm x'", "-e 'system(1)'", "-o out.txt f"];

/// More probes for a family with an option check: what its check denies, and what it allows.
fn probes_for(check: Check) -> &'static [&'static str] {
    match check {
        Check::Tar => &["-xf a.tar", "-xf a.tar --to-command=sh", "-cf /tmp/a.tar ."],
        Check::Make => &["all", "-f - all", "CC=rm"],
        Check::Go => &["vet ./...", "vet -vettool=/bin/sh ./..."],
        Check::Git => &["status", "-c core.pager=sh log", "push"],
        Check::Sed => &["-n 1p f", "-i s/a/b/ f"],
        Check::Awk => &["'{print}' f", "'BEGIN{system(\"id\")}'"],
        Check::Find => &[". -name x", ". -delete"],
        Check::Uniq | Check::Xxd => &["a b c"],
        Check::Nc | Check::Ssh | Check::Scp | Check::Rsync => {
            &["-e sh host", "-o ProxyCommand=sh host"]
        }
        Check::None => &["--help"],
        _ => &["--help", "-v x"],
    }
}

/// Every way a command is run through a wrapper; `X` is the command.
const WRAPPERS: &[&str] = &[
    "X",
    "env X",
    "timeout 5 X",
    "nice X",
    "nohup X",
    "command X",
    "builtin X",
    "doas X",
    "stdbuf -oL X",
    "setsid X",
    "sudo X",
    "time X",
    "busybox X",
    "watch -x X",
    "ls | xargs X",
    "find . -exec X {} +",
    "find . -exec X {} ;",
    "fd -x X",
    "sh -c Q",
    "bash -c Q",
    "watch Q",
];

fn wrapped(form: &str, cmd: &str) -> String {
    form.replace('Q', &shell_quote(cmd)).replace('X', cmd)
}

/// Every registry name, and a versioned or a flavoured spelling of the family's first name
/// (`python-9.9`, `vim.basic`), is judged like the family's first name: through every wrapper,
/// for every probe, under every policy of the case table.
#[test]
fn every_alias_is_judged_like_its_family() {
    // Allow rules match names exactly as written, so only policies that allow everything can
    // show a difference; deny rules match every name of a family.
    let policies = [star(), star_deny(), named("star_deny_nowrite")];
    // Every wrapper of the registry has a form here.
    for fam in FAMILIES.iter().filter(|f| f.kind == Kind::Wrapper) {
        assert!(
            WRAPPERS
                .iter()
                .any(|w| w.split(' ').any(|t| t == fam.name())),
            "wrapper `{}` has no form in WRAPPERS",
            fam.name()
        );
    }
    // One example per family.
    let mut failures = std::collections::BTreeMap::new();
    // The word `time` is also bash's keyword, which other spellings are not.
    let families = FAMILIES.iter().filter(|f| !RESERVED.contains(&f.name()));
    for (k, fam) in families.enumerate() {
        let first = fam.name();
        // A versioned or a flavoured spelling, in turn (both every time doubles the run time).
        let spelled = if k % 2 == 0 {
            format!("{first}-9.9")
        } else {
            format!("{first}.basic")
        };
        let aliases: Vec<String> = fam.names[1..]
            .iter()
            .map(|a| a.to_string())
            .chain([spelled])
            .collect();
        for probe in PROBES.iter().chain(probes_for(fam.check)) {
            for form in WRAPPERS {
                for p in &policies {
                    let want = judge(p, &wrapped(form, &format!("{first} {probe}"))).verdict;
                    for alias in &aliases {
                        let cmd = wrapped(form, &format!("{alias} {probe}"));
                        let got = judge(p, &cmd);
                        if got.verdict != want {
                            failures.entry(first).or_insert(format!(
                                "{cmd:?}: {:?} ({}), but `{first}` is {want:?}",
                                got.verdict, got.reason
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} families have a name judged unlike the first:\n{}",
        failures.len(),
        failures.into_values().collect::<Vec<_>>().join("\n")
    );
}

/// The holes of issue 9: appended arguments reach every name of tar, make and go.
#[test]
fn appended_arguments_reach_every_alias() {
    for cmd in [
        "ls | xargs tar -xf a.tar",
        "ls | xargs gtar -xf a.tar",
        "ls | xargs bsdtar -xf a.tar",
        "ls | xargs make",
        "ls | xargs gmake",
        "ls | xargs bmake",
        "ls | xargs go vet",
        "ls | xargs go1.22 vet",
        "find . -exec gtar -xf a.tar {} +",
        "fd -x bsdtar -xf a.tar",
        "ls | env xargs gmake",
        "ls | xargs timeout 5 gtar -xf a.tar",
        "ls | xargs perl5.36-x86_64-linux-gnu",
        "ls | xargs vim.basic",
        "ls | xargs python3.11",
    ] {
        let j = judge(&star(), cmd);
        assert_eq!(j.verdict, Verdict::Deny, "{cmd}: {}", j.reason);
    }
}

/// A deny rule names a program: every name of its family is denied, in the command word and
/// in code an interpreter runs.
#[test]
fn deny_rules_match_every_name_of_a_family() {
    let p = Policy {
        default: Verdict::Allow,
        allow: rules(&["*"]),
        // The programs that write typed text denied too: otherwise a file written with `tee`
        // and run with `perl` is beyond any rule, and perl's inline code is not scanned.
        deny: rules(&["tar *", "python3 *", "tee *", "dd *", "cp *", "sponge *"]),
        write_redirects: false,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    };
    for cmd in [
        "gtar -tf a.tar",
        "bsdtar -tf a.tar",
        "TAR -tf a.tar",
        "python3.11 x.py",
        "python x.py",
        "perl -e 'print 1; `gtar -tf a`'",
    ] {
        assert_eq!(judge(&p, cmd).verdict, Verdict::Deny, "{cmd}");
    }
    assert_eq!(judge(&p, "ls -la").verdict, Verdict::Allow);
}

mod linear_time {
    #![allow(dead_code)]
    use super::*;

    include!("../../../bench/gate_adversarial.rs");

    /// Every verdict is linear in the input: the adversarial inputs of the bench, at the
    /// 128 KiB cap, each judged well within a bound a quadratic path would blow by far (a
    /// debug build on a loaded machine; the release target, < 50 ms, is the bench's).
    #[test]
    fn adversarial_inputs_are_judged_in_linear_time() {
        let mut slow = Vec::new();
        for policy in [super::policy(), star_deny(), named("star_deny_nowrite")] {
            for (name, cmd) in adversarial(MAX_INPUT_BYTES) {
                assert!(cmd.len() <= MAX_INPUT_BYTES, "{name}");
                let t = std::time::Instant::now();
                judge(&policy, &cmd);
                let took = t.elapsed();
                eprintln!("{name}: {took:?}");
                if took > std::time::Duration::from_secs(10) {
                    slow.push(format!("{name}: {took:?}"));
                }
            }
        }
        assert!(slow.is_empty(), "slow verdicts: {slow:?}");
    }
}

/// Deny rules for programs with subcommands match the subcommand path (after options that
/// may take values), not any later word: `git push *` is not `git stash push` (issue 20).
#[test]
fn deny_rules_match_a_subcommand_path_not_a_later_word() {
    let p = Policy {
        default: Verdict::Allow,
        allow: vec![Rule::parse("*").unwrap()],
        deny: [
            "git push *",
            "pip install *",
            "cargo install *",
            "make install *",
        ]
        .iter()
        .map(|r| Rule::parse(r).unwrap())
        .collect(),
        write_redirects: false,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    };
    for allowed in [
        "git stash push",
        "git stash push -m wip",
        "git log --grep push",
        "pip download x install",
        "pip3 list",
        "cargo build --features install",
    ] {
        assert_eq!(judge(&p, allowed).verdict, Verdict::Allow, "{allowed}");
    }
    for denied in [
        "git push",
        "git push origin main",
        "git -C . push",
        "git -c a.b=c push",
        "git --no-pager push",
        "git --git-dir=.git push",
        "git -C push push",
        "/usr/bin/git push",
        "pip --isolated install x",
        "pip3.11 install x",
        "PIP install x",
        "cargo +nightly install ripgrep",
        "make all install",
        "make install",
    ] {
        assert_eq!(judge(&p, denied).verdict, Verdict::Deny, "{denied}");
    }
}

/// Every class of denial says what would work under the same policy, where something does
/// (issue 19): one line per class, `(policy, command, the hint's words)`; `None` where the
/// policy leaves no way (a deny rule, a protected place, a program-running option).
#[test]
fn every_denial_class_says_what_would_work() {
    let table: &[(&str, &str, Option<&str>)] = &[
        // sed -i
        ("policy", "sed -i 's/a/b/' x", Some("without `-i` prints")),
        ("py_files", "sed -i 's/a/b/' x.py", Some("`edit_file`")),
        (
            "py_writes",
            "sed -i 's/a/b/' ./*.py",
            Some("name each file"),
        ),
        ("py_writes", "sed -i '' 's/a/b/' x.py", Some("-i.bak")),
        (
            "py_writes",
            "sed -i'a*' 's/a/b/' x.py",
            Some("plain suffix"),
        ),
        // inline code under the heuristic
        (
            "py_nowrite",
            "python3 -c 'import os'",
            Some("word heuristic"),
        ),
        (
            "py_nowrite",
            "python3 - <<'PY'\nimport os\nPY",
            Some("word heuristic"),
        ),
        // cd and workdir
        ("py_writes", "cd /tmp && ls", Some("`workdir`")),
        ("py_writes", "ls && cd src", Some("`workdir`")),
        (
            "py_writes",
            "cd sub && git status",
            Some("run git from the working directory"),
        ),
        ("py_writes", "cd src; cat a > ../x", Some("`&&` after `cd`")),
        // programs named by a path
        (
            "py_writes",
            "./venv/bin/python3 x.py",
            Some("by its name, `python3`"),
        ),
        (
            "py_writes",
            "/opt/py/bin/python3 x.py",
            Some("by its name, `python3`"),
        ),
        // no allow rule: the rule the operator could add
        ("py_writes", "gcc x.c", Some("a rule such as `gcc *`")),
        // environment assignments
        ("py_writes", "FOO=1 python3 x.py", Some("env_allow")),
        (
            "py_writes",
            "RUST_LOG=$HOME python3 x.py",
            Some("plain value"),
        ),
        ("policy", "export X=1", Some("`NAME=value cmd`")),
        // redirections and heredocs
        ("policy", "echo hi > out.txt", Some("output is returned")),
        (
            "py_files",
            "cat > x.py <<'EOF'\nprint(1)\nEOF",
            Some("`write_file`"),
        ),
        ("policy", "echo hi > /etc/x", Some("relative path")),
        ("policy", "cat <<EOF\n$HOME\nEOF", Some("quote the heredoc")),
        // shell syntax the gate does not run
        ("policy", "echo $(ls)", Some("inner command on its own")),
        ("policy", "ls `pwd`", Some("inner command on its own")),
        ("policy", "(ls)", Some("without `( )`")),
        ("policy", "for f in a; do ls; done", Some("separately")),
        ("policy", "$X ls", Some("program's name")),
        ("policy", "ls $FOO", Some("value itself")),
        ("dev", "sort *", Some("`./`")),
        ("policy", "ls | xargs sed -n 1p", Some("name the files")),
        ("policy", "source x.sh", Some("directly")),
        // no way around under the same policy: no hint
        ("policy", "rm -rf x", None),
        ("writes", "echo x > .bashrc", None),
        ("writes", "echo x > Makefile", None),
        ("policy", "sed '1e id' f", None),
        ("py_writes", "LD_PRELOAD=x.so python3 x.py", None),
    ];
    let mut failures = Vec::new();
    for (policy, cmd, want) in table {
        let j = judge(&named(policy), cmd);
        let ok = j.verdict == Verdict::Deny
            && match (want, &j.hint) {
                (Some(w), Some(h)) => h.contains(w),
                (None, None) => true,
                _ => false,
            };
        if !ok {
            failures.push(format!(
                "{cmd:?} ({policy}): {:?}, reason {:?}, hint {:?}; want {want:?}",
                j.verdict, j.reason, j.hint
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The bash tool's `workdir` is judged like a leading `cd DIR &&`: paths from it, the same
/// refusals, and the directory handed to the runner to check.
#[test]
fn workdir_is_judged_like_a_leading_cd() {
    use crate::judge::judge_in;
    let p = named("py_writes");
    let j = judge_in(&p, "src", "cat a > ../out.txt");
    assert_eq!(j.verdict, Verdict::Allow, "{}", j.reason);
    assert_eq!(j.workdirs, ["src"]);
    assert_eq!(
        j.runtime_path_checks,
        [("out.txt".to_string(), ".".to_string())]
    );
    let j = judge_in(&p, "./src/lib/", "cd deep && ls");
    assert_eq!(j.workdirs, ["src/lib", "src/lib/deep"], "{}", j.reason);
    for (dir, cmd) in [
        ("..", "ls"),
        ("/tmp", "ls"),
        (".git", "ls"),
        ("src/../..", "ls"),
        ("-P", "ls"),
        ("$D", "ls"),
        ("a/.hidden", "ls"),
        ("~", "ls"),
        ("src", "git status"),
        ("src", "cat a > ../../x"),
        ("src", "bash ci.sh"),
    ] {
        let j = judge_in(&p, dir, cmd);
        assert_eq!(j.verdict, Verdict::Deny, "{dir} {cmd}");
        assert!(j.workdirs.is_empty());
    }
}

/// The names a command may never be given, whatever `env_allow` says, and some it may.
#[test]
fn denied_env_names_what_changes_programs_and_code_loading() {
    use crate::programs::registry::denied_env;
    for name in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "BASH_ENV",
        "ENV",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONWARNINGS",
        "PYTHONBREAKPOINT",
        "PYTHONUSERBASE",
        "PYTEST_ADDOPTS",
        "PYTEST_PLUGINS",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_EXTERNAL_DIFF",
        "GIT_SSH_COMMAND",
        "GIT_CONFIG_GLOBAL",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "LESSOPEN",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "MANPAGER",
        "XDG_CONFIG_HOME",
        "HOME",
        "TMPDIR",
        "CDPATH",
        "POSIXLY_CORRECT",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CC",
        "CFLAGS",
        "LDFLAGS",
        "GOFLAGS",
        "MAKEFLAGS",
        "MAKEFILES",
        "JAVA_TOOL_OPTIONS",
        "CLASSPATH",
        "SSH_ASKPASS",
        "INPUTRC",
        "GZIP",
        "TAR_OPTIONS",
        "BASH_FUNC_x%%",
        "ld_preload",
        "npm_config_script_shell",
        "GLIBC_TUNABLES",
        "SHELL",
        "BROWSER",
        "VIRTUAL_ENV",
        "PYENV_VERSION",
    ] {
        assert!(denied_env(name).is_some(), "{name}");
    }
    for name in [
        "RUST_BACKTRACE",
        "RUST_LOG",
        "NO_COLOR",
        "CI",
        "TZ",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "NODE_ENV",
        "DEBUG",
        "TERM_COLOR",
        "CARGO_TERM_COLOR",
    ] {
        assert!(denied_env(name).is_none(), "{name}");
    }
}

/// The lint warns where inline interpreter code is judged by the heuristic, and only there.
#[test]
fn lint_warns_where_inline_code_rests_on_the_heuristic() {
    let heuristic = |name: &str| {
        lint(&named(name))
            .iter()
            .filter(|w| w.contains("capability-word heuristic"))
            .count()
    };
    // python3, perl, node: no file can be written, so their inline code is scanned.
    assert_eq!(heuristic("py_nowrite"), 3);
    assert_eq!(heuristic("py_inline_only"), 1);
    // A file can be written and run with each: the heuristic is off, nothing to warn about.
    assert_eq!(heuristic("py_writes"), 0);
    assert_eq!(heuristic("py_files"), 0);
    // No deny rules: no heuristic at all.
    assert_eq!(heuristic("narrow"), 0);
}

/// With the work root known, an absolute path beneath it names the relative one, for `cd`,
/// redirects, `sed -i`, writing programs and values; writing programs and removals are held
/// to the work root (the private temp dir aside) whatever the rules say.
#[test]
fn the_work_root_by_its_absolute_path_and_writes_outside_it() {
    let p = Policy {
        work_root: Some("/repo".into()),
        write_redirects: true,
        ..Policy::rules(
            Verdict::Deny,
            [
                "rm *",
                "rmdir *",
                "mkdir *",
                "chmod *",
                "cp *",
                "mv *",
                "tee *",
                "cat *",
                "python3 *",
                "ls *",
                "sed *",
                "echo *",
                "touch *",
                "shred *",
            ]
            .iter()
            .map(|r| Rule::parse(r).unwrap())
            .collect(),
            vec![Rule::parse("curl *").unwrap()],
        )
    };
    for allowed in [
        "cd /repo && python3 x.py",
        "cd /repo/src && ls",
        "cd /repo/ && ls",
        "echo x > /repo/notes.txt",
        "sed -i 's/a/b/' /repo/src/a.py",
        "cat a.py | tee /repo/b.py",
        "cp a.py /repo/src/b.py",
        "cp a.py /tmp/b.py",
        "rm -rf build .pytest_cache",
        "rm -f /repo/x.pyc",
        "rm -rf /tmp/scratch",
        "mkdir -p src/new /tmp/out",
        "chmod +x run.py",
        "chmod -x run.py",
        "rm *.pyc",
        "PYTHONPATH=/repo:/repo/src python3 x.py",
    ] {
        let j = judge(&p, allowed);
        assert_eq!(j.verdict, Verdict::Allow, "{allowed}: {}", j.reason);
    }
    for denied in [
        "cd /repo/../etc && ls",
        "cd /elsewhere && ls",
        "echo x > /repo/.git/config",
        "echo x > /repo/../x",
        "cp a.py /etc/x.py",
        "cat a | tee /root/.bashrc",
        "mv a /usr/local/bin/a",
        "mkdir -p /root/.pylint.d",
        "rm -rf /",
        "rm -rf /repo",
        "rm -rf .",
        "rm -rf ..",
        "rm -rf ../other",
        "rm -rf .git",
        "rm -rf src/../.git/hooks",
        "rm -rf /home/user",
        "rmdir /repo/.git/refs",
        "chmod 777 /etc/passwd",
        "chmod -R u+w .git",
        "shred -n 3 /etc/hosts",
        "touch /etc/x",
        "PYTHONPATH=/opt/x python3 x.py",
    ] {
        let j = judge(&p, denied);
        assert_eq!(j.verdict, Verdict::Deny, "{denied}: {}", j.reason);
    }
    let unknown = Policy {
        work_root: None,
        ..p.clone()
    };
    assert_eq!(judge(&unknown, "cd /repo && ls").verdict, Verdict::Deny);
    assert_eq!(judge(&unknown, "echo x > /repo/a").verdict, Verdict::Deny);
}
