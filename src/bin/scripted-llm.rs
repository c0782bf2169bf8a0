//! `scripted-llm`: a scripted OpenAI-compatible chat-completions server for tests.
//!
//! Test seam, not product code. It stands in for the model behind `harness` (directly, or
//! behind a real LiteLLM proxy) and answers each `POST /v1/chat/completions` (or
//! `/chat/completions`) with the next step of a JSON script: a text answer, tool calls, an
//! HTTP error, or a transport fault (dropped connection, truncated JSON, a hang, an in-band
//! stream error). It is a small raw HTTP/1.1 server on a tokio `TcpListener`, one request per
//! connection (`Connection: close`), because the faults need byte-level control of the socket.
//!
//! I/O: binds a loopback address only, reads the script file, appends to an optional JSONL
//! request log, prints exactly one line (`LISTENING http://HOST:PORT`) to stdout and logs to
//! stderr. Exits 0 on SIGTERM/SIGINT, 2 on a usage or script error.
//!
//! ```text
//! scripted-llm --script FILE [--host 127.0.0.1] [--port 0] [--log FILE.jsonl] [--models a,b,...]
//! ```
//!
//! Script: a JSON list of steps, or `{"steps":[...], "loop":false, "on_exhausted":STEP}`.
//! When the script runs out (and `loop` is false) every further chat request gets
//! `on_exhausted`, by default `500 {"error":{..,"code":"script_exhausted"}}`.
//!
//! | step | non-streaming | `"stream": true` |
//! |---|---|---|
//! | `{"type":"text","content":"..."}` | 200, `finish_reason: stop` | role chunk, content pieces, finish chunk, [usage], `[DONE]` |
//! | `{"type":"tool_call","command":"ls","id":"call_1"}` | one `bash` call, `finish_reason: tool_calls` | tool-call deltas: the first carries index/id/type/name/`arguments:""`, later ones fragments |
//! | `{"type":"tool_call","content":null,"calls":[{"name":"bash","arguments":{..} or "raw","id":".."}]}` | several calls; a string `arguments` is sent verbatim (broken JSON allowed) | same |
//! | `{"type":"error","status":429,"headers":{"Retry-After":"2"},"body":{..} or "text"}` | that status; a string body is text/plain (text/html if it starts with `<`) | same, before the first byte |
//! | `{"type":"drop","after_chunks":2}` | headers plus half of the Content-Length body, then close | `after_chunks` events, then close without `[DONE]` or chunked terminator |
//! | `{"type":"malformed"}` | 200 with truncated JSON | the 2nd event is `data: {"id": "broken", "choices": [{` |
//! | `{"type":"hang"}` | waits `delay_ms` (default 1 h), then answers; stops if the client closes | same |
//! | `{"type":"empty"}` | 200, a message with no content and no tool calls | one finish chunk, then `[DONE]` |
//! | `{"type":"stream_error","after_chunks":1,"message":".."}` | 500 with that message | N events, then `data: {"error": {..}}`, clean end without `[DONE]` |
//!
//! `drop`, `malformed`, `hang` and `stream_error` take `content`/`command`/`calls` for the
//! reply they cut or delay. Optional on every step: `delay_ms` (before answering), `usage`
//! `{prompt_tokens, completion_tokens}` (default: request bytes / 4 and message bytes / 4),
//! `finish_reason`, `model` (default: the request's), `chunk_size` (chars per streamed
//! fragment, default 7), `chunk_delay_ms`, `headers` (extra response headers, e.g.
//! `x-litellm-response-cost`). Object `arguments` are serialized like Python's `json.dumps`
//! (`{"command": "ls"}`, keys sorted, non-ASCII escaped); use a string for exact bytes.
//!
//! Control endpoints (never consume steps, never counted, never logged): `GET /health`,
//! `GET /_fake/state` -> `{"pos","steps","requests","connections"}`, `GET /_fake/requests` ->
//! the logged requests `[{"ts","seq","step","method","path","headers","body"}]`,
//! `POST /_fake/reset` and `POST /_fake/script` (rewind; a non-empty body is loaded as the new
//! script; the log and the counters are cleared unless the URL has `?keep_log=1`).
//! `GET /v1/models` (and `/models`) lists `--models`; it is logged and counted like a chat
//! request. `connections` counts every accepted TCP connection except control requests, so a
//! test can prove that a client made no connection at all.

use serde::{Deserialize, Serialize as _};
use serde_json::{json, Map, Value};
use std::error::Error;
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

type BoxError = Box<dyn Error + Send + Sync>;

const USAGE: &str = "usage: scripted-llm --script FILE [--host 127.0.0.1] [--port 0] \
                     [--log FILE.jsonl] [--models glm-5.3,glm-5.2,...]";
