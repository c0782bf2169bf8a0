//! Gate throughput: verdicts per second on a realistic mix of commands and on one long
//! compound command, under the policy of `harness.toml.example`; and the worst single verdict
//! over adversarial inputs up to the gate's 128 KiB cap (bench/gate_adversarial.rs), which
//! must stay under 50 ms in a release build. Figures only, no assertions.
//!
//! `cargo bench --bench gate` (plain `std::time`, no criterion: one number per case is all
//! `bench/RESULTS.md` records, and it keeps the dev-dependency tree small).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use harness::tools::gate::{judge, Policy, Rule, Verdict};

include!("gate_adversarial.rs");

/// What a model typically asks for: reads, searches, git, a few compounds, and the
/// constructs the gate must refuse.
const MIX: &[&str] = &[
    "ls -la",
    "ls",
    "pwd",
    "cat src/main.rs",
    "head -n 50 README.md",
    "tail -n 20 Cargo.toml",
    "wc -l src/*.rs",
    "grep -rn 'fn main' src",
    "rg --type rust 'TODO|FIXME' .",
    "git status",
    "git diff --stat HEAD~1",
    "git log --oneline -n 20",
    "git show HEAD:src/lib.rs",
    "echo \"hello world\"",
    "date",
    "uname -a",
    "ls src && wc -l src/*.rs",
    "git status; git diff",
    "cat Cargo.toml | grep -n version",
    "grep -c fn src/lib.rs || echo none",
    "rm -rf target",
    "curl https://example.com",
    "sudo ls",
    "echo $(cat /etc/passwd)",
    "ls `pwd`",
    "bash -c 'ls'",
    "env FOO=1 ls",
    "cat <<EOF\nhi\nEOF",
    "python3 -c 'print(1)'",
    "find . -name '*.rs' -exec cat {} \\;",
];

fn policy() -> harness::tools::gate::Policy {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("harness.toml.example");
    let text = std::fs::read_to_string(&path).unwrap();
    harness::config::parse(&text, &path).unwrap().bash.policy
}

/// Calls `judge` on `commands` round-robin for about `budget`; returns verdicts per second.
fn rate(policy: &harness::tools::gate::Policy, commands: &[&str], budget: Duration) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for c in commands {
            black_box(judge(black_box(policy), black_box(c)));
        }
        n += commands.len() as u64;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let policy = policy();
    let budget = Duration::from_millis(1500);
    let allowed = MIX
        .iter()
        .filter(|c| judge(&policy, c).verdict == Verdict::Allow)
        .count();
    let mix = rate(&policy, MIX, budget);
    println!(
        "gate_mix\t{mix:.0}\t({} commands, {allowed} allowed)",
        MIX.len()
    );

    let segments = 200;
    let long: String = (0..segments)
        .map(|i| format!("grep -n 'pattern {i}' src/file{i}.rs"))
        .collect::<Vec<_>>()
        .join(" && ");
    let verdict = judge(&policy, &long).verdict;
    let long_rate = rate(&policy, &[long.as_str()], budget);
    println!(
        "gate_long\t{long_rate:.0}\t({segments} segments, {} bytes, {verdict:?})",
        long.len()
    );

    worst_case(&policy);
}

/// The slowest verdict (best of 3) over the adversarial inputs, under the example policy and
/// under `allow = ["*"]` with deny rules (which turns on the inline-code scans).
fn worst_case(example: &Policy) {
    let star_deny = Policy {
        default: Verdict::Allow,
        allow: vec![Rule::parse("*").unwrap()],
        // No way to write a file and run it (the programs that write typed text denied, no
        // redirection): inline interpreter code is scanned.
        deny: [
            "rm *",
            "curl *",
            "git push *",
            "tee *",
            "dd *",
            "cp *",
            "sponge *",
        ]
        .iter()
        .map(|r| Rule::parse(r).unwrap())
        .collect(),
        write_redirects: false,
        env_allow: Vec::new(),
        file_tools: false,
        work_root: None,
    };
    let mut worst = (Duration::ZERO, "", "");
    for (pname, policy) in [("example", example), ("star_deny", &star_deny)] {
        for (name, cmd) in adversarial(128 * 1024) {
            let best = (0..3)
                .map(|_| {
                    let t = Instant::now();
                    black_box(judge(policy, black_box(&cmd)));
                    t.elapsed()
                })
                .min()
                .unwrap_or_default();
            if best > worst.0 {
                worst = (best, name, pname);
            }
        }
    }
    println!(
        "gate_worst\t{:.1} ms\t({} under {}, inputs up to 128 KiB; target < 50 ms)",
        worst.0.as_secs_f64() * 1000.0,
        worst.1,
        worst.2
    );
}
