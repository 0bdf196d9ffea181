package bounded

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// outcome records what a batch told of each item.
type outcome struct {
	mu       sync.Mutex
	finished map[int]error // item: ended
	cut      map[int]error // item: ended, abandoned
	late     []int
}

func batch(o *outcome, timeout time.Duration, call func(ctx context.Context, i int) int) *Batch[int, int, int] {
	o.finished, o.cut = map[int]error{}, map[int]error{}
	return &Batch[int, int, int]{
		Timeout: timeout,
		Grace:   20 * time.Millisecond,
		Start:   func(i int) (int, int, bool) { return i, i, i%5 != 4 }, // every fifth needs no call
		Call:    call,
		Finish: func(i, r int, ended error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if r != i {
				panic("result of another item")
			}
			o.finished[i] = ended
		},
		Abandon: func(i, k int, ended error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.cut[i] = ended
		},
		Late: func(k, r int) {
			o.mu.Lock()
			defer o.mu.Unlock()
			if _, ok := o.cut[k]; !ok {
				panic("Late before Abandon")
			}
			o.late = append(o.late, k)
		},
	}
}

// TestCallsInTime: every call that returns in time is finished once, with
// the parent's values and a deadline.
func TestCallsInTime(t *testing.T) {
	t.Parallel()
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	var o outcome
	var bad atomic.Int32
	batch(&o, time.Hour, func(ctx context.Context, i int) int {
		if _, ok := ctx.Deadline(); !ok || ctx.Value(key{}) != "v" || ctx.Err() != nil {
			bad.Add(1)
		}
		return i
	}).Run(parent, 1000, 4)
	if len(o.finished) != 800 || len(o.cut) != 0 || bad.Load() != 0 {
		t.Fatalf("%d finished, %d abandoned, %d calls saw a wrong context", len(o.finished), len(o.cut), bad.Load())
	}
	for i, ended := range o.finished {
		if ended != nil {
			t.Fatalf("item %d ended %v", i, ended)
		}
	}
}

// TestHungCallsAbandoned: a call that ignores its context is abandoned
// after its timeout and the grace, the others go on on a new worker, and
// what the hung one returns later is handed to Late.
func TestHungCallsAbandoned(t *testing.T) {
	t.Parallel()
	var o outcome
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch(&o, 50*time.Millisecond, func(ctx context.Context, i int) int {
			switch i {
			case 0: // ignores its context
				<-release
			case 1: // honours it
				<-ctx.Done()
			}
			return i
		}).Run(context.Background(), 10, 1)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for a hung call")
	}
	close(release)
	o.mu.Lock()
	cut, finished := o.cut, o.finished
	o.mu.Unlock()
	if !errors.Is(cut[0], context.DeadlineExceeded) || len(cut) != 1 {
		t.Fatalf("abandoned %v, want item 0 (deadline exceeded)", cut)
	}
	if !errors.Is(finished[1], context.DeadlineExceeded) || len(finished) != 7 {
		t.Fatalf("finished %v, want 7 with item 1 cut short", finished)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		o.mu.Lock()
		n := len(o.late)
		o.mu.Unlock()
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned call's result never reached Late")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestParentEnds: when the parent ends, every call's context ends with
// its error, and a call that ignores it is abandoned after the grace.
func TestParentEnds(t *testing.T) {
	t.Parallel()
	var o outcome
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch(&o, time.Hour, func(cctx context.Context, i int) int {
			started <- struct{}{}
			if i == 0 {
				<-release
			} else {
				<-cctx.Done()
			}
			return i
		}).Run(ctx, 2, 2)
	}()
	<-started
	<-started
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for a hung call after the parent ended")
	}
	if !errors.Is(o.cut[0], context.Canceled) || !errors.Is(o.finished[1], context.Canceled) {
		t.Fatalf("abandoned %v finished %v, want both canceled", o.cut, o.finished)
	}
}