const DEFAULT_MODELS: &str = "glm-5.3,glm-5.2,glm-4.7-flash,glm-5-turbo";
const DEFAULT_CHUNK_SIZE: usize = 7;
const DEFAULT_AFTER_CHUNKS: usize = 2;
const DEFAULT_HANG_MS: u64 = 3_600_000;
/// Text used by the fault steps that cut or delay a reply when the step names none.
const DEFAULT_FAULT_TEXT: &str = "This reply is cut short by a scripted fault.";
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scripted-llm: error: {err}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), BoxError> {
    let args = parse_args(std::env::args().skip(1))?;
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
    let state = Arc::new(Mutex::new(State {
        script,
        pos: 0,
        seq: 0,
        connections: 0,
        log: Vec::new(),
        log_path: args.log,
        models: args.models,
    }));
    {
        let mut out = io::stdout().lock();
        writeln!(out, "LISTENING http://{addr}")?;
        out.flush()?;
    }

    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
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
            _ = sigterm.recv() => { eprintln!("scripted-llm: SIGTERM, exiting"); break; }
            _ = sigint.recv() => { eprintln!("scripted-llm: SIGINT, exiting"); break; }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// CLI

#[derive(Debug, PartialEq)]
struct Args {
    script: PathBuf,
    host: IpAddr,
    port: u16,
    log: Option<PathBuf>,
    models: Vec<String>,
}

fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut script = None;
    let mut host = "127.0.0.1".to_string();
    let mut port = "0".to_string();
    let mut log = None;
    let mut models = DEFAULT_MODELS.to_string();
    while let Some(arg) = argv.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        let value = match inline.or_else(|| argv.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value\n{USAGE}")),
        };
        match flag.as_str() {
            "--script" => script = Some(PathBuf::from(value)),
            "--host" => host = value,
            "--port" => port = value,
            "--log" => log = Some(PathBuf::from(value)),
            "--models" => models = value,
            _ => return Err(format!("unknown argument {arg:?}\n{USAGE}")),
        }
    }
    let script = script.ok_or_else(|| format!("--script is required\n{USAGE}"))?;
    let host: IpAddr = if host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .map_err(|_| format!("--host {host:?} is not an IP address"))?
    };
    // A scripted server answers anyone with anything: never expose it beyond this machine.
    if !host.is_loopback() {
        return Err(format!(
            "--host {host} is not a loopback address; refusing to bind"
        ));
    }
    let port = port
        .parse()
        .map_err(|_| format!("--port {port:?} is not a port number"))?;
    let models = models
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(String::from)
        .collect();
    Ok(Args {
        script,
        host,
        port,
        log,
        models,
    })
}

// ---------------------------------------------------------------------------------------
// Script: raw JSON -> validated steps

#[derive(Debug, Clone, PartialEq)]
struct Script {
    steps: Vec<Step>,
    looped: bool,
    on_exhausted: Step,
}

#[derive(Debug, Clone, PartialEq)]
struct Step {
    action: Action,
    opts: Opts,
}

#[derive(Debug, Clone, PartialEq)]
enum Action {
    /// `text` and `tool_call`.
    Reply(Reply),
    Empty,
    Error {
        status: u16,
        body: ErrorBody,
    },
    Drop {
        reply: Reply,
        after_chunks: usize,
    },
    Malformed(Reply),
    Hang(Reply),
    StreamError {
        reply: Reply,
        after_chunks: usize,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum ErrorBody {
    Json(Value),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Reply {
    content: Option<String>,
    calls: Vec<ToolCall>,
}

#[derive(Debug, Clone, PartialEq)]
struct ToolCall {
    id: String,
    name: String,
    /// The exact `arguments` string sent to the client.
    arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
struct Opts {
    delay_ms: Option<u64>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    model: Option<String>,
    chunk_size: usize,
    chunk_delay_ms: u64,
    headers: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Every field any step may carry; which ones a step type accepts is `fields_for`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(rename = "type")]
    kind: String,
    command: Option<String>,
    id: Option<String>,
    calls: Option<Vec<RawCall>>,
    #[serde(default, deserialize_with = "null_or_string")]
    content: Option<Option<String>>,
    status: Option<u16>,
    body: Option<Value>,
    after_chunks: Option<usize>,
    message: Option<String>,
    delay_ms: Option<u64>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    model: Option<String>,
    chunk_size: Option<usize>,
    chunk_delay_ms: Option<u64>,
    headers: Option<Map<String, Value>>,
}

/// Distinguishes an absent `content` (outer `None`) from `"content": null`.
fn null_or_string<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    name: Option<String>,
    arguments: Option<Value>,
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    steps: Vec<Value>,
    #[serde(default, rename = "loop")]
    looped: bool,
    on_exhausted: Option<Value>,
}

const COMMON_FIELDS: &[&str] = &[
    "type",
    "delay_ms",
    "usage",
    "finish_reason",
    "model",
    "chunk_size",
    "chunk_delay_ms",
    "headers",
];
const REPLY_FIELDS: &[&str] = &["content", "command", "id", "calls"];

fn fields_for(kind: &str) -> Option<Vec<&'static str>> {
    let extra: Vec<&'static str> = match kind {
        "text" => vec!["content"],
        "tool_call" | "malformed" | "hang" => REPLY_FIELDS.to_vec(),
        "error" => vec!["status", "body"],
        "drop" => [REPLY_FIELDS, &["after_chunks"]].concat(),
        "stream_error" => [REPLY_FIELDS, &["after_chunks", "message"]].concat(),
        "empty" => vec![],
        _ => return None,
    };
    Some([COMMON_FIELDS, &extra].concat())
}

