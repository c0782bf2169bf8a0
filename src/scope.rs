//! `harness scope`: the tasks in scope of every configured source, routed, nothing claimed,
//! nothing moved: for people, and for autoscalers (KEDA, a Kubernetes Job per task).
//! Orchestration over the intake sources; PURE [`render`] and [`json`] shape the output.

use serde::Serialize;

use crate::cli::{OnceArgs, ScopeArgs};
use crate::config::Config;
use crate::exit::{Failure, Stage, StageExt, Success};
use crate::intake::source::Scoped;
use crate::routing::Route;
use crate::secrets::Redactor;
use crate::{config, emit, once};

/// One task in scope, as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    /// `inbox` or `redmine`.
    pub source: String,
    /// The task's id in its source.
    pub id: String,
    /// One-line subject.
    pub subject: String,
    /// The task's class.
    pub class: Option<String>,
    /// The routed tier (`null`: unroutable).
    pub tier: Option<String>,
    /// The model chain (empty: unroutable).
    pub models: Vec<String>,
    /// Why it does not route.
    pub error: Option<String>,
}

/// The JSON output: `count` is the tasks a worker would run (the routable ones).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Listing {
    /// Routable tasks in scope.
    pub count: usize,
    /// Every task in scope, in intake order.
    pub tasks: Vec<Row>,
}

/// Runs `harness scope`.
pub(crate) async fn scope(args: ScopeArgs, redactor: &mut Redactor) -> Result<Success, Failure> {
    let cfg = config::load(args.config.clone(), redactor).stage(Stage::Config)?;
    let redmine = once::redmine_client(&cfg, &OnceArgs::default(), redactor)?;
    let route = |task: &crate::intake::Task| crate::intake::route(&cfg, task);
    let mut rows = Vec::new();
    for src in crate::intake::sources::<Route>(&cfg, redmine.as_ref()) {
        let found = src.scope(&route).await.stage(Stage::Intake)?;
        rows.extend(found.into_iter().map(row));
    }
    let listing = listing(rows);
    if args.json {
        emit(&json(&listing))?;
    } else {
        emit(&render(&listing, &cfg))?;
    }
    Ok(Success::Done)
}

fn row(s: Scoped<Route>) -> Row {
    let (tier, models, error) = match s.route {
        Ok(r) => (Some(r.tier), r.models, None),
        Err(e) => (None, Vec::new(), Some(e)),
    };
    Row {
        source: s.task.source.as_str().to_string(),
        id: s.task.id,
        subject: s.task.subject,
        class: s.task.class,
        tier,
        models,
        error,
    }
}

/// The listing of these rows.
pub(crate) fn listing(tasks: Vec<Row>) -> Listing {
    Listing {
        count: tasks.iter().filter(|r| r.error.is_none()).count(),
        tasks,
    }
}

/// One JSON object and a newline.
pub(crate) fn json(listing: &Listing) -> String {
    let mut text = serde_json::to_string(listing).unwrap_or_default();
    text.push('\n');
    text
}

/// One line per task, then a count.
pub(crate) fn render(listing: &Listing, cfg: &Config) -> String {
    let mut out = String::new();
    for r in &listing.tasks {
        let id = match r.source.as_str() {
            "redmine" => format!("#{}", r.id),
            _ => r.id.clone(),
        };
        let class = r.class.as_deref().unwrap_or("(none)");
        let route = match (&r.tier, &r.error) {
            (Some(tier), _) => format!("class={class} -> {tier} -> {}", r.models.join(" | ")),
            (None, error) => format!(
                "class={class} -> NOT ROUTABLE: {}",
                error.as_deref().unwrap_or("")
            ),
        };
        out.push_str(&format!(
            "{:<8} {id:<20} {route}  {:?}\n",
            r.source, r.subject
        ));
    }
    let unroutable = listing.tasks.len() - listing.count;
    out.push_str(&match (listing.count, unroutable) {
        (0, 0) => format!("no tasks in scope ({})\n", cfg.path.display()),
        (n, 0) => format!("{n} task(s) in scope\n"),
        (n, u) => format!("{n} task(s) in scope, {u} not routable\n"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn r(id: &str, tier: Option<&str>) -> Row {
        Row {
            source: "inbox".into(),
            id: id.into(),
            subject: "S".into(),
            class: Some("code".into()),
            tier: tier.map(String::from),
            models: tier.map(|_| vec!["m".to_string()]).unwrap_or_default(),
            error: tier.is_none().then(|| "no tier".to_string()),
        }
    }

    #[test]
    fn the_count_is_the_routable_tasks() {
        let l = listing(vec![r("a", Some("t")), r("b", None)]);
        assert_eq!(l.count, 1);
        let v: serde_json::Value = serde_json::from_str(&json(&l)).unwrap();
        assert_eq!(v["tasks"][1]["error"], "no tier");
        assert_eq!(v["tasks"][0]["models"], serde_json::json!(["m"]));
    }
}
