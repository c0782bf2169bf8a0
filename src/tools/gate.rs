//! TEMPORARY compile stub; replaced by the real gate before commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allow,
    Deny,
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    text: String,
}
impl Rule {
    pub fn parse(text: &str) -> Result<Rule, String> {
        if text.trim().is_empty() {
            Err("empty rule".into())
        } else {
            Ok(Rule {
                text: text.to_string(),
            })
        }
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
}
#[derive(Debug, Clone)]
pub struct Policy {
    pub default: Verdict,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
    pub write_redirects: bool,
}
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SegmentJudgement {
    pub text: String,
    pub command_word: Option<String>,
    pub verdict: Verdict,
    pub rule: Option<String>,
    pub reason: String,
}
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Judgement {
    pub command: String,
    pub verdict: Verdict,
    pub reason: String,
    pub segments: Vec<SegmentJudgement>,
    pub runtime_path_checks: Vec<(String, String)>,
}
pub fn judge(policy: &Policy, command: &str) -> Judgement {
    let w = command.split_whitespace().next().unwrap_or("").to_string();
    let ok = policy
        .allow
        .iter()
        .any(|r| r.text == "*" || r.text.split_whitespace().next() == Some(w.as_str()))
        && !command.contains(['$', '`', '(', ';', '|', '&', '>', '<']);
    let verdict = if ok { Verdict::Allow } else { Verdict::Deny };
    Judgement {
        command: command.into(),
        verdict,
        reason: if ok {
            "allowed".into()
        } else {
            format!("{w} not allowed")
        },
        segments: vec![],
        runtime_path_checks: vec![],
    }
}
pub fn lint(_policy: &Policy) -> Vec<String> {
    vec![]
}
pub fn render_human(j: &Judgement, _w: &[String]) -> String {
    format!("{:?}: {}", j.verdict, j.reason)
}
