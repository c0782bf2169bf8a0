//! Workflow stage, PURE: the messages of one attempt of a stage. The system prompt is
//! harness's own plus the skill and how the stage passes; the user message is the task,
//! the previous stage's summary, and why the last attempt failed.

use crate::config::{StageSpec, Workflow};

/// What an attempt is told beside the task.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    /// The previous stage's summary.
    pub carried: Option<&'a str>,
    /// The stage it came from.
    pub carried_from: Option<&'a str>,
    /// Why the last attempt of this stage failed (for a retry).
    pub retry_reason: Option<&'a str>,
    /// What is new on the task since the last run (a human's answer).
    pub news: Option<&'a str>,
}

/// The stage's part of the system prompt, appended to harness's own.
pub fn system(base: &str, workflow: &Workflow, index: usize) -> String {
    let Some(stage) = workflow.stages.get(index) else {
        return base.to_string();
    };
    format!(
        "{base}\n\n## Workflow {}, stage {}/{}: {} ({})\n\nThis turn is one stage of a workflow: do this stage's work only; later stages do the rest.\n\n{}\n\n{}",
        workflow.name,
        index + 1,
        workflow.stages.len(),
        stage.name,
        stage.skill.title,
        stage.skill.body,
        passes(stage)
    )
}

/// How the stage passes, in the words the model reads.
fn passes(stage: &StageSpec) -> String {
    match (&stage.check, &stage.skill.success_check) {
        (Some(check), _) => format!(
            "The stage passes when the check `{}` exits 0; harness runs it when you call `finish` with `done`, and a failure comes back as the reason of a retry.",
            check.command
        ),
        (None, Some(line)) => format!(
            "The stage passes only if this holds: {line}\nCall `finish` with `done` only when it holds; otherwise call it with `failed` and say why in the summary."
        ),
        (None, None) => "Call `finish` with `done` when the stage's work is done; otherwise with `failed` and why.".to_string(),
    }
}

/// The user message of an attempt.
pub fn user(
    task_prompt: &str,
    workflow: &Workflow,
    index: usize,
    attempt: u32,
    inputs: &Inputs,
) -> String {
    let name = workflow.stages.get(index).map_or("?", |s| s.name.as_str());
    let mut out = format!(
        "{task_prompt}\n\n[harness] Workflow {}, stage {}/{}: {name} (attempt {attempt}).",
        workflow.name,
        index + 1,
        workflow.stages.len()
    );
    if let Some(text) = inputs.carried {
        out.push_str(&format!(
            "\n\n[harness] The previous stage ({}) ended with this summary:\n\n{text}",
            inputs.carried_from.unwrap_or("?")
        ));
    }
    if let Some(news) = inputs.news.filter(|n| !n.trim().is_empty()) {
        out.push_str(&format!("\n\n{news}"));
    }
    if let Some(reason) = inputs.retry_reason {
        out.push_str(&format!(
            "\n\n[harness] The previous attempt of this stage failed: {reason}\nFix that and try again."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::state::tests::flow;

    #[test]
    fn the_system_prompt_holds_the_skill_and_how_it_passes() {
        let w = flow(&[]);
        let s = system("BASE", &w, 1);
        assert!(
            s.starts_with("BASE\n\n## Workflow fix, stage 2/3: implement (implement)"),
            "{s}"
        );
        assert!(s.contains("do it") && s.contains("`failed`"), "{s}");
    }

    #[test]
    fn the_user_message_carries_the_summary_and_the_retry_reason() {
        let w = flow(&[]);
        let inputs = Inputs {
            carried: Some("1. change x"),
            carried_from: Some("plan"),
            retry_reason: Some("the check `t` exited 1"),
            news: None,
        };
        let u = user("Fix it", &w, 1, 2, &inputs);
        assert!(
            u.starts_with("Fix it\n\n[harness] Workflow fix, stage 2/3: implement (attempt 2)."),
            "{u}"
        );
        assert!(
            u.contains("previous stage (plan) ended with this summary:\n\n1. change x"),
            "{u}"
        );
        assert!(u.ends_with("Fix that and try again."), "{u}");
    }
}
