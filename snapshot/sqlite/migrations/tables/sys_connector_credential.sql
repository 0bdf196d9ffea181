-- sys_connector_credential: the fleet's credential table. value NULL means
-- cleared. revision and updated_at are stamped by trigger.

CREATE TABLE sys_connector_credential (
  ref        TEXT PRIMARY KEY NOT NULL,
  value      TEXT NULL,
  revision   INTEGER NOT NULL DEFAULT 0,
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
