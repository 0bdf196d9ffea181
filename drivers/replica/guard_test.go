package replica_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// guards stands in for the loop's eviction guard (reconcile marks the
// entry Guarded in its registry).
type guards struct {
	mu    sync.Mutex
	on    map[string]bool
	asked map[string]int
}

func (g *guards) set(key string, on bool) {
	g.mu.Lock()
	g.on[key] = on
	g.mu.Unlock()
}

func (g *guards) guarded(_ registry.Kind, key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked[key]++
	return g.on[key]
}

func (g *guards) askedFor(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked[key]
}

// An entry whose eviction the loop guards (its row is gone, the replica
// keeps serving it) gets no lane message — a message would make the node
// re-read the missing row and unregister it — whatever schedules it again:
// the backoff of an unservable object, a heal after a replica restart. It
// is not reported lacking. A release tells the eviction as usual.
func TestGuardedEntriesGetNoMessage(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{NoTable: func(name string) bool { return name == "gone" }})
	g := &guards{on: map[string]bool{}, asked: map[string]int{}}
	d := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) { o.Guarded = g.guarded })
	tp := r.tap(t)

	r.db.Put("object", "gone", object("title")) // unservable: looked at again with backoff
	r.db.Put("object", "kept", object("title"))
	d.Notify(reconcile.ChangeSet{ReplicaID: "r", Changes: []reconcile.Change{
		{Kind: registry.KindEngine, Key: "object/gone", Action: reconcile.ActionCreate, Revision: 1, State: registry.StateReady},
		{Kind: registry.KindEngine, Key: "object/kept", Action: reconcile.ActionCreate, Revision: 2, State: registry.StateReady},
	}})
	eventually(t, "gone unservable", stateIs(d, registry.KindEngine, "object/gone", registry.ReplicaUnservable))
	eventually(t, "kept in-sync", stateIs(d, registry.KindEngine, "object/kept", registry.ReplicaInSync))
	sent := tp.count(replica.ChannelMetadata)

	// DELETE of both rows, guarded by the loop: no change is told.
	for _, name := range []string{"gone", "kept"} {
		g.set("object/"+name, true)
		r.db.Delete("object", name)
	}
	asked := g.askedFor("object/gone")
	eventually(t, "the unservable entry looked at again three times (or dropped by the node)", func() bool {
		return g.askedFor("object/gone") >= asked+3 || !n.Registered("gone")
	})
	if !n.Registered("gone") || !n.Registered("kept") {
		t.Fatalf("guarded objects unregistered by the node (gone %v, kept %v): messages %v", n.Registered("gone"), n.Registered("kept"), tp.all()[sent:])
	}
	if got := tp.count(replica.ChannelMetadata); got != sent {
		t.Fatalf("%d messages for guarded entries: %v", got-sent, tp.all()[sent:])
	}

	// Released for one: its eviction is told and the node drops it.
	g.set("object/gone", false)
	d.Notify(change(registry.KindEngine, "object/gone", reconcile.ActionEvict))
	eventually(t, "gone unregistered after the release", func() bool { return !n.Registered("gone") })
	eventually(t, "the deletion settled", func() bool {
		_, ok := d.Status(registry.KindEngine, "object/gone")
		return !ok
	})
	sent = tp.count(replica.ChannelMetadata)

	// The replica restarts: every entry is checked again, but the guarded
	// one gets no message (its row is gone: a message cannot bring it
	// back) and is not left pending or nudged (which would hold a
	// restart's heal and the converged revision).
	n.Restart()
	eventually(t, "kept checked again after the restart, unverifiable", func() bool {
		st, ok := d.Status(registry.KindEngine, "object/kept")
		return ok && st.State == registry.ReplicaUnverifiable && strings.Contains(st.Error, "eviction guarded")
	})
	if got := tp.count(replica.ChannelMetadata); got != sent {
		t.Fatalf("%d messages for a guarded entry after the restart: %v", got-sent, tp.all()[sent:])
	}
	if c := d.Summary().Counts; c[registry.ReplicaPending]+c[registry.ReplicaNudged] != 0 {
		t.Fatalf("counts %v: a guarded entry counted as waiting on the replica", c)
	}
}

// Without the guard's word, a probe that finds the object served but its
// row unseen by the replica (deleted before the loop read it) publishes
// nothing: the node would re-read no row and unregister the object.
func TestUnseenRowIsNotNudged(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{NoTable: func(string) bool { return true }})
	d := r.sidecar(t, n, "reconciler:a", nil)
	tp := r.tap(t)

	r.db.Put("object", "task", object("title"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "task unservable", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaUnservable))
	sent := tp.count(replica.ChannelMetadata)

	r.db.Delete("object", "task")
	eventually(t, "the probe sees the row unseen (or the node dropped task)", func() bool {
		st, _ := d.Status(registry.KindEngine, "object/task")
		return st.Probe == "unseen" && st.State == registry.ReplicaUnservable || !n.Registered("task")
	})
	if !n.Registered("task") {
		t.Fatal("the node unregistered task: a message went out for a row it cannot see")
	}
	if got := tp.count(replica.ChannelMetadata); got != sent {
		t.Fatalf("%d messages for an unseen row: %v", got-sent, tp.all()[sent:])
	}
}
