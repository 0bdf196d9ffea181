package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

func newElector(t *testing.T, origin string) *Driver {
	t.Helper()
	d, err := New(Options{URL: "http://127.0.0.1:1", Origin: origin, Jitter: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A sidecar that has seen no other origin publish goes at once.
func TestLoneSidecarGoesFirst(t *testing.T) {
	d := newElector(t, "reconciler:a")
	for i := range 100 {
		if w, peer := d.firstWaitLocked(registry.Ref{Kind: registry.KindEngine, Key: fmt.Sprintf("object/o%d", i)}); w != 0 || peer != "" {
			t.Fatalf("alone: waits %s for %q", w, peer)
		}
	}
}

// Sidecars that know each other elect exactly one first publisher per
// entry, the same one on every sidecar, however long ago the peers were
// last heard from (a fleet whose changes come hours apart must still send
// about one message per change); the others wait a part of [Jitter/2,
// Jitter], long enough to see its message.
func TestFleetElectsOneFirstPublisherPerEntry(t *testing.T) {
	origins := []string{"reconciler:a", "reconciler:b", "reconciler:c", "reconciler:d"}
	for _, quiet := range []time.Duration{time.Second, 11 * time.Minute, 6 * time.Hour} {
		now := time.Now()
		var ds []*Driver
		for _, o := range origins {
			d := newElector(t, o)
			for _, p := range origins {
				if p != o {
					d.notePeerLocked(p, now.Add(-quiet))
				}
			}
			ds = append(ds, d)
		}
		firsts := map[string]int{}
		for i := range 400 {
			ref := registry.Ref{Kind: registry.KindEngine, Key: fmt.Sprintf("object/o%d", i)}
			var first []string
			var chosen string
			for j, d := range ds {
				w, peer := d.firstWaitLocked(ref)
				switch {
				case w == 0 && peer == "":
					first = append(first, origins[j])
				case w < 50*time.Millisecond || w > 100*time.Millisecond:
					t.Fatalf("%s defers %s to %s: outside [Jitter/2, Jitter]", origins[j], w, peer)
				case chosen == "":
					chosen = peer
				case chosen != peer:
					t.Fatalf("%s: sidecars defer to different peers (%s, %s)", ref.Key, chosen, peer)
				}
			}
			if len(first) != 1 {
				t.Fatalf("%s (peers last heard %s ago): %d first publishers %v, want 1", ref.Key, quiet, len(first), first)
			}
			if chosen != "" && chosen != first[0] {
				t.Fatalf("%s: %s goes first, the others wait for %s", ref.Key, first[0], chosen)
			}
			firsts[first[0]]++
		}
		for _, o := range origins {
			if firsts[o] < 400/len(origins)/2 {
				t.Errorf("%s goes first for %d of 400 entries: the election is not spread (%v)", o, firsts[o], firsts)
			}
		}
	}
}

// A peer elected for an entry that did not tell the replica in time is
// not deferred to again until it publishes.
func TestMissedPeerIsNotDeferredTo(t *testing.T) {
	d := newElector(t, "reconciler:a")
	d.notePeerLocked("reconciler:gone", time.Now())
	var ref registry.Ref
	for i := 0; ; i++ {
		ref = registry.Ref{Kind: registry.KindEngine, Key: fmt.Sprintf("object/o%d", i)}
		if _, peer := d.firstWaitLocked(ref); peer == "reconciler:gone" {
			break
		}
	}
	d.missedLocked("reconciler:gone")
	if w, peer := d.firstWaitLocked(ref); w != 0 || peer != "" {
		t.Fatalf("after its miss: waits %s for %q", w, peer)
	}
	d.notePeerLocked("reconciler:gone", time.Now())
	if _, peer := d.firstWaitLocked(ref); peer != "reconciler:gone" {
		t.Fatal("a peer that publishes again is not elected again")
	}
}

// The remembered origins are bounded.
func TestPeersBounded(t *testing.T) {
	d := newElector(t, "reconciler:a")
	now := time.Now()
	for i := range maxPeers + 50 {
		d.notePeerLocked(fmt.Sprintf("reconciler:pod-%d", i), now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(d.peers) != maxPeers {
		t.Fatalf("%d peers remembered, want %d", len(d.peers), maxPeers)
	}
	if _, ok := d.peers["reconciler:pod-0"]; ok {
		t.Fatal("the oldest peer was kept")
	}
}

// The nodes' messages (for writes through their API) make no candidates:
// a node never publishes for rows written by SQL. An origin without a
// colon takes every origin.
func TestNodesAreNotElected(t *testing.T) {
	d := newElector(t, "reconciler:a")
	d.notePeerLocked("node-7f3a", time.Now())
	if len(d.peers) != 0 {
		t.Fatalf("a node's origin became a candidate: %v", d.peers)
	}
	e := newElector(t, "sidecar-a")
	e.notePeerLocked("sidecar-b", time.Now())
	if len(e.peers) != 1 {
		t.Fatalf("origin without a colon: peers %v", e.peers)
	}
}
