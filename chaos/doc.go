// Package chaos is the fault-injection suite of the reconciler: it runs the
// built daemon as real processes against real PostgreSQL servers and
// injects faults — out-of-order commits under load, lost hints, kill -9,
// store outages and restores, upstream flapping, bad rows, bad requests —
// then checks, item by item through GET /v1/items, that every daemon's
// registries equal what the store's rows desire, and that a canary
// credential never leaks.
//
// The package holds tests only. `go test ./chaos/` runs the short form
// (part of `make test`); `make chaos` runs the long form with -chaos.long,
// prints a results table and writes it to chaos/results.md.
package chaos
