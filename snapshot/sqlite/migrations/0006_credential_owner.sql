-- reconciler schema v6 on SQLite: which organization a connector
-- credential ref serves (see the PostgreSQL migration of the same number).
CREATE TABLE sys_reconciler_credential_owner (
  ref             TEXT PRIMARY KEY NOT NULL,
  organization_id TEXT NOT NULL,
  bound_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
