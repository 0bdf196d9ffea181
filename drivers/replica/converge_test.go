package replica_test

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// convergedIs reports whether the converged revision, given the loop
// applied up to applied, is want.
func convergedIs(d sidecar, applied, want int64) func() bool {
	return func() bool {
		rev, _ := d.Converged(applied)
		return rev == want
	}
}

// convergences is the number of observations of
// reconciler_replica_convergence_seconds and their sum.
func convergences(t *testing.T, d sidecar) (uint64, float64) {
	t.Helper()
	mfs, err := d.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "reconciler_replica_convergence_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("no reconciler_replica_convergence_seconds")
	return 0, 0
}

// TestConvergedRevision: the converged revision across a change reaching
// in-sync, a held entry (not held back), an unverifiable type (served once
// published), a deletion (held back until the replica is seen without it)
// and an entry the replica lacks (held just below its revision); and the
// convergence histogram, one observation per change reaching in-sync, both
// ends on the store's clock.
func TestConvergedRevision(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	// The store's clock runs an hour behind this host's: the figures must
	// not see it.
	skew := -time.Hour
	cs := func(c reconcile.Change) reconcile.ChangeSet {
		now := time.Now()
		return reconcile.ChangeSet{Changes: []reconcile.Change{c}, StoreAt: now.Add(skew), PolledAt: now}
	}
	if rev, at := d.Converged(4); rev != 4 || !at.IsZero() {
		t.Fatalf("converged with nothing told = %d at %v, want the loop's 4, no time", rev, at)
	}

	r.db.Put("object", "task", object("subject"))
	committed := time.Now().Add(skew).Add(-2 * time.Second)
	d.Notify(cs(reconcile.Change{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionCreate, Revision: 5,
		State: registry.StateReady, At: committed}))
	if rev, _ := d.Converged(5); rev != 4 {
		t.Fatalf("converged before the replica serves revision 5 = %d, want 4", rev)
	}
	eventually(t, "task in-sync", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	eventually(t, "converged 5", convergedIs(d, 5, 5))
	if _, at := d.Converged(5); at.Before(committed) || at.After(time.Now().Add(skew)) {
		t.Fatalf("converged at %v, want on the store's clock after the commit %v", at, committed)
	}
	if c, sum := convergences(t, d); c != 1 || sum < 2 || sum > 30 {
		t.Fatalf("convergence: %d observations, %.3fs in all; want 1 of 2s and a little (store clock both ends)", c, sum)
	}

	// Held by the loop (a row it will not apply): nothing to wait for.
	d.Notify(cs(reconcile.Change{Kind: registry.KindEngine, Key: "object/broken", Action: reconcile.ActionCreate, Revision: 6,
		State: registry.StateHeld}))
	eventually(t, "converged past the held entry", convergedIs(d, 6, 6))

	// Unverifiable (a hook): served once published.
	d.Notify(cs(reconcile.Change{Kind: registry.KindEngine, Key: "hook/on_task", Action: reconcile.ActionCreate, Revision: 7,
		State: registry.StateReady}))
	eventually(t, "hook unverifiable", stateIs(d, registry.KindEngine, "hook/on_task", registry.ReplicaUnverifiable))
	eventually(t, "converged 7", convergedIs(d, 7, 7))

	// A deletion: served once the replica is seen without it.
	r.db.Delete("object", "task")
	d.Notify(cs(reconcile.Change{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionEvict, Revision: 8}))
	if rev, _ := d.Converged(8); rev != 7 {
		t.Fatalf("converged before the deletion reached the replica = %d, want 7", rev)
	}
	eventually(t, "deletion dropped", func() bool { _, ok := d.Status(registry.KindEngine, "object/task"); return !ok })
	eventually(t, "converged 8", convergedIs(d, 8, 8))
	if c, _ := convergences(t, d); c != 2 {
		t.Fatalf("%d convergence observations after a create and a delete in sync (the hook unverifiable), want 2", c)
	}

	// The replica lacks an object (its row never reaches it): held just
	// below it, whatever the loop applied since.
	d.Notify(cs(reconcile.Change{Kind: registry.KindEngine, Key: "object/lost", Action: reconcile.ActionCreate, Revision: 9,
		State: registry.StateReady}))
	eventually(t, "lost nudged", stateIs(d, registry.KindEngine, "object/lost", registry.ReplicaNudged))
	if rev, _ := d.Converged(12); rev != 8 {
		t.Fatalf("converged with revision 9 lacking = %d, want 8", rev)
	}
}
