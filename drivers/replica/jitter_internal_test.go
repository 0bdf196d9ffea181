package replica

import (
	"testing"
	"time"
)

// A fleet whose changes are rare (hours apart) must still spread its
// sidecars' first publishes: with a hint every sidecar notices a change at
// the same moment, and without the wait each one probes, finds its replica
// lacking and publishes, N messages for one change instead of about one.
func TestQuietFleetStillSpreadsFirstPublishes(t *testing.T) {
	d, err := New(Options{URL: "http://127.0.0.1:1", Origin: "reconciler:a", Jitter: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	waits := func() bool {
		for range 50 {
			if d.jitterLocked(now) > 0 {
				return true
			}
		}
		return false
	}
	if waits() {
		t.Fatal("a sidecar that never saw another origin waits before publishing")
	}
	for _, quiet := range []time.Duration{time.Second, 11 * time.Minute, 6 * time.Hour} {
		d.peerSeen = now.Add(-quiet)
		if !waits() {
			t.Errorf("last message of another origin %s ago: the first publish is not spread", quiet)
		}
	}
}
