package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestGuardCLI: two daemons over one PostgreSQL store serve 32 objects;
// deleting 30 in one statement is guarded on both (every entry still
// there, marked, one WARN line each); `guard`, `status`, `items` and the
// store's view show it; `guard release --store.url` lets both apply it
// within a few polls; a later mass delete is guarded again and a local
// release (POST /v1/guard/release) releases one daemon only.
func TestGuardCLI(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	for i := 0; i < 32; i++ {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ($1, 'object', $2, 'active', '{"fields":{"a":{"type":"text"}}}')`,
			fmt.Sprintf("o%02d", i), fmt.Sprintf("gobj%02d", i))
	}
	dir := t.TempDir()
	start := func(id string) *proc {
		return startDaemon(t, daemonOpts{dir: dir, args: []string{"--store.url", url, "--replica_id", id, "--poll.interval", "200ms",
			"--hint.listen=false", "--drift.dir", filepath.Join(dir, "drift-"+id)}})
	}
	ds := []*proc{start("r1"), start("r2")}
	count := func(d *proc) (n, guarded int) {
		_, body := d.request("GET", "/v1/items?kind=engine")
		var items []struct {
			Guarded bool `json:"guarded"`
		}
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("items: %v", err)
		}
		for _, it := range items {
			if it.Guarded {
				guarded++
			}
		}
		return len(items), guarded
	}
	for _, d := range ds {
		eventually(t, 30*time.Second, "32 objects", func() bool { n, _ := count(d); return n == 32 })
	}
	snapshottest.Exec(t, url, `DELETE FROM sys_metadata WHERE name IN ('gobj00', 'gobj01')`)
	for _, d := range ds {
		eventually(t, 30*time.Second, "2 deletions applied", func() bool { n, _ := count(d); return n == 30 })
	}
	snapshottest.Exec(t, url, `DELETE FROM sys_metadata WHERE name LIKE 'gobj%'`)
	for _, d := range ds {
		eventually(t, 30*time.Second, "30 guarded", func() bool { _, g := count(d); return g == 30 })
	}
	// Several polls later, still all there.
	for _, d := range ds {
		p0 := passes(t, d)
		eventually(t, 30*time.Second, "5 more polls", func() bool { return passes(t, d) >= p0+5 })
		marks := strings.Count(d.out.String(), "eviction guard tripped")
		eventually(t, 30*time.Second, "the stored guard", func() bool {
			r := reconciler(t, dir, nil, "guard", "--store.url", url, "--json")
			return strings.Count(r.stdout, `"replica_id"`) == 60
		})
		if n, g := count(d); n != 30 || g != 30 || marks != 1 {
			t.Fatalf("after the mass delete: %d entries, %d guarded, %d WARN lines", n, g, marks)
		}
	}
	env := []string{}
	show := func(args ...string) result {
		r := reconciler(t, dir, env, append(args, "--addr", ds[0].addr)...)
		t.Logf("$ reconciler %s\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		return r
	}
	if r := show("guard"); r.code != 0 || !strings.Contains(r.stdout, "HOLDING 30 evictions") || !strings.Contains(r.stdout, "object/gobj31") {
		t.Fatalf("guard: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := show("status"); !strings.Contains(r.stdout, "HOLDING 30 evictions") {
		t.Fatalf("status:\n%s", r.stdout)
	}
	if r := show("items", "--kind", "engine"); !strings.Contains(r.stdout, "eviction guarded: 30 of 30 engine entries would go in one pass") {
		t.Fatalf("items:\n%s", r.stdout)
	}
	if r := show("drift"); r.code != 3 || !strings.Contains(r.stdout, "guarded evictions") || !strings.Contains(r.stdout, "object/gobj31") {
		t.Fatalf("drift with a guard pending: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := reconciler(t, dir, nil, "guard", "--store.url", url)
	t.Logf("$ reconciler guard --store.url …\n%s", r.stdout)
	if !strings.Contains(r.stdout, "60 guarded evictions pending on 2 replicas") {
		t.Fatalf("guard --store.url:\n%s%s", r.stdout, r.stderr)
	}
	var line string
	for _, l := range strings.Split(ds[0].out.String(), "\n") {
		if strings.Contains(l, "eviction guard tripped") {
			line = l
		}
	}
	t.Logf("WARN line: %s", line)
	if !strings.Contains(line, `"level":"WARN"`) {
		t.Fatalf("no WARN line: %q", line)
	}

	r = reconciler(t, dir, nil, "guard", "release", "--store.url", url)
	t.Logf("$ reconciler guard release --store.url …\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "release 1 recorded") {
		t.Fatalf("release: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, d := range ds {
		eventually(t, 30*time.Second, "the release applied", func() bool { n, _ := count(d); return n == 0 })
	}

	// A later mass delete is guarded again; a local release frees one
	// daemon only.
	for i := 0; i < 12; i++ {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ($1, 'object', $2, 'active', '{}')`,
			fmt.Sprintf("p%02d", i), fmt.Sprintf("pobj%02d", i))
	}
	for _, d := range ds {
		eventually(t, 30*time.Second, "12 objects", func() bool { n, _ := count(d); return n == 12 })
	}
	snapshottest.Exec(t, url, `TRUNCATE sys_metadata`)
	for _, d := range ds {
		eventually(t, 30*time.Second, "TRUNCATE guarded", func() bool { _, g := count(d); return g == 12 })
	}
	if r := show("guard", "release"); r.code != 0 || !strings.Contains(r.stdout, "this sidecar only") {
		t.Fatalf("local release: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	eventually(t, 30*time.Second, "the local release applied", func() bool { n, _ := count(ds[0]); return n == 0 })
	if n, g := count(ds[1]); n != 12 || g != 12 {
		t.Fatalf("the other daemon after a local release: %d entries, %d guarded", n, g)
	}
}

// passes is the daemon's pass count.
func passes(t *testing.T, d *proc) int64 {
	t.Helper()
	_, body := d.request("GET", "/v1/status")
	var st struct {
		Passes int64 `json:"passes"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status: %v", err)
	}
	return st.Passes
}
