// Package snapshottest is the store backends' contract and the tests'
// stores.
//
// Run is the conformance suite every backend passes: each backend's
// package calls it with its fixture (Postgres, SQLite), a Backend that
// gives fresh, migrated stores. Each runs a test on a fresh store of every
// backend (Backends), for the packages above the store.
//
// The fixtures are a fresh PostgreSQL database per test (copied from a
// migrated template, so it is fast) and a SQLite file in t.TempDir(); the
// plain-SQL writers (Exec, Connect) take the same $1-style statement text
// on both stores, and the helpers (Relist, Poll, WantAddrs, …) fail the
// test on error.
package snapshottest
