package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// Lost hints: one daemon listens for hints with a slow poll (so hints
// matter for latency), one does not listen at all; the listener's backend
// is killed with pg_terminate_backend again and again, each time right
// before a write. Both converge after every write.
func TestChaosLostHints(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	r := newRig(t, "hints") // after the database: daemons stop before it is dropped
	space := loadSpace{objects: 10, credentials: 2, others: 10}
	space.seed(t, url)
	listen := r.newDaemon("hints-listen", withApp(url, "chaos-hints-1"), set("poll.interval", "1s"), set("poll.jitter", "0s"))
	deaf := r.newDaemon("hints-off", withApp(url, "chaos-hints-2"), set("hint.listen", false))
	listen.start()
	deaf.start()
	r.converge(url, listen, deaf)
	r.searchStoreRows(url)

	const listener = `SELECT pid FROM pg_stat_activity WHERE application_name = 'chaos-hints-1' AND query ILIKE 'LISTEN%' AND datname = current_database()`
	rnd := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < iterations(4, 20); i++ {
		var pid int64
		eventually(t, "hint listener connected", func() bool {
			pid = queryIntOr(t, url, listener, 0)
			return pid != 0
		})
		if queryInt(t, url, `SELECT CASE WHEN pg_terminate_backend($1::int) THEN 1 ELSE 0 END`, pid) != 1 {
			t.Fatalf("listener backend %d not terminated", pid)
		}
		results.fault("hint listener killed")
		snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("object:o%d", i%10), "object", fmt.Sprintf("o%d", i%10), objectBody(rnd))
		snapshottest.Exec(t, url, upsertCredential, "cred0", secretValue(i))
		results.wrote(2)
		results.converged("hint listener killed", r.converge(url, listen, deaf))
	}
	// NOTIFY off altogether: a write on a daemon that never listens.
	for i := 0; i < iterations(2, 10); i++ {
		snapshottest.Exec(t, url, upsertMetadata, fmt.Sprintf("view:x%d", i), "view", fmt.Sprintf("x%d", i), `{"object":"o1"}`)
		results.wrote(1)
		r.faultConverged("hints off (hint.listen=false)", url, deaf)
	}
}

// queryIntOr is queryInt returning def when the query finds no row.
func queryIntOr(t *testing.T, url, q string, def int64) int64 {
	t.Helper()
	var n int64 = def
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := openDB(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return def
	}
	return n
}

// Crashes: two daemons serve three datasources (pools of exactly one
// connection each) while writers change rows and the datasources' pool
// settings (so pools are rebuilt: build, validate, swap). A random daemon
// is killed with SIGKILL at a random point — often in the middle of a
// pass — and restarted. After each restart both converge, and the
// datasource connections counted on the server are exactly those the
// live daemons hold: none leaked.
func TestChaosCrash(t *testing.T) {
	t.Parallel()
	url := snapshottest.NewPostgresURL(t)
	dsURL := testdb.New(t)
	r := newRig(t, "crash")
	dsDB := queryString(t, dsURL, `SELECT current_database()`)
	space := loadSpace{objects: 20, credentials: 3, others: 30}
	space.seed(t, url)
	const nds = 3
	dsRow := func(i int, lifetime string) {
		name := fmt.Sprintf("ds%d", i)
		snapshottest.Exec(t, url, upsertDatasource, name, dsRecord(name, "postgres", fmt.Sprintf(`{"url":%q}`, withApp(dsURL, "chaos-ds")),
			fmt.Sprintf(`{"maxConns":1,"minConns":1,"maxConnLifetime":%q}`, lifetime), `{"credentialsRef":"cred0"}`))
	}
	for i := 0; i < nds; i++ {
		dsRow(i, "1h")
	}
	ds := []*daemon{
		r.newDaemon("crash-a", withApp(url, "chaos-crash-a"), set("apply.concurrency", 1)),
		r.newDaemon("crash-b", withApp(url, "chaos-crash-b"), set("hint.listen", false)),
	}
	for _, d := range ds {
		d.start()
	}
	r.converge(url, ds...)
	r.searchStoreRows(url)
	connections := func() int64 {
		return queryInt(t, url, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'chaos-ds'`, dsDB)
	}
	checkLeaks := func() {
		t.Helper()
		want := int64(nds * len(ds))
		var got int64
		ok := false
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(convergeWithin)
		for time.Now().Before(deadline) {
			if got = connections(); got == want {
				ok = true
				break
			}
			<-tick.C
		}
		if !ok {
			results.with(func(f *figures) { f.leaked += int(max(got-want, 0)) })
			t.Fatalf("datasource connections on the server: %d, live daemons hold %d", got, want)
		}
	}
	checkLeaks()

	rnd := rand.New(rand.NewPCG(11, 13))
	p := pool(t, url)
	for i := 0; i < iterations(4, 16); i++ {
		// Writers keep the daemons busy; pool settings change so that
		// pools are rebuilt while the kill lands.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan [2]int64, 1)
		go func() {
			c, rb := space.writers(ctx, p, 2, uint64(100+i))
			done <- [2]int64{c, rb}
		}()
		for j := 0; j < nds; j++ {
			dsRow(j, fmt.Sprintf("%dm", 30+rnd.IntN(1000)))
		}
		results.wrote(nds)
		victim := ds[rnd.IntN(len(ds))]
		// The kill lands at a random point of the passes: a pause, not a
		// wait for a condition.
		time.Sleep(time.Duration(rnd.IntN(800)) * time.Millisecond)
		victim.kill()
		results.fault("kill -9 and restart")
		cancel()
		n := <-done
		results.wrote(n[0])
		results.rolled(n[1])
		victim.start()
		results.converged("kill -9 and restart", r.converge(url, ds...))
		checkLeaks()
	}
	// A graceful stop closes every pool.
	for _, d := range ds {
		if code := d.stop(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", d.id, code)
		}
	}
	eventually(t, "pools closed after SIGTERM", func() bool { return connections() == 0 })
}

func queryString(t *testing.T, url, q string) string {
	t.Helper()
	db, err := openDB(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s string
	if err := db.QueryRow(q).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
