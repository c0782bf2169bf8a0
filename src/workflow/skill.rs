//! Workflow stage, PURE: a skill file's text in, its front matter (`title`, `intent`,
//! `inputs`, `success_check`) and its instructions out. The file is read by the config.

use std::path::PathBuf;

use crate::sha256;

/// A stage's skill: one narrow prompt and the one-line check of its success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The file it came from.
    pub path: PathBuf,
    /// `title` (default: the file's stem).
    pub title: String,
    /// `intent`: what the skill is for, in a line.
    pub intent: Option<String>,
    /// `inputs`: what the stage reads, in a line.
    pub inputs: Option<String>,
    /// `success_check`: what must hold for the stage to pass, when no command decides.
    pub success_check: Option<String>,
    /// The instructions (everything after the front matter), trimmed.
    pub body: String,
    /// `sha256:<hex>` of the file's bytes, for the REPORT.
    pub sha256: String,
}

/// Keys the front matter may hold.
const KEYS: &[&str] = &["title", "intent", "inputs", "success_check"];

/// Parses a skill: optional `---` front matter of `key: value` lines, then the body,
/// which must not be empty.
pub fn parse(text: &str, path: PathBuf) -> Result<Skill, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = match text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    {
        Some(rest) => {
            let end = rest
                .find("\n---")
                .ok_or("the front matter opened by `---` does not end with a `---` line")?;
            let after = &rest[end + 4..];
            let body = after.split_once('\n').map_or("", |(first, rest)| {
                if first.trim().is_empty() {
                    rest
                } else {
                    after
                }
            });
            (&rest[..end], body)
        }
        None => ("", text),
    };
    let mut fields = std::collections::BTreeMap::new();
    for (n, line) in front.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once(':').ok_or_else(|| {
            format!(
                "front matter line {}: expected `key: value`, got {line:?}",
                n + 2
            )
        })?;
        let key = key.trim();
        if !KEYS.contains(&key) {
            return Err(format!(
                "front matter line {}: unknown key {key:?} (known: {})",
                n + 2,
                KEYS.join(", ")
            ));
        }
        let value = value.trim().trim_matches('"').trim().to_string();
        if !value.is_empty() {
            fields.insert(key, value);
        }
    }
    let body = body.trim().to_string();
    if body.is_empty() {
        return Err("the skill has no instructions after its front matter".to_string());
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Skill {
        title: fields.remove("title").unwrap_or(stem),
        intent: fields.remove("intent"),
        inputs: fields.remove("inputs"),
        success_check: fields.remove("success_check"),
        sha256: format!("sha256:{}", sha256::hex(text.as_bytes())),
        body,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn front_matter_and_body() {
        let s = parse(
            "---\ntitle: Plan the fix\nintent: plan a change\nsuccess_check: \"a numbered plan\"\n---\n\nWrite a plan.\n",
            PathBuf::from("skills/plan.md"),
        )
        .unwrap();
        assert_eq!(s.title, "Plan the fix");
        assert_eq!(s.intent.as_deref(), Some("plan a change"));
        assert_eq!(s.success_check.as_deref(), Some("a numbered plan"));
        assert_eq!(s.inputs, None);
        assert_eq!(s.body, "Write a plan.");
        assert!(s.sha256.starts_with("sha256:"), "{}", s.sha256);
    }

    #[test]
    fn no_front_matter_takes_the_stem() {
        let s = parse("Review the diff.", PathBuf::from("x/review.md")).unwrap();
        assert_eq!(
            (s.title.as_str(), s.body.as_str()),
            ("review", "Review the diff.")
        );
    }

    #[test]
    fn bad_skills_say_why() {
        let p = || PathBuf::from("s.md");
        assert!(parse("---\ntitle: x\n", p())
            .unwrap_err()
            .contains("does not end"));
        assert!(parse("---\ncolour: red\n---\nx", p())
            .unwrap_err()
            .contains("unknown key \"colour\""));
        assert!(parse("---\ntitle x\n---\nx", p())
            .unwrap_err()
            .contains("key: value"));
        assert!(parse("---\ntitle: x\n---\n  \n", p())
            .unwrap_err()
            .contains("no instructions"));
    }
}
