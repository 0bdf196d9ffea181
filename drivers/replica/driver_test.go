package replica_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/internal/proctest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "osk_canary-token-5f3a"

type rig struct {
	redis *replicatest.Redis
	db    *replicatest.DB
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r, err := replicatest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return &rig{redis: r, db: replicatest.NewDB()}
}

func (r *rig) node(t *testing.T, opts replicatest.Options) *replicatest.Node {
	t.Helper()
	opts.BusURL = r.redis.URL()
	if opts.Token == "" {
		opts.Token = token
	}
	n, err := replicatest.Start(r.db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// fast are options that keep the tests short.
func fast(o replica.Options) replica.Options {
	o.Jitter = 50 * time.Millisecond
	o.Settle = 100 * time.Millisecond
	o.MinBackoff = 100 * time.Millisecond
	o.MaxBackoff = time.Second
	o.HealthInterval = 100 * time.Millisecond
	return o
}

type sidecar struct {
	*replica.Driver
	reg *prometheus.Registry
}

func (r *rig) sidecar(t *testing.T, n *replicatest.Node, origin string, edit func(*replica.Options)) sidecar {
	t.Helper()
	bus, err := replica.NewRedisBus(r.redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	client := &http.Client{Transport: &http.Transport{}}
	opts := fast(replica.Options{URL: n.URL(), Token: token, Bus: bus, Origin: origin, Client: client, Metrics: replica.NewMetrics(reg)})
	if edit != nil {
		edit(&opts)
	}
	d, err := replica.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		client.CloseIdleConnections()
		_ = bus.Close()
	})
	return sidecar{Driver: d, reg: reg}
}

// tap records every lane message on the bus.
type tap struct {
	mu   sync.Mutex
	msgs []tapped
}

type tapped struct {
	Channel string
	Raw     string
}

func (r *rig) tap(t *testing.T) *tap {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.redis.Addr(), DisableIdentity: true})
	ctx, cancel := context.WithCancel(context.Background())
	ps := rdb.PSubscribe(ctx, "os:ps:*")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			tp.mu.Lock()
			tp.msgs = append(tp.msgs, tapped{strings.TrimPrefix(m.Channel, "os:ps:"), m.Payload})
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = ps.Close()
		<-done
		_ = rdb.Close()
	})
	return tp
}

func (tp *tap) all() []tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapped(nil), tp.msgs...)
}

func (tp *tap) count(channel string) int {
	n := 0
	for _, m := range tp.all() {
		if m.Channel == channel {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 30*time.Second, 10*time.Millisecond, what, cond)
}

func change(kind registry.Kind, key string, action reconcile.Action) reconcile.ChangeSet {
	return reconcile.ChangeSet{ReplicaID: "r", Changes: []reconcile.Change{{Kind: kind, Key: key, Action: action, Revision: 1, State: registry.StateReady}}}
}

func stateIs(d sidecar, kind registry.Kind, key string, want registry.ReplicaState) func() bool {
	return func() bool {
		st, ok := d.Status(kind, key)
		return ok && st.State == want
	}
}

func object(fields ...string) map[string]any {
	f := map[string]any{}
	for _, n := range fields {
		f[n] = map[string]any{"type": "text", "label": n}
	}
	return map[string]any{"name": "x", "label": "X", "fields": f}
}

func TestObjectCreatedChangedDeleted(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	tp := r.tap(t)

	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "task in-sync", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	if !n.Registered("task") {
		t.Fatal("in-sync but the node does not serve task")
	}
	if st, _ := d.Status(registry.KindEngine, "object/task"); st.Attempts != 1 {
		t.Fatalf("attempts = %d, want 1", st.Attempts)
	} else if st.LastMessage.IsZero() || st.LastProbe.IsZero() || st.Probe != "in-sync" || st.LastProbe.Before(st.LastMessage) {
		t.Fatalf("last message %v, last probe %v: %q (want a message, then a probe answering in-sync)", st.LastMessage, st.LastProbe, st.Probe)
	}

	r.db.Put("object", "task", object("subject", "priority"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionRebuild))
	eventually(t, "field served", func() bool {
		f, _ := n.Object("task")["fields"].(map[string]any)
		return f["priority"] != nil
	})
	eventually(t, "task in-sync again", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))

	r.db.Delete("object", "task")
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionEvict))
	eventually(t, "task unregistered", func() bool { return !n.Registered("task") })
	eventually(t, "entry dropped once the deletion is in sync", func() bool {
		_, ok := d.Status(registry.KindEngine, "object/task")
		return !ok
	})
	if got := tp.count(replica.ChannelMetadata); got != 3 {
		t.Fatalf("%d metadata.mutated messages for 3 changes, want 3: %v", got, tp.all())
	}
	if n.Writes.Load() != 0 {
		t.Fatalf("probes wrote %d times", n.Writes.Load())
	}
}

