//! `harness test`, PURE: what one run left ([`Observed`]: its exit code, its `--events`
//! objects, its REPORT text) and a case's assertions in, each assertion's verdict out.

use serde_json::Value;

use super::case::Assertion;

/// What a finished run left behind.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Observed {
    /// The process's exit code (`None`: it ended by a signal).
    pub exit_code: Option<i32>,
    /// The `--events` stream, one object per line, in order.
    pub events: Vec<Value>,
    /// The REPORT file's text, when the run wrote one.
    pub report: Option<String>,
}

/// How many calls or stages a failure message lists before `...`.
const SHOWN: usize = 6;

/// The first line of a failed assertion: `<assertion>: expected ... got ...`; `None` when it
/// holds.
pub(crate) fn check(assertion: &Assertion, seen: &Observed) -> Option<String> {
    let (expected, got) = match assertion {
        Assertion::ExitCode(want) => {
            let got = seen.exit_code.map(i64::from);
            (got != Some(*want)).then(|| {
                (
                    want.to_string(),
                    got.map_or("no exit code (killed by a signal)".to_string(), |c| {
                        c.to_string()
                    }),
                )
            })?
        }
        Assertion::StopReason(want) => {
            let got = completed_field(seen, "stop_reason");
            (got.as_deref() != Some(want.as_str()))
                .then(|| (quoted(want), shown(got, "no run.completed event")))?
        }
        Assertion::FinishStatus(want) => finish_status(seen, want)?,
        Assertion::CheckPassed(want) => check_passed(seen, *want)?,
        Assertion::ReportContains(want) => match &seen.report {
            Some(r) if r.contains(want.as_str()) => return None,
            Some(r) => (
                format!("the REPORT to contain {}", quoted(want)),
                format!("a REPORT of {} bytes without it", r.len()),
            ),
            None => (
                format!("the REPORT to contain {}", quoted(want)),
                "no REPORT".to_string(),
            ),
        },
        Assertion::ToolCalled { tool, command } => tool_called(seen, tool, command.as_deref())?,
        Assertion::CommandDenied(want) => command_denied(seen, want)?,
        Assertion::StageReached(want) => stage_reached(seen, want)?,
    };
    Some(format!(
        "{}: expected {expected}, got {got}",
        label(assertion)
    ))
}

/// The assertion as the case file writes it: `tool_called = "bash" (command "ls")`.
pub(crate) fn label(assertion: &Assertion) -> String {
    match assertion {
        Assertion::ExitCode(n) => format!("exit_code = {n}"),
        Assertion::StopReason(s) => format!("stop_reason = {}", quoted(s)),
        Assertion::FinishStatus(s) => format!("finish_status = {}", quoted(s)),
        Assertion::CheckPassed(b) => format!("check_passed = {b}"),
        Assertion::ReportContains(s) => format!("report_contains = {}", quoted(s)),
        Assertion::ToolCalled {
            tool,
            command: None,
        } => format!("tool_called = {}", quoted(tool)),
        Assertion::ToolCalled {
            tool,
            command: Some(c),
        } => format!("tool_called = {} (command {})", quoted(tool), quoted(c)),
        Assertion::CommandDenied(s) => format!("command_denied = {}", quoted(s)),
        Assertion::StageReached(s) => format!("stage_reached = {}", quoted(s)),
    }
}

fn quoted(s: &str) -> String {
    format!("{:?}", crate::bounded::clip(s, 200))
}

fn shown(value: Option<String>, none: &str) -> String {
    value.map_or(none.to_string(), |v| quoted(&v))
}

fn of_type<'a>(seen: &'a Observed, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    seen.events
        .iter()
        .filter(move |e| e.get("type").and_then(Value::as_str) == Some(kind))
}

fn text_field(event: &Value, key: &str) -> Option<String> {
    event.get(key).and_then(Value::as_str).map(str::to_string)
}

fn completed_field(seen: &Observed, key: &str) -> Option<String> {
    of_type(seen, "run.completed")
        .last()
        .and_then(|e| text_field(e, key))
}

/// The JSON value of the REPORT front matter line `key: ...`.
pub(crate) fn front_matter(report: &str, key: &str) -> Option<Value> {
    let mut lines = report.lines();
    if lines.next()? != "---" {
        return None;
    }
    let prefix = format!("{key}: ");
    lines
        .take_while(|l| *l != "---")
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| serde_json::from_str(v).ok())
}

fn finish_status(seen: &Observed, want: &str) -> Option<(String, String)> {
    let got = match &seen.report {
        None => "no REPORT".to_string(),
        Some(r) => match front_matter(r, "finish") {
            Some(f) => match f.get("status").and_then(Value::as_str) {
                Some(s) if s == want => return None,
                Some(s) => quoted(s),
                None => "no finish call (finish: null)".to_string(),
            },
            None => "no finish line in the REPORT".to_string(),
        },
    };
    Some((quoted(want), got))
}

