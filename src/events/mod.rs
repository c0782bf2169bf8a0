//! Events adapter (a file or stdout): the JSONL stream of `harness once --events PATH` and,
//! from the same events, the narration on stderr (`human`); and
//! the run's tally that the metrics textfile is made from. One [`Events`] handle per run,
//! created before the config is read and handed to every stage as an argument; it writes
//! one JSON object per line (`type`, `ts`, `run_id` and the event's fields), masked by the
//! run's [`Redactor`] and flushed per event, so a watcher sees progress as it happens.
//!
//! `run.started` is written when the handle opens and `run.completed` exactly once, last,
//! by [`Events::finish`] (or by the hard-exit hook a second signal runs). Without
//! `--events` nothing is written, but the tally is still kept for `[metrics]`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::exit::Failure;
use crate::llm::wire::Usage;
pub mod human;
pub mod metrics;

use crate::secrets::Redactor;
use crate::tools::ToolEvent;
use metrics::Tally;

/// One event of the stream. The envelope (`ts`, `run_id`) is added when it is written.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The first line of every stream.
    #[serde(rename = "run.started")]
    RunStarted {
        /// harness's version.
        version: String,
        /// The subcommand (`once`).
        command: String,
        /// This process's id.
        pid: u32,
    },
    /// Intake chose the run's task (and claimed it, where the source claims).
    #[serde(rename = "task.taken")]
    TaskTaken {
        /// The task's id in its source.
        task_id: String,
        /// `demo`, `redmine`, `inbox`.
        source: String,
        /// One-line subject.
        subject: String,
        /// The task class, if any.
        class: Option<String>,
    },
    /// Routing: the task's class -> tier -> model chain.
    #[serde(rename = "route")]
    Route {
        /// The class routed.
        class: Option<String>,
        /// The tier alias.
        tier: String,
        /// The concrete models, first choice first.
        models: Vec<String>,
        /// The workflow the task runs as stages, and why (`fix (intent: ...)`); `null`:
        /// one turn.
        workflow: Option<String>,
    },
    /// A model call is about to be made.
    #[serde(rename = "round.started")]
    RoundStarted {
        /// 1-based round.
        round: u32,
        /// The cap.
        max_rounds: u32,
        /// The model asked first.
        model: String,
    },
    /// A model answered.
    #[serde(rename = "round.completed")]
    RoundCompleted {
        /// 1-based round.
        round: u32,
        /// The cap.
        max_rounds: u32,
        /// The model that answered.
        model: String,
        /// Tokens of this round.
        usage: Usage,
        /// USD; `null` when unknown.
        cost_usd: Option<f64>,
        /// Wall time of the call, retries included.
        latency_ms: u64,
        /// Retries the call needed.
        retries: u32,
        /// Tool calls the reply asked for.
        tool_calls: usize,
    },
    /// A tool call is about to be judged and run.
    #[serde(rename = "tool.started")]
    ToolStarted {
        /// The round that asked for it.
        round: u32,
        /// The call id the result echoes.
        call_id: String,
        /// The tool's name as the model sent it.
        tool: String,
        /// The command, when the arguments hold one.
        command: Option<String>,
    },
    /// A tool call ended.
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        /// The round that asked for it.
        round: u32,
        /// The call id.
        call_id: String,
        /// The tool's name as the model sent it.
        tool: String,
        /// The command, for `bash`.
        command: Option<String>,
        /// The file, for a file tool.
        path: Option<String>,
        /// `allowed` (it ran), `denied` (the gate refused it), `invalid` (not understood).
        verdict: Verdict,
        /// The exit status, when the command ran and exited.
        exit: Option<i32>,
        /// `exit N`, `signal N`, `timeout`, `interrupted`, when a command ran; what a file
        /// tool did (its summary).
        ending: Option<String>,
        /// Bytes the command printed.
        bytes: u64,
        /// Why it was denied or invalid.
        reason: Option<String>,
    },
    /// `network = "allowlist"`: the egress proxy (or the kernel, for a connect that went
    /// around it) refused a connection while a command ran.
    #[serde(rename = "tool.egress_denied")]
    EgressDenied {
        /// The round of the command.
        round: u32,
        /// The call id of the command.
        call_id: String,
        /// The host (or address) asked for.
        host: String,
        /// The port asked for (0 when none was named).
        port: u16,
        /// Why: `is not in the allowlist`, ...
        reason: String,
        /// The command as the model sent it (redacted).
        command: String,
    },
    /// `--dry-run`: the PLAN (with `--events -`, the only place it goes).
    #[serde(rename = "plan")]
    Plan {
        /// The PLAN text.
        text: String,
    },
    /// The REPORT is on disk.
    #[serde(rename = "report.written")]
    ReportWritten {
        /// The timestamped REPORT file.
        path: String,
        /// The turn's stop reason.
        stop_reason: String,
        /// Rounds made.
        rounds: u32,
        /// Tokens used.
        total_tokens: u64,
        /// USD spent, when known.
        cost_usd: Option<f64>,
    },
    /// The REPORT went back to the task's source (a Redmine note, the inbox file moved).
    #[serde(rename = "writeback.completed")]
    WritebackCompleted {
        /// `redmine`, `inbox` or `forge`.
        target: String,
        /// The task's id.
        task_id: String,
        /// Whether it worked.
        ok: bool,
        /// What failed.
        error: Option<String>,
    },
    /// A workflow stage's attempt starts (its own bounded turn).
    #[serde(rename = "stage.started")]
    StageStarted {
        /// The workflow.
        workflow: String,
        /// The stage.
        stage: String,
        /// Its 1-based place in the workflow.
        index: usize,
        /// The workflow's stage count.
        stages: usize,
        /// 1-based attempt of this stage in this run.
        attempt: u32,
        /// The tier it runs on.
        tier: String,
        /// The first-choice model.
        model: String,
    },
    /// A workflow stage's attempt ended.
    #[serde(rename = "stage.completed")]
    StageCompleted {
        /// The workflow.
        workflow: String,
        /// The stage.
        stage: String,
        /// Its 1-based place in the workflow.
        index: usize,
        /// 1-based attempt.
        attempt: u32,
        /// `passed`, `failed`, `needs_input` or `stopped`.
        outcome: String,
        /// Why it did not pass, when it did not (masked).
        reason: Option<String>,
    },
    /// The last line of every stream.
    #[serde(rename = "run.completed")]
    RunCompleted {
        /// The process's exit code.
        exit_code: u8,
        /// The turn's stop reason, or why no turn ran (`no_task`, `dry_run`, `<stage>_error`).
        stop_reason: String,
        /// The REPORT file, when one was written.
        report: Option<String>,
        /// The error, for a failed run.
        error: Option<String>,
        /// The task branch's pull request, when the run opened or updated one.
        pr_url: Option<String>,
        /// Wall time of the run.
        duration_ms: u64,
    },
}

