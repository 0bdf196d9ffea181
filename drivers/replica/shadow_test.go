package replica_test

import (
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// TestShadowPublishesNothing: in shadow mode an object the node lacks and
// an unobservable view are would-publish, nothing reaches the bus; an
// object the node serves is in-sync; once another sidecar (driving) tells
// the node, the shadow sidecar's probe sees it in-sync.
func TestShadowPublishesNothing(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	tp := r.tap(t)
	d := r.sidecar(t, n, "reconciler:shadow", func(o *replica.Options) { o.Shadow = true })

	r.db.Put("object", "task", object("subject"))
	r.db.Put("view", "tasks", map[string]any{"name": "tasks", "object": "task"})
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	d.Notify(change(registry.KindEngine, "view/tasks", reconcile.ActionCreate))
	eventually(t, "task would-publish", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaWouldPublish))
	eventually(t, "view would-publish", stateIs(d, registry.KindEngine, "view/tasks", registry.ReplicaWouldPublish))
	if n.Registered("task") || len(tp.all()) != 0 {
		t.Fatalf("shadow mode published: node serves task %v, messages %v", n.Registered("task"), tp.all())
	}

	other := r.sidecar(t, n, "reconciler:drive", nil)
	other.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "the shadow sidecar sees task served", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	for _, m := range tp.all() {
		if strings.Contains(m.Raw, "reconciler:shadow") {
			t.Fatalf("a message of the shadow sidecar: %s", m.Raw)
		}
	}
	if got := d.Summary().Counts[registry.ReplicaWouldPublish]; got != 1 {
		t.Fatalf("would-publish count %d, want 1 (the view)", got)
	}
}
