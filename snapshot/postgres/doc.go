// Package postgres is the PostgreSQL store backend (pgx): importing it
// registers postgres:// and postgresql:// with snapshot.Open. Its cursor
// is a pg_snapshot (xmin, xmax, in-progress xids), so a transaction that
// commits after a later one is still picked up; polls, relists and reads
// can go to a hot standby (OpenOptions.ReadURL). Its schema is the SQL in
// migrations/, applied by snapshot's one migrate loop.
//
// The PostgreSQL-only parts are here beside the store: the stall gate
// (stall.go), the standby (standby.go), the dead-path bound (bound*.go) and
// the metadata decoder (metadata_decoder.go, collect.go).
package postgres
