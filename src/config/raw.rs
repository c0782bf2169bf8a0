//! Config stage, PURE: the raw layer, serde structs that mirror `harness.toml` key for key.
//!
//! Every field is optional here; [`super::validate`] applies defaults and reports problems.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawConfig {
    pub(super) vertical: Option<String>,
    pub(super) work_root: Option<String>,
    pub(super) report_dir: Option<String>,
    #[serde(rename = "loop")]
    pub(super) loop_: Option<RawLoop>,
    pub(super) finish: Option<RawFinish>,
    pub(super) redmine: Option<RawRedmine>,
    pub(super) litellm: Option<RawLitellm>,
    pub(super) models: Option<RawModels>,
    pub(super) tools: Option<RawTools>,
    pub(super) demo: Option<RawDemo>,
    pub(super) budget: Option<RawBudget>,
    pub(super) metrics: Option<RawMetrics>,
    pub(super) inbox: Option<RawInbox>,
    pub(super) intake: Option<RawIntake>,
    pub(super) prompt: Option<RawPrompt>,
    pub(super) check: Option<RawCheck>,
    pub(super) workspace: Option<RawWorkspace>,
    pub(super) forge: Option<RawForge>,
    pub(super) session: Option<RawSession>,
    pub(super) workflows: Option<RawWorkflows>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawInbox {
    pub(super) dir: Option<String>,
    pub(super) stale_after_mins: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawIntake {
    pub(super) order: Option<Vec<String>>,
    pub(super) max_attachments: Option<i64>,
    pub(super) max_attachment_bytes: Option<i64>,
    pub(super) max_attachments_total_bytes: Option<i64>,
    pub(super) attachments_dir: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawMetrics {
    pub(super) textfile: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawCheck {
    pub(super) command: Option<String>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_attempts: Option<i64>,
    pub(super) feedback_bytes: Option<i64>,
    pub(super) classes: Option<BTreeMap<String, RawCheckClass>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawCheckClass {
    pub(super) command: Option<String>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_attempts: Option<i64>,
    pub(super) feedback_bytes: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawWorkspace {
    pub(super) repo: Option<String>,
    pub(super) base: Option<String>,
    pub(super) branch: Option<String>,
    pub(super) push: Option<String>,
    pub(super) git_timeout_secs: Option<i64>,
    pub(super) max_patch_bytes: Option<i64>,
    pub(super) max_file_bytes: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawForge {
    pub(super) kind: Option<String>,
    pub(super) url: Option<String>,
    pub(super) repo: Option<String>,
    pub(super) token_ref: Option<String>,
    pub(super) pr: Option<String>,
    pub(super) on_failure: Option<String>,
    pub(super) title: Option<String>,
    pub(super) labels: Option<Vec<String>>,
    pub(super) reviewers: Option<Vec<String>>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_retries: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawPrompt {
    pub(super) agents_max_bytes: Option<i64>,
    pub(super) skills_dir: Option<String>,
    pub(super) writable: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawSession {
    pub(super) enabled: Option<bool>,
    pub(super) store: Option<String>,
    pub(super) max_history_tokens: Option<i64>,
    pub(super) max_attachment_bytes: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawBudget {
    pub(super) max_cost_usd: Option<f64>,
    pub(super) max_total_tokens: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawLoop {
    pub(super) max_rounds: Option<i64>,
    pub(super) max_tool_calls: Option<i64>,
    pub(super) finish: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawFinish {
    pub(super) result_schema: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawRedmine {
    pub(super) url: Option<String>,
    pub(super) key_ref: Option<String>,
    pub(super) scope_query: Option<String>,
    pub(super) scope_query_id: Option<i64>,
    pub(super) project: Option<String>,
    pub(super) class_field: Option<String>,
    pub(super) default_class: Option<String>,
    pub(super) limit: Option<i64>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_retries: Option<i64>,
    pub(super) claim: Option<RawClaim>,
    pub(super) writeback: Option<RawWriteback>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawClaim {
    pub(super) enabled: Option<bool>,
    pub(super) status: Option<String>,
    pub(super) assign: Option<bool>,
    pub(super) stale_after_mins: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawWriteback {
    pub(super) enabled: Option<bool>,
    pub(super) status_done: Option<String>,
    pub(super) status_failed: Option<String>,
    pub(super) status_needs_input: Option<String>,
    pub(super) assign_needs_input: Option<String>,
    pub(super) max_note_chars: Option<i64>,
    pub(super) result_fields: Option<BTreeMap<String, i64>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawLitellm {
    pub(super) base_url: Option<String>,
    pub(super) key_ref: Option<String>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_retries: Option<i64>,
    pub(super) replay: Option<String>,
    pub(super) streaming: Option<bool>,
    pub(super) stream_idle_timeout_secs: Option<i64>,
    pub(super) preflight: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawModels {
    pub(super) default_tier: Option<String>,
    pub(super) classes: Option<BTreeMap<String, String>>,
    // Validated by hand: a string ("proxy") or a table of tables, each key named on error.
    pub(super) prices: Option<toml::Value>,
    pub(super) vision: Option<RawVision>,
    #[serde(flatten)]
    pub(super) tiers: BTreeMap<String, RawTier>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVision {
    pub(super) tiers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawTier {
    One(String),
    Chain(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawTools {
    pub(super) bash: Option<RawBash>,
    pub(super) files: Option<RawFiles>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawFiles {
    pub(super) enabled: Option<bool>,
    pub(super) max_read_bytes: Option<i64>,
    pub(super) max_write_bytes: Option<i64>,
    pub(super) protect: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawBash {
    pub(super) enabled: Option<bool>,
    pub(super) timeout_secs: Option<i64>,
    pub(super) max_output_bytes: Option<i64>,
    pub(super) preset: Option<String>,
    pub(super) default: Option<String>,
    pub(super) allow: Option<Vec<String>>,
    pub(super) deny: Option<Vec<String>>,
    pub(super) write_redirects: Option<bool>,
    pub(super) env_allow: Option<Vec<String>>,
    pub(super) examples_allow: Option<Vec<String>>,
    pub(super) examples_deny: Option<Vec<String>>,
    pub(super) sandbox: Option<String>,
    pub(super) network: Option<RawNetwork>,
    pub(super) egress: Option<RawEgress>,
    pub(super) write_roots: Option<Vec<String>>,
    pub(super) read_roots: Option<Vec<String>>,
    pub(super) unix_sockets: Option<Vec<String>>,
    pub(super) exec_roots: Option<Vec<String>>,
}

/// `[tools.bash].network`: a switch or `"allowlist"` (the schema checks the word).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawNetwork {
    Switch(bool),
    Word(String),
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawEgress {
    pub(super) allow: Option<Vec<String>>,
    pub(super) presets: Option<Vec<String>>,
    pub(super) deny_private: Option<bool>,
    pub(super) max_bytes: Option<i64>,
    pub(super) hosts: Option<String>,
    pub(super) ca_file: Option<String>,
    pub(super) upstream: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawDemo {
    pub(super) id: Option<String>,
    pub(super) subject: Option<String>,
    pub(super) prompt: Option<String>,
    pub(super) class: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawWorkflows {
    pub(super) default: Option<String>,
    pub(super) max_loops: Option<i64>,
    pub(super) per_run: Option<String>,
    // Each read by hand (`read_workflow`): serde_ignored does not see into a flattened
    // map, and a misspelt stage key must be named like any other unknown key.
    #[serde(flatten)]
    pub(super) named: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawWorkflow {
    pub(super) intent: Option<String>,
    pub(super) stages: Option<Vec<String>>,
    pub(super) stage: Option<BTreeMap<String, RawStage>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawStage {
    pub(super) skill: Option<String>,
    pub(super) tier: Option<String>,
    pub(super) retries: Option<i64>,
    pub(super) max_rounds: Option<i64>,
    pub(super) check: Option<String>,
    pub(super) check_timeout_secs: Option<i64>,
    pub(super) on_fail: Option<String>,
}
