package reconcile

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestCorpus loads the public CRM's metadata (platform shapes, references
// dangling as in real life): every item loads, the ones naming objects that
// do not exist are held naming them, and changing account rebuilds exactly
// the items that reference it.
func TestCorpus(t *testing.T) {
	t.Parallel()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		var account json.RawMessage
		for _, it := range items {
			snapshottest.Exec(t, url, corpus.Insert, it.Row()...)
			if it.Type == "object" && it.Name == "account" {
				account = it.Body
			}
		}
		var mu sync.Mutex
		var rebuilt []string
		b := start(t, s, url, Options{ResyncInterval: -1, OnPass: func(p PassResult) {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range p.Changes {
				if c.Action == ActionRebuild {
					rebuilt = append(rebuilt, c.Key)
				}
			}
		}})
		entries := b.rec.Registries().List(registry.KindEngine, "")
		if len(entries) != len(items) {
			t.Fatalf("%d engine entries, want %d", len(entries), len(items))
		}
		held := 0
		for _, e := range entries {
			switch e.State {
			case registry.StateReady:
			case registry.StateHeld:
				held++
				if !strings.HasPrefix(e.Reason, "references missing object ") {
					t.Errorf("%s held: %q", e.Key, e.Reason)
				}
			default:
				t.Errorf("%s: %s %q", e.Key, e.State, e.Reason)
			}
		}
		if held != 63 {
			t.Fatalf("%d items held, want the 63 with dangling references", held)
		}
		if e, _ := b.entry(registry.KindEngine, "hook/AccountHealthScoreTrigger"); e.Reason != "references missing object Account" {
			t.Fatalf("hook naming Account (not account): %q", e.Reason)
		}
		var body map[string]any
		if err := json.Unmarshal(account, &body); err != nil {
			t.Fatal(err)
		}
		body["label"] = "Account (renamed)"
		changed, _ := json.Marshal(body)
		b.exec(`UPDATE sys_metadata SET metadata = $1 WHERE id = 'object-account'`, string(changed))
		b.settle()
		mu.Lock()
		defer mu.Unlock()
		if len(rebuilt) != 20 {
			t.Fatalf("changing account rebuilt %d items, want 20 (account and the 19 that reference it): %v", len(rebuilt), rebuilt)
		}
	})
}

// eachCorpus runs f on each store kind with the HotCRM corpus (items)
// written to the store.
func eachCorpus(t *testing.T, f func(t *testing.T, s snapshot.Store, url string, items []corpus.Item)) {
	t.Helper()
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		for _, it := range items {
			snapshottest.Exec(t, url, corpus.Insert, it.Row()...)
		}
		f(t, s, url, items)
	})
}
