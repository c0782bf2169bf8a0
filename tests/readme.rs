//! The README's recipes, run as written: its shell blocks are read from README.md itself and
//! run by bash, one line at a time, against the scripted model, with the example config copied
//! as the quickstart says. A recipe that stops being true fails here, not on a newcomer's
//! first day.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The body of the first ```sh block after the heading `heading` (a line of README.md).
fn block_after(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README.md has no {heading:?}"));
    let rest = &readme[start..];
    let open = rest.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let close = rest[open..].find("```").expect("the block's end");
    rest[open..open + close]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn finish_step(id: &str) -> Value {
    json!({"type": "tool_call", "calls": [{"id": id, "name": "finish",
        "arguments": {"status": "done", "summary": format!("Answered ({id}).")}}]})
}

/// One line of a recipe, run by bash in `dir` with `harness` (the built binary) first on PATH.
fn sh(dir: &Path, bin: &Path, line: &str, key: &str) -> Run {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("HARNESS_LITELLM_KEY", key)
        .env_remove("HARNESS_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run::from(out)
}

#[test]
fn the_quickstart_record_replay_and_gate_recipes_run_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let quickstart = block_after(&readme, "## Quickstart against a real endpoint");
    let cassette = block_after(&readme, "To make your own offline cassette");
    let gate = block_after(&readme, "try your `[tools.bash]` policy with the gate");

    let llm = Llm::start(&json!({"steps": [
        finish_step("first"), finish_step("fresh"), finish_step("recorded"),
    ]}));
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("harness.toml.example"),
        dir.path().join("harness.toml.example"),
    )
    .unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_harness"), bin.join("harness")).unwrap();

    let chats = || llm.chat_bodies().len();
    let mut log = Vec::new();
    let mut plain_runs = 0;
    for line in quickstart.iter().chain(&cassette).chain(&gate) {
        let command = line.split("  #").next().unwrap().trim();
        // Installing is what puts `harness` on PATH; the test has the built binary there.
        if command == "cargo install --locked --path ." {
            continue;
        }
        // The reader exports a real key; the test, a canary.
        if command.starts_with("export HARNESS_LITELLM_KEY=") {
            continue;
        }
        let before = chats();
        let run = sh(dir.path(), &bin, command, CANARY);
        log.push(format!("$ {command}\n{run:?}"));
        let expected = if command.starts_with("harness gate") {
            3
        } else {
            0
        };
        assert_eq!(run.code, expected, "{}", log.join("\n"));
        if command.starts_with("cp harness.toml.example harness.toml") {
            // "edit [litellm] base_url and the [models] table": the reader's endpoint.
            let path = dir.path().join("harness.toml");
            let text = std::fs::read_to_string(&path).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with("base_url = "))
                .expect("the example sets base_url");
            let edited = text.replacen(line, &format!("base_url = \"{}\"", llm.base_url()), 1);
            std::fs::write(&path, edited).unwrap();
        }
        let calls = chats() - before;
        if command.starts_with("harness once") && !command.contains("--dry-run") {
            // A plain rerun of the finished demo task has nothing new: no call. A fresh run
            // calls the model, unless its replies come from a cassette.
            let rerun = command == "harness once --demo" && plain_runs > 0;
            plain_runs += usize::from(command == "harness once --demo");
            let want = usize::from(!command.contains("--replay") && !rerun);
            assert_eq!(
                calls,
                want,
                "model calls of `{command}`: {}",
                log.join("\n")
            );
            if want == 1 || command.contains("--replay") {
                assert!(
                    run.stdout.trim().ends_with(".md"),
                    "a turn prints its REPORT path: {}",
                    log.join("\n")
                );
            } else {
                assert_eq!(run.stdout, "", "{}", log.join("\n"));
            }
        } else if command.starts_with("harness") {
            assert_eq!(
                calls,
                0,
                "`{command}` made a model call: {}",
                log.join("\n")
            );
        }
    }
    assert!(
        dir.path().join("my.cassette.json").is_file(),
        "{}",
        log.join("\n")
    );
    assert!(
        quickstart
            .iter()
            .any(|l| l.starts_with("cargo install --locked --path .")),
        "the quickstart installs harness, with the tested Cargo.lock, before using it"
    );
    // The recipe as it once read (no --fresh) records nothing: it must say so.
    let before = chats();
    let run = sh(
        dir.path(),
        &bin,
        "harness once --demo --record none.json",
        CANARY,
    );
    assert_eq!((run.code, chats() - before), (0, 0), "{run:?}");
    assert!(
        run.stderr
            .contains("--record: nothing recorded to none.json"),
        "{run:?}"
    );
    assert!(!dir.path().join("none.json").exists());
    let all = log.join("\n");
    assert!(!all.contains(CANARY), "the key leaked: {all}");
}

/// The example keeps the Redmine sections and the vision tier commented (a proxy with only
/// the tiers it names, and no Redmine, must pass `check`); uncommented, they load as written.
#[test]
fn the_examples_commented_redmine_and_vision_sections_load_when_uncommented() {
    let text = std::fs::read_to_string(root().join("harness.toml.example")).unwrap();
    let mut in_redmine = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("# [redmine") {
            in_redmine = true;
        } else if line.starts_with('[') || line.starts_with("# [") {
            in_redmine = false;
        }
        let uncomment = (in_redmine && !line.starts_with("##"))
            || line.starts_with("# mopac-vision =")
            || line.starts_with("# vision =")
            || line.starts_with("# [models.vision]")
            || line.starts_with("# tiers = [\"mopac-vision\"]");
        match line.strip_prefix("# ").filter(|_| uncomment) {
            Some(rest) => out.push_str(rest),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    assert!(
        out.contains("\n[redmine]\n") || out.contains("\n[redmine] "),
        "{out}"
    );
    assert!(out.contains("\n[redmine.writeback]"), "{out}");
    assert!(out.contains("\nmopac-vision = "), "{out}");
    let cfg = harness::config::parse(&out, Path::new("/nonexistent/harness.toml")).unwrap();
    assert_eq!(cfg.models.vision, ["mopac-vision".to_string()].into());
}

/// A `major.minor` version as numbers, for comparing (`"1.89.0"` -> (1, 89)).
fn minor_version(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap_or(0))
}

/// The Rust the README's Install names builds the locked tree: no package of Cargo.lock
/// asks for a newer rustc (cargo refuses to build one that does), and the workspace's own
/// `rust-version` says the same, so `cargo install --locked` works on that toolchain.
#[test]
fn the_rust_the_readme_names_builds_every_locked_dependency() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let named = readme
        .split("With cargo (Rust ")
        .nth(1)
        .and_then(|rest| rest.split(" or newer)").next())
        .expect("README's Install names a Rust version");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let needs: Vec<(String, &str)> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let rv = p["rust_version"].as_str()?;
            Some((format!("{} {}", p["name"], p["version"]), rv))
        })
        .collect();
    let newest = needs.iter().map(|(_, rv)| minor_version(rv)).max().unwrap();
    assert_eq!(
        minor_version(named),
        newest,
        "README names Rust {named}; the locked packages need: {:?}",
        needs
            .iter()
            .filter(|(_, rv)| minor_version(rv) > minor_version(named))
            .collect::<Vec<_>>()
    );
    let root_version = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "harness")
        .and_then(|p| p["rust_version"].as_str())
        .unwrap();
    assert_eq!(
        minor_version(root_version),
        newest,
        "Cargo.toml rust-version"
    );
}
