package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestStoreOutage stops the private PostgreSQL mid-run: nothing is
// evicted, live instances keep serving; after a restart the loop converges
// without a restart of its own.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	cl := testdb.NewCluster(t)
	url := cl.URL("postgres")
	s, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o','object','account','{"fields":{}}'), ('v','view','all','{"object":"account"}')`)
	b := start(t, s, url, Options{ResyncInterval: -1, PollInterval: 50 * time.Millisecond})
	before := actual(b)
	if len(before) != 2 {
		t.Fatalf("before outage: %v", before)
	}
	cl.Stop()
	b.waitFor("a failed pass", func() bool { return !b.rec.Status().StoreUp })
	b.rec.Resync() // a relist during the outage must not evict either
	b.waitFor("more failed passes", func() bool { return b.rec.Status().LastError != "" })
	if d := diffMaps(before, actual(b)); d != "" {
		t.Fatalf("registries changed during the outage: %s", d)
	}
	for _, e := range b.rec.Registries().List("", "") {
		if e.State != registry.StateReady || e.Instance == nil {
			t.Fatalf("entry %s/%s stopped serving during the outage: %+v", e.Kind, e.Key, e)
		}
	}
	cl.Start()
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('v2','view','recent','{"object":"account"}')`)
	b.waitFor("convergence after the outage", func() bool {
		return b.rec.Status().StoreUp && diffMaps(expected(t, s), actual(b)) == ""
	})
}
