package snapshottest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Portable statements: the same text runs on both stores. Writers set only
// the platform's columns, never a revision.
const (
	updMeta    = `UPDATE sys_metadata SET version = version + 1 WHERE id = $1`
	insSecret  = `INSERT INTO sys_secret (id, namespace, key, kms_key_id, ciphertext) VALUES ($1, 'datasource', $1, 'local:v1', $2)`
	insCred    = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)`
	clearCred  = `UPDATE sys_connector_credential SET value = NULL WHERE ref = $1`
	upsertCred = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)
ON CONFLICT (ref) DO UPDATE SET value = excluded.value`
	upsertMeta = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'view', $1, '{"object":"x"}')
ON CONFLICT (id) DO UPDATE SET version = sys_metadata.version + 1`
	upsertSecret = `INSERT INTO sys_secret (id, ciphertext) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET ciphertext = excluded.ciphertext, version = sys_secret.version + 1`
)

// keyColumn is each source table's key.
var keyColumn = map[snapshot.Table]string{
	snapshot.TableMetadata:   "id",
	snapshot.TableSecret:     "id",
	snapshot.TableCredential: "ref",
}

// testChangesSurface: every kind of write on each source table surfaces in
// the next poll, with a store-wide increasing revision.
func testChangesSurface(t *testing.T, bk Backend) {
	t.Parallel()
	writes := []struct {
		table snapshot.Table
		ins   string // $1 key, $2 a value
		upd   string // $1 key
	}{
		{snapshot.TableMetadata, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ($1, 'object', $2, '{}')`,
			updMeta},
		{snapshot.TableSecret, insSecret, `UPDATE sys_secret SET ciphertext = 'rotated', rotated_at = CURRENT_TIMESTAMP WHERE id = $1`},
		{snapshot.TableCredential, insCred, `UPDATE sys_connector_credential SET value = 'other' WHERE ref = $1`},
	}
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		db := Connect(t, url)
		_, c := Relist(t, s)
		var last int64 // revisions are store-wide: each write's is above every earlier one
		readRev := func(tbl snapshot.Table, key string) (int64, bool) {
			t.Helper()
			rows, err := s.Read(ctx, []snapshot.Address{{Table: tbl, Key: key}})
			if err != nil {
				t.Fatalf("read %s/%s: %v", tbl, key, err)
			}
			rev, ok := Revisions(rows)[string(tbl)+"/"+key]
			if rows.Len() > 1 {
				t.Fatalf("read %s/%s: %d rows", tbl, key, rows.Len())
			}
			return rev, ok
		}
		step := func(what, table, key string, want ...string) {
			t.Helper()
			var got []snapshot.Address
			got, c = Poll(t, s, c)
			WantAddrs(t, got, want...)
			if key == "" {
				return
			}
			rev, ok := readRev(snapshot.Table(table), key)
			if !ok || rev <= last {
				t.Fatalf("%s %s/%s: revision %d (found %v), want above %d", what, table, key, rev, ok, last)
			}
			last = rev
		}
		for _, w := range writes {
			tbl, col := string(w.table), keyColumn[w.table]
			db.Exec(t, w.ins, "k-1", "v")
			step("insert", tbl, "k-1", tbl+"/k-1")
			db.Exec(t, w.upd, "k-1")
			step("update", tbl, "k-1", tbl+"/k-1")
			// A key change journals both keys; the old one reads as deleted.
			db.Exec(t, "UPDATE "+tbl+" SET "+col+" = $1 WHERE "+col+" = $2", "k-2", "k-1")
			step("key change", tbl, "k-2", tbl+"/k-1", tbl+"/k-2")
			if _, ok := readRev(w.table, "k-1"); ok {
				t.Fatalf("%s/k-1 still read after its key changed", tbl)
			}
			db.Exec(t, "DELETE FROM "+tbl+" WHERE "+col+" = $1", "k-2")
			step("delete", tbl, "", tbl+"/k-2")
			if _, ok := readRev(w.table, "k-2"); ok {
				t.Fatalf("%s/k-2 still read after delete", tbl)
			}
			// Re-created: a new revision above the tombstone's.
			db.Exec(t, w.ins, "k-2", "v")
			step("re-insert", tbl, "k-2", tbl+"/k-2")
		}

		// Values: a credential and a secret's ciphertext are never printed.
		db.Exec(t, insCred, "crm-token", "canary-secret-value")
		db.Exec(t, insSecret, "sec_0a1b2c", "canary-ciphertext")
		got, c := Poll(t, s, c)
		WantAddrs(t, got, "sys_connector_credential/crm-token", "sys_secret/sec_0a1b2c")
		rows, err := s.Read(ctx, got)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows.Credentials) != 1 || rows.Credentials[0].Value.Reveal() != "canary-secret-value" || rows.Credentials[0].Cleared {
			t.Fatalf("credential row: %+v", rows.Credentials)
		}
		if len(rows.Secrets) != 1 || rows.Secrets[0].Ciphertext.Reveal() != "canary-ciphertext" {
			t.Fatalf("secret row: %+v", rows.Secrets)
		}
		if p := fmt.Sprintf("%v %+v %#v", rows, rows, rows); strings.Contains(p, "canary") {
			t.Fatal("a credential value or a ciphertext was printed")
		}
		db.Exec(t, clearCred, "crm-token")
		got, c = Poll(t, s, c)
		WantAddrs(t, got, "sys_connector_credential/crm-token")
		rows, _ = s.Read(ctx, got)
		if len(rows.Credentials) != 1 || !rows.Credentials[0].Cleared {
			t.Fatalf("cleared credential: %+v", rows.Credentials)
		}

		// A statement touching many rows journals each.
		db.Exec(t, `UPDATE sys_metadata SET state = 'archived'`)
		got, c = Poll(t, s, c)
		WantAddrs(t, got, "sys_metadata/k-2")

		// Idle: nothing.
		got, _ = Poll(t, s, c)
		WantAddrs(t, got)
	})
}

