package bench

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestStartEach(t *testing.T) {
	var calls, running, peak atomic.Int64
	err := startEach(20, 3, func(i int) error {
		calls.Add(1)
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		defer running.Add(-1)
		if i == 7 {
			return errors.New("seven")
		}
		return nil
	})
	if err == nil || err.Error() != "seven" || calls.Load() != 20 || peak.Load() > 3 {
		t.Fatalf("startEach: %v, %d calls, %d at once", err, calls.Load(), peak.Load())
	}
	if err := startEach(0, 3, func(int) error { return errors.New("never") }); err != nil {
		t.Fatal(err)
	}
}
