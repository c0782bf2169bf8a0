#!/usr/bin/env bash
# How often the python-dev preset denies what real models send: the labelled false-denial
# rate (tests/gate_corpus.rs, which fails above 3%) and the denial rate over the whole corpus
# of tests/data/real_commands, per agent and model, with the denial classes and two examples
# each (the whole corpus is about 19,000 verdicts: a minute or two in a debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test all -- gate_corpus:: --include-ignored --nocapture --test-threads 1 "$@" 2>&1 |
    grep -v '^\s*\(Compiling\|Finished\|Running\)'
