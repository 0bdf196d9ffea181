package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/drivers/notify"
	"github.com/objectstack-fleet/reconciler/internal/fleet"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// LeaseRestart is the fleet's restart lease: one replica at a time is
// restarted, by the sidecar holding it.
const LeaseRestart = "restart"

// Defaults of RestartOptions.
const (
	DefaultRestartAfter        = 5 * time.Minute
	DefaultRestartMinInterval  = 30 * time.Minute
	DefaultRestartLeaseTimeout = 10 * time.Minute
	DefaultRestartInterval     = time.Second
)

// restartCommandTimeout bounds one run of the restart command (less when
// the lease is shorter): the command stops the node (a node may take over
// 5 s to exit on SIGTERM) and returns; the node's boot is waited for after.
const restartCommandTimeout = 2 * time.Minute

// refusedRetry is how many intervals a refused restart waits before the
// fleet is asked again.
const refusedRetry = 3

// deafAttempts is how many messages an entry must have been sent, still
// not applied, before a replica that applied none is called deaf.
const deafAttempts = 4

// RestartStore is what a Restarter needs of the store: the fleet's restart
// lease and every replica's heartbeat.
type RestartStore interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (snapshot.Lease, error)
	ReleaseLease(ctx context.Context, l snapshot.Lease) error
	Heartbeats(ctx context.Context) ([]snapshot.Heartbeat, error)
}

// RestartOptions configure a Restarter.
type RestartOptions struct {
	// ReplicaID is this sidecar's replica id: the lease's holder, and the
	// heartbeat that is not a peer.
	ReplicaID string
	// Command restarts the replica (argv, no shell). Empty: restarts are
	// off and the Restarter only reports (the node's readiness, deafness,
	// the restart that stale entries call for).
	Command []string
	// Env is the command's whole environment (nil: notify.MinimalEnv()).
	Env []string
	// After, MinInterval and LeaseTimeout: replica.restart.after,
	// .min_interval and .lease_timeout (defaults 5m, 30m, 10m).
	After, MinInterval, LeaseTimeout time.Duration
	// Shadow reports the restart it would do and does not do it (no lease
	// is taken, no command run).
	Shadow bool
	// Store holds the lease and the heartbeats.
	Store RestartStore
	// Beat is the fleet's heartbeat interval: a peer is live while its
	// heartbeat is younger than fleet.Build says.
	Beat time.Duration
	// Interval is how often the node's readiness is read (default 1s).
	Interval time.Duration
	// OnChange is called (it must not block) when what Node reports
	// changed: the heartbeat should carry it now.
	OnChange func()
	// Metrics (nil: none).
	Metrics *RestartMetrics
	// Logger (nil: discard).
	Logger *slog.Logger
}

// Restarter restarts the replica beside the sidecar when it holds stale
// entries no lane can update, one replica of the fleet at a time, and
// reports the node's readiness for the other sidecars' decisions. Create
// it with NewRestarter; run Run.
type Restarter struct {
	d    *Driver
	opts RestartOptions
	log  *slog.Logger

	retryAt time.Time // a refused restart is looked at again then (Run's goroutine only)
	resumed bool      // Resume ran (before Run, or by Run's goroutine)

	mu    sync.Mutex
	node  snapshot.Node
	peers string // the peers serving every change, for the deaf report ("" when unknown)
}

// NewRestarter returns a Restarter of the Driver's replica. It does no
// I/O.
func NewRestarter(d *Driver, opts RestartOptions) *Restarter {
	def := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&opts.After, DefaultRestartAfter)
	def(&opts.MinInterval, DefaultRestartMinInterval)
	def(&opts.LeaseTimeout, DefaultRestartLeaseTimeout)
	def(&opts.Interval, DefaultRestartInterval)
	def(&opts.Beat, 30*time.Second)
	if opts.Env == nil {
		opts.Env = notify.MinimalEnv()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	phase := registry.RestartIdle
	if len(opts.Command) == 0 {
		phase = registry.RestartOff
	}
	r := &Restarter{d: d, opts: opts, log: opts.Logger}
	r.node = snapshot.Node{Reported: true, Restart: registry.NodeRestart{Phase: phase, Since: time.Now()}}
	opts.Metrics.phase(phase)
	return r
}

// Node returns what the heartbeat reports of the node.
func (r *Restarter) Node() snapshot.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.node
}