fn check_passed(seen: &Observed, want: bool) -> Option<(String, String)> {
    let got = match &seen.report {
        None => "no REPORT".to_string(),
        Some(r) => match front_matter(r, "check")
            .as_ref()
            .and_then(|c| c.get("passed"))
        {
            Some(Value::Bool(b)) if *b == want => return None,
            Some(Value::Bool(b)) => b.to_string(),
            _ => "no success check in the REPORT".to_string(),
        },
    };
    Some((want.to_string(), got))
}

/// Every `tool.completed` as `tool "command or path" (verdict)`, at most [`SHOWN`].
fn calls(seen: &Observed) -> String {
    let all: Vec<String> = of_type(seen, "tool.completed")
        .map(|e| {
            let what = text_field(e, "command").or_else(|| text_field(e, "path"));
            format!(
                "{}{} ({})",
                text_field(e, "tool").unwrap_or_default(),
                what.map(|w| format!(" {}", quoted(&w))).unwrap_or_default(),
                text_field(e, "verdict").unwrap_or_default()
            )
        })
        .collect();
    listed(all, "no tool call")
}

fn listed(all: Vec<String>, none: &str) -> String {
    match all.len() {
        0 => none.to_string(),
        n if n > SHOWN => format!("{}, ... ({n} in all)", all[..SHOWN].join(", ")),
        _ => all.join(", "),
    }
}

fn tool_called(seen: &Observed, tool: &str, command: Option<&str>) -> Option<(String, String)> {
    let hit = of_type(seen, "tool.completed").any(|e| {
        text_field(e, "tool").as_deref() == Some(tool)
            && text_field(e, "verdict").as_deref() == Some("allowed")
            && command.is_none_or(|want| {
                [text_field(e, "command"), text_field(e, "path")]
                    .iter()
                    .flatten()
                    .any(|have| have.contains(want))
            })
    });
    if hit {
        return None;
    }
    let what = match command {
        Some(c) => format!("a {} call containing {} that ran", quoted(tool), quoted(c)),
        None => format!("a {} call that ran", quoted(tool)),
    };
    Some((what, calls(seen)))
}

fn command_denied(seen: &Observed, want: &str) -> Option<(String, String)> {
    let hit = of_type(seen, "tool.completed").any(|e| {
        text_field(e, "tool").as_deref() == Some("bash")
            && text_field(e, "verdict").as_deref() == Some("denied")
            && text_field(e, "command").is_some_and(|c| c.contains(want))
    });
    (!hit).then(|| {
        (
            format!(
                "a bash command containing {} denied by the gate",
                quoted(want)
            ),
            calls(seen),
        )
    })
}

