//! Events stage, PURE: the human renderer. One [`Event`] in, the line narrated on stderr out
//! (or none); the JSONL stream is the other renderer of the same events, so the two can never
//! disagree about what happened.

use super::{Event, Verdict};

/// The human renderer of one run's events. It remembers the task, whose line waits for the
/// route that follows it: a person reads the task and where it goes as one line.
#[derive(Debug, Default)]
pub struct Narrator {
    task: Option<String>,
}

impl Narrator {
    /// The line for `event`, if it has one.
    pub fn render(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::TaskTaken {
                task_id,
                source,
                subject,
                ..
            } => {
                self.task = Some(format!("task {task_id} ({source}): {subject:?}"));
                None
            }
            Event::Route {
                class,
                tier,
                models,
            } => {
                let task = self.task.take().unwrap_or_else(|| "route:".to_string());
                Some(format!(
                    "{task} class={} -> {tier} -> {}",
                    class.as_deref().unwrap_or("(none)"),
                    models.join(" | ")
                ))
            }
            _ => narration(event),
        }
    }
}

/// The narration of an event that stands alone, without the logger's prefix; `None` for
/// events a person watching the run does not need (the stream's frame, a round or a call
/// starting) and for the task and route, which [`Narrator`] joins.
pub fn narration(event: &Event) -> Option<String> {
    match event {
        Event::RoundCompleted {
            round,
            max_rounds,
            model,
            usage,
            cost_usd,
            latency_ms,
            retries,
            tool_calls,
        } => Some(format!(
            "round {round}/{max_rounds}: {model} answered ({} tokens{}, {:.1}s{}), {tool_calls} tool call{}",
            usage.total_tokens,
            cost_usd.map_or_else(String::new, |c| format!(", {c} USD")),
            *latency_ms as f64 / 1000.0,
            retry_note(*retries),
            if *tool_calls == 1 { "" } else { "s" }
        )),
        Event::ToolCompleted { round, .. } => Some(format!("round {round}: {}", tool_line(event)?)),
        Event::EgressDenied {
            round,
            host,
            port,
            reason,
            ..
        } => Some(format!("round {round}: egress to {host}:{port} refused: {reason}")),
        Event::ReportWritten {
            path,
            stop_reason,
            rounds,
            total_tokens,
            ..
        } => Some(format!(
            "REPORT written: {path} (stop reason {stop_reason}, {rounds} rounds, {total_tokens} tokens)"
        )),
        Event::StageStarted {
            workflow,
            stage,
            index,
            stages,
            attempt,
            tier,
            model,
        } => Some(format!(
            "workflow {workflow}: stage {index}/{stages} {stage} (attempt {attempt}) on {tier} -> {model}"
        )),
        Event::StageCompleted {
            workflow,
            stage,
            index,
            attempt,
            outcome,
            reason,
        } => Some(format!(
            "workflow {workflow}: stage {index} {stage} (attempt {attempt}) {outcome}{}",
            reason
                .as_deref()
                .map_or_else(String::new, |r| format!(": {}", quote(r)))
        )),
        Event::TaskTaken { .. }
        | Event::Route { .. }
        | Event::RunStarted { .. }
        | Event::RoundStarted { .. }
        | Event::ToolStarted { .. }
        | Event::Plan { .. }
        | Event::WritebackCompleted { .. }
        | Event::RunCompleted { .. } => None,
    }
}

/// `bash "ls" -> allowed, exit 0, 12 bytes`, `edit_file "a.rs" -> refused: why`, ...
fn tool_line(event: &Event) -> Option<String> {
    let Event::ToolCompleted {
        tool,
        command,
        path,
        verdict,
        ending,
        bytes,
        reason,
        ..
    } = event
    else {
        return None;
    };
    let reason = reason.as_deref().unwrap_or("");
    let ending = ending.as_deref().unwrap_or("");
    Some(match (verdict, command, path) {
        (Verdict::Invalid, ..) => format!("tool call rejected: {reason}"),
        (Verdict::Allowed, Some(c), _) => {
            format!("{tool} {} -> allowed, {ending}, {bytes} bytes", quote(c))
        }
        (Verdict::Denied, Some(c), _) => format!("{tool} {} -> denied: {reason}", quote(c)),
        (Verdict::Allowed, None, Some(p)) => format!("{tool} {} -> {ending}", quote(p)),
        (Verdict::Denied, None, Some(p)) => format!("{tool} {} -> refused: {reason}", quote(p)),
        // `finish`: its ending says the status (`finish done`).
        (Verdict::Allowed, None, None) => ending.to_string(),
        (Verdict::Denied, None, None) => format!("{tool} -> denied: {reason}"),
    })
}

