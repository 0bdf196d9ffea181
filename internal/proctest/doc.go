// Package proctest holds what the end-to-end and chaos suites need to run
// the reconciler binary as a real process: building it once, collecting its
// output while it runs, free loopback addresses, and waiting for a condition
// with a deadline.
package proctest
