-- reconciler schema v5 on PostgreSQL: the eviction guard.
--
-- sys_reconciler_guard keeps each replica's pending guarded evictions, so
-- that a sidecar restarted while one is pending still holds it.
-- after_release is the newest release when the row was recorded: a
-- release with a higher id covers it (later trips are guarded again).
-- sys_reconciler_guard_release holds the fleet's releases
-- (`reconciler guard release`).
CREATE TABLE IF NOT EXISTS sys_reconciler_guard (
  replica_id    text NOT NULL,
  kind          text NOT NULL,
  key           text NOT NULL,
  revision      bigint NOT NULL DEFAULT 0,
  reason        text NOT NULL DEFAULT '',
  after_release bigint NOT NULL DEFAULT 0,
  guarded_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (replica_id, kind, key)
);

CREATE TABLE IF NOT EXISTS sys_reconciler_guard_release (
  id          bigserial PRIMARY KEY,
  released_at timestamptz NOT NULL DEFAULT now(),
  released_by text NOT NULL DEFAULT ''
);
