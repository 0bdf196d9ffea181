//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
)

// startReplicaDaemon runs `reconciler run` beside node on the stack's
// database, driving node through the stack's bus, extra env last (later
// values win).
func startReplicaDaemon(t *testing.T, stack *Stack, node *Node, busURL string, extra ...string) *Daemon {
	t.Helper()
	env := []string{
		"RECONCILER_STORE_URL=" + stack.DatabaseURL,
		"RECONCILER_REPLICA_ID=" + node.Name,
		"RECONCILER_DRIFT_DIR=" + t.TempDir(),
		"RECONCILER_REPLICA_URL=" + node.BaseURL(),
		"RECONCILER_REPLICA_TOKEN_ENV=OS_TOKEN",
		"OS_TOKEN=" + stack.Token(),
		"RECONCILER_REPLICA_BUS_URL=" + busURL,
		"OS_SECRET_KEY=" + stack.SecretKey,
	}
	d := StartDaemon(t, reconcilerBin, append(env, extra...))
	if err := poll(ReadyTimeout, 200*time.Millisecond, d.done, func() error {
		status, _, err := d.Get("/readyz")
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("/readyz answered %d", status)
		}
		return err
	}); err != nil {
		t.Fatalf("reconciler beside node %s not ready: %v", node.Name, err)
	}
	return d
}

// repairOn turns a sidecar's schema repair on.
const repairOn = "RECONCILER_REPLICA_REPAIR=schema"

type replicaState struct {
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	Remedy   string `json:"remedy"`
}

// waitReplica waits until the daemon reports the entry's replica state.
func waitReplica(t *testing.T, d *Daemon, kind, key, want string) replicaState {
	t.Helper()
	var st replicaState
	d.WaitItems(converge, fmt.Sprintf("%s %s replica %s", kind, key, want), func(items []Item) error {
		it := FindItem(items, kind, key)
		if it == nil {
			return fmt.Errorf("no item %s %s", kind, key)
		}
		if len(it.Replica) == 0 {
			return fmt.Errorf("item %s %s has no replica state", kind, key)
		}
		if err := json.Unmarshal(it.Replica, &st); err != nil {
			return err
		}
		if st.State != want {
			return fmt.Errorf("replica %+v", st)
		}
		return nil
	})
	return st
}

