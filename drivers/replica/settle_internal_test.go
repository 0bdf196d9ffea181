package replica

import (
	"testing"
	"time"
)

// TestNudgeTimingFollowsTheReplica: until a replica is seen applying
// messages, the Driver looks again and nudges again at Settle, as before;
// once it is seen serving changes soon after the message, both follow it
// down (not below minLook, twice it), and never below the backoff of a
// repeated nudge.
func TestNudgeTimingFollowsTheReplica(t *testing.T) {
	d, err := New(Options{URL: "http://127.0.0.1:1", Origin: "o", Settle: time.Second, MinBackoff: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.lookAfter(); got != 500*time.Millisecond {
		t.Fatalf("first look, nothing measured = %v, want Settle/2", got)
	}
	if got := d.nudgeAfter(1); got != time.Second {
		t.Fatalf("nudge again, nothing measured = %v, want Settle", got)
	}
	for range 30 {
		d.mu.Lock()
		d.noteTookLocked(3 * time.Millisecond)
		d.mu.Unlock()
	}
	if got := d.lookAfter(); got != minLook {
		t.Fatalf("first look beside a fast replica = %v, want %v", got, minLook)
	}
	if got := d.nudgeAfter(1); got > 150*time.Millisecond || got < 2*minLook {
		t.Fatalf("nudge again beside a fast replica = %v, want about 2×minLook", got)
	}
	if got := d.nudgeAfter(4); got < time.Second {
		t.Fatalf("fourth nudge = %v, want at least the backoff (doubling from 500ms)", got)
	}
	// A slow replica brings it back up, never past Settle.
	for range 30 {
		d.mu.Lock()
		d.noteTookLocked(5 * time.Second)
		d.mu.Unlock()
	}
	if got := d.nudgeAfter(1); got != time.Second {
		t.Fatalf("nudge again beside a slow replica = %v, want Settle", got)
	}
	now := time.Now()
	if got := lookAgain(now, 10*time.Millisecond, 200*time.Millisecond).Sub(now); got != minLook {
		t.Fatalf("look again 10ms after = %v, want %v", got, minLook)
	}
	if got := lookAgain(now, 150*time.Millisecond, 200*time.Millisecond).Sub(now); got != 50*time.Millisecond {
		t.Fatalf("look again 150ms after, nudge at 200ms = %v, want the nudge's moment", got)
	}
}
