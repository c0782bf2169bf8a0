//! Dry-run stage, PURE: the PLAN that `harness once --dry-run` prints instead of running
//! the turn. The config, the task, its route and the sandbox decision in; text out.

use std::path::Path;

use crate::config::Config;
use crate::intake::Task;
use crate::routing::Route;
use crate::tools::sandbox::Status;
use harness_gate as gate;

/// What a `--dry-run` shows: the run's plan, nothing executed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The vertical.
    pub vertical: String,
    /// `[id] subject (source src)`.
    pub task: String,
    /// `class "x" -> tier t -> model m`.
    pub routing: String,
    /// `bash (allow=N deny=M default=deny timeout=60s)` or `none`.
    pub tools: String,
    /// How commands would be confined, e.g. `landlock (ABI 7): writes only under ...`.
    pub sandbox: String,
    /// Round cap.
    pub max_rounds: u32,
    /// `[budget] max_total_tokens`, if set.
    pub max_total_tokens: Option<u64>,
    /// `[budget] max_cost_usd`, if set.
    pub max_cost_usd: Option<f64>,
    /// Where replies would come from.
    pub llm: String,
    /// Where the REPORT would go.
    pub report_dir: String,
    /// The success check of the task's class, if any: `` `cmd` (max N attempts, ...) ``.
    pub check: Option<String>,
    /// The task's git worktree, when `[workspace]` is set.
    pub workspace: Option<String>,
    /// What the task's session would continue; `None` with sessions off.
    pub session: Option<String>,
    /// `network = "allowlist"`: the names commands may reach through the proxy.
    pub egress: Option<String>,
    /// `[finish] result_schema`: the schema file the `finish` result must match.
    pub result: Option<String>,
    /// A workflow task: its stages, how many run, and where the task stands.
    pub workflow: Option<String>,
    /// A task that may carry attachments (Redmine, inbox): their bounds, where text goes,
    /// whether images are shown.
    pub attachments: Option<String>,
}

/// Renders the PLAN block printed by `--dry-run`.
pub(crate) fn render(p: &Plan) -> String {
    let mut bound = format!("max {} rounds", p.max_rounds);
    if let Some(t) = p.max_total_tokens {
        bound.push_str(&format!(", max {t} tokens"));
    }
    if let Some(c) = p.max_cost_usd {
        bound.push_str(&format!(", max {c} USD"));
    }
    let mut out = format!(
        "PLAN (dry-run)\n  vertical: {}\n  task: {}\n  routing: {}\n  tools: {}\n  sandbox: {}\n  bound: {bound}\n  llm: {}\n  report: {}\n",
        p.vertical, p.task, p.routing, p.tools, p.sandbox, p.llm, p.report_dir
    );
    if let Some(check) = &p.check {
        out.push_str(&format!("  check: {check}\n"));
    }
    if let Some(ws) = &p.workspace {
        out.push_str(&format!("  workspace: {ws}\n"));
    }
    if let Some(session) = &p.session {
        out.push_str(&format!("  session: {session}\n"));
    }
    if let Some(egress) = &p.egress {
        out.push_str(&format!("  egress: {egress}\n"));
    }
    if let Some(result) = &p.result {
        out.push_str(&format!("  result: {result}\n"));
    }
    if let Some(workflow) = &p.workflow {
        out.push_str(&format!("  workflow: {workflow}\n"));
    }
    if let Some(attachments) = &p.attachments {
        out.push_str(&format!("  attachments: {attachments}\n"));
    }
    out
}

