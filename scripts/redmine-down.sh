#!/usr/bin/env bash
# scripts/redmine-down.sh - stop what scripts/redmine-up.sh started: its puma and, when a
# REDMINE_DB=postgresql run started it, its PostgreSQL cluster ($REDMINE_LAB/pg).
# Kills only the PID in $REDMINE_LAB/run/puma.pid, after checking that it is our puma
# (process title "puma X.Y.Z (tcp://127.0.0.1:PORT) [redmine]"), and stops only the cluster
# in $REDMINE_LAB/pg (pg_ctl). Installed packages, the DBs and the snapshots stay, so the
# next redmine-up.sh takes a few seconds.
set -euo pipefail
LAB=${REDMINE_LAB:-/tmp/harness-redmine}
HOST=127.0.0.1
PIDFILE=$LAB/run/puma.pid
PG_DATA=$LAB/pg

stop_pg() {
  [ -s "$PG_DATA/postmaster.pid" ] || return 0
  local bin
  bin=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1)
  [ -n "$bin" ] || return 0
  echo "redmine-down: stopping PostgreSQL ($PG_DATA)" >&2
  (cd / && setpriv --reuid=postgres --regid=postgres --init-groups \
    "$bin/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null) || true
}

stop_puma() {
  if [ ! -f "$PIDFILE" ]; then echo "redmine-down: puma not running (no $PIDFILE)" >&2; return 0; fi
  local pid
  pid=$(cat "$PIDFILE")
  if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^puma .*tcp://$HOST:[0-9]*) \[redmine\]"; then
    echo "redmine-down: stale pidfile ($pid is not our puma); removing it" >&2
    rm -f "$PIDFILE" "$LAB/run/server.conf"; return 0
  fi
  echo "redmine-down: stopping puma pid $pid" >&2
  kill -TERM "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "redmine-down: pid $pid ignored SIGTERM for 30s, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE" "$LAB/run/server.conf"
}

stop_puma
stop_pg
echo "redmine-down: stopped" >&2
