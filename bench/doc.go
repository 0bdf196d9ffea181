// Package bench is the benchmark suite behind `make bench`: it measures the
// reconciler and the alternatives a user would pick instead (full reload,
// push lanes over Redis pub/sub, naive polling) side by side in one run
// against one PostgreSQL, and writes bench/results.md with PNG charts.
//
// Nothing here runs under `go test ./...`: the suite is the
// reconciler-bench command, started by scripts/bench.sh. It is a module of
// its own (bench/go.mod replaces the reconciler module with this checkout), so
// a program embedding the reconciler never pulls its plotting and Redis
// dependencies.
package bench
