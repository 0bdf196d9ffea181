package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrPanicked is what waiting callers get when the run they wait for
// panicked.
var ErrPanicked = errors.New("the shared computation panicked")

// Call runs a function for the first caller and hands its result to every
// caller that arrives before it returns. The zero value is ready to use.
type Call[T any] struct {
	mu      sync.Mutex
	cur     *flight[T]
	runs    atomic.Int64
	waiting atomic.Int64
}

type flight[T any] struct {
	done chan struct{}
	v    T
	err  error
}

// Do returns f's result. The first caller runs f on its own goroutine with
// its context detached from cancellation (the others rely on the result),
// so f must bound itself; callers that arrive while f runs wait for that
// result, or until their own ctx ends.
func (c *Call[T]) Do(ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	fl := c.cur
	if fl == nil {
		fl = &flight[T]{done: make(chan struct{})}
		c.cur = fl
		c.mu.Unlock()
		c.runs.Add(1)
		func() {
			returned := false
			defer func() {
				if !returned {
					fl.err = ErrPanicked // the panic goes on up the leader's stack
				}
				c.mu.Lock()
				c.cur = nil
				c.mu.Unlock()
				close(fl.done)
			}()
			fl.v, fl.err = f(context.WithoutCancel(ctx))
			returned = true
		}()
		return fl.v, fl.err
	}
	c.mu.Unlock()
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case <-fl.done:
		return fl.v, fl.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Runs returns how many times f has run.
func (c *Call[T]) Runs() int64 { return c.runs.Load() }

// Waiting returns how many callers are waiting for a run of another
// caller's.
func (c *Call[T]) Waiting() int64 { return c.waiting.Load() }