// platformMeta inserts a sys_metadata row the way the platform does: every
// column it sets, NULLs where it leaves them.
const platformMeta = `INSERT INTO sys_metadata (id, name, type, namespace, package_id, managed_by, scope, metadata,
  strategy, state, organization_id, version, checksum, source, created_at, updated_at)
VALUES ($1, $2, $3, 'default', $4, 'user', 'platform', $5, 'merge', $6, $7, $8, $9, 'api', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`

// testRowsAsThePlatformWritesThem: NULL organization and package, one
// type+name in two packages and two organizations, a draft beside the
// active row, bodies as stored (any key order, not JSON at all, NULL), a
// real version, ids of any shape.
func testRowsAsThePlatformWritesThem(t *testing.T, bk Backend) {
	t.Parallel()
	type row struct {
		id, name, typ string
		pkg, org      any // nil: NULL
		body          any
		state         string
		version       float64
		checksum      any
	}
	rowsIn := []row{
		{"V1StGXR8_Z5jdHi6B-myT", "account", "object", nil, nil, `{"name":"account", "fields":{"9":{},"10":{},"b":{"type":"text"}}}`, "active", 3, "9f86d081884c7d65"},
		{"draft-account", "account", "object", nil, nil, `{"name":"account","fields":{}}`, "draft", 4, nil},
		{"view-o1-p1", "all", "view", "crm", "org-1", `{"object":"account"}`, "active", 1, nil},
		{"view-o1-p2", "all", "view", "sales", "org-1", `{"object":"account"}`, "active", 1, nil},
		{"view-o2-p1", "all", "view", "crm", "org-2", `{"object":"account"}`, "active", 1, nil},
		{"view-o2", "all", "view", nil, "org-2", `{"object":"account"}`, "active", 1, nil},
		{"view-o2-draft", "all", "view", nil, "org-2", `{"object":"lead"}`, "draft", 2, nil},
		{"0b6f9b3e-7f4c-4c1a-9d7e-2f1e5c3a8b90", "warehouse", "datasource", nil, nil,
			`{"name":"warehouse","driver":"postgres","config":{"host":"db","username":"app"},"external":{"credentialsRef":"sys_secret:sec_1"}}`, "active", 2.1, nil},
		{"not-json", "broken", "object", nil, nil, `not json {`, "active", 1, nil},
		{"null-body", "empty", "object", nil, nil, nil, "active", 1, nil},
		{"id with spaces/and:colons%2F+ünïcode", "odd", "hook", nil, "org:1", `{}`, "active", 1, nil},
		{"old-flow", "flow1", "flow", nil, nil, `{}`, "archived", 7, nil},
	}
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		db := Connect(t, url)
		_, c := Relist(t, s)
		var all []snapshot.Address
		for _, r := range rowsIn {
			db.Exec(t, platformMeta, r.id, r.name, r.typ, r.pkg, r.body, r.state, r.org, r.version, r.checksum)
			all = append(all, snapshot.Address{Table: snapshot.TableMetadata, Key: r.id})
		}
		db.Exec(t, `INSERT INTO sys_secret (id, namespace, key, kms_key_id, alg, version, ciphertext, organization_id)
VALUES ('sec_1', 'datasource', 'warehouse', 'local:v1', 'aes-256-gcm', 1, 'djE6YWJj', NULL)`)
		db.Exec(t, `INSERT INTO sys_secret (id) VALUES ('sec_bare')`)
		all = append(all, snapshot.Address{Table: snapshot.TableSecret, Key: "sec_1"}, snapshot.Address{Table: snapshot.TableSecret, Key: "sec_bare"})
		got, _ := Poll(t, s, c)
		if len(keySet(got)) != len(all) {
			t.Fatalf("poll returned %d addresses, want %d: %v", len(keySet(got)), len(all), keySet(got))
		}

		check := func(what string, got snapshot.Rows, wantStates ...string) {
			t.Helper()
			byID := map[string]snapshot.MetadataRow{}
			for _, m := range got.Metadata {
				byID[m.ID] = m
			}
			n := 0
			for _, r := range rowsIn {
				m, ok := byID[r.id]
				if !ok {
					if slices.Contains(wantStates, r.state) {
						t.Errorf("%s: row %q (%s) missing", what, r.id, r.state)
					}
					continue
				}
				n++
				if !slices.Contains(wantStates, r.state) {
					t.Errorf("%s: row %q in state %s returned", what, r.id, r.state)
				}
				str := func(v any) string {
					if v == nil {
						return ""
					}
					return v.(string)
				}
				if m.Name != r.name || m.Type != r.typ || m.PackageID != str(r.pkg) || m.OrganizationID != str(r.org) ||
					m.State != r.state || m.Version != r.version || m.Checksum != str(r.checksum) || string(m.Metadata) != str(r.body) {
					t.Errorf("%s: row %q read as %+v (metadata %q), want %+v", what, r.id, m, m.Metadata, r)
				}
				if r.body == nil && m.Metadata != nil {
					t.Errorf("%s: NULL body read as %q", what, m.Metadata)
				}
				if m.Revision <= 0 || m.UpdatedAt.IsZero() {
					t.Errorf("%s: row %q has revision %d, updated_at %v", what, r.id, m.Revision, m.UpdatedAt)
				}
			}
			if n != len(got.Metadata) {
				t.Errorf("%s: %d rows returned, %d expected", what, len(got.Metadata), n)
			}
			if len(got.Secrets) != 2 {
				t.Fatalf("%s: secrets %+v", what, got.Secrets)
			}
			sec, bare := got.Secrets[0], got.Secrets[1]
			if sec.ID != "sec_1" || sec.Namespace != "datasource" || sec.Key != "warehouse" || sec.KMSKeyID != "local:v1" ||
				sec.Alg != "aes-256-gcm" || sec.Version != 1 || sec.Ciphertext.Reveal() != "djE6YWJj" || sec.OrganizationID != "" || sec.Revision <= 0 {
				t.Errorf("%s: secret read as %+v", what, sec)
			}
			// Defaults as the platform's table has them.
			if bare.ID != "sec_bare" || bare.Alg != "aes-256-gcm" || bare.Version != 1 || !bare.Ciphertext.IsEmpty() || bare.Namespace != "" {
				t.Errorf("%s: bare secret read as %+v", what, bare)
			}
		}
		rows, _ := Relist(t, s)
		check("relist", rows, "active")
		read, err := s.Read(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		check("read", read, "active", "draft", "archived")

		// Promoting the draft: the platform deletes the active row and
		// flips the draft; both addresses surface.
		_, c = Relist(t, s)
		db.Exec(t, `DELETE FROM sys_metadata WHERE id = 'view-o2'`)
		db.Exec(t, `UPDATE sys_metadata SET state = 'active', version = version + 1 WHERE id = 'view-o2-draft'`)
		got, _ = Poll(t, s, c)
		WantAddrs(t, got, "sys_metadata/view-o2", "sys_metadata/view-o2-draft")
		rows, _ = Relist(t, s)
		var ids []string
		for _, m := range rows.Metadata {
			if m.Name == "all" {
				ids = append(ids, m.ID+"@"+m.OrganizationID+"/"+m.PackageID)
			}
		}
		slices.Sort(ids)
		if want := []string{"view-o1-p1@org-1/crm", "view-o1-p2@org-1/sales", "view-o2-draft@org-2/", "view-o2-p1@org-2/crm"}; !slices.Equal(ids, want) {
			t.Fatalf("views after promotion: %v, want %v", ids, want)
		}
	})
}

