#!/usr/bin/env bash
# Stop what scripts/litellm-up.sh started, by the PIDs it recorded, and nothing else.
#
# usage: scripts/litellm-down.sh [litellm|scripted-llm ...]    (default: both)
# env:   LITELLM_RUN_DIR   the run dir litellm-up.sh used (default <repo>/.cache/litellm-run)
#
# A recorded PID is signalled only if /proc/PID/cmdline is still exactly the command that
# litellm-up.sh started (PID reuse guard). SIGTERM, then SIGKILL after 10 s; it waits until
# the process has exited so the port is free. Messages go to stderr; exit 0 when nothing runs.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${LITELLM_RUN_DIR:-$REPO/.cache/litellm-run}
case $RUN in /*) ;; *) RUN=$PWD/$RUN ;; esac

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(litellm scripted-llm)
status=0
for name in "${names[@]}"; do
  case $name in litellm | scripted-llm) ;; *) echo "litellm-down: unknown name '$name'" >&2; status=2; continue ;; esac
  pidfile=$RUN/$name.pid
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  want=$(cat "$RUN/$name.cmd" 2>/dev/null || true)
  if [ -n "$want" ] && kill -0 "$pid" 2>/dev/null \
    && [ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" = "$want" ]; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null
      for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      echo "litellm-down: $name ($pid) did not stop on SIGTERM; SIGKILLed" >&2
    else
      echo "litellm-down: $name ($pid) stopped" >&2
    fi
  fi
  rm -f "$pidfile" "$RUN/$name.cmd"
  if [ "$name" = litellm ]; then rm -f "$RUN/litellm.yaml"; fi
done
exit "$status"
