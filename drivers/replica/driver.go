package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/backoff"
	"github.com/objectstack-fleet/reconciler/reconcile"
	"github.com/objectstack-fleet/reconciler/registry"
)

// RestartRemedy is the remedy of a stale entry.
const RestartRemedy = "restart the replica: ObjectStack 17.4 reloads flows and permission sets only at boot"

// Defaults of Options.
const (
	DefaultJitter         = 100 * time.Millisecond
	DefaultSettle         = time.Second
	DefaultWindow         = 2 * time.Second
	DefaultMinBackoff     = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultHealthInterval = 2 * time.Second
	DefaultConcurrency    = 4
	// DefaultMaxProbesPerSecond bounds the probes of one sidecar
	// (replica.max_probes_per_second).
	DefaultMaxProbesPerSecond = 20
)

// KnownMajor is the ObjectStack major version whose lanes (channels and
// payloads) this reconciler speaks; the platform retires lane payloads per
// major. A replica whose health endpoint reports another major is not
// driven: nothing is published for it, and its entries say why.
const KnownMajor = 17

// Options configure a Driver.
type Options struct {
	// URL is the replica's HTTP base URL.
	URL string
	// Token is sent as "Authorization: Bearer <token>" to the replica
	// ("" for none). It is never printed.
	Token string
	// Bus carries the lane messages (nil: nothing is published; probes
	// still report).
	Bus Bus
	// Prefix is the platform's bus key prefix (default "os:").
	Prefix string
	// Origin is the originNode of every message (required).
	Origin string
	// Client sends the probes (default: a client without a global timeout;
	// each probe is bounded by itself).
	Client *http.Client
	// Jitter spreads first publishes once other sidecars publish on the
	// bus: each waits up to this long at random and publishes nothing if
	// another sidecar's message (or the replica) got there first. A sidecar
	// that has never seen another origin's message does not wait.
	Jitter time.Duration
	// Settle is how long a message has to take effect before the replica
	// is probed again (a 17.4 node takes 0.3–1.5 s to register an object).
	Settle time.Duration
	// Window: a message seen on the bus up to this long before the change
	// was noticed still counts as telling the replica (other sidecars may
	// notice a change up to a poll interval earlier).
	Window time.Duration
	// MinBackoff and MaxBackoff bound the wait between nudges.
	MinBackoff, MaxBackoff time.Duration
	// HealthInterval is how often the replica's health endpoint is read.
	HealthInterval time.Duration
	// Concurrency is how many entries are checked at once.
	Concurrency int
	// MaxProbesPerSecond bounds the probes of the replica, for the whole
	// Driver (default 20): at most that many requests start in any one
	// second. The health read (one per HealthInterval) comes on top.
	MaxProbesPerSecond int
	// Catalog, if set, tells a registered object from a servable one: its
	// table and its fields' columns must exist in the nodes' database (the
	// store's). Without it, only a missing table is seen (the data API's
	// 500).
	Catalog Catalog
	// Repair, if set (replica.repair: schema), has the platform sync the
	// storage of an unservable object through its own save route, one
	// sidecar of the fleet at a time (a lease in the store), once per body.
	Repair RepairStore
	// Shadow (replica.mode: shadow): probe and report, publish nothing;
	// an entry the Driver would publish for is in state would-publish.
	Shadow bool
	// Metrics (nil: none).
	Metrics *Metrics
	// Logger (nil: discard).
	Logger *slog.Logger
	// OnSettle, if set, is called (without blocking) when an entry's
	// change becomes served: the converged revision may have moved.
	OnSettle func()
	// Guarded, if set, reports whether the loop guards the eviction of an
	// entry (reconcile's eviction guard: its row is gone, the replica keeps
	// serving it). Any lane message naming such an entry would make the
	// node re-read the missing row and drop it, so the Driver neither
	// probes nor publishes for it (after a heal, a recheck or a backoff
	// included) and does not count it as lacking; it looks again every
	// MaxBackoff, so an entry whose row came back unchanged (no change
	// told) goes on as before. A release tells the eviction, which is
	// driven as usual.
	Guarded func(kind registry.Kind, key string) bool
}

// class is how an entry's replica state can be observed.
type class int

const (
	classBlind       class = iota // unobservable: publish once per change
	classObject                   // data API + layers
	classDatasource               // the datasource list
	classFlow                     // automation route vs row: stale when older
	classPermission               // layers code vs overlay: stale when older
	classTranslation              // the locale's served translations
)

// Conditions of the replica and its bus, each logged once when it starts
// and once when it ends, and shown in status (Report.LastError).
const (
	condBus        = "bus"        // a PUBLISH failed
	condCredential = "credential" // the replica refused the token
	condVersion    = "version"    // the replica runs a major this reconciler does not drive
)

