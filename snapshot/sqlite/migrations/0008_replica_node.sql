-- reconciler schema v8 on SQLite: heartbeats carry what their sidecar sees
-- of the replica node beside it (JSON of snapshot.Node: whether it answers
-- /api/v1/ready, its stale and nudged entries, its restart), so that a
-- sidecar restarts its node only while every other live one is ready and
-- none is restarting. '' reads as nothing reported.
ALTER TABLE sys_reconciler_replica ADD COLUMN node TEXT NOT NULL DEFAULT '';