func testAbortedTransactionSurfacesNothing(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		db := Connect(t, url)
		_, c := Relist(t, s)
		if err := db.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		db.Exec(t, InsertMetadata, "ghost")
		db.Exec(t, insSecret, "ghost-secret", "x")
		db.Exec(t, insCred, "ghost-cred", "x")
		if err := db.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		got, c := Poll(t, s, c)
		WantAddrs(t, got)
		db.Exec(t, insSecret, "real", "x")
		got, _ = Poll(t, s, c)
		WantAddrs(t, got, "sys_secret/real")
		rows, _ := Relist(t, s)
		if rows.Len() != 1 {
			t.Fatalf("rows after an aborted transaction: %+v", rows)
		}
	})
}

func testRelistEqualsTables(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		db := Connect(t, url)
		var addrs []snapshot.Address
		for i := range 20 {
			k := fmt.Sprintf("k%02d", i)
			db.Exec(t, InsertMetadata, k)
			db.Exec(t, insSecret, k, "c-"+k)
			db.Exec(t, insCred, k, "v-"+k)
			addrs = append(addrs, snapshot.Address{Table: snapshot.TableMetadata, Key: k},
				snapshot.Address{Table: snapshot.TableSecret, Key: k}, snapshot.Address{Table: snapshot.TableCredential, Key: k})
		}
		db.Exec(t, clearCred, "k03")
		db.Exec(t, `DELETE FROM sys_secret WHERE id = $1`, "k04")
		rows, c := Relist(t, s)
		if len(rows.Metadata) != 20 || len(rows.Secrets) != 19 || len(rows.Credentials) != 20 {
			t.Fatalf("relist: %d metadata, %d secrets, %d credentials", len(rows.Metadata), len(rows.Secrets), len(rows.Credentials))
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
		for _, sr := range rows.Secrets {
			if sr.Ciphertext.Reveal() != "c-"+sr.ID {
				t.Fatalf("secret %s: wrong ciphertext", sr.ID)
			}
		}
		// Revisions are distinct across tables.
		seen := map[int64]string{}
		for k, rev := range Revisions(rows) {
			if other, dup := seen[rev]; dup {
				t.Fatalf("%s and %s share revision %d", k, other, rev)
			}
			seen[rev] = k
		}
		// The relist cursor resumes exactly after it.
		got, _ := Poll(t, s, c)
		WantAddrs(t, got)
	})
}

