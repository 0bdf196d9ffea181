package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/objectstack-fleet/reconciler/internal/coalesce"
	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// LatestDriftFile is the name of the newest report in drift.dir.
const LatestDriftFile = "latest.json"

// keepDriftFiles bounds how many timestamped reports drift.dir keeps, and
// keepDriftBytes their size in all (a store of 20,000 held items makes
// 6 MB reports: 100 of them would fill 600 MB); the newest is always kept.
const (
	keepDriftFiles = 100
	keepDriftBytes = 64 << 20
)

// driftStore keeps each replica's latest drift report.
type driftStore interface {
	WriteDrift(ctx context.Context, replicaID string, at time.Time, report json.RawMessage) error
}

// driftWriter writes drift reports: a timestamped file and latest.json in
// drift.dir (each written atomically, readable by the daemon's user only),
// the store's row, one log line and the blockers gauge (the loop's Drift
// sets the other drift gauges). Callers that ask while a report is being
// written share it: one relist of the store, one file.
type driftWriter struct {
	rec       *reconcile.Reconciler
	store     driftStore
	replicaID string
	metrics   *reconcile.Metrics
	ops       *opsMetrics // counts reports written (nil: not counted)
	log       *slog.Logger

	mu  sync.Mutex
	dir string

	writes coalesce.Call[reconcile.DriftReport]
}

// driftTimeout bounds one drift report.
const driftTimeout = 2 * time.Minute

// makeDriftDir creates drift.dir, readable by the daemon's user only (an
// existing directory keeps its mode; the reports in it are 0600 anyway).
func makeDriftDir(dir string) error { return os.MkdirAll(dir, 0o700) }

func (w *driftWriter) setDir(dir string) {
	w.mu.Lock()
	w.dir = dir
	w.mu.Unlock()
}

// write writes a report now, or shares the one being written.
func (w *driftWriter) write(ctx context.Context) (reconcile.DriftReport, error) {
	return w.writes.Do(ctx, func(ctx context.Context) (reconcile.DriftReport, error) {
		ctx, cancel := context.WithTimeout(ctx, driftTimeout)
		defer cancel()
		rep, err := w.writeNow(ctx)
		w.ops.driftResult(err)
		return rep, err
	})
}

func (w *driftWriter) writeNow(ctx context.Context) (reconcile.DriftReport, error) {
	w.mu.Lock()
	dir := w.dir
	w.mu.Unlock()
	rep, err := w.rec.Drift(ctx)
	if err != nil {
		return reconcile.DriftReport{}, fmt.Errorf("compute drift report: %w", err)
	}
	if rep.At.IsZero() {
		rep.At = time.Now()
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, fmt.Errorf("encode drift report: %w", err)
	}
	b = append(b, '\n')
	name := "drift-" + rep.At.UTC().Format("20060102T150405.000000000Z") + ".json"
	var errs []error
	if err := writeAtomic(dir, name, b); err != nil {
		errs = append(errs, err)
	} else if err := writeAtomic(dir, LatestDriftFile, b); err != nil {
		errs = append(errs, err)
	}
	if err := w.store.WriteDrift(ctx, w.replicaID, rep.At, b); err != nil {
		errs = append(errs, fmt.Errorf("store drift report: %w", err))
	}
	pruneDrift(dir, keepDriftFiles, keepDriftBytes)
	s := rep.Summary
	if w.metrics != nil {
		w.metrics.DriftItems.WithLabelValues("blockers").Set(float64(len(rep.Stall.Blockers)))
	}
	level := slog.LevelInfo
	if !rep.Clean() {
		level = slog.LevelWarn
	}
	w.log.Log(ctx, level, "drift report",
		slog.Bool("clean", rep.Clean()),
		slog.Int("desired", s.Desired), slog.Int("ready", s.Ready), slog.Int("not_ready", s.NotReady),
		slog.Int("signature_mismatch", s.SignatureMismatch), slog.Int("orphans", s.Orphans),
		slog.Int("missing", s.Missing), slog.Int("checksum_mismatches", s.ChecksumMismatches), slog.Int("guarded", s.Guarded),
		slog.Int("blockers", len(rep.Stall.Blockers)), slog.Float64("lag_seconds", rep.LagSeconds),
		slog.String("file", filepath.Join(dir, name)))
	return rep, errors.Join(errs...)
}

