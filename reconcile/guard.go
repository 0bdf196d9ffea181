package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// The eviction guard (guard.max_evictions, guard.window).
//
// Level-triggered convergence converges to a mistake as fast as to a fix:
// a DELETE without its WHERE, a TRUNCATE, a restored old backup or a
// wrong store would be applied to every replica within a poll. So the
// evictions of one kind counted over a sliding window that would exceed
// the limit are not applied: the entries keep serving (their node stays in
// the model as a ghost, so dependents keep resolving to it), no eviction
// is told to notify targets or the replica, and each entry is marked
// guarded with a reason. A row that comes back clears its entry's guard; a
// release (this sidecar, or the fleet's through the store) applies the
// evictions guarded up to it. The pending guard is kept in the store per
// replica id, so that a restarted sidecar still holds it. The fleet's
// releases are read only while something is guarded (one query per pass
// then): an idle poll stays one round trip.

// Defaults of GuardOptions.
const (
	DefaultGuardPercent = 20
	DefaultGuardWindow  = 60 * time.Second
	// GuardFloor is the least a percentage limit allows: small registries
	// may lose up to this many entries at once.
	GuardFloor = 10
	// maxGuardKeys bounds the keys GuardStatus lists.
	maxGuardKeys = 100
)

// GuardOptions configure the eviction guard. The zero value is the
// default: 20% of a kind's entries (never fewer than GuardFloor) within
// 60s.
type GuardOptions struct {
	// Off disables the guard (guard.max_evictions: off).
	Off bool
	// Max, if positive, is the number of evictions of one kind allowed
	// within Window; otherwise Percent of the kind's entries is, never
	// fewer than GuardFloor.
	Max     int
	Percent float64
	// Window is the sliding window evictions are counted over (default
	// 60s).
	Window time.Duration
	// Store keeps the pending guard per replica id and carries the fleet's
	// releases (nil: the guard lives in this process only).
	Store GuardStore
}

// GuardStore is the store as the guard uses it (a snapshot.Store is one).
type GuardStore interface {
	// SyncGuard makes a sidecar's stored pending guard exactly keep and
	// returns the stored records (each with the release it came after).
	SyncGuard(ctx context.Context, replicaID string, keep []snapshot.GuardRecord) ([]snapshot.GuardRecord, error)
	// LoadGuard returns a sidecar's stored pending guard.
	LoadGuard(ctx context.Context, replicaID string) ([]snapshot.GuardRecord, error)
	// LatestRelease returns the newest release of the fleet (ID 0: none).
	LatestRelease(ctx context.Context) (snapshot.GuardRelease, error)
}

var _ GuardStore = snapshot.Store(nil)

// limitString prints the limit as guard.max_evictions is written.
func (o GuardOptions) limitString() string {
	switch {
	case o.Off:
		return "off"
	case o.Max > 0:
		return strconv.Itoa(o.Max)
	}
	return strconv.FormatFloat(o.percent(), 'f', -1, 64) + "%"
}

func (o GuardOptions) percent() float64 {
	if o.Percent > 0 {
		return o.Percent
	}
	return DefaultGuardPercent
}

// limit is how many evictions of a kind with entries entries the window
// allows.
func (o GuardOptions) limit(entries int) int {
	if o.Max > 0 {
		return o.Max
	}
	return max(GuardFloor, int(math.Ceil(o.percent()*float64(entries)/100)))
}

// GuardStatus is the guard as GET /v1/guard and /v1/status show it.
type GuardStatus struct {
	// Held is the number of guarded evictions.
	Held  int                   `json:"held"`
	Kinds map[registry.Kind]int `json:"kinds"`
	// Since is when the oldest guarded eviction was guarded.
	Since time.Time `json:"since,omitzero"`
	// Keys are the guarded entries, at most 100 (Truncated: more).
	Keys      []GuardedKey `json:"keys"`
	Truncated bool         `json:"truncated,omitempty"`
	// Reason is the reason of the latest trip.
	Reason string `json:"reason,omitempty"`
	// Limit and Window are the configured guard.max_evictions and
	// guard.window.
	Limit  string `json:"limit"`
	Window string `json:"window"`
	// LastRelease is the newest fleet release this sidecar applied (0:
	// none).
	LastRelease int64 `json:"last_release,omitempty"`
	// Unsaved is true while the pending guard could not be written to the
	// store (it is retried every pass).
	Unsaved bool `json:"unsaved,omitempty"`
}

