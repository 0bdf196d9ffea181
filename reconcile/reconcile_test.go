package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

const upsertMeta = `INSERT INTO sys_metadata (id, type, name, state, metadata) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, metadata = excluded.metadata`

const upsertCred = `INSERT INTO sys_connector_credential (ref, value) VALUES ($1, $2)
ON CONFLICT (ref) DO UPDATE SET value = excluded.value`

// upsertDS writes a datasource the way the platform stores it: a
// sys_metadata row of type datasource whose body is the record.
const upsertDS = `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('ds-' || $1, 'datasource', $1, $2)
ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata`

// dsBody is a datasource record.
func dsBody(name, external string, active bool) string {
	return fmt.Sprintf(`{"name":%q,"driver":"sqlite","config":{"path":"x.db"},"external":%s,"active":%t}`, name, external, active)
}

// expected computes, independently of the loop, which entries the rows
// desire: kind/key → revision.
func expected(t *testing.T, s snapshot.Store) map[registry.Ref]int64 {
	t.Helper()
	rows, _, err := s.Relist(context.Background())
	if err != nil {
		t.Fatalf("relist: %v", err)
	}
	want := map[registry.Ref]int64{}
	for _, c := range rows.Credentials {
		want[registry.Ref{Kind: registry.KindCredential, Key: registry.CredentialKey(c.Ref)}] = c.Revision
	}
	for _, c := range rows.Secrets {
		want[registry.Ref{Kind: registry.KindCredential, Key: registry.SecretKey(c.ID)}] = c.Revision
	}
	for _, m := range rows.Metadata {
		if m.State != "active" {
			continue
		}
		off := func(member string) bool {
			return strings.Contains(string(m.Metadata), `"`+member+`":false`) || strings.Contains(string(m.Metadata), `"`+member+`": false`)
		}
		switch m.Type {
		case "connector":
			if !off("enabled") {
				want[registry.Ref{Kind: registry.KindConnector, Key: registry.NamedKey(m.OrganizationID, m.Name, m.PackageID)}] = m.Revision
			}
		case "datasource":
			if !off("active") {
				want[registry.Ref{Kind: registry.KindDatasource, Key: registry.NamedKey(m.OrganizationID, m.Name, m.PackageID)}] = m.Revision
			}
		default:
			want[registry.Ref{Kind: registry.KindEngine, Key: registry.EngineKey(m.OrganizationID, m.Type, m.Name, m.PackageID)}] = m.Revision
		}
	}
	return want
}

func actual(b *bundle) map[registry.Ref]int64 {
	got := map[registry.Ref]int64{}
	for _, e := range b.rec.Registries().List("", "") {
		got[registry.Ref{Kind: e.Kind, Key: e.Key}] = e.Revision
	}
	return got
}

func diffMaps(want, got map[registry.Ref]int64) string {
	var out []string
	for r, w := range want {
		if g, ok := got[r]; !ok {
			out = append(out, "missing "+r.String())
		} else if g != w {
			out = append(out, fmt.Sprintf("%s at revision %d, want %d", r, g, w))
		}
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			out = append(out, "orphan "+r.String())
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestConvergence applies seeded random writes and checks after each batch
// settles that every registry equals the desired rows exactly.
func TestConvergence(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 7))
		// Random writes delete in bulk on purpose (over the guard's
		// window): guard.max_evictions off.
		b := start(t, s, url, Options{ResyncInterval: -1, Guard: GuardOptions{Off: true}})
		for batch := 0; batch < 12; batch++ {
			for i := 0; i < 25; i++ {
				randomWrite(b, rng)
			}
			b.settle()
			if d := diffMaps(expected(t, s), actual(b)); d != "" {
				t.Fatalf("batch %d (seed %d): registries differ from rows: %s", batch, seed, d)
			}
		}
	})
}

