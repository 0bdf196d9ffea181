package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// storeState is what validate must leave alone: the journal, the
// watermarks and every table of the reconciler's own.
func storeState(t *testing.T, url string) string {
	t.Helper()
	c := snapshottest.Connect(t, url)
	defer c.Close()
	var out []string
	for _, q := range []string{
		"SELECT count(*) FROM sys_reconcile_journal", "SELECT count(*) FROM sys_reconciler_revision",
		"SELECT count(*) FROM sys_metadata", "SELECT count(*) FROM sys_reconciler_guard",
		"SELECT count(*) FROM sys_reconciler_guard_release", "SELECT count(*) FROM sys_reconciler_credential_owner",
		"SELECT count(*) FROM sys_reconciler_replica",
	} {
		out = append(out, fmt.Sprint(c.Int(t, q)))
	}
	return strings.Join(out, ",")
}

// TestValidateHotCRM: on the public CRM's metadata, deleting account
// affects 20 entries: account evicted, the 19 that reference it rebuilt
// as dependents and held naming it; deleting 30 objects trips the guard.
// Nothing is written.
func TestValidateHotCRM(t *testing.T) {
	t.Parallel()
	eachCorpus(t, func(t *testing.T, s snapshot.Store, url string, items []corpus.Item) {
		before := storeState(t, url)
		ctx := context.Background()
		v, err := Validate(ctx, s, Options{}, []Proposed{{Row: snapshot.MetadataRow{Type: "object", Name: "account"}, Delete: true}})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Evicted) != 1 || v.Evicted[0].Key != "object/account" || len(v.Rebuilt) != 19 || len(v.Created) != 0 || v.Trips() {
			t.Fatalf("delete account: evicted %v, rebuilt %d, created %d, trips %v", v.Evicted, len(v.Rebuilt), len(v.Created), v.Trips())
		}
		for _, it := range v.Rebuilt {
			if !it.Dependent || it.State != registry.StateHeld || !strings.Contains(it.Reason, "object account") {
				t.Errorf("%s: %+v, want a dependent held naming account", it.Key, it)
			}
		}
		if len(v.Held) != 19 || len(v.Changes) != 20 {
			t.Fatalf("held %d, changes %d, want 19 and 20", len(v.Held), len(v.Changes))
		}

		// A new view of a missing object is created held; a changed
		// account rebuilds its dependents.
		body, _ := json.Marshal(map[string]any{"name": "x", "object": "nope"})
		v, err = Validate(ctx, s, Options{}, []Proposed{
			{Row: snapshot.MetadataRow{Type: "view", Name: "x", Metadata: body}},
			{Row: snapshot.MetadataRow{Type: "object", Name: "account", Metadata: items[0].Body}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Created) != 1 || v.Created[0].State != registry.StateHeld || !strings.Contains(v.Created[0].Reason, "nope") {
			t.Fatalf("new view: %+v", v.Created)
		}
		if len(v.Rebuilt) != 20 || dependentsOf(v.Rebuilt) != 19 {
			t.Fatalf("changed account: %d rebuilt, %d dependents", len(v.Rebuilt), dependentsOf(v.Rebuilt))
		}

		// Deleting 30 objects would trip the guard.
		var del []Proposed
		for _, it := range items {
			if it.Type == "object" && len(del) < 30 {
				del = append(del, Proposed{Row: snapshot.MetadataRow{Type: "object", Name: it.Name}, Delete: true})
			}
		}
		v, err = Validate(ctx, s, Options{}, del)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Trips() || len(v.Guarded) != 30 || len(v.Evicted) != 0 || !strings.Contains(v.Guard.Reason, "30 of 114 engine entries") {
			t.Fatalf("30 deletions: trips %v, guarded %d, evicted %d, reason %q", v.Trips(), len(v.Guarded), len(v.Evicted), v.Guard.Reason)
		}
		if after := storeState(t, url); after != before {
			t.Fatalf("validate wrote to the store: %s → %s", before, after)
		}
	})
}

func dependentsOf(items []ValidationItem) int {
	n := 0
	for _, it := range items {
		if it.Dependent {
			n++
		}
	}
	return n
}
