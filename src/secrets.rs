//! Secrets, PURE parsing plus a thin env/file adapter: key refs (`env:`, `file:`, `literal:`,
//! `cmd:`, `bw:`) in, [`Secret`] values out, and the [`Redactor`] that masks them in any text.
//! Running a key program (`cmd:`, `bw:`) is the adapter in `secrets/keycmd.rs`.
//!
//! A resolved secret never reaches `Debug`, `Display`, a log line, an error or a REPORT: the
//! only way to its text is [`Secret::expose`], called by the HTTP layer and the redactor.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

mod keycmd;

/// A resolved secret value; prints as `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value; an empty value is refused by [`KeyRef::resolve`], not here.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret's text. Only for the HTTP header and the redactor.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where a secret comes from, as written in the config (`*_ref` keys).
#[derive(Clone, PartialEq, Eq)]
pub enum KeyRef {
    /// `env:NAME`: the environment variable NAME.
    Env(String),
    /// `file:PATH`: the file's content, trailing newline removed; PATH relative to the config.
    File(PathBuf),
    /// `literal:VALUE`: the value itself (last resort; it sits in the config file).
    Literal(Secret),
    /// `cmd:PROGRAM ARGS`: the first line of the program's stdout (split like a shell would,
    /// but run without one), run in `dir`, the config's directory, so relative paths mean what
    /// they mean for `file:`; covers `pass show`, `vault kv get -field=`, `sops -d`, `op read`.
    Command { argv: Vec<String>, dir: PathBuf },
    /// `bw:ITEM`: the password of a Bitwarden item, from `bw get password ITEM`.
    Bitwarden(String),
}

impl fmt::Debug for KeyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl KeyRef {
    /// Parses a key ref; `base` is the config file's directory, for relative `file:` paths.
    /// The error never repeats a `literal:` value.
    pub fn parse(text: &str, base: &Path) -> Result<KeyRef, String> {
        let Some((scheme, rest)) = text.split_once(':') else {
            return Err(
                "must start with env:, file:, literal:, cmd: or bw: (for example env:HARNESS_LITELLM_KEY)"
                    .to_string(),
            );
        };
        match scheme {
            "env" if is_env_name(rest) => Ok(KeyRef::Env(rest.to_string())),
            "env" => Err(format!(
                "env:{rest} is not a valid environment variable name"
            )),
            "file" if !rest.is_empty() => Ok(KeyRef::File(base.join(rest))),
            "literal" if !rest.is_empty() => Ok(KeyRef::Literal(Secret::new(rest))),
            "bw" if !rest.trim().is_empty() => Ok(KeyRef::Bitwarden(rest.to_string())),
            "cmd" => match shell_words::split(rest) {
                Ok(argv) if !argv.is_empty() => Ok(KeyRef::Command {
                    argv,
                    dir: base.to_path_buf(),
                }),
                Ok(_) => Err("cmd: needs a program after the colon (for example cmd:pass show harness/litellm)".to_string()),
                Err(e) => Err(format!("cmd:{rest}: {e} (quote as in a shell: 'a b' or \"a b\")")),
            },
            "file" | "literal" | "bw" => Err(format!("{scheme}: needs a value after the colon")),
            _ => Err(format!(
                "unknown key ref scheme `{scheme}:`; use env:, file:, literal:, cmd: or bw:"
            )),
        }
    }

    /// A description safe to print: names the variable or file, never a literal's value.
    pub fn describe(&self) -> String {
        match self {
            KeyRef::Env(name) => format!("env:{name}"),
            KeyRef::File(path) => format!("file:{}", path.display()),
            KeyRef::Literal(_) => "literal:[redacted]".to_string(),
            KeyRef::Command { argv, .. } => format!("cmd:{}", shell_words::join(argv)),
            KeyRef::Bitwarden(r) => format!("bw:{r}"),
        }
    }

