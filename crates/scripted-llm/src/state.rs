//! The server's shared state: script position, counters and the request log. I/O: appends to
//! the optional JSONL log file.

use crate::http::Request;
use crate::script::{Script, Step};
use serde_json::{json, Map, Value};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) struct State {
    pub(crate) script: Script,
    /// Index of the next step to serve (wraps to 0 when the script loops).
    pub(crate) pos: usize,
    pub(crate) seq: u64,
    pub(crate) connections: u64,
    pub(crate) log: Vec<Value>,
    pub(crate) log_path: Option<PathBuf>,
    pub(crate) models: Vec<String>,
}

pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicked handler cannot leave the state half-updated in a way that matters here.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// A fresh server's state: at the first step, nothing logged.
    pub(crate) fn new(script: Script, log_path: Option<PathBuf>, models: Vec<String>) -> State {
        State {
            script,
            pos: 0,
            seq: 0,
            connections: 0,
            log: Vec::new(),
            log_path,
            models,
        }
    }

    /// The step for the next chat request and its index (`None` when exhausted).
    pub(crate) fn next_step(&mut self) -> (Option<usize>, Step) {
        let len = self.script.steps.len();
        if self.pos < len {
            let index = self.pos;
            self.pos += 1;
            if self.script.looped && self.pos == len {
                self.pos = 0;
            }
            (Some(index), self.script.steps[index].clone())
        } else {
            (None, self.script.on_exhausted.clone())
        }
    }

    pub(crate) fn record(&mut self, req: &Request, step: Option<usize>) -> u64 {
        self.seq += 1;
        let headers: Map<String, Value> = req
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), Value::String(v.clone())))
            .collect();
        let body = serde_json::from_slice::<Value>(&req.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&req.body).into_owned()));
        let entry = json!({
            "ts": now_secs_f64(),
            "seq": self.seq,
            "step": step,
            "method": req.method,
            "path": req.target,
            "headers": headers,
            "body": body,
        });
        if let Some(path) = &self.log_path {
            let appended = OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{entry}"));
            if let Err(err) = appended {
                eprintln!("scripted-llm: cannot append to {}: {err}", path.display());
            }
        }
        self.log.push(entry);
        self.seq
    }

    pub(crate) fn reset(&mut self, script: Option<Script>, keep_log: bool) {
        if let Some(script) = script {
            self.script = script;
        }
        self.pos = 0;
        if !keep_log {
            self.log.clear();
            self.seq = 0;
            self.connections = 0;
            if let Some(path) = &self.log_path {
                if let Err(err) = std::fs::File::create(path) {
                    eprintln!("scripted-llm: cannot truncate {}: {err}", path.display());
                }
            }
        }
    }
}

pub(crate) fn now_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::script::{exhausted_step, parse_script};

    #[test]
    fn looping_and_exhaustion() {
        let mut st = State {
            script: parse_script(
                r#"{"steps":[{"type":"text","content":"a"},{"type":"empty"}],"loop":true}"#,
            )
            .unwrap(),
            pos: 0,
            seq: 0,
            connections: 0,
            log: vec![],
            log_path: None,
            models: vec![],
        };
        let order: Vec<Option<usize>> = (0..5).map(|_| st.next_step().0).collect();
        assert_eq!(order, vec![Some(0), Some(1), Some(0), Some(1), Some(0)]);
        st.script.looped = false;
        st.pos = 1;
        assert_eq!(st.next_step().0, Some(1));
        assert_eq!(st.next_step(), (None, exhausted_step()));
    }
}
