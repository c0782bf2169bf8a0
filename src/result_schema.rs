//! Leaf, PURE: the contract of `[finish] result_schema`. A JSON Schema (draft 2020-12) text
//! in, a compiled [`ResultSchema`] out; a `result` value in, its validation errors out, few
//! and short. No `$ref` is ever fetched (no file, no network): a schema that refers to
//! anything outside itself does not compile. Reading the file is the config loader's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

/// Largest schema file harness reads (bytes): the schema goes into every request's `finish`
/// spec, so a big one costs tokens each round.
pub(crate) const SCHEMA_MAX: u64 = 64 * 1024;

/// Validation errors listed, at most; the rest are counted.
pub(crate) const MAX_ERRORS: usize = 10;

/// Bytes of one error as listed (head and tail kept): an error quotes the value it is about.
const ERROR_MAX: usize = 240;

/// The `$schema` this harness compiles (with or without the empty fragment).
const DRAFT: &str = "https://json-schema.org/draft/2020-12/schema";

/// A compiled result schema: what a `finish` call's `result` must match.
#[derive(Clone)]
pub struct ResultSchema {
    /// The file it was read from (absolute), for messages.
    pub path: PathBuf,
    /// The schema as written.
    pub schema: Value,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for ResultSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResultSchema({})", self.path.display())
    }
}

impl ResultSchema {
    /// Compiles the schema `text` read from `path`; `Err` says what is wrong, in words, for
    /// a config problem (the caller names the key and the file). The root must describe an
    /// object (`"type": "object"`), since `result` is one; `$schema`, when present, must be
    /// draft 2020-12.
    pub fn compile(text: &str, path: &Path) -> Result<ResultSchema, String> {
        let schema: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
        let Some(root) = schema.as_object() else {
            return Err("is not a JSON Schema: its root is not an object".to_string());
        };
        if let Some(draft) = root.get("$schema") {
            if draft.as_str().map(|d| d.trim_end_matches('#')) != Some(DRAFT) {
                return Err(format!(
                    "has \"$schema\": {draft}; harness reads draft 2020-12 ({DRAFT:?}) only"
                ));
            }
        }
        if root.get("type") != Some(&Value::String("object".into())) {
            return Err(
                "must describe an object at its root (\"type\": \"object\"): `result` is a JSON object"
                    .to_string(),
            );
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            // Never fetch a `$ref`: no traffic anywhere, and no file read behind the
            // operator's back; such a schema fails here.
            .offline()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| {
                format!(
                    "is not a valid draft 2020-12 schema (or refers to a document outside it, which harness never fetches): {}",
                    crate::bounded::clip(&e.to_string(), ERROR_MAX)
                )
            })?;
        Ok(ResultSchema {
            path: path.to_path_buf(),
            schema,
            validator: Arc::new(validator),
        })
    }

    /// Every way `value` fails the schema, at most [`MAX_ERRORS`] of them, each clipped to
    /// 240 bytes (head and tail) and located (`at /count: ...`), then how many more there were; empty when
    /// it is valid.
    pub fn check(&self, value: &Value) -> Vec<String> {
        let mut listed = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(value) {
            if listed.len() == MAX_ERRORS {
                more += 1;
                continue;
            }
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            listed.push(crate::bounded::clip(
                &format!("at {at}: {error}"),
                ERROR_MAX,
            ));
        }
        if more > 0 {
            listed.push(format!("... and {more} more"));
        }
        listed
    }

