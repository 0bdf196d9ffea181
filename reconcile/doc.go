// Package reconcile is the level-triggered loop that keeps a sidecar's
// registries equal to the store's rows: detect (poll the journal) → desired
// (re-read the changed rows, resolve dependencies, compute signatures) →
// diff → plan (create, rebuild, evict, retry) → apply (in dependency order,
// with bounded concurrency, build-validate-swap). A missed, duplicated or
// reordered signal changes nothing: the loop converges to what the rows say.
//
// It can run in the reconciler daemon or embedded in a Go service with the
// service's own materializers (see the package example).
package reconcile
