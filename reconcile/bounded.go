package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/registry"
)

// Calls into a materializer's code (Materialize, an instance's Close) run
// in a goroutine other than the loop's, so that the loop waits for them
// only as long as it chooses to: apply.timeout, or until the reconciler
// stops. A call that overruns is abandoned: its goroutine keeps running
// until the call returns (Go cannot stop it), is counted meanwhile, and
// cleans up after itself (a late instance is closed). An entry whose
// abandoned attempt is still running is not tried again until it returns,
// so a materializer that ignores its context costs at most one goroutine
// per entry.
//
// Materialize calls run on a few long-lived workers (apply.concurrency),
// one call after another, watched by one watchdog per batch: it ends the
// context of a call at its deadline (or when the reconciler stops), and
// abandons the worker of a call still running abandonGrace later, starting
// another in its place. No goroutine, timer or context.WithTimeout per call.

// abandonGrace is how long a materializer whose context ended has to
// return before it is abandoned: one that honours its context does.
const abandonGrace = 100 * time.Millisecond

// abandoned counts the goroutines the loop stopped waiting for.
type abandoned struct {
	gauge prometheus.Gauge

	mu       sync.Mutex
	n        int
	attempts map[registry.Ref]int // abandoned materializations per entry
}

func newAbandoned(gauge prometheus.Gauge) *abandoned {
	return &abandoned{gauge: gauge, attempts: make(map[registry.Ref]int)}
}

// add counts one abandoned goroutine (ref: the entry it materializes,
// zero for a Close).
func (a *abandoned) add(ref registry.Ref) {
	a.mu.Lock()
	a.n++
	if ref != (registry.Ref{}) {
		a.attempts[ref]++
	}
	a.gauge.Set(float64(a.n))
	a.mu.Unlock()
}

// done uncounts a goroutine counted by add(ref).
func (a *abandoned) done(ref registry.Ref) {
	a.mu.Lock()
	a.n--
	if ref != (registry.Ref{}) {
		if a.attempts[ref]--; a.attempts[ref] <= 0 {
			delete(a.attempts, ref)
		}
	}
	a.gauge.Set(float64(a.n))
	a.mu.Unlock()
}

// running reports whether an abandoned attempt at ref has not returned.
func (a *abandoned) running(ref registry.Ref) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attempts[ref] > 0
}

func (a *abandoned) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// A call is taken by whichever side gets to it first: the goroutine that
// made it (it finished in time: the loop uses the result) or the loop (it
// gave up: the goroutine cleans up).
const (
	callRunning int32 = iota
	callTaken
	callAbandoned
)

// attempt is what a Materialize call returned.
type attempt struct {
	inst     registry.Instance
	err      error
	panicked bool
}

// materialize calls m with apply.timeout, turning a panic or a hang into a
// transient failure of this entry only. A materializer that ignores its
// context is abandoned; whatever it returns later is closed.
func (r *Reconciler) materialize(ctx context.Context, m Materializer, d Desired) (registry.Instance, error) {
	var (
		inst registry.Instance
		err  error
	)
	r.guarded(ctx, 1, 1, func(int) (Materializer, Desired, bool) { return m, d, true },
		func(_ int, i registry.Instance, e error) { inst, err = i, e })
	return inst, err
}

