package reconcile

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/internal/shutdown"
	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Defaults of Options.
const (
	DefaultPollInterval     = time.Second
	DefaultResyncInterval   = 10 * time.Minute
	DefaultApplyConcurrency = 4
	DefaultApplyTimeout     = 30 * time.Second
	DefaultRetryBase        = 5 * time.Second
	DefaultRetryMax         = 300 * time.Second
	DefaultStopTimeout      = 3 * time.Second
	// DefaultSchemaCheckInterval is how often the loop checks that the
	// store's schema and triggers are whole.
	DefaultSchemaCheckInterval = 30 * time.Second
	DefaultRevalidate          = 10 * time.Minute
	maxStoreBackoff            = 30 * time.Second
)

const (
	flagHint uint32 = 1 << iota
	flagManual
	flagResync
	flagRetry
	flagRevalidated
	flagLate // a materialization that outlasted its pass returned (late.go)
)

// Reconciler runs the loop over one store. Create it with New; call Run once.
type Reconciler struct {
	src     Source
	opts    Options
	log     *slog.Logger
	metrics *Metrics
	regs    *registry.Set

	wake   chan struct{}
	flags  atomic.Uint32
	synced chan struct{}

	// Owned by the Run goroutine, which changes the model only while
	// holding modelMu; readers on other goroutines (Explain) hold it
	// for reading.
	modelMu         sync.RWMutex
	model           *model
	cursor          snapshot.Cursor
	polledAt        time.Time // this process's clock when cursor was read
	relistCause     Cause     // non-empty: the next pass must relist
	retries         map[registry.Ref]time.Time
	waits           map[registry.Ref]<-chan struct{} // held until a shared resource frees (HeldUntil)
	flights         []*flight                        // batches outlasting their pass (late.go)
	inflight        map[registry.Ref]bool            // entries of those batches not landed yet
	redo            map[registry.Ref]bool            // in flight and changed meanwhile
	rereads         map[snapshot.Address]bool        // rows whose body the store withheld (memory.go)
	lastStall       time.Time
	lastSchemaCheck time.Time
	schemaErr       error // the last schema check's failure (checkSchema)
	bulk            bool  // the apply in flight is large: routine per-entry lines go to debug

	abandoned    *abandoned      // calls the loop stopped waiting for
	retryQ       retryQueue      // retries asked for (Retry)
	retryWaiting []*retryRequest // taken by a pass, waiting for calls in flight (loop goroutine)
	revalQ       revalidations   // failed revalidations for the loop to record

	guard        *guardState // owned by the Run goroutine (status under mu)
	releaseAsked atomic.Bool // POST /v1/guard/release: the next pass releases

	// owners records credential bindings (trust.go); nil: the model's only.
	owners CredentialOwners

	mu         sync.Mutex // guards the fields below (read by Status)
	status     Status
	ownersView map[string]string // the model's owners, for views beside the loop
}

// Source is the store as the loop reads it (a snapshot.Store is one).
type Source interface {
	// Relist reads every row in one consistent snapshot and the cursor
	// resuming after it.
	Relist(ctx context.Context) (snapshot.Rows, snapshot.Cursor, error)
	// Poll returns the addresses changed since cur and the next cursor.
	Poll(ctx context.Context, cur snapshot.Cursor) ([]snapshot.Address, snapshot.Cursor, error)
	// Read returns the current rows of addrs.
	Read(ctx context.Context, addrs []snapshot.Address) (snapshot.Rows, error)
	// Stall reports what cur cannot see yet.
	Stall(ctx context.Context, cur snapshot.Cursor, minAge time.Duration) (snapshot.Stall, error)
}

var _ Source = snapshot.Store(nil)

