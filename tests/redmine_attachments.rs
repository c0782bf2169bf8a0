//! Attachments of a REAL Redmine issue (see tests/redmine.rs for the server): a PNG, a log
//! holding a secret and a file over `[intake].max_attachment_bytes`, uploaded through the
//! REST API (`POST /uploads.json`, then the issue update naming the tokens). The image
//! reaches the vision tier's request as an `image_url` part, the log is read back by
//! `read_file` masked, the oversized file is listed and refused with a reason, and the
//! secret appears nowhere unmasked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::attachments::{image_urls, text_of, vision_config, PNG, PNG_URL};
use crate::common;

use common::redmine::*;
use common::*;
use serde_json::{json, Value};

/// Uploads `bytes` as the admin; the `uploads` entry of an issue update.
fn upload(bytes: &[u8], name: &str, content_type: &str) -> Value {
    let (status, body) = http_bytes(
        "POST",
        &format!("{}/uploads.json?filename={name}", var("REDMINE_URL")),
        &[
            ("X-Redmine-API-Key", &var("REDMINE_ADMIN_API_KEY")),
            ("Content-Type", "application/octet-stream"),
        ],
        bytes,
    );
    assert_eq!(status, 201, "{body}");
    let token = serde_json::from_str::<Value>(&body).unwrap()["upload"]["token"].clone();
    json!({"token": token, "filename": name, "content_type": content_type})
}

#[test]
fn without_the_server_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "redmine_attachments::an_issue_s_png_log_and_oversized_file_reach_the_vision_tier",
        "HARNESS_TEST_REDMINE",
    );
}

#[test]
fn an_issue_s_png_log_and_oversized_file_reach_the_vision_tier() {
    let _g = real_redmine!();
    let n = id("PRIMARY");
    let log = format!("boot ok\nauth token={CANARY}\npanic: index out of range at main.rs:7\n");
    admin_put(
        n,
        json!({"uploads": [
            upload(PNG, "screen.png", "image/png"),
            upload(log.as_bytes(), "app.log", "text/plain"),
            upload("y".repeat(1500).as_bytes(), "big.log", "text/plain"),
        ]}),
    );
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": ".harness/attachments/app.log"}},
        ]},
        text("# The index is out of range"),
    ]));
    let ws = workspace(&llm.base_url(), &format!("{SCOPE_NEW}\n{WRITEBACK}"));
    // The issue's class (primary) routes to the vision tier.
    let text = vision_config(std::fs::read_to_string(ws.config()).unwrap()).replace(
        "primary = \"mopac-primary\"\ncode",
        "primary = \"mopac-vision\"\ncode",
    );
    std::fs::write(ws.config(), text).unwrap();

    let r = run(&ws, &["once", "--task-id", &n.to_string()]);
    assert_eq!(r.code, 0, "{r:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies[0]["model"], "glm-4.6v");
    let opening = &bodies[0]["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(image_urls(opening), [PNG_URL]);
    let listing = text_of(opening);
    for line in [
        "[harness] The task has 3 attachments:",
        "- screen.png (image/png, 70 bytes): image, shown to you with this message; also at .harness/attachments/screen.png",
        &format!("- app.log (text/plain, {} bytes): text, placed read-only at .harness/attachments/app.log (secrets masked): read it with read_file", log.len()),
        "- big.log (text/plain, 1500 bytes): refused: larger than [intake].max_attachment_bytes (1000 bytes)",
    ] {
        assert!(listing.contains(line), "{line:?} not in {listing}");
    }
    let read = &tool_results(&bodies[1])[0];
    assert!(read.contains("auth token=[redacted]"), "{read}");
    assert!(
        read.contains("panic: index out of range at main.rs:7"),
        "{read}"
    );

    // The secret of the log: masked everywhere harness wrote or sent.
    let issue = issue(n);
    let note = notes(&issue)
        .into_iter()
        .find(|n| n.starts_with("[harness-report]"))
        .unwrap();
    assert!(
        note.contains("- big.log (text/plain, 1500 bytes): refused: larger than [intake].max_attachment_bytes (1000 bytes)"),
        "{note}"
    );
    assert!(!issue.to_string().replace(&log, "").contains(CANARY));
    assert!(!serde_json::to_string(&bodies).unwrap().contains(CANARY));
    assert!(!r.stdout.contains(CANARY) && !r.stderr.contains(CANARY));
    assert!(!ws.all_files_text().contains(CANARY));
    assert!(!ws.path().join("work/.harness/attachments").exists());
}
