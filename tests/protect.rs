//! End-to-end tests of the write protection of the config, the report dir and the session
//! store when they lie inside the work root (`work_root = "."` beside `harness.toml`): a
//! model whose commands may write anywhere in the work tree still cannot change, remove,
//! replace or unmount them, while new entries at the top of the work root come and go.
//! Without user namespaces, `check` fails and `once` refuses to start. Needs a kernel with
//! Landlock (CI's has ABI 7) and user namespaces (or the refusal is what is tested).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

const SESSION: &str = "reports/sessions/test/demo/demo-1.jsonl.gz";
const EARLIER: &str = "reports/REPORT-test-earlier.md";

/// The layout of the issue: work root, config and report dir in one directory; every
/// command allowed, redirects into the work tree too; an earlier REPORT and a session file.
fn workspace(llm: &Llm) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), workspace_config);
    let p = ws.path();
    std::fs::create_dir_all(p.join("reports/sessions/test/demo")).unwrap();
    std::fs::write(p.join(EARLIER), "an earlier run\n").unwrap();
    std::fs::write(p.join(SESSION), "a stored session\n").unwrap();
    ws
}

/// The standard config in that layout.
fn workspace_config(c: String) -> String {
    let c = c
        .replace("work_root = \"work\"", "work_root = \".\"")
        .replace("max_rounds = 4", "max_rounds = 24");
    let start = c.find("allow = [").unwrap();
    let end = start + c[start..].find("[demo]").unwrap();
    format!(
        "{}allow = [\"*\"]\nwrite_redirects = true\n\n{}",
        &c[..start],
        &c[end..]
    )
}

/// Every file's bytes under `dir`, by path.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Whether this system gives an unprivileged process user namespaces (`unshare -U`).
pub(crate) fn user_namespaces() -> bool {
    let ok = Command::new("unshare")
        .args(["-U", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: write-protection tests: no user namespaces here");
    }
    ok
}

#[test]
fn commands_cannot_change_the_config_reports_or_sessions_inside_the_work_root() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let attacks = [
        "echo 'allow = [\"*\"]' >> harness.toml",
        "echo '[tools.bash]' | tee -a harness.toml",
        "rm -f harness.toml",
        "mv harness.toml moved.toml",
        // A link target inside the root (one leaving it is the gate's to deny since round three).
        "ln -sf hard.toml harness.toml",
        "echo 'vertical = \"evil\"' > evil.toml && mv -f evil.toml harness.toml",
        "ln harness.toml hard.toml",
        "echo injected > reports/REPORT-test-earlier.md",
        "echo injected > reports/sessions/test/demo/demo-1.jsonl.gz",
        "echo injected > reports/REPORT-forged.md",
        "rm -rf reports",
        "mv reports elsewhere",
        "umount -l reports",
        "umount -l harness.toml",
        "mount -o remount,bind,rw reports",
    ];
    let mut steps: Vec<serde_json::Value> = attacks
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call(&format!("a{i}"), c))
        .collect();
    // New entries at the top of the work root: made, removed, and one kept.
    let fine = [
        "mkdir newdir kept",
        "echo y > newdir/f",
        "echo z > newfile",
        "echo kept > kept/f",
        "rm -r newdir newfile",
    ];
    for (i, c) in fine.iter().enumerate() {
        steps.push(tool_call(&format!("f{i}"), c));
    }
    steps.push(text("done"));
    let llm = Llm::start(&json!(steps));
    let ws = workspace(&llm);
    let config = std::fs::read(ws.config()).unwrap();
    let reports = snapshot(&ws.reports());

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), attacks.len() + fine.len(), "{results:#?}");
    for (attack, r) in attacks.iter().zip(&results) {
        // The kernel said no, not the gate: a read-only mount, a mount point, another
        // mount (no hard link across), no mount operation under Landlock.
        let kernel = [
            "Read-only file system",
            "Device or resource busy",
            "Invalid cross-device link",
            "ermission denied",
        ];
        assert!(
            !r.ends_with("[exit status: 0]") && kernel.iter().any(|k| r.contains(k)),
            "{attack}:\n{r}"
        );
    }
    for (c, r) in fine.iter().zip(&results[attacks.len()..]) {
        assert!(r.ends_with("[exit status: 0]"), "{c}:\n{r}");
    }

    // Nothing changed; the new top-level entries came and went for real.
    assert_eq!(std::fs::read(ws.config()).unwrap(), config);
    let after = snapshot(&ws.reports());
    for entry in &reports {
        assert!(after.contains(entry), "{} changed", entry.0);
    }
    assert!(!ws.reports().join("REPORT-forged.md").exists());
    for gone in ["moved.toml", "hard.toml", "elsewhere", "newdir", "newfile"] {
        assert!(!ws.path().join(gone).exists(), "{gone}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("kept/f")).unwrap(),
        "kept\n"
    );
    // The harness itself still writes its REPORT there.
    assert!(ws.latest().contains("done"), "{}", ws.latest());
}

