//! Bench helper (not part of the crate): runs a command N times and prints the median wall
//! time, the median user and system CPU, and the peak RSS, read from `wait4(2)`.
//!
//! `wait4` reports the child's own usage plus that of every descendant it waited for, so a
//! harness run's CPU includes the bash commands it ran; `bench/run.sh` subtracts a measured
//! bash baseline where that matters. Peak RSS is the largest single process among them.
//!
//! Built by `bench/run.sh` with plain `rustc` (std only, no crates):
//!
//! ```text
//! measure [-n RUNS] [--warmup K] [--cwd DIR] -- COMMAND ARGS...
//! ```
//!
//! Output, one line: `runs=N wall_ms=.. user_ms=.. sys_ms=.. cpu_ms=.. rss_kb=.. rss_max_kb=.. hwm_kb=.. hwm_max_kb=.. fails=..`
//! (medians; `rss_max_kb` is the largest over all runs; `fails` counts non-zero exits).
//! `hwm_kb` is the peak resident set of the started process ALONE (its `VmHWM` in
//! `/proc/PID/status`, read every 2 ms until it exits), not of the commands it ran: the
//! harness's own memory where `rss_kb` would show a bigger command's.

use std::process::{Command, Stdio};
use std::time::Instant;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Timeval {
    sec: i64,
    usec: i64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Rusage {
    utime: Timeval,
    stime: Timeval,
    maxrss: i64,
    rest: [i64; 13],
}

extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
}

struct Sample {
    wall_ms: f64,
    user_ms: f64,
    sys_ms: f64,
    rss_kb: i64,
    hwm_kb: i64,
    ok: bool,
}

/// The `VmHWM` of `pid` in KiB; `None` once it has exited (a zombie has none).
fn vm_hwm(pid: u32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(t: Timeval) -> f64 {
    t.sec as f64 * 1000.0 + t.usec as f64 / 1000.0
}

fn run_once(argv: &[String], cwd: Option<&str>) -> Sample {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let start = Instant::now();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("measure: cannot start {}: {e}", argv[0]);
            std::process::exit(2);
        }
    };
    let pid = child.id();
    let hwm = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let watch = {
        let hwm = hwm.clone();
        std::thread::spawn(move || {
            while let Some(kb) = vm_hwm(pid) {
                hwm.fetch_max(kb, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let mut status = 0i32;
    let mut ru = Rusage::default();
    // SAFETY: plain syscall on our own child; both out-pointers are valid for the call.
    let rc = unsafe { wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    let _ = watch.join();
    if rc < 0 {
        eprintln!("measure: wait4 failed");
        std::process::exit(2);
    }
    // WIFEXITED && WEXITSTATUS == 0
    let ok = status & 0x7f == 0 && (status >> 8) & 0xff == 0;
    Sample {
        wall_ms,
        user_ms: ms(ru.utime),
        sys_ms: ms(ru.stime),
        rss_kb: ru.maxrss,
        hwm_kb: hwm.load(std::sync::atomic::Ordering::Relaxed),
        ok,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 10usize;
    let mut warmup = 1usize;
    let mut cwd: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-n" => {
                runs = args[i + 1].parse().unwrap_or(10).max(1);
                i += 2;
            }
            "--warmup" => {
                warmup = args[i + 1].parse().unwrap_or(1);
                i += 2;
            }
            "--cwd" => {
                cwd = Some(args[i + 1].clone());
                i += 2;
            }
            "--" => {
                i += 1;
                break;
            }
            other => {
                eprintln!("measure: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    let argv = &args[i..];
    if argv.is_empty() {
        eprintln!("usage: measure [-n RUNS] [--warmup K] [--cwd DIR] -- COMMAND ARGS...");
        std::process::exit(2);
    }
    for _ in 0..warmup {
        run_once(argv, cwd.as_deref());
    }
    let samples: Vec<Sample> = (0..runs).map(|_| run_once(argv, cwd.as_deref())).collect();
    let fails = samples.iter().filter(|s| !s.ok).count();
    let wall = median(samples.iter().map(|s| s.wall_ms).collect());
    let user = median(samples.iter().map(|s| s.user_ms).collect());
    let sys = median(samples.iter().map(|s| s.sys_ms).collect());
    let cpu = median(samples.iter().map(|s| s.user_ms + s.sys_ms).collect());
    let rss = median(samples.iter().map(|s| s.rss_kb as f64).collect());
    let rss_max = samples.iter().map(|s| s.rss_kb).max().unwrap_or(0);
    let hwm = median(samples.iter().map(|s| s.hwm_kb as f64).collect());
    let hwm_max = samples.iter().map(|s| s.hwm_kb).max().unwrap_or(0);
    println!(
        "runs={runs} wall_ms={wall:.2} user_ms={user:.2} sys_ms={sys:.2} cpu_ms={cpu:.2} rss_kb={rss:.0} rss_max_kb={rss_max} hwm_kb={hwm:.0} hwm_max_kb={hwm_max} fails={fails}"
    );
}
