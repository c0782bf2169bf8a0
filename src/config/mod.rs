//! Config stage, PURE: the text of `harness.toml` and its directory in, a validated [`Config`]
//! out, or every problem found, each naming its key and the file.
//!
//! Two layers, as ripgrep and uv do it: `Raw*` structs mirror the file, then [`validate`]
//! builds the typed config. Unknown keys are collected with `serde_ignored` rather than
//! `deny_unknown_fields`, so that a file with three typos gets three messages, not one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::secrets::KeyRef;
use harness_gate::Policy;
// The sandbox's vocabulary, which `[tools.bash]` is written in (tools::sandbox builds the
// crate's `Settings` from a `BashConfig`).
pub use harness_sandbox::{clean_path, NeverRead, ReadRoot, SandboxMode, SocketName};

mod attachments;
mod code;
mod egress;
mod finish;
mod forge;
mod load;
mod raw;
mod schema;
mod tools;
mod validate;
mod workflow;

pub use forge::{ForgeConfig, ForgeKind, OnFailure, PrMode};
pub use load::{config_path, load};

/// How the config reads a file it names (`[finish] result_schema`): [`load`] reads it
/// bounded from disk; [`parse`] reads none; tests pass a map.
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> anyhow::Result<String>;

use raw::RawConfig;
use validate::Validator;

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
    /// Tool calls run per model reply; later calls of the reply get a "not run" result
    /// (default 32).
    pub max_tool_calls: u32,
    /// `[loop].finish`: how the model ends a turn (default `tool`).
    pub finish: FinishMode,
    /// `[finish] result_schema`: the schema a `finish` call's `result` must match, compiled
    /// at load (default none: `finish` takes no `result`).
    pub result_schema: Option<crate::result_schema::ResultSchema>,
    /// `[workflows]`: named pipelines of stages (default none: every task is one turn).
    pub workflows: Option<Workflows>,
    /// `[session]`: the conversation carried across runs of one task.
    pub session: SessionConfig,
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
    /// `[tools.files]`: the in-process file tools.
    pub files: FilesConfig,
    /// `[prompt]`: what goes into the system prompt besides harness's own text.
    pub prompt: PromptConfig,
    /// The issue `--demo` runs.
    pub demo: DemoConfig,
    /// `[metrics] textfile`: the node_exporter textfile each run updates (default: none).
    pub metrics_textfile: Option<PathBuf>,
    /// The local inbox task source, when configured.
    pub inbox: Option<InboxConfig>,
    /// `[intake] order`: the configured task sources, asked in this order (default: inbox,
    /// then redmine).
    pub intake_order: Vec<SourceName>,
    /// `[intake]`'s attachment bounds and place.
    pub attachments: AttachmentsConfig,
    /// `[check]`: the success check run when the model says it is done.
    pub check: CheckConfig,
    /// `[workspace]`: a git worktree per task, when configured.
    pub workspace: Option<WorkspaceConfig>,
    /// `[forge]`: the pull request opened for each task's pushed branch, when configured.
    pub forge: Option<ForgeConfig>,
}

/// `[inbox]`: a directory of `*.md` task files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxConfig {
    /// The directory (absolute, resolved against the config's directory).
    pub dir: PathBuf,
    /// A claim older than this (minutes, default 120) was left by a killed worker and is
    /// put back into the inbox.
    pub stale_after_mins: u64,
}

/// A task source that `[intake] order` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceName {
    /// `[inbox]`.
    Inbox,
    /// `[redmine]`.
    Redmine,
}

impl SourceName {
    /// `inbox` or `redmine`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceName::Inbox => "inbox",
            SourceName::Redmine => "redmine",
        }
    }
}

/// `[check]` and `[check.classes.<class>]`: the operator's success check, resolved per class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckConfig {
    /// The check of tasks whose class has no override (`None`: no check).
    pub default: Option<CheckSpec>,
    /// Per task class: the top-level keys with the class's own keys over them.
    pub classes: BTreeMap<String, CheckSpec>,
}

