//! `harness scope [--json]`: the tasks in scope, routed, nothing claimed or moved.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;

#[test]
fn scope_lists_the_inbox_routed_and_moves_nothing() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!("{c}\n[inbox]\ndir = \"inbox\"\n")
    });
    let inbox = ws.path().join("inbox");
    std::fs::create_dir(&inbox).unwrap();
    std::fs::write(inbox.join("a.md"), "---\nclass: code\n---\nFix it.\n").unwrap();
    std::fs::write(
        inbox.join("b.md"),
        "---\nclass: astrology\n---\nRead stars.\n",
    )
    .unwrap();
    std::fs::write(inbox.join("c.md"), "---\nbogus: 1\n---\nx\n").unwrap();
    std::fs::write(inbox.join("d.md"), "# Plain task\nDo it.\n").unwrap();
    let before = std::fs::read_dir(&inbox).unwrap().count();

    let run = ws.run(&["scope", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["count"], 2, "{v}");
    let ids: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "d"]);
    assert_eq!(
        v["tasks"][0],
        json!({"source": "inbox", "id": "a", "subject": "Fix it.", "class": "code",
               "tier": "mopac-code", "models": ["glm-5.2"], "error": null})
    );
    assert!(v["tasks"][1]["error"]
        .as_str()
        .unwrap()
        .contains("astrology"));
    assert_eq!(v["tasks"][2]["tier"], "mopac-primary");
    assert!(
        run.stderr.contains("\"c\" cannot be parsed"),
        "{}",
        run.stderr
    );

    let run = ws.run(&["scope"]);
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert!(lines[0].starts_with("inbox    a "), "{}", run.stdout);
    assert!(
        lines[0].contains("class=code -> mopac-code -> glm-5.2"),
        "{}",
        run.stdout
    );
    assert!(lines[1].contains("NOT ROUTABLE"), "{}", run.stdout);
    assert_eq!(lines[3], "2 task(s) in scope, 1 not routable");

    // Nothing was claimed or moved.
    assert_eq!(std::fs::read_dir(&inbox).unwrap().count(), before);
}

#[test]
fn an_empty_scope_says_so_and_no_source_is_a_config_error() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!("{c}\n[inbox]\ndir = \"inbox\"\n")
    });
    std::fs::create_dir(ws.path().join("inbox")).unwrap();
    let run = ws.run(&["scope", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "{\"count\":0,\"tasks\":[]}\n");
    let run = ws.run(&["scope"]);
    assert!(
        run.stdout.starts_with("no tasks in scope"),
        "{}",
        run.stdout
    );

    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| c);
    let run = ws.run(&["scope"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("no [redmine] section"),
        "{}",
        run.stderr
    );
}
