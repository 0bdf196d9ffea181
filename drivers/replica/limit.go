package replica

import (
	"context"
	"sync"
	"time"
)

// limiter bounds the Driver's requests to its replica: at most n start in
// any one second, for the whole sidecar (Options.MaxProbesPerSecond), so
// that many pending entries, a replica coming back or a bus outage never
// turn into more than n requests a second against the node. Up to n may
// start at once: spacing every request by 1/n made the second GET of an
// object's probe wait 50 ms at the default 20, which was most of a
// change's commit → serving time beside a replica that applies a message
// in a millisecond (bench/lanes.md).
type limiter struct {
	window time.Duration

	mu     sync.Mutex
	starts []time.Time // ring: when the last n reserved requests start
	i      int         // the oldest of them
}

func newLimiter(perSecond int) *limiter {
	return &limiter{window: time.Second, starts: make([]time.Time, max(perSecond, 1))}
}

// wait blocks until a request may start or ctx ends (then it returns ctx's
// error). Callers are served in the order they reserve a slot.
func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	at := now
	if t := l.starts[l.i].Add(l.window); t.After(at) {
		at = t // the n-th request before this one started less than a second ago
	}
	l.starts[l.i] = at
	l.i = (l.i + 1) % len(l.starts)
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
