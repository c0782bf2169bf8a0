#!/usr/bin/env bash
# scripts/redmine-down.sh - stop the puma that scripts/redmine-up.sh started.
# Kills only the PID in $REDMINE_LAB/run/puma.pid, after checking that it is our puma
# (process title "puma X.Y.Z (tcp://127.0.0.1:PORT) [redmine]"). Installed packages,
# the DB and the snapshots stay, so the next redmine-up.sh takes a few seconds.
set -euo pipefail
LAB=${REDMINE_LAB:-/tmp/harness-redmine}
HOST=127.0.0.1
PIDFILE=$LAB/run/puma.pid

if [ ! -f "$PIDFILE" ]; then echo "redmine-down: not running (no $PIDFILE)" >&2; exit 0; fi
pid=$(cat "$PIDFILE")
if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^puma .*tcp://$HOST:[0-9]*) \[redmine\]"; then
  echo "redmine-down: stale pidfile ($pid is not our puma); removing it" >&2
  rm -f "$PIDFILE"; exit 0
fi
echo "redmine-down: stopping puma pid $pid" >&2
kill -TERM "$pid"
for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$pid" 2>/dev/null; then
  echo "redmine-down: pid $pid ignored SIGTERM for 30s, sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
fi
rm -f "$PIDFILE"
echo "redmine-down: stopped" >&2
