package reconcile

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

// step is one planned action on one entry.
type step struct {
	ref    registry.Ref
	action Action
	node   *node
	row    sourceRow
	sig    string
	// rev is the revision of the row being built: usually the node's, but a
	// dependent re-read during the pass may be newer. The entry says what
	// was built; the node keeps its revision until its own journal entry
	// comes, so that its dependents are still told.
	rev int64
	at  time.Time // rev's watermark time
}

// prior is what the registry held for an entry being planned.
type prior struct {
	had bool // in the registry, with sig and rev
	sig string
	rev int64
}

// outcome is what applying a step produced.
type outcome struct {
	state  registry.State
	reason string
	inst   registry.Instance
	result string // metric label: ready|degraded|held|panic|timeout
	// dropInstance: a dependency hold closes the live instance too (a
	// cleared credential must stop being used).
	dropInstance bool
	// until: a held entry is retried once this is closed (HeldUntil).
	until <-chan struct{}
}

// target is an entry to apply: its ref and, if the caller has it at hand,
// its node in the model (nil: apply looks it up).
type target struct {
	ref  registry.Ref
	node *node
}

// apply plans and applies the dirty entries refs (each once; apply sorts
// the slice) in dependency order, returning the changes made. rows finds
// a node's current row (false, or a zero row: gone). forced entries are
// retried even if unchanged.
func (r *Reconciler) apply(ctx context.Context, refs []target, rows func(*node) (sourceRow, bool), forced map[registry.Ref]bool) []Change {
	var evictions []registry.Ref
	var deferred []step
	sortTargets(refs) // steps come out in the order they are applied
	// Look everything up and compute the signatures on every core (each
	// body's digest is already on its node). Each entry is planned as a
	// step, kept (in place) if there is something to do.
	steps := make([]step, len(refs))
	priors := make([]prior, len(refs))
	parallel(len(refs), func(i int) {
		st, p := &steps[i], &priors[i]
		st.ref, st.node = refs[i].ref, refs[i].node
		if prev, ok := r.regs.Of(st.ref.Kind).Get(st.ref.Key); ok {
			p.had, p.sig, p.rev = true, prev.Signature, prev.Revision
		}
		if st.node == nil {
			st.node = r.model.nodes[st.ref]
		}
		if st.node != nil {
			if row, ok := rows(st.node); ok && row != (sourceRow{}) {
				st.row, st.sig, st.rev, st.at = row, signature(st.node, row, r.model), row.revision(), row.revisionAt()
			}
		}
	})
	kept := steps[:0]
	guardCleared := false
	for i := range steps {
		st, p := steps[i], &priors[i]
		if st.node != nil && r.inflight[st.ref] {
			r.redo[st.ref] = true // planned again once its call lands (late.go)
			continue
		}
		if st.node == nil {
			if p.had && !r.guard.holds(st.ref) {
				evictions = append(evictions, st.ref)
			}
			continue
		}
		if st.sig == "" {
			continue // row vanished between reads (or a guarded entry's ghost): the next poll sees its delete
		}
		if st.node.deferred || st.row.meta != nil && st.row.meta.Withheld < 0 {
			deferred = append(deferred, st)
			continue // its body comes with a later read (memory.go)
		}
		if r.guard.holds(st.ref) {
			r.clearGuard(ctx, st.ref) // its row is back: nothing was evicted
			guardCleared = true
		}
		switch {
		case !p.had:
			st.action = ActionCreate
		case p.sig != st.sig:
			st.action = ActionRebuild
		case forced[st.ref]:
			st.action = ActionRetry
		default:
			if p.rev != st.rev {
				r.touch(st.ref, st.rev, st.sig) // same body rewritten: nothing to rebuild
			}
			continue
		}
		kept = append(kept, st)
	}
	if guardCleared {
		r.publishGuard()
	}
	clear(steps[len(kept):]) // let go of the nodes and rows left out
	steps = kept
	r.deferBodies(deferred)
	// New entries are visible as pending while their kind waits its turn.
	creates := make(map[registry.Kind]int, len(registry.Kinds))
	for _, st := range steps {
		if st.action == ActionCreate {
			creates[st.ref.Kind]++
		}
	}
	for k, n := range creates {
		r.regs.Of(k).Reserve(n)
	}
	now := time.Now()
	var t tally
	for _, st := range steps {
		if st.action == ActionCreate {
			e := registry.Entry{Key: st.ref.Key, Revision: st.rev,
				State: registry.StatePending, Reason: reasonNotTried, Since: now}
			e.History.Add(now, e.State, e.Reason, e.Revision) // history starts at creation
			r.regs.Of(st.ref.Kind).Put(e)
			t.move(st.ref.Kind, "", registry.StatePending)
		}
	}
	r.flush(&t)
	var changes []Change
	if n := len(evictions) + len(steps); n > 0 {
		changes = make([]Change, 0, n)
	}
	// A large apply (a cold start, a relist after an outage) logs each
	// entry that did not end ready at info and one summary line; entries
	// that did are at debug (100k lines at info cost a cold start more than
	// its materializers).
	r.bulk = len(evictions)+len(steps) > bulkLogThreshold
	defer func() {
		if r.bulk {
			r.logSummary(ctx, changes)
			r.bulk = false
		}
	}()
	// Evict dependents before what they depend on.
	slices.SortStableFunc(evictions, func(a, b registry.Ref) int { return cmp.Compare(kindOrder(b.Kind), kindOrder(a.Kind)) })
	for _, ref := range evictions {
		changes = append(changes, r.evict(ctx, ref))
	}
	for len(steps) > 0 { // one kind at a time
		n := 1
		for n < len(steps) && steps[n].ref.Kind == steps[0].ref.Kind {
			n++
		}
		changes = r.applyKind(ctx, steps[:n], changes)
		steps = steps[n:]
	}
	return changes
}

