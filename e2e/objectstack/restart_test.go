//go:build objectstack

package objectstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// restartScript is the sidecars' restart command (run as /bin/sh SCRIPT
// PIDFILE): it stops the node whose process group id is in PIDFILE — SIGTERM, then
// SIGKILL after 5 s (a node may take longer to exit) — and returns; the
// node's supervisor starts it again.
const restartScript = `pid=$(cat "$1") || exit 1
kill -s TERM -- "-$pid" 2>/dev/null
i=0
while kill -0 -- "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
kill -s KILL -- "-$pid" 2>/dev/null
exit 0`

// readyMonitor polls every node's /api/v1/ready every 0.2 s (both at once;
// a poll that has not answered within 2 s counts as down, and delays the
// next) and records whether all of them were down at once, and how often
// each one was.
type readyMonitor struct {
	mu      sync.Mutex
	allDown []time.Time
	down    map[string]int // polls that found the node not ready
	polls   int
	stop    chan struct{}
	done    chan struct{}
}

func monitorReady(nodes []*Node) *readyMonitor {
	m := &readyMonitor{down: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(m.done)
		defer client.CloseIdleConnections()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var wg sync.WaitGroup
			up := make([]bool, len(nodes))
			for i, n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := client.Get(n.BaseURL() + "/api/v1/ready")
					if err == nil {
						resp.Body.Close()
						up[i] = resp.StatusCode == http.StatusOK
					}
				}()
			}
			wg.Wait()
			m.mu.Lock()
			m.polls++
			anyUp := false
			for i, n := range nodes {
				if up[i] {
					anyUp = true
				} else {
					m.down[n.Name]++
				}
			}
			if !anyUp {
				m.allDown = append(m.allDown, time.Now())
			}
			m.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *readyMonitor) finish() (allDown []time.Time, down map[string]int, polls int) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allDown, m.down, m.polls
}

// restartStatus is the restart part of a sidecar's /v1/status.
type restartStatus struct {
	Phase      string `json:"phase"`
	Reason     string `json:"reason"`
	Count      int    `json:"count"`
	LastResult string `json:"last_result"`
	LastReason string `json:"last_reason"`
}