    /// The top-level property names the schema declares (`properties`), for
    /// `[redmine.writeback].result_fields`.
    pub fn properties(&self) -> Vec<&str> {
        self.schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The schema as it goes into the `finish` tool's parameters: the `result` property
    /// (without `$schema`, `$id`, `$defs`) and the `$defs` to put beside `properties` at the
    /// parameters' root, where a `#/$defs/...` reference of the schema then points.
    pub fn for_spec(&self) -> (Value, Option<Value>) {
        let mut property = self.schema.clone();
        let defs = property.as_object_mut().and_then(|o| {
            o.remove("$schema");
            o.remove("$id");
            o.remove("$defs")
        });
        (property, defs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn compile(schema: Value) -> Result<ResultSchema, String> {
        ResultSchema::compile(&schema.to_string(), Path::new("/c/schemas/result.json"))
    }

    fn ticket() -> ResultSchema {
        compile(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "category": {"enum": ["bug", "feature"]},
                "files": {"type": "array", "items": {"$ref": "#/$defs/path"}}
            },
            "required": ["category"],
            "additionalProperties": false,
            "$defs": {"path": {"type": "string", "minLength": 1}}
        }))
        .unwrap()
    }

    #[test]
    fn a_valid_result_has_no_errors_an_invalid_one_lists_them_located() {
        let s = ticket();
        assert_eq!(
            s.check(&json!({"category": "bug", "files": ["a.rs"]})),
            Vec::<String>::new()
        );
        let errors = s.check(&json!({"category": "chore", "files": [""], "x": 1}));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors.iter().any(|e| e.starts_with("at /category: ")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.starts_with("at /files/0: ")),
            "{errors:?}"
        );
        assert!(errors.iter().any(|e| e.starts_with("at /: ")), "{errors:?}");
        assert_eq!(s.properties(), vec!["category", "files"]);
    }

    #[test]
    fn errors_are_few_and_short() {
        let props: serde_json::Map<String, Value> = (0..30)
            .map(|i| (format!("k{i}"), json!({"type": "integer"})))
            .collect();
        let s = compile(json!({"type": "object", "properties": props})).unwrap();
        let bad: serde_json::Map<String, Value> = (0..30)
            .map(|i| (format!("k{i}"), json!("x".repeat(1000))))
            .collect();
        let errors = s.check(&Value::Object(bad));
        assert_eq!(errors.len(), MAX_ERRORS + 1);
        assert_eq!(errors.last().unwrap(), "... and 20 more");
        // Head and tail of ERROR_MAX bytes, and the note of what was cut between them.
        assert!(
            errors.iter().all(|e| e.len() <= ERROR_MAX + 32),
            "{errors:?}"
        );
    }

    #[test]
    fn bad_schemas_are_refused_in_words() {
        let refused = |text: &str| {
            ResultSchema::compile(text, Path::new("/s.json"))
                .map(|_| ())
                .unwrap_err()
        };
        assert!(refused("{not json").starts_with("is not JSON: "));
        assert!(refused("[]").contains("its root is not an object"));
        assert!(refused(r#"{"type": "string"}"#).contains("\"type\": \"object\""));
        assert!(refused(
            r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}"#
        )
        .contains("draft 2020-12"));
        assert!(
            refused(r#"{"type": "object", "properties": {"a": {"type": 5}}}"#)
                .starts_with("is not a valid draft 2020-12 schema")
        );
        assert!(refused(r#"{"type": "object", "minProperties": -1}"#)
            .starts_with("is not a valid draft 2020-12 schema"));
    }

    #[test]
    fn a_remote_ref_is_never_fetched() {
        // 127.0.0.1:9 (discard) would answer nothing; offline, no connection is attempted.
        for url in [
            "http://127.0.0.1:9/x.json",
            "https://example.com/s.json",
            "file:///etc/passwd",
        ] {
            let e = compile(json!({"type": "object", "properties": {"a": {"$ref": url}}}))
                .map(|_| ())
                .unwrap_err();
            assert!(e.contains("never fetches"), "{url}: {e}");
        }
    }

    #[test]
    fn the_spec_copy_hoists_defs() {
        let (property, defs) = ticket().for_spec();
        assert!(property.get("$schema").is_none() && property.get("$defs").is_none());
        assert_eq!(property["required"], json!(["category"]));
        assert_eq!(
            defs,
            Some(json!({"path": {"type": "string", "minLength": 1}}))
        );
    }
}
