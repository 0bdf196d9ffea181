// Package daemon wires the reconcile loop into the sidecar process that
// `reconciler run` starts: it opens and prepares the store, builds the
// materializers and notify targets, serves the status API, writes
// heartbeats and drift reports, prunes the journal and listens for hints,
// and shuts all of it down in order when its context ends.
//
// Everything that can fail at startup (store unreachable or unmigrated,
// busy listen address, unwritable drift directory, missing token) fails
// before any goroutine starts, so a failed start leaves nothing behind.
package daemon
