package replica_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/drivers/replica/replicatest"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
	"github.com/objectstack-fleet/reconciler/snapshot/snapshottest"
)

// restartRig is a fleet of stand-in nodes on one store, each with a sidecar
// (a Driver and a Restarter) whose restart command is a real process: it
// appends a line to its node's request file, and the node restarts (down
// for boot) when a line arrives, as a supervisor would start it again.
type restartRig struct {
	*rig
	store snapshot.Store
	boot  time.Duration
	peers []*restartPeer
}

type restartPeer struct {
	id       string
	node     *replicatest.Node
	side     sidecar
	rs       *replica.Restarter
	reg      *prometheus.Registry
	requests string       // the file the restart command appends to
	restarts atomic.Int32 // restarts the command asked for
}

func newRestartRig(t *testing.T) *restartRig {
	store, _ := snapshottest.NewSQLite(t)
	return &restartRig{rig: newRig(t), store: store, boot: 300 * time.Millisecond}
}

// add starts a node and its sidecar; edit adjusts the Restarter's options
// (Command is set to the request command unless edit empties it).
func (rr *restartRig) add(t *testing.T, id string, edit func(*replica.RestartOptions)) *restartPeer {
	t.Helper()
	p := &restartPeer{id: id, node: rr.node(t, replicatest.Options{}), reg: prometheus.NewRegistry()}
	p.side = rr.sidecar(t, p.node, "reconciler:"+id, nil)
	p.requests = filepath.Join(t.TempDir(), "restart-requests")
	wake := make(chan struct{}, 1)
	opts := replica.RestartOptions{
		ReplicaID:    id,
		Command:      []string{"/bin/sh", "-c", `echo restart >> "$0"`, p.requests},
		After:        time.Second,
		MinInterval:  time.Hour,
		LeaseTimeout: 20 * time.Second,
		Store:        rr.store,
		Beat:         time.Second,
		Interval:     50 * time.Millisecond,
		OnChange: func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		},
		Metrics: replica.NewRestartMetrics(p.reg),
	}
	if edit != nil {
		edit(&opts)
	}
	p.rs = replica.NewRestarter(p.side.Driver, opts)
	p.rs.Resume(context.Background()) // before the first heartbeat, as the daemon does
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = p.rs.Run(ctx) }()
	// The heartbeat: written when the node report changes, and kept alive.
	go func() {
		defer wg.Done()
		started := time.Now()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = rr.store.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: id, Host: "h", PID: 1, StartedAt: started, HeartbeatAt: time.Now(), Node: p.rs.Node()})
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-tick.C:
			}
		}
	}()
	// The supervisor: a line in the request file restarts the node.
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		seen := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			b, _ := os.ReadFile(p.requests)
			for n := strings.Count(string(b), "\n"); seen < n; seen++ {
				p.restarts.Add(1)
				p.node.RestartBooted(rr.boot)
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	rr.peers = append(rr.peers, p)
	return p
}

// makeStale saves a permission set, lets every peer load it, then changes
// the row: every node holds the older copy.
func (rr *restartRig) makeStale(t *testing.T, name string) string {
	t.Helper()
	key := "permission/" + name
	rr.db.Put("permission", name, map[string]any{"name": name, "objects": map[string]any{"task": map[string]any{"allowRead": true}}})
	for _, p := range rr.peers {
		p.node.Restart() // loads it, as a boot would
		p.side.Notify(change(registry.KindEngine, key, reconcile.ActionCreate))
	}
	for _, p := range rr.peers {
		eventually(t, p.id+" in-sync", stateIs(p.side, registry.KindEngine, key, registry.ReplicaInSync))
	}
	rr.db.Put("permission", name, map[string]any{"name": name, "objects": map[string]any{"task": map[string]any{"allowRead": false}}})
	for _, p := range rr.peers {
		p.side.Notify(change(registry.KindEngine, key, reconcile.ActionRebuild))
	}
	return key
}

func phaseIs(p *restartPeer, want registry.RestartPhase) func() bool {
	return func() bool { return p.rs.Report().Phase == want }
}

