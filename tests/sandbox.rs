//! End-to-end tests of the Landlock confinement: commands the gate allows still cannot write
//! outside the work root or open TCP connections (network = false), and the failure reaches
//! the model as tool output. Needs a kernel with Landlock (CI's has ABI 7).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::*;
use serde_json::json;

/// The standard config plus `touch`, `./scripts/**` and these `[tools.bash]` keys.
fn workspace(llm: &Llm, bash_keys: &str) -> Workspace {
    let keys = bash_keys.to_string();
    let ws = Workspace::new(&llm.base_url(), move |c| {
        c.replace(
            "allow = [\"ls *\",",
            "allow = [\"touch *\", \"./scripts/**\", \"ls *\",",
        )
        .replace("deny = [\"rm *\"]", &format!("deny = [\"rm *\"]\n{keys}"))
        .replace("max_rounds = 4", "max_rounds = 8")
    });
    let scripts = ws.path().join("work/scripts");
    std::fs::create_dir(&scripts).unwrap();
    // Scripts run code the gate cannot see: exactly what confinement is for.
    script(
        &scripts.join("write.sh"),
        "echo data > \"${1:-$TMPDIR/probe}\" && echo \"wrote ${1:-TMPDIR/probe}\"",
    );
    script(
        &scripts.join("connect.sh"),
        "exec 3<>\"/dev/tcp/127.0.0.1/$1\" && echo connected",
    );
    std::fs::create_dir(ws.path().join("outside")).unwrap();
    std::os::unix::fs::symlink(ws.path().join("outside"), ws.path().join("work/link")).unwrap();
    ws
}

/// The standard config with only these allow rules (`rules`: the inside of the list).
fn only(llm: &Llm, rules: &str) -> Workspace {
    let rules = rules.to_string();
    Workspace::new(&llm.base_url(), move |c| {
        c.replace(
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"printf *\", \"env\", \"wc *\"]",
            &format!("allow = [{rules}]"),
        )
    })
}

/// Where `id` is: a program no narrow allow list names.
fn id_path() -> &'static str {
    ["/usr/bin/id", "/bin/id"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap()
}

#[test]
fn confined_commands_cannot_write_outside_the_work_root() {
    if !landlock() {
        return;
    }
    let llm = Llm::start(&json!([
        tool_call("c1", "touch inside.txt"),
        tool_call("c2", "touch link/through-symlink.txt"),
        tool_call("c3", "./scripts/write.sh ../outside/direct.txt"),
        tool_call("c4", "./scripts/write.sh"),
        tool_call("c5", "env"),
        text("done"),
    ]));
    let ws = workspace(&llm, "");
    let outside = ws.path().join("outside");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");

    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results.len(), 5, "{results:#?}");
    assert_eq!(results[0], "(no output)\n[exit status: 0]");
    assert!(ws.path().join("work/inside.txt").exists());
    // The symlink leads out of the work root: the kernel refuses, the model reads why.
    assert!(
        results[1].contains("Permission denied") && results[1].ends_with("[exit status: 1]"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("Permission denied") && results[2].ends_with("[exit status: 1]"),
        "{}",
        results[2]
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // The private temp dir is writable and is the commands' TMPDIR; it is gone after the run.
    assert_eq!(results[3], "wrote TMPDIR/probe\n[exit status: 0]");
    let tmpdir = results[4]
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap_or_else(|| panic!("no TMPDIR in {}", results[4]))
        .to_string();
    assert!(tmpdir.contains("harness-tmp-"), "{tmpdir}");
    assert!(!Path::new(&tmpdir).exists(), "{tmpdir} was not removed");

    let report = ws.latest();
    let sandbox = front(&report, "sandbox");
    assert!(
        sandbox.as_str().unwrap().starts_with("landlock (ABI "),
        "{sandbox}"
    );
    assert!(
        run.stderr.contains("harness: sandbox: landlock (ABI "),
        "{}",
        run.stderr
    );
}

#[test]
fn network_off_denies_tcp_connect_and_network_on_allows_it() {
    if !landlock() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("./scripts/connect.sh {port}");

    let llm = Llm::start(&json!([tool_call("c1", &command), text("done")]));
    let ws = workspace(&llm, "network = false\nsandbox = \"landlock\"");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains("Permission denied") && results[0].ends_with("[exit status: 1]"),
        "{}",
        results[0]
    );
    assert!(listener.accept().is_err(), "a connection got through");

    let llm = Llm::start(&json!([tool_call("c1", &command), text("done")]));
    let ws = workspace(&llm, "network = true");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results[0], "connected\n[exit status: 0]");
}

