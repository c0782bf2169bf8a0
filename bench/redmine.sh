#!/usr/bin/env bash
# bench/redmine.sh: the claim protocol's figures against the REAL Redmine, printed as tables
# for bench/RESULTS.md:
#   - issues settled per minute and Redmine requests per run for 1, 4 and 16 workers
#     (separate report dirs, as on separate hosts, started together; the model is
#     scripted-llm with zero latency, so what is measured is harness + Redmine);
#   - `harness scope` over 1,000 issues in scope: wall time, requests and peak RSS at
#     `[redmine] limit` 50 and 100 (the listing is one page of `limit` issues: bounded).
#
#   sudo bench/redmine.sh                          # PostgreSQL, 4 puma threads
#   REDMINE_DB=sqlite REDMINE_THREADS=1 sudo bench/redmine.sh
#   WORKERS=1,4,16 ISSUES=100 SCOPE_ISSUES=1000 sudo bench/redmine.sh
#
# It needs root (scripts/redmine-up.sh), stops the server it started, and leaves the
# pristine seed behind (each measurement resets the DB). Figures only, nothing passes or
# fails on a timing. The debug build is used: the time goes to Redmine, not to harness.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export REDMINE_DB=${REDMINE_DB:-postgresql} REDMINE_THREADS=${REDMINE_THREADS:-4}
ENV_FILE=$ROOT/.cache/redmine-bench.env
mkdir -p "$ROOT/.cache"

cargo build --quiet --workspace --all-targets
scripts/redmine-up.sh "$ENV_FILE" >/dev/null
trap 'scripts/redmine-down.sh >/dev/null 2>&1 || true' EXIT
set -a; . "$ENV_FILE"; set +a
export HARNESS_TEST_REDMINE=1

echo "Redmine $REDMINE_PKG_VERSION on $REDMINE_DB, puma threads $REDMINE_THREADS, processes $REDMINE_WORKERS; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
HARNESS_BENCH_WORKERS=${WORKERS:-1,4,16} HARNESS_BENCH_ISSUES=${ISSUES:-100} \
  cargo test --quiet --test all -- --ignored --exact redmine_concurrency::bench_settle_rate \
  --nocapture --test-threads=1 | grep '^|'
echo
HARNESS_BENCH_ISSUES=${SCOPE_ISSUES:-1000} \
  cargo test --quiet --test all -- --ignored --exact redmine_concurrency::bench_scope \
  --nocapture --test-threads=1 | grep '^|'