// New returns a Reconciler reading src. It does no I/O.
func New(src Source, opts Options) *Reconciler {
	orDefault(&opts.PollInterval, DefaultPollInterval)
	if opts.PollJitter < 0 {
		opts.PollJitter = 0
	} else if opts.PollJitter == 0 {
		opts.PollJitter = opts.PollInterval / 10
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.RevalidateInterval == 0 {
		opts.RevalidateInterval = DefaultRevalidate
	}
	orDefault(&opts.ApplyConcurrency, DefaultApplyConcurrency)
	orDefault(&opts.ApplyTimeout, DefaultApplyTimeout)
	orDefault(&opts.RetryBase, DefaultRetryBase)
	orDefault(&opts.RetryMax, DefaultRetryMax)
	orDefault(&opts.StopTimeout, DefaultStopTimeout)
	orDefault(&opts.StallAge, 5*opts.PollInterval)
	if opts.SchemaCheckInterval == 0 {
		opts.SchemaCheckInterval = DefaultSchemaCheckInterval
	}
	if opts.ReplicaID == "" {
		opts.ReplicaID, _ = os.Hostname()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	metrics := opts.Metrics
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	r := &Reconciler{
		src:         src,
		opts:        opts,
		log:         log,
		metrics:     metrics,
		regs:        registry.NewSet(),
		wake:        make(chan struct{}, 1),
		synced:      make(chan struct{}),
		model:       newModel(opts.CodeObjects, 0),
		retries:     make(map[registry.Ref]time.Time),
		waits:       make(map[registry.Ref]<-chan struct{}),
		inflight:    make(map[registry.Ref]bool),
		redo:        make(map[registry.Ref]bool),
		rereads:     make(map[snapshot.Address]bool),
		relistCause: CauseStart,
		abandoned:   newAbandoned(metrics.Abandoned),
		guard:       newGuardState(opts.Guard),
		owners:      opts.Owners,
	}
	if r.owners == nil {
		r.owners, _ = src.(CredentialOwners)
	}
	r.status.ReplicaID = opts.ReplicaID
	r.status.Counts = make(map[registry.Kind]map[registry.State]int)
	for _, k := range registry.Kinds {
		r.status.Counts[k] = make(map[registry.State]int)
	}
	r.publishGuard()
	return r
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (r *Reconciler) signal(f uint32) {
	r.flags.Or(f)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Hint wakes the loop for an early poll (e.g. a NOTIFY). Never blocks;
// bursts coalesce into one pass.
func (r *Reconciler) Hint() { r.signal(flagHint) }

// Reconcile asks for a pass now (SIGHUP, POST /v1/reconcile, reconciler
// trigger); that pass has CauseManual. Never blocks.
func (r *Reconciler) Reconcile() { r.signal(flagManual) }

// Resync asks for a full relist now (SIGUSR1, POST /v1/resync). Never blocks.
func (r *Reconciler) Resync() { r.signal(flagResync) }

// Synced is closed after the first full sync (readiness).
func (r *Reconciler) Synced() <-chan struct{} { return r.synced }

// isSynced reports whether the first full sync is done.
func (r *Reconciler) isSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

// Registries returns a read-only view of the live registries.
func (r *Reconciler) Registries() registry.View { return r.regs.View() }

// Instance returns the live instance of an entry, if one serves.
func (r *Reconciler) Instance(k registry.Kind, key string) (registry.Instance, bool) {
	reg := r.regs.Of(k)
	if reg == nil {
		return nil, false
	}
	e, ok := reg.Get(key)
	if !ok || e.Instance == nil {
		return nil, false
	}
	return e.Instance, true
}

// Status returns a point-in-time view of the loop.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.Counts = make(map[registry.Kind]map[registry.State]int, len(r.status.Counts))
	for k, m := range r.status.Counts {
		c := make(map[registry.State]int, len(m))
		for st, n := range m {
			if n != 0 {
				c[st] = n
			}
		}
		s.Counts[k] = c
	}
	if !s.Cursor.At.IsZero() {
		s.LagSeconds = max(0, time.Since(s.Cursor.At).Seconds())
	}
	if s.LastPass != nil {
		lp := *s.LastPass
		s.LastPass = &lp
	}
	s.Guard.Kinds = maps.Clone(s.Guard.Kinds)
	s.Abandoned = r.abandoned.count()
	return s
}

// revision is the highest revision among the rows the loop has read
// (relists and changed rows): every change up to it is applied.
func (r *Reconciler) revision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Revision
}

// setRevision records the highest revision read, and when (the store's
// clock of the read) it last moved.
func (r *Reconciler) setRevision(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev != r.status.Revision {
		r.status.Revision, r.status.RevisionAt = rev, r.cursor.At
	}
}

// Run relists, then polls until ctx ends. It returns nil when ctx ended,
// by the deadline of its stop (Options.Stop, else StopTimeout after ctx
// ended) whatever a materializer does: the pass in flight and
// revalidation may go on until the later phases of the stop need what is
// left (then what still runs is abandoned), calls outlasting their pass
// may land (flightsNeed), and closing every instance gets the rest
// (closeNeed).
func (r *Reconciler) Run(ctx context.Context) error {
	r.mu.Lock()
	r.status.StartedAt = time.Now()
	r.mu.Unlock()

	stop := r.opts.Stop
	if stop == nil {
		s := shutdown.Watch(ctx, r.opts.StopTimeout)
		defer s.Release()
		stop = s.Context
	}
	phases := sync.OnceValue(func() stopPhases { return newStopPhases(stop()) })
	passCtx, abandon := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		cutAt(ctx, passCtx, func() context.Context { return phases().drain }, abandon)
	}()
	defer func() {
		p := phases()
		defer p.cancel()
		abandon()
		<-watched
		r.dropFlights(p.flights)
		r.shutdown(p.close)
	}()
	if r.opts.RevalidateInterval > 0 {
		revalCtx, stopReval := context.WithCancel(ctx)
		revalDone := make(chan struct{})
		go func() {
			defer close(revalDone)
			r.revalidate(revalCtx)
		}()
		defer func() { // first of the deferred: before instances close
			stopReval()
			// Checks honour ctx; one that does not is not waited for
			// past the pass's part of the stop.
			select {
			case <-revalDone:
			case <-phases().drain.Done():
			}
		}()
	}

	timer := time.NewTimer(0)
	defer timer.Stop()
	now := time.Now()
	nextPoll := now
	nextResync := now.Add(r.resyncDelay())
	storeFailures := 0
	var lastHint, hintDue time.Time // hint passes are spaced (hintSpacing)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
		now = time.Now()
		flags := r.flags.Swap(0)
		if flags&flagRevalidated != 0 {
			r.applyRevalidations(ctx)
		}
		if flags&flagLate != 0 {
			r.land(passCtx)
			r.retried(nil) // retries waiting for those calls
		}
		// Hints (NOTIFY) start a pass at most every hintSpacing: a flood of
		// them is one early pass, not thousands.
		if flags&flagHint != 0 && now.Sub(lastHint) < r.hintSpacing() {
			flags &^= flagHint
			hintDue = lastHint.Add(r.hintSpacing())
		}
		if !hintDue.IsZero() && !now.Before(hintDue) {
			flags |= flagHint
			hintDue = time.Time{}
		}
		cause, relist := r.decide(now, flags, nextPoll, nextResync)
		if cause == CauseHint {
			lastHint, hintDue = now, time.Time{}
		}
		if cause == "" {
			r.resetTimer(timer, earliest(r.nextDue(nextPoll, nextResync, storeFailures > 0), hintDue))
			continue
		}
		if relist && (cause == CauseAntiEntropy || cause == CauseResync) {
			nextResync = now.Add(r.resyncDelay())
		}
		// The pass may finish after ctx ends, within the stop bound.
		err := r.pass(passCtx, cause, relist)
		if err != nil {
			storeFailures++
			nextPoll = time.Now().Add(r.storeBackoff(storeFailures))
		} else {
			storeFailures = 0
			nextPoll = time.Now().Add(r.pollDelay())
		}
		r.resetTimer(timer, earliest(r.nextDue(nextPoll, nextResync, storeFailures > 0), hintDue))
	}
}

