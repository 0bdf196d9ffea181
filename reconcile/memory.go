package reconcile

import (
	"time"

	"github.com/objectstack-fleet/reconciler/registry"
	"github.com/objectstack-fleet/reconciler/snapshot"
)

// Memory is bounded as a whole, not only per row: the store sends the
// bodies of one read (a relist, the changed rows of a poll, their
// dependents) only while their sum stays within engine.max_total_bytes
// (snapshot.OpenOptions.MaxTotalBytes) and withholds the rest. An entry
// whose body was withheld is left as it is (a new one shows pending,
// naming the key) and its row is read again at the next poll, with the
// changed rows of that poll, until every body has come: 200 rows of 1 MB
// apply over a few polls instead of 200 MB at once. Bodies are not kept
// once digested (a node keeps its digest, an engine item its length).

// MaxTotalBytesKey is the config key of the bound.
const MaxTotalBytesKey = "engine.max_total_bytes"

// deferredReason is a new entry's reason while its body waits.
const deferredReason = "not read yet: the bodies of one read are capped (" + MaxTotalBytesKey + "); read at the next poll"

// deferBodies notes the rows of steps whose body was withheld, to read
// them again, and shows new entries among them as pending.
func (r *Reconciler) deferBodies(steps []step) {
	if len(steps) == 0 {
		return
	}
	now := time.Now()
	var t tally
	for _, st := range steps {
		r.rereads[st.node.addr] = true
		reg := r.regs.Of(st.ref.Kind)
		if _, ok := reg.Get(st.ref.Key); !ok {
			reg.Put(registry.Entry{Key: st.ref.Key, Revision: st.rev, State: registry.StatePending, Reason: deferredReason, Since: now})
			t.move(st.ref.Kind, "", registry.StatePending)
		}
	}
	r.flush(&t)
}

// takeRereads adds the rows withheld by earlier reads to a poll's changed
// addresses (the store withholds again what does not fit).
func (r *Reconciler) takeRereads(addrs []snapshot.Address) []snapshot.Address {
	for a := range r.rereads {
		addrs = append(addrs, a)
	}
	clear(r.rereads)
	return addrs
}
