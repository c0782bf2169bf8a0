//! Config stage, PURE: `[check]` and `[workspace]`, the keys of code work that proves itself.
//! Raw structs in, the resolved [`CheckConfig`] and [`WorkspaceConfig`] out, problems by key.

use std::collections::BTreeMap;

use super::raw::{RawCheck, RawCheckClass, RawWorkspace};
use super::validate::Validator;
use super::{is_name, secs, CheckConfig, CheckSpec, PromptConfig, WorkspaceConfig};
use crate::workspace::name;

/// `[check]` defaults: seconds, attempts, bytes.
const TIMEOUT_SECS: i64 = 600;
const MAX_ATTEMPTS: i64 = 3;
const FEEDBACK_BYTES: i64 = 8192;

impl Validator {
    /// [`next_run_inputs`], called from the config's assembly.
    pub(super) fn next_run_inputs(
        &self,
        prompt: &PromptConfig,
        check: &CheckConfig,
    ) -> Vec<(String, String)> {
        next_run_inputs(prompt, check)
    }

    pub(super) fn check(&mut self, raw: RawCheck) -> CheckConfig {
        let top = RawCheckClass {
            command: raw.command,
            timeout_secs: raw.timeout_secs,
            max_attempts: raw.max_attempts,
            feedback_bytes: raw.feedback_bytes,
        };
        let default = self.check_spec("[check]", &top, &RawCheckClass::default());
        let mut classes = BTreeMap::new();
        for (class, over) in raw.classes.unwrap_or_default() {
            let key = format!("[check.classes.{class}]");
            if !is_name(&class) {
                self.problem(&key, "a class name is 1-64 characters of A-Z a-z 0-9 . _ -");
                continue;
            }
            if over.command.is_none() && top.command.is_none() {
                self.problem(&key, "no command: set command here or in [check]");
                continue;
            }
            if let Some(spec) = self.check_spec(&key, &over, &top) {
                classes.insert(class, spec);
            }
        }
        CheckConfig { default, classes }
    }

    /// `own`'s keys over `base`'s, then the defaults; `None` when neither sets a command.
    fn check_spec(
        &mut self,
        key: &str,
        own: &RawCheckClass,
        base: &RawCheckClass,
    ) -> Option<CheckSpec> {
        let command = own.command.clone().or_else(|| base.command.clone());
        let timeout = self.int_in(
            &format!("{key}.timeout_secs"),
            own.timeout_secs.or(base.timeout_secs),
            TIMEOUT_SECS,
            1,
            86_400,
        );
        let max_attempts = self.int_in(
            &format!("{key}.max_attempts"),
            own.max_attempts.or(base.max_attempts),
            MAX_ATTEMPTS,
            1,
            100,
        );
        let feedback_bytes = self.int_in(
            &format!("{key}.feedback_bytes"),
            own.feedback_bytes.or(base.feedback_bytes),
            FEEDBACK_BYTES,
            256,
            1024 * 1024,
        );
        let command = command?;
        if command.trim().is_empty() {
            self.problem(
                &format!("{key}.command"),
                "must not be empty (leave [check] out for no check)",
            );
            return None;
        }
        Some(CheckSpec {
            command,
            timeout: secs(timeout),
            max_attempts: max_attempts as u32,
            feedback_bytes: feedback_bytes as usize,
        })
    }

