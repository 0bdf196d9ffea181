package snapshot_test

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A writer is named once a check at least minAge earlier saw its xid
// (below that check's xmax: some later transaction had completed, as the
// replica's own heartbeats do every few polls): not by the first check,
// and by a later one.
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
	snapshottest.Exec(t, url, insMeta, "after") // a later transaction completes (a heartbeat)
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

// As the loop runs it (a poll, then a stall check with that poll's
// cursor), a writer open for minAge is named.
func TestStallAfterPollNamesWriter(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewPostgres(t)
	ctx := ctxT(t)
	_, c := relist(t, s)
	tx := snapshottest.Connect(t, url)
	if err := tx.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	tx.Exec(t, insMeta, "held")
	snapshottest.Exec(t, url, insMeta, "after")
	const minAge = 100 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, c = poll(t, s, c)
		st, err := s.Stall(ctx, c, minAge)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Blockers) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an open writer was never named")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = tx.Rollback(ctx)
}
