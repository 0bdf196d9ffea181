-- The row triggers on the source tables, applied by every Migrate after
-- the versioned migrations: they are the only objects the reconciler adds
-- to a platform table, and re-creating them heals a table that was
-- re-created without them.

-- TRUNCATE fires no row trigger: a statement trigger journals a delete for
-- every key of the table that has a watermark (a tombstone re-read finds
-- nothing, harmlessly), so the loop evicts what the truncate removed at the
-- next poll instead of at the next anti-entropy relist.
CREATE OR REPLACE FUNCTION sys_reconcile_truncate() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  ts timestamptz := clock_timestamp();
BEGIN
  WITH gone AS (
    UPDATE sys_reconciler_revision SET revision = nextval('sys_reconcile_revision_seq'), updated_at = ts
    WHERE source = TG_TABLE_NAME::text RETURNING key)
  INSERT INTO sys_reconcile_journal (source, key, op) SELECT TG_TABLE_NAME::text, key, 'delete' FROM gone;
  PERFORM pg_notify('reconciler', TG_TABLE_NAME::text);
  RETURN NULL;
END $$;
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION sys_reconcile_truncate() SET search_path = %I, pg_temp', current_schema());
END $$;

CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_metadata
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_metadata_row();

CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_secret
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_secret_row();

CREATE OR REPLACE TRIGGER sys_reconcile_stamp BEFORE INSERT OR UPDATE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_credential_stamp();
CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_credential_row();
CREATE OR REPLACE TRIGGER sys_reconcile_truncate AFTER TRUNCATE ON sys_metadata
  FOR EACH STATEMENT EXECUTE FUNCTION sys_reconcile_truncate();
CREATE OR REPLACE TRIGGER sys_reconcile_truncate AFTER TRUNCATE ON sys_secret
  FOR EACH STATEMENT EXECUTE FUNCTION sys_reconcile_truncate();
CREATE OR REPLACE TRIGGER sys_reconcile_truncate AFTER TRUNCATE ON sys_connector_credential
  FOR EACH STATEMENT EXECUTE FUNCTION sys_reconcile_truncate();
