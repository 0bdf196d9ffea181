-- reconciler schema v5 on SQLite: the eviction guard (see the PostgreSQL
-- migration of the same version).
CREATE TABLE IF NOT EXISTS sys_reconciler_guard (
  replica_id    TEXT NOT NULL,
  kind          TEXT NOT NULL,
  key           TEXT NOT NULL,
  revision      INTEGER NOT NULL DEFAULT 0,
  reason        TEXT NOT NULL DEFAULT '',
  after_release INTEGER NOT NULL DEFAULT 0,
  guarded_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (replica_id, kind, key)
);

CREATE TABLE IF NOT EXISTS sys_reconciler_guard_release (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  released_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  released_by TEXT NOT NULL DEFAULT ''
);