    /// Resolves the ref now. `what` names the secret in errors (`litellm key`).
    pub fn resolve(&self, what: &str) -> Result<Secret> {
        let value = match self {
            KeyRef::Env(name) => match std::env::var(name) {
                Ok(v) => v,
                Err(std::env::VarError::NotPresent) => {
                    bail!("{what}: environment variable {name} is not set")
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    bail!("{what}: environment variable {name} is not valid UTF-8")
                }
            },
            KeyRef::File(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("{what}: cannot read key file {}", path.display()))?;
                text.trim_end_matches(['\n', '\r']).to_string()
            }
            KeyRef::Literal(secret) => secret.expose().to_string(),
            KeyRef::Command { argv, dir } => {
                keycmd::resolve_cmd(argv, dir, &self.describe(), what)?.0
            }
            KeyRef::Bitwarden(item) => keycmd::resolve_bw(item, what)?.0,
        };
        if value.trim().is_empty() {
            bail!("{what}: {} is empty", self.describe());
        }
        Ok(Secret(value))
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Masks every known secret in text, longest first so a secret that contains another is
/// masked whole.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

/// What a masked secret is replaced with.
pub const MASK: &str = "[redacted]";

impl Redactor {
    /// Adds a secret to mask from now on.
    pub fn add(&mut self, secret: &Secret) {
        let s = secret.expose();
        // Very short values would mask ordinary text everywhere; resolve() refuses empty ones
        // and a 1-3 character key is not a credential anyone should rely on.
        if s.len() >= 4 && !self.secrets.iter().any(|x| x == s) {
            self.secrets.push(s.to_string());
            self.secrets.sort_by_key(|x| std::cmp::Reverse(x.len()));
        }
    }

    /// True when no secret is registered.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Returns `text` with every secret replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }

    /// Length of the longest suffix of `text` that is a proper prefix of some secret: text
    /// that a cut could leave as the first half of a secret.
    pub fn dangling_prefix_len(&self, text: &str) -> usize {
        let mut best = 0;
        for s in &self.secrets {
            for (i, _) in s.char_indices().skip(1) {
                if i > best && text.ends_with(&s[..i]) {
                    best = i;
                }
            }
        }
        best
    }

