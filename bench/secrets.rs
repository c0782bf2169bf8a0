//! Secrets and confinement costs: masking a 1 MiB command output (exact key plus its encoded
//! forms), building the read ruleset and the seccomp filter (once per run), and what the
//! confinement adds to one command's start (`bash -c true`, confined or not). Figures only,
//! no assertions.
//!
//! `cargo bench --bench secrets` (plain `std::time`, like `bench/gate.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use harness::secrets::{Redactor, Secret};
use harness::signals::Interrupt;
use harness::tools::{bash, sandbox, spawner};

const KEY: &str = "sk-bench-canary-0f3a9c1e5b2d4f6071a8";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

/// About 1 MiB of what commands print: source lines, an `od -c` dump, hex, base64, with the
/// key hidden in a few encodings.
fn output() -> String {
    let mut out = String::new();
    let mut i = 0;
    while out.len() < 1 << 20 {
        out.push_str(&format!(
            "src/file{i}.rs:{i}:    let value = compute(&input[{i}..], 0x{i:08x}); // TODO\n"
        ));
        out.push_str(&format!(
            "{:07o}   h   e   l   l   o       w   o   r   l   d  \\n\n",
            i * 16
        ));
        out.push_str("aGVsbG8gd29ybGQsIG5vdGhpbmcgc2VjcmV0IGhlcmUsIGp1c3QgYmFzZTY0IHRleHQ=\n");
        out.push_str("68656c6c6f20776f726c642c206e6f7468696e67207365637265740a\n");
        if i % 400 == 0 {
            let rev: String = KEY.chars().rev().collect();
            out.push_str(&format!("{KEY} {rev}\n"));
        }
        i += 1;
    }
    out
}

