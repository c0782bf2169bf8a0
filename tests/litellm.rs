//! Integration tests of `harness once` and `harness check` through a REAL LiteLLM proxy
//! (1.108.7) in front of the scripted upstream, for every fault the proxy can hand the client,
//! streamed and not, plus cost, budgets, fallback and the preflight.
//!
//! `scripts/test.sh` starts the proxy (`scripts/litellm-up.sh`) and exports LITELLM_BASE_URL,
//! LITELLM_KEY, SCRIPTED_LLM_URL and HARNESS_TEST_LITELLM=1; it also starts the proxy with the
//! custom-auth keys `sk-harness-user` and `sk-harness-spent:0` (LITELLM_TEST_KEYS). Without
//! HARNESS_TEST_LITELLM the test says loudly that it skipped, and under CI=true it fails.
//!
//! The scenarios share one proxy and one upstream script, so they run in sequence inside one
//! `#[test]`; each re-scripts the upstream with `POST $SCRIPTED_LLM_URL/_fake/reset`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// The custom-auth key whose budget is spent (see the module doc).
const SPENT_KEY: &str = "sk-harness-spent";

struct Proxy {
    base_url: String,
    key: String,
    upstream: String,
}

impl Proxy {
    fn from_env() -> Option<Proxy> {
        if std::env::var("HARNESS_TEST_LITELLM").ok().as_deref() != Some("1") {
            skip(
                "real LiteLLM tests (tests/litellm.rs)",
                "HARNESS_TEST_LITELLM is not set; scripts/test.sh starts a real LiteLLM proxy and sets it",
            );
            return None;
        }
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
        Some(Proxy {
            base_url: var("LITELLM_BASE_URL"),
            key: var("LITELLM_KEY"),
            upstream: var("SCRIPTED_LLM_URL"),
        })
    }

    /// Loads a new upstream script (rewinds it and clears the request log).
    fn script(&self, steps: Value) {
        let (status, body) = http(
            "POST",
            &format!("{}/_fake/reset", self.upstream),
            &[("Content-Type", "application/json")],
            Some(&steps.to_string()),
        );
        assert_eq!(status, 200, "upstream rejected the script: {body}");
    }

    /// The chat requests the upstream received, in order.
    fn upstream_chats(&self) -> Vec<Value> {
        chat_bodies_at(&self.upstream)
    }

    fn workspace(&self, edit: impl FnOnce(String) -> String) -> Workspace {
        Workspace::new(&self.base_url, edit)
    }

    /// `harness ARGS` with the proxy's master key.
    fn run(&self, ws: &Workspace, args: &[&str]) -> Run {
        self.run_key(ws, args, &self.key)
    }

    fn run_key(&self, ws: &Workspace, args: &[&str], key: &str) -> Run {
        let run = ws.run_env(args, &[("HARNESS_TEST_LLM_KEY", key)]);
        eprintln!("--- harness {args:?}: exit {}\n{}", run.code, run.stderr);
        run
    }
}

/// A named step of the one sequential test.
type Scenario = (&'static str, fn(&Proxy));

fn streaming(c: String) -> String {
    c.replace("max_retries = 2\n", "max_retries = 2\nstreaming = true\n")
}

fn retries(n: u32) -> impl Fn(String) -> String {
    move |c: String| c.replace("max_retries = 2", &format!("max_retries = {n}"))
}

fn chain(c: String, models: &str) -> String {
    c.replace(
        "mopac-primary = \"glm-5.3\"",
        &format!("mopac-primary = {models}"),
    )
}

fn usage(step: Value) -> Value {
    let mut s = step;
    s["usage"] = json!({"prompt_tokens": 1000, "completion_tokens": 500});
    s
}

fn error_text(report: &str) -> String {
    front(report, "error").as_str().unwrap_or("").to_string()
}

#[test]
fn without_the_proxy_ci_fails_and_a_plain_run_says_skipped() {
    assert_skips_loudly(
        "litellm::through_a_real_litellm_proxy",
        "HARNESS_TEST_LITELLM",
    );
}

#[test]
fn through_a_real_litellm_proxy() {
    let Some(p) = Proxy::from_env() else {
        return;
    };
    let scenarios: &[Scenario] = &[
        ("non-streamed turn, cost from the header", non_streamed_turn),
        ("streamed turn, cost from usage", streamed_turn),
        ("429 with llm_provider-retry-after", rate_limited),
        ("500 and 503 retried, then success", server_errors_retried),
        ("persistent 5xx: exit 4, partial REPORT", persistent_5xx),
        ("408 from an upstream that hangs", upstream_timeout),
        (
            "dropped connection and malformed JSON",
            dropped_and_malformed,
        ),
        ("stream faults after the first byte", stream_faults),
        ("an empty streamed reply", empty_stream),
        ("unknown model: no retry, names the entry", unknown_model),
        ("fallback chains", fallback),
        ("a rejected key", rejected_key),
        ("the proxy's budget: 422", proxy_budget),
        ("the local budget", local_budget),
        ("preflight and harness check", preflight_and_check),
    ];
    for (name, scenario) in scenarios {
        eprintln!("=== litellm scenario: {name}");
        scenario(&p);
    }
}

fn non_streamed_turn(p: &Proxy) {
    p.script(json!([
        usage(tool_call("call_1", "echo through the proxy")),
        usage(text("# Proxy report\n\nAll good.")),
    ]));
    let ws = p.workspace(|c| c);
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let chats = p.upstream_chats();
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0]["model"], "glm-5.3");
    let tool = chats[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(tool["content"], "through the proxy\n[exit status: 0]");
    let report = ws.latest();
    assert_eq!(body(&report), "# Proxy report\n\nAll good.\n");
    assert_eq!(front(&report, "total_tokens"), 3000);
    // 1000 prompt + 500 completion tokens at the config's fake prices: 0.002 USD a round.
    assert_eq!(front(&report, "cost_usd"), json!(0.004));
    assert_eq!(front(&report, "round_log")[1]["cost_usd"], json!(0.002));
}

