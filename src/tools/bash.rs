//! Tools adapter: runs one allowed command as `bash -c` in the work root, in its own process
//! group, stdin from /dev/null, a scrubbed environment, a timeout that kills the whole group,
//! and stdout+stderr interleaved through one pipe into a bounded [`Capture`] (pure).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;

use super::sandbox::Landlock;
use super::spawner::{Child, Job, Spawner, StageSpec};
use crate::process::kill_group;
use crate::process::{path_in, resolve, DEFAULT_PATH};
use crate::secrets::Redactor;
use crate::signals::Interrupt;

/// Environment variables a command may see; everything else (keys, `HARNESS_*`) is dropped.
const ENV_ALLOW: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER"];
/// After the command exits, how long to keep draining output its leftovers still write.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Exited with this status.
    Exited(i32),
    /// Killed by this signal (not by us).
    Signaled(i32),
    /// Ran past the timeout; the group was killed.
    TimedOut,
    /// A handled signal to the harness stopped it; the group was killed.
    Interrupted,
}

impl Ending {
    /// The exit status, when the command exited: a number, never parsed back from text.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            Ending::Exited(code) => Some(code),
            Ending::Signaled(_) | Ending::TimedOut | Ending::Interrupted => None,
        }
    }
}

/// `exit N`, `signal N`, `timeout`, `interrupted`: how narration, the REPORT's round log
/// and the `tool.completed` event's `ending` show it.
impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Exited(code) => write!(f, "exit {code}"),
            Ending::Signaled(signal) => write!(f, "signal {signal}"),
            Ending::TimedOut => f.write_str("timeout"),
            Ending::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// As its [`Display`](std::fmt::Display) text: the REPORT's round log keeps its shape.
impl serde::Serialize for Ending {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A finished command: how it ended and what it printed.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its combined output, bounded.
    pub output: Capture,
}

/// git settings every command gets (`GIT_CONFIG_*` are read by git before any repository's
/// own config, which cannot undo them): no hooks, whatever a repository's config or a
/// written `.git/hooks` says; no implicit bare repository, so a git directory the model
/// wrote below the work root cannot be used to run its hooks or aliases' helpers; no
/// file-system monitor program (`core.fsmonitor`, which `git status` would run); no
/// `ext::` transport (a URL that is a command line), whatever a repository's config allows;
/// and no editor (`:` is git's "none"): vi reads its keystrokes from a stdin that is not a
/// terminal, so `printf ':!id' | git commit` would run `id`.
const GIT_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_COUNT", "6"),
    ("GIT_CONFIG_KEY_0", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_0", "/dev/null"),
    ("GIT_CONFIG_KEY_1", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_1", "explicit"),
    ("GIT_CONFIG_KEY_2", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_2", "false"),
    ("GIT_CONFIG_KEY_3", "protocol.ext.allow"),
    ("GIT_CONFIG_VALUE_3", "never"),
    ("GIT_CONFIG_KEY_4", "core.editor"),
    ("GIT_CONFIG_VALUE_4", ":"),
    ("GIT_CONFIG_KEY_5", "sequence.editor"),
    ("GIT_CONFIG_VALUE_5", ":"),
];

/// git settings the model's commands (and the success check) get besides [`GIT_ENV`], but
/// not harness's own git: no global and no system config file. The operator's
/// `~/.gitconfig` lies in a home Landlock hides, and git treats an unreadable config file as
/// fatal (exit 128 on every command); a config the run cannot read must not count either.
const COMMAND_GIT_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
];

/// Where toolchain managers keep their toolchains, as a variable and its default below the
/// operator's `HOME`. Commands get a private `HOME`, so these are pinned to where the
/// toolchains really are (rustup's `cargo` proxy finds its toolchain through `RUSTUP_HOME`,
/// pyenv's shims through `PYENV_ROOT`); reading them still needs a read root.
const TOOL_HOMES: &[(&str, &str)] = &[
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo"),
    ("PYENV_ROOT", ".pyenv"),
    ("ASDF_DATA_DIR", ".asdf"),
    ("NVM_DIR", ".nvm"),
    ("GOPATH", "go"),
];

/// The environment of the model's commands: `env` ([`scrubbed_env`]) with `HOME` set to the
/// run's private dir `home` (tools that write caches or dotfiles there find a writable
/// home, none trips over an unreadable one), [`COMMAND_GIT_ENV`], and each of
/// [`TOOL_HOMES`] that the operator's environment sets (`operator`) or whose default below
/// the operator's `HOME` is a directory (`is_dir`). PURE.
pub fn command_env(
    mut env: Vec<(String, String)>,
    home: &Path,
    operator: impl Fn(&str) -> Option<String>,
    is_dir: impl Fn(&Path) -> bool,
) -> Vec<(String, String)> {
    let own_home = operator("HOME").filter(|h| Path::new(h).is_absolute());
    let mut add: Vec<(String, String)> = vec![("HOME".to_string(), home.display().to_string())];
    add.extend(
        COMMAND_GIT_ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    for (var, default) in TOOL_HOMES {
        let value = operator(var)
            .filter(|v| Path::new(v).is_absolute())
            .or_else(|| {
                let dir = Path::new(own_home.as_deref()?).join(default);
                is_dir(&dir).then(|| dir.display().to_string())
            });
        if let Some(value) = value {
            add.push((var.to_string(), value));
        }
    }
    env.retain(|(k, _)| !add.iter().any(|(a, _)| a == k));
    env.extend(add);
    env.sort();
    env
}

/// The environment a command gets: the allow-list of `vars` and [`GIT_ENV`], nothing else.
pub fn scrubbed_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vars
        .filter(|(k, _)| ENV_ALLOW.contains(&k.as_str()) || k.starts_with("LC_"))
        .filter(|(k, _)| !k.starts_with("HARNESS_"))
        .chain(GIT_ENV.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".to_string(), DEFAULT_PATH.to_string()));
    }
    env.sort();
    env
}

/// Where and how a command runs, with bash or directly ([`super::direct`]).
#[derive(Clone, Copy)]
pub struct Setting<'a> {
    /// The work dir.
    pub work_root: &'a Path,
    /// When the command's group is killed.
    pub timeout: Duration,
    /// Output kept, head and tail.
    pub max_output: usize,
    /// The whole environment ([`scrubbed_env`]).
    pub env: &'a [(String, String)],
    /// The sandbox each process applies to itself, if any.
    pub landlock: Option<&'a Landlock>,
    /// A handled signal to the harness stops the command.
    pub interrupt: &'a Interrupt,
    /// Starts the command's processes.
    pub spawner: &'a Spawner,
}

