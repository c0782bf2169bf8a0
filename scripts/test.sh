#!/usr/bin/env bash
# The whole test suite: unit tests, end-to-end tests of the built binary against the
# scripted OpenAI-compatible server, and (when their scripts are present) the integration
# tests against a real Redmine and a real LiteLLM proxy, which this script starts itself.
#
#   scripts/test.sh            # everything: the Redmine suites on SQLite, then again on
#                              # PostgreSQL with 4 puma threads
#   HARNESS_TEST_QUICK=1 scripts/test.sh   # skip the real servers (they skip loudly)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# --workspace: the scripted-llm test server (crates/scripted-llm) is built too; the
# integration tests start target/debug/scripted-llm.
cargo build --workspace --all-targets --quiet

# The suite stops the servers it started (HARNESS_TEST_KEEP_SERVERS=1 keeps them up for a
# faster next run; the packages, venv and DB snapshots stay either way).
started=()
stop_servers() {
  [[ -n "${HARNESS_TEST_KEEP_SERVERS:-}" ]] && return 0
  for s in "${started[@]}"; do "scripts/$s-down.sh" >/dev/null 2>&1 || true; done
}
trap stop_servers EXIT

if [[ -z "${HARNESS_TEST_QUICK:-}" ]]; then
  if [[ -x scripts/redmine-up.sh && -f tests/redmine.rs ]]; then
    env_file="$root/.cache/redmine.env"
    mkdir -p "$root/.cache"
    started+=(redmine)
    if scripts/redmine-up.sh "$env_file" >/dev/null; then
      set -a; . "$env_file"; set +a
      export HARNESS_TEST_REDMINE=1
    elif [[ -n "${CI:-}" ]]; then
      echo "test.sh: the real Redmine did not start; CI cannot skip its tests" >&2
      exit 1
    else
      echo "!!!!! test.sh: the real Redmine did not start (it needs root and apt): its tests will SKIP !!!!!" >&2
    fi
  fi
  if [[ -x scripts/litellm-up.sh && -f tests/litellm.rs ]]; then
    # tests/litellm.rs uses these custom-auth keys: a plain user key, and one whose budget
    # (0 USD) is already spent, so the proxy answers 422 budget_exceeded on every request.
    export LITELLM_TEST_KEYS=${LITELLM_TEST_KEYS:-sk-harness-user,sk-harness-spent:0}
    # Ports away from LiteLLM's usual 4000, so a developer's own proxy is left alone.
    export LITELLM_PORT=${LITELLM_PORT:-14000} SCRIPTED_LLM_PORT=${SCRIPTED_LLM_PORT:-14001}
    started+=(litellm)
    up=$(SCRIPTED_LLM="$root/target/debug/scripted-llm" scripts/litellm-up.sh tests/litellm/idle.json) || {
      echo "test.sh: the real LiteLLM proxy did not start (see above)" >&2
      exit 1
    }
    eval "$up"
    export LITELLM_BASE_URL LITELLM_KEY SCRIPTED_LLM_URL
    export HARNESS_TEST_LITELLM=1
  fi
fi

# Every test that skips (a server, a tool or a kernel feature missing) adds a line here
# (tests/common/mod.rs `skip`); the summary below is the last thing the suite prints, so a
# green run that tested less than it claims says so where it is read. Under CI a skip fails.
skip_log=$(mktemp "${TMPDIR:-/tmp}/harness-test-skips.XXXXXX")
export HARNESS_TEST_SKIP_LOG=$skip_log

# The integration tests are one binary (tests/all.rs); tests/common's guard lets one
# real-Redmine test run at a time. The two 16-worker tests of tests/redmine_concurrency.rs wait for the PostgreSQL pass below: one
# SQLite puma thread serialises every request, so there they would only cost time.
rc=0
cargo test --workspace --all-targets --no-fail-fast -- --test-threads="${HARNESS_TEST_THREADS:-2}" \
  --skip sixteen_workers_settle_two_hundred_issues_exactly_once \
  --skip under_injected_faults_no_work_is_duplicated_and_no_claim_is_left_behind || rc=$?

# The claim protocol under real concurrency: the Redmine suites again (claims, sessions, the
# 16-worker tests), on PostgreSQL served by several puma threads, where two requests on one
# issue really run at the same time (one SQLite thread serialises them all).
# HARNESS_TEST_PG_THREADS (4) and HARNESS_TEST_PG_WORKERS (1) choose puma's threads and
# processes; HARNESS_TEST_NO_PG=1 leaves the pass out (it then says so below, and CI fails).
if [[ -z "${HARNESS_TEST_QUICK:-}" && -n "${HARNESS_TEST_REDMINE:-}" ]]; then
  if [[ -n "${HARNESS_TEST_NO_PG:-}" ]]; then
    echo "SKIPPED: the Redmine suites on PostgreSQL: HARNESS_TEST_NO_PG is set" >>"$skip_log"
    [[ -z "${CI:-}" ]] || { echo "test.sh: CI cannot leave out the PostgreSQL pass" >&2; rc=1; }
  elif REDMINE_DB=postgresql REDMINE_THREADS="${HARNESS_TEST_PG_THREADS:-4}" \
       REDMINE_WORKERS="${HARNESS_TEST_PG_WORKERS:-1}" \
       scripts/redmine-up.sh "$root/.cache/redmine-pg.env" >/dev/null; then
    echo "== the Redmine suites on PostgreSQL ($(grep -E '^REDMINE_(THREADS|WORKERS)=' "$root/.cache/redmine-pg.env" | tr '\n' ' '))" >&2
    (set -a; . "$root/.cache/redmine-pg.env"; set +a
     cargo test --no-fail-fast --test all \
       -- redmine:: redmine_sessions:: redmine_concurrency:: --test-threads="${HARNESS_TEST_THREADS:-2}") || rc=$?
  elif [[ -n "${CI:-}" ]]; then
    echo "test.sh: Redmine on PostgreSQL did not start; CI cannot skip its tests" >&2
    rc=1
  else
    echo "SKIPPED: the Redmine suites on PostgreSQL: scripts/redmine-up.sh with REDMINE_DB=postgresql failed" >>"$skip_log"
  fi
fi

if [[ -s "$skip_log" ]]; then
  {
    echo
    echo "!!!!!!!!!! SKIPPED: these tests did not run (the suite is NOT complete) !!!!!!!!!!"
    sort -u "$skip_log" | sed 's/^SKIPPED: /  - /'
    echo "!!!!!!!!!!"
  } >&2
fi
rm -f "$skip_log"
exit "$rc"
