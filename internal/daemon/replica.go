package daemon

import (
	"fmt"
	"strings"

	"github.com/objectstack-fleet/reconciler/drivers/replica"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// replicaDriver builds the driver of the replica beside this sidecar, or
// returns nil when replica.url is empty. closeBus releases the bus
// connections after the driver's Run has returned.
//
// guarded tells the entries whose eviction the loop's guard holds (their
// rows are gone, the replica keeps serving them): the driver sends no
// message for them.
func (d *Daemon) replicaDriver(cfg *config.Config, m *replica.Metrics, store snapshot.Store, onSettle func(), guarded func(registry.Kind, string) bool) (drv *replica.Driver, closeBus func() error, err error) {
	if cfg.ReplicaURL == "" {
		return nil, nil, nil
	}
	// The bus client's own log lines (dial retries) go through the
	// daemon's logger, at debug: the driver logs each condition once.
	replica.RouteRedisLogs(d.log)
	token, err := d.envValue(config.KeyReplicaTokenEnv, cfg.ReplicaTokenEnv)
	if err != nil {
		return nil, nil, err
	}
	bus, err := replica.NewRedisBus(cfg.ReplicaBusURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", config.KeyReplicaBusURL, err)
	}
	opts := replica.Options{
		URL:    cfg.ReplicaURL,
		Token:  token,
		Bus:    bus,
		Prefix: cfg.ReplicaBusPrefix,
		Origin: cfg.ReplicaOrigin,
		// Sidecars notice a change up to a poll interval apart: a message
		// another one sent that long before still told the replica.
		Window:             max(replica.DefaultWindow, 2*cfg.PollInterval),
		MaxProbesPerSecond: cfg.ReplicaMaxProbes,
		Metrics:            m,
		Logger:             d.log,
		Shadow:             strings.EqualFold(cfg.ReplicaMode, "shadow"),
		OnSettle:           onSettle,
		Guarded:            guarded,
	}
	// The nodes keep their records in the store's database: its catalog
	// tells whether an object's table and columns exist.
	cat, ok := store.(snapshot.Catalog)
	if ok {
		opts.Catalog = cat
	}
	if strings.EqualFold(cfg.ReplicaRepair, "schema") && ok {
		opts.Repair = repairStore{store, cat}
	}
	drv, err = replica.New(opts)
	if err != nil {
		_ = bus.Close()
		return nil, nil, fmt.Errorf("%s: %w", config.KeyReplicaURL, err)
	}
	return drv, bus.Close, nil
}

// restarter builds the Restarter of the driven replica (nil driver: none).
// Without replica.restart.command it only reports: the node's readiness in
// the heartbeats, a replica that applies no lane, the restart that stale
// entries call for.
func (d *Daemon) restarter(cfg *config.Config, drv *replica.Driver, store replica.RestartStore, m *replica.RestartMetrics, onChange func()) *replica.Restarter {
	if drv == nil {
		return nil
	}
	return replica.NewRestarter(drv, replica.RestartOptions{
		ReplicaID:    cfg.ReplicaID,
		Command:      cfg.RestartCommand,
		After:        cfg.RestartAfter,
		MinInterval:  cfg.RestartMinInterval,
		LeaseTimeout: cfg.RestartLeaseTimeout,
		Shadow:       restartShadow(cfg),
		Store:        store,
		Beat:         snapshot.HeartbeatInterval(cfg.PollInterval),
		OnChange:     onChange,
		Metrics:      m,
		Logger:       d.log,
	})
}

// restartShadow: in shadow mode (replica.mode: shadow) the restart it
// would do is reported and not done.
func restartShadow(cfg *config.Config) bool { return strings.EqualFold(cfg.ReplicaMode, "shadow") }

// repairStore is the store as the replica's schema repair uses it.
type repairStore struct {
	snapshot.Leaser
	snapshot.Catalog
}

// replicaView is what the status API and drift reports show of the
// replica (nil driver: nothing).
type replicaView struct {
	drv *replica.Driver
	rs  *replica.Restarter
}

// ItemReplica returns an entry's replica state (nil when not driven).
func (v replicaView) ItemReplica(kind registry.Kind, key string) *registry.ReplicaStatus {
	if v.drv == nil {
		return nil
	}
	if st, ok := v.drv.Status(kind, key); ok {
		return &st
	}
	return nil
}

// ReplicaSummary returns the replica's counts for /v1/status (nil when
// not driven).
func (v replicaView) ReplicaSummary() *registry.ReplicaReport {
	if v.drv == nil {
		return nil
	}
	r := v.drv.Summary()
	if v.rs != nil {
		rep := v.rs.Report()
		r.Restart = &rep
	}
	return &r
}

// ReplicaDrift returns the replica part of a drift report (nil when not
// driven).
func (v replicaView) ReplicaDrift() *registry.ReplicaReport {
	if v.drv == nil {
		return nil
	}
	r := v.drv.Drift()
	return &r
}
