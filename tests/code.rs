//! End-to-end tests of code work that proves itself: the success check and the git worktree
//! per task. The built binary, the scripted model, real git repositories (a bare remote too).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{json, Value};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"type": "tool_call", "calls": [{"name": name, "arguments": arguments, "id": id}]})
}

/// The test the check runs: the answer must be 42.
const TEST_SH: &str = "a=$(cat answer.txt)\nif [ \"$a\" = 42 ]; then echo ok; else echo \"FAIL: answer is $a, expected 42\"; exit 1; fi\n";

/// `repo/` with `main` (a failing test) and `remote.git/`, a bare clone it pushes to.
pub(crate) fn repo_with_remote(root: &Path) -> String {
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("answer.txt"), "41\n").unwrap();
    std::fs::write(repo.join("test.sh"), TEST_SH).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "the answer"]);
    git(root, &["init", "-q", "--bare", "remote.git"]);
    let remote = root.join("remote.git");
    git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(&repo, &["rev-parse", "main"])
}

const CODE_CONFIG: &str = "
[tools.files]
enabled = true

[check]
command = \"bash test.sh\"
max_attempts = 3
feedback_bytes = 2000

[workspace]
repo = \"repo\"
base = \"main\"
push = \"origin\"
";

#[test]
fn a_task_that_finishes_too_early_hears_the_check_fixes_it_and_lands_on_a_pushed_branch() {
    let llm = Llm::start(&json!([
        call("r1", "read_file", json!({"path": "answer.txt"})),
        text("Done, the answer is fine."),
        call(
            "e1",
            "edit_file",
            json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})
        ),
        text("# Fixed\n\nThe answer is now 42."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}{CODE_CONFIG}",
            c.replace("max_rounds = 4", "max_rounds = 6")
        )
    });
    let root = ws.path();
    let main_before = repo_with_remote(root);

    let plan = ws.run(&["once", "--demo", "--dry-run"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(
        plan.stdout
            .contains("  check: `bash test.sh` when the model is done (max 3 attempts"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("  workspace: branch harness/test-demo-1 from main of "),
        "{}",
        plan.stdout
    );

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");

    // The early finish got the check's output back in the next request, as a user message.
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 4);
    let last_user = |b: &Value| {
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("the operator's success check runs"),
        "{system}"
    );
    let feedback = last_user(&bodies[2]);
    assert!(
        feedback.contains(
            "The success check failed (attempt 1 of 3): `bash test.sh` ended with exit 1"
        ),
        "{feedback}"
    );
    assert!(
        feedback.contains("FAIL: answer is 41, expected 42"),
        "{feedback}"
    );
    assert_eq!(
        bodies[2]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .nth(1)
            .unwrap()["content"],
        "Done, the answer is fine."
    );

    // The REPORT.
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let check = front(&report, "check");
    assert_eq!(
        (
            &check["command"],
            &check["attempts"],
            &check["passed"],
            &check["last_exit"]
        ),
        (&json!("bash test.sh"), &json!(2), &json!(true), &json!(0))
    );
    assert!(
        body(&report).contains("## Success check\n\n`bash test.sh`: passed on attempt 2 of 3.\n"),
        "{report}"
    );
    let wsr = front(&report, "workspace");
    assert_eq!(wsr["branch"], "harness/test-demo-1");
    assert_eq!(wsr["continued"], false);
    assert_eq!(
        (&wsr["committed"], &wsr["pushed"], &wsr["error"]),
        (&json!(true), &json!(true), &Value::Null)
    );

    // The branch is on the remote with the fix, by harness, naming the subject and run.
    let remote = root.join("remote.git");
    let branch = "refs/heads/harness/test-demo-1";
    assert_eq!(
        git(&remote, &["show", &format!("{branch}:answer.txt")]),
        "42"
    );
    assert_eq!(
        git(&remote, &["rev-parse", branch]),
        wsr["commit"].as_str().unwrap()
    );
    let run_id = front(&report, "run_id");
    let log = git(&remote, &["log", "-1", "--format=%an <%ae>|%s|%b", branch]);
    assert_eq!(
        log,
        format!(
            "harness <harness@localhost>|Test demo|harness run {}",
            run_id.as_str().unwrap()
        )
    );

    // `main` untouched: the same commit, the old answer, in the repo and not on the remote.
    let repo = root.join("repo");
    assert_eq!(git(&repo, &["rev-parse", "main"]), main_before);
    assert_eq!(
        std::fs::read_to_string(repo.join("answer.txt")).unwrap(),
        "41\n"
    );
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    // The patch beside the REPORT: the branch against main.
    let patch_path = wsr["patch"].as_str().unwrap();
    assert!(patch_path.ends_with(".patch"), "{patch_path}");
    assert_eq!(Path::new(patch_path).parent().unwrap(), ws.reports());
    let patch = std::fs::read_to_string(patch_path).unwrap();
    assert!(patch.contains("-41\n+42\n"), "{patch}");
    git(&repo, &["apply", "--check", patch_path]);
}

#[test]
fn a_later_run_on_the_same_task_continues_its_branch() {
    let llm = Llm::start(&json!({"steps": [
        call("e1", "edit_file", json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})),
        text("Fixed."),
        call("w1", "write_file", json!({"path": "notes.txt", "content": "second run\n"})),
        text("Noted."),
    ]}));
    let ws = Workspace::new(&llm.base_url(), |c| format!("{c}{CODE_CONFIG}"));
    let main_before = repo_with_remote(ws.path());
    assert_eq!(ws.run(&["once", "--demo"]).code, 0);
    let first = front(&ws.latest(), "workspace")["commit"].clone();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let second = front(&ws.latest(), "workspace");
    assert_eq!(second["continued"], true);
    let remote = ws.path().join("remote.git");
    let branch = "refs/heads/harness/test-demo-1";
    assert_eq!(
        git(&remote, &["rev-parse", &format!("{branch}~1")]),
        first.as_str().unwrap()
    );
    assert_eq!(
        git(&remote, &["show", &format!("{branch}:answer.txt")]),
        "42"
    );
    assert_eq!(
        git(&remote, &["show", &format!("{branch}:notes.txt")]),
        "second run"
    );
    assert_eq!(second["commit"], git(&remote, &["rev-parse", branch]));
    assert_eq!(
        git(&ws.path().join("repo"), &["rev-parse", "main"]),
        main_before
    );
}