func TestNothingPublishedWhenTheReplicaAlreadyAgrees(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	tp := r.tap(t)
	r.db.Put("object", "task", object("subject"))
	// Another sidecar told the node already.
	other := r.sidecar(t, n, "reconciler:other", nil)
	other.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "node serves task", func() bool { return n.Registered("task") })

	d := r.sidecar(t, n, "reconciler:a", nil)
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "in-sync", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	if st, _ := d.Status(registry.KindEngine, "object/task"); st.Attempts != 0 {
		t.Fatalf("published %d times to a replica that had the change", st.Attempts)
	}
	if got := tp.count(replica.ChannelMetadata); got != 1 {
		t.Fatalf("%d messages, want 1", got)
	}
}

func TestLostMessagesAreNudgedAgain(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{DropFirst: 2})
	d := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "in-sync despite two lost messages", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	st, _ := d.Status(registry.KindEngine, "object/task")
	if st.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3 (two lost)", st.Attempts)
	}
	if got := testutil.ToFloat64(metric(t, d.reg, "reconciler_replica_publishes_total", "channel", replica.ChannelMetadata, "result", "ok")); got != 3 {
		t.Fatalf("publishes metric = %v", got)
	}
	if got := testutil.ToFloat64(metric(t, d.reg, "reconciler_replica_nudges_total")); got != 2 {
		t.Fatalf("nudges metric = %v", got)
	}
}

func TestNudgedStateNamesWhatIsMissing(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{DropFirst: 1 << 30}) // loses everything
	d := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "nudged twice", func() bool {
		st, _ := d.Status(registry.KindEngine, "object/task")
		return st.State == registry.ReplicaNudged && st.Attempts >= 2
	})
	st, _ := d.Status(registry.KindEngine, "object/task")
	if !strings.Contains(st.Error, "object task is not registered") {
		t.Fatalf("error = %q", st.Error)
	}
}

func TestFlowsAndPermissionSetsChangedByRowAreStale(t *testing.T) {
	for _, typ := range []string{"permission", "flow"} {
		t.Run(typ, func(t *testing.T) {
			r := newRig(t)
			r.db.Put(typ, "editor", map[string]any{"name": "editor", "objects": map[string]any{"task": map[string]any{"allowRead": true}}})
			n := r.node(t, replicatest.Options{})
			d := r.sidecar(t, n, "reconciler:a", nil)
			tp := r.tap(t)
			key := typ + "/editor"

			d.Notify(change(registry.KindEngine, key, reconcile.ActionCreate))
			eventually(t, "in-sync at boot", stateIs(d, registry.KindEngine, key, registry.ReplicaInSync))

			r.db.Put(typ, "editor", map[string]any{"name": "editor", "objects": map[string]any{"task": map[string]any{"allowRead": true, "allowEdit": true}}})
			d.Notify(change(registry.KindEngine, key, reconcile.ActionRebuild))
			eventually(t, "stale", stateIs(d, registry.KindEngine, key, registry.ReplicaStale))
			st, _ := d.Status(registry.KindEngine, key)
			if st.Remedy != replica.RestartRemedy || !strings.Contains(st.Error, "older copy") {
				t.Fatalf("status = %+v", st)
			}
			wantAuthz := 0
			if typ == "permission" {
				wantAuthz = 1
			}
			eventually(t, "lane sent", func() bool { return tp.count(replica.ChannelMetadata) == 1 })
			if got := tp.count(replica.ChannelAuthz); got != wantAuthz {
				t.Fatalf("%d authz.invalidated, want %d", got, wantAuthz)
			}

			n.Restart() // the remedy
			eventually(t, "in-sync after the restart", stateIs(d, registry.KindEngine, key, registry.ReplicaInSync))
		})
	}
}