func testOutOfOrderCommit(t *testing.T, bk Backend) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
				ctx := Ctx(t)
				t1 := Connect(t, url)
				t2 := Connect(t, url)
				_, c := Relist(t, s)
				if err := t1.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				t1.Exec(t, InsertMetadata, "from-t1")
				if s.Kind() == "postgres" {
					// T2 writes after T1 and commits first.
					t2.Exec(t, InsertMetadata, "from-t2")
					var got []snapshot.Address
					got, c = Poll(t, s, c)
					WantAddrs(t, got, "sys_metadata/from-t2")
				} else {
					// One writer: T1 holds the write lock; the poll sees
					// nothing of it and must not move past it.
					var got []snapshot.Address
					got, c = Poll(t, s, c)
					WantAddrs(t, got)
				}
				end := t1.Rollback
				if commit {
					end = t1.Commit
				}
				if err := end(ctx); err != nil {
					t.Fatal(err)
				}
				got, c := Poll(t, s, c)
				if commit {
					WantAddrs(t, got, "sys_metadata/from-t1")
				} else {
					WantAddrs(t, got)
				}
				if s.Kind() == "sqlite" {
					t2.Exec(t, InsertMetadata, "from-t2")
					got, _ = Poll(t, s, c)
					WantAddrs(t, got, "sys_metadata/from-t2")
				}
			})
		})
	}
}