impl CheckConfig {
    /// The check a task of `class` gets, if any.
    pub fn for_class(&self, class: Option<&str>) -> Option<&CheckSpec> {
        class
            .and_then(|c| self.classes.get(c))
            .or(self.default.as_ref())
    }

    /// Whether any task gets a check.
    pub fn any(&self) -> bool {
        self.default.is_some() || !self.classes.is_empty()
    }
}

/// One resolved success check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    /// Run as `bash -c` in the work tree; set by the operator, never by task text.
    pub command: String,
    /// Wall-clock bound for one run of the check (default 600 s).
    pub timeout: Duration,
    /// Runs of the check per turn before the turn stops with `check_failed` (default 3).
    pub max_attempts: u32,
    /// Bytes of the check's output (head and tail) sent back to the model (default 8192).
    pub feedback_bytes: usize,
}

/// The prefix of a `[models.classes]` value that names a workflow instead of a tier.
pub const CLASS_PREFIX: &str = "workflow:";

/// A skill file bigger than this is refused: it goes into every stage's system prompt.
pub const MAX_SKILL_BYTES: usize = 64 * 1024;

/// `[workflows]`: the named pipelines and how they run.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflows {
    /// By name.
    pub named: BTreeMap<String, Workflow>,
    /// `default`: the workflow of a task nothing else routes (`None`: such a task is a
    /// routing error, never a guess).
    pub default: Option<String>,
    /// `max_loops`: how often `on_fail` edges may send a task back, in all (default 2).
    pub max_loops: u32,
    /// `per_run`: one stage per `harness once`, or every stage in one run.
    pub per_run: PerRun,
}

/// `[workflows] per_run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerRun {
    /// One stage per run (cron ticks); the task stays eligible until its last stage.
    Stage,
    /// Every stage in one run.
    All,
}

impl PerRun {
    /// `stage` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            PerRun::Stage => "stage",
            PerRun::All => "all",
        }
    }
}

/// `[workflows.<name>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// Its name.
    pub name: String,
    /// `intent`, tokenised (stop words out): what the router matches a task against.
    pub intent: Vec<String>,
    /// The stages, in order (never empty).
    pub stages: Vec<StageSpec>,
}

/// `[workflows.<name>.stage.<stage>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSpec {
    /// Its name.
    pub name: String,
    /// The skill: its instructions and one-line success check.
    pub skill: crate::workflow::skill::Skill,
    /// The tier it runs on (`None`: the task's own tier, else `[models].default_tier`).
    pub tier: Option<String>,
    /// Attempts after the first when it fails, each told why the last one failed.
    pub retries: u32,
    /// Its round cap (`None`: `[loop].max_rounds`).
    pub max_rounds: Option<u32>,
    /// A command whose exit status decides the stage (run once per attempt, when the model
    /// says it is done); `None`: the model's own verdict on the skill's success check.
    pub check: Option<CheckSpec>,
    /// `on_fail`: the earlier stage a failure sends the task back to (bounded by
    /// `max_loops`), as its index; `None`: a failure ends the workflow.
    pub on_fail: Option<usize>,
}

impl Workflows {
    /// The workflow a `[models.classes]` value names, when it names one.
    pub fn of_class<'a>(&'a self, tier_or_workflow: &str) -> Option<&'a Workflow> {
        self.named.get(tier_or_workflow.strip_prefix(CLASS_PREFIX)?)
    }
}

/// `[workspace]`: each task works in its own git worktree of `repo`, on its own branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceConfig {
    /// The git repository the worktrees belong to (resolved against the config's directory).
    pub repo: PathBuf,
    /// The branch a task's branch starts from; never modified. Required.
    pub base: String,
    /// The task branch's name, with `{vertical}` and `{task_id}` (default
    /// `harness/{vertical}-{task_id}`).
    pub branch: String,
    /// The remote the branch is pushed to after the turn (default: no push).
    pub push: Option<String>,
    /// How long each git command harness runs itself may take (`git_timeout_secs`, seconds,
    /// 1-86400, default 120); the command's process group is killed after it.
    pub git_timeout: std::time::Duration,
    /// The largest patch written beside the REPORT (`max_patch_bytes`, 1 KiB-1 GiB, default
    /// 8 MiB); a larger one is written as its `git diff --stat` summary.
    pub max_patch_bytes: u64,
    /// The largest file committed (`max_file_bytes`, 1 KiB-1 GiB, default 16 MiB); larger
    /// ones are left out of the commit and named in the REPORT.
    pub max_file_bytes: u64,
}

