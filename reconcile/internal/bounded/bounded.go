package bounded

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Batch is one batch of calls, items 0..n-1: P is what a call is made
// with, K what the batch keeps of it while it runs, R what it returns.
// Every hook may run on any goroutine.
type Batch[P, K, R any] struct {
	// Timeout bounds each call (sooner, the parent's deadline).
	Timeout time.Duration
	// Grace is how long a call whose context ended has to return before
	// it is abandoned.
	Grace time.Duration
	// Start prepares item i: the call to make, or ok false when the item
	// needs none (Start finished it).
	Start func(i int) (p P, k K, ok bool)
	// Call makes the call of an item.
	Call func(ctx context.Context, p P) R
	// Finish is told what a call returned in time; ended is its
	// context's error then (nil: it returned before its context ended).
	Finish func(i int, r R, ended error)
	// Abandon is told of a call that did not return Grace after its
	// context ended (ended: why it ended); its worker is replaced.
	Abandon func(i int, k K, ended error)
	// Late is told what an abandoned call returned at last, always after
	// its Abandon returned.
	Late func(k K, r R)
}

// A call is taken by whichever side gets to it first: the worker that
// made it (it returned in time: Finish) or the watchdog (it gave up:
// Abandon, then Late once it returns).
const (
	running int32 = iota
	taken
	abandoned
)

// Run runs the items 0..n-1 on at most workers goroutines and returns
// once every item is finished (Start finished it, or Finish or Abandon
// was told of its call: exactly once per call).
func (b *Batch[P, K, R]) Run(parent context.Context, n, workers int) {
	g := &guard[P, K, R]{b: b, parent: parent, values: context.WithoutCancel(parent), n: n,
		calls: make(map[*call[K]]struct{}, workers), wake: make(chan struct{}, 1), quit: make(chan struct{})}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		g.watch()
	}()
	workers = max(1, min(workers, n))
	g.wg.Add(workers)
	for range workers {
		go g.work()
	}
	g.wg.Wait()
	close(g.quit)
	<-watched
}

// guard is one running batch.
type guard[P, K, R any] struct {
	b      *Batch[P, K, R]
	parent context.Context
	values context.Context // parent without its cancellation: the values calls see
	n      int
	next   atomic.Int64   // the next item to start
	wg     sync.WaitGroup // workers (an abandoned one is no longer counted)

	mu       sync.Mutex
	calls    map[*call[K]]struct{} // in flight
	wakeAt   time.Time             // the watchdog looks again by then (zero: no call)
	stopping error                 // parent's error once it ended
	wake     chan struct{}         // a call is due before wakeAt
	quit     chan struct{}         // every item is finished
}

// work runs items until there are none left, or until its call is
// abandoned (then it hands the result to Late and ends: another worker
// took its place).
func (g *guard[P, K, R]) work() {
	for {
		i := int(g.next.Add(1) - 1)
		if i >= g.n {
			g.wg.Done()
			return
		}
		p, k, ok := g.b.Start(i)
		if !ok {
			continue
		}
		c := g.begin(i, k)
		r := g.b.Call(c, p)
		if !c.state.CompareAndSwap(running, taken) {
			c.abandonMu.Lock() // once Abandon has returned
			g.b.Late(c.key, r)
			c.abandonMu.Unlock()
			return
		}
		g.mu.Lock()
		delete(g.calls, c)
		g.mu.Unlock()
		ended := c.Err()
		c.cancel(context.Canceled) // the call is over: what it left running on its context stops
		g.b.Finish(i, r, ended)
	}
}

// begin registers the call of item i, due at Timeout (or the parent's
// deadline if sooner).
func (g *guard[P, K, R]) begin(i int, k K) *call[K] {
	now := time.Now()
	c := &call[K]{i: i, key: k, values: g.values, deadline: now.Add(g.b.Timeout)}
	if pd, ok := g.parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	due := c.deadline
	g.mu.Lock()
	g.calls[c] = struct{}{}
	if g.stopping != nil {
		c.cancel(g.stopping)
		c.cutAt = now
		due = now.Add(g.b.Grace)
	}
	wake := g.wakeAt.IsZero() || due.Before(g.wakeAt)
	if wake {
		g.wakeAt = due
	}
	g.mu.Unlock()
	if wake {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	return c
}

// watch ends the contexts of calls past their deadline (all of them once
// the parent ends) and abandons the calls still running Grace later,
// until the batch is finished. It sleeps until the soonest of those
// moments: a batch of calls that return in time never wakes it.
func (g *guard[P, K, R]) watch() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	parentDone := g.parent.Done()
	for {
		select {
		case <-g.quit:
			t.Stop()
			return
		case <-parentDone:
			parentDone = nil
			g.mu.Lock()
			g.stopping = g.parent.Err()
			g.mu.Unlock()
		case <-g.wake:
		case <-t.C:
		}
		if at := g.sweep(); !at.IsZero() {
			t.Reset(time.Until(at))
		}
	}
}

// sweep cuts short and abandons what is due, returning when to look again.
func (g *guard[P, K, R]) sweep() time.Time {
	now := time.Now()
	var soonest time.Time
	var late []*call[K]
	g.mu.Lock()
	for c := range g.calls {
		if c.cutAt.IsZero() {
			switch {
			case g.stopping != nil:
				c.cancel(g.stopping)
				c.cutAt = now
			case !now.Before(c.deadline):
				c.cancel(context.DeadlineExceeded)
				c.cutAt = now
			}
		}
		due := c.deadline
		if !c.cutAt.IsZero() {
			if due = c.cutAt.Add(g.b.Grace); !now.Before(due) {
				delete(g.calls, c)
				late = append(late, c)
				continue
			}
		}
		if soonest.IsZero() || due.Before(soonest) {
			soonest = due
		}
	}
	g.wakeAt = soonest
	g.mu.Unlock()
	for _, c := range late {
		g.abandon(c)
	}
	return soonest
}

// abandon gives up on a call whose context ended Grace ago, unless it
// returned just now: its item is finished by Abandon and its worker
// replaced.
func (g *guard[P, K, R]) abandon(c *call[K]) {
	c.abandonMu.Lock()
	defer c.abandonMu.Unlock()
	if !c.state.CompareAndSwap(running, abandoned) {
		return // it returned just now: its worker goes on
	}
	g.b.Abandon(c.i, c.key, c.Err())
	g.wg.Add(1)
	go g.work()
	g.wg.Done() // the abandoned worker's
}

var _ context.Context = (*call[int])(nil)

// call is one call, and the context it is given: the parent's values, a
// deadline, and an end the watchdog decides.
type call[K any] struct {
	i         int
	key       K
	values    context.Context
	deadline  time.Time
	state     atomic.Int32 // running, then taken or abandoned
	cutAt     time.Time    // when the context ended (guarded by guard.mu)
	abandonMu sync.Mutex   // held while Abandon runs

	mu   sync.Mutex
	done chan struct{} // made on first use
	err  error
}

// Deadline is Timeout after the call started, or the parent's.
func (c *call[K]) Deadline() (time.Time, bool) { return c.deadline, true }

// Done is closed when the call is cut short.
func (c *call[K]) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err is context.DeadlineExceeded or the parent's error once cut short.
func (c *call[K]) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value is the parent's value for key.
func (c *call[K]) Value(key any) any { return c.values.Value(key) }

func (c *call[K]) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}
