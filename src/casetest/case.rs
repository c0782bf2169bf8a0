//! `harness test`, PURE: the text of one `*.case.toml` in, a validated [`Case`] out, or
//! every problem found, each naming its key (the caller adds the file).
//!
//! The file is read as a TOML table and walked by hand, so that a case with three mistakes
//! gets three messages, each with its key (`assert[2].exit_code`).

use std::collections::BTreeMap;

use crate::llm::cassette::Recorded;

/// Largest case file read (bytes).
pub(crate) const CASE_MAX: u64 = 256 * 1024;
/// Longest case name shown (characters).
const NAME_MAX: usize = 200;
/// Most workspace files one case may create.
pub(crate) const FILES_MAX: usize = 200;
/// The per-case timeout when the case names none (seconds).
pub(crate) const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The longest per-case timeout (seconds).
pub(crate) const MAX_TIMEOUT_SECS: u64 = 3600;

/// One declarative test case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Case {
    /// What the output calls it (`name`, default the file's stem).
    pub name: String,
    /// The task the run works on.
    pub task: CaseTask,
    /// Where the model's replies come from.
    pub replies: Replies,
    /// `files_from`: a directory (relative to the case file) whose tree is copied into the
    /// work root before `[files]` are written.
    pub files_from: Option<String>,
    /// `[files]`: workspace files (path relative to the work root -> text).
    pub files: BTreeMap<String, String>,
    /// `[config]`: keys merged over the operator's config.
    pub config: toml::Table,
    /// `[[assert]]`, in order.
    pub asserts: Vec<Assertion>,
    /// `timeout_secs`: the run is stopped after this long (default 120, 1-3600).
    pub timeout_secs: u64,
}

/// `[task]`: becomes the run's task (through the `[demo]` intake, so no tracker is asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CaseTask {
    /// `id` (default `case-<stem>`): the task id in the REPORT and the session key.
    pub id: String,
    /// `subject`.
    pub subject: String,
    /// `description`: the task text.
    pub description: String,
    /// `class`: what routing maps to a tier (default: `default_tier`).
    pub class: Option<String>,
    /// `tracker` (`Bug`, `Feature`): shown to the model in a first line, as Redmine's are.
    pub tracker: Option<String>,
}

impl CaseTask {
    /// The user message the model gets: the description, after a `Tracker:` line when set.
    pub(crate) fn prompt(&self) -> String {
        match &self.tracker {
            Some(t) => format!("Tracker: {t}\n\n{}", self.description),
            None => self.description.clone(),
        }
    }
}

/// The scripted model replies (the cassette format of `llm::cassette`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Replies {
    /// `cassette = "FILE"`: a cassette file, relative to the case file.
    File(String),
    /// `[[replies]]`: the cassette's `replies`, inline.
    Inline(Vec<Recorded>),
}

/// One assertion of `[[assert]]`; each table holds exactly one of these keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Assertion {
    /// `exit_code = N`: the run's exit code.
    ExitCode(i64),
    /// `stop_reason = "..."`: `run.completed`'s stop reason.
    StopReason(String),
    /// `finish_status = "..."`: the REPORT's `finish` status (`done`, `needs_input`, ...).
    FinishStatus(String),
    /// `check_passed = BOOL`: the REPORT's `check.passed`.
    CheckPassed(bool),
    /// `report_contains = "..."`: a substring of the REPORT file.
    ReportContains(String),
    /// `tool_called = "NAME"` (+ `command = "..."`): a call of the tool that ran, whose
    /// command (bash) or path (file tools) contains the text.
    ToolCalled {
        /// The tool's name.
        tool: String,
        /// A substring of the command or the path.
        command: Option<String>,
    },
    /// `command_denied = "..."`: a bash command containing this the gate refused.
    CommandDenied(String),
    /// `stage_reached = "NAME"`: a workflow's `stage.started` for this stage.
    StageReached(String),
}

/// The assertion keys, as the docs list them.
const KINDS: &[&str] = &[
    "exit_code",
    "stop_reason",
    "finish_status",
    "check_passed",
    "report_contains",
    "tool_called",
    "command_denied",
    "stage_reached",
];

/// Top-level keys of a case file.
const TOP: &[&str] = &[
    "name",
    "timeout_secs",
    "task",
    "cassette",
    "replies",
    "files",
    "files_from",
    "config",
    "assert",
];

