//! Secrets, PURE parsing plus a thin env/file/process adapter: key refs (`env:`, `file:`,
//! `literal:`, `cmd:`, `bw:`) in, [`Secret`] values out, and the [`Redactor`] that masks them,
//! and their common encodings ([`encodings`]), in any text. Running a key program (`cmd:`,
//! `bw:`) is the adapter in `secrets/keycmd.rs`.
//!
//! A resolved secret never reaches `Debug`, `Display`, a log line, an error or a REPORT: the
//! only way to its text is [`Secret::expose`], called by the HTTP layer and the redactor.
//! An `env:` key leaves the process environment once read ([`KeyRef::resolve`]), and the
//! process is not dumpable ([`forbid_dumping`]), so no other process of the same user can
//! read the key from its memory or `/proc`.

pub mod encodings;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

mod keycmd;

/// Longest key harness accepts from a key ref, in bytes (16 KiB): real keys are well under
/// 1 KiB, and masking holds every key and its encoded forms (about 20 times its length).
pub const MAX_KEY_BYTES: usize = 16 * 1024;

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

    /// Resolves the ref now. `what` names the secret in errors (`litellm key`). An `env:`
    /// variable is removed from the process environment once read: no child started later
    /// can inherit it, whatever its environment filter; a second ref to the same name gets
    /// the value taken the first time.
    pub fn resolve(&self, what: &str) -> Result<Secret> {
        let value = match self {
            KeyRef::Env(name) => match take_env(name) {
                Ok(v) => v,
                Err(std::env::VarError::NotPresent) => {
                    bail!("{what}: environment variable {name} is not set")
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    bail!("{what}: environment variable {name} is not valid UTF-8")
                }
            },
            KeyRef::File(path) => {
                let text = crate::bounded::read_text(path, crate::bounded::KEY_FILE_MAX)
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
        if value.len() > MAX_KEY_BYTES {
            bail!(
                "{what}: {} is {} bytes, more than the {} a key may have",
                self.describe(),
                value.len(),
                crate::bounded::size(MAX_KEY_BYTES as u64)
            );
        }
        Ok(Secret(value))
    }
}

/// `env:` values already taken out of the environment, by variable name. The environment is
/// process-wide state already; this moves a key out of it into memory that no child inherits
/// and `/proc/PID/environ` does not show. (That file still shows the environment the process
/// started with; [`forbid_dumping`] makes it readable by root alone.)
static TAKEN: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

fn take_env(name: &str) -> Result<String, std::env::VarError> {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = taken.get(name) {
        return Ok(v.clone());
    }
    let value = std::env::var(name)?;
    // Keys are read early, before the runtime starts threads that read the environment.
    std::env::remove_var(name);
    taken.insert(name.to_string(), value.clone());
    Ok(value)
}

/// Marks this process non-dumpable: other processes of the same user can no longer attach to
/// it, read its memory or its `/proc/PID/environ`, and it leaves no core dump. Children get
/// the usual setting back when they exec.
pub fn forbid_dumping() -> std::io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes an integer and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Masks every known secret in text, longest first so a secret that contains another is
/// masked whole, then their encoded forms ([`encodings`]: reversed, hex, base64, separated).
/// Clones share their secrets: one added later (a key resolved after the narration started)
/// is masked by every clone, the stderr narration's included.
#[derive(Clone, Default)]
pub struct Redactor {
    masks: std::sync::Arc<std::sync::RwLock<Masks>>,
}

/// What a [`Redactor`] masks: the plain strings, longest first, and one matcher for the
/// encoded forms of every secret.
#[derive(Default)]
struct Masks {
    secrets: Vec<String>,
    encoded: Option<aho_corasick::AhoCorasick>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.read().secrets.len())
    }
}

/// What a masked secret is replaced with.
pub const MASK: &str = "[redacted]";

impl Redactor {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Masks> {
        // A panic while adding cannot leave the masks half-written (built, then assigned).
        self.masks.read().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, s: &str) {
        let mut masks = self.masks.write().unwrap_or_else(|e| e.into_inner());
        if !masks.secrets.iter().any(|x| x == s) {
            masks.secrets.push(s.to_string());
            masks.secrets.sort_by_key(|x| std::cmp::Reverse(x.len()));
            // The in-place URL markers (`:pw@`) are not secrets of their own to encode.
            let forms: Vec<Vec<u8>> = masks
                .secrets
                .iter()
                .filter(|x| !is_url_marker(x))
                .flat_map(|x| encodings::forms(x))
                .collect();
            masks.encoded = encodings::matcher(&forms);
        }
    }

