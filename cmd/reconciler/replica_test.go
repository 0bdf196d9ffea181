package main

import (
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// A replica that refuses the sidecar's token shows it in the default
// items table and in status, drift lists the entry and exits 3; an object
// without a table is unservable, named in items and drift.
func TestReplicaFailuresShow(t *testing.T) {
	t.Parallel()
	rd, err := replicatest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	db := replicatest.NewDB()
	node, err := replicatest.Start(db, replicatest.Options{BusURL: rd.URL(), Token: "osk_right-token"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	url := snapshottest.NewSQLiteURL(t)
	body := `{"name":"task","label":"Task","fields":{"subject":{"type":"text"}}}`
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ('m1', 'object', 'task', 'active', $1)`, body)
	db.Put("object", "task", map[string]any{"name": "task", "label": "Task", "fields": map[string]any{"subject": map[string]any{"type": "text"}}})

	dir := t.TempDir()
	start := func(tok string) *proc {
		return startDaemon(t, daemonOpts{dir: dir, env: []string{"OS_TOKEN=" + tok}, args: []string{
			"--store.url", url, "--replica_id", "r-" + tok[4:9], "--poll.interval", "200ms",
			"--replica.url", node.URL(), "--replica.token_env", "OS_TOKEN", "--replica.bus.url", rd.URL()}})
	}
	wrong := start("osk_wrong-token")
	eventually(t, 30*time.Second, "the refusal in the items table", func() bool {
		r := reconciler(t, dir, nil, "items", "--addr", wrong.addr)
		return r.code == 0 && strings.Contains(r.stdout, "replica: probe /api/v1/data/task?limit=1: replica refused the credential: 401")
	})
	r := reconciler(t, dir, nil, "status", "--addr", wrong.addr)
	if r.code != 0 || !strings.Contains(r.stdout, "replica failing") || !strings.Contains(r.stdout, "refused the credential") {
		t.Fatalf("status: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = reconciler(t, dir, nil, "drift", "--addr", wrong.addr)
	if r.code != 3 || !strings.Contains(r.stdout, "replica does not serve (1)") || !strings.Contains(r.stdout, "object/task") {
		t.Fatalf("drift: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := reconciler(t, dir, nil, "drift", "--addr", wrong.addr, "--json"); r.code != 3 || !strings.Contains(r.stdout, `"lagging"`) {
		t.Fatalf("drift --json: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(wrong.out.String(), "osk_wrong-token") {
		t.Fatal("the replica token is in the log")
	}
	if n := strings.Count(wrong.out.String(), `"msg":"replica refused the credential`); n != 1 {
		t.Fatalf("%d log lines of the refusal, want 1:\n%s", n, wrong.out.String())
	}

	// The right token: registered, but the store has no table for it.
	right := start("osk_right-token")
	eventually(t, 30*time.Second, "task unservable", func() bool {
		r := reconciler(t, dir, nil, "items", "--addr", right.addr)
		return r.code == 0 && strings.Contains(r.stdout, "unservable") && strings.Contains(r.stdout, "replica: object task has no table")
	})
	r = reconciler(t, dir, nil, "drift", "--addr", right.addr)
	if r.code != 3 || !strings.Contains(r.stdout, "unservable") || !strings.Contains(r.stdout, "replica.repair: schema") {
		t.Fatalf("drift: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Given its table, it is in-sync and drift is clean (exit 0).
	snapshottest.Exec(t, url, `CREATE TABLE task (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, subject TEXT)`)
	eventually(t, 60*time.Second, "drift clean", func() bool {
		return reconciler(t, dir, nil, "drift", "--addr", right.addr).code == 0
	})
}
