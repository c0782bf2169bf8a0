#!/usr/bin/env bash
# The whole test suite: unit tests, end-to-end tests of the built binary against the
# scripted OpenAI-compatible server, and (when their scripts are present) the integration
# tests against a real Redmine and a real LiteLLM proxy, which this script starts itself.
#
#   scripts/test.sh            # everything
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

# The integration tests are one binary (tests/all.rs); two threads, and tests/common's guard
# lets one real-Redmine test run at a time.
rc=0
cargo test --workspace --all-targets --no-fail-fast -- --test-threads="${HARNESS_TEST_THREADS:-2}" || rc=$?

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
