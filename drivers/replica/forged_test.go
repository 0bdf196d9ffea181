package replica_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// TestForgedMessagesDoNotSilenceTheSidecar: anyone who can PUBLISH on the
// bus sends messages naming an entry, over and over, while the replica
// still lacks it; the sidecar defers its own message once, then sends it
// (before: never, 0 messages vs 6 for a control).
func TestForgedMessagesDoNotSilenceTheSidecar(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{DropFirst: 1 << 30}) // the replica never gets one: it lacks the entry for good
	tp := r.tap(t)
	d := r.sidecar(t, n, "reconciler:a", nil)
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr(), DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			msg := fmt.Sprintf(`{"n":"attacker","t":%d,"p":{"originNode":"attacker","event":{"type":"object","name":"supp","state":"active","organizationId":null}}}`, time.Now().UnixMilli())
			rdb.Publish(ctx, "os:ps:"+replica.ChannelMetadata, msg)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	defer func() { cancel(); wg.Wait() }()
	eventually(t, "the sidecar sees the forged messages", func() bool {
		return testutil.ToFloat64(metric(t, d.reg, "reconciler_replica_bus_messages_total", "origin", "other")) > 3
	})
	r.db.Put("object", "supp", object("subject"))
	d.Notify(change(registry.KindEngine, "object/supp", reconcile.ActionCreate))
	own := func() int {
		c := 0
		for _, m := range tp.all() {
			if m.Channel == replica.ChannelMetadata && strings.Contains(m.Raw, `"originNode":"reconciler:a"`) && strings.Contains(m.Raw, `"name":"supp"`) {
				c++
			}
		}
		return c
	}
	eventually(t, "the sidecar's own message despite the forged ones", func() bool { return own() >= 1 })
	t.Logf("own messages: %d", own())
}
