package replica

import (
	"hash/fnv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/registry"
)

// Who goes first. Every sidecar of a fleet notices a change at about the
// same moment (a hint), and each would find its replica lacking it and
// publish: N messages for one change. The platform's lanes are fleet-wide
// (one message reaches every node), so one is enough. A random wait up to
// Jitter before the first check spread them, but made every change wait
// Jitter/2 on average beside every replica: 53 ms of a 55 ms commit →
// serving p50 in the lane bench (bench/lanes.md), against 0.2–0.6 ms for
// the platform's own push.
//
// Instead, the sidecars elect one publisher per entry without talking:
// each knows the origins it has seen publish on the bus (its peers) and
// ranks itself and them by a hash of (origin, entry) (rendezvous hashing).
// The first in rank checks at once; the others wait a random part of
// [Jitter/2, Jitter], by when the elected one's message has long reached
// the bus (a few milliseconds), so they see it and send nothing. An
// elected origin that did not publish in time (gone, a node that never
// publishes for rows written by SQL, or its message lost) is dropped from
// the peers once a waiting sidecar had to publish itself; its next message
// brings it back. A sidecar that has seen no peer publishes at once.
//
// Only origins of the same form as this sidecar's are candidates: with
// origins "reconciler:<replica id>" (the default) those starting with
// "reconciler:"; an origin without a colon takes every origin. The nodes
// publish too (for writes through their API), but never for rows written
// by SQL, the changes a sidecar exists for: a node elected for such an
// entry would make the fleet wait Jitter/2 … Jitter for it, again after
// each of its writes brought it back.

// maxPeers bounds the origins remembered (a fleet's sidecars and nodes;
// pods restarted with new names come and go).
const maxPeers = 1024

// peerHorizon forgets an origin not heard from for this long.
const peerHorizon = 7 * 24 * time.Hour

// notePeerLocked records a message of another origin.
func (d *Driver) notePeerLocked(origin string, now time.Time) {
	if i := strings.IndexByte(d.opts.Origin, ':'); i > 0 && !strings.HasPrefix(origin, d.opts.Origin[:i+1]) {
		return // not a sidecar of this fleet (a node)
	}
	if _, ok := d.peers[origin]; !ok && len(d.peers) >= maxPeers {
		d.prunePeersLocked(now)
		if len(d.peers) >= maxPeers {
			var oldest string
			for o, t := range d.peers {
				if oldest == "" || t.Before(d.peers[oldest]) {
					oldest = o
				}
			}
			delete(d.peers, oldest)
		}
	}
	d.peers[origin] = now
}

func (d *Driver) prunePeersLocked(now time.Time) {
	for o, t := range d.peers {
		if now.Sub(t) > peerHorizon {
			delete(d.peers, o)
		}
	}
}

// firstWaitLocked is the wait before an entry's first check of a change,
// and the peer it defers to ("" when this sidecar goes first).
func (d *Driver) firstWaitLocked(ref registry.Ref) (time.Duration, string) {
	if len(d.peers) == 0 {
		return 0, ""
	}
	best, top := d.opts.Origin, rank(d.opts.Origin, ref)
	for o := range d.peers {
		if s := rank(o, ref); s > top || (s == top && o < best) {
			best, top = o, s
		}
	}
	if best == d.opts.Origin {
		return 0, ""
	}
	// Uniform in [Jitter/2, Jitter].
	return backoff.Jitter(d.opts.Jitter*3/4, 1.0/3), best
}

// missedLocked records that the peer an entry deferred to did not tell
// the replica in time: it is not deferred to again until it publishes.
func (d *Driver) missedLocked(peer string) {
	delete(d.peers, peer)
}

// rank is an origin's score for an entry: the highest goes first. Every
// sidecar computes the same scores (FNV-1a, then a 64-bit finalizer so
// that origins differing in their last byte spread).
func rank(origin string, ref registry.Ref) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(origin))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(ref.Kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(ref.Key))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
