package replica

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/registry"
)

// RestartMetrics are a Restarter's Prometheus series. Every label set
// exists from the start, at 0, whether restarts are on or not.
type RestartMetrics struct {
	runs     *prometheus.CounterVec
	refusals *prometheus.CounterVec
	phases   *prometheus.GaugeVec
	deaf     prometheus.Gauge
}

// Restart results and refusal reasons (label values).
var (
	restartResults  = []string{"done", "uncleared", "unhealed", "failed"}
	restartRefusals = []string{"lease", "peer", "not-ready", "store"}
)

// NewRestartMetrics registers the series on reg (nil: not registered).
func NewRestartMetrics(reg prometheus.Registerer) *RestartMetrics {
	m := &RestartMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_restart_runs_total",
			Help: "Restarts of the replica run by replica.restart.command, by result (done: healed, stale entries cleared; uncleared: stale entries left; unhealed: not ready and healed within the lease; failed: the command failed).",
		}, []string{"result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_restart_refusals_total",
			Help: "Due restarts refused for now, by reason (lease: another replica is restarting; peer: another live replica is not ready or restarting; not-ready: this replica is down; store: the store could not be asked).",
		}, []string{"reason"}),
		phases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_replica_restart_phase",
			Help: "1 for the phase the replica's restart is in (off, idle, planned, refused, in-flight, done, failed, would-restart), else 0.",
		}, []string{"phase"}),
		deaf: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reconciler_replica_no_lanes",
			Help: "1 while the replica applies no lane message at all (every entry a lane should update stays nudged), else 0.",
		}),
	}
	for _, r := range restartResults {
		m.runs.WithLabelValues(r)
	}
	for _, r := range restartRefusals {
		m.refusals.WithLabelValues(r)
	}
	for _, p := range registry.RestartPhases {
		m.phases.WithLabelValues(string(p))
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.refusals, m.phases, m.deaf)
	}
	return m
}

// phase sets the phase gauge to p alone.
func (m *RestartMetrics) phase(p registry.RestartPhase) {
	if m == nil {
		return
	}
	for _, q := range registry.RestartPhases {
		v := 0.0
		if q == p {
			v = 1
		}
		m.phases.WithLabelValues(string(q)).Set(v)
	}
}

func (m *RestartMetrics) refused(reason string) {
	if m == nil || reason == "" {
		return
	}
	m.refusals.WithLabelValues(reason).Inc()
}
