//! Config stage, PURE (skill files come through the caller's [`ReadFile`]): `[workflows]`,
//! named pipelines of stages, each a skill with its own tier, bound, check and retries.
//! Raw tables in, the resolved [`Workflows`] out, every problem by key; the graph (stages
//! exist, edges point at earlier stages, nothing unreachable) is checked here, once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{RawStage, RawWorkflow, RawWorkflows};
use super::validate::Validator;
use super::{
    is_name, CheckSpec, Config, PerRun, ReadFile, StageSpec, Workflow, Workflows, CLASS_PREFIX,
    MAX_SKILL_BYTES,
};
use crate::workflow::skill::{self, Skill};

/// Stages of one workflow, at most.
pub(super) const MAX_STAGES: usize = 16;

impl Validator {
    /// `[workflows]` on the assembled config (the skills are read through `read`).
    pub(super) fn workflows(
        &mut self,
        raw: Option<RawWorkflows>,
        read: ReadFile,
        cfg: &mut Config,
    ) {
        self.class_workflows(raw.as_ref(), cfg);
        let Some(raw) = raw else { return };
        let per_run = match raw.per_run.as_deref() {
            None | Some("stage") => PerRun::Stage,
            Some("all") => PerRun::All,
            Some(other) => {
                self.problem(
                    "[workflows].per_run",
                    format!("must be \"stage\" or \"all\", got {other:?}"),
                );
                PerRun::Stage
            }
        };
        if per_run == PerRun::Stage && !cfg.session.enabled {
            self.problem(
                "[workflows].per_run",
                "\"stage\" keeps the workflow's place in the task's session: it needs [session] enabled = true (or per_run = \"all\")",
            );
        }
        let max_loops = self.int_in("[workflows].max_loops", raw.max_loops, 2, 0, 20) as u32;
        let mut named = BTreeMap::new();
        let defined = raw.named.len();
        for (name, value) in raw.named {
            let Some(w) = self.read_workflow(&name, value) else {
                continue;
            };
            if let Some(w) = self.workflow(&name, w, read, cfg) {
                named.insert(name, w);
            }
        }
        if defined == 0 {
            self.problem(
                "[workflows]",
                "defines no workflow (e.g. [workflows.fix] with stages = [...])",
            );
        }
        if let Some(d) = raw.default.as_deref().filter(|d| !named.contains_key(*d)) {
            self.problem(
                "[workflows].default",
                format!("names workflow {d:?}, which [workflows] does not define"),
            );
        }
        cfg.workflows = Some(Workflows {
            named,
            default: raw.default,
            max_loops,
            per_run,
        });
    }

    /// `[workflows.<name>]`'s table, every unknown key named (with the key it may be a
    /// typo of).
    fn read_workflow(&mut self, name: &str, value: toml::Value) -> Option<RawWorkflow> {
        let mut unknown = Vec::new();
        let read = serde_ignored::deserialize(value, |p| {
            unknown.push(super::unknown_key(&format!("workflows.{name}.{p}")))
        });
        self.problems.extend(unknown);
        match read {
            Ok(w) => Some(w),
            Err(e) => {
                self.problem(&format!("[workflows.{name}]"), e.to_string().trim_end());
                None
            }
        }
    }

    /// `[models.classes]` values `workflow:NAME`: the workflow must exist.
    fn class_workflows(&mut self, raw: Option<&RawWorkflows>, cfg: &Config) {
        for (class, value) in &cfg.models.classes {
            let Some(name) = value.strip_prefix(CLASS_PREFIX) else {
                continue;
            };
            if !raw.is_some_and(|r| r.named.contains_key(name)) {
                self.problem(
                    &format!("[models.classes].{class}"),
                    format!("names workflow {name:?}, which [workflows] does not define"),
                );
            }
        }
    }

