package reconcile

import (
	"context"
	"sync"

	"github.com/objectstack-fleet/reconciler/registry"
)

// retryRequest is one call of Retry waiting for the loop.
type retryRequest struct {
	refs []registry.Ref
	held bool          // every held entry besides refs
	done chan struct{} // closed once a pass has retried them
}

// retryQueue holds the retries asked for and not taken by a pass yet.
type retryQueue struct {
	mu   sync.Mutex
	reqs []*retryRequest
}

func (q *retryQueue) push(req *retryRequest) {
	q.mu.Lock()
	q.reqs = append(q.reqs, req)
	q.mu.Unlock()
}

func (q *retryQueue) take() []*retryRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	reqs := q.reqs
	q.reqs = nil
	return reqs
}

func (q *retryQueue) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.reqs) > 0
}

// Retry has the loop materialize refs now (and, with held, every held
// entry), whatever their state and signature: a held entry waits for a
// change of its rows, but an upstream may have been fixed outside them.
// The retry is one pass of the loop, so it never runs beside another
// materialization of the same entry. Retry returns once that pass is
// over (or ctx ends first: the retry still happens). Entries with no row
// wanting them are skipped. Safe to call from any goroutine.
func (r *Reconciler) Retry(ctx context.Context, refs []registry.Ref, held bool) error {
	req := &retryRequest{refs: refs, held: held, done: make(chan struct{})}
	r.retryQ.push(req)
	r.signal(flagRetry)
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeRetries adds the entries of the retries asked for to forced (nil:
// made) and returns the requests, to be told when the pass is over
// (loop goroutine).
func (r *Reconciler) takeRetries(forced map[registry.Ref]bool) (map[registry.Ref]bool, []*retryRequest) {
	reqs := r.retryQ.take()
	if len(reqs) == 0 {
		return forced, nil
	}
	if forced == nil {
		forced = make(map[registry.Ref]bool)
	}
	want := func(ref registry.Ref) {
		if forced[ref] {
			return
		}
		if _, ok := r.model.nodes[ref]; !ok {
			return
		}
		forced[ref] = true
		r.metrics.Retries.WithLabelValues(string(ref.Kind), RetryRequested).Inc()
	}
	for _, req := range reqs {
		for _, ref := range req.refs {
			want(ref)
		}
		if req.held {
			for _, e := range r.regs.List("", registry.StateHeld) {
				want(registry.Ref{Kind: e.Kind, Key: e.Key})
			}
		}
	}
	return forced, reqs
}

// retried tells the callers of reqs, and of those waiting before, that
// their retry is over, once none of their entries is in flight (a call
// that outlasted its pass, late.go) any longer (loop goroutine).
func (r *Reconciler) retried(reqs []*retryRequest) {
	r.retryWaiting = append(r.retryWaiting, reqs...)
	kept := r.retryWaiting[:0]
	for _, req := range r.retryWaiting {
		busy := false
		for _, ref := range req.refs {
			busy = busy || r.inflight[ref] || r.redo[ref]
		}
		if busy {
			kept = append(kept, req)
			continue
		}
		close(req.done)
	}
	clear(r.retryWaiting[len(kept):])
	r.retryWaiting = kept
}

// The causes of a retry (label of reconciler_retries_total).
const (
	RetryBackoff   = "backoff"   // a degraded entry's backoff ran out
	RetryRequested = "requested" // reconciler retry, POST /v1/item/retry
)