/// Parses a whole script; errors name the step (`step 3: ...`).
fn parse_script(text: &str) -> Result<Script, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let raw = match value {
        Value::Array(steps) => RawScript {
            steps,
            looped: false,
            on_exhausted: None,
        },
        Value::Object(_) => serde_json::from_value(value).map_err(|e| e.to_string())?,
        _ => return Err("a script is a JSON list of steps or an object with \"steps\"".into()),
    };
    let steps = raw
        .steps
        .iter()
        .enumerate()
        .map(|(i, v)| parse_step(v, &i.to_string()).map_err(|e| format!("step {i}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let on_exhausted = match &raw.on_exhausted {
        Some(v) => parse_step(v, "x").map_err(|e| format!("on_exhausted: {e}"))?,
        None => exhausted_step(),
    };
    Ok(Script {
        steps,
        looped: raw.looped,
        on_exhausted,
    })
}

fn exhausted_step() -> Step {
    Step {
        action: Action::Error {
            status: 500,
            body: ErrorBody::Json(json!({"error": {
                "message": "fake upstream: script exhausted",
                "type": "fake_script_exhausted",
                "param": null,
                "code": "script_exhausted",
            }})),
        },
        opts: default_opts(),
    }
}

fn default_opts() -> Opts {
    Opts {
        delay_ms: None,
        usage: None,
        finish_reason: None,
        model: None,
        chunk_size: DEFAULT_CHUNK_SIZE,
        chunk_delay_ms: 0,
        headers: Vec::new(),
    }
}

/// `label` names the step in generated tool-call ids (`call_<label>_<n>`).
fn parse_step(value: &Value, label: &str) -> Result<Step, String> {
    let obj = value.as_object().ok_or("a step is a JSON object")?;
    let kind = obj
        .get("type")
        .and_then(Value::as_str)
        .ok_or("missing \"type\"")?;
    let allowed = fields_for(kind).ok_or_else(|| format!("unknown step type {kind:?}"))?;
    if let Some(bad) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("field {bad:?} does not apply to a {kind:?} step"));
    }
    let raw: RawStep = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let opts = parse_opts(&raw)?;
    let action = match raw.kind.as_str() {
        "text" => match &raw.content {
            Some(Some(text)) => Action::Reply(Reply {
                content: Some(text.clone()),
                calls: Vec::new(),
            }),
            _ => return Err("a text step needs a string \"content\"".into()),
        },
        "tool_call" => {
            let reply = parse_reply(&raw, label, None)?;
            if reply.calls.is_empty() {
                return Err("a tool_call step needs \"command\" or a non-empty \"calls\"".into());
            }
            Action::Reply(reply)
        }
        "error" => {
            let status = raw.status.ok_or("an error step needs \"status\"")?;
            if !(100..=599).contains(&status) {
                return Err(format!("status {status} is not an HTTP status"));
            }
            let body = match &raw.body {
                None => ErrorBody::Json(json!({"error": {
                    "message": format!("scripted error {status}"),
                    "type": "scripted_error",
                    "param": null,
                    "code": null,
                }})),
                Some(Value::String(text)) => ErrorBody::Text(text.clone()),
                Some(other) => ErrorBody::Json(other.clone()),
            };
            Action::Error { status, body }
        }
        "drop" => Action::Drop {
            reply: parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?,
            after_chunks: raw.after_chunks.unwrap_or(DEFAULT_AFTER_CHUNKS),
        },
        "malformed" => Action::Malformed(parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?),
        "hang" => Action::Hang(parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?),
        "stream_error" => Action::StreamError {
            reply: parse_reply(&raw, label, Some(DEFAULT_FAULT_TEXT))?,
            after_chunks: raw.after_chunks.unwrap_or(1),
            message: raw
                .message
                .clone()
                .unwrap_or_else(|| "scripted in-band stream error".into()),
        },
        // fields_for() admitted only the kinds above.
        _ => Action::Empty,
    };
    Ok(Step { action, opts })
}

/// The reply of a `tool_call` or of a fault step; `default_text` applies when the step
/// names neither content nor calls.
fn parse_reply(raw: &RawStep, label: &str, default_text: Option<&str>) -> Result<Reply, String> {
    let mut calls = Vec::new();
    match (&raw.command, &raw.calls) {
        (Some(_), Some(_)) => return Err("give either \"command\" or \"calls\", not both".into()),
        (Some(command), None) => calls.push(ToolCall {
            id: raw.id.clone().unwrap_or_else(|| format!("call_{label}_0")),
            name: "bash".into(),
            arguments: python_json(&json!({ "command": command })),
        }),
        (None, Some(list)) => {
            if raw.id.is_some() {
                return Err("\"id\" goes inside each entry of \"calls\"".into());
            }
            for (n, call) in list.iter().enumerate() {
                calls.push(ToolCall {
                    id: call
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{label}_{n}")),
                    name: call.name.clone().unwrap_or_else(|| "bash".into()),
                    arguments: match &call.arguments {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => python_json(v),
                        None => "{}".into(),
                    },
                });
            }
        }
        (None, None) if raw.id.is_some() => return Err("\"id\" needs \"command\"".into()),
        (None, None) => {}
    }
    let content = match &raw.content {
        Some(c) => c.clone(),
        None if calls.is_empty() => default_text.map(String::from),
        None => None,
    };
    Ok(Reply { content, calls })
}

fn parse_opts(raw: &RawStep) -> Result<Opts, String> {
    let chunk_size = raw.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE);
    if chunk_size == 0 {
        return Err("chunk_size must be at least 1".into());
    }
    let mut headers = Vec::new();
    for (name, value) in raw.headers.iter().flatten() {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let is_token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !is_token || value.contains(['\r', '\n']) {
            return Err(format!("header {name:?} is not a valid HTTP header"));
        }
        headers.push((name.clone(), value));
    }
    Ok(Opts {
        delay_ms: raw.delay_ms,
        usage: raw.usage,
        finish_reason: raw.finish_reason.clone(),
        model: raw.model.clone(),
        chunk_size,
        chunk_delay_ms: raw.chunk_delay_ms.unwrap_or(0),
        headers,
    })
}

