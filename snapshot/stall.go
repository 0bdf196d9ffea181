package snapshot

import (
	"sync"
	"time"
)

// xmaxHistory remembers when past stall checks saw which snapshot xmax,
// so that a check knows which xids were already assigned minAge ago: only
// a transaction holding one of those can have been writing for minAge.
type xmaxHistory struct {
	mu      sync.Mutex
	samples []xmaxSample // oldest first
}

type xmaxSample struct {
	at   time.Time
	xmax string
}

// maxXmaxSamples bounds the history (a stall check runs every few polls).
const maxXmaxSamples = 64

// anyXid is above every xid: with minAge 0, every running writer counts.
const anyXid = "4611686018427387904"

// before returns the xmax seen by the newest check at least minAge before
// now ("0" when none is that old: nothing can be named yet).
func (h *xmaxHistory) before(now time.Time, minAge time.Duration) string {
	if minAge <= 0 {
		return anyXid
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	x := "0"
	for _, s := range h.samples {
		if s.at.After(now.Add(-minAge)) {
			break
		}
		x = s.xmax
	}
	return x
}

// record adds what a check saw.
func (h *xmaxHistory) record(at time.Time, xmax string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, xmaxSample{at, xmax})
	if len(h.samples) > maxXmaxSamples {
		h.samples = append(h.samples[:0], h.samples[len(h.samples)-maxXmaxSamples:]...)
	}
}
