//! End-to-end tests of "allowed means works": what the gate allows runs under the sandbox on
//! an ordinary host. git reads no `~/.gitconfig` (the home Landlock hides), finds the
//! repository's git dir in a `[workspace]` worktree, and `harness check` names allowed
//! programs the sandbox would hide. The built binary, the scripted model, real git.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

/// A repository at `dir` on `main` with one commit and one uncommitted change.
fn repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let _ = git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    let _ = git(dir, &["add", "-A"]);
    let _ = git(dir, &["commit", "-q", "-m", "first"]);
}

/// A home for harness itself holding a `.gitconfig`: what every developer machine has, and
/// what Landlock makes unreadable to commands.
fn home_with_gitconfig() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".gitconfig"),
        "[user]\n\tname = Operator\n\temail = op@localhost\n",
    )
    .unwrap();
    home
}

const GIT_RULES: &str = "\"git status\", \"git diff\", \"git log\", \"env\"";

/// The standard config with only `rules` allowed, and `extra` appended.
fn config(llm: &Llm, rules: &str, extra: &str) -> Workspace {
    let (rules, extra) = (rules.to_string(), extra.to_string());
    Workspace::new(&llm.base_url(), move |c| {
        let c = c.replace(
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"printf *\", \"env\", \"wc *\"]",
            &format!("allow = [{rules}]"),
        );
        format!("{}{extra}", c.replace("max_rounds = 4", "max_rounds = 8"))
    })
}

fn git_script() -> serde_json::Value {
    json!([
        tool_call("c1", "git status"),
        tool_call("c2", "git diff"),
        tool_call("c3", "git log"),
        tool_call("c4", "env"),
        text("done"),
    ])
}

/// Each of git status, diff, log exits 0 and shows the repository.
fn assert_git_works(results: &[String]) {
    assert_eq!(results.len(), 4, "{results:#?}");
    for r in &results[..3] {
        assert!(r.ends_with("[exit status: 0]"), "{r}");
    }
    assert!(results[0].contains("a.txt"), "{}", results[0]);
    assert!(results[1].contains("+two"), "{}", results[1]);
    assert!(results[2].contains("first"), "{}", results[2]);
}

#[test]
fn git_in_the_work_root_reads_no_home_config_and_commands_get_a_private_home() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&git_script());
    let ws = config(&llm, GIT_RULES, "");
    let work = ws.path().join("work");
    repo(&work);
    std::fs::write(work.join("a.txt"), "one\ntwo\n").unwrap();
    let home = home_with_gitconfig();
    let run = ws.run_env(
        &["once", "--demo"],
        &[
            ("HARNESS_TEST_LLM_KEY", CANARY),
            ("HOME", home.path().to_str().unwrap()),
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_git_works(&results);
    // HOME is the private temp dir, not the operator's; git reads no global or system file.
    let env = &results[3];
    let var = |name: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {env}"))
            .to_string()
    };
    assert_eq!(var("HOME"), var("TMPDIR"), "{env}");
    assert_eq!(var("GIT_CONFIG_GLOBAL"), "/dev/null");
    assert_eq!(var("GIT_CONFIG_NOSYSTEM"), "1");
    assert!(!env.contains(home.path().to_str().unwrap()), "{env}");
}

#[test]
fn git_in_a_workspace_worktree_reads_the_repository_but_cannot_change_it() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([
        tool_call("c1", "touch b.txt"),
        tool_call("c2", "git status"),
        tool_call("c3", "git diff"),
        tool_call("c4", "git log"),
        tool_call("c5", "git add b.txt"),
        text("done"),
    ]));
    let rules = "\"git status\", \"git diff\", \"git log\", \"git add *\", \"touch *\"";
    let ws = config(
        &llm,
        rules,
        "\n[workspace]\nrepo = \"repo\"\nbase = \"main\"\n",
    );
    let repo_dir = ws.path().join("repo");
    repo(&repo_dir);
    let home = home_with_gitconfig();
    let run = ws.run_env(
        &["once", "--demo"],
        &[
            ("HARNESS_TEST_LLM_KEY", CANARY),
            ("HOME", home.path().to_str().unwrap()),
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), 5, "{results:#?}");
    for r in &results[1..4] {
        assert!(r.ends_with("[exit status: 0]"), "{r}");
    }
    assert!(results[1].contains("On branch harness/"), "{}", results[1]);
    assert!(results[1].contains("b.txt"), "{}", results[1]);
    assert!(results[3].contains("first"), "{}", results[3]);
    // The git dir is read-only for commands: writing the index fails.
    assert!(
        results[4].contains("index.lock") && !results[4].ends_with("[exit status: 0]"),
        "{}",
        results[4]
    );
    // Harness's own git still commits the change after the turn.
    let record = front(&ws.latest(), "workspace");
    assert_eq!(record["committed"], true, "{record}");
}

/// A hand-made venv at `dir/venv` (what `python3 -m venv` leaves: `pyvenv.cfg` with `home =`,
/// a `python3` and a `pytest` whose `#!` line names it), outside every read root. Returns its
/// `bin`.
fn fake_venv(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let venv = dir.join("venv");
    let bin = venv.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        venv.join("pyvenv.cfg"),
        "home = /usr/bin\nversion = 3.12.0\n",
    )
    .unwrap();
    let python = bin.join("python3");
    std::fs::write(&python, "#!/bin/sh\necho \"python $*\"\n").unwrap();
    let pytest = bin.join("pytest");
    std::fs::write(&pytest, format!("#!{}\nprint('tests')\n", python.display())).unwrap();
    for f in [&python, &pytest] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// PATH with `first` in front of the harness's own.
