package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// Portable statements: the same text runs on both stores.
const (
	insMeta    = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'object', $1, '{"fields":[]}')`
	updMeta    = `UPDATE sys_metadata SET version = version + 1 WHERE id = $1`
	insCred    = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)`
	clearCred  = `UPDATE sys_connector_credential SET value = NULL WHERE ref = $1`
	insDS      = `INSERT INTO sys_datasource (name, driver) VALUES ($1, 'sqlite')`
	delDS      = `DELETE FROM sys_datasource WHERE name = $1`
	upsertCred = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)
ON CONFLICT (ref) DO UPDATE SET value = excluded.value`
	upsertMeta = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'view', $1, '{"object":"x"}')
ON CONFLICT (id) DO UPDATE SET version = sys_metadata.version + 1`
	upsertDS = `INSERT INTO sys_datasource (name, driver) VALUES ($1, 'postgres')
ON CONFLICT (name) DO UPDATE SET active = NOT sys_datasource.active`
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func relist(t *testing.T, s snapshot.Store) (snapshot.Rows, snapshot.Cursor) {
	t.Helper()
	rows, c, err := s.Relist(ctxT(t))
	if err != nil {
		t.Fatalf("relist: %v", err)
	}
	return rows, c
}

func poll(t *testing.T, s snapshot.Store, c snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor) {
	t.Helper()
	addrs, next, err := s.Poll(ctxT(t), c)
	if err != nil {
		t.Fatalf("poll from %s: %v", c, err)
	}
	return addrs, next
}

// keySet returns the distinct addresses, sorted, as "table/key".
func keySet(addrs []snapshot.Address) []string {
	var out []string
	for _, a := range addrs {
		k := string(a.Table) + "/" + a.Key
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func wantAddrs(t *testing.T, got []snapshot.Address, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	g := keySet(got)
	if g == nil {
		g = []string{}
	}
	slices.Sort(want)
	if !slices.Equal(g, want) {
		t.Fatalf("poll returned %v, want %v", g, want)
	}
}

func TestChangesSurface(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		db := snapshottest.Connect(t, url)
		_, c := relist(t, s)

		db.Exec(t, insMeta, "obj-1")
		got, c := poll(t, s, c)
		wantAddrs(t, got, "sys_metadata/obj-1")
		rows, err := s.Read(ctx, got)
		if err != nil || len(rows.Metadata) != 1 {
			t.Fatalf("read obj-1: %v %+v", err, rows)
		}
		rev1 := rows.Metadata[0].Revision
		if rev1 <= 0 || rows.Metadata[0].UpdatedAt.IsZero() || rows.Metadata[0].State != "active" {
			t.Fatalf("trigger did not stamp the row: %+v", rows.Metadata[0])
		}

		db.Exec(t, updMeta, "obj-1")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_metadata/obj-1")
		rows, _ = s.Read(ctx, got)
		if rows.Metadata[0].Revision <= rev1 || rows.Metadata[0].Version != 2 {
			t.Fatalf("update: revision %d (was %d), version %d", rows.Metadata[0].Revision, rev1, rows.Metadata[0].Version)
		}

		db.Exec(t, insCred, "crm-token", "canary-secret-value")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_connector_credential/crm-token")
		rows, _ = s.Read(ctx, got)
		if len(rows.Credentials) != 1 || rows.Credentials[0].Value.Reveal() != "canary-secret-value" || rows.Credentials[0].Cleared {
			t.Fatalf("credential row: %+v", rows.Credentials)
		}
		if rows.Credentials[0].Revision <= rev1 {
			t.Fatalf("revisions are not store-wide: credential %d after metadata %d", rows.Credentials[0].Revision, rev1)
		}
		if strings.Contains(fmt.Sprintf("%v %+v %#v", rows, rows, rows), "canary-secret-value") {
			t.Fatal("a credential value was printed")
		}

		db.Exec(t, clearCred, "crm-token")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_connector_credential/crm-token")
		rows, _ = s.Read(ctx, got)
		if len(rows.Credentials) != 1 || !rows.Credentials[0].Cleared {
			t.Fatalf("cleared credential: %+v", rows.Credentials)
		}

		db.Exec(t, insDS, "warehouse")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_datasource/warehouse")
		db.Exec(t, delDS, "warehouse")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_datasource/warehouse")
		rows, _ = s.Read(ctx, got)
		if rows.Len() != 0 {
			t.Fatalf("deleted datasource still read: %+v", rows)
		}

		// A key change journals both keys.
		db.Exec(t, `UPDATE sys_metadata SET id = $1 WHERE id = $2`, "obj-2", "obj-1")
		got, c = poll(t, s, c)
		wantAddrs(t, got, "sys_metadata/obj-1", "sys_metadata/obj-2")

		// Idle: nothing.
		got, _ = poll(t, s, c)
		wantAddrs(t, got)
	})
}

