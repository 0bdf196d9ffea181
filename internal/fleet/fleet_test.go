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
	reps := []snapshot.Heartbeat{
		{ReplicaID: "fresh", HeartbeatAt: now.Add(-2 * time.Second), CursorSeq: 100, CursorAt: now.Add(-2 * time.Second),
			Counts: map[string]int64{"engine/ready": 3, "connector/held": 1, "connector/ready": 2}},
		{ReplicaID: "stale", HeartbeatAt: now.Add(-time.Minute), CursorSeq: 100, CursorAt: now.Add(-time.Minute)},
		{ReplicaID: "lagging", HeartbeatAt: now.Add(-time.Second), CursorSeq: 90, CursorAt: now.Add(-30 * time.Second)},
		{ReplicaID: "behind-recent", HeartbeatAt: now.Add(-time.Second), CursorSeq: 99, CursorAt: now.Add(-3 * time.Second)},
		{ReplicaID: "gone", HeartbeatAt: now.Add(-2 * time.Hour), CursorSeq: 1, CursorAt: now.Add(-time.Hour), Stopped: true},
		{ReplicaID: "just-stopped", HeartbeatAt: now.Add(-time.Minute), CursorSeq: 100, Stopped: true},
		{ReplicaID: "silent", HeartbeatAt: now.Add(-25 * time.Hour), CursorSeq: 100},
		{ReplicaID: "shared", HeartbeatAt: now.Add(-time.Second), CursorSeq: 100, Clash: "h2 pid 7", ClashAt: now.Add(-10 * time.Second)},
		{ReplicaID: "shared-once", HeartbeatAt: now.Add(-time.Second), CursorSeq: 100, Clash: "h2 pid 7", ClashAt: now.Add(-time.Hour)},
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
		duplicate      bool
		gone           bool
	}{
		{"fresh", false, false, 0, false, false},
		{"stale", true, false, 0, false, false},
		{"lagging", false, true, 10, false, false},
		{"behind-recent", false, false, 1, false, false},
		{"gone", false, false, 99, false, true},
		{"just-stopped", false, false, 0, false, false},
		{"silent", true, false, 0, false, true},
		{"shared", false, false, 0, true, false},
		{"shared-once", false, false, 0, false, false},
	} {
		r := got[tc.id]
		if r.Stale != tc.stale || r.Lagging != tc.lagging || r.BehindEntries != tc.behind || r.Duplicate != tc.duplicate || r.Gone != tc.gone {
			t.Errorf("%s: stale %v lagging %v behind %d duplicate %v gone %v, want %v %v %d %v %v", tc.id, r.Stale, r.Lagging, r.BehindEntries,
				r.Duplicate, r.Gone, tc.stale, tc.lagging, tc.behind, tc.duplicate, tc.gone)
		}
	}
	vis := v.Visible()
	if vis.Hidden != 2 || len(vis.Replicas) != len(v.Replicas)-2 {
		t.Errorf("visible: %d rows, %d hidden", len(vis.Replicas), vis.Hidden)
	}
	for _, r := range vis.Replicas {
		if r.Gone {
			t.Errorf("visible lists gone %s", r.ReplicaID)
		}
	}
	if s := got["fresh"].States; s["ready"] != 5 || s["held"] != 1 {
		t.Errorf("states %v", s)
	}
	if v.Replicas[0].ReplicaID != "behind-recent" {
		t.Errorf("not sorted: %s first", v.Replicas[0].ReplicaID)
	}
}

// TestBuildConverged: each replica's converged revision beside the store's
// head revision, the lag in revisions and in seconds since the oldest
// change it does not serve (store's clock).
func TestBuildConverged(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	head := snapshot.Watermark{Seq: 10, At: now, Revision: 50, RevisionAt: now.Add(-time.Second)}
	reps := []snapshot.Heartbeat{
		{ReplicaID: "served", HeartbeatAt: now, ConvergedRevision: 50, ConvergedAt: now.Add(-time.Second), HeadRevision: 50},
		{ReplicaID: "behind", HeartbeatAt: now, ConvergedRevision: 47, HeadRevision: 50, UnservedSince: now.Add(-12 * time.Second)},
	}
	got := map[string]Row{}
	for _, r := range Build(head, reps, 5*time.Second, now).Replicas {
		got[r.ReplicaID] = r
	}
	if r := got["served"]; r.ConvergedBehind != 0 || r.ConvergedLagSeconds != 0 {
		t.Errorf("served: behind %d, %.0fs; want 0, 0", r.ConvergedBehind, r.ConvergedLagSeconds)
	}
	if r := got["behind"]; r.ConvergedBehind != 3 || r.ConvergedLagSeconds != 12 {
		t.Errorf("behind: behind %d, %.0fs; want 3, 12", r.ConvergedBehind, r.ConvergedLagSeconds)
	}
}