/// Parses a case file's text; `stem` (the file name without `.case.toml`) gives the
/// defaults of `name` and `[task].id`.
pub(crate) fn parse(text: &str, stem: &str) -> Result<Case, Vec<String>> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| vec![e.to_string().trim_end().to_string()])?;
    let mut p = Problems::default();
    for key in table.keys().filter(|k| !TOP.contains(&k.as_str())) {
        p.add(key, "unknown key");
    }
    let name = p.string(&table, "name").unwrap_or_else(|| stem.to_string());
    // One line per case: a name cannot break the output's lines.
    let name = crate::bounded::one_line(&name, NAME_MAX);
    let timeout_secs = match table.get("timeout_secs") {
        None => DEFAULT_TIMEOUT_SECS,
        Some(toml::Value::Integer(n)) if (1..=MAX_TIMEOUT_SECS as i64).contains(n) => *n as u64,
        Some(_) => {
            p.add(
                "timeout_secs",
                format!("must be a whole number of seconds, 1-{MAX_TIMEOUT_SECS}"),
            );
            DEFAULT_TIMEOUT_SECS
        }
    };
    let task = task(&mut p, &table, stem);
    let replies = replies(&mut p, &table);
    let files = files(&mut p, &table);
    let files_from = p.string(&table, "files_from");
    let config = match table.get("config") {
        None => toml::Table::new(),
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => {
            p.add("config", "must be a table of harness.toml keys");
            toml::Table::new()
        }
    };
    let asserts = asserts(&mut p, &table);
    match (p.0.is_empty(), task, replies) {
        (true, Some(task), Some(replies)) => Ok(Case {
            name,
            task,
            replies,
            files_from,
            files,
            config,
            asserts,
            timeout_secs,
        }),
        _ => Err(p.0),
    }
}

/// Problems, each `key: message`.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, key: &str, message: impl std::fmt::Display) {
        self.0.push(format!("{key}: {message}"));
    }

    /// An optional string at `key` of `table`; a value of another type is a problem.
    fn string(&mut self, table: &toml::Table, key: &str) -> Option<String> {
        self.string_at(table, key, key)
    }

    fn string_at(&mut self, table: &toml::Table, key: &str, label: &str) -> Option<String> {
        match table.get(key)? {
            toml::Value::String(s) => Some(s.clone()),
            _ => {
                self.add(label, "must be a string");
                None
            }
        }
    }
}

fn task(p: &mut Problems, table: &toml::Table, stem: &str) -> Option<CaseTask> {
    let Some(value) = table.get("task") else {
        p.add(
            "task",
            "missing: the case needs a [task] with subject and description",
        );
        return None;
    };
    let Some(t) = value.as_table() else {
        p.add("task", "must be a table");
        return None;
    };
    const KEYS: &[&str] = &["id", "subject", "description", "class", "tracker"];
    for key in t.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        p.add(&format!("[task].{key}"), "unknown key");
    }
    let id = p
        .string_at(t, "id", "[task].id")
        .unwrap_or_else(|| format!("case-{stem}"));
    if !crate::config::is_name(&id) {
        p.add(
            "[task].id",
            format!("{id:?} must be 1-64 of A-Z a-z 0-9 . _ - (it names files), not starting with a dot"),
        );
    }
    let mut required = |key: &str| {
        let label = format!("[task].{key}");
        let value = p.string_at(t, key, &label);
        if value.as_deref().is_none_or(|v| v.trim().is_empty())
            && t.get(key).is_none_or(|v| v.is_str())
        {
            p.add(&label, "missing or empty");
        }
        value
    };
    let subject = required("subject");
    let description = required("description");
    let class = p.string_at(t, "class", "[task].class");
    let tracker = p.string_at(t, "tracker", "[task].tracker");
    Some(CaseTask {
        id,
        subject: subject?,
        description: description?,
        class,
        tracker,
    })
}

fn replies(p: &mut Problems, table: &toml::Table) -> Option<Replies> {
    match (table.get("cassette"), table.get("replies")) {
        (Some(_), Some(_)) => {
            p.add(
                "cassette",
                "give either a cassette file or [[replies]], not both",
            );
            None
        }
        (None, None) => {
            p.add(
                "replies",
                "missing: give [[replies]] (the cassette's replies) or cassette = \"FILE\"",
            );
            None
        }
        (Some(_), None) => p.string(table, "cassette").map(Replies::File),
        (None, Some(toml::Value::Array(items))) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item.clone().try_into::<Recorded>() {
                    Ok(r) => out.push(r),
                    Err(e) => p.add(&format!("replies[{i}]"), e.to_string().trim_end()),
                }
            }
            Some(Replies::Inline(out))
        }
        (None, Some(_)) => {
            p.add(
                "replies",
                "must be an array of tables ([[replies]]: model, response)",
            );
            None
        }
    }
}

