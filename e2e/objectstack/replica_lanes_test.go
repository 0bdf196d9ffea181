//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// converge bounds how long a change may take to reach both nodes: the
// first publish's jitter, the settle time and a few nudges.
const converge = 30 * time.Second

// busTap records every message on the stack's bus ("os:ps:*").
type busTap struct {
	mu   sync.Mutex
	msgs []Message
	sub  *Subscription
	done chan struct{}
}

func tapBus(t *testing.T, r *Redis) *busTap {
	t.Helper()
	sub, err := r.PSubscribe("os:ps:*")
	if err != nil {
		t.Fatal(err)
	}
	tp := &busTap{sub: sub, done: make(chan struct{})}
	go func() {
		defer close(tp.done)
		for m := range sub.C {
			tp.mu.Lock()
			tp.msgs = append(tp.msgs, m)
			tp.mu.Unlock()
		}
	}()
	t.Cleanup(tp.close)
	return tp
}

func (tp *busTap) close() {
	tp.sub.Close()
	<-tp.done
}

func (tp *busTap) all() []Message {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]Message(nil), tp.msgs...)
}

// fromSidecars counts the sidecars' messages on channel whose payload
// contains needle.
func (tp *busTap) fromSidecars(channel, needle string) int {
	n := 0
	for _, m := range tp.all() {
		if m.Channel == "os:ps:"+channel && strings.Contains(m.Payload, `"n":"reconciler:`) && strings.Contains(m.Payload, needle) {
			n++
		}
	}
	return n
}

// laneSidecar is a replica driver beside one node, told about changes as
// the loop tells it.
type laneSidecar struct {
	name string
	drv  *replica.Driver
}

func startLaneSidecar(t *testing.T, node *Node, busURL, token string) *laneSidecar {
	t.Helper()
	bus, err := replica.NewRedisBus(busURL)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	drv, err := replica.New(replica.Options{URL: node.BaseURL(), Token: token, Bus: bus, Origin: "reconciler:" + node.Name, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		client.CloseIdleConnections()
		_ = bus.Close()
	})
	return &laneSidecar{name: node.Name, drv: drv}
}

func (s *laneSidecar) changed(kind registry.Kind, key string, action reconcile.Action) {
	s.drv.Notify(reconcile.ChangeSet{ReplicaID: s.name, Changes: []reconcile.Change{{Kind: kind, Key: key, Action: action, State: registry.StateReady}}})
}