// hintSpacing is the least time between two passes started by hints:
// a tenth of poll.interval, between 50ms and 1s.
func (r *Reconciler) hintSpacing() time.Duration {
	return min(max(50*time.Millisecond, r.opts.PollInterval/10), time.Second)
}

// earliest is the earlier of a due time and an optional one (zero: none).
func earliest(due, opt time.Time) time.Time {
	if !opt.IsZero() && opt.Before(due) {
		return opt
	}
	return due
}

// decide picks what to do now: a relist, a poll, or nothing ("").
func (r *Reconciler) decide(now time.Time, flags uint32, nextPoll, nextResync time.Time) (Cause, bool) {
	switch {
	case r.relistCause != "":
		return r.relistCause, true
	case flags&flagResync != 0:
		return CauseResync, true
	case r.opts.ResyncInterval > 0 && !now.Before(nextResync):
		return CauseAntiEntropy, true
	case flags&flagRetry != 0:
		return CauseItemRetry, false
	case flags&flagManual != 0:
		return CauseManual, false
	case flags&flagHint != 0:
		return CauseHint, false
	case !now.Before(nextPoll):
		return CausePoll, false
	case r.retryDue(now):
		return CauseRetry, false
	}
	return "", false
}

func (r *Reconciler) nextDue(nextPoll, nextResync time.Time, storeDown bool) time.Time {
	due := nextPoll
	if r.opts.ResyncInterval > 0 && nextResync.Before(due) {
		due = nextResync
	}
	if !storeDown {
		for _, at := range r.retries {
			if at.Before(due) {
				due = at
			}
		}
	}
	return due
}

