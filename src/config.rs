//! Config stage, PURE: the text of `harness.toml` and its directory in, a validated [`Config`]
//! out, or every problem found, each naming its key and the file.
//!
//! Two layers, as ripgrep and uv do it: `Raw*` structs mirror the file, then [`validate`]
//! builds the typed config. Unknown keys are collected with `serde_ignored` rather than
//! `deny_unknown_fields`, so that a file with three typos gets three messages, not one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::secrets::KeyRef;
use crate::tools::gate::{Policy, Rule, Verdict};

/// A validated configuration. Paths are absolute or relative to the process's cwd, already
/// resolved against the config file's directory.
#[derive(Debug, Clone)]
pub struct Config {
    /// The config file this came from (for messages).
    pub path: PathBuf,
    /// Identity of this harness instance; part of REPORT file names.
    pub vertical: String,
    /// Where the bash tool runs (default: the config's directory).
    pub work_root: PathBuf,
    /// Where REPORT files land (default: `reports` beside the config).
    pub report_dir: PathBuf,
    /// Max LLM round trips per turn, tool calls included (default 8).
    pub max_rounds: u32,
    /// The Redmine task source, when configured.
    pub redmine: Option<RedmineConfig>,
    /// The model endpoint.
    pub litellm: LitellmConfig,
    /// Tiers and class routing.
    pub models: ModelsConfig,
    /// The bash tool and its gate.
    pub bash: BashConfig,
    /// The issue `--demo` runs.
    pub demo: DemoConfig,
}

/// `[litellm]`: the OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct LitellmConfig {
    /// Base URL up to and including `/v1` (the client appends `/chat/completions`).
    pub base_url: Option<String>,
    /// Key ref for the `Authorization: Bearer` header.
    pub key_ref: Option<KeyRef>,
    /// Per-request timeout (default 120 s).
    pub timeout: Duration,
    /// Retries after the first attempt on 429/5xx/transport errors (default 2).
    pub max_retries: u32,
    /// Serve replies from this cassette instead of HTTP.
    pub replay: Option<PathBuf>,
}

/// `[models]` and `[models.classes]`: the static routing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelsConfig {
    /// Tier alias -> concrete models, first choice first.
    pub tiers: BTreeMap<String, Vec<String>>,
    /// Tier for tasks that carry no class.
    pub default_tier: Option<String>,
    /// Task class -> tier alias.
    pub classes: BTreeMap<String, String>,
}

/// `[tools.bash]`: the one tool and its gate.
#[derive(Debug, Clone)]
pub struct BashConfig {
    /// Whether the model is offered the tool at all (default true).
    pub enabled: bool,
    /// Wall-clock bound for one command (default 60 s).
    pub timeout: Duration,
    /// Output kept per command, head and tail (default 100000 bytes).
    pub max_output_bytes: usize,
    /// The gate's rules.
    pub policy: Policy,
}

/// `[demo]`: the built-in issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoConfig {
    /// Task id (default `demo-1`).
    pub id: String,
    /// One-line subject.
    pub subject: String,
    /// The task text given to the model.
    pub prompt: String,
    /// Task class; `None` routes through `default_tier`.
    pub class: Option<String>,
}

/// `[redmine]`: the system of record.
#[derive(Debug, Clone)]
pub struct RedmineConfig {
    /// Base URL of the Redmine server.
    pub url: String,
    /// Key ref for the `X-Redmine-API-Key` header.
    pub key_ref: KeyRef,
    /// Which issues are in scope.
    pub scope: Scope,
    /// Project identifier or id, for project-scoped saved queries.
    pub project: Option<String>,
    /// Name of the custom field that carries the task class (default `Class`).
    pub class_field: String,
    /// Class for issues whose field is missing or empty (default `primary`).
    pub default_class: String,
    /// Max issues fetched per intake (default 50, at most 100).
    pub limit: u32,
    /// Per-request timeout (default 30 s).
    pub timeout: Duration,
    /// Retries on 5xx and transport errors (default 2).
    pub max_retries: u32,
}