// entry is one registry entry's replica state.
type entry struct {
	kind    registry.Kind
	key     string
	class   class
	deleted bool
	lanes   []lane

	gen       uint64    // bumped by every change and heal: results of an older generation are dropped
	coverFrom time.Time // a message for this entry seen at or after this told the replica
	published bool      // this generation's lanes were published (or covered) once
	tellFirst bool      // publish (unless covered) before the first probe
	attempts  int       // messages published in this generation
	// deferredTo is the peer elected to publish this generation first
	// ("" when this sidecar goes first, or once its first check ran).
	deferredTo string
	failures   int       // consecutive failed probes or publishes, or checks finding it unservable (backoff)
	due        time.Time // next step; zero: nothing to do
	running    bool      // a step is in flight
	// stop cancels the step in flight: a new change (or a heal) makes its
	// probe moot, and the new generation's first check must not wait for
	// it (up to ~0.3 s beside a node re-syncing its hooks).
	stop   context.CancelFunc
	status registry.ReplicaStatus
	// The last message published and the last probe (explain shows them).
	lastMessage, lastProbe time.Time
	probe                  string

	rev       int64     // the revision of the change (converge.go)
	revAt     time.Time // its watermark time, store's clock (zero: unknown)
	held      bool      // the loop holds the entry: its row is invalid, nothing to serve
	observed  bool      // the change's convergence time was observed
	settledAt time.Time // store's clock when this generation settled (zero: not yet)
}

// Driver drives one replica through the platform's lanes and verifies it.
// It is a reconcile.Notifier: tell it every applied change; run it with
// Run. Create it with New.
type Driver struct {
	opts   Options
	log    *slog.Logger
	probe  prober
	bo     backoff.Policy
	prefix string

	mu          sync.Mutex
	entries     map[registry.Ref]*entry
	seen        map[string]time.Time // channel+address → when a message naming it was last seen
	down        bool                 // the last health read failed
	downErr     string               // why, while it lasts
	versionSeen bool                 // the replica's version was read once
	restarts    int                  // replica restarts noticed
	applied     int                  // entries a lane brought from nudged to in-sync since the replica (re)started
	peers       map[string]time.Time // origin → when a message of another origin was last seen (elect.go)
	wake        chan struct{}
	conds       map[string]string // condition → its error, while it lasts
	lastErr     string            // the last condition's error, kept after it ended
	lastAt      time.Time         // when lastErr was seen
	repaired    map[string]string // object key → the body checksum last repaired (once per body)

	// converge.go: the store's clock at the last read (storeAt) and this
	// host's then (localAt); the highest revision told; deletions that
	// settled and were dropped, the highest and the last time.
	storeAt, localAt time.Time
	// settle.go: the replica's typical time from a message to serving it.
	took     time.Duration
	told     int64
	goneRev  int64
	lastGone time.Time
}

var _ reconcile.Notifier = (*Driver)(nil)

