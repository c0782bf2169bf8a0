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
//! Script: a JSON list of steps, or `{"steps":[...], "loop":false, "on_exhausted":STEP,
//! "strict_tool_results":false}`. When the script runs out (and `loop` is false) every
//! further chat request gets `on_exhausted`, by default
//! `500 {"error":{..,"code":"script_exhausted"}}`. With `strict_tool_results`, a chat
//! request whose messages do not answer every assistant tool call exactly once (a `tool`
//! message per call id, right after the assistant message, none for an unknown id) is
//! refused as real endpoints do: `400 {"error":{..,"code":"tool_results"}}`, logged, no step
//! consumed. A message whose `content` is an array of content parts is checked as the
//! OpenAI API checks it (text parts `{"type":"text","text":..}`, image parts
//! `{"type":"image_url","image_url":{"url":"data:image/...;base64,.."}}` in user messages
//! only): a malformed one is refused with `400 {"error":{..,"code":"content_parts"}}`, logged,
//! no step consumed; a well-formed one is logged as sent, so a test reads the parts back
//! from `GET /_fake/requests`.
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
//! reply they cut or delay. Replies (`text`, `tool_call` and those) take `reasoning`, an
//! object of provider fields for the message (`{"reasoning_content": "..", "thinking_blocks":
//! [{"type":"thinking","thinking":"..","signature":".."}]}`): sent as they are, or streamed
//! before the content as LiteLLM streams them (a string in `chunk_size` pieces; each thinking
//! block as `thinking_blocks: [{"type":"thinking","thinking":<piece>,"signature":null}]`
//! deltas, then one with `"thinking":""` and its signature; other values in one delta). Optional on every step: `delay_ms` (before answering), `usage`
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
//!
//! Layout, along the data flow: `args` (argv -> `Args`), `script` (JSON -> validated steps),
//! `server` (accept loop, routing, control endpoints), `http` (request in, response head out),
//! `chat` (one step -> a full or streamed reply, faults included), `state` (position, counters,
//! request log); `in_process` ([`Server`]) serves a script on a thread of the calling
//! process, which is how the integration tests use it. The binary (`main.rs`) only calls [`run`].

mod args;
mod chat;
mod http;
mod in_process;
mod script;
mod server;
mod state;

pub use in_process::Server;
pub use server::run;

/// The error type at the edges: every failure is reported as one line and exit code 2.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