// guarded runs the items 0..n-1 of a batch on at most workers goroutines
// and returns once every item is finished. start(i) prepares item i and
// returns the call to make, or false when the item needs none (start
// finished it). finish(i, …) is told the call's result: by the worker when
// the call returned in time, by the watchdog when it was abandoned (a
// timeout, or the reconciler stopping); exactly once per call.
func (r *Reconciler) guarded(ctx context.Context, n, workers int,
	start func(i int) (Materializer, Desired, bool), finish func(i int, inst registry.Instance, err error)) {
	g := &guard{r: r, parent: ctx, values: context.WithoutCancel(ctx), n: n, start: start, finish: finish,
		calls: make(map[*call]struct{}, workers), wake: make(chan struct{}, 1), quit: make(chan struct{})}
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

// guard is one batch of guarded calls.
type guard struct {
	r      *Reconciler
	parent context.Context
	values context.Context // parent without its cancellation: the values calls see
	n      int
	next   atomic.Int64 // the next item to start
	start  func(i int) (Materializer, Desired, bool)
	finish func(i int, inst registry.Instance, err error)
	wg     sync.WaitGroup // workers (an abandoned one is no longer counted)

	mu       sync.Mutex
	calls    map[*call]struct{} // in flight
	wakeAt   time.Time          // the watchdog looks again by then (zero: no call)
	stopping error              // parent's error once it ended
	wake     chan struct{}      // a call is due before wakeAt
	quit     chan struct{}      // every item is finished
}

// work runs items until there are none left, or until its call is
// abandoned (then it cleans up and ends: another worker took its place).
func (g *guard) work() {
	for {
		i := int(g.next.Add(1) - 1)
		if i >= g.n {
			g.wg.Done()
			return
		}
		m, d, ok := g.start(i)
		if !ok {
			continue
		}
		c := g.begin(i, d)
		res := g.r.callMaterializer(c, m, d)
		if !c.state.CompareAndSwap(callRunning, callTaken) {
			// Abandoned: nobody will use what it built.
			if res.err == nil {
				g.r.closeNow(d.Kind, d.Key, res.inst)
			}
			g.r.abandoned.done(c.ref)
			return
		}
		g.mu.Lock()
		delete(g.calls, c)
		g.mu.Unlock()
		inst, err := g.r.attemptResult(c, res)
		c.cancel(context.Canceled) // the call is over: what it left running on its context stops
		g.finish(i, inst, err)
	}
}

// begin registers the call of item i, due at apply.timeout (or the
// parent's deadline if sooner).
func (g *guard) begin(i int, d Desired) *call {
	now := time.Now()
	c := &call{i: i, ref: registry.Ref{Kind: d.Kind, Key: d.Key}, values: g.values,
		deadline: now.Add(g.r.opts.ApplyTimeout)}
	if pd, ok := g.parent.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	due := c.deadline
	g.mu.Lock()
	g.calls[c] = struct{}{}
	if g.stopping != nil {
		c.cancel(g.stopping)
		c.cutAt = now
		due = now.Add(abandonGrace)
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
// the parent ends) and abandons the calls still running abandonGrace
// later, until the batch is finished. It sleeps until the soonest of
// those moments: a batch of calls that return in time never wakes it.
func (g *guard) watch() {
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
func (g *guard) sweep() time.Time {
	now := time.Now()
	var soonest time.Time
	var late []*call
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
			if due = c.cutAt.Add(abandonGrace); !now.Before(due) {
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

// abandon gives up on a call whose context ended abandonGrace ago: its
// item is finished as cut short and its worker replaced.
func (g *guard) abandon(c *call) {
	g.r.abandoned.add(c.ref) // before the swap: done must never come first
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		g.r.abandoned.done(c.ref) // it returned just now: its worker goes on
		return
	}
	g.r.log.WarnContext(g.parent, "materializer abandoned: it did not return when its context ended",
		slog.String("kind", string(c.ref.Kind)), slog.String("key", c.ref.Key))
	g.finish(c.i, nil, g.r.cutShort(c))
	g.wg.Add(1)
	go g.work()
	g.wg.Done() // the abandoned worker's
}

// call is one guarded Materialize call, and the context it is given: the
// parent's values, a deadline, and an end the watchdog decides.
type call struct {
	i        int
	ref      registry.Ref
	values   context.Context
	deadline time.Time
	state    atomic.Int32 // callRunning, then callTaken or callAbandoned
	cutAt    time.Time    // when the context ended (guarded by guard.mu)

	mu   sync.Mutex
	done chan struct{} // made on first use
	err  error
}

var _ context.Context = (*call)(nil)

// Deadline is apply.timeout after the call started, or the parent's.
func (c *call) Deadline() (time.Time, bool) { return c.deadline, true }

// Done is closed when the call is cut short.
func (c *call) Done() <-chan struct{} {
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
func (c *call) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value is the parent's value for key.
func (c *call) Value(key any) any { return c.values.Value(key) }

func (c *call) cancel(err error) {
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

func (r *Reconciler) callMaterializer(ctx context.Context, m Materializer, d Desired) (res attempt) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("materializer panicked", slog.String("kind", string(d.Kind)), slog.String("key", d.Key),
				slog.String("stack", string(debug.Stack())))
			res = attempt{err: Transient(&abortError{"panic"}, "materializer panicked"), panicked: true}
		}
	}()
	inst, err := m.Materialize(ctx, d)
	return attempt{inst: inst, err: err}
}

func (r *Reconciler) attemptResult(mctx context.Context, res attempt) (registry.Instance, error) {
	switch {
	case res.panicked:
		return nil, res.err
	case res.err != nil && mctx.Err() != nil:
		return nil, r.cutShort(mctx)
	case res.err == nil && isNil(res.inst):
		return NopInstance{}, nil
	}
	return res.inst, res.err
}

// cutShort is the failure of a materialization whose context ended.
func (r *Reconciler) cutShort(mctx context.Context) error {
	if errors.Is(mctx.Err(), context.DeadlineExceeded) {
		return Transient(&abortError{"timeout"}, "materialize timed out after %s", r.opts.ApplyTimeout)
	}
	return Transient(&abortError{"timeout"}, "materialize cut short: the reconciler is stopping")
}

// errAttemptRunning holds an entry back while its abandoned attempt runs.
func (r *Reconciler) errAttemptRunning() error {
	return Transient(nil, "previous attempt still running (abandoned after %s); not retried until it returns", r.opts.ApplyTimeout)
}

// abortError marks a materialization the loop cut short (metric label).
type abortError struct{ label string }

func (e *abortError) Error() string { return "materialization aborted: " + e.label }

// closeInstance closes inst, waiting until it returns, apply.timeout
// passes or ctx ends, whichever comes first; a Close that overruns is
// abandoned and counted.
func (r *Reconciler) closeInstance(ctx context.Context, k registry.Kind, key string, inst registry.Instance) {
	if _, nop := inst.(NopInstance); nop || isNil(inst) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ApplyTimeout)
	defer cancel()
	var state atomic.Int32
	done := make(chan struct{})
	go func() {
		r.closeNow(k, key, inst)
		if !state.CompareAndSwap(callRunning, callTaken) {
			r.abandoned.done(registry.Ref{})
		}
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	r.abandoned.add(registry.Ref{})
	if !state.CompareAndSwap(callRunning, callAbandoned) {
		r.abandoned.done(registry.Ref{})
		<-done
		return
	}
	r.log.Warn("close abandoned: it did not return in time", slog.String("kind", string(k)), slog.String("key", key))
}

// closeNow closes inst in this goroutine; a panic is logged, not raised.
func (r *Reconciler) closeNow(k registry.Kind, key string, inst registry.Instance) {
	if isNil(inst) {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("close panicked", slog.String("kind", string(k)), slog.String("key", key))
		}
	}()
	if err := inst.Close(); err != nil {
		r.log.Warn("close instance", slog.String("kind", string(k)), slog.String("key", key), slog.String("error", err.Error()))
	}
}

// isNil reports whether inst is nil, also a nil pointer in a non-nil
// interface (a materializer that returns a typed nil).
func isNil(inst registry.Instance) bool {
	if inst == nil {
		return true
	}
	v := reflect.ValueOf(inst)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}
