package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Store faults, on a private PostgreSQL cluster: the server stopped and
// started mid-run, the daemons' backends terminated, a long-open writing
// transaction (status names it; nobody else's changes wait for it), the
// journal pruned past a stopped daemon's cursor (it relists), and the
// store restored from an older copy (regression detected, relist).
func TestChaosStoreFaults(t *testing.T) {
	t.Parallel()
	c, url := privateStore(t)
	ctx := context.Background()
	space := loadSpace{objects: 12, credentials: 3, others: 12}
	space.seed(t, url)
	// The older copy the store is restored from at the end.
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store_backup TEMPLATE store"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "store")
	a := r.newDaemon("store-a", withApp(url, "chaos-store-a"))
	b := r.newDaemon("store-b", withApp(url, "chaos-store-b"), set("hint.listen", false))
	a.start()
	b.start()
	r.converge(url, a, b)
	r.searchStoreRows(url)
	rnd := rand.New(rand.NewPCG(3, 5))
	write := func(n int) { t.Helper(); writeObjects(t, url, rnd, space.objects, n) }
	storeDown := func(d *daemon) bool { s, err := d.status(); return err == nil && !s.StoreUp }

	// The server goes away and comes back.
	for i := 0; i < iterations(2, 6); i++ {
		c.Stop()
		eventually(t, "daemons see the store down", func() bool { return storeDown(a) && storeDown(b) })
		c.Start()
		write(3)
		r.faultConverged("PostgreSQL stopped and started", url, a, b)
	}

	// Every backend of the daemons is terminated (pool, listener).
	for i := 0; i < iterations(2, 8); i++ {
		n := queryInt(t, c.URL("postgres"), `SELECT count(pg_terminate_backend(pid)) FROM
  (SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'chaos-store-%' AND pid <> pg_backend_pid()) p`)
		t.Logf("terminated %d daemon backends", n)
		write(3)
		r.faultConverged("daemon backends terminated", url, a, b)
	}

	// A long-open writing transaction: the daemons keep applying everyone
	// else's changes, and /v1/status names it.
	for i := 0; i < iterations(1, 3); i++ {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, upsertMetadata, fmt.Sprintf("view:held%d", i), "view", fmt.Sprintf("held%d", i), `{"object":"o1"}`); err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		results.fault("long-open writing transaction")
		write(2)
		r.converge(url, a, b) // others' changes are not held back
		for _, d := range []*daemon{a, b} {
			eventually(t, d.id+" status names the open transaction", func() bool {
				s, err := d.status()
				return err == nil && slices.ContainsFunc(s.Stall.Blockers, func(b struct {
					PID int `json:"pid"`
				}) bool {
					return b.PID == pid
				})
			})
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close(ctx)
		results.wrote(1)
		results.converged("long-open writing transaction", r.converge(url, a, b))
	}

	// The journal is pruned past a stopped daemon's cursor: it relists.
	st, err := snapshot.Open(url, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < iterations(1, 3); i++ {
		before, _ := b.metric("reconciler_passes_total", `trigger="expired"`)
		b.signal(syscall.SIGSTOP)
		write(4)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := st.Prune(pctx, 0)
		cancel()
		if err != nil || n == 0 {
			t.Fatalf("prune: %d entries, %v", n, err)
		}
		b.signal(syscall.SIGCONT)
		r.faultConverged("journal pruned past a stopped daemon's cursor", url, a, b)
		after, err := b.metric("reconciler_passes_total", `trigger="expired"`)
		if err != nil || after <= before {
			t.Errorf("no expired-cursor relist on %s: passes %v → %v (%v)", b.id, before, after, err)
		}
	}

	// The store is restored from the older copy under the running daemons.
	write(5)
	r.converge(url, a, b)
	st.Close()
	regBefore := map[*daemon]float64{}
	for _, d := range []*daemon{a, b} {
		regBefore[d], _ = d.metric("reconciler_passes_total", `trigger="regressed"`)
	}
	if err := testdb.Exec(ctx, c.URL("postgres"), "DROP DATABASE store WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if err := testdb.Exec(ctx, c.URL("postgres"), "CREATE DATABASE store TEMPLATE store_backup"); err != nil {
		t.Fatal(err)
	}
	r.faultConverged("store restored from an older copy", url, a, b)
	for _, d := range []*daemon{a, b} {
		after, err := d.metric("reconciler_passes_total", `trigger="regressed"`)
		if err != nil || after <= regBefore[d] {
			t.Errorf("no regression relist on %s: passes %v → %v (%v)", d.id, regBefore[d], after, err)
		}
	}
}
