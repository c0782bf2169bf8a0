//! End-to-end tests of "secrets out of reach", through the built binary and the scripted
//! model: under the narrowest-looking read-only policy, a model that tries to read the LLM key
//! file (plain and encoded), a key under `$HOME`, the config, an earlier REPORT, or to send a
//! UDP datagram or open a TCP connection gets a tool error each time, and no form of any
//! canary reaches the model, the REPORT or stderr. Needs a kernel with Landlock (CI's has
//! ABI 7).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::json;

const KEY_CANARY: &str = "sk-canary-keyfile-5e1b9d03c7a24f86";
const SSH_CANARY: &str = "ssh-canary-home-8c2f6a1d4e9b7035";
const CONFIG_CANARY: &str = "cfg-canary-config-3b7e0f9a2c5d8146";
const REPORT_CANARY: &str = "rpt-canary-report-9d4a2e7b1f6c0358";
const DATAGRAM: &str = "udp-canary-datagram-6f0c3a8e2b9d5174";

/// The workspace of the attack: the LLM key in a `file:` ref beside the config, a key under
/// a fake `$HOME`, a canary in the config and in an earlier REPORT, and two scripts in the
/// work tree that the `./scripts/**` rule allows (what they do, the gate cannot see).
fn workspace(llm: &Llm, bash_keys: &str) -> Workspace {
    let keys = bash_keys.to_string();
    let ws = Workspace::new(&llm.base_url(), move |c| {
        let c = c
            .replace("env:HARNESS_TEST_LLM_KEY", "file:keys/llm.key")
            .replace("max_rounds = 4", "max_rounds = 12");
        let start = c.find("allow = [").unwrap();
        let end = start + c[start..].find('\n').unwrap();
        format!(
            "# {CONFIG_CANARY}\n{}allow = [\"cat *\", \"rev *\", \"base64 *\", \"od *\", \"ls *\", \"./scripts/**\"]\n{keys}{}",
            &c[..start],
            &c[end..]
        )
    });
    let p = ws.path();
    std::fs::create_dir_all(p.join("keys")).unwrap();
    std::fs::write(p.join("keys/llm.key"), format!("{KEY_CANARY}\n")).unwrap();
    std::fs::create_dir_all(p.join("home/.ssh")).unwrap();
    std::fs::write(p.join("home/.ssh/id_ed25519"), format!("{SSH_CANARY}\n")).unwrap();
    std::fs::create_dir_all(p.join("reports")).unwrap();
    std::fs::write(
        p.join("reports/REPORT-test-earlier.md"),
        format!("an earlier run: {REPORT_CANARY}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(p.join("work/scripts")).unwrap();
    script(
        &p.join("work/scripts/udp.sh"),
        &format!("echo {DATAGRAM} > \"/dev/udp/127.0.0.1/$1\" && echo sent"),
    );
    script(
        &p.join("work/scripts/tcp.sh"),
        "exec 3<>\"/dev/tcp/127.0.0.1/$1\" && echo connected",
    );
    ws
}

/// One attack per round, then a closing text.
fn attacks(ws: &Path, udp_port: u16, tcp_port: u16) -> Vec<serde_json::Value> {
    let key = ws.join("keys/llm.key");
    let key = key.display();
    let commands = [
        format!("cat {key}"),
        format!("rev {key}"),
        format!("base64 {key}"),
        format!("od -c {key}"),
        format!("cat {}", ws.join("home/.ssh/id_ed25519").display()),
        "cat ../harness.toml".to_string(),
        "cat ../reports/REPORT-test-earlier.md".to_string(),
        format!("./scripts/udp.sh {udp_port}"),
        format!("./scripts/tcp.sh {tcp_port}"),
    ];
    let mut steps: Vec<serde_json::Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| tool_call(&format!("c{i}"), c))
        .collect();
    steps.push(text("done"));
    steps
}

/// Every form of `canary` an attacker would try, computed by the real programs.
fn forms(canary: &str) -> Vec<String> {
    let run = |cmd: &str| {
        let out = std::process::Command::new("bash")
            .args(["-c", cmd])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let mut forms = vec![
        canary.to_string(),
        canary.chars().rev().collect(),
        run(&format!("printf '%s\\n' {canary} | base64 -w0")),
        run(&format!("printf '%s' {canary} | base64 -w0")),
        run(&format!("printf '%s' {canary} | xxd -p"))
            .trim()
            .to_string(),
    ];
    // `od -c`: the characters three spaces apart; any 8 of them in a row give it away.
    let spaced: Vec<String> = canary.chars().map(|c| c.to_string()).collect();
    forms.push(spaced[..8].join("   "));
    // Any long enough piece of the plain key, too.
    forms.push(canary[..16].to_string());
    forms.push(canary[canary.len() - 16..].to_string());
    forms
}

fn assert_clean(what: &str, text: &str) {
    for canary in [KEY_CANARY, SSH_CANARY, CONFIG_CANARY, REPORT_CANARY] {
        for form in forms(canary) {
            assert!(
                !text.contains(&form),
                "{what} holds a form of {canary} ({form:?})"
            );
        }
    }
}

#[test]
fn no_attack_of_a_narrow_read_only_policy_reaches_a_secret_or_the_network() {
    if !landlock() {
        return;
    }
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    // Outside /tmp: a confined command's `/tmp/…` words name its private temp dir, and the
    // attacks must meet the kernel, not a path that does not exist there.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let steps = attacks(
        dir.path(),
        udp.local_addr().unwrap().port(),
        tcp.local_addr().unwrap().port(),
    );
    // The script needs the workspace path; the workspace needs the server: the steps name
    // paths under a directory made first, and the workspace is built there.
    let llm = Llm::start(&json!(steps));
    let ws = workspace_in(dir, &llm, "");
    let home = ws.path().join("home");
    let run = ws.run_env(&["once", "--demo"], &[("HOME", home.to_str().unwrap())]);
    assert_eq!(run.code, 0, "{run:?}");

    let bodies = llm.chat_bodies();
    let results = tool_results(bodies.last().unwrap());
    assert_eq!(results.len(), 9, "{results:#?}");
    for (i, r) in results.iter().enumerate() {
        let failed = !r.ends_with("[exit status: 0]");
        assert!(failed, "attack {i} did not fail: {r}");
        assert!(!r.contains("[redacted]"), "attack {i} read something: {r}");
    }
    for r in &results[..7] {
        assert!(r.contains("Permission denied"), "{r}");
    }
    assert!(!results[7].contains("sent"), "{}", results[7]);
    assert!(!results[8].contains("connected"), "{}", results[8]);

    // Nothing reached the model, the REPORT, stdout or stderr.
    // The bodies: the key itself rightly travels in the Authorization header.
    assert_clean("the requests", &serde_json::to_string(&bodies).unwrap());
    for f in ws.report_files() {
        if !f.ends_with("REPORT-test-earlier.md") {
            assert_clean("a REPORT", &std::fs::read_to_string(&f).unwrap());
        }
    }
    assert_clean("stderr", &run.stderr);
    assert_clean("stdout", &run.stdout);

    // The listeners heard nothing.
    let mut buf = [0u8; 256];
    assert!(udp.recv_from(&mut buf).is_err(), "a datagram arrived");
    assert!(tcp.accept().is_err(), "a connection arrived");
}

#[test]
fn with_network_the_datagram_goes_through() {
    if !landlock() {
        return;
    }
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = udp.local_addr().unwrap().port();
    let llm = Llm::start(&json!([
        tool_call("c1", &format!("./scripts/udp.sh {port}")),
        text("done")
    ]));
    let ws = workspace(&llm, "network = true\n");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(results[0].starts_with("sent\n"), "{results:?}");
    let mut buf = [0u8; 256];
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    assert_eq!(
        std::str::from_utf8(&buf[..n]).unwrap(),
        format!("{DATAGRAM}\n")
    );
}

#[test]
fn a_key_file_inside_a_read_root_fails_check_and_once() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(&llm, "read_roots = [\"@system\", \"keys\"]\n");
    let check = ws.run(&["check"]).unwrapped();
    assert_ne!(check.code, 0, "{check:?}");
    assert!(
        check.stdout.contains(
            "FAIL  reads: [tools.bash].read_roots[1]: commands could read the key file of [litellm].key_ref"
        ),
        "{}",
        check.stdout
    );
    let before = llm.state()["connections"].clone();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("[tools.bash].read_roots[1]: commands could read the key file"),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], before, "once reached the model");

    // A key file inside the work tree is refused too; the config and the report dir there
    // are hidden instead, and check says so.
    let inside = Workspace::new(&llm.base_url(), |c| {
        c.replace("env:HARNESS_TEST_LLM_KEY", "file:work/llm.key")
    });
    std::fs::write(inside.path().join("work/llm.key"), KEY_CANARY).unwrap();
    let check = inside.run(&["check"]).unwrapped();
    assert!(
        check.stdout.contains(
            "FAIL  reads: work_root: commands could read the key file of [litellm].key_ref"
        ),
        "{}",
        check.stdout
    );
    assert_clean("check's stdout", &check.stdout);
}