/// Serializes like Python's `json.dumps` defaults (`", "` and `": "` separators, non-ASCII
/// as `\uXXXX`), which is what real upstreams and LiteLLM put in arguments and error events.
fn python_json(value: &Value) -> String {
    struct PyFormatter;
    impl serde_json::ser::Formatter for PyFormatter {
        fn begin_array_value<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            w.write_all(b": ")
        }
        fn write_string_fragment<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            fragment: &str,
        ) -> io::Result<()> {
            for c in fragment.chars() {
                if c.is_ascii() {
                    w.write_all(&[c as u8])?;
                } else {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        write!(w, "\\u{unit:04x}")?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    match value.serialize(&mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_else(|_| value.to_string()),
        Err(_) => value.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Shared state

struct State {
    script: Script,
    /// Index of the next step to serve (wraps to 0 when the script loops).
    pos: usize,
    seq: u64,
    connections: u64,
    log: Vec<Value>,
    log_path: Option<PathBuf>,
    models: Vec<String>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicked handler cannot leave the state half-updated in a way that matters here.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// The step for the next chat request and its index (`None` when exhausted).
    fn next_step(&mut self) -> (Option<usize>, Step) {
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

    fn record(&mut self, req: &Request, step: Option<usize>) -> u64 {
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

    fn reset(&mut self, script: Option<Script>, keep_log: bool) {
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

fn now_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1, one request per connection

#[derive(Debug, PartialEq)]
struct Request {
    method: String,
    /// Path plus query string, as sent.
    target: String,
    /// Lower-case names, in arrival order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn query_flag(&self, key: &str) -> bool {
        let query = self.target.split_once('?').map(|(_, q)| q).unwrap_or("");
        query.split('&').any(|kv| match kv.split_once('=') {
            Some((k, v)) => k == key && matches!(v, "1" | "true" | "yes"),
            None => kv == key,
        })
    }
}

fn bad_request(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one request; `Ok(None)` when the peer closed before sending a byte. Malformed
/// requests are `InvalidData` errors, answered with 400 by the caller.
async fn read_request<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> io::Result<Option<Request>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(bad_request("request head too large"));
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "request head cut short",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| bad_request("request head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (method, target) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None)
            if !m.is_empty() && t.starts_with('/') && v.starts_with("HTTP/1.") =>
        {
            (m.to_string(), t.to_string())
        }
        _ => return Err(bad_request(&format!("bad request line {request_line:?}"))),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad_request(&format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut req = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if req.header("transfer-encoding").is_some() {
        return Err(bad_request(
            "chunked request bodies are not supported; send Content-Length",
        ));
    }
    let len: usize = match req.header("content-length") {
        Some(v) => v.parse().map_err(|_| bad_request("bad Content-Length"))?,
        None => 0,
    };
    if len > MAX_BODY_BYTES {
        return Err(bad_request("request body too large"));
    }
    let mut body = buf.split_off(head_end + 4);
    let expects_continue = req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if expects_continue && body.len() < len {
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        s.flush().await?;
    }
    while body.len() < len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "request body cut short",
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    req.body = body;
    Ok(Some(req))
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// A response head; `content_length: None` means a chunked body. A `Content-Type` among
/// `extra` replaces the default one.
fn response_head(
    status: u16,
    content_type: &str,
    extra: &[(String, String)],
    content_length: Option<usize>,
) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    if !extra
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    match content_length {
        Some(n) => head.push_str(&format!("Content-Length: {n}\r\n")),
        None => head.push_str("Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"),
    }
    head.push_str("Connection: close\r\nServer: scripted-llm\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

async fn send_full<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: u16,
    content_type: &str,
    extra: &[(String, String)],
    body: &[u8],
) -> io::Result<()> {
    let head = response_head(status, content_type, extra, Some(body.len()));
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    s.flush().await?;
    s.shutdown().await
}

async fn send_json<S: AsyncWrite + Unpin>(s: &mut S, status: u16, body: &Value) -> io::Result<()> {
    send_full(
        s,
        status,
        "application/json",
        &[],
        body.to_string().as_bytes(),
    )
    .await
}

/// Waits `dur` unless the client closes first; returns whether the wait completed.
async fn wait_or_disconnect<S: AsyncRead + Unpin>(s: &mut S, dur: Duration) -> bool {
    let sleep = tokio::time::sleep(dur);
    tokio::pin!(sleep);
    let mut scratch = [0u8; 1024];
    loop {
        tokio::select! {
            () = &mut sleep => return true,
            read = s.read(&mut scratch) => match read {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            },
        }
    }
}

fn is_control(path: &str) -> bool {
    path == "/health" || path.starts_with("/_fake/")
}

async fn handle_connection<S: AsyncRead + AsyncWrite + Unpin>(
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

async fn handle_control<S: AsyncRead + AsyncWrite + Unpin>(
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

// ---------------------------------------------------------------------------------------
// Chat completions

/// What one chat request asked for, as far as the reply depends on it.
#[derive(Debug, Clone, PartialEq)]
struct Exchange {
    id: String,
    created: u64,
    model: String,
    stream: bool,
    include_usage: bool,
    prompt_tokens: u64,
}

async fn handle_chat<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    state: &Mutex<State>,
    req: &Request,
) -> Result<(), BoxError> {
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        lock(state).record(req, None);
        let err = json!({"error": {"message": "scripted-llm: request body is not JSON", "type": "invalid_request_error", "param": null, "code": null}});
        send_json(s, 400, &err).await?;
        return Ok(());
    };
    let (index, step, seq) = {
        let mut st = lock(state);
        let (index, step) = st.next_step();
        let seq = st.record(req, index);
        (index, step, seq)
    };
    let exchange = Exchange {
        id: format!("chatcmpl-scripted-{seq}"),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        model: step
            .opts
            .model
            .clone()
            .or_else(|| body.get("model").and_then(Value::as_str).map(String::from))
            .unwrap_or_else(|| "scripted-llm".into()),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        prompt_tokens: (req.body.len() as u64).div_ceil(4),
    };
    let label = index.map_or_else(|| "exhausted".to_string(), |i| i.to_string());
    eprintln!(
        "scripted-llm: #{seq} {} {} -> step {label} {}{}",
        req.method,
        req.target,
        step.action.name(),
        if exchange.stream { " (stream)" } else { "" }
    );
    serve_step(s, &step, &exchange).await?;
    Ok(())
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Reply(r) if r.calls.is_empty() => "text",
            Action::Reply(_) => "tool_call",
            Action::Empty => "empty",
            Action::Error { .. } => "error",
            Action::Drop { .. } => "drop",
            Action::Malformed(_) => "malformed",
            Action::Hang(_) => "hang",
            Action::StreamError { .. } => "stream_error",
        }
    }
}

async fn serve_step<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    step: &Step,
    x: &Exchange,
) -> io::Result<()> {
    let opts = &step.opts;
    let delay = match step.action {
        Action::Hang(_) => opts.delay_ms.unwrap_or(DEFAULT_HANG_MS),
        _ => opts.delay_ms.unwrap_or(0),
    };
    if delay > 0 && !wait_or_disconnect(s, Duration::from_millis(delay)).await {
        eprintln!(
            "scripted-llm: {}: client closed during the {delay} ms wait",
            x.id
        );
        return Ok(());
    }
    match &step.action {
        Action::Error { status, body } => {
            let (content_type, bytes) = match body {
                ErrorBody::Json(v) => ("application/json", v.to_string().into_bytes()),
                ErrorBody::Text(t) if t.trim_start().starts_with('<') => {
                    ("text/html", t.clone().into_bytes())
                }
                ErrorBody::Text(t) => ("text/plain", t.clone().into_bytes()),
            };
            send_full(s, *status, content_type, &opts.headers, &bytes).await
        }
        Action::Reply(reply) | Action::Hang(reply) => {
            if x.stream {
                let mut frames = sse_frames(x, reply, opts);
                frames.push(DONE_FRAME.into());
                send_stream(s, opts, &frames, /*terminate*/ true).await
            } else {
                let body = completion(x, reply, opts).to_string();
                send_full(s, 200, "application/json", &opts.headers, body.as_bytes()).await
            }
        }
        Action::Empty => {
            let finish = opts.finish_reason.clone().unwrap_or_else(|| "stop".into());
            if x.stream {
                let frames = vec![
                    sse(&chunk(
                        x,
                        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
                    )),
                    DONE_FRAME.into(),
                ];
                send_stream(s, opts, &frames, /*terminate*/ true).await
            } else {
                let empty = Reply {
                    content: None,
                    calls: Vec::new(),
                };
                let body = completion(x, &empty, opts).to_string();
                send_full(s, 200, "application/json", &opts.headers, body.as_bytes()).await
            }
        }
        Action::Drop {
            reply,
            after_chunks,
        } => {
            if x.stream {
                let mut frames = sse_frames(x, reply, opts);
                frames.truncate(*after_chunks);
                send_stream(s, opts, &frames, /*terminate*/ false).await
            } else {
                let body = completion(x, reply, opts).to_string();
                let head = response_head(200, "application/json", &opts.headers, Some(body.len()));
                s.write_all(head.as_bytes()).await?;
                s.write_all(&body.as_bytes()[..body.len() / 2]).await?;
                s.flush().await?;
                s.shutdown().await
            }
        }
        Action::Malformed(reply) => {
            if x.stream {
                let mut frames = sse_frames(x, reply, opts);
                let at = frames.len().min(1);
                frames.insert(at, "data: {\"id\": \"broken\", \"choices\": [{\n\n".into());
                frames.push(DONE_FRAME.into());
                send_stream(s, opts, &frames, /*terminate*/ true).await
            } else {
                let body = completion(x, reply, opts).to_string();
                let mut cut = body.len() / 2;
                while !body.is_char_boundary(cut) {
                    cut -= 1;
                }
                send_full(
                    s,
                    200,
                    "application/json",
                    &opts.headers,
                    &body.as_bytes()[..cut],
                )
                .await
            }
        }
        Action::StreamError {
            reply,
            after_chunks,
            message,
        } => {
            if x.stream {
                let mut frames = sse_frames(x, reply, opts);
                frames.truncate(*after_chunks);
                frames.push(format!(
                    "data: {}\n\n",
                    python_json(&stream_error_event(message))
                ));
                send_stream(s, opts, &frames, /*terminate*/ true).await
            } else {
                let body = json!({"error": {"message": message, "type": "internal_server_error", "param": null, "code": "500"}});
                send_full(
                    s,
                    500,
                    "application/json",
                    &opts.headers,
                    body.to_string().as_bytes(),
                )
                .await
            }
        }
    }
}

const DONE_FRAME: &str = "data: [DONE]\n\n";

/// The in-band error LiteLLM sends when a stream fails after its first byte.
fn stream_error_event(message: &str) -> Value {
    json!({"error": {"message": message, "type": null, "param": null, "code": "500"}})
}

/// Sends `frames` as one HTTP chunk each; `terminate: false` leaves the chunked body open
/// (a dropped connection).
async fn send_stream<S: AsyncWrite + Unpin>(
    s: &mut S,
    opts: &Opts,
    frames: &[String],
    terminate: bool,
) -> io::Result<()> {
    let head = response_head(200, "text/event-stream", &opts.headers, None);
    s.write_all(head.as_bytes()).await?;
    s.flush().await?;
    for (i, frame) in frames.iter().enumerate() {
        if i > 0 && opts.chunk_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(opts.chunk_delay_ms)).await;
        }
        s.write_all(format!("{:x}\r\n{frame}\r\n", frame.len()).as_bytes())
            .await?;
        s.flush().await?;
    }
    if terminate {
        s.write_all(b"0\r\n\r\n").await?;
    }
    s.flush().await?;
    s.shutdown().await
}

fn message(reply: &Reply) -> Value {
    let mut msg = json!({"role": "assistant", "content": reply.content});
    if !reply.calls.is_empty() {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        msg["tool_calls"] = Value::Array(calls);
    }
    msg
}

fn finish_reason(reply: &Reply, opts: &Opts) -> String {
    opts.finish_reason.clone().unwrap_or_else(|| {
        if reply.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .to_string()
    })
}

fn usage(x: &Exchange, reply: &Reply, opts: &Opts) -> Value {
    let (prompt, completion) = match opts.usage {
        Some(u) => (u.prompt_tokens, u.completion_tokens),
        None => (
            x.prompt_tokens,
            (message(reply).to_string().len() as u64).div_ceil(4),
        ),
    };
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// A non-streamed `chat.completion` body.
fn completion(x: &Exchange, reply: &Reply, opts: &Opts) -> Value {
    json!({
        "id": x.id,
        "object": "chat.completion",
        "created": x.created,
        "model": x.model,
        "system_fingerprint": "fp_scripted",
        "choices": [{
            "index": 0,
            "message": message(reply),
            "finish_reason": finish_reason(reply, opts),
            "logprobs": null,
        }],
        "usage": usage(x, reply, opts),
    })
}

fn chunk(x: &Exchange, choices: Value) -> Value {
    json!({
        "id": x.id,
        "object": "chat.completion.chunk",
        "created": x.created,
        "model": x.model,
        "system_fingerprint": "fp_scripted",
        "choices": choices,
    })
}

fn sse(event: &Value) -> String {
    format!("data: {event}\n\n")
}

/// Splits on char boundaries, so multi-byte text is never cut inside a character.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The SSE events of a complete streamed reply, without `[DONE]`: a role chunk, content
/// pieces, tool-call deltas, the finish chunk, and the usage chunk when asked for.
fn sse_frames(x: &Exchange, reply: &Reply, opts: &Opts) -> Vec<String> {
    let delta = |d: Value| {
        sse(&chunk(
            x,
            json!([{"index": 0, "delta": d, "finish_reason": null}]),
        ))
    };
    let mut frames = vec![delta(
        json!({"role": "assistant", "content": if reply.content.is_some() { json!("") } else { Value::Null }}),
    )];
    for piece in pieces(reply.content.as_deref().unwrap_or(""), opts.chunk_size) {
        frames.push(delta(json!({"content": piece})));
    }
    for (index, call) in reply.calls.iter().enumerate() {
        frames.push(delta(json!({"tool_calls": [{"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]})));
        for piece in pieces(&call.arguments, opts.chunk_size) {
            frames.push(delta(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
            ));
        }
    }
    frames.push(sse(&chunk(
        x,
        json!([{"index": 0, "delta": {}, "finish_reason": finish_reason(reply, opts)}]),
    )));
    if x.include_usage {
        let mut last = chunk(x, json!([]));
        last["usage"] = usage(x, reply, opts);
        frames.push(sse(&last));
    }
    frames
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn step(v: Value) -> Step {
        parse_step(&v, "0").unwrap()
    }

    fn exchange(include_usage: bool) -> Exchange {
        Exchange {
            id: "chatcmpl-scripted-1".into(),
            created: 1,
            model: "glm-5.3".into(),
            stream: true,
            include_usage,
            prompt_tokens: 10,
        }
    }

    /// The JSON events of a frame list; `[DONE]` and broken events come back as strings.
    fn events(frames: &[String]) -> Vec<Value> {
        frames
            .iter()
            .map(|f| {
                let data = f
                    .strip_prefix("data: ")
                    .unwrap()
                    .strip_suffix("\n\n")
                    .unwrap();
                serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into()))
            })
            .collect()
    }

    #[test]
    fn command_step_is_one_bash_call_in_python_json() {
        let s = step(json!({"type": "tool_call", "command": "ls -la", "id": "call_1"}));
        assert_eq!(
            s.action,
            Action::Reply(Reply {
                content: None,
                calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\": \"ls -la\"}".into()
                }],
            })
        );
        assert_eq!(s.opts, default_opts());
    }

    #[test]
    fn calls_keep_raw_string_arguments_and_default_ids() {
        let s = step(json!({"type": "tool_call", "content": "two", "calls": [
            {"name": "bash", "arguments": {"command": "é", "timeout": 5}},
            {"arguments": "{\"command\": \"ls"},
        ]}));
        let Action::Reply(reply) = s.action else {
            panic!("not a reply")
        };
        assert_eq!(reply.content.as_deref(), Some("two"));
        assert_eq!(
            reply.calls[0].arguments,
            "{\"command\": \"\\u00e9\", \"timeout\": 5}"
        );
        assert_eq!(
            reply.calls[1],
            ToolCall {
                id: "call_0_1".into(),
                name: "bash".into(),
                arguments: "{\"command\": \"ls".into()
            }
        );
    }

    #[test]
    fn list_and_object_scripts() {
        let list = parse_script(r#"[{"type":"text","content":"hi"}]"#).unwrap();
        assert!(!list.looped);
        assert_eq!(list.on_exhausted, exhausted_step());
        let obj = parse_script(r#"{"steps":[{"type":"empty"}],"loop":true,"on_exhausted":{"type":"error","status":503,"body":"down"}}"#).unwrap();
        assert!(obj.looped);
        assert_eq!(obj.steps[0].action, Action::Empty);
        assert_eq!(
            obj.on_exhausted.action,
            Action::Error {
                status: 503,
                body: ErrorBody::Text("down".into())
            }
        );
    }

    #[test]
    fn every_step_type_and_option_parses() {
        let s = step(
            json!({"type": "error", "status": 429, "headers": {"Retry-After": "2", "x-n": 3}, "body": {"error": {"message": "slow down"}}, "delay_ms": 5}),
        );
        assert_eq!(
            s.opts.headers,
            vec![
                ("Retry-After".into(), "2".into()),
                ("x-n".into(), "3".into())
            ]
        );
        assert_eq!(s.opts.delay_ms, Some(5));
        let s = step(
            json!({"type": "text", "content": "x", "usage": {"prompt_tokens": 1, "completion_tokens": 2}, "finish_reason": "length", "model": "m", "chunk_size": 3, "chunk_delay_ms": 4, "headers": {"x-litellm-response-cost": "0.5"}}),
        );
        assert_eq!(
            s.opts,
            Opts {
                delay_ms: None,
                usage: Some(Usage {
                    prompt_tokens: 1,
                    completion_tokens: 2
                }),
                finish_reason: Some("length".into()),
                model: Some("m".into()),
                chunk_size: 3,
                chunk_delay_ms: 4,
                headers: vec![("x-litellm-response-cost".into(), "0.5".into())],
            }
        );
        assert!(matches!(
            step(json!({"type": "drop"})).action,
            Action::Drop {
                after_chunks: 2,
                ..
            }
        ));
        assert!(matches!(
            step(json!({"type": "drop", "command": "ls", "after_chunks": 4})).action,
            Action::Drop {
                after_chunks: 4,
                ..
            }
        ));
        assert!(matches!(
            step(json!({"type": "malformed"})).action,
            Action::Malformed(_)
        ));
        assert!(matches!(
            step(json!({"type": "hang", "delay_ms": 10})).action,
            Action::Hang(_)
        ));
        assert_eq!(
            step(json!({"type": "stream_error", "after_chunks": 3, "message": "boom"})).action,
            Action::StreamError {
                reply: Reply {
                    content: Some(DEFAULT_FAULT_TEXT.into()),
                    calls: vec![]
                },
                after_chunks: 3,
                message: "boom".into()
            }
        );
    }

    #[test]
    fn script_errors_name_the_step_and_the_problem() {
        let cases = [
            (
                r#"[{"type":"text"}]"#,
                "step 0: a text step needs a string \"content\"",
            ),
            (
                r#"[{"type":"text","content":"a"},{"type":"txt"}]"#,
                "step 1: unknown step type \"txt\"",
            ),
            (
                r#"[{"type":"text","content":"a","status":500}]"#,
                "step 0: field \"status\" does not apply to a \"text\" step",
            ),
            (
                r#"[{"type":"tool_call"}]"#,
                "step 0: a tool_call step needs \"command\" or a non-empty \"calls\"",
            ),
            (
                r#"[{"type":"tool_call","command":"ls","calls":[]}]"#,
                "step 0: give either \"command\" or \"calls\", not both",
            ),
            (
                r#"[{"type":"error"}]"#,
                "step 0: an error step needs \"status\"",
            ),
            (
                r#"[{"type":"error","status":42}]"#,
                "step 0: status 42 is not an HTTP status",
            ),
            (
                r#"[{"type":"text","content":"a","chunk_size":0}]"#,
                "step 0: chunk_size must be at least 1",
            ),
            (
                r#"[{"type":"text","content":"a","headers":{"a b":"c"}}]"#,
                "step 0: header \"a b\" is not a valid HTTP header",
            ),
            (
                r#"{"steps":[],"lop":true}"#,
                "unknown field `lop`, expected one of `steps`, `loop`, `on_exhausted`",
            ),
            (
                r#"{"steps":[],"on_exhausted":{"type":"nope"}}"#,
                "on_exhausted: unknown step type \"nope\"",
            ),
            (
                "42",
                "a script is a JSON list of steps or an object with \"steps\"",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_script(text).unwrap_err(), want, "{text}");
        }
        assert!(
            parse_script(r#"[{"type":"tool_call","calls":[{"name":"x","args":{}}]}]"#)
                .unwrap_err()
                .contains("unknown field `args`")
        );
    }

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

    #[test]
    fn text_stream_is_role_pieces_finish_usage() {
        let reply = Reply {
            content: Some("héllo wörld".into()),
            calls: vec![],
        };
        let opts = Opts {
            chunk_size: 4,
            ..default_opts()
        };
        let ev = events(&sse_frames(&exchange(true), &reply, &opts));
        assert_eq!(
            ev[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        let text: Vec<&str> = ev[1..4]
            .iter()
            .map(|e| e["choices"][0]["delta"]["content"].as_str().unwrap())
            .collect();
        assert_eq!(text, vec!["héll", "o wö", "rld"]);
        assert_eq!(
            ev[4]["choices"],
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        );
        assert_eq!(ev[5]["choices"], json!([]));
        assert_eq!(ev[5]["usage"]["prompt_tokens"], 10);
        assert_eq!(ev.len(), 6);
        assert!(ev
            .iter()
            .all(|e| e["object"] == "chat.completion.chunk" && e["id"] == "chatcmpl-scripted-1"));
        // Without include_usage there is no usage chunk.
        assert_eq!(sse_frames(&exchange(false), &reply, &opts).len(), 5);
    }

    #[test]
    fn tool_call_stream_sends_id_and_name_once_then_fragments() {
        let s = step(json!({"type": "tool_call", "calls": [
            {"id": "a", "arguments": {"command": "echo hi"}},
            {"id": "b", "name": "other", "arguments": "{}"},
        ], "chunk_size": 5, "usage": {"prompt_tokens": 7, "completion_tokens": 3}}));
        let Action::Reply(reply) = &s.action else {
            panic!("not a reply")
        };
        let ev = events(&sse_frames(&exchange(true), reply, &s.opts));
        assert_eq!(
            ev[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": null})
        );
        assert_eq!(
            ev[1]["choices"][0]["delta"],
            json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": ""}}]})
        );
        let mut args = [String::new(), String::new()];
        for e in &ev[1..ev.len() - 2] {
            let tc = &e["choices"][0]["delta"]["tool_calls"][0];
            let i = tc["index"].as_u64().unwrap() as usize;
            if tc.get("id").is_none() {
                assert_eq!(
                    tc.as_object().unwrap().len(),
                    2,
                    "fragment carries index and arguments only: {tc}"
                );
            }
            args[i].push_str(tc["function"]["arguments"].as_str().unwrap());
        }
        assert_eq!(
            args,
            ["{\"command\": \"echo hi\"}".to_string(), "{}".to_string()]
        );
        assert_eq!(
            ev[ev.len() - 2]["choices"][0]["finish_reason"],
            "tool_calls"
        );
        assert_eq!(
            ev[ev.len() - 1]["usage"],
            json!({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
        );
    }

    #[test]
    fn completion_body_shapes() {
        let x = Exchange {
            stream: false,
            ..exchange(false)
        };
        let body = completion(
            &x,
            &Reply {
                content: None,
                calls: vec![],
            },
            &default_opts(),
        );
        assert_eq!(
            body["choices"][0]["message"],
            json!({"role": "assistant", "content": null})
        );
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        let s = step(json!({"type": "tool_call", "command": "ls", "id": "c"}));
        let Action::Reply(reply) = &s.action else {
            panic!("not a reply")
        };
        let body = completion(&x, reply, &s.opts);
        assert_eq!(
            body["choices"][0]["message"]["tool_calls"],
            json!([{"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}])
        );
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn python_json_matches_json_dumps() {
        assert_eq!(
            python_json(&json!({"b": [1, 2], "a": {"x": "ü😀"}})),
            r#"{"a": {"x": "\u00fc\ud83d\ude00"}, "b": [1, 2]}"#
        );
        assert_eq!(
            python_json(&stream_error_event("boom")),
            r#"{"error": {"code": "500", "message": "boom", "param": null, "type": null}}"#
        );
    }

    #[tokio::test]
    async fn reads_a_request_with_body_and_answers_expect_continue() {
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        client
            .write_all(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n")
            .await
            .unwrap();
        let reader = tokio::spawn(async move { read_request(&mut server).await.unwrap().unwrap() });
        let mut buf = [0u8; 25];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 100 Continue\r\n\r\n");
        client.write_all(b"{\"a\":1}").await.unwrap();
        let req = reader.await.unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path(), "/v1/chat/completions");
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(req.body, b"{\"a\":1}");
    }

    #[tokio::test]
    async fn rejects_bad_requests_and_reports_silent_closes() {
        let (mut a, mut b) = tokio::io::duplex(64);
        drop(a.shutdown().await);
        assert_eq!(read_request(&mut b).await.unwrap(), None);
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(b"garbage\r\n\r\n").await.unwrap();
        assert_eq!(
            read_request(&mut b).await.unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn query_flags_and_args() {
        let req = Request {
            method: "POST".into(),
            target: "/_fake/reset?keep_log=1".into(),
            headers: vec![],
            body: vec![],
        };
        assert!(req.query_flag("keep_log"));
        let args = parse_args(
            ["--script", "s.json", "--port=9", "--models", "a, b"]
                .map(String::from)
                .into_iter(),
        )
        .unwrap();
        assert_eq!(args.port, 9);
        assert_eq!(args.models, vec!["a".to_string(), "b".to_string()]);
        assert!(parse_args(
            ["--script", "s", "--host", "0.0.0.0"]
                .map(String::from)
                .into_iter()
        )
        .unwrap_err()
        .contains("not a loopback"));
        assert!(parse_args(
            ["--script", "s", "--host", "::1"]
                .map(String::from)
                .into_iter()
        )
        .is_ok());
    }
}