func (s *laneSidecar) waitState(t *testing.T, kind registry.Kind, key string, want registry.ReplicaState) registry.ReplicaStatus {
	t.Helper()
	var st registry.ReplicaStatus
	err := poll(converge, 50*time.Millisecond, nil, func() error {
		var ok bool
		st, ok = s.drv.Status(kind, key)
		if !ok || st.State != want {
			return fmt.Errorf("sidecar %s: %s %s is %+v, want %s", s.name, kind, key, st, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// insertObject writes an object row with plain SQL, as another writer of
// the shared database would: no platform publish at all.
func insertObject(t *testing.T, dbURL, name, body string) {
	t.Helper()
	snapshottest.Exec(t, dbURL, `INSERT INTO sys_metadata (id, name, type, metadata, state, version) VALUES ($1, $2, 'object', $3, 'active', 1)`,
		"sql_"+name, name, body)
}

func noteBody(name string) string {
	return `{"name":"` + name + `","label":"Note","fields":{"title":{"type":"text","label":"Title"}},"sharingModel":"private","enable":{"apiEnabled":true}}`
}

// served tells whether node has registered object name (the data API
// answers 404 "not registered" otherwise; 500 means registered without a
// table, which a node that did not write the row does not create). It
// tells registration, the lanes' effect, not servability: whether records
// can be written is TestServableOnRealNodes's.
func served(t *testing.T, node *Node, name string) bool {
	t.Helper()
	resp, err := node.API().Do("GET", "/api/v1/data/"+url.PathEscape(name)+"?limit=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status != http.StatusNotFound
}

// servesField tells whether node knows field of object name (400
// INVALID_FIELD until it does).
func servesField(t *testing.T, node *Node, name, field string) bool {
	t.Helper()
	resp, err := node.API().Do("GET", "/api/v1/data/"+url.PathEscape(name)+"?limit=1&fields=id,"+url.QueryEscape(field), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status != http.StatusBadRequest
}

func waitBoth(t *testing.T, what string, nodes []*Node, cond func(*Node) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for _, n := range nodes {
		if err := poll(converge, 50*time.Millisecond, nil, func() error {
			if !cond(n) {
				return fmt.Errorf("node %s: %s", n.Name, what)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

func poolOpen(t *testing.T, node *Node, name string) bool {
	t.Helper()
	dss, err := node.API().Datasources()
	if err != nil {
		t.Fatal(err)
	}
	d := find(dss, name)
	return d != nil && d.Status == "ok"
}

// TestReplicaLanes drives two real nodes through their own lanes from two
// sidecars, for changes written with plain SQL: an object, a field, a
// datasource, a deletion, a permission set; then through a lossy bus, a
// stopped bus and a restart of node B.
func TestReplicaLanes(t *testing.T) {
	stack := NewStack(t)
	a := stack.StartNode("a")
	app := CreateApp(t, a)
	// b boots after the app exists: a 17.4 node lists only the datasources
	// it knew at boot or created itself.
	b := stack.StartNode("b")
	nodes := []*Node{a, b}
	db := stack.DatabaseURL
	tap := tapBus(t, stack.Redis)

	proxy, err := replicatest.NewLossyProxy(stack.Redis.Addr(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	sides := []*laneSidecar{startLaneSidecar(t, a, proxy.URL(), stack.Token()), startLaneSidecar(t, b, proxy.URL(), stack.Token())}
	each := func(kind registry.Kind, key string, action reconcile.Action) {
		for _, s := range sides {
			s.changed(kind, key, action)
		}
	}
	waitEach := func(kind registry.Kind, key string, want registry.ReplicaState) []registry.ReplicaStatus {
		var out []registry.ReplicaStatus
		for _, s := range sides {
			out = append(out, s.waitState(t, kind, key, want))
		}
		return out
	}
	figures := map[string]string{}

	// What the first relist tells: everything the app created through
	// node a. Node a serves its objects; node b, booted after them, does
	// not (a 17.4 node loads no run-time object at boot): only b's sidecar
	// publishes, once per object.
	for _, key := range []string{"object/rt_project", "object/rt_task"} {
		each(registry.KindEngine, key, reconcile.ActionCreate)
		waitEach(registry.KindEngine, key, registry.ReplicaInSync)
	}
	waitBoth(t, "serves rt_project and rt_task", nodes, func(n *Node) bool { return served(t, n, "rt_project") && served(t, n, "rt_task") })
	each(registry.KindDatasource, app.Datasource, reconcile.ActionCreate)
	waitEach(registry.KindDatasource, app.Datasource, registry.ReplicaInSync)
	each(registry.KindEngine, "permission/rt_task_editor", reconcile.ActionCreate)
	waitEach(registry.KindEngine, "permission/rt_task_editor", registry.ReplicaInSync)
	if n := tap.fromSidecars(replica.ChannelMetadata, `"rt_project"`) + tap.fromSidecars(replica.ChannelMetadata, `"rt_task"`); n > 2 {
		t.Errorf("%d messages for two objects only node b lacked", n)
	}

	t.Run("object created by SQL", func(t *testing.T) {
		insertObject(t, db, "rt_sql_note", noteBody("rt_sql_note"))
		if served(t, a, "rt_sql_note") || served(t, b, "rt_sql_note") {
			t.Fatal("a node serves a row nobody announced")
		}
		each(registry.KindEngine, "object/rt_sql_note", reconcile.ActionCreate)
		d := waitBoth(t, "serves rt_sql_note", nodes, func(n *Node) bool { return served(t, n, "rt_sql_note") })
		// Registered, but no node created its table: unservable (these
		// sidecars have no catalog; the data API's 500 tells).
		for _, st := range waitEach(registry.KindEngine, "object/rt_sql_note", registry.ReplicaUnservable) {
			if !strings.Contains(st.Error, "has no table") || !strings.Contains(st.Remedy, "PUT /api/v1/meta/object/rt_sql_note") {
				t.Errorf("unservable without its cause and remedy: %+v", st)
			}
		}
		msgs := tap.fromSidecars(replica.ChannelMetadata, `"rt_sql_note"`)
		figures["object created: served by both after"] = d.Round(time.Millisecond).String()
		figures["object created: messages (2 sidecars)"] = fmt.Sprint(msgs)
		if msgs < 1 || msgs > 2 {
			t.Errorf("%d messages for one change across 2 sidecars", msgs)
		}
	})

	t.Run("field added by SQL", func(t *testing.T) {
		before := tap.fromSidecars(replica.ChannelMetadata, `"rt_task"`)
		snapshottest.Exec(t, db, `UPDATE sys_metadata SET metadata = $1, version = version + 1 WHERE type = 'object' AND name = 'rt_task'`, TaskBodyV2)
		if servesField(t, b, "rt_task", "priority") {
			t.Fatal("node b serves a field nobody announced")
		}
		each(registry.KindEngine, "object/rt_task", reconcile.ActionRebuild)
		d := waitBoth(t, "serves rt_task.priority", nodes, func(n *Node) bool { return servesField(t, n, "rt_task", "priority") })
		waitEach(registry.KindEngine, "object/rt_task", registry.ReplicaInSync)
		figures["field added: served by both after"] = d.Round(time.Millisecond).String()
		figures["field added: messages (2 sidecars)"] = fmt.Sprint(tap.fromSidecars(replica.ChannelMetadata, `"rt_task"`) - before)
	})

	t.Run("datasource deactivated and reactivated by SQL", func(t *testing.T) {
		setActive := func(active bool) {
			snapshottest.Exec(t, db, `UPDATE sys_metadata SET metadata = jsonb_set(metadata::jsonb, '{active}', to_jsonb($1::boolean))::text,
				version = version + 1 WHERE type = 'datasource' AND name = $2`, active, app.Datasource)
		}
		setActive(false)
		each(registry.KindDatasource, app.Datasource, reconcile.ActionEvict)
		d := waitBoth(t, "closed the pool of "+app.Datasource, nodes, func(n *Node) bool { return !poolOpen(t, n, app.Datasource) })
		figures["datasource deactivated: both pools closed after"] = d.Round(time.Millisecond).String()
		setActive(true)
		each(registry.KindDatasource, app.Datasource, reconcile.ActionCreate)
		d = waitBoth(t, "rebuilt the pool of "+app.Datasource, nodes, func(n *Node) bool { return poolOpen(t, n, app.Datasource) })
		waitEach(registry.KindDatasource, app.Datasource, registry.ReplicaInSync)
		figures["datasource reactivated: both pools open after"] = d.Round(time.Millisecond).String()
		figures["datasource: messages for 2 changes (2 sidecars)"] = fmt.Sprint(tap.fromSidecars(replica.ChannelDatasource, app.Datasource))
	})

	t.Run("object deleted by SQL", func(t *testing.T) {
		before := tap.fromSidecars(replica.ChannelMetadata, `"rt_sql_note"`)
		snapshottest.Exec(t, db, `DELETE FROM sys_metadata WHERE type = 'object' AND name = 'rt_sql_note'`)
		each(registry.KindEngine, "object/rt_sql_note", reconcile.ActionEvict)
		d := waitBoth(t, "no longer serves rt_sql_note", nodes, func(n *Node) bool { return !served(t, n, "rt_sql_note") })
		figures["object deleted: gone from both after"] = d.Round(time.Millisecond).String()
		figures["object deleted: messages (2 sidecars)"] = fmt.Sprint(tap.fromSidecars(replica.ChannelMetadata, `"rt_sql_note"`) - before)
	})

	t.Run("permission set changed by SQL is stale on both", func(t *testing.T) {
		changed := strings.Replace(PermissionBody, `"allowEdit":true`, `"allowEdit":false`, 1)
		snapshottest.Exec(t, db, `UPDATE sys_metadata SET metadata = $1, version = version + 1 WHERE type = 'permission' AND name = 'rt_task_editor'`, changed)
		each(registry.KindEngine, "permission/rt_task_editor", reconcile.ActionRebuild)
		for _, st := range waitEach(registry.KindEngine, "permission/rt_task_editor", registry.ReplicaStale) {
			if st.Remedy != replica.RestartRemedy {
				t.Errorf("stale without the remedy: %+v", st)
			}
		}
		if n := tap.fromSidecars(replica.ChannelAuthz, `"originNode":"reconciler:`); n < 1 {
			t.Errorf("no authz.invalidated for a permission set change")
		}
	})

	t.Run("bus losing half the messages", func(t *testing.T) {
		proxy.SetLoss(0.5)
		defer proxy.SetLoss(0)
		var names []string
		for i := range 5 {
			name := fmt.Sprintf("rt_lossy_%d", i)
			names = append(names, name)
			insertObject(t, db, name, noteBody(name))
			each(registry.KindEngine, "object/"+name, reconcile.ActionCreate)
		}
		start := time.Now()
		for _, name := range names {
			waitBoth(t, "serves "+name, nodes, func(n *Node) bool { return served(t, n, name) })
			waitEach(registry.KindEngine, "object/"+name, registry.ReplicaUnservable) // registered, no table
		}
		figures["50% loss: 5 objects served by both after"] = time.Since(start).Round(time.Millisecond).String()
		figures["50% loss: PUBLISH lost / sent"] = fmt.Sprintf("%d / %d", proxy.Dropped.Load(), proxy.Published.Load())
	})

	var earlier []Message // what the tap saw before the bus restarted
	t.Run("bus stopped briefly", func(t *testing.T) {
		earlier = tap.all()
		tap.close()
		stack.Redis.Stop()
		insertObject(t, db, "rt_busdown", noteBody("rt_busdown"))
		each(registry.KindEngine, "object/rt_busdown", reconcile.ActionCreate)
		for _, s := range sides {
			if err := poll(converge, 50*time.Millisecond, nil, func() error {
				st, _ := s.drv.Status(registry.KindEngine, "object/rt_busdown")
				if st.State != registry.ReplicaNudged || st.Error == "" {
					return fmt.Errorf("sidecar %s: %+v", s.name, st)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		stack.Redis.Start()
		start := time.Now()
		waitBoth(t, "serves rt_busdown", nodes, func(n *Node) bool { return served(t, n, "rt_busdown") })
		figures["bus back: served by both after"] = time.Since(start).Round(time.Millisecond).String()
		tap = tapBus(t, stack.Redis)
	})

	t.Run("node b restarted gets its run-time objects back", func(t *testing.T) {
		b.Restart()
		start := time.Now()
		runtime := []string{"rt_project", "rt_task", "rt_lossy_0", "rt_lossy_4", "rt_busdown"}
		waitBoth(t, "serves every run-time object again", []*Node{b}, func(n *Node) bool {
			for _, name := range runtime {
				if !served(t, n, name) {
					return false
				}
			}
			return true
		})
		figures["node b restarted: run-time objects back after ready"] = time.Since(start).Round(time.Millisecond).String()
		if !servesField(t, b, "rt_task", "priority") {
			t.Error("node b serves rt_task without its SQL-added field after the heal")
		}
		// The restart is the remedy of b's stale permission set; a's stays.
		sides[1].waitState(t, registry.KindEngine, "permission/rt_task_editor", registry.ReplicaInSync)
		if st, _ := sides[0].drv.Status(registry.KindEngine, "permission/rt_task_editor"); st.State != registry.ReplicaStale {
			t.Errorf("node a's permission set: %+v, want stale", st)
		}
	})

	all := append(earlier, tap.all()...)
	figures["bus messages seen"] = fmt.Sprint(len(all))
	for _, m := range all {
		if strings.Contains(m.Payload, app.Canary) {
			t.Fatalf("the canary secret is on the bus: %s", m.Payload)
		}
	}
	raw, _ := json.MarshalIndent(figures, "", "  ")
	t.Logf("figures:\n%s", raw)
}
