package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/daemon/statusapi"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// parts are what build makes and run runs: each is made whole, in the
// order its dependencies allow, and nothing is set on it afterwards.
type parts struct {
	cfg   *config.Config
	rec   *reconcile.Reconciler
	srv   *statusapi.Server
	hb    *heartbeater // run writes the last heartbeat with it
	sched *driftSchedule
	// runs are the parts that run beside the loop, in start order: the
	// first to fail stops the loop and the others.
	runs []runner
	// closeBus, if set, releases the replica bus once the parts stopped.
	closeBus func() error
}

// runner is one part that runs until its context ends.
type runner struct {
	name string // prefixes its errors ("": they name it already)
	run  func(context.Context) error
}

// build makes every part of a prepared store's daemon from cfg. It starts
// nothing: what can fail at startup (an empty variable, a bad key, an
// unusable drift.dir, a busy listen address) fails here, and what it made
// until then is released. loopStop is the loop's part of a stop
// (reconcile.Options.Stop).
func (d *Daemon) build(ctx context.Context, cfg *config.Config, store snapshot.Store, loopStop func() context.Context) (_ *parts, err error) {
	log := d.log
	token, err := d.envValue(config.KeyStatusTokenEnv, cfg.StatusTokenEnv)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := reconcile.NewMetrics(reg)
	replicaMetrics := replica.NewMetrics(reg)
	restartMetrics := replica.NewRestartMetrics(reg)

	targets, err := d.notifyTargets(cfg)
	if err != nil {
		return nil, err
	}
	secrets, err := d.newSecretOpener(cfg)
	if err != nil {
		return nil, err
	}
	wake := newBeatWake()
	// The loop and the replica driver know each other: the loop notifies
	// the driver, which asks the loop whose eviction its guard holds. rec
	// is set below, before build returns: the driver asks only once run
	// has started it.
	var rec *reconcile.Reconciler
	guarded := func(k registry.Kind, key string) bool {
		e, ok := rec.Registries().Get(k, key)
		return ok && e.Guarded
	}
	drv, closeBus, err := d.replicaDriver(cfg, replicaMetrics, store, wake.poke, guarded)
	if err != nil {
		return nil, err
	}
	if closeBus != nil {
		defer func() {
			if err != nil {
				_ = closeBus()
			}
		}()
	}
	var converged func(int64) (int64, time.Time)
	if drv != nil {
		targets = append(targets, drv)
		converged = drv.Converged
	}
	mats, err := materializers(cfg, log)
	if err != nil {
		return nil, err
	}
	rs := d.restarter(cfg, drv, store, restartMetrics, wake.poke)
	var node func() snapshot.Node
	if rs != nil {
		// Before the first heartbeat carries the node: the last restart
		// (min_interval) is read from the heartbeat it replaces.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs.Resume(rctx)
		cancel()
		node = rs.Node
	}
	rec = reconcile.New(store, reconcile.Options{
		ReplicaID:          cfg.ReplicaID,
		PollInterval:       cfg.PollInterval,
		PollJitter:         pollJitter(cfg.PollJitter),
		ResyncInterval:     resyncInterval(cfg.ResyncInterval),
		RevalidateInterval: resyncInterval(cfg.RevalidateInterval),
		ApplyConcurrency:   cfg.ApplyConcurrency,
		ApplyTimeout:       cfg.ApplyTimeout,
		Stop:               loopStop,
		Materializers:      mats,
		Secrets:            secrets,
		CodeObjects:        cfg.CodeObjects,
		Limits:             limits(cfg),
		SyncGCPercent:      syncGCPercent(),
		Notifier:           targets.notifier(),
		Metrics:            metrics,
		Logger:             log,
		OnPass:             wake.onPass,
		ReplicaDrift:       replicaView{drv: drv}.ReplicaDrift,
		Guard:              guardOptions(cfg, store),
	})
	hb := &heartbeater{store: store, status: rec, version: d.opts.Version, log: log, every: snapshot.HeartbeatInterval(cfg.PollInterval),
		wake: wake, converged: converged, node: node}
	ops := newOpsMetrics(reg, d.opts.Version, rec.Status)
	drift, sched, err := d.startDrift(rec, store, cfg.ReplicaID, metrics, ops)
	if err != nil {
		return nil, err
	}

	srv, err := statusapi.Listen(cfg.StatusListen, statusapi.NewHandler(statusapi.Options{
		Backend:    rec,
		Token:      token,
		Gatherer:   reg,
		WriteDrift: drift.write,
		Version:    d.opts.Version,
		Store:      redact.URL(cfg.StoreURL),
		Replica:    replicaView{drv: drv, rs: rs},
		Fleet:      fleetReader(store, cfg.PollInterval),
		Guard:      rec,
		Warnings:   hb.warnings,
		Logger:     log,
		Control:    rec,
	}))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.KeyStatusListen, err)
	}
	d.rec.Store(rec)

	runs := []runner{
		{"", srv.Run},
		{"heartbeat", hb.run},
		{"drift reports", func(ctx context.Context) error { return d.runDrift(ctx, drift) }},
		{"journal pruning", pruner{store: store, retention: cfg.JournalRetention, log: log}.run},
	}
	for _, t := range targets {
		runs = append(runs, runner{"notify", t.Run})
	}
	if rs != nil {
		runs = append(runs, runner{"replica restart", rs.Run})
	}
	if h, ok := store.(snapshot.Hinter); ok && cfg.HintListen {
		runs = append(runs, runner{"hint listener", func(ctx context.Context) error { return h.Listen(ctx, rec.Hint) }})
	}
	return &parts{cfg: cfg, rec: rec, srv: srv, hb: hb, sched: sched, runs: runs, closeBus: closeBus}, nil
}
