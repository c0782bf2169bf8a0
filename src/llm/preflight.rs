//! LLM stage, before the first token: the no-cost reads of the proxy. [`route`] checks the
//! routed chain against `GET {base_url}/models` (`[litellm] preflight = true`); [`prices`]
//! resolves `[models].prices` (a table, or the proxy's `GET /model/info`). HTTP adapter on
//! top of [`super::client`]; [`listed`] is the pure decision.

use std::collections::BTreeMap;

use anyhow::anyhow;
use tracing::{info, warn};

use super::client::HttpClient;
use super::{Backend, LlmErrorKind};
use crate::config::{ModelPrice, Prices};
use crate::exit::{Failure, Stage};
use crate::routing::Route;

/// A model of the tier's chain that did not answer, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedModel {
    /// The concrete model.
    pub model: String,
    /// Why the next one was tried (the endpoint's answer, or the preflight's).
    pub reason: String,
}

/// Keeps the models of `route` that `served` lists, in order; the others are skipped with a
/// reason. `Err` names the tier when none is served.
pub fn listed(route: &Route, served: &[String]) -> Result<(Route, Vec<SkippedModel>), String> {
    let (kept, dropped): (Vec<String>, Vec<String>) = route
        .models
        .iter()
        .cloned()
        .partition(|m| served.contains(m));
    let skipped = dropped
        .into_iter()
        .map(|model| SkippedModel {
            reason: format!(
                "preflight: GET /models does not list {model:?} (from [models].{})",
                route.tier
            ),
            model,
        })
        .collect();
    if kept.is_empty() {
        return Err(format!(
            "preflight: the endpoint serves none of [models].{} = [{}]; it lists: {}",
            route.tier,
            route
                .models
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            if served.is_empty() {
                "nothing".to_string()
            } else {
                served.join(", ")
            }
        ));
    }
    Ok((
        Route {
            models: kept,
            ..route.clone()
        },
        skipped,
    ))
}

/// `GET /models` and [`listed`]. An unreachable proxy or a rejected key is an llm failure
/// (exit 4), a model the proxy does not serve a routing one (exit 1); neither spends a token.
pub async fn route(
    client: &HttpClient,
    route: &Route,
) -> Result<(Route, Vec<SkippedModel>), Failure> {
    let served = client.list_models().await.map_err(|e| {
        let stage = match e.kind {
            LlmErrorKind::UnknownModel | LlmErrorKind::Rejected => Stage::Routing,
            LlmErrorKind::AuthRejected
            | LlmErrorKind::Budget
            | LlmErrorKind::Exhausted
            | LlmErrorKind::Replay => Stage::Llm,
        };
        Failure::new(stage, anyhow!("preflight: {e}"))
    })?;
    let (checked, skipped) =
        listed(route, &served).map_err(|e| Failure::new(Stage::Routing, anyhow!(e)))?;
    for s in &skipped {
        info!("{}; trying the next model of the chain", s.reason);
    }
    info!("preflight: {} is served", checked.model());
    Ok((checked, skipped))
}

/// The prices to cost rounds with. `prices = "proxy"` reads `GET /model/info` once; when that
/// fails the run goes on with the costs the endpoint reports, and says so.
pub async fn prices(prices: &Prices, backend: &Backend) -> BTreeMap<String, ModelPrice> {
    match (prices, backend) {
        (Prices::None, _) => BTreeMap::new(),
        (Prices::Table(t), _) => t.clone(),
        (Prices::Proxy, Backend::Http(client)) => match client.model_prices().await {
            Ok(p) => {
                info!("prices: {} models priced by GET /model/info", p.len());
                p
            }
            Err(e) => {
                warn!("prices: {e}; costs come only from what the endpoint reports");
                BTreeMap::new()
            }
        },
        (Prices::Proxy, Backend::Replay(_)) => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn chain(models: &[&str]) -> Route {
        Route {
            class: Some("primary".into()),
            tier: "mopac-primary".into(),
            models: models.iter().map(|m| m.to_string()).collect(),
            workflow: None,
        }
    }

    #[test]
    fn unlisted_models_are_skipped_in_order() {
        let served = vec!["glm-5.2".to_string(), "glm-4.7-flash".to_string()];
        let (r, skipped) = listed(&chain(&["glm-9", "glm-5.2"]), &served).unwrap();
        assert_eq!(r.models, vec!["glm-5.2"]);
        assert_eq!(
            skipped,
            vec![SkippedModel {
                model: "glm-9".into(),
                reason:
                    "preflight: GET /models does not list \"glm-9\" (from [models].mopac-primary)"
                        .into()
            }]
        );
    }

    #[test]
    fn nothing_served_names_the_tier() {
        assert_eq!(
            listed(&chain(&["glm-9"]), &["glm-5.3".to_string()]).unwrap_err(),
            "preflight: the endpoint serves none of [models].mopac-primary = [\"glm-9\"]; it lists: glm-5.3"
        );
    }
}