// New returns a Driver. It does no I/O.
func New(opts Options) (*Driver, error) {
	if opts.URL == "" {
		return nil, errors.New("replica url is empty")
	}
	if opts.Origin == "" {
		return nil, errors.New("replica origin is empty")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Client == nil {
		// The token goes to the replica's origin only: a redirect elsewhere
		// (another port of the same host included) is not followed.
		opts.Client = &http.Client{CheckRedirect: sameOrigin}
	}
	if opts.Jitter < 0 {
		opts.Jitter = 0
	} else if opts.Jitter == 0 {
		opts.Jitter = DefaultJitter
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.Settle, DefaultSettle)
	def(&opts.Window, DefaultWindow)
	def(&opts.MinBackoff, DefaultMinBackoff)
	def(&opts.MaxBackoff, DefaultMaxBackoff)
	def(&opts.HealthInterval, DefaultHealthInterval)
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxProbesPerSecond <= 0 {
		opts.MaxProbesPerSecond = DefaultMaxProbesPerSecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{
		opts: opts,
		log:  opts.Logger,
		probe: prober{base: strings.TrimRight(opts.URL, "/"), token: opts.Token, client: opts.Client,
			limit: newLimiter(opts.MaxProbesPerSecond), catalog: opts.Catalog},
		bo:       backoff.Policy{Base: opts.MinBackoff, Max: opts.MaxBackoff, Jitter: 0.2},
		prefix:   opts.Prefix,
		entries:  map[registry.Ref]*entry{},
		seen:     map[string]time.Time{},
		peers:    map[string]time.Time{},
		wake:     make(chan struct{}, 1),
		conds:    map[string]string{},
		repaired: map[string]string{},
	}, nil
}

// Notify takes the changes of one pass. It never blocks: each changed
// entry is scheduled for its first check a random moment (up to Jitter)
// from now.
func (d *Driver) Notify(cs reconcile.ChangeSet) {
	now := time.Now()
	d.mu.Lock()
	if !cs.StoreAt.IsZero() && !cs.PolledAt.IsZero() {
		d.storeAt, d.localAt = cs.StoreAt, cs.PolledAt
	}
	for _, c := range cs.Changes {
		d.noteLocked(c, now)
	}
	d.countLocked()
	d.mu.Unlock()
	d.poke()
}

func (d *Driver) noteLocked(c reconcile.Change, now time.Time) {
	ref := registry.Ref{Kind: c.Kind, Key: c.Key}
	parts, err := registry.ParseKey(c.Kind, c.Key)
	if err != nil {
		d.log.Warn("replica: entry not driven", slog.String("kind", string(c.Kind)), slog.String("key", c.Key), slog.String("error", err.Error()))
		return
	}
	deleted := c.Action == reconcile.ActionEvict
	e := d.entries[ref]
	if e == nil {
		e = &entry{kind: c.Kind, key: c.Key}
		d.entries[ref] = e
	}
	e.class = classify(c.Kind, parts)
	e.deleted = deleted
	e.lanes = lanesFor(c.Kind, parts, deleted)
	d.restartLocked(e, now, d.coverFromLocked(c, now))
	e.rev, e.revAt, e.held, e.observed = c.Revision, c.At, c.State == registry.StateHeld, false
	if e.revAt.IsZero() {
		e.revAt = d.storeNowLocked() // an eviction: the row's time is gone with it
	}
	d.told = max(d.told, c.Revision)
	// A datasource rebuilt while it stays active looks the same in the
	// node's list before and after (status ok): tell the node once, then
	// look.
	e.tellFirst = c.Kind == registry.KindDatasource && c.Action == reconcile.ActionRebuild && !deleted
}

// restartLocked starts a new generation of e: checked (and published if
// need be) again, first after a random wait.
func (d *Driver) restartLocked(e *entry, now, coverFrom time.Time) {
	if e.running && e.stop != nil {
		e.stop() // its result would be dropped (an older generation)
	}
	e.gen++
	e.coverFrom = coverFrom
	e.published = false
	e.attempts = 0
	e.failures = 0
	e.settledAt = time.Time{}
	wait, peer := d.firstWaitLocked(registry.Ref{Kind: e.kind, Key: e.key})
	e.due, e.deferredTo = now.Add(wait), peer
	e.status = registry.ReplicaStatus{State: registry.ReplicaPending, Since: now}
}

// classify says how the replica shows an entry's state. Org-scoped items
// never enter the replica's shared registry, so they are not probed.
func classify(k registry.Kind, p registry.KeyParts) class {
	switch k {
	case registry.KindDatasource:
		if p.Org == "" {
			return classDatasource
		}
	case registry.KindEngine:
		if p.Org != "" {
			return classBlind
		}
		switch p.Type {
		case "object":
			return classObject
		case "flow":
			return classFlow
		case "permission":
			return classPermission
		case "translation":
			return classTranslation
		}
	}
	return classBlind
}

func (d *Driver) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Status returns the replica state of the entry (false: the Driver has not
// been told about it).
func (d *Driver) Status(kind registry.Kind, key string) (registry.ReplicaStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[registry.Ref{Kind: kind, Key: key}]
	if !ok {
		return registry.ReplicaStatus{}, false
	}
	st := e.status
	st.LastMessage, st.LastProbe, st.Probe = e.lastMessage, e.lastProbe, e.probe
	return st, true
}

func (d *Driver) countsLocked() map[registry.ReplicaState]int {
	out := make(map[registry.ReplicaState]int, len(registry.ReplicaStates))
	for _, s := range registry.ReplicaStates {
		out[s] = 0
	}
	for _, e := range d.entries {
		out[e.status.State]++
	}
	return out
}

func (d *Driver) countLocked() {
	if d.opts.Metrics == nil {
		return
	}
	for s, n := range d.countsLocked() {
		d.opts.Metrics.entries.WithLabelValues(string(s)).Set(float64(n))
	}
}

// Run checks and nudges entries, watches the replica's health and observes
// the bus until ctx ends. It returns nil when ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.opts.Bus != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.observe(ctx)
		}()
	}
	// The first health read comes before the first probe: a restart of
	// the replica after a probe found an entry in sync must show as one
	// (the uptime going down), or the entry stays "in-sync" on a replica
	// that lost it.
	baseline := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.watchHealth(ctx, baseline)
	}()
	select {
	case <-baseline:
	case <-ctx.Done():
		return nil
	}
	sem := make(chan struct{}, d.opts.Concurrency)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := d.dispatch(ctx, &wg, sem)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// dispatch starts a step for every due entry (at most Concurrency at once,
// waiting for a slot) and returns when the next not-yet-due one is due.
func (d *Driver) dispatch(ctx context.Context, wg *sync.WaitGroup, sem chan struct{}) time.Time {
	now := time.Now()
	var due []*entry
	var next time.Time
	d.mu.Lock()
	for _, e := range d.entries {
		if e.due.IsZero() || e.running {
			continue
		}
		if !e.due.After(now) {
			e.running = true
			due = append(due, e)
			continue
		}
		if next.IsZero() || e.due.Before(next) {
			next = e.due
		}
	}
	d.mu.Unlock()
	for _, e := range due {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			d.mu.Lock()
			e.running = false
			d.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			d.mu.Lock()
			e.stop = cancel
			d.mu.Unlock()
			d.step(sctx, e)
			d.poke()
		}()
	}
	return next
}