/// `[loop].finish`: how the model ends a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FinishMode {
    /// The `finish` tool (status, summary, question) is offered beside the other tools; a
    /// reply without a tool call gets one nudge; the last round offers `finish` only.
    #[default]
    Tool,
    /// A reply without a tool call ends the turn; its text is the REPORT (the behaviour
    /// before `finish` existed).
    Message,
}

impl FinishMode {
    /// `tool` or `message`, as in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishMode::Tool => "tool",
            FinishMode::Message => "message",
        }
    }
}

/// `[session]`: the conversation of a task, carried from one run to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Load and save sessions at all (default true).
    pub enabled: bool,
    /// Where sessions are kept (default `auto`).
    pub store: SessionStore,
    /// Estimated tokens of stored history sent again (default 60000): older rounds beyond
    /// it are dropped whole, the first task message is kept.
    pub max_history_tokens: u64,
    /// A session file bigger than this (bytes, gzipped) is not attached to the Redmine
    /// note, only kept locally (default 4000000).
    pub max_attachment_bytes: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            enabled: true,
            store: SessionStore::Auto,
            max_history_tokens: 60_000,
            max_attachment_bytes: 4_000_000,
        }
    }
}

/// `[session].store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStore {
    /// Redmine tasks: attached to the REPORT note and kept locally; other tasks: local.
    Auto,
    /// Attached to the REPORT note (and kept locally); only Redmine tasks have one.
    Redmine,
    /// Only under `report_dir/sessions/`.
    Local,
}

impl SessionStore {
    /// `auto`, `redmine` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStore::Auto => "auto",
            SessionStore::Redmine => "redmine",
            SessionStore::Local => "local",
        }
    }
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
    /// `[models.vision] tiers`: the tiers whose models see images (default none).
    pub vision: std::collections::BTreeSet<String>,
}

/// `[intake]`'s attachment keys: what of a task's attachments reaches the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentsConfig {
    /// Most attachments taken from one task (default 10, at most 100); the rest are listed
    /// and refused.
    pub max_count: usize,
    /// Most bytes of one attachment (default 4194304, at most 67108864); a bigger one is
    /// listed and refused, never downloaded.
    pub max_bytes: u64,
    /// Most bytes of all the attachments of one task together (default 16777216, at most
    /// 268435456).
    pub max_total_bytes: u64,
    /// Where text attachments are placed, relative to the work root (default
    /// `.harness/attachments`), read-only for every tool and command.
    pub dir: String,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        AttachmentsConfig {
            max_count: 10,
            max_bytes: 4 * 1024 * 1024,
            max_total_bytes: 16 * 1024 * 1024,
            dir: ".harness/attachments".to_string(),
        }
    }
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
    /// needs Landlock ABI 4 to be enforced). False with `network = "allowlist"`.
    pub network: bool,
    /// `network = "allowlist"`: `[tools.bash.egress]`, the names commands may reach through
    /// the harness's own proxy (None: `network` alone decides).
    pub egress: Option<EgressConfig>,
    /// Directories a confined command may write besides the work root and its private temp
    /// dir (absolute, resolved against the config's directory; default none).
    pub write_roots: Vec<PathBuf>,
    /// What a confined command may read besides the work root, its private temp dir and the
    /// write roots (default: [`ReadRoot::System`] alone).
    pub read_roots: Vec<ReadRoot>,
    /// Unix sockets a confined command may connect to with `network = false` (default none:
    /// no Unix socket can be created). Held to these names by Landlock (ABI 9+) or by the
    /// harness's seccomp supervisor; see `tools::sandbox::unix`.
    pub unix_sockets: Vec<SocketName>,
    /// Directories (or files) a confined command may execute from besides bash, the allowed
    /// programs and their helpers, when the allow list names programs (absolute, resolved
    /// against the config's directory; default none).
    pub exec_roots: Vec<PathBuf>,
    /// Paths no confined command may read, whatever the read roots say: the config file,
    /// every `file:` key, the report dir (and the cassette a run records, added by `once`).
    pub never_read: Vec<NeverRead>,
    /// The next run's inputs inside the work root, relative to it, with what they are
    /// (`AGENTS.md`, `[prompt] skills_dir`, the files a `[check]` command names): read-only
    /// for commands and the file tools while they exist; empty with `[prompt] writable`.
    pub inputs: Vec<(String, String)>,
    /// `[intake].attachments_dir`, relative to the work root: the task's text attachments,
    /// readable by `read_file` and commands, writable by none (a read-only mount).
    pub attachments: Option<String>,
}

