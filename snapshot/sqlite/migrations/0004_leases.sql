-- reconciler schema v4 on SQLite: fleet leases, and heartbeats that notice
-- a second process writing under the same replica id.
--
-- A lease is a named, expiring hold of one duty of the fleet (the schema
-- repair, a replica restart): at most one holder whose expires_at is in the
-- future. token grows with every new acquisition (a fencing token); a
-- release only moves expires_at to now, so the token never goes back.
-- Times are RFC 3339 UTC text with milliseconds (fixed width: they compare
-- as strings).
CREATE TABLE sys_reconciler_lease (
  name        TEXT PRIMARY KEY NOT NULL,
  holder      TEXT NOT NULL,
  token       INTEGER NOT NULL,
  acquired_at TEXT NOT NULL,
  expires_at  TEXT NOT NULL
) WITHOUT ROWID;

-- clash names the other process (host and pid) seen writing this replica
-- id's heartbeat while this one ran; clash_at is when it was last seen.
ALTER TABLE sys_reconciler_replica ADD COLUMN clash TEXT NOT NULL DEFAULT '';
ALTER TABLE sys_reconciler_replica ADD COLUMN clash_at TEXT NULL;