func TestRestartedReplicaGetsItsObjectsBack(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	names := []string{"a1", "a2", "a3", "a4", "a5"}
	cs := reconcile.ChangeSet{}
	for _, name := range names {
		r.db.Put("object", name, object("f"))
		cs.Changes = append(cs.Changes, reconcile.Change{Kind: registry.KindEngine, Key: "object/" + name, Action: reconcile.ActionCreate})
	}
	r.db.Put("view", "all_a1", map[string]any{"object": "a1"})
	cs.Changes = append(cs.Changes, reconcile.Change{Kind: registry.KindEngine, Key: "view/all_a1", Action: reconcile.ActionCreate})
	d.Notify(cs)
	for _, name := range names {
		eventually(t, name+" in-sync", stateIs(d, registry.KindEngine, "object/"+name, registry.ReplicaInSync))
	}
	eventually(t, "view unverifiable", stateIs(d, registry.KindEngine, "view/all_a1", registry.ReplicaUnverifiable))

	// A replica that has served a while restarts: the sidecar reads its
	// uptime every HealthInterval (100 ms here), and a process restarted
	// within that of its boot shows no restart (its uptime never went
	// down). Probes no longer wait 50 ms for each other, so the objects
	// are in sync sooner than that.
	for n.Uptime() < 500*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
	}
	n.Restart()
	eventually(t, "every object served again, no write, no change told", func() bool {
		for _, name := range names {
			if !n.Registered(name) {
				return false
			}
		}
		return true
	})
	eventually(t, "restart counted", func() bool {
		return testutil.ToFloat64(metric(t, d.reg, "reconciler_replica_restarts_total")) == 1
	})
	for _, name := range names {
		eventually(t, name+" in-sync after heal", stateIs(d, registry.KindEngine, "object/"+name, registry.ReplicaInSync))
	}
}

func TestReplicaDownWaitsAndRecovers(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	n.SetDown(true)
	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "nudged with the reason", func() bool {
		st, _ := d.Status(registry.KindEngine, "object/task")
		return st.State == registry.ReplicaNudged && strings.Contains(st.Error, "replica unreachable")
	})
	n.SetDown(false)
	eventually(t, "in-sync once it is back", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
}

func TestRefusedTokenIsAReasonWithoutTheToken(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{Token: "osk_the-right-one"})
	d := r.sidecar(t, n, "reconciler:a", nil) // sends the canary token: refused
	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "refusal reported", func() bool {
		st, _ := d.Status(registry.KindEngine, "object/task")
		return strings.Contains(st.Error, "refused the credential: 401")
	})
	st, _ := d.Status(registry.KindEngine, "object/task")
	raw, _ := json.Marshal(st)
	if strings.Contains(string(raw), token) {
		t.Fatalf("status shows the token: %s", raw)
	}
}

func TestDatasourcePoolFollowsTheRow(t *testing.T) {
	r := newRig(t)
	r.db.Put("datasource", "crm", map[string]any{"name": "crm", "active": true})
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	d.Notify(change(registry.KindDatasource, "crm", reconcile.ActionCreate))
	eventually(t, "in-sync", stateIs(d, registry.KindDatasource, "crm", registry.ReplicaInSync))

	r.db.Put("datasource", "crm", map[string]any{"name": "crm", "active": false})
	d.Notify(change(registry.KindDatasource, "crm", reconcile.ActionEvict))
	eventually(t, "pool closed", func() bool { return !n.Pool("crm") })
}