func (d *Daemon) restart() (restartStatus, error) {
	status, body, err := d.Get("/v1/status")
	if err != nil {
		return restartStatus{}, err
	}
	if status != http.StatusOK {
		return restartStatus{}, fmt.Errorf("/v1/status answered %d", status)
	}
	var st struct {
		ReplicaSync struct {
			Restart *restartStatus `json:"restart"`
		} `json:"replica_sync"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return restartStatus{}, err
	}
	if st.ReplicaSync.Restart == nil {
		return restartStatus{}, fmt.Errorf("no restart in /v1/status: %s", tail(string(body), 2000))
	}
	return *st.ReplicaSync.Restart, nil
}

// restartBound bounds the two restarts of TestRollingRestart (liveness).
const restartBound = 6 * time.Minute

// TestRollingRestart: two real nodes, each run by a supervisor that starts
// it again when it exits, a sidecar beside each whose restart command
// stops its node. A permission set saved through the platform and then
// changed with SQL is stale on both; within two minutes both nodes serve
// the row (layers: in memory = the row; replica state in-sync), by one
// restart each, and both nodes were never down at once.
func TestRollingRestart(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	CreateApp(t, a) // saves permission set rt_task_editor through the platform
	b := stack.StartNode("b")
	nodes := []*Node{a, b}
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	for _, n := range nodes {
		n.Supervise()
	}

	var daemons []*Daemon
	for _, n := range nodes {
		script := filepath.Join(t.TempDir(), "restart-node.sh")
		if err := os.WriteFile(script, []byte(restartScript+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		daemons = append(daemons, startReplicaDaemon(t, stack, n, stack.Redis.URL(),
			"RECONCILER_REPLICA_RESTART_COMMAND=/bin/sh "+script+" "+n.PIDFile(),
			"RECONCILER_REPLICA_RESTART_AFTER=2s",
			"RECONCILER_REPLICA_RESTART_MIN_INTERVAL=30m",
			"RECONCILER_REPLICA_RESTART_LEASE_TIMEOUT=4m"))
	}
	const key = "permission/rt_task_editor"
	for _, d := range daemons {
		waitReplica(t, d, "engine", key, "in-sync")
	}

	mon := monitorReady(nodes)
	changed := strings.Replace(PermissionBody, `"allowEdit":true`, `"allowEdit":false`, 1)
	start := time.Now()
	if err := UpdateMetadata(ctx, stack.DatabaseURL, "permission", "rt_task_editor", changed); err != nil {
		t.Fatal(err)
	}
	// Both nodes hold the older copy at first: stale on both (the first
	// restart may already be under way when the second sidecar is asked).
	staleSeen := map[string]bool{}
	for i, d := range daemons {
		d.WaitItems(converge, "stale, then in-sync", func(items []Item) error {
			it := FindItem(items, "engine", key)
			if it == nil {
				return fmt.Errorf("no item %s", key)
			}
			var st replicaState
			_ = json.Unmarshal(it.Replica, &st)
			if st.State == "stale" {
				staleSeen[nodes[i].Name] = true
				if st.Remedy == "" {
					return fmt.Errorf("stale without its remedy: %+v", st)
				}
			}
			if !staleSeen[nodes[i].Name] {
				return fmt.Errorf("replica %+v", st)
			}
			return nil
		})
	}

	// Both nodes serve the row, and their sidecars say so: within two
	// minutes of the change on a machine where a node boots in 10–15 s
	// (the figure is logged); the bound here is liveness only, room for
	// two boots of a loaded machine (25–70 s each).
	err := poll(restartBound, time.Second, nil, func() error {
		for i, n := range nodes {
			l, err := n.API().Layers("permission", "rt_task_editor")
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			if ok, diff := l.Applied(); !ok {
				return fmt.Errorf("node %s holds an older copy: %s", n.Name, diff)
			}
			items, err := daemons[i].Items()
			if err != nil {
				return err
			}
			it := FindItem(items, "engine", key)
			var st replicaState
			if it != nil {
				_ = json.Unmarshal(it.Replica, &st)
			}
			if st.State != "in-sync" {
				return fmt.Errorf("sidecar %s: replica %+v", n.Name, st)
			}
			// The lease ends once the node is healed, a moment later.
			if rs, err := daemons[i].restart(); err != nil || rs.LastResult == "" {
				return fmt.Errorf("sidecar %s: restart %+v (%v)", n.Name, rs, err)
			}
		}
		return nil
	})
	took := time.Since(start)
	allDown, down, polls := mon.finish()
	for i, d := range daemons {
		rs, rerr := d.restart()
		t.Logf("sidecar %s restart: %+v (%v)", nodes[i].Name, rs, rerr)
	}
	if err != nil {
		t.Fatalf("both nodes serve the row: %v", err)
	}
	for i, n := range nodes {
		restarts, serr := n.Restarts()
		if serr != nil {
			t.Errorf("node %s supervisor: %v", n.Name, serr)
		}
		if restarts != 1 {
			t.Errorf("node %s restarted %d times, want 1", n.Name, restarts)
		}
		if rs, err := daemons[i].restart(); err != nil || rs.Count != 1 || rs.LastResult != "done" {
			t.Errorf("sidecar %s restart report %+v, %v", n.Name, rs, err)
		}
	}
	if len(allDown) > 0 {
		t.Errorf("both nodes were down at once, %d times of %d polls (first at %s)", len(allDown), polls, allDown[0].Format(time.RFC3339Nano))
	}
	out := Reconcile(t, reconcilerBin, nil, "fleet", "--store.url", stack.DatabaseURL)
	if !strings.Contains(out, "restarted") {
		t.Errorf("fleet does not show the restarts:\n%s", out)
	}
	t.Logf("figures: SQL change → both nodes serve the row after %s (2 restarts, one at a time; within 2 minutes: %v); polls of /api/v1/ready every 0.2s: %d, node a down in %d, node b down in %d, both down in %d; boots %s, %s\nfleet:\n%s",
		took.Round(100*time.Millisecond), took <= 2*time.Minute, polls, down["a"], down["b"], len(allDown), a.BootTime().Round(100*time.Millisecond), b.BootTime().Round(100*time.Millisecond), out)
}

// TestNoLanesOnRealNode: a node started without the cluster bus applies no
// lane message; beside a node that does, its sidecar names it in status,
// with the remedy, and fleet flags it.
func TestNoLanesOnRealNode(t *testing.T) {
	ctx := context.Background()
	stack := NewStack(t)
	a := stack.StartNode("a")
	deaf := stack.StartNodeWithoutBus("deaf")
	Reconcile(t, reconcilerBin, nil, "migrate", "--store.url", stack.DatabaseURL)
	da := startReplicaDaemon(t, stack, a, stack.Redis.URL())
	dd := startReplicaDaemon(t, stack, deaf, stack.Redis.URL())
	const obj = "rt_nolanes_note"
	if _, err := InsertMetadata(ctx, stack.DatabaseURL, "object", obj, noteBody(obj)); err != nil {
		t.Fatal(err)
	}
	// Written with SQL, the object has no table: a node that applies the
	// lane registers it and its sidecar says unservable (never nudged).
	waitReplica(t, da, "engine", "object/"+obj, "unservable")
	var noLanes string
	if err := poll(3*time.Minute, time.Second, nil, func() error {
		status, body, err := dd.Get("/v1/status")
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("/v1/status: %d %v", status, err)
		}
		var st struct {
			ReplicaSync struct {
				Restart *struct {
					NoLanes string `json:"no_lanes"`
				} `json:"restart"`
			} `json:"replica_sync"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return err
		}
		if r := st.ReplicaSync.Restart; r == nil || r.NoLanes == "" {
			return fmt.Errorf("not named: %s", tail(string(body), 1500))
		}
		noLanes = st.ReplicaSync.Restart.NoLanes
		return nil
	}); err != nil {
		t.Fatalf("the node without the bus is not named: %v", err)
	}
	if !strings.Contains(noLanes, "a serve theirs") || !strings.Contains(noLanes, "OS_CLUSTER_DRIVER=redis") {
		t.Errorf("no-lanes report %q", noLanes)
	}
	out := Reconcile(t, reconcilerBin, nil, "status", "--addr", strings.TrimPrefix(dd.Status, "http://"))
	if !strings.Contains(out, "applies no lane message") {
		t.Errorf("status does not name it:\n%s", out)
	}
	if out := Reconcile(t, reconcilerBin, nil, "fleet", "--store.url", stack.DatabaseURL); !strings.Contains(out, "NO LANES") {
		t.Errorf("fleet does not flag it:\n%s", out)
	}
	t.Logf("status of the node without the bus:\n%s", out)
}
