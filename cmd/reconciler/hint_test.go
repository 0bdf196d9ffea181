package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// With hint.listen on PostgreSQL and poll.interval=1h, a committed change
// wakes the loop through NOTIFY alone.
func TestHintPostgres(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	d := startDaemon(t, daemonOpts{dir: t.TempDir(), args: []string{
		"--store.url", url, "--poll.interval", "1h", "--resync.interval", "0s", "--hint.listen=true", "--drift.dir", "./drift",
	}})
	eventually(t, 60*time.Second, "ready", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o1', 'object', 'account', '{"fields":{}}')`)
	took := eventually(t, 30*time.Second, "applied through the hint", func() bool {
		it, ok := d.item("engine", "object/account")
		return ok && it.State == "ready"
	})
	t.Logf("applied %s after the commit, by hint", took.Round(time.Millisecond))
	d.signal(syscall.SIGINT)
	if code := d.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// The embedded SQLite store is migrated by run itself; the daemon serves,
// writes a drift report on request and stops cleanly.
func TestSQLiteAutoMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--store.url", "sqlite://./store.db", "--drift.dir", "./drift"}})
	eventually(t, 60*time.Second, "ready", func() bool { code, _ := d.request("GET", "/readyz"); return code == 200 })
	if code, body := d.request("GET", "/v1/status"); code != 200 || !strings.Contains(string(body), `"synced": true`) {
		t.Fatalf("status %d %s", code, body)
	}
	d.signal(syscall.SIGTERM)
	if code := d.wait(60 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	r := reconciler(t, dir, nil, "fleet", "--store.url", "sqlite://./store.db")
	if r.code != 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("fleet: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
