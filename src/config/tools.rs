//! Config stage, PURE: `[tools.bash]` (the policy, its examples, the sandbox, the read,
//! write and exec roots, the Unix sockets) and `[tools.files]`; raw structs in, the
//! resolved [`BashConfig`] and [`FilesConfig`] out, every problem by key.

use std::path::{Path, PathBuf};

use super::raw::*;
use super::validate::Validator;
use super::*;
use harness_gate::{self as gate, Rule, Verdict};

impl Validator {
    /// `[tools.bash]` and `[tools.files]`; the file tools need the bash tool.
    pub(super) fn tools(&mut self, raw: RawTools, work_root: &Path) -> (BashConfig, FilesConfig) {
        let files_on = raw
            .files
            .as_ref()
            .and_then(|f| f.enabled)
            .unwrap_or(FilesConfig::default().enabled);
        let mut bash = self.bash(raw.bash.unwrap_or_default(), files_on);
        // `harness gate` judges as a turn does: an absolute path under the work root names
        // the relative one (a turn's tool sets the real root it runs in, the worktree too).
        bash.policy.work_root = Some(work_root.display().to_string());
        let files = self.files(raw.files.unwrap_or_default());
        if files.enabled && !bash.enabled {
            self.problem(
                "[tools.files].enabled",
                "the file tools come with the tool set: they need [tools.bash] enabled = true",
            );
        }
        (bash, files)
    }

    /// `[tools.bash].sandbox`: `auto` (default), `landlock` or `off`.
    fn sandbox_mode(&mut self, raw: Option<&str>) -> SandboxMode {
        match raw {
            None | Some("auto") => SandboxMode::Auto,
            Some("landlock") => SandboxMode::Landlock,
            Some("off") => SandboxMode::Off,
            Some(other) => {
                self.problem(
                    "[tools.bash].sandbox",
                    format!("must be \"auto\", \"landlock\" or \"off\", got {other:?}"),
                );
                SandboxMode::Auto
            }
        }
    }

    fn bash(&mut self, mut raw: RawBash, file_tools: bool) -> BashConfig {
        let policy = self.bash_policy(&mut raw, file_tools);
        let sandbox = self.sandbox_mode(raw.sandbox.as_deref());
        let write_roots = self.path_list("[tools.bash].write_roots", raw.write_roots);
        let read_roots = self.read_roots(raw.read_roots.take());
        let exec_roots = self.path_list("[tools.bash].exec_roots", raw.exec_roots);
        let unix_sockets = self.socket_names(raw.unix_sockets);
        let (network, egress) = self.network(raw.network, raw.egress);
        BashConfig {
            enabled: raw.enabled.unwrap_or(true),
            timeout: secs(self.int_in("[tools.bash].timeout_secs", raw.timeout_secs, 60, 1, 86400)),
            max_output_bytes: self.int_in(
                "[tools.bash].max_output_bytes",
                raw.max_output_bytes,
                100_000,
                256,
                64 * 1024 * 1024,
            ) as usize,
            policy,
            sandbox,
            network,
            egress,
            write_roots,
            read_roots,
            unix_sockets,
            exec_roots,
            never_read: Vec::new(),
            inputs: Vec::new(),
            attachments: None,
        }
    }

    /// `[tools.bash]`'s policy: `default`, `preset`, the rules, `env_allow`, and the
    /// examples checked against the result.
    fn bash_policy(&mut self, raw: &mut RawBash, file_tools: bool) -> Policy {
        let default = match raw.default.take().as_deref() {
            None => None,
            Some("deny") => Some(Verdict::Deny),
            Some("allow") => Some(Verdict::Allow),
            Some(other) => {
                self.problem(
                    "[tools.bash].default",
                    format!("must be \"allow\" or \"deny\", got {other:?}"),
                );
                Some(Verdict::Deny)
            }
        };
        let before = self.problems.len();
        let preset = raw.preset.take().as_deref().and_then(|name| {
            let found = gate::presets::preset(name);
            if found.is_none() {
                self.problem("[tools.bash].preset", gate::presets::unknown_preset(name));
            }
            found
        });
        let allow = self.rules("[tools.bash].allow", raw.allow.take().unwrap_or_default());
        let deny = self.rules("[tools.bash].deny", raw.deny.take().unwrap_or_default());
        let env_allow = self.env_allow(raw.env_allow.take().unwrap_or_default());
        let mut policy = match preset {
            Some(p) => gate::presets::merge(p, allow, deny, default, raw.write_redirects),
            None => Policy {
                default: default.unwrap_or(Verdict::Deny),
                allow,
                deny,
                write_redirects: raw.write_redirects.unwrap_or(false),
                env_allow: Vec::new(),
                file_tools: false,
                work_root: None,
            },
        };
        policy.env_allow = env_allow;
        policy.file_tools = file_tools;
        // With a broken rule the policy is not the one the user wrote: its examples would
        // fail for the wrong reason.
        if self.problems.len() == before {
            self.examples(
                &policy,
                "examples_allow",
                raw.examples_allow.take(),
                Verdict::Allow,
            );
            self.examples(
                &policy,
                "examples_deny",
                raw.examples_deny.take(),
                Verdict::Deny,
            );
        }
        policy
    }

