//! Redmine adapter, PURE part: the REST API's wire types (issues, journals, users,
//! statuses) and their parsing, and the list path of the configured scope.

use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::config::{RedmineConfig, Scope};

/// A named Redmine object reference (`{"id": 1, "name": "New"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Named {
    /// Its id.
    #[serde(default)]
    pub id: u64,
    /// Its display name.
    #[serde(default)]
    pub name: String,
}

/// The user a key belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    /// User id.
    pub id: u64,
    /// Login name.
    #[serde(default)]
    pub login: String,
}

/// A custom field value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CustomField {
    /// Field id.
    #[serde(default)]
    pub id: u64,
    /// Field name.
    #[serde(default)]
    pub name: String,
    /// Value: a string, a list (multi-value fields) or null.
    #[serde(default)]
    pub value: Value,
}

/// One journal entry (a note and/or attribute changes).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Journal {
    /// Journal id; grows with time.
    pub id: u64,
    /// Who wrote it.
    #[serde(default)]
    pub user: Named,
    /// The note text (empty for pure attribute changes).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub notes: String,
    /// When.
    pub created_on: DateTime<Utc>,
    /// The attribute changes it made (status, assignee, ...).
    #[serde(default)]
    pub details: Vec<Detail>,
}

/// One attribute change of a journal (`{"property":"attr","name":"status_id",..}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Detail {
    /// `attr`, `cf`, `attachment`, `relation`.
    #[serde(default)]
    pub property: String,
    /// The attribute (`status_id`, `assigned_to_id`) or the attachment id.
    #[serde(default)]
    pub name: String,
    /// The value before.
    #[serde(default)]
    pub old_value: Option<String>,
    /// The value after (for an attachment, its file name).
    #[serde(default)]
    pub new_value: Option<String>,
}

/// A file attached to an issue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Attachment {
    /// Attachment id.
    pub id: u64,
    /// File name.
    #[serde(default)]
    pub filename: String,
    /// Size in bytes.
    #[serde(default)]
    pub filesize: u64,
    /// Where to download it.
    #[serde(default)]
    pub content_url: String,
    /// The content type Redmine recorded (the uploader's word, not checked).
    #[serde(default)]
    pub content_type: Option<String>,
}

/// An issue as the REST API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Issue {
    /// Issue number.
    pub id: u64,
    /// Project.
    #[serde(default)]
    pub project: Named,
    /// Tracker (Bug, Feature...).
    #[serde(default)]
    pub tracker: Named,
    /// Current status.
    #[serde(default)]
    pub status: Named,
    /// Priority.
    #[serde(default)]
    pub priority: Named,
    /// Author.
    #[serde(default)]
    pub author: Named,
    /// Assignee.
    #[serde(default)]
    pub assigned_to: Option<Named>,
    /// Subject.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub subject: String,
    /// Description.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub description: String,
    /// Custom field values.
    #[serde(default)]
    pub custom_fields: Vec<CustomField>,
    /// Last change.
    pub updated_on: DateTime<Utc>,
    /// Journals (only with `include=journals` on a single issue).
    #[serde(default)]
    pub journals: Vec<Journal>,
    /// Attachments (only with `include=attachments` on a single issue).
    #[serde(default)]
    pub attachments: Vec<Attachment>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Percent-encodes a path or query component.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The list path for the configured scope, with `limit`.
pub fn list_path(cfg: &RedmineConfig) -> String {
    let limit = cfg.limit;
    match &cfg.scope {
        Scope::Query(q) => format!("/issues.json?{q}&limit={limit}"),
        Scope::SavedQuery(id) => match &cfg.project {
            Some(p) => format!(
                "/projects/{}/issues.json?query_id={id}&limit={limit}",
                url_encode(p)
            ),
            None => format!("/issues.json?query_id={id}&limit={limit}"),
        },
    }
}

/// Parses `{"issues": [...]}`. An issue not in the expected shape is left out with a warning
/// naming it: one odd issue (a plugin's null field) must not keep every other from work.
pub fn parse_issue_list(v: &Value) -> Result<Vec<Issue>> {
    let Some(list) = v.get("issues").and_then(Value::as_array) else {
        bail!("no \"issues\" array");
    };
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        match Issue::deserialize(item) {
            Ok(issue) => out.push(issue),
            Err(e) => {
                let which = item
                    .get("id")
                    .and_then(Value::as_u64)
                    .map_or("an issue without an id".to_string(), |n| {
                        format!("issue #{n}")
                    });
                tracing::warn!("redmine: {which} left out: not in the expected shape ({e})");
            }
        }
    }
    Ok(out)
}

/// Finds a status by name, case-insensitively; the error lists the known names.
pub fn status_by_name(statuses: &[Named], name: &str) -> Result<u64> {
    statuses
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
        .map(|s| s.id)
        .ok_or_else(|| {
            let known: Vec<&str> = statuses.iter().map(|s| s.name.as_str()).collect();
            anyhow!(
                "Redmine has no issue status named {name:?} (known: {})",
                known.join(", ")
            )
        })
}

