package shutdown

import (
	"context"
	"sync"
	"time"
)

// Stop is the stop of a run: it begins when the run's context ends (or
// when its Context is first asked for, by a run stopping by itself) and
// lasts its budget.
type Stop struct {
	run     context.Context
	budget  time.Duration
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	release func() bool
}

// Watch returns the stop of the run whose context is run, with budget.
// Release it when the run is over.
func Watch(run context.Context, budget time.Duration) *Stop {
	s := &Stop{run: run, budget: budget}
	s.release = context.AfterFunc(run, s.begin)
	return s
}

func (s *Stop) begin() {
	s.once.Do(func() { s.ctx, s.cancel = context.WithTimeout(context.WithoutCancel(s.run), s.budget) })
}

// Context is the stop's context: the run's values, not its cancellation,
// and the deadline budget after the stop began. Asking begins the stop.
func (s *Stop) Context() context.Context {
	s.begin()
	return s.ctx
}

// Release stops watching the run and ends the stop's context.
func (s *Stop) Release() {
	s.release()
	s.once.Do(func() {}) // a stop that never began stays so
	if s.cancel != nil {
		s.cancel()
	}
}

// Leave returns a context that ends need before ctx's deadline (at once
// if less than need is left), for a phase that must leave need of the
// budget to the phases after it. Without a deadline it ends with ctx.
func Leave(ctx context.Context, need time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-need))
}

// Within runs f, waiting for it until ctx ends at the latest; then f is
// abandoned (it goes on in the background). It reports whether f returned
// (only then may its results be read).
func Within(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
