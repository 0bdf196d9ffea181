// Package sqlite is the embedded SQLite store backend (pure Go, no cgo):
// importing it registers sqlite:// with snapshot.Open. It has one writer
// at a time, so its cursor is the journal sequence. Its schema is the SQL
// in migrations/, applied by snapshot's one migrate loop at every start
// (Store.AutoMigrates).
package sqlite