// GuardedKey is one guarded eviction.
type GuardedKey struct {
	Kind registry.Kind `json:"kind"`
	Key  string        `json:"key"`
	// Revision is the last revision the entry served.
	Revision int64     `json:"revision"`
	Since    time.Time `json:"since"`
}

// guarded is one pending guarded eviction.
type guarded struct {
	ref    registry.Ref
	rev    int64
	since  time.Time
	reason string
	// prevReason is the entry's reason before the guard marked it.
	prevReason string
	// after is the fleet release in force when the store recorded it:
	// releases with a higher id cover it (math.MaxInt64 until recorded).
	after int64
	// live: the entry is in the registries (false: known from the store
	// only, after a restart).
	live bool
}

// guardState is the guard's bookkeeping, owned by the Run goroutine.
type guardState struct {
	opts    GuardOptions
	pending map[registry.Ref]*guarded
	recent  []evicted // applied evictions within the window
	reason  string    // of the latest trip
	// why qualifies the next relist's trips (the store went backwards or
	// changed identity).
	why      string
	dirty    bool // the stored guard is behind pending
	loaded   bool // the stored guard was read (at the first relist)
	released int64
	// storeID is the store id this process last saw.
	storeID string
}

// evicted counts applied evictions of one kind at one moment.
type evicted struct {
	at   time.Time
	kind registry.Kind
	n    int
}

func newGuardState(o GuardOptions) *guardState {
	if o.Window <= 0 {
		o.Window = DefaultGuardWindow
	}
	return &guardState{opts: o, pending: map[registry.Ref]*guarded{}}
}

// holds reports whether ref's eviction is guarded.
func (g *guardState) holds(ref registry.Ref) bool {
	_, ok := g.pending[ref]
	return ok
}

// windowCount returns the evictions of kind applied within the window
// before now, dropping older ones.
func (g *guardState) windowCount(now time.Time, k registry.Kind) int {
	from := now.Add(-g.opts.Window)
	g.recent = slices.DeleteFunc(g.recent, func(e evicted) bool { return e.at.Before(from) })
	n := 0
	for _, e := range g.recent {
		if e.kind == k {
			n += e.n
		}
	}
	return n
}

func (g *guardState) pendingOf(k registry.Kind) int {
	n := 0
	for ref := range g.pending {
		if ref.Kind == k {
			n++
		}
	}
	return n
}

// evictionCand is an entry whose row is gone: old is its node in the model
// before (nil if unknown).
type evictionCand struct {
	ref registry.Ref
	old *node
}