func randomWrite(b *bundle, rng *rand.Rand) {
	cred := fmt.Sprintf("cred%d", rng.IntN(6))
	obj := func() string { return fmt.Sprintf("obj%d", rng.IntN(12)) }
	state := "active"
	if rng.IntN(8) == 0 {
		state = "archived"
	}
	switch op := rng.IntN(10); op {
	case 0:
		b.exec(upsertCred, cred, nil) // clear
	case 1:
		b.exec(`DELETE FROM sys_connector_credential WHERE ref = $1`, cred)
	case 2, 3:
		b.exec(upsertCred, cred, fmt.Sprintf("v%d", rng.IntN(1000)))
	case 4:
		name := fmt.Sprintf("conn%d", rng.IntN(10))
		body := connectorBodyJSON(cred)
		if rng.IntN(6) == 0 {
			body = strings.Replace(body, `"enabled":true`, `"enabled":false`, 1)
		}
		b.exec(upsertMeta, "connector-"+name, "connector", name, state, body)
	case 5:
		name := obj()
		body := fmt.Sprintf(`{"fields":{"a":{"type":"text"},"b":{"type":"lookup","reference":%q}}}`, obj())
		b.exec(upsertMeta, "object-"+name, "object", name, state, body)
	case 6:
		name := fmt.Sprintf("view%d", rng.IntN(8))
		b.exec(upsertMeta, "view-"+name, "view", name, state, fmt.Sprintf(`{"object":%q}`, obj()))
	case 7:
		name := fmt.Sprintf("ds%d", rng.IntN(4))
		ext := fmt.Sprintf(`{"credentialsRef":%q}`, cred)
		if rng.IntN(2) == 0 {
			ext = fmt.Sprintf(`{"connector":"conn%d"}`, rng.IntN(10))
		}
		b.exec(upsertDS, name, dsBody(name, ext, rng.IntN(5) != 0))
	case 8:
		b.exec(`DELETE FROM sys_metadata WHERE id = $1`, "object-"+obj())
	default:
		b.exec(`DELETE FROM sys_metadata WHERE id = 'ds-' || $1`, fmt.Sprintf("ds%d", rng.IntN(4)))
	}
}

