//! Events, the metrics adapter (a file): `[metrics] textfile`, the node_exporter textfile that each run
//! rewrites at its end. PURE [`render`] takes the previous file's text and this run and
//! returns the new text, counters carried over; [`update`] reads, renders and writes it
//! atomically (not fsynced) under a `flock` on `<textfile>.lock`, so two workers finishing at once never
//! lose an increment. The [`Tally`] is booked by the event sink as the run goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{Event, Verdict};
use crate::atomic;

/// What one run spent, booked from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Model rounds answered.
    pub rounds: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// USD, summed over the rounds whose cost is known.
    pub cost_usd: f64,
    /// Tool calls by verdict: allowed, denied, invalid.
    pub tool_calls: [u64; 3],
    /// Inbox entries that could never be a task, moved to `failed/` by this run.
    pub inbox_skipped: u64,
    /// Workflow stage attempts: (workflow, stage, outcome) -> count.
    pub stages: BTreeMap<(String, String, String), u64>,
}

impl Tally {
    /// Books one event.
    pub fn book(&mut self, event: &Event) {
        match event {
            Event::RoundCompleted {
                usage, cost_usd, ..
            } => {
                self.rounds += 1;
                self.prompt_tokens = self.prompt_tokens.saturating_add(usage.prompt_tokens);
                self.completion_tokens = self
                    .completion_tokens
                    .saturating_add(usage.completion_tokens);
                self.cost_usd += cost_usd.unwrap_or(0.0);
            }
            Event::ToolCompleted { verdict, .. } => self.tool_calls[verdict_index(*verdict)] += 1,
            Event::StageCompleted {
                workflow,
                stage,
                outcome,
                ..
            } => {
                *self
                    .stages
                    .entry((workflow.clone(), stage.clone(), outcome.clone()))
                    .or_insert(0) += 1;
            }
            _ => {}
        }
    }
}

fn verdict_index(v: Verdict) -> usize {
    match v {
        Verdict::Allowed => 0,
        Verdict::Denied => 1,
        Verdict::Invalid => 2,
    }
}

const VERDICTS: [&str; 3] = ["allowed", "denied", "invalid"];

/// One finished run, as the textfile sees it.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// `vertical`: a label on every sample, so textfiles of several configs can sit in one
    /// collector directory.
    pub vertical: &'a str,
    /// The `outcome` label: `run.completed`'s stop reason.
    pub outcome: &'a str,
    /// The exit code; 0 counts as a success.
    pub exit_code: u8,
    /// When the run finished.
    pub finished: DateTime<Utc>,
    /// Its wall time.
    pub duration_secs: f64,
    /// What it spent.
    pub tally: &'a Tally,
}

/// A metric family: name, type, help.
struct Family {
    name: &'static str,
    counter: bool,
    help: &'static str,
}

const FAMILIES: &[Family] = &[
    Family {
        name: "harness_runs_total",
        counter: true,
        help: "Runs of harness once, by outcome (the run.completed stop_reason).",
    },
    Family {
        name: "harness_rounds_total",
        counter: true,
        help: "Model rounds answered.",
    },
    Family {
        name: "harness_tokens_total",
        counter: true,
        help: "Tokens used, by kind (prompt, completion).",
    },
    Family {
        name: "harness_cost_usd_total",
        counter: true,
        help: "USD spent on model calls whose cost is known.",
    },
    Family {
        name: "harness_tool_calls_total",
        counter: true,
        help: "Tool calls, by verdict (allowed, denied, invalid).",
    },
    Family {
        name: "harness_inbox_skipped_total",
        counter: true,
        help: "Inbox entries that could never be a task (a symlink, FIFO, directory or non-UTF-8 name), moved to failed/.",
    },
    Family {
        name: "harness_stage_attempts_total",
        counter: true,
        help: "Workflow stage attempts, by workflow, stage and outcome (passed, failed, needs_input, stopped).",
    },
    Family {
        name: "harness_last_run_timestamp_seconds",
        counter: false,
        help: "When the last run finished (Unix time).",
    },
    Family {
        name: "harness_last_success_timestamp_seconds",
        counter: false,
        help: "When the last run that exited 0 finished (Unix time; 0: never).",
    },
    Family {
        name: "harness_last_exit_code",
        counter: false,
        help: "The exit code of the last run.",
    },
    Family {
        name: "harness_last_run_duration_seconds",
        counter: false,
        help: "Wall time of the last run.",
    },
];

