//! Preflight, before intake and before any request: what can fail without the model, as ONE
//! list. `harness check` shows every entry; `harness once` stops at the first failure, before
//! an issue is claimed and before the first token. Filesystem adapter (the report dir and the
//! `--record` target are probed with a temp file that is removed again; directories are
//! looked at; under Landlock the commands' read set is resolved); [`header_safe`] is PURE.

use std::path::Path;

use anyhow::{anyhow, bail, Context};

use crate::atomic::TEMP_PREFIX;
use crate::config::Config;
use crate::exit::{Failure, Stage};
use crate::secrets::{KeyRef, Redactor, Secret};

/// One entry of the list.
#[derive(Debug)]
pub(crate) struct Check {
    /// What was checked, as `harness check` labels it (`report dir`, `work root`, ...).
    pub what: &'static str,
    /// The stage a failure belongs to in `harness once` (its exit code).
    pub stage: Stage,
    /// What was found: a line for `harness check`, or what is wrong, naming the key to fix.
    pub outcome: anyhow::Result<String>,
}

/// The local checks of `cfg` (no network, no key): the report dir, the inbox dir, and with the bash tool its
/// work root, write roots and (under Landlock) read set; with `[workspace]`, its repository,
/// base branch and remote; with `record`, the `--record` target.
pub(crate) fn local(cfg: &Config, record: Option<&Path>) -> Vec<Check> {
    let mut checks = vec![Check {
        what: "report dir",
        stage: Stage::Writeback,
        outcome: report_dir(&cfg.report_dir)
            .map(|()| format!("{} is writable", cfg.report_dir.display())),
    }];
    if let Some(inbox) = &cfg.inbox {
        checks.push(Check {
            what: "inbox dir",
            stage: Stage::Config,
            outcome: if inbox.dir.is_dir() {
                Ok(format!("{} is a directory", inbox.dir.display()))
            } else {
                Err(anyhow!(
                    "[inbox].dir {} is not a directory (config {})",
                    inbox.dir.display(),
                    cfg.path.display()
                ))
            },
        });
    }
    if cfg.bash.enabled {
        let is_dir = |what: &'static str, key: &str, dir: &Path| Check {
            what,
            stage: Stage::Config,
            outcome: if dir.is_dir() {
                Ok(format!("{} is a directory", dir.display()))
            } else {
                Err(anyhow!(
                    "{key} {} is not a directory (config {})",
                    dir.display(),
                    cfg.path.display()
                ))
            },
        };
        checks.push(is_dir("work root", "work_root", &cfg.work_root));
        for root in &cfg.bash.write_roots {
            checks.push(is_dir("write root", "[tools.bash].write_roots:", root));
        }
        checks.extend(reads(cfg));
        checks.extend(writes(cfg));
    }
    if let Some(ws) = &cfg.workspace {
        checks.push(Check {
            what: "workspace",
            stage: Stage::Config,
            outcome: crate::workspace::preflight(ws)
                .with_context(|| format!("config {}", cfg.path.display())),
        });
    }
    if let Some(path) = record {
        checks.push(Check {
            what: "record",
            stage: Stage::Usage,
            outcome: not_an_input(path, cfg)
                .and_then(|()| writable_target(path))
                .map(|()| format!("{} can be written", path.display()))
                .with_context(|| format!("--record {}", path.display())),
        });
    }
    checks
}

/// Under Landlock, the read set of the commands: a read root that would expose a key file,
/// the config or the report dir fails, naming its key (Landlock can only allow).
fn reads(cfg: &Config) -> Option<Check> {
    use crate::tools::sandbox;
    if !confined(cfg) {
        return None;
    }
    Some(Check {
        what: "reads",
        stage: Stage::Config,
        outcome: sandbox::reads::read_set(&(&cfg.bash).into(), &cfg.work_root, None)
            .map(|set| set.lines.join("; "))
            .map_err(|problems| anyhow!("{}", problems.join("; "))),
    })
}

/// Under Landlock, what commands must not change although it lies inside a write root (the
/// config, the report dir, a cassette): read-only mounts, or a failure naming what to move
/// when this system cannot make them (no user namespaces).
fn writes(cfg: &Config) -> Option<Check> {
    use crate::tools::sandbox;
    if !confined(cfg) {
        return None;
    }
    Some(Check {
        what: "writes",
        stage: Stage::Config,
        outcome: sandbox::writes_line(&(&cfg.bash).into(), &cfg.work_root)
            .with_context(|| format!("config {}", cfg.path.display())),
    })
}

