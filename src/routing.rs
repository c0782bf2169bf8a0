//! Routing stage, PURE: a task's class and the `[models]` table in, the tier and the
//! concrete model chain out, and with `[workflows]` the workflow the task runs. Static and
//! config-only: no network; the one heuristic is the workflows' intent words, which never
//! break a tie.

use crate::config::ModelsConfig;
use crate::config::Workflows;
use crate::workflow::route::Choice;

/// Where a task goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The task's class, or `None` when it has none and `default_tier` applied.
    pub class: Option<String>,
    /// The tier alias.
    pub tier: String,
    /// Concrete models to try, first choice first (never empty).
    pub models: Vec<String>,
    /// The workflow the task runs as stages, and why; `None`: one turn.
    pub workflow: Option<Choice>,
}

impl Route {
    /// The first-choice concrete model.
    pub fn model(&self) -> &str {
        self.models.first().map(String::as_str).unwrap_or_default()
    }

    /// `class "primary" -> tier mopac-primary -> model glm-5.3` (the chain when several).
    pub fn describe(&self) -> String {
        let class = match &self.class {
            Some(c) => format!("class {c:?}"),
            None => "no class (default_tier)".to_string(),
        };
        let models = if self.models.len() == 1 {
            format!("model {}", self.model())
        } else {
            format!("models {}", self.models.join(" -> "))
        };
        let line = format!("{class} -> tier {} -> {models}", self.tier);
        match &self.workflow {
            Some(w) => format!("{line} -> {}", w.describe()),
            None => line,
        }
    }

    /// The route of one stage: its own tier when it names one.
    pub fn for_tier(&self, models: &ModelsConfig, tier: Option<&str>) -> Route {
        match tier.and_then(|t| Some((t, models.tiers.get(t)?))) {
            Some((tier, chain)) => Route {
                tier: tier.to_string(),
                models: chain.clone(),
                ..self.clone()
            },
            None => self.clone(),
        }
    }
}

/// Routes a task: its class through `[models.classes]` and `[models]`, and with
/// `[workflows]` the workflow it runs (`text` is its subject and description, for intent
/// words). A workflow task runs on `[models].default_tier` (else its first stage's tier)
/// where a stage names none.
pub fn route_task(
    models: &ModelsConfig,
    workflows: Option<&Workflows>,
    class: Option<&str>,
    text: &str,
) -> Result<Route, String> {
    let Some(workflows) = workflows else {
        return route(models, class);
    };
    let mapped = match class {
        Some(c) => Some(route_class(models, c)?),
        None => None,
    };
    let Some(choice) = crate::workflow::route::choose(workflows, class, mapped, text)? else {
        return route(models, class);
    };
    let first = workflows
        .named
        .get(&choice.workflow)
        .and_then(|w| w.stages.first())
        .and_then(|s| s.tier.clone());
    let tier = models
        .default_tier
        .clone()
        .or(first)
        .ok_or_else(|| format!("{} has no tier to run on", choice.describe()))?;
    let chain = models
        .tiers
        .get(&tier)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("the workflow's tier {tier:?} is not defined in [models]"))?;
    Ok(Route {
        class: class.map(str::to_string),
        tier,
        models: chain.clone(),
        workflow: Some(choice),
    })
}

/// What `[models.classes]` maps `class` to (a tier, or `workflow:NAME`).
fn route_class<'a>(models: &'a ModelsConfig, class: &str) -> Result<&'a str, String> {
    models
        .classes
        .get(class)
        .map(String::as_str)
        .ok_or_else(|| {
            let known: Vec<&str> = models.classes.keys().map(String::as_str).collect();
            format!(
                "unknown class {class:?}: [models.classes] has no entry for it (known: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
}

/// Routes `class` through `[models.classes]` and `[models]`. Errors name the section to fix.
pub fn route(models: &ModelsConfig, class: Option<&str>) -> Result<Route, String> {
    let tier = match class {
        Some(c) => route_class(models, c)?.to_string(),
        None => models.default_tier.clone().ok_or_else(|| {
            "the task has no class and [models].default_tier is not set".to_string()
        })?,
    };
    let chain = models
        .tiers
        .get(&tier)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            let from = match class {
                Some(c) => format!("[models.classes].{c}"),
                None => "[models].default_tier".to_string(),
            };
            format!("{from} maps to tier {tier:?}, which [models] does not define")
        })?;
    Ok(Route {
        class: class.map(str::to_string),
        tier,
        models: chain.clone(),
        workflow: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;

    fn table() -> ModelsConfig {
        let tiers: BTreeMap<String, Vec<String>> = [
            ("mopac-study", vec!["glm-4.7-flash"]),
            ("mopac-code", vec!["glm-5.2"]),
            ("mopac-review", vec!["glm-5-turbo"]),
            ("mopac-primary", vec!["glm-5.3", "glm-5.2"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        let classes = [
            ("study", "mopac-study"),
            ("read", "mopac-study"),
            ("code", "mopac-code"),
            ("review", "mopac-review"),
            ("primary", "mopac-primary"),
            ("vision", "mopac-vision"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        ModelsConfig {
            tiers,
            default_tier: Some("mopac-primary".into()),
            classes,
        }
    }

    #[test]
    fn class_to_tier_to_model() {
        let r = route(&table(), Some("read")).unwrap();
        assert_eq!(
            r,
            Route {
                class: Some("read".into()),
                tier: "mopac-study".into(),
                models: vec!["glm-4.7-flash".into()],
                workflow: None,
            }
        );
        assert_eq!(
            r.describe(),
            "class \"read\" -> tier mopac-study -> model glm-4.7-flash"
        );
    }

    #[test]
    fn no_class_uses_default_tier_and_shows_the_chain() {
        let r = route(&table(), None).unwrap();
        assert_eq!(r.model(), "glm-5.3");
        assert_eq!(
            r.describe(),
            "no class (default_tier) -> tier mopac-primary -> models glm-5.3 -> glm-5.2"
        );
    }

    #[test]
    fn unknown_class_names_the_section() {
        let e = route(&table(), Some("bogus")).unwrap_err();
        assert!(e.contains("[models.classes]") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn class_with_undefined_tier_names_the_entry() {
        assert_eq!(
            route(&table(), Some("vision")).unwrap_err(),
            "[models.classes].vision maps to tier \"mopac-vision\", which [models] does not define"
        );
    }

    #[test]
    fn no_class_and_no_default_tier_is_an_error() {
        let mut t = table();
        t.default_tier = None;
        assert!(route(&t, None).unwrap_err().contains("default_tier"));
    }
}
