package reconcile

import (
	"context"
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
)

// One tenant cannot delay another. Connectors and datasources talk to
// upstreams a row chooses; one that hangs costs its entry up to
// apply.timeout, but the pass waits for a kind's batch only as long as
// the pass budget (passBudget: a poll interval, at least a second). What
// is still running then goes on in the background: its result lands at
// the loop's next wake-up (recorded as if the pass had waited), while the
// later kinds and the next polls apply everyone else's changes. An entry
// in flight is not planned again until it lands; a change to it meanwhile
// is applied once it has (level-triggered: the signature decides).

// minPassBudget is the least a pass waits for a kind's materializations.
const minPassBudget = time.Second

// passBudget is how long a pass waits for a connector or datasource batch.
func (r *Reconciler) passBudget() time.Duration {
	if r.opts.PassBudget > 0 {
		return r.opts.PassBudget
	}
	return max(r.opts.PollInterval, minPassBudget)
}

// landed is one materialization's outcome: steps[i] of its flight.
type landed struct {
	i int
	o outcome
}

// flight is a kind's batch whose calls outlasted the pass budget.
type flight struct {
	steps   []step
	results chan landed   // one per call, buffered: the workers never block
	done    chan struct{} // closed when every call has returned or been abandoned
	left    int           // results not landed yet
}

// backgrounded reports whether a kind's batch may outlast its pass.
func backgrounded(k registry.Kind) bool {
	return k == registry.KindConnector || k == registry.KindDatasource
}

// applyBudgeted runs the calls of steps (prepared: m, d; call false: out
// holds the outcome already) and records what returns within the pass
// budget; the rest becomes a flight.
func (r *Reconciler) applyBudgeted(ctx context.Context, steps []step, out []outcome, prep []prepared, changes []Change) []Change {
	var idx []int // the steps that make a call
	now := time.Now()
	var t tally
	for i := range steps {
		if prep[i].call {
			idx = append(idx, i)
		} else {
			changes = append(changes, r.record(ctx, steps[i], out[i], now, &t))
		}
	}
	r.flush(&t)
	if len(idx) == 0 {
		return changes
	}
	f := &flight{steps: steps, results: make(chan landed, len(idx)), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		r.guarded(ctx, len(idx), r.opts.ApplyConcurrency,
			func(j int) (Materializer, Desired, bool) { p := prep[idx[j]]; return p.m, p.d, true },
			func(j int, inst registry.Instance, err error) {
				f.results <- landed{i: idx[j], o: materialized(inst, err)}
				r.signal(flagLate)
			})
	}()
	timer := time.NewTimer(r.passBudget())
	defer timer.Stop()
	got := make(map[int]bool, len(idx))
	for len(got) < len(idx) {
		select {
		case l := <-f.results:
			got[l.i] = true
			var t tally
			changes = append(changes, r.record(ctx, steps[l.i], l.o, time.Now(), &t))
			r.flush(&t)
		case <-timer.C:
			f.left = len(idx) - len(got)
			for _, i := range idx {
				if !got[i] {
					r.inflight[steps[i].ref] = true
				}
			}
			r.flights = append(r.flights, f)
			r.log.DebugContext(ctx, "materializations outlast the pass budget; they finish in the background",
				"kind", string(steps[0].ref.Kind), "running", f.left, "budget", r.passBudget().String())
			return changes
		}
	}
	return changes
}

// prepared is a step's call, made ready on the loop's goroutine (it reads
// the model): call false when the step needs none.
type prepared struct {
	m    Materializer
	d    Desired
	call bool
}

// land records the results of flights that came in since the last look,
// and tells the notifier. An entry no longer desired has its late
// instance closed; one changed meanwhile is applied again at the next
// poll.
func (r *Reconciler) land(ctx context.Context) {
	if len(r.flights) == 0 {
		return
	}
	var changes []Change
	var t tally
	kept := r.flights[:0]
	for _, f := range r.flights {
	drain:
		for f.left > 0 {
			select {
			case l := <-f.results:
				f.left--
				st := f.steps[l.i]
				delete(r.inflight, st.ref)
				if r.model.nodes[st.ref] == nil {
					if l.o.inst != nil {
						r.closeInstance(ctx, st.ref.Kind, st.ref.Key, l.o.inst)
					}
					delete(r.redo, st.ref)
					continue
				}
				changes = append(changes, r.record(ctx, st, l.o, time.Now(), &t))
				if r.redo[st.ref] {
					delete(r.redo, st.ref)
					r.waits[st.ref] = closedChan // retried at the next poll
				}
			default:
				break drain
			}
		}
		if f.left > 0 {
			kept = append(kept, f)
		}
	}
	clear(r.flights[len(kept):])
	r.flights = kept
	r.flush(&t)
	if len(changes) > 0 && r.opts.Notifier != nil {
		r.opts.Notifier.Notify(ChangeSet{ReplicaID: r.opts.ReplicaID, Cursor: r.cursor.String(), Changes: changes})
	}
}

// closedChan is a wait that is over at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// dropFlights waits (until ctx ends) for the flights' calls, which stop
// with the pass context, and closes what they built: nothing records
// them once the loop stops.
func (r *Reconciler) dropFlights(ctx context.Context) {
	for _, f := range r.flights {
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		for f.left > 0 {
			select {
			case l := <-f.results:
				f.left--
				if l.o.inst != nil {
					r.closeInstance(ctx, f.steps[l.i].ref.Kind, f.steps[l.i].ref.Key, l.o.inst)
				}
			default:
				f.left = 0
			}
		}
	}
	r.flights = nil
}