fn path_with(first: &Path) -> String {
    format!(
        "{}:{}",
        first.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    )
}

#[test]
fn check_names_an_allowed_program_in_a_venv_outside_the_roots_and_the_root_to_add() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([]));
    let ws = config(&llm, "\"pytest *\", \"ls *\"", "");
    let bin = fake_venv(ws.path());
    let venv = ws.path().join("venv").canonicalize().unwrap();
    let run = ws
        .run_env(
            &["check"],
            &[("HARNESS_TEST_LLM_KEY", CANARY), ("PATH", &path_with(&bin))],
        )
        .unwrapped();
    // A warning, as check's other findings about the sandbox: the run would still start.
    assert_eq!(run.code, 0, "{run:?}");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("warn  programs: allowed program pytest: "))
        .unwrap_or_else(|| panic!("no programs line in {}", run.stdout));
    assert!(
        line.contains(&format!("{}/bin/pytest (the program)", venv.display()))
            && line.contains(&format!(
                "{}/pyvenv.cfg (the venv's pyvenv.cfg)",
                venv.display()
            ))
            && line.contains(&format!(
                "add \"{}\" to [tools.bash] read_roots",
                venv.display()
            )),
        "{line}"
    );
    // ls lives in the system dirs: nothing to say.
    assert!(!run.stdout.contains("allowed program ls"), "{}", run.stdout);

    // With the venv a read root, check has nothing to say about it.
    let ws2 = config(&llm, "\"pytest *\"", "");
    let text = std::fs::read_to_string(ws2.config()).unwrap().replace(
        "deny = [\"rm *\"]",
        &format!(
            "deny = [\"rm *\"]\nread_roots = [\"@system\", \"{}\"]",
            venv.display()
        ),
    );
    std::fs::write(ws2.config(), text).unwrap();
    let run = ws2
        .run_env(
            &["check"],
            &[("HARNESS_TEST_LLM_KEY", CANARY), ("PATH", &path_with(&bin))],
        )
        .unwrapped();
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("programs:"), "{}", run.stdout);
}

#[test]
fn a_command_the_sandbox_refused_gets_one_line_naming_the_root_or_the_reason() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([
        tool_call("c1", "pytest -q"),
        tool_call("c2", "cat ../outside/data.txt"),
        tool_call("c3", "cat ../harness.toml"),
        tool_call("c4", "cat missing.txt"),
        text("done"),
    ]));
    let ws = config(&llm, "\"pytest *\", \"cat *\"", "");
    let bin = fake_venv(ws.path());
    let venv = ws.path().join("venv").canonicalize().unwrap();
    let outside = ws.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), "x\n").unwrap();
    let run = ws.run_env(
        &["once", "--demo"],
        &[("HARNESS_TEST_LLM_KEY", CANARY), ("PATH", &path_with(&bin))],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), 4, "{results:#?}");
    let hint_of = |r: &str| {
        r.lines()
            .filter(|l| l.starts_with("[harness] sandbox: "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert!(results[0].ends_with("[exit status: 126]"), "{}", results[0]);
    assert_eq!(
        hint_of(&results[0]),
        vec![format!(
            "[harness] sandbox: {}/bin/pytest is outside the read roots; add {} to [tools.bash] read_roots",
            venv.display(),
            venv.display()
        )],
        "{}",
        results[0]
    );
    let outside = outside.canonicalize().unwrap();
    assert_eq!(
        hint_of(&results[1]),
        vec![format!(
            "[harness] sandbox: {}/data.txt is outside the read roots; add {} to [tools.bash] read_roots",
            outside.display(),
            outside.display()
        )],
        "{}",
        results[1]
    );
    // The config is hidden on purpose: no root is suggested for it.
    assert_eq!(
        hint_of(&results[2]),
        vec!["[harness] sandbox: ../harness.toml is hidden from commands on purpose (the config file); no root makes it readable".to_string()],
        "{}",
        results[2]
    );
    assert!(results[2].ends_with("[exit status: 1]"), "{}", results[2]);
    // A failure that is not the sandbox's gets nothing.
    assert!(hint_of(&results[3]).is_empty(), "{}", results[3]);
}

#[test]
fn check_names_a_real_venv_outside_the_roots() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([]));
    let ws = config(&llm, "\"python *\"", "");
    let venv = ws.path().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: python3 -m venv is not available here");
        return;
    }
    let venv = venv.canonicalize().unwrap();
    let run = ws
        .run_env(
            &["check"],
            &[
                ("HARNESS_TEST_LLM_KEY", CANARY),
                ("PATH", &path_with(&venv.join("bin"))),
            ],
        )
        .unwrapped();
    assert_eq!(run.code, 0, "{run:?}");
    // The venv's python is a link to the base Python; the venv itself is what is hidden.
    let wanted = format!(
        "{}/pyvenv.cfg (the venv's pyvenv.cfg) is outside the read roots, so it fails under the sandbox (Permission denied, exit 126); add \"{}\" to [tools.bash] read_roots",
        venv.display(),
        venv.display()
    );
    assert!(
        run.stdout.lines().any(
            |l| l.starts_with("warn  programs: allowed program python: ") && l.contains(&wanted)
        ),
        "{}",
        run.stdout
    );
}
