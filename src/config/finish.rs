//! Config stage, PURE (the schema file's text comes through the caller's [`ReadFile`]):
//! `[finish]` and what depends on it. `result_schema` read (bounded by the reader) and
//! compiled, `[redmine.writeback].result_fields` checked against it; problems by key.

use std::collections::BTreeMap;

use super::raw::RawFinish;
use super::validate::Validator;
use super::{Config, FinishMode, ReadFile};
use crate::result_schema::ResultSchema;

const KEY: &str = "[finish].result_schema";
const FIELDS: &str = "[redmine.writeback].result_fields";

impl Validator {
    /// `[finish]` on the assembled config: the schema compiled into `cfg`, and every key
    /// that needs it checked.
    pub(super) fn finish(&mut self, raw: RawFinish, read: ReadFile, cfg: &mut Config) {
        let schema = raw.result_schema.and_then(|p| self.result_schema(&p, read));
        if let Some(schema) = &schema {
            if cfg.finish == FinishMode::Message {
                self.problem(
                    KEY,
                    "a result comes with the `finish` tool: it needs [loop].finish = \"tool\"",
                );
            }
            // The next run's contract: a command must not rewrite it (as AGENTS.md).
            if !cfg.prompt.writable {
                if let Ok(inside) = schema.path.strip_prefix(&cfg.work_root) {
                    cfg.bash.inputs.push((
                        inside.display().to_string(),
                        "the result schema ([finish].result_schema)".to_string(),
                    ));
                }
            }
        }
        let fields = cfg
            .redmine
            .as_ref()
            .map(|r| &r.writeback.result_fields)
            .filter(|f| !f.is_empty());
        match (fields, &schema) {
            (Some(_), None) => self.problem(
                FIELDS,
                "maps keys of a `finish` result: it needs [finish].result_schema",
            ),
            (Some(fields), Some(schema)) => {
                let declared = schema.properties();
                let unknown: Vec<&String> = fields
                    .keys()
                    .filter(|k| !declared.is_empty() && !declared.contains(&k.as_str()))
                    .collect();
                for key in unknown {
                    self.problem(
                        FIELDS,
                        format!(
                            "{key:?} is not a property of the result schema {} (it has {})",
                            schema.path.display(),
                            declared.join(", ")
                        ),
                    );
                }
            }
            (None, _) => {}
        }
        cfg.result_schema = schema;
    }

    /// The schema file (relative to the config's directory), read and compiled.
    fn result_schema(&mut self, path: &str, read: ReadFile) -> Option<ResultSchema> {
        if path.trim().is_empty() {
            self.problem(KEY, "must not be empty");
            return None;
        }
        let file = self.path(Some(path.to_string()), "");
        let text = match read(&file) {
            Ok(text) => text,
            Err(e) => {
                self.problem(KEY, format!("cannot read {}: {e:#}", file.display()));
                return None;
            }
        };
        match ResultSchema::compile(&text, &file) {
            Ok(schema) => Some(schema),
            Err(why) => {
                self.problem(KEY, format!("{} {why}", file.display()));
                None
            }
        }
    }