#[test]
fn a_worktree_whose_git_file_was_repointed_is_restored_before_harness_runs_git_in_it() {
    let llm = Llm::start(&json!({"loop": true, "steps": [text("Nothing to do.")]}));
    let ws = Workspace::new(&llm.base_url(), |c| format!("{c}{CODE_CONFIG}"));
    repo_with_remote(ws.path());
    // The check fails (the answer stays 41): exit 5, the worktree stays for the next run.
    assert_eq!(ws.run(&["once", "--demo"]).code, 5);
    let branch = front(&ws.latest(), "workspace")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let wt = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy() == branch.replace('/', "-"))
        .expect("the worktree");
    // What a command of an earlier run could do: a git directory of its own (a copy of the
    // repository's, on the task's branch, with a filter that runs a program), and the
    // worktree's `.git` pointing at it.
    let common = git(
        &wt,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    );
    let evil = ws.path().join("evil.git");
    let copied = std::process::Command::new("cp")
        .args(["-r", &common, evil.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::write(evil.join("HEAD"), format!("ref: refs/heads/{branch}\n")).unwrap();
    let pwned = ws.path().join("PWNED");
    let mut config = std::fs::read_to_string(evil.join("config")).unwrap();
    config.push_str(&format!(
        "[filter \"x\"]\n\tclean = touch {}\n",
        pwned.display()
    ));
    std::fs::write(evil.join("config"), config).unwrap();
    std::fs::write(wt.join(".gitattributes"), "* filter=x\n").unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert!(
        !pwned.exists(),
        "harness's git ran the repointed directory's filter"
    );
    // The run goes on in its own git directory (the check still fails: exit 5), and the
    // worktree's `.git` points there again, so no later run is bricked either.
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("restored"), "{}", run.stderr);
    let text = std::fs::read_to_string(wt.join(".git")).unwrap();
    assert!(text.contains("/worktrees/"), "{text}");
    assert!(!text.contains("evil.git"), "{text}");
}

