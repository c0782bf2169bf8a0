//! End-to-end tests of the command line: help, version, usage errors, config errors, routing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use std::process::{Command, Stdio};

fn harness(args: &[&str]) -> Run {
    Run::from(
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(args)
            .env_remove("HARNESS_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    )
}

#[test]
fn help_prints_the_full_usage_block() {
    for args in [&["help"][..], &["--help"], &["-h"], &["-help"]] {
        let run = harness(args);
        assert_eq!(run.code, 0, "{args:?} {run:?}");
        for needle in [
            "once",
            "gate",
            "version",
            "--dry-run",
            "--task-id",
            "Exit codes:",
            "4  llm / turn error",
            // Every way to exit 5 that README and docs/cli.md list, the workflow's too.
            "(stage_failed)",
        ] {
            assert!(
                run.stdout.contains(needle),
                "{args:?} lacks {needle}: {}",
                run.stdout
            );
        }
    }
}

/// `once --help` is read by an operator, not rustdoc: no intra-doc link may show in it.
#[test]
fn once_help_shows_no_rustdoc_markup() {
    let run = harness(&["once", "--help"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("--output <FORMAT>"), "{}", run.stdout);
    assert!(!run.stdout.contains("[`"), "{}", run.stdout);
}

#[test]
fn version_prints_the_version() {
    for args in [&["version"][..], &["--version"]] {
        let run = harness(args);
        assert_eq!(run.code, 0);
        assert!(run.stdout.starts_with("harness 0."), "{}", run.stdout);
    }
}

#[test]
fn usage_errors_exit_1_with_the_usage_line() {
    for args in [
        &["once", "--bogus"][..],
        &["twice"],
        &[],
        &["once", "-bogus"],
        &["gate"],
    ] {
        let run = harness(args);
        assert_eq!(run.code, 1, "{args:?} {run:?}");
        assert!(
            run.stderr.contains("Usage: harness"),
            "{args:?} {}",
            run.stderr
        );
    }
}

#[test]
fn a_missing_config_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = Run::from(
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["once", "--demo", "--dry-run"])
            .current_dir(dir.path())
            .env_remove("HARNESS_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cannot read config harness.toml"),
        "{}",
        run.stderr
    );
}

#[test]
fn harness_config_env_is_the_default_path() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let run = Run::from(
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["once", "--demo", "--dry-run"])
            .env("HARNESS_CONFIG", ws.config())
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("PLAN (dry-run)"));
}

#[test]
fn config_errors_name_every_key_and_the_file() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("max_rounds = 4", "max_rounds = 0\nmax_rouns = 3")
            .replace("default = \"deny\"", "default = \"perhaps\"")
    });
    let run = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(run.code, 1, "{run:?}");
    let config = ws.config().display().to_string();
    assert!(
        run.stderr.contains(&format!("config {config}: 3 problems")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("[loop].max_rouns: unknown key"),
        "{}",
        run.stderr
    );
    assert!(run
        .stderr
        .contains("[loop].max_rounds: must be between 1 and 1000, got 0"));
    assert!(run
        .stderr
        .contains("[tools.bash].default: must be \"allow\" or \"deny\""));
}

#[test]
fn an_unknown_class_is_a_routing_error() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("class = \"primary\"", "class = \"bogus\"")
    });
    let run = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("unknown class \"bogus\": [models.classes]"),
        "{}",
        run.stderr
    );
}

#[test]
fn bw_refs_without_the_bitwarden_cli_say_so() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        c.replace("env:HARNESS_TEST_LLM_KEY", "bw:llm/key")
    });
    // No `bw` anywhere on PATH (tests/keyrefs.rs runs a stand-in `bw`).
    let empty = tempfile::tempdir().unwrap();
    let run = ws.run_env(
        &["once", "--demo"],
        &[("PATH", empty.path().to_str().unwrap())],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("bw:llm/key: the Bitwarden CLI `bw` is not installed or not on PATH"),
        "{}",
        run.stderr
    );
}

#[test]
fn without_demo_and_without_redmine_the_error_says_what_to_do() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let run = ws.run(&["once", "--dry-run"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("no [redmine] section"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--demo"), "{}", run.stderr);
}

#[test]
fn task_id_must_match_the_demo_issue() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let run = ws.run(&["once", "--demo", "--dry-run", "-task-id", "demo-1"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = ws.run(&["once", "--demo", "--dry-run", "--task-id", "demo-2"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn the_example_config_loads_and_matches_the_spec_plan() {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = harness(&[
        "once",
        "--dry-run",
        "--demo",
        "--config",
        &format!("{root}/harness.toml.example"),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("  vertical: demo\n"), "{}", run.stdout);
    assert!(run
        .stdout
        .contains("  task: [demo-1] MVP demo: GLM self-description (source demo)\n"));
    assert!(run
        .stdout
        .contains("  routing: class \"primary\" -> tier mopac-primary -> model glm-5.3\n"));
    assert!(run
        .stdout
        .contains("  tools: bash (allow=141 deny=84 default=deny timeout=60s)\n"));
    assert!(run.stdout.contains("  bound: max 8 rounds\n"));
}

#[test]
fn redmine_down_is_an_intake_error_that_says_what_was_tried() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!("{c}\n[redmine]\nurl = \"http://127.0.0.1:{port}\"\nkey_ref = \"literal:rm-canary-5e1f\"\nscope_query = \"status_id=open\"\nmax_retries = 1\n")
    });
    let run = ws.run(&["once", "--dry-run"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "GET http://127.0.0.1:{port}/users/current.json: could not connect"
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("(after 2 attempts)"), "{}", run.stderr);
    assert!(!run.stderr.contains("rm-canary-5e1f"));
}
