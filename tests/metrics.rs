//! `[metrics] textfile`: the node_exporter textfile each run rewrites, checked with the real
//! `promtool check metrics` (Debian package `prometheus`; .ci/run installs it). Without
//! promtool the checks fail in CI and skip loudly elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::json;

/// `promtool check metrics < path`, or `None` (said loudly) when promtool is not installed.
pub(crate) fn promtool_check(path: &std::path::Path) -> Option<()> {
    let Ok(file) = std::fs::File::open(path) else {
        panic!("no textfile at {}", path.display());
    };
    let out = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::from(file))
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip(
                "promtool check metrics",
                "promtool is not installed (.ci/run installs the Debian package prometheus)",
            );
            return None;
        }
        Err(e) => panic!("cannot run promtool: {e}"),
    };
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- textfile:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap()
    );
    Some(())
}

/// The value of the sample `key` (`name{labels}`).
fn sample(text: &str, key: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
        .parse()
        .unwrap()
}

fn with_metrics(c: String) -> String {
    format!("{c}\n[metrics]\ntextfile = \"textfile/harness.prom\"\n")
}

#[test]
fn each_run_adds_to_the_counters_and_promtool_accepts_the_file() {
    let llm = Llm::start(&json!([
        tool_call("c1", "ls"),
        tool_call("c2", "rm -rf x"),
        text("# Done"),
        {"type": "error", "status": 400, "body": {"error": {"message": "bad"}}},
    ]));
    let ws = Workspace::new(&llm.base_url(), with_metrics);
    std::fs::create_dir(ws.path().join("textfile")).unwrap();
    let path = ws.path().join("textfile/harness.prom");

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    promtool_check(&path);
    let first = std::fs::read_to_string(&path).unwrap();
    let v = "vertical=\"test\"";
    assert_eq!(
        sample(
            &first,
            &format!("harness_runs_total{{{v},outcome=\"completed\"}}")
        ),
        1.0
    );
    assert_eq!(sample(&first, &format!("harness_rounds_total{{{v}}}")), 3.0);
    assert_eq!(
        sample(
            &first,
            &format!("harness_tool_calls_total{{{v},verdict=\"allowed\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &first,
            &format!("harness_tool_calls_total{{{v},verdict=\"denied\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(&first, &format!("harness_last_exit_code{{{v}}}")),
        0.0
    );
    let success = sample(
        &first,
        &format!("harness_last_success_timestamp_seconds{{{v}}}"),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - success).abs() < 60.0, "{success} vs {now}");
    let prompt = sample(
        &first,
        &format!("harness_tokens_total{{{v},kind=\"prompt\"}}"),
    );
    assert!(prompt > 0.0);

    // An LLM failure: counted under its outcome; the counters carry over.
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    promtool_check(&path);
    let second = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        sample(
            &second,
            &format!("harness_runs_total{{{v},outcome=\"completed\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &second,
            &format!("harness_runs_total{{{v},outcome=\"llm_error\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(&second, &format!("harness_rounds_total{{{v}}}")),
        3.0
    );
    assert_eq!(
        sample(&second, &format!("harness_last_exit_code{{{v}}}")),
        4.0
    );
    assert_eq!(
        sample(
            &second,
            &format!("harness_last_success_timestamp_seconds{{{v}}}")
        ),
        success,
        "a failed run keeps the last success time"
    );
    assert_eq!(
        sample(
            &second,
            &format!("harness_tokens_total{{{v},kind=\"prompt\"}}")
        ),
        prompt
    );
    // Only the textfile and its lock are left in the directory (no temp files).
    let mut names: Vec<String> = std::fs::read_dir(ws.path().join("textfile"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["harness.prom", "harness.prom.lock"]);
}

#[test]
fn workers_finishing_together_lose_no_increment() {
    let llm = Llm::start(&json!({"steps": [text("done")], "loop": true}));
    let ws = Workspace::new(&llm.base_url(), with_metrics);
    std::fs::create_dir(ws.path().join("textfile")).unwrap();
    let children: Vec<_> = (0..6)
        .map(|_| ws.command(&["once", "--demo"]).spawn().unwrap())
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let path = ws.path().join("textfile/harness.prom");
    promtool_check(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        sample(
            &text,
            "harness_runs_total{vertical=\"test\",outcome=\"completed\"}"
        ),
        6.0
    );
}

#[test]
fn a_run_that_fails_before_the_turn_is_counted_too() {
    // A missing key is a config error found after the config (and so the textfile) is known.
    let ws = Workspace::new("http://127.0.0.1:9/v1", with_metrics);
    std::fs::create_dir(ws.path().join("textfile")).unwrap();
    let run = ws.run_env(&["once", "--demo"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    let path = ws.path().join("textfile/harness.prom");
    promtool_check(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let v = "vertical=\"test\"";
    assert_eq!(
        sample(
            &text,
            &format!("harness_runs_total{{{v},outcome=\"config_error\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("harness_last_success_timestamp_seconds{{{v}}}")
        ),
        0.0
    );
}

#[test]
fn the_textfile_is_world_readable_and_the_events_file_follows_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let llm = Llm::start(&json!([text("# Done")]));
    let ws = Workspace::new(&llm.base_url(), with_metrics);
    std::fs::create_dir(ws.path().join("textfile")).unwrap();
    let path = ws.path().join("textfile/harness.prom");
    // A textfile left private by an older harness is made readable too.
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let events = ws.path().join("events.jsonl");
    let mut cmd = ws.command(&["once", "--demo", "--events", events.to_str().unwrap()]);
    // SAFETY: umask(2) only sets the child's file-creation mask, before it execs.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        });
    }
    let run = Run::from(cmd.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o644, "node_exporter must be able to read it");
    assert_eq!(mode(&events), 0o600, "0666 less the umask 077");
}