/// `[tools.bash.egress]`, for `network = "allowlist"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressConfig {
    /// The effective allow list: `allow`, then each preset's names, without repeats.
    pub allow: Vec<crate::tools::egress::policy::Pattern>,
    /// The presets named (`@python`, ...), as written.
    pub presets: Vec<String>,
    /// Refuse names that resolve to loopback, private, link-local or metadata addresses
    /// (default true).
    pub deny_private: bool,
    /// Bytes through the proxy per run, both ways together (default 512 MiB).
    pub max_bytes: u64,
    /// A hosts file the proxy resolves names from before DNS (for tests and air-gapped
    /// mirrors; absolute, resolved against the config's directory).
    pub hosts: Option<PathBuf>,
    /// A CA bundle the commands' TLS clients trust instead of the system's (a mirror's own
    /// CA, a test CA; absolute, resolved against the config's directory).
    pub ca_file: Option<PathBuf>,
    /// The site's own HTTP proxy every allowed request is chained through, as host and
    /// port (`upstream = "http://proxy.corp:3128"`).
    pub upstream: Option<(String, u16)>,
}

/// `[tools.files]`: `read_file`, `write_file` and `edit_file`, run in-process inside the
/// work root (a kernel-enforced jail), not through the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesConfig {
    /// Whether the model is offered the file tools (default false).
    pub enabled: bool,
    /// Bytes of file text one `read_file` call returns; longer reads are paged (default 65536).
    pub max_read_bytes: usize,
    /// Largest file `write_file` writes and `edit_file` edits, in bytes (default 1048576).
    pub max_write_bytes: usize,
    /// Extra places the file tools neither read nor write, as globs relative to the work root
    /// (default none); dotfiles, `.git/` and the gate's build files are always protected.
    pub protect: Vec<String>,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            enabled: false,
            max_read_bytes: 65_536,
            max_write_bytes: 1_048_576,
            protect: Vec::new(),
        }
    }
}

/// `[prompt]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptConfig {
    /// Bytes of the work root's `AGENTS.md` put into the system prompt; a longer file is cut
    /// and says so; 0 leaves it out (default 16384).
    pub agents_max_bytes: usize,
    /// A directory beneath the work root holding one Markdown file per skill, listed in the
    /// system prompt by name and description (default none). Relative, no `..`, no dot
    /// directory, so the model can read a skill's file with the file tools.
    pub skills_dir: Option<String>,
    /// `[prompt] writable`: commands may change the instructions and skills (default false).
    pub writable: bool,
}

