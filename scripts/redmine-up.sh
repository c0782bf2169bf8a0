#!/usr/bin/env bash
# scripts/redmine-up.sh [--reset] [--rest on|off] [ENV_FILE]
#
# A REAL Redmine 5.0 for the integration tests: Debian bookworm's `redmine` +
# `redmine-sqlite` (or, with REDMINE_DB=postgresql, `redmine-pgsql` + `postgresql` in a
# cluster of this script's own), served by Debian's `puma` (no apache/passenger), on 127.0.0.1.
# It installs what is missing, configures and seeds headless (scripts/redmine-seed.rb),
# starts the server, waits until it is healthy, prints eval-able KEY=value lines and
# writes them to ENV_FILE. tests/redmine/README.md documents the keys and the seed.
#
#   (no option)    idempotent bring-up; ~0.2 s when the server is already up and seeded.
#                  A (re)start serves the pristine seeded snapshot; the printed values
#                  always describe that snapshot
#   --reset        restore the pristine seeded DB (same ids and keys). With the server
#                  up this is done in place (no restart, < 1 s: SQLite's backup API, or
#                  PostgreSQL's CREATE DATABASE .. TEMPLATE); otherwise stop, restore,
#                  start (~5-8 s). REDMINE_RESET=1 does the same.
#   --rest off|on  disable / re-enable the REST API on the running server (< 1 s, no restart;
#                  a plain bring-up or --reset turns it back on).
#
# Environment: REDMINE_PORT (3000), REDMINE_LAB (/tmp/harness-redmine: state, snapshots,
# logs; must be readable by www-data), REDMINE_DB (sqlite | postgresql), REDMINE_THREADS (1:
# puma threads per process), REDMINE_WORKERS (1: puma processes; more is puma's cluster mode),
# REDMINE_PG_PORT (15432: the cluster's loopback port), REDMINE_START_TIMEOUT (180),
# REDMINE_BUSY_TIMEOUT_MS (20000: SQLite's busy timeout in database.yml),
# REDMINE_ADMIN_PASSWORD, REDMINE_BOT_PASSWORD, REDMINE_DBCONFIG=false (skip dbconfig-common
# at install time; the seed then migrates and loads the default data itself).
#
# Needs root (apt-get, setpriv). The server runs as www-data, the owner of Debian's
# Redmine instance directories; the PostgreSQL cluster (REDMINE_LAB/pg) as postgres. There
# is one Redmine instance per machine, hence one server; a run asking for another DB,
# thread or process count restarts it so (its database.yml is rewritten for the adapter).
# Stop it with scripts/redmine-down.sh. Adapted from a verified recipe; the REST
# behaviour it relies on is summarised in tests/redmine/README.md.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SEED_SRC=$SCRIPT_DIR/redmine-seed.rb

RESET=${REDMINE_RESET:-0}
REST=
OUT_FILE=
while [ $# -gt 0 ]; do
  case "$1" in
    --reset) RESET=1 ;;
    --rest) shift; REST=${1:-} ;;
    --rest=*) REST=${1#--rest=} ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "redmine-up: unknown option $1" >&2; exit 64 ;;
    *) OUT_FILE=$1 ;;
  esac
  shift
done
case "$REST" in ''|on|off) ;; *) echo "redmine-up: --rest takes on or off" >&2; exit 64 ;; esac

LAB=${REDMINE_LAB:-/tmp/harness-redmine}
PORT=${REDMINE_PORT:-3000}
HOST=127.0.0.1
THREADS=${REDMINE_THREADS:-1}
WORKERS=${REDMINE_WORKERS:-1}
case "${REDMINE_DB:-sqlite}" in
  sqlite|sqlite3) DB_KIND=sqlite ;;
  postgresql|postgres|pg) DB_KIND=postgresql ;;
  *) echo "redmine-up: REDMINE_DB is sqlite or postgresql, not ${REDMINE_DB}" >&2; exit 64 ;;
esac
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "redmine-up: REDMINE_THREADS must be a whole number >= 1" >&2; exit 64; }
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || { echo "redmine-up: REDMINE_WORKERS must be a whole number >= 1" >&2; exit 64; }
PG_PORT=${REDMINE_PG_PORT:-15432}
START_TIMEOUT=${REDMINE_START_TIMEOUT:-180}
BUSY_MS=${REDMINE_BUSY_TIMEOUT_MS:-20000}
URL="http://$HOST:$PORT"

