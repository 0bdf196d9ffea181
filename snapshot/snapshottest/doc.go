// Package snapshottest gives tests migrated snapshot stores: a fresh
// PostgreSQL database per test (copied from a migrated template, so it is
// fast) and a SQLite file in t.TempDir(), plus plain-SQL writers that take
// the same $1-style statement text on both stores.
package snapshottest
