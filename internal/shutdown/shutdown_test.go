package shutdown

import (
	"context"
	"testing"
	"time"
)

// TestStopBeginsWhenRunEnds: the stop's deadline is its budget after the
// run's context ended, and the stop keeps the run's values.
func TestStopBeginsWhenRunEnds(t *testing.T) {
	t.Parallel()
	type key struct{}
	run, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	s := Watch(run, time.Hour)
	defer s.Release()
	time.Sleep(20 * time.Millisecond)
	ended := time.Now()
	cancel()
	ctx := s.Context()
	d, ok := ctx.Deadline()
	if !ok || d.Before(ended.Add(time.Hour)) || d.After(time.Now().Add(time.Hour)) {
		t.Fatalf("deadline %v (ok %v), want an hour after %v", d, ok, ended)
	}
	if ctx.Err() != nil || ctx.Value(key{}) != "v" {
		t.Fatalf("stop context: err %v value %v", ctx.Err(), ctx.Value(key{}))
	}
	s.Release()
	if ctx.Err() == nil {
		t.Fatal("stop context not ended by Release")
	}
}

// TestLeave: a phase's context ends what the next phase needs before the
// stop's deadline, at once when less is left; without a deadline, with
// its parent.
func TestLeave(t *testing.T) {
	t.Parallel()
	stop, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sd, _ := stop.Deadline()
	phase, cancelPhase := Leave(stop, time.Minute)
	defer cancelPhase()
	if d, _ := phase.Deadline(); !d.Equal(sd.Add(-time.Minute)) {
		t.Errorf("deadline %v, want %v", d, sd.Add(-time.Minute))
	}
	late, cancelLate := Leave(stop, 2*time.Hour)
	defer cancelLate()
	if late.Err() == nil {
		t.Error("a phase left less than nothing has not ended")
	}
	free, cancelFree := Leave(context.Background(), time.Minute)
	if _, ok := free.Deadline(); ok || free.Err() != nil {
		t.Error("a phase without a deadline got one")
	}
	cancelFree()
}

// TestWithin: f is waited for until ctx ends, then abandoned.
func TestWithin(t *testing.T) {
	t.Parallel()
	if !Within(context.Background(), func() {}) {
		t.Error("a returning f reported abandoned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	if Within(ctx, func() { <-release }) {
		t.Error("a hanging f reported returned")
	}
}