func TestUnobservableEntriesArePublishedOnceAndNeverInSync(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	tp := r.tap(t)
	d := r.sidecar(t, n, "reconciler:a", nil)
	d.Notify(reconcile.ChangeSet{Changes: []reconcile.Change{
		{Kind: registry.KindEngine, Key: "org_1:view/all_tasks", Action: reconcile.ActionCreate},
		{Kind: registry.KindEngine, Key: "hook/on_task", Action: reconcile.ActionCreate},
		{Kind: registry.KindCredential, Key: "crm-token", Action: reconcile.ActionRebuild},
		{Kind: registry.KindCredential, Key: "sys_secret:sec_01", Action: reconcile.ActionRebuild},
		{Kind: registry.KindConnector, Key: "crm", Action: reconcile.ActionRebuild},
	}})
	for _, ref := range []registry.Ref{{Kind: registry.KindEngine, Key: "org_1:view/all_tasks"}, {Kind: registry.KindEngine, Key: "hook/on_task"},
		{Kind: registry.KindCredential, Key: "crm-token"}, {Kind: registry.KindConnector, Key: "crm"}} {
		eventually(t, ref.String()+" unverifiable", stateIs(d, ref.Kind, ref.Key, registry.ReplicaUnverifiable))
	}
	eventually(t, "5 messages", func() bool { return len(tp.all()) == 5 })
	var refs []string
	for _, m := range tp.all() {
		if m.Channel == replica.ChannelCredential {
			var env struct {
				P map[string]any `json:"p"`
			}
			if err := json.Unmarshal([]byte(m.Raw), &env); err != nil {
				t.Fatal(err)
			}
			if len(env.P) != 2 {
				t.Fatalf("credential payload has more than originNode and ref: %s", m.Raw)
			}
			refs = append(refs, env.P["ref"].(string))
		}
	}
	if strings.Join(sorted(refs), ",") != "crm,crm-token,sys_secret:sec_01" {
		t.Fatalf("refs = %v", refs)
	}
}

func TestBadKeyAffectsOnlyItsEntry(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("object", "task", object("subject"))
	d.Notify(reconcile.ChangeSet{Changes: []reconcile.Change{
		{Kind: registry.KindEngine, Key: "object/bad%zz", Action: reconcile.ActionCreate},
		{Kind: registry.KindEngine, Key: "no-slash", Action: reconcile.ActionCreate},
		{Kind: registry.KindEngine, Key: "object/task", Action: reconcile.ActionCreate},
	}})
	eventually(t, "good entry in-sync", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	if _, ok := d.Status(registry.KindEngine, "no-slash"); ok {
		t.Fatal("a key without type/name is driven")
	}
}

// With N sidecars beside N replicas on one bus, a change costs about one
// message: each checks its own replica first and sees the others' messages.
func TestFleetSendsAboutOneMessagePerChange(t *testing.T) {
	const sidecars, changes = 5, 20
	r := newRig(t)
	tp := r.tap(t)
	var ds []sidecar
	var nodes []*replicatest.Node
	for i := range sidecars {
		n := r.node(t, replicatest.Options{})
		nodes = append(nodes, n)
		ds = append(ds, r.sidecar(t, n, "reconciler:"+string(rune('a'+i)), nil))
	}
	for c := range changes {
		name := "obj" + string(rune('a'+c))
		r.db.Put("object", name, object("f"))
		for _, d := range ds {
			d.Notify(change(registry.KindEngine, "object/"+name, reconcile.ActionCreate))
		}
		for _, d := range ds {
			eventually(t, name+" in-sync everywhere", stateIs(d, registry.KindEngine, "object/"+name, registry.ReplicaInSync))
		}
	}
	for _, n := range nodes {
		for c := range changes {
			if !n.Registered("obj" + string(rune('a'+c))) {
				t.Fatal("in-sync but not served")
			}
		}
	}
	msgs := tp.count(replica.ChannelMetadata)
	t.Logf("%d sidecars, %d changes: %d messages (%.2f per change)", sidecars, changes, msgs, float64(msgs)/changes)
	if msgs >= changes*sidecars/2 {
		t.Fatalf("%d messages for %d changes across %d sidecars: not O(1) per change", msgs, changes, sidecars)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// metric finds one series of a family in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	return gathered{reg: reg, name: name, labels: labels}
}

type gathered struct {
	reg    *prometheus.Registry
	name   string
	labels []string
}

func (g gathered) Describe(chan<- *prometheus.Desc) {}

func (g gathered) Collect(ch chan<- prometheus.Metric) {
	fams, _ := g.reg.Gather()
	for _, f := range fams {
		if f.GetName() != g.name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			want := map[string]string{}
			for i := 0; i+1 < len(g.labels); i += 2 {
				want[g.labels[i]] = g.labels[i+1]
			}
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.UntypedValue, v)
			return
		}
	}
}

