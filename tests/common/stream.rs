//! The `--events` stream as tests read it: every line checked against the published schema
//! (docs/events.schema.json), `run.started` first, exactly one `run.completed`, last, and
//! one run id throughout.

use serde_json::Value;

/// The schema every event line must satisfy.
fn validator() -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// Parses and checks one run's stream; returns its events in order.
pub fn events(text: &str) -> Vec<Value> {
    let validator = validator();
    assert!(text.ends_with('\n'), "the stream ends mid-line:\n{text}");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for e in &events {
        let errors: Vec<String> = validator.iter_errors(e).map(|x| x.to_string()).collect();
        assert!(errors.is_empty(), "event {e} breaks the schema: {errors:?}");
    }
    assert_eq!(events.first().unwrap()["type"], "run.started", "{text}");
    assert_eq!(events.last().unwrap()["type"], "run.completed", "{text}");
    let completed = events
        .iter()
        .filter(|e| e["type"] == "run.completed")
        .count();
    assert_eq!(completed, 1, "{text}");
    let run_id = &events[0]["run_id"];
    assert!(events.iter().all(|e| &e["run_id"] == run_id), "{text}");
    events
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

/// The last event, `run.completed`.
pub fn completed(events: &[Value]) -> &Value {
    events.last().unwrap()
}

/// Whether one event satisfies the schema (for tests of the schema itself).
pub fn is_valid(event: &Value) -> bool {
    validator().is_valid(event)
}
