//! Chat completions: one scripted step served as a full body or an SSE stream, with faults.
//! I/O: the socket.

use crate::http::{response_head, send_full, send_json, wait_or_disconnect, Request};
use crate::script::{python_json, Action, ErrorBody, Opts, Reply, Step};
use crate::state::{lock, State};
use crate::BoxError;
use serde_json::{json, Map, Value};
use std::io;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

pub(crate) const DEFAULT_HANG_MS: u64 = 3_600_000;

/// What one chat request asked for, as far as the reply depends on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exchange {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) prompt_tokens: u64,
}

pub(crate) async fn handle_chat<S: AsyncRead + AsyncWrite + Unpin>(
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
    if let Some(why) = content_parts_problem(&body) {
        lock(state).record(req, None);
        eprintln!("scripted-llm: refusing the request: {why}");
        let err = json!({"error": {"message": format!("scripted-llm: {why}"), "type": "invalid_request_error", "param": "messages", "code": "content_parts"}});
        send_json(s, 400, &err).await?;
        return Ok(());
    }
    let strict = lock(state).script.strict_tool_results;
    if let Some(why) = strict.then(|| tool_results_problem(&body)).flatten() {
        lock(state).record(req, None);
        eprintln!("scripted-llm: refusing the request: {why}");
        let err = json!({"error": {"message": format!("scripted-llm: {why}"), "type": "invalid_request_error", "param": "messages", "code": "tool_results"}});
        send_json(s, 400, &err).await?;
        return Ok(());
    }
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

/// Why a message's content parts are not what the OpenAI API accepts, if they are not: a
/// `content` array holds objects `{"type":"text","text":<string>}` or `{"type":"image_url",
/// "image_url":{"url":<data: or http(s) URL>}}`, and only a user message carries images.
pub(crate) fn content_parts_problem(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    for (i, m) in messages.iter().enumerate() {
        let Some(parts) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        for (j, p) in parts.iter().enumerate() {
            let at = format!("message {i} content part {j}");
            match p.get("type").and_then(Value::as_str) {
                Some("text") if p.get("text").is_some_and(Value::is_string) => {}
                Some("text") => return Some(format!("{at}: a text part needs a string \"text\"")),
                Some("image_url") if role != "user" => {
                    return Some(format!("{at}: a {role} message cannot carry an image"))
                }
                Some("image_url") => {
                    let url = p.pointer("/image_url/url").and_then(Value::as_str);
                    let ok = url.is_some_and(|u| {
                        u.starts_with("data:image/") && u.contains(";base64,")
                            || u.starts_with("https://")
                            || u.starts_with("http://")
                    });
                    if !ok {
                        return Some(format!(
                            "{at}: an image_url part needs \"image_url\": {{\"url\": a data:image/...;base64, or http(s) URL}}"
                        ));
                    }
                }
                other => return Some(format!("{at}: unknown part type {other:?}")),
            }
        }
    }
    None
}

/// Why the request's messages do not answer every tool call exactly once, if they do not:
/// each `tool` message must answer a call of the assistant message before it that is still
/// open, and every call must be answered before the next non-tool message (or the end).
pub(crate) fn tool_results_problem(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            match open.iter().position(|o| o == id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Some(format!(
                        "message {i} answers tool call {id:?}, which is not an open call (answered twice, or never made)"
                    ))
                }
            }
            continue;
        }
        if let Some(id) = open.first() {
            return Some(format!("tool call {id:?} has no result before message {i}"));
        }
        if role == "assistant" {
            open = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .filter_map(|c| c.get("id").and_then(Value::as_str).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
        }
    }
    open.first()
        .map(|id| format!("tool call {id:?} has no result at the end of the messages"))
}

impl Action {
    pub(crate) fn name(&self) -> &'static str {
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

pub(crate) async fn serve_step<S: AsyncRead + AsyncWrite + Unpin>(
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
        Action::Empty => send_empty(s, x, opts).await,
        Action::Drop {
            reply,
            after_chunks,
        } => send_dropped(s, x, reply, *after_chunks, opts).await,
        Action::Malformed(reply) => send_malformed(s, x, reply, opts).await,
        Action::StreamError {
            reply,
            after_chunks,
            message,
        } => send_stream_error(s, x, reply, *after_chunks, message, opts).await,
    }
}

