//! End-to-end tests of the `cmd:` and `bw:` key refs through the built binary, with stand-in
//! `pass` and `bw` programs (shell scripts written into a temp dir put first on PATH).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::json;

/// A temp dir of stand-in programs, and the environment dump they write.
struct Bin {
    dir: tempfile::TempDir,
}

impl Bin {
    fn new() -> Bin {
        Bin {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes an executable script `name` whose body is `script` (after `#!/bin/sh`).
    fn add(&self, name: &str, script: &str) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// PATH with this dir first.
    fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// Where a stand-in writes the environment it was given.
    fn env_dump(&self) -> PathBuf {
        self.dir.path().join("env.txt")
    }
}

/// A stand-in for `pass show NAME`: prints the canary then a second line (pass prints the
/// password, then the entry's other lines), and dumps its environment.
fn fake_pass(bin: &Bin) {
    bin.add(
        "pass",
        &format!(
            r#"env > '{dump}'
if [ "$1" = show ] && [ "$2" = harness/litellm ]; then
    printf '%s\nuser: harness\n' '{CANARY}'
    exit 0
fi
echo "Error: $2 is not in the password store." >&2
exit 1
"#,
            dump = bin.env_dump().display()
        ),
    );
}

/// A stand-in for the Bitwarden CLI, answering `bw get password ITEM` the way `bw` does
/// (messages on stderr, exit 1; the password without a newline when piped).
fn fake_bw(bin: &Bin) {
    bin.add(
        "bw",
        &format!(
            r#"env > '{dump}'
[ "$1 $2" = "get password" ] || {{ echo "unexpected arguments: $*" >&2; exit 9; }}
# Without BW_NOINTERACTION the real CLI would prompt for the master password.
[ "$BW_NOINTERACTION" = true ] || {{ echo "would prompt" >&2; exit 9; }}
case "$BW_SESSION" in
    session-ok) ;;
    logged-out) echo "You are not logged in." >&2; exit 1 ;;
    *) echo "Vault is locked." >&2; exit 1 ;;
esac
case "$3" in
    LiteLLM) printf '%s' '{CANARY}' ;;
    Twins) printf 'More than one result was found. Try getting a specific object by `id` instead. The following objects were found:\nid-1\nid-2\n' >&2; exit 1 ;;
    *) echo "Not found." >&2; exit 1 ;;
esac
"#,
            dump = bin.env_dump().display()
        ),
    );
}

fn with_key_ref(config: String, key_ref: &str) -> String {
    config.replace("env:HARNESS_TEST_LLM_KEY", key_ref)
}

/// Runs harness with the stand-ins on PATH and exactly these extra variables; the usual
/// env key is NOT set, so the key can only come from the ref under test.
fn run_with(ws: &Workspace, bin: &Bin, args: &[&str], env: &[(&str, &str)]) -> Run {
    let path = bin.path_var();
    let mut all = vec![
        ("PATH", path.as_str()),
        ("HARNESS_OTHER_SECRET", "other-canary-5e1f"),
    ];
    all.extend_from_slice(env);
    ws.run_env(args, &all)
}

/// The key reached the endpoint, and the canary appears nowhere harness wrote.
fn assert_key_used_and_masked(llm: &Llm, ws: &Workspace, run: &Run) {
    let auth = &llm.requests()[0]["headers"]["authorization"];
    assert_eq!(auth, &json!(format!("Bearer {CANARY}")));
    for (what, text) in [
        ("stdout", run.stdout.clone()),
        ("stderr", run.stderr.clone()),
        ("files", ws.all_files_text()),
    ] {
        assert!(!text.contains(CANARY), "canary leaked in {what}: {text}");
    }
    // The model echoed the key; the REPORT shows it masked.
    assert!(
        ws.latest().contains("the key is [redacted]"),
        "{}",
        ws.latest()
    );
}

/// The stand-in saw a scrubbed environment: PATH, but none of harness's other variables.
fn assert_scrubbed(dump: &Path) {
    let env = std::fs::read_to_string(dump).unwrap();
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(!env.contains("HARNESS_OTHER_SECRET"), "{env}");
    assert!(!env.contains("other-canary"), "{env}");
}

