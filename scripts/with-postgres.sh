#!/usr/bin/env bash
# Runs a command with RECONCILER_TEST_DATABASE_URL pointing at a PostgreSQL.
# When the variable is already set, it is used as is. Otherwise a private,
# throwaway cluster is created (initdb + pg_ctl, on a free port with its socket
# in a temp dir, as the postgres user when run as root) and removed afterwards,
# also when the command fails or is interrupted.
set -euo pipefail

if [ -n "${RECONCILER_TEST_DATABASE_URL:-}" ]; then
  exec "$@"
fi

find_bin() {
  if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return; fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/$1" ]; then echo "$d/$1"; return; fi
  done
  echo "with-postgres: $1 not found on PATH or under /usr/lib/postgresql/*/bin;" >&2
  echo "  install PostgreSQL (apt-get install postgresql) or set RECONCILER_TEST_DATABASE_URL=postgres://user@host:port/db" >&2
  exit 1
}
INITDB=$(find_bin initdb)
PG_CTL=$(find_bin pg_ctl)

dir=$(mktemp -d /tmp/reconciler-pg.XXXXXX)
chmod 755 "$dir"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; user=postgres; else user=$(id -un); fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))

cleanup() {
  as_pg "$PG_CTL" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

as_pg "$INITDB" -D "$dir/data" -U "$user" -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
as_pg "$PG_CTL" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_preload_libraries=pg_stat_statements" start >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }

export RECONCILER_TEST_DATABASE_URL="postgres://$user@127.0.0.1:$port/postgres?sslmode=disable"
export RECONCILER_TEST_PGDATA="$dir/data"
echo "with-postgres: private cluster on 127.0.0.1:$port (data in $dir, removed at exit)" >&2
set +e
"$@"
rc=$?
exit $rc
