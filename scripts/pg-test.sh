#!/usr/bin/env bash
# A scratch PostgreSQL on loopback for the history store's tests (internal/history, cmd/gpuvet):
# Debian's server (apt-get install postgresql), a cluster of its own under $PGTEST_DIR
# (/tmp/gpuvet-pg), listening on 127.0.0.1 and a unix socket there, on a free port, with a random
# password (scram-sha-256) that never goes on a command line. initdb runs once and is cached under
# $HOME/.cache/gpuvet-pg (a start then takes a second or two). PostgreSQL refuses to run as root:
# as root the cluster belongs to the postgres user.
#   start [PARENT_PID]  start it; print the shell lines that export GPUVET_TEST_PG_URL and
#                       GPUVET_TEST_PG_PASSWORD; with PARENT_PID, it stops itself when that process ends
#   stop                stop it and remove the cluster
set -euo pipefail
dir=${PGTEST_DIR:-/tmp/gpuvet-pg}
cache=$HOME/.cache/gpuvet-pg
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "pg-test: no PostgreSQL server (apt-get install postgresql)" >&2; exit 1; }
owner=$(id -un)
as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && owner=postgres

case "${1:-}" in
start)
  bash "$0" stop >/dev/null 2>&1 || true
  mkdir -p "$dir" && chmod 755 "$dir"
  if [ -f "$cache/template/PG_VERSION" ] && [ -f "$cache/password" ]; then
    cp -a "$cache/template" "$dir/data"
  else
    # initdb runs as the cluster's owner, in $dir (a root's $HOME is closed to postgres); the
    # result is then copied to the cache by whoever runs this.
    rm -rf "$cache" && mkdir -p "$cache"
    head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$cache/password"
    install -m 600 -o "$owner" "$cache/password" "$dir/pwfile"
    chown "$owner" "$dir"
    as timeout 120 "$bin/initdb" -D "$dir/data" -U gpuvet --pwfile="$dir/pwfile" --auth=scram-sha-256 -E UTF8 --no-sync >/dev/null
    rm -f "$dir/pwfile"
    cp -a "$dir/data" "$cache/template"
  fi
  chown -R "$owner" "$dir"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as timeout 60 "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=off -c max_connections=200" start >/dev/null
  echo "$port" > "$dir/port"
  if [ -n "${2:-}" ]; then
    # Stopped when the process that started it ends, whatever its exit traps do.
    (while kill -0 "$2" 2>/dev/null; do sleep 2; done; bash "$0" stop >/dev/null 2>&1) </dev/null >/dev/null 2>&1 &
  fi
  echo "export GPUVET_TEST_PG_URL='postgres://gpuvet@127.0.0.1:$port/postgres?sslmode=disable'"
  echo "export GPUVET_TEST_PG_PASSWORD='$(cat "$cache/password")'"
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as timeout 60 "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start [PARENT_PID] | stop" >&2; exit 2 ;;
esac
