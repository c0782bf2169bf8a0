//! End-to-end tests of the file tools: the built binary, the scripted model, a real work tree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{json, Value};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments, "id": id})
}

#[test]
fn the_model_reads_edits_and_writes_files_and_the_report_logs_each_call() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            call("r1", "read_file", json!({"path": "src/lib.rs"})),
            call("r2", "read_file", json!({"path": "key.txt"})),
        ]},
        {"type": "tool_call", "calls": [
            // Indentation the model got wrong: matched one level down the ladder.
            call("e1", "edit_file", json!({"path": "src/lib.rs", "old_string": "\t41\n", "new_string": "\t42\n"})),
            call("w1", "write_file", json!({"path": "notes/todo.md", "content": "- ship it\n"})),
            call("x1", "write_file", json!({"path": "../escape.txt", "content": "out\n"})),
            call("x2", "edit_file", json!({"path": ".git/config", "old_string": "a", "new_string": "b"})),
        ]},
        text("# Done\n\nChanged the answer."),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}\n[tools.files]\nenabled = true\n")
    });
    let work = ws.path().join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::write(work.join("src/lib.rs"), "fn answer() -> u32 {\n    41\n}\n").unwrap();
    std::fs::write(work.join(".git/config"), "a\n").unwrap();
    std::fs::write(work.join("key.txt"), format!("key={CANARY}\n")).unwrap();

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");

    // The work tree.
    assert_eq!(
        std::fs::read_to_string(work.join("src/lib.rs")).unwrap(),
        "fn answer() -> u32 {\n    42\n}\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("notes/todo.md")).unwrap(),
        "- ship it\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).unwrap(),
        "a\n"
    );
    assert!(!ws.path().join("escape.txt").exists());

    // What the model was offered and got back.
    let bodies = llm.chat_bodies();
    assert_eq!(bodies.len(), 3);
    let names = tool_names(&bodies[0]);
    assert_eq!(names, ["bash", "read_file", "write_file", "edit_file"]);
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("`read_file`, `write_file` and `edit_file`"),
        "{system}"
    );
    assert_eq!(
        tool_results(&bodies[1]),
        vec![
            "     1\tfn answer() -> u32 {\n     2\t    41\n     3\t}\n[end of file: 3 lines]"
                .to_string(),
            "     1\tkey=[redacted]\n[end of file: 1 line]".to_string(),
        ]
    );
    let results = tool_results(&bodies[2]);
    assert_eq!(
        results[2],
        r#"edited "src/lib.rs": 1 replacement at line 2 (match: indentation ignored (new_string re-indented to the file's))"#
    );
    assert_eq!(results[3], r#"created "notes/todo.md": 10 bytes, 1 line"#);
    assert!(
        results[4].starts_with("error: \"../escape.txt\" leads outside the work root"),
        "{}",
        results[4]
    );
    assert!(results[5].contains("dotfile"), "{}", results[5]);

    // The REPORT's round log, and stderr, name every call.
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "completed");
    let log = front(&report, "round_log");
    assert_eq!(
        log[0]["tools"],
        json!([
            {"outcome": "file", "tool": "read_file", "path": "src/lib.rs", "summary": "3 lines"},
            {"outcome": "file", "tool": "read_file", "path": "key.txt", "summary": "1 line"},
        ])
    );
    assert_eq!(log[1]["tools"][0]["outcome"], "file");
    assert_eq!(log[1]["tools"][1]["summary"], "created, 10 bytes");
    assert_eq!(log[1]["tools"][2]["outcome"], "file_refused");
    assert_eq!(log[1]["tools"][3]["outcome"], "file_refused");
    assert!(
        run.stderr
            .contains("round 2: edit_file \"src/lib.rs\" -> 1 replacement at line 2"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("write_file \"../escape.txt\" -> refused:"),
        "{}",
        run.stderr
    );
    for f in ws.report_files() {
        assert!(!std::fs::read_to_string(f).unwrap().contains(CANARY));
    }
    assert!(!run.stderr.contains(CANARY) && !run.stdout.contains(CANARY));
}

#[test]
fn without_the_section_the_file_tools_are_not_offered() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [call("w1", "write_file", json!({"path": "x.txt", "content": "x"}))]},
        text("ok"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| c);
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies[0]["tools"].as_array().unwrap().len(), 1);
    let results = tool_results(&bodies[1]);
    assert!(
        results[0].starts_with("error: unknown tool \"write_file\"; the only tool is `bash`"),
        "{}",
        results[0]
    );
    assert!(!ws.path().join("work/x.txt").exists());
}

#[test]
fn agents_md_at_the_work_root_reaches_the_system_prompt_capped_and_masked() {
    let llm = Llm::start(&json!([text("ok")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}\n[prompt]\nagents_max_bytes = 60\n")
    });
    let agents = format!(
        "Run `make test` before you finish.\nkey {CANARY}\n{}",
        "x".repeat(100)
    );
    std::fs::write(ws.path().join("work/AGENTS.md"), &agents).unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let system = llm.chat_bodies()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        system.contains("from AGENTS.md at the root of the working directory (follow them where they bear on the task):\n\nRun `make test` before you finish.\nkey\n[AGENTS.md cut: 39 of"),
        "{system}"
    );
    assert!(
        system.ends_with(&format!(
            "[AGENTS.md cut: 39 of {} bytes shown]",
            agents.len()
        )),
        "{system}"
    );
    // The cap fell inside the key: not even its first half reaches the model.
    assert!(!system.contains("sk-canary"));
    assert!(run.stderr.contains("prompt: AGENTS.md ("), "{}", run.stderr);
}

#[test]
fn skills_are_listed_in_the_system_prompt_and_read_on_demand() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [call("c1", "read_file", json!({"path": "skills/release.md"}))]},
        text("ok"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{c}\n[tools.files]\nenabled = true\n[prompt]\nskills_dir = \"skills\"\n")
    });
    std::fs::create_dir_all(ws.path().join("work/skills")).unwrap();
    std::fs::write(
        ws.path().join("work/skills/release.md"),
        format!("---\ndescription: Cut a release ({CANARY})\n---\nTag, then push.\n"),
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with("\n- release (skills/release.md): Cut a release ([redacted])"),
        "{system}"
    );
    // The body is read on demand, through the file tools.
    let read = bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(read.contains("Tag, then push."), "{read}");
    assert!(!format!("{bodies:?}").contains(CANARY));
}

#[test]
fn the_plan_names_the_file_tools() {
    let ws = Workspace::new("http://127.0.0.1:9/v1", |c| {
        format!("{c}\n[tools.files]\nenabled = true\n")
    });
    let run = ws.run(&["once", "--dry-run", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(
            "  tools: bash (allow=8 deny=1 default=deny timeout=10s), read_file write_file edit_file (jailed in the work root)\n"
        ),
        "{}",
        run.stdout
    );
}
