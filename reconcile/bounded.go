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

	"github.com/objectstack-fleet/reconciler/reconcile/internal/bounded"
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
// Materialize calls run on a few long-lived workers (apply.concurrency)
// watched by one watchdog per batch (reconcile/internal/bounded, whose doc
// gives the figure that keeps it over a context.WithTimeout per call).

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

// attempt is what a Materialize call returned.
type attempt struct {
	inst     registry.Instance
	err      error
	panicked bool
}

// guarded runs the items 0..n-1 of a batch on at most workers goroutines
// and returns once every item is finished. start(i) prepares item i and
// returns the call to make, or false when the item needs none (start
// finished it). finish(i, …) is told the call's result: by the worker when
// the call returned in time, by the watchdog when it was abandoned (a
// timeout, or the reconciler stopping); exactly once per call.
func (r *Reconciler) guarded(ctx context.Context, n, workers int,
	start func(i int) (Materializer, Desired, bool), finish func(i int, inst registry.Instance, err error)) {
	b := bounded.Batch[materialization, registry.Ref, attempt]{
		Timeout: r.opts.ApplyTimeout,
		Grace:   abandonGrace,
		Start: func(i int) (materialization, registry.Ref, bool) {
			m, d, ok := start(i)
			return materialization{m, d}, registry.Ref{Kind: d.Kind, Key: d.Key}, ok
		},
		Call: func(mctx context.Context, c materialization) attempt { return r.callMaterializer(mctx, c.m, c.d) },
		Finish: func(i int, res attempt, ended error) {
			inst, err := r.attemptResult(ended, res)
			finish(i, inst, err)
		},
		Abandon: func(i int, ref registry.Ref, ended error) {
			r.abandoned.add(ref)
			r.log.WarnContext(ctx, "materializer abandoned: it did not return when its context ended",
				slog.String("kind", string(ref.Kind)), slog.String("key", ref.Key))
			finish(i, nil, r.cutShort(ended))
		},
		Late: func(ref registry.Ref, res attempt) { // nobody will use what it built
			if res.err == nil {
				r.closeNow(ref.Kind, ref.Key, res.inst)
			}
			r.abandoned.done(ref)
		},
	}
	b.Run(ctx, n, workers)
}

// materialization is one guarded call: m.Materialize(ctx, d).
type materialization struct {
	m Materializer
	d Desired
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

// attemptResult is the outcome of a call that returned res; ended is its
// context's error when it returned (nil: not ended).
func (r *Reconciler) attemptResult(ended error, res attempt) (registry.Instance, error) {
	switch {
	case res.panicked:
		return nil, res.err
	case res.err != nil && ended != nil:
		return nil, r.cutShort(ended)
	case res.err == nil && isNil(res.inst):
		return NopInstance{}, nil
	}
	return res.inst, res.err
}

// cutShort is the failure of a materialization whose context ended with
// ended.
func (r *Reconciler) cutShort(ended error) error {
	if errors.Is(ended, context.DeadlineExceeded) {
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

// A Close is taken by whichever side gets to it first: the goroutine that
// made it (it finished in time) or closeInstance (it gave up: the
// goroutine uncounts itself).
const (
	callRunning int32 = iota
	callTaken
	callAbandoned
)

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
