// Package fleet builds the fleet view from the replicas' heartbeat rows:
// each replica's heartbeat age, how far its cursor is behind the store's
// head, its counts per state, and whether it is stale or lagging. The
// `reconciler fleet` command and the status page both show it.
package fleet