// parallel calls fn(0..n-1) spread over GOMAXPROCS goroutines (inline
// for small n) and returns when every call has.
func parallel(n int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 512 || workers < 2 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// applyOrder orders refs kind by kind in dependency order, each by key.
func applyOrder(a, b registry.Ref) int {
	if a.Kind != b.Kind {
		return cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind))
	}
	return strings.Compare(a.Key, b.Key)
}

// sortTargets sorts ts (each ref once) in apply order.
func sortTargets(ts []target) {
	slices.SortFunc(ts, func(a, b target) int { return applyOrder(a.ref, b.ref) })
}

func kindOrder(k registry.Kind) int {
	for i, kk := range registry.Kinds {
		if kk == k {
			return i
		}
	}
	return len(registry.Kinds)
}

// applyKind applies the steps of one kind with bounded concurrency,
// appending their changes to changes.
func (r *Reconciler) applyKind(ctx context.Context, steps []step, changes []Change) []Change {
	if len(steps) == 0 {
		return changes
	}
	out := make([]outcome, len(steps))
	if steps[0].ref.Kind == registry.KindCredential {
		for i := range steps {
			out[i] = r.materializeCredential(steps[i])
		}
	} else if backgrounded(steps[0].ref.Kind) {
		// Prepared here: the calls may outlast the pass (late.go), and
		// preparing reads the model.
		prep := make([]prepared, len(steps))
		for i := range steps {
			m, d, o, ok := r.prepareStep(ctx, steps[i])
			prep[i] = prepared{m: m, d: d, call: ok}
			if !ok {
				out[i] = o
			}
		}
		return r.applyBudgeted(ctx, steps, out, prep, changes)
	} else {
		r.guarded(ctx, len(steps), r.opts.ApplyConcurrency,
			func(i int) (Materializer, Desired, bool) {
				m, d, o, ok := r.prepareStep(ctx, steps[i])
				if !ok {
					out[i] = o
				}
				return m, d, ok
			},
			func(i int, inst registry.Instance, err error) { out[i] = materialized(inst, err) })
	}
	var t tally
	now := time.Now() // one clock read for the batch: they are recorded together
	for i := range steps {
		changes = append(changes, r.record(ctx, steps[i], out[i], now, &t))
	}
	r.flush(&t)
	return changes
}

// prepareStep resolves a step: the call to make, or (ok false) its
// outcome when there is none to make.
func (r *Reconciler) prepareStep(ctx context.Context, st step) (Materializer, Desired, outcome, bool) {
	d, hold := r.desired(st)
	if hold != "" {
		return nil, d, outcome{state: registry.StateHeld, reason: hold, result: "held", dropInstance: true}, false
	}
	m := r.opts.Materializers[st.ref.Kind]
	switch {
	case m == nil:
		return nil, d, outcome{state: registry.StateReady, inst: NopInstance{}, result: "ready"}, false
	case ctx.Err() != nil: // stopping: start nothing new
		return nil, d, materialized(nil, Transient(nil, "not tried: the reconciler is stopping")), false
	case r.abandoned.running(st.ref):
		return nil, d, materialized(nil, r.errAttemptRunning()), false
	}
	return m, d, outcome{}, true
}