// RestartReport is the restart part of the replica section of status.
type RestartReport struct {
	registry.NodeRestart
	// Enabled: replica.restart.command is set.
	Enabled bool `json:"enabled"`
	// Shadow: restarts are reported, not done.
	Shadow bool `json:"shadow,omitempty"`
	// Ready: the node answered /api/v1/ready 200 when last read.
	Ready bool `json:"ready"`
	// NoLanes names a replica that applies no lane message at all, with
	// the remedy ("" when it applies them).
	NoLanes string `json:"no_lanes,omitempty"`
}

// Report returns the restart report for status.
func (r *Restarter) Report() registry.ReplicaRestart {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := registry.ReplicaRestart{NodeRestart: r.node.Restart, Enabled: len(r.opts.Command) > 0, Shadow: r.opts.Shadow, Ready: r.node.Ready}
	if r.node.Deaf {
		rep.NoLanes = NoLanesRemedy(r.node.Nudged, r.peers)
	}
	return rep
}

// NoLanesRemedy describes a replica that applies no lane message (nudged
// entries; peers: the live replicas that serve theirs, "" when unknown).
func NoLanesRemedy(nudged int, peers string) string {
	s := fmt.Sprintf("the replica applies no lane message at all: %d entries stay nudged, none was applied since it started", nudged)
	if peers != "" {
		s += " (" + peers + " serve theirs)"
	}
	return s + "; start the node with the cluster bus (OS_CLUSTER_DRIVER=redis, OS_REDIS_URL the Redis that replica.bus.url names, OS_CLUSTER_REPLICAS unset), then restart it"
}

// view is what a Restarter reads of the Driver's entries.
type view struct {
	stale      []registry.Ref
	staleSince time.Time // when the oldest stale entry became stale
	pending    int
	nudged     int
	nudgedRefs map[registry.Ref]bool
	restarts   int
	deaf       bool
}

func (d *Driver) restartView() view {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := view{restarts: d.restarts, nudgedRefs: map[registry.Ref]bool{}}
	laneNudged := 0
	for ref, e := range d.entries {
		switch e.status.State {
		case registry.ReplicaStale:
			v.stale = append(v.stale, ref)
			if v.staleSince.IsZero() || e.status.Since.Before(v.staleSince) {
				v.staleSince = e.status.Since
			}
		case registry.ReplicaPending:
			v.pending++
		case registry.ReplicaNudged:
			v.nudged++
			v.nudgedRefs[ref] = true
			if lanesApply(e.class) && e.status.Attempts >= deafAttempts {
				laneNudged++
			}
		}
	}
	// A candidate only: the peers tell a deaf replica from rows that no
	// replica can apply (those stay nudged everywhere).
	v.deaf = laneNudged > 0 && d.applied == 0
	slices.SortFunc(v.stale, func(a, b registry.Ref) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return v
}

// lanesApply: a lane message updates entries of this class on 17.4, and
// the replica shows it.
func lanesApply(c class) bool {
	return c == classObject || c == classDatasource || c == classTranslation
}

// ready reads the replica's anonymous readiness endpoint.
func (p *prober) ready(ctx context.Context) error {
	code, _, err := p.get(ctx, "/api/v1/ready")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/api/v1/ready answered %d", code)
	}
	return nil
}