func TestAbortedTransactionSurfacesNothing(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		db := snapshottest.Connect(t, url)
		_, c := relist(t, s)
		if err := db.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, insMeta, "ghost")
		db.Exec(t, insCred, "ghost-cred", "x")
		if err := db.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		got, c := poll(t, s, c)
		wantAddrs(t, got)
		db.Exec(t, insDS, "real")
		got, _ = poll(t, s, c)
		wantAddrs(t, got, "sys_datasource/real")
	})
}

func TestRelistEqualsTables(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		db := snapshottest.Connect(t, url)
		var addrs []snapshot.Address
		for i := range 20 {
			k := fmt.Sprintf("k%02d", i)
			db.Exec(t, insMeta, k)
			db.Exec(t, insCred, k, "v-"+k)
			db.Exec(t, insDS, k)
			addrs = append(addrs, snapshot.Address{Table: snapshot.TableMetadata, Key: k},
				snapshot.Address{Table: snapshot.TableCredential, Key: k}, snapshot.Address{Table: snapshot.TableDatasource, Key: k})
		}
		db.Exec(t, clearCred, "k03")
		db.Exec(t, delDS, "k04")
		rows, c := relist(t, s)
		if len(rows.Metadata) != 20 || len(rows.Credentials) != 20 || len(rows.Datasources) != 19 {
			t.Fatalf("relist: %d metadata, %d credentials, %d datasources", len(rows.Metadata), len(rows.Credentials), len(rows.Datasources))
		}
		read, err := s.Read(ctx, addrs)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", read) != fmt.Sprintf("%+v", rows) {
			t.Fatalf("Read of every key differs from Relist:\n%+v\n%+v", read, rows)
		}
		for _, cr := range rows.Credentials {
			if (cr.Ref == "k03") != cr.Cleared || (!cr.Cleared && cr.Value.Reveal() != "v-"+cr.Ref) {
				t.Fatalf("credential %s: cleared %v", cr.Ref, cr.Cleared)
			}
		}
		// The relist cursor resumes exactly after it.
		got, _ := poll(t, s, c)
		wantAddrs(t, got)
	})
}

func TestOutOfOrderCommit(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
				ctx := ctxT(t)
				t1 := snapshottest.Connect(t, url)
				t2 := snapshottest.Connect(t, url)
				_, c := relist(t, s)
				if err := t1.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				t1.Exec(t, insMeta, "from-t1")
				if s.Kind() == "postgres" {
					// T2 writes after T1 and commits first.
					t2.Exec(t, insMeta, "from-t2")
					var got []snapshot.Address
					got, c = poll(t, s, c)
					wantAddrs(t, got, "sys_metadata/from-t2")
				} else {
					// One writer: T1 holds the write lock; the poll sees
					// nothing of it and must not move past it.
					var got []snapshot.Address
					got, c = poll(t, s, c)
					wantAddrs(t, got)
				}
				end := t1.Rollback
				if commit {
					end = t1.Commit
				}
				if err := end(ctx); err != nil {
					t.Fatal(err)
				}
				got, c := poll(t, s, c)
				if commit {
					wantAddrs(t, got, "sys_metadata/from-t1")
				} else {
					wantAddrs(t, got)
				}
				if s.Kind() == "sqlite" {
					t2.Exec(t, insMeta, "from-t2")
					got, _ = poll(t, s, c)
					wantAddrs(t, got, "sys_metadata/from-t2")
				}
			})
		})
	}
}

