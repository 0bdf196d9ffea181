package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is Base doubling after every failure up to Max, each delay moved
// by a random amount within ±Jitter of itself (a fraction: 0.2 is ±20%).
type Policy struct {
	Base   time.Duration
	Max    time.Duration // below Base: Base
	Jitter float64       // 0 (none) to 1
}

// Delay returns the wait after failure number attempt (1 for the first).
func (p Policy) Delay(attempt int) time.Duration {
	d, limit := p.Base, max(p.Max, p.Base)
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return Jitter(min(d, limit), p.Jitter)
}

// Jitter returns d moved by a uniformly random amount within ±frac·d.
func Jitter(d time.Duration, frac float64) time.Duration {
	j := time.Duration(float64(d) * min(max(frac, 0), 1))
	if j <= 0 {
		return d
	}
	return d - j + time.Duration(rand.Int64N(int64(2*j)+1))
}

// Wait waits for d or until ctx ends, and reports whether d passed.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