    pub(super) fn workspace(&mut self, raw: RawWorkspace) -> Option<WorkspaceConfig> {
        let repo = match raw.repo {
            Some(r) if !r.trim().is_empty() => self.path(Some(r), "."),
            _ => {
                self.problem(
                    "[workspace].repo",
                    "is required: the git repository tasks work in",
                );
                return None;
            }
        };
        let base = match raw.base {
            None => {
                self.problem(
                    "[workspace].base",
                    "is required: the branch each task's branch starts from (say it explicitly, e.g. \"main\")",
                );
                return None;
            }
            Some(b) => b,
        };
        if let Err(e) = name::check_branch(&base) {
            self.problem("[workspace].base", e);
        }
        let branch = raw
            .branch
            .unwrap_or_else(|| name::DEFAULT_BRANCH.to_string());
        if let Err(e) = name::check_template(&branch) {
            self.problem("[workspace].branch", e);
        }
        if let Some(push) = &raw.push {
            if let Err(e) = name::check_remote(push) {
                self.problem("[workspace].push", e);
            }
        }
        let git_timeout = self.int_in(
            "[workspace].git_timeout_secs",
            raw.git_timeout_secs,
            120,
            1,
            86400,
        );
        let mut bytes = |key: &str, v: Option<i64>, default: i64| {
            let n = self.int_in(key, v, default, 1 << 10, 1 << 30);
            u64::try_from(n).unwrap_or(0)
        };
        let max_patch_bytes = bytes("[workspace].max_patch_bytes", raw.max_patch_bytes, 8 << 20);
        let max_file_bytes = bytes("[workspace].max_file_bytes", raw.max_file_bytes, 16 << 20);
        Some(WorkspaceConfig {
            repo,
            base,
            branch,
            push: raw.push,
            git_timeout: secs(git_timeout),
            max_patch_bytes,
            max_file_bytes,
        })
    }
}

/// What the next run reads from the work root, relative to it: `AGENTS.md`, the skills dir,
/// and each word of a `[check]` command that names a file there (`check.sh`, `./t/run.py`,
/// `Makefile` for `make`). PURE.
fn next_run_inputs(prompt: &PromptConfig, check: &CheckConfig) -> Vec<(String, String)> {
    // `prompt::AGENTS_FILE` (config is below prompt in the module graph).
    let mut out = vec![(
        "AGENTS.md".to_string(),
        "the project's instructions".to_string(),
    )];
    if let Some(dir) = &prompt.skills_dir {
        out.push((dir.clone(), "the skills dir".to_string()));
    }
    let specs = check.default.iter().chain(check.classes.values());
    for spec in specs {
        add_command_files(&mut out, &spec.command, "a file of the [check] command");
    }
    out
}