// testConcurrentWritersNoneMissed: 8 writers × 500 random writes in
// transactions of random length (some rolled back), a poller running
// throughout that keeps a local copy the way the reconcile loop does: read
// the rows of each polled address. At the end the copy must equal the
// tables.
func testConcurrentWritersNoneMissed(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		_, c := Relist(t, s)
		writers, writes := 8, 500
		if raceEnabled {
			writes = 60 // same interleavings, fewer of them: see raceEnabled
		}
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
			for k, rev := range Revisions(rows) {
				local[k] = rev
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
				conn := Connect(t, url)
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
							table, err = "sys_secret", conn.Try(ctx, upsertSecret, k, fmt.Sprint(n))
						case 5:
							tbl := []snapshot.Table{snapshot.TableMetadata, snapshot.TableSecret, snapshot.TableCredential}[rng.IntN(3)]
							table = string(tbl)
							var n int64
							n, err = conn.TryN(ctx, "DELETE FROM "+table+" WHERE "+keyColumn[tbl]+" = $1", k)
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
		rows, _ := Relist(t, s)
		want := Revisions(rows)
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
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, what, func() bool {
		ok, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ok
	})
}

func testExpiredCursorAfterPrune(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		_, old := Relist(t, s)
		Exec(t, url, InsertMetadata, "a")
		Exec(t, url, InsertMetadata, "b")
		// Nothing older than an hour: nothing pruned, the cursor still works.
		if n, err := s.Prune(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("prune 1h = %d, %v", n, err)
		}
		got, _ := Poll(t, s, old)
		WantAddrs(t, got, "sys_metadata/a", "sys_metadata/b")

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
		_, c := Relist(t, s)
		Exec(t, url, InsertMetadata, "c")
		got, _ = Poll(t, s, c)
		WantAddrs(t, got, "sys_metadata/c")
		if w, err := s.Head(ctx); err != nil || w.Seq < 3 {
			t.Fatalf("head after prune = %+v, %v", w, err)
		}

		// A deleted row's revision goes with the journal; live rows keep theirs.
		db := Connect(t, url)
		db.Exec(t, `DELETE FROM sys_metadata WHERE id = 'a'`)
		const count = `SELECT count(*) FROM sys_reconciler_revision WHERE source = 'sys_metadata' AND key = $1`
		if db.Int(t, count, "a") != 1 {
			t.Fatal("no tombstone revision after a delete")
		}
		waitFor(t, "prune tombstone", func() (bool, error) {
			_, err := s.Prune(ctx, 0)
			return db.Int(t, count, "a") == 0, err
		})
		if db.Int(t, count, "b") != 1 || db.Int(t, count, "c") != 1 {
			t.Fatal("prune dropped the revision of a live row")
		}
	})
}

func testRegressedCursor(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		Exec(t, url, InsertMetadata, "a")
		_, c := Relist(t, s)

		// A restored backup: same store, older journal. Its snapshot has
		// moved since the cursor's (an unchanged snapshot is the very view
		// the cursor was taken in: nothing to check).
		ahead := c
		ahead.Seq += 1000
		Exec(t, url, InsertMetadata, "b")
		if _, _, err := s.Poll(ctx, ahead); !errors.Is(err, snapshot.ErrCursorRegressed) {
			t.Fatalf("poll with a cursor ahead of the journal = %v, want ErrCursorRegressed", err)
		}

		// The store recreated in place.
		if s.Kind() == "postgres" {
			Exec(t, url, "DROP SCHEMA public CASCADE")
			Exec(t, url, "CREATE SCHEMA public")
		} else {
			Exec(t, url, "DROP VIEW sys_reconcile_change")
			for _, tbl := range []string{"sys_metadata", "sys_secret", "sys_connector_credential", "sys_reconcile_journal",
				"sys_reconciler_revision", "sys_reconciler_replica", "sys_reconciler_drift", "sys_reconciler_state",
				"sys_reconcile_counter", "sys_reconciler_schema", "sys_reconciler_credential_owner", "sys_reconciler_lease",
				"sys_reconciler_guard", "sys_reconciler_guard_release"} {
				Exec(t, url, "DROP TABLE "+tbl)
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
		other, _ := bk.New(t)
		_, c2 := Relist(t, other)
		if _, _, err := s.Poll(ctx, c2); !errors.Is(err, snapshot.ErrCursorRegressed) {
			t.Fatalf("poll with another store's cursor = %v, want ErrCursorRegressed", err)
		}
	})
}

