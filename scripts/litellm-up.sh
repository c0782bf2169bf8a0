#!/usr/bin/env bash
# Start (or reuse) the scripted-llm upstream and a real LiteLLM 1.108.7 proxy in front of it,
# offline, on 127.0.0.1. Used by .ci/run and by hand before the LiteLLM integration tests.
#
# usage: scripts/litellm-up.sh SCRIPT.json
#        eval "$(scripts/litellm-up.sh tests/litellm/basic.json)"
#
# stdout (eval-able, nothing else goes to stdout):
#   LITELLM_BASE_URL=http://127.0.0.1:4000/v1
#   LITELLM_KEY=sk-test-master-1234
#   SCRIPTED_LLM_URL=http://127.0.0.1:4001
#   SCRIPTED_LLM_LOG=<run dir>/requests.jsonl
#
# env (all optional; relative paths are taken from the current directory):
#   SCRIPTED_LLM           upstream binary (default <repo>/target/debug/scripted-llm; build it
#                          first with `cargo build -p scripted-llm`)
#   LITELLM_VENV           venv holding LiteLLM (default <repo>/.cache/litellm-venv; created
#                          on first use, about 1 min and 760 MB)
#   LITELLM_RUN_DIR        pid files, logs, runtime config (default <repo>/.cache/litellm-run)
#   LITELLM_PORT=4000      proxy port      SCRIPTED_LLM_PORT=4001   upstream port
#   LITELLM_CONFIG         proxy config (default <repo>/tests/litellm/litellm.yaml)
#   LITELLM_AUTH=custom    custom: tests/litellm/custom_auth.py (wrong key -> 401, key budgets
#                          -> 422); master: stock DB-less auth (wrong key -> 400 no_db_connection)
#   LITELLM_TEST_KEYS      extra keys for LITELLM_AUTH=custom, e.g. 'sk-user-1,sk-canary-user:0.003'
#                          (key[:budget in USD])
#   LITELLM_STARTUP_TIMEOUT=120   seconds to wait for the proxy
#   LITELLM_PYTHON=python3        interpreter used to create the venv
#
# Idempotent: when its own processes are alive and started with the same settings, it only
# loads SCRIPT into the upstream (rewind, clear the request log and the counters), in about
# 0.1 s; the proxy restarts only if its config, auth mode, keys, ports or venv changed, and
# the upstream only if its binary was rebuilt or its port changed. It never touches a process
# it did not start: a busy port held by another process is an error (exit 1).
# Stop everything with scripts/litellm-down.sh.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LITELLM_SPEC='litellm[proxy]==1.108.7'
# prisma: the Python package only (no engines). Without it a request with no Authorization
# header gets a plain-text 500 instead of the 401 JSON (the auth error path imports prisma).
PRISMA_SPEC='prisma==0.15.0'

die() { echo "litellm-up: $*" >&2; exit 1; }
abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }

