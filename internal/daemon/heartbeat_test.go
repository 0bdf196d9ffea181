package daemon

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// A keepalive is every interval, less up to a tenth at random.
func TestKeepalive(t *testing.T) {
	t.Parallel()
	for range 100 {
		if d := keepalive(30 * time.Second); d < 27*time.Second || d > 30*time.Second {
			t.Fatalf("keepalive(30s) = %v", d)
		}
	}
}

// A pass wakes the heartbeat at once when what the row reports changed
// (applied changes, the error, the cursor's seq, the first sync), and not
// when an idle poll changed nothing.
func TestHeartbeatWritesChangesAtOnce(t *testing.T) {
	t.Parallel()
	w := newBeatWake()
	cur := func(seq int64) snapshot.Cursor { return snapshot.Cursor{StoreID: "s", Seq: seq} }
	for _, tc := range []struct {
		name string
		pass reconcile.PassResult
		wake bool
	}{
		{"first sync", reconcile.PassResult{Cause: reconcile.CauseStart, Cursor: cur(5)}, true},
		{"idle poll", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(5)}, false},
		{"cursor moved", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6)}, true},
		{"idle again", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6)}, false},
		{"applied", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6), Changes: []reconcile.Change{{}}}, true},
		{"store down", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6), Err: "down"}, true},
		{"still down", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6), Err: "down"}, false},
		{"back", reconcile.PassResult{Cause: reconcile.CausePoll, Cursor: cur(6)}, true},
	} {
		w.onPass(tc.pass)
		woke := false
		select {
		case <-w.ch:
			woke = true
		default:
		}
		if woke != tc.wake {
			t.Errorf("%s: woke %v, want %v", tc.name, woke, tc.wake)
		}
	}
}
