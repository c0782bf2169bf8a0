//! Integration tests against a REAL Redmine (see tests/redmine.rs) under real concurrency:
//! 16 workers (16 report dirs, as on 16 hosts) run `harness once` in loops, started
//! together, over 200 issues in scope, with the scripted model (zero latency), straight
//! to Redmine through a counting proxy, and through a proxy that injects 500s, 409s, lost
//! answers and stalls (tests/common/proxy.rs). Every issue must get exactly one REPORT note
//! and one pass through the workflow, no two runs may hold an issue at once, and no claim
//! may be left behind. Meant for PostgreSQL with several puma threads (scripts/test.sh runs
//! it so); on SQLite it runs too. The ignored `bench_*` tests print the figures of
//! bench/redmine.sh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common::proxy;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::redmine::*;
use common::*;
use proxy::{Faults, Proxy};
use serde_json::{json, Value};

/// The class of the issues made here (routed like `study`).
const CLASS: &str = "load";

#[test]
fn without_the_server_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "redmine_concurrency::sixteen_workers_settle_two_hundred_issues_exactly_once",
        "HARNESS_TEST_REDMINE",
    );
}

#[test]
fn sixteen_workers_settle_two_hundred_issues_exactly_once() {
    let _g = real_redmine!();
    let _reset = ResetAfter;
    let issues = make_issues(200);
    let proxy = Proxy::start(&var("REDMINE_URL"), Faults::none());
    let figures = settle(
        &proxy, 16, &issues, /*timeout_secs*/ 30, /*retries*/ 2, 60,
    );
    eprintln!("{}\nrequests: {:?}", figures.summary(), proxy.counts());
    let summary = figures.summary();
    assert_eq!(figures.failed, 0, "no run fails without faults: {summary}");
    assert_eq!(figures.redelivered, 0, "no write-back fails: {summary}");
    check_exactly_once(&issues, &figures);
}

#[test]
fn under_injected_faults_no_work_is_duplicated_and_no_claim_is_left_behind() {
    let _g = real_redmine!();
    let _reset = ResetAfter;
    let issues = make_issues(200);
    let faults = Faults {
        rate: 0.08,
        stall: Duration::from_secs(9),
        seed: 26,
    };
    let proxy = Proxy::start(&var("REDMINE_URL"), faults);
    // One retry only, so that some requests fail for good: runs fail before their claim,
    // between the claim and the turn (the claim is given back) and in the write-back (the
    // REPORT stays on disk and is delivered with `harness writeback`, as the run says).
    let mut figures = settle(
        &proxy, 16, &issues, /*timeout_secs*/ 8, /*retries*/ 1, 80,
    );
    let injected = proxy.faults();
    eprintln!("{}\nrequests: {:?}", figures.summary(), proxy.counts());
    for kind in ["500", "500-after", "409", "drop-after", "stall"] {
        assert!(
            injected.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} injected: {injected:?}"
        );
    }
    // What the faults left held (a run that failed and could not release either) expires:
    // the claims are made two hours old, and workers without faults take the issues over.
    db_sql(
        "UPDATE journals SET created_on = datetime(created_on, '-2 hours') WHERE notes LIKE '[harness-claim]%';",
        "UPDATE journals SET created_on = created_on - interval '2 hours' WHERE notes LIKE '[harness-claim]%';",
    );
    let clean = Proxy::start(&var("REDMINE_URL"), Faults::none());
    let after = settle(&clean, 4, &issues, 30, 2, 60);
    eprintln!("after expiry: {}", after.summary());
    assert_eq!(after.failed, 0, "{after:#?}");
    figures.absorb(after);
    check_exactly_once(&issues, &figures);
}