    /// `[redmine.writeback].result_fields`: each value a custom field id (1 or more).
    pub(super) fn result_fields(
        &mut self,
        raw: Option<BTreeMap<String, i64>>,
    ) -> BTreeMap<String, u64> {
        let mut fields = BTreeMap::new();
        for (key, id) in raw.unwrap_or_default() {
            if key.trim().is_empty() {
                self.problem(FIELDS, "a result key must not be empty");
            } else if id < 1 {
                self.problem(
                    FIELDS,
                    format!("{key:?}: a custom field id is 1 or more, got {id}"),
                );
            } else {
                fields.insert(key, id as u64);
            }
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use pretty_assertions::assert_eq;

    use super::super::parse_reading;

    const BASE: &str = "vertical = \"v\"\n[litellm]\nreplay = \"c.json\"\n[models]\ndefault_tier = \"t\"\nt = \"m\"\n";
    const REDMINE: &str =
        "[redmine]\nurl = \"http://127.0.0.1:3000\"\nkey_ref = \"env:K\"\nscope_query = \"x=1\"\n";
    const SCHEMA: &str = r#"{"type": "object", "properties": {"category": {"type": "string"}, "hours": {"type": "number"}}, "required": ["category"]}"#;

    /// Parses `text` at /h/harness.toml with these files readable.
    fn parse(text: &str, files: &[(&str, &str)]) -> Result<super::Config, Vec<String>> {
        let files: Vec<(PathBuf, String)> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        let read = |p: &Path| {
            files
                .iter()
                .find(|(f, _)| f == p)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| anyhow::anyhow!("No such file or directory (os error 2)"))
        };
        parse_reading(text, Path::new("/h/harness.toml"), &read).map_err(|e| e.problems)
    }

    #[test]
    fn a_schema_is_read_relative_to_the_config_and_compiled() {
        let text = format!("{BASE}[finish]\nresult_schema = \"schemas/result.json\"\n{REDMINE}[redmine.writeback]\nresult_fields = {{ category = 5, hours = 7 }}\n");
        let cfg = parse(&text, &[("/h/schemas/result.json", SCHEMA)]).unwrap();
        let schema = cfg.result_schema.unwrap();
        assert_eq!(schema.path, PathBuf::from("/h/schemas/result.json"));
        assert_eq!(
            cfg.redmine.unwrap().writeback.result_fields,
            [("category".to_string(), 5), ("hours".to_string(), 7)].into()
        );
        // Inside the work root it is one of the next run's inputs: read-only for commands.
        assert!(cfg
            .bash
            .inputs
            .iter()
            .any(|(p, what)| p == "schemas/result.json" && what.contains("result schema")));
        let cfg = parse(BASE, &[]).unwrap();
        assert!(cfg.result_schema.is_none());
    }

    #[test]
    fn a_missing_bad_or_invalid_schema_is_a_problem_naming_the_key_and_file() {
        let text = format!("{BASE}[finish]\nresult_schema = \"s.json\"\n");
        for (file, why) in [
            (None, "cannot read /h/s.json: No such file"),
            (Some("{nope"), "/h/s.json is not JSON: "),
            (
                Some(r#"{"type": "object", "properties": {"a": {"type": 5}}}"#),
                "/h/s.json is not a valid draft 2020-12 schema",
            ),
            (
                Some(r#"{"type": "object", "$ref": "https://example.com/r.json"}"#),
                "never fetches",
            ),
            (Some(r#"{"type": "array"}"#), "must describe an object"),
        ] {
            let files: Vec<(&str, &str)> = file.iter().map(|t| ("/h/s.json", *t)).collect();
            let problems = parse(&text, &files).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("[finish].result_schema: ") && problems[0].contains(why),
                "{why}: {problems:?}"
            );
        }
    }

    #[test]
    fn result_fields_and_the_finish_mode_are_checked_against_the_schema() {
        let with = |extra: &str| format!("{BASE}{extra}");
        let problems = parse(
            &with(&format!(
                "{REDMINE}[redmine.writeback]\nresult_fields = {{ category = 0, \"\" = 3 }}\n"
            )),
            &[],
        )
        .unwrap_err();
        assert_eq!(
            problems,
            vec![
                "[redmine.writeback].result_fields: a result key must not be empty".to_string(),
                "[redmine.writeback].result_fields: \"category\": a custom field id is 1 or more, got 0".to_string(),
            ]
        );
        let problems = parse(
            &with(&format!(
                "{REDMINE}[redmine.writeback]\nresult_fields = {{ category = 2 }}\n"
            )),
            &[],
        )
        .unwrap_err();
        assert_eq!(
            problems,
            vec!["[redmine.writeback].result_fields: maps keys of a `finish` result: it needs [finish].result_schema".to_string()]
        );
        let problems = parse(
            &with(&format!("[loop]\nfinish = \"message\"\n[finish]\nresult_schema = \"s.json\"\n{REDMINE}[redmine.writeback]\nresult_fields = {{ owner = 2 }}\n")),
            &[("/h/s.json", SCHEMA)],
        )
        .unwrap_err();
        assert_eq!(
            problems,
            vec![
                "[finish].result_schema: a result comes with the `finish` tool: it needs [loop].finish = \"tool\"".to_string(),
                "[redmine.writeback].result_fields: \"owner\" is not a property of the result schema /h/s.json (it has category, hours)".to_string(),
            ]
        );
        // A wrong type is named by the schema check.
        let problems = parse(
            &with(&format!(
                "[finish]\nresult_schema = 3\n{REDMINE}[redmine.writeback]\nresult_fields = {{ a = \"x\" }}\n"
            )),
            &[],
        )
        .unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("[finish].result_schema: must be a string"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("[redmine.writeback.result_fields].a: must be a whole number"),
            "{problems:?}"
        );
    }

    #[test]
    fn parse_reads_no_file() {
        let text = format!("{BASE}[finish]\nresult_schema = \"s.json\"\n");
        let e = super::super::parse(&text, Path::new("/h/harness.toml")).unwrap_err();
        assert!(e.problems[0].contains("not read"), "{:?}", e.problems);
    }
}