[ $# -eq 1 ] || { sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2; }
SCRIPT=$(abspath "$1")
[ -f "$SCRIPT" ] || die "script file not found: $SCRIPT"
SCRIPTED_LLM=$(abspath "${SCRIPTED_LLM:-$REPO/target/debug/scripted-llm}")
[ -x "$SCRIPTED_LLM" ] || die "no scripted-llm binary at $SCRIPTED_LLM (run: cargo build -p scripted-llm, or set SCRIPTED_LLM)"
VENV=$(abspath "${LITELLM_VENV:-$REPO/.cache/litellm-venv}")
RUN=$(abspath "${LITELLM_RUN_DIR:-$REPO/.cache/litellm-run}")
CONFIG=$(abspath "${LITELLM_CONFIG:-$REPO/tests/litellm/litellm.yaml}")
[ -f "$CONFIG" ] || die "config not found: $CONFIG"
PROXY_PORT=${LITELLM_PORT:-4000}
UPSTREAM_PORT=${SCRIPTED_LLM_PORT:-4001}
AUTH=${LITELLM_AUTH:-custom}
case $AUTH in custom | master) ;; *) die "LITELLM_AUTH must be custom or master, not '$AUTH'" ;; esac
STARTUP_TIMEOUT=${LITELLM_STARTUP_TIMEOUT:-120}
PYTHON=${LITELLM_PYTHON:-python3}
# general_settings.master_key must be a literal here ("os.environ/..." is not resolved)
MASTER_KEY=$(sed -n 's/^[[:space:]]*master_key:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$CONFIG" | head -1)
[ -n "$MASTER_KEY" ] || die "no general_settings.master_key in $CONFIG"

mkdir -p "$RUN"
# Keep the default cache dir out of git whatever the repo's .gitignore says.
if [ -d "$REPO/.cache" ] && [ ! -e "$REPO/.cache/.gitignore" ]; then echo '*' > "$REPO/.cache/.gitignore"; fi

# --- offline environment for LiteLLM (recipe notes, section 3.1) ---------------------------
export LITELLM_LOCAL_MODEL_COST_MAP=True   # required: else importing litellm fetches the cost map from GitHub
export LITELLM_TELEMETRY_DISABLED=true     # hard veto on telemetry
export LITELLM_DONT_SHOW_FEEDBACK_BOX=True # no banner box in the log
export LITELLM_MODE=PRODUCTION             # DEV mode runs load_dotenv() upward from the venv: the repo's .env
export LITELLM_LOG=${LITELLM_LOG:-INFO}
unset DATABASE_URL DIRECT_URL DATABASE_URL_READ_REPLICA  # a DB URL makes startup fetch Prisma engines, then exit
export NO_PROXY=127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY} no_proxy=127.0.0.1,localhost${no_proxy:+,$no_proxy}
export LITELLM_TEST_MASTER_KEY=$MASTER_KEY LITELLM_TEST_KEYS=${LITELLM_TEST_KEYS:-}