// pruneDrift keeps the newest keep timestamped reports of dir, fewer when
// they pass maxBytes in all (the newest is always kept). It lists the
// directory rather than matching a pattern, so that a dir holding pattern
// characters ("[", "*") is pruned all the same.
func pruneDrift(dir string, keep int, maxBytes int64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type report struct {
		name string
		size int64
	}
	var reports []report
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, "drift-") && strings.HasSuffix(n, ".json") {
			var size int64
			if fi, err := e.Info(); err == nil {
				size = fi.Size()
			}
			reports = append(reports, report{n, size})
		}
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].name > reports[j].name }) // newest first: timestamps sort lexically
	var total int64
	for i, r := range reports {
		total += r.size
		if i == 0 || i < keep && total <= maxBytes {
			continue
		}
		_ = os.Remove(filepath.Join(dir, r.name))
	}
}

// writeAtomic writes dir/name (mode 0600) through a temporary file and a
// rename, so that readers never see a partial report.
func writeAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("write drift report: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600) // CreateTemp's mode, stated: reports are the daemon user's
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write drift report %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// driftSchedule runs a job on drift.schedule with robfig/cron; the spec
// can be changed while it runs (SIGHUP).
type driftSchedule struct {
	c   *cron.Cron
	job func()

	mu sync.Mutex
	id cron.EntryID
	on bool
}

func newDriftSchedule(spec string, job func()) (*driftSchedule, error) {
	s := &driftSchedule{c: cron.New(cron.WithChain(cron.Recover(cron.DiscardLogger))), job: job}
	if err := s.set(spec); err != nil {
		return nil, err
	}
	return s, nil
}

// set replaces the schedule; "" disables it.
func (s *driftSchedule) set(spec string) error {
	var sched cron.Schedule
	if spec = strings.TrimSpace(spec); spec != "" {
		var err error
		if sched, err = config.ParseSchedule(spec); err != nil {
			return fmt.Errorf("%s: invalid cron spec %q: %w", config.KeyDriftSchedule, spec, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.c.Remove(s.id)
		s.on = false
	}
	if sched != nil {
		s.id = s.c.Schedule(sched, cron.FuncJob(s.job))
		s.on = true
	}
	return nil
}

func (s *driftSchedule) start() { s.c.Start() }

func (s *driftSchedule) stop() context.Context { return s.c.Stop() }

// startDrift builds the drift writer and schedule from the configuration
// current now (a reload may have replaced the one Run started with) and
// publishes them to Reload.
func (d *Daemon) startDrift(rec *reconcile.Reconciler, store driftStore, replicaID string, metrics *reconcile.Metrics, ops *opsMetrics) (*driftWriter, *driftSchedule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg := d.cfg
	if err := makeDriftDir(cfg.DriftDir); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", config.KeyDriftDir, err)
	}
	sched, err := newDriftSchedule(cfg.DriftSchedule, d.DriftNow)
	if err != nil {
		return nil, nil, err
	}
	d.drift = &driftWriter{rec: rec, store: store, replicaID: replicaID, dir: cfg.DriftDir, metrics: metrics, ops: ops, log: d.log}
	d.sched = sched
	return d.drift, sched, nil
}

// runDrift writes a drift report for every request (schedule, SIGUSR2).
func (d *Daemon) runDrift(ctx context.Context, drift *driftWriter) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.driftCh:
			if _, err := drift.write(ctx); err != nil && ctx.Err() == nil {
				d.log.ErrorContext(ctx, "drift report failed", slog.String("error", err.Error()))
			}
		}
	}
}
