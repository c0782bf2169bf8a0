//! The accept loop and the routing of one connection to the chat, models or control
//! endpoints. I/O: binds a loopback socket, prints the LISTENING line, handles signals.

use crate::args::parse_args;
use crate::chat::handle_chat;
use crate::http::{read_request, send_json, Request};
use crate::script::parse_script;
use crate::state::{lock, State};
use crate::BoxError;
use serde_json::{json, Value};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// Serves a script until SIGTERM/SIGINT. `argv` are the arguments after the program name.
pub async fn run(argv: impl Iterator<Item = String>) -> Result<(), BoxError> {
    let args = parse_args(argv)?;
    let text = std::fs::read_to_string(&args.script)
        .map_err(|e| format!("cannot read script {}: {e}", args.script.display()))?;
    let script =
        parse_script(&text).map_err(|e| format!("script {}: {e}", args.script.display()))?;
    if let Some(path) = &args.log {
        // A fresh server starts a fresh log, like a reset does.
        std::fs::File::create(path)
            .map_err(|e| format!("cannot create log {}: {e}", path.display()))?;
    }
    let listener = TcpListener::bind(SocketAddr::new(args.host, args.port))
        .await
        .map_err(|e| format!("cannot bind {}:{}: {e}", args.host, args.port))?;
    let addr = listener.local_addr()?;
    eprintln!(
        "scripted-llm: {} steps from {}, listening on {addr}",
        script.steps.len(),
        args.script.display()
    );
    let state = Arc::new(Mutex::new(State::new(script, args.log, args.models)));
    {
        let mut out = io::stdout().lock();
        writeln!(out, "LISTENING http://{addr}")?;
        out.flush()?;
    }

    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let stop = async move {
        tokio::select! {
            _ = sigterm.recv() => eprintln!("scripted-llm: SIGTERM, exiting"),
            _ = sigint.recv() => eprintln!("scripted-llm: SIGINT, exiting"),
        }
    };
    serve(listener, state, stop).await;
    Ok(())
}

/// Accepts connections and serves each on its own task until `stop` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, _peer)) => {
                    lock(&state).connections += 1;
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        let mut sock = sock;
                        if let Err(err) = handle_connection(&mut sock, &state).await {
                            eprintln!("scripted-llm: connection: {err}");
                        }
                    });
                }
                // EMFILE and friends are transient for a test server: keep accepting.
                Err(err) => {
                    eprintln!("scripted-llm: accept: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = &mut stop => break,
        }
    }
}

pub(crate) fn is_control(path: &str) -> bool {
    path == "/health" || path.starts_with("/_fake/")
}

pub(crate) async fn handle_connection<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    state: &Mutex<State>,
) -> Result<(), BoxError> {
    let req = match read_request(s).await {
        Ok(Some(req)) => req,
        Ok(None) => return Ok(()),
        Err(err) if err.kind() == io::ErrorKind::InvalidData => {
            let body = json!({"error": {"message": err.to_string(), "type": "invalid_request_error", "param": null, "code": null}});
            send_json(s, 400, &body).await?;
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    };
    let path = req.path().to_string();
    if is_control(&path) {
        {
            // Saturating: a reset may have zeroed the counter since this connection was accepted.
            let mut st = lock(state);
            st.connections = st.connections.saturating_sub(1);
        }
        return handle_control(s, state, &req).await;
    }
    match (req.method.as_str(), path.as_str()) {
        ("POST", "/v1/chat/completions" | "/chat/completions") => handle_chat(s, state, &req).await,
        ("GET", "/v1/models" | "/models") => {
            let models = {
                let mut st = lock(state);
                st.record(&req, None);
                st.models.clone()
            };
            let data: Vec<Value> = models
                .iter()
                .map(|m| json!({"id": m, "object": "model", "created": 1_677_610_602, "owned_by": "scripted-llm"}))
                .collect();
            send_json(s, 200, &json!({"object": "list", "data": data})).await?;
            Ok(())
        }
        _ => {
            lock(state).record(&req, None);
            eprintln!("scripted-llm: {} {} -> 404", req.method, req.target);
            let body = json!({"error": {"message": format!("scripted-llm: no route for {} {path}", req.method), "type": "invalid_request_error", "param": null, "code": "not_found"}});
            send_json(s, 404, &body).await?;
            Ok(())
        }
    }
}

pub(crate) async fn handle_control<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    state: &Mutex<State>,
    req: &Request,
) -> Result<(), BoxError> {
    let (status, body) = match (req.method.as_str(), req.path()) {
        ("GET", "/health") => (200, json!({"status": "ok"})),
        ("GET", "/_fake/state") => {
            let st = lock(state);
            (
                200,
                json!({"pos": st.pos, "steps": st.script.steps.len(), "requests": st.log.len(), "connections": st.connections}),
            )
        }
        ("GET", "/_fake/requests") => (200, Value::Array(lock(state).log.clone())),
        ("POST", "/_fake/reset" | "/_fake/script") => {
            let text = String::from_utf8_lossy(&req.body);
            let parsed = if text.trim().is_empty() {
                Ok(None)
            } else {
                parse_script(&text).map(Some)
            };
            match parsed {
                Ok(script) => {
                    let mut st = lock(state);
                    st.reset(script, req.query_flag("keep_log"));
                    eprintln!("scripted-llm: reset, {} steps", st.script.steps.len());
                    (200, json!({"ok": true, "steps": st.script.steps.len()}))
                }
                Err(err) => (
                    400,
                    json!({"ok": false, "error": format!("invalid script: {err}")}),
                ),
            }
        }
        _ => (
            404,
            json!({"error": {"message": format!("scripted-llm: no control route {} {}", req.method, req.path()), "type": "invalid_request_error", "param": null, "code": "not_found"}}),
        ),
    };
    send_json(s, status, &body).await?;
    Ok(())
}