func testZeroCursorNeedsRelist(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		if _, _, err := s.Poll(Ctx(t), snapshot.Cursor{}); !errors.Is(err, snapshot.ErrCursorExpired) {
			t.Fatalf("poll with no cursor = %v, want ErrCursorExpired", err)
		}
	})
}

func testStallAndHead(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		_, c := Relist(t, s)
		h0, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		Exec(t, url, InsertMetadata, "a")
		Exec(t, url, InsertMetadata, "b")
		st, err := s.Stall(ctx, c, time.Hour)
		if err != nil || st.Pending != 2 || len(st.Blockers) != 0 {
			t.Fatalf("stall = %+v, %v; want 2 pending, no blockers", st, err)
		}
		h1, _ := s.Head(ctx)
		if h1.Seq != h0.Seq+2 {
			t.Fatalf("head %d → %d, want +2", h0.Seq, h1.Seq)
		}
		_, c = Poll(t, s, c)
		if c.Seq != h1.Seq {
			t.Fatalf("cursor seq %d, head %d", c.Seq, h1.Seq)
		}
		if s.Kind() != "postgres" {
			return
		}
		// An open writing transaction is named (never its query text).
		tx := Connect(t, url)
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

// A deletion is a revision of the store's head: Read tells it for the
// deleted row's address (its tombstone), so a loop that applied the
// deletion has applied the head.
func testReadTellsDeletedRevisions(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		Exec(t, url, InsertMetadata, "keep")
		Exec(t, url, InsertMetadata, "gone")
		rows, err := s.Read(ctx, []snapshot.Address{{Table: snapshot.TableMetadata, Key: "keep"}, {Table: snapshot.TableMetadata, Key: "gone"}})
		if err != nil || len(rows.Metadata) != 2 {
			t.Fatalf("read = %+v, %v", rows, err)
		}
		if h, _ := s.Head(ctx); rows.Revision != h.Revision || rows.Revision != max(rows.Metadata[0].Revision, rows.Metadata[1].Revision) {
			t.Fatalf("read revision %d, head %d, rows %d and %d", rows.Revision, h.Revision, rows.Metadata[0].Revision, rows.Metadata[1].Revision)
		}
		Exec(t, url, `DELETE FROM sys_metadata WHERE id = 'gone'`)
		head, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err = s.Read(ctx, []snapshot.Address{{Table: snapshot.TableMetadata, Key: "gone"}})
		if err != nil || len(rows.Metadata) != 0 {
			t.Fatalf("read of the deleted row = %+v, %v", rows, err)
		}
		if rows.Revision != head.Revision || rows.Revision == 0 {
			t.Fatalf("read of the deleted row tells revision %d, the store's head is %d", rows.Revision, head.Revision)
		}
		rows, err = s.Read(ctx, []snapshot.Address{{Table: snapshot.TableSecret, Key: "never"}})
		if err != nil || rows.Revision != 0 {
			t.Fatalf("read of an address never written = revision %d, %v", rows.Revision, err)
		}
	})
}

