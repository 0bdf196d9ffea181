package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Revalidation: a ready entry only says that materializing it worked once.
// Every Options.RevalidateInterval (jittered by at most 10%, so sidecars
// spread out) the ready connectors and datasources whose instance is a
// Revalidator are checked again beside the loop, at most
// revalidateConcurrency at once and revalidateRate per second in all, so a
// fleet does not hammer an upstream. A failure reaches the loop, which
// records it as it would a materialization's (a refusal holds the entry, a
// transient failure degrades it, with backoff) if the entry still serves
// the instance that failed; a success changes nothing.

// Bounds of one revalidation round.
const (
	revalidateConcurrency = 4
	revalidateRate        = 20 // checks per second, all entries together
)

// revalidated is the failed check of one entry's instance.
type revalidated struct {
	ref  registry.Ref
	inst registry.Instance
	sig  string
	err  error
}

// revalidations queues failed checks for the loop.
type revalidations struct {
	mu   sync.Mutex
	done []revalidated
}

func (q *revalidations) push(v revalidated) {
	q.mu.Lock()
	q.done = append(q.done, v)
	q.mu.Unlock()
}

func (q *revalidations) take() []revalidated {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.done
	q.done = nil
	return d
}

// revalidate runs rounds until ctx ends (a goroutine of Run).
func (r *Reconciler) revalidate(ctx context.Context) {
	t := time.NewTimer(backoff.Jitter(r.opts.RevalidateInterval, 0.1))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.isSynced() {
			r.revalidateRound(ctx)
		}
		t.Reset(backoff.Jitter(r.opts.RevalidateInterval, 0.1))
	}
}

// revalidateRound checks every ready connector and datasource once.
func (r *Reconciler) revalidateRound(ctx context.Context) {
	type check struct {
		e   registry.Entry
		rev Revalidator
	}
	var checks []check
	for _, k := range []registry.Kind{registry.KindConnector, registry.KindDatasource} {
		for _, e := range r.regs.List(k, registry.StateReady) {
			if rv, ok := e.Instance.(Revalidator); ok {
				checks = append(checks, check{e, rv})
			}
		}
	}
	if len(checks) == 0 {
		return
	}
	tick := time.NewTicker(time.Second / revalidateRate)
	defer tick.Stop()
	sem := make(chan struct{}, revalidateConcurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range checks {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, r.opts.ApplyTimeout)
			defer cancel()
			err := callRevalidate(cctx, c.rev)
			if ctx.Err() != nil {
				return // stopping: not the upstream's fault
			}
			ref := registry.Ref{Kind: c.e.Kind, Key: c.e.Key}
			if err == nil {
				r.metrics.Revalidations.WithLabelValues(string(ref.Kind), "ready").Inc()
				return
			}
			r.revalQ.push(revalidated{ref: ref, inst: c.e.Instance, sig: c.e.Signature, err: err})
			r.signal(flagRevalidated)
		})
	}
}

// callRevalidate calls rv, turning a panic into a transient failure.
func callRevalidate(ctx context.Context, rv Revalidator) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Transient(nil, "revalidation panicked: %v", v)
		}
	}()
	return rv.Revalidate(ctx)
}

// applyRevalidations records the failed checks queued (loop goroutine):
// each entry that still serves the instance checked, with the signature
// it had, turns held or degraded as a materialization failing alike
// would; the instance keeps serving meanwhile (as after a failed
// rebuild), and the entry says so.
func (r *Reconciler) applyRevalidations(ctx context.Context) {
	failed := r.revalQ.take()
	if len(failed) == 0 {
		return
	}
	now := time.Now()
	var t tally
	for _, f := range failed {
		o := materialized(nil, f.err)
		applied := false
		r.regs.Of(f.ref.Kind).Update(f.ref.Key, func(e *registry.Entry) {
			if e.State != registry.StateReady || e.Signature != f.sig || e.Instance != f.inst {
				return // rebuilt or changed since the check
			}
			applied = true
			e.State, e.Reason, e.Since = o.state, "revalidation: "+o.reason, now
			if o.state == registry.StateDegraded {
				e.Attempts = 1
				e.RetryAt = now.Add(r.retryBackoff(e.Attempts))
				r.retries[f.ref] = e.RetryAt
			}
			e.History.Add(now, e.State, e.Reason, e.Revision)
		})
		if !applied {
			continue
		}
		r.metrics.Revalidations.WithLabelValues(string(f.ref.Kind), string(o.state)).Inc()
		t.move(f.ref.Kind, registry.StateReady, o.state)
		r.log.LogAttrs(ctx, slog.LevelWarn, "revalidation failed",
			slog.String("kind", string(f.ref.Kind)), slog.String("key", f.ref.Key),
			slog.String("state", string(o.state)), slog.String("reason", o.reason))
	}
	r.flush(&t)
}