// plan is a copy of what a step needs from an entry, taken under the lock.
type plan struct {
	ref       registry.Ref
	class     class
	deleted   bool
	lanes     []lane
	gen       uint64
	coverFrom time.Time
	lastSent  time.Time // this Driver's last message for the entry (settle.go)
	published bool
	tellFirst bool
	attempts  int
	failures  int
	// deferredTo: the peer this first check waited for (elect.go).
	deferredTo string
	// unservable: the entry's last check found it unservable, and no
	// change came since: a check again only watches its storage.
	unservable bool
}

// step does one check (and publish, if need be) of an entry.
func (d *Driver) step(ctx context.Context, e *entry) {
	d.mu.Lock()
	p := plan{ref: registry.Ref{Kind: e.kind, Key: e.key}, class: e.class, deleted: e.deleted, lanes: e.lanes,
		gen: e.gen, coverFrom: e.coverFrom, lastSent: e.lastMessage, published: e.published, tellFirst: e.tellFirst, attempts: e.attempts, failures: e.failures,
		deferredTo: e.deferredTo, unservable: e.status.State == registry.ReplicaUnservable}
	d.mu.Unlock()

	if !p.deleted && d.opts.Guarded != nil && d.opts.Guarded(p.ref.Kind, p.ref.Key) {
		d.keepGuarded(ctx, e, p)
		return
	}
	out := d.decide(ctx, p)

	d.mu.Lock()
	settled := false
	defer d.unlockSettled(&settled)
	e.running, e.stop = false, nil
	if !out.messageAt.IsZero() {
		e.lastMessage = out.messageAt
		if p.deferredTo != "" && p.attempts == 0 {
			d.missedLocked(p.deferredTo) // it was elected, yet the replica had not been told
		}
	}
	if !out.probeAt.IsZero() && ctx.Err() == nil { // a probe cut short by a new change says nothing
		e.lastProbe, e.probe = out.probeAt, out.probe
	}
	if e.gen != p.gen || ctx.Err() != nil {
		return // changed meanwhile: the new generation is already scheduled
	}
	e.deferredTo = ""
	e.published = out.published
	e.attempts = out.attempts
	e.failures = out.failures
	e.due = out.due
	if out.status.State != e.status.State || out.status.Error != e.status.Error || out.status.Attempts != e.status.Attempts {
		if out.status.State == e.status.State {
			out.status.Since = e.status.Since
		} else {
			out.status.Since = time.Now()
		}
		if e.status.State == registry.ReplicaNudged && out.status.State == registry.ReplicaInSync {
			d.applied++
			if p.attempts > 0 && !p.lastSent.IsZero() && !out.probeAt.IsZero() {
				d.noteTookLocked(out.probeAt.Sub(p.lastSent))
			}
		}
		e.status = out.status
	}
	settled = d.settledLocked(e)
	if e.deleted && e.due.IsZero() && e.status.State.Settled() {
		delete(d.entries, p.ref) // the deletion reached the replica as far as anyone can tell
		if e.settledAt.After(d.lastGone) {
			d.lastGone = e.settledAt
		}
	}
	d.countLocked()
}

// unlockSettled ends a step: it unlocks d, then (outside the lock) tells
// OnSettle when the step settled its entry.
func (d *Driver) unlockSettled(settled *bool) {
	d.mu.Unlock()
	if *settled && d.opts.OnSettle != nil {
		d.opts.OnSettle()
	}
}

// guardedNote is the replica state's error of a guarded entry that was
// waiting on the replica.
const guardedNote = "eviction guarded: its row is gone and the replica keeps serving it; nothing is published for it until a release (or its row comes back)"

// keepGuarded is a step of an entry whose eviction the loop guards: no
// probe (its row is gone, so the replica's layers answer no overlay) and
// no message (the node would re-read the missing row and unregister it).
// An entry that was waiting on the replica (pending after a heal, nudged)
// is reported unverifiable, not lacking; one the replica showed (in-sync,
// unservable, stale) keeps that state. It is looked at again after
// MaxBackoff.
func (d *Driver) keepGuarded(ctx context.Context, e *entry, p plan) {
	now := time.Now()
	d.mu.Lock()
	settled := false
	defer d.unlockSettled(&settled)
	e.running, e.stop = false, nil
	if e.gen != p.gen || ctx.Err() != nil {
		return
	}
	e.due = now.Add(d.opts.MaxBackoff)
	switch e.status.State {
	case registry.ReplicaPending, registry.ReplicaNudged, registry.ReplicaWouldPublish:
		e.status = registry.ReplicaStatus{State: registry.ReplicaUnverifiable, Attempts: e.attempts, Error: guardedNote, Since: now}
	}
	settled = d.settledLocked(e)
	d.countLocked()
}

