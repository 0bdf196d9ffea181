-- reconciler schema v9 on PostgreSQL: each heartbeat carries the replica's
-- converged revision (the highest revision every change up to which its
-- replica serves), when it got there and the highest revision its loop
-- applied; the store's head revision is read through an index.
ALTER TABLE sys_reconciler_replica ADD COLUMN converged_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE sys_reconciler_replica ADD COLUMN converged_at timestamptz NULL;
ALTER TABLE sys_reconciler_replica ADD COLUMN head_revision bigint NOT NULL DEFAULT 0;
CREATE INDEX sys_reconciler_revision_revision ON sys_reconciler_revision (revision);