impl Default for PromptConfig {
    fn default() -> Self {
        PromptConfig {
            agents_max_bytes: 16_384,
            skills_dir: None,
            writable: false,
        }
    }
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
    /// Status after an llm failure, a round or budget stop, or a `finish` with `blocked`
    /// or `failed` (default: unchanged). An interrupted run restores the status the issue
    /// had before its claim instead.
    pub status_failed: Option<String>,
    /// Status after a `finish` with `needs_input`, e.g. `Feedback` (default: unchanged).
    pub status_needs_input: Option<String>,
    /// After `needs_input`, assign the issue to its author so the asker is notified
    /// (`assign_needs_input = "author"`; default: the assignee is left).
    pub assign_needs_input_to_author: bool,
    /// Replies longer than this (characters) are attached as a file, with a summary in the
    /// note (default 20000).
    pub max_note_chars: usize,
    /// `result_fields`: a `finish` result's key -> the id of the Redmine custom field the
    /// write-back sets to its value (default none; needs `[finish] result_schema`).
    pub result_fields: BTreeMap<String, u64>,
}

impl Default for WritebackConfig {
    fn default() -> Self {
        WritebackConfig {
            enabled: true,
            status_done: None,
            status_failed: None,
            status_needs_input: None,
            assign_needs_input_to_author: false,
            max_note_chars: 20_000,
            result_fields: BTreeMap::new(),
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
            // A problem may quote the file (a parse error shows its line): a 1 MiB line of
            // brackets must not become a 1 MiB message.
            let lines: Vec<String> = p
                .lines()
                .map(|l| crate::bounded::clip(l, MAX_PROBLEM_LINE))
                .collect();
            write!(f, "\n  - {}", lines.join("\n"))?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// The longest line of a config problem as shown (bytes); longer lines keep head and tail.
const MAX_PROBLEM_LINE: usize = 240;

/// Parses and validates config text. `path` is used for messages, its parent directory to
/// resolve relative paths and `file:` key refs. Reads no file: a config naming a
/// `[finish] result_schema` is refused here ([`parse_reading`] reads it).
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    parse_reading(text, path, &|_| {
        Err(anyhow::anyhow!(
            "not read: this caller reads no file (config::load does)"
        ))
    })
}

/// [`parse`], with the files the config names (the result schema) read through `read`.
pub fn parse_reading(text: &str, path: &Path, read: ReadFile) -> Result<Config, ConfigErrors> {
    let fail = |problems: Vec<String>| ConfigErrors {
        path: path.to_path_buf(),
        problems,
    };
    let mut unknown = Vec::new();
    let deserializer = toml::Deserializer::new(text);
    let raw: RawConfig = match serde_ignored::deserialize(deserializer, |p| {
        unknown.push(unknown_key(&p.to_string()))
    }) {
        Ok(raw) => raw,
        Err(e) => {
            return Err(fail(
                type_problems(text).unwrap_or_else(|| vec![e.to_string().trim_end().to_string()]),
            ))
        }
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Relative paths are relative to the config, wherever harness runs them from: git runs
    // its worktree commands in the repository, so a relative work_root would land inside it.
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let mut v = Validator {
        problems: unknown,
        dir,
        skills: Default::default(),
    };
    let mut raw = raw;
    let finish = raw.finish.take();
    let workflows = raw.workflows.take();
    let mut config = v.config(raw, path);
    v.finish(finish.unwrap_or_default(), read, &mut config);
    v.workflows(workflows, read, &mut config);
    if v.problems.is_empty() {
        Ok(config)
    } else {
        Err(fail(v.problems))
    }
}

/// When the raw layer refused `text`: every type error, each with its key, and every unknown
/// key, all at once ([`schema::check`]); `None` when the file is not TOML or has no type
/// error (then serde's own message says what is wrong).
fn type_problems(text: &str) -> Option<Vec<String>> {
    let mut doc: toml::Table = text.parse().ok()?;
    let mut problems = schema::check(&mut doc);
    if problems.is_empty() {
        return None;
    }
    let _: Result<RawConfig, _> = serde_ignored::deserialize(toml::Value::Table(doc), |p| {
        problems.push(unknown_key(&p.to_string()))
    });
    Some(problems)
}

/// `tools.bash.alow: unknown key (did you mean `allow`?)`.
pub(super) fn unknown_key(path: &str) -> String {
    let parts: Vec<&str> = path.split('.').filter(|p| *p != "?").collect();
    format!(
        "{}: unknown key{}",
        key_label(path),
        schema::did_you_mean(&parts)
    )
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
mod tests;