// outcome is what a step decided.
type outcome struct {
	status    registry.ReplicaStatus
	published bool
	attempts  int
	failures  int
	due       time.Time // zero: done until the next change or restart
	// messageAt is when this step published (zero: it did not); probeAt
	// when it probed and probe what the replica answered.
	messageAt, probeAt time.Time
	probe              string
}

func (d *Driver) decide(ctx context.Context, p plan) outcome {
	out := outcome{published: p.published, attempts: p.attempts, failures: p.failures}
	now := time.Now()
	var (
		v      verdict
		detail string
		err    error
	)
	switch p.class {
	case classBlind:
		v = unobservable
	case classFlow, classPermission:
		if !p.published && !d.opts.Shadow {
			// The lane does not update these on 17.4, but it is the
			// platform's message for the change: send it once, then look.
			return d.publishOnce(ctx, p, out, now, registry.ReplicaPending)
		}
		v, detail, err = d.check(ctx, p)
		out.noteProbe(v, err)
	default:
		if p.tellFirst && !p.published && !d.opts.Shadow {
			return d.publishOnce(ctx, p, out, now, registry.ReplicaPending)
		}
		v, detail, err = d.check(ctx, p)
		out.noteProbe(v, err)
	}
	if err != nil {
		// The failure count is kept until the entry settles, so the waits
		// double while the replica, its credential or the bus is failing.
		out.failures++
		out.due = now.Add(d.bo.Delay(out.failures))
		out.status = registry.ReplicaStatus{State: registry.ReplicaNudged, Attempts: out.attempts, Error: err.Error()}
		if p.class == classFlow || p.class == classPermission {
			out.status.State = registry.ReplicaUnverifiable
		}
		return out
	}
	switch v {
	case inSync:
		out.failures = 0
		out.status = registry.ReplicaStatus{State: registry.ReplicaInSync, Attempts: out.attempts}
		out.due = time.Time{}
		return out
	case stale:
		out.failures = 0
		out.status = registry.ReplicaStatus{State: registry.ReplicaStale, Attempts: out.attempts, Error: detail, Remedy: RestartRemedy}
		out.due = time.Time{}
		return out
	case unservable:
		return d.unservable(ctx, p, out, now, detail)
	case unseen:
		// Served, but its row is unseen by the replica: a message would
		// make it re-read no row and unregister the object. Looked at
		// again with backoff: the loop tells the eviction (or guards it)
		// once it reads the row gone.
		out.failures++
		out.due = now.Add(d.bo.Delay(out.failures))
		out.status = registry.ReplicaStatus{State: registry.ReplicaNudged, Attempts: out.attempts, Error: detail}
		if p.unservable {
			out.status.State = registry.ReplicaUnservable
		}
		return out
	case lacks:
		if p.unservable {
			// Registered and current when it was last checked, and no change
			// came since: a row that vanished without one (the eviction
			// guard holding its deletion) is not announced again, and a
			// replica that lost it is not told without a change.
			out.failures++
			out.due = now.Add(d.bo.Delay(out.failures))
			out.status = registry.ReplicaStatus{State: registry.ReplicaUnservable, Attempts: out.attempts, Error: detail}
			return out
		}
	case unobservable:
		if p.published {
			out.status = registry.ReplicaStatus{State: registry.ReplicaUnverifiable, Attempts: out.attempts}
			return out
		}
		return d.publishOnce(ctx, p, out, now, registry.ReplicaUnverifiable)
	}
	if d.opts.Shadow {
		return d.wouldPublish(out, now, true)
	}
	// lacks: unless a message naming the entry is already on its way,
	// nudge, then look again after a while (settle.go). Another origin's
	// message defers this sidecar's own once per change only: if the
	// replica still lacks the entry after it (a lost message, or a forged
	// one sent to keep this sidecar quiet), the sidecar's own goes.
	if last, ok := d.lastSeen(p); !p.published && ok && !last.Before(p.coverFrom) {
		if nudge := d.nudgeAfter(out.attempts); now.Before(last.Add(nudge)) {
			out.published = true // covered, once
			out.status = registry.ReplicaStatus{State: registry.ReplicaNudged, Attempts: out.attempts, Error: detail}
			out.due = lookAgain(now, now.Sub(last), nudge)
			return out
		}
	}
	again := out.attempts > 0 || out.failures > 0
	if again {
		if m := d.opts.Metrics; m != nil {
			m.nudges.Inc()
		}
	}
	if err := d.publish(ctx, p); err != nil {
		return d.notPublished(out, now, err)
	}
	out.messageAt = time.Now()
	out.published = true
	out.attempts++
	out.failures = 0
	out.status = registry.ReplicaStatus{State: registry.ReplicaNudged, Attempts: out.attempts, Error: detail}
	out.due = now.Add(d.lookAfter())
	if out.attempts > 1 {
		d.log.InfoContext(ctx, "replica nudged again", slog.String("kind", string(p.ref.Kind)), slog.String("key", p.ref.Key),
			slog.Int("attempts", out.attempts), slog.String("reason", detail))
	}
	return out
}

