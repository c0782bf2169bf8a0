//! `scripted-llm` binary: the scripted OpenAI-compatible test server (see the library docs).
//! I/O: argv, exit code 0 on SIGTERM/SIGINT, 2 on a usage or script error.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match scripted_llm::run(std::env::args().skip(1)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scripted-llm: error: {err}");
            ExitCode::from(2)
        }
    }
}
