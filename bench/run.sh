#!/usr/bin/env bash
# bench/run.sh: builds the release binaries and prints the harness's figures as a table.
#
#   bench/run.sh            # everything (about a minute on 2 cores, after the build)
#   RUNS=5 bench/run.sh     # fewer repetitions
#
# What is measured is the harness itself: the model is scripted-llm on loopback with zero
# latency. Times are medians over RUNS runs (after one warm-up); CPU is user+sys from
# wait4(2), which includes the bash commands the harness ran (a measured bash baseline is
# subtracted for the per-round figure); RSS is the peak of the largest single process.
# Figures only: nothing here passes or fails on a timing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-15}
cd "$ROOT"

echo "building release binaries..." >&2
cargo build --release --quiet --workspace --bins
mkdir -p target/bench
rustc --edition 2021 -O bench/measure.rs -o target/bench/measure
rustc --edition 2021 -O bench/floor.rs -o target/bench/floor
FLOOR=$ROOT/target/bench/floor
MEASURE=target/bench/measure
HARNESS=$ROOT/target/release/harness
LLM=$ROOT/target/release/scripted-llm

WORK=$(mktemp -d "${TMPDIR:-/tmp}/harness-bench.XXXXXX")
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# field NAME "k=v k=v ..." -> v
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
row() { printf '%-44s %12s %12s %12s %s\n' "$@"; }

# Starts scripted-llm on a script file and sets URL (a looped script gives every run the
# same replies).
start_llm() {
  if [[ -n $SERVER_PID ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  "$LLM" --script "$1" --port 0 >"$WORK/llm.out" 2>/dev/null &
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -q LISTENING "$WORK/llm.out" 2>/dev/null && break
    sleep 0.05
  done
  URL=$(sed -n 's/^LISTENING //p' "$WORK/llm.out")
  [[ -n $URL ]] || { echo "scripted-llm did not start" >&2; exit 1; }
}

# config NAME BASE_URL MAX_ROUNDS EXTRA_BASH_KEYS -> path
config() {
  local dir=$WORK/$1
  mkdir -p "$dir/work"
  cat >"$dir/harness.toml" <<TOML
vertical = "bench"
work_root = "work"
report_dir = "reports"

[loop]
max_rounds = $3
finish = "message"

[session]
enabled = false

[litellm]
base_url = "$2/v1"
key_ref = "env:HARNESS_BENCH_KEY"
timeout_secs = 60
max_retries = 0

[models]
mopac-primary = "glm-5.3"
default_tier = "mopac-primary"

[models.classes]
primary = "mopac-primary"

[tools.bash]
timeout_secs = 120
default = "deny"
allow = ["echo *", "/bin/echo *", "yes", "yes *", "head *"]
$4

[demo]
id = "bench-1"
subject = "bench"
prompt = "Run the commands you are given, then answer."
class = "primary"
TOML
  echo "$dir/harness.toml"
}

# A looped script: N `echo round-i` tool calls (or `$2 round-i`), then a short text answer.
turn_script() {
  local n=$1 program=${2:-echo} steps=""
  for i in $(seq "$n"); do
    steps+="{\"type\":\"tool_call\",\"id\":\"call_$i\",\"command\":\"$program round-$i\"},"
  done
  echo "{\"loop\":true,\"steps\":[${steps}{\"type\":\"text\",\"content\":\"done after $n rounds\"}]}"
}

export HARNESS_BENCH_KEY=sk-bench-not-a-secret
unset RUST_LOG HARNESS_CONFIG

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, Linux $(uname -r)"
echo "harness $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty'), rustc $(rustc --version | cut -d' ' -f2), runs per figure: $RUNS"
echo
row "case" "wall ms" "cpu ms" "peak RSS" "notes"
row "----" "-------" "------" "--------" "-----"

# --- cold start ----------------------------------------------------------------------
echo '[]' >"$WORK/empty.json"
start_llm "$WORK/empty.json"
DRY=$(config dry "$URL" 8 "")
r=$($MEASURE -n "$RUNS" -- "$HARNESS" once --dry-run --demo --config "$DRY")
row "cold: once --dry-run --demo" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_kb "$r") / 1024 )) MiB" "rss $(field rss_kb "$r") KiB"
r=$($MEASURE -n "$RUNS" -- "$HARNESS" --help)
row "cold: --help" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_kb "$r") / 1024 )) MiB" "rss $(field rss_kb "$r") KiB"