impl Setting<'_> {
    /// A setting without sandbox for tests.
    #[cfg(test)]
    pub(super) fn plain<'a>(
        work_root: &'a Path,
        timeout: Duration,
        env: &'a [(String, String)],
        interrupt: &'a Interrupt,
        spawner: &'a Spawner,
    ) -> Setting<'a> {
        Setting {
            work_root,
            timeout,
            max_output: 100_000,
            env,
            landlock: None,
            interrupt,
            spawner,
        }
    }
}

/// Runs `command` with `bash -c` in the work root, confined by the setting's sandbox.
pub async fn run(command: &str, at: &Setting<'_>) -> Result<Finished> {
    let (reader, writer) = std::io::pipe().context("cannot create the output pipe")?;
    let cannot = || format!("cannot start bash in {}", at.work_root.display());
    // Found on the commands' own PATH, as an exec of `bash` by name would.
    let path = path_in(at.env);
    let bash = resolve("bash", path, at.work_root)
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        .with_context(cannot)?;
    let job = Job {
        cwd: at.work_root,
        timeout: at.timeout,
        confine: at.landlock,
        stages: vec![StageSpec::new(
            &bash,
            [&b"bash"[..], b"-c", command.as_bytes()],
            at.env,
            [None, Some(writer.as_fd()), Some(writer.as_fd())],
        )],
    };
    let started = at.spawner.spawn(job).await.with_context(cannot)?;
    // Only the command may hold the write end now, or the read side never sees EOF.
    drop(writer);
    let child = started
        .into_iter()
        .next()
        .ok_or_else(|| std::io::Error::other("no process"))
        .and_then(|c| c)
        .with_context(cannot)?;
    let pgid = Some(child.id());
    supervise(vec![child], pgid, None, reader, at).await
}

