#!/usr/bin/env bash
# The `make run` demo: migrates the embedded SQLite store under ./demo,
# seeds a few objects, views and flows, a datasource on a SQLite file and a
# connector against a small local upstream started here, then runs the
# daemon in the foreground. Press Ctrl-C to stop.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BIN=${BIN:-bin/reconciler}
UPSTREAM=${DEMO_UPSTREAM:-127.0.0.1:9478}
STATUS=${DEMO_STATUS:-127.0.0.1:9477}
STORE=demo/reconciler.db

[ -x "$BIN" ] || $GO build -o "$BIN" ./cmd/reconciler
$GO build -o bin/reconciler-demo ./scripts/demo
mkdir -p demo

"$BIN" migrate --config config.yaml --store.url "sqlite://./$STORE"
bin/reconciler-demo seed -store "$STORE" -upstream "http://$UPSTREAM" -datasource demo/crm.db

bin/reconciler-demo upstream -listen "$UPSTREAM" &
UPSTREAM_PID=$!
trap 'kill "$UPSTREAM_PID" 2>/dev/null || true; wait "$UPSTREAM_PID" 2>/dev/null || true' EXIT

cat <<MSG

== reconciler demo =====================================================
The daemon starts below and materializes the seeded rows. The connector
"crm" is held: its stored credential is wrong and upstream answers 401.
In another terminal, from this directory:

  bin/reconciler items                       # every entry, state, reason
  bin/reconciler items --state held          # crm, and a flow naming "Account"

  # fix the credential with a plain row update: no signal, no restart
  bin/reconciler-demo set-credential crm-token demo-good-token
  bin/reconciler items --kind connector      # ready within a poll interval

  bin/reconciler-demo touch object account   # rebuilds account and its views
  bin/reconciler-demo set-metadata flow AccountHealthScoreTrigger '{"trigger":{"object":"account"}}'
  bin/reconciler status; bin/reconciler drift; bin/reconciler fleet
  kill -USR2 \$(pgrep -n -f 'reconciler run')   # drift report into demo/drift

Status API: http://$STATUS/v1/status   Press Ctrl-C to stop.
=========================================================================

MSG

"$BIN" run --config config.yaml --store.url "sqlite://./$STORE" \
  --status.listen "$STATUS" --drift.dir ./demo/drift --replica_id demo
