package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestChaosGuard: a fleet of three daemons with the eviction guard on (the
// rest of the suite turns it off) meets the accidents it exists for — a
// DELETE without its WHERE, a TRUNCATE, the store restored from an older
// backup, the store swapped for another database — and no daemon loses an
// entry without a release: every fault is guarded (the registries keep
// every object, marked guarded), rows that come back clear it, and one
// `reconciler guard release --store.url` applies what was meant.
func TestChaosGuard(t *testing.T) {
	t.Parallel()
	c, url := privateStore(t)
	ctx := context.Background()
	const objects = 40
	seed := func(from, to int) {
		for i := from; i < to; i++ {
			snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("object:g%d", i), "object", fmt.Sprintf("g%d", i), `{"fields":{"a":{"type":"text"}}}`)
		}
		results.wrote(int64(to - from))
	}
	seed(0, objects)
	// The older copy restored later (taken before the daemons connect: a
	// template must have no connection).
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store_backup TEMPLATE store"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "guard")
	var ds []*daemon
	for _, id := range []string{"guard-a", "guard-b", "guard-c"} {
		d := r.newDaemon(id, withApp(url, "chaos-"+id), set("guard.max_evictions", "20%"), set("guard.window", "60s"))
		d.start()
		ds = append(ds, d)
	}
	r.converge(url, ds...)

	// keeps checks that every daemon still has every object of want,
	// guarded or not, and how many are guarded.
	held := func(d *daemon) (objs map[string]bool, guarded int) {
		var its []struct {
			Key     string `json:"key"`
			Guarded bool   `json:"guarded"`
		}
		if err := d.get("/v1/items?kind=engine", &its); err != nil {
			t.Fatalf("%s items: %v", d.id, err)
		}
		objs = map[string]bool{}
		for _, it := range its {
			objs[it.Key] = true
			if it.Guarded {
				guarded++
			}
		}
		return objs, guarded
	}
	lost := 0
	guardedAll := func(fault string, want, n int) {
		t.Helper()
		results.fault(fault)
		for _, d := range ds {
			eventually(t, fmt.Sprintf("%s guards %d (%s)", d.id, n, fault), func() bool { _, g := held(d); return g >= n })
			objs, _ := held(d)
			for i := 0; i < want; i++ {
				if !objs[fmt.Sprintf("object/g%d", i)] {
					lost++
					t.Errorf("%s lost object/g%d to %s without a release", d.id, i, fault)
				}
			}
		}
	}
	release := func() {
		t.Helper()
		cmd := exec.Command(binary, "guard", "release", "--store.url", url)
		cmd.Env = proctest.CleanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "recorded") {
			t.Fatalf("guard release: %v\n%s", err, out)
		}
	}

	// A DELETE without its WHERE, then the rows put back: nothing evicted.
	snapshottest.Exec(t, url, `DELETE FROM sys_metadata`)
	guardedAll("mass delete (rows put back)", objects, objects)
	seed(0, objects)
	results.converged("mass delete (rows put back)", r.converge(url, ds...))

	// A TRUNCATE meant on purpose: guarded, then released for the fleet.
	snapshottest.Exec(t, url, `TRUNCATE sys_metadata`)
	guardedAll("TRUNCATE (released)", objects, objects)
	release()
	results.converged("TRUNCATE (released)", r.converge(url, ds...))
	seed(0, objects)
	r.converge(url, ds...)

	// The store restored from an older backup (without the 20 objects
	// written since): the regression relist is guarded; releasing applies
	// the restore.
	seed(objects, objects+20)
	r.converge(url, ds...)
	if err := testdb.Exec(ctx, c.URL("postgres"), "DROP DATABASE store WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store TEMPLATE store_backup"); err != nil {
		t.Fatal(err)
	}
	guardedAll("older backup restored (released)", objects+20, 20)
	release()
	results.converged("older backup restored (released)", r.converge(url, ds...))

	// The store swapped for another (empty) database: another store id,
	// guarded; the right database back (the same rows: the backup) clears
	// it.
	if err := testdb.Exec(ctx, c.URL("postgres"), "DROP DATABASE store WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store"); err != nil {
		t.Fatal(err)
	}
	migrate(t, url)
	guardedAll("wrong store (the right one back)", objects, objects)
	if err := testdb.Exec(ctx, c.URL("postgres"), "DROP DATABASE store WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store TEMPLATE store_backup"); err != nil {
		t.Fatal(err)
	}
	// The registries already equal the right store's rows (nothing was
	// evicted): wait for each daemon to see it and clear its guard.
	back := time.Now()
	for _, d := range ds {
		eventually(t, d.id+" clears its guard once the right store is back", func() bool { _, g := held(d); return g == 0 })
	}
	r.converge(url, ds...)
	results.converged("wrong store (the right one back)", time.Since(back))
	t.Logf("objects lost without a release across the faults: %d (3 daemons)", lost)
}
