package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// Default backoff between failed attempts.
const (
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// queue holds at most one pending, coalesced change set.
type queue struct {
	mu      sync.Mutex
	pending *reconcile.ChangeSet
	wake    chan struct{}
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

// put merges cs into the pending set and wakes the sender. Never blocks.
func (q *queue) put(cs reconcile.ChangeSet) {
	q.mu.Lock()
	q.pending = merge(q.pending, cs)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the pending set.
func (q *queue) take() (reconcile.ChangeSet, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		return reconcile.ChangeSet{}, false
	}
	cs := *q.pending
	q.pending = nil
	return cs, true
}

// merge returns base with next merged in: next's replica and cursor, and
// its changes replacing base's for the same kind and key (in place, so the
// order of first appearance is kept). base is not modified.
func merge(base *reconcile.ChangeSet, next reconcile.ChangeSet) *reconcile.ChangeSet {
	out := &reconcile.ChangeSet{ReplicaID: next.ReplicaID, Cursor: next.Cursor, Changes: []reconcile.Change{}}
	index := map[string]int{}
	add := func(changes []reconcile.Change) {
		for _, c := range changes {
			k := string(c.Kind) + "\x00" + c.Key
			if i, ok := index[k]; ok {
				out.Changes[i] = c
				continue
			}
			index[k] = len(out.Changes)
			out.Changes = append(out.Changes, c)
		}
	}
	if base != nil {
		add(base.Changes)
	}
	add(next.Changes)
	return out
}

// newBackoff is the retry schedule shared by the targets: ±20% jitter, so
// that replicas whose target failed together do not retry together.
func newBackoff(lo, hi time.Duration) backoff.Policy {
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	return backoff.Policy{Base: lo, Max: hi, Jitter: 0.2}
}

// deliver is the sender loop: it takes the pending set, sends it until
// send succeeds, merging what piles up between attempts, and returns when
// ctx ends.
func deliver(ctx context.Context, q *queue, b backoff.Policy, log *slog.Logger, target string,
	send func(context.Context, reconcile.ChangeSet) error, observe func(reconcile.ChangeSet, error)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
		}
		cs, ok := q.take()
		if !ok {
			continue
		}
		for attempt := 1; ; attempt++ {
			err := send(ctx, cs)
			if ctx.Err() != nil {
				return nil
			}
			if observe != nil {
				observe(cs, err)
			}
			if err == nil {
				log.DebugContext(ctx, "notified", slog.String("target", target), slog.Int("changes", len(cs.Changes)),
					slog.String("cursor", cs.Cursor), slog.Int("attempt", attempt))
				break
			}
			delay := b.Delay(attempt)
			log.WarnContext(ctx, "notify failed, will retry", slog.String("target", target), slog.Int("attempt", attempt),
				slog.Duration("retry_in", delay), slog.String("error", err.Error()))
			if !backoff.Wait(ctx, delay) {
				return nil
			}
			if more, ok := q.take(); ok {
				cs = *merge(&cs, more)
			}
		}
	}
}

// payload is the JSON body of a change set; changes is never null.
func payload(cs reconcile.ChangeSet) reconcile.ChangeSet {
	if cs.Changes == nil {
		cs.Changes = []reconcile.Change{}
	}
	return cs
}