// TestConcurrentWritersNoneMissed: 8 writers × 500 random writes in
// transactions of random length (some rolled back), a poller running
// throughout that keeps a local copy the way the reconcile loop does: read
// the rows of each polled address. At the end the copy must equal the
// tables.
func TestConcurrentWritersNoneMissed(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		_, c := relist(t, s)
		const writers, writes = 8, 500
		local := map[string]int64{} // "table/key" → revision
		committedKeys := map[string]bool{}
		var mu sync.Mutex
		done := make(chan struct{})
		errs := make(chan error, writers+1)
		var wg sync.WaitGroup

		apply := func(addrs []snapshot.Address) error {
			if len(addrs) == 0 {
				return nil
			}
			rows, err := s.Read(ctx, addrs)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				delete(local, string(a.Table)+"/"+a.Key)
			}
			for _, r := range rows.Metadata {
				local["sys_metadata/"+r.ID] = r.Revision
			}
			for _, r := range rows.Credentials {
				local["sys_connector_credential/"+r.Ref] = r.Revision
			}
			for _, r := range rows.Datasources {
				local["sys_datasource/"+r.Name] = r.Revision
			}
			return nil
		}
		seen := map[string]bool{}
		pollerDone := make(chan struct{})
		go func() { // the poller; owned by this test, which waits on pollerDone
			defer close(pollerDone)
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for {
				stop := false
				select {
				case <-done:
					stop = true
				case <-tick.C:
				}
				addrs, next, err := s.Poll(ctx, c)
				if err != nil {
					errs <- fmt.Errorf("poll: %w", err)
					return
				}
				c = next
				for _, k := range keySet(addrs) {
					seen[k] = true
				}
				if err := apply(addrs); err != nil {
					errs <- fmt.Errorf("read: %w", err)
					return
				}
				if stop {
					return
				}
			}
		}()
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 42))
				conn := snapshottest.Connect(t, url)
				for n := 0; n < writes; {
					size := 1 + rng.IntN(12)
					rollback := rng.IntN(10) == 0
					var keys []string
					err := conn.Begin(ctx)
					for i := 0; i < size && n < writes && err == nil; i, n = i+1, n+1 {
						k := fmt.Sprintf("w%d-%d", w, rng.IntN(40))
						var table string
						switch op := rng.IntN(6); op {
						case 0, 1:
							table, err = "sys_metadata", conn.Try(ctx, upsertMeta, k)
						case 2, 3:
							table, err = "sys_connector_credential", conn.Try(ctx, upsertCred, k, fmt.Sprint(n))
						case 4:
							table, err = "sys_datasource", conn.Try(ctx, upsertDS, k)
						case 5:
							table = []string{"sys_metadata", "sys_connector_credential", "sys_datasource"}[rng.IntN(3)]
							key := map[string]string{"sys_metadata": "id", "sys_connector_credential": "ref", "sys_datasource": "name"}[table]
							var n int64
							n, err = conn.TryN(ctx, "DELETE FROM "+table+" WHERE "+key+" = $1", k)
							if n == 0 {
								continue // nothing deleted: no change
							}
						}
						keys = append(keys, table+"/"+k)
					}
					if err == nil && rollback {
						if err := conn.Rollback(ctx); err != nil {
							errs <- fmt.Errorf("writer %d: rollback: %w", w, err)
							return
						}
						continue
					}
					if err == nil {
						err = conn.Commit(ctx)
					}
					if err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
					mu.Lock()
					for _, k := range keys {
						committedKeys[k] = true
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(done)
		<-pollerDone
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for k := range committedKeys {
			if !seen[k] {
				t.Errorf("committed change to %s never polled", k)
			}
		}
		rows, _ := relist(t, s)
		want := map[string]int64{}
		for _, r := range rows.Metadata {
			want["sys_metadata/"+r.ID] = r.Revision
		}
		for _, r := range rows.Credentials {
			want["sys_connector_credential/"+r.Ref] = r.Revision
		}
		for _, r := range rows.Datasources {
			want["sys_datasource/"+r.Name] = r.Revision
		}
		if len(want) == 0 {
			t.Fatal("no rows written")
		}
		for k, rev := range want {
			if local[k] != rev {
				t.Errorf("%s: poller has revision %d, table %d (a change was missed)", k, local[k], rev)
			}
		}
		for k := range local {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: poller still has a deleted row", k)
			}
		}
		t.Logf("%d committed addresses, %d rows at the end", len(committedKeys), len(want))
	})
}