/// The files a check `command` runs (its path-like words, a Makefile for `make`) added to
/// `out` as next-run inputs, each once: a command of the turn must not rewrite the check.
pub(super) fn add_command_files(out: &mut Vec<(String, String)>, command: &str, what: &str) {
    let words = shell_words::split(command).unwrap_or_default();
    for w in &words {
        let name = w.trim_start_matches("./");
        let pathlike = !w.starts_with('-')
            && !w.starts_with('/')
            && !w.contains('=')
            && !w.split('/').any(|c| c == "..")
            && (w.contains('/') || w.contains('.'))
            && !name.is_empty();
        if pathlike && !out.iter().any(|(p, _)| p == name) {
            out.push((name.to_string(), what.to_string()));
        }
    }
    if words.first().is_some_and(|w| w == "make") {
        for f in ["Makefile", "makefile", "GNUmakefile"] {
            if !out.iter().any(|(p, _)| p == f) {
                out.push((f.to_string(), what.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::next_run_inputs;
    use crate::config::{parse, secs, CheckConfig, CheckSpec, PromptConfig};
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;

    const BASE: &str =
        "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\ndefault_tier = \"t\"\nt = \"m\"\n";

    fn problems(extra: &str) -> String {
        match parse(&format!("{BASE}{extra}"), Path::new("/etc/h/harness.toml")) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn class_overrides_sit_over_the_top_level_check() {
        let text = format!(
            "{BASE}[check]\ncommand = \"make test\"\nmax_attempts = 2\n[check.classes.code]\ntimeout_secs = 5\n[check.classes.docs]\ncommand = \"make docs\"\nfeedback_bytes = 1000\n"
        );
        let cfg = parse(&text, Path::new("/etc/h/harness.toml")).unwrap();
        let spec = |c, t, a, f| CheckSpec {
            command: String::from(c),
            timeout: Duration::from_secs(t),
            max_attempts: a,
            feedback_bytes: f,
        };
        assert_eq!(
            cfg.check.for_class(None),
            Some(&spec("make test", 600, 2, 8192))
        );
        assert_eq!(
            cfg.check.for_class(Some("other")),
            Some(&spec("make test", 600, 2, 8192))
        );
        assert_eq!(
            cfg.check.for_class(Some("code")),
            Some(&spec("make test", 5, 2, 8192))
        );
        assert_eq!(
            cfg.check.for_class(Some("docs")),
            Some(&spec("make docs", 600, 2, 1000))
        );
        let only_class = format!("{BASE}[check.classes.code]\ncommand = \"t\"\n");
        let cfg = parse(&only_class, Path::new("/etc/h/harness.toml")).unwrap();
        assert_eq!(cfg.check.for_class(None), None);
        assert!(cfg.check.for_class(Some("code")).is_some());
    }

    #[test]
    fn check_problems_name_their_keys() {
        assert_eq!(problems(""), "");
        let p = problems(
            "[check]\ncommand = \" \"\nmax_attempts = 0\n[check.classes.x]\ntimeout_secs = 3\n",
        );
        assert!(p.contains("[check].command: must not be empty"), "{p}");
        assert!(
            p.contains("[check].max_attempts: must be between 1 and 100"),
            "{p}"
        );
        let p = problems("[check.classes.x]\ntimeout_secs = 3\n");
        assert!(p.contains("[check.classes.x]: no command"), "{p}");
        let p = problems("[check]\ncommand = \"t\"\n[tools.bash]\nenabled = false\n");
        assert!(p.contains("needs [tools.bash] enabled = true"), "{p}");
    }

    #[test]
    fn the_workspace_needs_a_repo_and_an_explicit_base() {
        let cfg = parse(
            &format!("{BASE}[workspace]\nrepo = \"src\"\nbase = \"main\"\n"),
            Path::new("/etc/h/harness.toml"),
        )
        .unwrap();
        let ws = cfg.workspace.unwrap();
        assert_eq!(ws.repo, Path::new("/etc/h/src"));
        assert_eq!(
            (ws.base.as_str(), ws.branch.as_str(), ws.push),
            ("main", "harness/{vertical}-{task_id}", None)
        );
        let p = problems("[workspace]\nrepo = \".\"\nbase = \"main\"\n");
        assert!(
            p.contains("[workspace].repo: work_root /etc/h lies inside the repository /etc/h"),
            "{p}"
        );
        assert_eq!((ws.max_patch_bytes, ws.max_file_bytes), (8 << 20, 16 << 20));
        let p = problems(
            "[workspace]\nrepo = \"r\"\nbase = \"main\"\nmax_patch_bytes = 1023\nmax_file_bytes = 2000000000\n",
        );
        assert!(
            p.contains(
                "[workspace].max_patch_bytes: must be between 1024 and 1073741824, got 1023"
            ),
            "{p}"
        );
        assert!(
            p.contains("[workspace].max_file_bytes: must be between 1024"),
            "{p}"
        );
        let p = problems("[workspace]\nrepo = \"r\"\n");
        assert!(p.contains("[workspace].base: is required"), "{p}");
        let p = problems("[workspace]\nbase = \"main\"\n");
        assert!(p.contains("[workspace].repo: is required"), "{p}");
        let p = problems(
            "[workspace]\nrepo = \"r\"\nbase = \"a..b\"\nbranch = \"x/{id}\"\npush = \"-f\"\n",
        );
        assert!(p.contains("[workspace].base: \"a..b\""), "{p}");
        assert!(
            p.contains("[workspace].branch: \"x/{id}\" uses {id}"),
            "{p}"
        );
        assert!(
            p.contains("[workspace].push: \"-f\" is not a remote name"),
            "{p}"
        );
    }

    #[test]
    fn the_next_run_s_inputs_are_the_instructions_skills_and_the_check_s_files() {
        let prompt = PromptConfig {
            skills_dir: Some("skills".into()),
            ..PromptConfig::default()
        };
        let spec = |c: &str| CheckSpec {
            command: c.into(),
            timeout: secs(1),
            max_attempts: 1,
            feedback_bytes: 1,
        };
        let check = CheckConfig {
            default: Some(spec(
                "bash ./check.sh --fast && python3 -m pytest -q t/unit x=1.py",
            )),
            classes: BTreeMap::from([("c".to_string(), spec("make test"))]),
        };
        let paths: Vec<String> = next_run_inputs(&prompt, &check)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            paths,
            [
                "AGENTS.md",
                "skills",
                "check.sh",
                "t/unit",
                "Makefile",
                "makefile",
                "GNUmakefile"
            ]
        );
    }
}
