// Package snapshot reads the desired state and its revision watermarks from
// the shared store: the source tables sys_metadata and sys_secret (the
// ObjectStack platform's own, adopted exactly as the platform creates them)
// and sys_connector_credential (the fleet's), the trigger-fed journal
// sys_reconcile_journal, the row watermarks sys_reconciler_revision and the
// fleet tables.
//
// This package holds what every store shares: the types, the Store
// interface, the one migrate loop (Schema.Migrate) and Open, which opens a
// URL with the backend registered for its scheme. Each backend is a
// package of its own that registers itself in init (Register):
// snapshot/postgres (pgx) and snapshot/sqlite (pure Go); snapshot/backends
// links them all. Every backend passes one conformance suite
// (snapshot/snapshottest).
//
// Migrate never alters a platform table: it creates a source table only
// where it is absent (in the platform's exact shape), and otherwise adds
// only row triggers on the source tables and tables of its own. A row's
// revision comes from one store-wide sequence, stamped by those triggers on
// every insert, update and delete, so revisions compare across tables;
// rows that existed before Migrate get theirs at Migrate.
//
// Change detection is gap-free: on PostgreSQL the cursor is a pg_snapshot
// (xmin, xmax, in-progress xids), so a transaction that commits after a later
// one is still picked up; on SQLite, which has one writer at a time, the
// cursor is the journal sequence.
package snapshot
