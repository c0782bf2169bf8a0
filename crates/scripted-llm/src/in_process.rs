//! The server inside the calling process, for tests: a loopback listener served on a thread
//! of its own (one tokio runtime) until the handle is dropped. I/O: binds 127.0.0.1, reads
//! and writes nothing else; the request log is read from memory, not over HTTP.

use crate::args::DEFAULT_MODELS;
use crate::script::parse_script;
use crate::server::serve;
use crate::state::{lock, State};
use crate::BoxError;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// A running in-process server. Dropping it stops the server and closes its socket, as
/// killing the binary would: a client then finds the port refusing connections.
pub struct Server {
    url: String,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `script` (the JSON text the binary reads from `--script`) with the default
    /// model list, on an ephemeral loopback port.
    pub fn start(script: &str) -> Result<Server, BoxError> {
        Server::start_with_models(
            script,
            DEFAULT_MODELS.split(',').map(str::to_string).collect(),
        )
    }

    /// Like [`Server::start`], listing `models` on `GET /v1/models`.
    pub fn start_with_models(script: &str, models: Vec<String>) -> Result<Server, BoxError> {
        let script = parse_script(script).map_err(|e| format!("script: {e}"))?;
        let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State::new(script, None, models)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let served = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("scripted-llm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => {
                            serve(listener, served, async {
                                let _ = stopped.await;
                            })
                            .await
                        }
                        Err(err) => eprintln!("scripted-llm: listener: {err}"),
                    }
                });
                // Dropping the runtime here cancels every connection still open (a `hang`).
            })?;
        Ok(Server {
            url,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every logged request, as `GET /_fake/requests` returns them.
    pub fn requests(&self) -> Value {
        Value::Array(lock(&self.state).log.clone())
    }

    /// `{pos, steps, requests, connections}`, as `GET /_fake/state` returns it.
    pub fn state(&self) -> Value {
        let st = lock(&self.state);
        json!({"pos": st.pos, "steps": st.script.steps.len(), "requests": st.log.len(), "connections": st.connections})
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn get(url: &str, path: &str) -> std::io::Result<String> {
        let addr = url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr)?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    #[test]
    fn serves_until_dropped_then_the_port_refuses() {
        let server = Server::start(r#"[{"type":"text","content":"hi"}]"#).unwrap();
        let url = server.url().to_string();
        assert!(get(&url, "/health").unwrap().contains("\"ok\""));
        assert!(get(&url, "/v1/models").unwrap().contains("glm-5.3"));
        assert_eq!(server.requests().as_array().unwrap().len(), 1);
        assert_eq!(server.state()["steps"], 1);
        drop(server);
        assert!(get(&url, "/health").is_err());
    }

    #[test]
    fn a_bad_script_is_an_error() {
        assert!(Server::start("[{\"type\":\"nope\"}]").is_err());
    }
}
