-- reconciler schema v6 on PostgreSQL: which organization a connector
-- credential ref serves.
--
-- sys_connector_credential has no organization column, so the loop binds a
-- ref to the organization of the first active row naming it ('' for the
-- environment-wide scope) and records the binding here, so that every
-- sidecar of the fleet applies the same owner and an owner editing its
-- row never hands its ref to another organization. A binding goes only
-- when no active row of its organization names the ref any more.
CREATE TABLE sys_reconciler_credential_owner (
  ref             text PRIMARY KEY,
  organization_id text NOT NULL,
  bound_at        timestamptz NOT NULL DEFAULT now()
);
