package snapshot

import "time"

// GuardRecord is one pending guarded eviction of a replica, as the store
// keeps it (sys_reconciler_guard): a sidecar restarted while it is pending
// still holds it.
type GuardRecord struct {
	ReplicaID string `json:"replica_id,omitempty"`
	Kind      string `json:"kind"`
	Key       string `json:"key"`
	// Revision is the last revision the entry served.
	Revision int64  `json:"revision"`
	Reason   string `json:"reason,omitempty"`
	// After is the id of the newest release when the store recorded it:
	// a release with a higher id covers it.
	After     int64     `json:"after_release"`
	GuardedAt time.Time `json:"guarded_at"`
}

// StampedAt is GuardedAt, or now for a record that has none yet.
func (r GuardRecord) StampedAt() time.Time {
	if r.GuardedAt.IsZero() {
		return time.Now()
	}
	return r.GuardedAt
}

// GuardRelease is one release of the fleet's guarded evictions
// (sys_reconciler_guard_release): every sidecar applies the evictions it
// guarded before it.
type GuardRelease struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}