#[test]
fn a_check_that_never_passes_ends_with_check_failed_and_exit_5_and_sees_no_key() {
    let llm = Llm::start(&json!([text("Done."), text("Done, really.")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{c}\n[check]\ncommand = \"echo key=[$HARNESS_TEST_LLM_KEY]; env; echo {CANARY}; exit 3\"\nmax_attempts = 2\n"
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 5, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "check_failed");
    let check = front(&report, "check");
    assert_eq!(
        (&check["attempts"], &check["passed"], &check["last_exit"]),
        (&json!(2), &json!(false), &json!(3))
    );
    assert!(front(&report, "error")
        .as_str()
        .unwrap()
        .contains("the success check failed: 2 of 2 attempts"));
    assert!(
        body(&report).contains("**failed**: 2 of 2 attempts, the last ended with exit 3"),
        "{report}"
    );

    // The one failure with an attempt left went back; the key was neither in the check's
    // environment nor shown where it printed it.
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    let all = serde_json::to_string(&bodies).unwrap();
    assert!(all.contains("key=[]"), "{all}");
    assert!(all.contains("[redacted]"), "{all}");
    assert!(!all.contains("HARNESS_TEST_LLM_KEY="), "{all}");
    for text in [&all, &run.stdout, &run.stderr, &ws.all_files_text()] {
        assert!(!text.contains(CANARY));
    }
}

#[test]
fn a_missing_base_branch_fails_the_preflight_before_any_request() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{c}{}",
            CODE_CONFIG.replace("base = \"main\"", "base = \"trunk\"")
        )
    });
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("[workspace].base"), "{}", run.stderr);
    assert!(
        run.stderr.contains("has no branch \"trunk\""),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], 0);
    let check = ws.run(&["check"]).unwrapped();
    assert_ne!(check.code, 0, "{check:?}");
    assert!(
        check.stdout.contains("workspace: config ")
            && check.stdout.contains("has no branch \"trunk\""),
        "{check:?}"
    );
}

#[test]
fn a_refused_push_is_reported_with_the_retry_command_after_the_report() {
    let llm = Llm::start(&json!([
        call(
            "e1",
            "edit_file",
            json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})
        ),
        text("Fixed."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| format!("{c}{CODE_CONFIG}"));
    repo_with_remote(ws.path());
    let hook = ws.path().join("remote.git/hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho refused by the remote >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("refused by the remote"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("retry with: git -C ")
            && run.stderr.contains(
                " push origin refs/heads/harness/test-demo-1:refs/heads/harness/test-demo-1"
            ),
        "{}",
        run.stderr
    );
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let wsr = front(&report, "workspace");
    assert_eq!(
        (&wsr["committed"], &wsr["pushed"]),
        (&json!(true), &json!(false))
    );
    assert!(
        wsr["error"].as_str().unwrap().contains("retry with"),
        "{wsr}"
    );
    assert!(Path::new(wsr["patch"].as_str().unwrap()).is_file());
    // The commit is on the task's branch in the repository, ready for the retry.
    let repo = ws.path().join("repo");
    assert_eq!(
        git(&repo, &["show", "harness/test-demo-1:answer.txt"]),
        "42"
    );
}

#[test]
fn a_check_that_times_out_on_the_last_round_is_final() {
    let llm = Llm::start(&json!([text("Done."), text("Done again.")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}\n[check]\ncommand = \"sleep 30\"\ntimeout_secs = 1\n",
            c.replace("max_rounds = 4", "max_rounds = 2")
        )
    });
    let started = std::time::Instant::now();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "check_failed");
    let check = front(&report, "check");
    assert_eq!(
        (
            &check["attempts"],
            &check["max_attempts"],
            &check["last_exit"],
            &check["last_ending"]
        ),
        (
            &json!(2),
            &json!(3),
            &Value::Null,
            &json!("timeout after 1s")
        )
    );
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 2);
    let all = serde_json::to_string(&bodies[1]["messages"]).unwrap();
    assert!(
        all.contains("`sleep 30` ended with timeout after 1s"),
        "{all}"
    );
}

/// The check is confined like the model's commands: it writes in the work tree only.
#[test]
fn the_check_runs_under_the_landlock_ruleset() {
    if let Err(why) = harness::tools::sandbox::kernel_abi() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have Landlock: {why}"
        );
        eprintln!("SKIPPED: Landlock check test: {why}");
        return;
    }
    let llm = Llm::start(&json!([text("Done.")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{c}\n[check]\ncommand = \"echo in > inside.txt && echo out > ../outside.txt\"\nmax_attempts = 1\n"
        )
    });
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("work/inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!ws.path().join("outside.txt").exists());
}

#[test]
fn a_finish_done_runs_the_check_and_a_failure_keeps_the_turn_going() {
    let llm = Llm::start(&json!([
        call(
            "f1",
            "finish",
            json!({"status": "done", "summary": "Done early."})
        ),
        call(
            "e1",
            "edit_file",
            json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})
        ),
        call(
            "f2",
            "finish",
            json!({"status": "done", "summary": "# Fixed\n\nNow 42."})
        ),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!(
            "{}{CODE_CONFIG}",
            c.replace("max_rounds = 4", "max_rounds = 6")
                .replace("finish = \"message\"", "finish = \"tool\"")
        )
    });
    repo_with_remote(ws.path());
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    assert_eq!(front(&report, "finish")["status"], "done");
    let check = front(&report, "check");
    assert_eq!(
        (&check["attempts"], &check["passed"]),
        (&json!(2), &json!(true))
    );
    assert!(body(&report).starts_with("# Fixed"), "{report}");
    // The first finish was answered, then the check's failure followed as a user message.
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 3);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool", "{messages:?}");
    assert_eq!(messages[n - 1]["role"], "user", "{messages:?}");
    assert!(
        messages[n - 1]["content"]
            .as_str()
            .unwrap()
            .contains("FAIL: answer is 41, expected 42"),
        "{messages:?}"
    );
}