func testFleetTables(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		r := snapshot.Heartbeat{ReplicaID: "r1", Host: "h", PID: 42, Version: "v1", StartedAt: at, HeartbeatAt: at,
			Cursor: "seq:3", CursorSeq: 3, CursorAt: at, Counts: map[string]int64{"ready": 3}, LastError: "boom"}
		if clash, err := s.Heartbeat(ctx, r); err != nil || clash != "" {
			t.Fatal(clash, err)
		}
		r.Stopped, r.LastError = true, ""
		if clash, err := s.Heartbeat(ctx, r); err != nil || clash != "" {
			t.Fatal(clash, err)
		}
		if _, err := s.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: "r0"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Heartbeats(ctx)
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
		if got[1].Clash != "" {
			t.Fatalf("replica r1 clashes with %q", got[1].Clash)
		}
		if got[0].Node.Reported || got[1].Node.Reported {
			t.Fatalf("a heartbeat without a node reads as one: %+v, %+v", got[0].Node, got[1].Node)
		}
		// The node beside the sidecar: written with the heartbeat, read
		// back as written, replaced by the next one.
		node := snapshot.Node{Reported: true, Ready: true, CheckedAt: at, Stale: 2, Nudged: 1,
			Restart: registry.NodeRestart{Phase: registry.RestartInFlight, Reason: "stale for 5m", Since: at, LastAt: at, Count: 1}}
		r.Node = node
		if _, err := s.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Heartbeats(ctx); err != nil || !reflect.DeepEqual(normNode(got[1].Node), normNode(node)) {
			t.Fatalf("node read back: %+v (wrote %+v), %v", got[1].Node, node, err)
		}
		r.Node = snapshot.Node{Reported: true}
		if _, err := s.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Heartbeats(ctx); err != nil || got[1].Node.Ready || got[1].Node.Restart.Phase != "" || !got[1].Node.Reported {
			t.Fatalf("node not replaced: %+v, %v", got[1].Node, err)
		}
		for range 2 {
			if err := s.WriteDrift(ctx, "r1", at, []byte(`{"items":[]}`)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// testHeartbeatClash: two live processes writing one replica id see each
// other; a successor of a stopped or long-dead process does not.
func testHeartbeatClash(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, _ string) {
		ctx := Ctx(t)
		t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		beat := func(host string, pid int, started, at time.Time, stopped bool) string {
			t.Helper()
			clash, err := s.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: "vm", Host: host, PID: pid, StartedAt: started, HeartbeatAt: at, Stopped: stopped})
			if err != nil {
				t.Fatal(err)
			}
			return clash
		}
		// A process, then its clean successor.
		beat("h1", 10, t0, t0.Add(time.Second), false)
		beat("h1", 10, t0, t0.Add(2*time.Second), true)
		if c := beat("h1", 11, t0.Add(3*time.Second), t0.Add(3*time.Second), false); c != "" {
			t.Fatalf("successor of a stopped process clashes with %q", c)
		}
		// A crashed predecessor (last beat before this one started).
		if c := beat("h1", 12, t0.Add(time.Minute), t0.Add(time.Minute), false); c != "" {
			t.Fatalf("successor of a crashed process clashes with %q", c)
		}
		// Its own beats again: no clash.
		if c := beat("h1", 12, t0.Add(time.Minute), t0.Add(61*time.Second), false); c != "" {
			t.Fatalf("own heartbeat clashes with %q", c)
		}
		// A second live process on another host, alternating.
		b0 := t0.Add(62 * time.Second)
		beat("h2", 7, b0, b0, false) // h1's last beat was before h2 started: not seen yet
		if c := beat("h1", 12, t0.Add(time.Minute), b0.Add(time.Second), false); c != "h2 pid 7" {
			t.Fatalf("h1 sees %q, want h2 pid 7", c)
		}
		if c := beat("h2", 7, b0, b0.Add(2*time.Second), false); c != "h1 pid 12" {
			t.Fatalf("h2 sees %q, want h1 pid 12", c)
		}
		reps, err := s.Heartbeats(ctx)
		if err != nil || len(reps) != 1 || reps[0].Clash != "h1 pid 12" || reps[0].ClashAt.IsZero() {
			t.Fatalf("replicas %+v, %v", reps, err)
		}
	})
}

