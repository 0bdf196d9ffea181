package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/registry"
)

// Metrics are the loop's Prometheus metrics.
type Metrics struct {
	Materializations *prometheus.CounterVec // kind, result (ready|degraded|held|panic|timeout)
	Evictions        *prometheus.CounterVec // kind
	Passes           *prometheus.CounterVec // trigger (a Cause)
	Items            *prometheus.GaugeVec   // kind, state
	CursorLag        prometheus.Gauge
	PollDuration     prometheus.Histogram
	PassDuration     prometheus.Histogram
	Relists          *prometheus.CounterVec // reason
	StoreErrors      prometheus.Counter
	DriftItems       *prometheus.GaugeVec   // section
	Abandoned        prometheus.Gauge       // calls the loop stopped waiting for, still running
	Retries          *prometheus.CounterVec // kind, cause (backoff|requested)
	Revalidations    *prometheus.CounterVec // kind, result (ready|degraded|held)
	GuardedEvictions *prometheus.GaugeVec   // kind: evictions the guard holds back
}

// DriftSections are the section labels of reconciler_drift_items.
var DriftSections = []string{"not_ready", "signature_mismatch", "orphans", "missing", "checksum_mismatches", "guarded", "blockers"}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, still usable).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Materializations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_materializations_total", Help: "Materializations by kind and result.",
		}, []string{"kind", "result"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_evictions_total", Help: "Evicted entries by kind.",
		}, []string{"kind"}),
		Passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_passes_total", Help: "Reconcile passes by trigger.",
		}, []string{"trigger"}),
		Items: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_items", Help: "Registry entries by kind and state.",
		}, []string{"kind", "state"}),
		CursorLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reconciler_cursor_lag_seconds", Help: "Age of the cursor the registries reflect.",
		}),
		PollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "reconciler_poll_duration_seconds", Help: "Duration of journal polls.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		PassDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "reconciler_pass_duration_seconds", Help: "Duration of passes that changed something.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}),
		Relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_relists_total", Help: "Full relists by reason.",
		}, []string{"reason"}),
		StoreErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reconciler_store_errors_total", Help: "Failed store operations.",
		}),
		DriftItems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_drift_items", Help: "Items in the latest drift report by section.",
		}, []string{"section"}),
		Abandoned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reconciler_abandoned_goroutines",
			Help: "Calls into materializers (Materialize, Close) the loop stopped waiting for that have not returned yet.",
		}),
		GuardedEvictions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reconciler_guarded_evictions",
			Help: "Evictions the eviction guard holds back (the entries keep serving) by kind, until their rows come back or a release.",
		}, []string{"kind"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_retries_total",
			Help: "Entries materialized again without a change of their rows, by kind and cause (backoff of a degraded entry, or requested).",
		}, []string{"kind", "cause"}),
		Revalidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_revalidations_total",
			Help: "Ready entries checked again (revalidate.interval), by kind and result.",
		}, []string{"kind", "result"}),
	}
	// Every series exists from the start at zero, so that dashboards and
	// alerts never see a missing series.
	for _, k := range registry.Kinds {
		m.Evictions.WithLabelValues(string(k))
		m.GuardedEvictions.WithLabelValues(string(k))
		for _, r := range []string{"ready", "degraded", "held", "panic", "timeout"} {
			m.Materializations.WithLabelValues(string(k), r)
		}
		for _, st := range registry.States {
			m.Items.WithLabelValues(string(k), string(st))
		}
		for _, c := range []string{RetryBackoff, RetryRequested} {
			m.Retries.WithLabelValues(string(k), c)
		}
	}
	for _, k := range []registry.Kind{registry.KindConnector, registry.KindDatasource} {
		for _, res := range []string{"ready", "degraded", "held"} {
			m.Revalidations.WithLabelValues(string(k), res)
		}
	}
	for _, t := range []Cause{CauseStart, CausePoll, CauseHint, CauseManual, CauseResync,
		CauseAntiEntropy, CauseExpired, CauseRegressed, CauseRetry, CauseRecovered, CauseItemRetry} {
		m.Passes.WithLabelValues(string(t))
		m.Relists.WithLabelValues(string(t))
	}
	for _, s := range DriftSections {
		m.DriftItems.WithLabelValues(s)
	}
	if reg != nil {
		reg.MustRegister(m.Materializations, m.Evictions, m.Passes, m.Items, m.CursorLag,
			m.PollDuration, m.PassDuration, m.Relists, m.StoreErrors, m.DriftItems, m.Abandoned, m.Retries, m.Revalidations, m.GuardedEvictions)
	}
	return m
}
