package replica

import (
	"math/rand/v2"
	"time"
)

// backoff is the nudge schedule: min doubling to max, with up to 20%
// jitter so that sidecars that fell behind together spread out.
type backoff struct{ min, max time.Duration }

// after returns the wait before try attempt+1 (attempt ≥ 1).
func (b backoff) after(attempt int) time.Duration {
	d := b.min
	for i := 1; i < attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// spread returns a random wait in [0, d).
func spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}
