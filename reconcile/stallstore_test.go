package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// stallFails is a real store whose stall check fails with err while set:
// the primary's path died right after a poll.
type stallFails struct {
	snapshot.Store
	err atomic.Pointer[error]
}

func (s *stallFails) Stall(ctx context.Context, cur snapshot.Cursor, minAge time.Duration) (snapshot.Stall, error) {
	if e := s.err.Load(); e != nil {
		return snapshot.Stall{}, *e
	}
	return s.Store.Stall(ctx, cur, minAge)
}

// TestStallCheckReportsStoreDown: a stall check that cannot reach the store
// reports it down at once (a dead path shows within the dead-path bound,
// not after the next poll's own timeout too); one that fails otherwise
// leaves store_up alone; the next good pass reports it up again.
func TestStallCheckReportsStoreDown(t *testing.T) {
	t.Parallel()
	s, err := snapshot.Open("sqlite://"+filepath.Join(t.TempDir(), "s.db"), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	src := &stallFails{Store: s}
	rec := New(src, Options{PollInterval: 10 * time.Millisecond, StallAge: 10 * time.Millisecond, ResyncInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitStatus := func(what string, ok func(Status) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(rec.Status()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, rec.Status())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitStatus("first sync", func(st Status) bool { return st.Synced && st.StoreUp })

	unreachable := fmt.Errorf("stall check on the primary: %w", snapshot.ErrUnavailable)
	src.err.Store(&unreachable)
	waitStatus("store down after a failed stall check", func(st Status) bool {
		return !st.StoreUp && strings.Contains(st.LastError, "stall check")
	})

	other := errors.New("permission denied for pg_stat_activity")
	src.err.Store(&other)
	waitStatus("store up again: another failure is not an outage", func(st Status) bool { return st.StoreUp && st.LastError == "" })
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		if st := rec.Status(); !st.StoreUp {
			t.Fatalf("a stall check failing with %v reported the store down: %+v", other, st)
		}
	}
	src.err.Store(nil)
	waitStatus("store up", func(st Status) bool { return st.StoreUp })
}