#[test]
fn sandbox_off_runs_unconfined_and_says_so() {
    let llm = Llm::start(&json!([
        tool_call("c1", "./scripts/write.sh ../outside/direct.txt"),
        text("done"),
    ]));
    let ws = workspace(&llm, "sandbox = \"off\"");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(ws.path().join("outside/direct.txt").exists());
    assert_eq!(front(&ws.latest(), "sandbox"), "off");

    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout.contains(
            "\n  sandbox: off: commands run unconfined ([tools.bash] sandbox = \"off\")\n"
        ),
        "{}",
        dry.stdout
    );
}

#[test]
fn a_missing_write_root_fails_before_any_request() {
    let llm = Llm::start(&json!([text("never")]));
    let ws = workspace(&llm, "write_roots = [\"cache\"]");
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("[tools.bash].write_roots:") && run.stderr.contains("cache"),
        "{}",
        run.stderr
    );
    assert_eq!(llm.state()["connections"], 0);
}

#[test]
fn the_kernel_runs_only_allowed_programs() {
    if !landlock() {
        return;
    }
    // make runs its recipe with sh (a registry helper); `id` inside it is no allowed program,
    // so the kernel refuses its execve whatever the gate read. cat is dynamically linked:
    // its shared libraries need no exec right.
    let llm = Llm::start(&json!([
        tool_call("c1", "make"),
        tool_call("c2", "cat Makefile"),
        tool_call("c3", "echo hi | cat"),
        text("done"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace(
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"printf *\", \"env\", \"wc *\"]",
            "allow = [\"make *\", \"make\", \"cat *\", \"echo *\"]",
        )
    });
    std::fs::write(ws.path().join("work/Makefile"), "all:\n\tid\n").unwrap();
    let dry = ws.run(&["once", "--demo", "--dry-run"]);
    assert!(
        dry.stdout.contains("exec only bash, cat, echo, make, sh"),
        "{}",
        dry.stdout
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains("id: Permission denied") && results[0].contains("[exit status: 2]"),
        "{}",
        results[0]
    );
    assert!(results[1].starts_with("all:\n\tid\n"), "{}", results[1]);
    assert_eq!(results[2], "hi\n[exit status: 0]");
}

#[test]
fn the_places_path_rules_run_programs_from_are_read_only_for_commands() {
    if !landlock() {
        return;
    }
    // The gate cannot see what a script writes; the kernel keeps it out of the places the
    // exec set runs programs from, so a written script cannot then be run.
    let llm = Llm::start(&json!([
        tool_call("c1", "./scripts/write.sh scripts/planted.sh"),
        tool_call("c2", "./scripts/write.sh scripts/write.sh"),
        tool_call("c3", "./scripts/write.sh elsewhere.txt"),
        text("done"),
    ]));
    let ws = workspace(&llm, "");
    let check = ws.run(&["check"]).unwrapped();
    assert!(
        check
            .stdout
            .contains("scripts (a path rule's directory): inside a write root, read-only mounts"),
        "{}",
        check.stdout
    );
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    for r in &results[..2] {
        assert!(
            r.contains("Read-only file system") && r.ends_with("[exit status: 1]"),
            "{results:#?}"
        );
    }
    assert!(!ws.path().join("work/scripts/planted.sh").exists());
    let script = std::fs::read_to_string(ws.path().join("work/scripts/write.sh")).unwrap();
    assert!(script.starts_with("#!/bin/bash\n"), "{script}");
    assert_eq!(results[2], "wrote elsewhere.txt\n[exit status: 0]");
    assert!(ws.path().join("work/elsewhere.txt").exists());
}

#[test]
fn a_program_copied_into_memory_is_not_a_way_around_the_exec_set() {
    if !landlock() {
        return;
    }
    // By path: a PATH lookup may find a version manager's shim (a script under $HOME).
    if !Path::new("/usr/bin/python3").exists() {
        skip("the memfd test", "no /usr/bin/python3");
        return;
    }
    // A memfd lives on the kernel's internal tmpfs, which no Landlock rule covers: executing
    // a copy of /usr/bin/id from one would run a program outside the exec set.
    let llm = Llm::start(&json!([
        tool_call("c1", "/usr/bin/python3 mem.py"),
        tool_call("c2", "/usr/bin/python3 direct.py"),
        text("done"),
    ]));
    let ws = only(&llm, "\"/usr/bin/python3 *\"");
    let id = id_path();
    std::fs::write(
        ws.path().join("work/mem.py"),
        format!(
            "import os\ntry:\n    fd = os.memfd_create('x')\nexcept OSError as e:\n    print('memfd refused', e.strerror)\n    raise SystemExit(0)\nos.write(fd, open('{id}', 'rb').read())\nos.execv('/proc/self/fd/%d' % fd, ['id'])\n"
        ),
    )
    .unwrap();
    std::fs::write(
        ws.path().join("work/direct.py"),
        format!("import os\ntry:\n    os.execv('{id}', ['id'])\nexcept OSError as e:\n    print('exec refused', e.strerror)\n"),
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(
        results[0], "memfd refused Permission denied\n[exit status: 0]",
        "{results:#?}"
    );
    assert_eq!(
        results[1], "exec refused Permission denied\n[exit status: 0]",
        "{results:#?}"
    );
}

#[test]
fn the_dynamic_loader_runs_no_program_of_its_own() {
    if !landlock() {
        return;
    }
    let Some(loader) = loader_path() else {
        eprintln!("SKIPPED: no known dynamic loader path");
        return;
    };
    // The loader is in the exec set (every dynamic program needs it), and run as a program
    // it maps any readable file without an execve: the guard refuses that execve (as a `#!`
    // interpreter too: unit-tested), while cat (dynamic) still starts through it.
    let llm = Llm::start(&json!([
        tool_call("c1", "make direct"),
        tool_call("c2", "cat Makefile"),
        text("done"),
    ]));
    let ws = only(&llm, "\"make *\", \"cat *\"");
    let id = id_path();
    std::fs::write(
        ws.path().join("work/Makefile"),
        format!("direct:\n\t{loader} {id}\n"),
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(
        results[0].contains("Permission denied") && !results[0].contains("uid="),
        "{results:#?}"
    );
    assert!(results[0].ends_with("[exit status: 2]"), "{results:#?}");
    assert!(results[1].starts_with("direct:"), "{results:#?}");
    assert!(
        run.stderr
            .contains("refused running the dynamic loader as a program"),
        "{}",
        run.stderr
    );
}

#[test]
fn cargo_test_runs_under_the_exec_set_but_a_build_script_cannot_run_other_programs() {
    if !landlock() {
        return;
    }
    // Where this machine's cargo lives (rustup or a distribution package): read roots for
    // it, found at run time.
    let Ok(sysroot) = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
    else {
        eprintln!("SKIPPED: no rustc");
        return;
    };
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let cargo = std::process::Command::new("sh")
        .args(["-c", "command -v cargo"])
        .output()
        .unwrap();
    let cargo = std::path::PathBuf::from(String::from_utf8_lossy(&cargo.stdout).trim());
    let cargo_dir = cargo.parent().unwrap().to_path_buf();
    // rustup's home (settings, the toolchains) when the sysroot is one of its toolchains.
    let home = match sysroot.find("/toolchains/") {
        Some(i) => sysroot[..i].to_string(),
        None => sysroot.clone(),
    };
    let roots = format!("read_roots = [\"@system\", {:?}, {:?}]", home, cargo_dir);
    let llm = Llm::start(&json!([
        tool_call("c1", "cargo test --offline"),
        text("done"),
    ]));
    let ws = Workspace::new(&llm.base_url(), move |c| {
        c.replace(
            "allow = [\"ls *\", \"ls\", \"echo *\", \"cat *\", \"pwd\", \"printf *\", \"env\", \"wc *\"]",
            &format!("allow = [\"cargo test *\"]\n{roots}"),
        )
        .replace("[tools.bash]\ntimeout_secs = 10", "[tools.bash]\ntimeout_secs = 600")
    });
    let work = ws.path().join("work");
    std::fs::create_dir(work.join("src")).unwrap();
    std::fs::write(
        work.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    // A build script (built and run from target/) that tries to run a program no rule names.
    std::fs::write(
        work.join("build.rs"),
        "fn main() { let r = std::process::Command::new(\"id\").status(); println!(\"cargo:warning=id: {}\", if r.is_ok() { \"RAN\" } else { \"refused\" }); }\n",
    )
    .unwrap();
    std::fs::write(
        work.join("src/lib.rs"),
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    )
    .unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert!(results[0].contains("[exit status: 0]"), "{}", results[0]);
    assert!(results[0].contains("id: refused"), "{}", results[0]);
    assert!(!results[0].contains("RAN"), "{}", results[0]);
}

#[test]
fn plain_commands_run_as_judged_with_bash_results() {
    // `cat …` and `cat … | wc -l` run without bash (the judged argv); a name PATH does not
    // hold gets bash's message and 127; `echo $HOME` (an expansion) still goes to bash.
    let llm = Llm::start(&json!([
        tool_call("c1", "cat 'a b.txt' | wc -l"),
        tool_call("c2", "no-such-command-xyz --flag"),
        tool_call("c3", "echo $HOME"),
        text("done"),
    ]));
    let ws = Workspace::new(&llm.base_url(), |c| {
        c.replace("\"wc *\"]", "\"wc *\", \"no-such-command-xyz *\"]")
    });
    std::fs::write(ws.path().join("work/a b.txt"), "1\n2\n3\n").unwrap();
    let run = ws.run(&["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(llm.chat_bodies().last().unwrap());
    assert_eq!(results[0], "3\n[exit status: 0]");
    assert_eq!(
        results[1],
        "bash: line 1: no-such-command-xyz: command not found\n[exit status: 127]"
    );
    assert!(results[2].ends_with("[exit status: 0]"), "{}", results[2]);
}
