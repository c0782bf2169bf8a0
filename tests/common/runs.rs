//! Helpers for the suites that run the built binary as a child under a watchdog
//! (`tests/reliability.rs`, `tests/faults.rs`): bounded waits, REPORT completeness, config
//! edits, and the canary scan over every byte a run produced.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// The canary behind the `file:` key ref.
pub const FILE_CANARY: &str = "sk-filecanary-2b8e6d04a1c97f35";
/// The canary behind the Redmine key ref (present in every config, needed by none of these runs).
pub const REDMINE_CANARY: &str = "rm-canary-5c1d9e7a3f60b248";
/// How long any single harness run may take before the watchdog calls it hung.
pub const WATCHDOG: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// helpers

/// A tiny xorshift generator: reproducible from the printed seed, no extra dependency.
pub struct Rng(u64);

impl Rng {
    pub fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("rng seed {seed}");
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The harness command for a workspace: the subcommand (`args[0]`), the workspace's
/// `--config` (not for `version`), the rest of `args`; the canaries in its environment and no
/// stdin. The config comes before the rest, so `gate -- ''` stays a command after `--`.
pub fn harness_cmd(ws: &Workspace, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    let (sub, rest) = match args.split_first() {
        Some((sub, rest)) => (Some(*sub), rest),
        None => (None, args),
    };
    cmd.args(sub);
    if sub != Some("version") {
        cmd.arg("--config").arg(ws.config());
    }
    cmd.args(rest)
        .current_dir(ws.path())
        .env_remove("RUST_LOG")
        .env_remove("HARNESS_CONFIG")
        .env("HARNESS_TEST_LLM_KEY", CANARY)
        .env("HARNESS_TEST_REDMINE_KEY", REDMINE_CANARY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` under the watchdog; a child still running at the bound is killed and
/// the test fails.
pub fn wait_bounded(child: &mut Child, bound: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {bound:?}: hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs to completion under the watchdog (see [`finish`]).
pub fn run_bounded(mut cmd: Command, what: &str) -> Run {
    finish(cmd.spawn().unwrap(), what)
}

/// Waits for a spawned run under the watchdog; stdout and stderr are drained on threads so
/// a chatty child cannot block on a full pipe. Death by signal N reads as exit 128 + N.
pub fn finish(mut child: Child, what: &str) -> Run {
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child, WATCHDOG, what);
    Run {
        code: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

pub fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

pub fn assert_no_panic(run: &Run, what: &str) {
    assert!(
        !run.stderr.contains("panicked"),
        "{what}: the harness panicked:\n{}",
        run.stderr
    );
}

/// A REPORT is complete: front matter whose every value parses as JSON, the closing
/// delimiter, and a body that ends with `body_end` (or, with `None`, any non-empty body).
pub fn assert_complete(path: &Path, text: &str, body_end: Option<&str>) {
    let fail = |why: &str| -> ! { panic!("{}: {why}:\n{text}", path.display()) };
    let Some(rest) = text.strip_prefix("---\n") else {
        fail("no opening ---")
    };
    let Some((front_matter, body)) = rest.split_once("\n---\n\n") else {
        fail("no closing ---")
    };
    let mut keys = BTreeSet::new();
    for line in front_matter.lines() {
        let Some((key, value)) = line.split_once(": ") else {
            fail(&format!("front matter line without `: `: {line:?}"))
        };
        if serde_json::from_str::<Value>(value).is_err() {
            fail(&format!("value of {key} is not JSON"));
        }
        keys.insert(key.to_string());
    }
    for key in ["harness_report", "run_id", "stop_reason", "round_log"] {
        if !keys.contains(key) {
            fail(&format!("front matter has no {key}"));
        }
    }
    match body_end {
        Some(end) if !body.ends_with(end) => fail(&format!("body does not end with {end:?}")),
        None if body.trim().is_empty() => fail("empty body"),
        _ => {}
    }
}

pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    rd.map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".harness-tmp-")
        })
        .collect()
}

/// Every REPORT in the workspace's report dir (REPORT-latest.md included) is complete.
pub fn assert_all_reports_complete(ws: &Workspace, body_end: Option<&str>) {
    for p in ws.report_files() {
        assert_complete(&p, &std::fs::read_to_string(&p).unwrap(), body_end);
    }
    let latest = ws.reports().join("REPORT-latest.md");
    if latest.exists() {
        assert_complete(
            &latest,
            &std::fs::read_to_string(&latest).unwrap(),
            body_end,
        );
    }
}

/// Adds allow rules in front of the standard config's.
pub fn allow(config: String, rules: &[&str]) -> String {
    let quoted: Vec<String> = rules.iter().map(|r| format!("{r:?}, ")).collect();
    config.replacen("allow = [", &format!("allow = [{}", quoted.concat()), 1)
}

pub fn set(config: String, from: &str, to: &str) -> String {
    assert!(config.contains(from), "config has no {from:?}");
    config.replacen(from, to, 1)
}

// ---------------------------------------------------------------------------------------
// secrets

/// Adds a `[redmine]` section whose key is the Redmine canary, so that every run carries a
/// third secret it must never print.
pub fn with_redmine(config: String) -> String {
    format!(
        "{config}\n[redmine]\nurl = \"http://127.0.0.1:9\"\nkey_ref = \"env:HARNESS_TEST_REDMINE_KEY\"\nscope_query = \"status_id=open\"\n"
    )
}

/// Fails if any canary (or either half of one) appears in stdout, stderr, any file under the
/// workspace but its config, or anything the server received but the Authorization header.
pub fn assert_no_canary(ws: &Workspace, run: &Run, llm: &Llm, extra: &[(&str, &str)]) {
    let mut requests = llm.requests();
    for r in &mut requests {
        if let Some(h) = r["headers"].as_object_mut() {
            h.remove("authorization");
        }
    }
    let sources = [
        ("stdout", run.stdout.clone()),
        ("stderr", run.stderr.clone()),
        ("files", ws.all_files_text()),
        ("requests", serde_json::to_string(&requests).unwrap()),
    ];
    let mut canaries = vec![
        ("llm canary", CANARY),
        ("redmine canary", REDMINE_CANARY),
        ("file canary", FILE_CANARY),
    ];
    canaries.extend_from_slice(extra);
    for (source, text) in &sources {
        for (name, canary) in &canaries {
            let (a, b) = canary.split_at(canary.len() / 2);
            for needle in [*canary, a, b] {
                assert!(
                    !text.contains(needle),
                    "{name} ({needle}) leaked into {source}:\n{text}"
                );
            }
        }
    }
}

/// Which key ref the litellm key comes from.
#[derive(Debug, Clone)]
pub enum KeyRef {
    Env,
    File(PathBuf),
}

impl KeyRef {
    pub fn apply(&self, config: String) -> String {
        match self {
            KeyRef::Env => config,
            KeyRef::File(p) => set(
                config,
                "key_ref = \"env:HARNESS_TEST_LLM_KEY\"",
                &format!("key_ref = \"file:{}\"", p.display()),
            ),
        }
    }

    pub fn env(&self, cmd: &mut Command) {
        if let KeyRef::File(_) = self {
            cmd.env_remove("HARNESS_TEST_LLM_KEY");
        }
    }
}

/// `cmd` with `RLIMIT_FSIZE` set to `bytes`: a write past it fails with EFBIG, as a full
/// disk would fail it mid-way (SIGXFSZ ignored by the caller when `ignore_sigxfsz`, else at
/// its default, which harness ignores itself).
pub fn with_file_size_limit(mut cmd: Command, bytes: u64, ignore_sigxfsz: bool) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs in the hook.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if ignore_sigxfsz {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    cmd
}

/// `cmd` (program, arguments, environment) run with a full 64 KiB tmpfs mounted on `dir`
/// (which must exist) in a private mount namespace; the wrapper exits 99 when it may not
/// mount.
pub fn in_full_tmpfs(cmd: &Command, dir: &Path, cwd: &Path) -> Command {
    let script = r#"mount -t tmpfs -o size=64k tmpfs "$0" || exit 99
dd if=/dev/zero of="$0/fill" bs=4k >/dev/null 2>&1
exec "$@""#;
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["-m", "sh", "-c", script])
        .arg(dir)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    wrapped
}
