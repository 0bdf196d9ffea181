package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/objectstack-fleet/reconciler/internal/config"
	"github.com/objectstack-fleet/reconciler/internal/redact"
	"github.com/objectstack-fleet/reconciler/internal/shutdown"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/snapshot"
	_ "github.com/objectstack-fleet/reconciler/snapshot/backends" // the stores store.url can name
)

// Options configure a Daemon.
type Options struct {
	Config  *config.Config
	Version string
	// Migrate allows migrating a PostgreSQL store at start (SQLite stores
	// are always migrated).
	Migrate bool
	// Logger; default discards. Level, if set, is the level the logger's
	// handler honours: a reload adjusts it.
	Logger *slog.Logger
	Level  *slog.LevelVar
	// Reload reloads the configuration on SIGHUP (nil: reload only
	// triggers a pass).
	Reload func() (*config.Config, error)
	// Getenv reads the token and secret variables (default os.Getenv).
	Getenv func(string) string
	// Started, if set, is called with the status API's address once
	// everything has started.
	Started func(addr string)
}

// Daemon is one running sidecar. Create it with New and call Run once.
type Daemon struct {
	opts Options
	log  *slog.Logger

	rec     atomic.Pointer[reconcile.Reconciler]
	driftCh chan struct{}

	// reloading serializes Reload; mu guards the fields below, which build
	// sets while Reload may already be called (a SIGHUP during startup).
	reloading sync.Mutex
	mu        sync.Mutex
	cfg       *config.Config
	drift     *driftWriter   // nil until build has made it
	sched     *driftSchedule // nil until build has made it
}

// New returns a Daemon. It does no I/O.
func New(opts Options) *Daemon {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &Daemon{opts: opts, log: opts.Logger, cfg: opts.Config, driftCh: make(chan struct{}, 1)}
}

// Resync asks for a full relist (SIGUSR1). Never blocks.
func (d *Daemon) Resync() {
	if r := d.rec.Load(); r != nil {
		r.Resync()
	}
}

// Reconcile asks for a pass now. Never blocks.
func (d *Daemon) Reconcile() {
	if r := d.rec.Load(); r != nil {
		r.Reconcile()
	}
}

// DriftNow asks for a drift report to be written (SIGUSR2). Never blocks;
// requests made while one is pending coalesce.
func (d *Daemon) DriftNow() {
	select {
	case d.driftCh <- struct{}{}:
	default:
	}
}

// Reload re-reads the configuration (SIGHUP) and asks for a pass. A bad
// configuration is rejected with an error log and the old one is kept.
// log.level, drift.schedule and drift.dir apply at once; other changed keys
// are named in a warning and apply at the next start.
func (d *Daemon) Reload() {
	defer d.Reconcile()
	if d.opts.Reload == nil {
		return
	}
	d.reloading.Lock()
	defer d.reloading.Unlock()
	next, err := d.opts.Reload()
	if err != nil {
		d.log.Error("config reload rejected, keeping the previous configuration", slog.String("error", err.Error()))
		return
	}
	// build makes the drift writer and schedule from d.cfg under d.mu: they
	// either see next or are already there to be told about it.
	d.mu.Lock()
	prev := d.cfg
	d.cfg = next
	drift, sched := d.drift, d.sched
	d.mu.Unlock()
	if d.opts.Level != nil {
		d.opts.Level.Set(next.LogLevel)
	}
	if drift != nil && next.DriftDir != prev.DriftDir {
		if err := makeDriftDir(next.DriftDir); err != nil {
			d.log.Error("drift.dir not usable, keeping the previous one", slog.String("dir", next.DriftDir), slog.String("error", err.Error()))
		} else {
			drift.setDir(next.DriftDir)
		}
	}
	if sched != nil && next.DriftSchedule != prev.DriftSchedule {
		if err := sched.set(next.DriftSchedule); err != nil {
			d.log.Error("drift.schedule not applied", slog.String("error", err.Error()))
		}
	}
	changed := restartKeys(prev, next)
	if len(changed) > 0 {
		d.log.Warn("config keys changed that apply at the next start", slog.Any("keys", changed))
	}
	d.log.Info("config reloaded", slog.String("file", next.File))
}

// appliedAtOnce are the keys a reload applies while running; every other
// changed key waits for the next start.
var appliedAtOnce = []string{config.KeyLogLevel, config.KeyDriftSchedule, config.KeyDriftDir}

// restartKeys returns the changed keys that apply at the next start only.
func restartKeys(a, b *config.Config) []string {
	return slices.DeleteFunc(config.Changed(a, b), func(k string) bool { return slices.Contains(appliedAtOnce, k) })
}

// startupTimeout bounds the store's preparation at start.
const startupTimeout = 20 * time.Second

// StopTimeout bounds a stop: once Run's context ends, Run returns within
// this long, whatever a materializer, an instance's Close, a notify target
// or the store does. What overruns is abandoned (and counted by the loop).
// The budget is one context with a deadline (internal/shutdown), spent in
// order: the loop (its pass in flight, closing its instances), the other
// parts, the last heartbeat, closing the store; each phase ends what the
// next one needs (below) before the next one's end.
const StopTimeout = 4 * time.Second

// What each phase of a stop after the loop needs of the budget.
const (
	partsNeed      = 500 * time.Millisecond // the other parts stopping
	lastBeatNeed   = 750 * time.Millisecond // the last heartbeat
	storeCloseNeed = 250 * time.Millisecond // closing the store
)

// stopPhases are the contexts of a stop's phases.
type stopPhases struct {
	loop, parts, beat, store context.Context
	cancel                   func()
}

