package reconcile

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestSlowTenantDoesNotDelayOthers: five connectors of one organization
// whose upstreams hang (each up to apply.timeout) do not hold back another
// organization's object: it applies while they still hang. They land
// later (degraded, timed out); a change made to one while it hung is
// applied after it lands.
func TestSlowTenantDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	store, url := snapshottest.NewSQLite(t)
	const hangBody = `{"provider":"rest","providerConfig":{"baseUrl":"http://127.0.0.1:1"},"auth":{"type":"none"},"enabled":true}`
	var hanging atomic.Int64
	conn := newCounter(func(ctx context.Context, d Desired) error {
		if string(d.Body) == hangBody { // the hanging ones
			hanging.Add(1)
			defer hanging.Add(-1)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	b := start(t, store, url, Options{ResyncInterval: -1, ApplyTimeout: 3 * time.Second, PollInterval: 50 * time.Millisecond,
		PassBudget:    200 * time.Millisecond,
		Materializers: map[registry.Kind]Materializer{registry.KindConnector: conn, registry.KindEngine: newCounter(nil)}})
	for i := range 5 {
		b.exec(upsertOrgRow, fmt.Sprintf("h%d", i), "connector", fmt.Sprintf("hang%d", i), "evil", hangBody)
	}
	b.waitFor("the hanging calls started", func() bool { return hanging.Load() >= 4 })
	t0 := time.Now()
	b.exec(upsertOrgRow, "o1", "object", "account", "acme", `{"fields":{"name":{"type":"text"}}}`)
	b.waitFor("acme's object applied", func() bool { return b.state(registry.KindEngine, "acme:object/account") == registry.StateReady })
	took := time.Since(t0)
	if n := hanging.Load(); n == 0 {
		t.Fatalf("acme's object applied only after every hanging call returned (%v)", took)
	}
	t.Logf("acme's object applied %v after commit, with %d upstream calls of another organization hanging", took.Round(time.Millisecond), hanging.Load())

	// A change to a hanging connector while it hangs: applied once it lands.
	b.exec(upsertOrgRow, "h0", "connector", "hang0", "evil", connectorBodyJSON("tok"))
	b.waitFor("the hanging connectors landed", func() bool {
		for i := 1; i < 5; i++ {
			if b.state(registry.KindConnector, fmt.Sprintf("evil:hang%d", i)) != registry.StateDegraded {
				return false
			}
		}
		return true
	})
	b.waitFor("the changed connector rebuilt after landing", func() bool {
		e, _ := b.entry(registry.KindConnector, "evil:hang0")
		return e.State == registry.StateHeld // its credential tok is missing: held, not hanging
	})
}

// TestHintFloodIsSpaced: thousands of hints (a NOTIFY flood from any role
// that can connect) start passes at most every hint spacing, not one per
// hint; a change still applies at the next hint pass.
func TestHintFloodIsSpaced(t *testing.T) {
	t.Parallel()
	store, url := snapshottest.NewSQLite(t)
	var passes atomic.Int64
	b := start(t, store, url, Options{ResyncInterval: -1, PollInterval: time.Second, OnPass: func(PassResult) { passes.Add(1) }})
	before := passes.Load()
	t0 := time.Now()
	for range 20000 {
		b.rec.Hint()
	}
	for time.Since(t0) < 500*time.Millisecond {
		b.rec.Hint()
	}
	n := passes.Load() - before
	elapsed := time.Since(t0)
	if max := int64(elapsed/b.rec.hintSpacing()) + int64(elapsed/time.Second) + 2; n > max {
		t.Fatalf("%d passes from hints in %v, want at most %d (one per %v)", n, elapsed, max, b.rec.hintSpacing())
	}
	t.Logf("%d passes for a hint flood of %v (spacing %v)", n, elapsed.Round(time.Millisecond), b.rec.hintSpacing())
	b.exec(upsertMeta, "o1", "object", "account", "active", `{"fields":{}}`)
	b.rec.Hint()
	b.waitFor("a change after the flood applies at a hint pass", func() bool { return b.state(registry.KindEngine, "object/account") == registry.StateReady })
}