fn main() {
    let mut redactor = Redactor::default();
    redactor.add(&Secret::new(KEY));
    redactor.add(&Secret::new("sk-bench-redmine-7b2e9d4c1a6f3058"));
    let text = output();
    let masked = redactor.redact(&text);
    let t = time(15, || redactor.redact(&text));
    println!(
        "mask_1mib\t{:.2} ms\t({} bytes, {} masked spans, {:.0} MiB/s)",
        t.as_secs_f64() * 1e3,
        text.len(),
        masked.matches("[redacted]").count(),
        text.len() as f64 / (1 << 20) as f64 / t.as_secs_f64()
    );
    let hex: String = "0123456789abcdef".repeat(1 << 16);
    let t = time(15, || redactor.redact(&hex));
    println!(
        "mask_1mib_hex\t{:.2} ms\t(1 MiB of hex digits: many partial matches)",
        t.as_secs_f64() * 1e3
    );

    if sandbox::kernel_abi().is_err() {
        println!("sandbox\t-\t(no Landlock on this kernel: not measured)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let text = "vertical = \"b\"\nwork_root = \"work\"\n[litellm]\nreplay = \"c.json\"\n[models]\nt = \"m\"\ndefault_tier = \"t\"\n";
    let cfg = harness::config::parse(text, &dir.path().join("harness.toml")).unwrap();
    let t = time(50, || {
        sandbox::Landlock::build(&sandbox::Settings::from(&cfg.bash), &work, &tmp, None).unwrap()
    });
    println!(
        "sandbox_build\t{:.3} ms\t(read set, Landlock ruleset and seccomp filter; once per run)",
        t.as_secs_f64() * 1e3
    );
    let t = time(50, || {
        sandbox::seccomp::command_filter(sandbox::seccomp::Refuse {
            sockets: true,
            unix: true,
            inet: false,
            memfd: false,
        })
        .unwrap()
    });
    println!(
        "seccomp_compile\t{:.1} us\t(part of the above)",
        t.as_secs_f64() * 1e6
    );

    let landlock =
        sandbox::Landlock::build(&sandbox::Settings::from(&cfg.bash), &work, &tmp, None).unwrap();
    // The layout of issue 14: the config and the report dir inside the work root, so each
    // command also gets its read-only mounts (a user and mount namespace, twice).
    let inside = dir.path().join("inside");
    std::fs::create_dir_all(inside.join("reports")).unwrap();
    let text_inside = text.replace(
        "work_root = \"work\"",
        "work_root = \".\"\nreport_dir = \"reports\"",
    );
    std::fs::write(inside.join("harness.toml"), &text_inside).unwrap();
    let cfg_inside = harness::config::parse(&text_inside, &inside.join("harness.toml")).unwrap();
    let protected = sandbox::Landlock::build(
        &sandbox::Settings::from(&cfg_inside.bash),
        &inside,
        &tmp,
        None,
    )
    .unwrap();
    let plan =
        sandbox::protected_writes(&sandbox::Settings::from(&cfg_inside.bash), &inside).unwrap();
    let mounts = sandbox::protect::Mounts::prepare(&plan).unwrap();
    let protectable = mounts.probe().is_ok();
    let t = time(50, || mounts.probe());
    println!(
        "protect_probe\t{:.3} ms\t(preflight: a forked child makes the read-only mounts and exits; {})",
        t.as_secs_f64() * 1e3,
        if protectable { "user namespaces available" } else { "NO user namespaces here" }
    );
    // unix_sockets set: on a kernel below Landlock ABI 9, each command also installs the
    // notifying filter and sends its listener to the supervisor thread.
    let mut with_sockets = cfg.bash.clone();
    with_sockets.unix_sockets = vec![harness::config::SocketName::Path(dir.path().join("s.sock"))];
    let supervised =
        sandbox::Landlock::build(&sandbox::Settings::from(&with_sockets), &work, &tmp, None)
            .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = bash::scrubbed_env(std::env::vars());
    let interrupt = Interrupt::default();
    let spawner = runtime.block_on(async { spawner::Spawner::start_here() });
    let start = |confine: Option<&sandbox::Landlock>, root: &Path| {
        runtime.block_on(async {
            bash::run(
                "true",
                &bash::Setting {
                    work_root: root,
                    timeout: Duration::from_secs(10),
                    max_output: 1000,
                    env: &env,
                    landlock: confine,
                    interrupt: &interrupt,
                    spawner: &spawner,
                },
            )
            .await
            .unwrap()
        })
    };
    // Interleaved, so that a busy machine slows both alike; the minimum is the figure least
    // disturbed by other load.
    let mut plain = Vec::new();
    let mut confined = Vec::new();
    let mut mounted = Vec::new();
    let mut sockets = Vec::new();
    for _ in 0..150 {
        let s = Instant::now();
        black_box(start(None, &work));
        plain.push(s.elapsed());
        let s = Instant::now();
        black_box(start(Some(&landlock), &work));
        confined.push(s.elapsed());
        if protectable {
            let s = Instant::now();
            black_box(start(Some(&protected), &inside));
            mounted.push(s.elapsed());
        }
        let s = Instant::now();
        black_box(start(Some(&supervised), &work));
        sockets.push(s.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (plain_min, confined_min) = (
        ms(*plain.iter().min().unwrap()),
        ms(*confined.iter().min().unwrap()),
    );
    let (plain, confined) = (ms(median(plain)), ms(median(confined)));
    let sockets_min = ms(*sockets.iter().min().unwrap());
    let sockets = ms(median(sockets));
    println!(
        "command_start\t+{:.3} ms (min), +{:.3} ms (median)\t(bash -c true: {confined_min:.3}/{confined:.3} ms confined, {plain_min:.3}/{plain:.3} ms not, min/median)",
        confined_min - plain_min,
        confined - plain
    );
    if protectable {
        let mounted_min = ms(*mounted.iter().min().unwrap());
        let mounted = ms(median(mounted));
        println!(
            "command_start_protected\t+{:.3} ms (min), +{:.3} ms (median)\t(over confined: config and report dir inside the work root, read-only mounts; {mounted_min:.3}/{mounted:.3} ms, min/median)",
            mounted_min - confined_min,
            mounted - confined
        );
    }
    println!(
        "command_start_unix_sockets\t+{:.3} ms (min), +{:.3} ms (median)\t(the same with unix_sockets set, over confined: {})",
        sockets_min - confined_min,
        sockets - confined,
        sandbox::unix::decide(
            false,
            &with_sockets.unix_sockets,
            sandbox::kernel_abi().unwrap_or(0)
        )
        .describe()
    );

    // The loader guard: every execve inside a command waits for the harness's answer. A
    // spawner of its own carries the guard's filter (a filter cannot be taken off); the
    // same command of 20 execs, unconfined, with and without it.
    let guarded = runtime.block_on(async { spawner::Spawner::start_here() });
    let pass = sandbox::loader::pass();
    let listener = guarded.guard(&sandbox::loader::filter(pass), pass).unwrap();
    let loaders: Vec<std::path::PathBuf> =
        ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
            .iter()
            .map(std::path::PathBuf::from)
            .filter(|p| p.exists())
            .collect();
    let _guard = sandbox::loader::Guard::start(listener, &loaders).unwrap();
    let execs = "/bin/true; ".repeat(20);
    let run_on = |sp: &spawner::Spawner| {
        runtime.block_on(async {
            bash::run(
                &execs,
                &bash::Setting {
                    work_root: &work,
                    timeout: Duration::from_secs(10),
                    max_output: 1000,
                    env: &env,
                    landlock: None,
                    interrupt: &interrupt,
                    spawner: sp,
                },
            )
            .await
            .unwrap()
        })
    };
    let (mut open, mut watched) = (Vec::new(), Vec::new());
    for _ in 0..60 {
        let s = Instant::now();
        black_box(run_on(&spawner));
        open.push(s.elapsed());
        let s = Instant::now();
        black_box(run_on(&guarded));
        watched.push(s.elapsed());
    }
    let (open_min, watched_min) = (
        ms(*open.iter().min().unwrap()),
        ms(*watched.iter().min().unwrap()),
    );
    let (open, watched) = (ms(median(open)), ms(median(watched)));
    println!(
        "exec_under_loader_guard\t+{:.3} ms (min), +{:.3} ms (median) per execve\t(bash -c of 20 /bin/true: {watched_min:.3}/{watched:.3} ms guarded, {open_min:.3}/{open:.3} ms not, min/median)",
        (watched_min - open_min) / 20.0,
        (watched - open) / 20.0
    );
}
