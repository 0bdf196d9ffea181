// Package snapshot reads the desired state and its revision watermarks from
// the shared store: the source tables sys_metadata, sys_datasource and
// sys_connector_credential, the trigger-fed journal sys_reconcile_journal, and
// the fleet tables. It is implemented for PostgreSQL (pgx) and for SQLite
// (pure Go), and both pass one conformance suite.
//
// Change detection is gap-free: on PostgreSQL the cursor is a pg_snapshot
// (xmin, xmax, in-progress xids), so a transaction that commits after a later
// one is still picked up; on SQLite, which has one writer at a time, the
// cursor is the journal sequence.
package snapshot
