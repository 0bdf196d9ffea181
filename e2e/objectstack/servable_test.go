//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// reconcileCode runs `reconciler <args>` and returns its exit code and
// combined output.
func reconcileCode(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(reconcilerBin, args...)
	cmd.Env = proctest.CleanEnv()
	return proctest.Combined(t, cmd)
}

// servableWithin bounds how long a sidecar takes to verify servability
// (or to report a failure) on a busy machine.
const servableWithin = 90 * time.Second

// waitState waits until the daemon reports the entry's replica state and
// returns it and how long it took.
func waitState(t *testing.T, d *Daemon, key, want string) (replicaState, time.Duration) {
	t.Helper()
	start := time.Now()
	var st replicaState
	d.WaitItems(servableWithin, fmt.Sprintf("%s replica %s", key, want), func(items []Item) error {
		it := FindItem(items, "engine", key)
		if it == nil || len(it.Replica) == 0 {
			return fmt.Errorf("no replica state of %s", key)
		}
		if err := json.Unmarshal(it.Replica, &st); err != nil {
			return err
		}
		if st.State != want {
			return fmt.Errorf("replica %+v", st)
		}
		return nil
	})
	return st, time.Since(start)
}

// probesOf sums the sidecar's read-only probes of entries so far.
func probesOf(t *testing.T, d *Daemon) float64 {
	t.Helper()
	status, body, err := d.Get("/metrics")
	if err != nil || status != http.StatusOK {
		t.Fatalf("metrics: %d %v", status, err)
	}
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^reconciler_replica_verifications_total\{[^}]*\} (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

// TestServableOnRealNodes: an object and a field written with plain SQL
// are registered by both nodes but have no storage: both sidecars say
// unservable (not in-sync), naming what is missing, and drift exits 3.
// With replica.repair: schema one sidecar has the platform sync their
// storage through its save route, leaving the rows as they were; records
// naming the SQL-added field are then written and read back through each
// node's API. A wrong token shows in the default items and status output.
// With the bus stopped for 60 s and changes pending, the probes back off:
// they are counted.
func TestServableOnRealNodes(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	CreateApp(t, a)
	b := stack.StartNode("b")
	nodes := []*Node{a, b}
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	bus := stack.Redis.URL()
	off := "RECONCILER_REPLICA_REPAIR=off"
	da := startReplicaDaemon(t, stack, a, bus, off)
	db := startReplicaDaemon(t, stack, b, bus, off)
	daemons := []*Daemon{da, db}
	figures := map[string]string{}
	for _, d := range daemons {
		waitState(t, d, "object/rt_project", "in-sync")
	}

	// An object and a field written with plain SQL.
	objBody := `{"name":"rt_sqlobj","label":"SQL object","fields":{"title":{"type":"text","label":"Title"}},"sharingModel":"private","enable":{"apiEnabled":true}}`
	projV2 := strings.Replace(ProjectBody, `"required":true}}`, `"required":true},"budget":{"type":"number","label":"Budget"}}`, 1)
	start := time.Now()
	if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", "rt_sqlobj", objBody); err != nil {
		t.Fatal(err)
	}
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "object", "rt_project", projV2); err != nil {
		t.Fatal(err)
	}
	for _, d := range daemons {
		if st, _ := waitState(t, d, "object/rt_sqlobj", "unservable"); !strings.Contains(st.Error, "object rt_sqlobj has no table") ||
			!strings.Contains(st.Remedy, "replica.repair: schema") {
			t.Errorf("rt_sqlobj: %+v", st)
		}
		if st, _ := waitState(t, d, "object/rt_project", "unservable"); !strings.Contains(st.Error, "field budget of object rt_project has no column") {
			t.Errorf("rt_project: %+v", st)
		}
	}
	figures["SQL object + field: commit → unservable on both sidecars"] = time.Since(start).Round(time.Millisecond).String()
	// What unservable means on the nodes: writes fail.
	for _, n := range nodes {
		if r := n.API().Must(t, http.StatusBadRequest, "POST", "/api/v1/data/rt_project", map[string]any{"title": "p", "budget": 1}); !strings.Contains(string(r.Body), "budget") {
			t.Errorf("node %s: write naming budget: %s", n.Name, r.Body)
		}
	}
	code, out := reconcileCode(t, "drift", "--addr", strings.TrimPrefix(da.Status, "http://"))
	if code != 3 || !strings.Contains(out, "unservable") || !strings.Contains(out, "object/rt_sqlobj") {
		t.Fatalf("drift while unservable: exit %d\n%s", code, out)
	}
	if _, out := reconcileCode(t, "items", "--addr", strings.TrimPrefix(db.Status, "http://")); !strings.Contains(out, "replica: field budget of object rt_project has no column") {
		t.Fatalf("items does not show why rt_project is unservable:\n%s", out)
	}

	// The repair, by the sidecar of a (restarted with replica.repair: schema).
	rowsBefore := map[string][]MetadataRow{}
	for _, name := range []string{"rt_project", "rt_sqlobj"} {
		rows, err := MetadataRows(ctx, stack.DatabaseURL, "object", name)
		if err != nil {
			t.Fatal(err)
		}
		rowsBefore[name] = rows
	}
	da.Stop()
	start = time.Now()
	da = startReplicaDaemon(t, stack, a, bus, repairOn)
	daemons = []*Daemon{da, db}
	for i, d := range daemons {
		for _, key := range []string{"object/rt_sqlobj", "object/rt_project"} {
			waitState(t, d, key, "in-sync")
			figures[fmt.Sprintf("repair: %s in-sync on sidecar %s after its start", key, nodes[i].Name)] = time.Since(start).Round(time.Millisecond).String()
		}
	}
	figures["repair: sidecar start → both objects in-sync on both sidecars"] = time.Since(start).Round(time.Millisecond).String()
	for name, before := range rowsBefore {
		after, err := MetadataRows(ctx, stack.DatabaseURL, "object", name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("the repair changed the rows of %s:\nbefore %+v\nafter  %+v", name, before, after)
		}
	}
	if !strings.Contains(da.Output(), "replica repair: the platform synced the object's storage") {
		t.Fatal("no repair logged")
	}
	// Records naming the SQL-added field, written and read back through
	// each node's API.
	for _, n := range nodes {
		r := n.API().Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_project", map[string]any{"title": "p-" + n.Name, "budget": 7})
		var created struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.Body, &created); err != nil || created.ID == "" {
			t.Fatalf("create on %s: %s", n.Name, r.Body)
		}
		for _, m := range nodes {
			got := m.API().Must(t, http.StatusOK, "GET", "/api/v1/data/rt_project/"+url.PathEscape(created.ID), nil)
			if !strings.Contains(string(got.Body), `"budget":7`) {
				t.Fatalf("node %s reads back %s", m.Name, got.Body)
			}
		}
		n.API().Must(t, http.StatusCreated, "POST", "/api/v1/data/rt_sqlobj", map[string]any{"title": "s-" + n.Name})
	}

	// A wrong token: the default items and status output say so.
	dw := startReplicaDaemon(t, stack, a, bus, off, "OS_TOKEN=osk_wrong-token", "RECONCILER_REPLICA_ID=wrong")
	addr := strings.TrimPrefix(dw.Status, "http://")
	if err := poll(servableWithin, 200*time.Millisecond, nil, func() error {
		if _, out := reconcileCode(t, "items", "--addr", addr); !strings.Contains(out, "refused the credential") {
			return fmt.Errorf("items:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, out := reconcileCode(t, "status", "--addr", addr); !strings.Contains(out, "replica failing") || !strings.Contains(out, "refused the credential") {
		t.Fatalf("status with a wrong token:\n%s", out)
	}
	if code, _ := reconcileCode(t, "drift", "--addr", addr); code != 3 {
		t.Fatalf("drift with a wrong token: exit %d", code)
	}
	dw.Stop()

	// The bus stopped for 60 s with two changes pending.
	before := []float64{probesOf(t, da), probesOf(t, db)}
	stack.Redis.Stop()
	for _, name := range []string{"rt_outage_1", "rt_outage_2"} {
		if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", name, strings.ReplaceAll(objBody, "rt_sqlobj", name)); err != nil {
			t.Fatal(err)
		}
	}
	outage := time.Now()
	if err := poll(servableWithin, 200*time.Millisecond, nil, func() error {
		if _, out := reconcileCode(t, "status", "--addr", strings.TrimPrefix(da.Status, "http://")); !strings.Contains(out, "bus DOWN") {
			return fmt.Errorf("status:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	<-time.After(60*time.Second - time.Since(outage)) // the outage's length is the scenario
	for i, d := range daemons {
		n := probesOf(t, d) - before[i]
		figures[fmt.Sprintf("bus down 60s, 2 changes pending: probes by sidecar %s", nodes[i].Name)] = fmt.Sprint(n)
		// Doubling from 0.5 s to 30 s: about 8 probes per pending entry in
		// 60 s (a probe every 0.5 s without backoff: 120).
		if n > 30 {
			t.Errorf("sidecar %s probed %v times in 60 s of bus outage with 2 changes pending", nodes[i].Name, n)
		}
	}
	stack.Redis.Start()
	start = time.Now()
	for _, d := range daemons {
		for _, name := range []string{"rt_outage_1", "rt_outage_2"} {
			waitState(t, d, "object/"+name, "in-sync")
		}
	}
	figures["bus back: 2 outage objects repaired and in-sync on both after"] = time.Since(start).Round(time.Millisecond).String()
	for _, d := range daemons {
		if out := d.Output(); strings.Contains(out, stack.Token()) {
			t.Fatal("a sidecar printed the replica token")
		}
		for _, line := range strings.Split(strings.TrimSpace(d.Output()), "\n") {
			if !strings.HasPrefix(line, "{") {
				t.Fatalf("a sidecar printed a line that is not JSON: %q", line)
			}
		}
	}
	raw, _ := json.MarshalIndent(figures, "", "  ")
	t.Logf("figures:\n%s", raw)
}