/// Throughput for bench/redmine.sh: `HARNESS_BENCH_WORKERS` (1,4,16) over
/// `HARNESS_BENCH_ISSUES` (200) issues each.
#[test]
#[ignore = "a benchmark: bench/redmine.sh runs it"]
fn bench_settle_rate() {
    let _g = real_redmine!();
    let workers = std::env::var("HARNESS_BENCH_WORKERS").unwrap_or_else(|_| "1,4,16".into());
    let n: usize = std::env::var("HARNESS_BENCH_ISSUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    println!("| workers | issues | wall s | issues settled / min | runs | Redmine requests / run | requests / issue | GET list / issue | GET issue / issue | PUT / issue | lost or contended claims |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for w in workers.split(',') {
        let w: usize = w.trim().parse().unwrap();
        reset();
        let _reset = ResetAfter;
        let issues = make_issues(n);
        let proxy = Proxy::start(&var("REDMINE_URL"), Faults::none());
        let f = settle(&proxy, w, &issues, 30, 2, 10 * n / w + 10);
        check_exactly_once(&issues, &f);
        let c = proxy.counts();
        let per = |k: &str| c.get(k).copied().unwrap_or(0) as f64 / n as f64;
        println!(
            "| {w} | {n} | {:.1} | {:.0} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2} | {} |",
            f.wall.as_secs_f64(),
            n as f64 / f.wall.as_secs_f64() * 60.0,
            f.runs,
            proxy.requests() as f64 / f.runs as f64,
            proxy.requests() as f64 / n as f64,
            per("GET list"),
            per("GET issue"),
            per("PUT issue"),
            f.lost + f.contended,
        );
    }
}

/// `harness scope` with `HARNESS_BENCH_ISSUES` (1000) issues in scope, for bench/redmine.sh.
#[test]
#[ignore = "a benchmark: bench/redmine.sh runs it"]
fn bench_scope() {
    let _g = real_redmine!();
    let _reset = ResetAfter;
    let n: usize = std::env::var("HARNESS_BENCH_ISSUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    make_issues(n);
    println!("| issues in scope | `[redmine] limit` | listed | Redmine requests | wall s (median of 3) | harness peak RSS |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for limit in [50, 100] {
        let proxy = Proxy::start(&var("REDMINE_URL"), Faults::none());
        let ws = worker(&proxy, 30, 2, &format!("limit = {limit}\n"));
        let mut walls = Vec::new();
        let mut listed = 0;
        let mut rss = 0;
        for _ in 0..3 {
            let start = Instant::now();
            let out = run_measured(&ws, &["scope", "--json"]);
            walls.push(start.elapsed().as_secs_f64());
            assert_eq!(out.0.code, 0, "{:?}", out.0);
            let v: Value = serde_json::from_str(&out.0.stdout).unwrap();
            listed = v["tasks"].as_array().unwrap().len();
            rss = out.1;
        }
        walls.sort_by(f64::total_cmp);
        println!(
            "| {n} | {limit} | {listed} | {} | {:.2} | {:.1} MiB |",
            proxy.requests() / 3,
            walls[1],
            rss as f64 / 1024.0
        );
    }
}

/// Restores the pristine seed when the test ends, so the next test (of any binary) sees it.
struct ResetAfter;

impl Drop for ResetAfter {
    fn drop(&mut self) {
        reset();
    }
}

/// Makes `n` New issues of class [`CLASS`] in mopac (the admin's POSTs, 8 at a time).
fn make_issues(n: usize) -> Vec<u64> {
    let url = format!("{}/issues.json", var("REDMINE_URL"));
    let key = var("REDMINE_ADMIN_API_KEY");
    let body = |i: usize| {
        json!({"issue": {
            "project_id": var("REDMINE_PROJECT_ID").parse::<u64>().unwrap(),
            "subject": format!("Load issue {i}"),
            "description": "Made by tests/redmine_concurrency.rs.",
            "custom_fields": [{"id": var("REDMINE_CLASS_CF_ID").parse::<u64>().unwrap(), "value": CLASS}],
        }})
        .to_string()
    };
    let mut ids: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (url, key, body) = (&url, &key, &body);
                s.spawn(move || {
                    (t..n)
                        .step_by(8)
                        .map(|i| {
                            let (status, text) = http(
                                "POST",
                                url,
                                &[
                                    ("X-Redmine-API-Key", key),
                                    ("Content-Type", "application/json"),
                                ],
                                Some(&body(i)),
                            );
                            assert_eq!(status, 201, "{text}");
                            serde_json::from_str::<Value>(&text).unwrap()["issue"]["id"]
                                .as_u64()
                                .unwrap()
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    ids.sort_unstable();
    assert_eq!(ids.len(), n);
    ids
}

/// A worker's workspace: its own report dir, Redmine through `proxy`. The scope is New and
/// In Progress issues of [`CLASS`]: a claimed issue stays in it (the claim notes say who
/// holds it), so one given back or whose claim expired is taken again.
fn worker(proxy: &Proxy, timeout_secs: u32, retries: u32, extra: &str) -> Workspace {
    let llm_free = "http://127.0.0.1:9/v1";
    let scope = format!(
        "scope_query = \"project_id=mopac&status_id=1|2&cf_{}={CLASS}&sort=id\"\n{extra}",
        var("REDMINE_CLASS_CF_ID")
    );
    let cfg = format!(
        "{scope}[redmine.claim]\nstatus = \"In Progress\"\nstale_after_mins = 60\n[redmine.writeback]\nstatus_done = \"Resolved\"\nstatus_failed = \"Feedback\"\n"
    );
    let ws = workspace(llm_free, &cfg);
    let text = std::fs::read_to_string(ws.config())
        .unwrap()
        .replace(&var("REDMINE_URL"), &proxy.url)
        .replace(
            "timeout_secs = 20\n",
            &format!("timeout_secs = {timeout_secs}\nmax_retries = {retries}\n"),
        )
        .replace(
            "review = \"mopac-primary\"",
            &format!("review = \"mopac-primary\"\n{CLASS} = \"mopac-primary\""),
        );
    std::fs::write(ws.config(), text).unwrap();
    ws
}

/// What the workers did.
#[derive(Debug, Default)]
struct Figures {
    wall: Duration,
    runs: usize,
    /// Runs that exited non-zero.
    failed: usize,
    /// Exit codes of the failed runs.
    codes: BTreeMap<i32, usize>,
    /// Claims that lost to an earlier claim, and that met a concurrent update (422).
    lost: usize,
    contended: usize,
    /// Per issue, the runs that won its claim, in the order they said so.
    winners: BTreeMap<u64, Vec<String>>,
    /// The runs of the workers started after the claims were made to expire.
    after_expiry: Vec<String>,
    /// Every REPORT file: (issue, run id).
    reports: Vec<(u64, String)>,
    /// REPORTs whose write-back failed, delivered afterwards with `harness writeback`.
    redelivered: usize,
}

impl Figures {
    /// One line: what the tests print.
    fn summary(&self) -> String {
        format!(
            "{} runs in {:.1}s, {} failed {:?}, {} claims lost, {} contended, {} REPORTs ({} delivered by harness writeback)",
            self.runs,
            self.wall.as_secs_f64(),
            self.failed,
            self.codes,
            self.lost,
            self.contended,
            self.reports.len(),
            self.redelivered
        )
    }

    fn absorb(&mut self, other: Figures) {
        self.wall += other.wall;
        self.runs += other.runs;
        self.failed += other.failed;
        for (k, v) in other.codes {
            *self.codes.entry(k).or_default() += v;
        }
        self.lost += other.lost;
        self.contended += other.contended;
        for (k, v) in other.winners {
            self.after_expiry.extend(v.iter().cloned());
            self.winners.entry(k).or_default().extend(v);
        }
        self.reports.extend(other.reports);
        self.redelivered += other.redelivered;
    }
}

/// Starts `n` workers at once, each running `harness once` until it finds nothing in scope
/// (or `max_runs`), with the scripted model; what they did.
fn settle(
    proxy: &Proxy,
    n: usize,
    issues: &[u64],
    timeout_secs: u32,
    retries: u32,
    max_runs: usize,
) -> Figures {
    let llm = Llm::start(&json!({"steps": [text("settled")], "loop": true}));
    let workers: Vec<Workspace> = (0..n)
        .map(|_| {
            let ws = worker(proxy, timeout_secs, retries, "");
            let text = std::fs::read_to_string(ws.config())
                .unwrap()
                .replace("http://127.0.0.1:9/v1", &llm.base_url());
            std::fs::write(ws.config(), text).unwrap();
            ws
        })
        .collect();
    let barrier = Arc::new(Barrier::new(n));
    let start = Instant::now();
    let runs: Vec<Vec<Run>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .map(|ws| {
                let barrier = barrier.clone();
                s.spawn(move || {
                    barrier.wait();
                    let mut runs = Vec::new();
                    while runs.len() < max_runs {
                        let r = run(ws, &["once"]);
                        let idle = r.code == 0 && r.stderr.contains("no tasks in scope");
                        runs.push(r);
                        if idle {
                            break;
                        }
                    }
                    runs
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut f = Figures {
        wall: start.elapsed(),
        ..Figures::default()
    };
    for r in runs.iter().flatten() {
        f.runs += 1;
        if r.code != 0 {
            f.failed += 1;
            *f.codes.entry(r.code).or_default() += 1;
        }
        f.lost += r.stderr.matches("was claimed first by run").count();
        f.contended += r.stderr.matches("was updated at the same moment").count();
        for line in r.stderr.lines() {
            if let Some((issue, run_id)) = claimed(line) {
                f.winners.entry(issue).or_default().push(run_id);
            }
        }
    }
    for ws in &workers {
        for p in ws.report_files() {
            let text = std::fs::read_to_string(&p).unwrap();
            let n: u64 = front(&text, "task_id").as_str().unwrap().parse().unwrap();
            let run_id = front(&text, "run_id").as_str().unwrap().to_string();
            // A write-back that failed for good: the run said to retry it with `harness
            // writeback`; so does the test, until it goes through.
            let noted = |i: &Value| {
                marker_notes(i)
                    .iter()
                    .any(|x| x.marker == "[harness-report]" && x.run == run_id)
            };
            if !noted(&issue(n)) {
                f.redelivered += 1;
                let path = p.to_str().unwrap();
                let delivered = (0..10).any(|_| run(ws, &["writeback", path]).code == 0);
                assert!(
                    delivered,
                    "issue #{n}: harness writeback {path} never went through"
                );
            }
            f.reports.push((n, run_id));
        }
    }
    assert!(
        f.reports.iter().all(|(i, _)| issues.contains(i)),
        "a REPORT for an issue out of scope"
    );
    f
}

/// `intake: claimed issue #N (run R)` -> (N, R).
fn claimed(line: &str) -> Option<(u64, String)> {
    let rest = line.split("intake: claimed issue #").nth(1)?;
    let (n, rest) = rest.split_once(" (run ")?;
    Some((n.parse().ok()?, rest.split(')').next()?.to_string()))
}

/// The journals of an issue as (id, run of a marker note, marker, status change).
struct Note {
    id: u64,
    marker: &'static str,
    run: String,
}

fn marker_notes(issue: &Value) -> Vec<Note> {
    let mut out = Vec::new();
    for j in issue["journals"].as_array().unwrap() {
        let text = j["notes"].as_str().unwrap_or("");
        for marker in ["[harness-claim]", "[harness-report]", "[harness-release]"] {
            if let Some(rest) = text.strip_prefix(marker) {
                let run = rest
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("run="))
                    .unwrap_or("")
                    .trim_end_matches([':', ',', '.'])
                    .to_string();
                out.push(Note {
                    id: j["id"].as_u64().unwrap(),
                    marker,
                    run,
                });
            }
        }
    }
    out.sort_by_key(|n| n.id);
    out
}

fn status_changes(issue: &Value) -> Vec<(String, String)> {
    let mut js: Vec<&Value> = issue["journals"].as_array().unwrap().iter().collect();
    js.sort_by_key(|j| j["id"].as_u64());
    js.iter()
        .flat_map(|j| j["details"].as_array().unwrap().iter())
        .filter(|d| d["property"] == "attr" && d["name"] == "status_id")
        .map(|d| {
            (
                d["old_value"].as_str().unwrap_or("").to_string(),
                d["new_value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The invariants, issue by issue, read back as the admin (8 reads at a time).
fn check_exactly_once(issues: &[u64], f: &Figures) {
    let read: Vec<(u64, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = issues
            .chunks(issues.len().div_ceil(8))
            .map(|chunk| s.spawn(move || chunk.iter().map(|&n| (n, issue(n))).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let new = var("REDMINE_STATUS_NEW_ID");
    let in_progress = var("REDMINE_STATUS_IN_PROGRESS_ID");
    let resolved = var("REDMINE_STATUS_RESOLVED_ID");
    let mut files: BTreeMap<u64, Vec<&String>> = BTreeMap::new();
    for (issue, run) in &f.reports {
        files.entry(*issue).or_default().push(run);
    }
    for (n, i) in &read {
        let notes = marker_notes(i);
        let reports: Vec<&Note> = notes
            .iter()
            .filter(|x| x.marker == "[harness-report]")
            .collect();
        assert_eq!(reports.len(), 1, "issue #{n}: one REPORT note");
        let reporter = &reports[0].run;
        assert_eq!(
            files.get(n).map(Vec::as_slice),
            Some(&[reporter][..]),
            "issue #{n}: exactly one REPORT file, the noted run's (no duplicate work)"
        );
        assert_eq!(status_name(i), "Resolved", "issue #{n}");
        assert_eq!(
            status_changes(i),
            vec![
                (new.clone(), in_progress.clone()),
                (in_progress.clone(), resolved.clone())
            ],
            "issue #{n}: one pass through the workflow"
        );
        // No two runs held the issue at once: every winner but the reporting one gave the
        // claim back before the next winner claimed.
        let winners = f.winners.get(n).cloned().unwrap_or_default();
        assert_eq!(
            winners.last(),
            Some(reporter),
            "issue #{n}: the last run that won the claim wrote the REPORT: {winners:?}"
        );
        let claim_of = |run: &str| {
            notes
                .iter()
                .filter(|x| x.marker == "[harness-claim]" && x.run == run)
                .map(|x| x.id)
                .min()
        };
        let release_of = |run: &str| {
            notes
                .iter()
                .find(|x| x.marker == "[harness-release]" && x.run == run)
                .map(|x| x.id)
        };
        for pair in winners.windows(2) {
            let next = claim_of(&pair[1]).unwrap();
            match release_of(&pair[0]) {
                Some(released) => assert!(
                    released < next,
                    "issue #{n}: {} claimed before {} released",
                    pair[1],
                    pair[0]
                ),
                // Not given back (the release failed too): only a run after the expiry
                // may have taken it over.
                None => assert!(
                    f.after_expiry.contains(&pair[1]) && !f.after_expiry.contains(&pair[0]),
                    "issue #{n}: winner {} never released, and {} took it before it expired",
                    pair[0],
                    pair[1]
                ),
            }
        }
        // No claim left behind: after the REPORT, every claim note (a loser's late one) is
        // given back by its run; and harness itself sees nobody holding the issue.
        for c in notes
            .iter()
            .filter(|x| x.marker == "[harness-claim]" && x.id > reports[0].id)
        {
            assert!(
                release_of(&c.run).is_some_and(|r| r > c.id),
                "issue #{n}: the claim of run {} after the REPORT is left behind",
                c.run
            );
        }
        let parsed: harness::redmine::issue::Issue = serde_json::from_value(i.clone()).unwrap();
        assert_eq!(
            harness::redmine::notes::active_claim(&parsed.journals, chrono::Duration::hours(1)),
            None,
            "issue #{n}: a claim is left behind"
        );
    }
}

/// Runs harness and reads its peak RSS (KiB) from wait4(2); the pipes are drained by
/// threads meanwhile.
// The child is reaped by wait4 itself (std's wait gives no rusage).
#[allow(clippy::zombie_processes)]
fn run_measured(ws: &Workspace, args: &[&str]) -> (Run, i64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = ws.command(args);
    cmd.env("HARNESS_TEST_REDMINE_KEY", var("REDMINE_BOT_API_KEY"));
    let mut child = cmd.spawn().unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).unwrap();
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
    // SAFETY: waits for our own child, which nothing else reaps.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    let exit = std::process::ExitStatus::from_raw(status);
    (
        Run {
            code: exit.code().unwrap_or(-1),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        },
        usage.ru_maxrss,
    )
}

#[test]
fn claim_lines_are_read() {
    assert_eq!(
        claimed("2026-12-03T06:00:00Z  INFO intake: claimed issue #42 (run r-1)"),
        Some((42, "r-1".to_string()))
    );
    assert_eq!(claimed("intake: claimed issue #x (run r)"), None);
}
