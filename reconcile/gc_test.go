package reconcile

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// gcPercent reads the collector's GOGC setting.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestSyncGCPercent: the first full sync runs at SyncGCPercent, the
// collector's own setting is back once it is synced, and later passes
// leave it alone; a lower SyncGCPercent than the setting, or a collector
// switched off, is not changed. Not parallel: GOGC is the process's.
func TestSyncGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		name          string
		setting, sync int
		during        int
	}{
		{"raised", 100, 400, 400},
		{"already higher", 500, 400, 500},
		{"off stays off", -1, 400, -1},
		{"option unset", 100, 0, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, url := snapshottest.NewSQLite(t)
			snapshottest.Exec(t, url, upsertMeta, "object-a", "object", "a", "active", `{"fields":{}}`)
			debug.SetGCPercent(c.setting)
			var seen atomic.Int64
			engine := MaterializerFunc(func(context.Context, Desired) (registry.Instance, error) {
				seen.Store(int64(gcPercent()))
				return nil, nil
			})
			b := start(t, s, url, Options{SyncGCPercent: c.sync,
				Materializers: map[registry.Kind]Materializer{registry.KindEngine: engine}})
			if got := seen.Load(); got != int64(c.during) {
				t.Errorf("GOGC during the first sync = %d, want %d", got, c.during)
			}
			if got := gcPercent(); got != c.setting {
				t.Errorf("GOGC after the first sync = %d, want the setting %d back", got, c.setting)
			}
			key := registry.EngineKey("", "object", "a", "")
			first, _ := b.entry(registry.KindEngine, key)
			snapshottest.Exec(t, url, upsertMeta, "object-a", "object", "a", "active", `{"fields":{"x":{"type":"text"}}}`)
			b.rec.Resync() // a relist, or the poll before it: neither is the first sync
			b.waitFor("the rebuild", func() bool {
				e, _ := b.entry(registry.KindEngine, key)
				return e.ServingRevision > first.ServingRevision
			})
			if got := seen.Load(); got != int64(c.setting) {
				t.Errorf("GOGC during a later pass = %d, want the setting %d", got, c.setting)
			}
		})
	}
}