/// What happened to a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The gate allowed it and it ran.
    Allowed,
    /// The gate refused it.
    Denied,
    /// It could not be understood or started.
    Invalid,
}

impl Event {
    /// The `tool.completed` event of a finished call.
    pub fn tool_completed(round: u32, call_id: &str, tool: &str, event: &ToolEvent) -> Event {
        let (command, path) = match event {
            ToolEvent::Ran { command, .. } | ToolEvent::Denied { command, .. } => {
                (Some(command.clone()), None)
            }
            ToolEvent::File { path, .. } | ToolEvent::FileRefused { path, .. } => {
                (None, Some(path.clone()))
            }
            ToolEvent::Finished { .. } | ToolEvent::Invalid { .. } => (None, None),
        };
        let (verdict, exit, ending, bytes, reason) = match event {
            ToolEvent::Ran {
                ending,
                output_bytes,
                ..
            } => (
                Verdict::Allowed,
                ending.exit_code(),
                Some(ending.to_string()),
                *output_bytes,
                None,
            ),
            ToolEvent::Denied { reason, .. } | ToolEvent::FileRefused { reason, .. } => {
                (Verdict::Denied, None, None, 0, Some(reason.clone()))
            }
            // The finish tool: the status the model reported.
            ToolEvent::Finished { status } => (
                Verdict::Allowed,
                None,
                Some(format!("finish {status}")),
                0,
                None,
            ),
            // A file tool has no exit status: its summary says what it did.
            ToolEvent::File { summary, .. } => {
                (Verdict::Allowed, None, Some(summary.clone()), 0, None)
            }
            ToolEvent::Invalid { reason } => {
                (Verdict::Invalid, None, None, 0, Some(reason.clone()))
            }
        };
        Event::ToolCompleted {
            round,
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            command,
            path,
            verdict,
            exit,
            ending,
            bytes,
            reason,
        }
    }
}

