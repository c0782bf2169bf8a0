//! Config stage, PURE: the type of every key of `harness.toml`, checked on the parsed TOML
//! before the raw layer reads it, so that every type error is reported at once, each with its
//! key path and in words a user reads ("must be a whole number, not the string \"ten\""),
//! where serde would stop at the first one and speak of `i64` or `untagged enum RawTier`.
//! Keys it does not know are left to the raw layer, which reports them as unknown.

use toml::Value;

/// What a key holds.
#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Int,
    /// A number; a whole one is accepted too.
    Num,
    Bool,
    /// `[tools.bash].network`: true, false or "allowlist".
    Network,
    StrList,
    /// A table of string values (`[models.classes]`).
    StrMap,
    /// A table of whole-number values (`[redmine.writeback].result_fields`).
    IntMap,
    /// A model name or a fallback list of them (a tier of `[models]`).
    Tier,
    /// Checked by the validator, key by key (`[models].prices`).
    Any,
    Table(&'static [(&'static str, Ty)]),
    /// `[models]`: these keys, and any other key is a tier.
    Models(&'static [(&'static str, Ty)]),
    /// A table whose every key is a table of these keys (`[check.classes.<class>]`).
    TableMap(&'static [(&'static str, Ty)]),
    /// `[workflows]`: these keys, and any other key is a workflow table.
    Workflows(&'static [(&'static str, Ty)]),
}

use Ty::*;