/// Reads the output of the processes of one command (all in group `pgid`, writing into the
/// pipe whose read end is `reader`) until they end, the timeout passes or the harness is
/// interrupted. The command's ending is the last child's, or `last_failed` when its last
/// stage could not start (the children then are the earlier stages).
pub(super) async fn supervise(
    mut children: Vec<Child>,
    pgid: Option<i32>,
    last_failed: Option<i32>,
    reader: std::io::PipeReader,
    at: &Setting<'_>,
) -> Result<Finished> {
    let (timeout, interrupt) = (at.timeout, at.interrupt);
    interrupt.set_child_group(pgid);
    let _forget_group = ForgetGroup(interrupt);
    let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .context("cannot read the output pipe")?;

    let mut capture = Capture::new(at.max_output);
    let mut buf = vec![0u8; 64 * 1024];
    let mut eof = false;
    let mut ending: Option<Ending> = None;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut drain_until = deadline;
    loop {
        if eof && ending.is_some() {
            break;
        }
        tokio::select! {
            n = rx.read(&mut buf), if !eof => match n {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
            last = wait_all(&mut children), if ending.is_none() => {
                let last = match last {
                    Ok(last) => last,
                    Err(e) => {
                        // The spawner is gone: what is left of the group goes too.
                        kill_group(pgid.unwrap_or(0));
                        return Err(e).context("cannot wait for the command");
                    }
                };
                ending = Some(match (last_failed, last) {
                    (Some(code), _) => Ending::Exited(code),
                    (None, Some(status)) => ending_of(status),
                    (None, None) => Ending::Exited(0),
                });
                // Background leftovers of the command die with it and stop holding the pipe.
                kill_group(pgid.unwrap_or(0));
                drain_until = deadline.min(tokio::time::Instant::now() + DRAIN_GRACE);
            },
            _ = tokio::time::sleep_until(drain_until) => {
                if ending.is_none() {
                    kill_group(pgid.unwrap_or(0));
                    children.iter().for_each(Child::kill);
                    let _ = wait_all(&mut children).await;
                    ending = Some(Ending::TimedOut);
                    drain_until = tokio::time::Instant::now() + DRAIN_GRACE;
                } else {
                    // Something outside the group still holds the pipe: stop reading.
                    break;
                }
            },
            _ = interrupt.wait(), if ending.is_none() => {
                kill_group(pgid.unwrap_or(0));
                children.iter().for_each(Child::kill);
                let _ = wait_all(&mut children).await;
                ending = Some(Ending::Interrupted);
                drain_until = tokio::time::Instant::now() + DRAIN_GRACE;
            },
        }
    }
    Ok(Finished {
        ending: ending.unwrap_or(Ending::TimedOut),
        output: capture,
    })
}

/// Waits for every child (cancel-safe: an ended child keeps its status) and returns the last
/// one's status, as bash reports a pipeline's.
async fn wait_all(children: &mut [Child]) -> std::io::Result<Option<std::process::ExitStatus>> {
    let mut last = None;
    for child in children.iter_mut() {
        last = Some(child.wait().await?);
    }
    Ok(last)
}

/// Clears the interrupt's record of the running group on every way out of [`run`].
struct ForgetGroup<'a>(&'a Interrupt);

impl Drop for ForgetGroup<'_> {
    fn drop(&mut self) {
        self.0.set_child_group(None);
    }
}

fn ending_of(status: std::process::ExitStatus) -> Ending {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => Ending::Exited(c),
        (None, Some(s)) => Ending::Signaled(s),
        (None, None) => Ending::Exited(-1),
    }
}

/// Bounded output: the first `limit/2` bytes and the last `limit/2` bytes, plus a count of
/// what fell between. Memory stays `O(limit)` whatever the command prints.
#[derive(Debug, Clone)]
pub struct Capture {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    /// An empty capture keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Capture {
        let head_limit = limit / 2;
        Capture {
            head_limit,
            tail_limit: limit - head_limit,
            head: Vec::with_capacity(head_limit.min(64 * 1024)),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// Appends bytes as they arrive.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.head_limit {
            let n = bytes.len().min(self.head_limit - self.head.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Total bytes the command printed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept text with secrets masked: head, a line saying how many bytes were cut, tail.
    /// Cuts fall on UTF-8 boundaries, and a secret split by the cut is dropped, not shown.
    pub fn render(&self, redactor: &Redactor) -> String {
        let kept = self.head.len() as u64 + self.tail.len() as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            return redactor.redact(&String::from_utf8_lossy(&all));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let head_end = head_end(&self.head);
        let tail_start = tail_start(&tail);
        let mut head = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        let mut tail = String::from_utf8_lossy(&tail[tail_start..]).into_owned();
        let mut cut = self.total - kept + (self.head.len() - head_end) as u64 + tail_start as u64;
        let dangling = redactor.dangling_prefix_len(&head);
        head.truncate(head.len() - dangling);
        let dangling_tail = redactor.dangling_suffix_len(&tail);
        tail.drain(..dangling_tail);
        cut += (dangling + dangling_tail) as u64;
        format!(
            "{}\n[... {cut} bytes cut ...]\n{}",
            redactor.redact(&head),
            redactor.redact(&tail)
        )
    }
}

/// Where a head cut must end so that no character is split: before a trailing incomplete
/// UTF-8 sequence, if there is one.
fn head_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let b = bytes[len - back];
        if b & 0xC0 != 0x80 {
            let need = match b {
                0x00..=0x7F => 1,
                0xF0..=0xFF => 4,
                0xE0..=0xEF => 3,
                _ => 2,
            };
            return if back >= need { len } else { len - back };
        }
    }
    len
}