// noteProbe records a probe's answer in the outcome.
func (out *outcome) noteProbe(v verdict, err error) {
	out.probeAt, out.probe = time.Now(), v.String()
	if err != nil {
		out.probe = "failed: " + err.Error()
	}
}

// publishOnce publishes the entry's lanes once for this generation, unless
// a message naming it was seen since the change; then the entry is in
// state st (pending: looked at again after Settle).
func (d *Driver) publishOnce(ctx context.Context, p plan, out outcome, now time.Time, st registry.ReplicaState) outcome {
	if d.opts.Shadow {
		return d.wouldPublish(out, now, false)
	}
	if last, ok := d.lastSeen(p); !ok || last.Before(p.coverFrom) {
		if err := d.publish(ctx, p); err != nil {
			return d.notPublished(out, now, err)
		}
		out.messageAt = time.Now()
		out.attempts++
	}
	out.published = true
	out.failures = 0
	out.status = registry.ReplicaStatus{State: st, Attempts: out.attempts}
	if st == registry.ReplicaPending {
		out.due = now.Add(d.opts.Settle)
	}
	return out
}

// notPublished is the outcome of a publish that failed (the bus) or was
// held (a replica this reconciler does not drive): tried again with
// backoff, the reason in the entry's error.
func (d *Driver) notPublished(out outcome, now time.Time, err error) outcome {
	out.failures++
	out.due = now.Add(d.bo.Delay(out.failures))
	var held *heldError
	if errors.As(err, &held) {
		out.status = registry.ReplicaStatus{State: registry.ReplicaWouldPublish, Attempts: out.attempts, Error: held.reason}
		return out
	}
	out.status = registry.ReplicaStatus{State: registry.ReplicaNudged, Attempts: out.attempts, Error: err.Error()}
	return out
}

// unservable is the outcome of an object the replica registered but
// cannot serve: checked again with backoff (another sidecar's repair, or a
// save through the platform that leaves the row as it is, changes no row
// and so tells no one), and repaired if the Driver may.
func (d *Driver) unservable(ctx context.Context, p plan, out outcome, now time.Time, detail string) outcome {
	parts, _ := registry.ParseKey(p.ref.Kind, p.ref.Key)
	out.failures++
	out.due = now.Add(d.bo.Delay(out.failures))
	out.status = registry.ReplicaStatus{State: registry.ReplicaUnservable, Attempts: out.attempts, Error: detail, Remedy: UnservableRemedy(parts.Name)}
	if d.opts.Repair == nil {
		return out
	}
	note, retry := d.repair(ctx, p.ref.Key, parts.Name)
	if note != "" {
		out.status.Error += "; " + note
	}
	if retry {
		// Repaired (or another sidecar holds the repair): look again soon.
		out.failures = 0
		out.due = now.Add(d.opts.Settle)
	}
	return out
}

// wouldPublish is a step's outcome in shadow mode where it would publish:
// nothing is sent; the entry says would-publish and, if the replica shows
// its state (probe), is looked at again with backoff (another sidecar or
// the platform may bring it there).
func (d *Driver) wouldPublish(out outcome, now time.Time, probe bool) outcome {
	out.status = registry.ReplicaStatus{State: registry.ReplicaWouldPublish}
	out.due = time.Time{}
	if probe {
		out.failures++
		out.due = now.Add(d.bo.Delay(out.failures))
	}
	return out
}

// check probes the replica's state of the entry.
func (d *Driver) check(ctx context.Context, p plan) (verdict, string, error) {
	parts, err := registry.ParseKey(p.ref.Kind, p.ref.Key)
	if err != nil {
		return 0, "", err
	}
	var v verdict
	var detail string
	switch p.class {
	case classObject:
		v, detail, err = d.probe.object(ctx, parts.Name, p.deleted)
	case classDatasource:
		v, detail, err = d.probe.datasource(ctx, parts.Name, p.deleted)
	case classFlow:
		v, detail, err = d.probe.flow(ctx, parts.Name, p.deleted)
	case classPermission:
		v, detail, err = d.probe.permission(ctx, parts.Name, p.deleted)
	case classTranslation:
		v, detail, err = d.probe.translation(ctx, parts.Name, p.deleted)
	default:
		v = unobservable
	}
	if m := d.opts.Metrics; m != nil && ctx.Err() == nil {
		r := v.String()
		if err != nil {
			r = "error"
		}
		m.verifications.WithLabelValues(r).Inc()
	}
	switch {
	case errors.Is(err, errRefused):
		d.setCondition(ctx, condCredential, "probe of the replica: "+errRefused.Error()+" (replica.token_env)")
	case err == nil:
		d.setCondition(ctx, condCredential, "")
	}
	return v, detail, err
}

// lastSeen returns when a message naming the entry was last seen on the
// bus (for an entry with several lanes, the oldest of them).
func (d *Driver) lastSeen(p plan) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out time.Time
	for _, l := range p.lanes {
		if l.Channel == ChannelAuthz {
			continue // names no entry
		}
		t, ok := d.seen[l.Channel+"\x00"+l.Address]
		if !ok {
			return time.Time{}, false
		}
		if out.IsZero() || t.Before(out) {
			out = t
		}
	}
	return out, !out.IsZero()
}