const ROOT: &[(&str, Ty)] = &[
    ("vertical", Str),
    ("work_root", Str),
    ("report_dir", Str),
    (
        "loop",
        Table(&[
            ("max_rounds", Int),
            ("max_tool_calls", Int),
            ("finish", Str),
        ]),
    ),
    ("finish", Table(&[("result_schema", Str)])),
    (
        "redmine",
        Table(&[
            ("url", Str),
            ("key_ref", Str),
            ("scope_query", Str),
            ("scope_query_id", Int),
            ("project", Str),
            ("class_field", Str),
            ("default_class", Str),
            ("limit", Int),
            ("timeout_secs", Int),
            ("max_retries", Int),
            (
                "claim",
                Table(&[
                    ("enabled", Bool),
                    ("status", Str),
                    ("assign", Bool),
                    ("stale_after_mins", Int),
                ]),
            ),
            (
                "writeback",
                Table(&[
                    ("enabled", Bool),
                    ("status_done", Str),
                    ("status_failed", Str),
                    ("status_needs_input", Str),
                    ("assign_needs_input", Str),
                    ("max_note_chars", Int),
                    ("result_fields", IntMap),
                ]),
            ),
        ]),
    ),
    (
        "litellm",
        Table(&[
            ("base_url", Str),
            ("key_ref", Str),
            ("timeout_secs", Int),
            ("max_retries", Int),
            ("replay", Str),
            ("streaming", Bool),
            ("stream_idle_timeout_secs", Int),
            ("preflight", Bool),
        ]),
    ),
    (
        "models",
        Models(&[
            ("default_tier", Str),
            ("classes", StrMap),
            ("prices", Any),
            ("vision", Table(&[("tiers", StrList)])),
        ]),
    ),
    (
        "tools",
        Table(&[
            (
                "files",
                Table(&[
                    ("enabled", Bool),
                    ("max_read_bytes", Int),
                    ("max_write_bytes", Int),
                    ("protect", StrList),
                ]),
            ),
            (
                "bash",
                Table(&[
                    ("enabled", Bool),
                    ("timeout_secs", Int),
                    ("max_output_bytes", Int),
                    ("preset", Str),
                    ("default", Str),
                    ("allow", StrList),
                    ("deny", StrList),
                    ("write_redirects", Bool),
                    ("env_allow", StrList),
                    ("examples_allow", StrList),
                    ("examples_deny", StrList),
                    ("sandbox", Str),
                    ("network", Network),
                    (
                        "egress",
                        Table(&[
                            ("allow", StrList),
                            ("presets", StrList),
                            ("deny_private", Bool),
                            ("max_bytes", Int),
                            ("hosts", Str),
                            ("ca_file", Str),
                            ("upstream", Str),
                        ]),
                    ),
                    ("write_roots", StrList),
                    ("read_roots", StrList),
                    ("unix_sockets", StrList),
                    ("exec_roots", StrList),
                ]),
            ),
        ]),
    ),
    (
        "demo",
        Table(&[
            ("id", Str),
            ("subject", Str),
            ("prompt", Str),
            ("class", Str),
        ]),
    ),
    (
        "budget",
        Table(&[("max_cost_usd", Num), ("max_total_tokens", Int)]),
    ),
    (
        "prompt",
        Table(&[
            ("agents_max_bytes", Int),
            ("skills_dir", Str),
            ("writable", Bool),
        ]),
    ),
    (
        "check",
        Table(&[
            ("command", Str),
            ("timeout_secs", Int),
            ("max_attempts", Int),
            ("feedback_bytes", Int),
            (
                "classes",
                TableMap(&[
                    ("command", Str),
                    ("timeout_secs", Int),
                    ("max_attempts", Int),
                    ("feedback_bytes", Int),
                ]),
            ),
        ]),
    ),
    (
        "workspace",
        Table(&[
            ("repo", Str),
            ("base", Str),
            ("branch", Str),
            ("push", Str),
            ("git_timeout_secs", Int),
            ("max_patch_bytes", Int),
            ("max_file_bytes", Int),
        ]),
    ),
    (
        "forge",
        Table(&[
            ("kind", Str),
            ("url", Str),
            ("repo", Str),
            ("token_ref", Str),
            ("pr", Str),
            ("on_failure", Str),
            ("title", Str),
            ("labels", StrList),
            ("reviewers", StrList),
            ("timeout_secs", Int),
            ("max_retries", Int),
        ]),
    ),
    (
        "session",
        Table(&[
            ("enabled", Bool),
            ("store", Str),
            ("max_history_tokens", Int),
            ("max_attachment_bytes", Int),
        ]),
    ),
    ("metrics", Table(&[("textfile", Str)])),
    ("inbox", Table(&[("dir", Str), ("stale_after_mins", Int)])),
    (
        "intake",
        Table(&[
            ("order", StrList),
            ("max_attachments", Int),
            ("max_attachment_bytes", Int),
            ("max_attachments_total_bytes", Int),
            ("attachments_dir", Str),
        ]),
    ),
    (
        "workflows",
        Workflows(&[("default", Str), ("max_loops", Int), ("per_run", Str)]),
    ),
];

/// `[workflows.<name>]`.
const WORKFLOW: &[(&str, Ty)] = &[
    ("intent", Str),
    ("stages", StrList),
    ("stage", TableMap(STAGE)),
];

/// `[workflows.<name>.stage.<stage>]`.
const STAGE: &[(&str, Ty)] = &[
    ("skill", Str),
    ("tier", Str),
    ("retries", Int),
    ("max_rounds", Int),
    ("check", Str),
    ("check_timeout_secs", Int),
    ("on_fail", Str),
];

