//! Workflows (issue 24): what routing and the workflow's state add to a run, against the
//! under-1-ms figure the issue names: the config load of a three-stage workflow (three skill
//! files read and parsed) over the same config without it, routing a task among 10 workflows
//! by intent words, and finding where a task stands from a session of 50 run records plus the
//! step after its stage. Figures only, no assertions.
//!
//! `cargo bench --bench workflow`; prints `name<TAB>value<TAB>note` lines. Under `cargo test`
//! (no `--bench` argument) it runs a few iterations only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use harness::workflow::state::{self, Mark, Outcome};

const BASE: &str = "vertical = \"b\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\nu = \"n\"\ndefault_tier = \"t\"\n[models.classes]\nfix = \"workflow:w0\"\n";

/// `n` workflows of three stages over the skills in `dir`.
fn workflows(n: usize) -> String {
    let mut out = String::from("[workflows]\nper_run = \"all\"\n");
    for i in 0..n {
        out.push_str(&format!(
            "[workflows.w{i}]\nintent = \"word{i} topic{i} fix bug{i} crash{i}\"\nstages = [\"plan\", \"implement\", \"review\"]\n[workflows.w{i}.stage.plan]\nskill = \"plan.md\"\n[workflows.w{i}.stage.implement]\nskill = \"implement.md\"\ntier = \"u\"\nretries = 2\n[workflows.w{i}.stage.review]\nskill = \"review.md\"\non_fail = \"implement\"\n"
        ));
    }
    out
}

fn load(text: &str, path: &Path) -> harness::config::Config {
    harness::config::parse_reading(text, path, &|p| Ok(std::fs::read_to_string(p)?)).unwrap()
}

/// The median of `rounds` batches of `per` calls of `f`.
fn median(rounds: usize, per: u32, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per {
                f();
            }
            t.elapsed() / per
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let (rounds, per) = if measuring { (21, 200) } else { (3, 2) };
    let dir = tempfile::tempdir().unwrap();
    let skill = "---\ntitle: A stage\nsuccess_check: the work is done\n---\n".to_string()
        + &"Do the stage's work carefully, step by step.\n".repeat(40);
    for f in ["plan.md", "implement.md", "review.md"] {
        std::fs::write(dir.path().join(f), &skill).unwrap();
    }
    let path = dir.path().join("harness.toml");
    let plain = BASE.replace("fix = \"workflow:w0\"\n", "");
    let one = format!("{BASE}{}", workflows(1));
    let ten = format!("{BASE}{}", workflows(10));
    let t_plain = median(rounds, per, || drop(black_box(load(&plain, &path))));
    let t_one = median(rounds, per, || drop(black_box(load(&one, &path))));
    let t_ten = median(rounds, per / 10 + 1, || drop(black_box(load(&ten, &path))));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("config load, no workflow\t{:.1} µs\t", us(t_plain));
    println!(
        "config load, 1 workflow of 3 stages\t{:.1} µs\t+{:.1} µs over none (3 skills of {} bytes read and parsed)",
        us(t_one),
        us(t_one.saturating_sub(t_plain)),
        skill.len()
    );
    println!(
        "config load, 10 workflows of 3 stages\t{:.1} µs\t+{:.1} µs over none",
        us(t_ten),
        us(t_ten.saturating_sub(t_plain))
    );

    let cfg = load(&ten, &path);
    let flows = cfg.workflows.as_ref().unwrap();
    let text = format!(
        "Crash in the parser: fix bug3 crash3\n{}",
        "some words of a long description ".repeat(60)
    );
    let t_route = median(rounds, per, || {
        black_box(
            harness::routing::route_task(&cfg.models, Some(flows), None, black_box(&text)).unwrap(),
        );
    });
    println!(
        "route by intent among 10 workflows\t{:.1} µs\ta task of {} bytes",
        us(t_route),
        text.len()
    );
    let flow = &flows.named["w0"];
    let marks: Vec<Mark> = (0..50)
        .map(|i| Mark {
            workflow: if i % 2 == 0 { "w0".into() } else { "w1".into() },
            stage: "plan".into(),
            index: i % 3,
            outcome: Outcome::Passed,
            loops: 1,
            next: Some((i + 1) % 3),
            carried: Some("the summary of the stage, carried on. ".repeat(100)),
        })
        .collect();
    let t_state = median(rounds, per, || {
        let last = marks.iter().rev().find(|m| m.workflow == "w0");
        let at = state::position(flow, black_box(last));
        black_box(state::step(flow, at.index, Outcome::Failed, at.loops, 2));
        black_box(state::carried(at.carried.as_deref().unwrap_or_default()));
    });
    println!(
        "where the task stands (50 run records) and the next step\t{:.2} µs\t",
        us(t_state)
    );
}
