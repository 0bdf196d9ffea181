package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// changeLog is a Notifier that keeps every change told.
type changeLog struct {
	mu      sync.Mutex
	changes []Change
}

func (l *changeLog) Notify(cs ChangeSet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, cs.Changes...)
}

// evicted returns the keys told as evicted so far.
func (l *changeLog) evicted() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for _, c := range l.changes {
		if c.Action == ActionEvict {
			out[c.Key] = true
		}
	}
	return out
}

// seedGuardObjects writes n objects gobj00… and a view of gobj31.
func seedGuardObjects(b *bundle, n int) {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("gobj%02d", i)
		b.exec(upsertMeta, "object-"+name, "object", name, "active", `{"fields":{"a":{"type":"text"}}}`)
	}
	b.exec(upsertMeta, "view-gview", "view", "gview", "active", fmt.Sprintf(`{"object":"gobj%02d"}`, n-1))
}

func guardStore(t *testing.T, s snapshot.Store) GuardStore {
	t.Helper()
	g, ok := s.(GuardStore)
	if !ok {
		t.Fatalf("%T is not a GuardStore", s)
	}
	return g
}

// TestGuard: deleting 2 of 32 objects applies; deleting the other 30 in
// one statement is guarded (the entries keep serving, marked, no eviction
// told, a dependent view untouched); a row that comes back clears its
// entry; a local release applies the rest, and the view is then held.
func TestGuard(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		log := &changeLog{}
		b := start(t, s, url, Options{ResyncInterval: -1, Notifier: log, ReplicaID: "g1", Guard: GuardOptions{Store: guardStore(t, s)}})
		seedGuardObjects(b, 32)
		b.settle()
		b.exec(`DELETE FROM sys_metadata WHERE name IN ('gobj00', 'gobj01')`)
		b.settle()
		if _, ok := b.entry(registry.KindEngine, "object/gobj00"); ok {
			t.Fatal("deleting 2 of 32 objects: gobj00 not evicted")
		}
		b.exec(`DELETE FROM sys_metadata WHERE name LIKE 'gobj%'`)
		b.settle()
		b.settle() // a relist-free second pass changes nothing
		for i := 2; i < 32; i++ {
			key := fmt.Sprintf("object/gobj%02d", i)
			e, ok := b.entry(registry.KindEngine, key)
			if !ok || e.Instance == nil || e.State != registry.StateReady || !e.Guarded {
				t.Fatalf("%s after the mass delete: %+v (present %v), want ready, serving, guarded", key, e, ok)
			}
			if !strings.Contains(e.Reason, "eviction guard") || !strings.Contains(e.Reason, "guard.max_evictions 20%") {
				t.Fatalf("%s reason %q", key, e.Reason)
			}
			if log.evicted()[key] {
				t.Fatalf("%s told as evicted", key)
			}
		}
		if st := b.state(registry.KindEngine, "view/gview"); st != registry.StateReady {
			t.Fatalf("view of a guarded object: %s, want ready", st)
		}
		g := b.rec.Guard()
		if g.Held != 30 || g.Kinds[registry.KindEngine] != 30 || len(g.Keys) != 30 || g.Since.IsZero() || g.Unsaved {
			t.Fatalf("guard status %+v", g)
		}
		if got := b.rec.Status().Guard.Held; got != 30 {
			t.Fatalf("status guard held %d", got)
		}
		stored, err := guardStore(t, s).LoadGuard(context.Background(), "g1")
		if err != nil || len(stored) != 30 {
			t.Fatalf("stored guard: %d records, %v", len(stored), err)
		}

		// A row that comes back clears its entry's guard.
		b.exec(upsertMeta, "object-gobj05", "object", "gobj05", "active", `{"fields":{"a":{"type":"text"}}}`)
		b.settle()
		if e, _ := b.entry(registry.KindEngine, "object/gobj05"); e.Guarded || e.Reason != "" || e.State != registry.StateReady {
			t.Fatalf("gobj05 back: %+v", e)
		}
		if g := b.rec.Guard(); g.Held != 29 {
			t.Fatalf("held %d after one row came back, want 29", g.Held)
		}

		b.rec.ReleaseGuard()
		b.waitFor("the local release", func() bool { return b.rec.Guard().Held == 0 })
		b.settle()
		for i := 2; i < 32; i++ {
			key := fmt.Sprintf("object/gobj%02d", i)
			_, ok := b.entry(registry.KindEngine, key)
			if i == 5 {
				if !ok {
					t.Fatal("gobj05 (its row is back) evicted by the release")
				}
				continue
			}
			if ok || !log.evicted()[key] {
				t.Fatalf("%s after the release: present %v, told %v", key, ok, log.evicted()[key])
			}
		}
		if e, _ := b.entry(registry.KindEngine, "view/gview"); e.State != registry.StateHeld || !strings.Contains(e.Reason, "gobj31") {
			t.Fatalf("view after the release: %+v, want held naming gobj31", e)
		}
		if stored, _ := guardStore(t, s).LoadGuard(context.Background(), "g1"); len(stored) != 0 {
			t.Fatalf("stored guard after the release: %d records", len(stored))
		}
	})
}