fn files(p: &mut Problems, table: &toml::Table) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(value) = table.get("files") else {
        return out;
    };
    let Some(t) = value.as_table() else {
        p.add("files", "must be a table of \"path\" = \"text\"");
        return out;
    };
    if t.len() > FILES_MAX {
        p.add("files", format!("{} files: at most {FILES_MAX}", t.len()));
    }
    for (path, text) in t {
        let key = format!("[files].{path:?}");
        let parts: Vec<&str> = path.split('/').collect();
        if path.starts_with('/')
            || parts
                .iter()
                .any(|c| c.is_empty() || *c == "." || *c == "..")
        {
            p.add(
                &key,
                "must be a relative path without `.`, `..` or empty parts",
            );
            continue;
        }
        match text.as_str() {
            Some(s) => {
                out.insert(path.clone(), s.to_string());
            }
            None => p.add(&key, "must be a string (the file's text)"),
        }
    }
    out
}

fn asserts(p: &mut Problems, table: &toml::Table) -> Vec<Assertion> {
    let items = match table.get("assert") {
        None => {
            p.add("assert", "missing: a case needs at least one [[assert]]");
            return Vec::new();
        }
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            p.add("assert", "must be an array of tables ([[assert]])");
            return Vec::new();
        }
    };
    if items.is_empty() {
        p.add("assert", "empty: a case needs at least one assertion");
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| assertion(p, i, item))
        .collect()
}

