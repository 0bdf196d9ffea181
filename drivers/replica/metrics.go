package replica

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/registry"
)

// Metrics are the Driver's Prometheus series. Every label set the Driver
// can export exists from the start, at 0.
type Metrics struct {
	publishes     *prometheus.CounterVec
	verifications *prometheus.CounterVec
	restarts      prometheus.Counter
	nudges        prometheus.Counter
	observed      *prometheus.CounterVec
	entries       *prometheus.GaugeVec
	conditions    *prometheus.GaugeVec
	repairs       *prometheus.CounterVec
	convergence   prometheus.Histogram
}

// RepairResults are the results of a schema repair: the platform synced
// the storage (ok), refused the save (refused), the save changed the
// object's rows (changed: it must not), or it failed (error).
var RepairResults = []string{"ok", "refused", "changed", "error"}

// ConvergenceBuckets are the bounds (seconds) of
// reconciler_replica_convergence_seconds: 1 ms to 5 min.
var ConvergenceBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewMetrics registers the series on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_publishes_total",
			Help: "Lane messages published to the replica's bus, by channel and result (ok, error).",
		}, []string{"channel", "result"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_verifications_total",
			Help: "Read-only probes of the replica's state of an entry, by result (in-sync, lacking, unseen, stale, unservable, unobservable, error).",
		}, []string{"result"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reconciler_replica_restarts_total",
			Help: "Restarts of the replica noticed through its health endpoint (each heals it).",
		}),
		nudges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reconciler_replica_nudges_total",
			Help: "Lane messages tried again (published or failed) because a probe found the replica still lacking a change.",
		}),
		observed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_bus_messages_total",
			Help: "Lane messages seen on the bus, by origin (own: this sidecar; other: anyone else).",
		}, []string{"origin"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_replica_entries",
			Help: "Entries by replica state (" + stateNames() + ").",
		}, []string{"state"}),
		conditions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_replica_condition",
			Help: "1 while a failure of the replica lasts, by condition (bus: publishing fails; credential: the replica refuses the token; version: a platform major this reconciler does not drive).",
		}, []string{"condition"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_replica_repairs_total",
			Help: "Schema repairs of unservable objects through the platform's save route (replica.repair: schema), by result (ok, refused, changed, error).",
		}, []string{"result"}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reconciler_replica_convergence_seconds",
			Help:    "Commit (the row's watermark time) to this replica verified serving the change (in-sync), both on the store's clock; one observation per change that reaches in-sync.",
			Buckets: ConvergenceBuckets,
		}),
	}
	for _, ch := range Channels {
		for _, r := range []string{"ok", "error"} {
			m.publishes.WithLabelValues(ch, r)
		}
	}
	for _, r := range []string{"in-sync", "lacking", "unseen", "stale", "unservable", "unobservable", "error"} {
		m.verifications.WithLabelValues(r)
	}
	for _, c := range []string{condBus, condCredential, condVersion} {
		m.conditions.WithLabelValues(c)
	}
	for _, r := range RepairResults {
		m.repairs.WithLabelValues(r)
	}
	for _, o := range []string{"own", "other"} {
		m.observed.WithLabelValues(o)
	}
	for _, s := range registry.ReplicaStates {
		m.entries.WithLabelValues(string(s))
	}
	if reg != nil {
		reg.MustRegister(m.publishes, m.verifications, m.restarts, m.nudges, m.observed, m.entries, m.conditions, m.repairs, m.convergence)
	}
	return m
}

// stateNames lists the replica states for a help text.
func stateNames() string {
	names := make([]string, len(registry.ReplicaStates))
	for i, s := range registry.ReplicaStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
