//! Workflow stage, PURE: where a task stands in its workflow (read from the session's run
//! records), how one stage's attempt ended, and where the workflow goes next.

use serde::{Deserialize, Serialize};

use crate::config::Workflow;

/// The most of a stage's summary carried to the next stage, in bytes.
pub const MAX_CARRIED_BYTES: usize = 16 * 1024;

/// How one attempt of a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its check passed (the command, or the model's verdict).
    Passed,
    /// Its check failed, or the model said it failed, or it ran out of rounds.
    Failed,
    /// The model asked a human: the whole task parks.
    NeedsInput,
    /// The run stopped under it (budget, endpoint failure, signal): not the stage's fault,
    /// it runs again next time.
    Stopped,
}

impl Outcome {
    /// `passed`, `failed`, `needs_input`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::NeedsInput => "needs_input",
            Outcome::Stopped => "stopped",
        }
    }
}

/// What one run did in a workflow: kept in the session's run record, so the next run, on
/// any host, knows where to go on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The workflow.
    pub workflow: String,
    /// The last stage this run worked on, and its 0-based index.
    pub stage: String,
    /// Its index.
    pub index: usize,
    /// How that stage ended.
    pub outcome: Outcome,
    /// `on_fail` edges taken so far on this task (this run's included).
    pub loops: u32,
    /// The stage the next run starts with; `None`: the workflow ended (done or failed).
    pub next: Option<usize>,
    /// The summary the next stage gets as its input (bounded).
    pub carried: Option<String>,
}

/// Where a run starts in its workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The stage to run.
    pub index: usize,
    /// `on_fail` edges taken before this run.
    pub loops: u32,
    /// The previous stage's summary, the next stage's input.
    pub carried: Option<String>,
}

/// Where the task stands: after the last mark of `workflow` (a mark of another workflow,
/// or one whose stage is gone, starts over), or at the first stage.
pub fn position(workflow: &Workflow, last: Option<&Mark>) -> Position {
    let fresh = Position {
        index: 0,
        loops: 0,
        carried: None,
    };
    let Some(mark) = last.filter(|m| m.workflow == workflow.name) else {
        return fresh;
    };
    match mark.next {
        Some(index) if index < workflow.stages.len() => Position {
            index,
            loops: mark.loops,
            carried: mark.carried.clone(),
        },
        // The workflow ended and the task came back (news on it): it runs again.
        _ => fresh,
    }
}

/// Where the workflow goes after a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run this stage next (the next one, or an `on_fail` edge back).
    Next {
        /// Its index.
        index: usize,
        /// Whether an `on_fail` edge was taken.
        looped: bool,
    },
    /// The last stage passed.
    Done,
    /// A human is asked; the same stage runs again with the answer.
    Parked,
    /// A stage failed to the end and no edge (or no loop) was left.
    Failed,
    /// The run stopped under the stage; it runs again next time.
    Stopped,
}

/// The step after stage `index` ended with `outcome`, `loops` edges taken so far.
pub fn step(
    workflow: &Workflow,
    index: usize,
    outcome: Outcome,
    loops: u32,
    max_loops: u32,
) -> Step {
    match outcome {
        Outcome::Passed if index + 1 < workflow.stages.len() => Step::Next {
            index: index + 1,
            looped: false,
        },
        Outcome::Passed => Step::Done,
        Outcome::NeedsInput => Step::Parked,
        Outcome::Stopped => Step::Stopped,
        Outcome::Failed => match workflow.stages.get(index).and_then(|s| s.on_fail) {
            Some(back) if loops < max_loops => Step::Next {
                index: back,
                looped: true,
            },
            _ => Step::Failed,
        },
    }
}

/// `text` cut to [`MAX_CARRIED_BYTES`] on a character boundary, saying so.
pub fn carried(text: &str) -> String {
    if text.len() <= MAX_CARRIED_BYTES {
        return text.to_string();
    }
    let mut end = MAX_CARRIED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[harness] (cut at {MAX_CARRIED_BYTES} bytes)",
        &text[..end]
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::StageSpec;
    use crate::workflow::skill;
    use pretty_assertions::assert_eq;

    pub(crate) fn flow(on_fail: &[(usize, usize)]) -> Workflow {
        let stage = |i: usize, name: &str| StageSpec {
            name: name.to_string(),
            skill: skill::parse("do it", format!("{name}.md").into()).unwrap(),
            tier: None,
            retries: 0,
            max_rounds: None,
            check: None,
            on_fail: on_fail
                .iter()
                .find(|(from, _)| *from == i)
                .map(|(_, to)| *to),
        };
        Workflow {
            name: "fix".into(),
            intent: Vec::new(),
            stages: vec![stage(0, "plan"), stage(1, "implement"), stage(2, "review")],
        }
    }

    #[test]
    fn stages_pass_in_order_to_done() {
        let w = flow(&[]);
        assert_eq!(
            step(&w, 0, Outcome::Passed, 0, 2),
            Step::Next {
                index: 1,
                looped: false
            }
        );
        assert_eq!(step(&w, 2, Outcome::Passed, 0, 2), Step::Done);
        assert_eq!(step(&w, 1, Outcome::NeedsInput, 0, 2), Step::Parked);
        assert_eq!(step(&w, 1, Outcome::Stopped, 0, 2), Step::Stopped);
        assert_eq!(step(&w, 1, Outcome::Failed, 0, 2), Step::Failed);
    }

    #[test]
    fn an_edge_back_is_bounded_by_max_loops() {
        let w = flow(&[(2, 1)]);
        assert_eq!(
            step(&w, 2, Outcome::Failed, 0, 2),
            Step::Next {
                index: 1,
                looped: true
            }
        );
        assert_eq!(
            step(&w, 2, Outcome::Failed, 1, 2),
            Step::Next {
                index: 1,
                looped: true
            }
        );
        assert_eq!(step(&w, 2, Outcome::Failed, 2, 2), Step::Failed);
        assert_eq!(step(&w, 2, Outcome::Failed, 0, 0), Step::Failed);
    }

    #[test]
    fn the_position_follows_the_last_mark_of_the_same_workflow() {
        let w = flow(&[]);
        let mark = |workflow: &str, next: Option<usize>| Mark {
            workflow: workflow.into(),
            stage: "plan".into(),
            index: 0,
            outcome: Outcome::Passed,
            loops: 1,
            next,
            carried: Some("the plan".into()),
        };
        assert_eq!(position(&w, None).index, 0);
        let p = position(&w, Some(&mark("fix", Some(1))));
        assert_eq!(
            (p.index, p.loops, p.carried.as_deref()),
            (1, 1, Some("the plan"))
        );
        assert_eq!(position(&w, Some(&mark("other", Some(1)))).index, 0);
        assert_eq!(
            position(&w, Some(&mark("fix", None))),
            Position {
                index: 0,
                loops: 0,
                carried: None
            }
        );
        assert_eq!(position(&w, Some(&mark("fix", Some(7)))).index, 0);
    }

    #[test]
    fn carried_text_is_bounded() {
        let long = "é".repeat(MAX_CARRIED_BYTES);
        let c = carried(&long);
        assert!(
            c.len() < MAX_CARRIED_BYTES + 64 && c.ends_with("bytes)"),
            "{}",
            c.len()
        );
        assert_eq!(carried("short"), "short");
    }
}