APP=/usr/share/redmine
INSTANCE=default
RUN_USER=www-data
DB_YML=/etc/redmine/$INSTANCE/database.yml
DB_DIR=/var/lib/dbconfig-common/sqlite3/redmine/instances/$INSTANCE
DB_FILE=$DB_DIR/redmine_$INSTANCE     # re-read from database.yml below
CACHE_DIR=/var/cache/redmine/$INSTANCE/tmp/cache

STATE=$LAB/state
RUNDIR=$LAB/run
BUNDLE_DIR=$LAB/bundle
ENV_CACHE=$STATE/redmine.env
SNAPSHOT=$STATE/seeded.sqlite3
SNAPSHOT_ENV=$STATE/seeded.env
SERVER_CONF=$RUNDIR/server.conf      # what the running server serves: DB, threads, workers
SQLITE_YML=$STATE/database.yml.sqlite  # the SQLite database.yml, kept while PostgreSQL is used
BASE_SNAPSHOT=$STATE/base.sqlite3     # DB as the package left it (before the seed)
BASE_VERSION=$STATE/base.version      # its package version ("empty" line: rebuild from nothing)
PIDFILE=$RUNDIR/puma.pid
SERVER_LOG=$RUNDIR/puma.log
SEED_RB=$LAB/seed.rb
PUMA_RB=$LAB/puma.rb

PACKAGES=(redmine redmine-sqlite puma sqlite3 curl)
if [ "$DB_KIND" = postgresql ]; then
  PACKAGES+=(redmine-pgsql postgresql)
  SNAPSHOT_ENV=$STATE/seeded-pg.env
fi

T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
log() { printf '[redmine-up +%ss] %s\n' "$(elapsed)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (needs apt-get and setpriv)"
[ -r "$SEED_SRC" ] || die "missing $SEED_SRC"

# Run a command as www-data with a clean, explicit environment (cwd = Rails root).
APP_ENV=(setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$LAB/home" LANG=C.UTF-8
  RAILS_ENV=production REDMINE_INSTANCE="$INSTANCE" BUNDLE_GEMFILE="$BUNDLE_DIR/Gemfile"
  REDMINE_ADMIN_PASSWORD="${REDMINE_ADMIN_PASSWORD:-redmine-admin-pw}"
  REDMINE_BOT_PASSWORD="${REDMINE_BOT_PASSWORD:-redmine-bot-pw}")
as_app() { (cd "$APP" && exec "${APP_ENV[@]}" "$@"); }

kv() { sed -n "s/^$1=//p" "$2" 2>/dev/null | head -n1 || true; }

# PID of *our* puma (pidfile + process title check), or nothing. Any port: one DB, one server.
server_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 0
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  # puma rewrites its argv after boot: "puma 5.6.5 (tcp://127.0.0.1:3000) [redmine]"
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^puma .*tcp://$HOST:[0-9]*) \[redmine\]"; then
    echo "$pid"
  fi
}

# alive PID: exists and is not a zombie (kill -0 succeeds on zombies)
alive() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1; [ -n "$st" ] && [ "$st" != Z ]; }

http_code() { curl -s -o /dev/null -m 10 -w '%{http_code}' "$@" || true; }

pkg_version() { dpkg-query -W -f='${Version}\n' redmine 2>/dev/null || true; }
# Fingerprint of the seed (+ passwords): an edited seed invalidates the snapshots.
seed_sha() {
  # The effective passwords, so exporting the printed (default) values changes nothing.
  { cat "$SEED_SRC"; echo "seed-format-2 ${REDMINE_ADMIN_PASSWORD:-redmine-admin-pw}${REDMINE_BOT_PASSWORD:-redmine-bot-pw}"; } |
    sha256sum | cut -c1-16
}

# The SQLite file: from database.yml while it is SQLite's, else from the kept copy.
read_db_file() {
  local f yml=$DB_YML
  grep -q 'adapter: *sqlite3' "$yml" 2>/dev/null || yml=$SQLITE_YML
  f=$(sed -n 's/^ *database: *//p' "$yml" 2>/dev/null | head -n1 || true)
  [ -n "$f" ] && DB_FILE=$f
  return 0
}