// readyNow says whether a stand-in node answers /api/v1/ready 200.
func readyNow(client *http.Client, url string) bool {
	resp, err := client.Get(url + "/api/v1/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestRestartOneAtATime: every node of the fleet holds a stale permission
// set; each sidecar restarts its own node once, never two at a time, and
// every node ends up serving the row.
func TestRestartOneAtATime(t *testing.T) {
	rr := newRestartRig(t)
	for _, id := range []string{"a", "b", "c"} {
		rr.add(t, id, nil)
	}
	// Watch every node's readiness: never two down at once.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var both atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			down := 0
			for _, p := range rr.peers {
				if !readyNow(client, p.node.URL()) {
					down++
				}
			}
			if down > 1 {
				both.Store(true)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	key := rr.makeStale(t, "editor")
	for _, p := range rr.peers {
		eventually(t, p.id+" stale", stateIs(p.side, registry.KindEngine, key, registry.ReplicaStale))
	}
	for _, p := range rr.peers {
		eventually(t, p.id+" restarted and healed", phaseIs(p, registry.RestartDone))
		eventually(t, p.id+" in-sync", stateIs(p.side, registry.KindEngine, key, registry.ReplicaInSync))
	}
	close(stop)
	<-watched
	if both.Load() {
		t.Fatal("two nodes were down at once")
	}
	for _, p := range rr.peers {
		if n := p.restarts.Load(); n != 1 {
			t.Errorf("%s restarted %d times, want 1", p.id, n)
		}
		if got := testutil.ToFloat64(metric(t, p.reg, "reconciler_replica_restart_runs_total", "result", "done")); got != 1 {
			t.Errorf("%s: %v restarts counted done, want 1", p.id, got)
		}
		rep := p.rs.Report()
		if rep.Count != 1 || rep.LastResult != registry.RestartDone || !strings.Contains(rep.Reason, "healed") {
			t.Errorf("%s report %+v", p.id, rep)
		}
	}
	// The lease is free again.
	if l, _, now, err := rr.store.ReadLease(context.Background(), replica.LeaseRestart); err != nil || l.Held(now) {
		t.Fatalf("restart lease after the restarts: %+v, %v", l, err)
	}
}

// TestRestartRefusedWhileAPeerIsDown: a live peer whose node is not ready
// blocks the restart, named in the reason; once it serves again the
// restart goes ahead. A peer's stale entries never block.
func TestRestartRefusedWhileAPeerIsDown(t *testing.T) {
	rr := newRestartRig(t)
	a := rr.add(t, "a", nil)
	b := rr.add(t, "b", func(o *replica.RestartOptions) { o.Command = nil })
	key := rr.makeStale(t, "editor")
	b.node.SetDown(true)
	eventually(t, "refused", func() bool {
		rep := a.rs.Report()
		return rep.Phase == registry.RestartRefused && strings.Contains(rep.Reason, "replica b is not ready")
	})
	if a.restarts.Load() != 0 {
		t.Fatal("restarted while its peer was down")
	}
	if got := testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_restart_refusals_total", "reason", "peer")); got < 1 {
		t.Fatalf("refusal not counted: %v", got)
	}
	b.node.SetDown(false)
	eventually(t, "restarted", phaseIs(a, registry.RestartDone))
	eventually(t, "a in-sync", stateIs(a.side, registry.KindEngine, key, registry.ReplicaInSync))
	// b has no command: it keeps naming the remedy, and its stale entry
	// never blocked a.
	eventually(t, "b off", func() bool {
		rep := b.rs.Report()
		return rep.Phase == registry.RestartOff && strings.Contains(rep.Reason, "replica.restart.command")
	})
	if st, _ := b.side.Status(registry.KindEngine, key); st.State != registry.ReplicaStale {
		t.Fatalf("b: %+v", st)
	}
}

// TestRestartWaitsForADeadHoldersLease: a lease taken by a sidecar that
// died blocks restarts until it expires, then the restart goes ahead.
func TestRestartWaitsForADeadHoldersLease(t *testing.T) {
	rr := newRestartRig(t)
	if _, err := rr.store.AcquireLease(context.Background(), replica.LeaseRestart, "dead", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	a := rr.add(t, "a", nil)
	rr.makeStale(t, "editor")
	eventually(t, "refused by the lease", func() bool {
		rep := a.rs.Report()
		return rep.Phase == registry.RestartRefused && strings.Contains(rep.Reason, "replica dead is restarting")
	})
	eventually(t, "restarted after the lease expired", phaseIs(a, registry.RestartDone))
	if a.restarts.Load() != 1 {
		t.Fatalf("%d restarts", a.restarts.Load())
	}
}

// TestRestartThatDoesNotHealIsReportedAndNotRepeated: a command that does
// not restart the node ends at the lease's bound, reported, and is not run
// again before min_interval.
func TestRestartThatDoesNotHealIsReportedAndNotRepeated(t *testing.T) {
	rr := newRestartRig(t)
	ran := filepath.Join(t.TempDir(), "ran")
	a := rr.add(t, "a", func(o *replica.RestartOptions) {
		o.Command = []string{"/bin/sh", "-c", `echo ran >> "$0"`, ran}
		o.LeaseTimeout = 1500 * time.Millisecond
	})
	rr.makeStale(t, "editor")
	eventually(t, "failed", func() bool { return a.rs.Report().LastResult == registry.RestartFailed })
	rep := a.rs.Report()
	if !strings.Contains(rep.LastReason, "lease_timeout") || !strings.Contains(rep.LastReason, "no restart of the replica was noticed") {
		t.Fatalf("report %+v", rep)
	}
	if got := testutil.ToFloat64(metric(t, a.reg, "reconciler_replica_restart_runs_total", "result", "unhealed")); got != 1 {
		t.Fatalf("unhealed counted %v", got)
	}
	eventually(t, "planned after min_interval", func() bool {
		rep := a.rs.Report()
		return rep.Phase == registry.RestartPlanned && strings.Contains(rep.Reason, "min_interval")
	})
	if b, _ := os.ReadFile(ran); strings.Count(string(b), "\n") != 1 {
		t.Fatalf("command ran %q", b)
	}
	if l, _, now, err := rr.store.ReadLease(context.Background(), replica.LeaseRestart); err != nil || l.Held(now) {
		t.Fatalf("lease after the bound: %+v, %v", l, err)
	}
}

// TestRestartFailingCommand: a command that fails is reported with its
// output and the lease released.
func TestRestartFailingCommand(t *testing.T) {
	rr := newRestartRig(t)
	a := rr.add(t, "a", func(o *replica.RestartOptions) {
		o.Command = []string{"/bin/sh", "-c", "echo no such unit >&2; exit 3"}
	})
	rr.makeStale(t, "editor")
	eventually(t, "failed", func() bool { return a.rs.Report().LastResult == registry.RestartFailed })
	if rep := a.rs.Report(); !strings.Contains(rep.LastReason, "no such unit") || !strings.Contains(rep.LastReason, "exit status 3") {
		t.Fatalf("report %+v", rep)
	}
	if l, _, now, err := rr.store.ReadLease(context.Background(), replica.LeaseRestart); err != nil || l.Held(now) {
		t.Fatalf("lease after a failed command: %+v, %v", l, err)
	}
}

// TestRestartShadow: shadow mode reports the restart it would do, takes no
// lease and runs nothing.
func TestRestartShadow(t *testing.T) {
	rr := newRestartRig(t)
	a := rr.add(t, "a", func(o *replica.RestartOptions) { o.Shadow = true })
	rr.makeStale(t, "editor")
	eventually(t, "would restart", phaseIs(a, registry.RestartWouldRestart))
	if rep := a.rs.Report(); !strings.Contains(rep.Reason, "shadow") || !rep.Shadow {
		t.Fatalf("report %+v", rep)
	}
	if _, ok, _, err := rr.store.ReadLease(context.Background(), replica.LeaseRestart); ok || err != nil {
		t.Fatalf("shadow mode took the lease (%v)", err)
	}
	if a.restarts.Load() != 0 {
		t.Fatal("shadow mode restarted the node")
	}
}

// TestRestartPlannedUntilAfter: stale entries wait replica.restart.after.
func TestRestartPlannedUntilAfter(t *testing.T) {
	rr := newRestartRig(t)
	a := rr.add(t, "a", func(o *replica.RestartOptions) { o.After = time.Hour })
	rr.makeStale(t, "editor")
	eventually(t, "planned", func() bool {
		rep := a.rs.Report()
		return rep.Phase == registry.RestartPlanned && strings.Contains(rep.Reason, "replica.restart.after 1h0m0s") && strings.Contains(rep.Reason, "permission/editor")
	})
	if n := a.rs.Node(); !n.Reported || !n.Ready || n.Stale != 1 {
		t.Fatalf("node report %+v", n)
	}
}

// TestNoLanesNamed: a node that drops every lane message while its peer
// serves is named, with the remedy.
func TestNoLanesNamed(t *testing.T) {
	rr := newRestartRig(t)
	deaf := &restartPeer{id: "deaf", reg: prometheus.NewRegistry()}
	n, err := replicatest.Start(rr.db, replicatest.Options{BusURL: rr.redis.URL(), Token: token, Loss: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	deaf.node = n
	deaf.side = rr.sidecar(t, n, "reconciler:deaf", nil)
	deaf.rs = replica.NewRestarter(deaf.side.Driver, replica.RestartOptions{ReplicaID: "deaf", Store: rr.store, Beat: time.Second,
		Interval: 50 * time.Millisecond, Metrics: replica.NewRestartMetrics(deaf.reg)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- deaf.rs.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// A live peer serving everything.
	if _, err := rr.store.Heartbeat(ctx, snapshot.Heartbeat{ReplicaID: "good", HeartbeatAt: time.Now(), StartedAt: time.Now(),
		Node: snapshot.Node{Reported: true, Ready: true}}); err != nil {
		t.Fatal(err)
	}
	rr.db.Put("object", "task", object("f"))
	deaf.side.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	eventually(t, "named deaf", func() bool { return deaf.rs.Report().NoLanes != "" })
	rep := deaf.rs.Report()
	if !strings.Contains(rep.NoLanes, "applies no lane message") || !strings.Contains(rep.NoLanes, "good serve") || !strings.Contains(rep.NoLanes, "OS_CLUSTER_DRIVER=redis") {
		t.Fatalf("no-lanes report %q", rep.NoLanes)
	}
	if got := testutil.ToFloat64(metric(t, deaf.reg, "reconciler_replica_no_lanes")); got != 1 {
		t.Fatalf("reconciler_replica_no_lanes = %v", got)
	}
	if rep.Phase != registry.RestartOff {
		t.Fatalf("phase %q without a command", rep.Phase)
	}
}

// TestRestartHealsPastAnEntryNoNodeApplies: an entry nudged before the
// restart (its row is not one the node can register) does not hold the
// lease: the restart is done once every entry the node served is served
// again.
func TestRestartHealsPastAnEntryNoNodeApplies(t *testing.T) {
	rr := newRestartRig(t)
	a := rr.add(t, "a", nil)
	rr.db.Put("object", "task", object("f"))
	a.side.Notify(change(registry.KindEngine, "object/task", reconcile.ActionCreate))
	a.side.Notify(change(registry.KindEngine, "object/ghost", reconcile.ActionCreate)) // no row the node reads
	eventually(t, "task in-sync", stateIs(a.side, registry.KindEngine, "object/task", registry.ReplicaInSync))
	eventually(t, "ghost nudged", stateIs(a.side, registry.KindEngine, "object/ghost", registry.ReplicaNudged))
	rr.makeStale(t, "editor")
	eventually(t, "done", func() bool { return a.rs.Report().LastResult == registry.RestartDone })
	if !stateIs(a.side, registry.KindEngine, "object/task", registry.ReplicaInSync)() || !a.node.Registered("task") {
		t.Fatal("task not served again after the restart")
	}
}

// TestRestartMinIntervalOutlivesTheSidecar: a sidecar started again takes
// its last restart from its own heartbeat, so min_interval still holds.
func TestRestartMinIntervalOutlivesTheSidecar(t *testing.T) {
	rr := newRestartRig(t)
	last := time.Now().Add(-time.Minute)
	if _, err := rr.store.Heartbeat(context.Background(), snapshot.Heartbeat{ReplicaID: "a", StartedAt: last, HeartbeatAt: last, Stopped: true,
		Node: snapshot.Node{Reported: true, Ready: true, Restart: registry.NodeRestart{Phase: registry.RestartInFlight, LastAt: last, Count: 3}}}); err != nil {
		t.Fatal(err)
	}
	a := rr.add(t, "a", nil)
	rr.makeStale(t, "editor")
	eventually(t, "planned after min_interval", func() bool {
		rep := a.rs.Report()
		return rep.Phase == registry.RestartPlanned && strings.Contains(rep.Reason, "min_interval")
	})
	rep := a.rs.Report()
	if rep.Count != 3 || rep.LastResult != registry.RestartFailed || !strings.Contains(rep.LastReason, "stopped while the restart was in flight") {
		t.Fatalf("report %+v", rep)
	}
	if a.restarts.Load() != 0 {
		t.Fatal("restarted within min_interval of the last restart")
	}
}