/// Whether commands run under Landlock in an existing work root (a missing one is the `work
/// root` entry's failure already).
fn confined(cfg: &Config) -> bool {
    use crate::tools::sandbox;
    let status = sandbox::decide(cfg.bash.sandbox, sandbox::kernel_abi(), cfg.bash.network);
    matches!(status, Ok(sandbox::Status::Landlock { .. })) && cfg.work_root.is_dir()
}

/// The first failed check as the run's failure.
pub(crate) fn first_failure(checks: Vec<Check>) -> Result<(), Failure> {
    match checks.into_iter().find(|c| c.outcome.is_err()) {
        Some(Check {
            stage,
            outcome: Err(error),
            ..
        }) => Err(Failure { stage, error }),
        Some(_) | None => Ok(()),
    }
}

/// With `[forge]`: its token resolved (it joins `redactor`) and the client built; the one
/// place `harness once`, `harness check` and `harness writeback` get it from.
pub(crate) fn forge_client(
    cfg: &Config,
    redactor: &mut Redactor,
) -> Option<anyhow::Result<crate::forge::client::ForgeClient>> {
    let forge = cfg.forge.as_ref()?;
    Some(
        key(
            &forge.token_ref,
            "forge token",
            "[forge].token_ref",
            &cfg.path,
            redactor,
        )
        .and_then(|token| crate::forge::client::ForgeClient::new(forge, token, redactor.clone())),
    )
}

/// With `[redmine]` (`rm`): its key resolved (it joins `redactor`) and the client built; the
/// one place `harness once` and `harness writeback` get it from.
pub(crate) fn redmine_client(
    cfg: &Config,
    rm: &crate::config::RedmineConfig,
    redactor: &mut Redactor,
) -> anyhow::Result<crate::redmine::client::RedmineClient> {
    let key = key(
        &rm.key_ref,
        "redmine key",
        "[redmine].key_ref",
        &cfg.path,
        redactor,
    )?;
    crate::redmine::client::RedmineClient::new(rm, key, redactor.clone())
}

/// Resolves the key of `key_ref` (the config's `config_key`, such as `[litellm].key_ref`, in
/// the config file `config`) and proves it can be sent: an HTTP header value holds no line
/// break or other control character. The key joins `redactor` as soon as it is read. A ref
/// that does not resolve names the key and the config file, since a config may hold several
/// refs and an operator's first fix is in that file or in what it points at.
pub(crate) fn key(
    key_ref: &KeyRef,
    label: &str,
    config_key: &str,
    config: &Path,
    redactor: &mut Redactor,
) -> anyhow::Result<Secret> {
    let key = key_ref
        .resolve(label)
        .map_err(|e| anyhow!("{e:#} ({config_key} in {})", config.display()))?;
    redactor.add(&key);
    if let Some(why) = key_problem(key.expose()) {
        bail!("{config_key} ({}): {why}", key_ref.describe());
    }
    Ok(key)
}

/// Why a resolved key cannot be sent as it is, in words that never show it: a control
/// character (a line break would end the header), a non-ASCII character or blanks at either
/// end. API keys are ASCII; a byte order mark or a zero-width space pasted with one is sent
/// as bytes a peer may echo back decoded otherwise, where the masking no longer finds the
/// key (an echoing proxy showed the rest of it), and the key is refused anyway.
pub(crate) fn key_problem(value: &str) -> Option<String> {
    if !header_safe(value) {
        return Some(
            "the key is not a valid HTTP header value (it holds a line break or another control character)"
                .into(),
        );
    }
    if let Some((at, c)) = value.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
        // Invisible characters are named; any other may be part of the secret.
        let which = match c {
            '\u{feff}' => " (U+FEFF, a byte order mark)".to_string(),
            '\u{a0}' | '\u{200b}'..='\u{200d}' | '\u{2060}' => {
                format!(" (U+{:04X}, an invisible space)", c as u32)
            }
            _ => String::new(),
        };
        return Some(format!(
            "the key holds a non-ASCII character{which} at character {}; API keys are ASCII: remove it where the key is kept",
            at + 1
        ));
    }
    if value.trim() != value {
        return Some(
            "the key begins or ends with blanks; remove them where the key is kept".into(),
        );
    }
    // The redactor leaves values this short alone (they would mask ordinary text), so such
    // a key would show wherever a peer echoed it.
    if value.len() < 4 {
        return Some(
            "the key is shorter than 4 characters: too short to be masked in outputs, and no real key"
                .into(),
        );
    }
    None
}

