//! Very long keys through the built binary: masking is linear in the key's length and the
//! output's, so a key at the size limit (16 KiB, one repeated character: the shape that made
//! the old masker quadratic) is checked and masked within the watchdog, and a key over it is
//! refused by `check` and `once`, naming its key ref. Figures for 64 KiB keys are in
//! bench/long_keys.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::runs::*;
use common::*;
use serde_json::json;

const LIMIT: usize = 16 * 1024;

/// A workspace whose LLM key is `key`, in `keys/llm.key` beside the config.
fn with_key_file(base_url: &str, key: &str) -> Workspace {
    let ws = Workspace::new(base_url, |c| {
        // Room for the key in the output's head (it is longer than the usual 4000).
        c.replace("env:HARNESS_TEST_LLM_KEY", "file:keys/llm.key")
            .replace("max_output_bytes = 4000", "max_output_bytes = 100000")
    });
    std::fs::create_dir_all(ws.path().join("keys")).unwrap();
    std::fs::write(ws.path().join("keys/llm.key"), format!("{key}\n")).unwrap();
    ws
}

#[test]
fn a_key_at_the_limit_is_masked_in_a_run_and_one_over_it_is_refused_by_name() {
    let key = "k".repeat(LIMIT);
    // The command prints a megabyte of lines with the key among them.
    let llm = Llm::start(&json!([tool_call("c1", "cat big.txt"), text("# Done")]));
    let ws = with_key_file(&llm.base_url(), &key);
    let lines = |from: usize, to: usize| -> String {
        (from..to)
            .map(|i| format!("line {i} of the output\n"))
            .collect()
    };
    let big = format!("{}{key}\n{}", lines(0, 50), lines(50, 50_000));
    std::fs::write(ws.path().join("work/big.txt"), &big).unwrap();

    let check = run_bounded(harness_cmd(&ws, &["check"]), "check with a 16 KiB key").unwrapped();
    assert!(check.stdout.contains("llm.key resolves"), "{check:?}");
    let run = run_bounded(
        harness_cmd(&ws, &["once", "--demo"]),
        "once with a 16 KiB key",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bodies = llm.chat_bodies();
    let sent = serde_json::to_string(&bodies[1]).unwrap();
    assert!(
        sent.contains("line 49 of the output\\n[redacted]\\nline 50"),
        "not masked"
    );
    assert!(!sent.contains(&key), "the key reached the model");
    assert!(!ws.latest().contains(&key));

    // One byte over: refused before any request, naming the key ref.
    let llm = Llm::start(&json!([text("should never be asked")]));
    let ws = with_key_file(&llm.base_url(), &"k".repeat(LIMIT + 1));
    let check = run_bounded(harness_cmd(&ws, &["check"]), "check with a long key").unwrapped();
    assert_ne!(check.code, 0, "{check:?}");
    let why = format!(
        "file:{} is 16385 bytes, more than the 16 KiB a key may have",
        ws.path().join("keys/llm.key").display()
    );
    assert!(check.stdout.contains(&why), "{check:?}");
    let run = run_bounded(
        harness_cmd(&ws, &["once", "--demo"]),
        "once with a long key",
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains(&why), "{}", run.stderr);
    assert_eq!(llm.chat_bodies().len(), 0);
}
