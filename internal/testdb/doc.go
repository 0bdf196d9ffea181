// Package testdb gives tests real PostgreSQL databases: a fresh database per
// test on the server named by RECONCILER_TEST_DATABASE_URL (make test sets it,
// starting a private throwaway cluster when needed), and private clusters of
// their own for tests that stop and start the server.
//
// A test that cannot get a database fails and says how to get one; it never
// skips.
package testdb