/// Whether `value` can be an HTTP header value as sent: visible ASCII, spaces and tabs, or
/// bytes of non-ASCII text; no control characters (a line break would end the header).
pub(crate) fn header_safe(value: &str) -> bool {
    reqwest::header::HeaderValue::from_str(value).is_ok()
}

/// The report dir exists as a directory (created if missing) that a REPORT can be written in.
fn report_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.as_os_str().is_empty() {
        bail!("report_dir is empty");
    }
    if dir.exists() && !dir.is_dir() {
        bail!(
            "cannot create report dir {}: report_dir names a file, not a directory",
            dir.display()
        );
    }
    crate::report::prepare_dir(dir)
}

/// `path` is none of harness's own input files: not the config file, not a key file
/// (`--record harness.toml` replaced the config with a cassette, exit 0).
fn not_an_input(path: &Path, cfg: &Config) -> anyhow::Result<()> {
    let input = cfg
        .bash
        .never_read
        .iter()
        .filter(|n| **n != crate::config::NeverRead::cassette(path) && !n.path.is_dir())
        .find(|n| crate::atomic::lies_in(path, &n.path));
    match input {
        Some(n) => bail!(
            "is {} ({}), which harness reads; write it elsewhere",
            n.what,
            n.path.display()
        ),
        None => Ok(()),
    }
}

/// A file can be written atomically at `path`: it is not a directory, and a temp file can be
/// created beside it (where the atomic write puts its temp file).
fn writable_target(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!("is a directory");
    }
    crate::atomic::check_target(path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map(drop)
        .with_context(|| format!("cannot write in {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ascii_without_blanks_at_the_ends() {
        assert_eq!(key_problem("sk-abc123"), None);
        let bom = key_problem("\u{feff}sk-abc").unwrap();
        assert!(
            bom.contains("U+FEFF, a byte order mark) at character 1"),
            "{bom}"
        );
        let zw = key_problem("sk\u{200b}abc").unwrap();
        assert!(
            zw.contains("U+200B, an invisible space) at character 3"),
            "{zw}"
        );
        // A visible non-ASCII character is not shown: it may be part of the secret.
        let e = key_problem("sk-é").unwrap();
        assert!(
            e.contains("non-ASCII character at character 4") && !e.contains('é'),
            "{e}"
        );
        assert!(key_problem(" sk-abc").unwrap().contains("blanks"));
        assert!(key_problem("sk-abc\t").unwrap().contains("blanks"));
        assert!(key_problem("two\nlines")
            .unwrap()
            .contains("control character"));
        assert!(key_problem("abc").unwrap().contains("shorter than 4"));
        assert_eq!(key_problem("abcd"), None);
    }

    #[test]
    fn header_values_hold_no_control_characters() {
        assert!(header_safe("sk-abc123"));
        assert!(header_safe("with space\tand tab"));
        assert!(!header_safe("two\nlines"));
        assert!(!header_safe("cr\r"));
        assert!(!header_safe("nul\0"));
    }

    #[test]
    fn a_record_target_must_be_writable() {
        let dir = tempfile::tempdir().unwrap();
        assert!(writable_target(&dir.path().join("c.json")).is_ok());
        assert!(writable_target(dir.path()).is_err());
        std::fs::write(dir.path().join("file"), "x").unwrap();
        let e = writable_target(&dir.path().join("file/c.json")).unwrap_err();
        assert!(format!("{e:#}").contains("cannot write in"), "{e:#}");
        assert!(writable_target(&dir.path().join("missing/c.json")).is_err());
        let e = writable_target(Path::new("/dev/full")).unwrap_err();
        assert!(format!("{e:#}").contains("is a device"), "{e:#}");
        // Nothing is left behind by the probe.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_report_dir_that_is_a_file_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("reports");
        std::fs::write(&file, "x").unwrap();
        let e = report_dir(&file).unwrap_err().to_string();
        assert!(e.contains("report_dir names a file"), "{e}");
        assert!(report_dir(Path::new("")).is_err());
        assert!(report_dir(&dir.path().join("new")).is_ok());
    }
}
