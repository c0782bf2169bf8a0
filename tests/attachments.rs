//! A task's attachments through the built binary, from the local inbox (`<stem>.files/`
//! beside the task file): listed in the task message with name, type and size; text placed
//! read-only under `.harness/attachments/`, secrets masked, readable by `read_file` and
//! by no tool writable; images sent as `image_url` parts to a vision tier only (and shown
//! again by `read_image`); oversized and binary files listed and refused with a reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use crate::protect::{user_namespaces, without_user_namespaces};
use common::*;
use serde_json::{json, Value};

/// A 1x1 PNG.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
/// The PNG as the `data:` URL a model is sent.
pub const PNG_URL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

/// The seed's vision tier, marked, with its class, and the file tools on; attachments of
/// at most 1000 bytes.
pub fn vision_config(c: String) -> String {
    let c = c.replace(
        "mopac-code = \"glm-5.2\"\n",
        "mopac-code = \"glm-5.2\"\nmopac-vision = \"glm-4.6v\"\n",
    );
    let c = c.replace(
        "code = \"mopac-code\"\n",
        "code = \"mopac-code\"\nvision = \"mopac-vision\"\n",
    );
    let c = c.replace("allow = [\"ls *\",", "allow = [\"touch *\", \"ls *\",");
    format!(
        "{c}\n[models.vision]\ntiers = [\"mopac-vision\"]\n\n[tools.files]\nenabled = true\n\n[intake]\nmax_attachment_bytes = 1000\n"
    )
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments, "id": id})
}

/// The text of a user message whose content may be parts.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The `image_url` URLs of a message's content parts.
pub fn image_urls(content: &Value) -> Vec<String> {
    content
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "image_url")
                .map(|p| p["image_url"]["url"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The inbox task `look` (class `class`) with a PNG, a log holding the canary, a binary file
/// and one over the bound in `look.files/`.
fn inbox_task(llm: &Llm, class: &str) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), |c| {
        format!("{}\n[inbox]\ndir = \"inbox\"\n", vision_config(c))
    });
    let files = ws.path().join("inbox/look.files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(
        ws.path().join("inbox/look.md"),
        format!("---\nclass: {class}\n---\nWhy does the app crash? See the attachments.\n"),
    )
    .unwrap();
    // Named .jpg: the type comes from the bytes, not the name.
    std::fs::write(files.join("screen.jpg"), PNG).unwrap();
    std::fs::write(
        files.join("app.log"),
        format!("boot\nauth token={CANARY}\npanic: index out of range\n"),
    )
    .unwrap();
    std::fs::write(files.join("core.bin"), b"\x7fELF\0\0\0\x01").unwrap();
    std::fs::write(files.join("huge.log"), "x".repeat(1001)).unwrap();
    ws
}

