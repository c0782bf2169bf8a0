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
use crate::tools::gate::{self, Policy, Rule, Verdict};

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
    /// `[models].prices`: how a round's cost is computed when the endpoint does not say.
    pub prices: Prices,
    /// `[budget]`: per-run limits checked before each round.
    pub budget: BudgetConfig,
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
    /// Ask for Server-Sent Events and assemble the reply from deltas (default false).
    pub streaming: bool,
    /// With streaming: a stream silent this long is abandoned and retried (default 30 s).
    pub stream_idle_timeout: Duration,
    /// `GET {base_url}/models` before the first token to check the routed model is served
    /// (default false).
    pub preflight: bool,
}

/// `[models].prices`: where per-token prices come from.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Prices {
    /// No prices: cost is only what the endpoint reports (`x-litellm-response-cost`).
    #[default]
    None,
    /// `[models.prices]`: per concrete model.
    Table(BTreeMap<String, ModelPrice>),
    /// `prices = "proxy"`: read from the proxy's `GET /model/info` before the first round.
    Proxy,
}

/// The price of one concrete model, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelPrice {
    /// USD per million prompt tokens.
    pub input_usd_per_mtok: f64,
    /// USD per million completion tokens.
    pub output_usd_per_mtok: f64,
}

impl ModelPrice {
    /// The cost of `usage` at this price, in USD.
    pub fn cost(&self, usage: &crate::llm::wire::Usage) -> f64 {
        (usage.prompt_tokens as f64 * self.input_usd_per_mtok
            + usage.completion_tokens as f64 * self.output_usd_per_mtok)
            / 1_000_000.0
    }
}

/// `[budget]`: per-run limits; a turn that reaches one stops before its next round.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetConfig {
    /// Max cost of one run in USD (default: none).
    pub max_cost_usd: Option<f64>,
    /// Max tokens (prompt + completion) of one run (default: none).
    pub max_total_tokens: Option<u64>,
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
    /// Kernel confinement of the command (default `auto`).
    pub sandbox: SandboxMode,
    /// Whether a confined command may open TCP connections or bind ports (default false;
    /// needs Landlock ABI 4 to be enforced).
    pub network: bool,
    /// Directories a confined command may write besides the work root and its private temp
    /// dir (absolute, resolved against the config's directory; default none).
    pub write_roots: Vec<PathBuf>,
}

/// `[tools.bash].sandbox`: whether commands run under Landlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Landlock when the kernel has it, otherwise unconfined (said in the PLAN and REPORT).
    Auto,
    /// Landlock or refuse to run (exit 1 before any LLM call).
    Landlock,
    /// Never confine.
    Off,
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
    /// `[redmine.claim]`: taking an issue safely when many workers run.
    pub claim: ClaimConfig,
    /// `[redmine.writeback]`: the note and the status change after the REPORT.
    pub writeback: WritebackConfig,
}

/// `[redmine.claim]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConfig {
    /// Claim before working (default true); without it two workers may take one issue.
    pub enabled: bool,
    /// Status set by the claim, by name (default `In Progress`; `None` leaves it).
    pub status: Option<String>,
    /// Assign the issue to the bot user when claiming (default true).
    pub assign: bool,
    /// A claim older than this with no REPORT may be taken over (minutes, default 120).
    pub stale_after_mins: u64,
}

impl Default for ClaimConfig {
    fn default() -> Self {
        ClaimConfig {
            enabled: true,
            status: Some("In Progress".to_string()),
            assign: true,
            stale_after_mins: 120,
        }
    }
}

/// `[redmine.writeback]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritebackConfig {
    /// Post the REPORT as a note (default true).
    pub enabled: bool,
    /// Status after a completed turn, by name (default: unchanged).
    pub status_done: Option<String>,
    /// Status after an llm failure, a round or budget stop, or an interruption (default: unchanged).
    pub status_failed: Option<String>,
    /// Replies longer than this (characters) are attached as a file, with a summary in the
    /// note (default 20000).
    pub max_note_chars: usize,
}

impl Default for WritebackConfig {
    fn default() -> Self {
        WritebackConfig {
            enabled: true,
            status_done: None,
            status_failed: None,
            max_note_chars: 20_000,
        }
    }
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
    budget: Option<RawBudget>,
}