// TestMinimalWork counts materializer calls: changing one credential among
// 1,000 connectors re-materializes only the connectors naming it, and an
// idle pass makes no call.
func TestMinimalWork(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('c0','a'),('c1','a'),('c2','a'),('c3','a'),('c4','a'),('c5','a'),('c6','a'),('c7','a'),('c8','a'),('c9','a')`)
		for i := 0; i < 1000; i += 100 {
			var vals []string
			for j := i; j < i+100; j++ {
				vals = append(vals, fmt.Sprintf("('conn%d','connector','conn%d','%s')", j, j, connectorBodyJSON(fmt.Sprintf("c%d", j%10))))
			}
			snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES `+strings.Join(vals, ","))
		}
		// Views over objects: changing one object rebuilds its views only.
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES
			('o1','object','account','{"fields":{"n":{"type":"text"}}}'),
			('o2','object','contact','{"fields":{"a":{"type":"lookup","reference":"account"}}}'),
			('v1','view','all_accounts','{"object":"account"}'),
			('v2','view','all_contacts','{"object":"contact"}'),
			('f1','flow','on_account','{"type":"autolaunched","nodes":[{"id":"start","type":"start","config":{"objectName":"account"}}]}')`)
		b := start(t, s, url, Options{ResyncInterval: -1})
		conn, eng := b.mats[registry.KindConnector], b.mats[registry.KindEngine]
		if got := conn.total.Load(); got != 1000 {
			t.Fatalf("first sync: %d connector materializations, want 1000", got)
		}
		conn.reset()
		eng.reset()
		b.settle()
		b.settle()
		if n := conn.total.Load() + eng.total.Load(); n != 0 {
			t.Fatalf("idle passes made %d materializer calls, want 0", n)
		}
		b.exec(`UPDATE sys_connector_credential SET value = 'b' WHERE ref = 'c3'`)
		b.settle()
		if got := conn.total.Load(); got != 100 {
			t.Fatalf("credential change: %d connector materializations, want 100", got)
		}
		for j := 3; j < 1000; j += 10 {
			if conn.count(fmt.Sprintf("conn%d", j)) != 1 {
				t.Fatalf("conn%d not re-materialized once", j)
			}
		}
		b.exec(`UPDATE sys_metadata SET metadata = '{"fields":{"n":{"type":"text"},"m":{"type":"text"}}}' WHERE id = 'o1'`)
		b.settle()
		got := map[string]int{}
		eng.mu.Lock()
		for k, v := range eng.calls {
			got[k] = v
		}
		eng.mu.Unlock()
		want := map[string]int{"object/account": 1, "view/all_accounts": 1, "flow/on_account": 1, "object/contact": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("object change rebuilt %v, want %v", got, want)
		}
	})
}

// TestHeldAndDegraded: a held entry is never retried until its signature
// changes, then at once; a degraded one follows the backoff schedule.
func TestHeldAndDegraded(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		var mu sync.Mutex
		var attempts []time.Time
		fn := func(_ context.Context, d Desired) error {
			switch d.Key {
			case "refused":
				if d.Secret.Reveal() != "good" {
					return Refused(nil, "refused upstream: 401")
				}
			case "flaky":
				mu.Lock()
				attempts = append(attempts, time.Now())
				mu.Unlock()
				return Transient(errors.New("503"), "upstream unavailable: 503")
			}
			return nil
		}
		c := newCounter(fn)
		snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('tok','bad')`)
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('a','connector','refused',$1), ('b','connector','flaky',$1)`, connectorBodyJSON("tok"))
		b := start(t, s, url, Options{ResyncInterval: -1, RetryBase: 40 * time.Millisecond, RetryMax: 160 * time.Millisecond,
			Materializers: map[registry.Kind]Materializer{registry.KindConnector: c}})
		e, _ := b.entry(registry.KindConnector, "refused")
		if e.State != registry.StateHeld || e.Reason != "refused upstream: 401" {
			t.Fatalf("refused connector: %s %q, want held", e.State, e.Reason)
		}
		b.waitFor("five attempts of the flaky connector", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(attempts) >= 5
		})
		for i := 0; i < 3; i++ {
			b.settle()
		}
		if n := c.count("refused"); n != 1 {
			t.Fatalf("held entry retried: %d calls, want 1", n)
		}
		e, _ = b.entry(registry.KindConnector, "flaky")
		if e.State != registry.StateDegraded || e.RetryAt.IsZero() {
			t.Fatalf("flaky connector: %+v, want degraded with a retry time", e)
		}
		mu.Lock()
		// Retry k waits base·2^(k-1) capped at max, jittered ±20%: check the lower bounds.
		for k := 1; k < len(attempts) && k <= 4; k++ {
			want := min(40*time.Millisecond<<(k-1), 160*time.Millisecond)
			if gap := attempts[k].Sub(attempts[k-1]); gap < want*8/10 {
				t.Errorf("retry %d after %v, want at least %v", k, gap, want*8/10)
			}
		}
		mu.Unlock()
		b.exec(`UPDATE sys_connector_credential SET value = 'good' WHERE ref = 'tok'`)
		b.settle()
		if st := b.state(registry.KindConnector, "refused"); st != registry.StateReady {
			t.Fatalf("after credential fix: %s, want ready", st)
		}
		if n := c.count("refused"); n != 2 {
			t.Fatalf("held entry: %d calls after fix, want 2", n)
		}
	})
}

// TestPanicAndHang: a panicking and a hanging materializer degrade only
// their own entry; build-validate-swap keeps the old instance serving.
func TestPanicAndHang(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		release := make(chan struct{})
		var fail sync.Map
		c := newCounter(func(ctx context.Context, d Desired) error {
			switch d.Key {
			case "view/panics":
				panic("boom")
			case "view/hangs":
				<-release // ignores ctx on purpose
			}
			if _, bad := fail.Load(d.Key); bad {
				return Invalid(nil, "invalid body")
			}
			return nil
		})
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES
			('o','object','account','{"fields":{}}'), ('p','view','panics','{"object":"account"}'),
			('h','view','hangs','{"object":"account"}'), ('ok','view','fine','{"object":"account"}')`)
		b := start(t, s, url, Options{ResyncInterval: -1, ApplyTimeout: 200 * time.Millisecond,
			Materializers: map[registry.Kind]Materializer{registry.KindEngine: c}})
		t.Cleanup(func() { close(release) }) // runs before b.stop (LIFO)
		for key, want := range map[string]string{"view/panics": "materializer panicked", "view/hangs": "materialize timed out after 200ms"} {
			e, _ := b.entry(registry.KindEngine, key)
			if e.State != registry.StateDegraded || e.Reason != want {
				t.Errorf("%s: %s %q, want degraded %q", key, e.State, e.Reason, want)
			}
		}
		if st := b.state(registry.KindEngine, "view/fine"); st != registry.StateReady {
			t.Fatalf("view/fine: %s, want ready", st)
		}
		// Build, validate, swap: a failed rebuild keeps the old instance.
		old, _ := b.entry(registry.KindEngine, "view/fine")
		fail.Store("view/fine", true)
		b.exec(`UPDATE sys_metadata SET metadata = '{"object":"account","x":1}' WHERE id = 'ok'`)
		b.settle()
		e, _ := b.entry(registry.KindEngine, "view/fine")
		if e.State != registry.StateHeld || e.Instance != old.Instance || e.ServingRevision != old.Revision || e.Reason != "invalid body" {
			t.Fatalf("failed rebuild: %+v; want held, old instance serving revision %d", e, old.Revision)
		}
		fail.Delete("view/fine")
		b.exec(`UPDATE sys_metadata SET metadata = '{"object":"account","x":2}' WHERE id = 'ok'`)
		b.settle()
		e, _ = b.entry(registry.KindEngine, "view/fine")
		if e.State != registry.StateReady || e.Instance == old.Instance || !old.Instance.(*countedInstance).closed.Load() {
			t.Fatalf("rebuild: %+v; want ready with a new instance and the old one closed", e)
		}
	})
}