// testPlatformUpserts: the snapshottest statements that write rows the way
// the platform does, on both stores.
func testPlatformUpserts(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		_, c := Relist(t, s)
		Exec(t, url, UpsertMetadata, "m1", "view", "all", "org-1", nil, "active", `{"object":"account"}`, nil)
		Exec(t, url, UpsertMetadata, "m1", "view", "all", "org-1", "crm", "active", `{"object":"lead"}`, "abc")
		Exec(t, url, UpsertSecret, "sec_1", "datasource", "warehouse", "djE6eA")
		Exec(t, url, UpsertSecret, "sec_1", "datasource", "warehouse", "djE6eQ")
		got, _ := Poll(t, s, c)
		WantAddrs(t, got, "sys_metadata/m1", "sys_secret/sec_1")
		rows, err := s.Read(Ctx(t), got)
		if err != nil || len(rows.Metadata) != 1 || len(rows.Secrets) != 1 {
			t.Fatalf("read = %+v, %v", rows, err)
		}
		m, sec := rows.Metadata[0], rows.Secrets[0]
		if m.PackageID != "crm" || m.OrganizationID != "org-1" || string(m.Metadata) != `{"object":"lead"}` || m.Checksum != "abc" || m.Version != 2 {
			t.Fatalf("metadata after upsert: %+v", m)
		}
		if sec.Ciphertext.Reveal() != "djE6eQ" || sec.Version != 2 || sec.KMSKeyID != "local:v1" {
			t.Fatalf("secret after upsert: %+v", sec)
		}
	})
}

// normNode puts a node's times in UTC, so that DeepEqual compares instants.
func normNode(n snapshot.Node) snapshot.Node {
	n.CheckedAt, n.Restart.Since, n.Restart.LastAt = n.CheckedAt.UTC(), n.Restart.Since.UTC(), n.Restart.LastAt.UTC()
	return n
}

// testGuardTables: a replica's pending guard is replaced as a whole, keeps
// each record's release stamp, and is stamped with the newest release when
// recorded (so a release covers what was recorded before it only).
func testGuardTables(t *testing.T, bk Backend) {
	t.Parallel()
	bk.each(t, func(t *testing.T, s snapshot.Store, url string) {
		ctx := Ctx(t)
		if rel, err := s.LatestRelease(ctx); err != nil || rel.ID != 0 {
			t.Fatalf("no release yet: %+v, %v", rel, err)
		}
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		a := snapshot.GuardRecord{Kind: "engine", Key: "object/a", Revision: 7, Reason: "eviction guarded", GuardedAt: at}
		b := snapshot.GuardRecord{Kind: "engine", Key: "object/b", Revision: 8}
		got, err := s.SyncGuard(ctx, "r1", []snapshot.GuardRecord{a, b})
		if err != nil || len(got) != 2 || got[0].After != 0 || got[0].Revision != 7 || got[0].Reason != a.Reason || !got[0].GuardedAt.Equal(at) || got[0].ReplicaID != "r1" {
			t.Fatalf("sync: %+v, %v", got, err)
		}
		rel, err := s.ReleaseGuard(ctx, "ops")
		if err != nil || rel.ID == 0 || rel.By != "ops" || rel.At.IsZero() {
			t.Fatalf("release: %+v, %v", rel, err)
		}
		if latest, err := s.LatestRelease(ctx); err != nil || latest.ID != rel.ID {
			t.Fatalf("latest release %+v, %v, want %d", latest, err, rel.ID)
		}
		c := snapshot.GuardRecord{Kind: "datasource", Key: "crm"}
		got, err = s.SyncGuard(ctx, "r1", []snapshot.GuardRecord{a, c}) // b goes, c comes after the release
		if err != nil || len(got) != 2 {
			t.Fatalf("second sync: %+v, %v", got, err)
		}
		for _, g := range got {
			want := int64(0)
			if g.Key == "crm" {
				want = rel.ID
			}
			if g.After != want {
				t.Fatalf("%s stamped after release %d, want %d", g.Key, g.After, want)
			}
		}
		if _, err := s.SyncGuard(ctx, "r2", []snapshot.GuardRecord{b}); err != nil {
			t.Fatal(err)
		}
		if mine, err := s.LoadGuard(ctx, "r1"); err != nil || len(mine) != 2 || mine[0].Key != "crm" {
			t.Fatalf("load r1: %+v, %v", mine, err)
		}
		if all, err := s.Guards(ctx); err != nil || len(all) != 3 {
			t.Fatalf("every replica's guard: %+v, %v", all, err)
		}
		if got, err := s.SyncGuard(ctx, "r1", nil); err != nil || len(got) != 0 {
			t.Fatalf("cleared: %+v, %v", got, err)
		}
	})
}
