-- reconciler schema v1 on SQLite.
--
-- The source tables sys_metadata, sys_secret (the platform's shape) and
-- sys_connector_credential (the fleet's) are created by Migrate from
-- tables/<table>.sql only where absent, before this file runs; their row
-- triggers (triggers.sql) are (re)created after it on every run. This file
-- adds only tables of its own, never a column, index or constraint of
-- theirs.
--
-- Types: jsonb → TEXT checked with json_valid, bigint/boolean → INTEGER,
-- timestamptz → TEXT (RFC 3339, UTC). Revisions come from the one-row
-- counter; each source trigger inserts into the view sys_reconcile_change,
-- whose INSTEAD OF trigger bumps the counter, upserts the row's watermark in
-- sys_reconciler_revision and appends its address to the journal. The
-- credential table also carries its revision in its own columns; the
-- counter's busy flag stops that self-UPDATE from journaling again.

CREATE TABLE sys_reconcile_counter (
  id       INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL,
  busy     INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sys_reconcile_counter (id, revision) VALUES (1, 0);

-- AUTOINCREMENT: seq is never reused, even after the journal is pruned empty.
CREATE TABLE sys_reconcile_journal (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  xid    INTEGER NOT NULL DEFAULT 0,
  source TEXT NOT NULL,
  key    TEXT NOT NULL,
  op     TEXT NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
  at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- The row watermarks. A deleted row keeps its last revision (a tombstone)
-- until Prune removes it after the journal retention.
CREATE TABLE sys_reconciler_revision (
  source     TEXT NOT NULL,
  key        TEXT NOT NULL,
  revision   INTEGER NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (source, key)
) WITHOUT ROWID;

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

-- One row change: insert (source, key, op) here.
CREATE VIEW sys_reconcile_change (source, key, op) AS SELECT NULL, NULL, NULL WHERE 0;

CREATE TRIGGER sys_reconcile_change INSTEAD OF INSERT ON sys_reconcile_change
BEGIN
  UPDATE sys_reconcile_counter SET revision = revision + 1 WHERE id = 1;
  UPDATE sys_reconciler_revision SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
  WHERE source = NEW.source AND key = NEW.key;
  INSERT INTO sys_reconciler_revision (source, key, revision, updated_at)
  SELECT NEW.source, NEW.key, revision, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM sys_reconcile_counter
  WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM sys_reconciler_revision WHERE source = NEW.source AND key = NEW.key);
  INSERT INTO sys_reconcile_journal (source, key, op) VALUES (NEW.source, NEW.key, NEW.op);
END;