#[test]
fn an_inbox_task_s_files_reach_a_vision_tier_listed_placed_and_shown() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            call("r1", "read_file", json!({"path": ".harness/attachments/app.log"})),
            call("w1", "write_file", json!({"path": ".harness/attachments/app.log", "content": "gone\n"})),
            call("i1", "read_image", json!({"path": ".harness/attachments/screen.jpg"})),
            call("b1", "bash", json!({"command": "touch .harness/attachments/app.log .harness/attachments/new"})),
        ]},
        text("# The index is out of range"),
    ]));
    let ws = inbox_task(&llm, "vision");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    assert_eq!(bodies[0]["model"], "glm-4.6v");
    let opening = &bodies[0]["messages"][1]["content"];
    let listing = text_of(opening);
    for line in [
        "Why does the app crash? See the attachments.\n\n[harness] The task has 4 attachments:",
        "- app.log (text/plain, ",
        "text, placed read-only at .harness/attachments/app.log (secrets masked): read it with read_file",
        "- core.bin (application/octet-stream, 8 bytes): not placed: a binary file, neither text nor an image (png, jpeg, gif, webp)",
        "- huge.log (unknown type, 1001 bytes): refused: larger than [intake].max_attachment_bytes (1000 bytes)",
        "- screen.jpg (image/png, 70 bytes): image, shown to you with this message; also at .harness/attachments/screen.jpg",
    ] {
        assert!(listing.contains(line), "{line:?} not in {listing}");
    }
    assert_eq!(image_urls(opening), [PNG_URL]);
    let names = tool_names(&bodies[0]);
    assert!(names.iter().any(|n| n == "read_image"), "{names:?}");

    let results = tool_results(&bodies[1]);
    assert!(
        results[0].contains("auth token=[redacted]"),
        "{}",
        results[0]
    );
    assert!(
        results[0].contains("panic: index out of range"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("in the task's attachments (.harness/attachments), read-only"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("the image follows in the next message"),
        "{}",
        results[2]
    );
    // The gate refuses writes into a dot directory before the kernel would.
    assert!(
        results[3].contains("denied by the command gate"),
        "{}",
        results[3]
    );
    let messages = bodies[1]["messages"].as_array().unwrap();
    let after = messages.last().unwrap();
    assert_eq!(after["role"], "user");
    assert!(text_of(&after["content"]).starts_with("[harness] The images read_image returned"));
    assert_eq!(image_urls(&after["content"]), [PNG_URL]);

    let report = ws.latest();
    assert!(
        report.contains("\n## Attachments\n\n- app.log (text/plain, "),
        "{report}"
    );
    assert!(
        report.contains("- huge.log (unknown type, 1001 bytes): refused: larger than [intake].max_attachment_bytes (1000 bytes)\n"),
        "{report}"
    );
    // Nothing is left in the work root, and the canary nowhere but in the operator's file.
    assert!(!ws.path().join("work/.harness").exists());
    std::fs::remove_dir_all(ws.path().join("inbox/look.files")).unwrap();
    let all = ws.all_files_text();
    assert!(!all.contains(CANARY), "the canary leaked into a file");
    assert!(!run.stdout.contains(CANARY) && !run.stderr.contains(CANARY));
    assert!(!serde_json::to_string(&bodies).unwrap().contains(CANARY));
}

/// The inbox task with its attachments at `task-files`, and a model that touches `these`
/// there, then a file elsewhere.
fn touching(these: &str) -> (Llm, Workspace) {
    let llm = Llm::start(&json!([
        tool_call("b1", &format!("touch {these}")),
        tool_call("b2", "touch elsewhere"),
        text("# Tried"),
    ]));
    let ws = inbox_task(&llm, "code");
    let config = std::fs::read_to_string(ws.config()).unwrap();
    let config = config.replace("[intake]\n", "[intake]\nattachments_dir = \"task-files\"\n");
    std::fs::write(ws.config(), config).unwrap();
    (llm, ws)
}

#[test]
fn the_kernel_keeps_commands_from_changing_the_attachments() {
    if !landlock() {
        return;
    }
    let (llm, ws) = touching("task-files/app.log task-files/new");
    let plan = ws.run(&["once", "--dry-run"]);
    assert!(
        plan.stdout.contains(
            "text placed under task-files (the file tools only read there); images listed only (tier mopac-code is not in [models.vision] tiers); a read-only mount for commands\n"
        ),
        "{plan:?}"
    );
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let listing = text_of(&bodies[0]["messages"][1]["content"]);
    assert!(
        listing.contains("placed read-only at task-files/app.log"),
        "{listing}"
    );
    // The gate lets `touch` write a plain directory; the read-only mount refuses it.
    let touched = &tool_results(&bodies[1])[0];
    assert!(touched.contains("Read-only file system"), "{touched}");
    let elsewhere = &tool_results(&bodies[2])[1];
    assert!(elsewhere.contains("[exit status: 0]"), "{elsewhere}");
    assert!(ws.path().join("work/elsewhere").exists());
    assert!(!ws.path().join("work/task-files").exists());
}

#[test]
fn without_user_namespaces_commands_still_run_and_check_says_the_attachments_are_writable() {
    if !landlock() || !user_namespaces() {
        return;
    }
    let (llm, ws) = touching("task-files/app.log");
    let check = without_user_namespaces(&ws, &["check"]).unwrapped();
    assert!(
        check.stdout.contains(
            "ok    writes: no protected path (config, report dir, cassette) lies inside a write root; the task's attachments (task-files): NOT read-only for commands here (unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: "
        ),
        "{}",
        check.stdout
    );
    let plan = without_user_namespaces(&ws, &["once", "--dry-run"]);
    assert!(
        plan.stdout.contains(
            "tiers); NOT read-only for commands here (unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: "
        ),
        "{plan:?}"
    );
    let run = without_user_namespaces(&ws, &["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    // Every command runs (no mount to fail), the attachment's copy included; the run
    // removes its copies at the end all the same.
    let touched = &tool_results(&bodies[1])[0];
    assert!(touched.contains("[exit status: 0]"), "{touched}");
    let elsewhere = &tool_results(&bodies[2])[1];
    assert!(elsewhere.contains("[exit status: 0]"), "{elsewhere}");
    assert!(!ws.path().join("work/task-files").exists());
}

#[test]
fn a_tier_that_is_not_marked_vision_gets_the_listing_without_images() {
    let llm = Llm::start(&json!([text("# Looked")]));
    let ws = inbox_task(&llm, "code");
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let body = &llm.chat_bodies()[0];
    assert_eq!(body["model"], "glm-5.2");
    let opening = &body["messages"][1]["content"];
    assert!(opening.is_string(), "no image parts: {opening}");
    assert!(
        opening.as_str().unwrap().contains(
            "- screen.jpg (image/png, 70 bytes): image at .harness/attachments/screen.jpg, not shown: tier mopac-code is not a vision tier ([models.vision] tiers)"
        ),
        "{opening}"
    );
    let names = tool_names(body);
    assert!(!names.iter().any(|n| n == "read_image"), "{names:?}");
}

#[test]
fn a_session_keeps_a_note_where_an_image_was_never_the_image() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            call("i1", "read_image", json!({"path": ".harness/attachments/screen.jpg"})),
        ]},
        text("# Seen"),
    ]));
    let ws = inbox_task(&llm, "vision");
    let config = std::fs::read_to_string(ws.config()).unwrap();
    std::fs::write(
        ws.config(),
        config.replace("[session]\nenabled = false", "[session]\nenabled = true"),
    )
    .unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        image_urls(&llm.chat_bodies()[1]["messages"][1]["content"]),
        [PNG_URL]
    );
    let dir = ws.reports().join("sessions/test/inbox");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap()),
        &mut text,
    )
    .unwrap();
    assert!(!text.contains("base64,"), "{text}");
    let note =
        "[harness] an image (image/png, 70 bytes) was shown here; sessions do not keep images";
    assert_eq!(text.matches(note).count(), 2, "{text}");
}