# Is the REST API on, with our seed, behind our server on this port?
# Returns 0 healthy, 1 not, 3 "everything fine except the REST API is off" (403).
seeded_and_healthy() {
  local ak bk q c
  [ -s "$ENV_CACHE" ] || return 1
  [ -n "$(server_pid)" ] || return 1
  [ "$(cat "$SERVER_CONF" 2>/dev/null)" = "$(server_conf)" ] || return 1
  [ "$DB_KIND" = sqlite ] || pg_running || return 1
  [ "$(kv REDMINE_URL "$ENV_CACHE")" = "$URL" ] || return 1
  [ "$(kv REDMINE_SEED_SHA "$ENV_CACHE")" = "$(seed_sha)" ] || return 1
  [ "$(kv REDMINE_PKG_VERSION "$ENV_CACHE")" = "$(pkg_version)" ] || return 1
  ak=$(kv REDMINE_ADMIN_API_KEY "$ENV_CACHE"); bk=$(kv REDMINE_BOT_API_KEY "$ENV_CACHE")
  q=$(kv REDMINE_QUERY_ID "$ENV_CACHE")
  c=$(http_code -H "X-Redmine-API-Key: $ak" "$URL/users/current.json")
  [ "$c" = 403 ] && return 3
  [ "$c" = 200 ] || return 1
  [ "$(http_code -H "X-Redmine-API-Key: $bk" "$URL/issues.json?query_id=$q&limit=1")" = 200 ] || return 1
}

emit() {
  local tmp=$STATE/emit.tmp.$$
  { cat "$ENV_CACHE"
    echo "REDMINE_SERVER_PID=$(server_pid)"
    echo "REDMINE_SERVER_LOG=$SERVER_LOG"
    echo "REDMINE_DB=$DB_KIND"
    echo "REDMINE_THREADS=$THREADS"
    echo "REDMINE_WORKERS=$WORKERS"
    if [ "$DB_KIND" = sqlite ]; then
      echo "REDMINE_DB_FILE=$DB_FILE"
    else
      # psql "$REDMINE_DB_URL" reaches the live DB as its owner (loopback only).
      echo "REDMINE_DB_URL=postgresql://redmine:$(pg_password)@$HOST:$PG_PORT/redmine"
    fi
    echo "REDMINE_LAB=$LAB"
  } > "$tmp"
  if [ -n "$OUT_FILE" ]; then
    mkdir -p "$(dirname "$OUT_FILE")"
    cp "$tmp" "$OUT_FILE.tmp.$$" && mv -f "$OUT_FILE.tmp.$$" "$OUT_FILE"
  fi
  cat "$tmp"; rm -f "$tmp"
}

# --- REST API switch --------------------------------------------------------
# Setting.rest_api_enabled lives in the `settings` table. Redmine caches settings per
# process but calls Setting.check_cache at the start of every request, which clears the
# cache when MAX(settings.updated_on) is newer than the last clear. So an UPDATE with a
# fresh updated_on is seen by the very next request: no rails runner (~4 s), no restart.
sql() {  # sql STATEMENT : on the live DB (sqlite3 retried while the server holds a lock)
  local i
  if [ "$DB_KIND" = postgresql ]; then pg_sql redmine "$1"; return; fi
  for i in 1 2 3 4 5; do
    sqlite3 -cmd ".timeout 5000" "$DB_FILE" "$1" && return 0
    sleep 0.2
  done
  return 1
}
# Redmine stores UTC timestamps without a zone in both adapters.
if [ "$DB_KIND" = postgresql ]; then
  now_sql="(now() at time zone 'utc')"
else
  now_sql="strftime('%Y-%m-%d %H:%M:%f','now')"
fi
set_rest() {  # set_rest 1|0
  sql "UPDATE settings SET value='$1', updated_on=$now_sql WHERE name='rest_api_enabled';
       INSERT INTO settings(name, value, updated_on)
         SELECT 'rest_api_enabled', '$1', $now_sql
         WHERE NOT EXISTS (SELECT 1 FROM settings WHERE name='rest_api_enabled');"
}
# Make every running Redmine process drop its settings cache on its next request.
touch_settings() { sql "UPDATE settings SET updated_on=$now_sql;"; }

