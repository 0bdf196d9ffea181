package replica_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// A bus that refuses the sidecar (its password is wrong) is a reason on
// the entry that names the bus and the refusal but not the password; the
// publish is retried with backoff, nothing crashes, and the entry
// converges once the bus accepts the sidecar.
func TestRefusingBusIsARedactedReasonRetriedUntilItAccepts(t *testing.T) {
	const nodePW, busPW = "node-pw-3c1e", "bus-canary-pw-9a7d"
	rd, err := replicatest.StartRedis("--requirepass", nodePW)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	r := &rig{redis: rd, db: replicatest.NewDB()}
	n, err := replicatest.Start(r.db, replicatest.Options{BusURL: "redis://:" + nodePW + "@" + rd.Addr(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	d := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) {
		bus, err := replica.NewRedisBus("redis://:" + busPW + "@" + rd.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		o.Bus = bus
	})

	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "two refused publishes", func() bool {
		return testutil.ToFloat64(metric(t, d.reg, "reconciler_replica_publishes_total", "channel", replica.ChannelMetadata, "result", "error")) >= 2
	})
	st, _ := d.Status(registry.KindEngine, "object/task")
	if st.State != registry.ReplicaNudged || !strings.Contains(st.Error, "bus: publish on os:ps:metadata.mutated") || !strings.Contains(st.Error, "WRONGPASS") {
		t.Fatalf("status %+v: want nudged, naming the bus and the refusal", st)
	}
	if strings.Contains(st.Error, busPW) {
		t.Fatalf("the reason shows the bus password: %q", st.Error)
	}
	if n.Registered("task") {
		t.Fatal("the node serves task although no message reached it")
	}

	// The bus now accepts the sidecar's password: the next retry gets through.
	admin := redis.NewClient(&redis.Options{Addr: rd.Addr(), Password: nodePW, DisableIdentity: true})
	defer admin.Close()
	if err := admin.ConfigSet(context.Background(), "requirepass", busPW).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "in-sync once the bus accepts", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	if !n.Registered("task") {
		t.Fatal("in-sync but the node does not serve task")
	}
}