#[test]
fn a_cmd_ref_runs_the_program_and_takes_its_first_line() {
    let bin = Bin::new();
    fake_pass(&bin);
    let llm = Llm::start(&json!([text(&format!("the key is {CANARY}"))]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        with_key_ref(c, "cmd:pass show harness/litellm")
    });

    let check = run_with(&ws, &bin, &["check"], &[]).unwrapped();
    assert_eq!(check.code, 0, "{check:?}");
    assert!(
        check
            .stdout
            .contains("ok    litellm key: cmd:pass show harness/litellm resolves"),
        "{}",
        check.stdout
    );

    let run = run_with(&ws, &bin, &["once", "--demo"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_key_used_and_masked(&llm, &ws, &run);
    assert_scrubbed(&bin.env_dump());
}

#[test]
fn a_failing_cmd_ref_is_a_config_error_with_its_stderr() {
    let bin = Bin::new();
    fake_pass(&bin);
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        with_key_ref(c, "cmd:pass show harness/nope")
    });
    let run = run_with(&ws, &bin, &["once", "--demo"], &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(
            "cmd:pass show harness/nope: `pass` failed (exit code 1); its stderr: Error: harness/nope is not in the password store."
        ),
        "{}",
        run.stderr
    );
    assert!(ws.report_files().is_empty());

    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        with_key_ref(c, "cmd:harness-no-such-key-program get")
    });
    let run = run_with(&ws, &bin, &["check"], &[]).unwrapped();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("program `harness-no-such-key-program` not found"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_bw_ref_asks_the_bitwarden_cli() {
    let bin = Bin::new();
    fake_bw(&bin);
    let llm = Llm::start(&json!([text(&format!("the key is {CANARY}"))]));
    let ws = Workspace::new(&llm.base_url(), |c| with_key_ref(c, "bw:LiteLLM"));
    let session = [("BW_SESSION", "session-ok")];

    let check = run_with(&ws, &bin, &["check"], &session).unwrapped();
    assert_eq!(check.code, 0, "{check:?}");
    assert!(
        check
            .stdout
            .contains("ok    litellm key: bw:LiteLLM resolves"),
        "{}",
        check.stdout
    );

    let run = run_with(&ws, &bin, &["once", "--demo"], &session);
    assert_eq!(run.code, 0, "{run:?}");
    assert_key_used_and_masked(&llm, &ws, &run);
    assert_scrubbed(&bin.env_dump());
    let env = std::fs::read_to_string(bin.env_dump()).unwrap();
    assert!(env.contains("BW_SESSION=session-ok"), "{env}");
}

#[test]
fn bw_errors_say_what_to_do() {
    let bin = Bin::new();
    fake_bw(&bin);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 4] = [
        (
            "bw:LiteLLM",
            vec![],
            "bw:LiteLLM: the Bitwarden vault is locked and BW_SESSION is not set; run `bw unlock --raw`",
        ),
        (
            "bw:LiteLLM",
            vec![("BW_SESSION", "logged-out")],
            "bw:LiteLLM: the Bitwarden CLI is not logged in; run `bw login`",
        ),
        (
            "bw:Nope",
            vec![("BW_SESSION", "session-ok")],
            "bw:Nope: no Bitwarden login item named or with id `Nope` has a password",
        ),
        (
            "bw:Twins",
            vec![("BW_SESSION", "session-ok")],
            "bw:Twins: more than one Bitwarden item matches `Twins`; use the item's id",
        ),
    ];
    for (key_ref, env, expected) in cases {
        let ws = Workspace::new("http://127.0.0.1:9/v1", |c| with_key_ref(c, key_ref));
        let mut env = env;
        if !env.iter().any(|(k, _)| *k == "BW_SESSION") {
            env.push(("BW_SESSION", ""));
        }
        let run = run_with(&ws, &bin, &["once", "--demo"], &env);
        assert_eq!(run.code, 1, "{key_ref}: {run:?}");
        assert!(run.stderr.contains(expected), "{expected}\n{}", run.stderr);
    }
}
