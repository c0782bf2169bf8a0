//! End-to-end tests of `[tools.bash] unix_sockets` under `network = false`: an allowed
//! program connects to the named socket and its data arrives; the unnamed socket next to it
//! (by absolute path, relative path or symlink), an unnamed abstract socket and a datagram
//! socket are refused as tool errors, and nothing reaches them, even when another thread
//! rewrites the address during the check. On this kernel (Landlock ABI below 9) the seccomp
//! supervisor holds commands to the names. Without names no Unix socket can be made; with
//! `network = true` any can. Needs Landlock and python3.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;

use common::*;
use serde_json::json;

/// Connects to a Unix socket (`@name`: abstract) and sends the second argument; with
/// `--dgram`, only tries to make a datagram socket.
const CONNECT_PY: &str = r#"#!/usr/bin/env python3
import socket, sys
if sys.argv[1] == "--dgram":
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    except OSError as e:
        print(f"refused: {e}")
        sys.exit(1)
    print("made a datagram socket")
    sys.exit(0)
threaded = sys.argv[1] == "--thread"
args = sys.argv[2:] if threaded else sys.argv[1:]
addr = args[0]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr)
    except OSError as e:
        print(f"refused: {e}")
        sys.exit(1)
    s.sendall(args[1].encode())
    s.close()
    print("sent")
if threaded:
    # A connect from a thread that is not the process's first: the supervisor must find
    # the process it belongs to.
    import threading
    t = threading.Thread(target=main)
    t.start()
    t.join()
else:
    main()
"#;

/// Races the checked address: a second thread rewrites the `sockaddr_un` the first one passes
/// to `connect` between the named and the unnamed socket, while the call waits for the
/// harness (ctypes releases the GIL for the call). A supervisor that let the call go on after
/// its check would connect some of them to the unnamed socket.
const RACE_PY: &str = r#"#!/usr/bin/env python3
import ctypes, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
named, other = sys.argv[1].encode(), sys.argv[2].encode()
buf = ctypes.create_string_buffer(110)
def put(path):
    data = struct.pack("H", socket.AF_UNIX) + path + b"\0"
    ctypes.memmove(buf, data, len(data))
put(named)
done = False
def flip():
    while not done:
        put(other)
        put(named)
t = threading.Thread(target=flip)
t.start()
ok = refused = 0
for _ in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if libc.connect(s.fileno(), buf, 110) == 0:
        s.sendall(b"race")
        ok += 1
    else:
        refused += 1
    s.close()
done = True
t.join()
print(f"connected {ok}, refused {refused}")
"#;

fn python3() -> bool {
    let found = std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        skip("unix_sockets tests", "no python3");
    }
    found
}

fn listener(path: &Path) -> UnixListener {
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

fn abstract_listener(name: &str) -> UnixListener {
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// Everything the listener's pending connections sent.
fn received(l: &UnixListener) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok((mut stream, _)) = l.accept() {
        stream.set_nonblocking(false).unwrap();
        let mut got = String::new();
        stream.read_to_string(&mut got).unwrap();
        out.push(got);
    }
    out
}

/// The standard config with `./scripts/**` allowed, Landlock required and these
/// `[tools.bash]` keys; `work/socks` links to `socks`, `work/other-link.sock` to its
/// `other.sock`, and the scripts are in `work/scripts`.
fn workspace(llm: &Llm, socks: &Path, bash_keys: &str) -> Workspace {
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("allow = [\"ls *\",", "allow = [\"./scripts/**\", \"ls *\",")
            .replace("max_rounds = 4", "max_rounds = 14")
            .replace(
                "deny = [\"rm *\"]",
                &format!("deny = [\"rm *\"]\nsandbox = \"landlock\"\n{bash_keys}"),
            )
    });
    let work = ws.path().join("work");
    std::os::unix::fs::symlink(socks, work.join("socks")).unwrap();
    std::os::unix::fs::symlink(socks.join("other.sock"), work.join("other-link.sock")).unwrap();
    std::fs::create_dir(work.join("scripts")).unwrap();
    for (name, text) in [("connect.py", CONNECT_PY), ("race.py", RACE_PY)] {
        let py = work.join("scripts").join(name);
        std::fs::write(&py, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    ws
}

#[test]
fn only_named_unix_sockets_can_be_reached() {
    if !landlock() || !python3() {
        return;
    }
    let tag = std::process::id();
    let named_abstract = format!("harness-test-named-{tag}");
    let other_abstract = format!("harness-test-other-{tag}");
    // The sockets live outside the work root; `work/socks` links to their directory. Not in
    // /tmp: a confined command's `/tmp/…` words name its private temp dir (but for the names
    // the operator listed), and the unnamed socket must meet the supervisor, not a path that
    // does not exist there.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let socks = dir.path().join("socks");
    std::fs::create_dir(&socks).unwrap();
    let named = listener(&socks.join("named.sock"));
    let other = listener(&socks.join("other.sock"));
    let named_abs = abstract_listener(&named_abstract);
    let other_abs = abstract_listener(&other_abstract);
    let abs = |name: &str| socks.join(name).display().to_string();
    let llm = Llm::start(&json!([
        tool_call("c1", "./scripts/connect.py socks/named.sock via-relative"),
        tool_call(
            "c2",
            &format!("./scripts/connect.py {} via-absolute", abs("named.sock"))
        ),
        tool_call(
            "c3",
            &format!("./scripts/connect.py {} leak-absolute", abs("other.sock"))
        ),
        tool_call("c4", "./scripts/connect.py socks/other.sock leak-relative"),
        tool_call("c5", "./scripts/connect.py other-link.sock leak-symlink"),
        tool_call(
            "c6",
            &format!("./scripts/connect.py @{other_abstract} leak-abstract")
        ),
        tool_call(
            "c7",
            &format!("./scripts/connect.py @{named_abstract} via-abstract")
        ),
        tool_call("c8", "./scripts/connect.py --dgram"),
        tool_call(
            "c9",
            &format!(
                "./scripts/connect.py --thread {} via-thread",
                abs("named.sock")
            )
        ),
        tool_call(
            "c10",
            &format!(
                "./scripts/race.py {} {}",
                abs("named.sock"),
                abs("other.sock")
            )
        ),
        text("done"),
    ]));
    let ws = workspace(
        &llm,
        &socks,
        &format!(
            "network = false\nunix_sockets = [{:?}, \"@{named_abstract}\"]",
            abs("named.sock")
        ),
    );

    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout
            .contains("unix sockets: named only, by a seccomp supervisor ("),
        "{}",
        dry.stdout
    );
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check
            .stdout
            .contains("unix sockets: named only, by a seccomp supervisor"),
        "{}",
        check.stdout
    );

    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), 10, "{results:#?}");
    assert_eq!(results[0], "sent\n[exit status: 0]");
    assert_eq!(results[1], "sent\n[exit status: 0]");
    for (i, r) in results.iter().enumerate().skip(2).take(4) {
        assert!(
            r.contains("refused: [Errno 13] Permission denied") && r.ends_with("[exit status: 1]"),
            "round {}: {r}",
            i + 1
        );
    }
    assert_eq!(results[6], "sent\n[exit status: 0]");
    assert!(
        results[7].contains("refused: [Errno 13] Permission denied"),
        "{}",
        results[7]
    );
    assert_eq!(results[8], "sent\n[exit status: 0]");
    // Every racing connect that succeeded reached the named socket.
    let connected: usize = results[9]
        .strip_prefix("connected ")
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", results[9]));
    let mut got = received(&named);
    got.sort();
    let races = got.iter().filter(|g| *g == "race").count();
    got.retain(|g| g != "race");
    assert_eq!(got, ["via-absolute", "via-relative", "via-thread"]);
    assert_eq!(races, connected, "{}", results[9]);
    assert_eq!(received(&other), Vec::<String>::new());
    assert_eq!(received(&named_abs), vec!["via-abstract".to_string()]);
    assert_eq!(received(&other_abs), Vec::<String>::new());
    assert!(
        run.stderr.contains("refused a command's connect"),
        "{}",
        run.stderr
    );
}

