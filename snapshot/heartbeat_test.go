package snapshot_test

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The heartbeat is a keepalive: every 5 polls, not more often than every
// 30s.
func TestHeartbeatInterval(t *testing.T) {
	t.Parallel()
	for poll, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: 30 * time.Second,
		time.Second:            30 * time.Second,
		10 * time.Second:       50 * time.Second,
	} {
		if got := snapshot.HeartbeatInterval(poll); got != want {
			t.Errorf("HeartbeatInterval(%v) = %v, want %v", poll, got, want)
		}
	}
}
