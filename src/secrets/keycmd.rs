//! Key refs adapter, I/O: runs a key program (`cmd:` and `bw:` refs) with no stdin, a time
//! limit and a scrubbed environment; the first line of its stdout out, its stderr only masked.
//!
//! The classification of `bw`'s error messages is PURE ([`bw_failure`]) and tested beside it.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::{Redactor, Secret};
use crate::process::kill_group;

/// How long a key program may run: `bw` starts Node.js and decrypts the vault, and `pass`
/// may wait for gpg-agent; a program that hangs (a prompt with no terminal) is killed.
pub(super) const TIME_LIMIT: Duration = Duration::from_secs(30);

/// Environment variables a key program sees, by exact name: what finding programs, a home
/// directory, a locale, a temp dir, gpg-agent's socket and proxies/CAs need. Nothing else of
/// harness's environment (other keys above all) reaches the program.
pub(super) const PASSED_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "GNUPGHOME",
    "GPG_AGENT_INFO",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// ... and by prefix: the secret stores' own settings and credentials (pass, Vault, sops,
/// 1Password, Bitwarden, and the cloud KMS credentials sops may use).
pub(super) const PASSED_PREFIXES: &[&str] = &[
    "PASSWORD_STORE_",
    "VAULT_",
    "SOPS_",
    "OP_",
    "BW_",
    "AWS_",
    "AZURE_",
];

/// Whether a variable of harness's environment is passed to a key program.
pub(super) fn passes(name: &str) -> bool {
    PASSED_NAMES.contains(&name) || PASSED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Most of a program's output kept; a key is a line, the rest is only for error messages.
const MAX_CAPTURE: usize = 64 * 1024;
/// How long to wait for the pipes to close once the program has exited.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// How much of a failing program's stderr an error shows.
const MAX_STDERR_SHOWN: usize = 600;

/// A key program that ran to its end (or died of a signal).
#[derive(Debug)]
pub(super) struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a key program gave no [`Output`].
#[derive(Debug)]
pub(super) enum RunError {
    /// No such program on PATH (or at the given path), or no such directory to run in.
    NotFound,
    /// It outlived the time limit and was killed with its process group.
    TimedOut { stdout: Vec<u8>, stderr: Vec<u8> },
    /// It could not be started for another reason (permission, not an executable...).
    Other(std::io::Error),
    /// A signal reached harness while it ran; it was killed with its process group.
    Interrupted,
}

impl RunError {
    /// The error for anything but [`RunError::NotFound`], which each caller words itself.
    fn describe(&self, program: &str) -> String {
        match self {
            RunError::NotFound => format!("`{program}` not found"),
            RunError::TimedOut { stdout, stderr } => format!(
                "`{program}` did not finish within {}s and was killed{}",
                TIME_LIMIT.as_secs(),
                stderr_suffix(stderr, stdout)
            ),
            RunError::Other(e) => format!("cannot start `{program}`: {e}"),
            RunError::Interrupted => {
                format!("`{program}` was stopped: harness received a signal")
            }
        }
    }
}

/// Runs `argv` in `dir` (the current directory when `None`) with no stdin, in its own
/// process group, in the scrubbed environment plus `extra_env`, for at most `limit`.
pub(super) fn run(
    argv: &[String],
    dir: Option<&Path>,
    extra_env: &[(&str, &str)],
    limit: Duration,
) -> Result<Output, RunError> {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        return Err(RunError::NotFound);
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(passes)))
        .envs(extra_env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => RunError::NotFound,
        _ => RunError::Other(e),
    })?;
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            // A signal to harness ends the wait at once: the caller reports it.
            Ok(None) if crate::signals::arrived().is_some() => {
                kill_group(pgid);
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Interrupted);
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => {
                kill_group(pgid);
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // Leftovers the program started in its group die with it and stop holding the pipes.
    kill_group(pgid);
    let stdout = stdout.recv_timeout(DRAIN_GRACE).unwrap_or_default();
    let stderr = stderr.recv_timeout(DRAIN_GRACE).unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(RunError::TimedOut { stdout, stderr }),
    }
}

/// Reads a pipe to its end on a thread, keeping the first [`MAX_CAPTURE`] bytes.
fn reader(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = MAX_CAPTURE.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
            let _ = tx.send(kept);
        });
    }
    rx
}

