package replica

import (
	"context"
	"sync"
	"time"
)

// limiter spaces the Driver's probes of its replica: at most one per
// interval, for the whole sidecar (Options.MaxProbesPerSecond), so that
// many pending entries, a replica coming back or a bus outage never turn
// into a burst of requests against the node.
type limiter struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time // the earliest moment the next probe may start
}

func newLimiter(perSecond int) *limiter {
	return &limiter{interval: time.Second / time.Duration(max(perSecond, 1))}
}

// wait blocks until a probe may start or ctx ends (then it returns ctx's
// error). Callers are served in the order they reserve a slot.
func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
