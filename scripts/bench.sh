#!/usr/bin/env bash
# Runs the benchmark suite (make bench runs it through scripts/with-postgres.sh,
# which provides RECONCILER_TEST_DATABASE_URL with pg_stat_statements loaded)
# and writes bench/results.md and bench/*.png.
#
#   BENCH_SIZES   row counts, default 1k,10k,100k,1M
#   BENCH_RUNS    repeated runs per figure (medians), default 3
#   BENCH_FLAGS   any further flags of bench/cmd/reconciler-bench (-h lists them)
#   BENCH_LANES_FLAGS  flags of bench/cmd/reconciler-bench-lanes (the lane path)
#   BENCH_SCALE_FLAGS  flags of bench/cmd/reconciler-bench-scale (fleet at scale)
#   BENCH_POLL_FLAGS   flags of bench/cmd/reconciler-bench-poll (idle poll ÷ SELECT 1)
#
# Redis for the push-lane comparison is expected at 127.0.0.1:6379 (flag
# -redis); when it is not reachable that comparison is skipped and the report
# says so. Nothing is started here but the bench itself.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${RECONCILER_TEST_DATABASE_URL:?run through scripts/with-postgres.sh (make bench)}"
sizes=${BENCH_SIZES:-1k,10k,100k,1M}
runs=${BENCH_RUNS:-3}

cmd="make bench"
if [ -n "${BENCH_SIZES:-}${BENCH_RUNS:-}${BENCH_FLAGS:-}" ]; then
  cmd="BENCH_SIZES=$sizes BENCH_RUNS=$runs${BENCH_FLAGS:+ BENCH_FLAGS='$BENCH_FLAGS'} make bench"
fi

mkdir -p bin
# bench/ is its own module (so the embeddable packages never pull its plotting
# dependencies); it builds from there against this checkout.
(cd bench && go build -o ../bin/reconciler-bench ./cmd/reconciler-bench)
# The lane path (commit → replica serving, messages per change): bench/lanes.md.
(cd bench && go build -o ../bin/reconciler-bench-lanes ./cmd/reconciler-bench-lanes)
# shellcheck disable=SC2086
bin/reconciler-bench-lanes -out bench ${BENCH_LANES_FLAGS:-}
# The idle poll's server CPU over SELECT 1 (bench/poll.md): pgbench, one
# client per statement, both connection modes, on its own private cluster.
(cd bench && go build -o ../bin/reconciler-bench-poll ./cmd/reconciler-bench-poll)
if command -v pgbench >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  bin/reconciler-bench-poll -out bench -command "$cmd" ${BENCH_POLL_FLAGS:-}
else
  echo "bench: pgbench is missing (apt-get install postgresql-client): bench/poll.md not measured" >&2
fi
# The fleet at scale (bench/scale.md): 1–1,000 reconcilers polling one
# primary directly, through PgBouncer (transaction mode) and reading a hot
# standby. It starts its own clusters and PgBouncer; Debian's pgbouncer is
# installed here when missing.
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer >/dev/null
  else
    echo "bench: pgbouncer is missing: apt-get install pgbouncer (as root), or BENCH_SCALE_FLAGS='-modes direct,standby'" >&2
  fi
fi
(cd bench && go build -o ../bin/reconciler-bench-scale ./cmd/reconciler-bench-scale)
# shellcheck disable=SC2086
bin/reconciler-bench-scale -out bench -command "$cmd" ${BENCH_SCALE_FLAGS:-}
# shellcheck disable=SC2086
exec bin/reconciler-bench -sizes "$sizes" -runs "$runs" -out bench -command "$cmd" ${BENCH_FLAGS:-}
