package replica

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// A message seen before a change's watermark time (its transaction's
// start, on the store's clock) does not tell the replica about it: the
// replica re-read the row as it was. One seen after it does, and without a
// watermark time the Window applies.
func TestCoverStartsAtTheChange(t *testing.T) {
	d := newElector(t, "reconciler:a")
	now := time.Now()
	// The store's clock runs an hour behind this host's.
	d.storeAt, d.localAt = now.Add(-time.Hour), now
	c := reconcile.Change{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionRebuild,
		At: now.Add(-time.Hour).Add(-300 * time.Millisecond)} // committed 300 ms ago, store's clock
	from := d.coverFromLocked(c, now)
	if want := now.Add(-300*time.Millisecond - coverSlack); !from.Equal(want) {
		t.Fatalf("cover from %s before now, want %s (the change's time, this host's clock)", now.Sub(from), now.Sub(want))
	}
	old := reconcile.Change{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionRebuild,
		At: now.Add(-time.Hour).Add(-time.Minute)}
	if from := d.coverFromLocked(old, now); !from.Equal(now.Add(-d.opts.Window)) {
		t.Fatalf("a change noticed a minute late: cover from %s before now, want the Window %s", now.Sub(from), d.opts.Window)
	}
	evict := reconcile.Change{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionEvict}
	if from := d.coverFromLocked(evict, now); !from.Equal(now.Add(-d.opts.Window)) {
		t.Fatalf("no watermark time: cover from %s before now, want the Window", now.Sub(from))
	}
}