/// The new textfile: the previous file's counters (and last success time) plus this run.
/// Samples of families harness does not write are dropped; unreadable lines are ignored.
pub fn render(previous: &str, run: &Run) -> String {
    let mut samples = carried_over(previous);
    let v = format!("vertical=\"{}\"", escape(run.vertical));
    count(&mut samples, &v, run);
    gauge(&mut samples, &v, run);
    text(&samples)
}

/// Family name -> labels -> value.
type Samples = BTreeMap<&'static str, BTreeMap<String, f64>>;

/// The samples of `previous` that carry over: the counters, and the last success time.
fn carried_over(previous: &str) -> Samples {
    let mut samples = Samples::new();
    for (name, labels, value) in previous.lines().filter_map(sample) {
        let Some(f) = FAMILIES.iter().find(|f| f.name == name) else {
            continue;
        };
        if f.counter || f.name == "harness_last_success_timestamp_seconds" {
            samples
                .entry(f.name)
                .or_default()
                .insert(labels.to_string(), value);
        }
    }
    samples
}

/// Adds this run's counts to the counters of the vertical `v` (its label).
fn count(samples: &mut Samples, v: &str, run: &Run) {
    let mut add = |name: &'static str, labels: String, by: f64| {
        *samples
            .entry(name)
            .or_default()
            .entry(labels)
            .or_insert(0.0) += by;
    };
    let t = run.tally;
    add(
        "harness_runs_total",
        format!("{v},outcome=\"{}\"", escape(run.outcome)),
        1.0,
    );
    add("harness_rounds_total", v.to_string(), t.rounds as f64);
    add(
        "harness_tokens_total",
        format!("{v},kind=\"prompt\""),
        t.prompt_tokens as f64,
    );
    add(
        "harness_tokens_total",
        format!("{v},kind=\"completion\""),
        t.completion_tokens as f64,
    );
    add("harness_cost_usd_total", v.to_string(), t.cost_usd);
    for (i, verdict) in VERDICTS.iter().enumerate() {
        add(
            "harness_tool_calls_total",
            format!("{v},verdict=\"{verdict}\""),
            t.tool_calls[i] as f64,
        );
    }
    add(
        "harness_inbox_skipped_total",
        v.to_string(),
        t.inbox_skipped as f64,
    );
    for ((workflow, stage, outcome), n) in &t.stages {
        add(
            "harness_stage_attempts_total",
            format!(
                "{v},workflow=\"{}\",stage=\"{}\",outcome=\"{}\"",
                escape(workflow),
                escape(stage),
                escape(outcome)
            ),
            *n as f64,
        );
    }
}

/// Sets the gauges of the vertical `v` to this run's; the last success time stays unless it
/// succeeded (0 until one has).
fn gauge(samples: &mut Samples, v: &str, run: &Run) {
    let now = run.finished.timestamp_millis() as f64 / 1000.0;
    let mut set = |name: &'static str, value: f64| {
        samples
            .entry(name)
            .or_default()
            .insert(v.to_string(), value);
    };
    set("harness_last_run_timestamp_seconds", now);
    set("harness_last_exit_code", f64::from(run.exit_code));
    set("harness_last_run_duration_seconds", run.duration_secs);
    let success = samples
        .entry("harness_last_success_timestamp_seconds")
        .or_default();
    if run.exit_code == 0 {
        success.insert(v.to_string(), now);
    } else {
        success.entry(v.to_string()).or_insert(0.0);
    }
}

