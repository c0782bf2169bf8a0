//! End-to-end tests of `harness gate`: the shared case tables (tests/data/gate_cases/*.txt, also
//! the gate's unit table) through the built binary, plus the output shapes and exit codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const POLICIES: &str = include_str!("data/gate_policies.toml");

/// A config that `harness gate` loads: the required keys plus one `[tools.bash]` table. A
/// policy's `file_tools = true` (not a `[tools.bash]` key) becomes `[tools.files] enabled`.
fn config_text(bash: &toml::Table) -> String {
    let mut bash = bash.clone();
    let files = bash
        .remove("file_tools")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    format!(
        "vertical = \"gate-test\"\n[litellm]\nbase_url = \"http://127.0.0.1:9/v1\"\nkey_ref = \"env:HARNESS_GATE_TEST_UNUSED\"\n[models]\nt = \"m\"\n[tools.bash]\n{}\n[tools.files]\nenabled = {files}\n",
        toml::to_string(&bash).unwrap()
    )
}

struct Gate {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gate(config: &Path, args: &[&str], command: &str) -> Gate {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.arg("gate")
        .arg("--config")
        .arg(config)
        .args(args)
        .arg("--")
        .arg(command);
    finish(cmd)
}

/// Runs the built binary: no RUST_LOG, no stdin.
fn finish(mut cmd: Command) -> Gate {
    let out = cmd
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Gate {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

struct Case {
    policy: String,
    verdict: String,
    name: String,
    command: String,
}

/// Every case of every `*.txt` file in tests/data/gate_cases/ (one file per subject).
fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gate_cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "only {} case files", files.len());
    let text: String = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap() + "\n")
        .collect();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let f: Vec<&str> = line.splitn(4, ' ').collect();
            Case {
                policy: f[0].to_string(),
                verdict: f[1].to_string(),
                name: f[2].to_string(),
                command: serde_json::from_str(f[3]).unwrap(),
            }
        })
        .collect::<Vec<_>>()
}

/// One config file per policy of gate_policies.toml, in `dir`.
fn policy_configs(dir: &Path) -> std::collections::BTreeMap<String, PathBuf> {
    let all: toml::Table = POLICIES.parse().unwrap();
    all.iter()
        .map(|(name, table)| {
            let path = dir.join(format!("{name}.toml"));
            std::fs::write(&path, config_text(table.as_table().unwrap())).unwrap();
            (name.clone(), path)
        })
        .collect()
}

#[test]
fn the_case_table_holds_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let configs = policy_configs(dir.path());
    // argv cannot carry a NUL byte; the unit table covers that case through `judge`.
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| !c.command.contains('\0'))
        .collect();
    assert!(cases.len() >= 400, "only {} cases", cases.len());
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = cases
            .chunks(cases.len().div_ceil(8))
            .map(|chunk| {
                let configs = &configs;
                s.spawn(move || {
                    let mut failures = Vec::new();
                    for c in chunk {
                        let g = gate(&configs[&c.policy], &["--json"], &c.command);
                        let want_code = if c.verdict == "allow" { 0 } else { 3 };
                        let v: Value = serde_json::from_str(&g.stdout).unwrap_or(Value::Null);
                        if g.code != want_code || v["verdict"] != c.verdict.as_str() {
                            failures.push(format!(
                                "{} ({}): want {} (exit {want_code}), got exit {}: {}{}",
                                c.name, c.policy, c.verdict, g.code, g.stdout, g.stderr
                            ));
                        }
                        if v["command"] != c.command.as_str() {
                            failures
                                .push(format!("{}: the JSON does not echo the command", c.name));
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn json_output_has_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let configs = policy_configs(dir.path());
    let g = gate(&configs["policy"], &["--json"], "ls -la | wc -l; rm -rf /");
    assert_eq!(g.code, 3, "{}{}", g.stdout, g.stderr);
    assert!(g.stdout.ends_with("}\n") && g.stdout.lines().count() == 1);
    let v: Value = serde_json::from_str(&g.stdout).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "command",
            "hint",
            "reason",
            "runtime_path_checks",
            "segments",
            "verdict",
            "warnings",
            "workdirs"
        ]
    );
    assert_eq!(v["verdict"], "deny");
    let segments = v["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 3);
    assert_eq!(segments[0]["command_word"], "ls");
    assert_eq!(segments[0]["verdict"], "allow");
    assert_eq!(segments[0]["rule"], "ls *");
    assert_eq!(segments[2]["command_word"], "rm");
    assert_eq!(segments[2]["verdict"], "deny");
    assert_eq!(segments[2]["rule"], "rm *");
    assert!(v["reason"].as_str().unwrap().contains("rm *"), "{v}");
    // A deny rule leaves no way around: no hint; a segment's `hint` and `heuristic` are
    // there only when they say something.
    assert_eq!(v["hint"], Value::Null);
    assert!(segments[2].get("hint").is_none() && segments[2].get("heuristic").is_none());
    // `find *`, `sed *`, `awk *`, `xargs *`, `timeout *` are escape hatches: linted.
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("`xargs *`")),
        "{warnings:?}"
    );
    let g = gate(
        &configs["py_nowrite"],
        &["--json"],
        "python3 -c 'import os'",
    );
    let v: Value = serde_json::from_str(&g.stdout).unwrap();
    assert_eq!(v["segments"][0]["heuristic"], true, "{v}");
    assert!(v["hint"].as_str().unwrap().contains("heuristic"), "{v}");
    let g = gate(
        &configs["py_writes"],
        &["--json"],
        "cd src && sed -i 's/a/b/' x.py",
    );
    let v: Value = serde_json::from_str(&g.stdout).unwrap();
    assert_eq!(v["verdict"], "allow", "{v}");
    assert_eq!(v["workdirs"], serde_json::json!(["src"]), "{v}");
    assert_eq!(
        v["runtime_path_checks"],
        serde_json::json!([["src/x.py", "."]]),
        "{v}"
    );
}

#[test]
fn text_output_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let configs = policy_configs(dir.path());
    let g = gate(&configs["policy"], &[], "git status && rm -rf /");
    assert_eq!(g.code, 3);
    assert_eq!(
        g.stdout.lines().take(3).collect::<Vec<_>>(),
        vec![
            "DENY: denied by rule `rm *` (1 of 2 segments denied)",
            "  allow  git status  rule `git status`",
            "  deny   rm -rf /    denied by rule `rm *`",
        ],
        "{}",
        g.stdout
    );
    assert!(
        g.stdout.contains("\nwarning: allow rule `find *`"),
        "{}",
        g.stdout
    );

    let g = gate(&configs["star"], &[], "echo 'a && b'");
    assert_eq!(g.code, 0);
    assert_eq!(
        g.stdout,
        "ALLOW: the command is allowed\n  allow  echo 'a && b'  rule `*`\nwarning: allow rule `*` allows every command; only deny rules and the always-denied constructs still apply\n"
    );
}

#[test]
fn a_config_error_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut table = toml::Table::new();
    table.insert("allow".into(), toml::Value::from(vec!["git *", "l*s"]));
    table.insert("examples_deny".into(), toml::Value::from(vec!["git push"]));
    let path = dir.path().join("bad-rule.toml");
    std::fs::write(&path, config_text(&table)).unwrap();
    let g = gate(&path, &["--json"], "ls");
    assert_eq!(g.code, 1, "{}{}", g.stdout, g.stderr);
    assert_eq!(g.stdout, "");
    assert!(g.stderr.contains("[tools.bash].allow[1]"), "{}", g.stderr);

    // A violated policy self-test is a config error naming the example and its verdict.
    table.insert("allow".into(), toml::Value::from(vec!["git *"]));
    std::fs::write(&path, config_text(&table)).unwrap();
    let g = gate(&path, &[], "ls");
    assert_eq!(g.code, 1, "{}{}", g.stdout, g.stderr);
    assert!(
        g.stderr
            .contains("[tools.bash].examples_deny[0]: \"git push\" was allowed: "),
        "{}",
        g.stderr
    );

    let g = gate(&dir.path().join("missing.toml"), &[], "ls");
    assert_eq!(g.code, 1);
}