# --- PostgreSQL (REDMINE_DB=postgresql) --------------------------------------
# A cluster of this script's own in $LAB/pg (initdb and pg_ctl as postgres), on
# 127.0.0.1:$PG_PORT and a socket in $LAB/pg-run; Debian's own "main" cluster is left alone.
# Durability is traded for speed (fsync off): a test DB is rebuilt, never recovered. The
# live DB `redmine` is a copy of the template `redmine_seeded` (the pristine seed), owned by
# the role `redmine`, whose random password lives in $STATE (root only) and database.yml.
PG_DATA=$LAB/pg
PG_SOCK=$LAB/pg-run
PG_LOG=$RUNDIR/postgresql.log
PG_PASSWORD_FILE=$STATE/pg.password
pg_bin() { find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1; }
as_pg() { (cd / && setpriv --reuid=postgres --regid=postgres --init-groups env -i PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"); }
pg_running() { [ -s "$PG_DATA/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; }
pg_sql() {  # pg_sql DB STATEMENT : as the superuser, over the cluster's socket
  as_pg psql -X -q -tA -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -d "$1" -c "$2"
}
pg_password() { cat "$PG_PASSWORD_FILE" 2>/dev/null || true; }
pg_db_exists() { [ "$(pg_sql postgres "SELECT 1 FROM pg_database WHERE datname='$1'")" = 1 ]; }

ensure_pg() {
  local bin; bin=$(pg_bin)
  [ -n "$bin" ] || die "no PostgreSQL under /usr/lib/postgresql (package postgresql)"
  install -d -o postgres -g postgres -m 755 "$PG_SOCK"
  if [ ! -s "$PG_DATA/PG_VERSION" ]; then
    log "initdb $PG_DATA (a cluster of this script's own)"
    rm -rf "$PG_DATA"; install -d -o postgres -g postgres -m 700 "$PG_DATA"
    as_pg "$bin/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=peer --auth-host=scram-sha-256 >/dev/null || die "initdb failed"
    cat >> "$PG_DATA/postgresql.conf" <<EOF
# scripts/redmine-up.sh: a test cluster on loopback only; durability off for speed
listen_addresses = '$HOST'
unix_socket_directories = '$PG_SOCK'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  fi
  if ! pg_running; then
    : > "$PG_LOG"; chown postgres:postgres "$PG_LOG"
    log "starting PostgreSQL ($PG_DATA) on $HOST:$PG_PORT"
    # 9>&- : the cluster must not inherit (and hold forever) this script's lock.
    as_pg "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -o "-p $PG_PORT" -w -t 60 start >/dev/null 9>&- ||
      { tail -n 20 "$PG_LOG" >&2; die "PostgreSQL did not start (log: $PG_LOG)"; }
  fi
  if [ ! -s "$PG_PASSWORD_FILE" ]; then
    (umask 077; head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32 > "$PG_PASSWORD_FILE")
  fi
  chmod 600 "$PG_PASSWORD_FILE"
  if [ "$(pg_sql postgres "SELECT 1 FROM pg_roles WHERE rolname='redmine'")" = 1 ]; then
    pg_sql postgres "ALTER ROLE redmine LOGIN PASSWORD '$(pg_password)'"
  else
    pg_sql postgres "CREATE ROLE redmine LOGIN PASSWORD '$(pg_password)'"
  fi
}

stop_pg() {
  pg_running || return 0
  log "stopping PostgreSQL ($PG_DATA)"
  as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null || true
}

# The live DB as a copy of the template (FORCE: puma's pooled connections are cut; Rails
# verifies a connection when a request checks it out, and reconnects).
pg_restore_live() {
  pg_sql postgres "DROP DATABASE IF EXISTS redmine WITH (FORCE)" &&
  pg_sql postgres "CREATE DATABASE redmine TEMPLATE redmine_seeded OWNER redmine STRATEGY ${REDMINE_PG_STRATEGY:-WAL_LOG}"
}
pg_empty_live() {
  pg_sql postgres "DROP DATABASE IF EXISTS redmine WITH (FORCE)" &&
  pg_sql postgres "CREATE DATABASE redmine OWNER redmine ENCODING 'UTF8'"
}
pg_snapshot() {  # server stopped: nothing holds the live DB
  log "saving the pristine seeded DB as the template redmine_seeded"
  if pg_db_exists redmine_seeded; then
    pg_sql postgres "ALTER DATABASE redmine_seeded IS_TEMPLATE false" &&
    pg_sql postgres "DROP DATABASE redmine_seeded"
  fi
  pg_sql postgres "CREATE DATABASE redmine_seeded TEMPLATE redmine" &&
  pg_sql postgres "ALTER DATABASE redmine_seeded IS_TEMPLATE true ALLOW_CONNECTIONS false" &&
  cp "$ENV_CACHE" "$SNAPSHOT_ENV"
}

ensure_database_yml_pg() {
  local pool=$(( THREADS > 5 ? THREADS : 5 ))
  if grep -q 'adapter: *sqlite3' "$DB_YML" 2>/dev/null; then cp -p "$DB_YML" "$SQLITE_YML"; fi
  cat > "$DB_YML.tmp" <<EOF
# Written by scripts/redmine-up.sh (REDMINE_DB=postgresql); the SQLite one is kept in
# $SQLITE_YML and put back by the next run without REDMINE_DB=postgresql.
production:
  adapter: postgresql
  database: redmine
  host: $HOST
  port: $PG_PORT
  username: redmine
  password: "$(pg_password)"
  encoding: utf8
  pool: $pool
EOF
  chown root:"$RUN_USER" "$DB_YML.tmp"; chmod 640 "$DB_YML.tmp"; mv -f "$DB_YML.tmp" "$DB_YML"
}

# ---------------------------------------------------------------------------
ensure_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]} (apt, no recommends: no apache/passenger)"
  # redmine's dbconfig-common questions are per instance (redmine/instances/<name>/...):
  # sqlite3, dbconfig creates + migrates the DB and loads the English default data.
  debconf-set-selections <<EOF
redmine redmine/current-instances string $INSTANCE
redmine redmine/instances/$INSTANCE/dbconfig-install boolean ${REDMINE_DBCONFIG:-true}
redmine redmine/instances/$INSTANCE/database-type select sqlite3
redmine redmine/instances/$INSTANCE/default-language select en
redmine redmine/instances/$INSTANCE/db/basepath string $DB_DIR
EOF
  export DEBIAN_FRONTEND=noninteractive
  local t try
  t=$(date +%s)
  dpkg --configure -a >&2 || true
  for try in 1 2 3; do
    apt-get update -q -o DPkg::Lock::Timeout=300 >&2 &&
    apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
      "${PACKAGES[@]}" >&2 && break
    [ "$try" = 3 ] && die "apt-get install failed 3 times"
    log "apt failed (try $try), retrying in 10s"; sleep 10
  done
  log "apt install took $(( $(date +%s) - t ))s"
}

ensure_dirs() {
  mkdir -p "$LAB" "$STATE" "$RUNDIR" "$BUNDLE_DIR" "$LAB/home"
  chmod 755 "$LAB"
  chown "$RUN_USER:$RUN_USER" "$RUNDIR" "$BUNDLE_DIR" "$LAB/home"
}

# database.yml normally comes from dbconfig-common; write one if dbconfig was bypassed.
ensure_database_yml() {
  if ! grep -q 'adapter: *sqlite3' "$DB_YML" 2>/dev/null && [ -s "$SQLITE_YML" ]; then
    log "putting the SQLite $DB_YML back"
    cp -p "$SQLITE_YML" "$DB_YML"
  fi
  if [ -r "$DB_YML" ] && grep -q 'adapter: *sqlite3' "$DB_YML"; then
    # dbconfig writes no `timeout:`, i.e. SQLite's busy timeout 0: a request that meets
    # any lock (an in-place --reset, --rest, a second thread) fails at once with HTTP 500
    # "SQLite3::BusyException: database is locked". Wait up to $BUSY_MS ms instead: on a
    # loaded machine 5 s (this script's old value, replaced here) was seen to run out.
    if ! grep -q '^ *timeout:' "$DB_YML"; then
      log "adding 'timeout: $BUSY_MS' to $DB_YML"
      sed -i "s/^\( *\)adapter: *sqlite3 *\$/&\n\1timeout: $BUSY_MS/" "$DB_YML"
    elif ! grep -q "^ *timeout: *$BUSY_MS *\$" "$DB_YML"; then
      log "setting 'timeout: $BUSY_MS' in $DB_YML"
      sed -i "s/^\( *\)timeout: *[0-9]* *\$/\1timeout: $BUSY_MS/" "$DB_YML"
    fi
    return 0
  fi
  log "no usable $DB_YML (dbconfig bypassed?) - writing a sqlite3 one"
  [ -d /etc/redmine/$INSTANCE ] || "$APP/bin/redmine-instances" create "$INSTANCE"
  install -d -o root -g "$RUN_USER" -m 2770 "$DB_DIR"
  cat > "$DB_YML" <<EOF
production:
  adapter: sqlite3
  database: $DB_FILE
  encoding: utf8
  timeout: $BUSY_MS
EOF
  chown root:"$RUN_USER" "$DB_YML"; chmod 640 "$DB_YML"
  if [ ! -s /etc/redmine/$INSTANCE/secret_key.txt ]; then
    ruby -rsecurerandom -e 'puts SecureRandom.hex(16)' > /etc/redmine/$INSTANCE/secret_key.txt
    chown root:"$RUN_USER" /etc/redmine/$INSTANCE/secret_key.txt
    chmod 640 /etc/redmine/$INSTANCE/secret_key.txt
  fi
}

# Debian's Gemfile lists no app server (`rails server`: Could not find server "").
# Wrap it instead of editing /usr/share/redmine; resolved offline against Debian's gems.
ensure_bundle() {
  cat > "$BUNDLE_DIR/Gemfile" <<'EOF'
# Debian's Redmine Gemfile + puma (Debian's 'puma' package), used through BUNDLE_GEMFILE
# so that /usr/share/redmine stays untouched. Generated by scripts/redmine-up.sh.
eval_gemfile '/usr/share/redmine/Gemfile'
gem 'puma'
EOF
  chown "$RUN_USER:$RUN_USER" "$BUNDLE_DIR/Gemfile"
  rm -f "$BUNDLE_DIR/Gemfile.lock"   # re-resolve: a Debian gem upgrade must not leave a stale lock
  as_app bundle install --local --quiet >&2 || die "bundle install --local failed"
}

write_puma_config() {
  cat > "$PUMA_RB" <<EOF
# Generated by scripts/redmine-up.sh
directory '$APP'
rackup '$APP/config.ru'
environment 'production'
bind 'tcp://$HOST:$PORT'
threads $THREADS, $THREADS
pidfile '$PIDFILE'
EOF
  if [ "$WORKERS" -gt 1 ]; then
    # Cluster mode: the app is loaded once, each forked worker opens its own DB connections.
    cat >> "$PUMA_RB" <<EOF
workers $WORKERS
preload_app!
before_fork { ActiveRecord::Base.connection_pool.disconnect! if defined?(ActiveRecord::Base) }
on_worker_boot { ActiveRecord::Base.establish_connection if defined?(ActiveRecord::Base) }
EOF
  fi
}
server_conf() { echo "db=$DB_KIND threads=$THREADS workers=$WORKERS"; }

stop_server() {
  local pid i
  pid=$(server_pid)
  [ -n "$pid" ] || { rm -f "$PIDFILE"; return 0; }
  log "stopping puma pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$PIDFILE" "$SERVER_CONF"
}

port_busy() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

start_server() {
  port_busy && die "$HOST:$PORT is already in use by a process this script did not start"
  write_puma_config
  : > "$SERVER_LOG"; chown "$RUN_USER:$RUN_USER" "$SERVER_LOG"
  server_conf > "$SERVER_CONF"
  log "starting puma on $URL ($(server_conf))"
  # setsid: own session, survives the calling shell; puma writes $PIDFILE itself.
  # 9>&- : the server must not inherit (and hold forever) this script's lock.
  (cd "$APP" && exec setsid "${APP_ENV[@]}" bundle exec puma -C "$PUMA_RB") \
    >>"$SERVER_LOG" 2>&1 </dev/null 9>&- &
  local launched=$! ak i code=000
  ak=$(kv REDMINE_ADMIN_API_KEY "$ENV_CACHE")
  for i in $(seq 1 $(( START_TIMEOUT * 4 ))); do
    code=$(http_code -H "X-Redmine-API-Key: $ak" "$URL/users/current.json")
    if [ "$code" = 200 ]; then
      log "healthy (puma pid $(server_pid))"
      return 0
    fi
    # Puma sets its process title only after loading the app: watch the launched PID instead.
    if ! alive "$launched"; then
      tail -n 40 "$SERVER_LOG" >&2; die "puma exited during start-up (log: $SERVER_LOG)"
    fi
    sleep 0.25
  done
  tail -n 40 "$SERVER_LOG" >&2
  die "server not healthy after ${START_TIMEOUT}s (last HTTP code $code; log: $SERVER_LOG)"
}

# WAL: readers (puma's requests) no longer block on a writer (an in-place --reset, --rest,
# the seed) nor a writer on them, so a lock wait is rare and short. The mode is stored in
# the DB file; the -wal and -shm files sit beside it in DB_DIR, which www-data may write.
ensure_wal() {
  local mode
  mode=$(sqlite3 -cmd ".timeout $BUSY_MS" "$DB_FILE" "PRAGMA journal_mode=WAL;") ||
    die "cannot set WAL on $DB_FILE"
  [ "$mode" = wal ] || die "$DB_FILE: journal_mode is '$mode', not wal"
  chown "$RUN_USER:$RUN_USER" "$DB_FILE"-wal "$DB_FILE"-shm 2>/dev/null || true
}

db_copy() {  # db_copy SRC DEST : consistent copy of a sqlite DB
  sqlite3 -cmd ".timeout 5000" "$1" ".backup '$2.tmp'" && mv -f "$2.tmp" "$2"
}

db_has_seed() {
  [ -s "$DB_FILE" ] &&
  [ "$(sqlite3 -cmd ".timeout 5000" "$DB_FILE" "SELECT count(*) FROM projects WHERE identifier='mopac';" 2>/dev/null || echo 0)" != 0 ]
}

save_base() {
  if [ -f "$DB_FILE" ] && ! db_has_seed; then
    log "saving base DB (as installed, before seeding) to $BASE_SNAPSHOT"
    db_copy "$DB_FILE" "$BASE_SNAPSHOT"; pkg_version > "$BASE_VERSION"
  else
    # No DB, or one that already holds (possibly test-modified) seed data and no base
    # copy of it: rebuild from nothing (the seed migrates and loads the default data).
    rm -f "$BASE_SNAPSHOT"; { pkg_version; echo empty; } > "$BASE_VERSION"
  fi
}

install_db_file() {  # install_db_file SRC : replace the live DB (server stopped)
  cp "$1" "$DB_FILE.tmp"
  chown root:"$RUN_USER" "$DB_FILE.tmp"; chmod 660 "$DB_FILE.tmp"
  rm -f "$DB_FILE-journal" "$DB_FILE-wal" "$DB_FILE-shm"
  mv -f "$DB_FILE.tmp" "$DB_FILE"
  rm -rf "${CACHE_DIR:?}"/* 2>/dev/null || true
}

restore_base() {
  log "restoring base DB (as installed) before seeding"
  if grep -qx empty "$BASE_VERSION"; then
    rm -f "$DB_FILE" "$DB_FILE-journal" "$DB_FILE-wal" "$DB_FILE-shm"
  else
    install_db_file "$BASE_SNAPSHOT"
  fi
}

snapshot_valid() {
  if [ "$DB_KIND" = postgresql ]; then pg_running && pg_db_exists redmine_seeded; else [ -s "$SNAPSHOT" ]; fi &&
  [ -s "$SNAPSHOT_ENV" ] &&
  [ "$(kv REDMINE_PKG_VERSION "$SNAPSHOT_ENV")" = "$(pkg_version)" ] &&
  [ "$(kv REDMINE_SEED_SHA "$SNAPSHOT_ENV")" = "$(seed_sha)" ]
}

base_valid() {
  [ -s "$BASE_VERSION" ] && [ "$(head -n1 "$BASE_VERSION")" = "$(pkg_version)" ] &&
  { grep -qx empty "$BASE_VERSION" || [ -s "$BASE_SNAPSHOT" ]; }
}

run_seed() {
  install -m 644 "$SEED_SRC" "$SEED_RB"
  log "migrating/seeding (rails runner $SEED_RB)"
  {
    echo "REDMINE_URL=$URL"
    echo "REDMINE_PKG_VERSION=$(pkg_version)"
    echo "REDMINE_SEED_SHA=$(seed_sha)"
    as_app bundle exec rails runner -e production "$SEED_RB" | grep -E '^[A-Z0-9_]+='
  } > "$ENV_CACHE.tmp" || die "seeding failed"
  mv -f "$ENV_CACHE.tmp" "$ENV_CACHE"
  # a fallback-created DB file must stay writable by www-data
  if [ "$DB_KIND" = sqlite ]; then
    chown root:"$RUN_USER" "$DB_FILE" 2>/dev/null || true; chmod 660 "$DB_FILE" 2>/dev/null || true
  fi
}

snapshot_db() {
  log "saving pristine seeded DB snapshot to $SNAPSHOT"
  db_copy "$DB_FILE" "$SNAPSHOT"
  cp "$ENV_CACHE" "$SNAPSHOT_ENV"
}

env_from_snapshot() { sed "s#^REDMINE_URL=.*#REDMINE_URL=$URL#" "$SNAPSHOT_ENV" > "$ENV_CACHE"; }

restore_db() {  # server stopped
  log "restoring pristine seeded DB snapshot"
  install_db_file "$SNAPSHOT"
  env_from_snapshot
}

# Reset while the server runs: the sqlite backup API writes the snapshot's pages into
# the live DB under SQLite's own locking; puma's open connection sees the new content
# on its next transaction (sequences, lock_versions and settings included). The settings
# touch makes Redmine drop its settings cache (e.g. after --rest off).
reset_in_place() {
  local i
  if [ "$DB_KIND" = postgresql ]; then
    pg_restore_live && touch_settings || return 1
    rm -rf "${CACHE_DIR:?}"/* 2>/dev/null || true
    env_from_snapshot
    return 0
  fi
  for i in 1 2 3 4 5; do
    sqlite3 -cmd ".timeout 5000" "$DB_FILE" ".restore '$SNAPSHOT'" && break
    [ "$i" = 5 ] && return 1
    sleep 0.2
  done
  touch_settings || return 1
  rm -rf "${CACHE_DIR:?}"/* 2>/dev/null || true
  env_from_snapshot
}

# --- main -------------------------------------------------------------------
# One invocation at a time (tests may call --reset from several places).
mkdir -p "$LAB"; chmod 755 "$LAB"
exec 9>"$LAB/.lock"
flock -w 600 9 || die "another redmine-up.sh holds $LAB/.lock"
read_db_file

if [ -n "$REST" ]; then
  rc=0; seeded_and_healthy || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || die "--rest needs a running, seeded server: run $0 first"
  ak=$(kv REDMINE_ADMIN_API_KEY "$ENV_CACHE")
  if [ "$REST" = off ]; then set_rest 0; want=403; else set_rest 1; want=200; fi
  code=$(http_code -H "X-Redmine-API-Key: $ak" "$URL/users/current.json")
  [ "$code" = "$want" ] || die "REST API switch to $REST not effective: GET /users/current.json answered $code"
  log "REST API $REST (GET /users/current.json with the admin key -> $code)"
  echo "REDMINE_REST=$REST"
  exit 0
fi

if [ "$RESET" = 1 ]; then
  rc=0; seeded_and_healthy || rc=$?
  if { [ "$rc" = 0 ] || [ "$rc" = 3 ]; } && snapshot_valid; then
    if reset_in_place && seeded_and_healthy; then
      log "reset to the pristine seeded DB (in place, server kept running)"
      emit; exit 0
    fi
    log "in-place reset failed; falling back to stop/restore/start"
  fi
else
  rc=0; seeded_and_healthy || rc=$?
  if [ "$rc" = 3 ]; then
    log "REST API was off: turning it back on"
    set_rest 1 && { rc=0; seeded_and_healthy || rc=$?; }
  fi
  if [ "$rc" = 0 ]; then
    log "already up and seeded: $URL"
    # The printed values always describe the pristine snapshot (what --reset restores), never
    # a seed run over test-modified data.
    if snapshot_valid; then env_from_snapshot; fi
    emit; exit 0
  fi
fi

ensure_packages
ensure_dirs
stop_server
port_busy && die "$HOST:$PORT is already in use by a process this script did not start"
if [ "$DB_KIND" = postgresql ]; then
  ensure_pg
  ensure_database_yml_pg
  ensure_bundle
  if snapshot_valid; then
    log "restoring the pristine seeded DB (template redmine_seeded)"
    pg_restore_live || die "cannot copy the template redmine_seeded"
    rm -rf "${CACHE_DIR:?}"/* 2>/dev/null || true
    env_from_snapshot
  else
    pg_empty_live || die "cannot create the database redmine"
    # Migrated and filled by processes of their own: a seed that migrates in its own process
    # works on stale model data (seen here: "Assignee is invalid" for the bot).
    log "migrating an empty database (rake db:migrate, redmine:load_default_data)"
    { as_app bundle exec rake db:migrate SCHEMA="$LAB/home/schema.rb" &&
      as_app env REDMINE_LANG=en bundle exec rake redmine:load_default_data; } >"$RUNDIR/migrate.log" 2>&1 ||
      { tail -n 20 "$RUNDIR/migrate.log" >&2; die "migrating failed (log: $RUNDIR/migrate.log)"; }
    run_seed
    pg_snapshot || die "cannot save the template redmine_seeded"
  fi
  start_server
  emit
  exit 0
fi
stop_pg   # SQLite from here on: a cluster left by a PostgreSQL run is not needed
ensure_database_yml
read_db_file
[ -d "$(dirname "$DB_FILE")" ] || install -d -o root -g "$RUN_USER" -m 2770 "$(dirname "$DB_FILE")"
ensure_bundle

base_valid || save_base

if snapshot_valid; then
  # Pristine seeded state, same ids and keys. A start never keeps test-modified data: the
  # values it prints (ids, expected query orders) must describe the DB the server serves.
  restore_db
else
  # no snapshot yet, or the package or the seed changed: seed from the base DB
  restore_base
  run_seed
  snapshot_db
fi

ensure_wal
start_server
emit