#[test]
fn check_shows_the_read_set_and_hides_the_config_inside_the_work_root() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([text("never")]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("work_root = \"work\"", "work_root = \".\"")
    });
    let check = ws.run(&["check"]).unwrapped();
    assert_eq!(check.code, 0, "{check:?}");
    let root = ws.path().canonicalize().unwrap();
    assert!(
        check.stdout.contains(&format!(
            "ok    reads: work_root: {} except harness.toml (the config file), reports (the report dir); ",
            root.display()
        )),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("; [tools.bash].read_roots[0] (@system): /usr/bin "),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("warn  reads: work_root holds harness.toml"),
        "{}",
        check.stdout
    );
}

/// [`workspace`] in a directory made beforehand.
fn workspace_in(dir: tempfile::TempDir, llm: &Llm, bash_keys: &str) -> Workspace {
    let made = workspace(llm, bash_keys);
    for entry in std::fs::read_dir(made.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::rename(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    Workspace { dir }
}

#[test]
fn unconfined_the_masker_still_hides_the_encoded_key() {
    // The second line alone: with the sandbox off the key file is readable, and what the
    // commands print must still reach the model masked, in every encoding tried.
    let dir = tempfile::tempdir().unwrap();
    let mut steps = attacks(dir.path(), 9, 9);
    steps.truncate(4);
    steps.push(text("done"));
    let llm = Llm::start(&json!(steps));
    let ws = workspace_in(dir, &llm, "sandbox = \"off\"\n");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = llm.chat_bodies();
    let results = tool_results(bodies.last().unwrap());
    assert_eq!(results.len(), 4, "{results:#?}");
    for r in &results {
        assert!(
            r.contains("[redacted]") && r.ends_with("[exit status: 0]"),
            "{r}"
        );
    }
    assert_clean("the requests", &serde_json::to_string(&bodies).unwrap());
    assert_clean("stderr", &run.stderr);
    for f in ws.report_files() {
        if !f.ends_with("REPORT-test-earlier.md") {
            assert_clean("a REPORT", &std::fs::read_to_string(&f).unwrap());
        }
    }
}

#[test]
fn the_harness_process_is_not_dumpable() {
    // The kernel gives a non-dumpable process's /proc files to root. That shows only when
    // harness runs as another user, which only root can arrange.
    // SAFETY: geteuid only returns a number.
    if unsafe { libc::geteuid() } != 0 {
        skip(
            "the non-dumpable test",
            "needs root to run harness as another user",
        );
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    let llm = Llm::start(&json!([tool_call("c1", "./scripts/slow.sh"), text("done")]));
    // The script runs touch and sleep, which the allow list does not name: exec_roots lets
    // the kernel run them.
    let ws = workspace(&llm, "exec_roots = [\"/usr/bin\", \"/bin\"]\n");
    script(
        &ws.path().join("work/scripts/slow.sh"),
        "touch started && sleep 3",
    );
    for d in [
        ws.path(),
        &ws.path().join("work"),
        &ws.path().join("work/scripts"),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(
        ws.path().join("reports"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    std::fs::set_permissions(
        ws.path().join("keys"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["once", "--demo", "--config"])
        .arg(ws.config())
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = ws.path().join("work/started");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !started.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !started.exists() {
        let mut child = child;
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "the command never ran: {}\n{:?}",
            String::from_utf8_lossy(&out.stderr),
            llm.chat_bodies().last().map(tool_results)
        );
    }
    let owner = std::fs::metadata(format!("/proc/{}/environ", child.id()))
        .unwrap()
        .uid();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        owner, 0,
        "/proc/PID/environ of harness belongs to its user: it is dumpable"
    );
}

#[test]
fn check_warns_when_home_is_readable() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(&llm, "read_roots = [\"@system\", \"home\"]\n");
    let home = ws.path().join("home");
    let check = ws
        .run_env(
            &["check"],
            &[
                ("HARNESS_TEST_LLM_KEY", CANARY),
                ("HOME", home.to_str().unwrap()),
            ],
        )
        .unwrapped();
    assert!(
        check.stdout.contains(&format!(
            "warn  reads: commands can read all of {} ($HOME",
            home.canonicalize().unwrap().display()
        )),
        "{}",
        check.stdout
    );
}
