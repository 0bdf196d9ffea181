package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// Two live daemons sharing one replica id each warn in status, fleet flags
// the id DUPLICATE, and fleet leaves out a replica stopped long ago unless
// --all.
func TestDuplicateReplicaIDAndGoneReplicas(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	dir := t.TempDir()
	snapshottest.Exec(t, url, `INSERT INTO sys_reconciler_replica (replica_id, host, pid, heartbeat_at, stopped)
VALUES ('old', 'gone-host', 1, now() - interval '2 hours', true)`)
	start := func() *proc {
		return startDaemon(t, daemonOpts{dir: dir, args: []string{"--store.url", url, "--replica_id", "vm",
			"--poll.interval", "200ms", "--hint.listen=false"}})
	}
	a, b := start(), start()
	// A pass with changes writes a heartbeat at once: each row change makes
	// both write, and each then sees the other's row.
	n := 0
	warned := func(d *proc) bool {
		code, body := d.request("GET", "/v1/status")
		var st statusapi.StatusBody
		if code != 200 || json.Unmarshal(body, &st) != nil {
			t.Fatalf("status: %d %s", code, body)
		}
		return len(st.Warnings) == 1 && strings.Contains(st.Warnings[0], "replica id in use by another live process")
	}
	eventually(t, 60*time.Second, "both warn of the shared replica id", func() bool {
		n++
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'view', $1, '{}')`, fmt.Sprintf("v%d", n))
		return warned(a) && warned(b)
	})
	if r := reconciler(t, dir, nil, "status", "--addr", a.addr); r.code != 0 || !strings.Contains(r.stdout, "WARNING") || !strings.Contains(r.stdout, "own replica_id") {
		t.Fatalf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := reconciler(t, dir, nil, "fleet", "--store.url", url)
	if r.code != 0 || !strings.Contains(r.stdout, "DUPLICATE") || strings.Contains(r.stdout, "gone-host") ||
		!strings.Contains(r.stdout, "1 replicas stopped over 1h0m0s ago") {
		t.Fatalf("fleet: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := reconciler(t, dir, nil, "fleet", "--store.url", url, "--all"); r.code != 0 || !strings.Contains(r.stdout, "gone-host") {
		t.Fatalf("fleet --all: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = reconciler(t, dir, nil, "fleet", "--store.url", url, "--json")
	var fv fleet.View
	if err := json.Unmarshal([]byte(r.stdout), &fv); err != nil || len(fv.Replicas) != 1 || fv.Hidden != 1 || !fv.Replicas[0].Duplicate {
		t.Fatalf("fleet --json: %v\n%s", err, r.stdout)
	}
}