// publish sends every lane message of the entry.
func (d *Driver) publish(ctx context.Context, p plan) error {
	if !d.versionRead() {
		// Publish nothing before the replica's version is known.
		if _, version, err := d.probe.health(ctx); err == nil {
			d.checkVersion(ctx, version)
		} else {
			return fmt.Errorf("read the replica's version before publishing: %w", err)
		}
	}
	if reason := d.condition(condVersion); reason != "" {
		return &heldError{reason: reason}
	}
	if d.opts.Bus == nil {
		return nil
	}
	for _, l := range p.lanes {
		now := time.Now()
		msg, err := l.encode(d.opts.Origin, now)
		if err != nil {
			return err
		}
		err = d.opts.Bus.Publish(ctx, d.prefix+"ps:"+l.Channel, msg)
		if m := d.opts.Metrics; m != nil {
			r := "ok"
			if err != nil {
				r = "error"
			}
			m.publishes.WithLabelValues(l.Channel, r).Inc()
		}
		if err != nil {
			err = fmt.Errorf("bus: %w", err)
			d.setCondition(ctx, condBus, err.Error())
			return err
		}
		d.setCondition(ctx, condBus, "")
		if l.Channel != ChannelAuthz {
			d.markSeen(l.Channel+"\x00"+l.Address, now)
		}
		d.log.DebugContext(ctx, "replica lane published", slog.String("kind", string(p.ref.Kind)), slog.String("key", p.ref.Key),
			slog.String("channel", l.Channel))
	}
	return nil
}

// maxSeen bounds the bus observations kept: anyone who can PUBLISH on the
// platform's bus could otherwise grow them without end (a flood of unique
// names grew the heap by 300 MB in 6 s). Past it, a new address is not
// recorded: at worst this sidecar sends a message another one already
// sent.
const maxSeen = 10_000

func (d *Driver) markSeen(addr string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev, ok := d.seen[addr]; ok || len(d.seen) < maxSeen {
		if t.After(prev) {
			d.seen[addr] = t
		}
	}
}