/// Paths in the config are relative to the config, also when `--config` itself is relative:
/// git runs worktree commands inside the repository, so a relative work_root once put the
/// task's worktree inside the repo (exit 1, and every later run failed "already exists").
#[test]
fn a_relative_config_path_puts_the_worktree_under_work_root_not_in_the_repo() {
    let llm = Llm::start(&json!({"steps": [
        call("e1", "edit_file", json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})),
        text("Fixed."),
        text("Again."),
    ]}));
    let ws = Workspace::new(&llm.base_url(), |c| format!("{c}{CODE_CONFIG}"));
    repo_with_remote(ws.path());
    let relative = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
        cmd.args(args)
            .args(["--config", "harness.toml"])
            .current_dir(ws.path())
            .env_remove("RUST_LOG")
            .env_remove("HARNESS_CONFIG")
            .env("HARNESS_TEST_LLM_KEY", CANARY)
            .stdin(std::process::Stdio::null());
        Run::from(cmd.output().unwrap())
    };
    let run = relative(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let worktrees = git(
        &ws.path().join("repo"),
        &["worktree", "list", "--porcelain"],
    );
    let work = ws.path().join("work").canonicalize().unwrap();
    assert!(
        worktrees
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .any(|w| Path::new(w).starts_with(&work)),
        "no worktree under work_root: {worktrees}"
    );
    assert!(
        !ws.path().join("repo/work").exists(),
        "a worktree was made inside the repository"
    );
    let again = relative(&["once", "--demo", "--fresh"]);
    assert_eq!(again.code, 0, "{again:?}");
}

/// What a listener holds: the connections it accepted and never answers.
type Held = std::thread::JoinHandle<Vec<std::io::Result<std::net::TcpStream>>>;

/// A workspace that pushes to `silent`, a 127.0.0.1 remote that accepts connections and
/// never answers (git waits on it), with `extra` in `[workspace]`; the remote's URL.
fn with_a_silent_remote(extra: &str) -> (Llm, Workspace, String, Held) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || listener.incoming().take(4).collect::<Vec<_>>());
    let llm = Llm::start(&json!([
        call(
            "e1",
            "edit_file",
            json!({"path": "answer.txt", "old_string": "41", "new_string": "42"})
        ),
        text("Fixed."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}{CODE_CONFIG}")
            .replace("push = \"origin\"", &format!("push = \"silent\"\n{extra}"))
    });
    repo_with_remote(ws.path());
    let url = format!("http://127.0.0.1:{port}/silent.git");
    git(&ws.path().join("repo"), &["remote", "add", "silent", &url]);
    (llm, ws, url, held)
}

#[test]
fn sigterm_during_a_push_to_a_silent_remote_exits_143_and_keeps_the_report() {
    let (_llm, ws, url, held) = with_a_silent_remote("");
    let child = common::runs::harness_cmd(&ws, &["once", "--demo"])
        .spawn()
        .unwrap();
    // git's http helper names the URL on its command line.
    wait_for_process(&url);
    // SAFETY: kill only sends a signal to the child we started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let run = common::runs::finish(child, "push to a silent remote");
    assert_eq!(run.code, 143, "{run:?}");
    assert!(
        run.stderr
            .contains("interrupted by signal 15 after the turn"),
        "{}",
        run.stderr
    );
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let wsr = front(&report, "workspace");
    assert_eq!(wsr["pushed"], json!(false));
    assert!(
        wsr["error"]
            .as_str()
            .unwrap()
            .contains("stopped by signal 15"),
        "{wsr}"
    );
    assert!(!process_running(&url), "git is still running");
    drop(held);
}

#[test]
fn a_push_past_git_timeout_secs_is_killed_with_a_clear_failure_and_the_report_kept() {
    let (_llm, ws, url, held) = with_a_silent_remote("git_timeout_secs = 1");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("did not finish within 1s and was killed"),
        "{}",
        run.stderr
    );
    let wsr = front(&ws.latest(), "workspace");
    assert_eq!(
        (&wsr["committed"], &wsr["pushed"]),
        (&json!(true), &json!(false))
    );
    assert!(!process_running(&url), "git is still running");
    drop(held);
}
