//! Output stage, PURE: `harness once --output json`. How the run ended and what its REPORT
//! said in, the one JSON object a script reads on stdout out (narration stays on stderr).
//! Every way a run ends prints exactly one object; a run that ended before a REPORT has
//! nulls where the REPORT's values would be.

use serde::Serialize;
use serde_json::Value;

use crate::llm::wire::Usage;
use crate::secrets::Redactor;

/// What a written REPORT adds to the object, booked when the REPORT is on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    /// The REPORT's `stop_reason` (the turn's).
    pub stop_reason: String,
    /// The timestamped REPORT file (absolute).
    pub report: String,
    /// Tokens of the turn.
    pub usage: Usage,
    /// USD of the turn, when known.
    pub cost_usd: Option<f64>,
    /// The accepted `finish` result, as the REPORT carries it (masked).
    pub result: Option<Value>,
    /// The error of a turn that failed once the model was reached (exit 4): the run itself
    /// ends without a stage failure, so this is where its `error` comes from.
    pub error: Option<String>,
}

impl Delivered {
    /// The run's `error`: the failed stage's, else a failed turn's.
    pub(crate) fn error_or<'a>(
        delivered: Option<&'a Delivered>,
        failed: Option<&'a str>,
    ) -> Option<&'a str> {
        failed.or_else(|| delivered.and_then(|d| d.error.as_deref()))
    }
}

/// The object `--output json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Summary {
    /// The run's id (the REPORT's `run_id`).
    pub run_id: String,
    /// `run.completed`'s `stop_reason`: the turn's, or why no turn ran or the run failed
    /// (`no_task`, `config_error`, `writeback_error`, ...).
    pub outcome: String,
    /// The process's exit code.
    pub exit_code: u8,
    /// The REPORT's `stop_reason`; null without a REPORT.
    pub stop_reason: Option<String>,
    /// The REPORT path; null without a REPORT.
    pub report: Option<String>,
    /// The `finish` result; null without one.
    pub result: Option<Value>,
    /// The pull request the forge step opened or updated for the task's branch; null
    /// without one (no `[forge]`, none wanted, or it is still pending).
    pub pr_url: Option<String>,
    /// Tokens of the turn; null without a REPORT.
    pub tokens: Option<Tokens>,
    /// USD of the turn; null when unknown or without a REPORT.
    pub cost_usd: Option<f64>,
    /// The error that failed the run (masked); null unless it failed.
    pub error: Option<String>,
}

/// `tokens` of [`Summary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Tokens {
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Both.
    pub total: u64,
}

impl Summary {
    /// The object of a run that ended with `outcome` and `exit_code`, with what its REPORT
    /// said when one was written.
    pub(crate) fn new(
        run_id: &str,
        outcome: &str,
        exit_code: u8,
        error: Option<&str>,
        delivered: Option<&Delivered>,
        pr_url: Option<&str>,
    ) -> Summary {
        Summary {
            run_id: run_id.to_string(),
            outcome: outcome.to_string(),
            exit_code,
            stop_reason: delivered.map(|d| d.stop_reason.clone()),
            report: delivered.map(|d| d.report.clone()),
            result: delivered.and_then(|d| d.result.clone()),
            pr_url: pr_url.map(String::from),
            tokens: delivered.map(|d| Tokens {
                prompt: d.usage.prompt_tokens,
                completion: d.usage.completion_tokens,
                total: d.usage.total_tokens,
            }),
            cost_usd: delivered.and_then(|d| d.cost_usd),
            error: error.map(String::from),
        }
    }

    /// One line of JSON, every string in it masked.
    pub(crate) fn render(&self, redactor: &Redactor) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        redactor.redact_json(&mut value);
        format!("{value}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn a_run_with_a_report_and_one_without() {
        let delivered = Delivered {
            stop_reason: "completed".into(),
            report: "/r/REPORT-v-1.md".into(),
            usage: Usage {
                prompt_tokens: 7,
                completion_tokens: 3,
                total_tokens: 10,
            },
            cost_usd: Some(0.5),
            result: Some(json!({"category": "bug"})),
            error: None,
        };
        let with = Summary::new(
            "r1",
            "completed",
            0,
            None,
            Some(&delivered),
            Some("http://127.0.0.1:3000/o/r/pulls/1"),
        );
        let text = with.render(&Redactor::default());
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"run_id": "r1", "outcome": "completed", "exit_code": 0,
                "stop_reason": "completed", "report": "/r/REPORT-v-1.md",
                "result": {"category": "bug"}, "pr_url": "http://127.0.0.1:3000/o/r/pulls/1",
                "tokens": {"prompt": 7, "completion": 3, "total": 10}, "cost_usd": 0.5,
                "error": null})
        );
        assert!(text.ends_with("}\n") && text.lines().count() == 1);
        let without = Summary::new("r2", "config_error", 1, Some("config x: bad"), None, None);
        assert_eq!(
            serde_json::to_value(&without).unwrap(),
            json!({"run_id": "r2", "outcome": "config_error", "exit_code": 1,
                "stop_reason": null, "report": null, "result": null, "pr_url": null,
                "tokens": null, "cost_usd": null, "error": "config x: bad"})
        );
    }

    #[test]
    fn every_string_is_masked() {
        let mut redactor = Redactor::default();
        redactor.add(&crate::secrets::Secret::new("sk-output-canary-1234"));
        let delivered = Delivered {
            stop_reason: "completed".into(),
            report: "/r/x.md".into(),
            usage: Usage::default(),
            cost_usd: None,
            result: Some(json!({"sk-output-canary-1234": ["a sk-output-canary-1234"]})),
            error: Some("llm: 500 sk-output-canary-1234".into()),
        };
        let text = Summary::new(
            "r",
            "writeback_error",
            1,
            Some("key sk-output-canary-1234"),
            Some(&delivered),
            None,
        )
        .render(&redactor);
        assert!(!text.contains("sk-output-canary-1234"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }

    #[test]
    fn a_failed_stage_s_error_comes_before_a_failed_turn_s() {
        let turn = Delivered {
            stop_reason: "llm_error".into(),
            report: "/r/x.md".into(),
            usage: Usage::default(),
            cost_usd: None,
            result: None,
            error: Some("llm: HTTP 500".into()),
        };
        assert_eq!(
            Delivered::error_or(Some(&turn), None),
            Some("llm: HTTP 500")
        );
        assert_eq!(
            Delivered::error_or(Some(&turn), Some("writeback: 503")),
            Some("writeback: 503")
        );
        assert_eq!(Delivered::error_or(None, None), None);
    }
}
