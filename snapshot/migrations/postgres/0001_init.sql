-- reconciler schema v1 (DESIGN §3, §4) on PostgreSQL.
-- Writers never set revision or updated_at: BEFORE triggers do, from one
-- store-wide sequence. AFTER triggers append addresses to the journal.

CREATE SEQUENCE sys_reconcile_revision_seq;

CREATE TABLE sys_metadata (
  id              text PRIMARY KEY,
  organization_id text NOT NULL DEFAULT '',
  type            text NOT NULL,
  name            text NOT NULL,
  state           text NOT NULL DEFAULT 'active',
  metadata        jsonb NOT NULL,
  version         bigint NOT NULL DEFAULT 1,
  checksum        text NULL,
  revision        bigint NOT NULL,
  updated_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX sys_metadata_active_name
  ON sys_metadata (organization_id, type, name) WHERE state = 'active';

CREATE TABLE sys_connector_credential (
  ref        text PRIMARY KEY,
  value      text NULL,
  revision   bigint NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE sys_datasource (
  name       text PRIMARY KEY,
  driver     text NOT NULL,
  config     jsonb NOT NULL DEFAULT '{}',
  pool       jsonb NOT NULL DEFAULT '{}',
  external   jsonb NOT NULL DEFAULT '{}',
  active     boolean NOT NULL DEFAULT true,
  revision   bigint NOT NULL,
  updated_at timestamptz NOT NULL
);

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

CREATE FUNCTION sys_reconcile_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.revision := nextval('sys_reconcile_revision_seq');
  NEW.updated_at := clock_timestamp();
  RETURN NEW;
END $$;

-- sys_reconcile_append journals one change; old_key/new_key are NULL when absent.
CREATE FUNCTION sys_reconcile_append(src text, op text, old_key text, new_key text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF op = 'update' AND old_key IS DISTINCT FROM new_key THEN
    -- A key change: the old address is gone, the new one appears.
    INSERT INTO sys_reconcile_journal (source, key, op) VALUES (src, old_key, 'delete'), (src, new_key, 'insert');
  ELSE
    INSERT INTO sys_reconcile_journal (source, key, op) VALUES (src, coalesce(new_key, old_key), op);
  END IF;
  -- A hint only: deduplicated per transaction, delivered at commit.
  PERFORM pg_notify('reconciler', src);
END $$;

CREATE FUNCTION sys_metadata_journal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM sys_reconcile_append(TG_TABLE_NAME, lower(TG_OP),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.id END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.id END);
  RETURN NULL;
END $$;

CREATE FUNCTION sys_connector_credential_journal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM sys_reconcile_append(TG_TABLE_NAME, lower(TG_OP),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.ref END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.ref END);
  RETURN NULL;
END $$;

CREATE FUNCTION sys_datasource_journal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM sys_reconcile_append(TG_TABLE_NAME, lower(TG_OP),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD.name END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.name END);
  RETURN NULL;
END $$;

CREATE TRIGGER sys_metadata_stamp BEFORE INSERT OR UPDATE ON sys_metadata
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_stamp();
CREATE TRIGGER sys_metadata_journal AFTER INSERT OR UPDATE OR DELETE ON sys_metadata
  FOR EACH ROW EXECUTE FUNCTION sys_metadata_journal();

CREATE TRIGGER sys_connector_credential_stamp BEFORE INSERT OR UPDATE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_stamp();
CREATE TRIGGER sys_connector_credential_journal AFTER INSERT OR UPDATE OR DELETE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_connector_credential_journal();

CREATE TRIGGER sys_datasource_stamp BEFORE INSERT OR UPDATE ON sys_datasource
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_stamp();
CREATE TRIGGER sys_datasource_journal AFTER INSERT OR UPDATE OR DELETE ON sys_datasource
  FOR EACH ROW EXECUTE FUNCTION sys_datasource_journal();
