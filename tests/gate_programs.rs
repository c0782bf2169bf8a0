//! Real programs against the gate: for each family closed in round five (interpreters under
//! other names, pytest's plugin spellings, exec wrappers), the attack is run against the real
//! program without the gate, and must work (else the case is skipped: the program is missing
//! or cannot run here), then `harness gate` must deny the same command.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A config with the required keys plus a `[tools.bash]` policy.
fn config(dir: &Path, bash: &str) -> PathBuf {
    let path = dir.join("harness.toml");
    let text = format!(
        "vertical = \"gate-programs\"\n[litellm]\nbase_url = \"http://127.0.0.1:9/v1\"\nkey_ref = \"env:HARNESS_GATE_TEST_UNUSED\"\n[models]\nt = \"m\"\n[tools.bash]\n{bash}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `harness gate`'s exit code for `command` (0 allowed, 3 denied).
fn gate(config: &Path, command: &str) -> i32 {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["gate", "--config"])
        .arg(config)
        .arg("--")
        .arg(command)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

/// The program's path on PATH, if installed.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A fresh directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "harness-gate-programs-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `sh -c script` in `dir` with `stdin` and reports whether `canary` appeared.
fn attack_works(dir: &Path, script: &str, stdin: &str, canary: &str) -> bool {
    let _ = std::fs::remove_file(dir.join(canary));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        let _ = input.write_all(stdin.as_bytes());
    }
    let _ = child.wait().unwrap();
    let worked = dir.join(canary).exists();
    let _ = std::fs::remove_file(dir.join(canary));
    worked
}

const DENY_INTERPRETERS: &str =
    "default = \"allow\"\nallow = [\"*\"]\ndeny = [\"perl *\", \"ruby *\", \"touch *\"]";

#[test]
fn perl_under_other_names_is_denied_where_perl_is() {
    let s = Scratch::new("perl");
    let cfg = config(&s.0, DENY_INTERPRETERS);
    std::fs::create_dir_all(s.0.join("t")).unwrap();
    std::fs::write(
        s.0.join("t/x.t"),
        "open(my $f, '>', 'CANARY'); print \"1..1\\nok 1\\n\";\n",
    )
    .unwrap();
    let mut tried = 0;
    // prove runs a test file as Perl; json_pp `-f eval` evaluates its input as Perl.
    for (program, script, stdin) in [
        ("prove", "prove t/x.t", ""),
        (
            "json_pp",
            "json_pp -f eval",
            "open(my $f, '>', 'CANARY'); 1",
        ),
    ] {
        if which(program).is_none() || !attack_works(&s.0, script, stdin, "CANARY") {
            eprintln!("skipped: `{script}` does not run Perl here");
            continue;
        }
        tried += 1;
        assert_eq!(
            gate(&cfg, script),
            3,
            "`{script}` runs Perl under `perl *` denied"
        );
    }
    if tried == 0 {
        common::skip(
            "the Perl tools' real-program test",
            "no Perl tool (prove, json_pp) runs here: apt-get install perl",
        );
    }
}

#[test]
fn irb_is_denied_where_ruby_is() {
    if which("irb").is_none() {
        common::skip(
            "irb's real-program test",
            "irb is not installed: apt-get install ruby",
        );
        return;
    }
    let s = Scratch::new("irb");
    let cfg = config(&s.0, DENY_INTERPRETERS);
    let code = "File.write('CANARY', 'x')\n";
    if !attack_works(&s.0, "irb", code, "CANARY") {
        common::skip(
            "irb's real-program test",
            "irb does not read code from a pipe here",
        );
        return;
    }
    assert_eq!(gate(&cfg, "irb"), 3);
    assert_eq!(gate(&cfg, "irb --noecho"), 3);
}

/// pytest imports a plugin module named through `-p`, an `addopts` override or a warning
/// filter's category, however the option is spelt; the gate denies each under a policy
/// that allows running pytest.
#[test]
fn pytest_plugin_spellings_run_code_and_are_denied() {
    let Some(pytest) = which("pytest").or_else(|| which("pytest-3")) else {
        common::skip(
            "pytest's real-program test",
            "pytest is not installed: apt-get install python3-pytest",
        );
        return;
    };
    // `python -m pytest` with the interpreter pytest's own script names (cwd on sys.path).
    let text = std::fs::read_to_string(&pytest).unwrap_or_default();
    let python = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .map(|l| l.split_whitespace().next().unwrap_or("python3").to_string())
        .unwrap_or_else(|| "python3".into());
    let s = Scratch::new("pytest");
    std::fs::write(s.0.join("evil.py"), "open('CANARY', 'w').write('x')\n").unwrap();
    std::fs::write(s.0.join("test_a.py"), "def test_a():\n    pass\n").unwrap();
    let cfg = config(
        &s.0,
        "default = \"deny\"\nallow = [\"pytest *\", \"python3 -m pytest *\"]\ndeny = []",
    );
    let mut tried = 0;
    for opts in [
        "-p evil",
        "-pevil",
        "-o addopts=-pevil",
        "-oaddopts=-pevil",
        "--override-ini=addopts=-pevil",
        "--override-ini addopts=-pevil",
        "-W ignore::evil.X",
        "-qoaddopts=-pevil",
        "-qWignore::evil.X",
    ] {
        let real = format!("{python} -m pytest -q -p no:cacheprovider {opts}");
        if !attack_works(&s.0, &real, "", "CANARY") {
            eprintln!("skipped: `{opts}` loads no plugin with this pytest");
            continue;
        }
        tried += 1;
        for judged in [
            format!("python3 -m pytest -q {opts}"),
            format!("pytest -q {opts}"),
        ] {
            assert_eq!(gate(&cfg, &judged), 3, "`{judged}` imports evil.py");
        }
    }
    assert!(tried > 0, "no spelling loaded the plugin");
    // The harmless forms still run.
    assert_eq!(gate(&cfg, "pytest -q -o log_cli=true"), 0);
    assert_eq!(gate(&cfg, "python3 -m pytest -q -p no:cacheprovider"), 0);
}

/// Exec wrappers run their command: under a deny list, the command they run is held to it
/// (each one that runs here, util-linux's and coreutils' among them).
#[test]
fn exec_wrappers_run_their_command_and_are_denied() {
    let s = Scratch::new("wrappers");
    let cfg = config(
        &s.0,
        "default = \"allow\"\nallow = [\"*\"]\ndeny = [\"touch *\"]",
    );
    let mut tried = Vec::new();
    for prefix in [
        "uclampset -m 0",
        "chrt -o 0",
        "taskset 1",
        "ionice -c 3",
        "nice -n 1",
        "setpriv --",
        "prlimit --nofile=64 --",
        "choom -n 0 --",
        "flock ./lock",
        "stdbuf -oL",
        "timeout 30",
        "env",
        "nohup",
        "setarch x86_64",
        "linux64",
        "setsid -w",
        "unshare -r",
        "runcon -t x",
        "schedtool -e",
        "xtrace",
    ] {
        let program = prefix.split_whitespace().next().unwrap();
        let script = format!("{prefix} touch CANARY");
        if which(program).is_none() || !attack_works(&s.0, &script, "", "CANARY") {
            eprintln!("skipped: `{script}` does not run here");
            continue;
        }
        tried.push(program);
        assert_eq!(gate(&cfg, &script), 3, "`{script}` runs touch");
    }
    eprintln!("wrappers tried: {tried:?}");
    assert!(!tried.is_empty(), "no exec wrapper runs here");
}