/// The key in a program's stdout: its first line, without the line end.
pub(super) fn first_line(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().next()?.trim_end_matches('\r');
    (!line.trim().is_empty()).then(|| line.to_string())
}

/// A failing program's stderr, fit for an error message: every non-blank stdout line (a key
/// printed before the failure, say) masked, trimmed and cut short.
pub(super) fn masked_stderr(stderr: &[u8], stdout: &[u8]) -> String {
    let mut redactor = Redactor::default();
    for line in String::from_utf8_lossy(stdout).lines() {
        redactor.add(&Secret::new(line.trim()));
    }
    let text = redactor.redact(String::from_utf8_lossy(stderr).trim());
    match text.char_indices().nth(MAX_STDERR_SHOWN) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Resolves `cmd:PROGRAM ARGS` (already split into `argv`); `label` is the ref as written.
pub(super) fn resolve_cmd(argv: &[String], dir: &Path, label: &str, what: &str) -> Result<Secret> {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let out = match run(argv, Some(dir), &[], TIME_LIMIT) {
        Err(RunError::NotFound) if !dir.is_dir() => {
            bail!(
                "{what}: {label}: cannot run in {}: not a directory",
                dir.display()
            )
        }
        Err(RunError::NotFound) => {
            bail!("{what}: {label}: program `{program}` not found (PATH is searched)")
        }
        Err(e) => bail!("{what}: {label}: {}", e.describe(program)),
        Ok(out) => out,
    };
    let stderr = stderr_suffix(&out.stderr, &out.stdout);
    if !out.status.success() {
        bail!(
            "{what}: {label}: `{program}` failed ({}){stderr}",
            describe_status(out.status)
        );
    }
    match first_line(&out.stdout) {
        Some(key) => Ok(Secret::new(key)),
        None => bail!(
            "{what}: {label}: `{program}` printed no key on the first line of its output{stderr}"
        ),
    }
}

/// Resolves `bw:ITEM` with `bw get password ITEM`; a locked vault fails instead of prompting.
pub(super) fn resolve_bw(item: &str, what: &str) -> Result<Secret> {
    let argv = ["bw", "get", "password", item].map(String::from);
    // BW_NOINTERACTION: without it a locked vault asks for the master password on the terminal.
    let out = match run(&argv, None, &[("BW_NOINTERACTION", "true")], TIME_LIMIT) {
        Err(RunError::NotFound) => bail!(
            "{what}: bw:{item}: the Bitwarden CLI `bw` is not installed or not on PATH \
             (https://bitwarden.com/help/cli/)"
        ),
        Err(e) => bail!("{what}: bw:{item}: {}", e.describe("bw get password")),
        Ok(out) => out,
    };
    if out.status.success() {
        if let Some(key) = first_line(&out.stdout) {
            return Ok(Secret::new(key));
        }
    }
    let session_set = std::env::var_os("BW_SESSION").is_some_and(|v| !v.is_empty());
    let stderr = masked_stderr(&out.stderr, &out.stdout);
    let status = describe_status(out.status);
    bail!(
        "{what}: bw:{item}: {}",
        bw_failure(&stderr, item, session_set, status)
    )
}

/// What went wrong, from `bw`'s stderr (its messages as the Bitwarden CLI prints them).
pub(super) fn bw_failure(stderr: &str, item: &str, session_set: bool, status: String) -> String {
    let first = stderr.lines().next().unwrap_or_default().trim();
    if first.starts_with("Vault is locked") || first.contains("vault is locked") {
        if session_set {
            "the Bitwarden vault is locked: BW_SESSION is set but not valid (expired, or from \
             another login); run `bw unlock --raw` and export its output as BW_SESSION"
                .to_string()
        } else {
            "the Bitwarden vault is locked and BW_SESSION is not set; run `bw unlock --raw` and \
             export its output as BW_SESSION"
                .to_string()
        }
    } else if first.starts_with("You are not logged in") {
        "the Bitwarden CLI is not logged in; run `bw login` (or `bw login --apikey`), then \
         `bw unlock --raw` and export BW_SESSION"
            .to_string()
    } else if first.starts_with("Not found") {
        format!("no Bitwarden login item named or with id `{item}` has a password")
    } else if first.starts_with("More than one result") {
        format!("more than one Bitwarden item matches `{item}`; use the item's id (`bw list items --search {item}`)")
    } else if first.starts_with("No password available") {
        format!("the Bitwarden item `{item}` has no password")
    } else if stderr.is_empty() {
        format!("`bw get password` printed no password ({status})")
    } else {
        format!("`bw get password` failed ({status}): {stderr}")
    }
}

fn stderr_suffix(stderr: &[u8], stdout: &[u8]) -> String {
    let text = masked_stderr(stderr, stdout);
    if text.is_empty() {
        String::new()
    } else {
        format!("; its stderr: {text}")
    }
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "unknown status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn first_line_is_the_key() {
        assert_eq!(first_line(b"sk-1\nsecond\n"), Some("sk-1".to_string()));
        assert_eq!(first_line(b"sk-2\r\n"), Some("sk-2".to_string()));
        assert_eq!(first_line(b"sk-3"), Some("sk-3".to_string()));
        assert_eq!(first_line(b"\nsk-4\n"), None);
        assert_eq!(first_line(b""), None);
        assert_eq!(first_line(b"   \n"), None);
    }

    #[test]
    fn stderr_is_masked_with_stdout_and_cut() {
        let s = masked_stderr(
            b"  error: got sk-canary-partial then died\n",
            b"sk-canary-partial\n",
        );
        assert_eq!(s, "error: got [redacted] then died");
        let long = "x".repeat(2000);
        assert_eq!(
            masked_stderr(long.as_bytes(), b"").len(),
            MAX_STDERR_SHOWN + 3
        );
    }

    #[test]
    fn environment_is_scrubbed_to_the_list() {
        for ok in [
            "PATH",
            "HOME",
            "BW_SESSION",
            "VAULT_ADDR",
            "PASSWORD_STORE_DIR",
            "OP_SERVICE_ACCOUNT_TOKEN",
        ] {
            assert!(passes(ok), "{ok}");
        }
        for no in [
            "HARNESS_LITELLM_KEY",
            "HARNESS_REDMINE_KEY",
            "OPENAI_API_KEY",
            "LD_PRELOAD",
            "PATHX",
            "SHELL",
        ] {
            assert!(!passes(no), "{no}");
        }
    }

    #[test]
    fn bw_messages_are_classified() {
        let s = |e: &str, session| bw_failure(e, "litellm", session, "exit code 1".into());
        assert!(s("Vault is locked.", false).contains("BW_SESSION is not set"));
        assert!(s("Vault is locked.", true).contains("not valid"));
        assert!(s("You are not logged in.", false).contains("bw login"));
        assert!(
            s("Not found.", false).contains("no Bitwarden login item named or with id `litellm`")
        );
        assert!(s(
            "More than one result was found. Try getting a specific object by `id` instead.",
            false
        )
        .contains("use the item's id"));
        assert!(s("No password available for this login.", false).contains("has no password"));
        assert_eq!(
            s("", false),
            "`bw get password` printed no password (exit code 1)"
        );
        assert_eq!(
            s("boom", false),
            "`bw get password` failed (exit code 1): boom"
        );
    }

    #[test]
    fn a_program_gets_no_stdin_and_a_scrubbed_environment() {
        let argv: Vec<String> = [
            "sh",
            "-c",
            "read x; echo \"[$x][${CARGO_MANIFEST_DIR-unset}][$BW_NOINTERACTION]\"",
        ]
        .map(String::from)
        .to_vec();
        // cargo sets CARGO_MANIFEST_DIR for the test process; it must not get through.
        let Output { stdout, status, .. } =
            run(&argv, None, &[("BW_NOINTERACTION", "true")], TIME_LIMIT).unwrap();
        assert!(status.success());
        assert_eq!(String::from_utf8_lossy(&stdout), "[][unset][true]\n");
    }

    #[test]
    fn a_slow_program_is_killed_at_the_limit() {
        let argv: Vec<String> = ["sh", "-c", "echo partial; sleep 30"]
            .map(String::from)
            .to_vec();
        let t = Instant::now();
        let ran = run(&argv, None, &[], Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let Err(e @ RunError::TimedOut { .. }) = ran else {
            panic!("{ran:?}")
        };
        assert_eq!(
            e.describe("sh"),
            "`sh` did not finish within 30s and was killed"
        );
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let argv = vec!["harness-surely-no-such-program".to_string()];
        assert!(matches!(
            run(&argv, None, &[], TIME_LIMIT),
            Err(RunError::NotFound)
        ));
    }
}
