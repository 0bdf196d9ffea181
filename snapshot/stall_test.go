package snapshot_test

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A writer is named once a check at least minAge earlier saw its xid: not
// by the first check, and by a later one.
func TestStallNamesWriterAfterMinAge(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewPostgres(t)
	ctx := ctxT(t)
	_, c := relist(t, s)
	tx := snapshottest.Connect(t, url)
	if err := tx.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	tx.Exec(t, insMeta, "held")
	const minAge = 100 * time.Millisecond
	st, err := s.Stall(ctx, c, minAge)
	if err != nil || len(st.Blockers) != 0 {
		t.Fatalf("first check = %+v, %v; want no blocker named yet", st, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = s.Stall(ctx, c, minAge)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Blockers) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an open writer was never named")
		}
		time.Sleep(20 * time.Millisecond) // check cadence
	}
	_ = tx.Rollback(ctx)
}