func (r *Reconciler) retryDue(now time.Time) bool {
	for _, at := range r.retries {
		if !at.After(now) {
			return true
		}
	}
	return false
}

func (r *Reconciler) resetTimer(t *time.Timer, at time.Time) {
	d := time.Until(at)
	if d < 0 {
		d = 0
	}
	t.Reset(d)
}

// pollDelay is poll.interval less a random part of poll.jitter: a fleet's
// sidecars spread out, and no change waits longer than poll.interval to be
// seen.
func (r *Reconciler) pollDelay() time.Duration {
	j := min(r.opts.PollJitter, r.opts.PollInterval/2)
	if j <= 0 {
		return r.opts.PollInterval
	}
	return r.opts.PollInterval - time.Duration(rand.Int64N(int64(j)+1))
}

// resyncDelay is resync.interval ±10%.
func (r *Reconciler) resyncDelay() time.Duration {
	return backoff.Jitter(r.opts.ResyncInterval, 0.1)
}

// storeBackoff is the delay before the next poll after failures store
// failures in a row: poll.interval doubling to 30s, ±10%.
func (r *Reconciler) storeBackoff(failures int) time.Duration {
	return backoff.Policy{Base: r.opts.PollInterval, Max: maxStoreBackoff, Jitter: 0.1}.Delay(failures)
}

// retryBackoff is the delay before retry number attempt (1-based) of a
// degraded entry: base doubling to max, ±20%.
func (r *Reconciler) retryBackoff(attempt int) time.Duration {
	return backoff.Policy{Base: r.opts.RetryBase, Max: r.opts.RetryMax, Jitter: 0.2}.Delay(attempt)
}

// What the phases of the loop's stop after the pass in flight need.
const (
	flightsNeed = 250 * time.Millisecond // landing the calls that outlasted their pass
	closeNeed   = 750 * time.Millisecond // closing every instance
)

// stopPhases are the contexts of the loop's stop, each ending what the
// next phase needs before the next one's end: close is the stop's own.
type stopPhases struct {
	drain, flights, close context.Context
	cancel                func()
}

func newStopPhases(stop context.Context) stopPhases {
	flights, cancelFlights := shutdown.Leave(stop, closeNeed)
	drain, cancelDrain := shutdown.Leave(flights, flightsNeed)
	return stopPhases{drain: drain, flights: flights, close: stop,
		cancel: func() { cancelDrain(); cancelFlights() }}
}

// cutAt calls abandon once ctx has ended and then drain (asked for once
// ctx ended) has too, or returns when pass ends first.
func cutAt(ctx, pass context.Context, drain func() context.Context, abandon func()) {
	select {
	case <-ctx.Done():
	case <-pass.Done():
		return
	}
	select {
	case <-drain().Done():
		abandon()
	case <-pass.Done():
	}
}

// shutdown closes every instance, dependents first, until ctx ends at
// the latest: a Close still running then is abandoned (counted).
func (r *Reconciler) shutdown(ctx context.Context) {
	for i := len(registry.Kinds) - 1; i >= 0; i-- {
		reg := r.regs.Of(registry.Kinds[i])
		for _, key := range reg.Keys() {
			var inst registry.Instance
			reg.Update(key, func(e *registry.Entry) {
				inst, e.Instance = e.Instance, nil
				e.ServingRevision, e.ServingSignature = 0, ""
			})
			r.closeInstance(ctx, registry.Kinds[i], key, inst)
		}
	}
}

func (r *Reconciler) markSynced() {
	select {
	case <-r.synced:
	default:
		close(r.synced)
		r.mu.Lock()
		r.status.Synced = true
		// A full sync just read the store: readiness and store_up agree
		// from the first moment /readyz answers 200.
		r.status.StoreUp = true
		r.status.Cursor = r.cursor
		r.mu.Unlock()
	}
}