fn streamed_turn(p: &Proxy) {
    p.script(json!([
        {"type": "tool_call", "content": null, "chunk_size": 4,
         "usage": {"prompt_tokens": 1000, "completion_tokens": 500},
         "calls": [{"name": "bash", "arguments": {"command": "echo one"}, "id": "c1"},
                   {"name": "bash", "arguments": {"command": "echo two"}, "id": "c2"}]},
        usage(json!({"type": "text", "content": "Streamed through LiteLLM.", "chunk_size": 3})),
    ]));
    let ws = p.workspace(streaming);
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let chats = p.upstream_chats();
    assert_eq!(chats[0]["stream"], true);
    let results: Vec<Value> = chats[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        results,
        vec![
            json!("one\n[exit status: 0]"),
            json!("two\n[exit status: 0]")
        ]
    );
    let report = ws.latest();
    assert_eq!(body(&report), "Streamed through LiteLLM.\n");
    assert_eq!(front(&report, "total_tokens"), 3000);
    // The stream's cost header is always 0; the cost comes with the usage chunk.
    assert_eq!(front(&report, "cost_usd"), json!(0.004));
}

fn rate_limited(p: &Proxy) {
    p.script(json!([
        {"type": "error", "status": 429, "headers": {"Retry-After": "1"},
         "body": {"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}}},
        text("after the wait"),
    ]));
    let ws = p.workspace(|c| c);
    let started = Instant::now();
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(run.stderr.contains("HTTP 429"), "{}", run.stderr);
    assert!(run.stderr.contains("retrying in 1.0s"), "{}", run.stderr);
    assert_eq!(front(&ws.latest(), "round_log")[0]["retries"], 1);
}

fn server_errors_retried(p: &Proxy) {
    for streamed in [false, true] {
        p.script(json!([
            {"type": "error", "status": 500, "body": {"error": {"message": "upstream boom"}}},
            {"type": "error", "status": 503, "body": "Service Unavailable"},
            text("third attempt"),
        ]));
        let ws = p.workspace(|c| if streamed { streaming(c) } else { c });
        let run = p.run(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stderr.contains("HTTP 500"), "{}", run.stderr);
        assert!(run.stderr.contains("HTTP 503"), "{}", run.stderr);
        let report = ws.latest();
        assert_eq!(body(&report), "third attempt\n");
        assert_eq!(front(&report, "round_log")[0]["retries"], 2);
    }
}

fn persistent_5xx(p: &Proxy) {
    let boom =
        json!({"type": "error", "status": 500, "body": {"error": {"message": "upstream boom"}}});
    p.script(json!([
        {"type": "tool_call", "content": "Partial findings so far.",
         "calls": [{"name": "bash", "arguments": {"command": "ls"}, "id": "c1"}]},
        boom.clone(), boom.clone(), boom,
    ]));
    let ws = p.workspace(|c| c);
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert_eq!(p.upstream_chats().len(), 4);
    let report = ws.latest();
    assert_eq!(front(&report, "stop_reason"), "llm_error");
    let error = error_text(&report);
    assert!(error.contains("after 3 attempts: HTTP 500"), "{error}");
    assert!(error.contains("upstream boom"), "{error}");
    assert_eq!(body(&report), "Partial findings so far.\n");
}

fn upstream_timeout(p: &Proxy) {
    // The proxy's request_timeout is 10 s: it answers 408, which is retried.
    p.script(json!([{"type": "hang"}, text("after the timeout")]));
    let ws = p.workspace(|c| retries(1)(c).replace("timeout_secs = 10\n", "timeout_secs = 30\n"));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("HTTP 408"), "{}", run.stderr);
    assert_eq!(body(&ws.latest()), "after the timeout\n");
}

fn dropped_and_malformed(p: &Proxy) {
    p.script(json!([
        {"type": "drop", "content": "cut in half"},
        {"type": "malformed", "content": "broken json"},
        text("whole at last"),
    ]));
    let ws = p.workspace(|c| c);
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(p.upstream_chats().len(), 3);
    assert!(run.stderr.contains("Connection error"), "{}", run.stderr);
    assert_eq!(body(&ws.latest()), "whole at last\n");
}

fn stream_faults(p: &Proxy) {
    // LiteLLM reads the first upstream chunks before it answers: a fault there is an HTTP
    // 500; later ones arrive in-band after a 200, as one {"error": ...} event.
    let long = "a reply long enough to be cut in the middle";
    p.script(json!([
        {"type": "drop", "after_chunks": 4, "content": long, "chunk_size": 4},
        {"type": "stream_error", "after_chunks": 4, "message": "scripted failure", "content": long, "chunk_size": 4},
        {"type": "malformed", "content": "bad event"},
        text("the stream made it"),
    ]));
    let ws = p.workspace(|c| retries(3)(streaming(c)));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(p.upstream_chats().len(), 4);
    assert!(
        run.stderr.contains("in-band stream error: litellm."),
        "{}",
        run.stderr
    );
    let report = ws.latest();
    assert_eq!(body(&report), "the stream made it\n");
    assert_eq!(front(&report, "round_log")[0]["retries"], 3);

    // The same faults without retries left: exit 4, said plainly.
    p.script(json!([{"type": "drop", "after_chunks": 4, "content": long, "chunk_size": 4}]));
    let ws = p.workspace(|c| retries(0)(streaming(c)));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    let error = error_text(&ws.latest());
    assert!(
        error.contains("after 1 attempt: in-band stream error"),
        "{error}"
    );
}

fn empty_stream(p: &Proxy) {
    // An HTML page on a stream request: LiteLLM sends a finish chunk and [DONE], nothing else.
    p.script(json!([{"type": "error", "status": 200, "body": "<html>gateway</html>"}]));
    let ws = p.workspace(|c| retries(0)(streaming(c)));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 4, "{run:?}");
    let report = ws.latest();
    assert!(
        error_text(&report).contains("no content and no tool calls"),
        "{report}"
    );
    assert!(body(&report).contains("No reply"), "{report}");
}

