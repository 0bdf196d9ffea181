// Package daemon wires the reconcile loop into the sidecar process that
// `reconciler run` starts: it opens and prepares the store, builds the
// materializers and notify targets, serves the status API, writes
// heartbeats and drift reports, prunes the journal and listens for hints,
// and shuts all of it down in order when its context ends.
//
// Run opens and prepares the store, build makes every other part whole
// (each in the order its dependencies allow, nothing set on it afterwards)
// and run starts them beside the loop and stops them. Everything that can
// fail at startup (store unreachable or unmigrated, busy listen address,
// unwritable drift directory, missing token) fails before any goroutine
// starts, so a failed start leaves nothing behind. A new part is made in
// build and added to its runners (and to the notify targets if the loop
// tells it).
//
// It is the composition root, so it is internal: its options carry the
// internal config type, and only cmd/reconciler (and deploy's tests, for
// StopTimeout) import it. It and its statusapi are the one tree under
// internal/ that imports the public packages (reconcile, snapshot,
// drivers/*): the layering's one exception, as the root it must be. What
// a program outside the module needs of its contract lives in the public
// package that owns it (snapshot.HeartbeatInterval for the heartbeat row).
package daemon