// materialized is the outcome of a materialization that returned inst, err.
func materialized(inst registry.Instance, err error) outcome {
	if err == nil {
		return outcome{state: registry.StateReady, inst: inst, result: "ready"}
	}
	class, reason := Classify(err)
	o := outcome{state: registry.StateDegraded, reason: reason}
	var ae *abortError
	if errors.As(err, &ae) {
		o.result = ae.label
	}
	if class != ClassTransient {
		o.state = registry.StateHeld
		var f *Failure
		if errors.As(err, &f) {
			o.until = f.Until
		}
	}
	if o.result == "" {
		o.result = string(o.state)
	}
	return o
}

// record stores the outcome in the registry (build, validate, swap) as of
// now, logs one line, counts it in t and returns the change.
func (r *Reconciler) record(ctx context.Context, st step, o outcome, now time.Time, t *tally) Change {
	var (
		e         registry.Entry
		prevState registry.State
		toClose   registry.Instance
	)
	r.regs.Of(st.ref.Kind).Upsert(st.ref.Key, func(cur *registry.Entry, existed bool) {
		e = registry.Entry{Kind: st.ref.Kind, Key: st.ref.Key, KeyParts: cur.KeyParts, Revision: st.rev, Signature: st.sig,
			State: o.state, Reason: o.reason, Since: now}
		if existed {
			e.History = cur.History
			prevState = cur.State
			if cur.State == o.state {
				e.Since = cur.Since
			}
			e.Instance, e.ServingRevision, e.ServingSignature = cur.Instance, cur.ServingRevision, cur.ServingSignature
			if o.state == registry.StateDegraded && cur.State == registry.StateDegraded && cur.Signature == st.sig {
				e.Attempts = cur.Attempts
			}
		}
		switch {
		case o.state == registry.StateReady:
			toClose = e.Instance // swap: the new one is ready, close the old
			e.Instance, e.ServingRevision, e.ServingSignature = o.inst, st.rev, st.sig
		case o.dropInstance:
			toClose = e.Instance
			e.Instance, e.ServingRevision, e.ServingSignature = nil, 0, ""
		}
		if o.state == registry.StateDegraded {
			e.Attempts++
			e.RetryAt = now.Add(r.retryBackoff(e.Attempts))
		}
		e.History.Add(now, e.State, e.Reason, e.Revision)
		*cur = e
	})
	if o.state == registry.StateDegraded {
		r.retries[st.ref] = e.RetryAt
	} else if len(r.retries) > 0 {
		delete(r.retries, st.ref)
	}
	if o.until != nil {
		r.waits[st.ref] = o.until
	} else if len(r.waits) > 0 {
		delete(r.waits, st.ref)
	}
	t.move(st.ref.Kind, prevState, e.State)
	if toClose != nil {
		r.closeInstance(ctx, st.ref.Kind, st.ref.Key, toClose)
	}
	t.result(st.ref.Kind, o.result)
	change := Change{Kind: st.ref.Kind, Key: st.ref.Key, Action: st.action, Revision: st.rev, State: e.State, At: st.at}
	level := r.entryLevel(e.State)
	if !r.log.Enabled(ctx, level) {
		return change
	}
	attrs := []slog.Attr{
		slog.String("kind", string(st.ref.Kind)), slog.String("key", st.ref.Key),
		slog.Int64("revision", st.rev), slog.String("action", string(st.action)),
		slog.String("state", string(e.State)),
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	r.log.LogAttrs(ctx, level, "applied", attrs...)
	return change
}

// touch records a new revision whose signature is unchanged: the live
// instance already serves it.
func (r *Reconciler) touch(ref registry.Ref, rev int64, sig string) {
	r.regs.Of(ref.Kind).Update(ref.Key, func(e *registry.Entry) {
		e.Revision = rev
		if e.ServingSignature == sig {
			e.ServingRevision = rev
		}
	})
}

// evict closes and removes an entry that is no longer desired.
func (r *Reconciler) evict(ctx context.Context, ref registry.Ref) Change {
	e, _ := r.regs.Of(ref.Kind).Delete(ref.Key)
	delete(r.retries, ref)
	delete(r.waits, ref)
	r.count(ref.Kind, e.State, "")
	r.closeInstance(ctx, ref.Kind, ref.Key, e.Instance)
	r.metrics.Evictions.WithLabelValues(string(ref.Kind)).Inc()
	r.log.LogAttrs(ctx, r.entryLevel(registry.StateReady), "applied", slog.String("kind", string(ref.Kind)), slog.String("key", ref.Key),
		slog.Int64("revision", e.Revision), slog.String("action", string(ActionEvict)))
	return Change{Kind: ref.Kind, Key: ref.Key, Action: ActionEvict, Revision: e.Revision}
}

// count moves one entry of kind k from state from to state to ("" = none).
func (r *Reconciler) count(k registry.Kind, from, to registry.State) {
	var t tally
	t.move(k, from, to)
	r.flush(&t)
}

// tally collects the state counts and materialization results of many
// entries, applied at once by flush (an apply records up to every entry:
// one lock and one metric update per entry cost a cold start more than
// its no-op materializers). An apply sees a handful of distinct moves and
// results: they are counted in short lists, not maps (no hashing per
// entry).
type tally struct {
	moves   []counted[move]
	results []counted[result]
}

type counted[T comparable] struct {
	key T
	n   int
}

// count adds one to key's count in list.
func count[T comparable](list []counted[T], key T) []counted[T] {
	for i := range list {
		if list[i].key == key {
			list[i].n++
			return list
		}
	}
	return append(list, counted[T]{key, 1})
}

type move struct {
	kind     registry.Kind
	from, to registry.State
}

type result struct {
	kind  registry.Kind
	label string
}

// move counts one entry of kind k moving from state from to state to
// ("" = none).
func (t *tally) move(k registry.Kind, from, to registry.State) {
	if from != to {
		t.moves = count(t.moves, move{k, from, to})
	}
}

// result counts one materialization of kind k with result label.
func (t *tally) result(k registry.Kind, label string) {
	t.results = count(t.results, result{k, label})
}

// flush applies t to the status counts and metrics.
func (r *Reconciler) flush(t *tally) {
	for _, c := range t.results {
		r.metrics.Materializations.WithLabelValues(string(c.key.kind), c.key.label).Add(float64(c.n))
	}
	if len(t.moves) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	touched := make(map[move]bool, 2*len(t.moves))
	for _, mc := range t.moves {
		mv, n := mc.key, mc.n
		c := r.status.Counts[mv.kind]
		if mv.from != "" {
			c[mv.from] -= n
			touched[move{kind: mv.kind, to: mv.from}] = true
		}
		if mv.to != "" {
			c[mv.to] += n
			touched[move{kind: mv.kind, to: mv.to}] = true
		}
	}
	for mv := range touched {
		r.metrics.Items.WithLabelValues(string(mv.kind), string(mv.to)).Set(float64(r.status.Counts[mv.kind][mv.to]))
	}
}

// reasonNotTried is the reason of a pending entry.
const reasonNotTried = "not tried yet"

// bulkLogThreshold is the number of changes above which an apply logs a
// summary instead of a line per routine change.
const bulkLogThreshold = 100

// entryLevel is the level of an entry's "applied" line: info, or debug for
// a routine outcome (ready, evicted) inside a large apply.
func (r *Reconciler) entryLevel(s registry.State) slog.Level {
	if r.bulk && s == registry.StateReady {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// logSummary logs one line for a large apply: how many changes, by action
// and by resulting state.
func (r *Reconciler) logSummary(ctx context.Context, changes []Change) {
	actions := map[Action]int{}
	states := map[registry.State]int{}
	for _, c := range changes {
		actions[c.Action]++
		if c.State != "" {
			states[c.State]++
		}
	}
	attrs := []slog.Attr{slog.Int("changes", len(changes))}
	for _, a := range []Action{ActionCreate, ActionRebuild, ActionRetry, ActionEvict} {
		if n := actions[a]; n > 0 {
			attrs = append(attrs, slog.Int(string(a), n))
		}
	}
	for _, s := range []registry.State{registry.StateReady, registry.StateDegraded, registry.StateHeld, registry.StatePending} {
		if n := states[s]; n > 0 {
			attrs = append(attrs, slog.Int(string(s), n))
		}
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "applied in bulk (entries that ended ready or evicted are logged at debug)", attrs...)
}