fn unknown_model(p: &Proxy) {
    for streamed in [false, true] {
        p.script(json!([text("never")]));
        let ws = p.workspace(|c| {
            let c = chain(c, "\"glm-9\"");
            if streamed {
                streaming(c)
            } else {
                c
            }
        });
        let run = p.run(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 4, "{run:?}");
        assert!(p.upstream_chats().is_empty());
        let error = error_text(&ws.latest());
        assert!(
            error.starts_with(
                "model \"glm-9\" (from [models].mopac-primary) is unknown to the endpoint: POST"
            ),
            "{error}"
        );
        assert!(error.contains("after 1 attempt: HTTP 400"), "{error}");
    }
}

fn fallback(p: &Proxy) {
    p.script(json!([text("glm-5.2 answered")]));
    let ws = p.workspace(|c| chain(c, "[\"glm-9\", \"glm-5.2\"]"));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = ws.latest();
    assert_eq!(front(&report, "model"), "glm-5.2");
    let skipped = front(&report, "models_skipped");
    assert_eq!(skipped[0]["model"], "glm-9");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("Invalid model name passed in model=glm-9"),
        "{skipped}"
    );

    // Retries exhausted on the first model: the second answers the same round.
    p.script(json!([
        {"type": "error", "status": 503, "body": "down"},
        text("the fallback answered"),
    ]));
    let ws = p.workspace(|c| retries(0)(chain(c, "[\"glm-5.3\", \"glm-5.2\"]")));
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let models: Vec<Value> = p
        .upstream_chats()
        .iter()
        .map(|b| b["model"].clone())
        .collect();
    assert_eq!(models, vec![json!("glm-5.3"), json!("glm-5.2")]);
    assert_eq!(front(&ws.latest(), "model"), "glm-5.2");
}

