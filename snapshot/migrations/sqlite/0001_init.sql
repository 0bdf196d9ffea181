-- reconciler schema v1 (DESIGN §3, §4) on SQLite.
-- jsonb → TEXT checked with json_valid, bigint/boolean → INTEGER,
-- timestamptz → TEXT (RFC 3339, UTC). revision defaults to 0 and AFTER
-- triggers set it from the one-row counter; the counter's busy flag stops
-- the triggers' own UPDATEs from journaling again (even with
-- recursive_triggers on).

CREATE TABLE sys_reconcile_counter (
  id       INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL,
  busy     INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sys_reconcile_counter (id, revision) VALUES (1, 0);

CREATE TABLE sys_metadata (
  id              TEXT PRIMARY KEY NOT NULL,
  organization_id TEXT NOT NULL DEFAULT '',
  type            TEXT NOT NULL,
  name            TEXT NOT NULL,
  state           TEXT NOT NULL DEFAULT 'active',
  metadata        TEXT NOT NULL CHECK (json_valid(metadata)),
  version         INTEGER NOT NULL DEFAULT 1,
  checksum        TEXT NULL,
  revision        INTEGER NOT NULL DEFAULT 0,
  updated_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE UNIQUE INDEX sys_metadata_active_name
  ON sys_metadata (organization_id, type, name) WHERE state = 'active';

CREATE TABLE sys_connector_credential (
  ref        TEXT PRIMARY KEY NOT NULL,
  value      TEXT NULL,
  revision   INTEGER NOT NULL DEFAULT 0,
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE sys_datasource (
  name       TEXT PRIMARY KEY NOT NULL,
  driver     TEXT NOT NULL,
  config     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(config)),
  pool       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(pool)),
  external   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(external)),
  active     INTEGER NOT NULL DEFAULT 1,
  revision   INTEGER NOT NULL DEFAULT 0,
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- AUTOINCREMENT: seq is never reused, even after the journal is pruned empty.
CREATE TABLE sys_reconcile_journal (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  xid    INTEGER NOT NULL DEFAULT 0,
  source TEXT NOT NULL,
  key    TEXT NOT NULL,
  op     TEXT NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
  at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE sys_reconciler_replica (
  replica_id   TEXT PRIMARY KEY NOT NULL,
  host         TEXT NOT NULL DEFAULT '',
  pid          INTEGER NOT NULL DEFAULT 0,
  version      TEXT NOT NULL DEFAULT '',
  started_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  heartbeat_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  cursor       TEXT NOT NULL DEFAULT '',
  cursor_seq   INTEGER NOT NULL DEFAULT 0,
  cursor_at    TEXT NULL,
  counts       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(counts)),
  stopped      INTEGER NOT NULL DEFAULT 0,
  last_error   TEXT NOT NULL DEFAULT ''
);

CREATE TABLE sys_reconciler_drift (
  replica_id TEXT PRIMARY KEY NOT NULL,
  at         TEXT NOT NULL,
  report     TEXT NOT NULL CHECK (json_valid(report))
);

CREATE TABLE sys_reconciler_state (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  store_id   TEXT NOT NULL,
  pruned_xid INTEGER NOT NULL DEFAULT 0,
  pruned_seq INTEGER NOT NULL DEFAULT 0,
  pruned_at  TEXT NULL
);
INSERT INTO sys_reconciler_state (id, store_id) VALUES (1, lower(hex(randomblob(16))));

CREATE TRIGGER sys_metadata_insert AFTER INSERT ON sys_metadata
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_metadata SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = NEW.id;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_metadata', NEW.id, 'insert');
END;

CREATE TRIGGER sys_metadata_update AFTER UPDATE ON sys_metadata
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_metadata SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = NEW.id;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_metadata', OLD.id, 'delete' WHERE OLD.id IS NOT NEW.id;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_metadata', NEW.id, CASE WHEN OLD.id IS NOT NEW.id THEN 'insert' ELSE 'update' END;
END;

CREATE TRIGGER sys_metadata_delete AFTER DELETE ON sys_metadata
BEGIN
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_metadata', OLD.id, 'delete');
END;

CREATE TRIGGER sys_connector_credential_insert AFTER INSERT ON sys_connector_credential
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_connector_credential SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ref = NEW.ref;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_connector_credential', NEW.ref, 'insert');
END;

CREATE TRIGGER sys_connector_credential_update AFTER UPDATE ON sys_connector_credential
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_connector_credential SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ref = NEW.ref;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_connector_credential', OLD.ref, 'delete' WHERE OLD.ref IS NOT NEW.ref;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_connector_credential', NEW.ref, CASE WHEN OLD.ref IS NOT NEW.ref THEN 'insert' ELSE 'update' END;
END;

CREATE TRIGGER sys_connector_credential_delete AFTER DELETE ON sys_connector_credential
BEGIN
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_connector_credential', OLD.ref, 'delete');
END;

CREATE TRIGGER sys_datasource_insert AFTER INSERT ON sys_datasource
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_datasource SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE name = NEW.name;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_datasource', NEW.name, 'insert');
END;

CREATE TRIGGER sys_datasource_update AFTER UPDATE ON sys_datasource
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1, busy = 1 WHERE id = 1;
  UPDATE sys_datasource SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE name = NEW.name;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_datasource', OLD.name, 'delete' WHERE OLD.name IS NOT NEW.name;
  INSERT INTO sys_reconcile_journal (source, key, op)
    SELECT 'sys_datasource', NEW.name, CASE WHEN OLD.name IS NOT NEW.name THEN 'insert' ELSE 'update' END;
END;

CREATE TRIGGER sys_datasource_delete AFTER DELETE ON sys_datasource
BEGIN
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES ('sys_datasource', OLD.name, 'delete');
END;
