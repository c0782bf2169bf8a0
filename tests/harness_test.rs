//! `harness test`: declarative cases run through the built binary, offline. A set of cases in
//! a temp dir (passing, failing, malformed, timed out), the operator's endpoints pointed at a
//! listener that counts every connection (none may come), and the shipped example
//! (examples/casetest) run as the README says.

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;

/// A port on 127.0.0.1 that accepts and counts connections: every peer of the operator's
/// config points here, and a case run must make none.
struct Tripwire {
    url: String,
    hits: Arc<AtomicUsize>,
}

impl Tripwire {
    fn start() -> Tripwire {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(conn);
            }
        });
        Tripwire { url, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A bash call reply in the case format.
fn bash_reply(id: &str, command: &str) -> String {
    let args = serde_json::json!({ "command": command }).to_string();
    reply(id, "bash", &args)
}

fn reply(id: &str, tool: &str, arguments: &str) -> String {
    format!(
        "[[replies]]\nmodel = \"glm-5.3\"\nresponse = {{ choices = [{{ finish_reason = \"tool_calls\", message = {{ content = \"\", tool_calls = [{{ id = \"{id}\", type = \"function\", function = {{ name = \"{tool}\", arguments = {} }} }}] }} }}] }}\n",
        toml::Value::String(arguments.to_string())
    )
}

fn finish_reply(id: &str, status: &str, summary: &str) -> String {
    let args = serde_json::json!({ "status": status, "summary": summary }).to_string();
    reply(id, "finish", &args)
}

const TASK: &str = "[task]\nsubject = \"Look around\"\ndescription = \"List the files.\"\nclass = \"primary\"\n[files]\n\"hello.txt\" = \"hi\\n\"\n";

/// A workspace whose config's endpoint and Redmine both point at `wire`, with the files
/// tools and `finish` on, and a `tests/` dir for cases.
fn workspace(wire: &Tripwire) -> Workspace {
    let url = wire.url.clone();
    let ws = Workspace::new(&format!("{url}/v1"), move |c| {
        format!(
            "{}\n[tools.files]\nenabled = true\n\n[redmine]\nurl = \"{url}\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n",
            c.replace("finish = \"message\"", "finish = \"tool\"")
        )
    });
    std::fs::create_dir(ws.path().join("tests")).unwrap();
    ws
}

fn case(ws: &Workspace, name: &str, text: &str) -> PathBuf {
    let path = ws.path().join("tests").join(format!("{name}.case.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `harness test ARGS --config <ws config>` with no key in the environment.
fn test(ws: &Workspace, args: &[&str]) -> Run {
    offline(
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .arg("test")
            .arg("--config")
            .arg(ws.config())
            .args(args)
            .current_dir(ws.path()),
    )
}

fn lists_files() -> String {
    format!(
        "{TASK}{}{}[[assert]]\nexit_code = 0\n[[assert]]\ntool_called = \"bash\"\ncommand = \"ls\"\n[[assert]]\nfinish_status = \"done\"\n[[assert]]\nstop_reason = \"completed\"\n[[assert]]\nreport_contains = \"one file\"\n",
        bash_reply("c1", "ls -1"),
        finish_reply("c2", "done", "I found one file: hello.txt.")
    )
}

#[test]
fn cases_pass_offline_and_a_failing_one_names_its_assertion() {
    let wire = Tripwire::start();
    let ws = workspace(&wire);
    case(&ws, "a-lists", &lists_files());
    case(
        &ws,
        "b-denied",
        &format!(
            "{TASK}{}{}{}[[assert]]\ncommand_denied = \"rm -f hello.txt\"\n[[assert]]\ntool_called = \"read_file\"\ncommand = \"hello.txt\"\n[[assert]]\nfinish_status = \"failed\"\n[[assert]]\nexit_code = 5\n",
            bash_reply("c1", "rm -f hello.txt"),
            reply("c2", "read_file", r#"{"path": "hello.txt"}"#),
            finish_reply("c3", "failed", "I may not delete it.")
        ),
    );
    // Fails twice: the command ran (it was not denied) and the run exited 0.
    case(
        &ws,
        "c-wrong",
        &format!(
            "name = \"expects a denial\"\n{TASK}{}{}[[assert]]\ncommand_denied = \"ls\"\n[[assert]]\nexit_code = 5\n",
            bash_reply("c1", "ls -1"),
            finish_reply("c2", "done", "Done.")
        ),
    );
    let run = test(&ws, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines,
        vec![
            "ok   a-lists",
            "ok   b-denied",
            "FAIL expects a denial: command_denied = \"ls\": expected a bash command containing \"ls\" denied by the gate, got bash \"ls -1\" (allowed), finish (allowed) (and 1 more)",
            "3 cases: 2 passed, 1 failed",
        ],
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("expects a denial: also failed: exit_code = 5: expected 5, got 0"),
        "{}",
        run.stderr
    );
    assert_eq!(
        wire.hits(),
        0,
        "a case run contacted the operator's endpoint or Redmine"
    );
    // The tripwire itself counts: a connection shows.
    drop(std::net::TcpStream::connect(wire.url.trim_start_matches("http://")).unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while wire.hits() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(wire.hits(), 1);
}

#[test]
fn named_files_and_directories_are_the_cases_run() {
    let wire = Tripwire::start();
    let ws = workspace(&wire);
    let one = case(&ws, "one", &lists_files());
    let other = ws.path().join("more");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("two.case.toml"), lists_files()).unwrap();
    std::fs::write(other.join("ignored.toml"), "not a case").unwrap();
    let run = test(&ws, &[one.to_str().unwrap(), other.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "ok   one\nok   two\n2 cases: 2 passed, 0 failed\n"
    );
    let empty = ws.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let run = test(&ws, &[empty.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("no *.case.toml file in"),
        "{}",
        run.stderr
    );
    assert_eq!(wire.hits(), 0);
}

#[test]
fn a_malformed_case_is_a_config_error_naming_the_file_and_the_key() {
    let wire = Tripwire::start();
    let ws = workspace(&wire);
    case(&ws, "good", &lists_files());
    let finished = finish_reply("c1", "done", "x");
    let [bad, overridden] = [
        ("bad", "[[assert]]\nexit_code = \"zero\"\n"),
        (
            "override",
            "[config.loop]\nmax_rounds = \"four\"\n[[assert]]\nexit_code = 0\n",
        ),
    ]
    .map(|(name, rest)| case(&ws, name, &format!("{TASK}{finished}{rest}")));
    let run = test(&ws, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "no case runs when one is malformed");
    assert!(
        run.stderr.contains(&format!("case {}:", bad.display()))
            && run
                .stderr
                .contains("assert[0].exit_code: must be a whole number 0-255"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&format!("case {}:", overridden.display()))
            && run.stderr.contains("[loop].max_rounds"),
        "{}",
        run.stderr
    );
}

#[test]
fn files_from_copies_a_tree_into_the_work_root_and_refuses_a_symlink() {
    let wire = Tripwire::start();
    let ws = workspace(&wire);
    let fixture = ws.path().join("tests/fixture");
    std::fs::create_dir_all(fixture.join("sub")).unwrap();
    std::fs::write(fixture.join("sub/a.txt"), "from the fixture\n").unwrap();
    // The check passes only when the copied file is in the work root, as copied.
    case(
        &ws,
        "copied",
        &format!(
            "files_from = \"fixture\"\n{TASK}[config.check]\ncommand = \"grep -q 'from the fixture' sub/a.txt\"\n{}[[assert]]\ncheck_passed = true\n[[assert]]\nexit_code = 0\n",
            finish_reply("c1", "done", "Done.")
        ),
    );
    let run = test(&ws, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "ok   copied\n1 case: 1 passed, 0 failed\n");
    std::os::unix::fs::symlink("/etc/passwd", fixture.join("sub/link")).unwrap();
    let run = test(&ws, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stdout,
        format!(
            "FAIL copied: cannot run: files_from: {} is a symbolic link; only files and directories are copied\n1 case: 0 passed, 1 failed\n",
            fixture.join("sub/link").display()
        )
    );
}

#[test]
fn a_case_past_its_timeout_is_stopped_and_fails() {
    let wire = Tripwire::start();
    let ws = workspace(&wire);
    case(
        &ws,
        "slow",
        &format!(
            "timeout_secs = 1\n{TASK}[config.tools.bash]\nallow = [\"sleep *\"]\ntimeout_secs = 30\n{}{}[[assert]]\nexit_code = 0\n",
            bash_reply("c1", "sleep 20"),
            finish_reply("c2", "done", "Slept.")
        ),
    );
    let started = std::time::Instant::now();
    let run = test(&ws, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stdout,
        "FAIL slow: timeout_secs = 1: expected the run to end in time, got still running (stopped)\n1 case: 0 passed, 1 failed\n"
    );
    assert!(started.elapsed().as_secs() < 15, "{:?}", started.elapsed());
}

/// The README's `harness test` recipe, run as written from the repository root.
#[test]
fn the_example_runs_as_the_readme_says() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let heading = "## Test a vertical before cron runs it";
    let start = readme
        .find(heading)
        .expect("the README's harness test recipe");
    let rest = &readme[start..];
    let open = rest.find("```sh\n").unwrap() + "```sh\n".len();
    let close = rest[open..].find("```").unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_harness")).parent().unwrap();
    let lines: Vec<&str> = rest[open..open + close]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let expected = [
        "ok   looks-around\nok   refuses-rm\nok   writes-notes\n3 cases: 3 passed, 0 failed\n",
        "ok   refuses-rm\n1 case: 1 passed, 0 failed\n",
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:?}");
    for (line, expected) in lines.into_iter().zip(expected) {
        let mut out = Command::new("bash");
        out.args(["-c", line]).current_dir(&root).env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
        let run = offline(&mut out);
        assert_eq!(run.code, 0, "{line}: {run:?}");
        assert_eq!(run.stdout, expected, "{line}");
    }
}

/// The case-format block of docs/test.md, pasted into a case file as it stands, passes under
/// the example config: an operator's first case is that block edited.
#[test]
fn the_case_format_of_the_docs_runs_as_written() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/test.md")).unwrap();
    let start = doc
        .find("## The case format")
        .expect("docs/test.md's case format");
    let rest = &doc[start..];
    let open = rest.find("```toml\n").unwrap() + "```toml\n".len();
    let close = rest[open..].find("```").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("examples/casetest/harness.toml"),
        dir.path().join("harness.toml"),
    )
    .unwrap();
    // The block's files_from names this directory beside the case.
    let notes = dir.path().join("tests/fixtures/notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("old.txt"), "old notes\n").unwrap();
    std::fs::write(
        dir.path().join("tests/doc.case.toml"),
        &rest[open..open + close],
    )
    .unwrap();
    let run = offline(
        Command::new(env!("CARGO_BIN_EXE_harness"))
            .arg("test")
            .arg("--config")
            .arg(dir.path().join("harness.toml"))
            .current_dir(dir.path()),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "ok   refuses rm\n1 case: 1 passed, 0 failed\n");
}

/// `cmd` run as an operator's shell would run a recipe, minus anything of this environment
/// that could point it elsewhere (a config, a key, a log level), stdin closed.
fn offline(cmd: &mut Command) -> Run {
    let out = cmd
        .env_remove("HARNESS_CONFIG")
        .env_remove("HARNESS_TEST_LLM_KEY")
        .env_remove("HARNESS_LITELLM_KEY")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run::from(out)
}
