//! `harness test`, PURE: the operator's config (as a TOML table), its directory, a case and
//! the case's temp paths in, the config the case's run reads out: offline (no tracker, no
//! endpoint, no metrics, no push), its REPORT, session and work root in the temp dir.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use super::case::CaseTask;

/// Where one case's run keeps its files (all absolute, inside the case's temp dir).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Paths {
    /// The fresh work root, holding the case's `[files]`.
    pub work_root: PathBuf,
    /// The report dir (the REPORT, the local session).
    pub report_dir: PathBuf,
    /// The cassette the run replays.
    pub cassette: PathBuf,
}

/// Sections that would reach a peer or a place outside the temp dir: removed.
const DROPPED: &[&str] = &[
    "redmine",
    "inbox",
    "intake",
    "metrics",
    "workspace",
    "litellm",
    "demo",
];

/// Keys whose relative paths are relative to the config file: `(section path, key)`, a `*`
/// part standing for every key of its table (a workflow, a stage); list entries starting
/// with `@` are names, not paths.
const CONFIG_RELATIVE: &[(&[&str], &str)] = &[
    (&["finish"], "result_schema"),
    (&["tools", "bash"], "read_roots"),
    (&["tools", "bash"], "write_roots"),
    (&["tools", "bash"], "exec_roots"),
    (&["tools", "bash"], "unix_sockets"),
    (&["tools", "bash", "egress"], "ca_file"),
    (&["workflows", "*", "stage", "*"], "skill"),
];

/// The case's config: `overrides` merged over `operator`, the config-relative paths made
/// absolute against `operator_dir`, then the offline parts set ([`DROPPED`] removed,
/// `[litellm] replay`, `work_root`, `report_dir`, `[session] store = "local"`, `[demo]` the
/// case's task). A path that is not UTF-8 is an error.
pub(crate) fn config(
    operator: &toml::Table,
    operator_dir: &Path,
    overrides: &toml::Table,
    task: &CaseTask,
    paths: &Paths,
) -> Result<toml::Table> {
    let mut t = operator.clone();
    merge(&mut t, overrides);
    for (section, key) in CONFIG_RELATIVE {
        absolutize(&mut t, section, key, operator_dir)?;
    }
    for section in DROPPED {
        t.remove(*section);
    }
    let text = |p: &Path| -> Result<toml::Value> {
        p.to_str()
            .map(|s| toml::Value::String(s.to_string()))
            .ok_or_else(|| anyhow!("{} is not a UTF-8 path", p.display()))
    };
    t.insert("work_root".into(), text(&paths.work_root)?);
    t.insert("report_dir".into(), text(&paths.report_dir)?);
    let mut litellm = toml::Table::new();
    litellm.insert("replay".into(), text(&paths.cassette)?);
    t.insert("litellm".into(), litellm.into());
    let session = t
        .entry("session")
        .or_insert_with(|| toml::Table::new().into());
    if let Some(s) = session.as_table_mut() {
        s.insert("store".into(), "local".into());
    }
    let mut demo = toml::Table::new();
    demo.insert("id".into(), task.id.clone().into());
    demo.insert("subject".into(), task.subject.clone().into());
    demo.insert("prompt".into(), task.prompt().into());
    if let Some(class) = &task.class {
        demo.insert("class".into(), class.clone().into());
    }
    t.insert("demo".into(), demo.into());
    Ok(t)
}

/// Merges `over` into `base`: tables key by key, every other value replaced.
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

