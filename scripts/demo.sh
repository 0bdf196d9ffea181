#!/usr/bin/env bash
# The `make run` demo: migrates the embedded SQLite store under ./demo (the
# platform's own tables, in ObjectStack 17.4's shape), seeds the public
# CRM's metadata (114 items, some references dangling as in real life), a
# datasource record on a SQLite file and a connector against a small local
# upstream started here, then runs the daemon in the foreground. Press
# Ctrl-C to stop.
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
The daemon starts below and materializes the seeded rows: 65 objects, 6
views and 43 hooks of the public CRM, the datasource crm_db and the
connector crm. The connector is held: its stored credential is wrong and
upstream answers 401. Items naming objects the CRM never defines are held
naming them, as the platform would leave them unresolved ("users" is
declared a code object here: engine.code_objects).
In another terminal, from this directory:

  bin/reconciler items                       # every entry, state, reason
  bin/reconciler items --state held          # crm, and items naming missing objects

  # fix the credential with a plain row update: no signal, no restart
  bin/reconciler-demo set-credential crm-token demo-good-token
  bin/reconciler items --kind connector      # ready within a poll interval

  bin/reconciler-demo touch object account   # rebuilds account and its views
  # the hook names "Account", the object is "account": fix the row
  bin/reconciler-demo set-metadata hook AccountHealthScoreTrigger '{"name":"AccountHealthScoreTrigger","object":"account"}'
  bin/reconciler status; bin/reconciler drift; bin/reconciler fleet
  kill -USR2 \$(pgrep -n -f 'reconciler run')   # drift report into demo/drift

Status API: http://$STATUS/v1/status   Press Ctrl-C to stop.
=========================================================================

MSG

"$BIN" run --config config.yaml --store.url "sqlite://./$STORE" \
  --status.listen "$STATUS" --drift.dir ./demo/drift --replica_id demo \
  --datasource.sqlite_dir ./demo --engine.code_objects users