// TestGuardWindow: evictions spread over several passes count together.
func TestGuardWindow(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		b := start(t, s, url, Options{ResyncInterval: -1})
		seedGuardObjects(b, 32)
		b.settle()
		for round, names := range [][]string{{"00", "01", "02", "03", "04", "05"}, {"06", "07", "08", "09", "10", "11"}} {
			for _, n := range names {
				b.exec(`DELETE FROM sys_metadata WHERE name = $1`, "gobj"+n)
				b.settle()
			}
			_, there := b.entry(registry.KindEngine, "object/gobj"+names[len(names)-1])
			if round == 0 && there {
				t.Fatal("6 deletions in the window: not applied")
			}
		}
		// 12 of 33 within the window: the 11th and 12th are guarded.
		if g := b.rec.Guard(); g.Held != 2 {
			t.Fatalf("held %d, want 2 (%+v)", g.Held, g)
		}
		// While a guard is pending, a further eviction of the kind joins it.
		b.exec(`DELETE FROM sys_metadata WHERE name = 'gobj20'`)
		b.settle()
		if g := b.rec.Guard(); g.Held != 3 {
			t.Fatalf("held %d, want 3", g.Held)
		}
	})
}

// TestGuardOff: guard.max_evictions off applies a mass delete.
func TestGuardOff(t *testing.T) {
	t.Parallel()
	_, url := snapshottest.NewSQLite(t)
	s, _ := snapshot.Open(url, snapshot.OpenOptions{})
	defer s.Close()
	b := start(t, s, url, Options{ResyncInterval: -1, Guard: GuardOptions{Off: true}})
	seedGuardObjects(b, 32)
	b.settle()
	b.exec(`DELETE FROM sys_metadata`)
	b.settle()
	if n := b.rec.Registries().Len(registry.KindEngine); n != 0 {
		t.Fatalf("%d engine entries left with the guard off", n)
	}
}

// TestGuardRestartAndFleetRelease: a sidecar restarted while a guard is
// pending still holds it (nothing told evicted); a fleet release in the
// store applies it (the evictions are told, though this process never had
// the entries); a later mass delete is guarded again.
func TestGuardRestartAndFleetRelease(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		gs := guardStore(t, s)
		opts := func(l *changeLog) Options {
			return Options{ResyncInterval: -1, Notifier: l, ReplicaID: "r1", Guard: GuardOptions{Store: gs}}
		}
		log1 := &changeLog{}
		b := start(t, s, url, opts(log1))
		seedGuardObjects(b, 50)
		b.settle()
		b.exec(`DELETE FROM sys_metadata WHERE type = 'object' AND name < 'gobj30'`)
		b.settle()
		if g := b.rec.Guard(); g.Held != 30 || g.Unsaved {
			t.Fatalf("guard %+v", g)
		}
		b.stop()

		log2 := &changeLog{}
		b2 := start(t, s, url, opts(log2))
		if g := b2.rec.Guard(); g.Held != 30 {
			t.Fatalf("after a restart: held %d, want 30", g.Held)
		}
		b2.settle()
		if len(log2.evicted()) != 0 {
			t.Fatalf("restarted sidecar told evictions without a release: %v", log2.evicted())
		}
		rel, err := s.(interface {
			ReleaseGuard(context.Context, string) (snapshot.GuardRelease, error)
		}).ReleaseGuard(context.Background(), "test")
		if err != nil || rel.ID == 0 {
			t.Fatalf("release: %+v, %v", rel, err)
		}
		b2.waitFor("the fleet release", func() bool { return b2.rec.Guard().Held == 0 })
		if n := len(log2.evicted()); n != 30 {
			t.Fatalf("release told %d evictions, want 30", n)
		}
		// A later mass delete is not covered by the earlier release.
		b2.exec(`DELETE FROM sys_metadata WHERE type = 'object'`)
		b2.settle()
		b2.settle()
		if g := b2.rec.Guard(); g.Held != 20 {
			t.Fatalf("later mass delete: held %d, want 20", g.Held)
		}
	})
}

// TestGuardStoreIdentity: a relist of another store (new id) that would
// drop everything is guarded, naming the identity change.
func TestGuardStoreIdentity(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		b := start(t, s, url, Options{ResyncInterval: -1})
		seedGuardObjects(b, 32)
		b.settle()
		// One transaction: the next poll sees another store.
		b.exec(`BEGIN; UPDATE sys_reconciler_state SET store_id = 'another-store'; DELETE FROM sys_metadata; COMMIT`)
		deadline := time.Now().Add(30 * time.Second)
		for b.rec.Guard().Held == 0 && time.Now().Before(deadline) {
			b.settle()
		}
		g := b.rec.Guard()
		if g.Held != 33 || !strings.Contains(g.Reason, "store changed identity") {
			t.Fatalf("guard %+v", g)
		}
	})
}
