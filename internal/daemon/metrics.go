package daemon

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/objectstack-fleet/reconciler/internal/buildinfo"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// opsMetrics are the daemon's own series, beside the loop's and the replica
// driver's: what alerts and the dashboard need to tell a running, synced,
// unstalled sidecar from one that is not. Every series exists from the start.
type opsMetrics struct {
	driftReports *prometheus.CounterVec // result: ok, error
}

// newOpsMetrics registers the daemon's series on reg. status is read at
// scrape time.
func newOpsMetrics(reg prometheus.Registerer, version string, status func() reconcile.Status) *opsMetrics {
	m := &opsMetrics{
		driftReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_drift_reports_total",
			Help: "Drift reports written (schedule, SIGUSR2, POST /v1/drift), by result (ok, error).",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "error"} {
		m.driftReports.WithLabelValues(r)
	}
	bi := buildinfo.Read(version)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconciler_build_info",
		Help: "Always 1; the labels say which build runs (version, commit, dirty).",
	}, []string{"version", "commit", "dirty", "goversion"})
	build.WithLabelValues(bi.Version, bi.Commit, strconv.FormatBool(bi.Dirty), bi.Go).Set(1)
	boolGauge := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	reg.MustRegister(m.driftReports, build,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "reconciler_synced",
			Help: "1 once the first full sync is done (/readyz answers 200), else 0.",
		}, func() float64 { return boolGauge(status().Synced) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "reconciler_store_up",
			Help: "1 while the last store operation succeeded, else 0.",
		}, func() float64 { return boolGauge(status().StoreUp) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "reconciler_journal_pending_entries",
			Help: "Journal entries committed after the cursor's view that the cursor cannot see yet (held back by open transactions).",
		}, func() float64 { return float64(status().Stall.Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "reconciler_stall_oldest_transaction_seconds",
			Help: "Age of the oldest open writing transaction holding back changes (0: none).",
		}, func() float64 {
			var oldest float64
			for _, b := range status().Stall.Blockers {
				oldest = max(oldest, b.XactAge.Seconds())
			}
			return oldest
		}),
	)
	return m
}

// driftResult counts a written drift report.
func (m *opsMetrics) driftResult(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.driftReports.WithLabelValues("error").Inc()
		return
	}
	m.driftReports.WithLabelValues("ok").Inc()
}
