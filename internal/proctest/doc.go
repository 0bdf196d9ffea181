// Package proctest holds what the test suites need to run the reconciler
// binary as a real process and watch it: building it once, concurrency-safe
// output buffers (also for captured logs), the status address it announces,
// free loopback addresses, and waiting for a condition with a deadline.
package proctest