    /// Adds a secret to mask from now on.
    pub fn add(&mut self, secret: &Secret) {
        let s = secret.expose();
        // Very short values would mask ordinary text everywhere; resolve() refuses empty ones
        // and a 1-3 character key is not a credential anyone should rely on.
        if s.len() >= 4 {
            self.insert(s);
        }
    }

    /// Masks the password of `url` (`http://user:PASSWORD@host`), as written and as
    /// percent-decoded: on its own (when long enough to be told from ordinary text) and
    /// always where it stands in a URL, so `http://user:[redacted]@host` is all that shows.
    pub fn add_url(&mut self, url: &str) {
        for password in url_passwords(url) {
            if password.len() >= 4 {
                self.insert(&password);
            } else {
                self.insert(&format!(":{password}@"));
            }
        }
    }

    /// True when no secret is registered.
    pub fn is_empty(&self) -> bool {
        self.read().secrets.is_empty()
    }

    /// Returns `text` with every secret, and every encoded form of one, replaced by
    /// `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let masks = self.read();
        let mut out = text.to_string();
        for s in &masks.secrets {
            if is_url_marker(s) {
                // A short URL password: masked in place, the user name and host kept.
                out = out.replace(s.as_str(), &format!(":{MASK}@"));
                continue;
            }
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        match &masks.encoded {
            Some(matcher) => encodings::mask(&out, matcher, MASK),
            None => out,
        }
    }

    /// Masks every string of a JSON value in place, object keys included, before it is
    /// escaped (a secret holding a quote or a backslash would not be found in the escaped
    /// text). Keys that become equal once masked keep the last value.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, mut v)| {
                        self.redact_json(&mut v);
                        (self.redact(&k), v)
                    })
                    .collect();
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Length of the longest suffix of `text` that is a proper prefix of some secret: text
    /// that a cut could leave as the first half of a secret. Linear in the secrets' length
    /// (KMP), whatever their shape.
    pub fn dangling_prefix_len(&self, text: &str) -> usize {
        let masks = self.read();
        masks
            .secrets
            .iter()
            .map(|s| {
                let window = &text.as_bytes()[text.len().saturating_sub(s.len())..];
                prefix_at_end(s.as_bytes(), window, |i| s.is_char_boundary(i))
            })
            .max()
            .unwrap_or(0)
    }

    /// Length of the longest prefix of `text` that is a proper suffix of some secret: text
    /// that a cut could leave as the second half of a secret. Linear, as above: the same
    /// search over both reversed.
    pub fn dangling_suffix_len(&self, text: &str) -> usize {
        let masks = self.read();
        masks
            .secrets
            .iter()
            .map(|s| {
                let reversed: Vec<u8> = s.bytes().rev().collect();
                let head = &text.as_bytes()[..text.len().min(s.len())];
                let window: Vec<u8> = head.iter().rev().copied().collect();
                prefix_at_end(&reversed, &window, |n| s.is_char_boundary(s.len() - n))
            })
            .max()
            .unwrap_or(0)
    }
}

/// The longest proper prefix of `pattern` (of a length `fits` accepts, besides 0) that
/// `text` ends with (PURE). Knuth-Morris-Pratt: linear in both lengths.
fn prefix_at_end(pattern: &[u8], text: &[u8], fits: impl Fn(usize) -> bool) -> usize {
    if pattern.len() < 2 {
        return 0;
    }
    // border[i]: the longest proper prefix of pattern[..=i] that is also its suffix.
    let mut border = vec![0usize; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = border[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        border[i] = k;
    }
    // Only the last len - 1 bytes can hold a proper prefix; reading no more keeps k < len.
    let mut k = 0;
    for &b in &text[text.len().saturating_sub(pattern.len() - 1)..] {
        while k > 0 && b != pattern[k] {
            k = border[k - 1];
        }
        if b == pattern[k] {
            k += 1;
        }
    }
    while k > 0 && !fits(k) {
        k = border[k - 1];
    }
    k
}

/// A short URL password kept as `:PASSWORD@`, masked only where it stands in a URL.
fn is_url_marker(s: &str) -> bool {
    s.starts_with(':') && s.ends_with('@')
}

/// `url` with the password of its userinfo replaced by `[redacted]`, for messages about a
/// URL that is not valid yet (PURE).
pub fn masked_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(password) = url_passwords(url).first() {
        out = out.replace(&format!(":{password}@"), &format!(":{MASK}@"));
    }
    out
}

