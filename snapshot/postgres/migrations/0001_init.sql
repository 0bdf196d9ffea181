-- reconciler schema v1 on PostgreSQL.
--
-- The source tables sys_metadata and sys_secret are the platform's own and
-- sys_connector_credential the fleet's; Migrate creates each (from
-- tables/<table>.sql) only where it is absent, before this file runs, and
-- (re)creates the row triggers on them (triggers.sql) after it, on every
-- run. This file never adds, alters or drops a column, index or constraint
-- of theirs: it adds its own tables, sequence and functions.
--
-- A row's revision comes from one store-wide sequence and lives in
-- sys_reconciler_revision (source table, row key), upserted by the AFTER
-- trigger on every insert, update and delete; the same trigger appends the
-- row's address to sys_reconcile_journal. The credential table, being ours,
-- also carries its revision in its own columns (BEFORE trigger).
--
-- Trigger functions are SECURITY DEFINER with a fixed search_path (set at
-- the end of this file to the schema migrated into), so the platform's
-- writes journal whatever role and search_path its connections use.

CREATE SEQUENCE sys_reconcile_revision_seq;

CREATE TABLE sys_reconcile_journal (
  seq    bigserial PRIMARY KEY,
  xid    xid8 NOT NULL DEFAULT pg_current_xact_id(),
  source text NOT NULL,
  key    text NOT NULL,
  op     text NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
  at     timestamptz NOT NULL DEFAULT now()
);
-- Poll reads (xid range + in-progress list) from this index alone.
CREATE INDEX sys_reconcile_journal_xid
  ON sys_reconcile_journal (xid) INCLUDE (source, key, seq);

-- The row watermarks. A deleted row keeps its last revision (a tombstone)
-- until Prune removes it after the journal retention.
CREATE TABLE sys_reconciler_revision (
  source     text NOT NULL,
  key        text NOT NULL,
  revision   bigint NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (source, key)
);

CREATE TABLE sys_reconciler_replica (
  replica_id   text PRIMARY KEY,
  host         text NOT NULL DEFAULT '',
  pid          integer NOT NULL DEFAULT 0,
  version      text NOT NULL DEFAULT '',
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  cursor       text NOT NULL DEFAULT '',
  cursor_seq   bigint NOT NULL DEFAULT 0,
  cursor_at    timestamptz NULL,
  counts       jsonb NOT NULL DEFAULT '{}',
  stopped      boolean NOT NULL DEFAULT false,
  last_error   text NOT NULL DEFAULT ''
);

CREATE TABLE sys_reconciler_drift (
  replica_id text PRIMARY KEY,
  at         timestamptz NOT NULL,
  report     jsonb NOT NULL
);

-- Internal: the store's identity (a new database gets a new one) and the
-- journal's pruned horizon, read by every poll.
CREATE TABLE sys_reconciler_state (
  id         integer PRIMARY KEY CHECK (id = 1),
  store_id   text NOT NULL,
  pruned_xid xid8 NOT NULL DEFAULT '0',
  pruned_seq bigint NOT NULL DEFAULT 0,
  pruned_at  timestamptz NULL
);
INSERT INTO sys_reconciler_state (id, store_id) VALUES (1, gen_random_uuid()::text);

-- sys_reconcile_change records one row change: the journal entries and the
-- revision watermarks. old_key/new_key are NULL when absent; rev is the
-- revision of new_key when the table stamped one itself (NULL: take the
-- next one).
CREATE FUNCTION sys_reconcile_change(src text, op text, old_key text, new_key text, rev bigint)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  ts timestamptz := clock_timestamp();
BEGIN
  IF op = 'update' AND old_key IS DISTINCT FROM new_key THEN
    -- A key change: the old address is gone, the new one appears.
    INSERT INTO sys_reconcile_journal (source, key, op) VALUES (src, old_key, 'delete'), (src, new_key, 'insert');
    INSERT INTO sys_reconciler_revision (source, key, revision, updated_at)
    VALUES (src, old_key, nextval('sys_reconcile_revision_seq'), ts),
           (src, new_key, coalesce(rev, nextval('sys_reconcile_revision_seq')), ts)
    ON CONFLICT (source, key) DO UPDATE SET revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;
  ELSE
    INSERT INTO sys_reconcile_journal (source, key, op) VALUES (src, coalesce(new_key, old_key), op);
    INSERT INTO sys_reconciler_revision (source, key, revision, updated_at)
    VALUES (src, coalesce(new_key, old_key), coalesce(rev, nextval('sys_reconcile_revision_seq')), ts)
    ON CONFLICT (source, key) DO UPDATE SET revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at;
  END IF;
  -- A hint only: deduplicated per transaction, delivered at commit.
  PERFORM pg_notify('reconciler', src);
END $$;

CREATE FUNCTION sys_reconcile_metadata_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM sys_reconcile_change('sys_metadata', lower(TG_OP),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.id::text END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.id::text END, NULL);
  RETURN NULL;
END $$;

CREATE FUNCTION sys_reconcile_secret_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM sys_reconcile_change('sys_secret', lower(TG_OP),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.id::text END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.id::text END, NULL);
  RETURN NULL;
END $$;

CREATE FUNCTION sys_reconcile_credential_stamp() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  NEW.revision := nextval('sys_reconcile_revision_seq');
  NEW.updated_at := clock_timestamp();
  RETURN NEW;
END $$;

CREATE FUNCTION sys_reconcile_credential_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM sys_reconcile_change('sys_connector_credential', 'delete', OLD.ref, NULL, NULL);
  ELSE
    PERFORM sys_reconcile_change('sys_connector_credential', lower(TG_OP),
      CASE WHEN TG_OP = 'UPDATE' THEN OLD.ref END, NEW.ref, NEW.revision);
  END IF;
  RETURN NULL;
END $$;

-- Pin every function to the schema migrated into (and pg_temp last, as
-- SECURITY DEFINER functions should).
DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['sys_reconcile_change(text, text, text, text, bigint)',
    'sys_reconcile_metadata_row()', 'sys_reconcile_secret_row()',
    'sys_reconcile_credential_stamp()', 'sys_reconcile_credential_row()']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
  END LOOP;
END $$;

-- Only the triggers call it.
REVOKE EXECUTE ON FUNCTION sys_reconcile_change(text, text, text, text, bigint) FROM PUBLIC;