/// `empty`: a reply with no content and no tool call, finished as `finish_reason` says
/// (`stop` by default).
async fn send_empty<S: AsyncWrite + Unpin>(s: &mut S, x: &Exchange, opts: &Opts) -> io::Result<()> {
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
            reasoning: Map::new(),
        };
        let body = completion(x, &empty, opts).to_string();
        send_full(s, 200, "application/json", &opts.headers, body.as_bytes()).await
    }
}

/// `drop`: the connection closed mid-reply, after `after_chunks` frames of a stream or half
/// of a full body.
async fn send_dropped<S: AsyncWrite + Unpin>(
    s: &mut S,
    x: &Exchange,
    reply: &Reply,
    after_chunks: usize,
    opts: &Opts,
) -> io::Result<()> {
    if x.stream {
        let mut frames = sse_frames(x, reply, opts);
        frames.truncate(after_chunks);
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

/// `malformed`: a stream with a broken frame after its first, or the first half of a full
/// body (cut on a character boundary).
async fn send_malformed<S: AsyncWrite + Unpin>(
    s: &mut S,
    x: &Exchange,
    reply: &Reply,
    opts: &Opts,
) -> io::Result<()> {
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

/// `stream_error`: LiteLLM's in-band error after the first `after_chunks` frames of the
/// reply's stream; without a stream, a 500 with the message.
async fn send_stream_error<S: AsyncWrite + Unpin>(
    s: &mut S,
    x: &Exchange,
    reply: &Reply,
    after_chunks: usize,
    message: &str,
    opts: &Opts,
) -> io::Result<()> {
    if x.stream {
        let mut frames = sse_frames(x, reply, opts);
        frames.truncate(after_chunks);
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

pub(crate) const DONE_FRAME: &str = "data: [DONE]\n\n";

/// The in-band error LiteLLM sends when a stream fails after its first byte.
pub(crate) fn stream_error_event(message: &str) -> Value {
    json!({"error": {"message": message, "type": null, "param": null, "code": "500"}})
}

/// Sends `frames` as one HTTP chunk each; `terminate: false` leaves the chunked body open
/// (a dropped connection).
pub(crate) async fn send_stream<S: AsyncWrite + Unpin>(
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

pub(crate) fn message(reply: &Reply) -> Value {
    let mut msg = json!({"role": "assistant", "content": reply.content});
    if !reply.calls.is_empty() {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        msg["tool_calls"] = Value::Array(calls);
    }
    for (k, v) in &reply.reasoning {
        msg[k] = v.clone();
    }
    msg
}

pub(crate) fn finish_reason(reply: &Reply, opts: &Opts) -> String {
    opts.finish_reason.clone().unwrap_or_else(|| {
        if reply.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .to_string()
    })
}

pub(crate) fn usage(x: &Exchange, reply: &Reply, opts: &Opts) -> Value {
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
pub(crate) fn completion(x: &Exchange, reply: &Reply, opts: &Opts) -> Value {
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

pub(crate) fn chunk(x: &Exchange, choices: Value) -> Value {
    json!({
        "id": x.id,
        "object": "chat.completion.chunk",
        "created": x.created,
        "model": x.model,
        "system_fingerprint": "fp_scripted",
        "choices": choices,
    })
}

pub(crate) fn sse(event: &Value) -> String {
    format!("data: {event}\n\n")
}

/// Splits on char boundaries, so multi-byte text is never cut inside a character.
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// The SSE events of a complete streamed reply, without `[DONE]`: a role chunk, content
/// pieces, tool-call deltas, the finish chunk, and the usage chunk when asked for.
pub(crate) fn sse_frames(x: &Exchange, reply: &Reply, opts: &Opts) -> Vec<String> {
    let delta = |d: Value| {
        sse(&chunk(
            x,
            json!([{"index": 0, "delta": d, "finish_reason": null}]),
        ))
    };
    let mut frames = vec![delta(
        json!({"role": "assistant", "content": if reply.content.is_some() { json!("") } else { Value::Null }}),
    )];
    // Reasoning comes first, as LiteLLM streams it: strings in pieces, each thinking block
    // as its text in pieces then its signature (`redacted_thinking` blocks whole).
    for (field, value) in &reply.reasoning {
        match (field.as_str(), value) {
            (_, Value::String(text)) => {
                for piece in pieces(text, opts.chunk_size) {
                    frames.push(delta(json!({ field: piece })));
                }
            }
            ("thinking_blocks", Value::Array(blocks)) => {
                for block in blocks {
                    if block["type"] != "thinking" {
                        frames.push(delta(json!({ field: [block] })));
                        continue;
                    }
                    let text = block["thinking"].as_str().unwrap_or_default();
                    for piece in pieces(text, opts.chunk_size) {
                        frames.push(delta(json!({ field: [
                            {"type": "thinking", "thinking": piece, "signature": null}
                        ] })));
                    }
                    frames.push(delta(json!({ field: [
                        {"type": "thinking", "thinking": "", "signature": block["signature"]}
                    ] })));
                }
            }
            _ => frames.push(delta(json!({ field: value }))),
        }
    }
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
    use crate::script::{default_opts, parse_step};
    fn step(v: Value) -> Step {
        parse_step(&v, "0").unwrap()
    }

    #[test]
    fn strict_mode_wants_every_tool_call_answered_once() {
        let call = |ids: &[&str]| json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}})).collect::<Vec<_>>()});
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
        let user = json!({"role": "user", "content": "go"});
        let body = |m: Vec<Value>| json!({"messages": m});
        assert_eq!(
            tool_results_problem(&body(vec![
                user.clone(),
                call(&["a", "b"]),
                result("b"),
                result("a"),
                user.clone()
            ])),
            None
        );
        for (messages, want) in [
            (
                vec![user.clone(), call(&["a"]), user.clone()],
                "tool call \"a\" has no result before message 2",
            ),
            (
                vec![call(&["a"]), result("a"), result("a")],
                "message 2 answers tool call \"a\", which is not an open call",
            ),
            (
                vec![user.clone(), result("x")],
                "message 1 answers tool call \"x\"",
            ),
            (
                vec![user.clone(), call(&["a"])],
                "tool call \"a\" has no result at the end",
            ),
        ] {
            let why = tool_results_problem(&body(messages)).unwrap();
            assert!(why.starts_with(want), "{why}");
        }
    }

    #[test]
    fn content_parts_are_checked_as_the_api_does() {
        let body =
            |content: Value, role: &str| json!({"messages": [{"role": role, "content": content}]});
        let image =
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}});
        let text = json!({"type": "text", "text": "look"});
        assert_eq!(
            content_parts_problem(&body(json!([text, image]), "user")),
            None
        );
        assert_eq!(content_parts_problem(&body(json!("plain"), "user")), None);
        for (content, role, want) in [
            (
                json!([image]),
                "tool",
                "message 0 content part 0: a tool message cannot carry an image",
            ),
            (
                json!([{"type": "text"}]),
                "user",
                "message 0 content part 0: a text part needs",
            ),
            (
                json!([{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]),
                "user",
                "message 0 content part 0: an image_url part needs",
            ),
            (
                json!([{"type": "audio"}]),
                "user",
                "message 0 content part 0: unknown part type Some(\"audio\")",
            ),
        ] {
            let why = content_parts_problem(&body(content, role)).unwrap();
            assert!(why.starts_with(want), "{why}");
        }
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
    fn text_stream_is_role_pieces_finish_usage() {
        let reply = Reply {
            content: Some("héllo wörld".into()),
            calls: vec![],
            reasoning: Map::new(),
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
    fn reasoning_streams_first_in_litellm_deltas() {
        let s = step(
            json!({"type": "text", "content": "ok", "chunk_size": 3, "reasoning": {
                "reasoning_content": "abcdef",
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
                    {"type": "redacted_thinking", "data": "XYZ"},
                ],
            }}),
        );
        let Action::Reply(reply) = &s.action else {
            panic!("not a reply")
        };
        let ev = events(&sse_frames(&exchange(false), reply, &s.opts));
        let deltas: Vec<Value> = ev[1..6]
            .iter()
            .map(|e| e["choices"][0]["delta"].clone())
            .collect();
        assert_eq!(
            deltas,
            vec![
                json!({"reasoning_content": "abc"}),
                json!({"reasoning_content": "def"}),
                json!({"thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": null}]}),
                json!({"thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "SIG"}]}),
                json!({"thinking_blocks": [{"type": "redacted_thinking", "data": "XYZ"}]}),
            ]
        );
        assert_eq!(ev[6]["choices"][0]["delta"], json!({"content": "ok"}));
        let full = completion(&exchange(false), reply, &s.opts);
        assert_eq!(full["choices"][0]["message"]["reasoning_content"], "abcdef");
        assert_eq!(
            full["choices"][0]["message"]["thinking_blocks"][1]["data"],
            "XYZ"
        );
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
                reasoning: Map::new(),
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
}