fn rejected_key(p: &Proxy) {
    p.script(json!([text("never")]));
    let ws = p.workspace(|c| chain(c, "[\"glm-5.3\", \"glm-5.2\"]"));
    let run = p.run_key(&ws, &["once", "--demo"], CANARY);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(p.upstream_chats().is_empty());
    let report = ws.latest();
    let error = error_text(&report);
    assert!(
        error.starts_with(
            "the endpoint rejected the key from [litellm].key_ref (env:HARNESS_TEST_LLM_KEY)"
        ),
        "{error}"
    );
    assert!(error.contains("after 1 attempt: HTTP 401"), "{error}");
    assert_eq!(
        front(&report, "models_skipped"),
        json!([]),
        "a key problem is no reason to try another model"
    );
    for text in [run.stdout, run.stderr, ws.all_files_text()] {
        assert!(!text.contains(CANARY) && !text.contains(&CANARY[3..15]));
    }
}

fn proxy_budget(p: &Proxy) {
    p.script(json!([text("never")]));
    let ws = p.workspace(|c| c);
    let run = p.run_key(&ws, &["once", "--demo"], SPENT_KEY);
    assert_ne!(
        run.code, 0,
        "is the proxy started with LITELLM_TEST_KEYS={SPENT_KEY}:0? {run:?}"
    );
    let report = ws.latest();
    assert!(
        !error_text(&report).contains("HTTP 401"),
        "the proxy does not know {SPENT_KEY}: start it with LITELLM_TEST_KEYS=sk-harness-user,{SPENT_KEY}:0 (scripts/test.sh does)"
    );
    assert_eq!(run.code, 4, "{run:?}");
    assert!(p.upstream_chats().is_empty());
    assert_eq!(front(&report, "stop_reason"), "budget");
    let error = error_text(&report);
    assert!(
        error.starts_with("the proxy's budget for this key is exhausted: POST"),
        "{error}"
    );
    assert!(error.contains("HTTP 422"), "{error}");
    assert!(error.contains("after 1 attempt"), "never retried: {error}");
}

fn local_budget(p: &Proxy) {
    for streamed in [false, true] {
        p.script(json!({"steps": [usage(tool_call("c1", "echo spend"))], "loop": true}));
        let ws = p.workspace(|c| {
            let c = c + "\n[budget]\nmax_cost_usd = 0.003\n";
            if streamed {
                streaming(c)
            } else {
                c
            }
        });
        let run = p.run(&ws, &["once", "--demo"]);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(p.upstream_chats().len(), 2, "0.002 + 0.002 crosses 0.003");
        let report = ws.latest();
        assert_eq!(front(&report, "stop_reason"), "budget");
        assert_eq!(front(&report, "cost_usd"), json!(0.004));
        assert_eq!(front(&report, "max_cost_usd"), json!(0.003));
        assert_eq!(
            error_text(&report),
            "budget: 0.004 USD spent, [budget] max_cost_usd is 0.003"
        );
    }
}

fn preflight_and_check(p: &Proxy) {
    p.script(json!([text("after the preflight")]));
    let ws = p.workspace(|c| {
        chain(c, "[\"glm-9\", \"glm-5.3\"]")
            .replace("max_retries = 2\n", "max_retries = 2\npreflight = true\n")
    });
    let run = p.run(&ws, &["once", "--demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let chats = p.upstream_chats();
    assert_eq!(chats.len(), 1, "glm-9 was never sent");
    assert_eq!(chats[0]["model"], "glm-5.3");
    let report = ws.latest();
    assert_eq!(
        front(&report, "models_skipped")[0]["reason"],
        "preflight: GET /models does not list \"glm-9\" (from [models].mopac-primary)"
    );

    p.script(json!([text("never")]));
    let ws = p.workspace(|c| c.replace("[models]\n", "[models]\nprices = \"proxy\"\n"));
    let run = p.run(&ws, &["check"]).unwrapped();
    assert_eq!(run.code, 0, "{run:?}");
    for expected in [
        "ok    [models].mopac-primary: glm-5.3 listed",
        "ok    prices: GET /model/info prices 4 models",
    ] {
        assert!(run.stdout.contains(expected), "{expected}\n{}", run.stdout);
    }
    let run = p.run_key(&ws, &["check"], CANARY).unwrapped();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "FAIL  proxy: GET {}/models failed: the key from [litellm].key_ref (env:HARNESS_TEST_LLM_KEY) was rejected: HTTP 401",
            p.base_url
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(CANARY));
    assert!(p.upstream_chats().is_empty(), "check sends no completion");
}
