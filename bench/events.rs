//! Event stream and metrics cost: the harness CPU (user + sys, `getrusage`) that `--events`
//! and `[metrics] textfile` add, per round and per run, against the budget of issue 13
//! (both together at most 0.1 ms per round). In process, so nothing else is counted: a round
//! is its four events (round.started, round.completed, tool.started, tool.completed) written
//! to a file and flushed, with a key registered for masking; a run adds run.started,
//! task.taken, route, report.written, run.completed and one textfile update (read, render,
//! atomic write with fsync, under its flock).
//!
//! `cargo bench --bench events`; exits 1 when a round is over budget. Under `cargo test`
//! (no `--bench` argument, a debug build) it only runs a few iterations and judges nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Duration;

use harness::events::metrics::{self, Tally};
use harness::events::{Ending, Event, Events};
use harness::llm::wire::Usage;
use harness::secrets::{Redactor, Secret};
use harness::tools::ToolEvent;

/// User + system CPU of this process so far.
fn cpu() -> Duration {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF is always valid.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
    t(u.ru_utime) + t(u.ru_stime)
}

fn round(events: &Events, n: u32) {
    events.emit(Event::RoundStarted {
        round: n,
        max_rounds: 50,
        model: "glm-5.3".into(),
    });
    events.emit(Event::RoundCompleted {
        round: n,
        max_rounds: 50,
        model: "glm-5.3".into(),
        usage: Usage {
            prompt_tokens: 1200,
            completion_tokens: 80,
            total_tokens: 1280,
        },
        cost_usd: Some(0.0012),
        latency_ms: 850,
        retries: 0,
        tool_calls: 1,
    });
    events.emit(Event::ToolStarted {
        round: n,
        call_id: format!("call_{n}"),
        tool: "bash".into(),
        command: Some("grep -rn 'fn main' src | head -n 20".into()),
    });
    let ran = ToolEvent::Ran {
        command: "grep -rn 'fn main' src | head -n 20".into(),
        ending: harness::tools::bash::Ending::Exited(0),
        output_bytes: 734,
    };
    events.emit(Event::tool_completed(n, &format!("call_{n}"), "bash", &ran));
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut redactor = Redactor::default();
    redactor.add(&Secret::new("sk-bench-0123456789abcdef"));

    let measuring = std::env::args().any(|a| a == "--bench");
    let scale = if measuring { 1 } else { 100 };

    // Per round: many rounds into one stream.
    let events = Events::open(Some(&dir.path().join("rounds.jsonl")), "once").unwrap();
    events.mask_with(&redactor);
    let rounds = 20_000u32 / scale;
    for n in 1..=200 {
        round(&events, n);
    }
    let t0 = cpu();
    for n in 1..=rounds {
        round(&events, n);
    }
    let per_round = (cpu() - t0) / rounds;

    // Per run: the run's own events and the textfile update, many runs into one textfile.
    let textfile = dir.path().join("harness.prom");
    let runs = 500u32 / scale;
    let t0 = cpu();
    for i in 0..runs {
        let events = Events::open(Some(&dir.path().join("runs.jsonl")), "once").unwrap();
        events.mask_with(&redactor);
        events.metrics_to(Some(&textfile), "bench");
        events.emit(Event::TaskTaken {
            task_id: format!("task-{i}"),
            source: "inbox".into(),
            subject: "bench".into(),
            class: Some("code".into()),
        });
        events.emit(Event::Route {
            class: Some("code".into()),
            tier: "mopac-code".into(),
            models: vec!["glm-5.2".into()],
            workflow: None,
        });
        events.emit(Event::ReportWritten {
            path: "reports/REPORT-bench.md".into(),
            stop_reason: "completed".into(),
            rounds: 1,
            total_tokens: 1280,
            cost_usd: Some(0.0012),
        });
        events.finish(&Ending {
            exit_code: 0,
            failed_stage: None,
            interrupted: false,
            error: None,
        });
    }
    let per_run = (cpu() - t0) / runs;
    // The textfile alone (the same work without the stream), to show the split.
    let textfile_only = textfile_cpu(&textfile, runs);
    // The same on tmpfs, where fsync costs nothing: what is left is the harness's own work.
    let shm = tempfile::tempdir_in("/dev/shm").ok();
    let textfile_tmpfs = shm
        .as_ref()
        .map(|d| textfile_cpu(&d.path().join("harness.prom"), runs));
    let render_only = {
        let previous = std::fs::read_to_string(&textfile).unwrap();
        let t0 = cpu();
        for _ in 0..runs * 10 {
            std::hint::black_box(metrics::render(&previous, &run_of(&Tally::default())));
        }
        (cpu() - t0) / (runs * 10)
    };

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let budget_us = 100.0;
    println!(
        "events per round (4 events, masked, flushed)\t{:.1} us",
        us(per_round)
    );
    println!(
        "per run: 5 events + metrics textfile update\t{:.1} us",
        us(per_run)
    );
    println!(
        "  of which the textfile update\t{:.1} us",
        us(textfile_only)
    );
    if let Some(t) = textfile_tmpfs {
        println!(
            "  the textfile update on tmpfs (no fsync cost)\t{:.1} us",
            us(t)
        );
    }
    println!(
        "  of which rendering the textfile\t{:.1} us",
        us(render_only)
    );
    for n in [1u32, 10, 50] {
        let per = us(per_round) + us(per_run) / f64::from(n);
        println!("events + metrics, whole run / rounds, {n}-round run\t{per:.1} us");
    }
    // The budget is per round: what each further round adds. The per-run part is fixed
    // (printed above) and does not grow with the rounds.
    println!(
        "PER ROUND (the budget): {:.1} us of {budget_us} us",
        us(per_round)
    );
    if measuring && us(per_round) > budget_us {
        println!("OVER BUDGET");
        std::process::exit(1);
    }
}

fn run_of(tally: &Tally) -> metrics::Run<'_> {
    metrics::Run {
        vertical: "bench",
        outcome: "completed",
        exit_code: 0,
        finished: chrono::Utc::now(),
        duration_secs: 1.0,
        tally,
    }
}

/// CPU per textfile update at `path`, over `runs` updates.
fn textfile_cpu(path: &std::path::Path, runs: u32) -> Duration {
    let tally = Tally::default();
    let t0 = cpu();
    for _ in 0..runs {
        metrics::update(path, &run_of(&tally)).unwrap();
    }
    (cpu() - t0) / runs
}