/// Opens `path` for appending without ever waiting: a FIFO nobody reads is refused at once
/// (open(2) would block, deaf to signals, until a reader came); one with a reader, a
/// terminal or a regular file is written as usual (blocking again once open).
fn open_append(path: &Path) -> anyhow::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // A file in a place commands write (the work root) may have been swapped for a symlink
    // by an earlier run's command: never appended through. `/dev/...` and `/proc/...`
    // (`/dev/stderr`, a descriptor) are the operator's own links.
    let nofollow = if path.starts_with("/dev") || path.starts_with("/proc") {
        0
    } else {
        libc::O_NOFOLLOW
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => anyhow::anyhow!("it is a FIFO with no reader"),
            Some(libc::ELOOP) => anyhow::anyhow!(
                "it is a symlink; harness never appends through one (name the real file)"
            ),
            _ => e.into(),
        })?;
    // SAFETY: fcntl on a descriptor we own, clearing the flag set at open.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags < 0
        || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(file)
}

/// Where the stream goes.
enum Out {
    /// `--events -`: stdout carries only events.
    Stdout,
    /// `--events PATH`, opened for appending.
    File(File),
}

/// How the run ended, as `lib::run` saw it: what [`Events::finish`] turns into
/// `run.completed` and the metrics.
#[derive(Debug, Clone)]
pub struct Ending {
    /// The process's exit code.
    pub exit_code: u8,
    /// The failed stage's label (`config`, `llm`, ...), for a failure.
    pub failed_stage: Option<String>,
    /// A signal stopped the run.
    pub interrupted: bool,
    /// The error text, already masked.
    pub error: Option<String>,
}

struct Inner {
    out: Option<Out>,
    run_id: String,
    redactor: Redactor,
    started: Instant,
    start_time: DateTime<Utc>,
    tally: Tally,
    /// The REPORT written and its stop reason, from `report.written`.
    report: Option<(String, String)>,
    plan_shown: bool,
    metrics: Option<(PathBuf, String)>,
    completed: bool,
    /// The human renderer: stderr's narration of the same events.
    narrator: human::Narrator,
    /// What the REPORT said, for `--output json`.
    delivered: Option<crate::output::Delivered>,
    pr_url: Option<String>,
}

/// The run's event sink and tally; cheap to clone (one shared stream per run).
#[derive(Clone)]
pub struct Events {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// Opens the stream (`None`: no stream, tally only) and writes `run.started`. `-` is
    /// stdout. A file is created if missing and appended to, so one file can hold many runs.
    pub fn open(path: Option<&Path>, command: &str) -> anyhow::Result<Events> {
        let out = match path {
            None => None,
            Some(p) if p.as_os_str() == "-" => Some(Out::Stdout),
            Some(p) => {
                Some(Out::File(open_append(p).with_context(|| {
                    format!("--events: cannot open {}", p.display())
                })?))
            }
        };
        Ok(Events::start(out, command))
    }