/// The password of a URL's userinfo, as written and percent-decoded (PURE).
fn url_passwords(url: &str) -> Vec<String> {
    let Some((_, rest)) = url.split_once("://") else {
        return Vec::new();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return Vec::new();
    };
    let Some((_, password)) = userinfo.split_once(':') else {
        return Vec::new();
    };
    if password.is_empty() {
        return Vec::new();
    }
    let mut out = vec![password.to_string()];
    let decoded = percent_decode(password);
    if decoded != password && !decoded.is_empty() {
        out.push(decoded);
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
    fn url_passwords_are_masked_in_place_and_everywhere() {
        let mut r = Redactor::default();
        r.add_url("http://bot:s3cr%40t-pw@127.0.0.1:4000/v1");
        r.add_url("http://me:ab@localhost/");
        r.add_url("http://nopassword@host/ and http://host:80/x");
        let shared = r.clone();
        assert_eq!(
            shared.redact("GET http://bot:s3cr%40t-pw@127.0.0.1:4000/v1/models: s3cr@t-pw"),
            "GET http://bot:[redacted]@127.0.0.1:4000/v1/models: [redacted]"
        );
        assert_eq!(
            r.redact("http://me:ab@localhost/ about ab"),
            "http://me:[redacted]@localhost/ about ab"
        );
        assert_eq!(url_passwords("http://u@h:1/a:b@c"), Vec::<String>::new());
        assert_eq!(masked_url("http://u:p w@h/?x"), "http://u:[redacted]@h/?x");
        assert_eq!(url_passwords("http://u:p%zz@h"), vec!["p%zz".to_string()]);
    }

    #[test]
    fn clones_share_what_is_added_later() {
        let mut r = Redactor::default();
        let narration = r.clone();
        r.add(&Secret::new("sk-later-added"));
        assert_eq!(narration.redact("x sk-later-added"), "x [redacted]");
    }

    #[test]
    fn redactor_masks_encoded_forms_everywhere_it_is_used() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-canary-0123456789"));
        assert_eq!(r.redact("a 9876543210-yranac-ks b"), "a [redacted] b");
        assert_eq!(
            r.redact("x c2stY2FuYXJ5LTAxMjM0NTY3ODk= y"),
            // The last character also holds bits of whatever follows the key: not masked.
            "x [redacted]k= y"
        );
        assert_eq!(r.redact("plain text stays"), "plain text stays");
    }

    #[test]
    fn env_keys_leave_the_environment_once_read() {
        // A name no other test uses: the environment is shared by the test threads.
        let name = "HARNESS_TEST_SECRETS_TAKE_ENV";
        std::env::set_var(name, "sk-canary-env-taken");
        let first = KeyRef::Env(name.into()).resolve("k").unwrap();
        assert_eq!(first.expose(), "sk-canary-env-taken");
        assert!(std::env::var_os(name).is_none());
        let again = KeyRef::Env(name.into()).resolve("k").unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn dangling_halves_are_found_in_linear_time_for_any_key_shape() {
        // Border chains are where a naive search goes quadratic: a key of one repeated
        // character, and a key whose every prefix is a border of a longer one.
        for key in ["a".repeat(20_000), "ab".repeat(10_000), "é".repeat(5_000)] {
            let mut r = Redactor::default();
            r.add(&Secret::new(key.clone()));
            let half = &key[..key.len() / 2];
            assert_eq!(r.dangling_prefix_len(&format!("out {half}")), half.len());
            assert_eq!(r.dangling_suffix_len(&format!("{half} out")), half.len());
            // The key itself ends with its longest proper border.
            let unit = if key.starts_with("ab") {
                2
            } else {
                key.chars().last().unwrap().len_utf8()
            };
            assert_eq!(r.dangling_prefix_len(&key), key.len() - unit);
            assert_eq!(r.dangling_prefix_len("nothing"), 0);
        }
        // A cut inside a multi-byte character is no prefix: the longest whole one is.
        let mut r = Redactor::default();
        r.add(&Secret::new("ééééé"));
        assert_eq!(r.dangling_prefix_len("x éé"), 4);
        assert_eq!(r.dangling_suffix_len("ééé x"), 6);
    }

    #[test]
    fn keys_over_the_limit_are_refused_naming_the_ref() {
        let base = base();
        let long =
            KeyRef::parse(&format!("literal:{}", "k".repeat(MAX_KEY_BYTES + 1)), &base).unwrap();
        let err = format!("{:#}", long.resolve("litellm key").unwrap_err());
        assert_eq!(
            err,
            "litellm key: literal:[redacted] is 16385 bytes, more than the 16 KiB a key may have"
        );
        let fits = KeyRef::parse(&format!("literal:{}", "k".repeat(MAX_KEY_BYTES)), &base);
        assert!(fits.unwrap().resolve("litellm key").is_ok());
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
