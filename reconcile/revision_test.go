package reconcile

import (
	"testing"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// The applied revision (Status.Revision, the heartbeat's head_revision and
// the converged revision's ceiling) reaches the store's head after a
// deletion with no later change: the deletion's tombstone is a revision of
// the head too. Before, it stayed one behind until the next write, and the
// fleet showed every replica a revision behind.
func TestAppliedRevisionCoversDeletions(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		b := start(t, s, url, Options{ResyncInterval: -1})
		b.exec(upsertMeta, "object-keep", "object", "keep", "active", `{"fields":{}}`)
		b.exec(upsertMeta, "object-gone", "object", "gone", "active", `{"fields":{}}`)
		b.settle()
		head := func() int64 {
			h, err := s.Head(snapshottest.Ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			return h.Revision
		}
		if got, want := b.rec.Status().Revision, head(); got != want {
			t.Fatalf("applied revision %d after two writes, head %d", got, want)
		}
		b.exec(`DELETE FROM sys_metadata WHERE id = 'object-gone'`)
		b.settle()
		if got, want := b.rec.Status().Revision, head(); got != want {
			t.Fatalf("applied revision %d after the deletion, the store's head %d", got, want)
		}
		b.rec.Resync() // a relist (a restarted sidecar) knows it too
		b.settle()
		if got, want := b.rec.Status().Revision, head(); got != want {
			t.Fatalf("applied revision %d after a relist, the store's head %d", got, want)
		}
	})
}