    /// A handle that writes nothing (tests, commands without a stream).
    pub fn off() -> Events {
        Events::start(None, "")
    }

    fn start(out: Option<Out>, command: &str) -> Events {
        let start_time = Utc::now();
        let events = Events {
            inner: Arc::new(Mutex::new(Inner {
                out,
                run_id: run_id(start_time),
                redactor: Redactor::default(),
                started: Instant::now(),
                start_time,
                tally: Tally::default(),
                report: None,
                plan_shown: false,
                metrics: None,
                completed: false,
                narrator: human::Narrator::default(),
                delivered: None,
                pr_url: None,
            })),
        };
        events.emit(Event::RunStarted {
            version: env!("CARGO_PKG_VERSION").to_string(),
            command: command.to_string(),
            pid: std::process::id(),
        });
        events
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's id (also the REPORT's `run_id`).
    pub fn run_id(&self) -> String {
        self.lock().run_id.clone()
    }

    /// When the run started.
    pub fn start_time(&self) -> DateTime<Utc> {
        self.lock().start_time
    }

    /// Masks every secret this redactor knows from now on (call it once the keys are
    /// resolved).
    pub fn mask_with(&self, redactor: &Redactor) {
        self.lock().redactor = redactor.clone();
    }

    /// Writes the metrics textfile at `path` when the run finishes, labelled `vertical`.
    pub fn metrics_to(&self, path: Option<&Path>, vertical: &str) {
        self.lock().metrics = path.map(|p| (p.to_path_buf(), vertical.to_string()));
    }

    /// Whether stdout carries the events (then results are not printed there).
    pub fn owns_stdout(&self) -> bool {
        matches!(self.lock().out, Some(Out::Stdout))
    }

    /// Writes one event (after `run.completed`, nothing more is written) and books it on
    /// the tally. A stream that cannot be written is reported once on stderr and closed:
    /// the run itself goes on.
    pub fn emit(&self, event: Event) {
        let mut inner = self.lock();
        if inner.completed {
            return;
        }
        // The human stream is rendered from the same event (stderr, masked by the logger).
        if let Some(text) = inner.narrator.render(&event) {
            tracing::info!("{text}");
        }
        inner.tally.book(&event);
        match &event {
            Event::ReportWritten {
                path, stop_reason, ..
            } => inner.report = Some((path.clone(), stop_reason.clone())),
            Event::Plan { .. } => inner.plan_shown = true,
            _ => {}
        }
        if matches!(event, Event::RunCompleted { .. }) {
            inner.completed = true;
        }
        if inner.out.is_none() {
            return;
        }
        let line = line(&event, &inner.run_id, Utc::now(), &inner.redactor);
        let written = match &mut inner.out {
            Some(Out::Stdout) => {
                crate::emit(&line).map_err(|f| std::io::Error::other(format!("{:#}", f.error)))
            }
            Some(Out::File(f)) => f.write_all(line.as_bytes()).and_then(|_| f.flush()),
            None => Ok(()),
        };
        if let Err(e) = written {
            tracing::error!("--events: cannot write the event stream, closing it: {e}");
            inner.out = None;
        }
    }

    /// Prints a result on stdout (the PLAN, the REPORT path) unless stdout carries the
    /// events, and writes `as_event` (the PLAN's `plan`) to the stream either way.
    pub fn result(&self, text: &str, as_event: Option<Event>) -> Result<(), Failure> {
        if let Some(e) = as_event {
            self.emit(e);
        }
        if self.owns_stdout() {
            Ok(())
        } else {
            crate::emit(text)
        }
    }

    /// Books what the written REPORT says, for [`summary`](Self::summary).
    pub fn delivered(&self, delivered: crate::output::Delivered) {
        self.lock().delivered = Some(delivered);
    }