# --- helpers -------------------------------------------------------------------------------
# pid_of NAME: the recorded PID if that process is alive and still runs what we started.
pid_of() {
  local pid want
  [ -f "$RUN/$1.pid" ] || return 1
  pid=$(cat "$RUN/$1.pid"); want=$(cat "$RUN/$1.cmd" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" = "$want" ] || return 1
  echo "$pid"
}
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_http URL NAME SECONDS [curl args...]
wait_http() {
  local url=$1 name=$2 secs=$3 i; shift 3
  for ((i = 0; i < secs * 4; i++)); do
    curl -fsS -m 2 -o /dev/null "$@" "$url" 2>/dev/null && return 0
    pid_of "$name" >/dev/null || { echo "litellm-up: $name exited; last log lines:" >&2; tail -25 "$RUN/$name.log" >&2; return 1; }
    sleep 0.25
  done
  echo "litellm-up: $name not ready after $secs s ($url); last log lines:" >&2; tail -25 "$RUN/$name.log" >&2
  return 1
}
# start NAME CMD...: start detached, record PID and the exact cmdline to recognise it later.
start() {
  local name=$1; shift
  nohup "$@" > "$RUN/$name.out" 2> "$RUN/$name.log" < /dev/null &
  echo $! > "$RUN/$name.pid"
  printf '%s ' "$@" > "$RUN/$name.cmd"
}

# --- venv ----------------------------------------------------------------------------------
if [ "$(cat "$VENV/.litellm-ready" 2>/dev/null)" != "$LITELLM_SPEC $PRISMA_SPEC" ]; then
  echo "litellm-up: installing $LITELLM_SPEC into $VENV (about 1 min) ..." >&2
  t0=$SECONDS
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  # -q keeps the progress quiet; pip still prints errors, and the full log is kept.
  "$VENV/bin/pip" install -q --disable-pip-version-check --log "$RUN/pip.log" \
    "$LITELLM_SPEC" "$PRISMA_SPEC" >&2 || die "pip install failed; see $RUN/pip.log"
  echo "$LITELLM_SPEC $PRISMA_SPEC" > "$VENV/.litellm-ready"
  echo "litellm-up: venv ready in $((SECONDS - t0)) s" >&2
fi

# --- upstream: scripted-llm ----------------------------------------------------------------
upstream_url=http://127.0.0.1:$UPSTREAM_PORT
if pid=$(pid_of scripted-llm) && [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$SCRIPTED_LLM")" ] \
  && [ "$(cat "$RUN/scripted-llm.port" 2>/dev/null)" = "$UPSTREAM_PORT" ]; then
  : # reused; the script is loaded below
else
  LITELLM_RUN_DIR=$RUN "$REPO/scripts/litellm-down.sh" scripted-llm
  port_busy "$UPSTREAM_PORT" && die "port $UPSTREAM_PORT is in use by a process this script did not start (set SCRIPTED_LLM_PORT)"
  start scripted-llm "$SCRIPTED_LLM" --script "$SCRIPT" --host 127.0.0.1 --port "$UPSTREAM_PORT" --log "$RUN/requests.jsonl"
  echo "$UPSTREAM_PORT" > "$RUN/scripted-llm.port"
  wait_http "$upstream_url/health" scripted-llm 15
  grep -qx "LISTENING $upstream_url" "$RUN/scripted-llm.out" || die "scripted-llm did not report $upstream_url"
fi

# --- LiteLLM proxy -------------------------------------------------------------------------
# The runtime config: upstream port substituted, custom-auth lines dropped for AUTH=master,
# plus a trailer with everything else that must restart the proxy when it changes.
runtime=$RUN/litellm.yaml.new
sed "s#127\.0\.0\.1:4001#127.0.0.1:$UPSTREAM_PORT#g" "$CONFIG" > "$runtime"
if [ "$AUTH" = master ]; then sed -i '/# custom-auth/d' "$runtime"; fi
fingerprint="venv=$VENV port=$PROXY_PORT auth=$AUTH"
if [ "$AUTH" = custom ]; then fingerprint+=" keys=$LITELLM_TEST_KEYS"; fi
echo "# started with: $fingerprint" >> "$runtime"
# modules named in the config (custom_auth.*) are resolved next to the config file LiteLLM reads
for py in "$(dirname "$CONFIG")"/*.py; do
  if [ -f "$py" ] && grep -q "[ [:punct:]]$(basename "$py" .py)\." "$runtime"; then
    cp "$py" "$RUN/"
    echo "# module: $(basename "$py") $(cksum < "$py")" >> "$runtime" # an edited module restarts the proxy too
  fi
done
proxy_url=http://127.0.0.1:$PROXY_PORT
if pid_of litellm >/dev/null && cmp -s "$runtime" "$RUN/litellm.yaml" \
  && curl -fsS -m 2 -o /dev/null "$proxy_url/health/liveliness" 2>/dev/null; then
  rm -f "$runtime" # already running with the same settings
else
  LITELLM_RUN_DIR=$RUN "$REPO/scripts/litellm-down.sh" litellm
  port_busy "$PROXY_PORT" && die "port $PROXY_PORT is in use by a process this script did not start (set LITELLM_PORT)"
  mv "$runtime" "$RUN/litellm.yaml"
  t0=$(date +%s%N)
  start litellm "$VENV/bin/python" "$VENV/bin/litellm" --config "$RUN/litellm.yaml" \
    --host 127.0.0.1 --port "$PROXY_PORT" --num_workers 1
  # Never GET /health on the proxy: it sends a real completion to every deployment.
  wait_http "$proxy_url/health/liveliness" litellm "$STARTUP_TIMEOUT"
  echo "litellm-up: proxy up in $((($(date +%s%N) - t0) / 1000000)) ms (log: $RUN/litellm.log)" >&2
fi
# ready = the model list is loaded and the master key is accepted
wait_http "$proxy_url/v1/models" litellm 30 -H "Authorization: Bearer $MASTER_KEY" \
  || die "GET /v1/models with the master key failed"

# Load the script last, so the tests start with a rewound script, an empty request log and
# zero connection counters whatever happened during startup.
curl -fsS -m 5 -o /dev/null -X POST "$upstream_url/_fake/reset" -H 'Content-Type: application/json' \
  --data-binary @"$SCRIPT" || die "scripted-llm rejected $SCRIPT: $(curl -sS -X POST "$upstream_url/_fake/reset" --data-binary @"$SCRIPT")"

echo "LITELLM_BASE_URL=$proxy_url/v1"
echo "LITELLM_KEY=$MASTER_KEY"
echo "SCRIPTED_LLM_URL=$upstream_url"
echo "SCRIPTED_LLM_LOG=$RUN/requests.jsonl"