// Through a bus that loses half the PUBLISH commands, two replicas still
// converge: each sidecar checks its own and nudges again.
func TestConvergesThroughALossyBus(t *testing.T) {
	r := newRig(t)
	proxy, err := replicatest.NewLossyProxy(r.redis.Addr(), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var ds []sidecar
	var nodes []*replicatest.Node
	for _, origin := range []string{"reconciler:a", "reconciler:b"} {
		n := r.node(t, replicatest.Options{})
		nodes = append(nodes, n)
		ds = append(ds, r.sidecar(t, n, origin, func(o *replica.Options) {
			bus, err := replica.NewRedisBus(proxy.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = bus.Close() })
			o.Bus = bus
		}))
	}
	const changes = 10
	for c := range changes {
		name := "lossy" + string(rune('a'+c))
		r.db.Put("object", name, object("f"))
		for _, d := range ds {
			d.Notify(change(registry.KindEngine, "object/"+name, reconcile.ActionCreate))
		}
	}
	for c := range changes {
		name := "lossy" + string(rune('a'+c))
		for i, d := range ds {
			eventually(t, name+" in-sync", stateIs(d, registry.KindEngine, "object/"+name, registry.ReplicaInSync))
			if !nodes[i].Registered(name) {
				t.Fatalf("%s in-sync but not served", name)
			}
		}
	}
	t.Logf("PUBLISH through the proxy: %d, lost: %d", proxy.Published.Load(), proxy.Dropped.Load())
	if proxy.Dropped.Load() == 0 {
		t.Log("no message was lost this time")
	}
}

func TestTranslationServedForItsLocale(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("translation", "fr_crm", map[string]any{"name": "fr_crm", "locale": "fr", "objects": map[string]any{"task": map[string]any{"label": "Tâche"}}})
	d.Notify(change(registry.KindEngine, "translation/fr_crm", reconcile.ActionCreate))
	eventually(t, "translation in-sync", stateIs(d, registry.KindEngine, "translation/fr_crm", registry.ReplicaInSync))
	if st, _ := d.Status(registry.KindEngine, "translation/fr_crm"); st.Attempts != 1 {
		t.Fatalf("attempts = %d", st.Attempts)
	}
}

// A process that lived briefly and booted slowly answers with a higher
// uptime than the old one last showed: still a restart.
func TestRestartAfterAShortLifeAndASlowBoot(t *testing.T) {
	r := newRig(t)
	n := r.node(t, replicatest.Options{})
	d := r.sidecar(t, n, "reconciler:a", nil)
	r.db.Put("object", "task", object("subject"))
	d.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "in-sync", stateIs(d, registry.KindEngine, "object/task", registry.ReplicaInSync))
	eventually(t, "the node up for a while", func() bool { return n.Uptime() > 1500*time.Millisecond })
	n.RestartBooted(2500 * time.Millisecond)
	eventually(t, "served again", func() bool { return n.Registered("task") })
}

// A datasource whose connection settings change stays "ok" in the node's
// list before and after: the sidecar tells the node once anyway (a fleet
// still sends about one message), then checks the pool is there.
func TestDatasourceRebuiltIsToldOnce(t *testing.T) {
	r := newRig(t)
	r.db.Put("datasource", "crm", map[string]any{"name": "crm", "active": true, "config": map[string]any{"host": "db1"}})
	n := r.node(t, replicatest.Options{})
	tp := r.tap(t)
	var ds []sidecar
	for _, origin := range []string{"reconciler:a", "reconciler:b"} {
		ds = append(ds, r.sidecar(t, n, origin, nil))
	}
	for _, d := range ds {
		d.Notify(change(registry.KindDatasource, "crm", reconcile.ActionCreate))
	}
	for _, d := range ds {
		eventually(t, "in-sync", stateIs(d, registry.KindDatasource, "crm", registry.ReplicaInSync))
	}
	if got := tp.count(replica.ChannelDatasource); got != 0 {
		t.Fatalf("%d messages for a datasource the node already had", got)
	}
	r.db.Put("datasource", "crm", map[string]any{"name": "crm", "active": true, "config": map[string]any{"host": "db2"}})
	for _, d := range ds {
		d.Notify(change(registry.KindDatasource, "crm", reconcile.ActionRebuild))
	}
	for _, d := range ds {
		eventually(t, "in-sync after the rebuild", stateIs(d, registry.KindDatasource, "crm", registry.ReplicaInSync))
	}
	if got := tp.count(replica.ChannelDatasource); got < 1 || got > 2 {
		t.Fatalf("%d messages for one datasource change across 2 sidecars", got)
	}
}
