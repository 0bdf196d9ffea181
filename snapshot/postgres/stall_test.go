package postgres_test

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A writer is named once a check at least minAge earlier saw its xid
// (below that check's xmax: some later transaction had completed, as the
// replica's own heartbeats do every few polls): not by the first check,
// and by a later one.
func TestStallNamesWriterAfterMinAge(t *testing.T) {
	t.Parallel()
	s, c, rollback := openWriter(t)
	defer rollback()
	st, err := s.Stall(snapshottest.Ctx(t), c, stallMinAge)
	if err != nil || len(st.Blockers) != 0 {
		t.Fatalf("first check = %+v, %v; want no blocker named yet", st, err)
	}
	waitNamed(t, func() snapshot.Stall {
		st, err := s.Stall(snapshottest.Ctx(t), c, stallMinAge)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// As the loop runs it (a poll, then a stall check with that poll's
// cursor), a writer open for minAge is named.
func TestStallAfterPollNamesWriter(t *testing.T) {
	t.Parallel()
	s, c, rollback := openWriter(t)
	defer rollback()
	waitNamed(t, func() snapshot.Stall {
		_, c = snapshottest.Poll(t, s, c)
		st, err := s.Stall(snapshottest.Ctx(t), c, stallMinAge)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

const stallMinAge = 100 * time.Millisecond

// openWriter relists a fresh PostgreSQL store, then leaves a transaction
// open that wrote a row, and commits a later one (as the replica's own
// heartbeats do every few polls). It returns the store, the relist's
// cursor and the open transaction's rollback.
func openWriter(t *testing.T) (snapshot.Store, snapshot.Cursor, func()) {
	t.Helper()
	s, url := snapshottest.NewPostgres(t)
	ctx := snapshottest.Ctx(t)
	_, c := snapshottest.Relist(t, s)
	tx := snapshottest.Connect(t, url)
	if err := tx.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	tx.Exec(t, snapshottest.InsertMetadata, "held")
	snapshottest.Exec(t, url, snapshottest.InsertMetadata, "after")
	return s, c, func() { _ = tx.Rollback(ctx) }
}

// waitNamed runs check at a check cadence until it names a blocker, or
// fails after 30 s.
func waitNamed(t *testing.T, check func() snapshot.Stall) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(check().Blockers) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("an open writer was never named")
		}
		time.Sleep(20 * time.Millisecond) // check cadence
	}
}