// waitFor retries f until it reports done or the deadline passes (a shared
// server's other transactions can hold the xmin horizon back briefly).
func waitFor(t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after 30s", what)
		}
		<-tick.C
	}
}

func TestExpiredCursorAfterPrune(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		_, old := relist(t, s)
		snapshottest.Exec(t, url, insMeta, "a")
		snapshottest.Exec(t, url, insMeta, "b")
		// Nothing older than an hour: nothing pruned, the cursor still works.
		if n, err := s.Prune(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("prune 1h = %d, %v", n, err)
		}
		got, _ := poll(t, s, old)
		wantAddrs(t, got, "sys_metadata/a", "sys_metadata/b")

		var total int64
		waitFor(t, "prune", func() (bool, error) {
			n, err := s.Prune(ctx, 0)
			total += n
			return total >= 2, err
		})
		if _, _, err := s.Poll(ctx, old); !errors.Is(err, snapshot.ErrCursorExpired) {
			t.Fatalf("poll from a pruned cursor = %v, want ErrCursorExpired", err)
		}
		// A relist gives a cursor that works again.
		_, c := relist(t, s)
		snapshottest.Exec(t, url, insMeta, "c")
		got, _ = poll(t, s, c)
		wantAddrs(t, got, "sys_metadata/c")
		if w, err := s.Head(ctx); err != nil || w.Seq < 3 {
			t.Fatalf("head after prune = %+v, %v", w, err)
		}
	})
}

func TestRegressedCursor(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		snapshottest.Exec(t, url, insMeta, "a")
		_, c := relist(t, s)

		// A restored backup: same store, older journal.
		ahead := c
		ahead.Seq += 1000
		if _, _, err := s.Poll(ctx, ahead); !errors.Is(err, snapshot.ErrCursorRegressed) {
			t.Fatalf("poll with a cursor ahead of the journal = %v, want ErrCursorRegressed", err)
		}

		// The store recreated in place.
		if s.Kind() == "postgres" {
			snapshottest.Exec(t, url, "DROP SCHEMA public CASCADE")
			snapshottest.Exec(t, url, "CREATE SCHEMA public")
		} else {
			for _, tbl := range []string{"sys_metadata", "sys_connector_credential", "sys_datasource", "sys_reconcile_journal",
				"sys_reconciler_replica", "sys_reconciler_drift", "sys_reconciler_state", "sys_reconcile_counter", "sys_reconciler_schema"} {
				snapshottest.Exec(t, url, "DROP TABLE "+tbl)
			}
		}
		if err := s.CheckSchema(ctx); !errors.Is(err, snapshot.ErrSchema) {
			t.Fatalf("check schema after drop = %v, want ErrSchema", err)
		}
		if _, _, err := s.Poll(ctx, c); !errors.Is(err, snapshot.ErrSchema) {
			t.Fatalf("poll after drop = %v, want ErrSchema", err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Poll(ctx, c); !errors.Is(err, snapshot.ErrCursorRegressed) {
			t.Fatalf("poll after the store was recreated = %v, want ErrCursorRegressed", err)
		}

		// Another database entirely.
		other, _ := snapshottest.NewSQLite(t)
		if s.Kind() == "postgres" {
			other, _ = snapshottest.NewPostgres(t)
		}
		_, c2 := relist(t, other)
		if _, _, err := s.Poll(ctx, c2); !errors.Is(err, snapshot.ErrCursorRegressed) {
			t.Fatalf("poll with another store's cursor = %v, want ErrCursorRegressed", err)
		}
	})
}