fn absolutize(t: &mut toml::Table, section: &[&str], key: &str, dir: &Path) -> Result<()> {
    let mut here = t;
    for (i, s) in section.iter().enumerate() {
        if *s == "*" {
            // every table here, each with the rest of the section path
            return here
                .iter_mut()
                .filter_map(|(_, v)| v.as_table_mut())
                .try_for_each(|t| absolutize(t, &section[i + 1..], key, dir));
        }
        match here.get_mut(*s).and_then(toml::Value::as_table_mut) {
            Some(next) => here = next,
            None => return Ok(()),
        }
    }
    let fix = |v: &mut toml::Value| -> Result<()> {
        if let Some(s) = v
            .as_str()
            .filter(|s| !s.starts_with('@') && !s.trim().is_empty())
        {
            let joined = dir.join(s);
            let joined = joined
                .to_str()
                .ok_or_else(|| anyhow!("{} is not a UTF-8 path", joined.display()))?;
            *v = toml::Value::String(joined.to_string());
        }
        Ok(())
    };
    match here.get_mut(key) {
        Some(toml::Value::Array(items)) => items.iter_mut().try_for_each(fix),
        Some(v) => fix(v),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn the_case_config_is_offline_and_its_paths_are_absolute() {
        let operator = table(
            r#"
vertical = "code"
work_root = "/srv/repo"
report_dir = "reports"
[litellm]
base_url = "http://127.0.0.1:9/v1"
key_ref = "env:KEY"
[redmine]
url = "http://127.0.0.1:9"
[inbox]
dir = "inbox"
[metrics]
textfile = "m.prom"
[workspace]
repo = "."
[session]
enabled = true
store = "redmine"
[finish]
result_schema = "schemas/r.json"
[tools.bash]
allow = ["ls"]
read_roots = ["@system", "tools", "/opt/x"]
unix_sockets = ["@dns", "run/s.sock"]
[tools.bash.egress]
ca_file = "ca.pem"
[loop]
max_rounds = 4
finish = "tool"
[workflows.fix]
stages = ["plan"]
[workflows.fix.stage.plan]
skill = "skills/plan.md"
"#,
        );
        let overrides = table("[loop]\nmax_rounds = 2\n[tools.bash]\nallow = [\"cat *\"]\n");
        let task = CaseTask {
            id: "case-x".into(),
            subject: "S".into(),
            description: "D".into(),
            class: Some("code".into()),
            tracker: None,
        };
        let paths = Paths {
            work_root: "/tmp/c/work".into(),
            report_dir: "/tmp/c/reports".into(),
            cassette: "/tmp/c/cassette.json".into(),
        };
        let got = config(&operator, Path::new("/etc/h"), &overrides, &task, &paths).unwrap();
        let want = table(
            r#"
vertical = "code"
work_root = "/tmp/c/work"
report_dir = "/tmp/c/reports"
[litellm]
replay = "/tmp/c/cassette.json"
[session]
enabled = true
store = "local"
[finish]
result_schema = "/etc/h/schemas/r.json"
[tools.bash]
allow = ["cat *"]
read_roots = ["@system", "/etc/h/tools", "/opt/x"]
unix_sockets = ["@dns", "/etc/h/run/s.sock"]
[tools.bash.egress]
ca_file = "/etc/h/ca.pem"
[loop]
max_rounds = 2
finish = "tool"
[workflows.fix]
stages = ["plan"]
[workflows.fix.stage.plan]
skill = "/etc/h/skills/plan.md"
[demo]
id = "case-x"
subject = "S"
prompt = "D"
class = "code"
"#,
        );
        assert_eq!(got, want);
    }

    #[test]
    fn an_override_cannot_bring_a_peer_back() {
        let overrides =
            table("[redmine]\nurl = \"http://127.0.0.1:9\"\n[litellm]\nbase_url = \"http://x\"\n");
        let task = CaseTask {
            id: "i".into(),
            subject: "s".into(),
            description: "d".into(),
            class: None,
            tracker: None,
        };
        let paths = Paths {
            work_root: "/w".into(),
            report_dir: "/r".into(),
            cassette: "/c".into(),
        };
        let got = config(
            &toml::Table::new(),
            Path::new("/"),
            &overrides,
            &task,
            &paths,
        )
        .unwrap();
        assert!(!got.contains_key("redmine"));
        assert_eq!(got["litellm"].as_table().unwrap().len(), 1);
        assert_eq!(got["demo"].get("class"), None);
    }
}
