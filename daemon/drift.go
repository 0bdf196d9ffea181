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

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/reconcile"
)

// LatestDriftFile is the name of the newest report in drift.dir.
const LatestDriftFile = "latest.json"

// keepDriftFiles bounds how many timestamped reports drift.dir keeps.
const keepDriftFiles = 100

// driftStore keeps each replica's latest drift report.
type driftStore interface {
	WriteDrift(ctx context.Context, replicaID string, at time.Time, report json.RawMessage) error
}

// driftWriter writes drift reports: a timestamped file and latest.json in
// drift.dir (each written atomically), the store's row, one log line and
// the drift metrics. Writes are serialized.
type driftWriter struct {
	rec     *reconcile.Reconciler
	store   driftStore
	replica string
	metrics *reconcile.Metrics
	log     *slog.Logger

	mu  sync.Mutex
	dir string
}

func (w *driftWriter) setDir(dir string) {
	w.mu.Lock()
	w.dir = dir
	w.mu.Unlock()
}

func (w *driftWriter) write(ctx context.Context) (reconcile.DriftReport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
	if err := writeAtomic(w.dir, name, b); err != nil {
		errs = append(errs, err)
	} else if err := writeAtomic(w.dir, LatestDriftFile, b); err != nil {
		errs = append(errs, err)
	}
	if err := w.store.WriteDrift(ctx, w.replica, rep.At, b); err != nil {
		errs = append(errs, fmt.Errorf("store drift report: %w", err))
	}
	w.prune()
	s := rep.Summary
	if w.metrics != nil {
		for section, n := range map[string]int{
			"not_ready": s.NotReady, "signature_mismatch": s.SignatureMismatch, "orphans": s.Orphans,
			"missing": s.Missing, "checksum_mismatches": s.ChecksumMismatches, "blockers": len(rep.Stall.Blockers),
		} {
			w.metrics.DriftItems.WithLabelValues(section).Set(float64(n))
		}
	}
	level := slog.LevelInfo
	if !rep.Clean() {
		level = slog.LevelWarn
	}
	w.log.Log(ctx, level, "drift report",
		slog.Bool("clean", rep.Clean()),
		slog.Int("desired", s.Desired), slog.Int("ready", s.Ready), slog.Int("not_ready", s.NotReady),
		slog.Int("signature_mismatch", s.SignatureMismatch), slog.Int("orphans", s.Orphans),
		slog.Int("missing", s.Missing), slog.Int("checksum_mismatches", s.ChecksumMismatches),
		slog.Int("blockers", len(rep.Stall.Blockers)), slog.Float64("lag_seconds", rep.LagSeconds),
		slog.String("file", filepath.Join(w.dir, name)))
	return rep, errors.Join(errs...)
}

// prune keeps the newest keepDriftFiles timestamped reports.
func (w *driftWriter) prune() {
	names, err := filepath.Glob(filepath.Join(w.dir, "drift-*.json"))
	if err != nil || len(names) <= keepDriftFiles {
		return
	}
	sort.Strings(names) // timestamps sort lexically
	for _, n := range names[:len(names)-keepDriftFiles] {
		_ = os.Remove(n)
	}
}

// writeAtomic writes dir/name through a temporary file and a rename, so
// that readers never see a partial report.
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
		err = os.Chmod(tmp, 0o644)
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