// TestDependencies: missing references and cleared credentials hold the
// entry with a reason naming the cause, and it heals when the row appears.
func TestDependencies(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES
			('v','view','all_accounts','{"object":"account"}'), ('c','connector','crm',$1)`, connectorBodyJSON("crm-token"))
		snapshottest.Exec(t, url, upsertDS, "wh", dsBody("wh", `{"connector":"crm"}`, true))
		b := start(t, s, url, Options{ResyncInterval: -1})
		check := func(k registry.Kind, key string, st registry.State, reason string) {
			t.Helper()
			e, _ := b.entry(k, key)
			if e.State != st || e.Reason != reason {
				t.Fatalf("%s/%s: %s %q, want %s %q", k, key, e.State, e.Reason, st, reason)
			}
		}
		check(registry.KindEngine, "view/all_accounts", registry.StateHeld, "references missing object account")
		check(registry.KindConnector, "crm", registry.StateHeld, "credential crm-token is missing")
		check(registry.KindDatasource, "wh", registry.StateHeld, "credential crm-token is missing")
		b.exec(`INSERT INTO sys_metadata (id, type, name, metadata) VALUES ('o','object','account','{"fields":{}}')`)
		b.exec(upsertCred, "crm-token", "s3cret")
		b.settle()
		check(registry.KindEngine, "view/all_accounts", registry.StateReady, "")
		check(registry.KindConnector, "crm", registry.StateReady, "")
		check(registry.KindDatasource, "wh", registry.StateReady, "")
		b.exec(upsertCred, "crm-token", nil)
		b.settle()
		check(registry.KindCredential, "crm-token", registry.StateHeld, "credential crm-token is cleared")
		check(registry.KindConnector, "crm", registry.StateHeld, "credential crm-token is cleared")
		check(registry.KindDatasource, "wh", registry.StateHeld, "credential crm-token is cleared")
		if e, _ := b.entry(registry.KindConnector, "crm"); e.Instance != nil {
			t.Fatal("a connector whose credential was cleared still serves")
		}
		b.exec(`UPDATE sys_metadata SET metadata = $1 WHERE id = 'c'`, strings.Replace(connectorBodyJSON("crm-token"), `"enabled":true`, `"enabled":false`, 1))
		b.settle()
		if _, ok := b.entry(registry.KindConnector, "crm"); ok {
			t.Fatal("disabled connector not evicted")
		}
		check(registry.KindDatasource, "wh", registry.StateHeld, "references missing connector crm")
	})
}

// TestDriftAndStatus: the drift report is clean after convergence and
// names what is not ready; no secret appears in it.
func TestDriftAndStatus(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		const canary = "CANARY-9f8e7d6c"
		snapshottest.Exec(t, url, `INSERT INTO sys_connector_credential (ref, value) VALUES ('tok', $1)`, canary)
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata, checksum) VALUES
			('c','connector','crm',$1, NULL), ('v','view','orphaned','{"object":"nothing"}', NULL),
			('o','object','account','{"fields":{}}', 'sha256:0000')`, connectorBodyJSON("tok"))
		b := start(t, s, url, Options{ResyncInterval: -1})
		rep, err := b.rec.Drift(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Summary.NotReady != 1 || rep.NotReady[0].Key != "view/orphaned" || rep.Summary.ChecksumMismatches != 1 ||
			rep.Summary.Orphans != 0 || rep.Summary.Missing != 0 || rep.Summary.SignatureMismatch != 0 {
			t.Fatalf("drift: %+v", rep)
		}
		js, _ := json.Marshal(rep)
		st, _ := json.Marshal(b.rec.Status())
		items, _ := json.Marshal(b.rec.Registries().List("", ""))
		for _, out := range [][]byte{js, st, items} {
			if strings.Contains(string(out), canary) {
				t.Fatalf("canary secret leaked: %s", out)
			}
		}
		if c := b.rec.Status().Counts[registry.KindConnector][registry.StateReady]; c != 1 {
			t.Fatalf("status counts: %v", b.rec.Status().Counts)
		}
	})
}

