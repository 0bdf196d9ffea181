// Package backoff is the one exponential backoff of the reconciler: a
// delay that doubles from a base to a cap, jittered so that replicas that
// failed together do not retry together. The reconcile loop (store outages,
// degraded entries), the notify targets and the store's hint listener use
// it.
package backoff