#[derive(Debug, Default, Deserialize)]
struct RawBudget {
    max_cost_usd: Option<f64>,
    max_total_tokens: Option<i64>,
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
    claim: Option<RawClaim>,
    writeback: Option<RawWriteback>,
}

#[derive(Debug, Default, Deserialize)]
struct RawClaim {
    enabled: Option<bool>,
    status: Option<String>,
    assign: Option<bool>,
    stale_after_mins: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawWriteback {
    enabled: Option<bool>,
    status_done: Option<String>,
    status_failed: Option<String>,
    max_note_chars: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawLitellm {
    base_url: Option<String>,
    key_ref: Option<String>,
    timeout_secs: Option<i64>,
    max_retries: Option<i64>,
    replay: Option<String>,
    streaming: Option<bool>,
    stream_idle_timeout_secs: Option<i64>,
    preflight: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct RawModels {
    default_tier: Option<String>,
    classes: Option<BTreeMap<String, String>>,
    // Validated by hand: a string ("proxy") or a table of tables, each key named on error.
    prices: Option<toml::Value>,
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
    examples_allow: Option<Vec<String>>,
    examples_deny: Option<Vec<String>>,
    sandbox: Option<String>,
    network: Option<bool>,
    write_roots: Option<Vec<String>>,
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
        let mut raw_models = raw.models.unwrap_or_default();
        let prices = self.prices(raw_models.prices.take());
        let models = self.models(raw_models);
        let budget = self.budget(raw.budget.unwrap_or_default());
        if prices == Prices::Proxy && litellm.base_url.is_none() {
            self.problem(
                "[models].prices",
                "\"proxy\" reads GET /model/info from [litellm].base_url, which is not set",
            );
        }
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
            prices,
            budget,
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
            streaming: raw.streaming.unwrap_or(false),
            stream_idle_timeout: secs(self.int_in(
                "[litellm].stream_idle_timeout_secs",
                raw.stream_idle_timeout_secs,
                30,
                1,
                3600,
            )),
            preflight: raw.preflight.unwrap_or(false),
        }
    }

    fn prices(&mut self, raw: Option<toml::Value>) -> Prices {
        let table = match raw {
            None => return Prices::None,
            Some(toml::Value::String(s)) if s == "proxy" => return Prices::Proxy,
            Some(toml::Value::Table(t)) => t,
            Some(other) => {
                self.problem(
                    "[models].prices",
                    format!(
                        "must be \"proxy\" or a table of models ([models.prices]), got {other}"
                    ),
                );
                return Prices::None;
            }
        };
        let mut prices = BTreeMap::new();
        for (model, value) in table {
            let key = format!("[models.prices].{model}");
            let Some(fields) = value.as_table() else {
                self.problem(
                    &key,
                    "must be a table, e.g. { input_usd_per_mtok = 1.0, output_usd_per_mtok = 2.0 }",
                );
                continue;
            };
            let mut price = ModelPrice::default();
            for (name, v) in fields {
                let slot = match name.as_str() {
                    "input_usd_per_mtok" => &mut price.input_usd_per_mtok,
                    "output_usd_per_mtok" => &mut price.output_usd_per_mtok,
                    _ => {
                        self.problem(&format!("{key}.{name}"), "unknown key");
                        continue;
                    }
                };
                match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
                    Some(n) if n.is_finite() && n >= 0.0 => *slot = n,
                    _ => self.problem(
                        &format!("{key}.{name}"),
                        format!("must be a number of USD per million tokens (>= 0), got {v}"),
                    ),
                }
            }
            for required in ["input_usd_per_mtok", "output_usd_per_mtok"] {
                if !fields.contains_key(required) {
                    self.problem(&format!("{key}.{required}"), "is required");
                }
            }
            prices.insert(model, price);
        }
        Prices::Table(prices)
    }