    /// `[tools.bash].read_roots`: `@system` and paths (default `@system`).
    fn read_roots(&mut self, raw: Option<Vec<String>>) -> Vec<ReadRoot> {
        match raw {
            None => vec![ReadRoot::System],
            Some(roots) => roots
                .into_iter()
                .enumerate()
                .filter_map(|(i, root)| match root.as_str() {
                    "@system" => Some(ReadRoot::System),
                    r if r.trim().is_empty() => {
                        self.problem(
                            &format!("[tools.bash].read_roots[{i}]"),
                            "must not be empty",
                        );
                        None
                    }
                    r if r.starts_with('@') => {
                        self.problem(
                            &format!("[tools.bash].read_roots[{i}]"),
                            format!("{r:?}: the only @ name is \"@system\""),
                        );
                        None
                    }
                    r => Some(ReadRoot::Path(self.path(Some(r.to_string()), "."))),
                })
                .collect(),
        }
    }

    /// A list of paths, each resolved against the config's directory; an empty entry is a
    /// problem named `key[i]`.
    fn path_list(&mut self, key: &str, raw: Option<Vec<String>>) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (i, entry) in raw.unwrap_or_default().into_iter().enumerate() {
            if entry.trim().is_empty() {
                self.problem(&format!("{key}[{i}]"), "must not be empty");
                continue;
            }
            out.push(self.path(Some(entry), "."));
        }
        out
    }

    /// `[tools.bash].unix_sockets`: `@name` for an abstract socket, else a path resolved
    /// against the config's directory.
    fn socket_names(&mut self, raw: Option<Vec<String>>) -> Vec<SocketName> {
        let mut out = Vec::new();
        for (i, entry) in raw.unwrap_or_default().into_iter().enumerate() {
            let key = format!("[tools.bash].unix_sockets[{i}]");
            match entry.strip_prefix('@') {
                _ if entry.trim().is_empty() => self.problem(&key, "must not be empty"),
                Some("") => self.problem(&key, "`@` needs an abstract socket name after it"),
                Some(name) => out.push(SocketName::Abstract(name.to_string())),
                None => out.push(SocketName::Path(self.path(Some(entry), "."))),
            }
        }
        out
    }

    fn files(&mut self, raw: RawFiles) -> FilesConfig {
        let d = FilesConfig::default();
        let mut protect = Vec::new();
        for (i, p) in raw.protect.unwrap_or_default().into_iter().enumerate() {
            let key = format!("[tools.files].protect[{i}]");
            if p.trim().is_empty() {
                self.problem(&key, "must not be empty");
            } else if p.starts_with('/') || p.split('/').any(|c| c == "..") {
                self.problem(
                    &key,
                    format!("must be relative to the work root, without `..`, got {p:?}"),
                );
            } else {
                protect.push(p);
            }
        }
        FilesConfig {
            enabled: raw.enabled.unwrap_or(d.enabled),
            max_read_bytes: self.int_in(
                "[tools.files].max_read_bytes",
                raw.max_read_bytes,
                d.max_read_bytes as i64,
                1024,
                16 * 1024 * 1024,
            ) as usize,
            max_write_bytes: self.int_in(
                "[tools.files].max_write_bytes",
                raw.max_write_bytes,
                d.max_write_bytes as i64,
                1024,
                256 * 1024 * 1024,
            ) as usize,
            protect,
        }
    }

    /// Policy self-tests: each example must get the verdict its list promises.
    fn examples(
        &mut self,
        policy: &Policy,
        key: &str,
        examples: Option<Vec<String>>,
        want: Verdict,
    ) {
        for (i, example) in examples.unwrap_or_default().iter().enumerate() {
            let judgement = gate::judge(policy, example);
            if judgement.verdict != want {
                let got = match judgement.verdict {
                    Verdict::Allow => "allowed",
                    Verdict::Deny => "denied",
                };
                self.problem(
                    &format!("[tools.bash].{key}[{i}]"),
                    format!("{example:?} was {got}: {}", judgement.reason),
                );
            }
        }
    }

    /// `[tools.bash].env_allow`: plain identifiers, none the gate always denies
    /// (`gate::denied_env`: `LD_*`, `PATH`, `PYTHONPATH`, `NODE_OPTIONS`...).
    fn env_allow(&mut self, names: Vec<String>) -> Vec<String> {
        let mut out = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let key = format!("[tools.bash].env_allow[{i}]");
            let plain = !name.is_empty()
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !plain {
                self.problem(
                    &key,
                    format!("{name:?} is not a plain variable name (letters, digits, `_`)"),
                );
            } else if let Some(why) = harness_gate::denied_env(&name) {
                self.problem(
                    &key,
                    format!("{name:?} can never be given to a command: {why}"),
                );
            } else {
                out.push(name);
            }
        }
        out
    }

    fn rules(&mut self, key: &str, texts: Vec<String>) -> Vec<Rule> {
        let mut rules = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            match Rule::parse(t) {
                Ok(r) => rules.push(r),
                Err(e) => self.problem(&format!("{key}[{i}]"), format!("{t:?}: {e}")),
            }
        }
        rules
    }
}
