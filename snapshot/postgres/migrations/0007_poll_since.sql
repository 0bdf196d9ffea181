-- reconciler schema v7 on PostgreSQL: an idle poll that costs about a
-- snapshot.
--
-- sys_reconciler_poll (v2, v3) runs one query of about twenty plan nodes on
-- every call, changed or not: its executor start-up (four index scans, two
-- sorts, a CTE per input) made an idle poll cost the server ~5x a
-- `SELECT 1` (one pgbench client, 10k journal entries). This function
-- answers the common case first: when the current snapshot is the one the
-- caller passes (no transaction that took an xid has ended since, so no
-- entry can have become visible, and nothing the poll checks can have
-- changed), it returns NULL after taking the snapshot and comparing two
-- strings. Otherwise it runs one statement, the range of the (xid) index
-- from prev's xmax to the current one plus, only when prev listed
-- transactions in progress, an index probe per listed xid, as v3 did.
--
-- It is a scalar function (text[]): `SELECT f($1), now()` is the cheapest
-- shape to plan and to run, also through a pooler that cannot keep
-- prepared statements (the simple protocol parses and plans every call);
-- a set-returning function materializes its result. The array is
--   NULL                                         nothing changed since prev
--   {snap}                                       no sys_reconciler_state row
--   {snap, store_id, pruned_xid, head, s1..sn, k1..kn}
-- with the n new entries' sources s and keys k, in no particular order.
-- The v2/v3 function stays for older binaries during an upgrade.
CREATE OR REPLACE FUNCTION sys_reconciler_poll_since(prev text)
RETURNS text[]
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  cur pg_snapshot := pg_current_snapshot();
  snap text := cur::text;
  p pg_snapshot;
  res text[];
BEGIN
  IF snap = prev THEN
    RETURN NULL;
  END IF;
  p := prev::pg_snapshot;
  IF pg_snapshot_xmin(p) = pg_snapshot_xmax(p) THEN
    -- prev listed no transaction in progress.
    SELECT ARRAY[snap, st.store_id, st.pruned_xid::text,
        greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::text] || ch.sources || ch.keys
      INTO res
    FROM sys_reconciler_state st,
      (SELECT array_agg(j.source) AS sources, array_agg(j.key) AS keys
       FROM sys_reconcile_journal j
       WHERE j.xid >= pg_snapshot_xmax(p) AND j.xid < pg_snapshot_xmax(cur)
         AND pg_visible_in_snapshot(j.xid, cur)) ch
    WHERE st.id = 1;
  ELSE
    -- As v3: prev and the snapshot through CTEs, so that the plan does not
    -- depend on their values (a custom plan costed on a bulk-loaded journal
    -- would read all of it for the listed xids).
    WITH c AS (SELECT pg_current_snapshot() AS s), q AS (SELECT prev::pg_snapshot AS s)
    SELECT ARRAY[snap, st.store_id, st.pruned_xid::text,
        greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::text] || ch.sources || ch.keys
      INTO res
    FROM sys_reconciler_state st,
      (SELECT array_agg(x.source) AS sources, array_agg(x.key) AS keys FROM (
         SELECT j.source, j.key FROM c, q, sys_reconcile_journal j
         WHERE j.xid >= pg_snapshot_xmax(q.s) AND j.xid < pg_snapshot_xmax(c.s)
           AND pg_visible_in_snapshot(j.xid, c.s)
         UNION ALL
         SELECT j.source, j.key FROM c, q, sys_reconcile_journal j
         WHERE j.xid >= pg_snapshot_xmin(q.s) AND j.xid < pg_snapshot_xmax(q.s)
           AND j.xid = ANY (ARRAY(SELECT pg_snapshot_xip(q.s)))
           AND pg_visible_in_snapshot(j.xid, c.s)) x) ch
    WHERE st.id = 1;
  END IF;
  p := prev::pg_snapshot;
  IF pg_snapshot_xmin(p) = pg_snapshot_xmax(p) THEN
    -- prev listed no transaction in progress.
    SELECT ARRAY[snap, st.store_id, st.pruned_xid::text,
        greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::text] || ch.sources || ch.keys
      INTO res
    FROM sys_reconciler_state st,
      (SELECT array_agg(j.source) AS sources, array_agg(j.key) AS keys
       FROM sys_reconcile_journal j
       WHERE j.xid >= pg_snapshot_xmax(p) AND j.xid < pg_snapshot_xmax(cur)
         AND pg_visible_in_snapshot(j.xid, cur)) ch
    WHERE st.id = 1;
  ELSE
    SELECT ARRAY[snap, st.store_id, st.pruned_xid::text,
        greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::text] || ch.sources || ch.keys
      INTO res
    FROM sys_reconciler_state st,
      (SELECT array_agg(c.source) AS sources, array_agg(c.key) AS keys FROM (
         SELECT j.source, j.key FROM sys_reconcile_journal j
         WHERE j.xid >= pg_snapshot_xmax(p) AND j.xid < pg_snapshot_xmax(cur)
           AND pg_visible_in_snapshot(j.xid, cur)
         UNION ALL
         SELECT j.source, j.key FROM sys_reconcile_journal j
         WHERE j.xid >= pg_snapshot_xmin(p) AND j.xid < pg_snapshot_xmax(p)
           AND j.xid = ANY (ARRAY(SELECT pg_snapshot_xip(p)))
           AND pg_visible_in_snapshot(j.xid, cur)) c) ch
    WHERE st.id = 1;
  END IF;
  RETURN coalesce(res, ARRAY[snap]);
END
$fn$;
