-- The row triggers on the source tables, applied by every Migrate after
-- the versioned migrations: they are the only objects the reconciler adds
-- to a platform table, and re-creating them heals a table that was
-- re-created without them.

CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_metadata
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_metadata_row();

CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_secret
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_secret_row();

CREATE OR REPLACE TRIGGER sys_reconcile_stamp BEFORE INSERT OR UPDATE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_credential_stamp();
CREATE OR REPLACE TRIGGER sys_reconcile_journal AFTER INSERT OR UPDATE OR DELETE ON sys_connector_credential
  FOR EACH ROW EXECUTE FUNCTION sys_reconcile_credential_row();
