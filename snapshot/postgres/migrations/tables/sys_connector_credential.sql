-- sys_connector_credential: the fleet's credential table (not in a stock
-- ObjectStack database). value NULL means cleared. revision and updated_at
-- are stamped by trigger; writers never set them.

CREATE TABLE sys_connector_credential (
  ref        text PRIMARY KEY,
  value      text NULL,
  revision   bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);