// hookSource is the real store with a hook run before each Read, to commit
// a write at an exact point of a pass.
type hookSource struct {
	snapshot.Store
	beforeRead func(addrs []snapshot.Address)
}

func (h *hookSource) Read(ctx context.Context, addrs []snapshot.Address) (snapshot.Rows, error) {
	if h.beforeRead != nil {
		h.beforeRead(addrs)
	}
	return h.Store.Read(ctx, addrs)
}

// TestCommitBetweenPollAndRead: a credential committed after the poll but
// before the pass re-reads it (to resolve a changed connector) must still be
// applied when its own journal entry arrives. Found by the chaos suite.
func TestCommitBetweenPollAndRead(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		snapshottest.Exec(t, url, upsertCred, "tok", "v1")
		snapshottest.Exec(t, url, upsertMeta, "c", "connector", "crm", "active", connectorBodyJSON("tok"))
		var armed sync.Once
		var armedNow atomic.Bool
		hs := &hookSource{Store: s}
		hs.beforeRead = func(addrs []snapshot.Address) {
			if !armedNow.Load() {
				return
			}
			for _, a := range addrs {
				if a == (snapshot.Address{Table: snapshot.TableCredential, Key: "tok"}) {
					armed.Do(func() { snapshottest.Exec(t, url, upsertCred, "tok", "v3") })
				}
			}
		}
		b := start(t, hs, url, Options{ResyncInterval: -1, PollInterval: time.Hour})
		armedNow.Store(true)
		b.exec(`UPDATE sys_metadata SET metadata = $1 WHERE id = 'c'`, strings.Replace(connectorBodyJSON("tok"), `"rest"`, `"rest","x":1`, 1))
		b.settle() // applies the connector; the credential moves under the pass
		b.settle() // the credential's own journal entry
		if d := diffMaps(expected(t, s), actual(b)); d != "" {
			t.Fatalf("registries differ from rows: %s", d)
		}
	})
}

