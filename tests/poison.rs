//! Hardening round three through the built binary: harness's own file handling never leaves
//! the root, and no run can poison the next. A scripted adversarial model tries each attack;
//! the attacker's goal is the assertion: a canary outside the root never appears, the next
//! run's task list and prompt are unchanged. Needs Landlock and user namespaces for the
//! protect mounts (the tests say SKIPPED otherwise).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::json;

/// Work root, config, report dir and inbox in one directory (the example layout); every
/// command allowed, redirects too.
fn inbox_config(c: String) -> String {
    let c = c
        .replace("work_root = \"work\"", "work_root = \".\"")
        .replace("max_rounds = 4", "max_rounds = 24");
    let start = c.find("allow = [").unwrap();
    let end = start + c[start..].find("[demo]").unwrap();
    format!(
        "{}allow = [\"*\"]\nwrite_redirects = true\n\n{}\n[inbox]\ndir = \"inbox\"\n",
        &c[..start],
        &c[end..]
    )
}

fn user_namespaces() -> bool {
    let ok = Command::new("unshare")
        .args(["-U", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: protect-mount tests: no user namespaces here");
    }
    ok
}

/// The names in `dir`, sorted; empty when it does not exist.
fn names(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<String> = rd
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

const TASK: &str = "---\nclass: code\n---\nFix the login.\n";

#[test]
fn a_command_cannot_plant_a_link_out_of_the_inbox_nor_queue_or_rewrite_a_task() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let out = outside.path().display().to_string();
    let attacks = [
        format!("ln -s {out} inbox/done"),
        format!("ln -s {out} inbox/failed"),
        format!("cp -rs {out} inbox/claimed"),
        "echo 'evil' > inbox/000-evil.md".to_string(),
        "echo forged > inbox/done/earlier.REPORT.md".to_string(),
        "mkdir inbox/done/x".to_string(),
        "rm -rf inbox".to_string(),
        "mv inbox elsewhere".to_string(),
        "cat inbox/done/earlier.md".to_string(),
    ];
    let mut steps: Vec<serde_json::Value> = attacks
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call(&format!("a{i}"), c))
        .collect();
    steps.push(text("done"));
    let llm = Llm::start(&json!(steps));
    let ws = Workspace::new(&llm.base_url(), inbox_config);
    let inbox = ws.path().join("inbox");
    std::fs::create_dir_all(inbox.join("done")).unwrap();
    std::fs::write(inbox.join("done/earlier.md"), "an earlier task\n").unwrap();
    std::fs::write(inbox.join("done/earlier.REPORT.md"), "an earlier REPORT\n").unwrap();
    std::fs::write(inbox.join("fix.md"), TASK).unwrap();

    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), attacks.len(), "{results:#?}");
    for (attack, r) in attacks.iter().zip(&results) {
        assert!(!r.ends_with("[exit status: 0]"), "{attack}:\n{r}");
    }
    // The gate names the link that would leave the root.
    assert!(
        results[0].contains("out of the work root"),
        "{}",
        results[0]
    );

    // The attacker's goals, none reached: nothing outside, no task queued for the next run,
    // the earlier record unchanged, this run's task settled in done/.
    assert_eq!(names(outside.path()), Vec::<String>::new());
    assert_eq!(names(&inbox), ["claimed", "done"]);
    assert_eq!(
        names(&inbox.join("done")),
        ["earlier.REPORT.md", "earlier.md", "fix.REPORT.md", "fix.md"]
    );
    assert_eq!(
        std::fs::read_to_string(inbox.join("done/earlier.REPORT.md")).unwrap(),
        "an earlier REPORT\n"
    );
    let next = ws.run(&["once"]);
    assert_eq!(next.code, 0, "{next:?}");
    assert!(next.stderr.contains("no tasks in scope"), "{}", next.stderr);
}

/// A plain workspace with an inbox beside the work root, and a directory outside it.
fn planted() -> (Llm, Workspace, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    let llm = Llm::start(&json!([text("done")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}\n[inbox]\ndir = \"inbox\"\nstale_after_mins = 1\n")
    });
    std::fs::create_dir_all(ws.path().join("inbox")).unwrap();
    (llm, ws, outside)
}

#[test]
fn a_planted_symlink_in_the_inbox_is_refused_by_harness_itself_and_nothing_lands_outside() {
    // What a run without protection (or an older harness) could have left behind: links
    // where harness expects its own directories. Harness never follows them.
    let (_llm, ws, outside) = planted();
    let inbox = ws.path().join("inbox");
    std::os::unix::fs::symlink(outside.path(), inbox.join("done")).unwrap();
    std::os::unix::fs::symlink(outside.path(), inbox.join("failed")).unwrap();
    std::fs::write(inbox.join("fix.md"), TASK).unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "outside\n").unwrap();
    std::os::unix::fs::symlink(&secret, inbox.join("linked.md")).unwrap();

    let run = ws.run(&["once"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("is a symlink") && run.stderr.contains("never follows"),
        "{}",
        run.stderr
    );
    // The answer is kept in the report dir; nothing was written, moved or linked outside.
    assert!(ws.latest().contains("done"), "{}", ws.latest());
    assert_eq!(names(outside.path()), ["secret.md"]);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
    // The symlinked `*.md` went to failed/ as what it is... but failed/ is a link too, so
    // it stays, and the task stays where it is, claimed, for an operator to see.
    assert!(inbox.join("linked.md").symlink_metadata().is_ok());
}

#[test]
fn stale_claim_recovery_never_moves_a_file_through_a_planted_link() {
    let (_llm, ws, outside) = planted();
    let inbox = ws.path().join("inbox");
    std::os::unix::fs::symlink(outside.path(), inbox.join("claimed")).unwrap();
    let old = outside
        .path()
        .join("victim--20200101T000000Z-1-00000000.md");
    std::fs::write(&old, "outside\n").unwrap();
    std::fs::write(inbox.join("fix.md"), TASK).unwrap();

    let run = ws.run(&["once"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("is a symlink"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "outside\n");
    assert!(!inbox.join("victim.md").exists());
    assert_eq!(names(&inbox), ["claimed", "fix.md"]);
}
