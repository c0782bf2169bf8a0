//! The rules part of the system prompt (issue 19): how long building it takes, once per run,
//! for the policy of `harness.toml.example` and for a policy of 5,000 allow and 5,000 deny
//! rules (summarised and cut to the 4 KiB cap; once more with `rm *` among them, where the
//! rules ask the gate for one verdict), against the whole-turn figures of
//! `bench/run.sh` (milliseconds). Figures only, no assertions.
//!
//! `cargo bench --bench prompt`; prints `name<TAB>value<TAB>note` lines. Under `cargo test`
//! (no `--bench` argument) it runs a few iterations only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use harness::config::BashConfig;
use harness::turn::rules::{section, Tools, World, RULES_MAX_BYTES};

fn example() -> BashConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("harness.toml.example");
    let text = std::fs::read_to_string(&path).unwrap();
    harness::config::parse(&text, &path).unwrap().bash
}

/// 5,000 allow and 5,000 deny rules; with `rm`, one of the allow rules is `rm *`, so the
/// rules ask the gate whether `rm` runs.
fn huge(rm: bool) -> BashConfig {
    let mut allow: Vec<String> = (0..5000)
        .map(|i| format!("\"tool{} sub{i} *\"", i % 700))
        .collect();
    if rm {
        allow[4999] = "\"rm *\"".to_string();
    }
    let deny: Vec<String> = (0..5000).map(|i| format!("\"tool{i} push *\"")).collect();
    let text = format!(
        "vertical = \"b\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\ndefault_tier = \"t\"\n[tools.bash]\nallow = [{}]\ndeny = [{}]\n",
        allow.join(", "),
        deny.join(", ")
    );
    harness::config::parse(&text, Path::new("/nonexistent/harness.toml"))
        .unwrap()
        .bash
}

/// The median time of one `section` call over `rounds` batches of `per` calls each.
fn median(bash: &BashConfig, rounds: usize, per: u32) -> (Duration, usize) {
    let world = World::here(NaiveDate::from_ymd_opt(2026, 12, 2).unwrap());
    let tools = Tools { bash, files: true };
    let bytes = section(Some(tools), world).len();
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per {
                black_box(section(black_box(Some(tools)), world));
            }
            t.elapsed() / per
        })
        .collect();
    times.sort();
    (times[times.len() / 2], bytes)
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let (rounds, per) = if measuring { (21, 200) } else { (3, 2) };
    for (name, bash, per) in [
        ("rules, harness.toml.example policy", example(), per),
        (
            "rules, 5000 allow + 5000 deny rules",
            huge(false),
            per / 20 + 1,
        ),
        (
            "rules, the same with `rm *` allowed (one gate verdict)",
            huge(true),
            per / 20 + 1,
        ),
    ] {
        let (t, bytes) = median(&bash, rounds, per);
        println!(
            "{name}\t{:.1} µs\t{bytes} bytes (cap {RULES_MAX_BYTES}), median of {rounds} x {per}",
            t.as_secs_f64() * 1e6
        );
    }
}