/// The known key nearest to the unknown key at `path` (its dotted parts, the section's
/// first), when it is near enough to be a typo of it: ` (did you mean `max_rounds`?)`, or
/// an empty string.
pub(super) fn did_you_mean(path: &[&str]) -> String {
    let Some((name, sections)) = path.split_last() else {
        return String::new();
    };
    let mut keys = ROOT;
    let mut rest = sections.iter();
    while let Some(section) = rest.next() {
        match keys.iter().find(|(k, _)| k == section).map(|(_, ty)| *ty) {
            Some(Table(inner) | Models(inner)) => keys = inner,
            // `[workflows.<name>]`: the next part is the workflow, any name.
            Some(Workflows(_)) => {
                rest.next();
                keys = WORKFLOW;
            }
            // `[check.classes.<class>]`: the next part is the class, any name.
            Some(TableMap(inner)) => {
                rest.next();
                keys = inner;
            }
            _ => return String::new(),
        }
    }
    keys.iter()
        // Edit distance, not Jaro-Winkler: its prefix bonus takes every `max_*` for a typo.
        .map(|(k, _)| (strsim::normalized_damerau_levenshtein(name, k), *k))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

/// Every type error of `doc`, each as `key: must be X, not Y`, in key order; the keys in
/// error are removed from `doc`, so the raw layer can still read the rest (and report its
/// unknown keys).
pub(super) fn check(doc: &mut toml::Table) -> Vec<String> {
    let mut problems = Vec::new();
    table(doc, ROOT, None, &[], &mut problems);
    problems
}

fn table(
    t: &mut toml::Table,
    keys: &[(&str, Ty)],
    others: Option<Ty>,
    section: &[&str],
    problems: &mut Vec<String>,
) {
    let mut bad = Vec::new();
    for (name, value) in t.iter_mut() {
        let ty = match keys.iter().find(|(k, _)| k == name) {
            Some((_, ty)) => *ty,
            None => match others {
                Some(ty) => ty,
                None => continue,
            },
        };
        if !fits(value, ty, section, name, problems) {
            bad.push(name.clone());
        }
    }
    for name in bad {
        t.remove(&name);
    }
}

/// Whether `value` is a `ty`; a mismatch (here or below) is added to `problems`.
fn fits(
    value: &mut Value,
    ty: Ty,
    section: &[&str],
    name: &str,
    problems: &mut Vec<String>,
) -> bool {
    let key = label(section, name);
    let wrong = |problems: &mut Vec<String>, what: &str, value: &Value| {
        problems.push(format!("{key}: must be {what}, not {}", found(value)));
        false
    };
    match (ty, &mut *value) {
        (Str, Value::String(_))
        | (Int, Value::Integer(_))
        | (Num, Value::Integer(_) | Value::Float(_))
        | (Bool | Network, Value::Boolean(_))
        | (Any, _) => true,
        (Network, Value::String(s)) if s == "allowlist" => true,
        (Network, v) => wrong(problems, "true, false or \"allowlist\"", v),
        (Str, v) => wrong(problems, "a string", v),
        (Int, v) => wrong(problems, "a whole number", v),
        (Num, v) => wrong(problems, "a number", v),
        (Bool, v) => wrong(problems, "true or false", v),
        (StrList, Value::Array(items)) => {
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                if !item.is_str() {
                    problems.push(format!("{key}[{i}]: must be a string, not {}", found(item)));
                    ok = false;
                }
            }
            ok
        }
        (StrList, v) => wrong(problems, "a list of strings", v),
        (Tier, Value::String(_)) => true,
        (Tier, Value::Array(items)) => {
            let mut ok = true;
            for (i, item) in items.iter().enumerate() {
                if !item.is_str() {
                    problems.push(format!(
                        "{key}[{i}]: must be a model name (a string), not {}",
                        found(item)
                    ));
                    ok = false;
                }
            }
            ok
        }
        (Tier, v) => wrong(problems, "a model name or a list of model names", v),
        (StrMap | IntMap | Table(_) | Models(_) | TableMap(_) | Workflows(_), Value::Table(t)) => {
            let inner: Vec<&str> = section.iter().copied().chain([name]).collect();
            match ty {
                StrMap => table(t, &[], Some(Str), &inner, problems),
                IntMap => table(t, &[], Some(Int), &inner, problems),
                Table(keys) => table(t, keys, None, &inner, problems),
                Models(keys) => table(t, keys, Some(Tier), &inner, problems),
                TableMap(keys) => table(t, &[], Some(Table(keys)), &inner, problems),
                Workflows(keys) => table(t, keys, Some(Table(WORKFLOW)), &inner, problems),
                _ => {}
            }
            // A table keeps its good keys; it is in error only through them.
            true
        }
        (StrMap | IntMap | Table(_) | Models(_) | TableMap(_) | Workflows(_), v) => {
            let dotted: Vec<&str> = section.iter().copied().chain([name]).collect();
            wrong(problems, &format!("a table ([{}])", dotted.join(".")), v)
        }
    }
}

