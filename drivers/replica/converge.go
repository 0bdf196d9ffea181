package replica

import (
	"time"

	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Convergence, measured in production: how long a change takes from its
// commit to this replica serving it (reconciler_replica_convergence_seconds)
// and the replica's converged revision (reported in heartbeats). Both ends
// of every time are on the store's clock: a change's watermark time is the
// store's, and the moment a probe verified it is mapped onto the store's
// clock through the pair (store time, local time) of the read the change
// came from (reconcile.ChangeSet StoreAt, PolledAt), so a skew between this
// host's clock and the store's does not enter the figures.

// storeNowLocked is the store's clock now, as far as the last read tells
// (this host's clock before any read).
func (d *Driver) storeNowLocked() time.Time {
	if d.storeAt.IsZero() {
		return time.Now()
	}
	return d.storeAt.Add(time.Since(d.localAt))
}

// coverSlack is how much earlier than a change's watermark time a message
// still counts as telling the replica about it: the store's clock is mapped
// onto this host's through one read, off by that read's latency.
const coverSlack = 50 * time.Millisecond

// coverFromLocked is the earliest a message seen on the bus tells the
// replica about change c: Window before now (another sidecar may notice a
// change a poll interval earlier and publish), but never before the
// change's watermark time (its transaction's start, on the store's clock,
// mapped onto this host's): a message published before it made the
// replica re-read the row as it was. Two changes of one object a moment
// apart, the first told by its writer, the second written by SQL: the
// first's message covered the second, which then waited for a nudge
// again.
func (d *Driver) coverFromLocked(c reconcile.Change, now time.Time) time.Time {
	from := now.Add(-d.opts.Window)
	if c.At.IsZero() || d.storeAt.IsZero() {
		return from
	}
	if at := c.At.Add(d.localAt.Sub(d.storeAt)).Add(-coverSlack); at.After(from) {
		return at
	}
	return from
}

// settledLocked records that e's current change is served as far as
// anyone can tell (Settled), once per generation: the store time of it and,
// for a change that reached in-sync, one observation of its convergence
// time. It reports whether e just settled.
func (d *Driver) settledLocked(e *entry) bool {
	if !e.status.State.Settled() || !e.settledAt.IsZero() {
		return false
	}
	e.settledAt = d.storeNowLocked()
	if e.status.State == registry.ReplicaInSync && !e.observed {
		e.observed = true
		if m := d.opts.Metrics; m != nil && !e.revAt.IsZero() {
			m.convergence.Observe(max(e.settledAt.Sub(e.revAt), 0).Seconds())
		}
	}
	if e.rev > d.goneRev && e.deleted {
		d.goneRev = e.rev
	}
	return true
}

// Converged returns the replica's converged revision: the highest revision
// such that every change up to it is served by the replica — in-sync, or
// published once where the replica does not show its state — and when (the
// store's clock) the last of those changes was served. applied is the
// highest revision the loop has applied (reconcile.Status.Revision), which
// is the answer when nothing is waiting on the replica. Entries the loop
// holds (their rows are invalid: nothing to serve) do not hold it back;
// entries waiting on the replica (pending, nudged, stale, unservable,
// would-publish) hold it just below their revision, deletions included
// until the replica is seen without them.
func (d *Driver) Converged(applied int64) (rev int64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rev = max(applied, d.told, d.goneRev)
	for _, e := range d.entries {
		if e.held || e.status.State.Settled() {
			continue
		}
		rev = min(rev, e.rev-1)
	}
	for _, e := range d.entries {
		if !e.settledAt.IsZero() && e.rev <= rev && e.settledAt.After(at) {
			at = e.settledAt
		}
	}
	if d.goneRev <= rev && d.lastGone.After(at) {
		at = d.lastGone
	}
	return max(rev, 0), at
}