func TestZeroCursorNeedsRelist(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		if _, _, err := s.Poll(ctxT(t), snapshot.Cursor{}); !errors.Is(err, snapshot.ErrCursorExpired) {
			t.Fatalf("poll with no cursor = %v, want ErrCursorExpired", err)
		}
	})
}

func TestStallAndHead(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		_, c := relist(t, s)
		h0, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snapshottest.Exec(t, url, insMeta, "a")
		snapshottest.Exec(t, url, insMeta, "b")
		st, err := s.Stall(ctx, c, time.Hour)
		if err != nil || st.Pending != 2 || len(st.Blockers) != 0 {
			t.Fatalf("stall = %+v, %v; want 2 pending, no blockers", st, err)
		}
		h1, _ := s.Head(ctx)
		if h1.Seq != h0.Seq+2 {
			t.Fatalf("head %d → %d, want +2", h0.Seq, h1.Seq)
		}
		_, c = poll(t, s, c)
		if c.Seq != h1.Seq {
			t.Fatalf("cursor seq %d, head %d", c.Seq, h1.Seq)
		}
		if s.Kind() != "postgres" {
			return
		}
		// An open writing transaction is named (never its query text).
		tx := snapshottest.Connect(t, url)
		if err := tx.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		tx.Exec(t, insCred, "held-back", "canary-secret-value")
		st, err = s.Stall(ctx, c, 0)
		if err != nil || len(st.Blockers) == 0 {
			t.Fatalf("stall with an open writer = %+v, %v", st, err)
		}
		if strings.Contains(fmt.Sprintf("%+v", st), "canary") {
			t.Fatal("stall leaked query text")
		}
		_ = tx.Rollback(ctx)
	})
}

func TestFleetTables(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := ctxT(t)
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		r := snapshot.Replica{ReplicaID: "r1", Host: "h", PID: 42, Version: "v1", StartedAt: at, HeartbeatAt: at,
			Cursor: "seq:3", CursorSeq: 3, CursorAt: at, Counts: map[string]int64{"ready": 3}, LastError: "boom"}
		if err := s.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.Stopped, r.LastError = true, ""
		if err := s.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.Heartbeat(ctx, snapshot.Replica{ReplicaID: "r0"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Replicas(ctx)
		if err != nil || len(got) != 2 {
			t.Fatalf("replicas = %+v, %v", got, err)
		}
		g := got[1]
		if g.ReplicaID != "r1" || !g.Stopped || g.LastError != "" || g.Counts["ready"] != 3 || !g.HeartbeatAt.Equal(at) || !g.CursorAt.Equal(at) || g.PID != 42 {
			t.Fatalf("replica r1 = %+v", g)
		}
		if got[0].StartedAt.IsZero() || !got[0].CursorAt.IsZero() {
			t.Fatalf("replica r0 defaults = %+v", got[0])
		}
		for range 2 {
			if err := s.WriteDrift(ctx, "r1", at, []byte(`{"items":[]}`)); err != nil {
				t.Fatal(err)
			}
		}
	})
}