    /// Books the pull request the forge step opened or updated: `run.completed` and the
    /// `--output json` object carry its URL.
    pub fn pull_request(&self, url: &str) {
        self.lock().pr_url = Some(url.to_string());
    }

    /// The `--output json` object of a run that ends as `ending` says, masked: the outcome
    /// is the one `run.completed` carries.
    pub fn summary(&self, ending: &Ending) -> String {
        let inner = self.lock();
        let outcome = stop_reason(ending, inner.report.as_ref(), inner.plan_shown);
        crate::output::Summary::new(
            &inner.run_id,
            &outcome,
            ending.exit_code,
            crate::output::Delivered::error_or(inner.delivered.as_ref(), ending.error.as_deref()),
            inner.delivered.as_ref(),
            inner.pr_url.as_deref(),
        )
        .render(&inner.redactor)
    }

    /// Ends the run: writes the metrics textfile (when configured) and then `run.completed`,
    /// the last line. Only the first call does anything.
    pub fn finish(&self, ending: &Ending) {
        let (event, metrics, tally, now) = {
            let inner = self.lock();
            if inner.completed {
                return;
            }
            let report = inner.report.clone();
            let stop_reason = stop_reason(ending, report.as_ref(), inner.plan_shown);
            let duration = inner.started.elapsed();
            let event = Event::RunCompleted {
                exit_code: ending.exit_code,
                stop_reason,
                report: report.map(|(path, _)| path),
                error: crate::output::Delivered::error_or(
                    inner.delivered.as_ref(),
                    ending.error.as_deref(),
                )
                .map(str::to_string),
                pr_url: inner.pr_url.clone(),
                duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            };
            let mut tally = inner.tally.clone();
            tally.inbox_skipped = crate::intake::inbox::skipped();
            (event, inner.metrics.clone(), tally, Utc::now())
        };
        if let (Some((path, vertical)), Event::RunCompleted { stop_reason, .. }) = (metrics, &event)
        {
            let run = metrics::Run {
                vertical: &vertical,
                outcome: stop_reason,
                exit_code: ending.exit_code,
                finished: now,
                duration_secs: self.lock().started.elapsed().as_secs_f64(),
                tally: &tally,
            };
            if let Err(e) = metrics::update(&path, &run) {
                tracing::error!("[metrics] textfile: {e:#}");
            }
        }
        self.emit(event);
    }
}

/// `run.completed`'s `stop_reason`: the turn's, or why no turn ran.
fn stop_reason(ending: &Ending, report: Option<&(String, String)>, plan_shown: bool) -> String {
    if let Some(stage) = &ending.failed_stage {
        return format!("{stage}_error");
    }
    if let Some((_, reason)) = report {
        return reason.clone();
    }
    if ending.interrupted {
        "interrupted".to_string()
    } else if plan_shown {
        "dry_run".to_string()
    } else {
        "no_task".to_string()
    }
}

/// One JSONL line: the event's fields, `ts` and `run_id`, every string masked.
pub fn line(event: &Event, run_id: &str, ts: DateTime<Utc>, redactor: &Redactor) -> String {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    redactor.redact_json(&mut value);
    if let Value::Object(map) = &mut value {
        map.insert(
            "ts".into(),
            Value::String(ts.to_rfc3339_opts(SecondsFormat::Millis, true)),
        );
        map.insert("run_id".into(), Value::String(run_id.to_string()));
    }
    let mut text = value.to_string();
    text.push('\n');
    text
}

/// A run id unique across hosts and processes: time, pid and random bits.
pub fn run_id(started: DateTime<Utc>) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_i64(started.timestamp_nanos_opt().unwrap_or_default());
    format!(
        "{}-{}-{:08x}",
        started.format("%Y%m%dT%H%M%SZ"),
        std::process::id(),
        h.finish() as u32
    )
}

