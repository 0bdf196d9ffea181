package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/corpus"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestValidateCLI: `reconciler validate` on the HotCRM corpus. Deleting
// account prints 20 entries affected (1 evicted, 19 held dependents) and
// their lane messages, exits 3, and leaves the store as it was; a harmless
// proposal exits 0; a malformed file exits 1 naming the problem.
func TestValidateCLI(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewSQLiteURL(t)
	items, err := corpus.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		snapshottest.Exec(t, url, corpus.Insert, it.Row()...)
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	journal := func() int64 {
		c := snapshottest.Connect(t, url)
		defer c.Close()
		return c.Int(t, "SELECT count(*) FROM sys_reconcile_journal") + c.Int(t, "SELECT count(*) FROM sys_metadata")
	}
	before := journal()
	del := file("del.json", `[{"type": "object", "name": "account", "delete": true}]`)
	r := reconciler(t, dir, nil, "validate", del, "--store.url", url)
	t.Logf("$ reconciler validate del.json\n%s", r.stdout)
	if r.code != 3 || !strings.Contains(r.stdout, "1 proposed rows: 0 created, 19 rebuilt (19 dependents), 1 evicted, 19 held, 20 lane messages") ||
		!strings.Contains(r.stdout, `"name":"account","state":"deleted"`) || !strings.Contains(r.stdout, "view/all_accounts") {
		t.Fatalf("validate delete account: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = reconciler(t, dir, nil, "validate", del, "--store.url", url, "--json")
	var rep struct {
		Evicted []struct{ Key string }     `json:"evicted"`
		Held    []struct{ Key string }     `json:"held"`
		Lanes   []struct{ Channel string } `json:"lanes"`
		Verdict string                     `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 3 || len(rep.Evicted) != 1 || len(rep.Held) != 19 || len(rep.Lanes) != 20 || rep.Verdict != "attention" {
		t.Fatalf("--json: exit %d, %v: %+v", r.code, err, rep)
	}
	ok := file("ok.json", `[{"type": "view", "name": "more_accounts", "metadata": {"name": "more_accounts", "object": "account"}}]`)
	if r := reconciler(t, dir, nil, "validate", ok, "--store.url", url); r.code != 0 || !strings.Contains(r.stdout, "1 created") {
		t.Fatalf("harmless proposal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := file("bad.json", `{"type": "object"}`)
	if r := reconciler(t, dir, nil, "validate", bad, "--store.url", url); r.code != 1 || !strings.Contains(r.stderr, "want a JSON array") {
		t.Fatalf("malformed file: exit %d\n%s", r.code, r.stderr)
	}
	if after := journal(); after != before {
		t.Fatalf("validate wrote to the store: %d → %d journal entries and rows", before, after)
	}
}
