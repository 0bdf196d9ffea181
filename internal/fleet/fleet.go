package fleet

import (
	"sort"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Row is one replica of the fleet.
type Row struct {
	snapshot.Replica
	HeartbeatAgeSeconds float64          `json:"heartbeat_age_seconds"`
	BehindEntries       int64            `json:"behind_entries"`
	LagSeconds          float64          `json:"lag_seconds"`
	States              map[string]int64 `json:"states"`
	// Stale: no heartbeat for 3 heartbeat intervals (and not stopped).
	Stale bool `json:"stale"`
	// Lagging: behind the head with a cursor older than 2 heartbeat
	// intervals (and not stopped).
	Lagging bool `json:"lagging"`
}

// View is the whole fleet, sorted by replica id.
type View struct {
	Head     snapshot.Watermark `json:"head"`
	Replicas []Row              `json:"replicas"`
}

// Build judges each heartbeat row against the store's head; beat is how
// often a replica writes its heartbeat (daemon.HeartbeatInterval).
func Build(head snapshot.Watermark, reps []snapshot.Replica, beat time.Duration, now time.Time) View {
	view := View{Head: head, Replicas: make([]Row, 0, len(reps))}
	for _, r := range reps {
		row := Row{Replica: r, States: map[string]int64{}}
		row.HeartbeatAgeSeconds = max(now.Sub(r.HeartbeatAt), 0).Seconds()
		row.BehindEntries = max(head.Seq-r.CursorSeq, 0)
		if row.BehindEntries > 0 && !r.CursorAt.IsZero() {
			row.LagSeconds = max(now.Sub(r.CursorAt), 0).Seconds()
		}
		for k, n := range r.Counts {
			_, state, ok := strings.Cut(k, "/")
			if !ok {
				state = k
			}
			row.States[state] += n
		}
		if !r.Stopped {
			row.Stale = now.Sub(r.HeartbeatAt) > 3*beat
			row.Lagging = row.BehindEntries > 0 && row.LagSeconds > (2*beat).Seconds()
		}
		view.Replicas = append(view.Replicas, row)
	}
	sort.Slice(view.Replicas, func(i, j int) bool { return view.Replicas[i].ReplicaID < view.Replicas[j].ReplicaID })
	return view
}
