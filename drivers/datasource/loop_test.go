package datasource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestThroughTheLoop drives a real PostgreSQL datasource through the
// reconcile loop with rows only: a wrong password in the credential row
// holds it, fixing the row makes it ready, an inactive row closes its pool
// (connections counted on the server), and the password never shows in
// the debug log.
func TestThroughTheLoop(t *testing.T) {
	f := setupPG(t)
	store, url := snapshottest.NewSQLite(t)
	snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('crm-db', 'not-the-password')`)
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('ds-crm', 'datasource', 'crm', $1)`,
		`{"name":"crm","driver":"postgres","config":`+fields(f.cluster.Port(), "dsdb")+`,"pool":{"minConns":2},"external":{"credentialsRef":"crm-db"},"active":true}`)

	rec := reconcile.New(store, reconcile.Options{PollInterval: 20 * time.Millisecond, ResyncInterval: -1, Logger: f.log,
		Materializers: map[registry.Kind]reconcile.Materializer{registry.KindDatasource: f.m}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-rec.Synced()

	entry := func() registry.Entry { e, _ := rec.Registries().Get(registry.KindDatasource, "crm"); return e }
	if e := entry(); e.State != registry.StateHeld || !strings.Contains(e.Reason, "28P01") {
		t.Fatalf("wrong password: %s %q, want held naming 28P01", e.State, e.Reason)
	}
	sessions := func() int {
		var n int
		conn, err := pgx.Connect(context.Background(), f.cluster.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE usename = 'ds_user'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	snapshottest.Exec(t, url, `UPDATE sys_connector_credential SET value = $1 WHERE ref = 'crm-db'`, canary)
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "ready after the credential row is fixed",
		func() bool { return entry().State == registry.StateReady })
	pool, ok := rec.Instance(registry.KindDatasource, "crm")
	if !ok {
		t.Fatal("no live pool")
	}
	var one int
	if err := pool.(*datasource.Pool).PG().QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query through the pool: %v", err)
	}
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "minConns sessions on the server",
		func() bool { return sessions() >= 2 })

	// The platform retires a datasource by setting its row's state.
	snapshottest.Exec(t, url, `UPDATE sys_metadata SET state = 'inactive' WHERE id = 'ds-crm'`)
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "evicted", func() bool {
		_, ok := rec.Registries().Get(registry.KindDatasource, "crm")
		return !ok
	})
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "pool closed on the server",
		func() bool { return sessions() == 0 })
	if strings.Contains(f.logs.String(), canary) {
		t.Fatal("the password appears in the debug log")
	}
	if !strings.Contains(f.logs.String(), `"key":"crm"`) {
		t.Fatalf("the loop logged nothing about crm:\n%s", f.logs.String())
	}
}
