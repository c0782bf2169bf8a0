//! Workspace stage, process adapter: one run of the real `git` binary with harness's
//! identity, no hooks, an environment without harness's keys, stdin from /dev/null, its own
//! process group, and a time limit after which the group (an `ssh` of a push too) is killed.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The identity of the commits harness makes.
pub(super) const AUTHOR_NAME: &str = "harness";
/// The e-mail of that identity.
pub(super) const AUTHOR_EMAIL: &str = "harness@localhost";

/// How long one git command may take (a push to a remote that never answers included).
const TIMEOUT: Duration = Duration::from_secs(600);

/// Environment variables git keeps besides the commands' allow-list: what a push over SSH
/// needs. Keys harness holds (its `HARNESS_*` and key-ref variables) stay out.
const ENV_EXTRA: &[&str] = &["SSH_AUTH_SOCK", "GIT_SSH_COMMAND"];

/// A finished git command.
#[derive(Debug)]
pub(super) struct Output {
    /// How it exited (a kill after the time limit is an error instead).
    pub status: ExitStatus,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `git -C dir args...` to its end or the time limit.
pub(super) fn output(dir: &Path, args: &[&str]) -> Result<Output> {
    output_within(dir, args, TIMEOUT)
}

/// Runs git in `dir`; its stdout, or an error with its stderr.
pub(super) fn run(dir: &Path, args: &[&str]) -> Result<String> {
    run_within(dir, args, TIMEOUT)
}

/// [`run`] with its own time limit (`[workspace].git_timeout_secs` for the steps after the
/// turn).
pub(super) fn run_within(dir: &Path, args: &[&str], limit: Duration) -> Result<String> {
    let out = output_within(dir, args, limit)?;
    if !out.status.success() {
        bail!(
            "git {} in {} failed ({}): {}",
            args.join(" "),
            dir.display(),
            out.status,
            out.stderr.trim()
        );
    }
    Ok(out.stdout)
}

/// Runs `git -C dir args...` to its end, the time limit, or the next handled signal (then
/// its process group is killed and the error says which).
pub(super) fn output_within(dir: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let out = bounded_within(dir, args, limit, None, usize::MAX)?;
    Ok(Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: out.stderr,
    })
}

/// A git command whose stdout was read as bytes, at most `cap` of them.
#[derive(Debug)]
pub(super) struct Bounded {
    /// How it exited (killed by SIGPIPE when its output was cut).
    pub status: ExitStatus,
    /// Its stdout, at most `cap` bytes.
    pub stdout: Vec<u8>,
    /// Whether it printed more than `cap` bytes: the rest was never read.
    pub cut: bool,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs git with `input` on its stdin, reading at most `cap` bytes of its stdout: past
/// them the pipe is closed, so git stops (SIGPIPE) and nothing more enters memory.
pub(super) fn bounded_within(
    dir: &Path,
    args: &[&str],
    limit: Duration,
    input: Option<Vec<u8>>,
    cap: usize,
) -> Result<Bounded> {
    let mut cmd = command(dir, args, /*piped_stdin*/ input.is_some());
    let what = || format!("git {}", args.join(" "));
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", what()))?;
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), input) {
        // Written from a thread: git may answer before it has read all of it.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut pipe, &input);
        });
    }
    // Both pipes are drained while git runs, so a large diff cannot block it.
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        cap,
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        usize::MAX,
    );
    let (status, interrupted) = wait(&mut child, limit, &what)?;
    let mut stdout = stdout.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    let cut = stdout.len() > cap;
    stdout.truncate(cap);
    if let (None, Some(signal)) = (status, interrupted) {
        bail!(
            "{} in {} was stopped by signal {signal}: {}",
            what(),
            dir.display(),
            stderr.trim()
        );
    }
    match status {
        Some(status) => Ok(Bounded {
            status,
            stdout,
            cut,
            stderr,
        }),
        None => bail!(
            "{} in {} did not finish within {}s and was killed: {}",
            what(),
            dir.display(),
            limit.as_secs(),
            stderr.trim()
        ),
    }
}