// TestReplicaDaemons runs a reconciler beside each of two real nodes on
// their shared database and bus: changes written with plain SQL reach both
// nodes through the sidecars alone (their storage synced by the repair), a
// permission set changed by SQL is
// reported stale, a restarted node gets its run-time objects back, and a
// change costs about one message on the bus.
func TestReplicaDaemons(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	app := CreateApp(t, a)
	b := stack.StartNode("b") // after the app: it lists the datasource
	nodes := []*Node{a, b}
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	tap := tapBus(t, stack.Redis)
	// The sidecars reach the bus through a proxy that can lose PUBLISH.
	proxy, err := replicatest.NewLossyProxy(stack.Redis.Addr(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// With the schema repair: objects written with SQL have no storage
	// until the platform syncs it.
	da := startReplicaDaemon(t, stack, a, proxy.URL(), repairOn)
	db := startReplicaDaemon(t, stack, b, proxy.URL(), repairOn)
	daemons := []*Daemon{da, db}
	figures := map[string]string{}

	for _, d := range daemons {
		waitReplica(t, d, "engine", "object/rt_task", "in-sync")
		waitReplica(t, d, "engine", "object/rt_project", "in-sync")
		waitReplica(t, d, "datasource", app.Datasource, "in-sync")
	}
	// b booted after the objects: only b's sidecar had to tell it.
	waitBoth(t, "serves rt_task", nodes, func(n *Node) bool { return served(t, n, "rt_task") })

	commitToBoth := func(what string, write func() error, cond func(*Node) bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		waitBoth(t, what, nodes, cond)
		return time.Since(start)
	}

	before := tap.fromSidecars(replica.ChannelMetadata, `"rt_daemon_note"`)
	d := commitToBoth("serves rt_daemon_note", func() error {
		_, err := InsertMetadata(ctx, stack.DatabaseURL, "object", "rt_daemon_note", noteBody("rt_daemon_note"))
		return err
	}, func(n *Node) bool { return served(t, n, "rt_daemon_note") })
	figures["object created: commit → served by both"] = d.Round(time.Millisecond).String()
	for _, dm := range daemons {
		waitReplica(t, dm, "engine", "object/rt_daemon_note", "in-sync")
	}
	figures["object created: messages (2 sidecars)"] = fmt.Sprint(tap.fromSidecars(replica.ChannelMetadata, `"rt_daemon_note"`) - before)

	before = tap.fromSidecars(replica.ChannelMetadata, `"rt_task"`)
	d = commitToBoth("serves rt_task.priority", func() error {
		return UpdateMetadata(ctx, stack.DatabaseURL, "object", "rt_task", TaskBodyV2)
	}, func(n *Node) bool { return servesField(t, n, "rt_task", "priority") })
	figures["field added: commit → served by both"] = d.Round(time.Millisecond).String()
	waitReplica(t, da, "engine", "object/rt_task", "in-sync")
	waitReplica(t, db, "engine", "object/rt_task", "in-sync")
	figures["field added: messages (2 sidecars)"] = fmt.Sprint(tap.fromSidecars(replica.ChannelMetadata, `"rt_task"`) - before)

	d = commitToBoth("closed the pool", func() error { return SetDatasourceActive(ctx, stack.DatabaseURL, app.Datasource, false) },
		func(n *Node) bool { return !poolOpen(t, n, app.Datasource) })
	figures["datasource deactivated: commit → both pools closed"] = d.Round(time.Millisecond).String()
	d = commitToBoth("rebuilt the pool", func() error { return SetDatasourceActive(ctx, stack.DatabaseURL, app.Datasource, true) },
		func(n *Node) bool { return poolOpen(t, n, app.Datasource) })
	figures["datasource reactivated: commit → both pools open"] = d.Round(time.Millisecond).String()

	d = commitToBoth("no longer serves rt_daemon_note", func() error {
		return DeleteMetadata(ctx, stack.DatabaseURL, "object", "rt_daemon_note")
	}, func(n *Node) bool { return !served(t, n, "rt_daemon_note") })
	figures["object deleted: commit → gone from both"] = d.Round(time.Millisecond).String()

	// Half the sidecars' messages lost: both nodes still serve every change.
	proxy.SetLoss(0.5)
	start := time.Now()
	var lossy []string
	for i := range 4 {
		name := fmt.Sprintf("rt_daemon_lossy_%d", i)
		lossy = append(lossy, name)
		if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", name, noteBody(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range lossy {
		waitBoth(t, "serves "+name, nodes, func(n *Node) bool { return served(t, n, name) })
	}
	proxy.SetLoss(0)
	figures["50% of PUBLISH lost: 4 objects served by both after"] = time.Since(start).Round(time.Millisecond).String()
	figures["50% of PUBLISH lost: lost / sent so far"] = fmt.Sprintf("%d / %d", proxy.Dropped.Load(), proxy.Published.Load())

	changed := strings.Replace(PermissionBody, `"allowEdit":true`, `"allowEdit":false`, 1)
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "permission", "rt_task_editor", changed); err != nil {
		t.Fatal(err)
	}
	for _, dm := range daemons {
		if st := waitReplica(t, dm, "engine", "permission/rt_task_editor", "stale"); st.Remedy != replica.RestartRemedy {
			t.Errorf("stale without its remedy: %+v", st)
		}
	}
	status, body, err := da.Get("/v1/drift")
	if err != nil || status != http.StatusOK || !strings.Contains(string(body), `permission/rt_task_editor`) {
		t.Errorf("drift report does not name the stale permission set: %d %v %s", status, err, body)
	}

	b.Restart()
	start = time.Now()
	waitBoth(t, "serves its run-time objects again", []*Node{b}, func(n *Node) bool {
		return served(t, n, "rt_task") && served(t, n, "rt_project") && servesField(t, n, "rt_task", "priority")
	})
	figures["node b restarted: run-time objects back after ready"] = time.Since(start).Round(time.Millisecond).String()
	waitReplica(t, db, "engine", "permission/rt_task_editor", "in-sync") // the restart was the remedy

	for _, m := range tap.all() {
		if strings.Contains(m.Payload, app.Canary) || strings.Contains(m.Payload, stack.Token()) {
			t.Fatalf("a secret is on the bus: %s", m.Payload)
		}
	}
	for _, dm := range daemons {
		if out := dm.Output(); strings.Contains(out, stack.Token()) || strings.Contains(out, app.Canary) {
			t.Fatal("a reconciler printed the replica token or the datasource password")
		}
	}
	raw, _ := json.MarshalIndent(figures, "", "  ")
	t.Logf("figures (poll.interval 1s, hints on):\n%s", raw)

}
