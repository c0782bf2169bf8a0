//! Bench helper (not part of the crate): the plain-loop floor a turn is compared with. A
//! minimal agent loop without any of harness's work: per round one HTTP call to the model
//! (a POST with the growing conversation, the whole reply read; no JSON parsing) and one
//! `bash -c COMMAND` with its output captured; then the final call for the answer.
//!
//! Built by `bench/run.sh` with plain `rustc` (std only, no crates):
//!
//! ```text
//! floor HOST:PORT ROUNDS
//! ```
//!
//! It runs `echo round-N` in round N, as the benchmark turn's script asks harness to.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

fn post(addr: &str, body: &str) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-bench\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    // The server closes the connection after each reply.
    let mut reply = Vec::new();
    s.read_to_end(&mut reply)?;
    Ok(reply)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: floor HOST:PORT ROUNDS");
        std::process::exit(2);
    }
    let addr = &args[1];
    let rounds: usize = args[2].parse().unwrap_or(1);
    let mut messages = vec![
        r#"{"role":"system","content":"Run the commands you are given, then answer."}"#
            .to_string(),
        r#"{"role":"user","content":"bench"}"#.to_string(),
    ];
    for i in 1..=rounds + 1 {
        let body = format!(
            r#"{{"model":"glm-5.3","stream":false,"messages":[{}]}}"#,
            messages.join(",")
        );
        match post(addr, &body) {
            Ok(reply) if reply.starts_with(b"HTTP/1.1 200") => {}
            other => {
                eprintln!("floor: round {i}: bad reply {other:?}");
                std::process::exit(1);
            }
        }
        if i > rounds {
            break;
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("echo round-{i}"))
            .output();
        let text = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
            other => {
                eprintln!("floor: round {i}: bash failed: {other:?}");
                std::process::exit(1);
            }
        };
        messages.push(format!(
            r#"{{"role":"assistant","tool_calls":[{{"id":"call_{i}","type":"function","function":{{"name":"bash","arguments":"{{\"command\":\"echo round-{i}\"}}"}}}}]}}"#
        ));
        messages.push(format!(
            r#"{{"role":"tool","tool_call_id":"call_{i}","content":"{}[exit status: 0]"}}"#,
            text.replace('\n', "\\n")
        ));
    }
}
