// Package bounded runs a batch of calls into code that may ignore its
// context (a materializer), each bounded by a timeout, and abandons a
// call that has not returned a grace period after its context ended: the
// caller waits only as long as it chooses, and a call that returns late
// is handed back for cleanup.
//
// The calls run on a few long-lived workers, one call after another,
// watched by one watchdog per batch: it ends the context of a call at its
// deadline (or when the parent ends), and abandons the worker of a call
// still running Grace later, starting another in its place. No goroutine,
// timer or context.WithTimeout per call: each call's context is a small
// hand-written [context.Context] the watchdog ends.
//
// # Why not context.WithTimeout per call
//
// The plain form (context.WithTimeout per call and a context.AfterFunc
// arming the abandon timer) was measured against this one on
// BenchmarkReconcile100k/sqlite/cold-apply (100k no-op materializations,
// apply.concurrency 4, two shared cores, old and new binaries alternated
// ten times, 2026-12-01): 1.34x the CPU time per cold start (713 ms
// against 533 ms, p<0.001), 1.81x the allocations (2.45M against 1.35M)
// and 1.38x the bytes (276 MiB against 200 MiB). The cpu-ns/op metric of
// that benchmark (reconcile/bench_test.go) reproduces it; ns/op varied
// ±60% between runs on that machine.
package bounded
