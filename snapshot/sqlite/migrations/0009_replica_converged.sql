-- reconciler schema v9 on SQLite: the converged revision in heartbeats
-- (see the PostgreSQL migration of the same number).
ALTER TABLE sys_reconciler_replica ADD COLUMN converged_revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sys_reconciler_replica ADD COLUMN converged_at TEXT NULL;
ALTER TABLE sys_reconciler_replica ADD COLUMN head_revision INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sys_reconciler_revision_revision ON sys_reconciler_revision (revision);
