//! Test support for the suites against a REAL Redmine (tests/redmine.rs: intake, claims,
//! scope and write-back; tests/redmine_sessions.rs: `finish` outcomes and sessions): the
//! `REDMINE_*` variables `scripts/redmine-up.sh` exports, the seeded DB reset before each
//! test, reading issues as the admin, and a workspace that takes its tasks from the server.

use std::sync::Mutex;

use serde_json::{json, Value};

use super::{http, Run, Workspace, CANARY};

/// The tests of one binary share one server, so they run one at a time.
pub static SERVER: Mutex<()> = Mutex::new(());

pub fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

pub fn id(name: &str) -> u64 {
    var(&format!("REDMINE_ISSUE_{name}_ID")).parse().unwrap()
}

/// Restores the pristine seeded DB (same ids and keys).
pub fn reset() {
    redmine_up(&["--reset"]);
}

/// Turns the REST API of the running server off or on.
pub fn rest(state: &str) {
    redmine_up(&["--rest", state]);
}

fn redmine_up(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/redmine-up.sh");
    let out = std::process::Command::new(script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "redmine-up.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An issue with journals, read with the admin key.
pub fn issue(n: u64) -> Value {
    let (status, body) = http(
        "GET",
        &format!(
            "{}/issues/{n}.json?include=journals,attachments",
            var("REDMINE_URL")
        ),
        &[("X-Redmine-API-Key", &var("REDMINE_ADMIN_API_KEY"))],
        None,
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["issue"].clone()
}

pub fn notes(issue: &Value) -> Vec<String> {
    issue["journals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["notes"].as_str().unwrap_or("").to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

pub fn status_name(issue: &Value) -> String {
    issue["status"]["name"].as_str().unwrap().to_string()
}

/// A workspace whose config takes tasks from the real Redmine.
pub fn workspace(llm: &str, redmine: &str) -> Workspace {
    let redmine = redmine.to_string();
    Workspace::new(llm, move |c| config(c, &redmine))
}

/// The standard config `c` with the seed's classes and a `[redmine]` section for the real
/// server, followed by `redmine` (scope, claim and write-back keys).
pub fn config(c: String, redmine: &str) -> String {
    let c = c.replace(
        "[models.classes]\nprimary = \"mopac-primary\"\ncode = \"mopac-code\"",
        "[models.classes]\nprimary = \"mopac-primary\"\ncode = \"mopac-code\"\nstudy = \"mopac-primary\"\nread = \"mopac-primary\"\nreview = \"mopac-primary\"",
    );
    format!(
        "{c}\n[redmine]\nurl = \"{}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nclass_field = \"Class\"\ndefault_class = \"primary\"\ntimeout_secs = 20\n{redmine}\n",
        var("REDMINE_URL")
    )
}

pub fn run(ws: &Workspace, args: &[&str]) -> Run {
    ws.run_env(
        args,
        &[
            ("HARNESS_TEST_LLM_KEY", CANARY),
            ("HARNESS_TEST_REDMINE_KEY", &var("REDMINE_BOT_API_KEY")),
        ],
    )
}

pub const SCOPE_NEW: &str = "scope_query = \"project_id=mopac&status_id=1&sort=priority:desc,id\"";
pub const WRITEBACK: &str = "[redmine.claim]\nstatus = \"In Progress\"\n[redmine.writeback]\nstatus_done = \"Resolved\"\nstatus_failed = \"Feedback\"\n";

/// Skips the test (returning) unless `HARNESS_TEST_REDMINE` is set; otherwise holds the server
/// for this test and resets the seeded DB.
#[macro_export]
macro_rules! real_redmine {
    () => {{
        if !$crate::common::real_server("HARNESS_TEST_REDMINE", "real Redmine") {
            return;
        }
        let guard = $crate::common::redmine::SERVER
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        $crate::common::redmine::reset();
        guard
    }};
}

/// A PUT on an issue as the admin (the issue's author in the seed).
pub fn admin_put(n: u64, issue: Value) {
    let (status, body) = http(
        "PUT",
        &format!("{}/issues/{n}.json", var("REDMINE_URL")),
        &[
            ("X-Redmine-API-Key", &var("REDMINE_ADMIN_API_KEY")),
            ("Content-Type", "application/json"),
        ],
        Some(&json!({ "issue": issue }).to_string()),
    );
    assert_eq!(status, 204, "{body}");
}

/// Runs SQL on the live Redmine DB, `sqlite` or `postgresql` by the server's adapter
/// (`REDMINE_DB`; the two spell dates differently), as `scripts/redmine-up.sh` exported it.
pub fn db_sql(sqlite: &str, postgresql: &str) {
    let out = if std::env::var("REDMINE_DB").as_deref() == Ok("postgresql") {
        std::process::Command::new("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &var("REDMINE_DB_URL")])
            .args(["-c", postgresql])
            .output()
            .unwrap()
    } else {
        std::process::Command::new("sqlite3")
            .args(["-cmd", ".timeout 5000", &var("REDMINE_DB_FILE"), sqlite])
            .output()
            .unwrap()
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
