package reconcile

import (
	"context"
	"errors"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Reconciler runs the loop over one store. Create it with New; call Run once.
type Reconciler struct {
	src  snapshot.Source
	opts Options
	regs *registry.Set
}

// New returns a Reconciler reading src. It does no I/O.
func New(src snapshot.Source, opts Options) *Reconciler {
	return &Reconciler{src: src, opts: opts, regs: registry.NewSet()}
}

// Run relists, then polls until ctx ends; it closes every instance before
// returning. It returns nil when ctx ended.
func (r *Reconciler) Run(ctx context.Context) error { return errors.New("not implemented") }

// Hint wakes the loop for an early poll (e.g. a NOTIFY). Never blocks.
func (r *Reconciler) Hint() {}

// Trigger asks for a pass now (SIGHUP, POST /v1/reconcile). Never blocks.
func (r *Reconciler) Trigger() {}

// Resync asks for a full relist now (SIGUSR1, POST /v1/resync). Never blocks.
func (r *Reconciler) Resync() {}

// Synced is closed after the first full sync (readiness).
func (r *Reconciler) Synced() <-chan struct{} { return nil }

// Registries returns the live registries (read-only use).
func (r *Reconciler) Registries() *registry.Set { return r.regs }

// Status returns a point-in-time view of the loop.
func (r *Reconciler) Status() Status { return Status{} }

// Drift compares the store's current rows with the registries.
func (r *Reconciler) Drift(ctx context.Context) (DriftReport, error) {
	return DriftReport{}, errors.New("not implemented")
}