/// `harness` with these arguments, no config: the preset forms of `harness gate`.
fn bare(args: &[&str]) -> Gate {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.args(args).env_remove("HARNESS_CONFIG");
    finish(cmd)
}

#[test]
fn a_preset_is_printed_and_judges_alone() {
    let g = bare(&["gate", "--preset", "python-dev"]);
    assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
    assert!(g.stdout.starts_with("preset python-dev: "), "{}", g.stdout);
    assert!(g.stdout.contains("\n  pytest *\n"), "{}", g.stdout);
    assert!(g.stdout.contains("\n  pip install *\n"), "{}", g.stdout);

    let g = bare(&["gate", "--preset", "read-only", "--json"]);
    assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
    let v: Value = serde_json::from_str(&g.stdout).unwrap();
    assert_eq!(v["preset"], "read-only");
    assert_eq!(v["write_redirects"], false);
    assert!(v["allow"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "git log *"));

    // Judged under the preset alone: no config is needed or read.
    let g = bare(&[
        "gate",
        "--preset",
        "python-dev",
        "--",
        "python3 reproduce.py",
    ]);
    assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
    let g = bare(&[
        "gate",
        "--preset",
        "python-dev",
        "--",
        "pip install requests",
    ]);
    assert_eq!(g.code, 3, "{}{}", g.stdout, g.stderr);
    assert!(
        g.stdout.contains("denied by rule `pip install *`"),
        "{}",
        g.stdout
    );

    let g = bare(&["gate", "--preset", "python_dev"]);
    assert_eq!(g.code, 1, "{}{}", g.stdout, g.stderr);
    assert!(
        g.stderr.contains("unknown preset \"python_dev\" (did you mean \"python-dev\"?); the presets are: python-dev, rust-dev, node-dev, read-only"),
        "{}",
        g.stderr
    );
}

/// docs/gate.md lists every preset's rules as `harness gate --preset NAME --json` gives them.
#[test]
fn the_docs_list_each_preset_as_the_registry_has_it() {
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/gate.md"))
        .unwrap();
    for name in ["python-dev", "rust-dev", "node-dev", "read-only"] {
        let g = bare(&["gate", "--preset", name, "--json"]);
        assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
        let v: Value = serde_json::from_str(&g.stdout).unwrap();
        assert!(docs.contains(&format!("### `{name}`")), "{name}");
        for key in ["allow", "deny"] {
            let rules: Vec<String> = v[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| format!("`{}`", r.as_str().unwrap()))
                .collect();
            let line = format!("- {key}: {}\n", rules.join(", "));
            assert!(
                docs.contains(&line),
                "docs/gate.md lacks {name}'s {key} line:\n{line}"
            );
        }
    }
}
