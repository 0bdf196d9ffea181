//go:build objectstack

// Package objectstack runs the reconciler against real ObjectStack 17.4.0
// nodes: the pinned platform installed from npm (scripts/objectstack), a
// private PostgreSQL database and a private redis-server per test, nodes
// booted with `os serve` as child processes. It holds the harness (install,
// Redis, nodes, an authenticated API client, read-only probes of what a
// node has applied) and the end-to-end tests built on it.
//
// It is compiled only with the build tag `objectstack` (make
// test-objectstack), so that `go test ./...` needs neither Node nor npm. A
// test that cannot run (no node, npm, redis-server or PostgreSQL; a failed
// install) fails saying how to fix it; it never skips.
package objectstack