# --- bash baseline ---------------------------------------------------------------------
r=$($MEASURE -n "$((RUNS * 4))" -- bash -c 'echo round-1')
BASH_CPU=$(field cpu_ms "$r")
row "baseline: bash -c 'echo round-1'" "$(field wall_ms "$r")" "$BASH_CPU" "$(( $(field rss_kb "$r") / 1024 )) MiB" "what the floor runs per round"

# --- whole turns -------------------------------------------------------------------------
declare -A WALL CPU
for n in 1 10 50; do
  turn_script "$n" >"$WORK/turn-$n.json"
  start_llm "$WORK/turn-$n.json"
  CFG=$(config "turn-$n" "$URL" $((n + 1)) "")
  runs=$RUNS; [[ $n == 50 ]] && runs=$(( (RUNS + 1) / 2 ))
  r=$($MEASURE -n "$runs" -- "$HARNESS" once --demo --config "$CFG")
  WALL[$n]=$(field wall_ms "$r"); CPU[$n]=$(field cpu_ms "$r")
  [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs for the $n-round turn" >&2
  row "turn: $n round(s) of 'echo round-N'" "${WALL[$n]}" "${CPU[$n]}" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "rss max $(field rss_max_kb "$r") KiB"
done
# The fixed part of a turn is mostly the five fsyncs of the writeback (probe, two files, two
# directory syncs); the same 1-round turn with report_dir on tmpfs shows what is left.
if [[ -d /dev/shm && -w /dev/shm ]]; then
  start_llm "$WORK/turn-1.json"
  CFG=$(config turn-1-shm "$URL" 2 "")
  SHM=$(mktemp -d /dev/shm/harness-bench.XXXXXX)
  sed -i "s#^report_dir = .*#report_dir = \"$SHM\"#" "$CFG"
  r=$($MEASURE -n "$RUNS" -- "$HARNESS" once --demo --config "$CFG")
  rm -rf "$SHM"
  row "turn: 1 round, report_dir on tmpfs" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "no fsync latency"
fi
per_wall=$(awk -v a="${WALL[50]}" -v b="${WALL[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
per_cpu=$(awk -v a="${CPU[50]}" -v b="${CPU[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
# `echo round-N` is a plain command and bash's builtin: harness runs it as bash would, in
# process, so the per-round CPU is the harness's alone (no command process to subtract).
row "per round: (t50 - t10) / 40" "$per_wall" "$per_cpu" "" "harness CPU per round (echo is a builtin, no process): $per_cpu ms"
# The same turns running a program every round: `/bin/echo round-N` is executed directly
# (execve of the judged argv, the spawner, Landlock, seccomp).
declare -A XWALL XCPU
for n in 10 50; do
  turn_script "$n" /bin/echo >"$WORK/turnx-$n.json"
  start_llm "$WORK/turnx-$n.json"
  CFG=$(config "turnx-$n" "$URL" $((n + 1)) "")
  runs=$RUNS; [[ $n == 50 ]] && runs=$(( (RUNS + 1) / 2 ))
  r=$($MEASURE -n "$runs" -- "$HARNESS" once --demo --config "$CFG")
  XWALL[$n]=$(field wall_ms "$r"); XCPU[$n]=$(field cpu_ms "$r")
  [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs for the $n-round /bin/echo turn" >&2
  row "turn: $n round(s) of '/bin/echo round-N'" "${XWALL[$n]}" "${XCPU[$n]}" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" ""
done
xper_wall=$(awk -v a="${XWALL[50]}" -v b="${XWALL[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
xper_cpu=$(awk -v a="${XCPU[50]}" -v b="${XCPU[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
r=$($MEASURE -n "$((RUNS * 4))" -- /bin/echo round-1)
ECHO_CPU=$(field cpu_ms "$r")
per_beyond=$(awk -v c="$xper_cpu" -v b="$ECHO_CPU" 'BEGIN{printf "%.2f", c-b}')
row "baseline: /bin/echo round-1 alone" "$(field wall_ms "$r")" "$ECHO_CPU" "" ""
row "per /bin/echo round: (t50 - t10) / 40" "$xper_wall" "$xper_cpu" "" "harness CPU per round beyond the command: $per_beyond ms"

# --- the plain-loop floor ----------------------------------------------------------------
# A minimal loop (bench/floor.rs): per round one HTTP call to the same server and one
# `bash -c 'echo round-N'`, nothing else. Same scripts, same per-round difference.
declare -A FWALL FCPU
for n in 10 50; do
  start_llm "$WORK/turn-$n.json"
  runs=$RUNS; [[ $n == 50 ]] && runs=$(( (RUNS + 1) / 2 ))
  r=$($MEASURE -n "$runs" -- "$FLOOR" "${URL#http://}" "$n")
  FWALL[$n]=$(field wall_ms "$r"); FCPU[$n]=$(field cpu_ms "$r")
  [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs for the $n-round floor" >&2
  row "floor: $n round(s), HTTP call + bash -c" "${FWALL[$n]}" "${FCPU[$n]}" "" ""
done
fper_wall=$(awk -v a="${FWALL[50]}" -v b="${FWALL[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
fper_cpu=$(awk -v a="${FCPU[50]}" -v b="${FCPU[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
ratio=$(awk -v h="$per_wall" -v f="$fper_wall" 'BEGIN{printf "%.2f", h/f}')
xratio=$(awk -v h="$xper_wall" -v f="$fper_wall" 'BEGIN{printf "%.2f", h/f}')
row "floor per round: (t50 - t10) / 40" "$fper_wall" "$fper_cpu" "" "harness per-round wall / floor: $ratio (echo), $xratio (/bin/echo)"

# --- file tools: the same turns with edit_file instead of bash ---------------------------
# Each run edits a fresh copy of the same file (the copy is per run, so it cancels out of the
# per-round difference). The 1 MiB variant (the default max_write_bytes) shows that memory
# stays flat for files up to the cap.
edit_script() {
  local n=$1 steps=""
  for i in $(seq "$n"); do
    steps+="{\"type\":\"tool_call\",\"calls\":[{\"name\":\"edit_file\",\"id\":\"call_$i\",\"arguments\":{\"path\":\"f.txt\",\"old_string\":\"line-$i\\n\",\"new_string\":\"done-$i\\n\"}}]},"
  done
  echo "{\"loop\":true,\"steps\":[${steps}{\"type\":\"text\",\"content\":\"done after $n edits\"}]}"
}
seq -f 'line-%g' 50 >"$WORK/seed-small.txt"
# (awk, not `yes | head`: under pipefail a producer killed by SIGPIPE would stop the script)
{ cat "$WORK/seed-small.txt"; awk -v n=$(( (1048576 - $(stat -c %s "$WORK/seed-small.txt")) / 100 )) \
    'BEGIN { s = sprintf("%99s", ""); gsub(/ /, "x", s); for (i = 0; i < n; i++) print s }'; } >"$WORK/seed-big.txt"
declare -A EWALL ECPU
for variant in small big; do
  for n in 10 50; do
    [[ $variant == big && $n == 10 ]] && continue
    edit_script "$n" >"$WORK/edit-$n.json"
    start_llm "$WORK/edit-$n.json"
    CFG=$(config "edit-$variant-$n" "$URL" $((n + 1)) $'\n[tools.files]\nenabled = true')
    W=$(dirname "$CFG")/work
    runs=$RUNS; [[ $n == 50 ]] && runs=$(( (RUNS + 1) / 2 ))
    r=$($MEASURE -n "$runs" -- bash -c 'cp "$1" "$2/f.txt" && exec "$3" once --demo --config "$4"' _ "$WORK/seed-$variant.txt" "$W" "$HARNESS" "$CFG")
    [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs for the $n-edit turn ($variant)" >&2
    grep -q '"outcome":"file_refused"' "$(dirname "$CFG")/reports/REPORT-latest.md" && echo "warning: an edit was refused in the $n-edit turn ($variant)" >&2
    if [[ $variant == small ]]; then
      EWALL[$n]=$(field wall_ms "$r"); ECPU[$n]=$(field cpu_ms "$r")
      row "turn: $n round(s) of edit_file" "${EWALL[$n]}" "${ECPU[$n]}" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "rss max $(field rss_max_kb "$r") KiB"
    else
      row "turn: $n edit_file rounds on a 1 MiB file" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "rss max $(field rss_max_kb "$r") KiB"
    fi
  done
done
eper_wall=$(awk -v a="${EWALL[50]}" -v b="${EWALL[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
eper_cpu=$(awk -v a="${ECPU[50]}" -v b="${ECPU[10]}" 'BEGIN{printf "%.2f", (a-b)/40}')
row "per edit_file round: (t50 - t10) / 40" "$eper_wall" "$eper_cpu" "" "vs $xper_cpu ms per /bin/echo round (harness + the program)"
# --- sessions ----------------------------------------------------------------------------
# A 500-message session (one run of 249 'echo' rounds and an answer), then a one-round run
# that sends it all again (--resume keeps the stored session at the same size every run),
# against the same one-round run started --fresh. The difference is what loading, repairing,
# trimming, sending and saving the session costs.
turn_script 249 >"$WORK/long.json"
echo '{"loop":true,"steps":[{"type":"text","content":"ok"}]}' >"$WORK/one.json"
start_llm "$WORK/one.json"
SCFG=$(config session "$URL" 260 "")
sed -i 's/^\[session\]$/[session]\nmax_history_tokens = 1000000/; s/^enabled = false$/enabled = true/' "$SCFG"
r=$($MEASURE -n "$RUNS" -- "$HARNESS" once --demo --fresh --config "$SCFG")
row "session: 1 round, --fresh" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" ""
fresh_wall=$(field wall_ms "$r"); fresh_cpu=$(field cpu_ms "$r")
# The long run, then the continued runs.
start_llm "$WORK/long.json"
sed -i "s#^base_url = .*#base_url = \"$URL/v1\"#" "$SCFG"
"$HARNESS" once --demo --fresh --config "$SCFG" >/dev/null 2>&1
SRUN=$(sed -n 's/^run_id: "\(.*\)"$/\1/p' "$WORK/session/reports/REPORT-latest.md")
start_llm "$WORK/one.json"
sed -i "s#^base_url = .*#base_url = \"$URL/v1\"#" "$SCFG"
r=$($MEASURE -n "$RUNS" -- "$HARNESS" once --demo --resume "$SRUN" --config "$SCFG")
msgs=$(sed -n 's/^session: .*"messages_loaded":\([0-9]*\).*/\1/p' "$WORK/session/reports/REPORT-latest.md")
row "session: 1 round, continuing $msgs messages" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "vs fresh: +$(awk -v a="$(field wall_ms "$r")" -v b="$fresh_wall" 'BEGIN{printf "%.1f", a-b}') ms wall, +$(awk -v a="$(field cpu_ms "$r")" -v b="$fresh_cpu" 'BEGIN{printf "%.1f", a-b}') ms cpu"

# Flatness: a one-round run continuing a stored session of N messages (the task, then
# (N-1)/2 rounds of an `echo` call and its result; written straight as gzipped JSONL), with
# the same max_history_tokens = 60000 (about 2,200 of these messages fit). The file is copied
# back before each run (the run saves the capped window over it); `cp` and `sh` are small
# next to the harness, whose peak RSS is what is reported.
start_llm "$WORK/one.json"
FCFG=$(config flat "$URL" 2 "")
sed -i 's/^\[session\]$/[session]\nmax_history_tokens = 60000/; s/^enabled = false$/enabled = true/' "$FCFG"
FDIR=$WORK/flat/reports/sessions/bench/demo
mkdir -p "$FDIR"
for n in 501 5001 50001 500001; do
  awk -v rounds=$(( (n - 1) / 2 )) 'BEGIN {
    print "{\"type\":\"header\",\"harness_session\":1,\"key\":\"bench/demo/bench-1\"}"
    print "{\"type\":\"run\",\"run\":{\"run_id\":\"r1\",\"parent_run_id\":null,\"model\":\"glm-5.3\",\"tier\":\"mopac-primary\",\"stop_reason\":\"max_rounds\",\"outcome\":null,\"system_hash\":\"0\",\"seen_journal\":null,\"started\":\"2026-12-01T10:00:00Z\"}}"
    print "{\"type\":\"message\",\"run_id\":\"r1\",\"message\":{\"role\":\"user\",\"content\":\"Run the commands you are given, then answer.\"}}"
    for (i = 1; i <= rounds; i++) {
      printf "{\"type\":\"message\",\"run_id\":\"r1\",\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_%d\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\": \\\"echo round-%d\\\"}\"}}]}}\n", i, i
      printf "{\"type\":\"message\",\"run_id\":\"r1\",\"message\":{\"role\":\"tool\",\"tool_call_id\":\"call_%d\",\"content\":\"exit 0\\nround-%d\\n\"}}\n", i, i
    }
  }' | gzip -1 >"$WORK/flat-$n.jsonl.gz"
  runs=$RUNS; (( n > 50001 )) && runs=3
  r=$($MEASURE -n "$runs" -- sh -c "cp '$WORK/flat-$n.jsonl.gz' '$FDIR/bench-1.jsonl.gz' && exec '$HARNESS' once --demo --config '$FCFG'")
  [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs continuing $n messages" >&2
  loaded=$(sed -n 's/^session: .*"messages_loaded":\([0-9]*\).*"rounds_dropped":\([0-9]*\).*/\1 sent, \2 rounds dropped/p' "$WORK/flat/reports/REPORT-latest.md")
  row "session: continuing $n messages, cap 60000" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "$(( $(stat -c %s "$WORK/flat-$n.jsonl.gz") / 1024 )) KiB gz; $loaded; rss $(field rss_max_kb "$r") KiB"
done

# --- output flood ----------------------------------------------------------------------
FLOOD_CMD='yes | head -c 1073741824'
start_llm "$WORK/empty.json"
FCFG=$(config flood "$URL" 2 "")
if ! "$HARNESS" gate --config "$FCFG" -- "$FLOOD_CMD" >/dev/null 2>&1; then
  FLOOD_CMD='head -c 1073741824 /dev/zero'
fi
cmd_json=$(printf '%s' "$FLOOD_CMD" | sed 's/\\/\\\\/g; s/"/\\"/g')
echo "{\"loop\":true,\"steps\":[{\"type\":\"tool_call\",\"id\":\"flood\",\"command\":\"$cmd_json\"},{\"type\":\"text\",\"content\":\"flooded\"}]}" >"$WORK/flood.json"
start_llm "$WORK/flood.json"
FCFG=$(config flood "$URL" 2 "")
r=$($MEASURE -n 3 --warmup 0 -- "$HARNESS" once --demo --config "$FCFG")
flood_report=$(sed -n 's/^round_log: //p' "$WORK/flood/reports/REPORT-latest.md" | grep -o '"output_bytes":[0-9]*' | head -1 | cut -d: -f2)
row "flood: $FLOOD_CMD" "$(field wall_ms "$r")" "$(field cpu_ms "$r")" "$(( $(field rss_max_kb "$r") / 1024 )) MiB" "max_output_bytes default; output_bytes=${flood_report:-?}"

# --- binary size -----------------------------------------------------------------------
size=$(stat -c %s "$HARNESS")
row "release binary size" "" "" "" "$(awk -v s="$size" 'BEGIN{printf "%.2f MiB (%d bytes)", s/1048576, s}')"

# --- gate ------------------------------------------------------------------------------
echo
cargo bench --quiet --bench gate 2>/dev/null | while IFS=$'\t' read -r name rate note; do
  printf '%-44s %12s verdicts/s  %s\n' "$name" "$rate" "$note"
done

# --- secrets and confinement -------------------------------------------------------------
echo
cargo bench --quiet --bench secrets 2>/dev/null | while IFS=$'\t' read -r name value note; do
  printf '%-44s %24s  %s\n' "$name" "$value" "$note"
done

# --- egress proxy (network = "allowlist") --------------------------------------------------
echo
cargo bench --quiet --bench egress 2>/dev/null | while IFS=$'\t' read -r name value note; do
  printf '%-44s %24s  %s\n' "$name" "$value" "$note"
done

# A whole `harness once` under network = "allowlist": three rounds, each a curl of 16 MiB
# from a plain-HTTP server on 127.0.0.2 named by the test hosts file, through the run's
# proxy. hwm is the harness process alone (proxy thread included), not curl.
if command -v curl >/dev/null && command -v python3 >/dev/null; then
  mkdir -p "$WORK/site" && head -c 16777216 /dev/zero >"$WORK/site/big"
  python3 -m http.server --bind 127.0.0.2 --directory "$WORK/site" 0 >"$WORK/site.out" 2>/dev/null &
  SITE_PID=$!
  for _ in $(seq 100); do grep -q 'port' "$WORK/site.out" 2>/dev/null && break; sleep 0.05; done
  SITE_PORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$WORK/site.out" | head -1)
  fetch="curl -sS -o /dev/null -w %{size_download} http://allowed.test:$SITE_PORT/big"
  echo "{\"loop\":true,\"steps\":[{\"type\":\"tool_call\",\"id\":\"c1\",\"command\":\"$fetch\"},{\"type\":\"tool_call\",\"id\":\"c2\",\"command\":\"$fetch\"},{\"type\":\"tool_call\",\"id\":\"c3\",\"command\":\"$fetch\"},{\"type\":\"text\",\"content\":\"fetched\"}]}" >"$WORK/egress.json"
  start_llm "$WORK/egress.json"
  CFG=$(config egress "$URL" 4 'allow = ["curl *"]
sandbox = "landlock"
network = "allowlist"
[tools.bash.egress]
allow = ["allowed.test"]
deny_private = false
hosts = "hosts"')
  sed -i 's/^allow = \["echo \*".*$//' "$CFG"
  echo "127.0.0.2 allowed.test" >"$(dirname "$CFG")/hosts"
  r=$($MEASURE -n "$RUNS" -- "$HARNESS" once --demo --config "$CFG")
  [[ $(field fails "$r") == 0 ]] || echo "warning: $(field fails "$r") failed runs for the allowlist turn" >&2
  # What the last run's REPORT says went through the proxy (3 x 16 MiB, or the bench is wrong).
  through=$(sed -n 's/^Bytes: \([0-9]*\) of.*/\1/p' "$(dirname "$CFG")/reports/REPORT-latest.md")
  printf '%-44s %24s  %s\n' "whole run, allowlist, 3 x 16 MiB via proxy" "harness $(( $(field hwm_max_kb "$r") / 1024 )) MiB" "peak RSS of the harness process (VmHWM, max of $RUNS runs: $(field hwm_max_kb "$r") KiB; median $(field hwm_kb "$r") KiB); ${through:-?} bytes through the proxy per run; wall $(field wall_ms "$r") ms"
  kill "$SITE_PID" 2>/dev/null || true; wait "$SITE_PID" 2>/dev/null || true
fi

# --- events + metrics ------------------------------------------------------------------
echo
cargo bench --quiet --bench events 2>/dev/null | while IFS=$'\t' read -r name value note; do
  printf '%-52s %12s  %s\n' "$name" "$value" "$note"
done

# --- the rules part of the system prompt ---------------------------------------------------
echo
cargo bench --quiet --bench prompt 2>/dev/null | while IFS=$'\t' read -r name value note; do
  printf '%-52s %12s  %s\n' "$name" "$value" "$note"
done
