//! Masking with very long keys: a 64 KiB key (the worst shape, one repeated character, and
//! a random one) added to a [`Redactor`], then 1 MiB of command output masked, and the
//! dangling-half checks the bash tool runs on every cut output. Every step must be linear in
//! the key's length and the output's (issue 21: an 8 000-character key made `check` take
//! 19 s, 60 000 never finished). Figures only, no assertions.
//!
//! `cargo bench --bench long_keys` (plain `std::time`, like `bench/secrets.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use harness::secrets::{Redactor, Secret};

/// Best of `runs`: the least disturbed figure on a shared machine.
fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// `n` printable ASCII characters from a fixed xorshift seed.
fn random_key(n: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'!' + (x % 94) as u8)
        })
        .collect()
}

fn main() {
    // SIZES=4,16 (KiB) measures only those; the default is 4, 16 and 64 KiB.
    let sizes: Vec<usize> = std::env::var("SIZES")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|x| x.parse::<usize>().unwrap() << 10)
                .collect()
        })
        .unwrap_or(vec![4 << 10, 16 << 10, 64 << 10]);
    for (shape, make) in [
        ("repeated", (|n| "a".repeat(n)) as fn(usize) -> String),
        ("random", random_key),
    ] {
        for &n in &sizes {
            let key = make(n);
            let add = best(3, || {
                let mut r = Redactor::default();
                r.add(&Secret::new(key.clone()));
                r
            });
            let mut r = Redactor::default();
            r.add(&Secret::new(key.clone()));
            // 1 MiB of output: the key's own character run (the partial-match worst case),
            // with the key itself in it twice.
            let mut out = key[..n / 2].to_string();
            out.push_str(&key);
            while out.len() < (1 << 20) - n {
                out.push_str(&key[..n / 3]);
                out.push('\n');
            }
            out.push_str(&key);
            let masked = r.redact(&out);
            let redact = best(3, || r.redact(&out));
            let tail = &out[out.len() - n..];
            let dangling = best(3, || {
                (
                    r.dangling_prefix_len(&out[..out.len() - 1]),
                    r.dangling_suffix_len(tail),
                )
            });
            println!(
                "{shape} key {} KiB\tadd {}\tmask 1 MiB {} ({} spans)\tdangling halves {}",
                n >> 10,
                ms(add),
                ms(redact),
                masked.matches("[redacted]").count(),
                ms(dangling),
            );
        }
    }
}
