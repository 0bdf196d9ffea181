package datasource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/datasource"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// TestConnectionBudget: pools share datasource.max_total_conns. Rows each
// within the per-row cap (min = max = 50) open no more than the budget in
// all: the first reserves what is left of its min, the next gets less,
// one that cannot get a single connection is held naming the budget and
// told when connections come back; connections above a reservation are
// drawn only while free, so the server never sees more than the budget.
func TestConnectionBudget(t *testing.T) {
	f := setupPG(t)
	port := f.cluster.Port()
	ctx := context.Background()
	const total = 5
	m := datasource.New(datasource.Options{Logger: f.log, MaxTotalConns: total})
	open := func(key, pool string) (registry.Instance, error) {
		d := desired(record("postgres", fields(port, "dsdb"), pool, true), canary)
		d.Key = key
		return m.Materialize(ctx, d)
	}
	a, err := open("a", `{"min":3,"max":50}`)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := open("b", `{"minConns":50,"maxConns":50}`) // the review's row: 2 left for its min of 50
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := m.ConnsInUse(); n != total {
		t.Fatalf("connections reserved: %d, want the whole budget %d", n, total)
	}
	_, err = open("c", `{"min":0,"max":10}`)
	var fl *reconcile.Failure
	if !errors.As(err, &fl) || fl.Class != reconcile.ClassInvalid || fl.Until == nil ||
		fl.Reason != fmt.Sprintf("datasource crm: no connection left in the budget of %d shared by all datasources (datasource.max_total_conns)", total) {
		t.Fatalf("third pool: %v, want held naming the budget with a wake channel", err)
	}

	// Many concurrent queries on b: it gets its 2, never a sixth
	// connection on the server.
	pb := b.(*datasource.Pool).PG()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			c, err := pb.Acquire(ctx)
			if err == nil {
				_, _ = c.Exec(ctx, "SELECT pg_sleep(0.05)")
				c.Release()
			}
		})
	}
	wg.Wait()
	if n := f.sessions(t); n > total {
		t.Fatalf("the server saw %d sessions, above the budget of %d", n, total)
	}
	if st := pb.Stat(); st.MaxConns() != 50 {
		t.Fatalf("pool max = %d, want the row's 50 (drawn while free)", st.MaxConns())
	}

	// Closing a frees its 3: the held pool's channel closes and it opens.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fl.Until:
	default:
		t.Fatal("freeing connections did not close the held pool's channel")
	}
	c, err := open("c", `{"min":0,"max":10}`)
	if err != nil {
		t.Fatalf("third pool after a closed: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.ConnsInUse(); n != 0 {
		t.Fatalf("after every pool closed, %d connections still counted", n)
	}
}

// TestBudgetThroughTheLoop: three tenant rows asking min = max = 50 from a
// budget of 4 get 3 + 1 + held, the held one naming the budget; when a row
// goes, the held one opens with no change of its own row.
func TestBudgetThroughTheLoop(t *testing.T) {
	f := setupPG(t)
	store, url := snapshottest.NewSQLite(t)
	snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('db', $1)`, canary)
	for i, org := range []string{"evil", "evil", "evil"} {
		name := fmt.Sprintf("ds%d", i)
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, organization_id, metadata) VALUES ($1, 'datasource', $2, $3, $4)`,
			name, name, org, `{"name":"`+name+`","driver":"postgres","config":`+fields(f.cluster.Port(), "dsdb")+
				`,"pool":{"minConns":`+[]string{"3", "50", "0"}[i]+`,"maxConns":50},"external":{"credentialsRef":"db"},"active":true}`)
	}
	m := datasource.New(datasource.Options{Logger: f.log, MaxTotalConns: 4})
	rec := reconcile.New(store, reconcile.Options{PollInterval: 20 * time.Millisecond, ResyncInterval: -1, Logger: f.log,
		ApplyConcurrency: 1, Materializers: map[registry.Kind]reconcile.Materializer{registry.KindDatasource: m}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-rec.Synced()
	entry := func(key string) registry.Entry { e, _ := rec.Registries().Get(registry.KindDatasource, key); return e }
	var held string
	for _, key := range []string{"evil:ds0", "evil:ds1", "evil:ds2"} {
		if e := entry(key); e.State == registry.StateHeld {
			if held != "" || !strings.Contains(e.Reason, "no connection left in the budget of 4 shared by all datasources (datasource.max_total_conns)") {
				t.Fatalf("%s: held %q (already held: %q)", key, e.Reason, held)
			}
			held = key
		} else if e.State != registry.StateReady {
			t.Fatalf("%s: %s %q", key, e.State, e.Reason)
		}
	}
	if held == "" || m.ConnsInUse() != 4 {
		t.Fatalf("held %q, %d connections counted; want one held and the budget used", held, m.ConnsInUse())
	}
	gone := "ds0"
	if held == "evil:ds0" {
		gone = "ds1"
	}
	snapshottest.Exec(t, url, `DELETE FROM sys_metadata WHERE id = $1`, gone)
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "the held datasource opens once connections come back",
		func() bool { return entry(held).State == registry.StateReady })
	if n := f.sessions(t); n > 4 {
		t.Fatalf("the server saw %d sessions, above the budget", n)
	}
}
