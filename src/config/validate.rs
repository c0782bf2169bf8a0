//! Config stage, PURE: raw structs in, a validated [`Config`] out, every problem collected by key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::raw::*;
use super::*;
use crate::secrets::KeyRef;

pub(super) struct Validator {
    pub(super) problems: Vec<String>,
    pub(super) dir: PathBuf,
    /// Workflow skills read so far, by file: stages of several workflows share them.
    pub(super) skills: std::collections::BTreeMap<PathBuf, crate::workflow::skill::Skill>,
}

impl Validator {
    pub(super) fn problem(&mut self, key: &str, msg: impl std::fmt::Display) {
        self.problems.push(format!("{key}: {msg}"));
    }

    pub(super) fn int_in(
        &mut self,
        key: &str,
        v: Option<i64>,
        default: i64,
        lo: i64,
        hi: i64,
    ) -> i64 {
        match v {
            None => default,
            Some(n) if (lo..=hi).contains(&n) => n,
            Some(n) => {
                self.problem(key, format!("must be between {lo} and {hi}, got {n}"));
                default
            }
        }
    }

    pub(super) fn non_empty(&mut self, key: &str, v: Option<String>, default: &str) -> String {
        match v {
            Some(s) if s.trim().is_empty() => {
                self.problem(key, "must not be empty");
                default.to_string()
            }
            Some(s) => s,
            None => default.to_string(),
        }
    }

    pub(super) fn key_ref(&mut self, key: &str, v: Option<String>) -> Option<KeyRef> {
        let text = v?;
        match KeyRef::parse(&text, &self.dir) {
            Ok(k) => Some(k),
            Err(e) => {
                self.problem(key, e);
                None
            }
        }
    }