/// A command or path on one line of at most 200 characters, quoted.
fn quote(text: &str) -> String {
    let one_line: String = text.chars().take(200).collect();
    let more = if text.chars().count() > 200 {
        "..."
    } else {
        ""
    };
    format!("{one_line:?}{more}")
}

/// `, 1 retry` / `, N retries`; empty without retries.
fn retry_note(retries: u32) -> String {
    match retries {
        0 => String::new(),
        1 => ", 1 retry".to_string(),
        n => format!(", {n} retries"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::wire::Usage;
    use crate::tools::bash::Ending;
    use crate::tools::ToolEvent;

    fn completed(event: &ToolEvent, tool: &str) -> String {
        narration(&Event::tool_completed(2, "c", tool, event)).unwrap()
    }

    #[test]
    fn tool_calls_read_as_before() {
        let ran = ToolEvent::Ran {
            command: "ls -1".into(),
            ending: Ending::Exited(0),
            output_bytes: 12,
        };
        assert_eq!(
            completed(&ran, "bash"),
            "round 2: bash \"ls -1\" -> allowed, exit 0, 12 bytes"
        );
        let denied = ToolEvent::Denied {
            command: "rm -rf /".into(),
            reason: "no".into(),
        };
        assert_eq!(
            completed(&denied, "bash"),
            "round 2: bash \"rm -rf /\" -> denied: no"
        );
        let file = ToolEvent::File {
            tool: "edit_file".into(),
            path: "src/lib.rs".into(),
            summary: "1 replacement at line 2".into(),
        };
        assert_eq!(
            completed(&file, "edit_file"),
            "round 2: edit_file \"src/lib.rs\" -> 1 replacement at line 2"
        );
        let refused = ToolEvent::FileRefused {
            tool: "read_file".into(),
            path: "../x".into(),
            reason: "outside".into(),
        };
        assert_eq!(
            completed(&refused, "read_file"),
            "round 2: read_file \"../x\" -> refused: outside"
        );
        let finished = ToolEvent::Finished {
            status: "done".into(),
        };
        assert_eq!(completed(&finished, "finish"), "round 2: finish done");
        let invalid = ToolEvent::Invalid {
            reason: "bad JSON".into(),
        };
        assert_eq!(
            completed(&invalid, "bash"),
            "round 2: tool call rejected: bad JSON"
        );
        let long = ToolEvent::Ran {
            command: "x".repeat(300),
            ending: Ending::Exited(1),
            output_bytes: 0,
        };
        assert!(completed(&long, "bash").contains(&format!("{:?}...", "x".repeat(200))));
    }

    #[test]
    fn a_round_reads_with_cost_latency_and_retries() {
        let event = Event::RoundCompleted {
            round: 1,
            max_rounds: 4,
            model: "glm-5.3".into(),
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
            },
            cost_usd: Some(0.002),
            latency_ms: 1250,
            retries: 1,
            tool_calls: 1,
        };
        assert_eq!(
            narration(&event).unwrap(),
            "round 1/4: glm-5.3 answered (15 tokens, 0.002 USD, 1.2s, 1 retry), 1 tool call"
        );
    }

    #[test]
    fn the_task_and_its_route_read_as_one_line() {
        let mut n = Narrator::default();
        let taken = Event::TaskTaken {
            task_id: "demo-1".into(),
            source: "demo".into(),
            subject: "Test demo".into(),
            class: Some("primary".into()),
        };
        let route = Event::Route {
            class: Some("primary".into()),
            tier: "mopac-primary".into(),
            models: vec!["glm-5.3".into(), "glm-5.2".into()],
        };
        assert_eq!(n.render(&taken), None);
        assert_eq!(
            n.render(&route).unwrap(),
            "task demo-1 (demo): \"Test demo\" class=primary -> mopac-primary -> glm-5.3 | glm-5.2"
        );
        assert_eq!(
            n.render(&route).unwrap(),
            "route: class=primary -> mopac-primary -> glm-5.3 | glm-5.2"
        );
    }

    #[test]
    fn retries_are_counted_in_words() {
        assert_eq!(retry_note(0), "");
        assert_eq!(retry_note(1), ", 1 retry");
        assert_eq!(retry_note(3), ", 3 retries");
    }

    #[test]
    fn the_frame_is_not_narrated() {
        let started = Event::RunStarted {
            version: "0".into(),
            command: "once".into(),
            pid: 1,
        };
        assert_eq!(narration(&started), None);
    }
}
