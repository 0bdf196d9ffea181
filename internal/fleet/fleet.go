package fleet

import (
	"sort"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Row is one sidecar of the fleet: its heartbeat row and the ages, lag and
// flags derived from it.
type Row struct {
	snapshot.Heartbeat
	HeartbeatAgeSeconds float64 `json:"heartbeat_age_seconds"`
	BehindEntries       int64   `json:"behind_entries"`
	LagSeconds          float64 `json:"lag_seconds"`
	// ConvergedBehind is how many revisions the replica's converged
	// revision is behind the store's head revision, ConvergedLagSeconds
	// since when (the oldest change it does not serve), both on the
	// store's clock.
	ConvergedBehind     int64            `json:"converged_behind"`
	ConvergedLagSeconds float64          `json:"converged_lag_seconds"`
	States              map[string]int64 `json:"states"`
	// Stale: no heartbeat for 3 heartbeat intervals (and not stopped).
	Stale bool `json:"stale"`
	// Lagging: behind the head with a cursor older than 2 heartbeat
	// intervals (and not stopped).
	Lagging bool `json:"lagging"`
	// Duplicate: another live process wrote this replica id's heartbeat
	// within 3 heartbeat intervals (Clash names it): two sidecars share
	// the id and overwrite each other's row.
	Duplicate bool `json:"duplicate"`
	// Gone: stopped longer than GoneStopped ago, or silent for longer than
	// GoneSilent; Visible leaves it out.
	Gone bool `json:"gone"`
}

// View is the whole fleet, sorted by replica id.
type View struct {
	Head     snapshot.Watermark `json:"head"`
	Replicas []Row              `json:"replicas"`
	// Hidden counts the gone replicas Visible left out.
	Hidden int `json:"hidden,omitempty"`
}

// How long a replica stays listed after it stopped (its last heartbeat
// said so) or went silent without saying so (a crash, a deleted pod).
const (
	GoneStopped = time.Hour
	GoneSilent  = 24 * time.Hour
)

// Visible returns v without its gone replicas, counted in Hidden.
func (v View) Visible() View {
	out := View{Head: v.Head, Replicas: make([]Row, 0, len(v.Replicas)), Hidden: v.Hidden}
	for _, r := range v.Replicas {
		if r.Gone {
			out.Hidden++
			continue
		}
		out.Replicas = append(out.Replicas, r)
	}
	return out
}

// Build judges each heartbeat row against the store's head; beat is how
// often a replica writes its heartbeat (snapshot.HeartbeatInterval).
func Build(head snapshot.Watermark, reps []snapshot.Heartbeat, beat time.Duration, now time.Time) View {
	view := View{Head: head, Replicas: make([]Row, 0, len(reps))}
	for _, r := range reps {
		row := Row{Heartbeat: r, States: map[string]int64{}}
		row.HeartbeatAgeSeconds = max(now.Sub(r.HeartbeatAt), 0).Seconds()
		row.BehindEntries = max(head.Seq-r.CursorSeq, 0)
		row.ConvergedBehind = max(head.Revision-r.ConvergedRevision, 0)
		if row.ConvergedBehind > 0 && !r.UnservedSince.IsZero() {
			row.ConvergedLagSeconds = max(head.At.Sub(r.UnservedSince), 0).Seconds()
		}
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
		silent := now.Sub(r.HeartbeatAt)
		if !r.Stopped {
			row.Stale = silent > 3*beat
			row.Lagging = row.BehindEntries > 0 && row.LagSeconds > (2*beat).Seconds()
			row.Duplicate = r.Clash != "" && now.Sub(r.ClashAt) <= 3*beat
		}
		row.Gone = (r.Stopped && silent > GoneStopped) || silent > GoneSilent
		view.Replicas = append(view.Replicas, row)
	}
	sort.Slice(view.Replicas, func(i, j int) bool { return view.Replicas[i].ReplicaID < view.Replicas[j].ReplicaID })
	return view
}
