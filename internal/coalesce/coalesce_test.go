package coalesce_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/internal/coalesce"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 10*time.Second, time.Millisecond, what, cond)
}

func TestConcurrentCallersShareOneRun(t *testing.T) {
	var c coalesce.Call[int]
	release := make(chan struct{})
	started := make(chan struct{})
	f := func(ctx context.Context) (int, error) {
		close(started)
		<-release
		return 42, nil
	}
	const n = 20
	var wg sync.WaitGroup
	results := make([]int, n)
	wg.Add(1)
	go func() { defer wg.Done(); results[0], _ = c.Do(context.Background(), f) }()
	<-started
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], _ = c.Do(context.Background(), f) }()
	}
	waitFor(t, "19 waiters", func() bool { return c.Waiting() == n-1 })
	close(release)
	wg.Wait()
	if c.Runs() != 1 {
		t.Fatalf("%d callers caused %d runs, want 1", n, c.Runs())
	}
	for i, r := range results {
		if r != 42 {
			t.Fatalf("caller %d got %d", i, r)
		}
	}
	// A later caller gets a fresh run.
	if v, err := c.Do(context.Background(), func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil || c.Runs() != 2 {
		t.Fatalf("later call: %d %v runs %d", v, err, c.Runs())
	}
}

func TestLeaderCancelDoesNotFailFollowers(t *testing.T) {
	var c coalesce.Call[string]
	release := make(chan struct{})
	started := make(chan struct{})
	boom := errors.New("boom")
	f := func(ctx context.Context) (string, error) {
		close(started)
		<-release
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", boom
	}
	lctx, cancelLeader := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var leaderErr, followerErr, impatientErr error
	wg.Add(1)
	go func() { defer wg.Done(); _, leaderErr = c.Do(lctx, f) }()
	<-started
	ictx, cancelImpatient := context.WithCancel(context.Background())
	wg.Add(2)
	go func() { defer wg.Done(); _, followerErr = c.Do(context.Background(), f) }()
	go func() { defer wg.Done(); _, impatientErr = c.Do(ictx, f) }()
	waitFor(t, "2 waiters", func() bool { return c.Waiting() == 2 })
	cancelLeader()
	cancelImpatient()
	waitFor(t, "the impatient caller to leave", func() bool { return c.Waiting() == 1 })
	close(release)
	wg.Wait()
	if !errors.Is(leaderErr, boom) || !errors.Is(followerErr, boom) {
		t.Fatalf("leader %v follower %v, want the run's own error", leaderErr, followerErr)
	}
	if !errors.Is(impatientErr, context.Canceled) {
		t.Fatalf("impatient caller: %v", impatientErr)
	}
}
