package fleet

import (
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

func TestBuild(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	beat := 5 * time.Second // stale after 15s; lagging after 10s behind
	head := snapshot.Watermark{Seq: 100, At: now}
	reps := []snapshot.Replica{
		{ReplicaID: "fresh", HeartbeatAt: now.Add(-2 * time.Second), CursorSeq: 100, CursorAt: now.Add(-2 * time.Second),
			Counts: map[string]int64{"engine/ready": 3, "connector/held": 1, "connector/ready": 2}},
		{ReplicaID: "stale", HeartbeatAt: now.Add(-time.Minute), CursorSeq: 100, CursorAt: now.Add(-time.Minute)},
		{ReplicaID: "lagging", HeartbeatAt: now.Add(-time.Second), CursorSeq: 90, CursorAt: now.Add(-30 * time.Second)},
		{ReplicaID: "behind-recent", HeartbeatAt: now.Add(-time.Second), CursorSeq: 99, CursorAt: now.Add(-3 * time.Second)},
		{ReplicaID: "gone", HeartbeatAt: now.Add(-time.Hour), CursorSeq: 1, CursorAt: now.Add(-time.Hour), Stopped: true},
	}
	v := Build(head, reps, beat, now)
	got := map[string]Row{}
	for _, r := range v.Replicas {
		got[r.ReplicaID] = r
	}
	for _, tc := range []struct {
		id             string
		stale, lagging bool
		behind         int64
	}{
		{"fresh", false, false, 0},
		{"stale", true, false, 0},
		{"lagging", false, true, 10},
		{"behind-recent", false, false, 1},
		{"gone", false, false, 99},
	} {
		r := got[tc.id]
		if r.Stale != tc.stale || r.Lagging != tc.lagging || r.BehindEntries != tc.behind {
			t.Errorf("%s: stale %v lagging %v behind %d, want %v %v %d", tc.id, r.Stale, r.Lagging, r.BehindEntries, tc.stale, tc.lagging, tc.behind)
		}
	}
	if s := got["fresh"].States; s["ready"] != 5 || s["held"] != 1 {
		t.Errorf("states %v", s)
	}
	if v.Replicas[0].ReplicaID != "behind-recent" {
		t.Errorf("not sorted: %s first", v.Replicas[0].ReplicaID)
	}
}
