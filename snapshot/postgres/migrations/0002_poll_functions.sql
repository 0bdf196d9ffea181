-- reconciler schema v2 on PostgreSQL: the polls as functions.
--
-- A poll is one statement. Sent as SQL text it is planned on every call
-- unless the connection keeps a prepared statement, and a connection
-- pooler in transaction mode (PgBouncer 1.18) cannot keep one: planning
-- the poll then costs the server several times its execution. A PL/pgSQL
-- function keeps its plan in the server's backend for the backend's life,
-- whichever client calls it, so `SELECT * FROM sys_reconciler_poll($1)`
-- only plans a function call.
--
-- Each function body is one statement (RETURN QUERY): pg_current_snapshot()
-- and the journal reads share that statement's snapshot, as the inline
-- poll did.

-- The poll on a primary: the entries visible now and not in the snapshot
-- prev (in its in-progress list, or from its xmax on).
CREATE OR REPLACE FUNCTION sys_reconciler_poll(prev text)
RETURNS TABLE (snap text, store_id text, pruned_xid text, head bigint, at timestamptz, sources text[], keys text[])
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
  RETURN QUERY
  WITH cur AS (SELECT pg_current_snapshot() AS s),
  p AS (SELECT prev::pg_snapshot AS s),
  ch AS (
    SELECT j.seq, j.source, j.key
    FROM cur, p, sys_reconcile_journal j
    WHERE j.xid >= pg_snapshot_xmax(p.s) AND j.xid < pg_snapshot_xmax(cur.s)
      AND pg_visible_in_snapshot(j.xid, cur.s)
    UNION ALL
    SELECT j.seq, j.source, j.key
    FROM cur, p, pg_snapshot_xip(p.s) AS x(xid)
    JOIN sys_reconcile_journal j ON j.xid = x.xid
    WHERE pg_visible_in_snapshot(j.xid, cur.s)
  )
  SELECT cur.s::text, st.store_id::text, st.pruned_xid::text,
    greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::bigint,
    now(), coalesce(agg.sources, '{}'::text[]), coalesce(agg.keys, '{}'::text[])
  FROM cur, sys_reconciler_state st,
    (SELECT array_agg(c.source::text ORDER BY c.seq) AS sources, array_agg(c.key::text ORDER BY c.seq) AS keys FROM ch c) agg
  WHERE st.id = 1;
END
$fn$;

-- The poll on a hot standby, whose snapshots list no transaction in
-- progress: the visible entries from the previous xmin on whose xid the
-- previous cursor did not see, and the xids the new cursor sees.
CREATE OR REPLACE FUNCTION sys_reconciler_poll_standby(prev_xmin text, seen text[])
RETURNS TABLE (snap text, store_id text, pruned_xid text, head bigint, at timestamptz, sources text[], keys text[], seen_now text[])
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
  RETURN QUERY
  WITH cur AS (SELECT pg_current_snapshot() AS s),
  ch AS (
    SELECT j.seq, j.source, j.key FROM sys_reconcile_journal j
    WHERE j.xid >= prev_xmin::xid8 AND j.xid <> ALL (seen::xid8[])
  )
  SELECT cur.s::text, st.store_id::text, st.pruned_xid::text,
    greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::bigint,
    now(), coalesce(agg.sources, '{}'::text[]), coalesce(agg.keys, '{}'::text[]),
    ARRAY(SELECT DISTINCT j.xid::text FROM sys_reconcile_journal j WHERE j.xid >= pg_snapshot_xmin(cur.s))
  FROM cur, sys_reconciler_state st,
    (SELECT array_agg(c.source::text ORDER BY c.seq) AS sources, array_agg(c.key::text ORDER BY c.seq) AS keys FROM ch c) agg
  WHERE st.id = 1;
END
$fn$;
