package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestBodiesWithinTheTotal: with the store's total cap far below the rows'
// sum, a cold start and a commit of many large rows still apply every
// entry, over several polls, each read holding at most the cap; no entry
// is evicted or held meanwhile, and a resync and a drift report agree.
func TestBodiesWithinTheTotal(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, _ snapshot.Store, url string) {
		s, err := snapshot.Open(url, snapshot.OpenOptions{MaxBodyBytes: 1024, MaxTotalBytes: 2000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		body := func(i int) string {
			return fmt.Sprintf(`{"fields":{"name":{"type":"text"}},"description":"%d%s"}`, i, strings.Repeat("x", 600))
		}
		for i := range 10 {
			snapshottest.Exec(t, url, upsertMeta, fmt.Sprintf("o%d", i), "object", fmt.Sprintf("o%d", i), "active", body(i))
		}
		b := start(t, s, url, Options{ResyncInterval: -1})
		all := func(n int) func() bool {
			return func() bool {
				for i := range n {
					if b.state(registry.KindEngine, fmt.Sprintf("object/o%d", i)) != registry.StateReady {
						return false
					}
				}
				return true
			}
		}
		pending := 0
		for _, e := range b.rec.Registries().List("", "") {
			if e.State == registry.StatePending && strings.Contains(e.Reason, "engine.max_total_bytes") {
				pending++
			}
		}
		if pending == 0 {
			t.Fatal("a cold start above the total cap left no entry waiting for its body")
		}
		b.waitFor("every object of the cold start ready", all(10))
		for i := 10; i < 30; i++ {
			snapshottest.Exec(t, url, upsertMeta, fmt.Sprintf("o%d", i), "object", fmt.Sprintf("o%d", i), "active", body(i))
		}
		b.waitFor("every object of the large commit ready", all(30))
		if n := b.mats[registry.KindEngine].total.Load(); n != 30 {
			t.Fatalf("%d materializations for 30 objects, want one each", n)
		}
		b.rec.Resync()
		b.settle()
		rep, err := b.rec.Drift(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Summary.SignatureMismatch != 0 || rep.Summary.NotReady != 0 || rep.Summary.Missing != 0 {
			t.Fatalf("drift after the resync: %+v", rep.Summary)
		}
		if n := b.mats[registry.KindEngine].total.Load(); n != 30 {
			t.Fatalf("%d materializations after a resync, want none more", n)
		}
	})
}

// TestDroppedTriggerNoticed: a journal trigger dropped while the loop runs
// (its table's changes would never be polled) turns store_up false with
// a reason naming the trigger; migrating again brings it back.
func TestDroppedTriggerNoticed(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	b := start(t, s, url, Options{ResyncInterval: -1, SchemaCheckInterval: 10 * time.Millisecond})
	b.exec(`DROP TRIGGER sys_reconcile_metadata_insert`)
	b.waitFor("store_up false naming the trigger", func() bool {
		st := b.rec.Status()
		return !st.StoreUp && strings.Contains(st.LastError, "trigger")
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.waitFor("store_up again after migrate", func() bool { return b.rec.Status().StoreUp })
}