/// `[tools.bash].allow`, `vertical`.
fn label(section: &[&str], name: &str) -> String {
    if section.is_empty() {
        name.to_string()
    } else {
        format!("[{}].{name}", section.join("."))
    }
}

/// What a value is, in words, with the value when it is short.
fn found(v: &Value) -> String {
    let shown = |s: String| {
        if s.chars().count() <= 40 {
            format!(" ({s})")
        } else {
            String::new()
        }
    };
    match v {
        Value::String(s) => format!("a string{}", shown(format!("{s:?}"))),
        Value::Integer(i) => format!("a whole number{}", shown(i.to_string())),
        Value::Float(f) => format!("a number{}", shown(format!("{f:?}"))),
        Value::Boolean(b) => format!("{b}"),
        Value::Datetime(d) => format!("a date{}", shown(d.to_string())),
        Value::Array(_) => "a list".to_string(),
        Value::Table(_) => "a table".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn problems(text: &str) -> Vec<String> {
        let mut doc: toml::Table = text.parse().unwrap();
        check(&mut doc)
    }

    #[test]
    fn unknown_keys_get_the_nearest_known_one() {
        assert_eq!(
            did_you_mean(&["loop", "max_round"]),
            " (did you mean `max_rounds`?)"
        );
        assert_eq!(did_you_mean(&["litelm"]), " (did you mean `litellm`?)");
        assert_eq!(
            did_you_mean(&["tools", "bash", "alow"]),
            " (did you mean `allow`?)"
        );
        assert_eq!(
            did_you_mean(&["check", "classes", "code", "comand"]),
            " (did you mean `command`?)"
        );
        assert_eq!(did_you_mean(&["loop", "colour"]), "");
        assert_eq!(did_you_mean(&["models", "prices", "x", "out"]), "");
    }

    #[test]
    fn every_type_error_is_named_in_words() {
        let text = r#"
vertical = 5
[loop]
max_rounds = "eight"
[models]
default_tier = "a"
a = 7
b = ["x", 1]
classes = { code = 3 }
[tools.bash]
allow = "ls *"
deny = ["rm *", true]
network = "no"
[budget]
max_cost_usd = 1
max_total_tokens = 1.5
[demo]
prompt = 2026-01-01
"#;
        assert_eq!(
            problems(text),
            vec![
                "[budget].max_total_tokens: must be a whole number, not a number (1.5)",
                "[demo].prompt: must be a string, not a date (2026-01-01)",
                "[loop].max_rounds: must be a whole number, not a string (\"eight\")",
                "[models].a: must be a model name or a list of model names, not a whole number (7)",
                "[models].b[1]: must be a model name (a string), not a whole number (1)",
                "[models.classes].code: must be a string, not a whole number (3)",
                "[tools.bash].allow: must be a list of strings, not a string (\"ls *\")",
                "[tools.bash].deny[1]: must be a string, not true",
                "[tools.bash].network: must be true, false or \"allowlist\", not a string (\"no\")",
                "vertical: must be a string, not a whole number (5)",
            ]
        );
    }

    #[test]
    fn a_section_that_is_not_a_table_is_named() {
        assert_eq!(
            problems("loop = 3\ntools = { bash = [] }\n"),
            vec![
                "loop: must be a table ([loop]), not a whole number (3)",
                "[tools].bash: must be a table ([tools.bash]), not a list",
            ]
        );
    }

    #[test]
    fn bad_keys_are_removed_and_good_ones_kept() {
        let mut doc: toml::Table = "[loop]\nmax_rounds = \"x\"\n[demo]\nid = \"d\"\n"
            .parse()
            .unwrap();
        check(&mut doc);
        assert_eq!(doc["loop"].as_table().map(toml::Table::len), Some(0));
        assert_eq!(doc["demo"]["id"].as_str(), Some("d"));
    }

    /// Every key of the schema, with a value of its type, is a key the raw layer knows and
    /// reads without error: the schema and raw.rs cannot drift apart unnoticed.
    #[test]
    fn the_schema_matches_the_raw_layer() {
        fn sample(keys: &[(&str, Ty)]) -> toml::Table {
            let mut t = toml::Table::new();
            for (name, ty) in keys {
                let v = match ty {
                    Str => Value::String("x".into()),
                    Int => Value::Integer(1),
                    Num => Value::Float(1.5),
                    Bool | Network => Value::Boolean(true),
                    StrList => Value::Array(vec![Value::String("x".into())]),
                    StrMap => Value::Table(toml::Table::from_iter([(
                        "k".to_string(),
                        Value::String("v".into()),
                    )])),
                    IntMap => Value::Table(toml::Table::from_iter([(
                        "k".to_string(),
                        Value::Integer(1),
                    )])),
                    Tier | Any => Value::String("proxy".into()),
                    Table(inner) | Models(inner) => Value::Table(sample(inner)),
                    TableMap(inner) => Value::Table(toml::Table::from_iter([(
                        "k".to_string(),
                        Value::Table(sample(inner)),
                    )])),
                    Workflows(inner) => {
                        let mut t = sample(inner);
                        t.insert("w".to_string(), Value::Table(sample(WORKFLOW)));
                        Value::Table(t)
                    }
                };
                t.insert(name.to_string(), v);
            }
            t
        }
        let doc = sample(ROOT);
        let mut unknown = Vec::new();
        let raw: Result<super::super::raw::RawConfig, _> =
            serde_ignored::deserialize(Value::Table(doc), |p| unknown.push(p.to_string()));
        assert!(raw.is_ok(), "{raw:?}");
        assert_eq!(unknown, Vec::<String>::new());
    }

    /// Every field of the raw layer has a key of that name in the schema (the other way
    /// round from the test above), so a new key cannot skip the type check and fall back to
    /// serde's one-error-at-a-time message.
    #[test]
    fn every_raw_field_is_in_the_schema() {
        fn names(keys: &[(&str, Ty)], out: &mut std::collections::BTreeSet<String>) {
            for (name, ty) in keys {
                out.insert(name.to_string());
                if let Table(inner) | Models(inner) | TableMap(inner) = ty {
                    names(inner, out);
                }
                if let Workflows(inner) = ty {
                    names(inner, out);
                    names(WORKFLOW, out);
                }
            }
        }
        let mut schema = std::collections::BTreeSet::new();
        names(ROOT, &mut schema);
        let raw = include_str!("raw.rs");
        let missing: Vec<String> = raw
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub(super) "))
            .filter_map(|l| l.split_once(':').map(|(name, _)| name.to_string()))
            .filter(|name| !name.contains(' ') && !name.contains('('))
            // `loop_` is `loop` (serde rename); `tiers` are [models]' other keys and `named`
            // [workflows]' (flatten).
            .map(|name| {
                if name == "loop_" {
                    "loop".to_string()
                } else {
                    name
                }
            })
            .filter(|name| name != "tiers" && name != "named" && !schema.contains(name))
            .collect();
        assert_eq!(missing, Vec::<String>::new());
    }

    #[test]
    fn the_newer_sections_are_type_checked_by_key() {
        assert_eq!(
            problems("[session]\nenabled = \"yes\"\n[check.classes.code]\nmax_attempts = \"3\"\n[tools.files]\nprotect = [1]\n"),
            vec![
                "[check.classes.code].max_attempts: must be a whole number, not a string (\"3\")",
                "[session].enabled: must be true or false, not a string (\"yes\")",
                "[tools.files].protect[0]: must be a string, not a whole number (1)",
            ]
        );
    }
}
