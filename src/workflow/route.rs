//! Routing stage, PURE: which workflow a task runs, from the config alone. A class that
//! `[models.classes]` maps to `workflow:NAME` names it; a task without a class is matched
//! by intent words (at least [`MIN_SHARED`] shared, a tie refused), else the default.

use std::collections::BTreeSet;

pub use super::words::words;

use serde::Serialize;

use crate::config::Workflows;

/// Intent words a task must share with a workflow for the router to pick it.
pub const MIN_SHARED: usize = 2;

/// Why a workflow was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Why {
    /// `[models.classes]` maps the task's class to it.
    Named {
        /// The class.
        class: String,
    },
    /// Its intent shares the most words with the task's subject and description.
    Intent {
        /// How many words.
        score: usize,
        /// Which, sorted.
        words: Vec<String>,
    },
    /// `[workflows].default`: nothing else matched.
    Default,
}

/// The workflow of a task and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    /// The workflow's name.
    pub workflow: String,
    /// Why it was chosen.
    #[serde(flatten)]
    pub why: Why,
}

impl Choice {
    /// `named by class "code"`, `intent (3 words: crash, error, fix)`, `default`.
    pub fn describe(&self) -> String {
        match &self.why {
            Why::Named { class } => {
                format!("workflow {} (named by class {class:?})", self.workflow)
            }
            Why::Intent { score, words } => format!(
                "workflow {} (intent: {score} words shared: {})",
                self.workflow,
                words.join(", ")
            ),
            Why::Default => format!(
                "workflow {} ([workflows].default: no intent matched)",
                self.workflow
            ),
        }
    }

    /// `named`, `intent` or `default`.
    pub fn by(&self) -> &'static str {
        match self.why {
            Why::Named { .. } => "named",
            Why::Intent { .. } => "intent",
            Why::Default => "default",
        }
    }
}

/// The workflow of a task whose class is `class` (mapped by `[models.classes]` to
/// `mapped`) with this subject and description. `Ok(None)`: the task runs as one turn
/// (its class maps to a tier). Errors say what to fix; a tie is never broken by a guess.
pub fn choose(
    workflows: &Workflows,
    class: Option<&str>,
    mapped: Option<&str>,
    text: &str,
) -> Result<Option<Choice>, String> {
    if let (Some(class), Some(mapped)) = (class, mapped) {
        return Ok(workflows.of_class(mapped).map(|w| Choice {
            workflow: w.name.clone(),
            why: Why::Named {
                class: class.to_string(),
            },
        }));
    }
    let task: BTreeSet<String> = words(text).into_iter().collect();
    let mut scored: Vec<(usize, &str, Vec<String>)> = workflows
        .named
        .values()
        .map(|w| {
            let shared: Vec<String> = w
                .intent
                .iter()
                .filter(|i| task.contains(*i))
                .cloned()
                .collect();
            (shared.len(), w.name.as_str(), shared)
        })
        .filter(|(n, _, _)| *n >= MIN_SHARED)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    match scored.as_slice() {
        [(best, a, _), (next, b, _), ..] if best == next => Err(format!(
            "the task's words match workflows {a:?} and {b:?} equally ({best} intent words each): harness does not guess; give the task a class that [models.classes] maps to workflow:NAME, or make the intents differ"
        )),
        [(score, name, shared), ..] => Ok(Some(Choice {
            workflow: name.to_string(),
            why: Why::Intent {
                score: *score,
                words: shared.clone(),
            },
        })),
        [] => match &workflows.default {
            Some(d) => Ok(Some(Choice {
                workflow: d.clone(),
                why: Why::Default,
            })),
            None => Err(format!(
                "no workflow's intent shares {MIN_SHARED} words with the task and [workflows].default is not set: harness does not guess; set a default or give the task a class"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PerRun, Workflow};
    use pretty_assertions::assert_eq;

    fn flows(default: Option<&str>) -> Workflows {
        let w = |name: &str, intent: &str| {
            (
                name.to_string(),
                Workflow {
                    name: name.to_string(),
                    intent: words(intent),
                    stages: Vec::new(),
                },
            )
        };
        Workflows {
            named: [
                w("fix", "fix bug error failing crash"),
                w("docs", "document docs readme write guide"),
                w("triage", "bug report triage label"),
            ]
            .into_iter()
            .collect(),
            default: default.map(str::to_string),
            max_loops: 2,
            per_run: PerRun::Stage,
        }
    }

    #[test]
    fn words_drop_stop_words_and_repeat() {
        assert_eq!(
            words("Fix THE crash, the crash! in x-y"),
            ["crash", "fix", "x", "y"]
        );
    }

    #[test]
    fn a_class_mapped_to_a_workflow_names_it() {
        let c = choose(
            &flows(None),
            Some("code"),
            Some("workflow:docs"),
            "fix crash",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.workflow, "docs");
        assert_eq!(c.by(), "named");
        assert_eq!(
            choose(
                &flows(None),
                Some("code"),
                Some("mopac-code"),
                "fix crash error"
            ),
            Ok(None)
        );
    }

    #[test]
    fn intent_needs_two_shared_words_and_the_most_wins() {
        let c = choose(&flows(None), None, None, "Crash: an error when saving")
            .unwrap()
            .unwrap();
        assert_eq!(
            c,
            Choice {
                workflow: "fix".into(),
                why: Why::Intent {
                    score: 2,
                    words: vec!["crash".into(), "error".into()]
                }
            }
        );
        assert_eq!(
            c.describe(),
            "workflow fix (intent: 2 words shared: crash, error)"
        );
        // one shared word is no match
        assert!(choose(&flows(None), None, None, "a crash").is_err());
    }

    #[test]
    fn a_tie_is_refused_and_no_match_takes_the_default() {
        // "bug report": triage has bug+report (2), fix has bug+crash (2)
        let e = choose(
            &flows(Some("docs")),
            None,
            None,
            "bug report: crash on start",
        )
        .unwrap_err();
        assert!(
            e.contains("\"fix\" and \"triage\"") && e.contains("does not guess"),
            "{e}"
        );
        let c = choose(&flows(Some("docs")), None, None, "something else")
            .unwrap()
            .unwrap();
        assert_eq!((c.workflow.as_str(), c.by()), ("docs", "default"));
        let e = choose(&flows(None), None, None, "something else").unwrap_err();
        assert!(e.contains("[workflows].default is not set"), "{e}");
    }
}