#[test]
fn without_names_no_unix_socket_and_with_network_any() {
    if !landlock() || !python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socks = dir.path().join("socks");
    std::fs::create_dir(&socks).unwrap();
    let other = listener(&socks.join("other.sock"));
    let command = "./scripts/connect.py socks/other.sock plain";

    let llm = Llm::start(&json!([tool_call("c1", command), text("done")]));
    let ws = workspace(
        &llm,
        &socks,
        "network = false\nunix_sockets = [\"harness.toml\", \"missing.sock\"]",
    );
    let check = ws.run(&["check"]).unwrapped();
    for warning in [
        "harness.toml, which is not a socket",
        "missing.sock, which does not exist (yet)",
    ] {
        assert!(
            check.stdout.contains(warning),
            "{warning}\n{}",
            check.stdout
        );
    }
    let ws = workspace(&llm, &socks, "network = false");
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check.stdout.contains("ok    sockets: unix sockets: none\n"),
        "{}",
        check.stdout
    );
    let results = once_tool_results(&ws, &llm);
    assert!(
        results[0].contains("Permission denied") && results[0].ends_with("[exit status: 1]"),
        "{}",
        results[0]
    );
    assert_eq!(received(&other), Vec::<String>::new());

    // network = true keeps Unix sockets unconfined: the test proves the switch.
    let llm = Llm::start(&json!([tool_call("c1", command), text("done")]));
    let ws = workspace(&llm, &socks, "network = true");
    let results = once_tool_results(&ws, &llm);
    assert_eq!(results[0], "sent\n[exit status: 0]");
    assert_eq!(received(&other), ["plain"]);
}

#[test]
fn the_supervisor_also_keeps_the_loader_from_running_programs() {
    // With named sockets the seccomp supervisor holds each command's one listener, so it
    // judges the command's execve calls too: the loader run as a program is refused there.
    if !landlock() || !python3() {
        return;
    }
    let Some(loader) = loader_path() else {
        skip("the loader test", "no known dynamic loader path");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let socks = dir.path().join("socks");
    std::fs::create_dir(&socks).unwrap();
    let named = listener(&socks.join("named.sock"));
    let llm = Llm::start(&json!([
        tool_call("c1", "./scripts/connect.py socks/named.sock first"),
        tool_call("c2", "./scripts/loader.sh"),
        text("done"),
    ]));
    let ws = workspace(
        &llm,
        &socks,
        &format!(
            "network = false\nunix_sockets = [{:?}]",
            socks.join("named.sock").display().to_string()
        ),
    );
    let script = ws.path().join("work/scripts/loader.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n{loader} /bin/true && echo RAN\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let results = once_tool_results(&ws, &llm);
    assert_eq!(results[0], "sent\n[exit status: 0]");
    assert_eq!(received(&named), ["first"]);
    assert!(
        results[1].contains("Permission denied") && !results[1].contains("RAN"),
        "{}",
        results[1]
    );
}