/// The PLAN of a run: what it would do with this task, route and sandbox, from the config.
pub(crate) fn plan(
    cfg: &Config,
    task: &Task,
    route: &Route,
    replay: Option<&Path>,
    sandbox: Status,
) -> Plan {
    Plan {
        vertical: cfg.vertical.clone(),
        task: format!(
            "[{}] {} (source {})",
            task.id,
            task.subject,
            task.source.as_str()
        ),
        routing: route.describe(),
        tools: tools_line(cfg),
        sandbox: if cfg.bash.enabled {
            sandbox.plan_line(cfg.bash.write_roots.len())
        } else {
            "none (no bash tool)".to_string()
        },
        max_rounds: cfg.max_rounds,
        max_total_tokens: cfg.budget.max_total_tokens,
        max_cost_usd: cfg.budget.max_cost_usd,
        llm: llm_line(cfg, replay),
        report_dir: cfg.report_dir.display().to_string(),
        check: cfg
            .check
            .for_class(route.class.as_deref())
            .map(|c| {
                format!(
                    "`{}` when the model is done (max {} attempts, timeout {}s, {} bytes of output back)",
                    c.command,
                    c.max_attempts,
                    c.timeout.as_secs(),
                    c.feedback_bytes
                )
            }),
        workspace: workspace_line(cfg, task),
        session: None,
        egress: cfg
            .bash
            .egress
            .as_ref()
            .filter(|_| cfg.bash.enabled)
            .map(crate::tools::egress::describe),
        result: cfg.result_schema.as_ref().map(|r| {
            format!(
                "a `finish` result matching {} (draft 2020-12; required with done)",
                r.path.display()
            )
        }),
        workflow: None,
        attachments: (task.source != crate::intake::Source::Demo)
            .then(|| attachments_line(&cfg.attachments, route)),
    }
}

/// The PLAN's `attachments:` line: the bounds, where text attachments go, and whether the
/// routed tier is shown images.
fn attachments_line(a: &crate::config::AttachmentsConfig, route: &Route) -> String {
    let images = if route.vision {
        format!("images shown to tier {} (a vision tier)", route.tier)
    } else {
        format!(
            "images listed only (tier {} is not in [models.vision] tiers)",
            route.tier
        )
    };
    format!(
        "up to {} files, {} bytes each, {} in all; text placed under {} (the file tools only read there); {images}",
        a.max_count, a.max_bytes, a.max_total_bytes, a.dir
    )
}

/// The PLAN's `workflow:` line: the stages, how many a run takes, and the stage this run
/// would start with (after `last`, the session's last mark of the task).
pub(crate) fn workflow_line(
    flows: &crate::config::Workflows,
    flow: &crate::config::Workflow,
    last: Option<&crate::workflow::state::Mark>,
) -> String {
    let at = crate::workflow::state::position(flow, last);
    let names: Vec<&str> = flow.stages.iter().map(|s| s.name.as_str()).collect();
    format!(
        "{} ({}), {} per run, max_loops {}; this run starts at stage {}/{} {}{}",
        flow.name,
        names.join(" -> "),
        match flows.per_run {
            crate::config::PerRun::Stage => "one stage",
            crate::config::PerRun::All => "every stage",
        },
        flows.max_loops,
        at.index + 1,
        flow.stages.len(),
        names.get(at.index).copied().unwrap_or("?"),
        if at.loops > 0 {
            format!(" ({} loops taken)", at.loops)
        } else {
            String::new()
        }
    )
}

/// The PLAN's `tools:` line: the bash tool's policy and bounds, and the file tools when on.
fn tools_line(cfg: &Config) -> String {
    if !cfg.bash.enabled {
        return "none ([tools.bash] enabled = false)".to_string();
    }
    let default = match cfg.bash.policy.default {
        gate::Verdict::Allow => "allow",
        gate::Verdict::Deny => "deny",
    };
    let files = if cfg.files.enabled {
        ", read_file write_file edit_file (jailed in the work root)"
    } else {
        ""
    };
    format!(
        "bash (allow={} deny={} default={default} timeout={}s){files}",
        cfg.bash.policy.allow.len(),
        cfg.bash.policy.deny.len(),
        cfg.bash.timeout.as_secs()
    )
}

