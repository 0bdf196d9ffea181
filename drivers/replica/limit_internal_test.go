package replica

import (
	"context"
	"testing"
	"time"
)

// At most n requests start in any one second, and the first n go at once.
func TestLimiterAtMostNPerSecond(t *testing.T) {
	const n = 5
	l := newLimiter(n)
	ctx := context.Background()
	var starts []time.Time
	begin := time.Now()
	for range 3 * n {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, time.Now())
	}
	if burst := starts[n-1].Sub(begin); burst > 200*time.Millisecond {
		t.Fatalf("the first %d requests took %s: not at once", n, burst)
	}
	for i := n; i < len(starts); i++ {
		// (measured after each wait returns: a timer fires a little late)
		if gap := starts[i].Sub(starts[i-n]); gap < time.Second-20*time.Millisecond {
			t.Fatalf("requests %d and %d started %s apart: more than %d in a second", i-n, i, gap, n)
		}
	}
}