// guardEvictions decides which of the evictions cands are guarded; the
// guarded ones stay in the model as ghosts (no row: apply leaves them).
// Candidates not in the registries are not evictions and are ignored.
func (r *Reconciler) guardEvictions(ctx context.Context, cands []evictionCand) {
	g := r.guard
	if len(cands) == 0 {
		return
	}
	now := time.Now()
	byKind := map[registry.Kind][]evictionCand{}
	for _, c := range cands {
		if g.holds(c.ref) {
			r.ghost(c)
			continue
		}
		if _, ok := r.regs.Of(c.ref.Kind).Get(c.ref.Key); !ok {
			continue
		}
		byKind[c.ref.Kind] = append(byKind[c.ref.Kind], c)
	}
	if g.opts.Off {
		return
	}
	for _, k := range registry.Kinds {
		cs := byKind[k]
		if len(cs) == 0 {
			continue
		}
		entries := r.regs.Of(k).Len()
		waiting := g.pendingOf(k)
		total := g.windowCount(now, k) + waiting + len(cs)
		if waiting == 0 && total <= g.opts.limit(entries) {
			g.recent = append(g.recent, evicted{at: now, kind: k, n: len(cs)})
			continue
		}
		reason := fmt.Sprintf("eviction guarded: %d of %d %s entries would go in one pass (%d within guard.window %s; guard.max_evictions %s allows %d)%s",
			len(cs), entries, k, total, g.opts.Window, g.opts.limitString(), g.opts.limit(entries), g.why)
		g.reason = reason
		for _, c := range cs {
			r.ghost(c)
			delete(r.retries, c.ref) // nothing to retry while it waits
			gd := &guarded{ref: c.ref, since: now, reason: reason, after: math.MaxInt64, live: true}
			r.regs.Of(k).Update(c.ref.Key, func(e *registry.Entry) {
				gd.rev, gd.prevReason = e.ServingRevision, e.Reason
				if gd.rev == 0 {
					gd.rev = e.Revision
				}
				e.Guarded, e.Reason = true, reason
			})
			g.pending[c.ref] = gd
		}
		g.dirty = true
		attrs := []slog.Attr{slog.String("kind", string(k)), slog.Int("guarded", len(cs)), slog.Int("entries", entries),
			slog.Int("within_window", total), slog.String("limit", g.opts.limitString()), slog.String("window", g.opts.Window.String()),
			slog.String("keys", sampleKeys(cs)), slog.String("reason", reason)}
		if waiting == 0 {
			r.log.LogAttrs(ctx, slog.LevelWarn, "eviction guard tripped: entries keep serving until their rows come back or `reconciler guard release`", attrs...)
		} else {
			r.log.LogAttrs(ctx, slog.LevelInfo, "more evictions joined the pending guard", attrs...)
		}
	}
	r.publishGuard()
}

// ghost keeps a guarded entry's node in the model without a row, so that
// apply leaves the entry and its dependents resolve to it as before.
func (r *Reconciler) ghost(c evictionCand) {
	if c.old == nil {
		return
	}
	if cur := r.model.nodes[c.ref]; cur != nil {
		return
	}
	g := *c.old
	g.at = -1
	r.modelMu.Lock() // Explain reads the model on other goroutines
	r.model.put(&g)
	r.modelMu.Unlock()
}

