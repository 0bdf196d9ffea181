package replica_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/internal/hashspec"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// storeRow writes object name's row in the store (checksum: the
// platform's, or NULL with nullSum) and in the nodes' stand-in rows.
func storeRow(t *testing.T, r *rig, url, id, name string, body map[string]any, nullSum bool) []byte {
	t.Helper()
	text, _ := json.Marshal(body)
	var sum any
	if !nullSum {
		s, err := hashspec.Checksum(text)
		if err != nil {
			t.Fatal(err)
		}
		sum = s
	}
	snapshottest.Exec(t, url, `INSERT INTO sys_metadata (id, type, name, state, metadata, checksum) VALUES ($1, 'object', $2, 'active', $3, $4)`, id, name, string(text), sum)
	r.db.Put("object", name, body)
	return text
}

// An object registered by the replica whose table or field column is
// missing from the nodes' database is unservable, naming what is missing,
// with its remedy; probes write nothing. With the repair, one save through
// the platform's route per object syncs the storage, the rows stay as they
// were, and the entries turn in-sync; a row with a NULL checksum is not
// saved (the platform would rewrite it) and says why.
func TestUnservableAndRepair(t *testing.T) {
	r := newRig(t)
	store, url := snapshottest.NewSQLite(t)
	cat := store.(snapshot.Catalog)
	snapshottest.Exec(t, url, `CREATE TABLE note (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, title TEXT)`)
	bodies := map[string][]byte{
		"task": storeRow(t, r, url, "o1", "task", object("title"), false),
		"note": storeRow(t, r, url, "o2", "note", object("title", "owner"), false),
		"memo": storeRow(t, r, url, "o3", "memo", object("title"), true),
	}
	var mu sync.Mutex
	var saved []string
	n := r.node(t, replicatest.Options{
		NoTable: func(name string) bool {
			_, ok, _ := cat.Columns(context.Background(), name)
			return !ok
		},
		// The platform's save of an unchanged body: no row written, the
		// object's storage synced (table, then missing columns).
		Save: func(name string, body []byte) int {
			mu.Lock()
			saved = append(saved, name)
			mu.Unlock()
			if !bytes.Equal(body, bodies[name]) {
				t.Errorf("saved %s with %s, want the stored body %s", name, body, bodies[name])
				return 400
			}
			if _, ok, _ := cat.Columns(context.Background(), name); !ok {
				snapshottest.Exec(t, url, `CREATE TABLE `+name+` (id TEXT PRIMARY KEY, created_at TEXT, updated_at TEXT, title TEXT, owner TEXT)`)
			} else {
				snapshottest.Exec(t, url, `ALTER TABLE `+name+` ADD COLUMN owner TEXT`)
			}
			return 200
		},
	})
	keys := []string{"object/task", "object/note", "object/memo"}
	notify := func(d sidecar) {
		for _, k := range keys {
			d.Notify(change(registry.KindEngine, k, reconcile.ActionCreate))
		}
	}
	a := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) { o.Catalog = cat })
	notify(a)
	for _, k := range keys {
		eventually(t, k+" unservable", stateIs(a, registry.KindEngine, k, registry.ReplicaUnservable))
	}
	for k, want := range map[string]string{
		"object/task": "object task has no table",
		"object/note": "field owner of object note has no column in table note",
	} {
		st, _ := a.Status(registry.KindEngine, k)
		if !strings.Contains(st.Error, want) || !strings.Contains(st.Remedy, "PUT /api/v1/meta/object/") || !strings.Contains(st.Remedy, "replica.repair: schema") {
			t.Errorf("%s: %+v, want the error to say %q and the remedy", k, st, want)
		}
	}
	if drift := a.Drift(); drift.Counts[registry.ReplicaUnservable] != 3 || len(drift.Lagging) != 3 {
		t.Errorf("drift: %+v", drift)
	}
	if n.Writes.Load() != 0 || n.Saves.Load() != 0 {
		t.Fatalf("probes wrote: %d writes, %d saves", n.Writes.Load(), n.Saves.Load())
	}
	// A row that vanishes without a change told (the eviction guard holds
	// its deletion): the checks of its storage announce nothing.
	tp := r.tap(t)
	r.db.Delete("object", "memo")
	checks := func() float64 {
		// Served, its row unseen by the replica (no overlay).
		return testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_verifications_total", "result", "unseen"))
	}
	c0 := checks()
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "memo checked again twice", func() bool { return checks() >= c0+2 })
	if st, _ := a.Status(registry.KindEngine, "object/memo"); st.State != registry.ReplicaUnservable {
		t.Fatalf("memo after its row vanished: %+v", st)
	}
	for _, m := range tp.all() {
		if strings.Contains(m.Raw, `"memo"`) {
			t.Fatalf("a vanished row was announced: %s", m.Raw)
		}
	}
	r.db.Put("object", "memo", object("title"))

	before, _ := cat.MetadataNamed(context.Background(), "object", "task")
	b := r.sidecar(t, n, "reconciler:b", func(o *replica.Options) {
		o.Catalog = cat
		o.Repair = struct {
			snapshot.Leaser
			snapshot.Catalog
		}{store, cat}
	})
	notify(b)
	for _, k := range []string{"object/task", "object/note"} {
		eventually(t, k+" repaired and in-sync", stateIs(b, registry.KindEngine, k, registry.ReplicaInSync))
		// The sidecar without the repair sees it too, at its next check.
		eventually(t, k+" in-sync beside", stateIs(a, registry.KindEngine, k, registry.ReplicaInSync))
	}
	eventually(t, "memo's repair refused", func() bool {
		st, _ := b.Status(registry.KindEngine, "object/memo")
		return st.State == registry.ReplicaUnservable && strings.Contains(st.Error, "repair not tried") && strings.Contains(st.Error, "NULL") &&
			strings.Contains(st.Error, "reconciler checksum --row o3")
	})
	after, _ := cat.MetadataNamed(context.Background(), "object", "task")
	if len(after) != 1 || !bytes.Equal(after[0].Metadata, before[0].Metadata) || after[0].Revision != before[0].Revision {
		t.Fatalf("rows of task before %+v after %+v", before, after)
	}
	mu.Lock()
	got := append([]string(nil), saved...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("saves %v, want one of task and one of note", got)
	}
	if v := testutil.ToFloat64(metric(t, b.reg, "reconciler_replica_repairs_total", "result", "ok")); v != 2 {
		t.Fatalf("repairs ok = %v, want 2", v)
	}
	// Once per body: the storage lost again, the same body is not saved
	// again (no loop of saves).
	snapshottest.Exec(t, url, `DROP TABLE task`)
	b.Notify(change(registry.KindEngine, "object/task", reconcile.ActionRebuild))
	eventually(t, "task unservable again", func() bool {
		st, _ := b.Status(registry.KindEngine, "object/task")
		return st.State == registry.ReplicaUnservable && strings.Contains(st.Error, "already tried once")
	})
	if s := n.Saves.Load(); s != 2 {
		t.Fatalf("%d saves, want still 2", s)
	}
	if l, _, now, err := store.ReadLease(context.Background(), snapshot.LeaseRepair); err != nil || l.Held(now) {
		t.Fatalf("repair lease still held: %+v %v", l, err)
	}
}

