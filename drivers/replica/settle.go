package replica

import "time"

// How soon to look again after a message, and to nudge again, adapts to
// how long this replica takes to apply one. A fixed Settle made every lost
// message cost a whole second (the time a real 17.4 node may take to
// register an object), also beside a replica that applies a message in
// milliseconds. The Driver keeps a moving average of the time from its
// message to the probe that first saw the replica serve the change
// (tookLocked); after a message it looks again after half of it and nudges
// again once twice of it has passed with the replica still lacking the
// change, both within [minLook, Settle], and never sooner than the backoff
// of the attempt (doubling to MaxBackoff). It starts at Settle, so until a
// replica has been seen to apply messages faster it is treated as before;
// each in-sync seen at the early look halves the estimate.

// minLook bounds the first look after a message from below (and twice it
// the nudge again): a probe is a request to the replica, counted in
// replica.max_probes_per_second.
const minLook = 25 * time.Millisecond

// tookWeight is the weight of a new sample in the moving average.
const tookWeight = 0.3

// tookLocked is the replica's typical time to apply a message.
func (d *Driver) tookLocked() time.Duration {
	if d.took <= 0 {
		return d.opts.Settle
	}
	return d.took
}

// noteTookLocked records that the replica was seen serving a change sample
// after this Driver's message for it.
func (d *Driver) noteTookLocked(sample time.Duration) {
	if sample <= 0 {
		return
	}
	if d.took <= 0 {
		d.took = sample
		return
	}
	d.took = time.Duration(float64(d.took)*(1-tookWeight) + float64(sample)*tookWeight)
}

// lookAfter is how long after a message the replica is probed first.
func (d *Driver) lookAfter() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return min(max(d.tookLocked()/2, minLook), d.opts.Settle)
}

// nudgeAfter is how long after the attempts-th message the replica may
// lack the change before it is nudged again.
func (d *Driver) nudgeAfter(attempts int) time.Duration {
	d.mu.Lock()
	took := d.tookLocked()
	d.mu.Unlock()
	return max(min(max(2*took, 2*minLook), d.opts.Settle), d.bo.Delay(attempts)-d.bo.Base)
}

// lookAgain is when a replica still lacking the change since > 0 after the
// last message is probed next, before nudging it again at nudge: the wait
// doubles, and the last look is at nudge.
func lookAgain(now time.Time, since, nudge time.Duration) time.Time {
	return now.Add(min(max(since, minLook), nudge-since))
}