#[test]
fn check_and_the_plan_say_how_the_paths_are_protected() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(&llm);
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check.stdout.contains(
            "ok    writes: harness.toml (the config file), reports (the report dir): inside a write root, read-only mounts for commands"
        ),
        "{}",
        check.stdout
    );
    assert!(
        check.stdout.contains(
            "; the task's attachments (.harness/attachments): a read-only mount for commands"
        ),
        "{}",
        check.stdout
    );
    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout.contains(
            "; read-only for commands: harness.toml (the config file), reports (the report dir); "
        ),
        "{}",
        dry.stdout
    );
    // The usual layout: nothing to protect, nothing mounted.
    let apart = Workspace::new(&llm.base_url(), |c| c);
    let check = apart.run(&["check"]).unwrapped();
    assert!(
        check.stdout.contains(
            "ok    writes: no protected path (config, report dir, cassette) lies inside a write root"
        ),
        "{}",
        check.stdout
    );
}

/// `harness ARGS` for `ws` in a user namespace where no further user namespace can be made
/// (`user.max_user_namespaces = 0`), as in a container whose seccomp profile refuses them.
pub(crate) fn without_user_namespaces(ws: &Workspace, args: &[&str]) -> Run {
    in_namespace(ws, "-Ur", "", args)
}

/// `harness ARGS` for `ws` under `unshare FLAGS`, after the shell commands `setup` (which
/// see the workspace's directory as `$1`), with no further user namespace allowed.
fn in_namespace(ws: &Workspace, flags: &str, setup: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new("unshare");
    cmd.args([flags, "sh", "-c"])
        .arg(format!(
            "{setup} echo 0 > /proc/sys/user/max_user_namespaces && shift && exec \"$@\""
        ))
        .arg("sh")
        .arg(ws.path())
        .arg(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .arg("--config")
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env_remove("HARNESS_CONFIG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .stdin(std::process::Stdio::null());
    Run::from(cmd.output().unwrap())
}

#[test]
fn without_user_namespaces_check_fails_and_once_refuses_to_start() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let llm = Llm::start(&json!([text("done")]));
    let ws = workspace(&llm);
    let check = without_user_namespaces(&ws, &["check"]).unwrapped();
    assert_ne!(check.code, 0, "{check:?}");
    assert!(
        check.stdout.contains("FAIL  writes: config ")
            && check.stdout.contains(
                "commands could rewrite harness.toml (the config file), reports (the report dir): they lie inside a write root and cannot be made read-only here (NOT protected: unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: "
            )
            && check.stdout.contains("move them out of work_root"),
        "{}",
        check.stdout
    );
    let dry = without_user_namespaces(&ws, &["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout.contains(
            "; NOT protected from commands' writes (unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: "
        ) && dry
            .stdout
            .contains("): harness.toml (the config file), reports (the report dir); "),
        "{}",
        dry.stdout
    );
    let before = llm.state()["connections"].clone();
    let run = without_user_namespaces(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("commands could rewrite harness.toml"),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], before, "once reached the model");
    assert!(ws
        .report_files()
        .iter()
        .all(|f| f.ends_with("REPORT-test-earlier.md")));

    // With the config and reports outside the work root, nothing needs them.
    let apart = Workspace::new(&llm.base_url(), |c| c);
    let run = without_user_namespaces(&apart, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn a_harness_that_is_not_root_protects_the_paths_too() {
    // Root's own files under /proc stay writable to it when harness makes itself
    // non-dumpable; another user's do not: the maps must still be written.
    // SAFETY: geteuid only returns a number.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to run harness as another user");
        return;
    }
    if !landlock() || !user_namespaces() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let llm = Llm::start(&json!([
        tool_call("a1", "echo x >> harness.toml"),
        tool_call("a2", "echo x > reports/REPORT-forged.md"),
        tool_call("a3", "id -u"),
        text("done")
    ]));
    let ws = workspace(&llm);
    let config = std::fs::read(ws.config()).unwrap();
    let mut todo = vec![ws.path().to_path_buf()];
    while let Some(d) = todo.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    // Writable by that user, so only the mount stands in the way.
    std::fs::set_permissions(ws.config(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--demo", "--config"])
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env_remove("HARNESS_CONFIG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(results[0].contains("Read-only file system"), "{results:?}");
    assert!(results[1].contains("Read-only file system"), "{results:?}");
    // The command keeps its own uid (mapped to itself).
    assert!(results[2].starts_with("65534\n"), "{results:?}");
    assert_eq!(std::fs::read(ws.config()).unwrap(), config);
}

#[test]
fn a_protected_command_that_times_out_is_killed_with_its_children() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let llm = Llm::start(&json!([
        tool_call("t1", "sleep 71.25 & sleep 71.5"),
        text("done")
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        workspace_config(c).replace(
            "timeout_secs = 10\nmax_output",
            "timeout_secs = 1\nmax_output",
        )
    });
    let started = std::time::Instant::now();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains("[killed: timed out after 1s]"),
        "{results:?}"
    );
    let left = Command::new("pgrep")
        .args(["-f", "sleep 71.(25|5)"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "left running: {left:?}");
}

#[test]
fn a_cassette_recorded_inside_the_work_root_is_harness_s_own() {
    if !landlock() || !user_namespaces() {
        return;
    }
    // The cassette does not exist while commands run: what a command puts there first is
    // replaced by the recording at the end.
    let llm = Llm::start(&json!([
        tool_call("c1", "echo forged > cassette.json"),
        text("recorded reply")
    ]));
    let ws = workspace(&llm);
    let cassette = ws.path().join("cassette.json");
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check
            .stdout
            .contains("ok    writes: harness.toml (the config file)"),
        "{}",
        check.stdout
    );
    let run = ws.run(&["once", "--demo", "--record", cassette.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let text = std::fs::read_to_string(&cassette).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["harness_cassette"], 1, "{text}");
    assert!(text.contains("recorded reply"), "{text}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(results[0].ends_with("[exit status: 0]"), "{results:?}");
}

#[test]
fn a_config_on_a_read_only_file_system_needs_no_mount_even_without_user_namespaces() {
    if !landlock() || !user_namespaces() {
        return;
    }
    // A container's `:ro` volume: the work root holds the config but no command can write it.
    let llm = Llm::start(&json!([text("done")]));
    let reports = tempfile::tempdir().unwrap();
    let out = reports.path().display().to_string();
    let ws = Workspace::new(&llm.base_url(), move |c| {
        c.replace("work_root = \"work\"", "work_root = \".\"")
            .replace("report_dir = \"reports\"", &format!("report_dir = {out:?}"))
    });
    let run = in_namespace(
        &ws,
        "-Urm",
        "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" &&",
        &["once", "--demo"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stderr.contains("commands could rewrite"),
        "{}",
        run.stderr
    );
}
