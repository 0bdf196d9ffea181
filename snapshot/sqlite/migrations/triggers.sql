-- The row triggers on the source tables, (re)created by every Migrate after
-- the versioned migrations, which heals a table re-created without them.
-- They feed the view sys_reconcile_change (see 0001_init.sql).

DROP TRIGGER IF EXISTS sys_reconcile_metadata_replace;
DROP TRIGGER IF EXISTS sys_reconcile_metadata_insert;
DROP TRIGGER IF EXISTS sys_reconcile_metadata_update;
DROP TRIGGER IF EXISTS sys_reconcile_metadata_delete;
DROP TRIGGER IF EXISTS sys_reconcile_secret_insert;
DROP TRIGGER IF EXISTS sys_reconcile_secret_update;
DROP TRIGGER IF EXISTS sys_reconcile_secret_delete;
DROP TRIGGER IF EXISTS sys_reconcile_credential_insert;
DROP TRIGGER IF EXISTS sys_reconcile_credential_update;
DROP TRIGGER IF EXISTS sys_reconcile_credential_delete;

-- sys_metadata

-- INSERT OR REPLACE deletes the rows it conflicts with without firing
-- their DELETE triggers (unless the writer turned recursive_triggers on):
-- journal their addresses up front. A spurious entry is harmless.
CREATE TRIGGER sys_reconcile_metadata_replace BEFORE INSERT ON sys_metadata
BEGIN
  INSERT INTO sys_reconcile_journal (source, key, op)
  SELECT 'sys_metadata', id, 'update' FROM sys_metadata
  WHERE type = NEW.type AND name = NEW.name AND organization_id = NEW.organization_id
    AND package_id = NEW.package_id AND id IS NOT NEW.id;
  INSERT INTO sys_reconcile_journal (source, key, op)
  SELECT 'sys_metadata', id, 'update' FROM sys_metadata
  WHERE NEW.state = 'draft' AND state = 'draft' AND type = NEW.type AND name = NEW.name
    AND organization_id = NEW.organization_id AND coalesce(package_id, '') = coalesce(NEW.package_id, '')
    AND id IS NOT NEW.id;
END;

CREATE TRIGGER sys_reconcile_metadata_insert AFTER INSERT ON sys_metadata
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_metadata', NEW.id, 'insert');
END;

CREATE TRIGGER sys_reconcile_metadata_update AFTER UPDATE ON sys_metadata
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op)
  SELECT 'sys_metadata', OLD.id, 'delete' WHERE OLD.id IS NOT NEW.id;
  INSERT INTO sys_reconcile_change (source, key, op)
  VALUES ('sys_metadata', NEW.id, CASE WHEN OLD.id IS NOT NEW.id THEN 'insert' ELSE 'update' END);
END;

CREATE TRIGGER sys_reconcile_metadata_delete AFTER DELETE ON sys_metadata
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_metadata', OLD.id, 'delete');
END;

-- sys_secret

CREATE TRIGGER sys_reconcile_secret_insert AFTER INSERT ON sys_secret
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_secret', NEW.id, 'insert');
END;

CREATE TRIGGER sys_reconcile_secret_update AFTER UPDATE ON sys_secret
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op)
  SELECT 'sys_secret', OLD.id, 'delete' WHERE OLD.id IS NOT NEW.id;
  INSERT INTO sys_reconcile_change (source, key, op)
  VALUES ('sys_secret', NEW.id, CASE WHEN OLD.id IS NOT NEW.id THEN 'insert' ELSE 'update' END);
END;

CREATE TRIGGER sys_reconcile_secret_delete AFTER DELETE ON sys_secret
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_secret', OLD.id, 'delete');
END;

-- sys_connector_credential

CREATE TRIGGER sys_reconcile_credential_insert AFTER INSERT ON sys_connector_credential
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_connector_credential', NEW.ref, 'insert');
  UPDATE sys_reconcile_counter SET busy = 1 WHERE id = 1;
  UPDATE sys_connector_credential SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ref = NEW.ref;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
END;

CREATE TRIGGER sys_reconcile_credential_update AFTER UPDATE ON sys_connector_credential
WHEN (SELECT busy FROM sys_reconcile_counter WHERE id = 1) = 0
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op)
  SELECT 'sys_connector_credential', OLD.ref, 'delete' WHERE OLD.ref IS NOT NEW.ref;
  INSERT INTO sys_reconcile_change (source, key, op)
  VALUES ('sys_connector_credential', NEW.ref, CASE WHEN OLD.ref IS NOT NEW.ref THEN 'insert' ELSE 'update' END);
  UPDATE sys_reconcile_counter SET busy = 1 WHERE id = 1;
  UPDATE sys_connector_credential SET revision = (SELECT revision FROM sys_reconcile_counter WHERE id = 1),
    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE ref = NEW.ref;
  UPDATE sys_reconcile_counter SET busy = 0 WHERE id = 1;
END;

CREATE TRIGGER sys_reconcile_credential_delete AFTER DELETE ON sys_connector_credential
BEGIN
  INSERT INTO sys_reconcile_change (source, key, op) VALUES ('sys_connector_credential', OLD.ref, 'delete');
END;
