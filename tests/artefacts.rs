//! End-to-end tests of the bounded artefacts of a workspace run: a file over
//! `[workspace] max_file_bytes` stays out of the commit, the object store, the patch and the
//! push; a patch over `max_patch_bytes` is kept as its stat summary. The built binary, the
//! scripted model, a real git repository and a bare remote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};

fn write(id: &str, path: &str, content: &str) -> Value {
    json!({"type": "tool_call", "calls": [{"name": "write_file", "arguments": {"path": path, "content": content}, "id": id}]})
}

/// `repo/` with `main` (one file) and `remote.git/`, a bare repository it pushes to.
fn repo_with_remote(root: &Path) {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "a repository\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(root, &["init", "-q", "--bare", "remote.git"]);
    let remote = root.join("remote.git");
    git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
}

fn config(extra: &str) -> impl FnOnce(String) -> String + '_ {
    move |c| {
        format!(
            "{c}\n[tools.files]\nenabled = true\n\n[workspace]\nrepo = \"repo\"\nbase = \"main\"\npush = \"origin\"\n{extra}\n"
        )
    }
}

const BRANCH: &str = "refs/heads/harness/test-demo-1";

#[test]
fn a_file_over_max_file_bytes_is_left_out_of_the_commit_the_store_the_patch_and_the_push() {
    let big = "x".repeat(5000);
    let llm = Llm::start(&json!([
        write("w1", "big.bin", &big),
        write("w2", "small.txt", "small\n"),
        text("Wrote both."),
    ]));
    let ws = Workspace::new(&llm.base_url(), config("max_file_bytes = 4096"));
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("over max_file_bytes"), "{}", run.stderr);
    let wsr = front(&ws.latest(), "workspace");
    assert_eq!(
        wsr["too_large"],
        json!(["big.bin (5000 bytes, over max_file_bytes 4096)"]),
        "{wsr}"
    );
    assert_eq!(
        (&wsr["committed"], &wsr["pushed"]),
        (&json!(true), &json!(true))
    );
    let remote = ws.path().join("remote.git");
    let files = git(&remote, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert_eq!(files, "README\nsmall.txt", "{files}");
    let patch = std::fs::read_to_string(wsr["patch"].as_str().unwrap()).unwrap();
    assert!(
        patch.contains("small.txt") && !patch.contains("big.bin"),
        "{patch}"
    );
    // The blob never entered the repository's object store.
    let repo = ws.path().join("repo");
    let sha = Command::new("git")
        .args(["hash-object", "--stdin"])
        .current_dir(&repo)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(big.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let sha = String::from_utf8(sha.stdout).unwrap();
    let there = Command::new("git")
        .args(["cat-file", "-e", sha.trim()])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(!there.status.success(), "the big blob is in the store");
}

#[test]
fn a_patch_over_max_patch_bytes_is_kept_as_a_stat_summary_and_the_report_says_so() {
    let llm = Llm::start(&json!([
        write("w1", "big.txt", &"line of text\n".repeat(500)),
        text("Wrote it."),
    ]));
    let ws = Workspace::new(&llm.base_url(), config("max_patch_bytes = 4096"));
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let wsr = front(&ws.latest(), "workspace");
    assert_eq!(wsr["patch_summary"], true, "{wsr}");
    assert!(wsr["patch_bytes"].as_u64().unwrap() > 4096, "{wsr}");
    let summary = std::fs::read_to_string(wsr["patch"].as_str().unwrap()).unwrap();
    let mut lines = summary.lines();
    let header = lines.next().unwrap();
    assert!(
        header.contains("over max_patch_bytes (4096 bytes")
            && header.contains("git diff --binary main...harness/test-demo-1"),
        "{summary}"
    );
    assert!(summary.contains("big.txt | 500 +"), "{summary}");
    assert!(
        summary.len() < 4096 && !summary.contains("line of text"),
        "{summary}"
    );
    // The commit and the push are whole: only the artefact beside the REPORT is bounded.
    let remote = ws.path().join("remote.git");
    let files = git(&remote, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert_eq!(files, "README\nbig.txt", "{files}");
}

#[test]
fn a_patch_under_the_estimate_but_over_the_limit_once_made_is_a_summary_too() {
    // 1,400 bytes of blob, but each line gains a `+` and the headers: over 2,048 as a patch.
    let llm = Llm::start(&json!([
        write("w1", "lines.txt", &"a\n".repeat(700)),
        text("Wrote it."),
    ]));
    let ws = Workspace::new(&llm.base_url(), config("max_patch_bytes = 2048"));
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let wsr = front(&ws.latest(), "workspace");
    assert_eq!(wsr["patch_summary"], true, "{wsr}");
    assert_eq!(wsr["patch_bytes"], 2049, "{wsr}");
    let summary = std::fs::read_to_string(wsr["patch"].as_str().unwrap()).unwrap();
    assert!(summary.contains("lines.txt | 700 +"), "{summary}");
}

#[test]
fn a_patch_under_max_patch_bytes_is_written_whole_with_its_size() {
    let llm = Llm::start(&json!([
        write("w1", "small.txt", "small\n"),
        text("Wrote it."),
    ]));
    let ws = Workspace::new(&llm.base_url(), config("max_patch_bytes = 4096"));
    repo_with_remote(ws.path());
    assert_eq!(ws.run(&["once", "--demo"]).code, 0);
    let wsr = front(&ws.latest(), "workspace");
    assert!(wsr.get("patch_summary").is_none(), "{wsr}");
    let path = wsr["patch"].as_str().unwrap();
    let patch = std::fs::read(path).unwrap();
    assert_eq!(wsr["patch_bytes"], patch.len(), "{wsr}");
    git(&ws.path().join("repo"), &["apply", "--check", path]);
}

#[test]
fn a_big_binary_file_a_command_wrote_is_left_out_and_the_rest_is_committed() {
    let bash = |id: &str, command: &str| json!({"type": "tool_call", "calls": [{"name": "bash", "arguments": {"command": command}, "id": id}]});
    let llm = Llm::start(&json!([
        bash("b1", "head -c 100000 /dev/zero > big.bin"),
        write("w1", "small.txt", "small\n"),
        text("Done."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        config("max_file_bytes = 4096")(
            c.replace("\"wc *\"]", "\"wc *\", \"head *\"]\nwrite_redirects = true"),
        )
    });
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let work = ws.path().join("work");
    let big = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("big.bin"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("the command wrote no big.bin: {}", ws.latest()));
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 100_000);
    let wsr = front(&ws.latest(), "workspace");
    assert_eq!(
        wsr["too_large"],
        json!(["big.bin (100000 bytes, over max_file_bytes 4096)"]),
        "{wsr}"
    );
    let remote = ws.path().join("remote.git");
    let files = git(&remote, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert_eq!(files, "README\nsmall.txt", "{files}");
}