    pub(super) fn url(&mut self, key: &str, v: Option<String>) -> Option<String> {
        let s = v?;
        // Messages quote the URL; its password must not show.
        let shown = crate::secrets::masked_url(&s);
        let trimmed = s.trim_end_matches('/').to_string();
        if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
            self.problem(
                key,
                format!("must be an http:// or https:// URL, got {shown:?}"),
            );
            return None;
        }
        if trimmed.contains(char::is_whitespace) || trimmed.contains('?') {
            self.problem(key, format!("must be a plain base URL, got {shown:?}"));
            return None;
        }
        Some(trimmed)
    }

    pub(super) fn path(&self, v: Option<String>, default: &str) -> PathBuf {
        clean_path(&self.dir.join(v.as_deref().unwrap_or(default)))
    }

    /// `[prompt].skills_dir`: a relative path beneath the work root, clear of dot directories
    /// (which the file tools never read).
    fn skills_dir(&mut self, dir: String) -> Option<String> {
        let key = "[prompt].skills_dir";
        let parts: Vec<&str> = dir
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if dir.starts_with('/') || parts.is_empty() || parts.contains(&"..") {
            self.problem(
                key,
                format!("must be a directory relative to the work root, without `..`, got {dir:?}"),
            );
            return None;
        }
        if parts.iter().any(|p| p.starts_with('.')) {
            self.problem(
                key,
                format!("{dir:?} is a dot directory, which the file tools never read; use a plain name such as \"skills\""),
            );
            return None;
        }
        Some(parts.join("/"))
    }

    /// `vertical`: required, a name.
    fn vertical(&mut self, raw: Option<String>) -> String {
        match raw {
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
        }
    }

    pub(super) fn config(&mut self, raw: RawConfig, path: &Path) -> Config {
        let vertical = self.vertical(raw.vertical);
        let work_root = self.path(raw.work_root, ".");
        let report_dir = self.report_dir(raw.report_dir);
        let (max_rounds, max_tool_calls, finish) = self.loop_keys(raw.loop_.unwrap_or_default());
        let session = self.session(raw.session.unwrap_or_default());
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
        let (mut bash, files) = self.tools(raw.tools.unwrap_or_default(), &work_root);
        bash.never_read = never_read(path, &report_dir, &litellm, redmine.as_ref());
        let demo = self.demo(raw.demo.unwrap_or_default());
        let metrics_textfile = self.metrics(raw.metrics.unwrap_or_default());
        let inbox = raw.inbox.map(|i| self.inbox(i));
        if let Some(i) = &inbox {
            // A command that could write the inbox could queue the next run's task or
            // rewrite an earlier run's REPORT; one that could read it would see other tasks.
            bash.never_read.push(NeverRead::place(&i.dir, "the inbox"));
        }
        let raw_intake = raw.intake.unwrap_or_default();
        let attachments = self.attachments(&raw_intake);
        bash.attachments = Some(attachments.dir.clone());
        let intake_order = self.intake_order(raw_intake.order, inbox.is_some(), redmine.is_some());
        let check = self.check_with(raw.check.unwrap_or_default(), bash.enabled);
        let workspace = raw.workspace.and_then(|w| self.workspace(w));
        self.work_root_outside(workspace.as_ref(), &work_root);
        let forge = raw.forge.and_then(|f| self.forge(f, workspace.as_ref()));
        let prompt = self.prompt(raw.prompt.unwrap_or_default());
        if !prompt.writable {
            bash.inputs = self.next_run_inputs(&prompt, &check);
        }
        Config {
            path: path.to_path_buf(),
            vertical,
            work_root,
            report_dir,
            max_rounds,
            max_tool_calls,
            finish,
            // `[finish]` and `[workflows]` are read after the rest (`parse_reading`): they
            // read files.
            result_schema: None,
            workflows: None,
            session,
            redmine,
            litellm,
            models,
            prices,
            budget,
            bash,
            files,
            prompt,
            demo,
            metrics_textfile,
            inbox,
            intake_order,
            attachments,
            check,
            workspace,
            forge,
        }
    }

    /// `[check]`; a check runs in the bash tool's environment, so it needs the tool.
    fn check_with(&mut self, raw: RawCheck, bash_enabled: bool) -> CheckConfig {
        let check = self.check(raw);
        if check.any() && !bash_enabled {
            self.problem(
                "[check].command",
                "the check runs with the bash tool's environment and sandbox: it needs [tools.bash] enabled = true",
            );
        }
        check
    }

    /// `report_dir` (default `reports`, relative to the config); empty is a mistake.
    fn report_dir(&mut self, raw: Option<String>) -> PathBuf {
        if raw.as_deref().is_some_and(|d| d.trim().is_empty()) {
            // An empty path would put REPORTs beside the config, which nobody means.
            self.problem(
                "report_dir",
                "must not be empty (leave it out for the default, \"reports\")",
            );
        }
        self.path(raw, "reports")
    }

    /// `[loop]`: the round cap, the tool calls per reply, how a turn ends.
    fn loop_keys(&mut self, raw: RawLoop) -> (u32, u32, FinishMode) {
        let max_rounds = self.int_in("[loop].max_rounds", raw.max_rounds, 8, 1, 1000) as u32;
        let max_tool_calls =
            self.int_in("[loop].max_tool_calls", raw.max_tool_calls, 32, 1, 1000) as u32;
        let finish = match raw.finish.as_deref() {
            None | Some("tool") => FinishMode::Tool,
            Some("message") => FinishMode::Message,
            Some(other) => {
                self.problem(
                    "[loop].finish",
                    format!("must be \"tool\" or \"message\", got {other:?}"),
                );
                FinishMode::Tool
            }
        };
        (max_rounds, max_tool_calls, finish)
    }

    /// `[prompt]`.
    fn prompt(&mut self, raw: RawPrompt) -> PromptConfig {
        PromptConfig {
            agents_max_bytes: self.int_in(
                "[prompt].agents_max_bytes",
                raw.agents_max_bytes,
                PromptConfig::default().agents_max_bytes as i64,
                0,
                1024 * 1024,
            ) as usize,
            skills_dir: raw.skills_dir.and_then(|d| self.skills_dir(d)),
            writable: raw.writable.unwrap_or(false),
        }
    }

    /// The task worktrees go under `work_root`: it must not lie inside the repository.
    fn work_root_outside(&mut self, workspace: Option<&WorkspaceConfig>, work_root: &Path) {
        if let Some(ws) = workspace.filter(|w| work_root.starts_with(&w.repo)) {
            self.problem(
                "[workspace].repo",
                format!(
                    "work_root {} lies inside the repository {}: the task worktrees go under work_root, so put it outside",
                    work_root.display(),
                    ws.repo.display()
                ),
            );
        }
    }

    fn inbox(&mut self, raw: RawInbox) -> InboxConfig {
        if raw.dir.as_deref().is_none_or(|d| d.trim().is_empty()) {
            self.problem("[inbox].dir", "is required when [inbox] is present");
        }
        InboxConfig {
            dir: self.path(raw.dir, "inbox"),
            stale_after_mins: self.int_in(
                "[inbox].stale_after_mins",
                raw.stale_after_mins,
                120,
                1,
                525_600,
            ) as u64,
        }
    }

    /// The sources in the order intake asks them; every configured source is asked.
    fn intake_order(
        &mut self,
        order: Option<Vec<String>>,
        inbox: bool,
        redmine: bool,
    ) -> Vec<SourceName> {
        let configured: Vec<SourceName> =
            [(SourceName::Inbox, inbox), (SourceName::Redmine, redmine)]
                .into_iter()
                .filter_map(|(s, on)| on.then_some(s))
                .collect();
        let Some(order) = order else {
            return configured;
        };
        let mut out = Vec::new();
        for name in &order {
            let source = match name.as_str() {
                "inbox" => SourceName::Inbox,
                "redmine" => SourceName::Redmine,
                other => {
                    self.problem(
                        "[intake].order",
                        format!(
                            "unknown source {other:?} (the sources are \"inbox\" and \"redmine\")"
                        ),
                    );
                    continue;
                }
            };
            if !configured.contains(&source) {
                self.problem(
                    "[intake].order",
                    format!("names {name:?}, but [{name}] is not configured"),
                );
            } else if out.contains(&source) {
                self.problem("[intake].order", format!("names {name:?} twice"));
            } else {
                out.push(source);
            }
        }
        for source in configured {
            if !out.contains(&source) && order.iter().all(|n| n != source.as_str()) {
                self.problem(
                    "[intake].order",
                    format!("leaves out {:?}, which is configured", source.as_str()),
                );
            }
        }
        out
    }

    fn metrics(&mut self, raw: RawMetrics) -> Option<PathBuf> {
        let text = raw.textfile?;
        if !text.ends_with(".prom") {
            // node_exporter's textfile collector reads only *.prom files.
            self.problem(
                "[metrics].textfile",
                format!("must end in .prom (node_exporter reads only those), got {text:?}"),
            );
        }
        Some(self.path(Some(text), ""))
    }

    fn litellm(&mut self, raw: RawLitellm) -> LitellmConfig {
        let replay = raw.replay.map(|p| self.dir.join(p));
        let base_url = self.url("[litellm].base_url", raw.base_url.clone());
        // The endpoint pasted whole would be requested as .../chat/completions/chat/completions
        // and answered with a bare 404.
        if let Some(base) = base_url
            .as_deref()
            .and_then(|u| u.strip_suffix("/chat/completions"))
        {
            self.problem(
                "[litellm].base_url",
                format!(
                    "ends in /chat/completions, which harness appends itself: set it to {:?}",
                    crate::secrets::masked_url(base)
                ),
            );
        }
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
            // `workflow:NAME` is checked with [workflows].
            if !defined(tier) && !tier.starts_with(super::CLASS_PREFIX) {
                problems.push((
                    format!("[models.classes].{class}"),
                    format!("maps to tier {tier:?}, which [models] does not define"),
                ));
            }
        }
        for (k, m) in problems {
            self.problem(&k, m);
        }
        let vision = self.vision(raw.vision, &tiers);
        ModelsConfig {
            tiers,
            default_tier: raw.default_tier,
            classes,
            vision,
        }
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
            status_needs_input: self.status_name(
                "[redmine.writeback].status_needs_input",
                raw.status_needs_input,
            ),
            assign_needs_input_to_author: match raw.assign_needs_input.as_deref() {
                None => false,
                Some("author") => true,
                Some(other) => {
                    self.problem(
                        "[redmine.writeback].assign_needs_input",
                        format!("must be \"author\" (or left out), got {other:?}"),
                    );
                    false
                }
            },
            max_note_chars: self.int_in(
                "[redmine.writeback].max_note_chars",
                raw.max_note_chars,
                20_000,
                500,
                1_000_000,
            ) as usize,
            result_fields: self.result_fields(raw.result_fields),
        }
    }

    fn session(&mut self, raw: RawSession) -> SessionConfig {
        let d = SessionConfig::default();
        let store = match raw.store.as_deref() {
            None | Some("auto") => SessionStore::Auto,
            Some("redmine") => SessionStore::Redmine,
            Some("local") => SessionStore::Local,
            Some(other) => {
                self.problem(
                    "[session].store",
                    format!("must be \"auto\", \"redmine\" or \"local\", got {other:?}"),
                );
                d.store
            }
        };
        SessionConfig {
            enabled: raw.enabled.unwrap_or(d.enabled),
            store,
            max_history_tokens: self.int_in(
                "[session].max_history_tokens",
                raw.max_history_tokens,
                d.max_history_tokens as i64,
                1000,
                10_000_000,
            ) as u64,
            max_attachment_bytes: self.int_in(
                "[session].max_attachment_bytes",
                raw.max_attachment_bytes,
                d.max_attachment_bytes as i64,
                1024,
                1 << 30,
            ) as u64,
        }
    }
}

/// The paths no command may read: the config file, each `file:` key, the report dir. PURE.
fn never_read(
    config: &Path,
    report_dir: &Path,
    litellm: &LitellmConfig,
    redmine: Option<&RedmineConfig>,
) -> Vec<NeverRead> {
    let mut out = vec![
        NeverRead {
            path: config.to_path_buf(),
            what: "the config file".to_string(),
            may_share_work_root: true,
        },
        NeverRead {
            path: report_dir.to_path_buf(),
            what: "the report dir".to_string(),
            may_share_work_root: true,
        },
    ];
    let keys = [
        ("[litellm].key_ref", litellm.key_ref.as_ref()),
        ("[redmine].key_ref", redmine.map(|r| &r.key_ref)),
    ];
    for (key, key_ref) in keys {
        if let Some(KeyRef::File(path)) = key_ref {
            out.push(NeverRead {
                path: clean_path(path),
                what: format!("the key file of {key}"),
                may_share_work_root: false,
            });
        }
    }
    out
}