/// The released scope: raw `/issues.json` parameters or a saved query id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Raw query string, e.g. `project_id=mopac&status_id=open&sort=priority:desc`.
    Query(String),
    /// A saved query's id.
    SavedQuery(u64),
}

// ---------- raw layer: mirrors the file ----------

#[derive(Debug, Default, Deserialize)]
struct RawConfig {
    vertical: Option<String>,
    work_root: Option<String>,
    report_dir: Option<String>,
    #[serde(rename = "loop")]
    loop_: Option<RawLoop>,
    redmine: Option<RawRedmine>,
    litellm: Option<RawLitellm>,
    models: Option<RawModels>,
    tools: Option<RawTools>,
    demo: Option<RawDemo>,
}

#[derive(Debug, Default, Deserialize)]
struct RawLoop {
    max_rounds: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawRedmine {
    url: Option<String>,
    key_ref: Option<String>,
    scope_query: Option<String>,
    scope_query_id: Option<i64>,
    project: Option<String>,
    class_field: Option<String>,
    default_class: Option<String>,
    limit: Option<i64>,
    timeout_secs: Option<i64>,
    max_retries: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawLitellm {
    base_url: Option<String>,
    key_ref: Option<String>,
    timeout_secs: Option<i64>,
    max_retries: Option<i64>,
    replay: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawModels {
    default_tier: Option<String>,
    classes: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    tiers: BTreeMap<String, RawTier>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawTier {
    One(String),
    Chain(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
struct RawTools {
    bash: Option<RawBash>,
}

#[derive(Debug, Default, Deserialize)]
struct RawBash {
    enabled: Option<bool>,
    timeout_secs: Option<i64>,
    max_output_bytes: Option<i64>,
    default: Option<String>,
    allow: Option<Vec<String>>,
    deny: Option<Vec<String>>,
    write_redirects: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct RawDemo {
    id: Option<String>,
    subject: Option<String>,
    prompt: Option<String>,
    class: Option<String>,
}

// ---------- validation ----------

/// Every problem found in one config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file, as given.
    pub path: PathBuf,
    /// One line per problem, each starting with the key it is about.
    pub problems: Vec<String>,
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "config {}: {n} problem{}",
            self.path.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Parses and validates config text. `path` is used for messages, its parent directory to
/// resolve relative paths and `file:` key refs.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    let fail = |problems: Vec<String>| ConfigErrors {
        path: path.to_path_buf(),
        problems,
    };
    let mut unknown = Vec::new();
    let deserializer = toml::Deserializer::new(text);
    let raw: RawConfig = serde_ignored::deserialize(deserializer, |p| {
        unknown.push(format!("{}: unknown key", key_label(&p.to_string())))
    })
    .map_err(|e| fail(vec![e.to_string().trim_end().to_string()]))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut v = Validator {
        problems: unknown,
        dir,
    };
    let config = v.config(raw, path);
    if v.problems.is_empty() {
        Ok(config)
    } else {
        Err(fail(v.problems))
    }
}

/// `tools.bash.alow` -> `[tools.bash].alow`; `vertcal` -> `vertcal`.
fn key_label(path: &str) -> String {
    // serde_ignored writes `?` for each Option it passes through: not part of the key.
    let dotted: Vec<&str> = path.split('.').filter(|p| *p != "?").collect();
    let dotted = dotted.join(".");
    match dotted.rsplit_once('.') {
        Some((section, key)) => format!("[{section}].{key}"),
        None => dotted.to_string(),
    }
}

struct Validator {
    problems: Vec<String>,
    dir: PathBuf,
}

impl Validator {
    fn problem(&mut self, key: &str, msg: impl std::fmt::Display) {
        self.problems.push(format!("{key}: {msg}"));
    }

    fn int_in(&mut self, key: &str, v: Option<i64>, default: i64, lo: i64, hi: i64) -> i64 {
        match v {
            None => default,
            Some(n) if (lo..=hi).contains(&n) => n,
            Some(n) => {
                self.problem(key, format!("must be between {lo} and {hi}, got {n}"));
                default
            }
        }
    }

    fn non_empty(&mut self, key: &str, v: Option<String>, default: &str) -> String {
        match v {
            Some(s) if s.trim().is_empty() => {
                self.problem(key, "must not be empty");
                default.to_string()
            }
            Some(s) => s,
            None => default.to_string(),
        }
    }

    fn key_ref(&mut self, key: &str, v: Option<String>) -> Option<KeyRef> {
        let text = v?;
        match KeyRef::parse(&text, &self.dir) {
            Ok(k) => Some(k),
            Err(e) => {
                self.problem(key, e);
                None
            }
        }
    }

    fn url(&mut self, key: &str, v: Option<String>) -> Option<String> {
        let s = v?;
        let trimmed = s.trim_end_matches('/').to_string();
        if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
            self.problem(
                key,
                format!("must be an http:// or https:// URL, got {s:?}"),
            );
            return None;
        }
        if trimmed.contains(char::is_whitespace) || trimmed.contains('?') {
            self.problem(key, format!("must be a plain base URL, got {s:?}"));
            return None;
        }
        Some(trimmed)
    }

    fn path(&self, v: Option<String>, default: &str) -> PathBuf {
        clean_path(&self.dir.join(v.as_deref().unwrap_or(default)))
    }

    fn config(&mut self, raw: RawConfig, path: &Path) -> Config {
        let vertical = match raw.vertical {
            None => {
                self.problem(
                    "vertical",
                    "is required (the identity of this harness instance)",
                );
                String::new()
            }
            Some(v) if is_name(&v) => v,
            Some(v) => {
                self.problem(
                    "vertical",
                    format!("must be 1-64 characters of A-Z a-z 0-9 . _ -, got {v:?}"),
                );
                v
            }
        };
        let work_root = self.path(raw.work_root, ".");
        let report_dir = self.path(raw.report_dir, "reports");
        let max_rounds = self.int_in(
            "[loop].max_rounds",
            raw.loop_.unwrap_or_default().max_rounds,
            8,
            1,
            1000,
        ) as u32;
        let redmine = raw.redmine.and_then(|r| self.redmine(r));
        let litellm = self.litellm(raw.litellm.unwrap_or_default());
        let models = self.models(raw.models.unwrap_or_default());
        let bash = self.bash(raw.tools.unwrap_or_default().bash.unwrap_or_default());
        let demo = self.demo(raw.demo.unwrap_or_default());
        Config {
            path: path.to_path_buf(),
            vertical,
            work_root,
            report_dir,
            max_rounds,
            redmine,
            litellm,
            models,
            bash,
            demo,
        }
    }

    fn litellm(&mut self, raw: RawLitellm) -> LitellmConfig {
        let replay = raw.replay.map(|p| self.dir.join(p));
        let base_url = self.url("[litellm].base_url", raw.base_url.clone());
        let key_ref = self.key_ref("[litellm].key_ref", raw.key_ref.clone());
        if replay.is_none() {
            if raw.base_url.is_none() {
                self.problem(
                    "[litellm].base_url",
                    "is required (or set [litellm].replay to serve recorded replies)",
                );
            }
            if raw.key_ref.is_none() {
                self.problem(
                    "[litellm].key_ref",
                    "is required, e.g. key_ref = \"env:HARNESS_LITELLM_KEY\"",
                );
            }
        }
        LitellmConfig {
            base_url,
            key_ref,
            timeout: secs(self.int_in("[litellm].timeout_secs", raw.timeout_secs, 120, 1, 3600)),
            max_retries: self.int_in("[litellm].max_retries", raw.max_retries, 2, 0, 10) as u32,
            replay,
        }
    }

    fn models(&mut self, raw: RawModels) -> ModelsConfig {
        let mut tiers = BTreeMap::new();
        for (tier, value) in raw.tiers {
            let chain = match value {
                RawTier::One(m) => vec![m],
                RawTier::Chain(ms) => ms,
            };
            if chain.is_empty() || chain.iter().any(|m| m.trim().is_empty()) {
                self.problem(
                    &format!("[models].{tier}"),
                    "must name a concrete model (a string, or a list of strings for fallback)",
                );
                continue;
            }
            tiers.insert(tier, chain);
        }
        if tiers.is_empty() {
            self.problem(
                "[models]",
                "defines no tier (e.g. mopac-primary = \"glm-5.3\")",
            );
        }
        let defined = |t: &str| tiers.contains_key(t);
        let mut problems = Vec::new();
        if let Some(d) = &raw.default_tier {
            if !defined(d) {
                problems.push((
                    "[models].default_tier".to_string(),
                    format!("names tier {d:?}, which [models] does not define"),
                ));
            }
        }
        let classes = raw.classes.unwrap_or_default();
        for (class, tier) in &classes {
            if !defined(tier) {
                problems.push((
                    format!("[models.classes].{class}"),
                    format!("maps to tier {tier:?}, which [models] does not define"),
                ));
            }
        }
        for (k, m) in problems {
            self.problem(&k, m);
        }
        ModelsConfig {
            tiers,
            default_tier: raw.default_tier,
            classes,
        }
    }

    fn bash(&mut self, raw: RawBash) -> BashConfig {
        let default = match raw.default.as_deref() {
            None | Some("deny") => Verdict::Deny,
            Some("allow") => Verdict::Allow,
            Some(other) => {
                self.problem(
                    "[tools.bash].default",
                    format!("must be \"allow\" or \"deny\", got {other:?}"),
                );
                Verdict::Deny
            }
        };
        let allow = self.rules("[tools.bash].allow", raw.allow.unwrap_or_default());
        let deny = self.rules("[tools.bash].deny", raw.deny.unwrap_or_default());
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
            policy: Policy {
                default,
                allow,
                deny,
                write_redirects: raw.write_redirects.unwrap_or(false),
            },
        }
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

    fn demo(&mut self, raw: RawDemo) -> DemoConfig {
        let id = self.non_empty("[demo].id", raw.id, "demo-1");
        if !is_name(&id) {
            self.problem(
                "[demo].id",
                format!("must be 1-64 characters of A-Z a-z 0-9 . _ -, got {id:?}"),
            );
        }
        DemoConfig {
            id,
            subject: self.non_empty("[demo].subject", raw.subject, "Demo: describe yourself"),
            prompt: self.non_empty(
                "[demo].prompt",
                raw.prompt,
                "Tell me about yourself in three sentences.",
            ),
            class: raw.class.filter(|c| !c.trim().is_empty()),
        }
    }

    fn redmine(&mut self, raw: RawRedmine) -> Option<RedmineConfig> {
        let url = self.url("[redmine].url", raw.url.clone());
        if raw.url.is_none() {
            self.problem("[redmine].url", "is required when [redmine] is present");
        }
        let key_ref = self.key_ref("[redmine].key_ref", raw.key_ref.clone());
        if raw.key_ref.is_none() {
            self.problem(
                "[redmine].key_ref",
                "is required, e.g. key_ref = \"env:HARNESS_REDMINE_KEY\"",
            );
        }
        let scope = match (raw.scope_query, raw.scope_query_id) {
            (Some(q), _) if q.trim().is_empty() => {
                self.problem("[redmine].scope_query", "must not be empty");
                None
            }
            (Some(q), _) => Some(Scope::Query(q.trim_start_matches('?').to_string())),
            (None, Some(id)) if id > 0 => Some(Scope::SavedQuery(id as u64)),
            (None, Some(id)) => {
                self.problem(
                    "[redmine].scope_query_id",
                    format!("must be a positive id, got {id}"),
                );
                None
            }
            (None, None) => {
                self.problem(
                    "[redmine]",
                    "needs scope_query (raw /issues.json parameters) or scope_query_id (a saved query)",
                );
                None
            }
        };
        // Validate every key before giving up on a missing one, so all problems are reported.
        let class_field = self.non_empty("[redmine].class_field", raw.class_field, "Class");
        let default_class = self.non_empty("[redmine].default_class", raw.default_class, "primary");
        let limit = self.int_in("[redmine].limit", raw.limit, 50, 1, 100) as u32;
        let timeout = secs(self.int_in("[redmine].timeout_secs", raw.timeout_secs, 30, 1, 3600));
        let max_retries = self.int_in("[redmine].max_retries", raw.max_retries, 2, 0, 10) as u32;
        Some(RedmineConfig {
            url: url?,
            key_ref: key_ref?,
            scope: scope?,
            project: raw.project.filter(|p| !p.trim().is_empty()),
            class_field,
            default_class,
            limit,
            timeout,
            max_retries,
        })
    }
}

/// Removes `.` and folds `dir/..` lexically, so messages show `reports`, not `a/../reports`.
pub fn clean_path(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

fn secs(n: i64) -> Duration {
    Duration::from_secs(n.max(0) as u64)
}

/// Names that end up in file names: 1-64 of `[A-Za-z0-9._-]`, not starting with a dot.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const MINIMAL: &str = r#"
vertical = "demo"
[litellm]
base_url = "http://127.0.0.1:4000/v1"
key_ref = "env:HARNESS_LITELLM_KEY"
[models]
mopac-primary = "glm-5.3"
default_tier = "mopac-primary"
[models.classes]
primary = "mopac-primary"
"#;

    fn problems(text: &str) -> Vec<String> {
        match parse(text, Path::new("/etc/h/harness.toml")) {
            Ok(_) => vec![],
            Err(e) => e.problems,
        }
    }

    #[test]
    fn minimal_config_gets_the_spec_defaults() {
        let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
        assert_eq!(c.vertical, "demo");
        assert_eq!(c.work_root, PathBuf::from("/etc/h"));
        assert_eq!(c.report_dir, PathBuf::from("/etc/h/reports"));
        assert_eq!(c.max_rounds, 8);
        assert_eq!(c.litellm.timeout, Duration::from_secs(120));
        assert_eq!(c.litellm.max_retries, 2);
        assert!(c.bash.enabled);
        assert_eq!(c.bash.timeout, Duration::from_secs(60));
        assert_eq!(c.bash.max_output_bytes, 100_000);
        assert_eq!(c.bash.policy.default, Verdict::Deny);
        assert_eq!(c.demo.id, "demo-1");
        assert!(c.redmine.is_none());
    }

    #[test]
    fn unknown_keys_are_all_reported_with_their_section() {
        let text =
            format!("vertcal = 1\n{MINIMAL}\n[tools.bash]\nalow = []\n[loop]\nmax_round = 3\n");
        assert_eq!(
            problems(&text),
            vec![
                "vertcal: unknown key".to_string(),
                "[tools.bash].alow: unknown key".to_string(),
                "[loop].max_round: unknown key".to_string(),
            ]
        );
    }

    #[test]
    fn every_validation_problem_is_reported() {
        let text = r#"
vertical = "a b"
[loop]
max_rounds = 0
[litellm]
base_url = "ftp://x"
key_ref = "HARNESS_KEY"
timeout_secs = 0
[models]
t = "m"
default_tier = "nope"
[models.classes]
code = "missing-tier"
[tools.bash]
default = "maybe"
max_output_bytes = 1
"#;
        let p = problems(text);
        let keys: Vec<&str> = p
            .iter()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            keys,
            vec![
                "vertical",
                "[loop].max_rounds",
                "[litellm].base_url",
                "[litellm].key_ref",
                "[litellm].timeout_secs",
                "[models].default_tier",
                "[models.classes].code",
                "[tools.bash].default",
                "[tools.bash].max_output_bytes",
            ],
            "{p:#?}"
        );
    }

    #[test]
    fn missing_required_keys_are_named() {
        assert_eq!(
            problems("[models]\nt = \"m\"\n"),
            vec![
                "vertical: is required (the identity of this harness instance)".to_string(),
                "[litellm].base_url: is required (or set [litellm].replay to serve recorded replies)"
                    .to_string(),
                "[litellm].key_ref: is required, e.g. key_ref = \"env:HARNESS_LITELLM_KEY\""
                    .to_string(),
            ]
        );
        assert_eq!(
            problems("vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n"),
            vec!["[models]: defines no tier (e.g. mopac-primary = \"glm-5.3\")".to_string()]
        );
    }

    #[test]
    fn replay_needs_no_endpoint_and_is_relative_to_the_config() {
        let c = parse(
            "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\n",
            Path::new("/x/y/h.toml"),
        )
        .unwrap();
        assert_eq!(c.litellm.replay, Some(PathBuf::from("/x/y/c.json")));
    }

    #[test]
    fn tiers_may_be_fallback_chains() {
        let text = MINIMAL.replace("\"glm-5.3\"", "[\"glm-5.3\", \"glm-5.2\"]");
        let c = parse(&text, Path::new("h.toml")).unwrap();
        assert_eq!(c.models.tiers["mopac-primary"], vec!["glm-5.3", "glm-5.2"]);
        assert_eq!(
            problems(&MINIMAL.replace("\"glm-5.3\"", "[]")),
            vec![
                "[models].mopac-primary: must name a concrete model (a string, or a list of strings for fallback)".to_string(),
                "[models]: defines no tier (e.g. mopac-primary = \"glm-5.3\")".to_string(),
                "[models].default_tier: names tier \"mopac-primary\", which [models] does not define".to_string(),
                "[models.classes].primary: maps to tier \"mopac-primary\", which [models] does not define".to_string(),
            ]
        );
    }

    #[test]
    fn bad_rules_name_their_index() {
        let text = format!("{MINIMAL}\n[tools.bash]\nallow = [\"ls *\", \"\"]\n");
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("[tools.bash].allow[1]: \"\""), "{p:?}");
    }

    #[test]
    fn redmine_section_is_validated() {
        let text = format!("{MINIMAL}\n[redmine]\nurl = \"localhost\"\nlimit = 500\n");
        assert_eq!(
            problems(&text),
            vec![
                "[redmine].url: must be an http:// or https:// URL, got \"localhost\"".to_string(),
                "[redmine].key_ref: is required, e.g. key_ref = \"env:HARNESS_REDMINE_KEY\"".to_string(),
                "[redmine]: needs scope_query (raw /issues.json parameters) or scope_query_id (a saved query)".to_string(),
                "[redmine].limit: must be between 1 and 100, got 500".to_string(),
            ]
        );
        let ok = format!(
            "{MINIMAL}\n[redmine]\nurl = \"http://127.0.0.1:3000/\"\nkey_ref = \"env:K\"\nscope_query = \"status_id=open\"\nscope_query_id = 7\n"
        );
        let c = parse(&ok, Path::new("h.toml")).unwrap();
        let r = c.redmine.unwrap();
        assert_eq!(r.url, "http://127.0.0.1:3000");
        assert_eq!(r.scope, Scope::Query("status_id=open".into()));
        assert_eq!(r.class_field, "Class");
        assert_eq!(r.default_class, "primary");
        assert_eq!(r.limit, 50);
    }

    #[test]
    fn type_errors_name_the_key() {
        let p = problems(&format!("{MINIMAL}\n[loop]\nmax_rounds = \"eight\"\n"));
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("max_rounds"), "{p:?}");
    }

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(
            clean_path(Path::new("examples/demo/../../reports")),
            PathBuf::from("reports")
        );
        assert_eq!(clean_path(Path::new("./.")), PathBuf::from("."));
        assert_eq!(clean_path(Path::new("../x/./y")), PathBuf::from("../x/y"));
        assert_eq!(clean_path(Path::new("/a/b/../c")), PathBuf::from("/a/c"));
    }

    #[test]
    fn the_error_names_the_file() {
        let e = parse("vertical = 1", Path::new("/etc/h/harness.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("config /etc/h/harness.toml: 1 problem"),
            "{e}"
        );
    }
}