/// The textfile of `samples`, family by family in [`FAMILIES`] order, each with its HELP
/// and TYPE lines.
fn text(samples: &Samples) -> String {
    let mut out = String::new();
    for f in FAMILIES {
        let Some(rows) = samples.get(f.name) else {
            continue;
        };
        let kind = if f.counter { "counter" } else { "gauge" };
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} {kind}",
            f.name, f.help, f.name
        );
        for (labels, value) in rows {
            let _ = writeln!(out, "{}{{{labels}}} {value}", f.name);
        }
    }
    out
}

/// `name{labels} value` -> (name, labels, value); `None` for comments and unreadable lines.
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.strip_suffix('}')?),
        None => (head, ""),
    };
    value.is_finite().then_some((name, labels, value))
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Largest textfile read back: harness's own is a few KiB.
const TEXTFILE_MAX: u64 = 4 * 1024 * 1024;

/// Reads the textfile at `path`, adds this run and writes it back atomically, holding a
/// `flock` on `<path>.lock` meanwhile.
pub fn update(path: &Path, run: &Run) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let lock_path = {
        let mut p = path.as_os_str().to_owned();
        p.push(".lock");
        std::path::PathBuf::from(p)
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // O_NONBLOCK: a FIFO put at the lock's name fails the open instead of blocking it.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    // SAFETY: flock on a descriptor we own; the lock goes when the file closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot lock {}", lock_path.display()));
    }
    // Bounded and regular only: a huge file or a FIFO at the textfile's name is an error,
    // never a hang or a memory blow-up; only a missing file starts the counters anew.
    let previous = match crate::bounded::read_text(path, TEXTFILE_MAX) {
        Ok(text) => text,
        Err(_) if std::fs::symlink_metadata(path).is_err() => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    // Atomic but not fsynced: the fsyncs cost over ten times the rest of the update, and a
    // crash that loses the last update shows as a counter reset, which Prometheus handles.
    // 0644: node_exporter reads it as its own user, and it holds no secret (counts, times,
    // the config's vertical).
    atomic::replace(path, render(&previous, run).as_bytes(), /*mode*/ 0o644)?;
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn run<'a>(outcome: &'a str, exit_code: u8, tally: &'a Tally, t: &str) -> Run<'a> {
        Run {
            vertical: "demo",
            outcome,
            exit_code,
            finished: at(t),
            duration_secs: 1.5,
            tally,
        }
    }

    #[test]
    fn a_first_run_writes_every_family() {
        let tally = Tally {
            rounds: 2,
            prompt_tokens: 30,
            completion_tokens: 12,
            cost_usd: 0.25,
            tool_calls: [1, 1, 0],
            inbox_skipped: 1,
            stages: Default::default(),
        };
        let text = render("", &run("completed", 0, &tally, "2026-12-01T10:00:00Z"));
        assert_eq!(
            text,
            r#"# HELP harness_runs_total Runs of harness once, by outcome (the run.completed stop_reason).
# TYPE harness_runs_total counter
harness_runs_total{vertical="demo",outcome="completed"} 1
# HELP harness_rounds_total Model rounds answered.
# TYPE harness_rounds_total counter
harness_rounds_total{vertical="demo"} 2
# HELP harness_tokens_total Tokens used, by kind (prompt, completion).
# TYPE harness_tokens_total counter
harness_tokens_total{vertical="demo",kind="completion"} 12
harness_tokens_total{vertical="demo",kind="prompt"} 30
# HELP harness_cost_usd_total USD spent on model calls whose cost is known.
# TYPE harness_cost_usd_total counter
harness_cost_usd_total{vertical="demo"} 0.25
# HELP harness_tool_calls_total Tool calls, by verdict (allowed, denied, invalid).
# TYPE harness_tool_calls_total counter
harness_tool_calls_total{vertical="demo",verdict="allowed"} 1
harness_tool_calls_total{vertical="demo",verdict="denied"} 1
harness_tool_calls_total{vertical="demo",verdict="invalid"} 0
# HELP harness_inbox_skipped_total Inbox entries that could never be a task (a symlink, FIFO, directory or non-UTF-8 name), moved to failed/.
# TYPE harness_inbox_skipped_total counter
harness_inbox_skipped_total{vertical="demo"} 1
# HELP harness_last_run_timestamp_seconds When the last run finished (Unix time).
# TYPE harness_last_run_timestamp_seconds gauge
harness_last_run_timestamp_seconds{vertical="demo"} 1796119200
# HELP harness_last_success_timestamp_seconds When the last run that exited 0 finished (Unix time; 0: never).
# TYPE harness_last_success_timestamp_seconds gauge
harness_last_success_timestamp_seconds{vertical="demo"} 1796119200
# HELP harness_last_exit_code The exit code of the last run.
# TYPE harness_last_exit_code gauge
harness_last_exit_code{vertical="demo"} 0
# HELP harness_last_run_duration_seconds Wall time of the last run.
# TYPE harness_last_run_duration_seconds gauge
harness_last_run_duration_seconds{vertical="demo"} 1.5
"#
        );
    }

    #[test]
    fn counters_and_the_last_success_carry_over() {
        let tally = Tally {
            rounds: 1,
            prompt_tokens: 5,
            ..Tally::default()
        };
        let first = render("", &run("completed", 0, &tally, "2026-12-01T10:00:00Z"));
        let second = render(&first, &run("llm_error", 4, &tally, "2026-12-01T11:00:00Z"));
        let get = |text: &str, key: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
                .unwrap_or_else(|| panic!("no {key} in\n{text}"))
                .parse()
                .unwrap()
        };
        let v = "{vertical=\"demo\"}";
        assert_eq!(
            get(
                &second,
                "harness_runs_total{vertical=\"demo\",outcome=\"completed\"}"
            ),
            1.0
        );
        assert_eq!(
            get(
                &second,
                "harness_runs_total{vertical=\"demo\",outcome=\"llm_error\"}"
            ),
            1.0
        );
        assert_eq!(get(&second, &format!("harness_rounds_total{v}")), 2.0);
        assert_eq!(
            get(
                &second,
                "harness_tokens_total{vertical=\"demo\",kind=\"prompt\"}"
            ),
            10.0
        );
        assert_eq!(get(&second, &format!("harness_last_exit_code{v}")), 4.0);
        assert_eq!(
            get(
                &second,
                &format!("harness_last_success_timestamp_seconds{v}")
            ),
            1796119200.0
        );
        assert_eq!(
            get(&second, &format!("harness_last_run_timestamp_seconds{v}")),
            1796122800.0
        );
        // A run that never succeeded says 0, which the "no success in 1 h" alert catches.
        let failed = render("", &run("config_error", 1, &tally, "2026-12-01T10:00:00Z"));
        assert_eq!(
            get(
                &failed,
                &format!("harness_last_success_timestamp_seconds{v}")
            ),
            0.0
        );
    }

    #[test]
    fn a_textfile_that_is_a_fifo_or_huge_fails_at_once_and_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let tally = Tally::default();
        let r = run("completed", 0, &tally, "2026-12-01T10:00:00Z");
        let fifo = d.path().join("h.prom");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = format!("{:#}", update(&fifo, &r).unwrap_err());
        assert!(e.contains("is a FIFO"), "{e}");
        let big = d.path().join("big.prom");
        std::fs::write(&big, vec![b'#'; TEXTFILE_MAX as usize + 1]).unwrap();
        let e = format!("{:#}", update(&big, &r).unwrap_err());
        assert!(e.contains("larger than 4 MiB"), "{e}");
        // A missing one starts the counters.
        update(&d.path().join("new.prom"), &r).unwrap();
    }

    #[test]
    fn unreadable_and_foreign_lines_are_dropped() {
        let prev = "garbage\nother_metric 3\nharness_rounds_total{vertical=\"demo\"} NaN\nharness_rounds_total{vertical=\"demo\"} 4\n";
        let text = render(
            prev,
            &run("no_task", 0, &Tally::default(), "2026-12-01T10:00:00Z"),
        );
        assert!(
            text.contains("harness_rounds_total{vertical=\"demo\"} 4\n"),
            "{text}"
        );
        assert!(!text.contains("other_metric") && !text.contains("garbage"));
    }
}