/// The PLAN's `llm:` line: the cassette replayed, or the endpoint with its key ref and modes.
fn llm_line(cfg: &Config, replay: Option<&Path>) -> String {
    match (replay, &cfg.litellm.base_url) {
        (Some(p), _) => format!("replay {}", p.display()),
        (None, Some(url)) => format!(
            "{url}/chat/completions (key {}{}{})",
            cfg.litellm
                .key_ref
                .as_ref()
                .map_or_else(|| "none".to_string(), |k| k.describe()),
            if cfg.litellm.streaming {
                ", streaming"
            } else {
                ""
            },
            if cfg.litellm.preflight {
                ", preflight"
            } else {
                ""
            }
        ),
        (None, None) => "none".to_string(),
    }
}

/// The PLAN's `workspace:` line when `[workspace]` is set: the task's branch, its base, the
/// worktree, where it is pushed and, with `[forge]`, its pull request.
fn workspace_line(cfg: &Config, task: &Task) -> Option<String> {
    cfg.workspace.as_ref().map(|w| {
        let branch = crate::workspace::name::branch(&w.branch, &cfg.vertical, &task.id);
        format!(
            "branch {branch} from {} of {}, worktree {}{}{}",
            w.base,
            w.repo.display(),
            cfg.work_root
                .join(crate::workspace::name::worktree_dir(&branch))
                .display(),
            w.push.as_ref().map_or_else(
                || ", not pushed".to_string(),
                |r| format!(", pushed to {r}")
            ),
            cfg.forge.as_ref().map_or_else(String::new, forge_words)
        )
    })
}

/// `, a pull request on gitea acme/widgets (done: ready, failed: branch only)`.
fn forge_words(f: &crate::config::ForgeConfig) -> String {
    use crate::config::{OnFailure, PrMode};
    let done = match f.pr {
        PrMode::Off => "none",
        PrMode::Draft => "draft",
        PrMode::Ready => "ready",
    };
    let failed = match (f.pr, f.on_failure) {
        (PrMode::Off, _) | (_, OnFailure::Branch) => "branch only",
        (_, OnFailure::Draft) => "draft",
    };
    format!(
        ", a pull request on {} {} (done: {done}, failed: {failed}, needs_input: none)",
        f.kind.as_str(),
        f.repo
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn plan_block() {
        let p = Plan {
            vertical: "demo".into(),
            task: "[demo-1] MVP demo: GLM self-description (source demo)".into(),
            routing: "class \"primary\" -> tier mopac-primary -> model glm-5.3".into(),
            tools: "bash (allow=18 deny=7 default=deny timeout=60s)".into(),
            sandbox: "landlock (ABI 7): writes only under work_root".into(),
            max_rounds: 8,
            max_total_tokens: None,
            max_cost_usd: None,
            llm: "http://127.0.0.1:4000/v1/chat/completions (key env:HARNESS_LITELLM_KEY)".into(),
            report_dir: "reports".into(),
            check: None,
            workspace: None,
            egress: None,
            session: None,
            result: None,
            workflow: None,
            attachments: None,
        };
        assert_eq!(
            render(&p),
            "PLAN (dry-run)
  vertical: demo
  task: [demo-1] MVP demo: GLM self-description (source demo)
  routing: class \"primary\" -> tier mopac-primary -> model glm-5.3
  tools: bash (allow=18 deny=7 default=deny timeout=60s)
  sandbox: landlock (ABI 7): writes only under work_root
  bound: max 8 rounds
  llm: http://127.0.0.1:4000/v1/chat/completions (key env:HARNESS_LITELLM_KEY)
  report: reports
"
        );
        let budgeted = Plan {
            max_total_tokens: Some(5000),
            max_cost_usd: Some(0.25),
            ..p
        };
        assert!(
            render(&budgeted).contains("\n  bound: max 8 rounds, max 5000 tokens, max 0.25 USD\n")
        );
        let code = Plan {
            check: Some("`make test` when the model is done".into()),
            workspace: Some("branch harness/demo-demo-1 from main".into()),
            egress: None,
            ..budgeted
        };
        assert!(render(&code).ends_with(
            "  check: `make test` when the model is done\n  workspace: branch harness/demo-demo-1 from main\n"
        ));
    }
}
