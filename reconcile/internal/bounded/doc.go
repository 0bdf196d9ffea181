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
// apply.concurrency 4, two shared cores, old and new binaries alternated,
// 2026-12-01): 1.31× the CPU time per cold start (720 ms against 549 ms,
// p=0.004), 1.81× the allocations (2.45M against 1.35M) and 1.38× the
// bytes (276 MiB against 200 MiB). Reproduce it with the
// cpu-ns/op metric of that benchmark (reconcile/bench_test.go).
package bounded