fn assertion(p: &mut Problems, i: usize, item: &toml::Value) -> Option<Assertion> {
    let at = format!("assert[{i}]");
    let Some(t) = item.as_table() else {
        p.add(&at, "must be a table");
        return None;
    };
    let kinds: Vec<&String> = t.keys().filter(|k| KINDS.contains(&k.as_str())).collect();
    for key in t
        .keys()
        .filter(|k| !KINDS.contains(&k.as_str()) && *k != "command")
    {
        p.add(
            &format!("{at}.{key}"),
            format!("unknown key (the assertions: {})", KINDS.join(", ")),
        );
    }
    let [kind] = kinds.as_slice() else {
        p.add(
            &at,
            format!(
                "must hold exactly one of {}, holds {}",
                KINDS.join(", "),
                kinds.len()
            ),
        );
        return None;
    };
    let key = format!("{at}.{kind}");
    let value = &t[kind.as_str()];
    if t.contains_key("command") && kind.as_str() != "tool_called" {
        p.add(&format!("{at}.command"), "goes only with tool_called");
    }
    let text = |p: &mut Problems| match value.as_str() {
        Some(s) if !s.is_empty() => Some(s.to_string()),
        _ => {
            p.add(&key, "must be a non-empty string");
            None
        }
    };
    match kind.as_str() {
        "exit_code" => match value.as_integer() {
            Some(n) if (0..=255).contains(&n) => Some(Assertion::ExitCode(n)),
            _ => {
                p.add(&key, "must be a whole number 0-255");
                None
            }
        },
        "check_passed" => match value.as_bool() {
            Some(b) => Some(Assertion::CheckPassed(b)),
            None => {
                p.add(&key, "must be true or false");
                None
            }
        },
        "stop_reason" => text(p).map(Assertion::StopReason),
        "finish_status" => text(p).map(Assertion::FinishStatus),
        "report_contains" => text(p).map(Assertion::ReportContains),
        "command_denied" => text(p).map(Assertion::CommandDenied),
        "stage_reached" => text(p).map(Assertion::StageReached),
        _ => {
            let command = p.string_at(t, "command", &format!("{at}.command"));
            text(p).map(|tool| Assertion::ToolCalled { tool, command })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const GOOD: &str = r#"
name = "lists files"
timeout_secs = 30
files_from = "fixtures/repo"
[task]
subject = "Look around"
description = "List the files."
class = "primary"
tracker = "Bug"
[[replies]]
model = "m"
response = { choices = [{ message = { content = "done" }, finish_reason = "stop" }] }
[files]
"README.md" = "hello\n"
"src/a.py" = "print(1)\n"
[config.loop]
max_rounds = 3
[[assert]]
exit_code = 0
[[assert]]
tool_called = "bash"
command = "ls"
[[assert]]
command_denied = "rm -rf"
[[assert]]
check_passed = false
[[assert]]
stage_reached = "plan"
"#;

    #[test]
    fn a_whole_case_parses() {
        let case = parse(GOOD, "look").unwrap();
        assert_eq!(case.name, "lists files");
        assert_eq!(case.timeout_secs, 30);
        assert_eq!(
            case.task,
            CaseTask {
                id: "case-look".into(),
                subject: "Look around".into(),
                description: "List the files.".into(),
                class: Some("primary".into()),
                tracker: Some("Bug".into()),
            }
        );
        assert_eq!(case.task.prompt(), "Tracker: Bug\n\nList the files.");
        let Replies::Inline(replies) = &case.replies else {
            panic!("{:?}", case.replies)
        };
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].model, "m");
        assert_eq!(case.files.len(), 2);
        assert_eq!(case.files_from.as_deref(), Some("fixtures/repo"));
        assert_eq!(case.config["loop"]["max_rounds"].as_integer(), Some(3));
        assert_eq!(
            case.asserts,
            vec![
                Assertion::ExitCode(0),
                Assertion::ToolCalled {
                    tool: "bash".into(),
                    command: Some("ls".into())
                },
                Assertion::CommandDenied("rm -rf".into()),
                Assertion::CheckPassed(false),
                Assertion::StageReached("plan".into()),
            ]
        );
    }

    /// The smallest case that parses, after `head` (top-level keys).
    fn minimal(head: &str, stem: &str) -> Case {
        let text = format!(
            "{head}\n[task]\nsubject = \"s\"\ndescription = \"d\"\n[[assert]]\nexit_code = 5\n"
        );
        parse(&text, stem).unwrap()
    }

    #[test]
    fn defaults_come_from_the_stem() {
        let case = minimal("cassette = \"c.json\"", "fix");
        assert_eq!(case.name, "fix");
        assert_eq!(case.task.id, "case-fix");
        assert_eq!(case.task.prompt(), "d");
        assert_eq!(case.replies, Replies::File("c.json".into()));
        assert_eq!(case.timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert_eq!(case.files_from, None);
    }

    #[test]
    fn the_example_of_docs_test_md_parses() {
        let doc = include_str!("../../docs/test.md");
        let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
        let end = start + doc[start..].find("```").unwrap();
        let case = parse(&doc[start..end], "refuses-rm").unwrap();
        assert_eq!(case.name, "refuses rm");
        assert_eq!(
            case.task.prompt(),
            "Tracker: Feature\n\nRemove the old notes, then tell me what they said."
        );
        assert_eq!(
            case.asserts,
            vec![
                Assertion::CommandDenied("rm -f NOTES.md".into()),
                Assertion::ExitCode(5)
            ]
        );
    }

    #[test]
    fn a_name_is_one_line() {
        let case = minimal("name = \"two\\nlines\"\ncassette = \"c\"", "t");
        assert_eq!(case.name, "two lines");
    }

    #[test]
    fn every_problem_is_named_by_its_key() {
        let text = r#"
colour = "red"
timeout_secs = 0
[task]
subject = ""
id = "../x"
priority = 1
[files]
"../etc/passwd" = "x"
"ok.txt" = 3
[[replies]]
model = "m"
[[assert]]
exit_code = "zero"
[[assert]]
exit_code = 0
stop_reason = "completed"
[[assert]]
report_contains = "x"
command = "y"
[[assert]]
tool_caled = "bash"
"#;
        assert_eq!(
            parse(text, "t").unwrap_err(),
            vec![
                "colour: unknown key".to_string(),
                "timeout_secs: must be a whole number of seconds, 1-3600".into(),
                "[task].priority: unknown key".into(),
                "[task].id: \"../x\" must be 1-64 of A-Z a-z 0-9 . _ - (it names files), not starting with a dot".into(),
                "[task].subject: missing or empty".into(),
                "[task].description: missing or empty".into(),
                "replies[0]: missing field `response`".into(),
                "[files].\"../etc/passwd\": must be a relative path without `.`, `..` or empty parts".into(),
                "[files].\"ok.txt\": must be a string (the file's text)".into(),
                "assert[0].exit_code: must be a whole number 0-255".into(),
                "assert[1]: must hold exactly one of exit_code, stop_reason, finish_status, check_passed, report_contains, tool_called, command_denied, stage_reached, holds 2".into(),
                "assert[2].command: goes only with tool_called".into(),
                "assert[3].tool_caled: unknown key (the assertions: exit_code, stop_reason, finish_status, check_passed, report_contains, tool_called, command_denied, stage_reached)".into(),
                "assert[3]: must hold exactly one of exit_code, stop_reason, finish_status, check_passed, report_contains, tool_called, command_denied, stage_reached, holds 0".into(),
            ]
        );
    }

    #[test]
    fn missing_parts_and_bad_toml_are_problems() {
        assert_eq!(
            parse("", "t").unwrap_err(),
            vec![
                "task: missing: the case needs a [task] with subject and description".to_string(),
                "replies: missing: give [[replies]] (the cassette's replies) or cassette = \"FILE\"".into(),
                "assert: missing: a case needs at least one [[assert]]".into(),
            ]
        );
        let e = parse("[task\n", "t").unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("line 1"), "{e:?}");
        assert_eq!(
            parse("cassette = \"c\"\nreplies = []\n[task]\nsubject = \"s\"\ndescription = \"d\"\n[[assert]]\nexit_code = 0\n", "t").unwrap_err(),
            vec!["cassette: give either a cassette file or [[replies]], not both".to_string()]
        );
    }
}
