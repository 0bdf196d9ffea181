package replica

import (
	"math/rand/v2"
	"time"

	bo "github.com/objectstack-fleet/reconciler/internal/backoff"
)

// backoff is the nudge schedule: min doubling to max, ±20% jitter so that
// sidecars that fell behind together spread out.
type backoff struct{ min, max time.Duration }

// after returns the wait before try attempt+1 (attempt ≥ 1).
func (b backoff) after(attempt int) time.Duration {
	return bo.Policy{Base: b.min, Max: b.max, Jitter: 0.2}.Delay(attempt)
}

// spread returns a random wait in [0, d).
func spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}