// logBuffer collects a Driver's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// While the bus refuses every PUBLISH, an entry's probes and publishes
// back off (doubling to MaxBackoff) instead of repeating every
// MinBackoff; the failure is the entry's error, a condition in the
// summary and the gauge, and one log line.
func TestBusDownBacksOffAndShows(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	logs := &logBuffer{}
	dead := "redis://" + proctest.FreeAddr(t)
	a := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) {
		bus, err := replica.NewRedisBus(dead)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		o.Bus = bus
		o.MinBackoff, o.MaxBackoff = 50*time.Millisecond, 800*time.Millisecond
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		replica.RouteRedisLogs(o.Logger)
	})
	r.db.Put("object", "task", object("subject"))
	r.db.Put("object", "note", object("subject"))
	start := time.Now()
	a.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	a.Notify(change(registry.KindEngine, "object/note", reconcile.ActionCreate))
	probes := func() float64 {
		return testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_verifications_total", "result", "lacking"))
	}
	eventually(t, "the bus failure shows", func() bool {
		st, _ := a.Status(registry.KindEngine, "object/task")
		s := a.Summary()
		return st.State == registry.ReplicaNudged && strings.Contains(st.Error, "bus: publish on os:ps:metadata.mutated") &&
			!s.BusUp && len(s.Errors) == 1 && strings.Contains(s.Errors[0], "bus:")
	})
	// Let the waits grow past their cap: 50ms doubling to 800ms sums to
	// 1.55s over the first five failures, then 800ms each.
	proctest.Eventually(t, 30*time.Second, 50*time.Millisecond, "3s of the outage", func() bool { return time.Since(start) > 3*time.Second })
	elapsed := time.Since(start)
	got := probes()
	// Without backoff each entry would be probed every 50ms (about 60 in
	// 3s); with it about 8: allow jitter (±20%) and a step in flight.
	bound := 2 * (5 + (elapsed.Seconds()-1.55*0.8)/(0.8*0.8) + 2)
	t.Logf("%.0f probes and %.0f failed publishes for 2 entries in %s of bus outage (bound %.0f)", got,
		testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_publishes_total", "channel", "metadata.mutated", "result", "error")), elapsed.Round(time.Millisecond), bound)
	if got > bound {
		t.Fatalf("%.0f probes in %s of bus outage, want at most %.0f (backoff)", got, elapsed, bound)
	}
	if v := testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_nudges_total")); v < 2 {
		t.Fatalf("nudges_total = %v while entries are nudged again", v)
	}
	if v := testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_condition", "condition", "bus")); v != 1 {
		t.Fatalf("bus condition gauge = %v", v)
	}
	if c := logs.count(`"msg":"replica bus unavailable`); c != 1 {
		t.Fatalf("%d log lines of the bus outage, want 1:\n%s", c, logs.buf.String())
	}
	// The Redis client's own lines come through slog, at debug.
	if c := logs.count(`"msg":"bus client"`); c == 0 {
		t.Fatal("the Redis client's log lines did not go through slog")
	}
}