/// Where a tail cut must start so that no character is split: after leading continuation
/// bytes (at most 3, the most a split character can leave).
fn tail_start(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0xC0 == 0x80)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::Secret;
    use pretty_assertions::assert_eq;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(100);
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.render(&Redactor::default()), "hello world");
    }

    #[test]
    fn large_output_keeps_head_and_tail_with_a_count() {
        let mut c = Capture::new(10);
        for chunk in [b"abc".as_slice(), b"defgh", b"ijklmnop", b"qrstuvwxyz"] {
            c.push(chunk);
        }
        assert_eq!(c.total(), 26);
        assert_eq!(
            c.render(&Redactor::default()),
            "abcde\n[... 16 bytes cut ...]\nvwxyz"
        );
    }

    #[test]
    fn cuts_fall_on_utf8_boundaries() {
        let mut c = Capture::new(8);
        c.push("ééééé".as_bytes()); // 10 bytes
        c.push("xxxxxx".as_bytes());
        c.push("ñññ".as_bytes());
        let out = c.render(&Redactor::default());
        assert!(!out.contains('\u{fffd}'), "{out:?}");
        assert_eq!(out, "éé\n[... 14 bytes cut ...]\nññ");
    }

    #[test]
    fn secrets_are_masked_and_never_leak_across_the_cut() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-canary-0123456789"));
        let mut c = Capture::new(100);
        c.push(b"key=sk-canary-0123456789 ");
        assert_eq!(c.render(&r), "key=[redacted] ");
        // The secret straddles the cut: its halves must not survive either.
        let mut c = Capture::new(20);
        c.push(b"xxxxxxxxsk-canary-01");
        c.push(&[b'.'; 50]);
        c.push(b"23456789yyyyyyyyyyyy");
        let out = c.render(&r);
        assert!(!out.contains("sk-c") && !out.contains("6789"), "{out}");
    }

    #[test]
    fn env_is_scrubbed_to_the_allow_list() {
        let vars = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C"),
            ("HARNESS_LITELLM_KEY", "sk-x"),
            ("OPENAI_API_KEY", "sk-y"),
            ("LD_PRELOAD", "/x.so"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = scrubbed_env(vars);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_KEY_1",
                "GIT_CONFIG_KEY_2",
                "GIT_CONFIG_KEY_3",
                "GIT_CONFIG_KEY_4",
                "GIT_CONFIG_KEY_5",
                "GIT_CONFIG_VALUE_0",
                "GIT_CONFIG_VALUE_1",
                "GIT_CONFIG_VALUE_2",
                "GIT_CONFIG_VALUE_3",
                "GIT_CONFIG_VALUE_4",
                "GIT_CONFIG_VALUE_5",
                "HOME",
                "LC_ALL",
                "PATH"
            ]
        );
    }

    #[test]
    fn commands_get_a_private_home_no_git_config_files_and_their_toolchains() {
        let env = vec![
            ("HOME".to_string(), "/home/op".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let operator = |k: &str| match k {
            "HOME" => Some("/home/op".to_string()),
            "PYENV_ROOT" => Some("/opt/pyenv".to_string()),
            // A relative value means nothing in another work dir.
            "GOPATH" => Some("go".to_string()),
            _ => None,
        };
        let got = command_env(env, Path::new("/tmp/harness-tmp-1-x"), operator, |p| {
            p == Path::new("/home/op/.rustup")
        });
        let want: Vec<(String, String)> = [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("HOME", "/tmp/harness-tmp-1-x"),
            ("PATH", "/bin"),
            ("PYENV_ROOT", "/opt/pyenv"),
            ("RUSTUP_HOME", "/home/op/.rustup"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    async fn run_in(command: &str, dir: &Path, timeout: Duration, max_output: usize) -> Finished {
        let env = scrubbed_env(std::env::vars());
        let interrupt = Interrupt::default();
        let spawner = Spawner::start_here();
        let at = Setting {
            max_output,
            ..Setting::plain(dir, timeout, &env, &interrupt, &spawner)
        };
        run(command, &at).await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn runs_and_interleaves_stdout_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let f = run_in(
            "echo out; echo err >&2; echo out2; exit 3",
            dir.path(),
            Duration::from_secs(10),
            1000,
        )
        .await;
        assert_eq!(f.ending, Ending::Exited(3));
        assert_eq!(f.output.render(&Redactor::default()), "out\nerr\nout2\n");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let f = run_in(
            "sleep 30 & echo started; sleep 30",
            dir.path(),
            Duration::from_millis(300),
            1000,
        )
        .await;
        assert_eq!(f.ending, Ending::TimedOut);
        assert_eq!(f.output.render(&Redactor::default()), "started\n");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn background_leftovers_do_not_hold_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let f = run_in(
            "sleep 30 & echo done",
            dir.path(),
            Duration::from_secs(20),
            1000,
        )
        .await;
        assert_eq!(f.ending, Ending::Exited(0));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_flood_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let f = run_in(
            "head -c 20000000 /dev/zero | tr '\\0' 'a'",
            dir.path(),
            Duration::from_secs(30),
            1000,
        )
        .await;
        assert_eq!(f.output.total(), 20_000_000);
        let out = f.output.render(&Redactor::default());
        assert!(out.len() < 1100, "{}", out.len());
        assert!(out.contains("[... 19999000 bytes cut ...]"), "{out}");
    }

    /// Runs `script` in `dir` and requires it to succeed (a test's setup).
    async fn set_up(script: &str, dir: &Path) {
        let done = run_in(script, dir, Duration::from_secs(30), 10_000).await;
        assert_eq!(
            done.ending,
            Ending::Exited(0),
            "{:?}",
            done.output.render(&Redactor::default())
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn git_in_a_command_runs_no_hook_and_no_implicit_bare_repository() {
        let dir = tempfile::tempdir().unwrap();
        let setup = "git init -q . && git config user.email t@l && git config user.name t \
            && printf '#!/bin/sh\\ntouch hooked\\n' > .git/hooks/pre-commit \
            && chmod +x .git/hooks/pre-commit && git init -q --bare nested.git";
        set_up(setup, dir.path()).await;
        let commit = run_in(
            "git commit -q --allow-empty -m x && git -C nested.git rev-parse --git-dir; echo $?",
            dir.path(),
            Duration::from_secs(30),
            10_000,
        )
        .await;
        let out = commit.output.render(&Redactor::default());
        assert!(!dir.path().join("hooked").exists(), "the hook ran: {out}");
        // Implicit use of the bare repository is refused (git exits 128).
        assert!(out.trim_end().ends_with("128"), "{out}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn git_starts_no_editor_that_would_read_stdin_as_keystrokes() {
        let dir = tempfile::tempdir().unwrap();
        let setup = "git init -q . && git config user.email t@l && git config user.name t \
            && git config core.editor vi";
        set_up(setup, dir.path()).await;
        let commit = run_in(
            "printf ':!touch edited\\n:q!\\n' | git commit --allow-empty; true",
            dir.path(),
            Duration::from_secs(30),
            10_000,
        )
        .await;
        let out = commit.output.render(&Redactor::default());
        assert!(!dir.path().join("edited").exists(), "vi ran: {out}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_repository_config_cannot_make_git_run_a_monitor_or_an_ext_url() {
        let dir = tempfile::tempdir().unwrap();
        let setup = "git init -q . && printf '#!/bin/sh\\ntouch monitored\\n' > mon.sh \
            && chmod +x mon.sh && git config core.fsmonitor \"$PWD/mon.sh\" \
            && git config protocol.ext.allow always && echo x > f";
        set_up(setup, dir.path()).await;
        let status = run_in(
            "git status --short; git ls-remote 'ext::sh -c touch% extran' 2>&1; true",
            dir.path(),
            Duration::from_secs(30),
            10_000,
        )
        .await;
        let out = status.output.render(&Redactor::default());
        assert!(out.contains("?? f"), "{out}");
        assert!(
            !dir.path().join("monitored").exists(),
            "fsmonitor ran: {out}"
        );
        assert!(!dir.path().join("extran").exists(), "ext:: ran: {out}");
    }
}