    fn budget(&mut self, raw: RawBudget) -> BudgetConfig {
        let max_cost_usd = match raw.max_cost_usd {
            Some(c) if !(c.is_finite() && c > 0.0) => {
                self.problem(
                    "[budget].max_cost_usd",
                    format!("must be a positive number of USD, got {c}"),
                );
                None
            }
            other => other,
        };
        let max_total_tokens = raw.max_total_tokens.and_then(|n| {
            if n >= 1 {
                Some(n as u64)
            } else {
                self.problem(
                    "[budget].max_total_tokens",
                    format!("must be at least 1, got {n}"),
                );
                None
            }
        });
        BudgetConfig {
            max_cost_usd,
            max_total_tokens,
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
        let before = self.problems.len();
        let allow = self.rules("[tools.bash].allow", raw.allow.unwrap_or_default());
        let deny = self.rules("[tools.bash].deny", raw.deny.unwrap_or_default());
        let policy = Policy {
            default,
            allow,
            deny,
            write_redirects: raw.write_redirects.unwrap_or(false),
        };
        // With a broken rule the policy is not the one the user wrote: its examples would
        // fail for the wrong reason.
        if self.problems.len() == before {
            self.examples(
                &policy,
                "examples_allow",
                raw.examples_allow,
                Verdict::Allow,
            );
            self.examples(&policy, "examples_deny", raw.examples_deny, Verdict::Deny);
        }
        let sandbox = match raw.sandbox.as_deref() {
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
        };
        let mut write_roots = Vec::new();
        for (i, root) in raw.write_roots.unwrap_or_default().into_iter().enumerate() {
            if root.trim().is_empty() {
                self.problem(
                    &format!("[tools.bash].write_roots[{i}]"),
                    "must not be empty",
                );
                continue;
            }
            write_roots.push(self.path(Some(root), "."));
        }
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
            network: raw.network.unwrap_or(false),
            write_roots,
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
        let claim = self.claim(raw.claim.unwrap_or_default());
        let writeback = self.writeback(raw.writeback.unwrap_or_default());
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
            claim,
            writeback,
        })
    }

    fn status_name(&mut self, key: &str, v: Option<String>) -> Option<String> {
        match v {
            Some(s) if s.trim().is_empty() => {
                self.problem(
                    key,
                    "must not be empty (omit the key to leave the status unchanged)",
                );
                None
            }
            other => other,
        }
    }

    fn claim(&mut self, raw: RawClaim) -> ClaimConfig {
        let d = ClaimConfig::default();
        ClaimConfig {
            enabled: raw.enabled.unwrap_or(d.enabled),
            status: match raw.status {
                None => d.status,
                s => self.status_name("[redmine.claim].status", s),
            },
            assign: raw.assign.unwrap_or(d.assign),
            stale_after_mins: self.int_in(
                "[redmine.claim].stale_after_mins",
                raw.stale_after_mins,
                120,
                1,
                60 * 24 * 30,
            ) as u64,
        }
    }

    fn writeback(&mut self, raw: RawWriteback) -> WritebackConfig {
        WritebackConfig {
            enabled: raw.enabled.unwrap_or(true),
            status_done: self.status_name("[redmine.writeback].status_done", raw.status_done),
            status_failed: self.status_name("[redmine.writeback].status_failed", raw.status_failed),
            max_note_chars: self.int_in(
                "[redmine.writeback].max_note_chars",
                raw.max_note_chars,
                20_000,
                500,
                1_000_000,
            ) as usize,
        }
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
    fn llm_side_keys_default_and_validate() {
        let c = parse(MINIMAL, Path::new("h.toml")).unwrap();
        assert!(!c.litellm.streaming && !c.litellm.preflight);
        assert_eq!(c.litellm.stream_idle_timeout, Duration::from_secs(30));
        assert_eq!(c.prices, Prices::None);
        assert_eq!(c.budget, BudgetConfig::default());
        let text = format!(
            "{}[budget]\nmax_cost_usd = 0.5\nmax_total_tokens = 9000\n[models.prices]\n\"glm-5.3\" = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2.5 }}\n",
            MINIMAL.replace("[models]\n", "streaming = true\n[models]\n")
        );
        let c = parse(&text, Path::new("h.toml")).unwrap();
        assert!(c.litellm.streaming);
        assert_eq!(
            c.budget,
            BudgetConfig {
                max_cost_usd: Some(0.5),
                max_total_tokens: Some(9000)
            }
        );
        let Prices::Table(t) = &c.prices else {
            panic!("{:?}", c.prices)
        };
        let usage = crate::llm::wire::Usage {
            prompt_tokens: 1000,
            completion_tokens: 500,
            total_tokens: 1500,
        };
        assert_eq!(t["glm-5.3"].cost(&usage), 0.00225);
        let proxy = MINIMAL.replace("[models]\n", "[models]\nprices = \"proxy\"\n");
        assert_eq!(
            parse(&proxy, Path::new("h.toml")).unwrap().prices,
            Prices::Proxy
        );
    }

    #[test]
    fn llm_side_problems_name_their_keys() {
        let text = MINIMAL.replace(
            "[models]\n",
            "stream_idle_timeout_secs = 0\n[models]\nprices = \"guess\"\n",
        ) + "[budget]\nmax_cost_usd = -1.0\nmax_total_tokens = 0\nmax_rounds = 2\n";
        assert_eq!(
            problems(&text),
            vec![
                "[budget].max_rounds: unknown key".to_string(),
                "[litellm].stream_idle_timeout_secs: must be between 1 and 3600, got 0".to_string(),
                "[models].prices: must be \"proxy\" or a table of models ([models.prices]), got \"guess\"".to_string(),
                "[budget].max_cost_usd: must be a positive number of USD, got -1".to_string(),
                "[budget].max_total_tokens: must be at least 1, got 0".to_string(),
            ]
        );
        let table = format!(
            "{MINIMAL}[models.prices]\n\"glm-5.3\" = {{ input_usd_per_mtok = -1, out = 2 }}\n\"glm-5.2\" = 3\n"
        );
        assert_eq!(
            problems(&table),
            vec![
                "[models.prices].glm-5.2: must be a table, e.g. { input_usd_per_mtok = 1.0, output_usd_per_mtok = 2.0 }".to_string(),
                "[models.prices].glm-5.3.input_usd_per_mtok: must be a number of USD per million tokens (>= 0), got -1".to_string(),
                "[models.prices].glm-5.3.out: unknown key".to_string(),
                "[models.prices].glm-5.3.output_usd_per_mtok: is required".to_string(),
            ]
        );
        let replay_proxy =
            "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\nprices = \"proxy\"\n";
        assert_eq!(
            problems(replay_proxy),
            vec!["[models].prices: \"proxy\" reads GET /model/info from [litellm].base_url, which is not set".to_string()]
        );
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

    #[test]
    fn policy_examples_are_checked_at_load() {
        let text = format!(
            "{MINIMAL}\n[tools.bash]\nallow = [\"git status\", \"git diff *\", \"ls *\"]\ndeny = [\"rm *\"]\n\
             examples_allow = [\"git status\", \"git diff HEAD~1\", \"git push\", \"ls -la | wc -l\"]\n\
             examples_deny = [\"rm -rf /\", \"ls; git difftool\", \"ls src\"]\n"
        );
        assert_eq!(
            problems(&text),
            vec![
                "[tools.bash].examples_allow[2]: \"git push\" was denied: no allow rule matches `git`".to_string(),
                "[tools.bash].examples_allow[3]: \"ls -la | wc -l\" was denied: no allow rule matches `wc`".to_string(),
                "[tools.bash].examples_deny[2]: \"ls src\" was allowed: all 1 segment allowed".to_string(),
            ]
        );
    }

    #[test]
    fn examples_are_skipped_when_a_rule_is_broken() {
        let text =
            format!("{MINIMAL}\n[tools.bash]\nallow = [\"l*s *\"]\nexamples_allow = [\"ls\"]\n");
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("[tools.bash].allow[0]"), "{p:?}");
    }

    #[test]
    fn sandbox_keys_default_and_validate() {
        let c = parse(MINIMAL, Path::new("/etc/h/harness.toml")).unwrap();
        assert_eq!(c.bash.sandbox, SandboxMode::Auto);
        assert!(!c.bash.network);
        assert!(c.bash.write_roots.is_empty());
        let text = format!(
            "{MINIMAL}\n[tools.bash]\nsandbox = \"landlock\"\nnetwork = true\nwrite_roots = [\"cache\", \"/var/tmp/x\"]\n"
        );
        let c = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
        assert_eq!(c.bash.sandbox, SandboxMode::Landlock);
        assert!(c.bash.network);
        assert_eq!(
            c.bash.write_roots,
            vec![PathBuf::from("/etc/h/cache"), PathBuf::from("/var/tmp/x")]
        );
        let text = format!("{MINIMAL}\n[tools.bash]\nsandbox = \"yes\"\nwrite_roots = [\"\"]\n");
        assert_eq!(
            problems(&text),
            vec![
                "[tools.bash].sandbox: must be \"auto\", \"landlock\" or \"off\", got \"yes\""
                    .to_string(),
                "[tools.bash].write_roots[0]: must not be empty".to_string(),
            ]
        );
    }
}