    /// Length of the longest prefix of `text` that is a proper suffix of some secret: text
    /// that a cut could leave as the second half of a secret.
    pub fn dangling_suffix_len(&self, text: &str) -> usize {
        let mut best = 0;
        for s in &self.secrets {
            for (i, _) in s.char_indices().skip(1) {
                let tail = &s[i..];
                if tail.len() > best && text.starts_with(tail) {
                    best = tail.len();
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn base() -> PathBuf {
        PathBuf::from("/cfg")
    }

    #[test]
    fn parses_each_scheme() {
        assert_eq!(
            KeyRef::parse("env:HARNESS_LITELLM_KEY", &base()),
            Ok(KeyRef::Env("HARNESS_LITELLM_KEY".into()))
        );
        assert_eq!(
            KeyRef::parse("file:keys/llm", &base()),
            Ok(KeyRef::File(PathBuf::from("/cfg/keys/llm")))
        );
        assert_eq!(
            KeyRef::parse("file:/abs/k", &base()),
            Ok(KeyRef::File(PathBuf::from("/abs/k")))
        );
        assert_eq!(
            KeyRef::parse("literal:sk-1", &base()),
            Ok(KeyRef::Literal(Secret::new("sk-1")))
        );
        assert_eq!(
            KeyRef::parse("bw:item/x", &base()),
            Ok(KeyRef::Bitwarden("item/x".into()))
        );
    }

    #[test]
    fn rejects_bad_refs_without_echoing_literals() {
        assert!(KeyRef::parse("HARNESS_KEY", &base()).is_err());
        assert!(KeyRef::parse("env:1BAD", &base()).is_err());
        assert!(KeyRef::parse("env:", &base()).is_err());
        assert!(KeyRef::parse("literal:", &base()).is_err());
        let err = KeyRef::parse("vault:sk-canary-zz", &base())
            .err()
            .unwrap_or_default();
        assert!(err.contains("vault"), "{err}");
    }

    #[test]
    fn parses_cmd_like_a_shell_without_one() {
        let argv = |s: &str| match KeyRef::parse(s, &base()) {
            Ok(KeyRef::Command { argv, dir }) => {
                assert_eq!(dir, base());
                argv
            }
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            argv("cmd:pass show harness/litellm"),
            ["pass", "show", "harness/litellm"]
        );
        assert_eq!(
            argv("cmd:vault kv get -field=key 'secret/harness llm'"),
            ["vault", "kv", "get", "-field=key", "secret/harness llm"]
        );
        assert_eq!(
            argv(r#"cmd:op read "op://Ops/LiteLLM/credential""#),
            ["op", "read", "op://Ops/LiteLLM/credential"]
        );
        // Shell syntax is not interpreted: no expansion, no pipes, no redirections.
        assert_eq!(
            argv("cmd:sops -d $HOME/k | head >x"),
            ["sops", "-d", "$HOME/k", "|", "head", ">x"]
        );
        assert!(KeyRef::parse("cmd:", &base()).is_err());
        assert!(KeyRef::parse("cmd:   ", &base()).is_err());
        let err = KeyRef::parse("cmd:pass show 'unclosed", &base()).unwrap_err();
        assert!(err.contains("cmd:"), "{err}");
        assert!(KeyRef::parse("bw:", &base()).is_err());
        assert!(KeyRef::parse("bw: ", &base()).is_err());
    }

    #[test]
    fn describe_names_the_program_and_item() {
        let c = KeyRef::parse("cmd:vault kv get 'secret/a b'", &base()).unwrap();
        assert_eq!(c.describe(), "cmd:vault kv get 'secret/a b'");
        assert_eq!(KeyRef::Bitwarden("LiteLLM".into()).describe(), "bw:LiteLLM");
    }

    #[test]
    fn cmd_takes_the_first_line_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        let run = |s: &str| KeyRef::parse(s, dir.path()).unwrap().resolve("litellm key");
        let key = run("cmd:printf 'sk-canary-cmd\\nsecond line\\n'").unwrap();
        assert_eq!(key.expose(), "sk-canary-cmd");
        // It runs in the config's directory, like file: paths.
        std::fs::write(dir.path().join("k.txt"), "sk-canary-in-dir\n").unwrap();
        assert_eq!(run("cmd:cat k.txt").unwrap().expose(), "sk-canary-in-dir");
        let err = format!(
            "{:#}",
            run("cmd:harness-surely-no-such-program x").unwrap_err()
        );
        assert!(err.contains("not found"), "{err}");
        // A key printed before the failure is masked in the stderr the error shows.
        let failing =
            r#"cmd:sh -c 'k=sk-canary-$((6*7)); echo $k; echo "failed after $k" >&2; exit 3'"#;
        let err = format!("{:#}", run(failing).unwrap_err());
        assert!(err.contains("exit code 3"), "{err}");
        assert!(err.contains("failed after [redacted]"), "{err}");
        assert!(!err.contains("sk-canary-42"), "{err}");
        let err = format!("{:#}", run("cmd:true").unwrap_err());
        assert!(err.contains("printed no key"), "{err}");
    }

    #[test]
    fn missing_env_names_the_variable() {
        let err = KeyRef::Env("HARNESS_TEST_SURELY_UNSET_VAR".into())
            .resolve("litellm key")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "litellm key: environment variable HARNESS_TEST_SURELY_UNSET_VAR is not set"
        );
    }

    #[test]
    fn file_ref_trims_newline_and_reports_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "sk-canary-file\n").unwrap();
        let s = KeyRef::File(p).resolve("k").unwrap();
        assert_eq!(s.expose(), "sk-canary-file");
        let err = KeyRef::File(dir.path().join("nope"))
            .resolve("redmine key")
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot read key file"),
            "{err:#}"
        );
    }

    #[test]
    fn secret_debug_and_display_are_redacted() {
        let s = Secret::new("sk-canary-123");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        let r = KeyRef::Literal(s);
        assert_eq!(format!("{r:?}"), "literal:[redacted]");
    }

    #[test]
    fn redactor_masks_longest_first() {
        let mut r = Redactor::default();
        r.add(&Secret::new("abcd"));
        r.add(&Secret::new("abcdefgh"));
        assert_eq!(
            r.redact("x abcdefgh y abcd z"),
            "x [redacted] y [redacted] z"
        );
    }

    #[test]
    fn redactor_finds_dangling_halves() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-canary-42"));
        assert_eq!(r.dangling_prefix_len("output sk-can"), 6);
        assert_eq!(r.dangling_suffix_len("ary-42 more"), 6);
        assert_eq!(r.dangling_prefix_len("nothing here"), 0);
    }
}
