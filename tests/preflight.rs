//! End-to-end tests of the preflight: what can fail without the model fails before the first
//! request, with an error naming the key, and `harness check` reports the same list that
//! `harness once` enforces (issue 10 §5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;

/// `text` holds `needle`.
#[track_caller]
fn says(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// Nothing reached the model endpoint.
fn no_requests(llm: &Llm) {
    assert_eq!(llm.requests(), Vec::<serde_json::Value>::new());
}

#[test]
fn check_and_once_agree_on_a_missing_write_root() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "[tools.bash]\n",
            "[tools.bash]\nwrite_roots = [\"missing\"]\n",
        )
    });
    let missing = ws.path().join("missing");
    let once = ws.run(&["once", "--demo"]);
    assert_eq!(once.code, 1, "{once:?}");
    says(&once.stderr, "[tools.bash].write_roots:");
    no_requests(&llm);
    let check = ws.run(&["check"]).unwrapped();
    assert_eq!(check.code, 1, "{check:?}");
    says(
        &check.stdout,
        &format!(
            "FAIL  write root: [tools.bash].write_roots: {} is not a directory",
            missing.display()
        ),
    );
    std::fs::create_dir(&missing).unwrap();
    let check = ws.run(&["check"]).unwrapped();
    says(
        &check.stdout,
        &format!("ok    write root: {} is a directory", missing.display()),
    );
}

#[test]
fn a_key_of_two_lines_is_refused_before_any_request() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let two_lines = format!("{CANARY}\nsecond-line");
    let env = [("HARNESS_TEST_LLM_KEY", two_lines.as_str())];
    let once = ws.run_env(&["once", "--demo"], &env);
    assert_eq!(once.code, 1, "{once:?}");
    let why =
        "[litellm].key_ref (env:HARNESS_TEST_LLM_KEY): the key is not a valid HTTP header value";
    says(&once.stderr, why);
    assert!(!once.stderr.contains(CANARY), "{}", once.stderr);
    assert!(ws.report_files().is_empty());
    let check = ws.run_env(&["check"], &env).unwrapped();
    assert_eq!(check.code, 1, "{check:?}");
    says(&check.stdout, &format!("FAIL  litellm key: {why}"));
    assert!(!check.stdout.contains(CANARY), "{}", check.stdout);
    no_requests(&llm);
}

#[test]
fn an_empty_report_dir_is_a_config_error() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("report_dir = \"reports\"", "report_dir = \"\"")
    });
    for args in [&["once", "--demo"][..], &["check"]] {
        let run = ws.run(args);
        assert_eq!(run.code, 1, "{run:?}");
        says(&run.stderr, "report_dir: must not be empty");
    }
    no_requests(&llm);
}

#[test]
fn a_report_dir_that_is_a_file_is_named_before_any_request() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    std::fs::write(ws.reports(), "a file").unwrap();
    let once = ws.run(&["once", "--demo"]);
    assert_eq!(once.code, 1, "{once:?}");
    says(&once.stderr, "report_dir names a file, not a directory");
    no_requests(&llm);
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check
            .stdout
            .contains("FAIL  report dir: cannot create report dir"),
        "{}",
        check.stdout
    );
}

#[test]
fn check_lines_are_wrapped_to_100_columns_under_the_detail() {
    let llm = Llm::start(&json!([text("never asked")]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let check = ws.run(&["check"]);
    assert_eq!(check.code, 0, "{check:?}");
    // The default test config's `env` allow rule gets a warning longer than 100 columns.
    let lines: Vec<&str> = check.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("warn  gate: allow rule `env`: "))
        .unwrap_or_else(|| panic!("no gate warning in:\n{}", check.stdout));
    let indent = " ".repeat("warn  gate: ".len());
    assert!(lines[at + 1].starts_with(&indent), "{}", check.stdout);
    for l in &lines {
        assert!(
            l.chars().count() <= 100 || !l.trim_start().contains(' '),
            "{l:?} is over 100 columns"
        );
    }
    // Joined again, the finding is one line, as before the wrap.
    let whole = unwrap_check(&check.stdout);
    says(
        &whole,
        "warn  gate: allow rule `env`: `env` runs other commands; the gate judges the command it runs against the rules too\n",
    );
}