// The requests of the whole Driver are bounded by MaxProbesPerSecond.
func TestProbeRateLimit(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	a := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) { o.MaxProbesPerSecond = 10 })
	start := time.Now()
	for i := range 20 {
		name := "obj" + string(rune('a'+i))
		r.db.Put("object", name, object("subject"))
		a.Notify(change(registry.KindEngine, "object/"+name, reconcile.ActionCreate))
	}
	probes := func() float64 {
		return testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_verifications_total", "result", "lacking")) +
			testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_verifications_total", "result", "in-sync"))
	}
	proctest.Eventually(t, 30*time.Second, 20*time.Millisecond, "20 probes", func() bool { return probes() >= 20 })
	// Each probe is at least one request (health reads come on top): at
	// most 10 start in any second, so 20 probes take at least 1 s.
	if took := time.Since(start); took < 950*time.Millisecond {
		t.Fatalf("20 probes in %s at 10 requests/s", took)
	}
}

// A replica that refuses the token shows it in the entry's error and the
// summary, logged once.
func TestRefusedTokenShows(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{Token: "osk_the-right-one"})
	logs := &logBuffer{}
	a := r.sidecar(t, n, "reconciler:a", func(o *replica.Options) { o.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	r.db.Put("object", "task", object("subject"))
	a.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "refusal shows", func() bool {
		st, _ := a.Status(registry.KindEngine, "object/task")
		s := a.Summary()
		return st.State == registry.ReplicaNudged && strings.Contains(st.Error, "replica refused the credential: 401") &&
			len(s.Errors) == 1 && strings.Contains(s.LastError, "refused the credential") && s.Reachable
	})
	eventually(t, "probed again", func() bool {
		return testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_verifications_total", "result", "error")) >= 3
	})
	if c := logs.count(`"msg":"replica refused the credential`); c != 1 {
		t.Fatalf("%d log lines of the refusal, want 1", c)
	}
	if strings.Contains(logs.buf.String(), token) {
		t.Fatal("the token is in the log")
	}
}

// A replica of a platform major this reconciler does not know is not
// driven: nothing is published, and each entry says why, naming both
// versions.
func TestUnknownMajorIsNotDriven(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{Version: "18.0.1"})
	tp := r.tap(t)
	a := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("object", "task", object("subject"))
	a.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "would-publish with the reason", func() bool {
		st, _ := a.Status(registry.KindEngine, "object/task")
		return st.State == registry.ReplicaWouldPublish && strings.Contains(st.Error, "ObjectStack 18.0.1") && strings.Contains(st.Error, "17.x")
	})
	if s := a.Summary(); s.Driving {
		t.Fatalf("summary says driving: %+v", s)
	}
	if c := tp.count(replica.ChannelMetadata); c != 0 || n.Registered("task") {
		t.Fatalf("%d messages published for a replica not driven", c)
	}
}