// observe records every lane message on the bus, so that a sidecar does
// not repeat what another one already told the replicas.
func (d *Driver) observe(ctx context.Context) {
	channels := make([]string, len(Channels))
	for i, c := range Channels {
		channels[i] = d.prefix + "ps:" + c
	}
	for ctx.Err() == nil {
		// A subscription (re)established while publishing failed: the bus
		// is back, so the entries waiting out their backoff go now.
		ready := func() {
			if d.condition(condBus) != "" {
				d.recheck()
			}
		}
		err := d.opts.Bus.Subscribe(ctx, channels, ready, func(channel string, msg []byte) {
			o, ok := decodeObserved(strings.TrimPrefix(channel, d.prefix+"ps:"), msg)
			if !ok {
				return
			}
			if m := d.opts.Metrics; m != nil {
				origin := "other"
				if o.Origin == d.opts.Origin {
					origin = "own"
				}
				m.observed.WithLabelValues(origin).Inc()
			}
			now := time.Now()
			if o.Origin != d.opts.Origin {
				d.mu.Lock()
				d.notePeerLocked(o.Origin, now)
				d.mu.Unlock()
			}
			if o.Channel != ChannelAuthz {
				d.markSeen(o.Channel+"\x00"+o.Address, now)
			}
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		d.log.WarnContext(ctx, "replica: bus subscription failed, retrying", slog.String("error", err.Error()))
		if !backoff.Wait(ctx, d.opts.HealthInterval) {
			return
		}
	}
}

// watchHealth reads the replica's uptime every HealthInterval. When it
// goes down (a restart), every entry is checked again: a restarted replica
// does not reload run-time objects by itself.
// It closes baseline after the first read (answered or not).
func (d *Driver) watchHealth(ctx context.Context, baseline chan<- struct{}) {
	// A restart shows as uptime going down, or as a start time (now minus
	// uptime) more than bootSkew later than the last one: a process that
	// lived briefly and booted slowly answers with a higher uptime. The
	// start time is off by a request's latency at most.
	var (
		last   float64
		bootAt time.Time
		lastOK time.Time // when the last answer came
	)
	bootSkew := max(3*d.opts.HealthInterval, time.Second)
	t := time.NewTicker(d.opts.HealthInterval)
	defer t.Stop()
	for {
		up, version, err := d.probe.health(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			d.checkVersion(ctx, version)
		}
		d.mu.Lock()
		wasDown := d.down
		d.down = err != nil
		if err != nil {
			d.downErr = "replica unreachable: " + err.Error()
			d.lastErr, d.lastAt = d.downErr, time.Now()
		}
		d.mu.Unlock()
		var started time.Time
		if err == nil {
			started = time.Now().Add(-time.Duration(up * float64(time.Second)))
		}
		switch {
		case err != nil:
			if !wasDown {
				d.log.WarnContext(ctx, "replica unreachable; nudges wait for it", slog.String("error", err.Error()))
			}
		case !bootAt.IsZero() && (up < last || started.Sub(bootAt) > bootSkew && bootedSince(up, lastOK, bootSkew)):
			d.heal(ctx, up)
		case wasDown:
			d.log.InfoContext(ctx, "replica reachable again")
			d.recheck()
		}
		if err == nil {
			if bootAt.IsZero() || up < last || started.Sub(bootAt) > bootSkew {
				bootAt = started
			}
			last, lastOK = up, time.Now()
		}
		if baseline != nil {
			close(baseline)
			baseline = nil
		}
		d.pruneSeen()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkVersion holds publishing while the replica reports a platform major
// other than KnownMajor (its lanes may be retired or changed); a version
// it cannot read is not held.
func (d *Driver) checkVersion(ctx context.Context, version string) {
	reason := ""
	if major, ok := majorOf(version); ok && major != KnownMajor {
		reason = fmt.Sprintf("replica runs ObjectStack %s; this reconciler drives ObjectStack %d.x lanes only: publishing nothing for it (as in shadow mode)",
			version, KnownMajor)
	}
	held := d.condition(condVersion) != ""
	d.setCondition(ctx, condVersion, reason)
	d.mu.Lock()
	d.versionSeen = true
	d.mu.Unlock()
	if held && reason == "" {
		d.recheck()
	}
}

// versionRead reports whether the replica's version was read once.
func (d *Driver) versionRead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.versionSeen
}

// heal starts a new generation of every entry after a replica restart.
func (d *Driver) heal(ctx context.Context, uptime float64) {
	now := time.Now()
	d.mu.Lock()
	d.restarts++
	d.applied = 0
	n := len(d.entries)
	for _, e := range d.entries {
		d.restartLocked(e, now, now)
		e.tellFirst = false // a booting node builds its pools from the rows
	}
	d.countLocked()
	d.mu.Unlock()
	if m := d.opts.Metrics; m != nil {
		m.restarts.Inc()
	}
	d.log.InfoContext(ctx, "replica restarted; checking every entry again", slog.Float64("uptime_seconds", uptime), slog.Int("entries", n))
	d.poke()
}

// recheck makes entries waiting on a failed probe due now.
func (d *Driver) recheck() {
	now := time.Now()
	d.mu.Lock()
	for _, e := range d.entries {
		if e.failures > 0 && !e.due.IsZero() {
			wait, _ := d.firstWaitLocked(registry.Ref{Kind: e.kind, Key: e.key})
			e.due = now.Add(wait)
		}
	}
	d.mu.Unlock()
	d.poke()
}

// pruneSeen forgets bus observations too old to matter.
func (d *Driver) pruneSeen() {
	horizon := time.Now().Add(-(d.opts.Window + d.opts.Settle + time.Minute))
	d.mu.Lock()
	for k, t := range d.seen {
		if t.Before(horizon) {
			delete(d.seen, k)
		}
	}
	d.mu.Unlock()
}

// Summary returns the counts for status.
func (d *Driver) Summary() registry.ReplicaReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reportLocked()
}

func (d *Driver) reportLocked() registry.ReplicaReport {
	r := registry.ReplicaReport{Counts: d.countsLocked(), Restarts: d.restarts, Reachable: !d.down,
		BusUp: d.opts.Bus != nil && d.conds[condBus] == "", Driving: d.conds[condVersion] == "",
		LastError: d.lastErr, LastErrorAt: d.lastAt}
	for _, c := range []string{condVersion, condCredential, condBus} {
		if e := d.conds[c]; e != "" {
			r.Errors = append(r.Errors, e)
		}
	}
	if d.down && d.downErr != "" {
		r.Errors = append(r.Errors, d.downErr)
	}
	return r
}

// Drift returns the counts and the lagging entries, sorted by kind and key.
func (d *Driver) Drift() registry.ReplicaReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.reportLocked()
	r.Lagging = []registry.ReplicaItem{}
	for _, e := range d.entries {
		if e.status.State.Drifted() {
			r.Lagging = append(r.Lagging, registry.ReplicaItem{Kind: e.kind, Key: e.key, ReplicaStatus: e.status})
		}
	}
	slices.SortFunc(r.Lagging, func(a, b registry.ReplicaItem) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return r
}

// sameOrigin follows a redirect only to the first request's scheme, host
// and port.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 || len(via) > 0 && (req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host) {
		return http.ErrUseLastResponse
	}
	return nil
}

// bootedSince reports whether a replica answering uptime up can have
// started after its previous answer at prev: a restart between two
// answers shows an uptime shorter than the time between them. An answer
// that does not advance (a hostile replica, a caching proxy) moves the
// start time without being a restart, and so republishes nothing.
func bootedSince(up float64, prev time.Time, skew time.Duration) bool {
	return prev.IsZero() || time.Duration(up*float64(time.Second)) < time.Since(prev)+skew
}