// TestPendingWhileWaiting: a new entry is listed as pending until its
// materialization ends.
func TestPendingWhileWaiting(t *testing.T) {
	t.Parallel()
	s, url := snapshottest.NewSQLite(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	c := newCounter(func(ctx context.Context, d Desired) error {
		if d.Key == "slow" {
			close(entered)
			<-release
		}
		return nil
	})
	b := start(t, s, url, Options{ResyncInterval: -1, Materializers: map[registry.Kind]Materializer{registry.KindConnector: c}})
	b.exec(upsertMeta, "s", "connector", "slow", "active", strings.Replace(connectorBodyJSON(""), `"type":"bearer"`, `"type":"none"`, 1))
	b.rec.Reconcile()
	<-entered
	if e, ok := b.entry(registry.KindConnector, "slow"); !ok || e.State != registry.StatePending || e.Reason != "not tried yet" {
		t.Fatalf("while materializing: %+v, want pending", e)
	}
	if n := b.rec.Status().Counts[registry.KindConnector][registry.StatePending]; n != 1 {
		t.Fatalf("pending count %d", n)
	}
	close(release)
	b.settle()
	if st := b.state(registry.KindConnector, "slow"); st != registry.StateReady {
		t.Fatalf("after: %s", st)
	}
	if n := b.rec.Status().Counts[registry.KindConnector][registry.StatePending]; n != 0 {
		t.Fatalf("pending count after: %d", n)
	}
}

// TestDependentReadAtNewerRevision: a dependent re-read during a pass at a
// revision newer than its journal entry so far is built and reported at
// that revision; its own entry then changes nothing more.
func TestDependentReadAtNewerRevision(t *testing.T) {
	t.Parallel()
	snapshottest.Each(t, func(t *testing.T, s snapshot.Store, url string) {
		snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, metadata) VALUES
			('o','object','account','{"fields":{}}'), ('v','view','all','{"object":"account"}')`)
		viewAddr := snapshot.Address{Table: snapshot.TableMetadata, Key: "v"}
		var once sync.Once
		var armed atomic.Bool
		hs := &hookSource{Store: s}
		hs.beforeRead = func(addrs []snapshot.Address) {
			if armed.Load() && slices.Contains(addrs, viewAddr) {
				once.Do(func() {
					snapshottest.Exec(t, url, `UPDATE sys_metadata SET metadata = '{"object":"account","label":"All"}' WHERE id = 'v'`)
				})
			}
		}
		var mu sync.Mutex
		var reported []Change
		b := start(t, hs, url, Options{ResyncInterval: -1, PollInterval: time.Hour, OnPass: func(p PassResult) {
			mu.Lock()
			reported = append(reported, p.Changes...)
			mu.Unlock()
		}})
		eng := b.mats[registry.KindEngine]
		eng.reset()
		armed.Store(true)
		b.exec(`UPDATE sys_metadata SET metadata = '{"fields":{"n":{"type":"text"}}}' WHERE id = 'o'`)
		b.settle()
		b.settle()
		want := expected(t, s)
		if d := diffMaps(want, actual(b)); d != "" {
			t.Fatalf("registries differ from rows: %s", d)
		}
		viewRev := want[registry.Ref{Kind: registry.KindEngine, Key: "view/all"}]
		e, _ := b.entry(registry.KindEngine, "view/all")
		if e.ServingRevision != viewRev {
			t.Fatalf("view serves revision %d, row is at %d", e.ServingRevision, viewRev)
		}
		mu.Lock()
		defer mu.Unlock()
		found := false
		for _, c := range reported {
			if c.Key == "view/all" && c.Revision == viewRev {
				found = true
			}
		}
		if !found || eng.count("view/all") != 1 {
			t.Fatalf("view: reported %v, built %d times; want one build reported at revision %d", reported, eng.count("view/all"), viewRev)
		}
	})
}
