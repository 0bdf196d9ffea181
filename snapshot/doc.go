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

// Open a store from its URL (no I/O happens until first use):
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (or postgresql://)
//	sqlite://relative/path.db                           (relative to the working directory)
//	sqlite:///absolute/path.db
//
// then Migrate (or CheckSchema), Relist once for the rows and a cursor, and
// Poll from that cursor; Read the rows of the addresses a poll returns. A
// poll that fails with ErrCursorExpired or ErrCursorRegressed asks for a new
// Relist. Errors carry the operation and the URL with its password
// redacted; driver types never leak out.