// Run watches the node and restarts it when due, until ctx ends; it
// returns nil then. A restart in flight when ctx ends is abandoned: its
// lease expires after LeaseTimeout (the node comes back by itself).
func (r *Restarter) Run(ctx context.Context) error {
	r.Resume(ctx)
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	var lastPeers time.Time
	for {
		v := r.observe(ctx)
		if v.deaf && time.Since(lastPeers) > 10*r.opts.Interval {
			lastPeers = time.Now()
			r.notePeers(ctx)
		} else if !v.deaf {
			r.mu.Lock()
			r.peers = ""
			r.mu.Unlock()
		}
		r.decide(ctx, v)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Resume takes the last restart from this replica id's own heartbeat, so
// that min_interval holds across a restart of the sidecar too. Call it
// before the first heartbeat carries Node (which would replace it); Run
// calls it if nobody did. Only the first call reads the store.
func (r *Restarter) Resume(ctx context.Context) {
	if r.opts.Store == nil || r.resumed {
		return
	}
	r.resumed = true
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reps, err := r.opts.Store.Heartbeats(rctx)
	if err != nil {
		return
	}
	for _, rep := range reps {
		if rep.ReplicaID == r.opts.ReplicaID && !rep.Node.Restart.LastAt.IsZero() {
			r.mu.Lock()
			nr := rep.Node.Restart
			r.node.Restart.LastAt, r.node.Restart.LastResult, r.node.Restart.LastReason, r.node.Restart.Count = nr.LastAt, nr.LastResult, nr.LastReason, nr.Count
			if nr.Phase == registry.RestartInFlight && nr.LastResult == "" {
				// This sidecar died restarting: the lease expires by
				// itself; the restart counts for min_interval.
				r.node.Restart.LastResult, r.node.Restart.LastReason = registry.RestartFailed, "the sidecar stopped while the restart was in flight"
			}
			r.mu.Unlock()
		}
	}
}

// observe reads the node's readiness and the Driver's entries into the
// node report, telling OnChange when it changed.
func (r *Restarter) observe(ctx context.Context) view {
	err := r.d.probe.ready(ctx)
	v := r.d.restartView()
	r.mu.Lock()
	prev := r.node
	r.node.Ready, r.node.CheckedAt = err == nil, time.Now()
	r.node.Stale, r.node.Nudged, r.node.Deaf = len(v.stale), v.nudged, v.deaf && r.peers != ""
	deaf := r.node.Deaf
	changed := prev.Ready != r.node.Ready || prev.Stale != r.node.Stale || prev.Deaf != r.node.Deaf || (prev.Nudged == 0) != (r.node.Nudged == 0)
	r.mu.Unlock()
	if m := r.opts.Metrics; m != nil {
		m.deaf.Set(boolFloat(deaf))
	}
	if !prev.Deaf && deaf {
		r.log.WarnContext(ctx, "replica applies no lane message", slog.Int("nudged", v.nudged))
	}
	if changed {
		r.changed()
	}
	return v
}

func (r *Restarter) changed() {
	if r.opts.OnChange != nil {
		r.opts.OnChange()
	}
}

// notePeers records which live peers serve every change: a replica that
// applies no lane is named deaf only while some peer does.
func (r *Restarter) notePeers(ctx context.Context) {
	if r.opts.Store == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reps, err := r.opts.Store.Heartbeats(rctx)
	if err != nil {
		return
	}
	var serving []string
	for _, p := range r.livePeers(reps) {
		if p.Node.Reported && p.Node.Nudged == 0 && !p.Node.Deaf {
			serving = append(serving, p.ReplicaID)
		}
	}
	r.mu.Lock()
	r.peers = strings.Join(serving, ", ")
	r.mu.Unlock()
}

// livePeers returns the other replicas whose heartbeat is fresh and that
// did not stop.
func (r *Restarter) livePeers(reps []snapshot.Heartbeat) []snapshot.Heartbeat {
	var out []snapshot.Heartbeat
	for _, row := range fleet.Build(snapshot.Watermark{}, reps, r.opts.Beat, time.Now()).Replicas {
		if row.ReplicaID == r.opts.ReplicaID || row.Stopped || row.Stale {
			continue
		}
		out = append(out, row.Heartbeat)
	}
	return out
}

// setPhase moves the report to phase with reason, telling OnChange, the
// log and the metrics when either changed. refusal labels a refusal's
// count.
func (r *Restarter) setPhase(ctx context.Context, phase registry.RestartPhase, reason, refusal string) {
	r.mu.Lock()
	cur := r.node.Restart
	if cur.Phase == phase && cur.Reason == reason {
		r.mu.Unlock()
		return
	}
	r.node.Restart.Phase, r.node.Restart.Reason = phase, reason
	if cur.Phase != phase {
		r.node.Restart.Since = time.Now()
	}
	r.mu.Unlock()
	r.opts.Metrics.phase(phase)
	if phase == registry.RestartRefused && cur.Reason != reason {
		r.opts.Metrics.refused(refusal)
	}
	switch phase {
	case registry.RestartRefused, registry.RestartWouldRestart, registry.RestartOff:
		if cur.Phase != phase {
			r.log.InfoContext(ctx, "replica restart "+string(phase), slog.String("reason", reason))
		}
	}
	r.changed()
}

// decide moves the restart along: nothing stale, planned, refused, or a
// restart now.
func (r *Restarter) decide(ctx context.Context, v view) {
	if len(v.stale) == 0 {
		r.mu.Lock()
		cur := r.node.Restart.Phase
		r.mu.Unlock()
		switch {
		case len(r.opts.Command) == 0:
			r.setPhase(ctx, registry.RestartOff, "", "")
		case cur != registry.RestartDone && cur != registry.RestartFailed:
			r.setPhase(ctx, registry.RestartIdle, "", "")
		}
		return
	}
	now := time.Now()
	what := staleWhat(v.stale)
	if len(r.opts.Command) == 0 {
		r.setPhase(ctx, registry.RestartOff, what+": set "+"replica.restart.command, or "+RestartRemedy, "")
		return
	}
	if due := v.staleSince.Add(r.opts.After); now.Before(due) {
		r.setPhase(ctx, registry.RestartPlanned, fmt.Sprintf("%s: restart at %s (replica.restart.after %s)", what, stamp(due), r.opts.After), "")
		return
	}
	r.mu.Lock()
	last := r.node.Restart.LastAt
	r.mu.Unlock()
	if next := last.Add(r.opts.MinInterval); !last.IsZero() && now.Before(next) {
		r.setPhase(ctx, registry.RestartPlanned, fmt.Sprintf("%s: restart at %s (replica.restart.min_interval %s since the last one)", what, stamp(next), r.opts.MinInterval), "")
		return
	}
	// A refused restart is looked at again every few intervals, not every
	// one: each look reads the fleet's heartbeats.
	if r.node.Restart.Phase == registry.RestartRefused && now.Before(r.retryAt) {
		return
	}
	r.retryAt = now.Add(refusedRetry * r.opts.Interval)
	if ok, why, label := r.safe(ctx); !ok {
		r.setPhase(ctx, registry.RestartRefused, what+": "+why, label)
		return
	}
	if r.opts.Shadow {
		r.setPhase(ctx, registry.RestartWouldRestart, what+": would restart the replica now (shadow mode)", "")
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	lease, err := r.opts.Store.AcquireLease(lctx, LeaseRestart, r.opts.ReplicaID, r.opts.LeaseTimeout)
	cancel()
	var held *snapshot.LeaseHeldError
	switch {
	case errors.As(err, &held):
		r.setPhase(ctx, registry.RestartRefused, fmt.Sprintf("%s: replica %s is restarting (it holds the restart lease until %s)", what, held.Lease.Holder, stamp(held.Lease.ExpiresAt)), "lease")
		return
	case err != nil:
		r.setPhase(ctx, registry.RestartRefused, what+": the restart lease could not be taken: "+err.Error(), "store")
		return
	}
	// Holding the lease, look again: a peer that was restarting until its
	// lease expired may not be ready yet.
	if ok, why, label := r.safe(ctx); !ok {
		r.release(ctx, lease)
		r.setPhase(ctx, registry.RestartRefused, what+": "+why, label)
		return
	}
	r.restart(ctx, lease, v)
}

// safe says whether restarting the node now leaves the fleet serving: the
// node itself is ready (a node that is down is not restarted on top), and
// every other live replica reports a ready node and no restart in flight.
// Stale entries elsewhere never block. label names a refusal's kind.
func (r *Restarter) safe(ctx context.Context) (ok bool, why, label string) {
	if !r.Node().Ready {
		return false, "the replica does not answer /api/v1/ready 200", "not-ready"
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reps, err := r.opts.Store.Heartbeats(rctx)
	if err != nil {
		return false, "the fleet's heartbeats could not be read: " + err.Error(), "store"
	}
	for _, p := range r.livePeers(reps) {
		switch n := p.Node; {
		case !n.Reported:
			return false, fmt.Sprintf("replica %s reports no node (a sidecar without replica.url, or an older version)", p.ReplicaID), "peer"
		case n.Restart.Phase == registry.RestartInFlight:
			return false, fmt.Sprintf("replica %s is restarting", p.ReplicaID), "peer"
		case !n.Ready:
			return false, fmt.Sprintf("replica %s is not ready (its node does not answer /api/v1/ready 200)", p.ReplicaID), "peer"
		}
	}
	return true, "", ""
}

// restart runs the command while holding lease, then waits until the node
// is ready and healed again (or the lease's bound), and checks that the
// stale entries cleared.
func (r *Restarter) restart(ctx context.Context, lease snapshot.Lease, v view) {
	start := time.Now()
	deadline := start.Add(r.opts.LeaseTimeout)
	what := staleWhat(v.stale)
	r.mu.Lock()
	r.node.Restart.LastAt, r.node.Restart.LastResult, r.node.Restart.LastReason = start, "", ""
	r.node.Restart.Count++
	r.mu.Unlock()
	r.setPhase(ctx, registry.RestartInFlight, what+": restarting the replica", "")
	r.log.InfoContext(ctx, "restarting the replica", slog.Int("stale", len(v.stale)), slog.String("first", string(v.stale[0].Kind)+" "+v.stale[0].Key),
		slog.Int64("lease_token", lease.Token))

	if err := r.run(ctx, deadline); err != nil {
		r.finish(ctx, lease, registry.RestartFailed, "failed", "the restart command failed: "+err.Error(), start)
		return
	}
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	var readyAt time.Time // when the restarted node first answered ready
	for {
		now := r.observe(ctx)
		node := r.Node()
		noticed := now.restarts > v.restarts
		if noticed && node.Ready && readyAt.IsZero() {
			readyAt = time.Now()
		}
		// Healed: every entry checked again, and every one the node served
		// before it restarted served again (run-time objects registered
		// again). Entries nudged before the restart (rows no node applies)
		// do not hold the lease.
		relapsed := 0
		for ref := range now.nudgedRefs {
			if !v.nudgedRefs[ref] {
				relapsed++
			}
		}
		if noticed && node.Ready && now.pending == 0 && relapsed == 0 {
			var left []registry.Ref
			for _, ref := range now.stale {
				if slices.Contains(v.stale, ref) {
					left = append(left, ref)
				}
			}
			if len(left) > 0 {
				r.finish(ctx, lease, registry.RestartFailed, "uncleared", fmt.Sprintf("the restart did not clear %s: not repeated before replica.restart.min_interval (%s)", staleWhat(left), r.opts.MinInterval), start)
				return
			}
			r.finish(ctx, lease, registry.RestartDone, "done", fmt.Sprintf("restarted and healed in %s (ready again after %s); %d stale entries in-sync",
				time.Since(start).Round(time.Second), readyAt.Sub(start).Round(time.Second), len(v.stale)), start)
			return
		}
		if !time.Now().Before(deadline) {
			why := "no restart of the replica was noticed"
			switch {
			case noticed && !node.Ready:
				why = "the replica is not ready"
			case noticed:
				why = fmt.Sprintf("%d entries pending, %d nudged that it served before", now.pending, relapsed)
			}
			r.finish(ctx, lease, registry.RestartFailed, "unhealed", fmt.Sprintf("not ready and healed within replica.restart.lease_timeout (%s): %s", r.opts.LeaseTimeout, why), start)
			return
		}
		select {
		case <-ctx.Done():
			r.log.WarnContext(ctx, "stopping with a replica restart in flight; the restart lease expires by itself", slog.Time("expires", deadline))
			return
		case <-t.C:
		}
	}
}

// finish ends a restart: the lease released, the report and the metrics
// say how it ended.
func (r *Restarter) finish(ctx context.Context, lease snapshot.Lease, phase registry.RestartPhase, result, reason string, start time.Time) {
	r.release(ctx, lease)
	r.mu.Lock()
	r.node.Restart.LastResult, r.node.Restart.LastReason = phase, reason
	r.mu.Unlock()
	r.setPhase(ctx, phase, reason, "")
	if m := r.opts.Metrics; m != nil {
		m.runs.WithLabelValues(result).Inc()
	}
	lvl := slog.LevelInfo
	if phase != registry.RestartDone {
		lvl = slog.LevelWarn
	}
	r.log.Log(ctx, lvl, "replica restart "+result, slog.String("reason", reason), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
}

func (r *Restarter) release(ctx context.Context, lease snapshot.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.opts.Store.ReleaseLease(rctx, lease); err != nil {
		r.log.WarnContext(ctx, "restart lease not released; it expires by itself", slog.String("error", err.Error()), slog.Time("expires", lease.ExpiresAt))
	}
}

// run runs the restart command with the minimal environment, bounded by
// restartCommandTimeout and the lease.
func (r *Restarter) run(ctx context.Context, deadline time.Time) error {
	bound := min(restartCommandTimeout, time.Until(deadline))
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	cmd := exec.CommandContext(rctx, r.opts.Command[0], r.opts.Command[1:]...)
	cmd.Env = r.opts.Env
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Do not wait for grandchildren holding the output pipe after a kill.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%s timed out after %s", r.opts.Command[0], bound)
	case err != nil:
		return fmt.Errorf("%s: %w: %s", r.opts.Command[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if n := len(t.b) - 1024; n > 0 {
		t.b = t.b[n:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// staleWhat names the stale entries: how many, and the first.
func staleWhat(refs []registry.Ref) string {
	switch len(refs) {
	case 0:
		return "no stale entries"
	case 1:
		return fmt.Sprintf("1 stale entry (%s %s)", refs[0].Kind, refs[0].Key)
	}
	return fmt.Sprintf("%d stale entries (%s %s, …)", len(refs), refs[0].Kind, refs[0].Key)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