fn stage_reached(seen: &Observed, want: &str) -> Option<(String, String)> {
    let stages: Vec<String> = of_type(seen, "stage.started")
        .filter_map(|e| text_field(e, "stage"))
        .collect();
    if stages.iter().any(|s| s == want) {
        return None;
    }
    let got = listed(
        stages.iter().map(|s| quoted(s)).collect(),
        "no stage.started event",
    );
    Some((
        format!("a stage.started event for stage {}", quoted(want)),
        got,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const REPORT: &str = "---\nharness_report: 1\nstop_reason: \"completed\"\nfinish: {\"status\":\"done\",\"question\":null}\ncheck: {\"command\":\"bash t.sh\",\"attempts\":2,\"max_attempts\":3,\"passed\":true,\"last_exit\":0,\"last_ending\":\"exit 0\"}\n---\n\nAll done: 3 files.\n";

    fn tool(tool: &str, command: Option<&str>, path: Option<&str>, verdict: &str) -> Value {
        json!({"type": "tool.completed", "tool": tool, "command": command, "path": path, "verdict": verdict})
    }

    fn seen() -> Observed {
        Observed {
            exit_code: Some(0),
            events: vec![
                json!({"type": "run.started"}),
                json!({"type": "stage.started", "workflow": "fix", "stage": "plan", "index": 1, "stages": 3, "attempt": 1, "tier": "t", "model": "m"}),
                json!({"type": "stage.completed", "workflow": "fix", "stage": "plan", "index": 1, "attempt": 1, "outcome": "passed", "reason": null}),
                json!({"type": "stage.started", "workflow": "fix", "stage": "implement", "index": 2, "stages": 3, "attempt": 1, "tier": "t", "model": "m"}),
                tool("bash", Some("ls -la"), None, "allowed"),
                tool("bash", Some("rm -rf /"), None, "denied"),
                tool("read_file", None, Some("src/a.py"), "allowed"),
                tool("write_file", None, Some("secret.txt"), "denied"),
                json!({"type": "run.completed", "stop_reason": "completed", "exit_code": 0}),
            ],
            report: Some(REPORT.to_string()),
        }
    }

    fn fails(a: Assertion) -> String {
        check(&a, &seen()).unwrap_or_else(|| panic!("{a:?} held"))
    }

    fn holds(a: Assertion) {
        assert_eq!(check(&a, &seen()), None, "{a:?}");
    }

    fn called(tool: &str, command: Option<&str>) -> Assertion {
        Assertion::ToolCalled {
            tool: tool.into(),
            command: command.map(String::from),
        }
    }

    #[test]
    fn assertions_that_hold() {
        holds(Assertion::ExitCode(0));
        holds(Assertion::StopReason("completed".into()));
        holds(Assertion::FinishStatus("done".into()));
        holds(Assertion::CheckPassed(true));
        holds(Assertion::ReportContains("3 files".into()));
        holds(called("bash", None));
        holds(called("bash", Some("ls")));
        holds(called("read_file", Some("a.py")));
        holds(Assertion::CommandDenied("rm -rf".into()));
        holds(Assertion::StageReached("plan".into()));
        holds(Assertion::StageReached("implement".into()));
    }

    #[test]
    fn assertions_that_fail_say_what_was_expected_and_what_came() {
        assert_eq!(
            fails(Assertion::ExitCode(5)),
            "exit_code = 5: expected 5, got 0"
        );
        assert_eq!(
            fails(Assertion::StopReason("check_failed".into())),
            "stop_reason = \"check_failed\": expected \"check_failed\", got \"completed\""
        );
        assert_eq!(
            fails(Assertion::FinishStatus("blocked".into())),
            "finish_status = \"blocked\": expected \"blocked\", got \"done\""
        );
        assert_eq!(
            fails(Assertion::CheckPassed(false)),
            "check_passed = false: expected false, got true"
        );
        assert_eq!(
            fails(Assertion::ReportContains("nope".into())),
            format!("report_contains = \"nope\": expected the REPORT to contain \"nope\", got a REPORT of {} bytes without it", REPORT.len())
        );
        let calls = "bash \"ls -la\" (allowed), bash \"rm -rf /\" (denied), read_file \"src/a.py\" (allowed), write_file \"secret.txt\" (denied)";
        assert_eq!(
            fails(called("bash", Some("rm"))),
            format!("tool_called = \"bash\" (command \"rm\"): expected a \"bash\" call containing \"rm\" that ran, got {calls}")
        );
        assert_eq!(
            fails(called("write_file", None)),
            format!("tool_called = \"write_file\": expected a \"write_file\" call that ran, got {calls}")
        );
        assert_eq!(
            fails(Assertion::CommandDenied("ls".into())),
            format!("command_denied = \"ls\": expected a bash command containing \"ls\" denied by the gate, got {calls}")
        );
        assert_eq!(
            fails(Assertion::StageReached("review".into())),
            "stage_reached = \"review\": expected a stage.started event for stage \"review\", got \"plan\", \"implement\""
        );
    }

    #[test]
    fn a_run_that_left_nothing_fails_every_assertion_plainly() {
        let none = Observed::default();
        let got = |a: Assertion| check(&a, &none).unwrap();
        assert_eq!(
            got(Assertion::ExitCode(0)),
            "exit_code = 0: expected 0, got no exit code (killed by a signal)"
        );
        assert_eq!(
            got(Assertion::StopReason("completed".into())),
            "stop_reason = \"completed\": expected \"completed\", got no run.completed event"
        );
        assert_eq!(
            got(Assertion::FinishStatus("done".into())),
            "finish_status = \"done\": expected \"done\", got no REPORT"
        );
        assert_eq!(
            got(Assertion::CheckPassed(true)),
            "check_passed = true: expected true, got no REPORT"
        );
        assert_eq!(
            got(called("bash", None)),
            "tool_called = \"bash\": expected a \"bash\" call that ran, got no tool call"
        );
        assert_eq!(
            got(Assertion::StageReached("plan".into())),
            "stage_reached = \"plan\": expected a stage.started event for stage \"plan\", got no stage.started event"
        );
    }

    #[test]
    fn a_report_without_check_or_finish_says_so() {
        let seen = Observed {
            exit_code: Some(0),
            events: Vec::new(),
            report: Some("---\nfinish: null\n---\nbody\n".into()),
        };
        assert_eq!(
            check(&Assertion::FinishStatus("done".into()), &seen).unwrap(),
            "finish_status = \"done\": expected \"done\", got no finish call (finish: null)"
        );
        assert_eq!(
            check(&Assertion::CheckPassed(true), &seen).unwrap(),
            "check_passed = true: expected true, got no success check in the REPORT"
        );
        assert_eq!(front_matter("no front matter", "finish"), None);
    }

    #[test]
    fn long_lists_are_cut() {
        let seen = Observed {
            events: (0..9)
                .map(|i| tool("bash", Some(&format!("c{i}")), None, "denied"))
                .collect(),
            ..Observed::default()
        };
        let msg = check(&called("bash", None), &seen).unwrap();
        assert!(
            msg.ends_with("bash \"c5\" (denied), ... (9 in all)"),
            "{msg}"
        );
    }
}