// sampleKeys lists up to 5 keys of cs.
func sampleKeys(cs []evictionCand) string {
	var b strings.Builder
	for i, c := range cs {
		if i == 5 {
			fmt.Fprintf(&b, ", … (%d more)", len(cs)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.ref.Key)
	}
	return b.String()
}

// clearGuard drops the guard of ref, whose row came back: nothing was
// evicted.
func (r *Reconciler) clearGuard(ctx context.Context, ref registry.Ref) {
	gd, ok := r.guard.pending[ref]
	if !ok {
		return
	}
	delete(r.guard.pending, ref)
	r.guard.dirty = true
	r.regs.Of(ref.Kind).Update(ref.Key, func(e *registry.Entry) {
		if e.Guarded {
			e.Guarded, e.Reason = false, gd.prevReason
		}
	})
	r.log.LogAttrs(ctx, slog.LevelInfo, "guard cleared: the row is back", slog.String("kind", string(ref.Kind)), slog.String("key", ref.Key))
}

// releaseGuard applies the guarded evictions covered by a release: all
// of them (local) or those recorded before fleet release upTo. It returns
// the changes made (the evictions and their dependents' rebuilds).
func (r *Reconciler) releaseGuard(ctx context.Context, all bool, upTo int64) []Change {
	g := r.guard
	var refs []registry.Ref
	for ref, gd := range g.pending {
		if all || gd.after < upTo {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	slices.SortFunc(refs, func(a, b registry.Ref) int { return -applyOrder(a, b) }) // dependents first
	var changes []Change
	syms := map[string]bool{}
	for _, ref := range refs {
		gd := g.pending[ref]
		delete(g.pending, ref)
		if n := r.model.nodes[ref]; n != nil {
			if n.at >= 0 {
				continue // a row claims it again: not an eviction
			}
			syms[n.sym] = true
			r.modelMu.Lock()
			r.model.remove(ref)
			r.modelMu.Unlock()
		}
		if _, ok := r.regs.Of(ref.Kind).Get(ref.Key); ok {
			changes = append(changes, r.evict(ctx, ref))
			continue
		}
		// Known from the store only (this process restarted): the replica
		// still serves it; tell it.
		changes = append(changes, Change{Kind: ref.Kind, Key: ref.Key, Action: ActionEvict, Revision: gd.rev})
	}
	g.dirty = true
	r.log.LogAttrs(ctx, slog.LevelWarn, "guarded evictions released", slog.Int("evicted", len(changes)), slog.Bool("local", all),
		slog.Int64("release", upTo))
	if len(syms) > 0 {
		dirty := map[registry.Ref]bool{}
		r.model.markDependents(syms, dirty)
		rows := rowSet{}
		if err := r.readMissing(ctx, dirty, rows); err != nil {
			r.relistCause = CauseRecovered // dependents re-resolve at the relist
		} else if len(dirty) > 0 {
			ts := make([]target, 0, len(dirty))
			for ref := range dirty {
				ts = append(ts, target{ref: ref})
			}
			changes = append(changes, r.apply(ctx, ts, rows.find, nil)...)
		}
	}
	r.publishGuard()
	return changes
}

// guardPass runs the guard's part of a pass: the first relist reads the
// stored guard first; then a local release asked for, a fleet release
// newer than the last one seen, and writing the stored guard when behind.
// It returns the changes releases made.
func (r *Reconciler) guardPass(ctx context.Context) []Change {
	g := r.guard
	var changes []Change
	if r.releaseAsked.Swap(false) {
		changes = append(changes, r.releaseGuard(ctx, true, 0)...)
	}
	st := g.opts.Store
	if st == nil {
		return changes
	}
	if len(g.pending) > 0 {
		rel, err := st.LatestRelease(ctx)
		switch {
		case err != nil:
			r.log.WarnContext(ctx, "guard: reading the fleet's releases failed", slog.String("error", err.Error()))
		case covers(g.pending, rel.ID):
			// Any release newer than what a record came after covers it
			// (not "newer than the last seen": a restored store's release
			// ids start again).
			g.released = rel.ID
			r.log.LogAttrs(ctx, slog.LevelInfo, "guard: fleet release seen", slog.Int64("release", rel.ID), slog.String("by", rel.By), slog.Time("at", rel.At))
			changes = append(changes, r.releaseGuard(ctx, false, rel.ID)...)
		}
	}
	if g.dirty {
		r.saveGuard(ctx)
	}
	return changes
}

// covers reports whether release id covers a pending guarded eviction.
func covers(pending map[registry.Ref]*guarded, id int64) bool {
	for _, gd := range pending {
		if gd.after < id {
			return true
		}
	}
	return false
}

// saveGuard writes the pending guard to the store and learns the release
// each record came after.
func (r *Reconciler) saveGuard(ctx context.Context) {
	g := r.guard
	keep := make([]snapshot.GuardRecord, 0, len(g.pending))
	for _, gd := range g.pending {
		keep = append(keep, snapshot.GuardRecord{Kind: string(gd.ref.Kind), Key: gd.ref.Key, Revision: gd.rev, Reason: gd.reason, GuardedAt: gd.since})
	}
	stored, err := g.opts.Store.SyncGuard(ctx, r.opts.ReplicaID, keep)
	if err != nil {
		r.log.WarnContext(ctx, "guard: writing the pending guard to the store failed (retried next pass)", slog.String("error", err.Error()))
		r.publishGuard()
		return
	}
	for _, rec := range stored {
		if gd := g.pending[registry.Ref{Kind: registry.Kind(rec.Kind), Key: rec.Key}]; gd != nil {
			gd.after = rec.After
		}
	}
	g.dirty = false
	r.publishGuard()
}

// loadGuard reads the stored pending guard (before the first relist): a
// restarted sidecar still holds it.
func (r *Reconciler) loadGuard(ctx context.Context) error {
	g := r.guard
	if g.loaded || g.opts.Store == nil {
		return nil
	}
	recs, err := g.opts.Store.LoadGuard(ctx, r.opts.ReplicaID)
	if err != nil {
		return fmt.Errorf("read the pending eviction guard: %w", err)
	}
	g.loaded = true
	for _, rec := range recs {
		k, err := registry.ParseKind(rec.Kind)
		if err != nil {
			continue
		}
		ref := registry.Ref{Kind: k, Key: rec.Key}
		g.pending[ref] = &guarded{ref: ref, rev: rec.Revision, since: rec.GuardedAt, reason: rec.Reason, after: rec.After}
		g.reason = rec.Reason
	}
	if len(recs) > 0 {
		r.log.LogAttrs(ctx, slog.LevelWarn, "eviction guard pending from before this start: the replica keeps serving those entries until a release",
			slog.Int("guarded", len(recs)))
	}
	r.publishGuard()
	return nil
}

// publishGuard updates the guard's status and gauge.
func (r *Reconciler) publishGuard() {
	g := r.guard
	st := GuardStatus{Held: len(g.pending), Kinds: map[registry.Kind]int{}, Keys: []GuardedKey{},
		Reason: g.reason, Limit: g.opts.limitString(), Window: g.opts.Window.String(), LastRelease: g.released, Unsaved: g.dirty && g.opts.Store != nil}
	for _, k := range registry.Kinds {
		st.Kinds[k] = 0
	}
	for ref, gd := range g.pending {
		st.Kinds[ref.Kind]++
		if st.Since.IsZero() || gd.since.Before(st.Since) {
			st.Since = gd.since
		}
		st.Keys = append(st.Keys, GuardedKey{Kind: ref.Kind, Key: ref.Key, Revision: gd.rev, Since: gd.since})
	}
	slices.SortFunc(st.Keys, func(a, b GuardedKey) int {
		return applyOrder(registry.Ref{Kind: a.Kind, Key: a.Key}, registry.Ref{Kind: b.Kind, Key: b.Key})
	})
	if len(st.Keys) > maxGuardKeys {
		st.Keys, st.Truncated = st.Keys[:maxGuardKeys], true
	}
	if st.Held == 0 {
		st.Reason = ""
	}
	for _, k := range registry.Kinds {
		r.metrics.GuardedEvictions.WithLabelValues(string(k)).Set(float64(st.Kinds[k]))
	}
	r.mu.Lock()
	r.status.Guard = st
	r.mu.Unlock()
}

// Guard returns the eviction guard's status.
func (r *Reconciler) Guard() GuardStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Guard
}

// ReleaseGuard asks the loop to apply every eviction this sidecar guards
// (POST /v1/guard/release), at its next pass, which it asks for now.
// Never blocks.
func (r *Reconciler) ReleaseGuard() {
	r.releaseAsked.Store(true)
	r.Reconcile()
}

// noteStore records the store id of a relist's cursor, qualifying the
// relist's guard reasons when the store went backwards or changed
// identity.
func (g *guardState) noteStore(cause Cause, cur snapshot.Cursor) {
	switch {
	case g.storeID != "" && cur.StoreID != g.storeID:
		g.why = fmt.Sprintf("; the store changed identity (store id %s, was %s)", cur.StoreID, g.storeID)
	case cause == CauseRegressed:
		g.why = "; the store went backwards (a restore?)"
	default:
		g.why = ""
	}
	if cur.StoreID != "" {
		g.storeID = cur.StoreID
	}
}