/// Fixtures shared by the Redmine tests of intake, notes and write-back.
#[cfg(test)]
pub mod fixtures {
    use super::*;

    /// A UTC time from RFC 3339.
    pub fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// A journal by the bot with these notes.
    pub fn journal(id: u64, notes: &str) -> Journal {
        Journal {
            id,
            user: Named {
                id: 5,
                name: "CI Bot".into(),
            },
            notes: notes.into(),
            created_on: at("2026-11-30T10:00:00Z"),
            details: Vec::new(),
        }
    }

    /// Issue #4 as Redmine 5 serves it, with a note, an attribute change and a claim.
    pub const ISSUE: &str = r#"{"id": 4, "project": {"id": 1, "name": "mopac"}, "tracker": {"id": 1, "name": "Bug"},
      "status": {"id": 2, "name": "In Progress", "is_closed": false}, "priority": {"id": 4, "name": "Urgent"},
      "author": {"id": 1, "name": "Redmine Admin"}, "subject": "Fix pagination off-by-one",
      "description": "Page 2 repeats the last row.", "custom_fields": [{"id": 1, "name": "Class", "value": "code"}],
      "created_on": "2026-11-30T09:49:06Z", "updated_on": "2026-11-30T09:49:37Z",
      "journals": [{"id": 1, "user": {"id": 1, "name": "Redmine Admin"}, "notes": "Seen on prod too.", "created_on": "2026-11-30T09:49:37Z", "private_notes": false, "details": []},
                   {"id": 2, "user": {"id": 5, "name": "CI Bot"}, "notes": "", "created_on": "2026-11-30T09:50:00Z", "details": [{"property":"attr"}]},
                   {"id": 3, "user": {"id": 5, "name": "CI Bot"}, "notes": "[harness-claim] run=abc", "created_on": "2026-11-30T09:51:00Z"}]}"#;

    /// [`ISSUE`], parsed.
    pub fn issue() -> Issue {
        serde_json::from_str(ISSUE).unwrap()
    }

    /// A `[redmine]` section with this scope.
    pub fn cfg(scope: Scope, project: Option<&str>) -> RedmineConfig {
        RedmineConfig {
            url: "http://127.0.0.1:3000".into(),
            key_ref: crate::secrets::KeyRef::Env("K".into()),
            scope,
            project: project.map(String::from),
            class_field: "Class".into(),
            default_class: "primary".into(),
            limit: 50,
            timeout: std::time::Duration::from_secs(5),
            max_retries: 2,
            claim: Default::default(),
            writeback: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{cfg, ISSUE};
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn list_paths_follow_the_scope() {
        assert_eq!(
            list_path(&cfg(
                Scope::Query("project_id=mopac&status_id=1".into()),
                None
            )),
            "/issues.json?project_id=mopac&status_id=1&limit=50"
        );
        assert_eq!(
            list_path(&cfg(Scope::SavedQuery(8), None)),
            "/issues.json?query_id=8&limit=50"
        );
        assert_eq!(
            list_path(&cfg(Scope::SavedQuery(9), Some("mopac"))),
            "/projects/mopac/issues.json?query_id=9&limit=50"
        );
    }

    #[test]
    fn status_lookup_is_case_insensitive_and_lists_known_names() {
        let s = vec![
            Named {
                id: 1,
                name: "New".into(),
            },
            Named {
                id: 2,
                name: "In Progress".into(),
            },
        ];
        assert_eq!(status_by_name(&s, "in progress").unwrap(), 2);
        let e = status_by_name(&s, "Done").unwrap_err().to_string();
        assert!(
            e.contains("\"Done\"") && e.contains("New, In Progress"),
            "{e}"
        );
    }

    #[test]
    fn list_parsing_rejects_other_shapes() {
        assert!(parse_issue_list(&serde_json::json!({"error": "x"})).is_err());
        let v = serde_json::json!({"issues": [serde_json::from_str::<Value>(ISSUE).unwrap()], "total_count": 1});
        assert_eq!(parse_issue_list(&v).unwrap()[0].id, 4);
    }

    #[test]
    fn an_odd_issue_is_left_out_and_a_null_subject_is_empty() {
        let good: Value = serde_json::from_str(ISSUE).unwrap();
        let mut null_subject = good.clone();
        null_subject["id"] = 5.into();
        null_subject["subject"] = Value::Null;
        let mut odd = good.clone();
        odd["id"] = 6.into();
        odd["project"] = Value::Null;
        let v = serde_json::json!({"issues": [odd, good, null_subject, {"subject": "no id"}]});
        let issues = parse_issue_list(&v).unwrap();
        let ids: Vec<u64> = issues.iter().map(|i| i.id).collect();
        assert_eq!(ids, vec![4, 5]);
        assert_eq!(issues[1].subject, "");
    }
}
