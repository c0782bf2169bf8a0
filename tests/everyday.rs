//! End to end: the everyday forms of issue 19 run as the gate judged them (the built binary,
//! the scripted model, real bash): the `workdir` argument and a leading `cd DIR &&` run in
//! DIR, `sed -i` rewrites the file, `NAME=value` reaches the command, `/bin/NAME` runs under
//! a rule for NAME, `/tmp/x` lands in the private temp dir, and a denial says what to try
//! instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{json, Value};

fn bash(id: &str, arguments: Value) -> Value {
    json!({"name": "bash", "arguments": arguments, "id": id})
}

#[test]
fn everyday_forms_run_where_and_as_they_were_judged() {
    let cmd = |id: &str, c: &str| bash(id, json!({ "command": c }));
    let tmp_name = format!("harness-everyday-{}.txt", std::process::id());
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            bash("w1", json!({"command": "pwd", "workdir": "sub"})),
            bash("w2", json!({"command": "cat n.txt > ../copy.txt", "workdir": "sub/"})),
            cmd("c1", "cd sub && pwd"),
            cmd("c2", "cd sub && sed -i.orig 's/41/42/' n.txt && cat n.txt"),
        ]},
        {"type": "tool_call", "calls": [
            cmd("e1", "NO_COLOR=yes printenv NO_COLOR"),
            cmd("b1", "/bin/echo from-bin"),
            cmd("d1", "cd .. && ls"),
            bash("d2", json!({"command": "ls", "workdir": "../"})),
            cmd("d3", "sed -i 's/a/b/' Makefile"),
            cmd("t1", &format!("echo in-tmp > /tmp/{tmp_name} && cat /tmp/{tmp_name} $TMPDIR/{tmp_name}")),
        ]},
        text("# Done\n\nRan the everyday forms."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"printf *\", \"env\", \"wc *\"]",
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"sed *\", \"printenv *\"]\nwrite_redirects = true\nenv_allow = [\"NO_COLOR\"]",
        )
    });
    let work = ws.path().join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    std::fs::write(work.join("sub/n.txt"), "41\n").unwrap();
    std::fs::write(work.join("Makefile"), "all:\n").unwrap();

    let results = once_tool_results(&ws, &llm);
    assert_eq!(results.len(), 10, "{results:#?}");
    let sub = work.join("sub").canonicalize().unwrap();
    assert!(
        results[0].starts_with(&format!("{}\n", sub.display())),
        "{}",
        results[0]
    );
    assert!(results[1].contains("[exit status: 0]"), "{}", results[1]);
    assert_eq!(
        std::fs::read_to_string(work.join("copy.txt")).unwrap(),
        "41\n"
    );
    assert!(
        results[2].starts_with(&format!("{}\n", sub.display())),
        "{}",
        results[2]
    );
    assert!(results[3].starts_with("42\n"), "{}", results[3]);
    assert_eq!(
        std::fs::read_to_string(work.join("sub/n.txt")).unwrap(),
        "42\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("sub/n.txt.orig")).unwrap(),
        "41\n"
    );
    assert!(results[4].starts_with("yes\n"), "{}", results[4]);
    assert!(results[5].starts_with("from-bin\n"), "{}", results[5]);
    for denied in &results[6..8] {
        assert!(
            denied.starts_with("denied by the command gate") && denied.contains("try instead"),
            "{denied}"
        );
        assert!(denied.contains("`workdir`"), "{denied}");
    }
    assert!(
        results[8].contains("build and test tools run"),
        "{}",
        results[8]
    );
    assert_eq!(
        std::fs::read_to_string(work.join("Makefile")).unwrap(),
        "all:\n"
    );
    // `/tmp/x` is the command's private temp dir (also `$TMPDIR/x`), never the real /tmp.
    assert!(results[9].starts_with("in-tmp\nin-tmp\n"), "{}", results[9]);
    assert!(!std::path::Path::new("/tmp").join(&tmp_name).exists());
}
