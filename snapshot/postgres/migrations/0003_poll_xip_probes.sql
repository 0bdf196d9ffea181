-- reconciler schema v3 on PostgreSQL: the poll probes the previous
-- snapshot's in-progress xids in the index.
--
-- v2 joined pg_snapshot_xip(prev) to the journal, which the planner costs
-- at 50 xids; it then hashed them and read the whole journal (a sequential
-- scan and a visibility test per entry) on every poll whose previous
-- snapshot listed a transaction in progress (in a fleet, often: other
-- replicas' heartbeats are in flight), at a cost that grows with the
-- journal. v3 reads those xids as a range of the (xid) index bounded by
-- prev's xmin and xmax with `xid = ANY (xip)`: an index-only probe per
-- xid, nothing when none is listed. Same signature, same results: an
-- older binary calls it unchanged.
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
    FROM cur, p, sys_reconcile_journal j
    WHERE j.xid >= pg_snapshot_xmin(p.s) AND j.xid < pg_snapshot_xmax(p.s)
      AND j.xid = ANY (ARRAY(SELECT pg_snapshot_xip(p.s)))
      AND pg_visible_in_snapshot(j.xid, cur.s)
  )
  SELECT cur.s::text, st.store_id::text, st.pruned_xid::text,
    greatest((SELECT max(jj.seq) FROM sys_reconcile_journal jj), st.pruned_seq)::bigint,
    now(), coalesce(agg.sources, '{}'::text[]), coalesce(agg.keys, '{}'::text[])
  FROM cur, sys_reconciler_state st,
    (SELECT array_agg(c.source::text ORDER BY c.seq) AS sources, array_agg(c.key::text ORDER BY c.seq) AS keys FROM ch c) agg
  WHERE st.id = 1;
END
$fn$;