func newStopPhases(stop context.Context) stopPhases {
	beat, cancelBeat := shutdown.Leave(stop, storeCloseNeed)
	parts, cancelParts := shutdown.Leave(beat, lastBeatNeed)
	loop, cancelLoop := shutdown.Leave(parts, partsNeed)
	return stopPhases{loop: loop, parts: parts, beat: beat, store: stop,
		cancel: func() { cancelLoop(); cancelParts(); cancelBeat() }}
}

// Run prepares the store, starts every part and runs until ctx ends; then
// the loop finishes or abandons its pass, closes every instance, the other
// parts stop, and a last heartbeat marked stopped is written, all within
// StopTimeout. It returns nil after a clean stop (also when ctx ends
// during startup), and an error naming the cause when startup or a part
// fails.
func (d *Daemon) Run(ctx context.Context) error {
	stop := shutdown.Watch(ctx, StopTimeout)
	defer stop.Release()
	phases := sync.OnceValue(func() stopPhases { return newStopPhases(stop.Context()) })
	defer func() { phases().cancel() }()
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	log := d.log
	store, err := snapshot.Open(cfg.StoreURL, snapshot.OpenOptions{Logger: log, ReadURL: cfg.StoreReadURL, MaxBodyBytes: int64(cfg.MaxBodyBytes),
		MaxTotalBytes: int64(cfg.MaxTotalBytes)})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer func() { within(phases().store, "closing the store", log, store.Close) }()
	pctx, cancel := context.WithTimeout(ctx, startupTimeout)
	if d.opts.Migrate {
		err = CheckPlatform(pctx, store)
	}
	if err == nil {
		err = PrepareStore(pctx, store, d.opts.Migrate, log)
	}
	cancel()
	if err != nil {
		return d.startFailed(ctx, err)
	}
	p, err := d.build(ctx, cfg, store, func() context.Context { return phases().loop })
	if err != nil {
		return err
	}
	if p.closeBus != nil {
		defer p.closeBus()
	}
	return d.run(ctx, p, phases)
}

// run starts the parts build made and runs the loop until ctx ends, then
// stops them all within the stop bound and writes the last heartbeat.
func (d *Daemon) run(ctx context.Context, p *parts, phases func() stopPhases) error {
	log, cfg := d.log, p.cfg
	// Everything that can fail at startup has succeeded: start the parts.
	// They outlive the loop (which may finish its pass after ctx ends); the
	// first one to fail stops the loop and the others.
	auxCtx, stopAux := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAux()
	parts, partsCtx := errgroup.WithContext(auxCtx)
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	defer context.AfterFunc(partsCtx, stopLoop)()
	for _, r := range p.runs {
		parts.Go(func() error {
			if err := r.run(partsCtx); err != nil && !errors.Is(err, context.Canceled) {
				if r.name == "" {
					return err
				}
				return fmt.Errorf("%s: %w", r.name, err)
			}
			return nil
		})
	}
	p.sched.start()

	log.Info("reconciler started",
		slog.String("replica", cfg.ReplicaID),
		slog.String("store", redact.URL(cfg.StoreURL)),
		slog.String("read", redact.URL(cfg.StoreReadURL)),
		slog.String("status", p.srv.Addr()),
		slog.String("version", d.opts.Version),
		slog.Duration("poll_interval", cfg.PollInterval))
	if d.opts.Started != nil {
		d.opts.Started(p.srv.Addr())
	}

	var errs []error
	if err := p.rec.Run(loopCtx); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, fmt.Errorf("reconcile loop: %w", err))
	}
	log.Info("reconcile loop stopped; stopping")
	<-p.sched.stop().Done()
	stopAux()
	var partsErr error
	if within(phases().parts, "stopping the parts", log, func() { partsErr = parts.Wait() }) && partsErr != nil {
		errs = append(errs, partsErr)
	}

	if err := p.hb.write(phases().beat, true); err != nil {
		log.Error("last heartbeat not written", slog.String("error", err.Error()))
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("reconciler stopped with an error", slog.String("error", err.Error()))
		return err
	}
	log.Info("reconciler stopped")
	return nil
}

// startFailed is Run's result for a startup error: nil when ctx ended
// meanwhile (a stop during startup is a clean stop).
func (d *Daemon) startFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		d.log.Info("stopped during startup", slog.String("error", err.Error()))
		return nil
	}
	return err
}

// within runs f, waiting for it until ctx ends at the latest; then it is
// abandoned with a warning naming what, and goes on in the background.
// It reports whether f returned (only then may its results be read).
func within(ctx context.Context, what string, log *slog.Logger, f func()) bool {
	if shutdown.Within(ctx, f) {
		return true
	}
	log.Warn("stop bound reached: not waiting any longer", slog.String("for", what))
	return false
}

// envValue reads the variable named by key's value; a named variable that
// is empty is an error, so that a configured token is never silently off.
func (d *Daemon) envValue(key, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v := d.opts.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s: environment variable %s is empty or unset", key, name)
	}
	return v, nil
}

// resyncInterval maps the config's 0 (off) to the loop's negative (off),
// for resync.interval and revalidate.interval.
func resyncInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// syncGCPercent is the GOGC of the first full sync: the loop's default,
// unless the operator set GOGC (then theirs holds throughout).
func syncGCPercent() int {
	if _, set := os.LookupEnv("GOGC"); set {
		return 0
	}
	return reconcile.DefaultSyncGCPercent
}

// pollJitter maps poll.jitter to the loop's option, where 0 means the
// default: a configured 0 means no jitter.
func pollJitter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