#[test]
fn an_attachments_directory_harness_did_not_make_is_left_alone() {
    let llm = Llm::start(&json!([text("# never")]));
    let ws = inbox_task(&llm, "code");
    let mine = ws.path().join("work/.harness/attachments");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "the operator's\n").unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("[intake].attachments_dir: ")
            && run.stderr.contains("was not made by harness"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "the operator's\n"
    );
    assert!(llm.chat_bodies().is_empty());
}

#[test]
fn a_run_that_sent_images_records_and_replays() {
    let llm = Llm::start(&json!([
        {"type": "tool_call", "calls": [
            call("i1", "read_image", json!({"path": ".harness/attachments/screen.jpg"})),
        ]},
        text("# Seen it"),
    ]));
    let ws = inbox_task(&llm, "vision");
    let task = std::fs::read_to_string(ws.path().join("inbox/look.md")).unwrap();
    let run = ws.run(&["once", "--record", "cassette.json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let recorded = ws.latest();
    // The same task again, served from the cassette: no request reaches the server.
    std::fs::write(ws.path().join("inbox/look.md"), &task).unwrap();
    let replayed = ws.run(&["once", "--replay", "cassette.json"]);
    assert_eq!(replayed.code, 0, "{replayed:?}");
    assert_eq!(llm.chat_bodies().len(), 2);
    assert_eq!(body(&ws.latest()), body(&recorded));
    assert!(body(&recorded).contains("Seen it"), "{recorded}");
}

#[test]
fn a_dry_run_says_what_becomes_of_the_attachments_and_places_nothing() {
    let llm = Llm::start(&json!([]));
    let ws = inbox_task(&llm, "vision");
    let run = ws.run(&["once", "--dry-run"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("  attachments: up to 10 files, 1000 bytes each, 16777216 in all; text placed under .harness/attachments (the file tools only read there); images shown to tier mopac-vision (a vision tier)"),
        "{run:?}"
    );
    assert!(!ws.path().join("work/.harness").exists(), "{run:?}");
    assert!(ws.path().join("inbox/look.md").is_file(), "{run:?}");
    let ws = inbox_task(&llm, "code");
    let run = ws.run(&["once", "--dry-run"]);
    assert!(
        run.stdout
            .contains("images listed only (tier mopac-code is not in [models.vision] tiers)"),
        "{run:?}"
    );
    assert!(llm.chat_bodies().is_empty());
}

#[test]
fn a_symlinked_files_directory_is_never_followed() {
    let llm = Llm::start(&json!([text("# never")]));
    let ws = inbox_task(&llm, "code");
    let files = ws.path().join("inbox/look.files");
    let outside = ws.path().join("outside");
    std::fs::rename(&files, &outside).unwrap();
    std::fs::write(outside.join("id_rsa"), "PRIVATE KEY outside the inbox\n").unwrap();
    std::os::unix::fs::symlink(&outside, &files).unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("is a symlink"), "{}", run.stderr);
    assert!(llm.chat_bodies().is_empty());
    assert!(!ws.path().join("work/.harness").exists());
    std::fs::remove_dir_all(&outside).unwrap();
    std::fs::remove_file(&files).unwrap();
    assert!(!ws.all_files_text().contains("PRIVATE KEY outside"));
}

#[test]
fn an_image_whose_metadata_holds_the_canary_is_neither_placed_nor_shown() {
    let llm = Llm::start(&json!([text("# Looked")]));
    let ws = inbox_task(&llm, "vision");
    let mut tagged = PNG.to_vec();
    tagged.extend_from_slice(format!("tEXtComment\0{CANARY}").as_bytes());
    std::fs::write(ws.path().join("inbox/look.files/screen.jpg"), &tagged).unwrap();
    let run = ws.run(&["once"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let opening = &bodies[0]["messages"][1]["content"];
    assert!(image_urls(opening).is_empty(), "{opening}");
    assert!(
        text_of(opening)
            .contains("): not placed: an image whose bytes hold a secret harness masks"),
        "{opening}"
    );
    let body = serde_json::to_string(&bodies).unwrap();
    assert!(!body.contains("data:image/"), "the image went to the model");
    assert!(!ws.latest().contains(CANARY));
}
