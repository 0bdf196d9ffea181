package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for attempt, want := range map[int]time.Duration{
		0: 100 * time.Millisecond, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 50: time.Second,
	} {
		if got := p.Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
	if got := (Policy{Base: time.Second, Max: time.Millisecond}).Delay(3); got != time.Second {
		t.Errorf("Max below Base: %s, want the base", got)
	}
}

func TestJitter(t *testing.T) {
	p := Policy{Base: time.Second, Max: 8 * time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := p.Delay(4) // 8s ± 20%
		if d < 6400*time.Millisecond || d > 9600*time.Millisecond {
			t.Fatalf("Delay(4) = %s, outside 8s ± 20%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct delays in 1000: not jittered", len(seen))
	}
	if d := Jitter(time.Second, 0); d != time.Second {
		t.Fatalf("no jitter: %s", d)
	}
	if d := Jitter(time.Second, 5); d < 0 || d > 2*time.Second {
		t.Fatalf("jitter above 1 is capped at ±100%%: %s", d)
	}
}

func TestWait(t *testing.T) {
	if !Wait(context.Background(), time.Millisecond) {
		t.Fatal("Wait did not report the delay passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Wait(ctx, time.Hour) {
		t.Fatal("Wait reported an hour passed after ctx ended")
	}
}