/// The `--events` value in a command line that clap refused (so that a usage error still
/// ends the stream it asked for): `--events X`, `--events=X`, `-events X`, up to `--`.
pub fn events_flag(args: &[String]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return None;
        }
        let Some(name) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        if name == "events" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = name.strip_prefix("events=") {
            return Some(PathBuf::from(v));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::Secret;
    use pretty_assertions::assert_eq;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_line_is_the_event_plus_its_envelope_masked() {
        let mut r = Redactor::default();
        r.add(&Secret::new("sk-se\"cret"));
        let e = Event::ToolStarted {
            round: 2,
            call_id: "c1".into(),
            tool: "bash".into(),
            command: Some("echo sk-se\"cret".into()),
        };
        let text = line(&e, "run-1", at("2026-12-01T10:00:00.5Z"), &r);
        assert!(text.ends_with('\n') && !text.trim_end().contains('\n'));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "tool.started", "ts": "2026-12-01T10:00:00.500Z",
                "run_id": "run-1", "round": 2, "call_id": "c1", "tool": "bash",
                "command": "echo [redacted]"})
        );
    }

    #[test]
    fn tool_completed_reads_the_exit_status() {
        let ran = ToolEvent::Ran {
            command: "ls".into(),
            ending: crate::tools::bash::Ending::Exited(2),
            output_bytes: 7,
        };
        assert_eq!(
            Event::tool_completed(1, "c", "bash", &ran),
            Event::ToolCompleted {
                round: 1,
                call_id: "c".into(),
                tool: "bash".into(),
                command: Some("ls".into()),
                path: None,
                verdict: Verdict::Allowed,
                exit: Some(2),
                ending: Some("exit 2".into()),
                bytes: 7,
                reason: None
            }
        );
        let denied = ToolEvent::Denied {
            command: "rm x".into(),
            reason: "no".into(),
        };
        let Event::ToolCompleted { verdict, exit, .. } =
            Event::tool_completed(1, "c", "bash", &denied)
        else {
            panic!()
        };
        assert_eq!((verdict, exit), (Verdict::Denied, None));
    }

    #[test]
    fn stop_reason_names_why_no_turn_ran() {
        let end = |stage: Option<&str>, interrupted| Ending {
            exit_code: 0,
            failed_stage: stage.map(String::from),
            interrupted,
            error: None,
        };
        let report = ("r.md".to_string(), "max_rounds".to_string());
        assert_eq!(stop_reason(&end(None, false), None, false), "no_task");
        assert_eq!(stop_reason(&end(None, false), None, true), "dry_run");
        assert_eq!(stop_reason(&end(None, true), None, false), "interrupted");
        assert_eq!(
            stop_reason(&end(None, true), Some(&report), false),
            "max_rounds"
        );
        assert_eq!(
            stop_reason(&end(Some("writeback"), false), Some(&report), false),
            "writeback_error"
        );
    }

    #[test]
    fn the_events_flag_is_found_in_a_refused_command_line() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            events_flag(&args("harness once --bogus --events ev.jsonl")),
            Some(PathBuf::from("ev.jsonl"))
        );
        assert_eq!(
            events_flag(&args("harness once --events=-")),
            Some(PathBuf::from("-"))
        );
        assert_eq!(
            events_flag(&args("harness once -events e")),
            Some(PathBuf::from("e"))
        );
        assert_eq!(events_flag(&args("harness gate -- --events x")), None);
        assert_eq!(events_flag(&args("harness once --demo")), None);
    }

    #[test]
    fn nothing_follows_run_completed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.jsonl");
        let ev = Events::open(Some(&path), "once").unwrap();
        let end = Ending {
            exit_code: 1,
            failed_stage: Some("config".into()),
            interrupted: false,
            error: Some("bad".into()),
        };
        ev.finish(&end);
        ev.finish(&end);
        ev.emit(Event::Plan { text: "x".into() });
        let text = std::fs::read_to_string(&path).unwrap();
        let types: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].to_string())
            .collect();
        assert_eq!(types, vec!["\"run.started\"", "\"run.completed\""]);
    }
}