    fn workflow(
        &mut self,
        name: &str,
        raw: RawWorkflow,
        read: ReadFile,
        cfg: &mut Config,
    ) -> Option<Workflow> {
        let key = format!("[workflows.{name}]");
        if !is_name(name) {
            self.problem(
                &key,
                "a workflow name is 1-64 characters of A-Z a-z 0-9 . _ -",
            );
            return None;
        }
        let order = raw.stages.unwrap_or_default();
        let mut tables = raw.stage.unwrap_or_default();
        if order.is_empty() {
            self.problem(&format!("{key}.stages"), "must list at least one stage");
            return None;
        }
        if order.len() > MAX_STAGES {
            self.problem(
                &format!("{key}.stages"),
                format!("lists {} stages; at most {MAX_STAGES}", order.len()),
            );
            return None;
        }
        for (i, s) in order.iter().enumerate() {
            if order[..i].contains(s) {
                self.problem(&format!("{key}.stages"), format!("lists {s:?} twice"));
                return None;
            }
        }
        for extra in tables.keys().filter(|k| !order.contains(k)) {
            self.problem(
                &format!("[workflows.{name}.stage.{extra}]"),
                "is not in the workflow's stages list, so it can never run",
            );
        }
        let mut stages = Vec::new();
        for (index, stage) in order.iter().enumerate() {
            let raw = tables.remove(stage).unwrap_or_default();
            stages.push(self.stage(name, stage, index, &order, raw, read, cfg)?);
        }
        Some(Workflow {
            name: name.to_string(),
            intent: crate::workflow::words::words(raw.intent.as_deref().unwrap_or("")),
            stages,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn stage(
        &mut self,
        workflow: &str,
        name: &str,
        index: usize,
        order: &[String],
        raw: RawStage,
        read: ReadFile,
        cfg: &mut Config,
    ) -> Option<StageSpec> {
        let key = format!("[workflows.{workflow}.stage.{name}]");
        if !is_name(name) {
            self.problem(&key, "a stage name is 1-64 characters of A-Z a-z 0-9 . _ -");
            return None;
        }
        let Some(skill_path) = raw.skill.filter(|s| !s.trim().is_empty()) else {
            self.problem(
                &format!("{key}.skill"),
                "is required: the stage's instructions (a Markdown file)",
            );
            return None;
        };
        let skill = self.skill(&format!("{key}.skill"), &skill_path, read, cfg)?;
        if raw.tier.is_none() && cfg.models.default_tier.is_none() {
            self.problem(&format!("{key}.tier"), "is not set and [models].default_tier is not either: name the tier this stage runs on");
        }
        if let Some(t) = raw
            .tier
            .as_deref()
            .filter(|t| !cfg.models.tiers.contains_key(*t))
        {
            self.problem(
                &format!("{key}.tier"),
                format!("names tier {t:?}, which [models] does not define"),
            );
        }
        let on_fail = self.edge(&key, name, index, order, raw.on_fail.as_deref());
        let check = raw.check.map(|command| {
            if command.trim().is_empty() {
                self.problem(
                    &format!("{key}.check"),
                    "must not be empty (leave it out for the model's verdict)",
                );
            }
            CheckSpec {
                command,
                timeout: Duration::from_secs(self.int_in(
                    &format!("{key}.check_timeout_secs"),
                    raw.check_timeout_secs,
                    600,
                    1,
                    86_400,
                ) as u64),
                max_attempts: 1,
                feedback_bytes: 8192,
            }
        });
        if let Some(c) = check.as_ref().filter(|_| !cfg.prompt.writable) {
            super::code::add_command_files(
                &mut cfg.bash.inputs,
                &c.command,
                "a file of a workflow stage's check",
            );
        }
        if check.is_some() && !cfg.bash.enabled {
            self.problem(&format!("{key}.check"), "the check runs with the bash tool's environment and sandbox: it needs [tools.bash] enabled = true");
        }
        Some(StageSpec {
            name: name.to_string(),
            skill,
            tier: raw.tier,
            retries: self.int_in(&format!("{key}.retries"), raw.retries, 0, 0, 10) as u32,
            max_rounds: raw
                .max_rounds
                .map(|n| self.int_in(&format!("{key}.max_rounds"), Some(n), 8, 1, 1000) as u32),
            check,
            on_fail,
        })
    }

    /// `on_fail`: the index of this stage or an earlier one it names.
    fn edge(
        &mut self,
        key: &str,
        name: &str,
        index: usize,
        order: &[String],
        on_fail: Option<&str>,
    ) -> Option<usize> {
        let target = on_fail?;
        let key = format!("{key}.on_fail");
        match order.iter().position(|s| s == target) {
            Some(at) if at <= index => Some(at),
            Some(_) => {
                self.problem(&key, format!("{target:?} comes after {name:?}: an edge back must go to this stage or an earlier one"));
                None
            }
            None => {
                self.problem(
                    &key,
                    format!("names stage {target:?}, which the workflow's stages do not list"),
                );
                None
            }
        }
    }

    /// The skill file (relative to the config's directory), read, bounded and parsed; one
    /// inside the work root is an input of the next run, so commands may not rewrite it.
    fn skill(&mut self, key: &str, path: &str, read: ReadFile, cfg: &mut Config) -> Option<Skill> {
        let file = self.path(Some(path.to_string()), "");
        if let Some(known) = self.skills.get(&file) {
            return Some(known.clone());
        }
        let text = match read(&file) {
            Ok(text) => text,
            Err(e) => {
                self.problem(key, format!("cannot read {}: {e:#}", file.display()));
                return None;
            }
        };
        if text.len() > MAX_SKILL_BYTES {
            self.problem(
                key,
                format!(
                    "{} is {} bytes; a skill is at most {MAX_SKILL_BYTES}",
                    file.display(),
                    text.len()
                ),
            );
            return None;
        }
        let parsed = match skill::parse(&text, file.clone()) {
            Ok(s) => s,
            Err(e) => {
                self.problem(key, format!("{}: {e}", file.display()));
                return None;
            }
        };
        protect_input(cfg, &file, "a workflow skill ([workflows])");
        self.skills.insert(file, parsed.clone());
        Some(parsed)
    }
}

/// A file the next run reads that lies in the work root: commands may not rewrite it.
fn protect_input(cfg: &mut Config, file: &Path, what: &str) {
    if cfg.prompt.writable {
        return;
    }
    if let Ok(inside) = file.strip_prefix(&cfg.work_root) {
        let inside: PathBuf = inside.to_path_buf();
        cfg.bash
            .inputs
            .push((inside.display().to_string(), what.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    const BASE: &str = "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\ndefault_tier = \"t\"\n[workflows]\n[workflows.fix]\nstages = [\"work\"]\n[workflows.fix.stage.work]\nskill = \"work/skill.md\"\ncheck = \"make -f ./check.mk test\"\n";

    fn load(text: &str) -> Result<crate::config::Config, crate::config::ConfigErrors> {
        crate::config::parse_reading(text, Path::new("/srv/h/harness.toml"), &|_| {
            Ok("Do the work.".to_string())
        })
    }

    #[test]
    fn a_stage_check_s_files_and_its_skill_are_inputs_commands_may_not_rewrite() {
        let cfg = load(&format!("work_root = \"work\"\n{BASE}")).unwrap();
        let inputs: Vec<&str> = cfg.bash.inputs.iter().map(|(p, _)| p.as_str()).collect();
        for want in ["check.mk", "Makefile", "skill.md"] {
            assert!(inputs.contains(&want), "{want} not in {inputs:?}");
        }
        // `[prompt] writable = true`: the operator lets commands change them.
        let cfg = load(&format!(
            "work_root = \"work\"\n{BASE}[prompt]\nwritable = true\n"
        ))
        .unwrap();
        assert!(!cfg.bash.inputs.iter().any(|(p, _)| p == "check.mk"));
    }

    #[test]
    fn per_run_stage_needs_sessions_and_a_bad_per_run_is_named() {
        let e = load(&format!("[session]\nenabled = false\n{BASE}")).unwrap_err();
        assert!(
            e.problems
                .iter()
                .any(|p| p.starts_with("[workflows].per_run: \"stage\" keeps")),
            "{e:?}"
        );
        let e =
            load(&BASE.replace("[workflows]\n", "[workflows]\nper_run = \"each\"\n")).unwrap_err();
        assert!(
            e.problems
                .iter()
                .any(|p| p == "[workflows].per_run: must be \"stage\" or \"all\", got \"each\""),
            "{e:?}"
        );
    }
}