/// `git -C dir args...` with harness's identity, no hooks, the scrubbed environment (plus
/// [`ENV_EXTRA`]), stdin piped or from /dev/null, stdout and stderr piped, in a process
/// group of its own.
fn command(dir: &Path, args: &[&str], piped_stdin: bool) -> Command {
    let mut env = crate::tools::bash::scrubbed_env(std::env::vars());
    env.extend(std::env::vars().filter(|(k, _)| ENV_EXTRA.contains(&k.as_str())));
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .envs(env)
        .env("GIT_AUTHOR_NAME", AUTHOR_NAME)
        .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
        .env("GIT_COMMITTER_NAME", AUTHOR_NAME)
        .env("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL)
        .env("GIT_TERMINAL_PROMPT", "0")
        .arg("-C")
        .arg(dir)
        // The repository's hooks are not the operator's to run with harness's rights.
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd
}

/// A thread reading `pipe` to its end or past `cap` bytes: then the pipe is dropped (one
/// more byte is read to know there was more).
fn drain(pipe: Option<Box<dyn Read + Send>>, cap: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(p) = pipe {
            let _ = p
                .take(u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1))
                .read_to_end(&mut text);
        }
        text
    })
}

/// Waits for `child` to its end (its status), or kills its group at the `limit` or the next
/// handled signal (no status; the signal when one stopped it).
fn wait(
    child: &mut std::process::Child,
    limit: Duration,
    what: &dyn Fn() -> String,
) -> Result<(Option<ExitStatus>, Option<i32>)> {
    let deadline = Instant::now() + limit;
    // This loop blocks the runtime's thread, so the signal task cannot run: the low-level
    // handler's count is read instead. A signal that came before git started (the turn
    // was interrupted) lets it run; the next one stops it.
    let signals = crate::signals::arrivals();
    let mut interrupted = None;
    loop {
        if let Some(status) = child.try_wait().with_context(what)? {
            return Ok((Some(status), interrupted));
        }
        if crate::signals::arrivals() > signals {
            interrupted = crate::signals::arrived();
        }
        if interrupted.is_some() || Instant::now() >= deadline {
            if let Ok(pgid) = i32::try_from(child.id()) {
                crate::process::kill_group(pgid);
            }
            let _ = child.wait();
            return Ok((None, interrupted));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_failures_carry_stderr_and_a_hung_git_is_killed_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let out = output(dir.path(), &["--version"]).unwrap();
        assert!(out.status.success() && out.stdout.starts_with("git version"));
        let err = run(dir.path(), &["rev-parse", "--git-dir"]).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a git repository"),
            "{err:#}"
        );
        // An alias that sleeps stands in for a push that never returns.
        let started = Instant::now();
        let args = ["-c", "alias.wait=!sleep 30", "wait"];
        let err = output_within(dir.path(), &args, Duration::from_millis(300)).unwrap_err();
        assert!(
            format!("{err:#}").contains("did not finish within 0s"),
            "{err:#}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn bounded_output_stops_at_its_cap_and_input_reaches_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let limit = Duration::from_secs(60);
        // `git hash-object --stdin` prints 40 hex digits and a newline.
        let args = ["hash-object", "--stdin"];
        let whole = bounded_within(dir.path(), &args, limit, Some(b"x".to_vec()), 100).unwrap();
        assert!(whole.status.success() && !whole.cut, "{whole:?}");
        assert_eq!(whole.stdout.len(), 41);
        let cut = bounded_within(dir.path(), &args, limit, Some(b"x".to_vec()), 10).unwrap();
        assert!(cut.cut && cut.stdout.len() == 10, "{cut:?}");
        assert_eq!(cut.stdout, whole.stdout[..10]);
    }
}
